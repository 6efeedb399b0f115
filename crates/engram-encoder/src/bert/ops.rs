//! The encoder's own candle ops, over contiguous f32 rows: attention
//! (scores, softmax and weighted sum per text and head), the intermediate
//! layer's bias and GELU, each half-layer's bias, residual and layer norm,
//! and the bf16 product. Each is one pass where candle's general model
//! makes several, compiled for the widest instruction set the CPU has
//! (`pulp`) and spread over the current rayon pool's threads.

use candle_core::{CpuStorage, CustomOp1, InplaceOp1, InplaceOp2, Layout, Shape, Tensor, bail};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use crate::bf16::Bf16Weight;

#[cfg(target_arch = "x86_64")]
impl CustomOp1 for Bf16Weight {
    fn name(&self) -> &'static str {
        "minilm-bf16-product"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, input, values) = f32_rows(storage, layout, "the bf16 product")?;
        if input != self.input() {
            bail!("the bf16 product got rows of {input}, not {}", self.input());
        }
        let product = self.multiply(values);
        Ok((CpuStorage::F32(product), Shape::from((rows, self.output()))))
    }
}

/// A custom op's input as rows: their count, their width and the values;
/// an error naming `op` unless they are contiguous f32.
fn f32_rows<'a>(
    storage: &'a CpuStorage,
    layout: &Layout,
    op: &str,
) -> candle_core::Result<(usize, usize, &'a [f32])> {
    let (rows, width) = layout.shape().dims2()?;
    let (CpuStorage::F32(data), Some((start, end))) = (storage, layout.contiguous_offsets()) else {
        bail!("{op} expects contiguous f32 rows");
    };
    Ok((rows, width, &data[start..end]))
}

/// Rows per task of the row-wise passes: enough work to outweigh handing
/// it to another thread.
const ROWS_PER_TASK: usize = 16;

/// The end of each half of a layer, in place over a product's rows:
/// `LayerNorm(row + bias + residual row)`, one pass instead of three.
pub(super) struct AddNorm {
    bias: Vec<f32>,
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl AddNorm {
    pub(super) fn load(
        bias: &Tensor,
        norm: &VarBuilder,
        config: &Config,
    ) -> candle_core::Result<Self> {
        let hidden = config.hidden_size;
        #[expect(clippy::cast_possible_truncation, reason = "an epsilon of 1e-12")]
        let eps = config.layer_norm_eps as f32;
        Ok(Self {
            bias: bias.to_vec1()?,
            gamma: norm.get(hidden, "weight")?.to_vec1()?,
            beta: norm.get(hidden, "bias")?.to_vec1()?,
            eps,
        })
    }
}

impl InplaceOp2 for AddNorm {
    fn name(&self) -> &'static str {
        "minilm-add-norm"
    }

    fn cpu_fwd(
        &self,
        rows: &mut CpuStorage,
        rows_layout: &Layout,
        residual: &CpuStorage,
        residual_layout: &Layout,
    ) -> candle_core::Result<()> {
        let (CpuStorage::F32(rows), Some((start, end))) = (rows, rows_layout.contiguous_offsets())
        else {
            bail!("add-norm expects contiguous f32 rows");
        };
        let (CpuStorage::F32(residual), Some((residual_start, residual_end))) =
            (residual, residual_layout.contiguous_offsets())
        else {
            bail!("add-norm expects a contiguous f32 residual");
        };
        let width = self.bias.len();
        if end - start != residual_end - residual_start || (end - start) % width != 0 {
            bail!("add-norm got rows and a residual of different shapes");
        }
        rows[start..end]
            .par_chunks_mut(width * ROWS_PER_TASK)
            .zip(residual[residual_start..residual_end].par_chunks(width * ROWS_PER_TASK))
            .for_each(|(rows, residual)| {
                Arch::new().dispatch(AddNormRows {
                    op: self,
                    rows,
                    residual,
                });
            });
        Ok(())
    }
}

struct AddNormRows<'a> {
    op: &'a AddNorm,
    rows: &'a mut [f32],
    residual: &'a [f32],
}

impl WithSimd for AddNormRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Self { op, rows, residual } = self;
        let width = op.bias.len();
        #[expect(clippy::cast_precision_loss, reason = "a row is 384 wide")]
        let count = width as f32;
        for (row, residual) in rows
            .chunks_exact_mut(width)
            .zip(residual.chunks_exact(width))
        {
            for ((value, bias), residual) in row.iter_mut().zip(&op.bias).zip(residual) {
                *value += bias + residual;
            }
            let mean = sum(row) / count;
            let mut deviations = [0.0f32; 16];
            for chunk in row.chunks(16) {
                for (lane, value) in deviations.iter_mut().zip(chunk) {
                    *lane += (value - mean) * (value - mean);
                }
            }
            let scale = 1.0 / (sum(&deviations) / count + op.eps).sqrt();
            for ((value, gamma), beta) in row.iter_mut().zip(&op.gamma).zip(&op.beta) {
                *value = (*value - mean) * scale * gamma + beta;
            }
        }
    }
}

/// A sum in sixteen lanes, so the compiler can vectorise it.
#[inline(always)]
fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    for chunk in values.chunks(16) {
        for (lane, value) in lanes.iter_mut().zip(chunk) {
            *lane += value;
        }
    }
    lanes.iter().sum()
}

/// Self-attention over the stacked query, key and value rows of a padded
/// batch: for each text and head, softmax(q·kᵀ)·v over the text's real
/// tokens (the scale is in the query weights).
pub(super) struct Attention {
    pub(super) lengths: Vec<usize>,
    pub(super) width: usize,
    pub(super) heads: usize,
}

