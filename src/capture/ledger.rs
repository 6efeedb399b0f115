//! The ledger of classified messages: for each (repo, user, session),
//! which messages of its conversation a capture pass has classified, so
//! that a later trigger of the session sends the classifier only what is
//! new (plus a little context), and a trigger with nothing new sends
//! nothing at all.
//!
//! A message is known by two fingerprints: of its (role, text), and of
//! the same together with the message before it. A window's message counts
//! as classified when its fingerprint with its predecessor is in the
//! ledger (the window's first message, which has no predecessor there, by
//! its own). A trigger's new messages are those from the first one that
//! does not count as classified to the window's end: a message is never
//! skipped for a look-alike elsewhere in the session (the same text after
//! another message is another fingerprint), and at worst one is classified
//! twice, which the near-duplicate guard absorbs.
//!
//! One file per session, `<data_dir>/queue/classified/<hash>.json`, named
//! by a hash of (repo, user, session), replaced atomically after a pass's
//! memories are written: a crash in between leaves the messages
//! unrecorded, so they are classified again, never skipped (and the pass's
//! memories, written under the same ids again, are not written twice; see
//! the worker). In postgres mode the ledger is a row per session of
//! `engram_classified`, which every replica reads, so one replica never
//! classifies again what another did. Bounded: a
//! session keeps its latest [`MAX_MARKS`] messages (an older one met again
//! is classified again), and a session whose file (or row) has not changed for
//! [`SESSION_TTL`] is deleted by [`Ledger::sweep`], which the worker runs
//! at start and then hourly.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::capture::queue::{StoredLine, Trigger};
use crate::causes::error_chain;
use crate::memory::{RepoId, SessionId, UserId};
use crate::store::atomic;
use crate::store::postgres::Database;

/// The most messages one session's ledger remembers, its latest.
pub const MAX_MARKS: usize = 4096;
/// How long a session's ledger outlives its last pass.
pub const SESSION_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// How often the worker sweeps expired sessions.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// One message's fingerprints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Of its (role, text).
    line: u64,
    /// Of its (role, text) after the previous message's.
    after: u64,
}

/// Each message of `window`'s fingerprints, in order.
pub fn marks(window: &[StoredLine]) -> Vec<Mark> {
    let mut previous: Option<u64> = None;
    window
        .iter()
        .map(|message| {
            let line = fingerprint(&[message.role.as_bytes(), message.text.as_bytes()]);
            let before = previous.map_or([0; 8], u64::to_le_bytes);
            let after = fingerprint(&[&before, &line.to_le_bytes()]);
            previous = Some(line);
            Mark { line, after }
        })
        .collect()
}

fn fingerprint(parts: &[&[u8]]) -> u64 {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("a digest is 32 bytes"))
}

/// What a session's ledger holds.
#[derive(Debug, Default)]
pub struct Seen {
    /// The classified messages, oldest first.
    marks: Vec<Mark>,
    lines: HashSet<u64>,
    afters: HashSet<u64>,
}

impl Seen {
    fn from_marks(marks: Vec<Mark>) -> Self {
        Self {
            lines: marks.iter().map(|mark| mark.line).collect(),
            afters: marks.iter().map(|mark| mark.after).collect(),
            marks,
        }
    }

    /// The index of the first message of `window` (as [`marks`] gives it)
    /// not classified yet; its length when every one is.
    pub fn first_new(&self, window: &[Mark]) -> usize {
        window
            .iter()
            .enumerate()
            .position(|(at, mark)| {
                let known = if at == 0 {
                    self.lines.contains(&mark.line)
                } else {
                    self.afters.contains(&mark.after)
                };
                !known
            })
            .unwrap_or(window.len())
    }

