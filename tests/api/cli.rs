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

#[test]
fn the_config_file_may_be_named_before_or_after_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("engram.yaml");
    std::fs::write(&file, "defaults:\n  repo: from-the-file\n").unwrap();
    let file = file.to_str().unwrap();
    for args in [["--config", file, "config"], ["config", "--config", file]] {
        let output = engram().args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        let yaml = String::from_utf8(output.stdout).unwrap();
        assert!(yaml.contains("repo: from-the-file"), "{args:?}: {yaml}");
    }

    // As docs/configuration.md shows it: the file is read (its bad key
    // stops start-up, named), not refused by the command line.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "limits:\n  max_body_bites: 10\n").unwrap();
    let bad = bad.to_str().unwrap();
    for args in [["--config", bad, "serve"], ["serve", "--config", bad]] {
        let output = engram().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.contains("max_body_bites"), "{args:?}: {stderr}");
    }

    // `serve`'s flags belong to it: with another command they are refused.
    let output = engram()
        .args(["--listen", "127.0.0.1:9", "config"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("`serve`'s flags"), "{stderr}");
}

#[test]
fn import_and_export_never_print_the_password_in_engram_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("http://ana:s3cret@127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let agents_md = dir.path().join("AGENTS.md");
    std::fs::write(&agents_md, "- Run cargo fmt before every commit.\n").unwrap();
    let agents_md = agents_md.to_str().unwrap();
    let runs: [&[&str]; 5] = [
        &["export"],
        &["import", "agents-md", agents_md, "--repo", "forge"],
        &["export", "--help"],
        &["import", "jsonl", "--help"],
        &["hook", "--help"],
    ];
    for args in runs {
        let output = engram()
            .env("ENGRAM_URL", &url)
            .args(args)
            .output()
            .unwrap();
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!printed.contains("s3cret"), "{args:?}: {printed}");
        if !args.contains(&"--help") {
            assert!(!output.status.success(), "{args:?}: nothing answers");
            assert!(printed.contains("***@127.0.0.1"), "{args:?}: {printed}");
        }
    }
}

/// What `engram serve` with `args` logs until it serves (or exits).
fn start_up_log(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> String {
    use std::io::BufRead;
    let mut child = engram()
        .env_clear()
        .env("HOME", dir)
        .envs(env.iter().copied())
        .args(args)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("data"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line.contains("engram is serving") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    log
}

#[test]
fn start_up_warns_when_the_llm_key_variable_is_unset() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("engram.yaml");
    std::fs::write(
        &file,
        "llm:\n  base_url: http://127.0.0.1:9/v1\n  api_key_env: FORGE_LLM_KEY\n",
    )
    .unwrap();
    let config = ["--config", file.to_str().unwrap()];

    let log = start_up_log(dir.path(), &config, &[]);
    assert!(log.contains("engram is serving"), "it still starts: {log}");
    let warning = log
        .lines()
        .find(|line| line.contains("llm.api_key_env"))
        .unwrap_or_else(|| panic!("no warning: {log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("FORGE_LLM_KEY"), "{warning}");

    let log = start_up_log(dir.path(), &config, &[("FORGE_LLM_KEY", "sk-test")]);
    assert!(log.contains("engram is serving"), "{log}");
    assert!(!log.contains("api_key_env"), "{log}");
}

#[tokio::test]
async fn a_dry_run_reads_one_projects_folder_and_says_the_real_run_needs_a_classifier() {
    // No `llm`: capture is agent-driven, so a backfill would be refused.
    let app = crate::helpers::TestApp::builder().serve().await;
    let project = crate::hooks::Project::new("claude-code/transcript.jsonl");
    let flat = project.home().join("forge-sessions");
    std::fs::create_dir_all(&flat).unwrap();
    std::fs::copy(
        project.home().join("session.jsonl"),
        flat.join("5b0c1f9e-8d7a-4c1b-9f3e-2a6d4e8b7c10.jsonl"),
    )
    .unwrap();
    let empty = project.home().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let dry_run = |dir: &std::path::Path| {
        let mut command = crate::hooks::engram(&project);
        command
            .args(["import", "claude-code", "--dry-run", "--url", &app.base_url])
            .arg("--transcripts")
            .arg(dir);
        crate::hooks::run(command, String::new())
    };

    let output = dry_run(&flat).await;
    assert!(output.status.success(), "{output:?}");
    let said = String::from_utf8(output.stdout).unwrap();
    assert!(said.contains("dry run: 1 sessions"), "{said}");
    assert!(
        said.contains("The real run needs a classifier, and this Engram has none"),
        "{said}"
    );

    let output = dry_run(&empty).await;
    let said = String::from_utf8(output.stdout).unwrap();
    assert!(said.contains("dry run: 0 sessions"), "{said}");
    assert!(
        said.contains(&format!(
            "no claude-code transcripts found in {}",
            empty.display()
        )),
        "{said}"
    );
    assert!(
        said.contains("<project folder>/<session id>.jsonl"),
        "says the layout: {said}"
    );
    app.stop().await;
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
