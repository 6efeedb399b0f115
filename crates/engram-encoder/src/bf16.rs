//! The encoder's matrix products in bfloat16, on CPUs that multiply it
//! natively (AVX-512 BF16: AMD Zen 4 and later, Intel Cooper Lake and
//! Sapphire Rapids and later).
//!
//! `VDPBF16PS` multiplies 16 pairs of bf16 values and adds both products
//! of each pair into one f32 lane: 32 multiply-adds per instruction where
//! an f32 FMA does 16, so on such a CPU these products can run at twice
//! the rate of the f32 kernels `gemm` picks, and the encoder is mostly
//! these products (the measured rates and their effect on embedding are
//! in `docs/benchmarks.md`, "Embedder and start-up").
//! Both inputs are rounded to bf16 (8 significant bits); the products of
//! two bf16 values are exact in f32 and the sums stay f32, so a product's
//! error is the inputs' rounding, about 2⁻⁹ of each term.
//!
//! Layout. A weight is packed once, at load, into panels of 32 output
//! columns. Within a panel, each pair of input rows `2j, 2j + 1` is 32
//! words, one per column, holding that column's two weights (row `2j` in
//! the low half): two vectors of the form the instruction reads. The
//! activations are rounded to bf16 row by row, which puts each pair of
//! neighbours in one word, broadcast to every lane as the other operand.
//!
//! Invariant: a row's outputs depend only on that row, summed in the same
//! order wherever the row sits in a call, so a text's vector does not
//! depend on what it was batched with.
#![expect(
    unsafe_code,
    reason = "AVX-512 BF16 intrinsics: loads and stores through pointers, and the call into \
              code compiled for that instruction set once the CPU is known to have it"
)]

use std::arch::x86_64::{
    __m512, __m512bh, __m512i, _mm512_cvtne2ps_pbh, _mm512_dpbf16_ps, _mm512_loadu_ps,
    _mm512_loadu_si512, _mm512_set1_epi32, _mm512_setzero_ps, _mm512_storeu_ps,
    _mm512_storeu_si512,
};

use rayon::prelude::*;

/// Output columns per panel: two vectors of 16 f32 lanes.
const PANEL: usize = 32;
/// Rows multiplied together: each panel's vectors are loaded once per
/// this many rows, and the 16 accumulators stay in registers.
const ROWS: usize = 8;

/// A linear layer's weight, packed for [`Bf16Weight::multiply`]. Only made
/// on a CPU that has AVX-512 BF16, so holding one is the proof that it can
/// be multiplied.
pub struct Bf16Weight {
    input: usize,
    output: usize,
    /// Panel after panel, each `input / 2` pairs of two 16-lane words.
    lanes: Vec<[u32; 16]>,
}

impl Bf16Weight {
    /// Packs a weight stored `(input, output)`, row-major; `None` when the
    /// CPU lacks AVX-512 BF16 or the shape does not fit the panels (an odd
    /// input or an output that is not a multiple of 32).
    pub fn pack(weight: &[f32], input: usize, output: usize) -> Option<Self> {
        let fits = input.is_multiple_of(2)
            && output.is_multiple_of(PANEL)
            && weight.len() == input * output;
        if !fits || !supported() {
            return None;
        }
        let mut lanes = Vec::with_capacity(input * output / 16);
        for panel in 0..output / PANEL {
            for pair in 0..input / 2 {
                let word = |column: usize| {
                    let column = panel * PANEL + column;
                    let low = bf16_bits(weight[2 * pair * output + column]);
                    let high = bf16_bits(weight[(2 * pair + 1) * output + column]);
                    u32::from(low) | (u32::from(high) << 16)
                };
                lanes.push(std::array::from_fn(word));
                lanes.push(std::array::from_fn(|column| word(16 + column)));
            }
        }
        Some(Self {
            input,
            output,
            lanes,
        })
    }

    pub fn input(&self) -> usize {
        self.input
    }

    pub fn output(&self) -> usize {
        self.output
    }

