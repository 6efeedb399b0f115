//! `engram doctor`: whether the agents' hooks and MCP server can reach
//! Engram, checked from the agent's side after `engram setup`. It asks the
//! URLs the entries call for `/healthz` and `/readyz` ([`server`]), reads
//! every agent's settings files for Engram's entries and the binary they
//! run ([`settings`]), and prints the hook log's path with its last lines
//! (the hooks fail silently: that log is where their failures go).
//!
//! Each finding is one line, `ok: …` or `problem: …`, a problem saying what
//! to do; the exit code is 1 when there is a problem. It writes nothing.

pub mod server;
pub mod settings;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::client::hook::{bounded, log};
use crate::client::http::DEFAULT_URL;

/// How many of the hook log's last lines are shown.
const LOG_LINES: usize = 5;
/// How much of the log's end is read for them.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// `engram doctor`'s arguments.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Engram's URL for the entries that name none, as their commands
    /// would call it (default: ENGRAM_URL, else http://127.0.0.1:8080).
    #[arg(long, env = "ENGRAM_URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The hook log to read (default: $XDG_STATE_HOME/engram/hook.log, else
    /// ~/.local/state/engram/hook.log).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// One thing checked: fine, or a problem with what to do about it.
#[derive(Debug)]
pub struct Finding {
    pub problem: bool,
    pub text: String,
}

impl Finding {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            problem: false,
            text: text.into(),
        }
    }

    pub fn problem(text: impl Into<String>) -> Self {
        Self {
            problem: true,
            text: text.into(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.problem { "problem" } else { "ok" };
        write!(f, "{verdict}: {}", self.text)
    }
}

/// Runs the checks and prints them; exits 1 when one found a problem.
pub fn run(args: &DoctorArgs) -> ExitCode {
    let env = |var: &str| std::env::var(var).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let runtime = match crate::client::runtime() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("engram doctor: starting the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let settings = settings::inspect(&cwd, &env);
    let default_url = args.url.clone().unwrap_or_else(|| DEFAULT_URL.to_owned());
    let mut urls: Vec<String> = Vec::new();
    for url in &settings.urls {
        let url = url.clone().unwrap_or_else(|| default_url.clone());
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    if urls.is_empty() {
        urls.push(default_url);
    }
    let mut findings: Vec<Finding> = urls
        .iter()
        .map(|url| runtime.block_on(server::check(url)))
        .collect();
    findings.extend(settings.findings);
    let log_path = args.log_file.clone().or_else(|| log::default_path(env));
    let mut report: String = findings
        .iter()
        .map(|finding| format!("{finding}\n"))
        .collect();
    report.push_str(&log_section(log_path.as_deref()));
    if io::stdout().lock().write_all(report.as_bytes()).is_err() {
        return ExitCode::FAILURE;
    }
    if findings.iter().any(|finding| finding.problem) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The hook log's path and its last lines, when it has any.
fn log_section(path: Option<&Path>) -> String {
    let Some(path) = path else {
        return "hook log: none (no HOME or XDG_STATE_HOME to keep it under)\n".to_owned();
    };
    let (text, cut) = bounded::read_tail(path, LOG_TAIL_BYTES)
        .map_or((String::new(), false), |tail| {
            (String::from_utf8_lossy(&tail.bytes).into_owned(), tail.cut)
        });
    // A tail that was cut starts inside a line.
    let lines: Vec<&str> = text
        .lines()
        .skip(usize::from(cut))
        .filter(|line| !line.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return format!("hook log: {} (no failures logged)\n", path.display());
    }
    let last = &lines[lines.len().saturating_sub(LOG_LINES)..];
    let mut section = format!(
        "hook log: {}; its last lines (the hooks' failures, newest last):\n",
        path.display()
    );
    for line in last {
        section.push_str(&format!("  {line}\n"));
    }
    section
}
