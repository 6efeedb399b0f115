//! The hook's failure log: one line per failure, appended to a file the
//! agent never shows, since a hook's stderr can reach the user's screen.
//! Writing it is best effort: a log that cannot be written is skipped,
//! never a reason to fail the hook. The file is kept under
//! [`MAX_LOG_BYTES`] by moving it to `<name>.1` when it grows past that.
//!
//! The log is its owner's alone (`0600`, made so if it was wider), and a
//! URL's userinfo (`https://user:password@host`, as `ENGRAM_URL` may
//! carry) never reaches it: [`redact_userinfo`] runs on every line.

use std::fs::{self, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};

use super::bounded;
use crate::client::http::redact_userinfo;

/// Past this size the log is moved aside and started afresh.
const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// Where the log goes unless `--log-file` says otherwise:
/// `$XDG_STATE_HOME/engram/hook.log`, else `~/.local/state/engram/hook.log`.
pub fn default_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    Some(state_dir(env)?.join("hook.log"))
}

/// The agent-side commands' own directory for what they keep (the hook
/// log, setup's backups of project files): `$XDG_STATE_HOME/engram`,
/// else `~/.local/state/engram`.
pub fn state_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let state = env("XDG_STATE_HOME")
        .filter(|dir| Path::new(dir).is_absolute())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".local/state")))?;
    Some(state.join("engram"))
}

/// The log's mode: the owner's alone.
const LOG_MODE: u32 = 0o600;

/// Appends `<what>: <reason>` as [`append`] does, unless the log already
/// holds that line: for a condition that holds at every hook run (no user
/// name to be found), one line says it instead of one per run.
pub fn append_once(path: &Path, what: &str, reason: &str) {
    let entry = format!(" {what}: {}", flatten(reason));
    let logged = bounded::read_tail(path, MAX_LOG_BYTES).is_ok_and(|tail| {
        String::from_utf8_lossy(&tail.bytes)
            .lines()
            .any(|line| line.ends_with(&entry))
    });
    if !logged {
        append(path, what, reason);
    }
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
        flatten(reason)
    );
    let opened = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(LOG_MODE)
        .open(path);
    if let Ok(mut file) = opened {
        // A log written before it was made private keeps its old mode
        // otherwise (the mode above applies only to a new file).
        if file
            .metadata()
            .is_ok_and(|meta| meta.permissions().mode() & 0o077 != 0)
        {
            let _ = file.set_permissions(Permissions::from_mode(LOG_MODE));
        }
        let _ = file.write_all(line.as_bytes());
    }
}

/// `reason` as one line with no URL userinfo in it.
fn flatten(reason: &str) -> String {
    redact_userinfo(reason).replace(['\n', '\r'], " ")
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

        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::write(&path, vec![b'x'; MAX_LOG_BYTES as usize + 1]).unwrap();
        append(&path, "claude-code stop", "third");
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 1);
        assert!(temp.path().join("nested/hook.log.1").exists());
    }

    #[test]
    fn a_wider_log_is_made_private_and_urls_lose_their_userinfo() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("hook.log");
        fs::write(&path, "").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        append(
            &path,
            "claude-code stop",
            "calling http://ana:s3cret@127.0.0.1:8080/turns: error sending request for url (HTTP://tok@host/x)",
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains("s3cret") && !text.contains("tok@"), "{text}");
        assert!(
            text.contains("calling http://***@127.0.0.1:8080/turns"),
            "{text}"
        );
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(redact_userinfo("no url, a@b.c mail"), "no url, a@b.c mail");
    }

    #[test]
    fn a_lasting_condition_is_logged_once() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("hook.log");
        append(&path, "claude-code stop", "something else");
        for _ in 0..3 {
            append_once(&path, "hook", "no user name: using the default");
        }
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}
