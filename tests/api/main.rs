//! The HTTP API, end to end: one test binary, one module per resource.

mod helpers;

mod cli;
mod docs;
mod lifecycle;
mod memories;
mod store;
mod validation;
