//! Reading hypotheses out of a model's reply, whatever shape it takes:
//! one per line, numbered (`1.`, `1)`, `(1)`), bulleted (`-`, `*`, `•`),
//! quoted, inside code fences, after a preamble such as "Here are three:",
//! or as a JSON array of strings.

/// The longest hypothesis kept, in characters; longer lines are prose, not
/// memory-like statements.
const MAX_HYPOTHESIS_CHARS: usize = 500;

/// Up to `max` distinct hypotheses (compared case-insensitively), in order.
pub fn parse_hypotheses(reply: &str, max: usize) -> Vec<String> {
    let candidates = json_strings(reply).unwrap_or_else(|| lines(reply));
    let mut seen = std::collections::HashSet::new();
    candidates
        .into_iter()
        .map(|line| clean(&line))
        .filter(|line| !line.is_empty() && line.chars().count() <= MAX_HYPOTHESIS_CHARS)
        .filter(|line| seen.insert(line.to_lowercase()))
        .take(max)
        .collect()
}

/// The strings of a JSON array in the reply, fenced or bare (an empty
/// array means the model found nothing).
fn json_strings(reply: &str) -> Option<Vec<String>> {
    let items = crate::llm::reply::find_json_array(reply)?;
    Some(
        items
            .into_iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect(),
    )
}

/// The reply's lines, without fences and without a preamble or closing
/// remark (a line ending in `:` before the list).
fn lines(reply: &str) -> Vec<String> {
    let lines: Vec<&str> = reply
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("```"))
        .collect();
    let listed = lines.iter().any(|line| is_list_item(line));
    lines
        .into_iter()
        .filter(|line| !line.ends_with(':'))
        // In a list, unmarked lines are commentary around it.
        .filter(|line| !listed || is_list_item(line))
        .map(str::to_owned)
        .collect()
}

fn is_list_item(line: &str) -> bool {
    strip_marker(line).len() < line.len()
}

/// The line without its list marker.
fn strip_marker(line: &str) -> &str {
    for bullet in ["- ", "* ", "• ", "– "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return rest;
        }
    }
    let inner = line.strip_prefix('(').unwrap_or(line);
    let digits = inner.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = &inner[digits..];
        for separator in [". ", ") ", ": "] {
            if let Some(rest) = rest.strip_prefix(separator) {
                return rest;
            }
        }
    }
    line
}

/// Marker, surrounding quotes and emphasis removed.
fn clean(line: &str) -> String {
    let text = strip_marker(line.trim()).trim();
    let text = text.trim_matches(|c| matches!(c, '"' | '“' | '”' | '\'' | '*' | '`'));
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_common_shape_gives_the_same_hypotheses() {
        let expected = ["User prefers tabs.", "The project uses Rust 2024."];
        let replies = [
            "User prefers tabs.\nThe project uses Rust 2024.",
            "1. User prefers tabs.\n2. The project uses Rust 2024.",
            "(1) User prefers tabs.\n(2) The project uses Rust 2024.",
            "Here are 2 hypotheses:\n- \"User prefers tabs.\"\n- \"The project uses Rust 2024.\"\nHope this helps!",
            "```\n* User prefers tabs.\n* The project uses Rust 2024.\n```",
            "```json\n[\"User prefers tabs.\", \"The project uses Rust 2024.\"]\n```",
            "• **User prefers tabs.**\n\n• The project uses Rust 2024.",
        ];
        for reply in replies {
            assert_eq!(parse_hypotheses(reply, 5), expected, "{reply:?}");
        }
    }

    #[test]
    fn duplicates_and_overlong_lines_go_and_max_holds() {
        let long = "x".repeat(600);
        let reply = format!("A.\na.\n{long}\nB.\nC.");
        assert_eq!(parse_hypotheses(&reply, 2), ["A.", "B."]);
    }

    #[test]
    fn nothing_usable_gives_nothing() {
        for reply in ["", "   \n```\n```", "[]", "Sure:"] {
            assert!(parse_hypotheses(reply, 3).is_empty(), "{reply:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(reply in "\\PC{0,400}", max in 0usize..12) {
            let hypotheses = parse_hypotheses(&reply, max);
            prop_assert!(hypotheses.len() <= max);
        }
    }
}
