//! The embedding cache: vectors already computed, on disk under
//! `<data_dir>/.cache/embeddings/`, so a restart embeds only what changed.
//!
//! One append-only file per embedding model (its name is a digest of the
//! model key, and its header repeats the key and the dimensions), holding
//! records of `sha256(content)` and the vector as little-endian floats.
//! Everything here is derived data: a missing, foreign or damaged file
//! means "start empty", a torn last record from a crash is ignored, and
//! deleting the directory is always safe.
//!
//! When the model's vector length is not configured, the file is opened
//! without it: the length in its header (learned on an earlier run) is
//! taken, and a new file gets its header with the first vectors appended.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::store::atomic;

const MAGIC: &[u8; 8] = b"ENGRMEB1";

/// The digest of a memory's content: what the cache is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentKey(pub(super) [u8; 32]);

impl ContentKey {
    pub fn of(content: &str) -> Self {
        Self(Sha256::digest(content.as_bytes()).into())
    }
}

/// The vectors read from disk at start-up.
pub type StoredVectors = HashMap<ContentKey, Vec<f32>>;

/// Appends new vectors to the model's cache file.
pub struct EmbeddingCache {
    path: PathBuf,
    model_key: String,
    /// `None` until known: then no file is written yet.
    dimensions: Option<usize>,
    /// `None` once a write failed (the cache is then off until restart,
    /// which costs only re-embedding), or while the length is unknown.
    file: Option<BufWriter<File>>,
    /// Where each content's record starts in the file, so a namespace
    /// dropped from memory is read back ([`Self::read`]) without holding
    /// its vectors meanwhile.
    offsets: HashMap<ContentKey, u64>,
    /// The file's length: where the next record goes.
    end: u64,
}

