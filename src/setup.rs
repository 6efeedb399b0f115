//! `engram setup <agent>`: puts Engram's entries into a coding agent's own
//! configuration files, merging with what is there, and says what it did.
//!
//! Each agent needs two kinds of [`Entry`]: its four hooks, in its hooks
//! file (JSON), and the MCP server `engram mcp`, under the name `engram` in
//! the file where the agent keeps its MCP servers (Claude Code: JSON;
//! Codex: `config.toml`). Invariants:
//! - Idempotent: an entry already present as wanted is left alone, so a
//!   second run changes nothing and writes nothing.
//! - Only Engram's entries are touched: a hook is recognised by its command
//!   (a program named `engram…` run as `hook <agent> <event>`), the MCP
//!   server by its name, so one written by an older setup or another
//!   install is updated in place, and every other key, hook, group and
//!   server stays as it was.
//! - A file about to change is first copied to
//!   `<file>.engram-backup-<UTC time>`; the new text is written to a
//!   temporary file and renamed over it, so a crash leaves one or the other.
//! - Every file is read and merged before any is written: a file that does
//!   not parse or has an unexpected shape is an error, and nothing is
//!   written.
//! - `--print` writes nothing: it prints each file's snippet.
//!
//! JSON is written back pretty-printed, with keys in sorted order (the
//! backup keeps the original layout); TOML keeps its layout and comments.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::Utc;
use serde_json::{Map, Value, json};
use toml_edit::DocumentMut;

use crate::hook::{Agent, DEFAULT_URL, Event, project};

/// The agents' own time limit for one hook run, in seconds: a backstop,
/// since `engram hook` keeps to its own, shorter budget.
const AGENT_TIMEOUT_S: u64 = 10;

/// The name the MCP server entry goes by.
const MCP_SERVER_NAME: &str = "engram";
/// The variables a Codex MCP server may see: Codex starts servers with a
/// short list of its own, and the bridge reads these.
const MCP_ENV_VARS: [&str; 2] = ["ENGRAM_API_KEY", "ENGRAM_URL"];

/// Which of the agent's configuration files to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The user's own settings, for every project (`~/.claude/settings.json`
    /// and `~/.claude.json`; `~/.codex/hooks.json` and `~/.codex/config.toml`).
    User,
    /// The project's shared settings in the git checkout
    /// (`.claude/settings.json` and `.mcp.json`; `.codex/hooks.json` and
    /// `.codex/config.toml`).
    Project,
    /// The project's settings for this machine only
    /// (`.claude/settings.local.json`, and the project's entry in
    /// `~/.claude.json`; Claude Code only).
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
    /// Write the hooks to this file instead of the scope's.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Leave the MCP server entry out: hooks only.
    #[arg(long)]
    pub no_mcp: bool,
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
    #[error("{path} is not TOML; nothing was changed")]
    ParseToml {
        path: PathBuf,
        #[source]
        source: toml_edit::TomlError,
    },
    #[error("{path}: its shape is not the agent's; nothing was changed")]
    Shape {
        path: PathBuf,
        #[source]
        source: WrongShape,
    },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A place in a configuration file that does not hold what the agent
/// reads there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{at}` is not {expected}")]
pub struct WrongShape {
    at: String,
    expected: &'static str,
}

impl WrongShape {
    fn new(at: impl Into<String>, expected: &'static str) -> Self {
        Self {
            at: at.into(),
            expected,
        }
    }
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
    /// The stdio MCP server `program args…`, named [`MCP_SERVER_NAME`] in
    /// the table of servers that the keys `at` lead to.
    McpServer {
        at: Vec<String>,
        program: String,
        args: Vec<String>,
    },
}

impl Entry {
    /// The entry as the report shows it: what it is, and what it runs.
    fn describe(&self) -> (&'static str, String) {
        match self {
            Self::Hook { event, command, .. } => (event.hook_event_name(), command.clone()),
            Self::McpServer { program, args, .. } => (
                "MCP server",
                format!("{MCP_SERVER_NAME}: {}", shell_words(program, args)),
            ),
        }
    }
}

