//! Replicas over one PostgreSQL database, each a real `engram` process:
//! a change made on one reaches the other's listings, reads and
//! retrievals by the change log, a memory acknowledged by a replica killed
//! right after is kept, a replica started late starts from the database, a cached answer is not served once another replica changed
//! its namespace, replicas reconnect after the database restarts, a
//! replica cut off past the pruned change log takes in the snapshot, and
//! a database migrated past this binary stops start-up.
//! Around it, a module each: database faults as the API answers them
//! (`faults`), a database that stops answering (`hung`) and operating
//! replicas (`ops`).

mod faults;
mod hung;
pub mod ops;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, binary, free_address, launch};
use crate::helpers::{get_json, ids, post_json, wait_ready, wait_until, wait_until_async};
use crate::pg_cluster::{self, TestDatabase};

/// A replica: an `engram` process over `database`, with a data directory
/// of its own (its capture queue and caches).
pub struct Replica {
    served: Served,
    _data: TempDir,
}

impl Replica {
    pub async fn start(database: &TestDatabase) -> Self {
        Self::start_with(database, "{}").await
    }

    /// A replica with `yaml` as its configuration file, once it is ready.
    pub async fn start_with(database: &TestDatabase, yaml: &str) -> Self {
        let replica = Self::start_serving(database, yaml).await;
        wait_ready(replica.url()).await;
        replica
    }

    /// A replica with `yaml` as its configuration file, once it answers
    /// `/healthz`, ready or not.
    pub async fn start_serving(database: &TestDatabase, yaml: &str) -> Self {
        let data = tempfile::tempdir().unwrap();
        let listen = free_address();
        let data_dir = data.path().join("data");
        let config = data.path().join("engram.yaml");
        std::fs::write(&config, yaml).unwrap();
        let served = launch(
            &binary(),
            data.path(),
            &listen,
            &[],
            &[
                ("ENGRAM_CONFIG", config.to_str().unwrap()),
                ("ENGRAM_LISTEN", &listen),
                ("ENGRAM_DATA_DIR", data_dir.to_str().unwrap()),
                ("ENGRAM_STORE__BACKEND", "postgres"),
                ("DATABASE_URL", &database.url),
            ],
        );
        let healthz = format!("{}/healthz", served.base_url);
        wait_until_async("the replica serves", async || {
            reqwest::get(&healthz)
                .await
                .is_ok_and(|response| response.status() == 200)
        })
        .await;
        Self {
            served,
            _data: data,
        }
    }

    pub fn url(&self) -> &str {
        &self.served.base_url
    }

    /// Stops the replica's process where it stands (SIGSTOP), or lets it
    /// go on (SIGCONT): a replica cut off from everything meanwhile.
    pub fn pause(&self, paused: bool) {
        use rustix::process::Signal;
        self.served
            .signal(if paused { Signal::STOP } else { Signal::CONT });
    }

    /// Its `/metrics`, as text.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.url()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Stops the replica gracefully (SIGTERM) and waits until it has
    /// exited, which it must do successfully.
    pub async fn stop(&mut self) {
        self.served.terminate();
        let mut status = None;
        wait_until("the replica stops", || {
            status = self.served.exit_status();
            status.is_some()
        })
        .await;
        assert!(status.is_some_and(|status| status.success()), "{status:?}");
    }

    pub async fn write(&self, repo: &str, content: &str) -> String {
        let created = post_json(
            self.url(),
            "/memories",
            &json!({"scope": "repo", "repo": repo, "category": "project-conventions", "content": content}),
        )
        .await;
        created["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}"))
            .to_owned()
    }

    /// [`Self::write`], or `None` when it is refused (the database is
    /// down).
    pub async fn try_write(&self, repo: &str, content: &str) -> Option<String> {
        let response = reqwest::Client::new()
            .post(format!("{}/memories", self.url()))
            .json(
                &json!({"scope": "repo", "repo": repo, "category": "patterns", "content": content}),
            )
            .send()
            .await
            .unwrap();
        if response.status() != 201 {
            return None;
        }
        let created: Value = response.json().await.unwrap();
        Some(created["id"].as_str().unwrap().to_owned())
    }

    async fn forget(&self, id: &str) -> u16 {
        reqwest::Client::new()
            .delete(format!("{}/memories/{id}", self.url()))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    pub async fn status_of(&self, id: &str) -> u16 {
        reqwest::get(format!("{}/memories/{id}", self.url()))
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn listed_ids(&self, repo: &str) -> Vec<String> {
        let page = get_json(self.url(), &format!("/memories?repo={repo}&scope=repo")).await;
        ids(&page)
    }

    pub async fn retrieve(&self, body: &Value) -> Value {
        post_json(self.url(), "/retrieve", body).await
    }

    /// Waits until `id` is found (or not) on this replica.
    pub async fn await_presence(&self, id: &str, present: bool) {
        let expected = if present { 200 } else { 404 };
        wait_until_async("the change reaches the replica", async || {
            self.status_of(id).await == expected
        })
        .await;
    }
}

fn query(turn: &str, text: &str) -> Value {
    json!({"turn_id": turn, "repo": "forge", "query": text})
}

#[tokio::test]
async fn a_memory_written_on_one_replica_is_found_on_the_other_and_forgotten_on_both() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let b = Replica::start(&database).await;

    let id = a
        .write("forge", "The billing service runs on PostgreSQL 15.")
        .await;

    b.await_presence(&id, true).await;
    assert!(b.listed_ids("forge").await.contains(&id));
    let search = json!({"turn_id": "t-1", "repo": "forge", "query": "which database does billing use?", "use_cache": false});
    wait_until_async("B's index finds the memory", async || {
        ids(&b.retrieve(&search).await).contains(&id)
    })
    .await;

    assert_eq!(b.forget(&id).await, 204);

    a.await_presence(&id, false).await;
    assert!(!a.listed_ids("forge").await.contains(&id));
    wait_until_async("A's index drops the memory", async || {
        !ids(&a.retrieve(&search).await).contains(&id)
    })
    .await;
}

