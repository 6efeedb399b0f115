//! The instructions an agent without Engram hooks gets: a block in its
//! instructions file (AGENTS.md, a Cursor rule, a VS Code
//! instructions file) that tells the model to call Engram's MCP tools,
//! since no hook injects memories or hands turns to capture for it.
//!
//! The block sits between two HTML comments, which Markdown renders as
//! nothing; only what is between them is Engram's. A file without the
//! block gets it at its end, after a blank line; a file whose block says
//! something else gets the block's inside replaced. Every byte outside
//! the markers stays.

use super::merge::{Change, Entry, WrongShape};

/// The line that opens Engram's block.
pub const BEGIN: &str =
    "<!-- engram:begin (written by `engram setup`; edits inside are replaced) -->";
/// The line that closes it.
pub const END: &str = "<!-- engram:end -->";

/// What the report says the block is.
pub const DESCRIPTION: &str = "when to call Engram's recall and remember tools";

/// The block's inside: what to recall, what to remember, and how.
pub const TEXT: &str = "\
## Long-term memory (Engram)

Engram keeps memories across sessions, through the MCP server `engram`.

- Before you start a task, call its `recall` tool with what the task is about
  (`query`), and follow the project conventions, decisions and preferences
  it returns.
- When the user states a preference or a project convention, makes a
  decision (and why), or corrects you, save it with `remember`: one fact per
  memory, scope `repo` for this project, `user` for the person. If a memory
  already says it, call `update_memory` instead.
- Do not remember what the code or git history already records, and never
  secrets.
";

/// Merges the instructions `entry` into the Markdown `text`.
pub fn merge(text: &mut String, entry: &Entry) -> Result<Change, WrongShape> {
    let Entry::Instructions { text: wanted } = entry else {
        return Err(WrongShape::new("the file", "JSON or TOML, for settings"));
    };
    let block = format!("{BEGIN}\n{wanted}{END}\n");
    let Some(begin) = text.find(BEGIN) else {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if !text.trim().is_empty() && !text.ends_with("\n\n") {
            text.push('\n');
        }
        text.push_str(&block);
        return Ok(Change::Added);
    };
    let end = text[begin..]
        .find(END)
        .map(|at| begin + at + END.len())
        .ok_or_else(|| WrongShape::new(BEGIN, "closed by its end marker"))?;
    let end = if text[end..].starts_with('\n') {
        end + 1
    } else {
        end
    };
    if text[begin..end] == block {
        return Ok(Change::Unchanged);
    }
    text.replace_range(begin..end, &block);
    Ok(Change::Updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(text: &str) -> (String, Change) {
        let mut text = text.to_owned();
        let change = merge(&mut text, &Entry::Instructions { text: TEXT }).unwrap();
        (text, change)
    }

    #[test]
    fn the_block_is_added_after_the_text_and_then_kept() {
        let (written, change) = merged("# Team\n\nUse tabs.");
        assert_eq!(change, Change::Added);
        assert_eq!(
            written,
            format!("# Team\n\nUse tabs.\n\n{BEGIN}\n{TEXT}{END}\n")
        );
        let (again, change) = merged(&written);
        assert_eq!(change, Change::Unchanged);
        assert_eq!(again, written);
        assert_eq!(merged("").0, format!("{BEGIN}\n{TEXT}{END}\n"));
    }

    #[test]
    fn an_edited_block_is_replaced_and_the_rest_kept() {
        let old = format!("intro\n{BEGIN}\nold words\n{END}\noutro\n");
        let (written, change) = merged(&old);
        assert_eq!(change, Change::Updated);
        assert_eq!(written, format!("intro\n{BEGIN}\n{TEXT}{END}\noutro\n"));
        let mut open = format!("intro\n{BEGIN}\nno end");
        assert!(merge(&mut open, &Entry::Instructions { text: TEXT }).is_err());
    }
}
