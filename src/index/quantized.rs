//! Vectors quantized to 8 bits for the scan, with a bound on the error.
//!
//! Each (unit) vector `v` is stored as codes `c` (`i8`, within ±127) and a
//! scale `s = max|vᵢ| / 127`, so `v ≈ s·c`, plus the exact length of what
//! the rounding lost, `r = ‖v − s·c‖`. A query `q` is coded the same way.
//! The scan multiplies codes as integers: a quarter of the bytes of the
//! `f32` vectors to stream from memory, and 32 products per AVX2
//! instruction where the CPU has it (chosen at run time).
//!
//! The bound: with `a = s·c` and `b = s_q·d`, `v·q − a·b = a·e_q + e_v·q`,
//! so `|v·q − a·b| ≤ ‖a‖·r_q + r_v ≤ (1 + r_v)·r_q + r_v` for unit `q`.
//! [`Codes::bound`] is that, plus a margin for `f32` rounding; the search
//! rescores its best candidates exactly, so only memories whose exact
//! similarities lie within twice the bound of each other can swap places.

use pulp::{Arch, Simd, WithSimd};

/// The largest code; -128 is never used, so negation is exact.
const MAX_CODE: f32 = 127.0;
/// Slack for the `f32` rounding of the sums themselves.
const ROUNDING_MARGIN: f32 = 1e-5;

/// One coded vector's scale and rounding loss.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Coding {
    pub scale: f32,
    /// `‖v − scale·codes‖`.
    pub loss: f32,
}

/// Appends the codes of `vector` to `codes` and returns their scale and
/// loss. A zero vector codes as zeros at scale 0, exactly.
pub fn encode(vector: &[f32], codes: &mut Vec<i8>) -> Coding {
    let largest = vector
        .iter()
        .fold(0.0f32, |max, value| max.max(value.abs()));
    if largest == 0.0 || !largest.is_finite() {
        codes.extend(std::iter::repeat_n(0, vector.len()));
        return Coding::default();
    }
    let scale = largest / MAX_CODE;
    let mut lost = 0.0f64;
    for &value in vector {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "rounded and clamped to ±127 first"
        )]
        let code = (value / scale).round().clamp(-MAX_CODE, MAX_CODE) as i8;
        let error = f64::from(value) - f64::from(scale) * f64::from(code);
        lost += error * error;
        codes.push(code);
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a rounding loss below 1, rounded up below"
    )]
    let loss = lost.sqrt() as f32;
    Coding {
        scale,
        loss: loss * (1.0 + f32::EPSILON * 4.0),
    }
}

/// A query, normalised and coded.
#[derive(Clone, Debug)]
pub struct Query {
    pub codes: Vec<i8>,
    pub coding: Coding,
}

impl Query {
    /// Codes `vector`, which must be of unit length (or zero).
    pub fn new(vector: &[f32]) -> Self {
        let mut codes = Vec::with_capacity(vector.len());
        let coding = encode(vector, &mut codes);
        Self { codes, coding }
    }

    /// The most the approximate similarity to a vector coded with `coding`
    /// can be off the exact one.
    pub fn bound(&self, coding: Coding) -> f32 {
        (1.0 + coding.loss) * self.coding.loss + coding.loss + ROUNDING_MARGIN
    }
}

/// Approximate similarities of rows of codes (each `dimensions` long) to
/// every query: for each row, the best query and its similarity, written
/// to `best` (one per row).
pub fn scan(
    queries: &[Query],
    codes: &[i8],
    codings: &[Coding],
    dimensions: usize,
    best: &mut Vec<(usize, f32)>,
) {
    best.clear();
    if dimensions == 0 {
        best.resize(codings.len(), (0, 0.0));
        return;
    }
    Arch::new().dispatch(Scan {
        queries,
        codes,
        codings,
        dimensions,
        best,
    });
}

