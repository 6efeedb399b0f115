//! Durable file replacement: a crash leaves the old file or the new one,
//! never half of one.
//!
//! The bytes go to a temporary file in the target's directory (so the rename
//! never crosses file systems), which is fsynced, renamed over the target, and
//! then the directory itself is fsynced so the rename survives power loss.
//!
//! Many files written together ([`Group`]) pay for that once, not per
//! file: every file's bytes go to its temporary file, their contents are
//! made durable in one pass (`syncfs`), then each is renamed over its
//! target and each directory fsynced once.
//!
//! What it writes is the owner's alone: files are made `0600` and
//! directories `0700` (narrowed further by the umask, never widened), as
//! the data directory's files hold conversation text and memories.
//!
//! A rename or a removal is where a change of the files becomes
//! irrevocable, so each passes its request's commit point
//! ([`crate::commit_point`]) just before: a write whose request has
//! already been answered `503` (timed out, as changing nothing) is called
//! off there and leaves the files as they were, and one that passes makes
//! the timeout wait for its outcome instead.

use std::collections::BTreeSet;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::commit_point;

/// The prefix of temporary files; the loader ignores and sweeps them.
pub const TEMP_PREFIX: &str = ".tmp-";

/// The mode of the files written here: read and written by the owner only.
pub const FILE_MODE: u32 = 0o600;

/// The mode of the directories made here: entered by the owner only.
pub const DIR_MODE: u32 = 0o700;

/// Writes `bytes` to `path` atomically and durably, creating parent
/// directories as needed.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut group = Group::default();
    group.stage(path, bytes)?;
    group.commit().map(|_| ()).map_err(|failed| failed.source)
}

/// Files written atomically and durably together: each [`Self::stage`]d
/// (its bytes in a temporary file beside its target, parent directories
/// made as needed), then all put in place by [`Self::commit`]. Dropped
/// uncommitted, it removes its temporary files.
#[derive(Default)]
pub struct Group {
    /// (temporary file, target), in the order staged.
    staged: Vec<(PathBuf, PathBuf)>,
}

/// Why a [`Group`] was not all put in place: the file at fault, and how
/// many of the group's targets (the first ones staged) were in place,
/// each whole, when it failed.
#[derive(Debug)]
pub struct GroupFailed {
    pub path: PathBuf,
    pub source: io::Error,
    pub placed: usize,
}

impl Group {
    /// Writes `bytes` to a temporary file beside `path`, unsynced.
    pub fn stage(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let dir = parent(path)?;
        create_dir_all_durably(dir)?;
        let temp = temp_path(path);
        // Recorded first, so that a write that fails is removed too.
        self.staged.push((temp.clone(), path.to_owned()));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&temp)?;
        file.write_all(bytes)
    }

    /// Puts every staged file in place: their contents made durable (one
    /// file: its fsync; more: one `syncfs` of each file system their
    /// directories are on, far cheaper than an fsync each), each renamed over its
    /// target, then each directory fsynced once. A crash leaves each
    /// target's old file or its new one, never half of one. Answers how
    /// many files were put in place.
    pub fn commit(mut self) -> Result<usize, GroupFailed> {
        let staged = std::mem::take(&mut self.staged);
        let failed = |path: &Path, placed: usize| {
            let path = path.to_owned();
            move |source| GroupFailed {
                path,
                source,
                placed,
            }
        };
        let dirs: BTreeSet<PathBuf> = staged
            .iter()
            .filter_map(|(_, target)| target.parent().map(Path::to_owned))
            .collect();
        let synced = match staged.as_slice() {
            [(temp, target)] => File::open(temp)
                .and_then(|file| file.sync_all())
                .map_err(failed(target, 0)),
            _ => {
                // One flush per file system, however many of its
                // directories the group writes to.
                let mut flushed = BTreeSet::new();
                dirs.iter().try_for_each(|dir| {
                    File::open(dir)
                        .and_then(|file| {
                            if flushed.insert(file.metadata()?.dev()) {
                                rustix::fs::syncfs(&file)?;
                            }
                            Ok(())
                        })
                        .map_err(failed(dir, 0))
                })
            }
        };
        // From here on, what is not renamed is removed when `self` drops.
        self.staged = staged;
        synced?;
        if let Some((_, first)) = self.staged.first() {
            pass_commit_point().map_err(failed(first, 0))?;
        }
        for (placed, (temp, target)) in self.staged.iter().enumerate() {
            fs::rename(temp, target).map_err(failed(target, placed))?;
        }
        let placed = std::mem::take(&mut self.staged).len();
        for dir in &dirs {
            sync_dir(dir).map_err(failed(dir, placed))?;
        }
        Ok(placed)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for (temp, _) in &self.staged {
            // Best effort: the temp file is garbage either way, and the
            // loader sweeps any that a crash leaves behind.
            let _ = fs::remove_file(temp);
        }
    }
}

