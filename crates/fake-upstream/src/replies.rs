//! What the fake answers when no test scripted a reply: a plausible
//! classifier or HyDE reply built from the prompt, the bench's
//! fact-per-sentence classifier, and the `usage` it reports.

use serde_json::{Value, json};

use crate::Usage;

/// A plausible reply: the classifier gets a JSON array with one memory,
/// HyDE a list of three hypotheses, each made of the conversation's last
/// user line.
pub(crate) fn reply_from_prompt(system: &str, prompt: &str) -> String {
    let last_line = prompt
        .lines()
        .rev()
        .find(|line| line.starts_with("user: "))
        .unwrap_or("user: nothing")
        .trim_start_matches("user: ");
    if system.contains("memory classifier") {
        json!([{"content": format!("The team agreed: {last_line}"), "scope": "repo",
            "category": "project-conventions"}])
        .to_string()
    } else {
        format!("1. {last_line}\n2. The team decided: {last_line}\n3. The user prefers {last_line}")
    }
}

/// The `usage` the fake reports for the texts `received` and its `reply`:
/// a token per four characters (rounded up) of each.
pub fn usage_of(received: &[&str], reply: &str) -> Value {
    let usage = counted(received, reply);
    json!({"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens})
}

/// One call's [`Usage`].
pub(crate) fn counted(received: &[&str], reply: &str) -> Usage {
    Usage {
        calls: 1,
        prompt_tokens: received.iter().map(|text| tokens(text)).sum(),
        completion_tokens: tokens(reply),
    }
}

/// `text`'s tokens as the fake counts them: a token per four characters.
fn tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(4) as u64
}

/// The words that mark a sentence as a fact, and the memory it makes.
const FACT_CUES: [(&str, &str, &str); 7] = [
    ("i prefer", "user", "coding-preferences"),
    ("we decided", "repo", "architectural-decisions"),
    ("actually,", "repo", "corrections"),
    ("from now on", "repo", "project-conventions"),
    ("always", "repo", "project-conventions"),
    ("never", "repo", "project-conventions"),
    ("convention", "repo", "project-conventions"),
];

/// The bench's classifier: one memory per fact sentence (one with a word
/// of [`FACT_CUES`]) of the user messages it is asked to classify: those
/// under the prompt's `NEW MESSAGES` heading when it has one, else the
/// whole conversation; a fact the prompt lists among its existing
/// memories is not proposed again, as a model would not.
pub(crate) fn facts_reply(prompt: &str) -> String {
    let (conversation, existing) = prompt
        .split_once("\nEXISTING MEMORIES:")
        .unwrap_or((prompt, ""));
    let asked = conversation
        .split_once("\nNEW MESSAGES")
        .map_or(conversation, |(_, new)| new);
    let mut memories = Vec::new();
    for message in asked.split("\n---\n") {
        let Some(text) = message.lines().find_map(|line| line.strip_prefix("user: ")) else {
            continue;
        };
        for sentence in text.split(". ") {
            let sentence = sentence.trim().trim_end_matches('.');
            let lower = sentence.to_lowercase();
            let Some((_, scope, category)) =
                FACT_CUES.iter().find(|(cue, _, _)| lower.contains(cue))
            else {
                continue;
            };
            let content = format!("{sentence}.");
            if !existing.contains(&content) {
                memories.push(json!({"content": content, "scope": scope, "category": category}));
            }
        }
    }
    json!({"memories": memories}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_from_the_messages_to_classify_and_not_from_known_memories() {
        let whole = "CONVERSATION WINDOW (turn trigger):\n\nuser: Hello. I prefer tabs.\n---\nassistant: We decided nothing.\n---\nuser: From now on, run clippy. Thanks.\n";
        let read: Value = serde_json::from_str(&facts_reply(whole)).unwrap();
        let contents: Vec<&str> = read["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|memory| memory["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents, ["I prefer tabs.", "From now on, run clippy."]);

        let delta = "CONVERSATION WINDOW (turn trigger):\n\nEARLIER MESSAGES (context):\n\nuser: I prefer tabs.\n\nNEW MESSAGES (classify these):\n\nuser: We decided to use NATS.\n---\nuser: Never push on Fridays.\n\nEXISTING MEMORIES:\n- [x] (repo/project-conventions) Never push on Fridays.\n";
        let read: Value = serde_json::from_str(&facts_reply(delta)).unwrap();
        assert_eq!(
            read["memories"],
            json!([{"content": "We decided to use NATS.", "scope": "repo", "category": "architectural-decisions"}])
        );
    }

    #[test]
    fn usage_counts_a_token_per_four_characters() {
        assert_eq!(tokens(""), 0);
        assert_eq!(tokens("abcd"), 1);
        assert_eq!(tokens("abcde"), 2);
    }
}
