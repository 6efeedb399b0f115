//! Reading, backing up and writing an agent's settings files without
//! trusting what is at their path.
//!
//! Invariants:
//! - Only a regular file is read: it is opened without following a final
//!   link and without blocking (a FIFO never stalls setup), and its type
//!   is checked on the open file before a byte is read.
//! - A project file is never reached through a link (the checkout is
//!   shared: a link there could make setup copy a private file into it).
//!   A user file that is a link is written through it: the link stays and
//!   its target gets the new text.
//! - A new version is written to a fresh temporary file beside the real
//!   file, with the real file's mode from the start, then renamed over it.
//! - A new file of the user's own (user or local scope) is created `0600`,
//!   an existing one keeps its mode: settings hold keys and tokens.
//! - A backup is created readable by its owner only (never wider than the
//!   original, never wider than `0600`). Only the newest [`BACKUPS_KEPT`]
//!   backups of a file are kept. A shared project file's backups are kept
//!   out of the checkout (under the state directory), where `git add -A`
//!   would commit them.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use chrono::Utc;

use super::Error;

/// How many backups of one file are kept.
pub const BACKUPS_KEPT: usize = 3;
/// The largest settings file read; larger is refused, not truncated.
const MAX_FILE_BYTES: u64 = 64 << 20;
/// The permission bits a backup may have at most.
const BACKUP_MODE_MAX: u32 = 0o600;

/// Whether a settings file may be reached through a symbolic link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// A project file: no link from the project's root down to the file.
    RefuseBelow,
    /// A user's file: a link is followed to the file it names.
    Follow,
}

/// A settings file as found.
#[derive(Debug)]
pub struct Found {
    /// Where the bytes live: the path, or the file its link names.
    pub real: PathBuf,
    /// Its text and permission bits, when it exists.
    pub existing: Option<Existing>,
}

/// An existing settings file's text and permission bits.
#[derive(Debug)]
pub struct Existing {
    pub text: String,
    pub mode: u32,
}

/// Finds the settings file at `path` and reads it; `root` is the
/// project's top, below which [`Links::RefuseBelow`] checks every part of
/// the path.
pub fn read(path: &Path, links: Links, root: &Path) -> Result<Found, Error> {
    let real = match links {
        Links::RefuseBelow => {
            refuse_links(path, root)?;
            path.to_owned()
        }
        Links::Follow => follow(path)?,
    };
    let existing = read_regular(&real)?;
    Ok(Found { real, existing })
}

/// Fails on the first symbolic link among `path` and its parents below
/// `root` (only `path` itself when it is not below `root`).
fn refuse_links(path: &Path, root: &Path) -> Result<(), Error> {
    let below = path.strip_prefix(root).ok();
    let mut checked: Vec<PathBuf> = match below {
        Some(relative) => relative
            .ancestors()
            .filter(|part| !part.as_os_str().is_empty())
            .map(|part| root.join(part))
            .collect(),
        None => vec![path.to_owned()],
    };
    checked.reverse();
    for part in checked {
        match fs::symlink_metadata(&part) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(Error::Link { path: part }),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(Error::Read { path: part, source }),
        }
    }
    Ok(())
}

/// `path`, or the file its link (or chain of links) names.
fn follow(path: &Path) -> Result<PathBuf, Error> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(|source| Error::DanglingLink {
                path: path.to_owned(),
                target: fs::read_link(path).unwrap_or_default(),
                source,
            })
        }
        _ => Ok(path.to_owned()),
    }
}

/// The text of the regular file at `path`, `None` when there is none.
fn read_regular(path: &Path) -> Result<Option<Existing>, Error> {
    let failed = |source| Error::Read {
        path: path.to_owned(),
        source,
    };
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW's answer to a link: one appeared since it was checked.
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Error::Link {
                path: path.to_owned(),
            });
        }
        Err(source) => return Err(failed(source)),
    };
    let meta = file.metadata().map_err(failed)?;
    if !meta.file_type().is_file() {
        return Err(Error::NotRegular {
            path: path.to_owned(),
            kind: kind_of(&meta.file_type()),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            limit: MAX_FILE_BYTES,
        });
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(failed)?;
    Ok(Some(Existing {
        text,
        mode: meta.mode() & 0o7777,
    }))
}

