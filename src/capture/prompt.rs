//! The classifier's prompt, within the model's context window
//! (`llm.context_tokens`): a trigger's new messages, the messages just
//! before them as context (at most `capture.context_tokens`), and the
//! existing memories the model may link to or supersede; counted as
//! `o200k_base` does, with room kept for the system prompt and the reply.
//!
//! When the client named the files the conversation read or edited
//! (`files` of a turn), they are listed first, for the classifier to say
//! which of them each fact is about.
//!
//! What does not fit is trimmed in this order: the memories shown (the
//! least relevant first), then the context (the oldest first), then the
//! files (all of them). New messages are never dropped: when they do not
//! all fit, this pass covers the oldest that do and the rest make the
//! next pass. Only a single message longer than the whole room is cut to
//! fit (its start kept).

use std::fmt::Write as _;
use std::sync::Arc;

use crate::capture::queue::{Kind, StoredLine, TouchedFile};
use crate::memory::Memory;
use crate::tokens;

/// Tokens kept for the model's reply: a few memories of a few lines each.
pub const REPLY_TOKENS: usize = 1024;
/// Tokens of the headings around the sections, a bound.
const HEADINGS_TOKENS: usize = 64;
/// Tokens of the separator between two messages, a bound.
const SEPARATOR_TOKENS: usize = 3;
const SEPARATOR: &str = "\n---\n";

/// The heading of the messages to classify; the fake upstream of the
/// bench reads facts only from under it.
pub const NEW_HEADING: &str = "NEW MESSAGES (classify these):";
const CONTEXT_HEADING: &str =
    "EARLIER MESSAGES (context only: already classified, propose nothing from them alone):";
/// The heading of the files the classifier may name; before the messages,
/// where no reader of the new messages looks.
pub const FILES_HEADING: &str =
    "FILES THE CONVERSATION READ OR EDITED (name in \"files\" those a repo memory is about):";

/// How large the prompt may be.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The model's whole context window (`llm.context_tokens`).
    pub context_window: usize,
    /// The most context before the new messages (`capture.context_tokens`).
    pub context: usize,
    /// The system prompt's tokens.
    pub system: usize,
}

/// One classifier pass's prompt.
#[derive(Debug)]
pub struct Prompt {
    pub text: String,
    /// The window's messages up to this index are classified by this pass.
    pub covers: usize,
    /// Memories listed.
    pub memories: usize,
    /// A new message was cut to fit.
    pub cut: bool,
}

/// The prompt of the pass over `window[first_new..]` (as much of it as
/// fits), with `files` before it, the context before it and as many of
/// `memories` (most relevant first) as fit after.
pub fn build(
    kind: Kind,
    window: &[StoredLine],
    first_new: usize,
    files: &[TouchedFile],
    memories: &[Arc<Memory>],
    limits: Limits,
) -> Prompt {
    let mut room = limits
        .context_window
        .saturating_sub(REPLY_TOKENS + HEADINGS_TOKENS + limits.system);
    let mut new = Vec::new();
    let mut cut = false;
    for line in &window[first_new..] {
        let text = render(line);
        let tokens = tokens::count(&text) + SEPARATOR_TOKENS;
        if tokens <= room {
            room -= tokens;
            new.push(text);
        } else if new.is_empty() {
            new.push(keep_start(&text, room.saturating_sub(SEPARATOR_TOKENS)));
            room = 0;
            cut = true;
        } else {
            break;
        }
    }
    let covers = first_new + new.len();

    let listed_files: String = files
        .iter()
        .map(|file| format!("- {}\n", file.path))
        .collect();
    let files_tokens = tokens::count(FILES_HEADING) + tokens::count(&listed_files) + 2;
    let listed_files = if !files.is_empty() && files_tokens <= room {
        room -= files_tokens;
        listed_files
    } else {
        String::new()
    };

    let mut context_room = room.min(limits.context);
    let mut context = Vec::new();
    for line in window[..first_new].iter().rev() {
        let text = render(line);
        let tokens = tokens::count(&text) + SEPARATOR_TOKENS;
        if tokens > context_room {
            break;
        }
        context_room -= tokens;
        room -= tokens;
        context.push(text);
    }
    context.reverse();

    let mut listed = String::new();
    let mut shown = 0;
    for memory in memories {
        let first_line = memory.content.lines().next().unwrap_or_default();
        let entry = format!(
            "- [{}] ({}/{}) {first_line}\n",
            memory.id,
            memory.namespace.scope().as_str(),
            memory.category.as_str()
        );
        let tokens = tokens::count(&entry);
        if tokens > room {
            continue;
        }
        room -= tokens;
        listed.push_str(&entry);
        shown += 1;
    }

    let mut text = format!(
        "CONVERSATION WINDOW ({} trigger):\n\n",
        match kind {
            Kind::Turn => "turn",
            Kind::Compaction => "compaction",
        }
    );
    if !listed_files.is_empty() {
        let _ = write!(text, "{FILES_HEADING}\n{listed_files}\n");
    }
    if !context.is_empty() {
        let _ = write!(text, "{CONTEXT_HEADING}\n\n{}\n\n", context.join(SEPARATOR));
    }
    let _ = write!(text, "{NEW_HEADING}\n\n{}\n", new.join(SEPARATOR));
    if !listed.is_empty() {
        let _ = write!(text, "\nEXISTING MEMORIES:\n{listed}");
    }
    Prompt {
        text,
        covers,
        memories: shown,
        cut,
    }
}

