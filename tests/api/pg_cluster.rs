//! The throwaway PostgreSQL of the tests: the workspace crate
//! `pg-throwaway` (shared with the bench), under the name the tests use.
//! One shared cluster serves the whole test binary, each test a database
//! of its own; where PostgreSQL is absent a test says `skipped` and
//! returns, and under `CI=true` that is a failure. [`hang`] stops every
//! process of a cluster's server (`SIGSTOP`): a database that does not
//! answer.

pub use pg_throwaway::*;

use std::process::Command;

/// The server holding `url`'s database, hung: every one of its processes
/// stopped (`SIGSTOP`), as a machine that stops answering is, with its
/// connections open and the kernel still taking their bytes. They go on
/// (`SIGCONT`) when this is dropped, so a failing test leaves no cluster
/// stopped.
pub struct Hung {
    pids: Vec<String>,
}

impl Drop for Hung {
    fn drop(&mut self) {
        signal("-CONT", &self.pids);
    }
}

/// Hangs the server holding `url`'s database: use it on a cluster of the
/// test's own ([`private_cluster`]), never the shared one.
pub async fn hang(url: &str) -> Hung {
    let client = connect(url).await;
    let backend: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    drop(client);
    let postmaster = parent_of(&backend.to_string()).expect("the backend's parent");
    // The postmaster first: stopped, it starts no new process.
    signal("-STOP", std::slice::from_ref(&postmaster));
    let mut pids = vec![postmaster.clone()];
    pids.extend(children_of(&postmaster));
    signal("-STOP", &pids[1..]);
    Hung { pids }
}

fn signal(signal: &str, pids: &[String]) {
    if pids.is_empty() {
        return;
    }
    // A process that exited meanwhile (the backend of a closed
    // connection) is no failure.
    let _ = Command::new("kill").arg(signal).args(pids).status();
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (the field after
/// the command's closing parenthesis and the state).
fn parent_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_command = &stat[stat.rfind(')')? + 1..];
    after_command.split_whitespace().nth(1).map(str::to_owned)
}

fn children_of(parent: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| parent_of(pid).as_deref() == Some(parent))
        .collect()
}