fn parent(path: &Path) -> io::Result<&Path> {
    path.parent()
        .ok_or_else(|| io::Error::other("the target has no parent directory"))
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
    pass_commit_point()?;
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
    pass_commit_point()?;
    fs::rename(temp, path)
}

/// Passes the commit point of the request this write serves, if any: an
/// error when that request was answered already, so the write must not
/// be made.
fn pass_commit_point() -> io::Result<()> {
    if commit_point::pass() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "its request timed out and was answered as changing nothing, so the write was called off",
        ))
    }
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
    use crate::commit_point::CommitPoint;

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

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_group_puts_every_file_in_place_and_a_dropped_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut group = Group::default();
        for name in ["a/1.md", "a/2.md", "b/3.md"] {
            group
                .stage(&dir.path().join(name), name.as_bytes())
                .unwrap();
        }
        assert_eq!(group.commit().unwrap(), 3);
        for name in ["a/1.md", "a/2.md", "b/3.md"] {
            assert_eq!(fs::read_to_string(dir.path().join(name)).unwrap(), name);
        }
        let mut dropped = Group::default();
        dropped.stage(&dir.path().join("a/4.md"), b"four").unwrap();
        drop(dropped);
        assert_eq!(names_in(&dir.path().join("a")), ["1.md", "2.md"]);
    }

    #[test]
    fn a_group_that_fails_part_way_says_how_many_are_in_place_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("c/taken/inside")).unwrap();
        let mut group = Group::default();
        group.stage(&dir.path().join("c/1.md"), b"one").unwrap();
        group.stage(&dir.path().join("c/taken"), b"two").unwrap();
        group.stage(&dir.path().join("c/3.md"), b"three").unwrap();
        let failed = group.commit().unwrap_err();
        assert_eq!(failed.placed, 1);
        assert_eq!(failed.path, dir.path().join("c/taken"));
        assert_eq!(names_in(&dir.path().join("c")), ["1.md", "taken"]);
    }

    #[test]
    fn a_write_whose_request_was_answered_is_called_off_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("a/kept.md");
        write(&kept, b"one").unwrap();
        let answered = CommitPoint::default();
        assert!(answered.time_out());

        CommitPoint::within(Some(answered), || {
            let mut group = Group::default();
            group.stage(&dir.path().join("a/new.md"), b"new").unwrap();
            group.stage(&dir.path().join("b/new.md"), b"new").unwrap();
            let failed = group.commit().unwrap_err();
            assert_eq!(failed.placed, 0);
            assert_eq!(failed.source.kind(), io::ErrorKind::TimedOut);
            assert_eq!(
                write(&kept, b"two").unwrap_err().kind(),
                io::ErrorKind::TimedOut
            );
            assert_eq!(
                replace(&kept, b"two").unwrap_err().kind(),
                io::ErrorKind::TimedOut
            );
            assert_eq!(remove(&kept).unwrap_err().kind(), io::ErrorKind::TimedOut);
        });
        assert_eq!(names_in(&dir.path().join("a")), ["kept.md"]);
        assert_eq!(fs::read_to_string(&kept).unwrap(), "one");
        assert!(names_in(&dir.path().join("b")).is_empty());
    }

    #[test]
    fn a_write_in_time_passes_the_commit_point_and_the_timeout_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let point = CommitPoint::default();
        CommitPoint::within(Some(point.clone()), || {
            write(&dir.path().join("a.md"), b"one").unwrap();
        });
        assert!(
            !point.time_out(),
            "a write past its commit point is waited for"
        );
        assert_eq!(fs::read_to_string(dir.path().join("a.md")).unwrap(), "one");
    }

    #[test]
    fn removing_a_missing_file_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        remove(&dir.path().join("nothing.md")).unwrap();
    }
}