impl EmbeddingCache {
    /// Opens the cache of `model_key` under `cache_dir`, returning it and
    /// the vectors it already holds. With `dimensions` unknown, a file of
    /// this model supplies them ([`Self::dimensions`]). Never fails:
    /// problems are logged and the cache starts empty (or stays off).
    pub fn open(
        cache_dir: &Path,
        model_key: &str,
        dimensions: Option<usize>,
    ) -> (Self, StoredVectors) {
        let digest = Sha256::digest(model_key.as_bytes());
        let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let path = cache_dir.join("embeddings").join(format!("{name}.bin"));
        let stored = match read_records(&path, model_key, dimensions) {
            Ok(stored) => stored,
            Err(err) => {
                if err.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(cache.path = %path.display(), error = %err, "ignoring an unreadable embedding cache");
                }
                None
            }
        };
        let mut cache = Self {
            path,
            model_key: model_key.to_owned(),
            dimensions,
            file: None,
            offsets: HashMap::new(),
            end: 0,
        };
        let stored = match stored {
            Some(Records {
                dimensions,
                stored,
                offsets,
                end,
            }) => {
                cache.dimensions = Some(dimensions);
                cache.offsets = offsets;
                cache.end = end;
                cache.file = cache.open_append().map_err(|err| cache.disable(&err)).ok();
                stored
            }
            None => {
                if cache.dimensions.is_some() {
                    cache.rewrite(std::iter::empty());
                }
                StoredVectors::new()
            }
        };
        (cache, stored)
    }

    /// The length of the vectors it holds, once known.
    pub fn dimensions(&self) -> Option<usize> {
        self.dimensions
    }

    /// Adds vectors for these contents; they are on disk when this returns
    /// (not fsynced: losing them only means embedding again).
    pub fn append<'a>(&mut self, entries: impl IntoIterator<Item = (ContentKey, &'a [f32])>) {
        let mut entries = entries.into_iter().peekable();
        if self.dimensions.is_none() {
            // The first vectors of a learned length: the file starts here.
            let Some((_, first)) = entries.peek() else {
                return;
            };
            self.dimensions = Some(first.len());
            self.rewrite(entries);
            return;
        }
        let dimensions = self.dimensions;
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let record_len = record_len(dimensions.unwrap_or_default());
        let mut written = Vec::new();
        let write = || -> io::Result<()> {
            for (key, vector) in entries {
                debug_assert_eq!(Some(vector.len()), dimensions);
                file.write_all(&key.0)?;
                for value in vector {
                    file.write_all(&value.to_le_bytes())?;
                }
                written.push(key);
            }
            file.flush()
        };
        match write() {
            Ok(()) => {
                for key in written {
                    self.offsets.insert(key, self.end);
                    self.end += record_len;
                }
            }
            Err(err) => self.disable(&err),
        }
    }

    /// The vectors the file holds for these contents (read from disk, a
    /// record each); a content it holds none for is absent.
    pub fn read(&self, keys: &[ContentKey]) -> HashMap<ContentKey, Vec<f32>> {
        let Some(dimensions) = self.dimensions else {
            return HashMap::new();
        };
        let wanted: Vec<(ContentKey, u64)> = keys
            .iter()
            .filter_map(|key| Some((*key, *self.offsets.get(key)?)))
            .collect();
        if wanted.is_empty() {
            return HashMap::new();
        }
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(err) => {
                tracing::warn!(cache.path = %self.path.display(), error = %err, "the embedding cache cannot be read; embedding instead");
                return HashMap::new();
            }
        };
        let mut record = vec![0; usize::try_from(record_len(dimensions)).unwrap_or_default()];
        wanted
            .into_iter()
            .filter_map(|(key, offset)| {
                file.read_exact_at(&mut record, offset).ok()?;
                let (stored_key, vector) = record.split_at(32);
                (stored_key == key.0).then(|| (key, decode(vector)))
            })
            .collect()
    }

    /// Replaces the file with only `live` entries, dropping vectors of
    /// memories that are gone.
    pub fn rewrite<'a>(&mut self, live: impl IntoIterator<Item = (ContentKey, &'a [f32])>) {
        let Some(dimensions) = self.dimensions else {
            return; // nothing was ever stored
        };
        let mut bytes = header(&self.model_key, dimensions);
        let mut offsets = HashMap::new();
        for (key, vector) in live {
            offsets.insert(key, bytes.len() as u64);
            bytes.extend_from_slice(&key.0);
            bytes.extend(vector.iter().flat_map(|value| value.to_le_bytes()));
        }
        // `atomic::write` makes the directories too, the owner's alone.
        let result = atomic::write(&self.path, &bytes).and_then(|()| self.open_append());
        match result {
            Ok(file) => {
                self.file = Some(file);
                self.offsets = offsets;
                self.end = bytes.len() as u64;
            }
            Err(err) => {
                self.offsets.clear();
                self.disable(&err);
            }
        }
    }

    fn open_append(&self) -> io::Result<BufWriter<File>> {
        OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map(BufWriter::new)
    }

    fn disable(&mut self, err: &io::Error) {
        tracing::warn!(cache.path = %self.path.display(), error = %err, "the embedding cache is off until restart");
        self.file = None;
    }
}

fn header(model_key: &str, dimensions: usize) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    let key_len = u32::try_from(model_key.len()).unwrap_or(u32::MAX);
    header.extend_from_slice(&key_len.to_le_bytes());
    header.extend_from_slice(model_key.as_bytes());
    header.extend_from_slice(&u32::try_from(dimensions).unwrap_or(u32::MAX).to_le_bytes());
    header
}

/// A record's bytes: its content's digest and its vector.
fn record_len(dimensions: usize) -> u64 {
    32 + dimensions as u64 * 4
}

