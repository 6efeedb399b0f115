//! Agent transcripts (JSON Lines files) reduced to the window: the user
//! and assistant text since the last compaction, in order, with tool calls,
//! tool results, reasoning and agent-injected lines left out.
//!
//! Neither agent publishes its transcript as a format; what is read here is
//! the shape their transcripts have, read tolerantly. A line that does not
//! parse (the one being written, say) or that holds nothing we know is
//! skipped, never an error.
//!
//! - Claude Code: one JSON object per line. `type` `user` or `assistant`
//!   lines carry `message.role` and `message.content` (a string, or blocks
//!   of which only `type: text` ones are read; `tool_use`, `tool_result`,
//!   `thinking` and images are not). Lines marked `isSidechain` (subagents)
//!   or `isMeta` (injected by the CLI) are skipped. A compaction leaves a
//!   `type: system, subtype: compact_boundary` line and a user line with
//!   `isCompactSummary: true` holding the summary: both start a new window.
//! - Codex: one `{type, payload}` object per line. `event_msg` lines with
//!   `payload.type` `user_message` or `agent_message` hold what the user
//!   typed and what the agent answered (`payload.message`); the model-level
//!   `response_item` lines are not read, since Codex also files its own
//!   instructions there under the user role. A `compacted` line starts a
//!   new window.
//! - Gemini CLI: records that add, replace and rewind messages by id
//!   ([`gemini`]). Its compressions leave no mark in the transcript, so
//!   its window is the whole session, cut to [`MAX_WINDOW_BYTES`] from its
//!   end like any other.
//!
//! Beside the window, the hook reads which files the window's tool calls
//! read or edited ([`tools`]), for capture to anchor its memories to.

pub mod gemini;
pub mod tools;

use std::io;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::bounded::{self, Tail};

/// The most transcript read, from its end: older text cannot matter once
/// the window is cut to [`MAX_WINDOW_BYTES`], and a long session's
/// transcript (tool output included) can be far larger. Sixteen windows'
/// worth leaves room for the tool output between the messages, and reads
/// and parses in a small part of the hook's time budget.
const MAX_TRANSCRIPT_BYTES: u64 = 8 * 1024 * 1024;

/// The most window text sent to Engram, kept from the end, well inside the
/// server's default 1 MiB body limit.
pub const MAX_WINDOW_BYTES: usize = 512 * 1024;

/// Whose transcript this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    ClaudeCode,
    Codex,
    Gemini,
}

/// Who said a message of the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// One message of the window, reduced to its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub text: String,
    /// When it was written, where the transcript says (each agent stamps
    /// its lines with an RFC 3339 `timestamp`); for joined messages, the
    /// last part's.
    pub at: Option<DateTime<Utc>>,
}

/// When the latest message of `window` that says so was written: when
/// the conversation took place, for what is captured from it.
pub fn latest_time(window: &[Message]) -> Option<DateTime<Utc>> {
    window.iter().filter_map(|message| message.at).max()
}

/// The time an entry of a transcript is stamped with, if it is one.
pub fn stamped(entry: &Value) -> Option<DateTime<Utc>> {
    let text = entry["timestamp"].as_str()?;
    Some(DateTime::parse_from_rfc3339(text).ok()?.to_utc())
}

/// What the hook reads of a transcript.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// The messages since the last compaction ([`parse`]).
    pub window: Vec<Message>,
    /// The files the tool calls since the last compaction read or
    /// edited, as they named them, in the order they did (a file may come
    /// again).
    pub files: Vec<String>,
}

/// The transcript at `path`: its last [`MAX_TRANSCRIPT_BYTES`] read (a
/// regular file only, see [`bounded`]), reduced by [`parse`].
pub fn read(path: &Path, format: Format) -> io::Result<Read> {
    let Tail { mut bytes, cut } = bounded::read_tail(path, MAX_TRANSCRIPT_BYTES)?;
    if cut {
        // The first line starts somewhere before the tail: drop it.
        let start = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..start);
    }
    Ok(parse(&String::from_utf8_lossy(&bytes), format))
}

/// A transcript's text since the last compaction: its messages,
/// consecutive ones of the same role joined, cut to [`MAX_WINDOW_BYTES`],
/// and the files its tool calls named.
pub fn parse(transcript: &str, format: Format) -> Read {
    let mut messages: Vec<Message> = Vec::new();
    let mut files = Vec::new();
    if format == Format::Gemini {
        let (said, named) = gemini::read(transcript);
        for message in said {
            push(&mut messages, message.role, &message.text, message.at);
        }
        return Read {
            window: cut_to_budget(messages, MAX_WINDOW_BYTES),
            files: named,
        };
    }
    for line in transcript.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match read_line(&entry, format) {
            Line::Compaction => {
                messages.clear();
                files.clear();
            }
            Line::Message(role, text) => push(&mut messages, role, &text, stamped(&entry)),
            Line::Other => {}
        }
        files.extend(tools::files(&entry, format));
    }
    Read {
        window: cut_to_budget(messages, MAX_WINDOW_BYTES),
        files,
    }
}

