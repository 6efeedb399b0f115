//! The domain: ids, namespaces, categories and the memory itself.
//!
//! Every type here is parsed once, where input enters (HTTP, front-matter,
//! configuration), and is valid from then on: a `RepoId` can never hold `../`,
//! so only checked ids ever become paths.
//!
//! It also holds the one declaration of a memory's own fields,
//! [`memory_fields!`], from which every form of a memory (this domain
//! type, the JSON of the API and of an export, the file's front-matter)
//! takes them and through which each is converted into another: a new
//! field is declared there once. See `docs/guides/adding-a-memory-field.md`.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// Why a string was refused as an id or enum value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// The longest repo, user or session id (the pattern allows 1 + 127 characters).
const MAX_NAME_LEN: usize = 128;

/// Checks `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$` without a regex engine.
fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= MAX_NAME_LEN
        && first.is_ascii_alphanumeric()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Declares a string newtype that holds only what `$check` accepts (and
/// as it returns it), checked whenever one is built: from JSON, YAML, a
/// path or a query. `$schema` completes its OpenAPI schema.
macro_rules! checked_string {
    ($(#[$doc:meta])* $name:ident, $check:expr, schema($($schema:tt)*)) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
        #[serde(try_from = "String", into = "String")]
        #[schema(value_type = String, $($schema)*)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = ParseError;
            fn try_from(value: String) -> Result<Self, ParseError> {
                ($check)(value).map(Self)
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(value: &str) -> Result<Self, ParseError> {
                Self::try_from(value.to_owned())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// `value` if it is a valid name (see [`is_valid_name`]), else why not,
/// calling it `what`.
fn check_name(value: String, what: &str) -> Result<String, ParseError> {
    if is_valid_name(&value) {
        Ok(value)
    } else {
        Err(ParseError(format!(
            "not a valid {what} (1-128 characters: letters, digits, '.', '_', '-', starting with a letter or digit): {:?}",
            truncate_for_message(&value)
        )))
    }
}

/// Declares a newtype of names matching the id pattern.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        checked_string!(
            $(#[$doc])* $name,
            |value| check_name(value, $what),
            schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", example = "forge")
        );
    };
}

mod anchors;
mod fields;
pub use anchors::{
    Anchor, AnchorPath, AnchorSymbol, CommitId, ContentHash, MAX_ANCHORS, Renamed, check_anchors,
    follow_renames,
};
pub(crate) use fields::{memory_fields, memory_form, with_memory_fields};

name_type!(
    /// A repository (project) id; owns repo-scoped memories.
    RepoId,
    "repo id"
);
name_type!(
    /// A user id; owns user-scoped memories.
    UserId,
    "user id"
);
name_type!(
    /// A client's session id, recorded on memories captured from it.
    SessionId,
    "session id"
);

/// Keeps error messages short when the offending input is huge.
fn truncate_for_message(value: &str) -> String {
    const SHOWN: usize = 64;
    match value.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    }
}

/// The head of a memory's `content` for a one-line message: whitespace
/// collapsed, at most `max_chars` characters, `…` where it was cut.
pub fn excerpt(content: &str, max_chars: usize) -> String {
    let collapsed = content.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &collapsed[..cut]),
        None => collapsed,
    }
}

/// A memory id: a UUID (v7 for memories Engram writes, so ids sort by time).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(try_from = "String", into = "String")]
#[schema(value_type = String, format = Uuid, example = "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d")]
pub struct MemoryId(Uuid);

impl MemoryId {
    /// A fresh, time-ordered id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// The UUID, for a database column of that type.
    pub fn as_uuid(self) -> Uuid {
        self.0
    }

    /// Any UUID is a valid id (a database column of that type holds one).
    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }
}

impl Default for MemoryId {
    fn default() -> Self {
        Self::new()
    }
}

impl TryFrom<String> for MemoryId {
    type Error = ParseError;
    fn try_from(value: String) -> Result<Self, ParseError> {
        value.parse()
    }
}