/// [`scan`] as one function compiled for each instruction set, so the
/// integer loop below is vectorised with the widest one the CPU has.
struct Scan<'a> {
    queries: &'a [Query],
    codes: &'a [i8],
    codings: &'a [Coding],
    dimensions: usize,
    best: &'a mut Vec<(usize, f32)>,
}

impl WithSimd for Scan<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Self {
            queries,
            codes,
            codings,
            dimensions,
            best,
        } = self;
        for (row, coding) in codes.chunks_exact(dimensions).zip(codings) {
            let mut top = (0, f32::NEG_INFINITY);
            for (index, query) in queries.iter().enumerate() {
                #[expect(
                    clippy::cast_precision_loss,
                    reason = "exact below 1,040 dimensions; the rounding margin covers longer ones"
                )]
                let similarity =
                    dot(row, &query.codes) as f32 * (coding.scale * query.coding.scale);
                if similarity > top.1 {
                    top = (index, similarity);
                }
            }
            best.push(top);
        }
    }
}

/// The integer dot product, in a form the compiler turns into widening
/// multiply-adds (16-bit products summed in pairs into 32 bits).
#[inline(always)]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 32;
    let mut sums = [0i32; LANES / 2];
    let (a_head, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_head, b_tail) = b.split_at(a_head.len());
    for (a, b) in a_head.chunks_exact(LANES).zip(b_head.chunks_exact(LANES)) {
        for pair in 0..LANES / 2 {
            let first = i32::from(i16::from(a[2 * pair]) * i16::from(b[2 * pair]));
            let second = i32::from(i16::from(a[2 * pair + 1]) * i16::from(b[2 * pair + 1]));
            sums[pair] += first + second;
        }
    }
    let tail: i32 = a_tail
        .iter()
        .zip(b_tail)
        .map(|(&a, &b)| i32::from(a) * i32::from(b))
        .sum();
    sums.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn unit(mut vector: Vec<f32>) -> Vec<f32> {
        crate::index::normalise(&mut vector);
        vector
    }

    fn exact(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(a, b)| a * b).sum()
    }

    #[test]
    fn a_zero_vector_codes_exactly() {
        let mut codes = Vec::new();
        assert_eq!(encode(&[0.0; 5], &mut codes), Coding::default());
        assert_eq!(codes, [0; 5]);
    }

    #[test]
    fn small_integer_vectors_code_without_loss() {
        let mut codes = Vec::new();
        let coding = encode(&[127.0, -1.0, 0.0, 3.0], &mut codes);
        assert_eq!(codes, [127, -1, 0, 3]);
        assert!((coding.scale - 1.0).abs() < 1e-6);
        assert!(coding.loss < 1e-6);
    }

    proptest! {
        /// The approximate similarity never strays past the bound, for any
        /// length (including the tail the lanes leave) and query count.
        #[test]
        fn approximations_stay_within_the_bound(
            rows in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 37), 1..40),
            queries in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 37), 1..4),
        ) {
            let rows: Vec<Vec<f32>> = rows.into_iter().map(unit).collect();
            let queries: Vec<Vec<f32>> = queries.into_iter().map(unit).collect();
            let coded: Vec<Query> = queries.iter().map(|q| Query::new(q)).collect();
            let mut codes = Vec::new();
            let codings: Vec<Coding> = rows.iter().map(|row| encode(row, &mut codes)).collect();
            let mut best = Vec::new();
            scan(&coded, &codes, &codings, 37, &mut best);
            prop_assert_eq!(best.len(), rows.len());
            for ((row, coding), (query, approximate)) in rows.iter().zip(&codings).zip(&best) {
                let truth = exact(row, &queries[*query]);
                prop_assert!((truth - approximate).abs() <= coded[*query].bound(*coding),
                    "{} vs {}", truth, approximate);
                let best_truth = queries.iter().map(|q| exact(row, q)).fold(f32::MIN, f32::max);
                let widest = coded.iter().map(|q| q.bound(*coding)).fold(0.0, f32::max);
                prop_assert!(best_truth - approximate <= widest);
            }
        }
    }
}
