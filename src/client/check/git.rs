//! What `engram check` asks git, each a process run in the working tree:
//! its top directory and `HEAD`, which of the memories' commits it knows,
//! and the renames between one of them and the working tree. A handful
//! of calls per check, never one per memory.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::memory::CommitId;

/// Why git gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("running `git {args}` (is git installed?)")]
    Spawn {
        args: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {args}` failed: {detail}")]
    Failed { args: String, detail: String },
}

/// A git working tree, by its top directory.
pub struct WorkingTree {
    pub root: PathBuf,
}

impl WorkingTree {
    /// The working tree holding `dir`.
    pub fn holding(dir: &Path) -> Result<Self, Error> {
        let top = git(dir, &["rev-parse", "--show-toplevel"], None)?;
        Ok(Self {
            root: PathBuf::from(String::from_utf8_lossy(&top).trim_end_matches('\n')),
        })
    }

    /// The commit checked out, if there is one yet.
    pub fn head(&self) -> Result<Option<CommitId>, Error> {
        let output = run(
            &self.root,
            &["rev-parse", "--verify", "--quiet", "HEAD"],
            None,
        )?;
        // `--quiet` exits 1 without a word when there is no commit yet.
        if !output.status.success() && output.stderr.is_empty() {
            return Ok(None);
        }
        let head = succeeded(&["rev-parse", "--verify", "--quiet", "HEAD"], output)?;
        Ok(String::from_utf8_lossy(&head).trim().parse().ok())
    }

    /// Which of `commits` this repository holds (one written in another
    /// clone, or cut off by a shallow one, is not).
    pub fn known(&self, commits: &[&CommitId]) -> Result<Vec<bool>, Error> {
        let mut names = String::new();
        for commit in commits {
            names.push_str(commit.as_str());
            names.push('\n');
        }
        let args = ["cat-file", "--batch-check=%(objecttype)"];
        let answer = git(&self.root, &args, Some(names.as_bytes()))?;
        // One line per name, in order: the object's type, or the name
        // followed by `missing` (or `ambiguous`).
        Ok(String::from_utf8_lossy(&answer)
            .lines()
            .map(|line| line == "commit")
            .collect())
    }

    /// The files renamed between `base` and the working tree (its index
    /// and files), old path to new, as git's rename detection finds them.
    pub fn renames_since(&self, base: &CommitId) -> Result<HashMap<String, String>, Error> {
        let args = [
            "diff",
            "--name-status",
            "-z",
            "-M",
            "--no-color",
            base.as_str(),
            "--",
        ];
        let answer = git(&self.root, &args, None)?;
        Ok(parse_renames(&String::from_utf8_lossy(&answer)))
    }
}

/// The renames in `git diff --name-status -z` output: records of a status
/// then one path, or two for a rename (`R<score>`) or copy (`C<score>`).
fn parse_renames(output: &str) -> HashMap<String, String> {
    let mut renames = HashMap::new();
    let mut fields = output.split('\0').filter(|field| !field.is_empty());
    while let Some(status) = fields.next() {
        let paths = if status.starts_with(['R', 'C']) { 2 } else { 1 };
        let (Some(from), to) = (fields.next(), (paths == 2).then(|| fields.next()).flatten())
        else {
            break;
        };
        if status.starts_with('R')
            && let Some(to) = to
        {
            renames.insert(from.to_owned(), to.to_owned());
        }
    }
    renames
}

fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, Error> {
    let output = run(dir, args, stdin)?;
    succeeded(args, output)
}

fn succeeded(args: &[&str], output: Output) -> Result<Vec<u8>, Error> {
    if output.status.success() {
        return Ok(output.stdout);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(Error::Failed {
        args: args.join(" "),
        detail: match stderr.trim() {
            "" => output.status.to_string(),
            said => said.to_owned(),
        },
    })
}

fn run(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Output, Error> {
    let spawn_failed = |source| Error::Spawn {
        args: args.join(" "),
        source,
    };
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_failed)?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Written from a thread of its own while the output is read: git
        // answers as it reads, so a long input written first could fill
        // both pipes and stall.
        let bytes = bytes.to_vec();
        let writer = std::thread::spawn(move || pipe.write_all(&bytes));
        let output = child.wait_with_output().map_err(spawn_failed)?;
        writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the writer panicked")))
            .map_err(spawn_failed)?;
        return Ok(output);
    }
    child.wait_with_output().map_err(spawn_failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_are_read_from_name_status_records() {
        let output = "M\0src/kept.rs\0R087\0src/old.rs\0src/new.rs\0D\0gone.rs\0\
                      C100\0a.rs\0b.rs\0A\0added.rs\0";
        let renames = parse_renames(output);
        assert_eq!(renames.len(), 1, "{renames:?}");
        assert_eq!(renames["src/old.rs"], "src/new.rs");
        assert!(parse_renames("").is_empty());
        assert!(parse_renames("R100\0dangling").is_empty());
    }
}
