//! One-bit codes of randomly rotated vectors, for the first pass of the
//! scan.
//!
//! A (unit) vector is turned by a fixed random rotation, a randomised
//! Hadamard transform (zero-padded to a power of two; then, twice, a sign
//! flip per component and a fast Walsh–Hadamard transform), and coded as
//! one bit per component: whether it is negative. The rotation spreads any
//! vector's weight over every component, whatever the embedder's shape
//! (the bench's fake vectors are sparse and non-negative, which sign bits
//! alone would not tell apart), so that for two vectors an angle θ apart
//! each bit differs with probability θ/π, as in SimHash (Charikar, 2002):
//! the number of differing bits `h` of `n` estimates the angle: the fewer,
//! the closer (what [`scan`] gives).
//!
//! A 384-dimensional vector codes to 512 bits: 64 bytes, a 24th of its
//! `f32` vector, compared with eight XORs and popcounts. The estimate is
//! coarse (θ/π has a standard deviation of about 0.02 at 512 bits), with no
//! hard bound, so the search rescores a large pool of the best estimates
//! with the stored vectors; how often that pool misses a true top-10
//! memory is measured by `engram-bench retrieve` (recall@10), not bounded.

use pulp::{Arch, Simd, WithSimd};

/// Rounds of sign flips and Hadamard transforms: one leaves a sparse
/// vector's rotation a sum of few terms per component; two mix it well.
const ROUNDS: usize = 2;
/// Fixed, so that codes of one length are comparable in every snapshot.
const SEED: u64 = 0x5eed_c0de_0f0b_17e5;

/// The rotation for vectors of one length, and the codes it gives.
#[derive(Debug)]
pub struct Coder {
    dimensions: usize,
    /// `dimensions` rounded up to a power of two (0 for 0): the bits of a
    /// code.
    padded: usize,
    /// ±1 per padded component, for each round.
    signs: [Vec<f32>; ROUNDS],
}

impl Coder {
    pub fn new(dimensions: usize) -> Self {
        let padded = if dimensions == 0 {
            0
        } else {
            dimensions.next_power_of_two()
        };
        let mut state = SEED;
        let signs = std::array::from_fn(|_| {
            (0..padded)
                .map(|_| {
                    if splitmix(&mut state) & 1 == 0 {
                        1.0
                    } else {
                        -1.0
                    }
                })
                .collect()
        });
        Self {
            dimensions,
            padded,
            signs,
        }
    }

    /// The length of the vectors it codes.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// 64-bit words per code.
    pub fn words(&self) -> usize {
        self.padded.div_ceil(64)
    }

    /// `vector` (of [`Self::dimensions`] floats) rotated: `padded` floats,
    /// with the same length and the same dot products with other rotated
    /// vectors.
    pub fn rotate(&self, vector: &[f32]) -> Vec<f32> {
        let mut rotated = vec![0.0f32; self.padded];
        rotated[..vector.len()].copy_from_slice(vector);
        for signs in &self.signs {
            for (value, sign) in rotated.iter_mut().zip(signs) {
                *value *= sign;
            }
            hadamard(&mut rotated);
        }
        #[expect(clippy::cast_precision_loss, reason = "a power of two: exact in f32")]
        let scale = 1.0 / self.padded as f32;
        for value in &mut rotated {
            // Each unnormalised transform scales lengths by √padded.
            *value *= scale;
        }
        rotated
    }

    /// Appends the code of `vector` to `codes`: [`Self::words`] words.
    pub fn encode(&self, vector: &[f32], codes: &mut Vec<u64>) {
        let rotated = self.rotate(vector);
        let start = codes.len();
        codes.resize(start + self.words(), 0);
        for (word, values) in codes[start..].iter_mut().zip(rotated.chunks(64)) {
            for (bit, value) in values.iter().enumerate() {
                if *value < 0.0 {
                    *word |= 1 << bit;
                }
            }
        }
    }

    /// Bits per code: the search's estimates run from 0 to this many
    /// differing bits.
    pub fn bits(&self) -> usize {
        self.padded
    }
}

/// The coder of nothing: for the words-only side, and before any vector.
impl Default for Coder {
    fn default() -> Self {
        Self::new(0)
    }
}