fn decode(vector: &[u8]) -> Vec<f32> {
    vector
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// What a cache file holds.
struct Records {
    dimensions: usize,
    stored: StoredVectors,
    /// Where each record starts.
    offsets: HashMap<ContentKey, u64>,
    /// Where the next record goes: past a torn tail, which is cut off.
    end: u64,
}

/// The length and records of the file at `path`; `None` when it belongs
/// to another model, length or format. A torn last record is dropped.
fn read_records(
    path: &Path,
    model_key: &str,
    dimensions: Option<usize>,
) -> io::Result<Option<Records>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let Some((stored_dimensions, body)) = parse_header(&bytes, model_key) else {
        return Ok(None);
    };
    if dimensions.is_some_and(|dimensions| dimensions != stored_dimensions) {
        return Ok(None);
    }
    let dimensions = stored_dimensions;
    let record_len = 32 + dimensions * 4;
    let header_len = (bytes.len() - body.len()) as u64;
    let mut stored = StoredVectors::with_capacity(body.len() / record_len);
    let mut offsets = HashMap::with_capacity(body.len() / record_len);
    let mut offset = header_len;
    for record in body.chunks_exact(record_len) {
        let (key, vector) = record.split_at(32);
        let vector = decode(vector);
        // Files written before degenerate vectors were refused may hold them.
        if super::degenerate(&vector).is_none() {
            let key = ContentKey(key.try_into().expect("split at 32"));
            stored.insert(key, vector);
            offsets.insert(key, offset);
        }
        offset += record_len as u64;
    }
    // Appends go after the last whole record, so a torn tail does not
    // shift every record after it.
    let whole = usize::try_from(offset).unwrap_or(usize::MAX);
    if whole < bytes.len() {
        OpenOptions::new().write(true).open(path)?.set_len(offset)?;
    }
    Ok(Some(Records {
        dimensions,
        stored,
        offsets,
        end: offset,
    }))
}

