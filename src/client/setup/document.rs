//! One settings file as setup reads and writes it: parsed in its format,
//! each entry merged in ([`merge`](super::merge) for JSON and TOML,
//! [`instructions`](super::instructions) for Markdown), and rendered back.
//! A JSON file is written back through [`json_edit`], which keeps every
//! byte of what did not change (comments too, in the dialects that have
//! them); TOML through `toml_edit`, which keeps layout and comments; a
//! Markdown file keeps every byte outside Engram's block.

use std::path::Path;

use serde_json::{Map, Value};
use toml_edit::DocumentMut;

use super::Error;
use super::instructions;
use super::json_edit::{self, EditError, JsonDialect};
use super::merge::{self, Change, Entry, WrongShape};
use crate::client::agent::McpFormat;

/// The format of a settings file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json(JsonDialect),
    Toml,
    /// An instructions file; a new one starts with `starts_with` (front
    /// matter, where the agent reads one).
    Markdown {
        starts_with: &'static str,
    },
}

impl From<McpFormat> for Format {
    fn from(format: McpFormat) -> Self {
        match format {
            McpFormat::Json(dialect) => Self::Json(dialect),
            McpFormat::Toml => Self::Toml,
        }
    }
}

/// A configuration file as read, to merge entries into.
pub enum Document {
    /// A JSON file: its text (`None` when empty or new), the value it
    /// holds, and the value wanted.
    Json {
        dialect: JsonDialect,
        text: Option<String>,
        before: Value,
        after: Value,
    },
    Toml(DocumentMut),
    Markdown(String),
}

impl Document {
    /// A new, empty file.
    pub fn empty(format: Format) -> Self {
        match format {
            Format::Json(dialect) => Self::Json {
                dialect,
                text: None,
                before: Value::Object(Map::new()),
                after: Value::Object(Map::new()),
            },
            Format::Toml => Self::Toml(DocumentMut::new()),
            Format::Markdown { starts_with } => Self::Markdown(starts_with.to_owned()),
        }
    }

    /// The file at `path`, which holds `text`.
    pub fn parse(format: Format, text: &str, path: &Path) -> Result<Self, Error> {
        if text.trim().is_empty() {
            return Ok(Self::empty(format));
        }
        match format {
            Format::Json(dialect) => json_edit::parse(text, dialect)
                .map(|value| Self::Json {
                    dialect,
                    text: Some(text.to_owned()),
                    before: value.clone(),
                    after: value,
                })
                .map_err(|source| Error::Parse {
                    path: path.to_owned(),
                    source,
                }),
            Format::Toml => text
                .parse()
                .map(Self::Toml)
                .map_err(|source| Error::ParseToml {
                    path: path.to_owned(),
                    source,
                }),
            Format::Markdown { .. } => Ok(Self::Markdown(text.to_owned())),
        }
    }

    pub fn merge(&mut self, entry: &Entry) -> Result<Change, WrongShape> {
        match self {
            Self::Json { after, .. } => merge::merge(after, entry),
            Self::Toml(document) => merge::merge_toml(document, entry),
            Self::Markdown(text) => instructions::merge(text, entry),
        }
    }

    /// The file's new text: a JSON file that had text keeps every byte
    /// outside Engram's changes; a new one is pretty-printed.
    pub fn render(&self) -> Result<String, EditError> {
        match self {
            Self::Json {
                dialect,
                text: Some(text),
                before,
                after,
            } => json_edit::rewrite(text, before, after, *dialect),
            Self::Json {
                text: None, after, ..
            } => Ok(format!("{}\n", pretty(after))),
            Self::Toml(document) => Ok(document.to_string()),
            Self::Markdown(text) => Ok(text.clone()),
        }
    }
}

fn pretty(document: &Value) -> String {
    serde_json::to_string_pretty(document).unwrap_or_else(|_| document.to_string())
}