/// One configuration file and the entries that go into it.
#[derive(Debug)]
struct Target {
    path: PathBuf,
    format: Format,
    entries: Vec<Entry>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Toml,
}

/// A configuration file as read, to merge entries into.
enum Document {
    Json(Value),
    Toml(DocumentMut),
}

impl Document {
    fn empty(format: Format) -> Self {
        match format {
            Format::Json => Self::Json(Value::Object(Map::new())),
            Format::Toml => Self::Toml(DocumentMut::new()),
        }
    }

    fn parse(format: Format, text: &str, path: &Path) -> Result<Self, Error> {
        if text.trim().is_empty() {
            return Ok(Self::empty(format));
        }
        match format {
            Format::Json => serde_json::from_str(text)
                .map(Self::Json)
                .map_err(|source| Error::Parse {
                    path: path.to_owned(),
                    source,
                }),
            Format::Toml => text
                .parse()
                .map(Self::Toml)
                .map_err(|source| Error::ParseToml {
                    path: path.to_owned(),
                    source,
                }),
        }
    }

    fn merge(&mut self, entry: &Entry) -> Result<Change, WrongShape> {
        match self {
            Self::Json(document) => merge(document, entry),
            Self::Toml(document) => merge_toml(document, entry),
        }
    }

    fn render(&self) -> String {
        match self {
            Self::Json(document) => format!("{}\n", pretty(document)),
            Self::Toml(document) => document.to_string(),
        }
    }
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
            eprintln!("engram setup: {}", crate::causes::error_chain(&err));
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
    let targets = targets(args, exe, cwd, env)?;
    if args.print {
        let mut snippets = String::new();
        for target in &targets {
            let mut document = Document::empty(target.format);
            for entry in &target.entries {
                document.merge(entry).map_err(|source| Error::Shape {
                    path: PathBuf::from("(snippet)"),
                    source,
                })?;
            }
            snippets.push_str(&format!(
                "# {}\n{}",
                target.path.display(),
                document.render()
            ));
        }
        return Ok(snippets);
    }
    apply(&targets)
}

