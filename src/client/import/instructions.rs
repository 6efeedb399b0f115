//! `engram import agents-md FILE... [--repo R]`: the conventions written in
//! an agent's instructions files (`CLAUDE.md`, `AGENTS.md`,
//! `.cursor/rules/*.mdc`, `GEMINI.md`, `.github/copilot-instructions.md`
//! and the like) as repo memories (`project-conventions`), with no model.
//!
//! Each bullet (with its continuation lines) and each short paragraph
//! becomes one memory, prefixed with the section heading it sits under
//! when there is one (a bullet means little without it). Front matter
//! (`---` … `---`, as `.mdc` rules have), code blocks, tables, HTML
//! comments, headings themselves, and paragraphs longer than
//! [`MAX_PARAGRAPH_CHARS`] are left out. The memories are written through
//! `POST /memories/batch` (up to 1,000 a request) with `dedupe`, so
//! running the import again stores nothing new, and an item that says
//! what an earlier one says is not stored twice: each item is told as
//! stored, a duplicate, or refused (with Engram's reason).
//!
//! A file in a git working tree is what its conventions are about: each
//! one is anchored to the file it came from (repo-relative, with its
//! content hash, as [`touched`] finds it), at the tree's `HEAD`, so a
//! check finds it `changed` once the file is edited.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::Error;
use crate::client::hook::project;
use crate::client::hook::touched::{self, Touched};
use crate::client::http::ServerArgs;

/// The longest paragraph taken as one convention, in characters: a longer
/// one is prose, not a rule.
pub const MAX_PARAGRAPH_CHARS: usize = 600;

/// The shortest item taken, in characters: shorter ones are labels.
const MIN_ITEM_CHARS: usize = 12;

/// How the lines an agent writes about the file itself begin: they say
/// what the file is for, not how to work (Claude Code's `/init` opens
/// CLAUDE.md with "This file provides guidance to Claude Code
/// (claude.ai/code) when working with code in this repository.").
const ABOUT_THE_FILE: &[&str] = &["This file provides guidance to "];

/// The most conventions one request carries (`POST /memories/batch`
/// takes 1,000).
const MAX_BATCH: usize = 1000;

/// The problem type of a near-duplicate refused by `dedupe`.
const DUPLICATE: &str = "urn:engram:problem:duplicate-memory";

/// `engram import agents-md`'s arguments.
#[derive(Debug, clap::Args)]
pub struct InstructionsArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The instructions files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The repo the conventions belong to (default: the current
    /// directory's project, as the hooks find it).
    #[arg(long)]
    pub repo: Option<String>,
}

pub async fn run(args: &InstructionsArgs) -> Result<String, Error> {
    let repo = match &args.repo {
        Some(repo) => project::to_id(repo),
        None => std::env::current_dir()
            .ok()
            .and_then(|dir| project::repo_name(&dir)),
    }
    .ok_or_else(|| Error::Usage("no repo id: pass --repo".to_owned()))?;
    // Each item once, with the file it was first found in.
    let mut items: Vec<(String, usize)> = Vec::new();
    let mut in_trees = Vec::with_capacity(args.files.len());
    for (index, file) in args.files.iter().enumerate() {
        let text = super::read_text(file)?;
        in_trees.push(in_its_tree(file));
        for item in conventions(&text) {
            if !items.iter().any(|(seen, _)| *seen == item) {
                items.push((item, index));
            }
        }
    }
    let bodies = items
        .iter()
        .map(|(item, index)| {
            let mut body = json!({"scope": "repo", "repo": repo,
                "category": "project-conventions", "content": item, "dedupe": true});
            if let Some(Touched { commit, files }) = &in_trees[*index] {
                body["anchors"] = json!(files);
                if let Some(commit) = commit {
                    body["commit"] = json!(commit);
                }
            }
            body
        })
        .collect();
    let api = args.server.api()?;
    let (mut stored, mut duplicates, mut refused) = (0, 0, 0);
    let mut told = items.iter().map(|(item, _)| item);
    for batch in super::batches(bodies, MAX_BATCH) {
        let answer = api
            .post("/memories/batch", &json!({ "memories": batch }))
            .await?;
        let results = answer["results"].as_array().map_or(&[][..], Vec::as_slice);
        if results.len() != batch.len() {
            return Err(Error::Stopped(format!(
                "POST /memories/batch answered {} results for {} conventions",
                results.len(),
                batch.len()
            )));
        }
        for (result, item) in results.iter().zip(told.by_ref()) {
            let problem = &result["problem"];
            let detail = problem["detail"].as_str().unwrap_or_default();
            match result["status"].as_u64() {
                Some(201) => {
                    stored += 1;
                    let id = result["memory"]["id"].as_str().unwrap_or_default();
                    eprintln!("stored {id}: {item}");
                }
                Some(409) if problem["type"] == DUPLICATE => {
                    duplicates += 1;
                    eprintln!("duplicate, skipped: {item}");
                }
                Some(422) => {
                    refused += 1;
                    eprintln!("refused ({detail}): {item}");
                }
                status => {
                    return Err(Error::Stopped(format!(
                        "Engram refused a convention ({}): {detail}",
                        status.unwrap_or_default()
                    )));
                }
            }
        }
    }
    Ok(format!(
        "{} conventions for repo {repo}: {stored} stored, {duplicates} skipped as duplicates, \
         {refused} refused",
        items.len()
    ))
}

