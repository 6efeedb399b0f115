//! Targeted edits of a JSON text. Given the text, the value it parsed to
//! and the value wanted, [`rewrite`] rewrites only the values that differ
//! and keeps every other byte: layout, key order, comments (in the
//! [`JsonDialect`]s that have them), the spelling of numbers (a big
//! integer is not rounded through `f64`) and keys repeated where nothing
//! changes.
//!
//! Invariants:
//! - A value equal in both is copied from the text as it was, and so is
//!   what lies between two elements that stay next to each other.
//! - A comment is never copied to a new place: new elements are laid out
//!   from the text with its comments blanked ([`blank`]).
//! - A change under a key that the object holds twice is refused: the
//!   agent reads one of the two, and which one is its parser's choice.
//! - The result parses to the value wanted, or [`rewrite`] fails: a text
//!   this module could not edit faithfully is never written.

mod dialect;
mod locate;

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::{PrettyFormatter, Serializer};

use dialect::trailing_comma;
pub use dialect::{JsonDialect, blank, parse};
use locate::{Kind, Member, Node, Parser};

/// Deeper than serde_json's own limit (128), so any text it parsed fits.
const MAX_DEPTH: usize = 256;
/// Above this many element pairs, an array that changed is written anew
/// instead of aligned element by element.
const MAX_ALIGNMENT_CELLS: usize = 1 << 20;

/// Why a JSON text could not be edited in place.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error(
        "the key `{0}` appears more than once, and the agent reads only one of them: \
         remove the other and run setup again"
    )]
    DuplicateKey(String),
    #[error("the text could not be edited in place (a setup defect; please report it)")]
    Unfaithful,
}

/// `text` (which parsed to `before` in `dialect`) rewritten to parse to
/// `after`, changing only what differs.
pub fn rewrite(
    text: &str,
    before: &Value,
    after: &Value,
    dialect: JsonDialect,
) -> Result<String, EditError> {
    let plain = blank(text, dialect);
    let root = Parser::new(&plain)
        .document()
        .ok_or(EditError::Unfaithful)?;
    let editor = Editor {
        text,
        plain: &plain,
        unit: indent_unit(text, &root),
    };
    let mut path = Vec::new();
    let new_root = editor.value(&root, before, after, &mut path)?;
    let rewritten = format!("{}{new_root}{}", &text[..root.start], &text[root.end..]);
    match parse(&rewritten, dialect) {
        Ok(parsed) if parsed == *after => Ok(rewritten),
        _ => Err(EditError::Unfaithful),
    }
}

/// The indentation one level adds in `text`: the whitespace before the
/// root's first member or item when it starts a line, else two spaces.
fn indent_unit(text: &str, root: &Node) -> String {
    let first = match &root.kind {
        Kind::Object(members) => members.first().map(|member| member.start),
        Kind::Array(items) => items.first().map(|item| item.start),
        Kind::Scalar => None,
    };
    first
        .map(|at| line_indent(text, at))
        .filter(|unit| !unit.is_empty())
        .unwrap_or_else(|| "  ".to_owned())
}

/// The whitespace that starts the line holding `at`.
fn line_indent(text: &str, at: usize) -> String {
    let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
    text[line_start..at]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

struct Editor<'a> {
    text: &'a str,
    /// `text` with its comments and trailing commas blanked.
    plain: &'a str,
    unit: String,
}

/// One element of a rebuilt object or array: the original one at an
/// index (with its new text), or a new one.
struct Piece {
    original: Option<usize>,
    text: String,
}

/// How a rebuilt object or array lays out its elements: what comes after
/// its opening bracket, between two elements, before its closing bracket,
/// and the indentation of a new element (`None`: all on one line).
struct Layout {
    lead: String,
    separator: String,
    trail: String,
    indent: Option<String>,
}

