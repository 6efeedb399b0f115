//! The HTTP API, end to end: one test binary, one module per resource.

mod backends;
mod helpers;
mod pg_cluster;
use engram_fake_upstream as upstream;

mod auth;
mod backfill;
mod binary;
mod browser;
mod capture;
mod cli;
mod container;
mod docs;
mod freshness;
mod grants;
mod graph;
mod hooks;
mod import_export;
mod lifecycle;
mod mcp;
mod memories;
mod operations;
mod pipeline;
mod replicas;
mod retrieve;
mod secrets;
mod setup;
mod similar;
mod site_guard;
mod store;
mod sync;
mod time;
mod truth;
mod ui;
mod upstream_faults;
mod usage;
mod validation;
