//! The `engram` binary as a child process: the replicas workload runs
//! real processes, as a deployment does, rather than the service in the
//! bench's own process. Each has a data directory of its own, logs to a
//! file there, and is stopped with `SIGTERM` (killed when dropped).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::scratch::ScratchDir;
use crate::server::Client;
use crate::workload::Result;

/// How long a process may take to answer `/readyz` with `200`, or to exit
/// once asked to.
const PATIENCE: Duration = Duration::from_secs(1800);

/// Where the `engram` binary is: `explicit`, else beside this bench's own
/// binary (`target/release/engram` beside `target/release/engram-bench`).
pub fn engram_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    let binary = match explicit {
        Some(path) => path.to_owned(),
        None => std::env::current_exe()?.with_file_name("engram"),
    };
    if !binary.is_file() {
        return Err(format!(
            "no engram binary at {}: build it (`cargo build --release -p engram`) or pass --engram",
            binary.display()
        )
        .into());
    }
    Ok(binary)
}

/// A running `engram` process.
pub struct Process {
    child: Child,
    client: Client,
    /// Its data directory (queue, caches), handed back by [`Process::stop`].
    dir: Option<ScratchDir>,
    /// Its standard output and error.
    log: PathBuf,
}

impl Process {
    /// Starts `binary` over a fresh data directory with `env` (and
    /// nothing else of this process's environment), on a free loopback
    /// port.
    pub fn spawn(binary: &Path, env: &[(&str, String)]) -> Result<Self> {
        Self::spawn_in(binary, ScratchDir::new()?, env)
    }

    /// [`Process::spawn`] over `dir`, a data directory an earlier process
    /// left (its embedding cache warm).
    pub fn spawn_in(binary: &Path, dir: ScratchDir, env: &[(&str, String)]) -> Result<Self> {
        let listen = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let log_path = dir.path().join("engram.log");
        let log = std::fs::File::create(&log_path)?;
        let child = Command::new(binary)
            .current_dir(dir.path())
            .env_clear()
            .env("HOME", dir.path())
            .env("ENGRAM_LISTEN", listen.to_string())
            .env("ENGRAM_DATA_DIR", dir.path().join("data"))
            .env("ENGRAM_LOG__FILTER", "warn")
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        Ok(Self {
            child,
            client: Client::for_base(format!("http://{listen}")),
            dir: Some(dir),
            log: log_path,
        })
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Waits until `/readyz` answers `200`; an error quoting the log if the
    /// process exits first.
    pub async fn wait_ready(&mut self) -> Result {
        let started = Instant::now();
        loop {
            if let Ok((200, _)) = self.client.send("GET", "/readyz", None).await {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(
                    format!("engram exited ({status}) before ready: {}", self.log()).into(),
                );
            }
            if started.elapsed() > PATIENCE {
                return Err(format!("engram was not ready in {PATIENCE:?}: {}", self.log()).into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits until the index holds every memory the process knows of.
    pub async fn wait_indexed(&self) -> Result {
        loop {
            let (_, stats) = self.client.send("GET", "/stats", None).await?;
            if stats["index"]["pending"] == 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the process with `SIGTERM` (a graceful shutdown) and returns
    /// its data directory, for a later process to start over.
    pub async fn stop(mut self) -> Result<ScratchDir> {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::TERM,
        )?;
        let started = Instant::now();
        while self.child.try_wait()?.is_none() {
            if started.elapsed() > PATIENCE {
                return Err(format!("engram did not exit in {PATIENCE:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.dir
            .take()
            .ok_or_else(|| "the data directory was handed back already".into())
    }

    /// The last lines of the process's log.
    fn log(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
