//! The files an agent's tool calls read or edited, as a transcript names
//! them (absolute, or relative to the agent's working directory): what
//! capture may anchor the turn's memories to. Only the tools that take a
//! file are read; a shell command's files are not guessed at.
//!
//! - Claude Code: an assistant line's `tool_use` blocks of `Read`, `Edit`,
//!   `MultiEdit` and `Write` (`input.file_path`) and `NotebookEdit`
//!   (`input.notebook_path`); subagents' lines (`isSidechain`) are not
//!   the conversation's and are skipped, as for the window.
//! - Codex: its patches (`apply_patch`, called as a tool of its own or
//!   through the shell): the files a patch adds or updates, and where it
//!   moves one (`*** Add File:`, `*** Update File:`, `*** Move to:`), in
//!   any string of a `response_item`'s tool call.
//! - Gemini CLI: a message record's `toolCalls` of `read_file`,
//!   `write_file` and `replace` (`args.file_path`, or `absolute_path` or
//!   `path` as older versions call it).

use serde_json::Value;

use super::Format;

/// Claude Code's tools that take a file.
const CLAUDE_CODE_TOOLS: [&str; 5] = ["Read", "Edit", "MultiEdit", "Write", "NotebookEdit"];

/// Gemini CLI's tools that take a file.
const GEMINI_TOOLS: [&str; 3] = ["read_file", "write_file", "replace"];

/// The lines of a Codex patch that name a file it leaves in the tree.
const PATCH_HEADERS: [&str; 3] = ["*** Add File: ", "*** Update File: ", "*** Move to: "];

/// The files a transcript line's `entry` names in its tool calls, read
/// as `format` has it. Gemini CLI's records are read by [`gemini_files`].
pub fn files(entry: &Value, format: Format) -> Vec<String> {
    match format {
        Format::ClaudeCode => claude_code_files(entry),
        Format::Codex => codex_files(entry),
        // Its records replace one another: read whole, by
        // [`super::gemini::read`].
        Format::Gemini => Vec::new(),
    }
}

fn claude_code_files(entry: &Value) -> Vec<String> {
    if entry["type"] != "assistant" || entry["isSidechain"] == true {
        return Vec::new();
    }
    let Some(blocks) = entry["message"]["content"].as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|block| block["type"] == "tool_use")
        .filter(|block| {
            block["name"]
                .as_str()
                .is_some_and(|name| CLAUDE_CODE_TOOLS.contains(&name))
        })
        .filter_map(|block| {
            let input = &block["input"];
            input["file_path"]
                .as_str()
                .or_else(|| input["notebook_path"].as_str())
        })
        .map(str::to_owned)
        .collect()
}

fn codex_files(entry: &Value) -> Vec<String> {
    let payload = &entry["payload"];
    let is_call = matches!(
        payload["type"].as_str(),
        Some("custom_tool_call" | "function_call" | "local_shell_call")
    );
    if entry["type"] != "response_item" || !is_call {
        return Vec::new();
    }
    let mut files = Vec::new();
    let mut texts = Vec::new();
    strings(payload, &mut texts);
    for text in texts {
        // A function call's arguments are JSON in a string.
        match serde_json::from_str::<Value>(&text) {
            Ok(arguments @ (Value::Object(_) | Value::Array(_))) => {
                let mut inner = Vec::new();
                strings(&arguments, &mut inner);
                inner.iter().for_each(|text| patched(text, &mut files));
            }
            _ => patched(&text, &mut files),
        }
    }
    files
}

/// Every string `value` holds, however deep.
fn strings(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(text) => into.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings(item, into)),
        Value::Object(object) => object.values().for_each(|item| strings(item, into)),
        _ => {}
    }
}

/// The files a patch's headers leave in the tree, appended to `files`.
fn patched(text: &str, files: &mut Vec<String>) {
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(path) = PATCH_HEADERS
            .iter()
            .find_map(|header| line.strip_prefix(header))
            .map(str::trim)
            .filter(|path| !path.is_empty())
        {
            files.push(path.to_owned());
        }
    }
}

