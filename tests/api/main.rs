//! The HTTP API, end to end: one test binary, one module per resource.

mod helpers;
use engram_fake_upstream as upstream;

mod auth;
mod binary;
mod browser;
mod capture;
mod capture_lean;
mod capture_limits;
mod cli;
mod container;
mod docs;
mod freshness;
mod grants;
mod graph;
mod hook_bounds;
mod hook_capture;
mod hooks;
mod lifecycle;
mod mcp;
mod mcp_bridge;
mod mcp_typescript;
mod memories;
mod operations;
mod pipeline;
mod retrieve;
mod secrets;
mod setup;
mod similar;
mod site_guard;
mod store;
mod sync;
mod triggers;
mod ui;
mod upstream_faults;
mod usage;
mod validation;
