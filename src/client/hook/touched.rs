//! What a turn touched in its git working tree, as capture anchors the
//! turn's memories to it: the tree's `HEAD` and the files the turn's tool
//! calls read or edited ([`transcript::tools`](super::transcript::tools)),
//! each repo-relative and hashed as an anchor is.
//!
//! Only a regular file inside the tree is named: a name is resolved from
//! the agent's working directory, links followed, and dropped when it
//! lands outside the tree, in `.git`, on something that is not a file, or
//! on nothing (a file the turn deleted). A path that looks like a secret
//! is dropped too (Engram refuses it). The files named last come first,
//! each once, at most [`MAX_TOUCHED_FILES`]; a file larger than
//! [`MAX_HASHED_BYTES`] is named without its hash.

use std::path::{Component, Path};

use super::bounded;
use crate::capture::queue::{MAX_TOUCHED_FILES, TouchedFile};
use crate::client::check::git::WorkingTree;
use crate::memory::{AnchorPath, CommitId, ContentHash};
use crate::secrets;

/// The most of a file read to hash it.
const MAX_HASHED_BYTES: u64 = 8 * 1024 * 1024;

/// The working tree's `HEAD` and the files a turn touched in it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub commit: Option<CommitId>,
    pub files: Vec<TouchedFile>,
}

/// What the turn whose tool calls `named` files (in order) touched in the
/// git working tree holding `dir`; `None` outside one (or without git).
pub fn in_tree(dir: &Path, named: &[String]) -> Option<Touched> {
    let tree = WorkingTree::holding(dir).ok()?;
    let root = tree.root.canonicalize().ok()?;
    let mut touched = Touched {
        commit: tree.head().ok().flatten(),
        files: Vec::new(),
    };
    for name in named.iter().rev() {
        if touched.files.len() == MAX_TOUCHED_FILES {
            break;
        }
        let Some((path, real)) = repo_path(&root, &dir.join(name)) else {
            continue;
        };
        if touched.files.iter().any(|file| file.path == path) {
            continue;
        }
        let hash = match bounded::read_head(&real, MAX_HASHED_BYTES + 1) {
            Ok(bytes) if bytes.len() as u64 <= MAX_HASHED_BYTES => Some(ContentHash::of(&bytes)),
            Ok(_) => None,
            // Gone, or not a regular file.
            Err(_) => continue,
        };
        touched.files.push(TouchedFile { path, hash });
    }
    Some(touched)
}

/// `path` as the tree at `root` (canonical) names it, with where it
/// really is; `None` outside the tree or in its `.git`.
fn repo_path(root: &Path, path: &Path) -> Option<(AnchorPath, std::path::PathBuf)> {
    let real = path.canonicalize().ok()?;
    let parts: Vec<&str> = real
        .strip_prefix(root)
        .ok()?
        .components()
        .map(|part| match part {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if parts.first() == Some(&".git") {
        return None;
    }
    let path: AnchorPath = parts.join("/").parse().ok()?;
    secrets::find_secret(path.as_str())
        .is_none()
        .then_some((path, real))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn only_regular_files_inside_the_tree_are_named_the_last_first_each_once() {
        let temp = tempfile::tempdir().unwrap();
        let tree = temp.path().join("forge");
        fs::create_dir_all(tree.join("src")).unwrap();
        git(&tree, &["init", "--quiet"]);
        fs::write(tree.join("src/pool.rs"), "fn pool() {}\n").unwrap();
        fs::write(tree.join("README.md"), "# forge\n").unwrap();
        fs::write(temp.path().join("outside.rs"), "x").unwrap();
        std::os::unix::fs::symlink(temp.path().join("outside.rs"), tree.join("link.rs")).unwrap();
        let named: Vec<String> = [
            tree.join("README.md").display().to_string(),
            "src/pool.rs".to_owned(),
            temp.path().join("outside.rs").display().to_string(),
            "link.rs".to_owned(),
            "../forge/src/../README.md".to_owned(),
            ".git/config".to_owned(),
            "src".to_owned(),
            "src/deleted.rs".to_owned(),
            tree.join("src/pool.rs").display().to_string(),
        ]
        .into();
        let touched = in_tree(&tree, &named).unwrap();
        assert_eq!(touched.commit, None, "no commit yet");
        let files: Vec<(&str, Option<&ContentHash>)> = touched
            .files
            .iter()
            .map(|file| (file.path.as_str(), file.hash.as_ref()))
            .collect();
        assert_eq!(
            files,
            [
                ("src/pool.rs", Some(&ContentHash::of(b"fn pool() {}\n"))),
                ("README.md", Some(&ContentHash::of(b"# forge\n"))),
            ]
        );
        assert_eq!(in_tree(temp.path(), &named), None, "not a working tree");
    }
}
