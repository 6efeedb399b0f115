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
//! `f32` vector. Codes are stored word by word across blocks of rows
//! ([`Codes`]), so that the scan compares a word of many rows in one
//! vector XOR and popcount (`VPOPCNTQ` where the CPU has it), and hands
//! back only the rows within the caller's cutoff. The estimate is
//! coarse (θ/π has a standard deviation of about 0.02 at 512 bits), with no
//! hard bound, so the search rescores a large pool of the best estimates
//! with the stored vectors; how often that pool misses a true top-10
//! memory is measured by `engram-bench retrieve` (recall@10, in
//! `docs/benchmarks.md`), not bounded.

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

    /// The code of `vector`: [`Self::words`] words, bit `i` of the
    /// rotated vector's component `i` set where it is negative.
    pub fn code(&self, vector: &[f32]) -> Vec<u64> {
        sign_bits(&self.rotate(vector))
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

/// One bit per value of `rotated`, set where it is negative.
fn sign_bits(rotated: &[f32]) -> Vec<u64> {
    let mut code = vec![0u64; rotated.len().div_ceil(64)];
    for (word, values) in code.iter_mut().zip(rotated.chunks(64)) {
        for (bit, value) in values.iter().enumerate() {
            if *value < 0.0 {
                *word |= 1 << bit;
            }
        }
    }
    code
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

/// A query's code, and its rotated vector.
#[derive(Clone, Debug)]
pub struct Query {
    code: Vec<u64>,
    rotated: Vec<f32>,
}

impl Query {
    /// Codes `vector`, of the coder's length.
    pub fn new(coder: &Coder, vector: &[f32]) -> Self {
        let rotated = coder.rotate(vector);
        Self {
            code: sign_bits(&rotated),
            rotated,
        }
    }

    /// Its code.
    pub fn code(&self) -> &[u64] {
        &self.code
    }

    /// The tables that say how close it is to a code's direction
    /// ([`Leaning`]).
    pub fn leaning(&self) -> Leaning {
        let mut tables = vec![0.0f32; self.rotated.len().div_ceil(8) * 256];
        for (byte, values) in self.rotated.chunks(8).enumerate() {
            let table = &mut tables[byte * 256..(byte + 1) * 256];
            for pattern in 1..256usize {
                let lowest = pattern.trailing_zeros() as usize;
                table[pattern] =
                    table[pattern & (pattern - 1)] + values.get(lowest).copied().unwrap_or(0.0);
            }
        }
        Leaning {
            total: self.rotated.iter().sum(),
            tables,
        }
    }
}

/// How close a query is to the direction of a code `c` (±1 per bit: −1
/// where set): the dot product of its rotated vector with `c`, without
/// coding the query, so finer than the bits that differ. Read byte by
/// byte from tables of the query's sums over each byte's set bits.
pub struct Leaning {
    /// The sum of the query's rotated values.
    total: f32,
    /// For each byte of a code and each of its 256 values, the sum of
    /// the query's rotated values where the byte's bits are set.
    tables: Vec<f32>,
}

impl Leaning {
    /// The dot product with `code`'s ±1 direction.
    pub fn toward(&self, code: &[u64]) -> f32 {
        let set: f32 = code
            .iter()
            .flat_map(|word| word.to_le_bytes())
            .enumerate()
            .map(|(byte, value)| self.tables[byte * 256 + usize::from(value)])
            .sum();
        self.total - 2.0 * set
    }
}

/// Rows a block of [`Codes`] interleaves: a word of them is four 512-bit
/// vectors (eight 256-bit ones), enough to keep the vector units busy and
/// few enough that a small namespace's padding stays small.
const LANES: usize = 32;

/// The codes of a run of rows, interleaved in blocks of [`LANES`] rows:
/// a block holds word 0 of each of its rows, then word 1, and so on, so
/// that the scan compares a whole block's rows with each instruction. The
/// last block is padded with zero words, which the scan skips.
#[derive(Clone, Debug, Default)]
pub struct Codes {
    words: usize,
    rows: usize,
    blocks: Vec<u64>,
}

impl Codes {
    /// No rows yet, of codes `words` long.
    pub fn new(words: usize) -> Self {
        Self {
            words,
            rows: 0,
            blocks: Vec::new(),
        }
    }

    /// Room for `rows` more rows, and no more (see `Chunk::reserve_exact`).
    pub fn reserve_exact(&mut self, rows: usize) {
        let needed = (self.rows + rows).div_ceil(LANES) * LANES * self.words;
        self.blocks
            .reserve_exact(needed.saturating_sub(self.blocks.len()));
    }

    /// Appends a row's code, of the length these codes were made for.
    pub fn push(&mut self, code: &[u64]) {
        assert_eq!(code.len(), self.words, "a code of another coder");
        let lane = self.rows % LANES;
        if lane == 0 {
            self.blocks
                .resize(self.blocks.len() + LANES * self.words, 0);
        }
        let block = self.blocks.len() - LANES * self.words;
        for (word, value) in code.iter().enumerate() {
            self.blocks[block + word * LANES + lane] = *value;
        }
        self.rows += 1;
    }

    /// The code of row `slot`.
    pub fn row(&self, slot: usize) -> Vec<u64> {
        let (block, lane) = (slot / LANES * LANES * self.words, slot % LANES);
        (0..self.words)
            .map(|word| self.blocks[block + word * LANES + lane])
            .collect()
    }

    /// How many rows they hold.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The bytes reserved for them.
    pub fn bytes(&self) -> usize {
        self.blocks.capacity() * size_of::<u64>()
    }
}

/// A row the scan kept: its slot, and how many bits of its code differ
/// from its closest query's (fewer is closer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Near {
    pub slot: u16,
    pub differing: u16,
}

/// The rows of `codes` (up to 65,536) whose code differs from the closest
/// of `queries` in at most `within` bits, in slot order. Queries come from
/// the coder `codes` were made with.
pub fn scan(queries: &[Query], codes: &Codes, within: u16) -> Vec<Near> {
    let mut near = Vec::new();
    if codes.words == 0 {
        return near;
    }
    let scan = Scan {
        queries,
        codes,
        within,
        near: &mut near,
    };
    match VectorPopcount::try_new() {
        Some(simd) => simd.vectorize(|| scan.run()),
        None => Arch::new().dispatch(scan),
    }
    near
}

pulp::simd_type! {
    /// AVX-512 with a popcount of each 64-bit lane (Intel since Ice Lake,
    /// AMD since Zen 4).
    struct VectorPopcount {
        pub avx512f: "avx512f",
        pub avx512vpopcntdq: "avx512vpopcntdq",
    }
}

/// The row of `codes` whose code differs least from `code` (of the same
/// coder), with the bits it differs in; the first such row on a tie,
/// `None` without rows.
pub fn closest(code: &[u64], codes: &Codes) -> Option<(usize, u16)> {
    let closest = Closest { code, codes };
    match VectorPopcount::try_new() {
        Some(simd) => simd.vectorize(|| closest.run()),
        None => Arch::new().dispatch(closest),
    }
}

/// [`closest`], compiled like [`Scan`].
struct Closest<'a> {
    code: &'a [u64],
    codes: &'a Codes,
}

