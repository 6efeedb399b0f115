//! Reading the classifier's reply: a JSON array of memory objects, however
//! a model wraps it (prose around it, code fences, an object holding the
//! array, trailing commas) or bends it (single quotes, Python literals, one
//! bare memory object instead of an array, `Coding Preferences` for
//! `coding-preferences`), as small local models do. One malformed item is
//! rejected alone; a reply with no JSON at all means "nothing to remember".

use serde_json::Value;

use crate::llm::reply;

/// The largest reply read; anything longer is not a classifier's answer.
const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// A memory the model proposed, still unchecked against the store.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposed {
    pub content: String,
    pub scope: String,
    pub category: String,
    pub supersedes: Option<String>,
    /// (id, relationship) pairs, as written.
    pub related: Vec<(String, String)>,
    pub importance: Option<f64>,
    /// The files of the prompt's list the memory is about, as written.
    pub files: Vec<ProposedFile>,
}

/// A file a memory is about, and the name in it (a function, a type) the
/// memory is about, if it is about one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposedFile {
    pub path: String,
    pub symbol: Option<String>,
}

/// The reply, read.
#[derive(Debug, Default, PartialEq)]
pub struct Reply {
    pub proposed: Vec<Proposed>,
    /// Items that were not memory objects: (index, why).
    pub rejected: Vec<(usize, String)>,
    /// No JSON array could be found: nothing is remembered, and it counts
    /// as a parse failure (an empty array does not).
    pub unparseable: bool,
}

pub fn parse(reply: &str) -> Reply {
    if reply.len() > MAX_REPLY_BYTES {
        return Reply {
            unparseable: true,
            ..Reply::default()
        };
    }
    let Some(items) = reply::find_json(reply, memory_items) else {
        return Reply {
            unparseable: true,
            ..Reply::default()
        };
    };
    let mut read = Reply::default();
    for (index, item) in items.iter().enumerate() {
        match proposed(item) {
            Ok(proposed) => read.proposed.push(proposed),
            Err(reason) => read.rejected.push((index, reason)),
        }
    }
    read
}

/// The memory objects a JSON value holds: an array's items, the one array
/// of an object (`{"memories": [...]}`), or an object that is itself a
/// memory.
fn memory_items(value: Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items),
        Value::Object(object) if object.contains_key("content") => {
            Some(vec![Value::Object(object)])
        }
        Value::Object(object) => reply::single_array_field(object),
        _ => None,
    }
}

