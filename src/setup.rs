//! `engram setup <agent>`: puts Engram's entries into a coding agent's own
//! configuration file, merging with what is there, and says what it did.
//!
//! Each agent's needs are a list of [`Entry`]s for one JSON file (today its
//! four hooks; an MCP server entry is another kind of entry, in the same
//! file or another). Invariants:
//! - Idempotent: an entry already present as wanted is left alone, so a
//!   second run changes nothing and writes nothing.
//! - Only Engram's entries are touched: one is recognised by its command
//!   (a program named `engram…` run as `hook <agent> <event>`), so one
//!   written by an older setup or another install is updated in place,
//!   and every other key, hook and group stays as it was.
//! - A file about to change is first copied to
//!   `<file>.engram-backup-<UTC time>`; the new text is written to a
//!   temporary file and renamed over it, so a crash leaves one or the other.
//! - A file that is not a JSON object of the expected shape is an error,
//!   and nothing is written.
//! - `--print` writes nothing: it prints the entries as a JSON snippet.
//!
//! The JSON is written back pretty-printed, with keys in sorted order (the
//! backup keeps the original layout).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::Utc;
use serde_json::{Map, Value, json};

use crate::hook::{Agent, DEFAULT_URL, Event, project};

/// The agents' own time limit for one hook run, in seconds: a backstop,
/// since `engram hook` keeps to its own, shorter budget.
const AGENT_TIMEOUT_S: u64 = 10;

/// Which of the agent's configuration files to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The user's own settings, for every project (`~/.claude/settings.json`,
    /// `~/.codex/hooks.json`).
    User,
    /// The project's shared settings in the git checkout
    /// (`.claude/settings.json`, `.codex/hooks.json`).
    Project,
    /// The project's settings for this machine only
    /// (`.claude/settings.local.json`; Claude Code only).
    Local,
}

/// `engram setup`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// The agent to configure.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Which of the agent's settings files to change.
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// Change this file instead of the scope's.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Print the snippet to merge by hand instead of writing anything.
    #[arg(long)]
    pub print: bool,
    /// Engram's URL for the hooks to use (default: ENGRAM_URL when the hook
    /// runs, else http://127.0.0.1:8080).
    #[arg(long)]
    pub url: Option<String>,
    /// A fixed repo id for the hooks (default: the project of the agent's cwd).
    #[arg(long)]
    pub repo: Option<String>,
    /// A fixed user id for the hooks (default: the OS user).
    #[arg(long)]
    pub user: Option<String>,
}

/// Why setup changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no home directory: set HOME or pass --file")]
    NoHome,
    #[error("{agent} has no {scope} settings file; use --scope user or project")]
    NoSuchScope {
        agent: &'static str,
        scope: &'static str,
    },
    #[error("finding the engram binary")]
    Exe(#[source] io::Error),
    #[error("{0} is not a valid repo or user id")]
    BadId(String),
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not JSON; nothing was changed")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {what}; nothing was changed")]
    Shape { path: PathBuf, what: String },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One thing Engram needs in an agent's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A command hook for `agent`'s `event` running `command`.
    Hook {
        agent: Agent,
        event: Event,
        command: String,
    },
}

/// What merging one entry did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Added,
    Updated,
    Unchanged,
}

