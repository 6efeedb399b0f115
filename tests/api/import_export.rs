//! `engram export` and `engram import`, end to end: the real binary
//! against a real Engram on a port whose only fakes are the model
//! upstreams. Whole memories make a lossless round trip (every version,
//! chain, edge, timestamp and use count) through JSON Lines and through
//! memory files, into an empty store of either backend (files, or
//! PostgreSQL: across backends), and again into the same store with
//! nothing changed; `POST /memories/import` refuses a bad batch naming the
//! field and writing nothing; instructions files (anchored to themselves
//! in a git working tree) and a mem0 export become memories with no
//! model, idempotently. What a limited key may import is
//! in `grants`; the bounds on imported numbers in `bounds`.

mod bounds;
mod grants;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{RunningApp, TestApp, contents, get_json, post_json};
use crate::hooks::{Project, engram, run};
use crate::truth::check::{sha256, working_tree};

/// Engram with the fake embedder and no `llm`.
pub async fn agent_driven() -> RunningApp {
    TestApp::builder().embedder().serve().await
}

/// `engram <args>` against `app`, as the user `ana` of `project`.
pub async fn engram_against(project: &Project, app: &RunningApp, args: &[&str]) -> Output {
    let mut command: Command = engram(project);
    command.args(args).env("ENGRAM_URL", &app.base_url);
    run(command, String::new()).await
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts `output` is a success and returns its stdout.
pub fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Every version of every memory, with its chain, edges and use count,
/// by id: what a round trip must keep.
async fn everything(app: &RunningApp) -> Vec<Value> {
    let listed = get_json(&app.base_url, "/memories?all_versions=true&limit=1000").await;
    let mut details = Vec::new();
    for memory in listed["memories"].as_array().unwrap() {
        let id = memory["id"].as_str().unwrap();
        details.push(get_json(&app.base_url, &format!("/memories/{id}")).await);
    }
    details.sort_by_key(|detail| detail["id"].as_str().unwrap().to_owned());
    details
}

/// How many `GET`s of `route` the server has answered, by its metrics.
async fn gets(app: &RunningApp, route: &str) -> f64 {
    let metrics = reqwest::get(format!("{}/metrics", app.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("engram_http_requests_total{{route=\"{route}\",method=\"GET\",");
    metrics
        .lines()
        .filter(|line| line.starts_with(&prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn create(app: &RunningApp, body: Value) -> Value {
    let created = post_json(&app.base_url, "/memories", &body).await;
    assert!(created["id"].is_string(), "{created}");
    created
}

/// A store with a chain of three versions, edges between a user's and a
/// repo's memories, a link to a deleted memory, importance, a session id,
/// and use counts.
async fn a_store_worth_exporting(app: &RunningApp) {
    let convention = create(
        app,
        json!({"scope": "repo", "repo": "forge", "user": "ana",
        "category": "project-conventions", "content": "Releases are tagged vX.Y.Z.",
        "importance": 0.9, "session_id": "s-1"}),
    )
    .await;
    let v2 = create(
        app,
        json!({"scope": "repo", "repo": "forge", "user": "ana",
        "category": "project-conventions", "content": "Releases are tagged vX.Y.Z from main.",
        "supersedes": convention["id"]}),
    )
    .await;
    create(
        app,
        json!({"scope": "repo", "repo": "forge", "user": "ana",
        "category": "project-conventions", "content": "Releases are tagged vX.Y.Z from main only.",
        "supersedes": v2["id"]}),
    )
    .await;
    let preference = create(
        app,
        json!({"scope": "user", "repo": "forge", "user": "ana",
        "category": "coding-preferences", "content": "Ana prefers errors.As over type assertions.",
        "observed_at": "2025-06-01T08:00:00Z"}),
    )
    .await;
    create(app, json!({"scope": "repo", "repo": "forge", "user": "ana",
        "category": "architectural-decisions",
        "content": "The queue is a log on disk, not SQLite, because of Ana's preference for plain files.",
        "related": [{"id": preference["id"], "relationship": "depends-on"}]})).await;
    // A memory deleted since leaves a link to it behind, which an export
    // keeps as the file does.
    let gone = create(
        app,
        json!({"scope": "user", "repo": "forge", "user": "ana",
        "category": "user-facts", "content": "Ana works from Lisbon."}),
    )
    .await;
    create(
        app,
        json!({"scope": "user", "repo": "forge", "user": "ana",
        "category": "user-facts", "content": "Ana's team meets on Mondays.",
        "related": [{"id": gone["id"], "relationship": "related"}]}),
    )
    .await;
    let deleted = reqwest::Client::new()
        .delete(format!(
            "{}/memories/{}",
            app.base_url,
            gone["id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    app.wait_indexed().await;
    // Use counts come from retrievals.
    let retrieved = post_json(
        &app.base_url,
        "/retrieve",
        &json!({"turn_id": "t-1",
        "repo": "forge", "user": "ana", "query": "errors.As type assertions"}),
    )
    .await;
    assert!(
        !retrieved["memories"].as_array().unwrap().is_empty(),
        "{retrieved}"
    );
}

over_both_backends!(
    an_export_from_files_comes_back_whole_through_jsonl_and_markdown_and_twice_changes_nothing
);

/// Exported from a files store, imported into empty stores of `backend`'s
/// kind.
async fn an_export_from_files_comes_back_whole_through_jsonl_and_markdown_and_twice_changes_nothing(
    backend: Backend,
) {
    let source = agent_driven().await;
    a_store_worth_exporting(&source).await;
    let exported = everything(&source).await;
    assert_eq!(exported.len(), 6);
    let left_behind = |m: &&Value| {
        m["related"].as_array().unwrap().len() == 1 && m["edges"]["outgoing"] == json!([])
    };
    assert!(exported.iter().any(|m| left_behind(&m)), "{exported:?}");
    assert!(
        exported
            .iter()
            .any(|m| m["access_count"].as_u64() > Some(0)),
        "{exported:?}"
    );
    let project = Project::new("claude-code/transcript.jsonl");

    let (pages, details) = (
        gets(&source, "/memories").await,
        gets(&source, "/memories/{id}").await,
    );
    let jsonl = succeeded(&engram_against(&project, &source, &["export"]).await);
    assert_eq!(jsonl.lines().count(), 6, "{jsonl}");
    // One page of the listing, which carries the use counts: no request
    // per memory.
    assert_eq!(gets(&source, "/memories").await, pages + 1.0);
    assert_eq!(gets(&source, "/memories/{id}").await, details);
    let jsonl_file = project.home().join("export.jsonl");
    std::fs::write(&jsonl_file, &jsonl).unwrap();
    let markdown_dir = project.home().join("export");
    let markdown_arg = markdown_dir.display().to_string();
    succeeded(
        &engram_against(
            &project,
            &source,
            &["export", "--format", "markdown", "--out", &markdown_arg],
        )
        .await,
    );
    assert_eq!(
        std::fs::read_dir(markdown_dir.join("repos/forge"))
            .unwrap()
            .count(),
        4
    );

    for (format, path) in [
        ("jsonl", jsonl_file.display().to_string()),
        ("markdown", markdown_arg),
    ] {
        let target_backend = backend.another().await;
        let target = target_backend.builder().embedder().serve().await;
        let said = succeeded(&engram_against(&project, &target, &["import", format, &path]).await);
        assert!(
            said.contains("imported 6 memories; 0 existed"),
            "{format}: {said}"
        );
        assert_eq!(everything(&target).await, exported, "{format}");

        let said = succeeded(&engram_against(&project, &target, &["import", format, &path]).await);
        assert!(
            said.contains("imported 0 memories; 6 existed"),
            "{format}: {said}"
        );
        assert_eq!(
            everything(&target).await,
            exported,
            "{format}, imported twice"
        );
        target.stop().await;
    }
    source.stop().await;
}

#[tokio::test]
async fn a_bad_batch_is_refused_naming_the_field_and_nothing_is_written() {
    let app = agent_driven().await;
    let memory = |id: &str, content: &str| {
        json!({"id": id, "version": 1, "scope": "repo",
        "repo": "forge", "category": "patterns", "created_at": "2026-01-02T03:04:05Z",
        "updated_at": "2026-01-02T03:04:05Z", "related": [], "trigger": "manual",
        "content": content})
    };
    let good = memory(
        "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d",
        "Builds run in CI only.",
    );
    let mut fork = memory(
        "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5e",
        "Builds run in CI, always.",
    );
    fork["supersedes"] = good["id"].clone();
    let mut other_fork = fork.clone();
    other_fork["id"] = json!("0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c61");
    let mut other_namespace = fork.clone();
    other_namespace["scope"] = json!("user");
    other_namespace["user"] = json!("ana");
    other_namespace.as_object_mut().unwrap().remove("repo");
    let secret = memory(
        "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5f",
        "The deploy key is AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    );
    let mut user_without_user = memory("0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c60", "Ana likes tea.");
    user_without_user["scope"] = json!("user");
    let client = reqwest::Client::new();
    for (batch, field, status) in [
        (
            json!([good, fork, other_fork]),
            "memories[2].supersedes",
            409,
        ),
        (
            json!([good, other_namespace]),
            "memories[1].supersedes",
            422,
        ),
        (json!([good, secret]), "memories[1].content", 422),
        (json!([good, user_without_user]), "memories[1].user", 422),
        (json!([good, good]), "memories[1].id", 422),
        (json!([]), "memories", 422),
    ] {
        let response = client
            .post(format!("{}/memories/import", app.base_url))
            .json(&json!({"memories": batch}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{field}");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["field"], field, "{problem}");
    }
    let listed = get_json(&app.base_url, "/memories?all_versions=true").await;
    assert_eq!(listed["memories"], json!([]));
    assert!(std::fs::read_dir(app.data_dir.join("repos")).map_or(true, |mut d| d.next().is_none()));

    let answer = post_json(
        &app.base_url,
        "/memories/import",
        &json!({"memories": [good]}),
    )
    .await;
    assert_eq!(answer["imported"], 1, "{answer}");
    let stored = get_json(
        &app.base_url,
        "/memories/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d",
    )
    .await;
    assert_eq!(stored["created_at"], "2026-01-02T03:04:05Z");
    app.stop().await;
}

#[tokio::test]
async fn instructions_files_become_repo_conventions_once() {
    let app = agent_driven().await;
    let project = Project::new("claude-code/transcript.jsonl");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import");
    let files: Vec<String> = ["AGENTS.md", "CLAUDE.md", "cursor-rules/go.mdc"]
        .iter()
        .map(|name| fixtures.join(name).display().to_string())
        .collect();
    let mut args = vec!["import", "agents-md", "--repo", "forge"];
    args.extend(files.iter().map(String::as_str));

    let said = succeeded(&engram_against(&project, &app, &args).await);
    app.wait_indexed().await;
    let listed = get_json(&app.base_url, "/memories?repo=forge&limit=1000").await;
    let contents = contents(&listed);
    assert!(
        said.starts_with(&format!(
            "13 conventions for repo forge: {} stored",
            contents.len()
        )),
        "{said}"
    );
    for expected in [
        "Code style: Use `errors.As` over type assertions when handling errors.",
        "Testing: Run `make test` before every commit; CI runs the same target.",
        "Database migrations live in `db/migrations` and are numbered by date.",
        "forge is the build service for the Forge monorepo, written in Go 1.23.",
    ] {
        assert!(
            contents.contains(&expected),
            "{expected} not in {contents:?}"
        );
    }
    assert!(
        !contents.iter().any(|c| c.contains("go test")
            || c.contains("maintainers")
            || c.contains("globs")
            || c.contains("This file provides guidance")),
        "{contents:?}"
    );
    assert!(
        listed["memories"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["category"] == "project-conventions")
    );

    let said = succeeded(&engram_against(&project, &app, &args).await);
    assert!(
        said.contains(": 0 stored, 13 skipped as duplicates, 0 refused"),
        "{said}"
    );
    let again = get_json(&app.base_url, "/memories?repo=forge&limit=1000").await;
    assert_eq!(again["memories"], listed["memories"]);
    app.stop().await;
}

#[tokio::test]
async fn conventions_are_anchored_to_the_instructions_file_in_its_working_tree() {
    let app = agent_driven().await;
    let project = Project::new("claude-code/transcript.jsonl");
    let agents_md = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/AGENTS.md"),
    )
    .unwrap();
    let tree = project.home().join("checkout");
    let commit = working_tree(&tree, &[("docs/AGENTS.md", &agents_md)]);
    let file = tree.join("docs/AGENTS.md").display().to_string();

    let args = ["import", "agents-md", "--repo", "forge", &file];
    succeeded(&engram_against(&project, &app, &args).await);
    let listed = get_json(&app.base_url, "/memories?repo=forge&limit=1000").await;
    let memories = listed["memories"].as_array().unwrap();
    assert!(memories.len() > 3, "{listed:#}");
    for memory in memories {
        assert_eq!(
            memory["anchors"],
            json!([{"path": "docs/AGENTS.md", "hash": sha256(&agents_md)}]),
            "{memory:#}"
        );
        assert_eq!(memory["commit"], commit.as_str(), "{memory:#}");
    }
    app.stop().await;
}

#[tokio::test]
async fn mem0_memories_become_user_and_repo_memories_once() {
    let app = agent_driven().await;
    let project = Project::new("claude-code/transcript.jsonl");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/mem0.json");
    let file = file.display().to_string();
    let args = ["import", "mem0", &file, "--repo-from", "agent"];

    let output = engram_against(&project, &app, &args).await;
    let said = succeeded(&output);
    assert!(
        said.contains("4 mem0 memories: 3 imported, 0 existed already, 1 refused"),
        "{said}"
    );
    assert!(
        text(&output.stderr).contains("ffffffff-0000-4000-8000-000000000000"),
        "{output:?}"
    );
    let alice = get_json(&app.base_url, "/memories?user=alice").await;
    let alice = alice["memories"].as_array().unwrap();
    assert_eq!(alice.len(), 2, "{alice:?}");
    let nuts = alice
        .iter()
        .find(|m| m["content"] == "Is allergic to nuts")
        .unwrap();
    assert_eq!(nuts["category"], "user-facts");
    assert_eq!(nuts["created_at"], "2024-07-21T16:00:00Z");
    assert_eq!(nuts["updated_at"], "2024-07-22T17:30:00Z");
    assert_eq!(nuts["session_id"], "trip-planning-1");
    let forge = get_json(&app.base_url, "/memories?repo=forge").await;
    assert_eq!(forge["memories"][0]["scope"], "repo");
    assert_eq!(forge["memories"][0]["category"], "project-conventions");

    let said = succeeded(&engram_against(&project, &app, &args).await);
    assert!(said.contains("0 imported, 3 existed already"), "{said}");
    app.stop().await;
}