/// The length a file's header names, and the records after it, if the
/// header is this format's and names `model_key`.
fn parse_header<'a>(bytes: &'a [u8], model_key: &str) -> Option<(usize, &'a [u8])> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (key_len, rest) = rest.split_first_chunk::<4>()?;
    let (key, rest) = rest.split_at_checked(u32::from_le_bytes(*key_len) as usize)?;
    if key != model_key.as_bytes() {
        return None;
    }
    let (dimensions, body) = rest.split_first_chunk::<4>()?;
    let dimensions = u32::from_le_bytes(*dimensions) as usize;
    (dimensions > 0).then_some((dimensions, body))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn vectors_survive_a_reopen_for_the_same_model_only() {
        let dir = tempfile::tempdir().unwrap();
        let (mut cache, stored) = EmbeddingCache::open(dir.path(), "model-a", Some(2));
        assert!(stored.is_empty());
        cache.append([(ContentKey::of("hello"), &[1.0f32, 2.0][..])]);
        cache.append([(ContentKey::of("world"), &[3.0f32, 4.0][..])]);
        drop(cache);

        let (_, stored) = EmbeddingCache::open(dir.path(), "model-a", Some(2));
        assert_eq!(stored.len(), 2);
        assert_eq!(stored[&ContentKey::of("world")], [3.0, 4.0]);

        let (_, other) = EmbeddingCache::open(dir.path(), "model-b", Some(2));
        assert!(other.is_empty(), "another model never sees these vectors");
        let (_, resized) = EmbeddingCache::open(dir.path(), "model-a", Some(3));
        assert!(
            resized.is_empty(),
            "nor does the same name with other dimensions"
        );
    }

    #[test]
    fn a_torn_tail_or_a_garbage_file_is_survivable() {
        let dir = tempfile::tempdir().unwrap();
        let (mut cache, _) = EmbeddingCache::open(dir.path(), "m", Some(2));
        cache.append([(ContentKey::of("kept"), &[1.0f32, 0.0][..])]);
        let path = cache.path.clone();
        drop(cache);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&[7; 20]).unwrap();
        drop(file);
        let (_, stored) = EmbeddingCache::open(dir.path(), "m", Some(2));
        assert_eq!(stored.len(), 1);

        fs::write(&path, b"not a cache").unwrap();
        let (mut cache, stored) = EmbeddingCache::open(dir.path(), "m", Some(2));
        assert!(stored.is_empty());
        cache.append([(ContentKey::of("again"), &[0.0f32, 1.0][..])]);
        drop(cache);
        assert_eq!(EmbeddingCache::open(dir.path(), "m", Some(2)).1.len(), 1);
    }

    #[test]
    fn vectors_are_read_back_from_the_file_by_their_contents() {
        let dir = tempfile::tempdir().unwrap();
        let (mut cache, _) = EmbeddingCache::open(dir.path(), "m", None);
        cache.append([(ContentKey::of("first"), &[1.0f32, 2.0][..])]);
        cache.append([(ContentKey::of("second"), &[3.0f32, 4.0][..])]);
        let read = cache.read(&[ContentKey::of("second"), ContentKey::of("absent")]);
        assert_eq!(read.len(), 1);
        assert_eq!(read[&ContentKey::of("second")], [3.0, 4.0]);
        let path = cache.path.clone();
        drop(cache);

        // Reopened past a torn tail, appends land on whole records.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&[7; 5]).unwrap();
        drop(file);
        let (mut cache, _) = EmbeddingCache::open(dir.path(), "m", Some(2));
        cache.append([(ContentKey::of("third"), &[5.0f32, 6.0][..])]);
        let keys = ["first", "second", "third"].map(ContentKey::of);
        assert_eq!(cache.read(&keys).len(), 3);
        assert_eq!(cache.read(&keys)[&keys[2]], [5.0, 6.0]);
        drop(cache);
        assert_eq!(EmbeddingCache::open(dir.path(), "m", Some(2)).1.len(), 3);

        let (mut cache, _) = EmbeddingCache::open(dir.path(), "m", Some(2));
        cache.rewrite([(keys[1], &[3.0f32, 4.0][..])]);
        assert_eq!(cache.read(&keys).keys().collect::<Vec<_>>(), [&keys[1]]);
    }

    #[test]
    fn the_cache_is_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache_dir = dir.path().join(".cache");
        let (cache, _) = EmbeddingCache::open(&cache_dir, "m", Some(2));
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&cache_dir), 0o700);
        assert_eq!(mode(cache.path.parent().unwrap()), 0o700);
        assert_eq!(mode(&cache.path), 0o600);
    }

    #[test]
    fn rewrite_keeps_only_the_live_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (mut cache, _) = EmbeddingCache::open(dir.path(), "m", Some(1));
        cache.append([
            (ContentKey::of("gone"), &[1.0f32][..]),
            (ContentKey::of("live"), &[2.0f32][..]),
        ]);
        cache.rewrite([(ContentKey::of("live"), &[2.0f32][..])]);
        cache.append([(ContentKey::of("new"), &[3.0f32][..])]);
        drop(cache);
        let (_, stored) = EmbeddingCache::open(dir.path(), "m", Some(1));
        let mut values: Vec<f32> = stored.values().map(|v| v[0]).collect();
        values.sort_by(f32::total_cmp);
        assert_eq!(values, [2.0, 3.0]);
    }

    #[test]
    fn degenerate_vectors_left_by_older_versions_are_not_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut cache, _) = EmbeddingCache::open(dir.path(), "m", Some(2));
        cache.append([
            (ContentKey::of("zeros"), &[0.0f32, 0.0][..]),
            (ContentKey::of("nan"), &[f32::NAN, 1.0][..]),
            (ContentKey::of("fine"), &[0.0f32, 1.0][..]),
        ]);
        drop(cache);
        let (_, stored) = EmbeddingCache::open(dir.path(), "m", Some(2));
        assert_eq!(stored.len(), 1);
        assert!(stored.contains_key(&ContentKey::of("fine")));
    }

    #[test]
    fn a_learned_length_is_written_with_the_first_vectors_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut cache, stored) = EmbeddingCache::open(dir.path(), "m", None);
        assert!(stored.is_empty());
        assert_eq!(cache.dimensions(), None);
        cache.rewrite(std::iter::empty());
        assert!(!cache.path.exists(), "no file before the length is known");
        cache.append([(ContentKey::of("a"), &[1.0f32, 2.0, 3.0][..])]);
        cache.append([(ContentKey::of("b"), &[4.0f32, 5.0, 6.0][..])]);
        assert_eq!(cache.dimensions(), Some(3));
        drop(cache);

        let (cache, stored) = EmbeddingCache::open(dir.path(), "m", None);
        assert_eq!(cache.dimensions(), Some(3));
        assert_eq!(stored.len(), 2);
        let (_, stored) = EmbeddingCache::open(dir.path(), "m", Some(3));
        assert_eq!(stored.len(), 2, "the configured length agrees");
        let (cache, stored) = EmbeddingCache::open(dir.path(), "m", Some(4));
        assert!(stored.is_empty(), "another length never reuses them");
        assert_eq!(cache.dimensions(), Some(4));
    }
}