impl WithSimd for Closest<'_> {
    type Output = Option<(usize, u16)>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) -> Self::Output {
        self.run()
    }
}

impl Closest<'_> {
    #[inline(always)]
    fn run(self) -> Option<(usize, u16)> {
        let Self { code, codes } = self;
        if codes.words == 0 {
            return None;
        }
        let mut best: Option<(usize, u64)> = None;
        for (block, words) in codes.blocks.chunks_exact(LANES * codes.words).enumerate() {
            for (lane, &count) in block_differing(words, code).iter().enumerate() {
                let slot = block * LANES + lane;
                if slot < codes.rows && best.is_none_or(|(_, least)| count < least) {
                    best = Some((slot, count));
                }
            }
        }
        best.map(|(slot, count)| (slot, u16::try_from(count).unwrap_or(u16::MAX)))
    }
}

/// How many bits each row of `codes` differs from `code` in (of the same
/// coder), row by row.
pub fn differing(code: &[u64], codes: &Codes) -> Vec<u16> {
    let differing = Differing { code, codes };
    match VectorPopcount::try_new() {
        Some(simd) => simd.vectorize(|| differing.run()),
        None => Arch::new().dispatch(differing),
    }
}

/// [`differing`], compiled like [`Scan`].
struct Differing<'a> {
    code: &'a [u64],
    codes: &'a Codes,
}