impl FromStr for MemoryId {
    type Err = ParseError;
    /// Only the hyphenated form is accepted, so an id has exactly one spelling
    /// and one file name.
    fn from_str(value: &str) -> Result<Self, ParseError> {
        let invalid = || {
            ParseError(format!(
                "not a valid memory id (a hyphenated UUID): {:?}",
                truncate_for_message(value)
            ))
        };
        if value.len() != 36 {
            return Err(invalid());
        }
        Uuid::try_parse(value).map(Self).map_err(|_| invalid())
    }
}

impl From<MemoryId> for String {
    fn from(value: MemoryId) -> String {
        value.to_string()
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Lower-case hyphenated, the form used in file names.
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

/// Declares a closed enum, spelled in kebab-case, with its parser and list of values.
macro_rules! word_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "kebab-case")]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(value: &str) -> Result<Self, ParseError> {
                match value {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(ParseError(format!(
                        concat!("unknown ", $what, " {:?}; expected one of: {}"),
                        truncate_for_message(value),
                        [$($text),+].join(", ")
                    ))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mod lifecycle;
pub use lifecycle::{
    Confidence, LetGo, Lifecycle, MAX_REVIEW_REASON_CHARS, Retention, Validity, parse_review_reason,
};

word_enum!(
    /// Whether a memory is true of one project or of one person.
    Scope, "scope" {
        Repo => "repo",
        User => "user",
    }
);

word_enum!(
    /// What kind of durable fact a memory holds.
    Category, "category" {
        CodingPreferences => "coding-preferences",
        ProjectConventions => "project-conventions",
        ArchitecturalDecisions => "architectural-decisions",
        UserFacts => "user-facts",
        Corrections => "corrections",
        Patterns => "patterns",
    }
);

word_enum!(
    /// The type of a `related` edge between two memories.
    Relationship, "relationship" {
        Refines => "refines",
        Contradicts => "contradicts",
        Extends => "extends",
        DependsOn => "depends-on",
        ExampleOf => "example-of",
        Related => "related",
    }
);

word_enum!(
    /// What wrote a memory: its `trigger` (the capture trigger that found it,
    /// or a manual write).
    Origin, "trigger" {
        Turn => "turn",
        Compaction => "compaction",
        Manual => "manual",
    }
);

/// The owner of a memory: `repo/<repo>` or `user/<user>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespace {
    Repo(RepoId),
    User(UserId),
}

impl Namespace {
    /// The namespace as JSON spells it: its scope, and the repo or the
    /// user that owns it.
    pub fn owner_fields(&self) -> (Scope, Option<RepoId>, Option<UserId>) {
        match self {
            Self::Repo(repo) => (Scope::Repo, Some(repo.clone()), None),
            Self::User(user) => (Scope::User, None, Some(user.clone())),
        }
    }

    pub fn scope(&self) -> Scope {
        match self {
            Self::Repo(_) => Scope::Repo,
            Self::User(_) => Scope::User,
        }
    }

    /// The namespace of a given scope for a request's (repo, user) pair.
    pub fn for_scope(scope: Scope, repo: &RepoId, user: &UserId) -> Self {
        match scope {
            Scope::Repo => Self::Repo(repo.clone()),
            Scope::User => Self::User(user.clone()),
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Repo(repo) => write!(f, "repo/{repo}"),
            Self::User(user) => write!(f, "user/{user}"),
        }
    }
}

/// A typed edge from one memory to another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RelatedEdge {
    pub id: MemoryId,
    pub relationship: Relationship,
}

memory_form! {
    /// One immutable version of a memory. Changing a memory writes a new one
    /// that `supersedes` it.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Memory {
        pub id: MemoryId,
        pub version: u32,
        pub namespace: Namespace,
        ..memory,
        /// The fact itself, trimmed, never empty.
        pub content: String,
        /// Whether it still holds, how sure Engram is of it, and whether it
        /// was let go: not part of the version (see [`Lifecycle`]).
        pub lifecycle: Lifecycle,
    }
}