fn render(line: &StoredLine) -> String {
    format!("{}: {}", line.role, line.text)
}

/// The longest start of `text` within `tokens`, marked as cut.
fn keep_start(text: &str, tokens: usize) -> String {
    const MARK: &str = " [cut to fit the classifier's context]";
    let budget = tokens.saturating_sub(tokens::count(MARK));
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        let start: String = chars.iter().collect();
        let used = tokens::count(&start);
        if used <= budget {
            return start + MARK;
        }
        // Shrink in proportion, a little more, so a few rounds reach it.
        let keep = chars.len() * budget / used.max(1);
        chars.truncate(keep.min(chars.len() - 1) * 19 / 20);
    }
    MARK.trim_start().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Category, Namespace};

    fn line(role: &str, text: &str) -> StoredLine {
        StoredLine {
            role: role.to_owned(),
            text: text.to_owned(),
        }
    }

    fn memory(content: &str) -> Arc<Memory> {
        let forge = Namespace::Repo("forge".parse().unwrap());
        Arc::new(Memory::example(
            forge,
            Category::ProjectConventions,
            content,
        ))
    }

    /// Room for `tokens` past the system prompt, headings and reply.
    fn limits(tokens: usize, context: usize) -> Limits {
        Limits {
            context_window: REPLY_TOKENS + HEADINGS_TOKENS + 500 + tokens,
            context,
            system: 500,
        }
    }

    fn sentence(n: usize) -> String {
        format!("Message number {n} talks about the build and the tests at some length.")
    }

    #[test]
    fn new_messages_come_under_their_heading_after_their_context() {
        let window = [
            line("user", "Shall we use tabs?"),
            line("assistant", "Tabs, then."),
            line("user", "And gofumpt."),
        ];
        let memories = [memory("forge formats Go with gofmt.")];
        let prompt = build(
            Kind::Turn,
            &window,
            2,
            &[],
            &memories,
            limits(10_000, 1_000),
        );
        assert_eq!(prompt.covers, 3);
        assert_eq!(prompt.memories, 1);
        let (before, new) = prompt.text.split_once(NEW_HEADING).unwrap();
        assert!(before.contains("user: Shall we use tabs?\n---\nassistant: Tabs, then."));
        assert!(before.contains("turn trigger"));
        assert!(new.starts_with("\n\nuser: And gofumpt.\n"), "{new}");
        assert!(new.contains("EXISTING MEMORIES:\n- ["));
        assert!(!prompt.cut);

        let first = build(
            Kind::Compaction,
            &window,
            0,
            &[],
            &[],
            limits(10_000, 1_000),
        );
        assert!(
            !first.text.contains("EARLIER MESSAGES"),
            "no context before the first"
        );
        assert!(!first.text.contains("EXISTING MEMORIES"), "none to list");
    }

    #[test]
    fn memories_go_first_then_context_and_new_messages_wait_for_the_next_pass() {
        let window: Vec<StoredLine> = (0..40).map(|n| line("user", &sentence(n))).collect();
        let memories: Vec<Arc<Memory>> = (0..40)
            .map(|n| memory(&format!("Memory {n} says something durable about forge.")))
            .collect();
        let per_line = tokens::count(&render(&window[0])) + SEPARATOR_TOKENS;

        let roomy = build(
            Kind::Turn,
            &window,
            20,
            &[],
            &memories,
            limits(per_line * 40 + 2_000, per_line * 5),
        );
        assert_eq!(roomy.covers, 40);
        assert_eq!(roomy.memories, 40);
        assert_eq!(roomy.text.matches("EARLIER").count(), 1);
        assert!(
            roomy.text.contains(&sentence(15)) && !roomy.text.contains(&sentence(14)),
            "context capped at five messages"
        );

        let tight = build(
            Kind::Turn,
            &window,
            20,
            &[],
            &memories,
            limits(per_line * 23, per_line * 5),
        );
        assert_eq!(tight.covers, 40, "every new message fits");
        assert!(
            tight.memories < 5,
            "memories trimmed first: {}",
            tight.memories
        );
        assert!(
            tight.text.contains(&sentence(19)) && !tight.text.contains(&sentence(16)),
            "then the context, oldest first"
        );

        let split = build(
            Kind::Turn,
            &window,
            20,
            &[],
            &memories,
            limits(per_line * 12, per_line * 5),
        );
        assert_eq!(split.covers, 32, "the oldest new messages that fit");
        assert_eq!(split.memories, 0);
        assert!(!split.text.contains("EARLIER"));
        assert!(split.text.contains(&sentence(31)) && !split.text.contains(&sentence(32)));
        let next = build(
            Kind::Turn,
            &window,
            split.covers,
            &[],
            &memories,
            limits(per_line * 12, per_line * 5),
        );
        assert_eq!(next.covers, 40, "the next pass takes the rest");
    }

    #[test]
    fn the_files_are_listed_before_the_messages_while_they_fit() {
        let window = [line("user", "Pool connections lazily.")];
        let files: Vec<TouchedFile> = ["src/db/pool.rs", "README.md"]
            .into_iter()
            .map(|path| TouchedFile {
                path: path.parse().unwrap(),
                hash: None,
            })
            .collect();
        let prompt = build(Kind::Turn, &window, 0, &files, &[], limits(10_000, 100));
        let (before, new) = prompt.text.split_once(NEW_HEADING).unwrap();
        assert!(
            before.contains(&format!("{FILES_HEADING}\n- src/db/pool.rs\n- README.md\n")),
            "{before}"
        );
        assert!(!new.contains("pool.rs"), "{new}");

        let message = tokens::count(&render(&window[0])) + SEPARATOR_TOKENS;
        let tight = build(
            Kind::Turn,
            &window,
            0,
            &files,
            &[],
            limits(message + 5, 100),
        );
        assert_eq!(tight.covers, 1, "the message before the files");
        assert!(!tight.text.contains(FILES_HEADING), "{}", tight.text);
    }

    #[test]
    fn a_message_longer_than_the_room_is_cut_to_fit() {
        let long = "word ".repeat(5_000);
        let window = [
            line("user", "short"),
            line("user", &long),
            line("user", "after"),
        ];
        let limits = limits(1_000, 100);
        let prompt = build(Kind::Turn, &window, 1, &[], &[], limits);
        assert!(prompt.cut);
        assert_eq!(prompt.covers, 2, "the cut message alone");
        assert!(
            prompt
                .text
                .contains("[cut to fit the classifier's context]")
        );
        let total = limits.system + tokens::count(&prompt.text) + REPLY_TOKENS;
        assert!(
            total <= limits.context_window,
            "{total} > {}",
            limits.context_window
        );
    }
}