/// A scope, category or relationship as the model spelled it, in the
/// spelling Engram's names use: lower case, words joined by `-`.
fn name(spelled: &str) -> String {
    spelled
        .trim()
        .to_lowercase()
        .split(|c: char| c.is_whitespace() || c == '_' || c == '-')
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

fn proposed(item: &Value) -> Result<Proposed, String> {
    let object = item.as_object().ok_or("not an object")?;
    let text = |field: &str| -> Result<String, String> {
        match object.get(field) {
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.trim().to_owned()),
            Some(Value::String(_)) | None => Err(format!("`{field}` is missing or empty")),
            Some(_) => Err(format!("`{field}` is not a string")),
        }
    };
    let supersedes = match object.get("supersedes") {
        Some(Value::String(id)) if !id.trim().is_empty() => Some(id.trim().to_owned()),
        _ => None,
    };
    let related = object
        .get("related")
        .and_then(Value::as_array)
        .map(|edges| {
            edges
                .iter()
                .filter_map(|edge| {
                    let id = edge.get("id")?.as_str()?.trim();
                    let relationship = edge.get("relationship")?.as_str()?;
                    Some((id.to_owned(), name(relationship)))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Proposed {
        content: text("content")?,
        scope: name(&text("scope")?),
        category: name(&text("category")?),
        supersedes,
        related,
        importance: object.get("importance").and_then(importance),
        files: object.get("files").map(files).unwrap_or_default(),
    })
}

/// The files a `files` field names: an array of paths (or of objects
/// with a `path` and maybe a `symbol`), or one of them alone.
fn files(value: &Value) -> Vec<ProposedFile> {
    let trimmed = |text: Option<&Value>| {
        let text = text?.as_str()?.trim();
        (!text.is_empty()).then(|| text.to_owned())
    };
    let file = |item: &Value| match item {
        Value::Object(object) => Some(ProposedFile {
            path: trimmed(object.get("path"))?,
            symbol: trimmed(object.get("symbol")),
        }),
        other => Some(ProposedFile {
            path: trimmed(Some(other))?,
            symbol: None,
        }),
    };
    match value {
        Value::Array(items) => items.iter().filter_map(file).collect(),
        single => file(single).into_iter().collect(),
    }
}

/// An importance written as a number or as a number in a string (`"0.8"`).
fn importance(value: &Value) -> Option<f64> {
    match value {
        Value::String(text) => text.trim().parse().ok(),
        other => other.as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ONE: &str =
        r#"[{"content": "Ana prefers tabs.", "scope": "user", "category": "coding-preferences"}]"#;

    #[test]
    fn a_bare_array_fenced_wrapped_or_in_prose_reads_the_same() {
        let replies = [
            ONE.to_owned(),
            format!("```json\n{ONE}\n```"),
            format!("Here is what I found:\n```\n{ONE}\n```\nLet me know!"),
            format!(r#"{{"memories": {ONE}}}"#),
            r#"[{"content": "Ana prefers tabs.", "scope": "user", "category": "coding-preferences",},]"#.to_owned(),
            format!("I looked at [the conversation] carefully. {ONE}"),
        ];
        for reply in replies {
            let read = parse(&reply);
            assert!(!read.unparseable, "{reply}");
            assert_eq!(read.proposed.len(), 1, "{reply}");
            assert_eq!(read.proposed[0].content, "Ana prefers tabs.");
        }
    }

    /// A reply from `tests/fixtures/classifier-replies/`.
    macro_rules! small_model_reply {
        ($file:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/classifier-replies/",
                $file
            ))
        };
    }

    /// A reply's shape, the reply, and the (scope, category) of each memory
    /// it must give.
    type Case = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
    );

    #[test]
    fn replies_in_the_shapes_small_models_write_are_read() {
        let cases: [Case; 8] = [
            (
                "prose and a fence, trailing commas",
                small_model_reply!("prose-and-fence-trailing-commas.txt"),
                &[
                    ("user", "coding-preferences"),
                    ("repo", "project-conventions"),
                ],
            ),
            (
                "wrapped in an object",
                small_model_reply!("wrapped-in-an-object.txt"),
                &[("repo", "architectural-decisions")],
            ),
            (
                "Python literals",
                small_model_reply!("python-literals.txt"),
                &[("repo", "corrections")],
            ),
            (
                "one bare object",
                small_model_reply!("one-bare-object.txt"),
                &[("user", "coding-preferences")],
            ),
            (
                "names in another case",
                small_model_reply!("names-in-another-case.txt"),
                &[("repo", "architectural-decisions"), ("user", "user-facts")],
            ),
            (
                "comments",
                small_model_reply!("comments.txt"),
                &[("repo", "corrections")],
            ),
            (
                "a bare list where an object was asked",
                small_model_reply!("bare-list.txt"),
                &[("repo", "project-conventions")],
            ),
            (
                "optional fields missing or null",
                small_model_reply!("missing-optional-fields.txt"),
                &[
                    ("user", "coding-preferences"),
                    ("repo", "project-conventions"),
                ],
            ),
        ];
        for (shape, reply, expected) in cases {
            let read = parse(reply);
            assert!(
                !read.unparseable && read.rejected.is_empty(),
                "{shape}: {read:?}"
            );
            let names: Vec<(&str, &str)> = read
                .proposed
                .iter()
                .map(|proposed| (proposed.scope.as_str(), proposed.category.as_str()))
                .collect();
            assert_eq!(names, expected, "{shape}");
        }
        let python = parse(small_model_reply!("python-literals.txt"));
        assert_eq!(
            python.proposed[0].content,
            "Don't mock the database in forge's tests; use the throwaway Postgres."
        );
        assert_eq!(python.proposed[0].importance, Some(0.9));
        let bare = parse(small_model_reply!("missing-optional-fields.txt"));
        assert!(
            bare.proposed
                .iter()
                .all(|memory| memory.supersedes.is_none()
                    && memory.related.is_empty()
                    && memory.importance.is_none())
        );
        let wrapped = parse(small_model_reply!("wrapped-in-an-object.txt"));
        assert_eq!(
            wrapped.proposed[0].importance,
            Some(0.8),
            "a number in a string"
        );
    }

    #[test]
    fn one_bad_item_is_rejected_alone() {
        let read = parse(
            r#"[{"content": "Good one.", "scope": "repo", "category": "patterns",
                 "supersedes": "", "related": [{"id": "x", "relationship": "refines"}, {"id": 3}]},
                {"content": 42, "scope": "repo", "category": "patterns"},
                "just a string",
                {"scope": "repo", "category": "patterns"}]"#,
        );
        assert_eq!(read.proposed.len(), 1);
        assert_eq!(read.proposed[0].supersedes, None);
        assert_eq!(
            read.proposed[0].related,
            [("x".to_owned(), "refines".to_owned())]
        );
        assert_eq!(
            read.rejected
                .iter()
                .map(|(index, _)| *index)
                .collect::<Vec<_>>(),
            [1, 2, 3]
        );
    }

    #[test]
    fn the_files_a_memory_is_about_are_read_however_they_are_written() {
        let read = parse(
            r#"[{"content": "a", "scope": "repo", "category": "patterns",
                 "files": ["src/db/pool.rs", " README.md ", "", 3, {"path": "src/lib.rs"},
                           {"path": "src/db/pool.rs", "symbol": " connect_pool "},
                           {"path": "src/a.rs", "symbol": ""}, {"symbol": "orphan"}]},
                {"content": "b", "scope": "repo", "category": "patterns", "files": "src/one.rs"},
                {"content": "c", "scope": "repo", "category": "patterns", "files": null}]"#,
        );
        let file = |path: &str, symbol: Option<&str>| ProposedFile {
            path: path.to_owned(),
            symbol: symbol.map(str::to_owned),
        };
        let files: Vec<&[ProposedFile]> =
            read.proposed.iter().map(|p| p.files.as_slice()).collect();
        assert_eq!(
            files,
            [
                &[
                    file("src/db/pool.rs", None),
                    file("README.md", None),
                    file("src/lib.rs", None),
                    file("src/db/pool.rs", Some("connect_pool")),
                    file("src/a.rs", None),
                ][..],
                &[file("src/one.rs", None)][..],
                &[][..],
            ]
        );
    }

    #[test]
    fn an_empty_array_is_nothing_and_garbage_is_unparseable() {
        assert_eq!(parse("[]"), Reply::default());
        assert_eq!(parse("```json\n[]\n```"), Reply::default());
        for garbage in [
            "",
            "I have nothing to add.",
            "[{",
            "{\"a\": 1}",
            "“smart” [quotes]",
        ] {
            assert!(parse(garbage).unparseable, "{garbage}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_any_text(reply in "\\PC{0,300}") {
            let _ = parse(&reply);
        }

        #[test]
        fn never_panics_on_mutations_of_a_good_reply(cut in 0usize..120, insert in "[\\[\\]{},\":a-z ]{0,6}") {
            let mut reply = ONE.to_owned();
            let at = reply.char_indices().map(|(at, _)| at).nth(cut).unwrap_or(reply.len());
            reply.insert_str(at, &insert);
            let _ = parse(&reply);
        }
    }
}
