//! The commands that run beside a coding agent rather than in the server:
//! each is a short-lived process the agent (or a person setting one up)
//! starts. Those that reach Engram do so through its HTTP API, so none of
//! them opens the data directory the service owns.

/// The coding agents Engram serves: one entry per agent, read by every
/// command below.
pub mod agent;
/// `engram mcp`: MCP over stdio, bridged to a running Engram's `/mcp`.
pub mod bridge;
/// `engram check`: a repo's anchored memories judged against a git
/// working tree, the verdicts recorded with Engram.
pub mod check;
/// `engram consolidate`: one consolidation pass over a repo's and a
/// user's memories, each change printed with its reason.
pub mod consolidate;
/// `engram doctor`: whether the agents' entries can reach Engram.
pub mod doctor;
/// `engram export`: every memory, whole, as JSON Lines or memory files.
pub mod export;
/// `engram hook`: coding-agent hooks that call a running Engram.
pub mod hook;
/// Calls to a running Engram's HTTP API: the client policy and the
/// answers read one way.
pub mod http;
/// `engram import`: transcripts, instructions files, exports and mem0's
/// memories brought into a running Engram.
pub mod import;
/// `engram healthcheck`: a dependency-free probe of `/healthz`.
pub mod probe;
/// `engram setup`: merges Engram's hooks into a coding agent's settings.
pub mod setup;

/// The runtime a short-lived command runs its calls on: one thread.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A command's exit: on success what it did, printed to standard output
/// as it is (with its own line ends); on failure `engram: <failed>:` and
/// the error with its causes, to standard error.
fn exit_with<T: std::fmt::Display, E: std::error::Error + 'static>(
    failed: &str,
    outcome: Result<T, E>,
) -> std::process::ExitCode {
    match outcome {
        Ok(done) => {
            print!("{done}");
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("engram: {failed}: {}", crate::causes::error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
