//! A real git working tree the drift workload evolves: files written,
//! rewritten, renamed with `git mv`, deleted, each change a commit.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workload::Result;

pub struct Tree {
    dir: PathBuf,
}

impl Tree {
    /// A new repository in `dir` (which exists and is empty).
    pub fn init(dir: &Path) -> Result<Self> {
        let tree = Self {
            dir: dir.to_owned(),
        };
        tree.git(&["init", "-q", "-b", "main"])?;
        Ok(tree)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs git in the tree; its standard output.
    fn git(&self, args: &[&str]) -> Result<String> {
        let output = Command::new("git")
            .args(["-c", "user.name=drift", "-c", "user.email=drift@localhost"])
            .args(args)
            .current_dir(&self.dir)
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Writes `path` (repo-relative) with `content`.
    pub fn write(&self, path: &str, content: &str) -> Result {
        let file = self.dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, content)?;
        Ok(())
    }

    pub fn read(&self, path: &str) -> Result<String> {
        Ok(std::fs::read_to_string(self.dir.join(path))?)
    }

    pub fn rename(&self, from: &str, to: &str) -> Result {
        if let Some(parent) = self.dir.join(to).parent() {
            std::fs::create_dir_all(parent)?;
        }
        self.git(&["mv", from, to])?;
        Ok(())
    }

    pub fn delete(&self, path: &str) -> Result {
        self.git(&["rm", "-q", path])?;
        Ok(())
    }

    /// Commits everything; the new HEAD.
    pub fn commit(&self, message: &str) -> Result<String> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", message])?;
        self.git(&["rev-parse", "HEAD"])
    }
}
