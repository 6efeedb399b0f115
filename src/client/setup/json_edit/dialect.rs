//! The JSON dialects agents read: strict JSON, JSON with comments, and
//! JSONC (comments and trailing commas). What a dialect adds is blanked
//! to spaces in place ([`blank`]), so that serde_json parses the text and
//! every offset still points into the original.

use std::borrow::Cow;

use serde_json::Value;

/// The JSON an agent reads in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonDialect {
    /// JSON as RFC 8259 has it: a comment is an error.
    Strict,
    /// With `//` and `/* */` comments (Gemini CLI's settings).
    Comments,
    /// With comments and trailing commas (JSONC: VS Code, OpenCode).
    CommentsAndTrailingCommas,
}

/// The value `text` holds, read in `dialect`.
pub fn parse(text: &str, dialect: JsonDialect) -> Result<Value, serde_json::Error> {
    serde_json::from_str(&blank(text, dialect))
}

/// `text` with what `dialect` adds to JSON (comments, trailing commas)
/// replaced by spaces, byte for byte and keeping line breaks, so that
/// every offset and line stays where it was.
pub fn blank(text: &str, dialect: JsonDialect) -> Cow<'_, str> {
    if dialect == JsonDialect::Strict {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut erase = |range: std::ops::Range<usize>| {
        for byte in &mut out[range] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut comma = None;
    let mut at = 0;
    while at < bytes.len() {
        match (bytes[at], bytes.get(at + 1)) {
            (b'"', _) => {
                comma = None;
                at += 1;
                while at < bytes.len() {
                    match bytes[at] {
                        b'\\' => at += 2,
                        b'"' => break,
                        _ => at += 1,
                    }
                }
                at += 1;
            }
            (b'/', Some(b'/')) => {
                let end = text[at..]
                    .find('\n')
                    .map_or(bytes.len(), |found| at + found);
                erase(at..end);
                at = end;
            }
            (b'/', Some(b'*')) => {
                // An unclosed comment is left for the parser to refuse.
                let Some(found) = text[at + 2..].find("*/") else {
                    break;
                };
                let end = at + 2 + found + 2;
                erase(at..end);
                at = end;
            }
            (b',', _) => {
                comma = Some(at);
                at += 1;
            }
            (b'}' | b']', _) => {
                if let Some(trailing) = comma.take()
                    && dialect == JsonDialect::CommentsAndTrailingCommas
                {
                    erase(trailing..trailing + 1);
                }
                at += 1;
            }
            (b' ' | b'\t' | b'\n' | b'\r', _) => at += 1,
            _ => {
                comma = None;
                at += 1;
            }
        }
    }
    // Only whole comments (ASCII-delimited) and commas were replaced, so
    // the bytes are still UTF-8.
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Where in `text`, which follows an element, its trailing comma is:
/// the first thing after whitespace and comments, if a comma.
pub fn trailing_comma(text: &str) -> Option<usize> {
    let mut at = 0;
    loop {
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if trimmed.starts_with("//") {
            at += trimmed.find('\n')?;
        } else if let Some(comment) = trimmed.strip_prefix("/*") {
            at += 2 + comment.find("*/")? + 2;
        } else {
            return trimmed.starts_with(',').then_some(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn comments_and_trailing_commas_are_blanked_in_place() {
        let text = "{\"a\": \"//x\", // c\n /* d\n */ \"b\": [1,],}";
        let plain = blank(text, JsonDialect::CommentsAndTrailingCommas);
        assert_eq!(plain, "{\"a\": \"//x\",     \n     \n    \"b\": [1 ] }");
        assert_eq!(
            parse(text, JsonDialect::CommentsAndTrailingCommas).unwrap(),
            json!({"a": "//x", "b": [1]})
        );
        assert!(
            parse(text, JsonDialect::Comments).is_err(),
            "no trailing commas"
        );
        assert!(parse(text, JsonDialect::Strict).is_err());
        assert!(parse("{} /* open", JsonDialect::Comments).is_err());
    }

    #[test]
    fn the_trailing_comma_is_found_past_comments_only() {
        assert_eq!(trailing_comma(" /* a, b */ , // c"), Some(12));
        assert_eq!(trailing_comma(" // a, b\n  ,"), Some(11));
        assert_eq!(trailing_comma(" // a, b\n"), None);
    }
}
