//! Merging Engram's entries into an agent's settings: its hooks into a
//! JSON hooks file, laid out as the agent's entry says
//! ([`HookLayout`]), and the MCP server `engram` into the agent's JSON or
//! TOML file of servers, in the shape that agent reads ([`ServerStyle`]).
//! The entries themselves ([`Entry`]) are this module's; the
//! instructions' Markdown block is merged by
//! [`instructions`](super::instructions), and a whole file is read and
//! written by [`document`](super::document).
//!
//! Only Engram's entries are touched: a hook is recognised by its command
//! (a program named `engram…` run as `hook <agent> <event>`), the MCP
//! server by its name, so one written by an older setup or another install
//! is updated in place, and every other key, hook, group and server stays
//! as it was.

use std::borrow::Cow;
use std::path::Path;

use serde_json::{Map, Value, json};
use toml_edit::DocumentMut;

use crate::client::agent::{Agent, Event, HookLayout, ServerStyle, TimeUnit};

/// The agents' own time limit for one hook run, in seconds: a backstop,
/// since `engram hook` keeps to its own, shorter budget.
const AGENT_TIMEOUT_S: u64 = 10;

/// [`AGENT_TIMEOUT_S`] in the unit the agent reads.
fn agent_timeout(unit: TimeUnit) -> u64 {
    match unit {
        TimeUnit::Seconds => AGENT_TIMEOUT_S,
        TimeUnit::Milliseconds => AGENT_TIMEOUT_S * 1000,
    }
}

/// The name the MCP server entry goes by.
pub const MCP_SERVER_NAME: &str = "engram";
/// The variables a Codex MCP server may see: Codex starts servers with a
/// short list of its own, and the bridge reads these.
const MCP_ENV_VARS: [&str; 2] = ["ENGRAM_API_KEY", "ENGRAM_URL"];

/// A place in a configuration file that does not hold what the agent
/// reads there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{at}` is not {expected}")]
pub struct WrongShape {
    at: String,
    expected: Cow<'static, str>,
}