fn kind_of(file_type: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Writes `text` to a new temporary file beside `path` with `mode` (a new
/// file's default when `None`), then renames it over `path`.
pub fn write_atomically(path: &Path, text: &str, mode: Option<u32>) -> Result<(), Error> {
    let failed = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let dir = parent_dir(path);
    fs::create_dir_all(dir).map_err(failed)?;
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".engram-tmp-{}", std::process::id()));
    let temp = path.with_file_name(name);
    let written = (|| {
        let mut file = create_new(&temp, mode.unwrap_or(0o666))?;
        file.write_all(text.as_bytes())?;
        if let Some(mode) = mode {
            // The umask may have narrowed it: the file keeps its own mode.
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()?;
        fs::rename(&temp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map_err(failed)
}

/// A new file at `path` with `mode`; a stale one left by a crashed run
/// (never a link: it is not followed) is removed first.
fn create_new(path: &Path, mode: u32) -> io::Result<fs::File> {
    let open = || {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    match open() {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(path)?;
            open()
        }
        opened => opened,
    }
}

/// What [`back_up`] did.
#[derive(Debug)]
pub struct Backup {
    pub path: PathBuf,
    /// Older backups of the same file removed to keep [`BACKUPS_KEPT`].
    pub removed: usize,
}

/// Copies `original`, the text of the file at `path`, to
/// `<name>.engram-backup-<UTC time>` in `dir` (created its owner's only
/// when missing), beside the file when `None`, readable by its owner
/// only, and removes all but the newest [`BACKUPS_KEPT`] backups.
pub fn back_up(path: &Path, original: &Existing, dir: Option<&Path>) -> Result<Backup, Error> {
    let mode = original.mode & BACKUP_MODE_MAX;
    let stamp = Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let prefix = backup_prefix(path);
    let dir = match dir {
        Some(dir) => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| Error::Write {
                    path: dir.to_owned(),
                    source,
                })?;
            dir
        }
        None => parent_dir(path),
    };
    let mut attempt = 0;
    let (backup, mut file) = loop {
        let suffix = if attempt == 0 {
            String::new()
        } else {
            format!("-{attempt}")
        };
        let backup = dir.join(format!("{prefix}{stamp}{suffix}"));
        let opened = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&backup);
        match opened {
            Ok(file) => break (backup, file),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                attempt += 1;
            }
            Err(source) => {
                return Err(Error::Write {
                    path: backup,
                    source,
                });
            }
        }
    };
    let failed = |source| Error::Write {
        path: backup.clone(),
        source,
    };
    file.write_all(original.text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    let removed = prune_backups(dir, &prefix).map_err(failed)?;
    Ok(Backup {
        path: backup,
        removed,
    })
}

fn backup_prefix(path: &Path) -> String {
    format!(
        "{}.engram-backup-",
        path.file_name().unwrap_or_default().to_string_lossy()
    )
}

/// The directory holding `path`.
fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Removes all but the newest [`BACKUPS_KEPT`] backups named `prefix…` in
/// `dir` (their names sort by time), and narrows the kept ones that an
/// older setup left readable by others. Returns how many it removed.
fn prune_backups(dir: &Path, prefix: &str) -> io::Result<usize> {
    let mut backups: Vec<(String, fs::Metadata)> = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if name.starts_with(prefix) && meta.file_type().is_file() {
            backups.push((name, meta));
        }
    }
    backups.sort_by(|(a, _), (b, _)| a.cmp(b));
    let excess = backups.len().saturating_sub(BACKUPS_KEPT);
    for (name, _) in &backups[..excess] {
        fs::remove_file(dir.join(name))?;
    }
    for (name, meta) in &backups[excess..] {
        let mode = meta.mode() & 0o7777;
        if mode & !BACKUP_MODE_MAX != 0 {
            fs::set_permissions(
                dir.join(name),
                fs::Permissions::from_mode(mode & BACKUP_MODE_MAX),
            )?;
        }
    }
    Ok(excess)
}
