//! What in a repository a memory is about: its `anchors` (a file, a name
//! in it, the file's content hash when the memory was written) and the
//! `commit` it was written at. Each part is checked where it enters, so
//! a stored anchor always names a repo-relative path that stays inside
//! the working tree it is checked against.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ParseError, truncate_for_message};

/// The most anchors one memory may name.
pub const MAX_ANCHORS: usize = 32;
/// The longest anchor path, in characters.
const MAX_PATH_CHARS: usize = 1024;
/// The longest symbol, in characters.
const MAX_SYMBOL_CHARS: usize = 256;
/// How a content hash is spelled: the algorithm, then the digest.
const HASH_PREFIX: &str = "sha256:";

/// One thing in the repo a memory is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    pub path: AnchorPath,
    /// A name (a function, a type, a key) that must still appear in the
    /// file for the memory to hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<AnchorSymbol>,
    /// The file's content hash when the memory was written:
    /// `sha256:` and 64 hexadecimal digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<ContentHash>,
}

checked_string!(
    /// A file of the repo, relative to its root and `/`-separated: never
    /// absolute, never with a `..`, `.` or empty part, so joined to a
    /// working tree it stays inside it.
    AnchorPath, check_path, schema(example = "src/db/pool.rs")
);
checked_string!(
    /// A name that must still appear in the anchored file.
    AnchorSymbol, check_symbol, schema(example = "connect_pool")
);
checked_string!(
    /// A file's content hash: `sha256:` and 64 lower-case hexadecimal
    /// digits (upper case is taken and lowered).
    ContentHash, check_hash, schema(example = "sha256:9f2c5e0b1d7a4c3e8f6b2a1d0c9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e")
);
checked_string!(
    /// A git commit: 7 to 64 lower-case hexadecimal digits (a SHA-1 or
    /// SHA-256 object name, or an abbreviation of one).
    CommitId, check_commit, schema(example = "3f9c2b7e8a1d4c6b9e0f2a3d5c7b8e9f0a1b2c3d")
);

impl ContentHash {
    /// The hash of `bytes`, as an anchor spells it.
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(bytes);
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        Self(format!("{HASH_PREFIX}{hex}"))
    }
}

fn refuse(what: &str, value: &str, rule: &str) -> ParseError {
    ParseError(format!(
        "not a valid {what} ({rule}): {:?}",
        truncate_for_message(value)
    ))
}

fn check_path(value: String) -> Result<String, ParseError> {
    const RULE: &str = "a repo-relative path of at most 1024 characters, '/'-separated, \
                        without a leading '/', a drive, '\\', control characters, \
                        or '.', '..' or empty parts";
    let absolute_on_windows = value.as_bytes().get(1) == Some(&b':');
    let valid = !value.is_empty()
        && value.chars().count() <= MAX_PATH_CHARS
        && !absolute_on_windows
        && !value.contains('\\')
        && !value.chars().any(char::is_control)
        && value
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if valid {
        Ok(value)
    } else {
        Err(refuse("anchor path", &value, RULE))
    }
}

fn check_symbol(value: String) -> Result<String, ParseError> {
    const RULE: &str = "1 to 256 characters, no control characters, \
                        no leading or trailing whitespace";
    let valid = !value.is_empty()
        && value.chars().count() <= MAX_SYMBOL_CHARS
        && value.trim() == value
        && !value.chars().any(char::is_control);
    if valid {
        Ok(value)
    } else {
        Err(refuse("symbol", &value, RULE))
    }
}

fn check_hash(mut value: String) -> Result<String, ParseError> {
    const RULE: &str = "`sha256:` and 64 hexadecimal digits";
    let valid = value
        .strip_prefix(HASH_PREFIX)
        .is_some_and(|digest| digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
    if valid {
        value.make_ascii_lowercase();
        Ok(value)
    } else {
        Err(refuse("content hash", &value, RULE))
    }
}

fn check_commit(mut value: String) -> Result<String, ParseError> {
    const RULE: &str = "7 to 64 hexadecimal digits";
    if (7..=64).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        value.make_ascii_lowercase();
        Ok(value)
    } else {
        Err(refuse("commit", &value, RULE))
    }
}

/// A file of the repo that git found renamed since a memory was written:
/// the memory's anchors on `from` follow it to `to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Renamed {
    pub from: AnchorPath,
    pub to: AnchorPath,
}

/// `anchors` with each one on a renamed file's old path moved to its new
/// one (its symbol and hash kept: the hash is still of the content it was
/// written against). One that then repeats an earlier (path, symbol) is
/// dropped, so the list stays valid for [`check_anchors`].
pub fn follow_renames(anchors: &[Anchor], renamed: &[Renamed]) -> Vec<Anchor> {
    let mut followed: Vec<Anchor> = Vec::with_capacity(anchors.len());
    for anchor in anchors {
        let path = renamed
            .iter()
            .find(|rename| rename.from == anchor.path)
            .map_or(&anchor.path, |rename| &rename.to);
        let moved = Anchor {
            path: path.clone(),
            ..anchor.clone()
        };
        let repeats = followed
            .iter()
            .any(|earlier| earlier.path == moved.path && earlier.symbol == moved.symbol);
        if !repeats {
            followed.push(moved);
        }
    }
    followed
}

