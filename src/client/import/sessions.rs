//! Where each agent keeps its session transcripts (its entry's
//! [`Import`]), and what each session is: its id, the project it ran in,
//! and its file. The layouts ([`SessionFiles`]):
//!
//! - Claude Code: `~/.claude/projects/<encoded project path>/<session
//!   id>.jsonl` (`$CLAUDE_CONFIG_DIR/projects` when set); the encoded
//!   path is the project's absolute path with every character that is
//!   not a letter or digit made `-`, and each line carries the `cwd`. One
//!   project's folder, given itself, is read as well: its own `.jsonl`
//!   files are sessions too.
//! - Codex: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`
//!   (`$CODEX_HOME/sessions` when set), whose first line is a
//!   `session_meta` holding the session's `id` and `cwd`.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use super::Error;
use crate::client::agent::{Agent, Import, SessionFiles};
use crate::client::hook::transcript::Format;

/// An agent whose past sessions `engram import` reads: its entry's
/// [`Import`], and how its transcripts are written.
#[derive(Clone, Copy, Debug)]
pub struct Importable {
    agent: Agent,
    import: &'static Import,
    format: Format,
}

impl Importable {
    /// `agent`, when its entry says where its past sessions are.
    pub fn of(agent: Agent) -> Option<Self> {
        Some(Self {
            agent,
            import: agent.import()?,
            format: agent.transcript_format()?,
        })
    }

    /// The agent importable as `name` on the command line.
    pub fn named(name: &str) -> Option<Self> {
        Agent::ALL
            .into_iter()
            .filter(|agent| agent.as_str() == name)
            .find_map(Self::of)
    }

    pub fn agent(self) -> Agent {
        self.agent
    }

    /// The name on the command line, and in the import's state.
    pub fn as_str(self) -> &'static str {
        self.agent.as_str()
    }

    /// What `engram import --help` says of it.
    pub fn about(self) -> &'static str {
        self.import.about
    }

    /// How the agent writes its transcripts.
    pub fn transcript_format(self) -> Format {
        self.format
    }

    /// Where the agent keeps its transcripts, said when none were found.
    pub fn layout(self) -> &'static str {
        self.import.layout
    }
}

/// The most lines read from a transcript's start to find its session's
/// metadata.
const META_LINES: usize = 50;

/// Where `agent` keeps its transcripts, by its environment.
pub fn default_root(agent: Importable, env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let import = agent.import;
    env(import.dir_var)
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from(env("HOME")?).join(import.home_dir)))
        .map(|dir| dir.join(import.folder))
}

/// One session's transcript.
#[derive(Clone, Debug)]
pub struct Session {
    pub path: PathBuf,
    /// The agent's session id.
    pub id: String,
    /// The directory the session ran in, when the transcript says.
    pub cwd: Option<PathBuf>,
    pub modified: SystemTime,
}

/// The sessions under `root`, sorted by file, with their metadata read.
pub fn find(agent: Importable, root: &Path) -> Result<Vec<Session>, Error> {
    let layout = agent.import.sessions;
    let mut files = Vec::new();
    match layout {
        SessionFiles::ByProject => {
            files.extend(
                super::list_files(root)?
                    .into_iter()
                    .filter(|path| path.extension() == Some("jsonl".as_ref())),
            );
            for (_, project_files) in super::list_dirs(root)? {
                files.extend(
                    project_files
                        .into_iter()
                        .filter(|path| path.extension() == Some("jsonl".as_ref())),
                );
            }
        }
        SessionFiles::Rollouts => walk(root, &mut files),
    }
    files.sort();
    files
        .into_iter()
        .map(|path| session(layout, path))
        .collect()
}

/// Every `rollout-*.jsonl` file under `dir`, at any depth.
fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => walk(&path, files),
            Ok(kind) if kind.is_file() => {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("rollout-") && name.ends_with(".jsonl") {
                    files.push(path);
                }
            }
            _ => {}
        }
    }
}

fn session(layout: SessionFiles, path: PathBuf) -> Result<Session, Error> {
    let read_failed = |source| Error::Read {
        path: path.clone(),
        source,
    };
    let modified = std::fs::metadata(&path)
        .and_then(|meta| meta.modified())
        .map_err(read_failed)?;
    let head = crate::client::hook::bounded::read_head(&path, 1024 * 1024).map_err(read_failed)?;
    let head = String::from_utf8_lossy(&head);
    let entries = head
        .lines()
        .take(META_LINES)
        .filter_map(|line| serde_json::from_str::<Value>(line).ok());
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (id, cwd) = match layout {
        SessionFiles::ByProject => {
            let cwd = entries
                .filter_map(|entry| entry["cwd"].as_str().map(PathBuf::from))
                .next();
            (stem, cwd)
        }
        SessionFiles::Rollouts => {
            let meta = entries
                .into_iter()
                .find(|entry| entry["type"] == "session_meta")
                .unwrap_or_default();
            let payload = &meta["payload"];
            let id = payload["id"].as_str().map_or(stem, str::to_owned);
            (id, payload["cwd"].as_str().map(PathBuf::from))
        }
    };
    Ok(Session {
        path,
        id,
        cwd,
        modified,
    })
}

/// Whether `session` ran in `project` (or below it): by its recorded
/// `cwd`, or, for Claude Code, by the directory its file is in.
pub fn belongs_to(session: &Session, project: &Path) -> bool {
    let within = |dir: &Path| dir.starts_with(project);
    if session.cwd.as_deref().is_some_and(within) {
        return true;
    }
    let encoded = encode_project(project);
    session
        .path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|name| name.to_string_lossy() == encoded)
}

/// Claude Code's directory name for a project: its path with every
/// character that is not an ASCII letter or digit made `-`.
pub fn encode_project(project: &Path) -> String {
    project
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_encodes_a_project_path_as_its_directory_name() {
        assert_eq!(
            encode_project(Path::new("/home/ana/src/forge.rs")),
            "-home-ana-src-forge-rs"
        );
    }
}