/// Runs setup and prints its report; exits 1 with the reason on stderr
/// when it changed nothing because of an error.
pub fn run(args: &SetupArgs) -> ExitCode {
    let env = |var: &str| std::env::var(var).ok();
    let result = std::env::current_exe().map_err(Error::Exe).and_then(|exe| {
        let cwd = std::env::current_dir().map_err(Error::Exe)?;
        setup(args, &exe, &cwd, env)
    });
    match result.and_then(|report| {
        io::stdout()
            .lock()
            .write_all(report.as_bytes())
            .map_err(|source| Error::Write {
                path: PathBuf::from("stdout"),
                source,
            })
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("engram setup: {}", crate::error::error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// Does the setup `args` ask for, with `exe` as the hook program, and
/// returns the report to print.
pub fn setup(
    args: &SetupArgs,
    exe: &Path,
    cwd: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let entries = entries(args, exe)?;
    if args.print {
        let mut document = Value::Object(Map::new());
        for entry in &entries {
            merge(&mut document, entry).map_err(|what| Error::Shape {
                path: PathBuf::from("(snippet)"),
                what,
            })?;
        }
        return Ok(format!("{}\n", pretty(&document)));
    }
    let path = match &args.file {
        Some(file) => file.clone(),
        None => settings_file(args.agent, args.scope, cwd, env)?,
    };
    apply(&path, &entries)
}

/// The entries `args.agent` needs.
fn entries(args: &SetupArgs, exe: &Path) -> Result<Vec<Entry>, Error> {
    let mut options = String::new();
    if let Some(url) = args.url.as_deref().filter(|url| *url != DEFAULT_URL) {
        options.push_str(&format!(" --url {}", shell_quote(url)));
    }
    for (flag, id) in [("--repo", &args.repo), ("--user", &args.user)] {
        if let Some(id) = id {
            if project::to_id(id).as_deref() != Some(id.as_str()) {
                return Err(Error::BadId(id.clone()));
            }
            options.push_str(&format!(" {flag} {id}"));
        }
    }
    let program = shell_quote(&exe.to_string_lossy());
    Ok(Event::ALL
        .into_iter()
        .map(|event| Entry::Hook {
            agent: args.agent,
            event,
            command: format!(
                "{program} hook {} {}{options}",
                args.agent.as_str(),
                event.as_str()
            ),
        })
        .collect())
}

/// The agent's settings file for `scope`. Project files live at the top of
/// the git checkout holding `cwd` (or in `cwd` outside one).
fn settings_file(
    agent: Agent,
    scope: Scope,
    cwd: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, Error> {
    let home = || env("HOME").map(PathBuf::from).ok_or(Error::NoHome);
    let project = || project::checkout_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    Ok(match (agent, scope) {
        (Agent::ClaudeCode, Scope::User) => home()?.join(".claude/settings.json"),
        (Agent::ClaudeCode, Scope::Project) => project().join(".claude/settings.json"),
        (Agent::ClaudeCode, Scope::Local) => project().join(".claude/settings.local.json"),
        (Agent::Codex, Scope::User) => match env("CODEX_HOME") {
            Some(dir) => PathBuf::from(dir).join("hooks.json"),
            None => home()?.join(".codex/hooks.json"),
        },
        (Agent::Codex, Scope::Project) => project().join(".codex/hooks.json"),
        (Agent::Codex, Scope::Local) => {
            return Err(Error::NoSuchScope {
                agent: agent.as_str(),
                scope: "local",
            });
        }
    })
}

/// Merges `entries` into the JSON file at `path` (created if absent) and
/// returns the report.
fn apply(path: &Path, entries: &[Entry]) -> Result<String, Error> {
    let original = match fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(Error::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut document = match original.as_deref().filter(|text| !text.trim().is_empty()) {
        Some(text) => serde_json::from_str(text).map_err(|source| Error::Parse {
            path: path.to_owned(),
            source,
        })?,
        None => Value::Object(Map::new()),
    };
    let mut report = String::new();
    let mut changed = false;
    for entry in entries {
        let change = merge(&mut document, entry).map_err(|what| Error::Shape {
            path: path.to_owned(),
            what,
        })?;
        changed |= change != Change::Unchanged;
        let Entry::Hook { event, command, .. } = entry;
        let verb = match change {
            Change::Added => "added",
            Change::Updated => "updated",
            Change::Unchanged => "kept",
        };
        report.push_str(&format!(
            "  {verb:<8}{:<17} {command}\n",
            event.hook_event_name()
        ));
    }
    if !changed {
        return Ok(format!(
            "{}: already set up, nothing changed\n{report}",
            path.display()
        ));
    }
    let mut header = format!("{}: ", path.display());
    if let Some(original) = &original {
        let backup = backup_path(path);
        write_atomically(&backup, original)?;
        header.push_str(&format!("changed (backup: {})\n", backup.display()));
    } else {
        header.push_str("created\n");
    }
    write_atomically(path, &format!("{}\n", pretty(&document)))?;
    Ok(header + &report)
}

/// Merges one entry into `document`. The error says what shape was wrong.
pub fn merge(document: &mut Value, entry: &Entry) -> Result<Change, String> {
    let Entry::Hook { event, command, .. } = entry;
    let name = event.hook_event_name();
    let root = document
        .as_object_mut()
        .ok_or("the file is not a JSON object")?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("`hooks` is not an object")?;
    let groups = hooks
        .entry(name)
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| format!("`hooks.{name}` is not a list"))?;
    let wanted = json!({"type": "command", "command": command, "timeout": AGENT_TIMEOUT_S});
    let mut change = Change::Added;
    for group in groups.iter_mut() {
        let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
            continue;
        };
        handlers.retain_mut(|handler| {
            let ours = handler["command"]
                .as_str()
                .is_some_and(|found| is_engram_hook(found, entry));
            if !ours {
                return true;
            }
            if change != Change::Added {
                // A second copy of ours: one is enough.
                change = Change::Updated;
                return false;
            }
            change = if handler["command"] == wanted["command"]
                && handler["timeout"] == wanted["timeout"]
                && handler["type"] == "command"
            {
                Change::Unchanged
            } else {
                handler["type"] = wanted["type"].clone();
                handler["command"] = wanted["command"].clone();
                handler["timeout"] = wanted["timeout"].clone();
                Change::Updated
            };
            true
        });
    }
    groups.retain(|group| {
        group
            .get("hooks")
            .and_then(Value::as_array)
            .is_none_or(|handlers| !handlers.is_empty())
    });
    if change == Change::Added {
        groups.push(json!({"hooks": [wanted]}));
    }
    Ok(change)
}

/// Whether `command` runs Engram's hook for the same agent and event as
/// `entry`: a program named `engram…` with `hook <agent> <event>` after it.
fn is_engram_hook(command: &str, entry: &Entry) -> bool {
    let Entry::Hook { agent, event, .. } = entry;
    let (program, rest) = match command.strip_prefix('\'') {
        Some(quoted) => quoted.split_once('\'').unwrap_or((quoted, "")),
        None => command.split_once(' ').unwrap_or((command, "")),
    };
    let named_engram = Path::new(program)
        .file_name()
        .is_some_and(|name| name.to_string_lossy().starts_with("engram"));
    let mut words = rest.split_whitespace();
    named_engram
        && words.next() == Some("hook")
        && words.next() == Some(agent.as_str())
        && words.next() == Some(event.as_str())
}

/// `text` quoted for a POSIX shell when it needs to be.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:+=@%,".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn pretty(document: &Value) -> String {
    serde_json::to_string_pretty(document).unwrap_or_else(|_| document.to_string())
}

fn backup_path(path: &Path) -> PathBuf {
    let stamp = Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".engram-backup-{stamp}"));
    path.with_file_name(name)
}

/// Writes `text` to a temporary file beside `path`, with `path`'s
/// permissions when it exists, then renames it over `path`.
fn write_atomically(path: &Path, text: &str) -> Result<(), Error> {
    let failed = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(failed)?;
    }
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".engram-tmp-{}", std::process::id()));
    let temp = path.with_file_name(name);
    let written = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        if let Ok(meta) = fs::metadata(path) {
            fs::set_permissions(&temp, meta.permissions())?;
        }
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(event: Event, command: &str) -> Entry {
        Entry::Hook {
            agent: Agent::ClaudeCode,
            event,
            command: command.to_owned(),
        }
    }

    #[test]
    fn recognises_its_own_hooks_only() {
        let entry = hook(Event::Stop, "/usr/bin/engram hook claude-code stop");
        assert!(is_engram_hook("/opt/engram hook claude-code stop", &entry));
        assert!(is_engram_hook(
            "'/my dir/engram' hook claude-code stop --url http://x",
            &entry
        ));
        assert!(is_engram_hook("engram hook claude-code stop", &entry));
        assert!(!is_engram_hook("engram hook codex stop", &entry));
        assert!(!is_engram_hook(
            "engram hook claude-code pre-compact",
            &entry
        ));
        assert!(!is_engram_hook("python3 hook claude-code stop", &entry));
        assert!(!is_engram_hook("notify-send done", &entry));
    }

    #[test]
    fn merging_updates_in_place_and_drops_duplicates() {
        let mut document = json!({"hooks": {"Stop": [
            {"hooks": [
                {"type": "command", "command": "say done"},
                {"type": "command", "command": "/old/engram hook claude-code stop"}
            ]},
            {"hooks": [{"type": "command", "command": "engram hook claude-code stop"}]}
        ]}});
        let entry = hook(Event::Stop, "/new/engram hook claude-code stop");
        assert_eq!(merge(&mut document, &entry), Ok(Change::Updated));
        assert_eq!(
            document,
            json!({"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": "say done"},
                {"type": "command", "command": "/new/engram hook claude-code stop", "timeout": 10}
            ]}]}})
        );
        assert_eq!(merge(&mut document, &entry), Ok(Change::Unchanged));
    }

    #[test]
    fn a_wrong_shape_is_refused_with_its_place() {
        let entry = hook(Event::Stop, "engram hook claude-code stop");
        assert_eq!(
            merge(&mut json!({"hooks": {"Stop": {}}}), &entry),
            Err("`hooks.Stop` is not a list".to_owned())
        );
        assert!(merge(&mut json!([]), &entry).is_err());
    }

    #[test]
    fn odd_paths_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("/usr/bin/engram"), "/usr/bin/engram");
        assert_eq!(shell_quote("/my dir/engram"), "'/my dir/engram'");
        assert_eq!(shell_quote("/it's/engram"), r"'/it'\''s/engram'");
    }
}