impl WithSimd for Differing<'_> {
    type Output = Vec<u16>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) -> Self::Output {
        self.run()
    }
}

impl Differing<'_> {
    #[inline(always)]
    fn run(self) -> Vec<u16> {
        let Self { code, codes } = self;
        if codes.words == 0 {
            return vec![0; codes.rows];
        }
        let mut all = Vec::with_capacity(codes.rows.next_multiple_of(LANES));
        for words in codes.blocks.chunks_exact(LANES * codes.words) {
            // At most 64 × `words` bits, as in the scan.
            all.extend(
                block_differing(words, code)
                    .iter()
                    .map(|&count| u16::try_from(count).unwrap_or(u16::MAX)),
            );
        }
        all.truncate(codes.rows);
        all
    }
}

/// How many bits each row of a block (`words`, interleaved as [`Codes`]
/// keeps them) differs from `code` in, lane by lane. Word by word, each
/// across the block's rows: the inner loop is element-wise over
/// [`LANES`] rows, which the compiler turns into a few vector
/// instructions per word in its caller's instruction set.
#[inline(always)]
fn block_differing(words: &[u64], code: &[u64]) -> [u64; LANES] {
    let mut differing = [0u64; LANES];
    for (column, bits) in words.chunks_exact(LANES).zip(code) {
        for (sum, row) in differing.iter_mut().zip(column) {
            *sum += u64::from((row ^ bits).count_ones());
        }
    }
    differing
}

/// [`scan`] as one function compiled for each instruction set, so that
/// the lanes of a block are compared in vector registers with the CPU's
/// popcount (or a vector form of it) where it has one.
struct Scan<'a> {
    queries: &'a [Query],
    codes: &'a Codes,
    within: u16,
    near: &'a mut Vec<Near>,
}

impl WithSimd for Scan<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        self.run();
    }
}

