//! Segment upkeep: a segment no live trigger needs is deleted, oldest
//! first (the one being written too, once no round is being written to
//! it), and while too many are kept the oldest one's live triggers move
//! to their own files so that it can go.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io;

use uuid::Uuid;

use super::Log;
use super::segments::{Record, decode, segment_name};
use crate::capture::queue::{file_name, read_no_follow, serialize};
use crate::store::atomic;

impl Log {
    pub(super) fn tidy(&self) {
        if let Err(err) = self.upkeep() {
            tracing::warn!(error = %err, "could not tidy the queue's log segments");
        }
    }

    /// Deletes the segments no live trigger needs, oldest first, and
    /// compacts the oldest while too many are kept. Skipped while another
    /// thread does it.
    pub(super) fn upkeep(&self) -> io::Result<()> {
        let Ok(_upkeep) = self.upkeep.try_lock() else {
            return Ok(());
        };
        loop {
            let next = {
                let mut writer = self.lock();
                let active = writer.active.as_ref().map(|active| active.sequence);
                match writer.segments.first_key_value() {
                    // Retired while no round is being written (no writer
                    // holds it): the next round starts a new segment, and
                    // this one, with the windows of processed triggers in
                    // it, goes now rather than once it has grown full.
                    Some((sequence, live))
                        if Some(*sequence) == active && live.is_empty() && !writer.writing =>
                    {
                        let sequence = *sequence;
                        writer.active = None;
                        Some((sequence, None))
                    }
                    Some((sequence, _)) if Some(*sequence) == active => None,
                    Some((sequence, live)) if live.is_empty() => Some((*sequence, None)),
                    Some((sequence, live)) if writer.segments.len() > self.max_segments => {
                        Some((*sequence, Some(live.clone())))
                    }
                    _ => None,
                }
            };
            match next {
                None => return Ok(()),
                Some((sequence, None)) => self.delete_segment(sequence)?,
                Some((sequence, Some(live))) => self.compact(sequence, &live)?,
            }
        }
    }

    fn delete_segment(&self, sequence: u64) -> io::Result<()> {
        let path = self.dir.join(segment_name(sequence));
        if fs::symlink_metadata(&path).is_ok_and(|meta| meta.file_type().is_symlink()) {
            // Never removed; it was never read either.
        } else {
            atomic::remove(&path)?;
        }
        self.lock().segments.remove(&sequence);
        Ok(())
    }

    /// Moves the live triggers of segment `sequence` to their own files,
    /// which leaves it with none.
    fn compact(&self, sequence: u64, live: &HashSet<Uuid>) -> io::Result<()> {
        let bytes = read_no_follow(&self.dir.join(segment_name(sequence)))?;
        let mut latest = HashMap::new();
        for record in decode(&bytes).0 {
            if let Record::Accepted(trigger, _) = record
                && live.contains(&trigger.id)
            {
                latest.insert(trigger.id, trigger);
            }
        }
        for trigger in latest.values() {
            atomic::replace(&self.dir.join(file_name(trigger.id)), &serialize(trigger))?;
        }
        atomic::sync_dir(&self.dir)?;
        let mut moved_on = Vec::new();
        {
            let mut writer = self.lock();
            for id in live {
                if writer.homes.get(id) == Some(&sequence) {
                    // From now on its file holds it; a gone record is not
                    // needed, as the file wins over an equal record at start.
                    writer.homes.remove(id);
                    unlive(&mut writer.segments, sequence, *id);
                } else {
                    moved_on.push(*id);
                }
            }
        }
        // Finished or appended again while its file was written: the file
        // is stale.
        for id in moved_on {
            let _ = fs::remove_file(self.dir.join(file_name(id)));
        }
        tracing::info!(
            segment = sequence,
            triggers = latest.len(),
            "moved the live triggers of the oldest queue log segment to their own files"
        );
        Ok(())
    }
}

pub(super) fn unlive(segments: &mut BTreeMap<u64, HashSet<Uuid>>, sequence: u64, id: Uuid) {
    if let Some(live) = segments.get_mut(&sequence) {
        live.remove(&id);
    }
}
