//! Checking against the tree: `engram check`, the real binary, in a real
//! git working tree whose files are rewritten, deleted, moved with
//! `git mv` and stripped of a symbol, records each anchored memory's
//! validity through `POST /memories/check`; retrieval then leaves the
//! gone ones out. The route refuses a bad batch by field, changing
//! nothing, and reports ids of no memory of the repo instead of failing.

use std::path::Path;
use std::process::{Command, Output};

use axum::http::{Method, StatusCode};
use engram::config::ApiKey;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::grants::{grant, send};
use crate::helpers::{RunningApp, TestApp, closed_url, get_json, id, ids, memory, post_json};
use crate::hooks::run;

/// `git <args>` in `dir`, which must succeed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A git working tree named `forge` holding `files`, committed; the
/// commit's id.
pub fn working_tree(root: &Path, files: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(root).unwrap();
    git(root, &["init", "--quiet"]);
    git(root, &["config", "user.name", "Ana"]);
    git(root, &["config", "user.email", "ana@example.com"]);
    for (path, content) in files {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    git(root, &["add", "--all"]);
    git(root, &["commit", "--quiet", "-m", "start"]);
    git(root, &["rev-parse", "HEAD"])
}

/// `engram check <args>` against `url`, from `cwd`.
async fn engram_check(cwd: &Path, url: &str, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("ENGRAM_URL", url)
        .current_dir(cwd)
        .arg("check")
        .args(args);
    run(command, String::new()).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn sha256(content: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(content.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// Writes a memory of `forge` anchored to `anchors`, written at `commit`.
pub async fn anchored(app: &RunningApp, content: &str, anchors: Value, commit: &str) -> String {
    let mut body = memory("repo", "forge", "architectural-decisions", content);
    body["anchors"] = anchors;
    body["commit"] = json!(commit);
    let written = post_json(&app.base_url, "/memories", &body).await;
    id(&written)
}

const POOL: &str = "pub fn connect_pool() -> Pool {\n    Pool::lazy()\n}\n";
const RETRY: &str = "pub fn retry_charge() {}\n";
const BACKOFF: &str = "pub fn backoff(attempt: u32) -> u64 {\n    2u64.pow(attempt)\n}\n";
const CONFIG: &str = "pub fn load_config() {}\npub fn defaults() {}\n";
const README: &str = "# forge\n\nThe payments service.\n";

async fn engram_check_judges_anchors_against_a_git_working_tree(backend: Backend) {
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("forge");
    let commit = working_tree(
        &tree,
        &[
            ("src/pool.rs", POOL),
            ("src/retry.rs", RETRY),
            ("src/backoff.rs", BACKOFF),
            ("src/config.rs", CONFIG),
            ("README.md", README),
        ],
    );
    let app = backend.builder().embedder().serve().await;
    let anchor = |path: &str, content: &str| json!([{"path": path, "hash": sha256(content)}]);
    let rewritten = anchored(
        &app,
        "The pool opens its connections lazily.",
        json!([{"path": "src/pool.rs", "symbol": "connect_pool", "hash": sha256(POOL)}]),
        &commit,
    )
    .await;
    let deleted = anchored(
        &app,
        "Failed charges are retried by retry_charge.",
        anchor("src/retry.rs", RETRY),
        &commit,
    )
    .await;
    let moved = anchored(
        &app,
        "Backoff doubles with each attempt.",
        json!([{"path": "src/backoff.rs", "symbol": "backoff", "hash": sha256(BACKOFF)}]),
        &commit,
    )
    .await;
    let unsymboled = anchored(
        &app,
        "Configuration is read once by load_config.",
        json!([{"path": "src/config.rs", "symbol": "load_config"}, {"path": "README.md"}]),
        &commit,
    )
    .await;
    let untouched = anchored(
        &app,
        "The README names the service.",
        anchor("README.md", README),
        &commit,
    )
    .await;
    let unanchored = id(&post_json(
        &app.base_url,
        "/memories",
        &memory(
            "repo",
            "forge",
            "patterns",
            "Errors are wrapped with context.",
        ),
    )
    .await);

    std::fs::write(
        tree.join("src/pool.rs"),
        "pub fn connect_pool() -> Pool {\n    Pool::eager()\n}\n",
    )
    .unwrap();
    std::fs::remove_file(tree.join("src/retry.rs")).unwrap();
    std::fs::create_dir(tree.join("src/retry")).unwrap();
    git(&tree, &["mv", "src/backoff.rs", "src/retry/backoff.rs"]);
    std::fs::write(tree.join("src/config.rs"), "pub fn defaults() {}\n").unwrap();

    // Pointed at a subdirectory by a relative path, with no --repo: the
    // tree's project, as the hooks find it.
    let output = engram_check(&tree, &app.base_url, &["--dir", "src"]).await;
    let printed = text(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}\n{}",
        text(&output.stderr)
    );
    assert!(
        printed.contains("2 current, 1 changed, 2 gone\n"),
        "{printed}"
    );
    assert!(
        printed.contains("renamed: src/backoff.rs -> src/retry/backoff.rs"),
        "{printed}"
    );

    for (memory, validity) in [
        (&rewritten, "changed"),
        (&deleted, "gone"),
        (&moved, "current"),
        (&unsymboled, "gone"),
        (&untouched, "current"),
    ] {
        let read = get_json(&app.base_url, &format!("/memories/{memory}")).await;
        assert_eq!(read["validity"], validity, "{read:#}");
        assert!(read["checked_at"].is_string(), "{read:#}");
        assert_eq!(
            read["checked_commit"],
            commit.as_str(),
            "the HEAD checked against"
        );
        assert_eq!(read["version"], 1, "no new version: {read:#}");
    }
    let read = get_json(&app.base_url, &format!("/memories/{unanchored}")).await;
    assert_eq!(read["validity"], "unverified", "{read:#}");
    assert!(read.get("checked_at").is_none(), "{read:#}");

    app.wait_indexed().await;
    let result = post_json(
        &app.base_url,
        "/retrieve",
        &json!({"turn_id": "t1", "repo": "forge", "top_k": 10}),
    )
    .await;
    let mut found = ids(&result);
    found.sort();
    let mut expected = vec![rewritten, moved, untouched, unanchored];
    expected.sort();
    assert_eq!(found, expected, "the gone ones are left out: {result:#}");
}

async fn the_check_route_refuses_a_bad_batch_by_field_and_reports_unknown_ids(backend: Backend) {
    let app = backend.spawn_app().await;
    let mine = id(&app
        .create(memory("repo", "forge", "patterns", "Errors are wrapped."))
        .await);
    let theirs = id(&app
        .create(memory("repo", "other", "patterns", "Errors are logged."))
        .await);
    let mut body = memory("repo", "forge", "patterns", "Wrapped errors name the call.");
    body["related"] = json!([{"id": mine, "relationship": "refines"}]);
    let linked = id(&app.create(body).await);
    let result = |id: &str, validity: &str| json!({"id": id, "validity": validity});
    let too_many: Vec<Value> = (0..10_001)
        .map(|_| result(&uuid::Uuid::now_v7().to_string(), "current"))
        .collect();
    for (body, field) in [
        (
            json!({"repo": "forge", "results": [result(&mine, "current"), result(&theirs, "unverified")]}),
            "results[1].validity",
        ),
        (
            json!({"repo": "forge", "results": [result(&mine, "stale")]}),
            "results[0].validity",
        ),
        (
            json!({"repo": "forge", "results": [result("not-an-id", "gone")]}),
            "results[0].id",
        ),
        (
            json!({"repo": "forge", "results": [result(&mine, "gone"), result(&mine, "current")]}),
            "results[1].id",
        ),
        (
            json!({"repo": "forge", "results": [{"id": mine, "validity": "gone", "line": 3}]}),
            "results[0].line",
        ),
        (
            json!({"repo": "forge", "results": [{"id": mine, "validity": "current",
                   "renamed": [{"from": "src/a.rs", "to": "../a.rs"}]}]}),
            "results[0].renamed[0].to",
        ),
        (
            json!({"repo": "forge", "results": [{"id": mine, "validity": "current",
                   "renamed": vec![json!({"from": "a", "to": "b"}); 33]}]}),
            "results[0].renamed",
        ),
        (json!({"repo": "forge", "results": []}), "results"),
        (json!({"repo": "forge", "results": too_many}), "results"),
        (
            json!({"repo": "../forge", "results": [result(&mine, "gone")]}),
            "repo",
        ),
        (
            json!({"repo": "forge", "commit": "main", "results": [result(&mine, "gone")]}),
            "commit",
        ),
    ] {
        app.post("/memories/check", &body)
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
    }
    let read = app.get(&format!("/memories/{mine}")).await.json;
    assert_eq!(read["validity"], "unverified", "nothing changed: {read:#}");

    let nobody = uuid::Uuid::now_v7().to_string();
    let answer = app
        .post(
            "/memories/check",
            &json!({"repo": "forge", "commit": "3f9c2b7e8a1d",
                    "results": [result(&mine, "gone"), result(&nobody, "current"),
                                result(&theirs, "gone")]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(
        answer.json,
        json!({"recorded": 1, "unknown": [nobody, theirs]})
    );
    let read = app.get(&format!("/memories/{mine}")).await.json;
    assert_eq!(read["validity"], "gone");
    assert!(read["checked_at"].is_string(), "{read:#}");
    let flagged = app.get(&format!("/memories/{linked}")).await.json;
    assert_eq!(
        flagged["needs_review"], true,
        "a memory found gone puts its links under review: {flagged:#}"
    );
    let other = app.get(&format!("/memories/{theirs}")).await.json;
    assert_eq!(
        other["validity"], "unverified",
        "another repo's memory is left alone"
    );
}

async fn a_limited_key_checks_only_its_repos(backend: Backend) {
    const ROOT: &str = "root-key";
    const LIMITED: &str = "forge-key";
    let app = backend
        .builder()
        .config(|config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![grant(LIMITED, &["forge"], &[])];
        })
        .spawn()
        .await;
    let body = memory("repo", "secret", "patterns", "Deploys need approval.");
    let theirs = send(&app, Method::POST, "/memories", Some(body), ROOT).await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{}", theirs.text);
    let theirs = id(&theirs.json);
    let results = json!([{"id": theirs, "validity": "gone"}]);
    send(
        &app,
        Method::POST,
        "/memories/check",
        Some(json!({"repo": "secret", "results": results})),
        LIMITED,
    )
    .await
    .assert_problem(StatusCode::FORBIDDEN, None);
    let answer = send(
        &app,
        Method::POST,
        "/memories/check",
        Some(json!({"repo": "forge", "results": results})),
        LIMITED,
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.json, json!({"recorded": 0, "unknown": [theirs]}));
    let read = send(
        &app,
        Method::GET,
        &format!("/memories/{theirs}"),
        None,
        ROOT,
    )
    .await;
    assert_eq!(read.json["validity"], "unverified");
}

async fn an_anchor_follows_its_renamed_file_so_a_later_check_still_finds_it(backend: Backend) {
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("forge");
    let commit = working_tree(&tree, &[("src/backoff.rs", BACKOFF), ("README.md", README)]);
    let app = backend.builder().embedder().serve().await;
    let moved = anchored(
        &app,
        "Backoff doubles with each attempt.",
        json!([{"path": "src/backoff.rs", "symbol": "backoff", "hash": sha256(BACKOFF)},
               {"path": "README.md"}]),
        &commit,
    )
    .await;
    git(&tree, &["mv", "src/backoff.rs", "src/retry.rs"]);

    let output = engram_check(&tree, &app.base_url, &[]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let read = get_json(&app.base_url, &format!("/memories/{moved}")).await;
    assert_eq!(read["validity"], "current", "{read:#}");
    assert_eq!(
        read["anchors"],
        json!([{"path": "src/retry.rs", "symbol": "backoff", "hash": sha256(BACKOFF)},
               {"path": "README.md"}]),
        "the anchor names the new path, its symbol and hash as written: {read:#}"
    );
    assert_eq!(read["version"], 1, "the same version: {read:#}");
    assert!(
        !backend
            .holding(&app.data_dir, "src/retry.rs")
            .await
            .is_empty(),
        "the new path is stored durably"
    );

    // Rewritten past what git's rename detection recognises: found at the
    // path the anchor now names, changed rather than gone.
    std::fs::write(
        tree.join("src/retry.rs"),
        "pub fn backoff(attempt: u32) -> u64 {\n    let capped = attempt.min(10);\n    \
         100 * u64::from(capped) + jitter()\n}\n\nfn jitter() -> u64 {\n    7\n}\n",
    )
    .unwrap();
    let output = engram_check(&tree, &app.base_url, &[]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("0 current, 1 changed, 0 gone"),
        "{}",
        text(&output.stdout)
    );
    let read = get_json(&app.base_url, &format!("/memories/{moved}")).await;
    assert_eq!(read["validity"], "changed", "{read:#}");
}

over_both_backends!(
    engram_check_judges_anchors_against_a_git_working_tree,
    an_anchor_follows_its_renamed_file_so_a_later_check_still_finds_it,
    the_check_route_refuses_a_bad_batch_by_field_and_reports_unknown_ids,
    a_limited_key_checks_only_its_repos,
);

#[tokio::test]
async fn engram_check_fails_clearly_outside_a_working_tree_or_without_a_server() {
    let temp = tempfile::tempdir().unwrap();
    let plain = temp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let app = TestApp::builder().serve().await;
    let outside = engram_check(&plain, &app.base_url, &[]).await;
    assert_eq!(outside.status.code(), Some(1));
    let said = text(&outside.stderr);
    assert!(
        said.contains("engram: check failed") && said.contains("git rev-parse"),
        "{said}"
    );

    let tree = temp.path().join("forge");
    working_tree(&tree, &[("README.md", README)]);
    let unreachable = engram_check(&tree, &closed_url(), &["--repo", "forge"]).await;
    assert_eq!(unreachable.status.code(), Some(1));
    let said = text(&unreachable.stderr);
    assert!(
        said.contains("engram: check failed") && said.contains("/memories"),
        "{said}"
    );
}