impl WrongShape {
    pub(super) fn new(at: impl Into<String>, expected: impl Into<Cow<'static, str>>) -> Self {
        Self {
            at: at.into(),
            expected: expected.into(),
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
    /// the table of servers that the keys `at` lead to, written in `style`.
    McpServer {
        at: Vec<String>,
        program: String,
        args: Vec<String>,
        style: ServerStyle,
    },
    /// The block of instructions to use Engram's tools, in a Markdown file.
    Instructions { text: &'static str },
}

/// What merging one entry did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Added,
    Updated,
    Unchanged,
}

/// Merges one entry into a JSON `document`. The error says what shape was
/// wrong.
pub fn merge(document: &mut Value, entry: &Entry) -> Result<Change, WrongShape> {
    let root = document
        .as_object_mut()
        .ok_or_else(|| WrongShape::new("the file", "an object"))?;
    let (agent, event, command) = match entry {
        Entry::Hook {
            agent,
            event,
            command,
        } => (*agent, *event, command),
        Entry::McpServer {
            at,
            program,
            args,
            style,
        } => return merge_json_server(root, at, program, args, *style),
        Entry::Instructions { .. } => {
            return Err(WrongShape::new("the file", "Markdown, for instructions"));
        }
    };
    let hooks = agent
        .hooks()
        .ok_or_else(|| WrongShape::new("the file", "a file of hooks Engram serves"))?;
    let name = hooks.name(event);
    let timeout = match hooks.layout {
        HookLayout::Versioned { version } => {
            return merge_listed_hook(root, version, name, command, entry);
        }
        HookLayout::Grouped { timeout } => agent_timeout(timeout),
    };
    let listed = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| WrongShape::new("hooks", "an object"))?;
    let groups = listed
        .entry(name)
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| WrongShape::new(format!("hooks.{name}"), "a list"))?;
    let wanted = json!({"type": "command", "command": command, "timeout": timeout});
    let mut change = Change::Added;
    for group in groups.iter_mut() {
        let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
            continue;
        };
        keep_one_of_ours(handlers, entry, &mut change, |handler| {
            if handler["command"] == wanted["command"]
                && handler["timeout"] == wanted["timeout"]
                && handler["type"] == "command"
            {
                Change::Unchanged
            } else {
                handler["type"] = wanted["type"].clone();
                handler["command"] = wanted["command"].clone();
                handler["timeout"] = wanted["timeout"].clone();
                Change::Updated
            }
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

/// Merges one hook into a hooks file whose lists hold the handlers
/// themselves (no groups), under its `"version"` (Cursor's). A handler is
/// written with its `command` only, the one field Cursor's reference has
/// documented from the start; a `timeout` or other key added by hand stays.
fn merge_listed_hook(
    root: &mut Map<String, Value>,
    wanted_version: u64,
    name: &str,
    command: &str,
    entry: &Entry,
) -> Result<Change, WrongShape> {
    let version = root
        .entry("version")
        .or_insert_with(|| json!(wanted_version));
    if version.as_u64() != Some(wanted_version) {
        return Err(WrongShape::new("version", wanted_version.to_string()));
    }
    let handlers = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| WrongShape::new("hooks", "an object"))?
        .entry(name)
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| WrongShape::new(format!("hooks.{name}"), "a list"))?;
    let mut change = Change::Added;
    keep_one_of_ours(handlers, entry, &mut change, |handler| {
        if handler["command"] == command {
            Change::Unchanged
        } else {
            handler["command"] = json!(command);
            Change::Updated
        }
    });
    if change == Change::Added {
        handlers.push(json!({"command": command}));
    }
    Ok(change)
}

/// Keeps the first of Engram's handlers for `entry` in `handlers`, brought
/// up to date by `refresh` (which says whether it changed it), and drops
/// any other copy; others' handlers stay. `change` is `Added` until one of
/// ours is found, across calls over several lists.
fn keep_one_of_ours(
    handlers: &mut Vec<Value>,
    entry: &Entry,
    change: &mut Change,
    refresh: impl Fn(&mut Value) -> Change,
) {
    handlers.retain_mut(|handler| {
        let ours = handler["command"]
            .as_str()
            .is_some_and(|found| is_engram_hook(found, entry));
        if !ours {
            return true;
        }
        if *change != Change::Added {
            // A second copy of ours: one is enough.
            *change = Change::Updated;
            return false;
        }
        *change = refresh(handler);
        true
    });
}

/// Puts the MCP server entry under the keys `at` of a JSON document, in
/// the agent's `style`. Other keys of an existing entry (an `env` added by
/// hand) stay.
fn merge_json_server(
    root: &mut Map<String, Value>,
    at: &[String],
    program: &str,
    args: &[String],
    style: ServerStyle,
) -> Result<Change, WrongShape> {
    let mut table = root;
    for (depth, key) in at.iter().enumerate() {
        table = table
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| WrongShape::new(at[..=depth].join("."), "an object"))?;
    }
    let wanted = match style {
        ServerStyle::Typed => json!({"type": "stdio", "command": program, "args": args}),
        ServerStyle::Untyped => json!({"command": program, "args": args}),
        ServerStyle::Local => {
            let command: Vec<&str> = std::iter::once(program)
                .chain(args.iter().map(String::as_str))
                .collect();
            json!({"type": "local", "command": command, "enabled": true})
        }
    };
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
pub fn merge_toml(document: &mut DocumentMut, entry: &Entry) -> Result<Change, WrongShape> {
    let Entry::McpServer {
        at, program, args, ..
    } = entry
    else {
        return Err(WrongShape::new("the file", "JSON or Markdown"));
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
pub fn is_engram_hook(command: &str, entry: &Entry) -> bool {
    let Entry::Hook { agent, event, .. } = entry else {
        return false;
    };
    let (program, rest) = split_command(command);
    let named_engram = Path::new(program)
        .file_name()
        .is_some_and(|name| name.to_string_lossy().starts_with("engram"));
    let mut words = rest.split_whitespace();
    named_engram
        && words.next() == Some("hook")
        && words.next() == Some(agent.as_str())
        && words.next() == Some(event.as_str())
}

/// A hook's `command` as setup writes it: the program (quoted when it
/// needs to be, unquoted here) and the words after it.
pub fn split_command(command: &str) -> (&str, &str) {
    match command.strip_prefix('\'') {
        Some(quoted) => quoted.split_once('\'').unwrap_or((quoted, "")),
        None => command.split_once(' ').unwrap_or((command, "")),
    }
}

/// `text` quoted for a POSIX shell when it needs to be.
pub fn shell_quote(text: &str) -> String {
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
pub fn shell_words(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
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
            style: ServerStyle::Untyped,
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
            style: ServerStyle::Typed,
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
