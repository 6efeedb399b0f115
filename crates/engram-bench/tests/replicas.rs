//! The replicas workload at a tiny size, so that it cannot rot: the bench
//! binary run as a user runs it, over a throwaway PostgreSQL and real
//! `engram` processes, must print every figure it promises. Skipped,
//! saying so, where PostgreSQL is not installed (a failure under
//! `CI=true`).
//!
//! It runs the `engram` binary beside the bench's, which `cargo test` at
//! the workspace root builds; when it is absent (`cargo test -p
//! engram-bench` alone), it is built first.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[test]
fn the_replicas_workload_reports_every_measurement_at_a_tiny_size() {
    if pg_throwaway::binaries_or_skip().is_none() {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_engram-bench"))
        .args([
            "--json",
            "replicas",
            "--corpus",
            "200",
            "--start-memories",
            "300",
        ])
        .args(["--rounds", "5", "--requests", "10", "--turns", "40"])
        .arg("--engram")
        .arg(engram_binary())
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the workload failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let counts = |workload: &str| -> Vec<(String, u64)> {
        rows.iter()
            .filter(|row| row["workload"] == workload)
            .map(|row| {
                (
                    row["detail"].as_str().unwrap().to_owned(),
                    row["count"].as_u64().unwrap(),
                )
            })
            .collect()
    };

    let one_client = counts("replicas: retrieve (query), one client");
    assert_eq!(
        one_client,
        [
            ("files, 200 memories".to_owned(), 10),
            ("postgres, 200 memories".to_owned(), 10)
        ],
        "{report}"
    );
    for replicas in [1, 2] {
        let workload = format!("replicas: retrieve (query), 32 clients over {replicas} replica(s)");
        assert_eq!(counts(&workload).len(), 1, "{workload}: {report}");
        assert_eq!(counts(&workload)[0].1, 40, "{report}");
    }
    assert_eq!(
        counts("replicas: 201 on A → found by a retrieval on B")[0].1,
        5,
        "{report}"
    );
    let turns = counts("replicas: POST /turns, 32 clients");
    assert_eq!(turns.len(), 2, "{report}");
    assert!(turns[0].0.starts_with("files") && turns[1].0.starts_with("postgres"));
    assert!(turns.iter().all(|(_, count)| *count == 40), "{report}");
    for stage in [
        "replicas: start → /readyz 200",
        "replicas: start → every memory indexed",
    ] {
        let details: Vec<String> = counts(stage)
            .into_iter()
            .map(|(detail, _)| detail)
            .collect();
        assert_eq!(
            details,
            [
                "300 memories, cold embedding cache, fake embedder",
                "300 memories, warm embedding cache, fake embedder"
            ],
            "{report}"
        );
    }
}

/// `engram` beside the bench's binary, built first if it is not there.
fn engram_binary() -> PathBuf {
    let bench = Path::new(env!("CARGO_BIN_EXE_engram-bench"));
    let engram = bench.with_file_name("engram");
    if !engram.is_file() {
        let release = bench.parent().and_then(Path::file_name) == Some("release".as_ref());
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "-p", "engram", "--bin", "engram"]);
        if release {
            build.arg("--release");
        }
        assert!(build.status().unwrap().success(), "building engram failed");
    }
    engram
}
