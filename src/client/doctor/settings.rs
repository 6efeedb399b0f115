//! What `engram doctor` finds of Engram in the agents' settings files, for
//! each agent and scope (the table of [`crate::client::agent`]): whose files hold one of Engram's
//! entries, whether every hook setup writes for that agent is there, and
//! whether the program each entry runs exists (a path, or a command on
//! `PATH`). The files are only read: a link is followed, and a file that
//! cannot be read or parsed is a finding.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Finding;
use crate::causes::error_chain;
use crate::client::agent::{Agent, Dirs, Event, HookLayout, McpFormat, Resolved, Scope};
use crate::client::setup::files::{self, Links};
use crate::client::setup::json_edit::{self, JsonDialect};
use crate::client::setup::merge::{self, Entry, MCP_SERVER_NAME};
use crate::client::setup::program;

/// What the agents' settings hold.
pub struct Settings {
    pub findings: Vec<Finding>,
    /// The `--url` each of Engram's entries passes; `None` for one that
    /// passes none (it calls `ENGRAM_URL`, or the default).
    pub urls: BTreeSet<Option<String>>,
}

/// One agent's Engram entries at one scope.
#[derive(Default)]
struct Found {
    /// The files that hold them.
    files: Vec<PathBuf>,
    hooks: Vec<Event>,
    /// Each entry's program and the arguments after it.
    commands: Vec<(String, Vec<String>)>,
}

/// Reads every agent's files for every scope, from `cwd`'s project.
pub fn inspect(cwd: &Path, env: &impl Fn(&str) -> Option<String>) -> Settings {
    let dirs = Dirs::new(cwd, env);
    let path_var = env("PATH");
    let mut settings = Settings {
        findings: Vec::new(),
        urls: BTreeSet::new(),
    };
    let mut seen: Vec<(Agent, PathBuf)> = Vec::new();
    for agent in Agent::ALL {
        for scope in [Scope::User, Scope::Project, Scope::Local] {
            let found = match find(agent, scope, &dirs) {
                Ok(found) => found,
                Err(finding) => {
                    settings.findings.push(finding);
                    continue;
                }
            };
            // The project's files are the user's when the project is home.
            let new = found
                .files
                .iter()
                .any(|file| !seen.contains(&(agent, file.clone())));
            if !new {
                continue;
            }
            seen.extend(found.files.iter().map(|file| (agent, file.clone())));
            for (_, args) in &found.commands {
                settings.urls.insert(url_option(args));
            }
            settings
                .findings
                .extend(judge(agent, scope, &found, &dirs, path_var.as_deref()));
        }
    }
    if seen.is_empty() {
        settings.findings.push(Finding::problem(
            "no agent's settings hold Engram's hooks or MCP server: run `engram setup <agent>` \
             (docs/agents.md)",
        ));
    }
    settings
}

/// The findings about one agent's entries at one scope.
fn judge(
    agent: Agent,
    scope: Scope,
    found: &Found,
    dirs: &Dirs,
    path_var: Option<&str>,
) -> Vec<Finding> {
    let who = format!("{} ({} scope)", agent.as_str(), scope.as_str());
    let rerun = match scope {
        Scope::User => format!("`engram setup {}`", agent.as_str()),
        _ => format!(
            "`engram setup {} --scope {}`",
            agent.as_str(),
            scope.as_str()
        ),
    };
    let mut findings = Vec::new();
    if let Some(hooks) = agent.hooks() {
        let missing: Vec<&str> = hooks
            .events
            .iter()
            .filter(|event| !found.hooks.contains(event))
            .map(|&event| hooks.name(event))
            .collect();
        if !missing.is_empty() {
            let file = agent
                .hooks_file(scope, dirs)
                .map(|path| path.display().to_string())
                .unwrap_or_default();
            findings.push(Finding::problem(format!(
                "{who}: no Engram hook for {} in {file}: run {rerun}",
                missing.join(", ")
            )));
        }
    }
    let programs: BTreeSet<&str> = found.commands.iter().map(|(p, _)| p.as_str()).collect();
    for &name in &programs {
        if program::resolve(name, path_var).is_none() {
            let where_ = if name.contains('/') {
                "which does not exist (or is not executable)"
            } else {
                "which is not on PATH"
            };
            findings.push(Finding::problem(format!(
                "{who}: Engram's entries run {name}, {where_}: run {rerun} again from the \
                 engram binary to keep (an installed one, not a build directory)"
            )));
        }
    }
    if findings.is_empty() {
        let files: Vec<String> = found
            .files
            .iter()
            .map(|file| file.display().to_string())
            .collect();
        let what = match (found.hooks.len(), found.commands.len() > found.hooks.len()) {
            (0, _) => "the MCP server".to_owned(),
            (hooks, true) => format!("{hooks} hooks and the MCP server"),
            (hooks, false) => format!("{hooks} hooks"),
        };
        let runs: Vec<&str> = programs.into_iter().collect();
        findings.push(Finding::ok(format!(
            "{who}: {what} in {}, running {}",
            files.join(" and "),
            runs.join(", ")
        )));
    }
    findings
}