    /// `rows · weight` for `rows` of `input` values each: `output` values
    /// per row, spread over the current rayon pool's threads.
    ///
    /// # Panics
    /// When `rows` is not whole rows of `input` values.
    pub fn multiply(&self, rows: &[f32]) -> Vec<f32> {
        assert!(
            rows.len().is_multiple_of(self.input),
            "{} values are not rows of {}",
            rows.len(),
            self.input
        );
        let count = rows.len() / self.input;
        let pairs = self.input / 2;
        let mut out = vec![0.0; count * self.output];
        // Rows past a call's last stay zero: they cost the last block some
        // work and are never stored.
        let mut words = vec![0u32; count.div_ceil(ROWS) * ROWS * pairs];
        out.par_chunks_mut(ROWS * self.output)
            .zip(rows.par_chunks(ROWS * self.input))
            .zip(words.par_chunks_mut(ROWS * pairs))
            .for_each(|((out, rows), words)| {
                // SAFETY: a `Bf16Weight` exists only where `supported()`
                // found AVX-512F and AVX-512 BF16.
                unsafe { multiply_block(self, rows, words, out) };
            });
        out
    }
}

/// Whether this CPU multiplies bf16 natively: without it, [`Bf16Weight::pack`]
/// refuses every weight.
pub fn supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// `value` rounded to the nearest bf16 (ties to even), as its bits: for
/// finite values, the rounding of the instruction that converts
/// activations.
fn bf16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

/// Up to [`ROWS`] rows times the whole weight: rounds the rows to bf16
/// pairs in `words`, then runs every panel over them.
#[target_feature(enable = "avx512f,avx512bf16")]
fn multiply_block(weight: &Bf16Weight, rows: &[f32], words: &mut [u32], out: &mut [f32]) {
    let (input, output) = (weight.input, weight.output);
    let pairs = input / 2;
    let present = rows.len() / input;
    round_rows(rows, &mut words[..present * pairs]);
    for panel in 0..output / PANEL {
        let lanes = &weight.lanes[panel * 2 * pairs..(panel + 1) * 2 * pairs];
        let mut sums = [[_mm512_setzero_ps(); 2]; ROWS];
        for (pair, columns) in lanes.chunks_exact(2).enumerate() {
            let low_columns = load_words(&columns[0]);
            let high_columns = load_words(&columns[1]);
            for (row, sums) in sums.iter_mut().enumerate() {
                let both = broadcast(words[row * pairs + pair]);
                sums[0] = _mm512_dpbf16_ps(sums[0], both, low_columns);
                sums[1] = _mm512_dpbf16_ps(sums[1], both, high_columns);
            }
        }
        for (row, sums) in sums.iter().enumerate().take(present) {
            let start = row * output + panel * PANEL;
            let (low, high) = out[start..start + PANEL].split_at_mut(16);
            store(low, sums[0]);
            store(high, sums[1]);
        }
    }
}