impl Scan<'_> {
    /// The scan itself, plain code for the compiler to vectorise with
    /// whatever instructions the caller's context enables.
    #[inline(always)]
    fn run(self) {
        let Self {
            queries,
            codes,
            within,
            near,
        } = self;
        let within = u64::from(within);
        for (block, words) in codes.blocks.chunks_exact(LANES * codes.words).enumerate() {
            let mut closest = [u64::MAX; LANES];
            for query in queries {
                let differing = block_differing(words, &query.code);
                for lane in 0..LANES {
                    closest[lane] = closest[lane].min(differing[lane]);
                }
            }
            // Most blocks hold no row close enough: one test rejects them.
            if closest.iter().all(|&differing| differing > within) {
                continue;
            }
            for (lane, &differing) in closest.iter().enumerate() {
                let slot = block * LANES + lane;
                if differing <= within && slot < codes.rows {
                    near.push(Near {
                        slot: u16::try_from(slot).unwrap_or(u16::MAX),
                        // At most 64 × `words` bits: 4,096 for the
                        // longest vectors embedders give (3,072
                        // dimensions).
                        differing: u16::try_from(differing).unwrap_or(u16::MAX),
                    });
                }
            }
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

    /// Codes of `vectors`, row by row.
    fn codes_of(coder: &Coder, vectors: &[Vec<f32>]) -> Codes {
        let mut codes = Codes::new(coder.words());
        for vector in vectors {
            codes.push(&coder.code(vector));
        }
        codes
    }

    #[test]
    fn same_vectors_agree_and_opposite_ones_differ_in_every_bit() {
        let coder = Coder::new(5);
        let vector = vec![0.53, -0.11, 0.37, 0.0, 0.79];
        let opposite = vector.iter().map(|value| -value).collect();
        let query = Query::new(&coder, &vector);
        let codes = codes_of(&coder, &[vector, opposite]);
        let near = |slot, differing| Near { slot, differing };
        assert_eq!(
            scan(std::slice::from_ref(&query), &codes, u16::MAX),
            [near(0, 0), near(1, 8)]
        );
        assert_eq!(scan(&[query], &codes, 7), [near(0, 0)]);
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
        let codes = codes_of(&coder, &[axis(2)]);
        assert_eq!(
            scan(&queries, &codes, 0),
            [Near {
                slot: 0,
                differing: 0
            }]
        );
    }

    proptest! {
        /// A query's leaning toward a code is its rotated vector's dot
        /// product with the code's ±1 direction, for codes of one word
        /// and of several.
        #[test]
        fn a_leaning_is_the_dot_product_with_the_codes_direction(
            vector in prop::collection::vec(-1.0f32..1.0, 200),
            code in prop::collection::vec(any::<u64>(), 4),
            short in any::<bool>(),
        ) {
            let dimensions = if short { 40 } else { 200 };
            let coder = Coder::new(dimensions);
            let query = Query::new(&coder, &vector[..dimensions]);
            let code = &code[..coder.words()];
            let rotated = coder.rotate(&vector[..dimensions]);
            let direction: Vec<f32> = (0..coder.bits())
                .map(|bit| if code[bit / 64] >> (bit % 64) & 1 == 1 { -1.0 } else { 1.0 })
                .collect();
            let expected = dot(&rotated, &direction);
            prop_assert!((query.leaning().toward(code) - expected).abs() < 1e-4);
        }

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

        /// Over row counts that end blocks part-way, short and long codes,
        /// and several queries:
        /// rows come back as they were pushed, and the scan keeps exactly
        /// the rows within `within` bits of their closest query, counted
        /// word by word, with that count.
        #[test]
        fn the_scan_keeps_exactly_the_rows_within_reach(
            vectors in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 600), 0..80),
            queries in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 600), 1..4),
            short in any::<bool>(),
            within in 20u16..300,
        ) {
            // Codes of 2 words and of 16.
            let dimensions = if short { 70 } else { 600 };
            let vectors: Vec<Vec<f32>> = vectors.iter().map(|v| v[..dimensions].to_vec()).collect();
            let queries: Vec<Vec<f32>> = queries.iter().map(|q| q[..dimensions].to_vec()).collect();
            let within = if short { within / 4 + 30 } else { within * 2 };
            let coder = Coder::new(dimensions);
            let codes = codes_of(&coder, &vectors);
            let queries: Vec<Query> = queries.iter().map(|query| Query::new(&coder, query)).collect();
            let mut expected = Vec::new();
            for (slot, vector) in vectors.iter().enumerate() {
                let code = coder.code(vector);
                prop_assert_eq!(codes.row(slot), code.clone());
                let differing = queries
                    .iter()
                    .map(|query| query.code.iter().zip(&code).map(|(a, b)| (a ^ b).count_ones()).sum::<u32>())
                    .min()
                    .unwrap();
                if differing <= u32::from(within) {
                    expected.push(Near {
                        slot: u16::try_from(slot).unwrap(),
                        differing: u16::try_from(differing).unwrap(),
                    });
                }
            }
            prop_assert_eq!(scan(&queries, &codes, within), expected);
        }

        /// `differing` counts, for every row, the bits its code differs
        /// from the one given in, and `closest` is the first row with the
        /// fewest.
        #[test]
        fn each_rows_differing_bits_are_counted_and_the_closest_is_the_first_fewest(
            vectors in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 130), 0..80),
            query in prop::collection::vec(-1.0f32..1.0, 130),
            short in any::<bool>(),
        ) {
            // Codes of 1 word and of 4.
            let dimensions = if short { 20 } else { 130 };
            let vectors: Vec<Vec<f32>> = vectors.iter().map(|v| v[..dimensions].to_vec()).collect();
            let coder = Coder::new(dimensions);
            let codes = codes_of(&coder, &vectors);
            let code = coder.code(&query[..dimensions]);
            let expected: Vec<u16> = vectors
                .iter()
                .map(|vector| {
                    let row = coder.code(vector);
                    let bits: u32 = row.iter().zip(&code).map(|(a, b)| (a ^ b).count_ones()).sum();
                    u16::try_from(bits).unwrap()
                })
                .collect();
            prop_assert_eq!(differing(&code, &codes), expected.clone());
            let fewest = expected.iter().min().copied();
            let first = fewest.map(|fewest| (expected.iter().position(|&bits| bits == fewest).unwrap(), fewest));
            prop_assert_eq!(closest(&code, &codes), first);
        }
    }
}
