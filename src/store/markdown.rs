//! The memory file codec: `Memory` ⇄ `---\n<yaml front-matter>---\n<content>\n`.
//!
//! The owner (repo or user) is not in the front-matter: it is the directory
//! the file lives in, so the caller supplies the namespace when parsing.
//! Reading is lenient about what people add by hand (unknown keys, a BOM,
//! CRLF line ends, extra blank lines); writing always produces one canonical form.

use serde::{Deserialize, Serialize};

use crate::memory::{
    Lifecycle, Memory, MemoryId, Namespace, Scope, memory_form, parse_importance,
    parse_stored_content, with_memory_fields,
};

/// Why a memory file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the file does not start with a `---` front-matter line")]
    MissingFrontMatter,
    #[error("the front-matter has no closing `---` line")]
    UnclosedFrontMatter,
    #[error("front-matter: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("front-matter `{field}`: {reason}")]
    Invalid { field: &'static str, reason: String },
}

memory_form! {
    /// The front-matter fields, in the order they are written: a [`Memory`]
    /// without its owner (the directory) and content (the body).
    #[derive(Serialize, Deserialize)]
    struct FrontMatter {
        pub id: MemoryId,
        pub version: u32,
        pub scope: Scope,
        ..front,
    }
}

/// Renders a memory as the text of its file.
pub fn render(memory: &Memory) -> String {
    let memory = memory.clone();
    let front = with_memory_fields!(FrontMatter {
        id: memory.id,
        version: memory.version,
        scope: memory.namespace.scope(),
    } from memory);
    let yaml = serde_yaml::to_string(&front).expect("front-matter always serializes to YAML");
    format!("---\n{yaml}---\n{}\n", memory.content)
}

/// Parses the text of a memory file owned by `namespace`.
pub fn parse(text: &str, namespace: Namespace) -> Result<Memory, Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = strip_delimiter_line(text).ok_or(Error::MissingFrontMatter)?;
    let (yaml, body) = split_at_closing_delimiter(rest).ok_or(Error::UnclosedFrontMatter)?;
    let front: FrontMatter = serde_yaml::from_str(yaml)?;

    if front.scope != namespace.scope() {
        return Err(invalid(
            "scope",
            format!("is `{}` but the file is under {namespace}", front.scope),
        ));
    }
    if front.version == 0 {
        return Err(invalid("version", "must be 1 or more".to_owned()));
    }
    if let Some(importance) = front.importance {
        parse_importance(importance).map_err(|err| invalid("importance", err.to_string()))?;
    }
    let content = parse_stored_content(body).map_err(|err| invalid("content", err.to_string()))?;

    // The lifecycle is not in the file: the store keeps it beside it.
    Ok(with_memory_fields!(Memory {
        id: front.id,
        version: front.version,
        namespace,
        content: content.to_owned(),
        lifecycle: Lifecycle::default(),
    } from front))
}

fn invalid(field: &'static str, reason: String) -> Error {
    Error::Invalid { field, reason }
}

/// Strips a leading `---` line (with `\n` or `\r\n`), if there is one.
fn strip_delimiter_line(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---")?;
    rest.strip_prefix('\n')
        .or_else(|| rest.strip_prefix("\r\n"))
}

