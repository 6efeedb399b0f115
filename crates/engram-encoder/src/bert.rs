//! all-MiniLM-L6-v2's encoder (BERT), for inference on the CPU.
//!
//! The weights and the arithmetic are BERT's, as sentence-transformers runs
//! them; what differs from candle-transformers' general `BertModel` is how
//! the work is arranged. At this model's size (384 wide, sentences of
//! 10–40 tokens) the matrix products are small and the cost of every other
//! step shows, so:
//! - query, key and value come from one matrix product (their weights
//!   stacked at load, the attention's 1/√(head size) folded into the
//!   query's), and every weight is stored transposed, as the products read it;
//! - attention is one pass per text and head over that product's output
//!   (scores, softmax, weighted sum), looking only at the text's real
//!   tokens, instead of a dozen tensor operations over the padded batch,
//!   two of them a matrix product per text and head;
//! - the intermediate layer's bias and GELU are one pass, with an erf
//!   accurate to 1e-7 that the compiler vectorises, where candle calls
//!   libm's scalar `erff` per element;
//! - each half-layer ends in one pass over the product's rows (its bias,
//!   the residual and the layer norm), where candle makes three, each
//!   allocating a tensor.
//! - where the CPU has AVX-512 BF16, the linear layers' products run in
//!   bf16 with f32 sums ([`super::bf16`]), at twice f32's rate; elsewhere
//!   they are candle's f32 products.
//!
//! These passes ([`ops`]) are compiled for the widest instruction set the
//! CPU has (`pulp`) and spread over the current rayon pool's threads, like
//! candle's own kernels.
//!
//! Invariant: a text's output rows depend only on its own tokens. Rows past
//! a text's end (padding) are never attended to, so whatever they hold
//! reaches no real row; pooling skips them.

mod ops;

use candle_core::{Device, Module, Tensor, bail};
use candle_nn::{LayerNorm, VarBuilder};
use candle_transformers::models::bert::{Config, HiddenAct};

use ops::{AddNorm, Attention, BiasGelu};

#[cfg(target_arch = "x86_64")]
use super::bf16::{self, Bf16Weight};

/// The encoder's weights, ready for [`Bert::forward`].
pub struct Bert {
    word_embeddings: Tensor,
    /// Position embeddings plus the embedding of token type 0 (the only
    /// type a sentence has), one row per position.
    position_embeddings: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
}

struct Layer {
    /// Query, key and value: `hidden` → 3 × `hidden`.
    qkv: Dense,
    /// The attention's output projection; its bias, the residual and the
    /// layer norm are applied by `attention_norm`.
    attention_output: Weight,
    attention_norm: AddNorm,
    /// `hidden` → intermediate; its bias is added by `gelu`.
    intermediate: Weight,
    gelu: BiasGelu,
    /// Intermediate → `hidden`; its bias, the residual and the layer norm
    /// are applied by `output_norm`.
    output: Weight,
    output_norm: AddNorm,
}

impl Bert {
    pub fn load(weights: &VarBuilder, config: &Config) -> candle_core::Result<Self> {
        if config.hidden_act != HiddenAct::Gelu {
            bail!("expected a BERT with GELU, found {:?}", config.hidden_act);
        }
        if !config
            .hidden_size
            .is_multiple_of(config.num_attention_heads)
        {
            bail!("the hidden size is not a multiple of the heads");
        }
        let hidden = config.hidden_size;
        let weights = if weights.contains_tensor("bert.embeddings.word_embeddings.weight") {
            weights.pp("bert")
        } else {
            weights.clone()
        };
        let embeddings = weights.pp("embeddings");
        let word_embeddings =
            embeddings.get((config.vocab_size, hidden), "word_embeddings.weight")?;
        let positions = embeddings.get(
            (config.max_position_embeddings, hidden),
            "position_embeddings.weight",
        )?;
        let token_types = embeddings.get(
            (config.type_vocab_size, hidden),
            "token_type_embeddings.weight",
        )?;
        let position_embeddings = positions.broadcast_add(&token_types.get(0)?)?;
        let embeddings_norm = layer_norm(&embeddings.pp("LayerNorm"), config)?;

        let head_size = hidden / config.num_attention_heads;
        #[expect(clippy::cast_precision_loss, reason = "a head is a few dozen wide")]
        let scale = 1.0 / (head_size as f64).sqrt();
        let layers = (0..config.num_hidden_layers)
            .map(|index| {
                let layer = weights.pp(format!("encoder.layer.{index}"));
                let attention = layer.pp("attention");
                let part = |name: &str| {
                    let part = attention.pp("self").pp(name);
                    Ok::<_, candle_core::Error>((
                        part.get((hidden, hidden), "weight")?,
                        part.get(hidden, "bias")?,
                    ))
                };
                let (query, query_bias) = part("query")?;
                let (key, key_bias) = part("key")?;
                let (value, value_bias) = part("value")?;
                let qkv = Dense::new(
                    &Tensor::cat(&[(query * scale)?, key, value], 0)?,
                    Tensor::cat(&[(query_bias * scale)?, key_bias, value_bias], 0)?,
                )?;
                let intermediate_size = config.intermediate_size;
                let (attention_output, attention_bias) =
                    linear(&attention.pp("output.dense"), hidden, hidden)?;
                let (intermediate, intermediate_bias) =
                    linear(&layer.pp("intermediate.dense"), hidden, intermediate_size)?;
                let (output, output_bias) =
                    linear(&layer.pp("output.dense"), intermediate_size, hidden)?;
                Ok(Layer {
                    qkv,
                    attention_output,
                    attention_norm: AddNorm::load(
                        &attention_bias,
                        &attention.pp("output.LayerNorm"),
                        config,
                    )?,
                    intermediate,
                    gelu: BiasGelu {
                        bias: intermediate_bias.to_vec1()?,
                    },
                    output,
                    output_norm: AddNorm::load(
                        &output_bias,
                        &layer.pp("output.LayerNorm"),
                        config,
                    )?,
                })
            })
            .collect::<candle_core::Result<_>>()?;
        Ok(Self {
            word_embeddings,
            position_embeddings,
            embeddings_norm,
            layers,
            heads: config.num_attention_heads,
        })
    }