/// Rounds rows of f32 to bf16, 32 values at a time, two to a word (the
/// earlier value in the low half). `rows` holds `2 × words.len()` values.
#[target_feature(enable = "avx512f,avx512bf16")]
fn round_rows(rows: &[f32], words: &mut [u32]) {
    let mut values = rows.chunks_exact(32);
    let mut packed = words.chunks_exact_mut(16);
    for (values, packed) in (&mut values).zip(&mut packed) {
        let (low, high) = values.split_at(16);
        // The second operand fills the low 16 bf16 lanes.
        let rounded = _mm512_cvtne2ps_pbh(load_values(high), load_values(low));
        // SAFETY: `packed` is 16 words, the 64 bytes stored.
        unsafe { _mm512_storeu_si512(packed.as_mut_ptr().cast(), as_words(rounded)) };
    }
    for (pair, word) in values
        .remainder()
        .chunks_exact(2)
        .zip(packed.into_remainder())
    {
        *word = u32::from(bf16_bits(pair[0])) | (u32::from(bf16_bits(pair[1])) << 16);
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load_values(values: &[f32]) -> __m512 {
    assert!(values.len() >= 16);
    // SAFETY: at least 16 values, the 64 bytes read.
    unsafe { _mm512_loadu_ps(values.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load_words(words: &[u32; 16]) -> __m512bh {
    // SAFETY: 16 words, the 64 bytes read.
    as_bf16(unsafe { _mm512_loadu_si512(words.as_ptr().cast()) })
}

#[inline]
#[target_feature(enable = "avx512f")]
fn broadcast(word: u32) -> __m512bh {
    as_bf16(_mm512_set1_epi32(word.cast_signed()))
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store(out: &mut [f32], sums: __m512) {
    assert!(out.len() >= 16);
    // SAFETY: at least 16 values, the 64 bytes written.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sums) };
}

#[inline]
fn as_bf16(words: __m512i) -> __m512bh {
    // SAFETY: both are 64 bytes of plain lanes; every bit pattern is a
    // valid value of each.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(words) }
}

#[inline]
fn as_words(values: __m512bh) -> __m512i {
    // SAFETY: as in `as_bf16`.
    unsafe { std::mem::transmute::<__m512bh, __m512i>(values) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of several magnitudes and both signs, from a seed.
    fn values(count: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                #[expect(clippy::cast_precision_loss, reason = "a test input")]
                let unit = (state >> 11) as f32 / (1u64 << 53) as f32;
                (unit - 0.5) * 4.0
            })
            .collect()
    }

    fn rounded(value: f32) -> f64 {
        f64::from(f32::from_bits(u32::from(bf16_bits(value)) << 16))
    }

    #[test]
    fn products_are_the_bf16_rounded_inputs_summed_in_f32() {
        // 70 inputs: rounding runs 32 at a time with a tail.
        let (input, output) = (70, 64);
        let weight = values(input * output, 1);
        let Some(packed) = Bf16Weight::pack(&weight, input, output) else {
            eprintln!("this CPU has no AVX-512 BF16: nothing to check");
            return;
        };
        // Row counts below, at and across a block, with a partial last one.
        for (seed, count) in (2..).zip([1, 3, ROWS, ROWS + 1, 3 * ROWS - 2]) {
            let rows = values(count * input, seed);
            let product = packed.multiply(&rows);
            assert_eq!(product.len(), count * output);
            for row in 0..count {
                for column in 0..output {
                    let exact: f64 = (0..input)
                        .map(|k| {
                            rounded(rows[row * input + k]) * rounded(weight[k * output + column])
                        })
                        .sum();
                    let magnitude: f64 = (0..input)
                        .map(|k| {
                            (rounded(rows[row * input + k]) * rounded(weight[k * output + column]))
                                .abs()
                        })
                        .sum();
                    let got = f64::from(product[row * output + column]);
                    // The classic bound on f32 sums of `input` exact terms;
                    // a term paired with the wrong weight is far beyond it.
                    #[expect(clippy::cast_precision_loss, reason = "a few dozen terms")]
                    let bound = magnitude * f64::from(f32::EPSILON) * input as f64;
                    assert!(
                        (got - exact).abs() <= bound,
                        "{count} rows, row {row}, column {column}: {got} against {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_row_gets_the_same_outputs_in_any_call() {
        let (input, output) = (64, 32);
        let Some(packed) = Bf16Weight::pack(&values(input * output, 3), input, output) else {
            return;
        };
        let rows = values(11 * input, 4);
        let together = packed.multiply(&rows);
        for (row, alone) in rows.chunks_exact(input).enumerate() {
            assert_eq!(
                packed.multiply(alone),
                together[row * output..(row + 1) * output]
            );
        }
    }

    #[test]
    fn shapes_the_panels_cannot_hold_are_refused() {
        assert!(Bf16Weight::pack(&values(3 * 32, 5), 3, 32).is_none());
        assert!(Bf16Weight::pack(&values(4 * 40, 5), 4, 40).is_none());
        assert!(Bf16Weight::pack(&values(10, 5), 4, 32).is_none());
    }

    #[test]
    fn rounding_is_to_the_nearest_bf16_with_ties_to_even() {
        let bits = |value: u32| bf16_bits(f32::from_bits(value));
        assert_eq!(bits(0x3f80_0000), 0x3f80);
        assert_eq!(bits(0x3f80_7fff), 0x3f80);
        assert_eq!(bits(0x3f80_8000), 0x3f80);
        assert_eq!(bits(0x3f81_8000), 0x3f82);
        assert_eq!(bits(0x3f80_8001), 0x3f81);
    }
}
