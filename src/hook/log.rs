//! The hook's failure log: one line per failure, appended to a file the
//! agent never shows, since a hook's stderr can reach the user's screen.
//! Writing it is best effort: a log that cannot be written is skipped,
//! never a reason to fail the hook. The file is kept under
//! [`MAX_LOG_BYTES`] by moving it to `<name>.1` when it grows past that.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};

/// Past this size the log is moved aside and started afresh.
const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// Where the log goes unless `--log-file` says otherwise:
/// `$XDG_STATE_HOME/engram/hook.log`, else `~/.local/state/engram/hook.log`.
pub fn default_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let state = env("XDG_STATE_HOME")
        .filter(|dir| Path::new(dir).is_absolute())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".local/state")))?;
    Some(state.join("engram").join("hook.log"))
}

/// Appends one line, `<time> <what>: <reason>`, to the log at `path`.
/// Newlines in `reason` are flattened so each failure stays one line.
pub fn append(path: &Path, what: &str, reason: &str) {
    if let Some(dir) = path.parent() {
        let _ = fs::create_dir_all(dir);
    }
    if fs::metadata(path).is_ok_and(|meta| meta.len() > MAX_LOG_BYTES) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        let _ = fs::rename(path, old);
    }
    let line = format!(
        "{} {what}: {}\n",
        Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
        reason.replace(['\n', '\r'], " ")
    );
    if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path) {
        let _ = file.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_lives_under_the_state_directory() {
        let env = |var: &str| (var == "HOME").then(|| "/home/ana".to_owned());
        assert_eq!(
            default_path(env),
            Some(PathBuf::from("/home/ana/.local/state/engram/hook.log"))
        );
        let env = |var: &str| match var {
            "XDG_STATE_HOME" => Some("/var/state".to_owned()),
            "HOME" => Some("/home/ana".to_owned()),
            _ => None,
        };
        assert_eq!(
            default_path(env),
            Some(PathBuf::from("/var/state/engram/hook.log"))
        );
        assert_eq!(default_path(|_| None), None);
    }

    #[test]
    fn each_failure_is_one_line_and_a_full_log_moves_aside() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("nested/hook.log");
        append(&path, "claude-code stop", "first\nreason");
        append(&path, "claude-code stop", "second");
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with("claude-code stop: first reason")
        );

        fs::write(&path, vec![b'x'; MAX_LOG_BYTES as usize + 1]).unwrap();
        append(&path, "claude-code stop", "third");
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 1);
        assert!(temp.path().join("nested/hook.log.1").exists());
    }
}
