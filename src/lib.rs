//! Engram: long-term memory for AI coding agents, as a small HTTP service
//! over plain markdown files.

/// The global allocator (mimalloc), and the process setting it needs first
/// thing in `main`.
pub mod allocator;
/// Lifecycle: load, bind, serve, stop gracefully.
pub mod app;
/// API keys and the middleware that checks them.
pub mod auth;
/// Blocking work off the async workers; a panic in it is resumed.
pub mod blocking;
/// Capture: triggers queued durably, classified, guarded and written.
pub mod capture;
/// An error and its causes as one line, for logs.
pub mod causes;
/// The agent-side commands (`engram hook`, `setup`, `mcp`, `healthcheck`):
/// clients of the HTTP API, never of the data directory.
pub mod client;
/// A request's commit point: the request timeout answers `503` only
/// before it.
pub mod commit_point;
/// Configuration: defaults, YAML file, environment; validated at start.
pub mod config;
/// Consolidation: near-duplicates reduced to one, contradictions found.
pub mod consolidate;
/// Free disk space: the floor below which writes are refused.
pub mod disk;
/// Embedders: the in-process MiniLM model and OpenAI-compatible endpoints.
pub mod embed;
/// API errors as `application/problem+json`.
pub mod error;
/// The vector index and the indexer task that keeps it current.
pub mod index;
/// The chat model (OpenAI-compatible chat completions).
pub mod llm;
/// The MCP tools at `/mcp`.
pub mod mcp;
/// The domain types: ids, namespaces, categories, memories.
pub mod memory;
/// Prometheus metrics for `/metrics`.
pub mod metrics;
/// Whether start-up work is done (`/readyz`).
pub mod readiness;
/// Retrieval: search, ranking, injection text, degradation.
pub mod retrieval;
/// Routes, OpenAPI, Swagger UI and middleware.
pub mod routes;
/// The secret detector: what looks like a credential, refused where it
/// would be stored and redacted where it would leave for a model.
pub mod secrets;
/// The accept loop: connections, header timeouts, graceful stop.
pub mod serve;
/// The markdown file store and its in-memory view.
pub mod store;
/// Logging setup.
pub mod telemetry;
/// Token counts, as `o200k_base` counts them.
pub mod tokens;
/// Calls to OpenAI-compatible endpoints, and their errors.
pub mod upkeep;
pub mod upstream;
/// Metering of model calls: tokens and cost by kind, model and pair, and
/// the daily token budgets.
pub mod usage;
/// Conversation windows: chat messages reduced to user and assistant text.
pub mod window;