/// Every user and assistant message of a transcript's text, across its
/// compactions (a compaction's summary is not a message), consecutive ones
/// of the same role joined; each with the byte offset just past the last
/// line it holds, so that a reader can resume after it. Only complete
/// lines (ending in a newline) are read: the last one may still be being
/// written. Claude Code's and Codex's transcripts only: Gemini CLI's
/// cannot be resumed by offset, since a later record may rewrite an
/// earlier message.
pub fn messages(transcript: &str, format: Format) -> Vec<(Message, usize)> {
    let mut messages: Vec<Message> = Vec::new();
    let mut ends = Vec::new();
    let mut offset = 0;
    for line in transcript.split_inclusive('\n') {
        if !line.ends_with('\n') {
            break;
        }
        offset += line.len();
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Line::Message(role, text) = read_line(&entry, format) {
            push(&mut messages, role, &text, stamped(&entry));
            ends.resize(messages.len(), offset);
            if let Some(end) = ends.last_mut() {
                *end = offset;
            }
        }
    }
    messages.into_iter().zip(ends).collect()
}

/// The byte offset just past the last complete line of `transcript`.
pub fn complete_lines_end(transcript: &str) -> usize {
    transcript.rfind('\n').map_or(0, |i| i + 1)
}

/// What one transcript line means for the window.
enum Line {
    Compaction,
    Message(Role, String),
    Other,
}

/// What a line's `entry` means, read as `format` has it.
fn read_line(entry: &Value, format: Format) -> Line {
    match format {
        Format::ClaudeCode => claude_code_line(entry),
        Format::Codex => codex_line(entry),
        // Its records replace one another, so a line alone says nothing
        // sure: its transcripts are read whole ([`gemini::messages`]).
        Format::Gemini => Line::Other,
    }
}

fn claude_code_line(entry: &Value) -> Line {
    let is = |flag: &str| entry[flag].as_bool() == Some(true);
    if (entry["type"] == "system" && entry["subtype"] == "compact_boundary")
        || is("isCompactSummary")
    {
        return Line::Compaction;
    }
    if is("isSidechain") || is("isMeta") {
        return Line::Other;
    }
    let role = match entry["type"].as_str() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        _ => return Line::Other,
    };
    let text = match &entry["message"]["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Line::Other,
    };
    // Slash commands and their local output are echoed as user lines
    // wrapped in the CLI's own tags: not something the user said.
    let trimmed = text.trim_start();
    if trimmed.starts_with("<command-") || trimmed.starts_with("<local-command-") {
        return Line::Other;
    }
    Line::Message(role, text)
}

fn codex_line(entry: &Value) -> Line {
    match entry["type"].as_str() {
        Some("compacted") => Line::Compaction,
        Some("event_msg") => {
            let payload = &entry["payload"];
            let role = match payload["type"].as_str() {
                Some("user_message") => Role::User,
                Some("agent_message") => Role::Assistant,
                _ => return Line::Other,
            };
            match payload["message"].as_str() {
                Some(text) => Line::Message(role, text.to_owned()),
                None => Line::Other,
            }
        }
        _ => Line::Other,
    }
}

/// Appends `text` as a message of `role` written `at`, joined to the
/// previous message when it has the same role (an answer written in
/// several pieces).
fn push(messages: &mut Vec<Message>, role: Role, text: &str, at: Option<DateTime<Utc>>) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some(last) if last.role == role => {
            last.text.push_str("\n\n");
            last.text.push_str(text);
            last.at = at.or(last.at);
        }
        _ => messages.push(Message {
            role,
            text: text.to_owned(),
            at,
        }),
    }
}