memory_form! {
    /// A memory: its front-matter plus its content and owner.
    #[derive(Clone, Debug, Serialize, ToSchema)]
    pub struct MemoryView {
        pub id: MemoryId,
        pub version: u32,
        pub scope: Scope,
        /// The owning repo, for repo-scoped memories.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub repo: Option<RepoId>,
        /// The owning user, for user-scoped memories.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub user: Option<UserId>,
        ..view,
        pub content: String,
        #[serde(flatten)]
        pub lifecycle: Lifecycle,
    }
}

impl Memory {
    /// When its fact was said or became true: `observed_at`, else when
    /// this version was written. Time in retrieval (`as_of`, recency, the
    /// time a question names) is measured on it.
    pub fn observed(&self) -> DateTime<Utc> {
        self.observed_at.unwrap_or(self.created_at)
    }
}

impl From<&Memory> for MemoryView {
    fn from(memory: &Memory) -> Self {
        let memory = memory.clone();
        let (scope, repo, user) = memory.namespace.owner_fields();
        with_memory_fields!(MemoryView {
            id: memory.id,
            version: memory.version,
            scope,
            repo,
            user,
            content: memory.content,
            lifecycle: memory.lifecycle,
        } from memory)
    }
}

#[cfg(test)]
impl Memory {
    /// A fresh first version written by hand now, for unit tests: callers
    /// change the fields their case is about.
    pub fn example(namespace: Namespace, category: Category, content: &str) -> Self {
        let now = Utc::now();
        Self {
            id: MemoryId::new(),
            version: 1,
            namespace,
            category,
            created_at: now,
            updated_at: now,
            supersedes: None,
            related: Vec::new(),
            importance: None,
            session_id: None,
            trigger: Origin::Manual,
            anchors: Vec::new(),
            commit: None,
            observed_at: None,
            content: content.to_owned(),
            lifecycle: Lifecycle::default(),
        }
    }
}

/// The longest memory content, in characters.
pub const MAX_CONTENT_CHARS: usize = 8_000;

/// Checks memory content to be written: non-empty after trimming, within
/// the limit, and free of U+0000 (PostgreSQL's text cannot hold it, so
/// both backends refuse it alike). Returns the trimmed content, the form
/// in which it is stored.
pub fn parse_content(content: &str) -> Result<&str, ParseError> {
    if content.contains('\0') {
        return Err(ParseError(
            "must not contain the character U+0000 (NUL)".to_owned(),
        ));
    }
    parse_stored_content(content)
}

/// [`parse_content`] for content stored already (a memory file): one
/// written before U+0000 was refused is still read, never dropped.
pub fn parse_stored_content(content: &str) -> Result<&str, ParseError> {
    let trimmed = content.trim();
    if trimmed.is_empty() {
        return Err(ParseError("must not be empty".to_owned()));
    }
    let chars = trimmed.chars().count();
    if chars > MAX_CONTENT_CHARS {
        return Err(ParseError(format!(
            "is {chars} characters long; the limit is {MAX_CONTENT_CHARS}"
        )));
    }
    Ok(trimmed)
}

/// Checks an importance: a finite number in 0..=1.
pub fn parse_importance(importance: f64) -> Result<f64, ParseError> {
    if (0.0..=1.0).contains(&importance) {
        Ok(importance)
    } else {
        Err(ParseError(format!(
            "must be between 0 and 1, got {importance}"
        )))
    }
}

/// The highest `version` a memory is brought in with (an import): far
/// above any chain written by hand or by capture, and far enough below
/// `u32::MAX` that a chain brought in at it can still be superseded.
pub const MAX_IMPORTED_VERSION: u32 = 1_000_000;

/// The highest use count a memory is brought in with: a million
/// retrievals a day for over two thousand years, and far enough below
/// `u64::MAX` (and PostgreSQL's `bigint`) that counting on never wraps.
pub const MAX_ACCESS_COUNT: u64 = 1_000_000_000_000;

