//! Keeping the store inside its data directory.
//!
//! A person may put anything under `repos/` and `users/`, including
//! symbolic links to files or directories elsewhere. Engram never follows
//! them: memory files (and the day's `usage.json`) are opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so a
//! FIFO swapped in for a file cannot block the loader), and before a file
//! is written or removed every directory between the data directory and the
//! file is checked to be a real directory, not a link.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::memory::Namespace;
use crate::store::atomic;

/// The directory under the data directory that holds a scope's namespaces.
pub fn scope_dir(namespace: &Namespace) -> &'static str {
    match namespace {
        Namespace::Repo(_) => "repos",
        Namespace::User(_) => "users",
    }
}

/// The name of a namespace's directory: its repo or user id.
pub fn owner_name(namespace: &Namespace) -> &str {
    match namespace {
        Namespace::Repo(repo) => repo.as_str(),
        Namespace::User(user) => user.as_str(),
    }
}

/// Why a namespace's directory may not be written to.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// `repos/`, `users/` or the namespace's own directory is a link.
    #[error("its directory in the data directory is a symbolic link, which Engram never follows")]
    Link,
    /// One of them is a file, a FIFO or some other non-directory.
    #[error("its directory in the data directory is not a directory")]
    NotDirectory,
    #[error("checking {path}")]
    Io { path: PathBuf, source: io::Error },
}

/// `<root>/<scope dir>/<owner>`, after checking that neither directory is a
/// link or anything but a directory. With `create`, missing directories are
/// created (durably); without, a missing one is fine (there is nothing in
/// it to remove).
pub fn namespace_dir(root: &Path, namespace: &Namespace, create: bool) -> Result<PathBuf, Refusal> {
    if create {
        // The data directory itself is the operator's choice and may be a
        // link; only what is under it is confined.
        atomic::create_dir_all_durably(root).map_err(|source| Refusal::Io {
            path: root.to_owned(),
            source,
        })?;
    }
    let mut dir = root.to_owned();
    for component in [scope_dir(namespace), owner_name(namespace)] {
        dir.push(component);
        let io_error = |source| Refusal::Io {
            path: dir.clone(),
            source,
        };
        let metadata = match fs::symlink_metadata(&dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound && create => {
                atomic::create_dir_durably(&dir).map_err(io_error)?;
                fs::symlink_metadata(&dir).map_err(io_error)?
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(dir),
            other => other.map_err(io_error)?,
        };
        if metadata.file_type().is_symlink() {
            return Err(Refusal::Link);
        }
        if !metadata.is_dir() {
            return Err(Refusal::NotDirectory);
        }
    }
    Ok(dir)
}

/// The largest memory file read. A memory's content is at most 8,000
/// characters (32,000 bytes of UTF-8) and its front-matter a few KiB even
/// with many edges; a file far larger is not a memory, and reading it
/// whole (a sparse file of gigabytes uses no disk) would cost its size in
/// memory.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Reads `path` as text if it is a regular file of at most `max_bytes`,
/// without following a link and without blocking on a FIFO. The size is
/// checked before anything is read; a file that grows past it after the
/// check is refused too, having read one byte more.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> io::Result<String> {
    let file = open_no_follow(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let too_large = |bytes: u64| {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{bytes} bytes, over the {max_bytes} this file may hold"),
        )
    };
    if metadata.len() > max_bytes {
        return Err(too_large(metadata.len()));
    }
    let mut text = String::new();
    file.take(max_bytes + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max_bytes {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn user(name: &str) -> Namespace {
        Namespace::User(name.parse().unwrap())
    }

    #[test]
    fn namespace_directories_that_are_links_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("users")).unwrap();
        symlink(outside.path(), root.path().join("users/ana")).unwrap();
        for create in [true, false] {
            assert!(matches!(
                namespace_dir(root.path(), &user("ana"), create),
                Err(Refusal::Link)
            ));
        }

        let other_root = tempfile::tempdir().unwrap();
        symlink(outside.path(), other_root.path().join("users")).unwrap();
        assert!(matches!(
            namespace_dir(other_root.path(), &user("bob"), true),
            Err(Refusal::Link)
        ));
        assert!(
            fs::read_dir(outside.path()).unwrap().next().is_none(),
            "nothing was created outside"
        );
    }

    #[test]
    fn missing_namespace_directories_are_created_inside() {
        let root = tempfile::tempdir().unwrap();
        let dir = namespace_dir(root.path(), &user("ana"), true).unwrap();
        assert_eq!(dir, root.path().join("users/ana"));
        assert!(dir.is_dir());
        let missing = namespace_dir(root.path(), &user("bob"), false).unwrap();
        assert!(!missing.exists());
    }

    #[test]
    fn links_and_fifos_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.md");
        fs::write(&target, "text").unwrap();
        symlink(&target, dir.path().join("link.md")).unwrap();
        assert!(read_regular_file(&dir.path().join("link.md"), MAX_FILE_BYTES).is_err());
        assert_eq!(read_regular_file(&target, MAX_FILE_BYTES).unwrap(), "text");
        let fifo = dir.path().join("fifo.md");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        // Would block forever without O_NONBLOCK.
        assert!(read_regular_file(&fifo, MAX_FILE_BYTES).is_err());
    }
}