/// `agent`'s Engram entries in its files for `scope` (none when it has no
/// file there); a file that cannot be read or parsed is a finding.
fn find(agent: Agent, scope: Scope, dirs: &Dirs) -> Result<Found, Finding> {
    let mut found = Found::default();
    if let Some(hooks) = agent.hooks()
        && let Ok(path) = agent.hooks_file(scope, dirs)
        && let Some(document) = read_json(&path, hooks.dialect, dirs)?
    {
        for &event in hooks.events {
            let entry = Entry::Hook {
                agent,
                event,
                command: String::new(),
            };
            let name = hooks.name(event);
            for command in hook_commands(&document, hooks.layout, name) {
                if merge::is_engram_hook(command, &entry) {
                    let (program, rest) = merge::split_command(command);
                    // `hook <agent> <event>`, then the options.
                    let options = rest.split_whitespace().skip(3).map(unquote).collect();
                    found.hooks.push(event);
                    found.commands.push((program.to_owned(), options));
                }
            }
        }
        if !found.hooks.is_empty() {
            found.files.push(path);
        }
    }
    if let Ok(file) = agent.mcp_file(scope, dirs)
        && let Some(command) = mcp_server(&file, dirs)?
    {
        if !found.files.contains(&file.path) {
            found.files.push(file.path);
        }
        found.commands.push(command);
    }
    Ok(found)
}

/// The commands of the hooks for the event `name` in a hooks document:
/// in groups (`{"hooks": [handler…]}`), or the handlers themselves, as
/// the agent's `layout` has them.
fn hook_commands<'a>(document: &'a Value, layout: HookLayout, name: &str) -> Vec<&'a str> {
    let listed = document["hooks"][name].as_array().into_iter().flatten();
    let handlers: Vec<&Value> = match layout {
        HookLayout::Versioned { .. } => listed.collect(),
        HookLayout::Grouped { .. } => listed
            .flat_map(|group| group["hooks"].as_array().into_iter().flatten())
            .collect(),
    };
    handlers
        .into_iter()
        .filter_map(|handler| handler["command"].as_str())
        .collect()
}

/// The program and arguments of the MCP server `engram` in `file`.
fn mcp_server(file: &Resolved, dirs: &Dirs) -> Result<Option<(String, Vec<String>)>, Finding> {
    let words: Vec<String> = match file.format {
        McpFormat::Json(dialect) => {
            let Some(document) = read_json(&file.path, dialect, dirs)? else {
                return Ok(None);
            };
            let server = file
                .at
                .iter()
                .fold(&document, |table, key| &table[key])
                .get(MCP_SERVER_NAME)
                .cloned()
                .unwrap_or_default();
            let strings = |value: &Value| -> Vec<String> {
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|word| word.as_str().map(str::to_owned))
                    .collect()
            };
            match &server["command"] {
                // OpenCode's: the program and its arguments in one list.
                Value::Array(_) => strings(&server["command"]),
                Value::String(program) => std::iter::once(program.clone())
                    .chain(strings(&server["args"]))
                    .collect(),
                _ => Vec::new(),
            }
        }
        McpFormat::Toml => {
            let Some(text) = read(&file.path, dirs)? else {
                return Ok(None);
            };
            let document: toml_edit::DocumentMut = text
                .parse()
                .map_err(|err: toml_edit::TomlError| unreadable(&file.path, &err.to_string()))?;
            let mut server = document.as_item();
            for key in file.at.iter().map(String::as_str).chain([MCP_SERVER_NAME]) {
                match server.get(key) {
                    Some(item) => server = item,
                    None => return Ok(None),
                }
            }
            let program = server.get("command").and_then(toml_edit::Item::as_str);
            let args = server
                .get("args")
                .and_then(toml_edit::Item::as_array)
                .into_iter()
                .flatten()
                .filter_map(|arg| arg.as_str().map(str::to_owned));
            program.map(str::to_owned).into_iter().chain(args).collect()
        }
    };
    Ok(words
        .split_first()
        .map(|(program, args)| (program.clone(), args.to_vec())))
}

/// The JSON document at `path`, `None` when there is no file.
fn read_json(path: &Path, dialect: JsonDialect, dirs: &Dirs) -> Result<Option<Value>, Finding> {
    let Some(text) = read(path, dirs)? else {
        return Ok(None);
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    json_edit::parse(&text, dialect)
        .map(Some)
        .map_err(|err| unreadable(path, &err.to_string()))
}

/// The text of the file at `path`, `None` when there is none.
fn read(path: &Path, dirs: &Dirs) -> Result<Option<String>, Finding> {
    files::read(path, Links::Follow, &dirs.project)
        .map(|found| found.existing.map(|existing| existing.text))
        .map_err(|err| {
            Finding::problem(format!(
                "{}: fix it, then run `engram setup <agent>` again",
                error_chain(&err)
            ))
        })
}

fn unreadable(path: &Path, reason: &str) -> Finding {
    Finding::problem(format!(
        "{} is not what the agent reads ({reason}): fix it, then run `engram setup <agent>` \
         again",
        path.display()
    ))
}

/// The value after `--url` among `options`, if there is one.
fn url_option(options: &[String]) -> Option<String> {
    options
        .iter()
        .position(|option| option == "--url")
        .and_then(|at| options.get(at + 1).cloned())
}

/// A word as setup wrote it, without the shell's single quotes.
fn unquote(word: &str) -> String {
    word.strip_prefix('\'')
        .and_then(|word| word.strip_suffix('\''))
        .unwrap_or(word)
        .to_owned()
}