/// How far past this server's clock a timestamp brought in may be: the
/// clocks of the host that wrote it and of this one may differ a little.
pub const CLOCK_SKEW: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Checks the version of a memory brought in: 1 to
/// [`MAX_IMPORTED_VERSION`].
pub fn parse_version(version: u32) -> Result<u32, ParseError> {
    if (1..=MAX_IMPORTED_VERSION).contains(&version) {
        Ok(version)
    } else {
        Err(ParseError(format!(
            "must be between 1 and {MAX_IMPORTED_VERSION}, got {version}"
        )))
    }
}

/// Checks a timestamp of a memory brought in: not before the Unix epoch
/// (no memory is older), not after `now` plus [`CLOCK_SKEW`] (a memory
/// from the future would head every newest-first listing for good).
pub fn parse_timestamp(at: DateTime<Utc>, now: DateTime<Utc>) -> Result<DateTime<Utc>, ParseError> {
    let latest = now + CLOCK_SKEW;
    if at < DateTime::UNIX_EPOCH {
        Err(ParseError(format!(
            "is {}, before 1970-01-01T00:00:00Z",
            at.to_rfc3339()
        )))
    } else if at > latest {
        Err(ParseError(format!(
            "is {}, later than this server's clock allows ({})",
            at.to_rfc3339(),
            latest.to_rfc3339()
        )))
    } else {
        Ok(at)
    }
}

/// Checks the use count of a memory brought in: at most
/// [`MAX_ACCESS_COUNT`].
pub fn parse_access_count(count: u64) -> Result<u64, ParseError> {
    if count <= MAX_ACCESS_COUNT {
        Ok(count)
    } else {
        Err(ParseError(format!(
            "must be at most {MAX_ACCESS_COUNT}, got {count}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_pattern() {
        for good in ["a", "forge", "A.b_c-d", "9", &"x".repeat(128)] {
            assert!(RepoId::from_str(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "..",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(RepoId::from_str(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_ids_have_one_spelling() {
        let id = MemoryId::new();
        assert_eq!(id.to_string().parse::<MemoryId>(), Ok(id));
        assert!(MemoryId::from_str("0193f0c26a557b1e9c2d5f1e2a3b4c5d").is_err());
        assert!(MemoryId::from_str("{0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d}").is_err());
        assert!(MemoryId::from_str("../../etc/passwd").is_err());
    }

    #[test]
    fn enums_round_trip_through_their_spelling() {
        for category in Category::ALL {
            assert_eq!(category.as_str().parse::<Category>(), Ok(*category));
        }
        let err = "vibes".parse::<Category>().unwrap_err().to_string();
        assert!(err.contains("coding-preferences"), "{err}");
    }

    #[test]
    fn content_is_trimmed_and_bounded() {
        assert_eq!(parse_content("  hi \n"), Ok("hi"));
        assert!(parse_content(" \n\t").is_err());
        assert!(parse_content(&"é".repeat(MAX_CONTENT_CHARS)).is_ok());
        assert!(parse_content(&"é".repeat(MAX_CONTENT_CHARS + 1)).is_err());
        assert!(parse_content("before\0after").is_err(), "NUL is refused");
        assert_eq!(parse_stored_content("before\0after"), Ok("before\0after"));
    }

    #[test]
    fn numbers_brought_in_are_bounded() {
        assert!(parse_version(0).is_err());
        assert_eq!(
            parse_version(MAX_IMPORTED_VERSION),
            Ok(MAX_IMPORTED_VERSION)
        );
        assert!(parse_version(u32::MAX).is_err());
        assert_eq!(parse_access_count(MAX_ACCESS_COUNT), Ok(MAX_ACCESS_COUNT));
        assert!(parse_access_count(u64::MAX).is_err());
        let now = Utc::now();
        assert_eq!(parse_timestamp(now + CLOCK_SKEW, now), Ok(now + CLOCK_SKEW));
        assert!(parse_timestamp(now + CLOCK_SKEW * 2, now).is_err());
        assert_eq!(
            parse_timestamp(DateTime::UNIX_EPOCH, now),
            Ok(DateTime::UNIX_EPOCH)
        );
        let before_the_epoch = DateTime::UNIX_EPOCH - chrono::TimeDelta::seconds(1);
        assert!(parse_timestamp(before_the_epoch, now).is_err());
    }
}