/// The fast Walsh–Hadamard transform, unnormalised, of a power-of-two
/// length.
fn hadamard(values: &mut [f32]) {
    let mut width = 1;
    while width < values.len() {
        for block in values.chunks_exact_mut(2 * width) {
            let (left, right) = block.split_at_mut(width);
            for (a, b) in left.iter_mut().zip(right) {
                (*a, *b) = (*a + *b, *a - *b);
            }
        }
        width *= 2;
    }
}

/// SplitMix64: a tiny seeded generator for the rotation's signs.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A query's code.
#[derive(Clone, Debug)]
pub struct Query {
    code: Vec<u64>,
}

impl Query {
    /// Codes `vector`, of the coder's length.
    pub fn new(coder: &Coder, vector: &[f32]) -> Self {
        let mut code = Vec::with_capacity(coder.words());
        coder.encode(vector, &mut code);
        Self { code }
    }
}

/// A row's closest query by the codes: the query's index and how many
/// bits of their codes differ (fewer is closer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    pub query: u16,
    pub differing: u16,
}

/// Estimates for rows of `codes` (each [`Coder::words`] long) against
/// `queries` (the first 65,536 of them; a search has a handful): one per
/// row.
pub fn scan(coder: &Coder, queries: &[Query], codes: &[u64]) -> Vec<Estimate> {
    let words = coder.words();
    if words == 0 {
        return Vec::new();
    }
    let mut best = Vec::with_capacity(codes.len() / words);
    Arch::new().dispatch(Scan {
        queries,
        codes,
        words,
        best: &mut best,
    });
    best
}

/// [`scan`] as one function compiled for each instruction set, so that
/// `count_ones` is the CPU's popcount (or a vector form of it) where it
/// has one.
struct Scan<'a> {
    queries: &'a [Query],
    codes: &'a [u64],
    words: usize,
    best: &'a mut Vec<Estimate>,
}

impl WithSimd for Scan<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Self {
            queries,
            codes,
            words,
            best,
        } = self;
        for row in codes.chunks_exact(words) {
            let mut top = Estimate {
                query: 0,
                differing: u16::MAX,
            };
            for (index, query) in (0..=u16::MAX).zip(queries) {
                let differing: u32 = row
                    .iter()
                    .zip(&query.code)
                    .map(|(a, b)| (a ^ b).count_ones())
                    .sum();
                // At most 64 × `words` bits: 4,096 for the longest
                // vectors embedders give (3,072 dimensions).
                let differing = u16::try_from(differing).unwrap_or(u16::MAX);
                if differing < top.differing {
                    top = Estimate {
                        query: index,
                        differing,
                    };
                }
            }
            best.push(top);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(a, b)| a * b).sum()
    }

    #[test]
    fn same_vectors_agree_and_opposite_ones_differ_in_every_bit() {
        let coder = Coder::new(5);
        let vector = [0.53, -0.11, 0.37, 0.0, 0.79];
        let opposite = vector.map(|value: f32| -value);
        let query = Query::new(&coder, &vector);
        let mut codes = Vec::new();
        coder.encode(&vector, &mut codes);
        coder.encode(&opposite, &mut codes);
        let best = scan(&coder, &[query], &codes);
        let estimate = |differing| Estimate {
            query: 0,
            differing,
        };
        assert_eq!(best, [estimate(0), estimate(8)]);
    }

    #[test]
    fn the_nearest_query_wins() {
        let coder = Coder::new(64);
        let axis = |i: usize| {
            let mut v = vec![0.0f32; 64];
            v[i] = 1.0;
            v
        };
        let queries = [Query::new(&coder, &axis(1)), Query::new(&coder, &axis(2))];
        let mut codes = Vec::new();
        coder.encode(&axis(2), &mut codes);
        let best = scan(&coder, &queries, &codes);
        assert_eq!(
            best,
            [Estimate {
                query: 1,
                differing: 0
            }]
        );
    }

    proptest! {
        /// The rotation is orthogonal: lengths and dot products survive it.
        #[test]
        fn the_rotation_keeps_dot_products(
            a in prop::collection::vec(-1.0f32..1.0, 37),
            b in prop::collection::vec(-1.0f32..1.0, 37),
        ) {
            let coder = Coder::new(37);
            let (ra, rb) = (coder.rotate(&a), coder.rotate(&b));
            prop_assert_eq!(ra.len(), 64);
            prop_assert!((dot(&ra, &rb) - dot(&a, &b)).abs() < 1e-4);
            prop_assert!((dot(&ra, &ra) - dot(&a, &a)).abs() < 1e-4);
        }
    }
}
