//! The binary: `--help`, and configuration errors that name the key.
//! Nothing here depends on the storage backend.

use std::process::Command;

fn engram() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram"));
    command.env_remove("ENGRAM_CONFIG").env_remove("RUST_LOG");
    command
}

#[test]
fn help_documents_the_flags_and_commands() {
    let output = engram().arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success());
    for expected in ["--config", "ENGRAM_CONFIG", "serve", "openapi", "config"] {
        assert!(help.contains(expected), "{expected} missing from:\n{help}");
    }
}

#[test]
fn a_bad_key_stops_start_up_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("engram.yaml");
    std::fs::write(&file, "limits:\n  max_body_bites: 10\n").unwrap();
    let output = engram().arg("--config").arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("max_body_bites"), "{stderr}");

    let output = engram()
        .env("ENGRAM_LIMITS__REQUEST_TIMEOUT_MS", "soon")
        .arg("config")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("limits.request_timeout_ms"), "{stderr}");
}

#[test]
fn config_prints_the_effective_configuration() {
    let output = engram()
        .env("ENGRAM_DEFAULTS__REPO", "forge")
        .arg("config")
        .output()
        .unwrap();
    assert!(output.status.success());
    let yaml = String::from_utf8(output.stdout).unwrap();
    assert!(yaml.contains("listen: 127.0.0.1:8080"), "{yaml}");
    assert!(yaml.contains("repo: forge"), "{yaml}");
}

#[tokio::test]
async fn healthcheck_succeeds_only_against_a_live_server() {
    let app = crate::helpers::TestApp::builder().serve().await;
    let listen = app.base_url.trim_start_matches("http://").to_owned();
    let probe = |listen: String| {
        tokio::task::spawn_blocking(move || {
            engram()
                .env("ENGRAM_LISTEN", listen)
                .arg("healthcheck")
                .status()
                .unwrap()
        })
    };
    assert!(probe(listen.clone()).await.unwrap().success());
    app.stop().await;
    assert!(!probe(listen).await.unwrap().success());
}