    /// The last layer's output for a batch of token id sequences, padded
    /// to the longest: `(texts × width, hidden)`, a text's rows together,
    /// followed by its padding rows (meaningless, to be skipped).
    pub fn forward(&self, batch: &[&[u32]], device: &Device) -> candle_core::Result<Tensor> {
        let width = batch.iter().map(|ids| ids.len()).max().unwrap_or_default();
        let lengths: Vec<usize> = batch.iter().map(|ids| ids.len()).collect();
        let mut ids = Vec::with_capacity(batch.len() * width);
        for text in batch {
            ids.extend_from_slice(text);
            // No real row attends to padding rows; any id will do.
            ids.resize(ids.len() + width - text.len(), 0);
        }
        let ids = Tensor::from_vec(ids, batch.len() * width, device)?;
        let positions: Vec<u32> = (0..batch.len())
            .flat_map(|_| 0..u32::try_from(width).unwrap_or(u32::MAX))
            .collect();
        let positions = Tensor::from_vec(positions, batch.len() * width, device)?;
        let embedded = (self.word_embeddings.embedding(&ids)?
            + self.position_embeddings.embedding(&positions)?)?;
        let mut hidden = self.embeddings_norm.forward(&embedded)?;

        let attention = Attention {
            lengths,
            width,
            heads: self.heads,
        };
        for layer in &self.layers {
            let mixed = layer.qkv.forward(&hidden)?.apply_op1_no_bwd(&attention)?;
            let attended = layer.attention_output.product(&mixed)?;
            attended.inplace_op2(&hidden, &layer.attention_norm)?;
            let intermediate = layer.intermediate.product(&attended)?;
            intermediate.inplace_op1(&layer.gelu)?;
            hidden = layer.output.product(&intermediate)?;
            hidden.inplace_op2(&attended, &layer.output_norm)?;
        }
        Ok(hidden)
    }
}

/// A linear layer's weight, stored as this CPU multiplies it fastest: in
/// bf16 panels where it has AVX-512 BF16 (twice the rate, see
/// [`super::bf16`]),
/// else in f32 `(in, out)` for candle's `gemm` (PyTorch's `(out, in)` would
/// be transposed and gathered on every call).
enum Weight {
    F32(Tensor),
    #[cfg(target_arch = "x86_64")]
    Bf16(Bf16Weight),
}

impl Weight {
    /// From PyTorch's `(out, in)` weight.
    fn new(weight: &Tensor) -> candle_core::Result<Self> {
        let weight = weight.t()?.contiguous()?;
        // The weight is copied out for packing only where it can be packed.
        #[cfg(target_arch = "x86_64")]
        if bf16::supported() {
            let (input, output) = weight.dims2()?;
            let values = weight.flatten_all()?.to_vec1::<f32>()?;
            if let Some(packed) = Bf16Weight::pack(&values, input, output) {
                return Ok(Self::Bf16(packed));
            }
        }
        Ok(Self::F32(weight))
    }

    /// `rows · weight`.
    fn product(&self, rows: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::F32(weight) => rows.matmul(weight),
            #[cfg(target_arch = "x86_64")]
            Self::Bf16(weight) => rows.apply_op1_no_bwd(weight),
        }
    }
}

/// A linear layer with its bias added by candle.
struct Dense {
    weight: Weight,
    bias: Tensor,
}

impl Dense {
    /// From PyTorch's `(out, in)` weight.
    fn new(weight: &Tensor, bias: Tensor) -> candle_core::Result<Self> {
        Ok(Self {
            weight: Weight::new(weight)?,
            bias,
        })
    }

    fn forward(&self, rows: &Tensor) -> candle_core::Result<Tensor> {
        self.weight.product(rows)?.broadcast_add(&self.bias)
    }
}

/// A linear layer's weight, as [`Weight`] stores it, and its bias, for a
/// fused pass to add.
fn linear(
    weights: &VarBuilder,
    input: usize,
    output: usize,
) -> candle_core::Result<(Weight, Tensor)> {
    let weight = Weight::new(&weights.get((output, input), "weight")?)?;
    Ok((weight, weights.get(output, "bias")?))
}

fn layer_norm(weights: &VarBuilder, config: &Config) -> candle_core::Result<LayerNorm> {
    candle_nn::layer_norm(config.hidden_size, config.layer_norm_eps, weights.clone())
}
