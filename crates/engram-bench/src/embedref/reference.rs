//! The reference runtime as a child process: sentence-transformers on
//! PyTorch (CPU), set up once in a scratch virtual environment from the
//! pinned `requirements.txt`, and served by `minilm.py` over stdin and
//! stdout, one JSON object a line, so its model is loaded once and its
//! timings can alternate with Engram's.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::workload::Result;

const REQUIREMENTS: &str = include_str!("requirements.txt");
const SCRIPT: &str = include_str!("minilm.py");

/// Where the environment goes unless `--venv` says otherwise: beside the
/// build's output, so `cargo clean` removes it.
pub const DEFAULT_VENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/embedref-venv");

/// Records which requirements the environment was built from, so a
/// changed pin builds it again.
const STAMP: &str = "engram-requirements.txt";

/// What the reference reports about itself.
#[derive(Debug, Deserialize)]
pub struct Info {
    pub torch: String,
    pub sentence_transformers: String,
    pub threads: usize,
    pub interop_threads: usize,
    pub cpu_capability: String,
}

#[derive(Deserialize)]
struct Vectors {
    vectors: Vec<Vec<f32>>,
}

/// One timed pass over the texts.
#[derive(Debug, Default, Deserialize)]
pub struct Pass {
    /// The wall time of each call.
    pub seconds: Vec<f64>,
    /// The CPU time of the whole process, every thread, over the pass.
    pub cpu_seconds: f64,
}

/// A running `minilm.py`; stopped when dropped.
pub struct Reference {
    child: Child,
    requests: Option<ChildStdin>,
    replies: BufReader<ChildStdout>,
}

impl Reference {
    /// Sets up the environment in `venv` if it is missing or was built
    /// from other pins, then starts the script on `model_dir` with
    /// `threads` intra-op threads.
    pub fn start(venv: &Path, model_dir: &Path, threads: usize) -> Result<Self> {
        let python = ensure_venv(venv)?;
        let script = venv.join("minilm.py");
        std::fs::write(&script, SCRIPT)?;
        let mut child = Command::new(python)
            .arg(&script)
            .arg("--model")
            .arg(model_dir)
            .arg("--threads")
            .arg(threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let requests = child.stdin.take().ok_or("the reference has no stdin")?;
        let replies = child.stdout.take().ok_or("the reference has no stdout")?;
        Ok(Self {
            child,
            requests: Some(requests),
            replies: BufReader::new(replies),
        })
    }

    pub fn info(&mut self) -> Result<Info> {
        self.ask(&json!({"op": "info"}))
    }

    /// The reference's vectors for `texts`, in batches of `batch`.
    pub fn embed(&mut self, texts: &[String], batch: usize) -> Result<Vec<Vec<f32>>> {
        let reply: Vectors = self.ask(&json!({"op": "embed", "texts": texts, "batch": batch}))?;
        Ok(reply.vectors)
    }

    /// Times `encode` over `texts` in calls of `batch` texts.
    pub fn time(&mut self, texts: &[String], batch: usize) -> Result<Pass> {
        self.ask(&json!({"op": "time", "texts": texts, "batch": batch}))
    }

    fn ask<T: DeserializeOwned>(&mut self, request: &Value) -> Result<T> {
        let requests = self.requests.as_mut().ok_or("the reference is stopped")?;
        writeln!(requests, "{request}")?;
        requests.flush()?;
        let mut line = String::new();
        if self.replies.read_line(&mut line)? == 0 {
            return Err("the reference exited (its error is above)".into());
        }
        let reply: Value = serde_json::from_str(&line)?;
        if let Some(error) = reply.get("error") {
            return Err(format!("the reference refused {request}: {error}").into());
        }
        Ok(serde_json::from_value(reply)?)
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        // End of input ends the script's loop.
        drop(self.requests.take());
        let _ = self.child.wait();
    }
}

/// The environment's interpreter, after creating the environment and
/// installing the pinned packages into it when needed.
fn ensure_venv(venv: &Path) -> Result<PathBuf> {
    let python = venv.join("bin").join("python");
    let stamp = venv.join(STAMP);
    if python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(REQUIREMENTS) {
        return Ok(python);
    }
    eprintln!(
        "engram-bench: installing the reference (torch, sentence-transformers) into {} once; \
         PyPI's torch wheel pulls the CUDA libraries, about 4 GB",
        venv.display()
    );
    run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    let requirements = venv.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS)?;
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "-r"])
        .arg(&requirements))?;
    std::fs::write(&stamp, REQUIREMENTS)?;
    Ok(python)
}

fn run(command: &mut Command) -> Result {
    let status = command.status()?;
    if !status.success() {
        return Err(format!("{command:?} failed: {status}").into());
    }
    Ok(())
}