/// The files `args` asks to change, each with its entries.
fn targets(
    args: &SetupArgs,
    exe: &Path,
    cwd: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Target>, Error> {
    let options = options(args)?;
    let program = exe.to_string_lossy().into_owned();
    let hook_options: String = options
        .iter()
        .map(|option| format!(" {}", shell_quote(option)))
        .collect();
    let hooks = Event::ALL
        .into_iter()
        .map(|event| Entry::Hook {
            agent: args.agent,
            event,
            command: format!(
                "{} hook {} {}{hook_options}",
                shell_quote(&program),
                args.agent.as_str(),
                event.as_str()
            ),
        })
        .collect();
    let hooks_file = match &args.file {
        Some(file) => file.clone(),
        None => hooks_file(args.agent, args.scope, cwd, &env)?,
    };
    let mut targets = vec![Target {
        path: hooks_file,
        format: Format::Json,
        entries: hooks,
    }];
    if !args.no_mcp {
        let (path, format, at) = mcp_file(args.agent, args.scope, cwd, &env)?;
        let mut bridge_args = vec!["mcp".to_owned()];
        bridge_args.extend(options);
        targets.push(Target {
            path,
            format,
            entries: vec![Entry::McpServer {
                at,
                program,
                args: bridge_args,
            }],
        });
    }
    Ok(targets)
}

/// The options both the hooks and the MCP bridge are run with: `--url`,
/// `--repo` and `--user` when they were given.
fn options(args: &SetupArgs) -> Result<Vec<String>, Error> {
    let mut options = Vec::new();
    if let Some(url) = args.url.as_deref().filter(|url| *url != DEFAULT_URL) {
        options.extend(["--url".to_owned(), url.to_owned()]);
    }
    for (flag, id) in [("--repo", &args.repo), ("--user", &args.user)] {
        if let Some(id) = id {
            if project::to_id(id).as_deref() != Some(id.as_str()) {
                return Err(Error::BadId(id.clone()));
            }
            options.extend([flag.to_owned(), id.clone()]);
        }
    }
    Ok(options)
}

/// The top of the git checkout holding `cwd`, or `cwd` outside one: where
/// project files live.
fn project_root(cwd: &Path) -> PathBuf {
    project::checkout_root(cwd).unwrap_or_else(|| cwd.to_path_buf())
}

fn home(env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, Error> {
    env("HOME").map(PathBuf::from).ok_or(Error::NoHome)
}

/// Codex's own directory: `CODEX_HOME`, else `~/.codex`.
fn codex_home(env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, Error> {
    match env("CODEX_HOME") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home(env)?.join(".codex")),
    }
}

fn no_local_scope(agent: Agent) -> Error {
    Error::NoSuchScope {
        agent: agent.as_str(),
        scope: "local",
    }
}

/// The file where the agent keeps its MCP servers for `scope`, its format,
/// and the keys that lead to the servers' table in it.
fn mcp_file(
    agent: Agent,
    scope: Scope,
    cwd: &Path,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(PathBuf, Format, Vec<String>), Error> {
    let servers = |key: &str| vec![key.to_owned()];
    Ok(match (agent, scope) {
        (Agent::ClaudeCode, Scope::User) => (
            home(env)?.join(".claude.json"),
            Format::Json,
            servers("mcpServers"),
        ),
        (Agent::ClaudeCode, Scope::Project) => (
            project_root(cwd).join(".mcp.json"),
            Format::Json,
            servers("mcpServers"),
        ),
        (Agent::ClaudeCode, Scope::Local) => (
            home(env)?.join(".claude.json"),
            Format::Json,
            vec![
                "projects".to_owned(),
                project_root(cwd).to_string_lossy().into_owned(),
                "mcpServers".to_owned(),
            ],
        ),
        (Agent::Codex, Scope::User) => (
            codex_home(env)?.join("config.toml"),
            Format::Toml,
            servers("mcp_servers"),
        ),
        (Agent::Codex, Scope::Project) => (
            project_root(cwd).join(".codex/config.toml"),
            Format::Toml,
            servers("mcp_servers"),
        ),
        (Agent::Codex, Scope::Local) => return Err(no_local_scope(agent)),
    })
}

/// The agent's hooks file for `scope`.
fn hooks_file(
    agent: Agent,
    scope: Scope,
    cwd: &Path,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, Error> {
    let home = || home(env);
    let project = || project_root(cwd);
    Ok(match (agent, scope) {
        (Agent::ClaudeCode, Scope::User) => home()?.join(".claude/settings.json"),
        (Agent::ClaudeCode, Scope::Project) => project().join(".claude/settings.json"),
        (Agent::ClaudeCode, Scope::Local) => project().join(".claude/settings.local.json"),
        (Agent::Codex, Scope::User) => codex_home(env)?.join("hooks.json"),
        (Agent::Codex, Scope::Project) => project().join(".codex/hooks.json"),
        (Agent::Codex, Scope::Local) => return Err(no_local_scope(agent)),
    })
}

/// Merges each target's entries into its file (created if absent), writes
/// the files that changed, and returns the report. Every file is read and
/// merged before the first is written.
fn apply(targets: &[Target]) -> Result<String, Error> {
    let mut merged = Vec::with_capacity(targets.len());
    for target in targets {
        let path = &target.path;
        let original = match fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(Error::Read {
                    path: path.clone(),
                    source,
                });
            }
        };
        let mut document = Document::parse(target.format, original.as_deref().unwrap_or(""), path)?;
        let mut lines = String::new();
        let mut changed = false;
        for entry in &target.entries {
            let change = document.merge(entry).map_err(|source| Error::Shape {
                path: path.clone(),
                source,
            })?;
            changed |= change != Change::Unchanged;
            let verb = match change {
                Change::Added => "added",
                Change::Updated => "updated",
                Change::Unchanged => "kept",
            };
            let (what, runs) = entry.describe();
            lines.push_str(&format!("  {verb:<8}{what:<17} {runs}\n"));
        }
        merged.push((target, original, document, changed, lines));
    }
    let mut report = String::new();
    for (target, original, document, changed, lines) in merged {
        let path = &target.path;
        if !changed {
            report.push_str(&format!(
                "{}: already set up, nothing changed\n{lines}",
                path.display()
            ));
            continue;
        }
        report.push_str(&format!("{}: ", path.display()));
        if let Some(original) = &original {
            let backup = backup_path(path);
            write_atomically(&backup, original)?;
            report.push_str(&format!("changed (backup: {})\n", backup.display()));
        } else {
            report.push_str("created\n");
        }
        write_atomically(path, &document.render())?;
        report.push_str(&lines);
    }
    Ok(report)
}

/// Merges one entry into a JSON `document`. The error says what shape was
/// wrong.
pub fn merge(document: &mut Value, entry: &Entry) -> Result<Change, WrongShape> {
    let root = document
        .as_object_mut()
        .ok_or_else(|| WrongShape::new("the file", "an object"))?;
    let (event, command) = match entry {
        Entry::Hook { event, command, .. } => (event, command),
        Entry::McpServer { at, program, args } => {
            return merge_json_server(root, at, program, args);
        }
    };
    let name = event.hook_event_name();
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| WrongShape::new("hooks", "an object"))?;
    let groups = hooks
        .entry(name)
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| WrongShape::new(format!("hooks.{name}"), "a list"))?;
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