impl Editor<'_> {
    /// The new text of `node`, which parsed to `before`, to parse to `after`.
    fn value(
        &self,
        node: &Node,
        before: &Value,
        after: &Value,
        path: &mut Vec<String>,
    ) -> Result<String, EditError> {
        if before == after {
            return Ok(self.text[node.start..node.end].to_owned());
        }
        match (&node.kind, before, after) {
            (Kind::Object(members), Value::Object(before), Value::Object(after)) => {
                self.object(node, members, before, after, path)
            }
            (Kind::Array(items), Value::Array(before), Value::Array(after)) => {
                self.array(node, items, before, after, path)
            }
            _ => Ok(self.render(after, Some(&line_indent(self.text, node.start)))),
        }
    }

    fn object(
        &self,
        node: &Node,
        members: &[Member],
        before: &serde_json::Map<String, Value>,
        after: &serde_json::Map<String, Value>,
        path: &mut Vec<String>,
    ) -> Result<String, EditError> {
        let spans: Vec<(usize, usize)> = members
            .iter()
            .map(|member| (member.start, member.end()))
            .collect();
        let layout = self.layout(node, &spans);
        let mut pieces = Vec::with_capacity(members.len() + 1);
        for (index, member) in members.iter().enumerate() {
            let was = before.get(&member.key).ok_or(EditError::Unfaithful)?;
            let wanted = after.get(&member.key);
            if wanted == Some(was) {
                pieces.push(Piece {
                    original: Some(index),
                    text: self.text[member.start..member.end()].to_owned(),
                });
                continue;
            }
            // Changed or removed: which copy the agent reads is unknown.
            if members
                .iter()
                .filter(|other| other.key == member.key)
                .count()
                > 1
            {
                path.push(member.key.clone());
                return Err(EditError::DuplicateKey(path.join(".")));
            }
            let Some(wanted) = wanted else {
                continue;
            };
            path.push(member.key.clone());
            let value = self.value(&member.value, was, wanted, path)?;
            path.pop();
            pieces.push(Piece {
                original: Some(index),
                text: format!("{}{value}", &self.text[member.start..member.value.start]),
            });
        }
        for (key, wanted) in after {
            if !before.contains_key(key) {
                let key = serde_json::to_string(key).map_err(|_| EditError::Unfaithful)?;
                let value = self.render(wanted, layout.indent.as_deref());
                pieces.push(Piece {
                    original: None,
                    text: format!("{key}: {value}"),
                });
            }
        }
        Ok(self.join(node, &spans, &layout, &pieces))
    }

    fn array(
        &self,
        node: &Node,
        items: &[Node],
        before: &[Value],
        after: &[Value],
        path: &mut Vec<String>,
    ) -> Result<String, EditError> {
        let spans: Vec<(usize, usize)> = items.iter().map(|item| (item.start, item.end)).collect();
        if items.len() != before.len() {
            return Err(EditError::Unfaithful);
        }
        let layout = self.layout(node, &spans);
        let mut pieces = Vec::with_capacity(after.len());
        let (mut old, mut new) = (0, 0);
        let matches = align(before, after);
        for (matched_old, matched_new) in matches
            .into_iter()
            .chain(std::iter::once((before.len(), after.len())))
        {
            // Between two equal elements: the ones at the same place are
            // edited, the rest removed or added.
            while old < matched_old && new < matched_new {
                path.push(new.to_string());
                let text = self.value(&items[old], &before[old], &after[new], path)?;
                path.pop();
                pieces.push(Piece {
                    original: Some(old),
                    text,
                });
                old += 1;
                new += 1;
            }
            for added in &after[new..matched_new] {
                pieces.push(Piece {
                    original: None,
                    text: self.render(added, layout.indent.as_deref()),
                });
            }
            if matched_old < before.len() {
                pieces.push(Piece {
                    original: Some(matched_old),
                    text: self.text[items[matched_old].start..items[matched_old].end].to_owned(),
                });
            }
            (old, new) = (matched_old + 1, matched_new + 1);
        }
        Ok(self.join(node, &spans, &layout, &pieces))
    }

    /// The layout of new elements of the object or array `node`, whose
    /// elements are at `spans`, taken from the text without its comments.
    fn layout(&self, node: &Node, spans: &[(usize, usize)]) -> Layout {
        let (text, plain) = (self.text, self.plain);
        let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
            let outer = line_indent(text, node.start);
            let inner = format!("{outer}{}", self.unit);
            // A comment inside an empty object or array stays at its start.
            let inside = node.start + 1..node.end - 1;
            let comment = text[inside.clone()].trim_end();
            let lead = if plain[inside].trim().is_empty() && !comment.is_empty() {
                format!("{comment}\n{inner}")
            } else {
                format!("\n{inner}")
            };
            return Layout {
                lead,
                separator: format!(",\n{inner}"),
                trail: format!("\n{outer}"),
                indent: Some(inner),
            };
        };
        let lead = tidy(&plain[node.start + 1..first.0]);
        let separator = match spans.get(1) {
            Some(second) => tidy(&plain[first.1..second.0]),
            None => format!(",{lead}"),
        };
        let indent = lead.contains('\n').then(|| line_indent(text, first.0));
        Layout {
            trail: tidy(&plain[last.1..node.end - 1]),
            lead,
            separator,
            indent,
        }
    }

    /// `pieces` between `node`'s brackets: two elements that were next to
    /// each other keep what was between them, the first and last kept
    /// elements what was before and after them.
    fn join(
        &self,
        node: &Node,
        spans: &[(usize, usize)],
        layout: &Layout,
        pieces: &[Piece],
    ) -> String {
        let open = &self.text[node.start..=node.start];
        let close = &self.text[node.end - 1..node.end];
        if pieces.is_empty() {
            return format!("{open}{close}");
        }
        let last_original = spans.len().checked_sub(1);
        let lead = match pieces[0].original {
            Some(0) => &self.text[node.start + 1..spans[0].0],
            _ => layout.lead.as_str(),
        };
        let mut out = format!("{open}{lead}");
        for (at, piece) in pieces.iter().enumerate() {
            if at > 0 {
                match (pieces[at - 1].original, piece.original) {
                    (Some(previous), Some(this)) if this == previous + 1 => {
                        out.push_str(&self.text[spans[previous].1..spans[this].0]);
                    }
                    (Some(previous), None) if Some(previous) == last_original => {
                        out.push_str(&self.after_last(node, spans[previous], layout));
                    }
                    _ => out.push_str(&layout.separator),
                }
            }
            out.push_str(&piece.text);
        }
        let trail = match pieces.last().and_then(|piece| piece.original) {
            Some(last) if Some(last) == last_original => &self.text[spans[last].1..node.end - 1],
            _ => layout.trail.as_str(),
        };
        out.push_str(trail);
        out.push_str(close);
        out
    }

    /// What goes between the last of `node`'s original elements (at
    /// `last`) and a new one after it: a comma, the comments that followed
    /// the last one (its trailing comma left out), then a line break.
    fn after_last(&self, node: &Node, last: (usize, usize), layout: &Layout) -> String {
        let after = last.1..node.end - 1;
        let text = &self.text[after.clone()];
        if *text == self.plain[after] {
            return layout.separator.clone();
        }
        let mut kept = text.to_owned();
        if let Some(comma) = trailing_comma(text) {
            kept.remove(comma);
        }
        let rest = layout
            .separator
            .strip_prefix(',')
            .unwrap_or(&layout.separator);
        let rest = if rest.contains('\n') {
            rest.to_owned()
        } else {
            // A line comment runs to the end of its line.
            format!("\n{}", line_indent(self.text, last.0))
        };
        format!(",{}{rest}", kept.trim_end())
    }

    /// `value` as JSON: pretty, each line after the first indented by
    /// `indent`, or on one line.
    fn render(&self, value: &Value, indent: Option<&str>) -> String {
        let Some(indent) = indent else {
            return value.to_string();
        };
        let mut bytes = Vec::new();
        let formatter = PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut serializer = Serializer::with_formatter(&mut bytes, formatter);
        if value.serialize(&mut serializer).is_err() {
            return value.to_string();
        }
        String::from_utf8_lossy(&bytes).replace('\n', &format!("\n{indent}"))
    }
}