/// The files a Gemini CLI message record's tool calls name.
pub fn gemini_files(record: &Value) -> Vec<String> {
    let Some(calls) = record["toolCalls"].as_array() else {
        return Vec::new();
    };
    calls
        .iter()
        .filter(|call| {
            call["name"]
                .as_str()
                .is_some_and(|name| GEMINI_TOOLS.contains(&name))
        })
        .filter_map(|call| {
            let args = &call["args"];
            ["file_path", "absolute_path", "path"]
                .into_iter()
                .find_map(|key| args[key].as_str())
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::client::hook::transcript::{gemini, parse};

    #[test]
    fn claude_code_names_the_files_of_its_file_tools_since_the_compaction() {
        let lines = [
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "name": "Read", "input": {"file_path": "/w/forge/old.rs"}}]}}),
            json!({"type": "system", "subtype": "compact_boundary"}),
            json!({"type": "assistant", "message": {"content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "name": "Read", "input": {"file_path": "/w/forge/src/pool.rs"}},
                {"type": "tool_use", "name": "Bash", "input": {"command": "cat src/x.rs"}},
                {"type": "tool_use", "name": "Grep", "input": {"path": "src"}}]}}),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "Read /w/forge/secret.rs"}]}}),
            json!({"type": "assistant", "isSidechain": true, "message": {"content": [
                {"type": "tool_use", "name": "Read", "input": {"file_path": "/w/forge/sub.rs"}}]}}),
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "name": "Edit", "input": {"file_path": "src/lib.rs"}},
                {"type": "tool_use", "name": "MultiEdit", "input": {"file_path": "/w/forge/a.rs"}},
                {"type": "tool_use", "name": "Write", "input": {"file_path": "/w/forge/b.rs"}},
                {"type": "tool_use", "name": "NotebookEdit", "input": {"notebook_path": "/w/forge/n.ipynb"}}]}}),
        ];
        let transcript: Vec<String> = lines.iter().map(Value::to_string).collect();
        let read = parse(&transcript.join("\n"), Format::ClaudeCode);
        assert_eq!(
            read.files,
            [
                "/w/forge/src/pool.rs",
                "src/lib.rs",
                "/w/forge/a.rs",
                "/w/forge/b.rs",
                "/w/forge/n.ipynb"
            ]
        );
    }

    #[test]
    fn codex_names_the_files_its_patches_leave() {
        let patch = "*** Begin Patch\n*** Update File: src/pool.rs\n@@\n-lazy\n+eager\n\
                     *** Add File: docs/pool.md\n+# Pool\n*** Delete File: src/old.rs\n\
                     *** Update File: src/a.rs\n*** Move to: src/b.rs\n*** End Patch";
        let shell = json!({"command": ["apply_patch", patch]}).to_string();
        let lines = [
            json!({"type": "response_item", "payload": {"type": "custom_tool_call",
                "name": "apply_patch", "input": patch}}),
            json!({"type": "response_item", "payload": {"type": "function_call",
                "name": "shell", "arguments": shell}}),
            json!({"type": "response_item", "payload": {"type": "function_call",
                "name": "shell", "arguments": "{\"command\":[\"cat\",\"src/x.rs\"]}"}}),
            json!({"type": "event_msg", "payload": {"type": "agent_message",
                "message": "*** Update File: said.rs"}}),
        ];
        let transcript: Vec<String> = lines.iter().map(Value::to_string).collect();
        let read = parse(&transcript.join("\n"), Format::Codex);
        let once = ["src/pool.rs", "docs/pool.md", "src/a.rs", "src/b.rs"];
        assert_eq!(read.files, [once, once].concat());
    }

    #[test]
    fn gemini_names_the_files_of_its_file_tools_over_every_version_of_a_record() {
        let transcript = [
            json!({"id": "u1", "type": "user", "content": "Look at the pool."}),
            json!({"id": "g1", "type": "gemini", "content": "", "toolCalls": [
                {"name": "read_file", "args": {"absolute_path": "/w/forge/src/pool.rs"}},
                {"name": "grep_search", "args": {"pattern": "lazy"}}]}),
            json!({"id": "g1", "type": "gemini", "content": "Done.", "toolCalls": [
                {"name": "replace", "args": {"file_path": "/w/forge/src/pool.rs"}},
                {"name": "write_file", "args": {"file_path": "/w/forge/NOTES.md"}}]}),
            json!({"id": "g2", "type": "gemini", "content": "", "toolCalls": [
                {"name": "read_file", "args": {"path": "/w/forge/rewound.rs"}}]}),
            json!({"$rewindTo": "g2"}),
        ];
        let lines: Vec<String> = transcript.iter().map(Value::to_string).collect();
        let (messages, files) = gemini::read(&lines.join("\n"));
        assert_eq!(messages.len(), 2);
        assert_eq!(files, ["/w/forge/src/pool.rs", "/w/forge/NOTES.md"]);
    }

    proptest! {
        #[test]
        fn any_line_reads_without_panicking(text in ".*") {
            for format in [Format::ClaudeCode, Format::Codex, Format::Gemini] {
                let _ = parse(&text, format);
            }
            patched(&text, &mut Vec::new());
        }
    }
}
