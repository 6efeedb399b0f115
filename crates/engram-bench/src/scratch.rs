//! Scratch data directories, and the memory files a workload finds in one
//! when it starts, as a person or an earlier run would have left them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use engram::memory::{Memory, Namespace};
use engram::store::markdown;

use crate::corpus;
use crate::workload::Result;

/// A data directory for one workload, removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new() -> std::io::Result<Self> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "engram-bench-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path)?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `count` memory files straight into the data directory, as a
/// person or an earlier run would have left them.
pub fn write_corpus(dir: &Path, namespace: &Namespace, count: usize, seed: u64) -> Result {
    write_memories(dir, namespace, &corpus::memories(namespace, count, seed))
}

/// Writes `memories` of a repo `namespace` as files into the data directory.
pub fn write_memories(dir: &Path, namespace: &Namespace, memories: &[Memory]) -> Result {
    let Namespace::Repo(repo) = namespace else {
        return Err("the bench corpus lives in a repo namespace".into());
    };
    let folder = dir.join("repos").join(repo.as_str());
    std::fs::create_dir_all(&folder)?;
    for memory in memories {
        std::fs::write(
            folder.join(format!("{}.md", memory.id)),
            markdown::render(memory),
        )?;
    }
    Ok(())
}