/// `text` with the spaces that end each of its lines (but the last)
/// removed: a layout taken from blanked text leaves no trailing spaces
/// where comments were.
fn tidy(text: &str) -> String {
    let mut lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len() - 1;
    for line in &mut lines[..last] {
        *line = line.trim_end_matches([' ', '\t', '\r']);
    }
    lines.join("\n")
}

/// The pairs (index in `before`, index in `after`) of equal elements kept
/// in order, as many as can be (a longest common subsequence); none when
/// the arrays are too long to align.
fn align(before: &[Value], after: &[Value]) -> Vec<(usize, usize)> {
    let (rows, columns) = (before.len(), after.len());
    if rows.saturating_mul(columns) > MAX_ALIGNMENT_CELLS {
        return Vec::new();
    }
    // longest[i][j]: the longest common subsequence of before[i..], after[j..].
    let mut longest = vec![vec![0_usize; columns + 1]; rows + 1];
    for i in (0..rows).rev() {
        for j in (0..columns).rev() {
            longest[i][j] = if before[i] == after[j] {
                longest[i + 1][j + 1] + 1
            } else {
                longest[i + 1][j].max(longest[i][j + 1])
            };
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < rows && j < columns {
        if before[i] == after[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if longest[i + 1][j] >= longest[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn edit(text: &str, after: &Value) -> Result<String, EditError> {
        let before: Value = serde_json::from_str(text).unwrap();
        rewrite(text, &before, after, JsonDialect::Strict)
    }

    fn edit_jsonc(text: &str, after: &Value) -> Result<String, EditError> {
        let dialect = JsonDialect::CommentsAndTrailingCommas;
        let before = parse(text, dialect).unwrap();
        rewrite(text, &before, after, dialect)
    }

    #[test]
    fn comments_stay_where_they_were_and_are_not_copied() {
        let text = "{\n  // the team's servers\n  \"servers\": {\n    \"docs\": {\"command\": \"d\"} // docs\n  },\n  /* inputs */ \"inputs\": [],\n}\n";
        let mut after = parse(text, JsonDialect::CommentsAndTrailingCommas).unwrap();
        after["servers"]["engram"] = json!({"command": "engram"});
        assert_eq!(
            edit_jsonc(text, &after).unwrap(),
            "{\n  // the team's servers\n  \"servers\": {\n    \"docs\": {\"command\": \"d\"}, // docs\n    \"engram\": {\n      \"command\": \"engram\"\n    }\n  },\n  /* inputs */ \"inputs\": [],\n}\n"
        );
        let text = "{\"mcp\": { // none yet\n}}";
        let after = json!({"mcp": {"engram": 1}});
        assert_eq!(
            edit_jsonc(text, &after).unwrap(),
            "{\"mcp\": { // none yet\n  \"engram\": 1\n}}"
        );
        let text = "{\"a\": 1, // one\n}";
        assert_eq!(
            edit_jsonc(text, &json!({"a": 1, "b": 2})).unwrap(),
            "{\"a\": 1, // one\n\"b\": 2\n}"
        );
    }

    #[test]
    fn what_did_not_change_keeps_its_bytes() {
        let text = "{\n    \"zeta\": 12345678901234567890123,\n    \"x\": 1, \"x\": 2,\n    \"alpha\": {\"b\": 1.50}\n}\n";
        let mut after: Value = serde_json::from_str(text).unwrap();
        after["mcpServers"] = json!({"engram": {"command": "engram", "args": ["mcp"]}});
        let written = edit(text, &after).unwrap();
        assert_eq!(
            written,
            "{\n    \"zeta\": 12345678901234567890123,\n    \"x\": 1, \"x\": 2,\n    \"alpha\": {\"b\": 1.50},\n    \
             \"mcpServers\": {\n        \"engram\": {\n            \"args\": [\n                \"mcp\"\n            ],\n            \
             \"command\": \"engram\"\n        }\n    }\n}\n"
        );
    }

    #[test]
    fn a_changed_value_is_replaced_in_place() {
        let text = r#"{"s": {"engram": {"command": "/old/engram", "big": 18446744073709551616000}}, "n": 1}"#;
        let mut after: Value = serde_json::from_str(text).unwrap();
        after["s"]["engram"]["command"] = json!("engram");
        assert_eq!(
            edit(text, &after).unwrap(),
            r#"{"s": {"engram": {"command": "engram", "big": 18446744073709551616000}}, "n": 1}"#
        );
    }

    #[test]
    fn array_elements_are_removed_and_added_around_the_kept_ones() {
        let text = "[\n  {\"a\": 1},\n  {\"ours\": 1},\n  {\"b\":   2}\n]";
        assert_eq!(
            edit(text, &json!([{"a": 1}, {"b": 2}, {"ours": 2}])).unwrap(),
            "[\n  {\"a\": 1},\n  {\"b\":   2},\n  {\n    \"ours\": 2\n  }\n]"
        );
        assert_eq!(edit("[1, 2]", &json!([2])).unwrap(), "[2]");
        assert_eq!(edit("[1, 2]", &json!([1])).unwrap(), "[1]");
        assert_eq!(edit("[1]", &json!([])).unwrap(), "[]");
        assert_eq!(edit("[]", &json!([1])).unwrap(), "[\n  1\n]");
        assert_eq!(
            edit(r#"["mcp"]"#, &json!(["mcp", "--url", "u"])).unwrap(),
            r#"["mcp","--url","u"]"#
        );
    }

    #[test]
    fn a_change_under_a_repeated_key_is_refused() {
        let text = r#"{"mcpServers": {"a": 1}, "mcpServers": {"b": 1}}"#;
        assert_eq!(
            edit(text, &json!({"mcpServers": {"b": 1, "engram": {}}})),
            Err(EditError::DuplicateKey("mcpServers".to_owned()))
        );
    }

    proptest::proptest! {
        #[test]
        fn any_edit_of_any_document_parses_to_what_was_wanted(
            before in json_value(), after in json_value(), pretty in proptest::bool::ANY,
        ) {
            let text = if pretty {
                serde_json::to_string_pretty(&before).unwrap()
            } else {
                before.to_string()
            };
            let written = edit(&text, &after).unwrap();
            proptest::prop_assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), after);
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-5_i64..5).prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }
}
