//! Finding the JSON a chat model was asked for in what it actually wrote:
//! prose around it, code fences, an object holding the array, trailing
//! commas, and what small local models write instead of JSON: single-quoted
//! strings, Python's `True`/`False`/`None`, `//` comments. Both model replies
//! Engram reads (HyDE hypotheses and the classifier's memories) go through
//! [`find_json`].

use serde_json::Value;

/// Brackets tried as the start of the array: each try scans to the end, so
/// a reply full of brackets must not make this quadratic.
const MAX_CANDIDATES: usize = 32;

/// The first JSON array in `reply` (bare, or the single array-valued field
/// of an object), read as [`find_json`] does.
pub fn find_json_array(reply: &str) -> Option<Vec<Value>> {
    find_json(reply, |value| match value {
        Value::Array(items) => Some(items),
        Value::Object(object) => single_array_field(object),
        _ => None,
    })
}

/// The items of an object's only array-valued field, if it has exactly one.
pub fn single_array_field(object: serde_json::Map<String, Value>) -> Option<Vec<Value>> {
    let mut arrays = object.into_iter().filter_map(|(_, value)| match value {
        Value::Array(items) => Some(items),
        _ => None,
    });
    match (arrays.next(), arrays.next()) {
        (Some(items), None) => Some(items),
        _ => None,
    }
}

/// The first bracketed JSON value in `reply` that `accept` takes, trying
/// each `[` or `{` in turn: as written (trailing commas forgiven), then
/// relaxed ([`relaxed`]) for models that write Python or JavaScript.
pub fn find_json(reply: &str, accept: impl Fn(Value) -> Option<Vec<Value>>) -> Option<Vec<Value>> {
    let starts = reply
        .char_indices()
        .filter(|(_, c)| matches!(c, '[' | '{'))
        .map(|(at, _)| at)
        .take(MAX_CANDIDATES);
    for start in starts {
        let rest = &reply[start..];
        let strict = balanced_end(rest).map(|end| without_trailing_commas(&rest[..end]));
        let loose = || {
            let rest = relaxed(rest);
            balanced_end(&rest).map(|end| without_trailing_commas(&rest[..end]))
        };
        for candidate in [strict, loose()].into_iter().flatten() {
            if let Some(items) = serde_json::from_str(&candidate).ok().and_then(&accept) {
                return Some(items);
            }
        }
    }
    None
}

/// `text` with what JSON does not allow, outside double-quoted strings,
/// made JSON: a single-quoted string becomes a double-quoted one (it ends
/// at a `'` followed by `,` `:` `]` `}` or the end, so an apostrophe inside
/// it stays), `True`/`False`/`None` become `true`/`false`/`null`, and `//`
/// comments to the end of the line go.
fn relaxed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut strings = Strings::default();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if strings.holds(c) {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '\'' {
            let body = &rest[1..];
            let end = single_quoted_end(body).unwrap_or(body.len());
            out.push_str(&Value::from(body[..end].replace("\\'", "'")).to_string());
            rest = body.get(end + 1..).unwrap_or("");
            continue;
        }
        if rest.starts_with("//") {
            rest = rest.find('\n').map_or("", |newline| &rest[newline..]);
            continue;
        }
        let word_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let replacement = match &rest[..word_len] {
            "True" => Some("true"),
            "False" => Some("false"),
            "None" => Some("null"),
            _ => None,
        };
        if let Some(replacement) = replacement {
            out.push_str(replacement);
            rest = &rest[word_len..];
        } else if word_len > 0 {
            out.push_str(&rest[..word_len]);
            rest = &rest[word_len..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Where the single-quoted string whose body starts `body` ends: the first
/// unescaped `'` followed, past spaces, by `,` `:` `]` `}` or nothing.
fn single_quoted_end(body: &str) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\'' => {
                let after = body[at + 1..].trim_start();
                if after.is_empty() || after.starts_with([',', ':', ']', '}']) {
                    return Some(at);
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
    fn python_and_javascript_spellings_are_read_as_json() {
        let reply = "Sure! [{'content': 'Ana's team uses \"tabs\"', 'done': True, 'n': None}, // first\n {'x': False,}]";
        assert_eq!(
            find_json_array(reply),
            Some(vec![
                serde_json::json!({"content": "Ana's team uses \"tabs\"", "done": true, "n": null}),
                serde_json::json!({"x": false}),
            ])
        );
        // Inside double-quoted strings nothing changes.
        assert_eq!(
            find_json_array(r#"["it's True // not a comment", "None"]"#),
            Some(vec![
                Value::from("it's True // not a comment"),
                Value::from("None")
            ])
        );
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