/// `file` as an anchor names it, with the `HEAD` of the git working tree
/// holding it; `None` outside one.
fn in_its_tree(file: &Path) -> Option<Touched> {
    let file = std::path::absolute(file).ok()?;
    touched::in_tree(file.parent()?, &[file.to_str()?.to_owned()])
}

/// The bullets and short paragraphs of an instructions file, each with
/// its section's heading before it.
pub fn conventions(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut heading: Option<String> = None;
    let mut current: Option<String> = None;
    let mut in_code = false;
    let mut in_comment = false;
    let flush =
        |current: &mut Option<String>, heading: &Option<String>, items: &mut Vec<String>| {
            if let Some(item) = current.take() {
                let item = item.trim().to_owned();
                let about_the_file = ABOUT_THE_FILE.iter().any(|start| item.starts_with(start));
                if item.chars().count() >= MIN_ITEM_CHARS
                    && item.chars().count() <= MAX_PARAGRAPH_CHARS
                    && !about_the_file
                {
                    items.push(match heading {
                        Some(heading) => format!("{heading}: {item}"),
                        None => item,
                    });
                }
            }
        };
    for line in skip_front_matter(text).lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut current, &heading, &mut items);
            in_code = !in_code;
            continue;
        }
        if in_comment {
            in_comment = !trimmed.contains("-->");
            continue;
        }
        if in_code {
            continue;
        }
        if trimmed.starts_with("<!--") {
            flush(&mut current, &heading, &mut items);
            in_comment = !trimmed.contains("-->");
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('|') {
            flush(&mut current, &heading, &mut items);
            continue;
        }
        if let Some(title) = trimmed.strip_prefix('#') {
            flush(&mut current, &heading, &mut items);
            let level = 1 + title.chars().take_while(|&c| c == '#').count();
            let title = title.trim_start_matches('#').trim();
            // The document's title names the file, not a section.
            heading = (level > 1 && !title.is_empty()).then(|| title.to_owned());
            continue;
        }
        if let Some(bullet) = bullet_text(trimmed) {
            flush(&mut current, &heading, &mut items);
            current = Some(bullet.to_owned());
            continue;
        }
        match &mut current {
            Some(item) => {
                item.push(' ');
                item.push_str(trimmed);
            }
            None => current = Some(trimmed.to_owned()),
        }
    }
    flush(&mut current, &heading, &mut items);
    items
}

/// The text of a list item's first line (`- `, `* `, `+ `, `1. `, `1) `,
/// a task's `[ ]` or `[x]` dropped), if `line` is one.
fn bullet_text(line: &str) -> Option<&str> {
    let rest = ["- ", "* ", "+ "]
        .iter()
        .find_map(|marker| line.strip_prefix(marker))
        .or_else(|| {
            let digits = line.chars().take_while(char::is_ascii_digit).count();
            (digits > 0)
                .then(|| &line[digits..])
                .and_then(|rest| rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")))
        })?;
    let rest = rest.trim_start();
    Some(
        ["[ ] ", "[x] ", "[X] "]
            .iter()
            .find_map(|task| rest.strip_prefix(task))
            .unwrap_or(rest),
    )
}

/// `text` after its front matter (a first line `---` up to the next
/// `---` line), if it has one.
fn skip_front_matter(text: &str) -> &str {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text;
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return &rest[offset..];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bullets_and_short_paragraphs_become_conventions_under_their_heading() {
        let text = "---\ndescription: Go rules\nglobs: \"**/*.go\"\nalwaysApply: false\n---\n\
# Project guide\n\n\
This repo is the forge build service, written in Go.\n\n\
## Testing\n\n\
- Run `go test ./...` before\n  every commit.\n\
* Table tests for parsers.\n\
1. Never mock the database.\n\
- [x] Keep fixtures small and named.\n\n\
```sh\n- not a bullet\n```\n\
<!-- a comment\n- hidden -->\n\
| a | b |\n\
- ok\n";
        assert_eq!(
            conventions(text),
            vec![
                "This repo is the forge build service, written in Go.",
                "Testing: Run `go test ./...` before every commit.",
                "Testing: Table tests for parsers.",
                "Testing: Never mock the database.",
                "Testing: Keep fixtures small and named.",
            ]
        );
    }

    #[test]
    fn the_line_claude_codes_init_opens_with_is_not_a_convention() {
        let text = "# CLAUDE.md\n\n\
This file provides guidance to Claude Code (claude.ai/code) when working with code in this \
repository.\n\n\
## Commands\n\n\
- `make test` runs every test.\n";
        assert_eq!(
            conventions(text),
            vec!["Commands: `make test` runs every test."]
        );
    }

    #[test]
    fn long_paragraphs_are_prose_not_conventions() {
        let long = "word ".repeat(MAX_PARAGRAPH_CHARS / 4);
        assert!(conventions(&long).is_empty());
    }
}
