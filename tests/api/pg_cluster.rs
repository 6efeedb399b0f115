//! The throwaway PostgreSQL of the tests: the workspace crate
//! `pg-throwaway` (shared with the bench), under the name the tests use.
//! One shared cluster serves the whole test binary, each test a database
//! of its own; where PostgreSQL is absent a test says `skipped` and
//! returns, and under `CI=true` that is a failure.

pub use pg_throwaway::*;
