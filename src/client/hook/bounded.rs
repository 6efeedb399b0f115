//! Reading files that someone else controls (an agent's transcript, a
//! checkout's `.git` pointer, the password database) without letting them
//! stall or swell the reader: only a regular file is read (a FIFO, a
//! device such as `/dev/zero` or `/dev/urandom`, a socket are refused),
//! it is opened without blocking (opening a FIFO otherwise waits for a
//! writer), and at most a fixed number of bytes is read.
//!
//! The file is checked twice, by path before opening it (so a device is
//! never even opened) and by handle after (so a file swapped in between
//! is caught too).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The end of a file, at most the bytes asked for.
#[derive(Debug)]
pub struct Tail {
    pub bytes: Vec<u8>,
    /// Whether the file holds more before `bytes` (so its first line may
    /// be cut).
    pub cut: bool,
}

/// The last `max_bytes` of the regular file at `path`.
pub fn read_tail(path: &Path, max_bytes: u64) -> io::Result<Tail> {
    let (mut file, len) = open_regular(path)?;
    let start = len.saturating_sub(max_bytes);
    if start > 0 {
        file.seek(SeekFrom::Start(start))?;
    }
    let mut bytes = Vec::new();
    // The length was read before: a file still growing is cut there too.
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(Tail {
        bytes,
        cut: start > 0,
    })
}

/// The first `max_bytes` of the regular file at `path`.
pub fn read_head(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Whether `path` is (or links to) a directory or a regular file: the
/// kinds of entry that can be read without blocking.
pub fn is_dir_or_regular(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|meta| meta.is_dir() || meta.is_file())
}

/// The file at `path`, open for reading, and its length, if it is a
/// regular file.
fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    if !fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok((file, meta.len()))
}

fn not_regular() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::process::Command;

    use super::*;

    #[test]
    fn the_tail_and_the_head_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        fs::write(&path, "0123456789").unwrap();
        let tail = read_tail(&path, 4).unwrap();
        assert_eq!((tail.bytes.as_slice(), tail.cut), (&b"6789"[..], true));
        let whole = read_tail(&path, 64).unwrap();
        assert_eq!(
            (whole.bytes.as_slice(), whole.cut),
            (&b"0123456789"[..], false)
        );
        assert_eq!(read_head(&path, 3).unwrap(), b"012");
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let zero = dir.path().join("zero");
        symlink("/dev/zero", &zero).unwrap();
        for path in [&fifo, &zero, Path::new("/dev/urandom")] {
            let err = read_tail(path, 1 << 20).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{path:?}");
            assert!(read_head(path, 1 << 20).is_err(), "{path:?}");
            assert!(!is_dir_or_regular(path), "{path:?}");
        }
        // A link to a regular file is read like the file.
        let target = dir.path().join("target");
        fs::write(&target, "text").unwrap();
        symlink(&target, dir.path().join("link")).unwrap();
        assert_eq!(read_head(&dir.path().join("link"), 64).unwrap(), b"text");
        assert!(is_dir_or_regular(dir.path()));
    }
}