    /// Takes `classified` in, forgetting the oldest past [`MAX_MARKS`].
    pub fn add(&mut self, classified: &[Mark]) {
        for mark in classified {
            if self.afters.insert(mark.after) {
                self.lines.insert(mark.line);
                self.marks.push(*mark);
            }
        }
        if self.marks.len() > MAX_MARKS {
            let excess = self.marks.len() - MAX_MARKS;
            self.marks.drain(..excess);
            *self = Self::from_marks(std::mem::take(&mut self.marks));
        }
    }

    /// Messages remembered.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }
}

/// A session of a namespace pair: whose ledger.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Session {
    pub repo: RepoId,
    pub user: UserId,
    pub session_id: SessionId,
}

impl Session {
    pub fn of(trigger: &Trigger) -> Self {
        Self {
            repo: trigger.repo.clone(),
            user: trigger.user.clone(),
            session_id: trigger.session_id.clone(),
        }
    }
}

/// A ledger file: its session (so that an operator reading the directory
/// can tell) and its marks.
#[derive(Serialize)]
struct FileOut<'a> {
    #[serde(flatten)]
    session: &'a Session,
    marks: &'a [Mark],
}

#[derive(Deserialize)]
struct FileIn {
    marks: Vec<Mark>,
}

/// The ledgers: a directory, or a table. Blocking: call its methods from a
/// blocking thread (of the runtime, for the table's).
pub struct Ledger {
    place: Place,
    last_sweep: Mutex<Option<Instant>>,
}

enum Place {
    Files(PathBuf),
    Postgres(Database),
}

