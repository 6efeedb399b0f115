//! How `engram check` judges a memory's anchors against the files of a
//! working tree: each anchored file is looked at once (renamed ones at
//! their new path), hashed once, and searched once for every symbol
//! anchored in it; a memory is as bad as its worst anchor.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::client::hook::bounded;
use crate::memory::{Anchor, AnchorPath, CommitId, ContentHash, MemoryId, Renamed};
use crate::routes::check::{CheckResult, Verdict};

/// A memory as the check needs it: what it is anchored to, when and at
/// which commit it was written (where renames are looked for from), and
/// when it was last checked.
#[derive(Clone, Debug, Deserialize)]
pub struct Anchored {
    pub id: MemoryId,
    #[serde(default)]
    pub anchors: Vec<Anchor>,
    #[serde(default)]
    pub commit: Option<CommitId>,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub checked_at: Option<DateTime<Utc>>,
}

/// A file that could not be looked at (not one that is missing).
#[derive(Debug, thiserror::Error)]
#[error("reading {path}")]
pub struct ReadError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// What the check found.
#[derive(Debug, Default)]
pub struct Judgement {
    /// Each anchored memory's verdict, by id.
    pub results: Vec<CheckResult>,
    /// The anchored paths missing from the tree that git found renamed,
    /// old to new, each judged at its new path (and sent with the
    /// results, for the anchors to follow).
    pub followed: BTreeMap<String, String>,
}

/// An anchored file as the tree holds it.
enum Found {
    Missing,
    Present {
        /// `None` for a directory, which has no content to hash.
        hash: Option<ContentHash>,
        /// The anchored symbols that appear in it.
        symbols: HashSet<String>,
    },
}

/// Judges every memory of `memories` that has anchors against the tree
/// at `root`. `renames` is asked, at most once and only when an anchored
/// file is missing, for the renames git knows of among the memories with
/// a missing file, old path to new.
pub fn judge<E: From<ReadError>>(
    root: &Path,
    memories: &[Anchored],
    renames: impl FnOnce(&[&Anchored]) -> Result<HashMap<String, String>, E>,
) -> Result<Judgement, E> {
    let anchored: Vec<&Anchored> = memories
        .iter()
        .filter(|memory| !memory.anchors.is_empty())
        .collect();
    let mut exists = HashMap::new();
    for anchor in anchored.iter().flat_map(|memory| &memory.anchors) {
        let path = anchor.path.as_str();
        if !exists.contains_key(path) {
            exists.insert(path, is_there(&root.join(path))?);
        }
    }
    let concerned: Vec<&Anchored> = anchored
        .iter()
        .copied()
        .filter(|memory| memory.anchors.iter().any(|a| !exists[a.path.as_str()]))
        .collect();
    let renamed = if concerned.is_empty() {
        HashMap::new()
    } else {
        renames(&concerned)?
    };
    // Where each anchored path is judged: itself, its new name, or nowhere.
    let at = |path: &str| -> Option<String> {
        if exists[path] {
            Some(path.to_owned())
        } else {
            renamed.get(path).cloned()
        }
    };
    let mut wanted: HashMap<String, HashSet<String>> = HashMap::new();
    for anchor in anchored.iter().flat_map(|memory| &memory.anchors) {
        if let Some(path) = at(anchor.path.as_str()) {
            let symbols = wanted.entry(path).or_default();
            symbols.extend(
                anchor
                    .symbol
                    .iter()
                    .map(|symbol| symbol.as_str().to_owned()),
            );
        }
    }
    let mut files = HashMap::with_capacity(wanted.len());
    for (path, symbols) in wanted {
        let found = look_at(&root.join(&path), symbols)?;
        files.insert(path, found);
    }
    let mut judgement = Judgement::default();
    for memory in anchored {
        let mut worst = Verdict::Current;
        let mut renamed = Vec::new();
        for anchor in &memory.anchors {
            let path = at(anchor.path.as_str());
            if let Some(new) = path.as_ref().filter(|path| **path != anchor.path.as_str()) {
                judgement
                    .followed
                    .insert(anchor.path.to_string(), new.clone());
                // A path git names that an anchor could not hold stays
                // judged at it, and unfollowed.
                if let Ok(to) = new.parse::<AnchorPath>() {
                    renamed.push(Renamed {
                        from: anchor.path.clone(),
                        to,
                    });
                }
            }
            let found = path.and_then(|path| files.get(&path));
            worst = worst.max(verdict(anchor, found));
        }
        judgement.results.push(CheckResult {
            id: memory.id,
            validity: worst,
            renamed,
        });
    }
    Ok(judgement)
}

/// One anchor's verdict, from what was found at the path it is judged at.
/// A file as it was when the memory was written holds what the memory
/// is about, whatever its symbol: one absent from it then was never there
/// to lose.
fn verdict(anchor: &Anchor, found: Option<&Found>) -> Verdict {
    let Some(Found::Present { hash, symbols }) = found else {
        return Verdict::Gone;
    };
    let as_written = anchor
        .hash
        .as_ref()
        .is_some_and(|expected| Some(expected) == hash.as_ref());
    if as_written {
        return Verdict::Current;
    }
    if let Some(symbol) = &anchor.symbol
        && !symbols.contains(symbol.as_str())
    {
        return Verdict::Gone;
    }
    if anchor.hash.is_some() {
        Verdict::Changed
    } else {
        Verdict::Current
    }
}

/// Whether something is at `path`; missing parents count as missing.
fn is_there(path: &Path) -> Result<bool, ReadError> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(err) if is_missing(&err) => Ok(false),
        Err(source) => Err(ReadError {
            path: path.to_owned(),
            source,
        }),
    }
}