/// Checks a memory's anchors as a whole: at most [`MAX_ANCHORS`], each
/// (path, symbol) once. Returns the field at fault and why.
pub fn check_anchors(anchors: &[Anchor]) -> Result<(), (String, String)> {
    if anchors.len() > MAX_ANCHORS {
        return Err((
            "anchors".to_owned(),
            format!("has {} anchors; the limit is {MAX_ANCHORS}", anchors.len()),
        ));
    }
    for (index, anchor) in anchors.iter().enumerate() {
        let repeated = anchors[..index]
            .iter()
            .any(|earlier| earlier.path == anchor.path && earlier.symbol == anchor.symbol);
        if repeated {
            return Err((
                format!("anchors[{index}]"),
                format!("repeats the anchor {}", anchor.path),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn paths_stay_inside_the_working_tree() {
        for good in [
            "src/db/pool.rs",
            "README.md",
            ".github/workflows/ci.yml",
            "a b/c",
        ] {
            assert!(AnchorPath::from_str(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../outside",
            "src/../../x",
            "src//x",
            "./src",
            "src/",
            "C:/Windows",
            "src\\db.rs",
            "a\nb",
            &"x".repeat(1025),
        ] {
            assert!(AnchorPath::from_str(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hashes_and_commits_have_one_spelling() {
        let digest = "9F2C".repeat(16);
        let hash = ContentHash::from_str(&format!("sha256:{digest}")).unwrap();
        assert_eq!(hash.as_str(), format!("sha256:{}", digest.to_lowercase()));
        assert!(
            ContentHash::from_str(&digest).is_err(),
            "the algorithm is named"
        );
        assert!(ContentHash::from_str("sha256:abc").is_err());
        assert_eq!(
            ContentHash::of(b"").as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(CommitId::from_str("3F9C2B7").unwrap().as_str(), "3f9c2b7");
        assert!(CommitId::from_str("3f9c2b").is_err());
        assert!(CommitId::from_str("main").is_err());
    }

    #[test]
    fn a_symbol_is_one_clean_name() {
        assert!(AnchorSymbol::from_str("connect_pool").is_ok());
        assert!(AnchorSymbol::from_str("impl Store").is_ok());
        for bad in ["", " pool", "pool\n", &"x".repeat(257)] {
            assert!(AnchorSymbol::from_str(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn anchors_follow_their_renamed_files_and_stay_each_once() {
        let anchor = |path: &str, symbol: Option<&str>| Anchor {
            path: AnchorPath::from_str(path).unwrap(),
            symbol: symbol.map(|symbol| AnchorSymbol::from_str(symbol).unwrap()),
            hash: Some(ContentHash::of(path.as_bytes())),
        };
        let rename = |from: &str, to: &str| Renamed {
            from: AnchorPath::from_str(from).unwrap(),
            to: AnchorPath::from_str(to).unwrap(),
        };
        let anchors = [
            anchor("src/a.rs", Some("run")),
            anchor("src/a.rs", None),
            anchor("src/b.rs", None),
            anchor("README.md", None),
        ];
        let followed = follow_renames(
            &anchors,
            &[
                rename("src/a.rs", "src/c.rs"),
                rename("src/b.rs", "src/c.rs"),
            ],
        );
        let paths: Vec<(&str, Option<&str>)> = followed
            .iter()
            .map(|anchor| {
                (
                    anchor.path.as_str(),
                    anchor.symbol.as_ref().map(AnchorSymbol::as_str),
                )
            })
            .collect();
        // b.rs's anchor would repeat a.rs's whole-file one at c.rs.
        assert_eq!(
            paths,
            [
                ("src/c.rs", Some("run")),
                ("src/c.rs", None),
                ("README.md", None)
            ]
        );
        assert_eq!(
            followed[0].hash, anchors[0].hash,
            "the hash stays the written one"
        );
        assert!(check_anchors(&followed).is_ok());
        assert_eq!(follow_renames(&anchors, &[]), anchors);
    }

    #[test]
    fn a_list_of_anchors_is_bounded_and_names_each_once() {
        let anchor = |path: &str| Anchor {
            path: path.parse().unwrap(),
            symbol: None,
            hash: None,
        };
        assert!(check_anchors(&[anchor("a"), anchor("b")]).is_ok());
        let (field, _) = check_anchors(&[anchor("a"), anchor("b"), anchor("a")]).unwrap_err();
        assert_eq!(field, "anchors[2]");
        let many: Vec<Anchor> = (0..=MAX_ANCHORS)
            .map(|n| anchor(&format!("f{n}")))
            .collect();
        assert_eq!(check_anchors(&many).unwrap_err().0, "anchors");
    }
}
