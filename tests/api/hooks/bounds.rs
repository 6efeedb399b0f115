//! `engram hook` against what an agent's machine may hold instead of what
//! it should: a transcript that is a FIFO or a device, a `.git` in a parent
//! directory that is a FIFO or a link to `/dev/zero`, no `USER` or
//! `LOGNAME`, and credentials in `ENGRAM_URL`. The hook must stay inside
//! its budget, say why in its log, and keep the log private.
//! Nothing here depends on the storage backend.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::RunningApp;
use crate::hooks::{Project, engram, printed_context, remember, run, start_engram, write_and_wait};

fn hook_command(project: &Project, url: &str, event: &str) -> Command {
    let mut command = engram(project);
    command
        .args(["hook", "claude-code", event, "--log-file"])
        .arg(&project.log)
        .env("ENGRAM_URL", url);
    command
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

/// `payload` with `field` set to `value`.
fn with(payload: &str, field: &str, value: &Path) -> String {
    let mut payload: Value = serde_json::from_str(payload).unwrap();
    payload[field] = json!(value);
    payload.to_string()
}

#[tokio::test]
async fn a_transcript_that_is_a_fifo_or_a_device_is_refused_not_read() {
    let url = crate::helpers::closed_url();
    let project = Project::new("claude-code/transcript.jsonl");
    let fifo = project.home().join("fifo.jsonl");
    mkfifo(&fifo);
    let payload = project.payload("claude-code/user-prompt-submit.json");

    // A FIFO with no writer blocks a plain open forever; /dev/urandom
    // never ends.
    for transcript in [fifo.as_path(), Path::new("/dev/urandom")] {
        let payload = with(&payload, "transcript_path", transcript);
        let command = hook_command(&project, &url, "user-prompt-submit");
        let output = run(command, payload).await;
        assert!(output.status.success(), "{output:?}");
        assert!(output.stdout.is_empty(), "{output:?}");
    }
    let lines = project.log_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert!(line.contains("not a regular file"), "{lines:?}");
    }
}

#[tokio::test]
async fn a_git_fifo_or_device_in_a_parent_directory_is_passed_over() {
    let app = start_engram().await;
    let _upstream = &app.upstream;
    remember(
        &app,
        "Decisions for working on forge are recorded in docs/adr.",
    )
    .await;
    let project = Project::new("claude-code/transcript.jsonl");
    std::fs::remove_file(project.home().join("session.jsonl")).unwrap();
    let payload = project.payload("claude-code/session-start.json");

    let elsewhere = tempfile::tempdir().unwrap();
    let fifo_parent = elsewhere.path().join("fifo");
    std::fs::create_dir_all(fifo_parent.join("forge")).unwrap();
    mkfifo(&fifo_parent.join(".git"));
    let zero_parent = elsewhere.path().join("zero");
    std::fs::create_dir_all(zero_parent.join("forge")).unwrap();
    symlink("/dev/zero", zero_parent.join(".git")).unwrap();

    for parent in [&fifo_parent, &zero_parent] {
        let payload = with(&payload, "cwd", &parent.join("forge"));
        let command = hook_command(&project, &app.base_url, "session-start");
        let output = run(command, payload).await;
        // Not a checkout: the project is the directory's own name.
        let injection = printed_context(&output, "SessionStart");
        assert!(injection.contains("docs/adr"), "{injection}");
    }
    assert_eq!(project.log_lines(), Vec::<String>::new());
    app.stop().await;
}

/// The OS user's name as `id` reads it from the password database.
fn login_name() -> String {
    let output = Command::new("id").arg("-un").output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn without_user_or_logname_the_user_is_the_uids_login_name() {
    let app = start_engram().await;
    let _upstream = &app.upstream;
    let user = login_name();
    remember_for_user(
        &app,
        &user,
        "The user reviews diffs in a side-by-side view.",
    )
    .await;
    let project = Project::new("claude-code/transcript.jsonl");
    std::fs::remove_file(project.home().join("session.jsonl")).unwrap();
    let payload = project.payload("claude-code/session-start.json");

    let mut command = hook_command(&project, &app.base_url, "session-start");
    command.env_remove("USER").env_remove("LOGNAME");
    let output = run(command, payload).await;
    let injection = printed_context(&output, "SessionStart");
    assert!(injection.contains("side-by-side"), "{user}: {injection}");
    app.stop().await;
}

/// Writes a user-scoped memory for `user` and waits until it is indexed.
async fn remember_for_user(app: &RunningApp, user: &str, content: &str) {
    let body = json!({"scope": "user", "user": user, "category": "user-facts", "content": content});
    write_and_wait(app, &body).await;
}

#[tokio::test]
async fn the_log_is_private_and_never_holds_url_credentials() {
    let url = crate::helpers::closed_url().replace("http://", "http://ana:s3cret@");
    let project = Project::new("claude-code/transcript.jsonl");
    let payload = project.payload("claude-code/stop.json");
    let output = run(hook_command(&project, &url, "stop"), payload).await;
    assert!(output.status.success(), "{output:?}");

    let lines = project.log_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(!lines[0].contains("s3cret"), "{lines:?}");
    assert!(lines[0].contains("http://***@127.0.0.1:"), "{lines:?}");
    let mode = std::fs::metadata(&project.log)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}