fn is_missing(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The file at `path`, hashed, and which of `symbols` appear in it. Only
/// a regular file is read, opened without blocking ([`bounded`]): a
/// directory, a FIFO or a device is there, with nothing to hash or search.
fn look_at(path: &Path, symbols: HashSet<String>) -> Result<Found, ReadError> {
    let failed = |source| ReadError {
        path: path.to_owned(),
        source,
    };
    let not_a_file = Found::Present {
        hash: None,
        symbols: HashSet::new(),
    };
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => return Ok(not_a_file),
        Ok(_) => {}
        Err(err) if is_missing(&err) => return Ok(Found::Missing),
        Err(err) => return Err(failed(err)),
    }
    let bytes = match bounded::read_head(path, u64::MAX) {
        Ok(bytes) => bytes,
        Err(err) if is_missing(&err) => return Ok(Found::Missing),
        // Swapped for something else since it was looked at.
        Err(err) if err.kind() == io::ErrorKind::InvalidInput => return Ok(not_a_file),
        Err(err) => return Err(failed(err)),
    };
    let text = String::from_utf8_lossy(&bytes);
    let symbols = symbols
        .into_iter()
        .filter(|symbol| text.contains(symbol.as_str()))
        .collect();
    Ok(Found::Present {
        hash: Some(ContentHash::of(&bytes)),
        symbols,
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn anchor(path: &str, symbol: Option<&str>, hash: Option<&ContentHash>) -> Anchor {
        Anchor {
            path: path.parse().unwrap(),
            symbol: symbol.map(|symbol| symbol.parse().unwrap()),
            hash: hash.cloned(),
        }
    }

    fn memory(anchors: Vec<Anchor>) -> Anchored {
        Anchored {
            id: MemoryId::new(),
            anchors,
            commit: None,
            created_at: Utc::now(),
            checked_at: None,
        }
    }

    #[test]
    fn the_worst_anchor_decides_and_renamed_files_are_judged_where_they_went() {
        let tree = tempfile::tempdir().unwrap();
        fs::create_dir_all(tree.path().join("src")).unwrap();
        fs::write(tree.path().join("src/pool.rs"), "fn connect_pool() {}\n").unwrap();
        fs::write(tree.path().join("src/moved.rs"), "fn retry() {}\n").unwrap();
        let pool = ContentHash::of(b"fn connect_pool() {}\n");
        let old = ContentHash::of(b"fn connect_pool() { old }\n");
        let memories = [
            memory(vec![anchor(
                "src/pool.rs",
                Some("connect_pool"),
                Some(&pool),
            )]),
            memory(vec![anchor(
                "src/pool.rs",
                Some("connect_pool"),
                Some(&old),
            )]),
            memory(vec![
                anchor("src/pool.rs", None, Some(&pool)),
                anchor("src/pool.rs", Some("disconnect"), None),
            ]),
            memory(vec![anchor("src/gone.rs", None, None)]),
            memory(vec![anchor("src/retry.rs", Some("retry"), None)]),
            memory(vec![anchor("src/pool.rs/inner", None, None)]),
            memory(vec![anchor("src", None, None)]),
            // A name the file never held, under a hash it still has.
            memory(vec![anchor(
                "src/pool.rs",
                Some("never_there"),
                Some(&pool),
            )]),
            memory(vec![anchor("src/pool.rs", Some("never_there"), Some(&old))]),
            memory(Vec::new()),
        ];
        let mut asked = Vec::new();
        let judgement = judge::<ReadError>(tree.path(), &memories, |concerned| {
            asked.extend(concerned.iter().map(|memory| memory.id));
            Ok(HashMap::from([(
                "src/retry.rs".to_owned(),
                "src/moved.rs".to_owned(),
            )]))
        })
        .unwrap();
        let verdicts: Vec<Verdict> = judgement.results.iter().map(|r| r.validity).collect();
        use Verdict::{Changed, Current, Gone};
        assert_eq!(
            verdicts,
            [
                Current, Changed, Gone, Gone, Current, Gone, Current, Current, Gone
            ],
            "the unanchored memory is not judged"
        );
        assert_eq!(asked, [memories[3].id, memories[4].id, memories[5].id]);
        assert_eq!(
            judgement.followed,
            BTreeMap::from([("src/retry.rs".to_owned(), "src/moved.rs".to_owned())])
        );
    }

    #[test]
    fn git_is_not_asked_when_no_file_is_missing() {
        let tree = tempfile::tempdir().unwrap();
        fs::write(tree.path().join("a.rs"), "x").unwrap();
        let memories = [memory(vec![anchor("a.rs", None, None)])];
        let judgement =
            judge::<ReadError>(tree.path(), &memories, |_| panic!("no file is missing")).unwrap();
        assert_eq!(judgement.results[0].validity, Verdict::Current);
    }

    #[test]
    fn a_fifo_in_the_tree_is_there_but_never_opened() {
        let tree = tempfile::tempdir().unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(tree.path().join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        let hash = ContentHash::of(b"what it held");
        let memories = [
            memory(vec![anchor("pipe", None, None)]),
            memory(vec![anchor("pipe", None, Some(&hash))]),
        ];
        // Opening the FIFO to read would wait for a writer forever.
        let judgement =
            judge::<ReadError>(tree.path(), &memories, |_| panic!("none missing")).unwrap();
        let verdicts: Vec<Verdict> = judgement.results.iter().map(|r| r.validity).collect();
        assert_eq!(verdicts, [Verdict::Current, Verdict::Changed]);
    }
}
