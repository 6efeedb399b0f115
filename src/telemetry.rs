//! Logging: one tracing subscriber for the process, as text or JSON lines.
//! Request spans (see `routes`) put the request id on every line logged
//! while a request is handled.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{Log, LogFormat};

/// Installs the global subscriber. `RUST_LOG`, when set, overrides the
/// configured filter.
pub fn init(log: &Log) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second init (e.g. in tests) keeps the first subscriber: not an error.
    let _ = match log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
}