/// Puts the MCP server entry under the keys `at` of a JSON document, as
/// Claude Code reads it: `{"type": "stdio", "command": …, "args": […]}`.
/// Other keys of an existing entry (an `env` added by hand) stay.
fn merge_json_server(
    root: &mut Map<String, Value>,
    at: &[String],
    program: &str,
    args: &[String],
) -> Result<Change, WrongShape> {
    let mut table = root;
    for (depth, key) in at.iter().enumerate() {
        table = table
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| WrongShape::new(at[..=depth].join("."), "an object"))?;
    }
    let wanted = json!({"type": "stdio", "command": program, "args": args});
    let Some(existing) = table.get_mut(MCP_SERVER_NAME) else {
        table.insert(MCP_SERVER_NAME.to_owned(), wanted);
        return Ok(Change::Added);
    };
    let existing = existing.as_object_mut().ok_or_else(|| {
        WrongShape::new(format!("{}.{MCP_SERVER_NAME}", at.join(".")), "an object")
    })?;
    let Value::Object(wanted) = wanted else {
        unreachable!("an object literal");
    };
    let mut change = Change::Unchanged;
    for (key, value) in wanted {
        if existing.get(&key) != Some(&value) {
            existing.insert(key, value);
            change = Change::Updated;
        }
    }
    Ok(change)
}

/// Merges one entry into a TOML document: only the MCP server goes there,
/// as Codex reads it (`[mcp_servers.engram]` with `command`, `args` and
/// the variables the bridge needs passed through, `env_vars`). Other keys
/// of an existing table stay.
fn merge_toml(document: &mut DocumentMut, entry: &Entry) -> Result<Change, WrongShape> {
    let Entry::McpServer { at, program, args } = entry else {
        return Err(WrongShape::new("the file", "JSON, for hooks"));
    };
    let mut table = document.as_table_mut();
    for (depth, key) in at.iter().enumerate() {
        let item = table.entry(key).or_insert_with(|| {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            toml_edit::Item::Table(table)
        });
        table = item
            .as_table_mut()
            .ok_or_else(|| WrongShape::new(at[..=depth].join("."), "a table"))?;
    }
    let mut change = Change::Unchanged;
    if !table.contains_key(MCP_SERVER_NAME) {
        table.insert(MCP_SERVER_NAME, toml_edit::table());
        change = Change::Added;
    }
    let server = table[MCP_SERVER_NAME]
        .as_table_mut()
        .ok_or_else(|| WrongShape::new(format!("{}.{MCP_SERVER_NAME}", at.join(".")), "a table"))?;
    let strings = |values: &[&str]| toml_edit::Array::from_iter(values.iter().copied());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let wanted = [
        ("command", toml_edit::Value::from(program)),
        ("args", toml_edit::Value::Array(strings(&args))),
        ("env_vars", toml_edit::Value::Array(strings(&MCP_ENV_VARS))),
    ];
    for (key, value) in wanted {
        let same = server
            .get(key)
            .and_then(toml_edit::Item::as_value)
            .is_some_and(|found| same_toml_value(found, &value));
        if !same {
            server.insert(key, toml_edit::value(value));
            if change == Change::Unchanged {
                change = Change::Updated;
            }
        }
    }
    Ok(change)
}