/// The newest messages whose text fits in `budget` bytes; the oldest one
/// kept may be cut to its end.
pub fn cut_to_budget(messages: Vec<Message>, budget: usize) -> Vec<Message> {
    let mut kept = Vec::new();
    let mut used = 0;
    for mut message in messages.into_iter().rev() {
        let left = budget - used;
        if left == 0 {
            break;
        }
        if message.text.len() > left {
            let mut cut = message.text.len() - left;
            while !message.text.is_char_boundary(cut) {
                cut += 1;
            }
            message.text.drain(..cut);
        }
        used += message.text.len();
        kept.push(message);
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            text: text.to_owned(),
            at: None,
        }
    }

    fn assistant(text: &str) -> Message {
        Message {
            role: Role::Assistant,
            text: text.to_owned(),
            at: None,
        }
    }

    #[test]
    fn each_message_keeps_its_time_and_a_joined_one_its_last_part_s() {
        let transcript = [
            r#"{"type":"user","timestamp":"2026-11-23T10:00:00.000Z","message":{"role":"user","content":"Use tabs."}}"#,
            r#"{"type":"assistant","timestamp":"2026-11-23T10:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Will do."}]}}"#,
            r#"{"type":"assistant","timestamp":"2026-11-23T10:00:09.500+01:00","message":{"role":"assistant","content":[{"type":"text","text":"Done."}]}}"#,
            r#"{"type":"user","timestamp":"yesterday","message":{"role":"user","content":"Thanks."}}"#,
        ]
        .join("\n");
        let window = parse(&transcript, Format::ClaudeCode).window;
        let at = |text: &str| Some(DateTime::parse_from_rfc3339(text).unwrap().to_utc());
        let times: Vec<_> = window.iter().map(|message| message.at).collect();
        assert_eq!(
            times,
            [
                at("2026-11-23T10:00:00Z"),
                at("2026-11-23T09:00:09.5Z"),
                None
            ]
        );
        assert_eq!(latest_time(&window), at("2026-11-23T10:00:00Z"));
        let codex = r#"{"timestamp":"2026-11-23T12:00:03.000Z","type":"event_msg","payload":{"type":"user_message","message":"Hi."}}"#;
        assert_eq!(
            latest_time(&parse(codex, Format::Codex).window),
            at("2026-11-23T12:00:03Z")
        );
        let gemini = r#"{"id":"a","timestamp":"2026-11-26T23:19:45.000Z","type":"user","content":[{"text":"Hi."}]}"#;
        assert_eq!(
            latest_time(&parse(gemini, Format::Gemini).window),
            at("2026-11-26T23:19:45Z")
        );
        assert_eq!(latest_time(&[user("no time")]), None);
    }

    #[test]
    fn claude_code_keeps_text_and_drops_tools_meta_and_sidechains() {
        let transcript = [
            r#"{"type":"user","message":{"role":"user","content":"Use tabs."}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Will do."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"SECRET TOOL OUTPUT"}]}}"#,
            r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: injected"}}"#,
            r#"{"type":"assistant","isSidechain":true,"message":{"role":"assistant","content":[{"type":"text","text":"subagent"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":"<command-name>/clear</command-name>"}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Done."}]}}"#,
            r#"{"type":"user","message":{"role":"user","con"#,
        ]
        .join("\n");
        assert_eq!(
            parse(&transcript, Format::ClaudeCode).window,
            vec![user("Use tabs."), assistant("Will do.\n\nDone.")]
        );
    }

    #[test]
    fn claude_code_window_starts_after_the_last_compaction() {
        let transcript = [
            r#"{"type":"user","message":{"role":"user","content":"old"}}"#,
            r#"{"type":"system","subtype":"compact_boundary","content":"Conversation compacted"}"#,
            r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued..."}}"#,
            r#"{"type":"user","message":{"role":"user","content":"new"}}"#,
        ]
        .join("\n");
        assert_eq!(
            parse(&transcript, Format::ClaudeCode).window,
            vec![user("new")]
        );
    }

    #[test]
    fn codex_reads_the_event_stream_after_the_last_compaction() {
        let transcript = [
            r#"{"type":"event_msg","payload":{"type":"user_message","message":"old"}}"#,
            r#"{"type":"compacted","payload":{"message":"summary"}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]}}"#,
            r#"{"type":"event_msg","payload":{"type":"user_message","message":"Use tabs."}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}"}}"#,
            r#"{"type":"event_msg","payload":{"type":"exec_command_end","stdout":"TOOL"}}"#,
            r#"{"type":"event_msg","payload":{"type":"agent_message","message":"Will do."}}"#,
        ]
        .join("\n");
        assert_eq!(
            parse(&transcript, Format::Codex).window,
            vec![user("Use tabs."), assistant("Will do.")]
        );
    }

    #[test]
    fn messages_span_compactions_and_end_at_their_last_line() {
        let lines = [
            r#"{"type":"user","message":{"role":"user","content":"old"}}"#,
            r#"{"type":"system","subtype":"compact_boundary","content":"Conversation compacted"}"#,
            r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"summary"}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"a"}]}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"b"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":"half-writ"#,
        ];
        let transcript = lines.join("\n");
        let ends: Vec<usize> = lines
            .iter()
            .scan(0, |end, line| {
                *end += line.len() + 1;
                Some(*end)
            })
            .collect();
        assert_eq!(
            messages(&transcript, Format::ClaudeCode),
            vec![(user("old"), ends[0]), (assistant("a\n\nb"), ends[4])]
        );
        assert_eq!(complete_lines_end(&transcript), ends[4]);
    }

    #[test]
    fn a_long_window_keeps_its_end_within_the_budget() {
        let messages = vec![user("aaaa"), assistant("bbbb"), user("éééé")];
        let cut = cut_to_budget(messages, 11);
        assert_eq!(cut, vec![assistant("bbb"), user("éééé")], "é is two bytes");
        let cut = cut_to_budget(vec![user("éé")], 3);
        assert_eq!(cut, vec![user("é")], "never splits a character");
    }

    proptest! {
        #[test]
        fn any_transcript_reads_without_panicking(text in ".*", budget in 0usize..64) {
            let messages = parse(&text, Format::ClaudeCode).window;
            let _ = parse(&text, Format::Codex);
            let cut = cut_to_budget(messages, budget);
            prop_assert!(cut.iter().map(|m| m.text.len()).sum::<usize>() <= budget);
        }
    }
}