impl Ledger {
    /// The ledgers in the files of `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self::at(Place::Files(dir))
    }

    /// The ledgers in `database`'s `engram_classified`, shared by replicas.
    pub fn in_database(database: Database) -> Self {
        Self::at(Place::Postgres(database))
    }

    fn at(place: Place) -> Self {
        Self {
            place,
            last_sweep: Mutex::new(None),
        }
    }

    fn path(dir: &Path, session: &Session) -> PathBuf {
        let key = Sha256::new()
            .chain_update(session.repo.as_str())
            .chain_update([0])
            .chain_update(session.user.as_str())
            .chain_update([0])
            .chain_update(session.session_id.as_str())
            .finalize();
        let name: String = key[..16].iter().map(|byte| format!("{byte:02x}")).collect();
        dir.join(format!("{name}.json"))
    }

    /// What the trigger's session has classified; nothing when its file
    /// (or row) is missing, expired or unreadable (so everything is
    /// classified again).
    pub fn seen(&self, session: &Session) -> Seen {
        let dir = match &self.place {
            Place::Files(dir) => dir,
            Place::Postgres(database) => {
                return match block_on(table::seen(database, session)) {
                    Ok(marks) => Seen::from_marks(marks.unwrap_or_default()),
                    Err(err) => {
                        tracing::warn!(error = %error_chain(&err), "could not read a session's ledger; its window is classified in full");
                        Seen::default()
                    }
                };
            }
        };
        let path = Self::path(dir, session);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Seen::default(),
            Err(err) => {
                tracing::warn!(file.path = %path.display(), error = %err, "could not read a session's ledger; its window is classified in full");
                return Seen::default();
            }
        };
        if expired(&path) {
            return Seen::default();
        }
        match serde_json::from_slice::<FileIn>(&bytes) {
            Ok(file) => Seen::from_marks(file.marks),
            Err(err) => {
                tracing::warn!(file.path = %path.display(), error = %err, "a session's ledger does not parse; its window is classified in full");
                Seen::default()
            }
        }
    }

    /// Stores `seen` as the trigger's session's ledger, atomically and
    /// durably, and sweeps expired sessions when it is time.
    pub fn record(&self, session: &Session, seen: &Seen) -> io::Result<()> {
        match &self.place {
            Place::Files(dir) => {
                let file = FileOut {
                    session,
                    marks: &seen.marks,
                };
                let json = serde_json::to_vec(&file).expect("a ledger serializes");
                atomic::write(&Self::path(dir, session), &json)?;
            }
            Place::Postgres(database) => block_on(table::record(database, session, &seen.marks))
                .map_err(|err| io::Error::other(error_chain(&err)))?,
        }
        if self.sweep_due() {
            self.sweep();
        }
        Ok(())
    }

    fn sweep_due(&self) -> bool {
        let mut last = self
            .last_sweep
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let due = last.is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    /// Deletes the ledgers of sessions with no pass for [`SESSION_TTL`]
    /// (and temporary files as old); returns how many went.
    pub fn sweep(&self) -> usize {
        *self
            .last_sweep
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        let dir = match &self.place {
            Place::Files(dir) => dir,
            Place::Postgres(database) => {
                return block_on(table::sweep(database)).unwrap_or_else(|err| {
                    tracing::warn!(error = %error_chain(&err), "could not sweep the ledgers of idle sessions; tried again in an hour");
                    0
                });
            }
        };
        let Ok(entries) = fs::read_dir(dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            // Temporary files a crash left are as old as their session's
            // last pass, so they go with it.
            let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
            if is_file && expired(&path) && fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// Runs a query of the table's on the runtime, from a blocking thread.
fn block_on<T>(query: impl Future<Output = T>) -> T {
    tokio::runtime::Handle::current().block_on(query)
}

/// The ledgers as rows of `engram_classified`.
mod table {
    use super::{Mark, SESSION_TTL, Session};
    use crate::store::postgres::{Database, Error};

    /// The session's marks, unless it has none or they expired.
    pub(super) async fn seen(
        database: &Database,
        session: &Session,
    ) -> Result<Option<Vec<Mark>>, Error> {
        let client = database.connection().await?;
        let row = client
            .query_opt(
                "SELECT marks FROM engram_classified \
                 WHERE repo = $1 AND user_id = $2 AND session_id = $3 \
                   AND updated_at > now() - make_interval(secs => $4)",
                &[
                    &session.repo.as_str(),
                    &session.user.as_str(),
                    &session.session_id.as_str(),
                    &SESSION_TTL.as_secs_f64(),
                ],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        serde_json::from_value(row.get(0))
            .map(Some)
            .map_err(|err| Error::Row {
                table: "engram_classified",
                reason: err.to_string(),
            })
    }

    pub(super) async fn record(
        database: &Database,
        session: &Session,
        marks: &[Mark],
    ) -> Result<(), Error> {
        let marks = serde_json::to_value(marks).expect("marks serialize");
        database
            .connection()
            .await?
            .execute(
                "INSERT INTO engram_classified (repo, user_id, session_id, marks) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (repo, user_id, session_id) \
                 DO UPDATE SET marks = EXCLUDED.marks, updated_at = now()",
                &[
                    &session.repo.as_str(),
                    &session.user.as_str(),
                    &session.session_id.as_str(),
                    &marks,
                ],
            )
            .await?;
        Ok(())
    }

    /// Deletes the sessions idle past [`SESSION_TTL`]; how many went.
    pub(super) async fn sweep(database: &Database) -> Result<usize, Error> {
        let removed = database
            .connection()
            .await?
            .execute(
                "DELETE FROM engram_classified \
                 WHERE updated_at <= now() - make_interval(secs => $1)",
                &[&SESSION_TTL.as_secs_f64()],
            )
            .await?;
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }
}

/// Whether the file at `path` has not changed for [`SESSION_TTL`].
fn expired(path: &Path) -> bool {
    fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age >= SESSION_TTL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(lines: &[(&str, &str)]) -> Vec<StoredLine> {
        lines
            .iter()
            .map(|(role, text)| StoredLine {
                role: (*role).to_owned(),
                text: (*text).to_owned(),
            })
            .collect()
    }

    fn session() -> Session {
        Session {
            repo: "forge".parse().unwrap(),
            user: "ana".parse().unwrap(),
            session_id: "s1".parse().unwrap(),
        }
    }

    #[test]
    fn a_growing_window_is_new_only_past_what_was_recorded() {
        let first = window(&[("user", "use tabs"), ("assistant", "ok")]);
        let mut seen = Seen::default();
        assert_eq!(seen.first_new(&marks(&first)), 0, "nothing recorded yet");
        seen.add(&marks(&first));
        assert_eq!(seen.first_new(&marks(&first)), 2, "the same window again");
        let grown = window(&[
            ("user", "use tabs"),
            ("assistant", "ok"),
            ("user", "and gofumpt"),
            ("assistant", "done"),
        ]);
        assert_eq!(seen.first_new(&marks(&grown)), 2);
    }

    #[test]
    fn a_sliding_window_finds_its_new_messages() {
        let mut seen = Seen::default();
        seen.add(&marks(&window(&[
            ("user", "a"),
            ("assistant", "b"),
            ("user", "c"),
            ("assistant", "d"),
        ])));
        let slid = window(&[("user", "c"), ("assistant", "d"), ("user", "e")]);
        assert_eq!(seen.first_new(&marks(&slid)), 2);
    }

    #[test]
    fn the_same_text_after_another_message_is_new() {
        let mut seen = Seen::default();
        seen.add(&marks(&window(&[
            ("assistant", "Shall I use tabs?"),
            ("user", "yes"),
        ])));
        let later = window(&[
            ("assistant", "Shall I use tabs?"),
            ("user", "yes"),
            ("assistant", "Shall I drop the Postgres tests?"),
            ("user", "yes"),
        ]);
        assert_eq!(seen.first_new(&marks(&later)), 2);
        let edited = window(&[
            ("assistant", "Shall I use tabs?"),
            ("user", "no, spaces"),
            ("assistant", "Shall I drop the Postgres tests?"),
        ]);
        assert_eq!(
            seen.first_new(&marks(&edited)),
            1,
            "an edited message and all after it are new"
        );
    }

    #[test]
    fn a_session_keeps_its_latest_marks_only() {
        let lines: Vec<(String, String)> = (0..MAX_MARKS + 10)
            .map(|n| ("user".to_owned(), format!("message {n}")))
            .collect();
        let long: Vec<StoredLine> = lines
            .iter()
            .map(|(role, text)| StoredLine {
                role: role.clone(),
                text: text.clone(),
            })
            .collect();
        let mut seen = Seen::default();
        seen.add(&marks(&long));
        assert_eq!(seen.len(), MAX_MARKS);
        assert_eq!(
            seen.first_new(&marks(&long)),
            0,
            "a forgotten message is classified again"
        );
        assert_eq!(seen.first_new(&marks(&long[10..])), long.len() - 10);
    }

    #[test]
    fn a_ledger_is_durable_per_session_and_expires() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("classified"));
        let lines = window(&[("user", "use tabs"), ("assistant", "ok")]);
        let mut seen = ledger.seen(&session());
        assert!(seen.is_empty());
        seen.add(&marks(&lines));
        ledger.record(&session(), &seen).unwrap();

        let reopened = Ledger::new(dir.path().join("classified"));
        assert_eq!(reopened.seen(&session()).first_new(&marks(&lines)), 2);
        let other = Session {
            session_id: "s2".parse().unwrap(),
            ..session()
        };
        assert!(reopened.seen(&other).is_empty(), "another session");

        assert_eq!(reopened.sweep(), 0, "a fresh ledger stays");
        let file = fs::read_dir(dir.path().join("classified"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let old = SystemTime::now() - SESSION_TTL - Duration::from_secs(60);
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(reopened.seen(&session()).is_empty(), "expired");
        assert_eq!(reopened.sweep(), 1);
        assert!(!file.exists());
    }

    #[test]
    fn a_damaged_ledger_means_classifying_again() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().to_owned());
        let mut seen = Seen::default();
        seen.add(&marks(&window(&[("user", "x")])));
        ledger.record(&session(), &seen).unwrap();
        let file = fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        fs::write(&file, b"{not json").unwrap();
        assert!(ledger.seen(&session()).is_empty());
    }
}
