//! The pool of the one-bit scan: the rows with the best estimates, which
//! the search rescores with their stored vectors.
//!
//! Estimates are whole numbers of differing bits, so the pool is picked by
//! counting rows per number (no heap): every row closer than the pool's
//! last number, then as many of those at that number as fit, by id, as a
//! ranking by (estimate, id) would pick them. The counts also give a
//! cutoff while the scan runs: once `wanted` rows are at or below some
//! number, no row above it can enter, however the scan goes on, so the
//! scan is asked only for rows at or below the cutoff
//! ([`Pool::cutoff`]), and most of a long scan's rows never leave it.

use crate::memory::MemoryId;

/// A row offered to the pool: where it lives. Eight bytes with its
/// estimate, so that the thousands a long scan offers stay small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub chunk: u32,
    pub slot: u16,
}

/// The best `wanted` rows offered so far, by estimate and then by id.
pub struct Pool {
    wanted: usize,
    /// Rows offered at or below the cutoff, per estimate.
    per_estimate: Vec<usize>,
    /// No row with a larger estimate can enter.
    cutoff: usize,
    /// Rows offered at or below the cutoff: the sum of `per_estimate` up
    /// to it.
    within: usize,
    /// Rows offered with their (capped) estimates, some of them above the
    /// cutoff until the next sweep.
    rows: Vec<(u16, Candidate)>,
    /// The length of `rows` at which the next sweep runs.
    sweep_at: usize,
}

impl Pool {
    /// An empty pool of `wanted` rows, for estimates up to `bits`.
    pub fn new(wanted: usize, bits: usize) -> Self {
        Self {
            wanted,
            per_estimate: vec![0; bits + 1],
            cutoff: bits,
            within: 0,
            rows: Vec::new(),
            sweep_at: 2 * wanted.max(64),
        }
    }

    /// The largest estimate that can still enter: rows above it need not
    /// be offered.
    pub fn cutoff(&self) -> u16 {
        u16::try_from(self.cutoff).unwrap_or(u16::MAX)
    }

    /// Offers a row with its estimate (capped at the pool's `bits`).
    pub fn offer(&mut self, estimate: u16, candidate: Candidate) {
        let level = usize::from(estimate).min(self.per_estimate.len() - 1);
        if level > self.cutoff {
            return;
        }
        self.per_estimate[level] += 1;
        self.within += 1;
        self.rows
            .push((u16::try_from(level).unwrap_or(u16::MAX), candidate));
        while self.cutoff > 0 && self.within - self.per_estimate[self.cutoff] >= self.wanted {
            self.within -= self.per_estimate[self.cutoff];
            self.cutoff -= 1;
        }
        if self.rows.len() >= self.sweep_at {
            self.sweep();
            // Rows tied at the cutoff can outnumber `wanted` many times
            // over: the next sweep waits until the rows double again.
            self.sweep_at = 2 * self.rows.len().max(self.wanted.max(64));
        }
    }

    /// Drops the rows above the cutoff.
    fn sweep(&mut self) {
        let cutoff = self.cutoff();
        self.rows.retain(|&(estimate, _)| estimate <= cutoff);
    }

    /// The pool: every row below the cutoff, then the rows at it by id
    /// (`id_of` says a row's) as far as `wanted` allows.
    pub fn into_rows(mut self, id_of: impl Fn(Candidate) -> MemoryId) -> Vec<Candidate> {
        self.sweep();
        let cutoff = self.cutoff();
        // Sized up front: a search's pool holds thousands of rows, and
        // growing two vectors by doubling showed in its profile.
        let mut below = Vec::with_capacity(self.rows.len());
        let mut at_cutoff = Vec::with_capacity(self.rows.len());
        for (estimate, candidate) in self.rows {
            if estimate == cutoff {
                at_cutoff.push(candidate);
            } else {
                below.push(candidate);
            }
        }
        at_cutoff.sort_unstable_by_key(|&candidate| id_of(candidate));
        let room = self.wanted.saturating_sub(below.len());
        below.extend(at_cutoff.into_iter().take(room));
        below
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn candidate(serial: usize) -> Candidate {
        Candidate {
            chunk: 0,
            slot: u16::try_from(serial).unwrap(),
        }
    }

    proptest! {
        /// Whatever order rows come in, and whether or not each is offered
        /// only when the cutoff allows (as the scan does): the pool is the
        /// first `wanted` rows by (estimate, id), and the cutoff never
        /// excludes one of them.
        #[test]
        fn the_pool_is_the_best_rows_by_estimate_then_id(
            estimates in prop::collection::vec(0u16..=16, 0..600),
            wanted in 1usize..200,
            skip_above_cutoff in any::<bool>(),
        ) {
            let ids: Vec<MemoryId> = estimates.iter().map(|_| MemoryId::new()).collect();
            let id_of = |row: Candidate| ids[usize::from(row.slot)];
            let rows: Vec<(u16, Candidate)> = estimates
                .iter()
                .enumerate()
                .map(|(serial, &estimate)| (estimate, candidate(serial)))
                .collect();
            let mut pool = Pool::new(wanted, 16);
            for &(estimate, row) in &rows {
                if !skip_above_cutoff || estimate <= pool.cutoff() {
                    pool.offer(estimate, row);
                }
            }
            let mut expected = rows.clone();
            expected.sort_by_key(|&(estimate, row)| (estimate, id_of(row)));
            expected.truncate(wanted);
            let mut expected: Vec<MemoryId> = expected.iter().map(|&(_, row)| id_of(row)).collect();
            let mut pooled: Vec<MemoryId> = pool.into_rows(id_of).into_iter().map(id_of).collect();
            expected.sort_unstable();
            pooled.sort_unstable();
            prop_assert_eq!(pooled, expected);
        }
    }
}
