//! The secret guard on ordinary text and on secrets: every line of each
//! corpus goes through the same detector as a memory write
//! (`find_secret`), and the workload reports lines scanned, lines flagged,
//! the rate, and the flagged lines themselves (each cut to a readable
//! length), so every false positive can be looked at.
//!
//! Corpora: the LoCoMo conversations (each turn as one text, as storing
//! the turns would), source trees (`.rs` files, READMEs and other
//! markdown, line by line: the cargo registry holds hashes, URLs, UUIDs
//! and base64 of every kind), and fixture files of secrets, where a line
//! *not* flagged is the failure.

use std::path::{Path, PathBuf};
use std::time::Instant;

use engram::secrets;
use serde_json::Value;

use crate::measure::Report;
use crate::workload::Result;

/// What to scan.
#[derive(Debug, clap::Args)]
pub struct Settings {
    /// LoCoMo's `locomo10.json`: every turn's text.
    #[arg(long)]
    pub locomo: Option<PathBuf>,
    /// Files or directories of prose and code (directories are walked for
    /// `.rs` and `.md` files), scanned line by line.
    #[arg(long, value_delimiter = ',')]
    pub code: Vec<PathBuf>,
    /// Fixture files of secrets, one a line (blank lines and `#` comments
    /// skipped): every line must be flagged.
    #[arg(long, value_delimiter = ',')]
    pub secrets: Vec<PathBuf>,
    /// The most flagged (or missed) lines printed per corpus.
    #[arg(long, default_value_t = 200)]
    pub show: usize,
}

/// A corpus's lines and whether a line is expected to be flagged.
struct Corpus {
    name: &'static str,
    lines: Vec<String>,
    secret: bool,
}

pub fn guard(report: &mut Report, settings: &Settings) -> Result {
    let mut corpora = Vec::new();
    if let Some(path) = &settings.locomo {
        corpora.push(Corpus {
            name: "conversations",
            lines: locomo_turns(path)?,
            secret: false,
        });
    }
    if !settings.code.is_empty() {
        let mut lines = Vec::new();
        for root in &settings.code {
            for file in source_files(root)? {
                // Not UTF-8 (a few test data files): not text the guard sees.
                if let Ok(text) = std::fs::read_to_string(&file) {
                    lines.extend(
                        text.lines()
                            .filter(|line| !line.trim().is_empty())
                            .map(str::to_owned),
                    );
                }
            }
        }
        corpora.push(Corpus {
            name: "code",
            lines,
            secret: false,
        });
    }
    if !settings.secrets.is_empty() {
        let mut lines = Vec::new();
        for file in &settings.secrets {
            lines.extend(fixture_lines(&std::fs::read_to_string(file)?));
        }
        corpora.push(Corpus {
            name: "secret fixtures",
            lines,
            secret: true,
        });
    }
    if corpora.is_empty() {
        return Err("guard: give --locomo, --code or --secrets".into());
    }
    for corpus in &corpora {
        scan(report, corpus, settings.show);
    }
    Ok(())
}

fn scan(report: &mut Report, corpus: &Corpus, show: usize) {
    let start = Instant::now();
    let verdicts: Vec<Option<secrets::SecretKind>> = corpus
        .lines
        .iter()
        .map(|line| secrets::find_secret(line))
        .collect();
    let took = start.elapsed();
    let bytes: usize = corpus.lines.iter().map(String::len).sum();
    let unexpected: Vec<(usize, Option<secrets::SecretKind>)> = verdicts
        .iter()
        .enumerate()
        .filter(|(_, kind)| kind.is_some() != corpus.secret)
        .map(|(at, kind)| (at, *kind))
        .collect();
    let flagged = verdicts.iter().filter(|kind| kind.is_some()).count();
    #[expect(clippy::cast_precision_loss, reason = "line counts below 2^52")]
    let percent = |count: usize| 100.0 * count as f64 / corpus.lines.len().max(1) as f64;
    let name = corpus.name;
    #[expect(clippy::cast_precision_loss, reason = "line counts below 2^52")]
    report.figure(
        format!("guard {name}: lines scanned"),
        corpus.lines.len() as f64,
        "lines",
    );
    #[expect(clippy::cast_precision_loss, reason = "line counts below 2^52")]
    report.figure(
        format!("guard {name}: lines flagged"),
        flagged as f64,
        "lines",
    );
    report.figure(format!("guard {name}: flagged"), percent(flagged), "%");
    if corpus.secret {
        #[expect(clippy::cast_precision_loss, reason = "line counts below 2^52")]
        report.figure(
            format!("guard {name}: missed"),
            unexpected.len() as f64,
            "lines",
        );
    }
    #[expect(clippy::cast_precision_loss, reason = "byte counts below 2^52")]
    let mib = bytes as f64 / f64::from(1 << 20);
    report.figure(format!("guard {name}: text scanned"), mib, "MiB");
    report.figure(
        format!("guard {name}: scan speed"),
        mib / took.as_secs_f64().max(f64::EPSILON),
        "MiB/s",
    );
    let what = if corpus.secret { "missed" } else { "flagged" };
    for (at, kind) in unexpected.iter().take(show) {
        let label = kind.map_or("-", secrets::SecretKind::as_str);
        eprintln!("{name} {what} [{label}]: {}", excerpt(&corpus.lines[*at]));
    }
}

/// The line, cut to 200 characters.
fn excerpt(line: &str) -> String {
    const SHOWN: usize = 200;
    let trimmed = line.trim();
    match trimmed.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_owned(),
    }
}

/// Every turn's text, in every session of every conversation.
fn locomo_turns(path: &Path) -> Result<Vec<String>> {
    let samples: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let mut turns = Vec::new();
    for sample in samples.as_array().into_iter().flatten() {
        let Some(conversation) = sample["conversation"].as_object() else {
            continue;
        };
        for session in conversation.values().filter_map(Value::as_array) {
            turns.extend(
                session
                    .iter()
                    .filter_map(|turn| turn["text"].as_str())
                    .map(str::to_owned),
            );
        }
    }
    Ok(turns)
}

/// `root` itself when it is a file, else every `.rs` and `.md` file
/// under it (links not followed), in a stable order.
fn source_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(path) = pending.pop() {
        let kind = std::fs::symlink_metadata(&path)?.file_type();
        if kind.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        } else if kind.is_file()
            && (path == root
                || path
                    .extension()
                    .is_some_and(|extension| extension == "rs" || extension == "md"))
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A fixture's lines, without blank lines and `#` comments, and without
/// the `«` `»` that mark a secret's value in `tests/fixtures/secrets/`.
fn fixture_lines(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| line.replace(['«', '»'], ""))
}
