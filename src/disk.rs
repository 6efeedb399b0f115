//! Free space on the data directory's file system. Below a configured
//! floor, writes (queued triggers, memories) are refused whole, with a
//! clear answer, instead of failing half-way through a full disk.

use std::path::Path;

/// The file system holding the data directory is nearly full.
#[derive(Debug, thiserror::Error)]
#[error(
    "the data directory's file system has {available_bytes} bytes free, below the floor of {floor_bytes} bytes (`limits.min_free_disk_bytes`); nothing was written"
)]
pub struct LowSpace {
    pub available_bytes: u64,
    pub floor_bytes: u64,
}

/// `Err` when the file system holding `dir` has less than `floor_bytes`
/// free for unprivileged writers. A floor of 0 turns the check off. When the
/// free space cannot be read, the write goes ahead (and fails on its own if
/// it must): the check guards against a full disk, not a missing one.
pub fn ensure_free_space(dir: &Path, floor_bytes: u64) -> Result<(), LowSpace> {
    if floor_bytes == 0 {
        return Ok(());
    }
    // The directory may not exist yet (a new namespace): its nearest
    // existing ancestor is on the same file system or its parent's.
    let Some(existing) = dir.ancestors().find(|ancestor| ancestor.exists()) else {
        return Ok(());
    };
    match rustix::fs::statvfs(existing) {
        Ok(stat) => {
            let available_bytes = stat.f_bavail.saturating_mul(stat.f_frsize);
            if available_bytes < floor_bytes {
                return Err(LowSpace {
                    available_bytes,
                    floor_bytes,
                });
            }
            Ok(())
        }
        Err(errno) => {
            tracing::warn!(file.path = %existing.display(), error = %errno, "could not read the free disk space");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_above_the_free_space_refuses_and_zero_turns_it_off() {
        let dir = tempfile::tempdir().unwrap();
        let refused = ensure_free_space(dir.path(), u64::MAX).unwrap_err();
        assert_eq!(refused.floor_bytes, u64::MAX);
        assert!(refused.available_bytes < u64::MAX);
        assert!(refused.to_string().contains("limits.min_free_disk_bytes"));
        ensure_free_space(dir.path(), 0).unwrap();
        ensure_free_space(dir.path(), 1).unwrap();
        ensure_free_space(&dir.path().join("not/yet/made"), 1).unwrap();
    }
}