#[tokio::test]
async fn a_memory_acknowledged_by_a_replica_killed_right_after_its_201_is_kept() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let id = a.write("forge", "Releases are cut on Thursdays.").await;
    drop(a); // kill -9, right after the 201

    let b = Replica::start(&database).await;
    assert!(b.listed_ids("forge").await.contains(&id));
}

#[tokio::test]
async fn a_replica_started_late_has_what_was_written_before_and_after() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let mut before = Vec::new();
    for content in [
        "Deploys go out on Fridays.",
        "Use tabs.",
        "Pin the toolchain.",
    ] {
        before.push(a.write("forge", content).await);
    }
    let forgotten = a
        .write("forge", "A memory forgotten before B starts.")
        .await;
    assert_eq!(a.forget(&forgotten).await, 204);

    let b = Replica::start(&database).await;

    let listed = b.listed_ids("forge").await;
    for id in &before {
        assert!(listed.contains(id), "{id} missing from {listed:?}");
    }
    assert!(!listed.contains(&forgotten));
    let after = a.write("forge", "Written once B was running.").await;
    b.await_presence(&after, true).await;
}

#[tokio::test]
async fn a_cached_answer_is_not_served_after_another_replica_changed_its_namespace() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let b = Replica::start(&database).await;
    let first = a
        .write("forge", "Releases are cut from the main branch.")
        .await;
    b.await_presence(&first, true).await;
    let turn = query("t-7", "how are releases cut?");
    wait_until_async("B's index finds the first memory", async || {
        ids(&b.retrieve(&json!({"turn_id": "t-warm", "repo": "forge", "query": "how are releases cut?", "use_cache": false})).await)
            .contains(&first)
    })
    .await;
    let answer = b.retrieve(&turn).await;
    assert_eq!(answer["cached"], false, "{answer}");
    assert_eq!(b.retrieve(&turn).await["cached"], true);

    let second = a
        .write(
            "forge",
            "Releases are cut from a release branch since November.",
        )
        .await;
    b.await_presence(&second, true).await;

    let again = b.retrieve(&turn).await;
    assert_eq!(again["cached"], false, "{again}");
}

#[tokio::test]
async fn replicas_reconnect_after_the_database_restarts_and_lose_no_change() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let a = Replica::start(&database).await;
    let b = Replica::start(&database).await;
    let before = a.write("forge", "Written before the restart.").await;
    b.await_presence(&before, true).await;

    cluster.restart().await;

    // A write that meets a connection the restart closed is refused and
    // changes nothing; the pool opens a fresh one for the next.
    let mut after = None;
    wait_until_async("A writes once the database is back", async || {
        after = a.try_write("forge", "Written after the restart.").await;
        after.is_some()
    })
    .await;
    let after = after.unwrap();
    b.await_presence(&after, true).await;
    assert!(b.listed_ids("forge").await.contains(&before));
    assert_eq!(b.forget(&before).await, 204);
    a.await_presence(&before, false).await;
}

#[tokio::test]
async fn a_database_with_a_newer_schema_stops_start_up_naming_both_versions() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let client = pg_cluster::connect(&database.url).await;
    client
        .batch_execute(
            "CREATE TABLE engram_schema (version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
             INSERT INTO engram_schema (version) VALUES (1), (999);",
        )
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();

    let output = run_to_exit(data.path(), &database).await;

    assert!(!output.status.success());
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let binary = engram::store::postgres::schema::binary_version();
    assert!(
        printed.contains("version 999") && printed.contains(&format!("version {binary}")),
        "{printed}"
    );
    assert!(
        !printed.contains(&database.url),
        "the URL is never printed: {printed}"
    );
}

/// Runs `engram` over `database` until it exits by itself.
async fn run_to_exit(dir: &Path, database: &TestDatabase) -> std::process::Output {
    let mut command = Command::new(binary());
    command
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("ENGRAM_LISTEN", free_address())
        .env("ENGRAM_STORE__BACKEND", "postgres")
        .env("DATABASE_URL", &database.url)
        .stdin(Stdio::null());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_replica_cut_off_past_the_pruned_change_log_takes_in_the_snapshot() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start_with(&database, "store: {postgres: {catch_up_ms: 100}}").await;
    let b = Replica::start_with(&database, "store: {postgres: {catch_up_ms: 100}}").await;
    let kept = a.write("forge", "Kept throughout.").await;
    let forgotten = a.write("forge", "Forgotten while A was stopped.").await;
    b.await_presence(&forgotten, true).await;

    a.pause(true);
    let written = b.write("forge", "Written while A was stopped.").await;
    assert_eq!(b.forget(&forgotten).await, 204);
    // Every change is older than the log keeps them; a replica starting
    // prunes the log as it connects.
    let admin = pg_cluster::connect(&database.url).await;
    admin
        .batch_execute("UPDATE engram_changes SET at = now() - interval '8 days'")
        .await
        .unwrap();
    let _c = Replica::start(&database).await;
    wait_until_async("the change log is pruned", async || {
        let changes: i64 = admin
            .query_one("SELECT count(*) FROM engram_changes", &[])
            .await
            .unwrap()
            .get(0);
        changes == 0
    })
    .await;

    a.pause(false);
    a.await_presence(&written, true).await;
    a.await_presence(&forgotten, false).await;
    assert_eq!(a.status_of(&kept).await, 200);
    wait_ready(a.url()).await;
}