impl CustomOp1 for Attention {
    fn name(&self) -> &'static str {
        "minilm-attention"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, stacked, qkv) = f32_rows(storage, layout, "attention")?;
        if rows != self.lengths.len() * self.width || stacked % 3 != 0 {
            bail!(
                "attention got {rows} × {stacked} for {} texts",
                self.lengths.len()
            );
        }
        let hidden = stacked / 3;
        let mut out = vec![0.0f32; rows * hidden];
        out.par_chunks_mut(self.width * hidden)
            .zip(qkv.par_chunks(self.width * stacked))
            .zip(self.lengths.par_iter())
            .for_each(|((out, qkv), &length)| {
                Arch::new().dispatch(AttendText {
                    qkv,
                    out,
                    length,
                    heads: self.heads,
                    hidden,
                });
            });
        Ok((CpuStorage::F32(out), Shape::from((rows, hidden))))
    }
}

/// One text's attention, every head, compiled for each instruction set.
struct AttendText<'a> {
    /// The text's rows of stacked query, key and value.
    qkv: &'a [f32],
    /// The text's output rows.
    out: &'a mut [f32],
    length: usize,
    heads: usize,
    hidden: usize,
}

impl WithSimd for AttendText<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Self {
            qkv,
            out,
            length,
            heads,
            hidden,
        } = self;
        let head_size = hidden / heads;
        let stacked = 3 * hidden;
        let mut weights = vec![0.0f32; length];
        for head in 0..heads {
            let slice = |row: usize, part: usize| {
                let begin = row * stacked + part * hidden + head * head_size;
                &qkv[begin..begin + head_size]
            };
            for query_row in 0..length {
                let query = slice(query_row, 0);
                let mut highest = f32::NEG_INFINITY;
                for (key_row, weight) in weights.iter_mut().enumerate() {
                    *weight = dot(query, slice(key_row, 1));
                    highest = highest.max(*weight);
                }
                let mut total = 0.0;
                for weight in &mut weights {
                    *weight = (*weight - highest).exp();
                    total += *weight;
                }
                let begin = query_row * hidden + head * head_size;
                let context = &mut out[begin..begin + head_size];
                for (value_row, weight) in weights.iter().enumerate() {
                    let share = weight / total;
                    for (c, v) in context.iter_mut().zip(slice(value_row, 2)) {
                        *c += share * v;
                    }
                }
            }
        }
    }
}

/// A dot product in sixteen lanes, so the compiler can vectorise it
/// (a plain sum is sequential under IEEE rules).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let (a_chunks, b_chunks) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The intermediate layer's bias and GELU, `x · (1 + erf(x / √2)) / 2`,
/// in place over the product's rows.
pub(super) struct BiasGelu {
    pub(super) bias: Vec<f32>,
}

impl InplaceOp1 for BiasGelu {
    fn name(&self) -> &'static str {
        "minilm-bias-gelu"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let (CpuStorage::F32(data), Some((start, end))) = (storage, layout.contiguous_offsets())
        else {
            bail!("GELU expects contiguous f32 rows");
        };
        let width = self.bias.len();
        if (end - start) % width != 0 {
            bail!("GELU got rows of another width");
        }
        data[start..end]
            .par_chunks_mut(width * ROWS_PER_TASK)
            .for_each(|rows| {
                Arch::new().dispatch(BiasGeluRows {
                    bias: &self.bias,
                    rows,
                });
            });
        Ok(())
    }
}

struct BiasGeluRows<'a> {
    bias: &'a [f32],
    rows: &'a mut [f32],
}

impl WithSimd for BiasGeluRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        for row in self.rows.chunks_exact_mut(self.bias.len()) {
            for (value, bias) in row.iter_mut().zip(self.bias) {
                let x = *value + bias;
                *value = 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
    }
}

/// erf as a rational function of x (odd numerator of degree 13, even
/// denominator of degree 8) on [-4, 4], where f32's erf is ±1 beyond: the
/// approximation Eigen and XLA use, within 1e-7 of erf. Branch-free, so a
/// loop over it vectorises.
#[inline(always)]
fn erf(x: f32) -> f32 {
    const NUMERATOR: [f32; 7] = [
        -1.609_603_3e-2,
        -2.954_6e-3,
        -7.349_906_3e-4,
        -5.692_506_4e-5,
        -2.101_024e-6,
        2.770_681_4e-8,
        -2.726_142_3e-10,
    ];
    const DENOMINATOR: [f32; 5] = [
        -1.426_473_9e-2,
        -7.373_329_2e-3,
        -1.682_827e-3,
        -2.133_740_6e-4,
        -1.456_607_2e-5,
    ];
    let x = x.clamp(-4.0, 4.0);
    let squared = x * x;
    let numerator = NUMERATOR
        .iter()
        .rev()
        .fold(0.0, |sum, &coefficient| sum * squared + coefficient);
    let denominator = DENOMINATOR
        .iter()
        .rev()
        .fold(0.0, |sum, &coefficient| sum * squared + coefficient);
    x * numerator / denominator
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_is_within_1e_6_of_the_series() {
        // erf by its Maclaurin series in f64, exact enough on [-3, 3].
        let reference = |x: f64| {
            let (mut term, mut sum) = (x, x);
            for n in 1..200 {
                let n = f64::from(n);
                term *= -x * x / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        };
        for step in -300..=300 {
            let x = f64::from(step) / 100.0;
            #[expect(clippy::cast_possible_truncation, reason = "a test input")]
            let ours = f64::from(erf(x as f32));
            assert!((ours - reference(x)).abs() < 1e-6, "erf({x}): {ours}");
        }
        assert!((erf(10.0) - 1.0).abs() < 1e-6);
        assert!((erf(-10.0) + 1.0).abs() < 1e-6);
    }
}
