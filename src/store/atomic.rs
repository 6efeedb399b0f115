//! Durable file replacement: a crash leaves the old file or the new one,
//! never half of one.
//!
//! The bytes go to a temporary file in the target's directory (so the rename
//! never crosses file systems), which is fsynced, renamed over the target, and
//! then the directory itself is fsynced so the rename survives power loss.
//!
//! What it writes is the owner's alone: files are made `0600` and
//! directories `0700` (narrowed further by the umask, never widened), as
//! the data directory's files hold conversation text and memories.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The prefix of temporary files; the loader ignores and sweeps them.
pub const TEMP_PREFIX: &str = ".tmp-";

/// The mode of the files written here: read and written by the owner only.
pub const FILE_MODE: u32 = 0o600;

/// The mode of the directories made here: entered by the owner only.
pub const DIR_MODE: u32 = 0o700;

/// Writes `bytes` to `path` atomically and durably, creating parent
/// directories as needed.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("the target has no parent directory"))?;
    create_dir_all_durably(dir)?;
    replace(path, bytes)?;
    sync_dir(dir)
}

/// Puts `bytes` at `path` atomically, its contents synced, but leaves the
/// directory entry to the caller's [`sync_dir`]: until then a crash may
/// leave the old file. The parent directory must exist.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temp = temp_path(path);
    let result = write_temp_then_rename(&temp, path, bytes);
    if result.is_err() {
        // Best effort: the temp file is garbage either way, and the loader
        // sweeps any that a crash leaves behind.
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Removes `path` durably. A file that is already gone is not an error.
pub fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    }
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

fn write_temp_then_rename(temp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(temp, path)
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        "{TEMP_PREFIX}{}-{name}",
        uuid::Uuid::new_v4().simple()
    ))
}

/// Creates `dir` and any missing parents, fsyncing each parent whose
/// listing changed, so a new namespace directory survives a crash.
pub fn create_dir_all_durably(dir: &Path) -> io::Result<()> {
    // A relative path's last parent is the empty path: the working directory.
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_all_durably(parent)?;
    }
    create_dir_durably(dir)
}

/// Creates `dir` (its parent must exist) and fsyncs the parent; a `dir`
/// that already exists is not an error.
pub fn create_dir_durably(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(err) => return Err(err),
    }
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}

/// Makes the renames and removals done in `dir` so far durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_contents_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/file.md");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["file.md"]);
    }

    #[test]
    fn files_and_directories_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/nested/file.md");
        write(&path, b"one").unwrap();
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), FILE_MODE);
        assert_eq!(mode(path.parent().unwrap()), DIR_MODE);
        assert_eq!(mode(&dir.path().join("new")), DIR_MODE);
    }

    #[test]
    fn removing_a_missing_file_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        remove(&dir.path().join("nothing.md")).unwrap();
    }
}