/// Splits at the first line that is exactly `---`: (front-matter, body).
fn split_at_closing_delimiter(text: &str) -> Option<(&str, &str)> {
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&text[..line_start], &text[line_start + line.len()..]));
        }
        line_start += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use chrono::{TimeZone, Utc};
    use proptest::prelude::*;

    use super::*;
    use crate::memory::{
        Anchor, Category, CommitId, Origin, RelatedEdge, Relationship, RepoId, SessionId, UserId,
    };

    fn sample() -> Memory {
        let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        Memory {
            id: MemoryId::from_str("0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d").unwrap(),
            version: 2,
            namespace: Namespace::User(UserId::from_str("ana").unwrap()),
            category: Category::CodingPreferences,
            created_at: at,
            updated_at: at,
            supersedes: Some(MemoryId::from_str("0193f0c1-0000-7000-8000-000000000001").unwrap()),
            related: vec![RelatedEdge {
                id: MemoryId::from_str("0193f0c1-0000-7000-8000-000000000002").unwrap(),
                relationship: Relationship::Refines,
            }],
            importance: Some(0.7),
            session_id: Some(SessionId::from_str("s-42").unwrap()),
            trigger: Origin::Turn,
            anchors: Vec::new(),
            commit: None,
            observed_at: None,
            lifecycle: Lifecycle::default(),
            content: "User prefers `errors.As` over type assertions for error handling in Go."
                .to_owned(),
        }
    }

    #[test]
    fn renders_the_contract_layout() {
        let text = render(&sample());
        let expected = "---
id: 0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d
version: 2
scope: user
category: coding-preferences
created_at: 2026-11-22T10:00:00Z
updated_at: 2026-11-22T10:00:00Z
supersedes: 0193f0c1-0000-7000-8000-000000000001
related:
- id: 0193f0c1-0000-7000-8000-000000000002
  relationship: refines
importance: 0.7
session_id: s-42
trigger: turn
---
User prefers `errors.As` over type assertions for error handling in Go.
";
        assert_eq!(text, expected);
    }

    #[test]
    fn renders_anchors_after_the_fields_every_file_has() {
        let mut memory = sample();
        memory.anchors = vec![
            Anchor {
                path: "src/db/pool.rs".parse().unwrap(),
                symbol: Some("connect_pool".parse().unwrap()),
                hash: Some(crate::memory::ContentHash::of(b"fn connect_pool() {}\n")),
            },
            Anchor {
                path: "Cargo.toml".parse().unwrap(),
                symbol: None,
                hash: None,
            },
        ];
        memory.commit = Some("3f9c2b7e8a1d".parse().unwrap());
        let text = render(&memory);
        let hash = memory.anchors[0].hash.as_ref().unwrap();
        let expected_tail = format!(
            "trigger: turn\nanchors:\n- path: src/db/pool.rs\n  symbol: connect_pool\n  hash: {hash}\n\
             - path: Cargo.toml\ncommit: 3f9c2b7e8a1d\n---\n"
        );
        assert!(text.contains(&expected_tail), "{text}");
        assert_eq!(parse(&text, memory.namespace.clone()).unwrap(), memory);
        let escaping = text.replace("path: Cargo.toml", "path: ../Cargo.toml");
        assert!(parse(&escaping, memory.namespace.clone()).is_err());
    }

    #[test]
    fn reads_hand_written_files() {
        let text = "\u{feff}---\r\nid: 0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d\r\nversion: 1\r\n\
            scope: repo\r\ncategory: patterns\r\ncreated_at: 2026-01-02T03:04:05+01:00\r\n\
            updated_at: 2026-01-02T03:04:05Z\r\ntrigger: manual\r\ntags: [mine]\r\n---\r\n\r\n\
            Body with\n---\na rule inside.\n\n";
        let memory = parse(text, Namespace::Repo(RepoId::from_str("forge").unwrap())).unwrap();
        assert_eq!(memory.content, "Body with\n---\na rule inside.");
        assert_eq!(memory.created_at.to_rfc3339(), "2026-01-02T02:04:05+00:00");
        assert!(memory.related.is_empty());
    }

    #[test]
    fn refuses_files_that_do_not_hold_a_memory() {
        let user = || Namespace::User(UserId::from_str("ana").unwrap());
        let good = render(&sample());
        let cases = [
            ("no front matter", "just text".to_owned()),
            ("unclosed", good.replacen("---\nUser", "User", 1)),
            ("bad yaml", good.replace("version: 2", "version: [")),
            ("bad category", good.replace("coding-preferences", "vibes")),
            ("zero version", good.replace("version: 2", "version: 0")),
            (
                "importance",
                good.replace("importance: 0.7", "importance: 7"),
            ),
            (
                "empty body",
                format!("{}---\n \n", good.rsplit_once("---\n").unwrap().0),
            ),
        ];
        for (what, text) in cases {
            assert!(parse(&text, user()).is_err(), "{what} should not parse");
        }
        let repo = Namespace::Repo(RepoId::from_str("forge").unwrap());
        assert!(matches!(
            parse(&good, repo),
            Err(Error::Invalid { field: "scope", .. })
        ));
    }

    fn arb_memory() -> impl Strategy<Value = Memory> {
        (
            any::<u128>(),
            1u32..1000,
            prop::sample::select(Category::ALL),
            0i64..4_000_000_000,
            prop::option::of(any::<u128>()),
            prop::collection::vec(
                (any::<u128>(), prop::sample::select(Relationship::ALL)),
                0..4,
            ),
            prop::option::of(0.0f64..=1.0),
            prop::option::of("[A-Za-z0-9][A-Za-z0-9._-]{0,20}"),
            prop::sample::select(vec![Origin::Turn, Origin::Compaction, Origin::Manual]),
            "\\PC[\\PC\n]{0,200}\\PC",
            any::<bool>(),
            (
                prop::collection::vec(("[a-z]{1,8}(/[a-z0-9_]{1,8}){0,3}", any::<bool>()), 0..3),
                prop::option::of("[0-9a-f]{40}"),
                prop::option::of(0i64..4_000_000_000),
            ),
        )
            .prop_map(
                |(
                    id,
                    version,
                    category,
                    secs,
                    supersedes,
                    related,
                    importance,
                    session,
                    trigger,
                    content,
                    repo,
                    (anchors, commit, observed),
                )| {
                    let at = Utc.timestamp_opt(secs, 0).unwrap();
                    Memory {
                        id: MemoryId::from_str(&uuid::Uuid::from_u128(id).to_string()).unwrap(),
                        version,
                        namespace: if repo {
                            Namespace::Repo(RepoId::from_str("r").unwrap())
                        } else {
                            Namespace::User(UserId::from_str("u").unwrap())
                        },
                        category,
                        created_at: at,
                        updated_at: at,
                        supersedes: supersedes.map(|s| {
                            MemoryId::from_str(&uuid::Uuid::from_u128(s).to_string()).unwrap()
                        }),
                        related: related
                            .into_iter()
                            .map(|(id, relationship)| RelatedEdge {
                                id: MemoryId::from_str(&uuid::Uuid::from_u128(id).to_string())
                                    .unwrap(),
                                relationship,
                            })
                            .collect(),
                        importance,
                        session_id: session.map(|s| SessionId::from_str(&s).unwrap()),
                        trigger,
                        anchors: anchors
                            .into_iter()
                            .enumerate()
                            .map(|(n, (path, hashed))| Anchor {
                                path: format!("{path}{n}").parse().unwrap(),
                                symbol: hashed.then(|| "main".parse().unwrap()),
                                hash: hashed
                                    .then(|| crate::memory::ContentHash::of(path.as_bytes())),
                            })
                            .collect(),
                        commit: commit.map(|c| CommitId::from_str(&c).unwrap()),
                        observed_at: observed.map(|secs| Utc.timestamp_opt(secs, 0).unwrap()),
                        content: content.trim().to_owned(),
                        lifecycle: Lifecycle::default(),
                    }
                },
            )
            .prop_filter("content must be non-empty once trimmed", |m| {
                !m.content.is_empty()
            })
    }

    proptest! {
        #[test]
        fn front_matter_round_trips(memory in arb_memory()) {
            let parsed = parse(&render(&memory), memory.namespace.clone()).unwrap();
            prop_assert_eq!(parsed, memory);
        }

        #[test]
        fn parsing_never_panics(text in "(---\n)?[\\PC\n]{0,300}") {
            let _ = parse(&text, Namespace::Repo(RepoId::from_str("r").unwrap()));
        }
    }
}
