//! Finding the JSON a chat model was asked for in what it actually wrote:
//! prose around it, code fences, an object holding the array, trailing
//! commas. Both model replies Engram reads (HyDE hypotheses and the
//! classifier's memories) go through [`find_json_array`].

use serde_json::Value;

/// Brackets tried as the start of the array: each try scans to the end, so
/// a reply full of brackets must not make this quadratic.
const MAX_CANDIDATES: usize = 32;

/// The first JSON array in `reply` (bare, or the single array-valued field
/// of an object), trying each `[` or `{` in turn; trailing commas are
/// forgiven.
pub fn find_json_array(reply: &str) -> Option<Vec<Value>> {
    let starts = reply
        .char_indices()
        .filter(|(_, c)| matches!(c, '[' | '{'))
        .map(|(at, _)| at)
        .take(MAX_CANDIDATES);
    for start in starts {
        let Some(end) = balanced_end(&reply[start..]) else {
            continue;
        };
        let candidate = without_trailing_commas(&reply[start..start + end]);
        match serde_json::from_str::<Value>(&candidate) {
            Ok(Value::Array(items)) => return Some(items),
            Ok(Value::Object(object)) => {
                let mut arrays = object.into_iter().filter_map(|(_, value)| match value {
                    Value::Array(items) => Some(items),
                    _ => None,
                });
                if let (Some(items), None) = (arrays.next(), arrays.next()) {
                    return Some(items);
                }
            }
            _ => {}
        }
    }
    None
}

/// The length of the bracketed run `text` starts with, minding strings and
/// escapes; `None` if it never closes.
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut strings = Strings::default();
    for (at, c) in text.char_indices() {
        if strings.holds(c) {
            continue;
        }
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// `json` without commas that directly precede `]` or `}` (outside strings).
fn without_trailing_commas(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut strings = Strings::default();
    let chars: Vec<char> = json.chars().collect();
    for (at, &c) in chars.iter().enumerate() {
        if !strings.holds(c) && c == ',' {
            let next = chars[at + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some(']' | '}')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Tracks, character by character, whether a scan of JSON text is inside a
/// string literal, where brackets and commas are only text.
#[derive(Default)]
struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// Takes the next character; true when it is part of a string literal
    /// (its quotes included).
    fn holds(&mut self, c: char) -> bool {
        if self.inside {
            match c {
                _ if self.escaped => self.escaped = false,
                '\\' => self.escaped = true,
                '"' => self.inside = false,
                _ => {}
            }
            true
        } else {
            self.inside = c == '"';
            self.inside
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn arrays_are_found_however_they_are_wrapped() {
        let expected = Some(vec![Value::from("a"), Value::from("b")]);
        for reply in [
            r#"["a", "b"]"#,
            "Sure, here:\n```json\n[\"a\", \"b\",]\n```\nAnything else?",
            r#"{"items": ["a", "b"]}"#,
            r#"Note [not json] then ["a", "b"]"#,
        ] {
            assert_eq!(find_json_array(reply), expected, "{reply:?}");
        }
    }

    #[test]
    fn no_array_is_none() {
        for reply in ["", "nothing here", "[unclosed", r#"{"a": 1}"#] {
            assert_eq!(find_json_array(reply), None, "{reply:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(reply in "\\PC{0,400}") {
            let _ = find_json_array(&reply);
        }
    }
}
