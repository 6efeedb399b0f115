//! The `engram` binary on its own, as a user runs it: a copy in an empty
//! directory (the model inside it), and the command line's address and data
//! directory winning over the environment.
//! Files only: the command line, not the store, is under test.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::helpers::{get_json, post_json, wait_ready, wait_until_async};

/// A served `engram` child process, stopped when dropped.
pub struct Served {
    child: Child,
    pub base_url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Asks the process to stop, as a service manager does (SIGTERM).
    pub fn terminate(&self) {
        self.signal(rustix::process::Signal::TERM);
    }

    /// Sends the process `signal`.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// How the process ended, once it has.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

pub fn free_address() -> String {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

/// Starts `binary` with `args` in `dir`, with nothing in its environment
/// but `env`, and waits until it is ready on `listen`.
pub async fn serve(
    binary: &Path,
    dir: &Path,
    listen: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Served {
    let served = launch(binary, dir, listen, args, env);
    let base = served.base_url.clone();
    wait_ready(&base).await;
    served
}

/// [`serve`], without waiting for anything.
pub fn launch(
    binary: &Path,
    dir: &Path,
    listen: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Served {
    let child = Command::new(binary)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .envs(env.iter().copied())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Served {
        child,
        base_url: format!("http://{listen}"),
    }
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_engram"))
}

#[test]
fn the_binary_names_no_file_of_the_build_directory() {
    // `<target>/<profile>/engram`: the model cache of the build sits in
    // `<target>/engram-model`, and a binary that kept its path would stop
    // working once the build directory is gone.
    let target = binary().parent().unwrap().parent().unwrap().to_owned();
    let cache = target.join("engram-model").display().to_string();
    let bytes = std::fs::read(binary()).unwrap();
    assert!(
        !bytes
            .windows(cache.len())
            .any(|window| window == cache.as_bytes()),
        "the binary holds the path {cache}"
    );
}

#[tokio::test]
async fn a_copy_in_an_empty_directory_serves_a_retrieval_by_meaning() {
    let home = tempfile::tempdir().unwrap();
    let copy = home.path().join("engram");
    std::fs::copy(binary(), &copy).unwrap();
    let listen = free_address();
    let served = serve(
        &copy,
        home.path(),
        &listen,
        &[],
        &[("ENGRAM_LISTEN", &listen)],
    )
    .await;

    for content in [
        "Ana prefers tabs over spaces for indentation.",
        "The team deploys on Fridays after the release review.",
        "Use PostgreSQL for the billing service.",
    ] {
        post_json(
            &served.base_url,
            "/memories",
            &json!({"scope": "repo", "repo": "forge", "category": "project-conventions", "content": content}),
        )
        .await;
    }
    let base = served.base_url.clone();
    wait_until_async("the memories are indexed", async || {
        get_json(&base, "/stats").await["index"]["pending"] == 0
    })
    .await;
    let answer = post_json(
        &served.base_url,
        "/retrieve",
        &json!({"turn_id": "t-1", "repo": "forge", "query": "which database should payments run on?"}),
    )
    .await;
    assert_eq!(answer["degraded"], Value::Null, "{answer}");
    assert_eq!(
        answer["memories"][0]["content"], "Use PostgreSQL for the billing service.",
        "{answer}"
    );
    assert!(
        home.path().join("data/repos/forge").is_dir(),
        "data in ./data"
    );
}

#[tokio::test]
async fn listen_and_data_dir_flags_win_over_the_environment_and_the_file() {
    let home = tempfile::tempdir().unwrap();
    let (from_file, from_env, from_flag) = (free_address(), free_address(), free_address());
    let config = home.path().join("engram.yaml");
    std::fs::write(
        &config,
        format!("listen: {from_file}\ndata_dir: ./file-data\n"),
    )
    .unwrap();
    let served = serve(
        &binary(),
        home.path(),
        &from_flag,
        &["serve", "--listen", &from_flag, "--data-dir", "flag-data"],
        &[
            ("ENGRAM_CONFIG", config.to_str().unwrap()),
            ("ENGRAM_LISTEN", &from_env),
            ("ENGRAM_DATA_DIR", "env-data"),
        ],
    )
    .await;
    post_json(
        &served.base_url,
        "/memories",
        &json!({"scope": "user", "user": "ana", "category": "user-facts", "content": "Ana lives in Lisbon."}),
    )
    .await;
    assert!(home.path().join("flag-data/users/ana").is_dir());
    for unused in ["env-data", "file-data"] {
        assert!(!home.path().join(unused).exists(), "{unused} was used");
    }
}

#[tokio::test]
async fn listen_is_taken_without_the_serve_command_too() {
    let home = tempfile::tempdir().unwrap();
    let listen = free_address();
    serve(
        &binary(),
        home.path(),
        &listen,
        &["--listen", &listen, "--data-dir", "data"],
        &[],
    )
    .await;
    assert!(home.path().join("data").is_dir());
}
