//! What a transcript backfill has sent: for each Engram (by URL) and each
//! session (by agent and session id), the byte offset of the transcript up
//! to which Engram has accepted its messages; and, per Engram, the
//! classifier tokens the backfill estimated for what it sent on capture's
//! budget day, so that a run started while the last one's compactions
//! still wait in the queue (not yet counted by the server) does not send
//! past the budget. Kept in one JSON file under
//! the user's state directory, beside the hook's log, and written
//! atomically after each accepted trigger, so that a backfill stopped at
//! any point resumes after the last trigger Engram took, and a second run
//! sends only what is new.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Error;
use crate::store::atomic;

/// The state file unless `--state` says otherwise:
/// `$XDG_STATE_HOME/engram/import-state.json`, else
/// `~/.local/state/engram/import-state.json`.
pub fn default_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let log = crate::client::hook::log::default_path(env)?;
    Some(log.with_file_name("import-state.json"))
}

/// Offsets sent, by Engram URL, then by `<agent>/<session id>`; tokens
/// sent, by Engram URL.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    #[serde(default)]
    servers: BTreeMap<String, BTreeMap<String, u64>>,
    #[serde(default)]
    tokens_sent: BTreeMap<String, DayTokens>,
}

/// The tokens estimated for what was sent on one budget day.
#[derive(Debug, Default, Serialize, Deserialize)]
struct DayTokens {
    /// Capture's budget day, as `/stats` names it.
    day: String,
    tokens: u64,
}

impl State {
    /// The state at `path`; none yet when there is no file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| Error::Parse {
                path: path.to_owned(),
                reason: format!("not a backfill state file ({err}); move it aside to start over"),
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(Error::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// The offset up to which `session` was sent to `url`.
    pub fn sent(&self, url: &str, session: &str) -> u64 {
        self.servers
            .get(url)
            .and_then(|sessions| sessions.get(session))
            .copied()
            .unwrap_or(0)
    }

    /// The tokens estimated for what was sent to `url` on budget day `day`.
    pub fn tokens_sent(&self, url: &str, day: &str) -> u64 {
        self.tokens_sent
            .get(url)
            .filter(|sent| sent.day == day)
            .map_or(0, |sent| sent.tokens)
    }

    /// Records that `session` was sent to `url` up to `offset`, and saves
    /// the state to `path` at once.
    pub fn record(
        &mut self,
        path: &Path,
        url: &str,
        session: &str,
        offset: u64,
    ) -> Result<(), Error> {
        self.servers
            .entry(url.to_owned())
            .or_default()
            .insert(session.to_owned(), offset);
        self.save(path)
    }

    /// [`Self::record`] for a compaction Engram accepted, estimated at
    /// `tokens` on budget day `day`.
    pub fn record_sent(
        &mut self,
        path: &Path,
        url: &str,
        (session, offset): (&str, u64),
        (day, tokens): (&str, u64),
    ) -> Result<(), Error> {
        let sent = self.tokens_sent.entry(url.to_owned()).or_default();
        if sent.day != day {
            *sent = DayTokens {
                day: day.to_owned(),
                tokens: 0,
            };
        }
        sent.tokens += tokens;
        self.record(path, url, session, offset)
    }

    fn save(&self, path: &Path) -> Result<(), Error> {
        let failed = |source| Error::Write {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let bytes = serde_json::to_vec_pretty(self).map_err(Error::Json)?;
        atomic::write(path, &bytes).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_the_days_tokens_survive_a_reload_and_a_new_day_starts_at_zero() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engram/import-state.json");
        let url = "http://127.0.0.1:8080";
        let mut state = State::load(&path).unwrap();
        assert_eq!(state.sent(url, "codex/s-1"), 0);
        state
            .record_sent(&path, url, ("codex/s-1", 120), ("2026-11-26", 500))
            .unwrap();
        state
            .record_sent(&path, url, ("codex/s-2", 80), ("2026-11-26", 300))
            .unwrap();
        let reloaded = State::load(&path).unwrap();
        assert_eq!(reloaded.sent(url, "codex/s-1"), 120);
        assert_eq!(reloaded.sent("http://elsewhere:8080", "codex/s-1"), 0);
        assert_eq!(reloaded.tokens_sent(url, "2026-11-26"), 800);
        assert_eq!(reloaded.tokens_sent(url, "2026-11-27"), 0);

        let mut next_day = reloaded;
        next_day
            .record_sent(&path, url, ("codex/s-1", 200), ("2026-11-27", 50))
            .unwrap();
        assert_eq!(
            State::load(&path).unwrap().tokens_sent(url, "2026-11-27"),
            50
        );
    }

    #[test]
    fn a_file_that_is_not_state_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("import-state.json");
        std::fs::write(&path, "not json").unwrap();
        assert!(State::load(&path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not json");
    }
}