/// Whether two TOML values are equal, whatever their layout.
fn same_toml_value(a: &toml_edit::Value, b: &toml_edit::Value) -> bool {
    match (a, b) {
        (toml_edit::Value::String(a), toml_edit::Value::String(b)) => a.value() == b.value(),
        (toml_edit::Value::Array(a), toml_edit::Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(a, b)| same_toml_value(a, b))
        }
        _ => false,
    }
}

/// Whether `command` runs Engram's hook for the same agent and event as
/// `entry`: a program named `engram…` with `hook <agent> <event>` after it.
fn is_engram_hook(command: &str, entry: &Entry) -> bool {
    let Entry::Hook { agent, event, .. } = entry else {
        return false;
    };
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

/// `program args…` as a shell would take it.
fn shell_words(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
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
            Err(WrongShape::new("hooks.Stop", "a list"))
        );
        assert!(merge(&mut json!([]), &entry).is_err());
    }

    fn server(args: &[&str]) -> Entry {
        Entry::McpServer {
            at: vec!["mcp_servers".to_owned()],
            program: "/usr/bin/engram".to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        }
    }

    #[test]
    fn the_mcp_server_is_merged_into_toml_keeping_the_rest() {
        let mut document: DocumentMut = "# mine\n[mcp_servers.engram]\ncommand = \"/old/engram\"\n\
                                         startup_timeout_sec = 20\n"
            .parse()
            .unwrap();
        assert_eq!(
            merge_toml(&mut document, &server(&["mcp"])),
            Ok(Change::Updated)
        );
        let text = document.to_string();
        assert!(text.starts_with("# mine\n"), "{text}");
        assert!(text.contains("startup_timeout_sec = 20"), "{text}");
        assert!(text.contains("command = \"/usr/bin/engram\""), "{text}");
        assert_eq!(
            merge_toml(&mut document, &server(&["mcp"])),
            Ok(Change::Unchanged)
        );
        assert_eq!(
            merge_toml(&mut document, &server(&["mcp", "--repo", "forge"])),
            Ok(Change::Updated)
        );
        let mut wrong: DocumentMut = "mcp_servers = 3\n".parse().unwrap();
        assert_eq!(
            merge_toml(&mut wrong, &server(&["mcp"])),
            Err(WrongShape::new("mcp_servers", "a table"))
        );
    }

    #[test]
    fn the_mcp_server_is_merged_into_json_under_its_keys() {
        let mut document = json!({"projects": {"/p": {"mcpServers": {"docs": {"command": "d"}}}}});
        let entry = Entry::McpServer {
            at: ["projects", "/p", "mcpServers"].map(String::from).to_vec(),
            program: "engram".to_owned(),
            args: vec!["mcp".to_owned()],
        };
        assert_eq!(merge(&mut document, &entry), Ok(Change::Added));
        assert_eq!(merge(&mut document, &entry), Ok(Change::Unchanged));
        assert_eq!(
            document,
            json!({"projects": {"/p": {"mcpServers": {
                "docs": {"command": "d"},
                "engram": {"type": "stdio", "command": "engram", "args": ["mcp"]}
            }}}})
        );
    }

    #[test]
    fn odd_paths_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("/usr/bin/engram"), "/usr/bin/engram");
        assert_eq!(shell_quote("/my dir/engram"), "'/my dir/engram'");
        assert_eq!(shell_quote("/it's/engram"), r"'/it'\''s/engram'");
    }
}
