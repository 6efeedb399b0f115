//! Whose memories a hook reads and writes: the project (the git checkout
//! the agent works in) and the person (the OS user), each made into a valid
//! Engram id. Found from the file system and the environment alone, with no
//! process started, so a hook stays fast.

use std::fs;
use std::path::{Path, PathBuf};

/// The longest id Engram accepts.
const MAX_ID_LEN: usize = 128;

/// The top of the git checkout holding `dir` (the nearest ancestor with a
/// `.git` directory or file), if there is one.
pub fn checkout_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|ancestor| ancestor.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The project name for `dir`: the name of its checkout's top directory,
/// the main checkout's for a linked worktree (whose `.git` file points
/// into `<main>/.git/worktrees/`), else `dir`'s own name; made valid by
/// [`to_id`].
pub fn repo_name(dir: &Path) -> Option<String> {
    let root = checkout_root(dir).unwrap_or_else(|| dir.to_path_buf());
    let project = main_checkout(&root).unwrap_or(root);
    to_id(&project.file_name()?.to_string_lossy())
}

/// The main checkout of a linked worktree at `root`, read from its `.git`
/// file (`gitdir: <main>/.git/worktrees/<name>`).
fn main_checkout(root: &Path) -> Option<PathBuf> {
    let pointer = fs::read_to_string(root.join(".git")).ok()?;
    let gitdir = Path::new(pointer.strip_prefix("gitdir:")?.trim());
    let gitdir = if gitdir.is_absolute() {
        gitdir.to_path_buf()
    } else {
        root.join(gitdir)
    };
    let worktrees = gitdir.parent()?;
    let dot_git = worktrees.parent()?;
    (worktrees.file_name()? == "worktrees" && dot_git.file_name()? == ".git")
        .then(|| dot_git.parent().map(Path::to_path_buf))
        .flatten()
}

/// The OS user's login name from the environment, made valid by [`to_id`].
pub fn os_user(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .find_map(|var| env(var).filter(|name| !name.trim().is_empty()))
        .and_then(|name| to_id(&name))
}

/// `name` as an Engram id (`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`): other
/// characters become `-`, leading ones that cannot start an id are dropped,
/// and it is cut to 128 characters. `None` when nothing usable is left.
pub fn to_id(name: &str) -> Option<String> {
    let id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(MAX_ID_LEN)
        .collect();
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_become_valid_ids() {
        assert_eq!(to_id("forge").as_deref(), Some("forge"));
        assert_eq!(
            to_id("my project (old)").as_deref(),
            Some("my-project--old-")
        );
        assert_eq!(to_id(".dotfiles").as_deref(), Some("dotfiles"));
        assert_eq!(to_id("Ærø").as_deref(), Some("r-"));
        assert_eq!(to_id("---"), None);
        assert_eq!(to_id(&"x".repeat(300)).map(|id| id.len()), Some(128));
    }

    #[test]
    fn the_repo_is_the_checkouts_top_directory_even_from_a_subdirectory() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("forge");
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        assert_eq!(repo_name(&root.join("src/deep")).as_deref(), Some("forge"));
        assert_eq!(checkout_root(&root.join("src")), Some(root.clone()));

        let elsewhere = temp.path().join("scratch space");
        fs::create_dir_all(&elsewhere).unwrap();
        assert_eq!(repo_name(&elsewhere).as_deref(), Some("scratch-space"));
    }

    #[test]
    fn a_linked_worktree_belongs_to_its_main_checkout() {
        let temp = tempfile::tempdir().unwrap();
        let main = temp.path().join("forge");
        fs::create_dir_all(main.join(".git/worktrees/feature")).unwrap();
        let linked = temp.path().join("forge-feature");
        fs::create_dir_all(&linked).unwrap();
        fs::write(
            linked.join(".git"),
            format!(
                "gitdir: {}\n",
                main.join(".git/worktrees/feature").display()
            ),
        )
        .unwrap();
        assert_eq!(repo_name(&linked).as_deref(), Some("forge"));
    }

    #[test]
    fn the_user_comes_from_the_login_environment() {
        let env = |var: &str| (var == "LOGNAME").then(|| "ana maria".to_owned());
        assert_eq!(os_user(env).as_deref(), Some("ana-maria"));
        assert_eq!(os_user(|_| None), None);
    }

    proptest! {
        #[test]
        fn every_id_matches_the_pattern(name in ".*") {
            if let Some(id) = to_id(&name) {
                prop_assert!(engram_id_pattern().is_match(&id), "{id:?}");
            }
        }
    }

    fn engram_id_pattern() -> regex::Regex {
        regex::Regex::new(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$").unwrap()
    }
}
