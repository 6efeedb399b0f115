//! The segment files: their names, the format of their records (a length,
//! a checksum, a tag and a trigger or an id; see [`super`]), and reading a
//! directory's segments back at start, each up to its torn tail.

use std::collections::HashMap;
#[cfg(test)]
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::Path;

use uuid::Uuid;

use crate::capture::queue::{Trigger, read_no_follow};

const HEADER_BYTES: usize = 8;

pub(super) const ACCEPTED: u8 = 1;

pub(super) const GONE: u8 = 2;

const SEGMENT_SUFFIX: &str = ".log";

pub(super) enum Record {
    /// Boxed: a trigger is far larger than an id.
    Accepted(Box<Trigger>, u64),
    Gone(Uuid),
}

pub(super) fn push_record(buffer: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    let length = u32::try_from(payload.len() + 1).expect("a record under 4 GiB");
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[tag]);
    crc.update(payload);
    buffer.extend_from_slice(&length.to_le_bytes());
    buffer.extend_from_slice(&crc.finalize().to_le_bytes());
    buffer.push(tag);
    buffer.extend_from_slice(payload);
}

/// The records of a segment up to its first short or damaged one, and how
/// many bytes that left unread.
pub(super) fn decode(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut rest = bytes;
    while rest.len() >= HEADER_BYTES {
        let (header, after) = rest.split_at(HEADER_BYTES);
        let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let Some(body) = after.get(..length).filter(|body| !body.is_empty()) else {
            break;
        };
        if crc32fast::hash(body) != crc {
            break;
        }
        rest = &after[length..];
        match (body[0], &body[1..]) {
            (ACCEPTED, json) => match serde_json::from_slice::<Trigger>(json) {
                Ok(trigger) => {
                    records.push(Record::Accepted(Box::new(trigger), json.len() as u64));
                }
                Err(err) => {
                    tracing::warn!(error = %err, "skipped a queue log record that is not a trigger");
                }
            },
            (GONE, id) => match Uuid::from_slice(id) {
                Ok(id) => records.push(Record::Gone(id)),
                Err(err) => tracing::warn!(error = %err, "skipped a malformed gone record"),
            },
            (tag, _) => tracing::warn!(tag, "skipped a queue log record of an unknown kind"),
        }
    }
    (records, rest.len())
}

/// What the segments of a directory hold, read without changing anything.
pub(super) struct Segments {
    /// Every segment's sequence, in order.
    pub(super) sequences: Vec<u64>,
    /// Live triggers, each with the segment of its latest record.
    pub(super) live: HashMap<Uuid, (u64, (Trigger, u64))>,
}

pub(super) fn read_segments(dir: &Path) -> io::Result<Segments> {
    let mut sequences = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(sequence) = name
            .strip_suffix(SEGMENT_SUFFIX)
            .and_then(|stem| stem.parse::<u64>().ok())
        else {
            continue;
        };
        // `DirEntry::file_type` does not follow links.
        if entry.file_type().is_ok_and(|kind| kind.is_file()) {
            sequences.push(sequence);
        }
    }
    sequences.sort_unstable();
    let mut live = HashMap::new();
    let mut kept = Vec::with_capacity(sequences.len());
    for sequence in sequences {
        let path = dir.join(segment_name(sequence));
        let bytes = match read_no_follow(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                // Swapped for a link since the listing: left alone.
                continue;
            }
            Err(err) => return Err(err),
        };
        kept.push(sequence);
        let (records, unread) = decode(&bytes);
        if unread > 0 {
            tracing::warn!(file.path = %path.display(), bytes = unread, "ignoring the torn end of a queue log segment (never acknowledged)");
        }
        for record in records {
            match record {
                Record::Accepted(trigger, bytes) => {
                    live.insert(trigger.id, (sequence, (*trigger, bytes)));
                }
                Record::Gone(id) => {
                    live.remove(&id);
                }
            }
        }
    }
    Ok(Segments {
        sequences: kept,
        live,
    })
}

/// The ids of the live triggers in `dir`'s segments, read without changing
/// anything (for tests of what a crash leaves).
#[cfg(test)]
pub fn live_ids(dir: &Path) -> HashSet<Uuid> {
    read_segments(dir)
        .map(|read| read.live.into_keys().collect())
        .unwrap_or_default()
}

pub(super) fn segment_name(sequence: u64) -> String {
    format!("{sequence:020}{SEGMENT_SUFFIX}")
}
