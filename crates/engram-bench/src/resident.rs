//! Memory follows use (`index.idle_minutes`, `index.max_memory_mb`), the
//! fake embedder, in process, over files or (`--backend postgres`) a
//! database of its own on a throwaway PostgreSQL cluster:
//!
//! - the cold load: a namespace of `--cold-memories` memories, dropped
//!   from memory at every pass (`index.idle_minutes: 0`), read again and
//!   again: the first retrieval after each drop (p50/p95), and the load
//!   alone as `/stats` counts it;
//! - many namespaces under a ceiling: `--namespaces` of
//!   `--per-namespace` memories each, written in batches, with
//!   `index.max_memory_mb` at `--max-memory-mb`; then the process's
//!   resident memory and `/stats`' resident bytes, and retrievals over a
//!   skewed mix (nine in ten to the hottest tenth of the namespaces, the
//!   rest to any), p50/p95 of each group, `/stats` itself, and what
//!   reads or changes one namespace among them all: its newest page
//!   (`GET /memories`), a retrieval without a query, and confirming a
//!   memory (a lifecycle written in place).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use engram::config::{Backend, Config, DatabaseUrl};

use crate::databases::Databases;
use crate::measure::{self, Report, Row};
use crate::scratch::ScratchDir;
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};
use crate::{clients, corpus};

/// `/stats` reads timed once the mix is done: what a dashboard or a
/// scrape of `/metrics` costs on a store this size.
const STATS_READS: usize = 20;

#[derive(clap::Args, Debug)]
pub struct Settings {
    /// Memories of the namespace loaded back again and again.
    #[arg(long, default_value_t = 10_000)]
    pub cold_memories: usize,
    /// Loads of it measured.
    #[arg(long, default_value_t = 20)]
    pub cold_loads: usize,
    /// Namespaces of the skewed mix.
    #[arg(long, default_value_t = 1_000)]
    pub namespaces: usize,
    /// Memories in each of them.
    #[arg(long, default_value_t = 1_000)]
    pub per_namespace: usize,
    /// `index.max_memory_mb` of the skewed mix.
    #[arg(long, default_value_t = 256)]
    pub max_memory_mb: u64,
    /// Retrievals of the skewed mix.
    #[arg(long, default_value_t = 2_000)]
    pub requests: usize,
    /// Where the memories are kept.
    #[arg(long, value_enum, default_value_t = Store::Files)]
    pub backend: Store,
    /// With `--backend postgres`: a server to run on instead of a
    /// throwaway cluster; its role must be allowed to create databases.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// Where the service under test keeps its memories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Store {
    /// Markdown files under a scratch data directory.
    Files,
    /// A fresh database per measurement.
    Postgres,
}

pub async fn resident(report: &mut Report, settings: &Settings) -> Result {
    let mut databases = match settings.backend {
        Store::Files => None,
        Store::Postgres => Some(Databases::start(settings.database_url.as_deref()).await?),
    };
    cold_load(report, settings, databases.as_mut()).await?;
    skewed(report, settings, databases.as_mut()).await?;
    if let Some(databases) = &mut databases {
        databases.drop_created().await?;
    }
    Ok(())
}

/// A service over `dir`, or over a fresh database when `databases` is
/// given, configured by `adjust`.
async fn start(
    dir: &ScratchDir,
    databases: Option<&mut Databases>,
    adjust: impl FnOnce(&mut Config),
) -> Result<Server> {
    let url = match databases {
        Some(databases) => Some(databases.create().await?),
        None => None,
    };
    let (server, _) = Server::start_with(dir.path(), EmbedderChoice::Fake, |config| {
        if let Some(url) = url {
            config.store.backend = Backend::Postgres;
            config.store.postgres.url = Some(DatabaseUrl::new(&url));
        }
        adjust(config);
    })
    .await?;
    Ok(server)
}

fn memories(repo: &str, count: usize, rng: &mut corpus::Rng) -> Vec<Value> {
    (0..count)
        .map(|serial| {
            json!({"repo": repo, "scope": "repo", "category": "patterns",
                "content": corpus::sentence(rng, serial)})
        })
        .collect()
}

async fn stats(client: &Client) -> Result<Value> {
    let (_, stats) = client.send("GET", "/stats", None).await?;
    Ok(stats["index"]["residency"].clone())
}

/// `method` to each of `paths` one after another, with `body`, each
/// answered 200: their latencies and the wall time.
async fn send_each(
    client: &Client,
    method: &str,
    paths: &[String],
    body: Option<&Value>,
) -> Result<(Vec<Duration>, Duration)> {
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(paths.len());
    for path in paths {
        let one = Instant::now();
        let (status, _) = client.send(method, path, body).await?;
        if status != 200 {
            return Err(format!("{method} {path} answered {status}").into());
        }
        latencies.push(one.elapsed());
    }
    Ok((latencies, started.elapsed()))
}

/// `reads` GETs of `path` one after another.
async fn get_repeatedly(
    client: &Client,
    path: &str,
    reads: usize,
) -> Result<(Vec<Duration>, Duration)> {
    send_each(client, "GET", &vec![path.to_owned(); reads], None).await
}

/// Confirms each memory of the page at `listing` that was never used
/// (retrieved or confirmed), one after another: each a change of its
/// lifecycle (`used_at`), written in place.
async fn confirm_each(client: &Client, listing: &str) -> Result<(Vec<Duration>, Duration)> {
    let (_, page) = client.send("GET", listing, None).await?;
    let confirms: Vec<String> = page["memories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|memory| memory.get("used_at").is_none())
        .filter_map(|memory| memory["id"].as_str())
        .map(|id| format!("/memories/{id}/confirm"))
        .collect();
    if confirms.is_empty() {
        return Err(format!("GET {listing} listed no unused memory to confirm").into());
    }
    send_each(client, "POST", &confirms, Some(&json!({}))).await
}

/// The total of the loads' times so far, in ms.
fn load_ms(residency: &Value) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a count")]
    let loads = residency["loads"].as_u64().unwrap_or(0) as f64;
    residency["mean_load_ms"].as_f64().unwrap_or(0.0) * loads
}

async fn cold_load(
    report: &mut Report,
    settings: &Settings,
    databases: Option<&mut Databases>,
) -> Result {
    let dir = ScratchDir::new()?;
    let server = start(&dir, databases, |config| {
        config.index.idle_minutes = Some(0);
    })
    .await?;
    let client = server.client();
    let mut rng = corpus::Rng::new(41);
    client
        .create_each(memories("cold", settings.cold_memories, &mut rng))
        .await?;
    server.wait_indexed().await?;
    let mut first_reads = Vec::with_capacity(settings.cold_loads);
    let mut loads = Vec::with_capacity(settings.cold_loads);
    let started = Instant::now();
    for turn in 0..settings.cold_loads {
        // Wait for a pass to drop it.
        let before = loop {
            let residency = stats(&client).await?;
            if residency["resident_namespaces"] == 0 {
                break residency;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let one = Instant::now();
        client
            .retrieve(&json!({"turn_id": format!("cold-{turn}"), "repo": "cold",
                "query": corpus::query(&mut rng)}))
            .await?;
        first_reads.push(one.elapsed());
        let after = stats(&client).await?;
        let took = (load_ms(&after) - load_ms(&before)).max(0.0);
        loads.push(Duration::from_secs_f64(took / 1000.0));
    }
    let wall = started.elapsed();
    server.stop().await;
    let detail = format!(
        "{} memories in one namespace, dropped from memory before each",
        settings.cold_memories
    );
    report.rows.push(Row::from_samples(
        "retrieval of a namespace out of memory",
        detail.clone(),
        &mut first_reads,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "its load back (store + embedding cache)",
        detail,
        &mut loads,
        wall,
    ));
    Ok(())
}

async fn skewed(
    report: &mut Report,
    settings: &Settings,
    databases: Option<&mut Databases>,
) -> Result {
    let dir = ScratchDir::new()?;
    let server = start(&dir, databases, |config| {
        config.index.max_memory_mb = Some(settings.max_memory_mb);
    })
    .await?;
    let client = server.client();
    let mut rng = corpus::Rng::new(43);
    let name = |n: usize| format!("ns{n:05}");
    let written = Instant::now();
    for namespace in 0..settings.namespaces {
        client
            .create_each(memories(&name(namespace), settings.per_namespace, &mut rng))
            .await?;
    }
    server.wait_indexed().await?;
    report.rows.push(Row::single(
        "writing them (batches of 1,000) and indexing",
        format!(
            "{} namespaces of {} memories",
            settings.namespaces, settings.per_namespace
        ),
        written.elapsed(),
    ));
    let hot = (settings.namespaces / 10).max(1);
    let (mut hot_reads, mut cold_reads) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for turn in 0..settings.requests {
        let is_hot = rng.below(10) < 9;
        let namespace = if is_hot {
            rng.below(hot)
        } else {
            rng.below(settings.namespaces)
        };
        let one = Instant::now();
        client
            .retrieve(
                &json!({"turn_id": format!("mix-{turn}"), "repo": name(namespace),
                "query": corpus::query(&mut rng)}),
            )
            .await?;
        if is_hot {
            &mut hot_reads
        } else {
            &mut cold_reads
        }
        .push(one.elapsed());
    }
    let wall = started.elapsed();
    let residency = stats(&client).await?;
    let store_size = format!(
        "{} memories in {} namespaces",
        settings.namespaces * settings.per_namespace,
        settings.namespaces
    );
    let (mut stats_reads, stats_wall) = get_repeatedly(&client, "/stats", STATS_READS).await?;
    report.rows.push(Row::from_samples(
        "GET /stats",
        store_size.clone(),
        &mut stats_reads,
        stats_wall,
    ));
    // What the browser's list and a session's brief read: one namespace
    // among all of them, newest first.
    let listing = format!("/memories?repo={}&limit=20", name(0));
    let (mut list_reads, list_wall) = get_repeatedly(&client, &listing, STATS_READS).await?;
    report.rows.push(Row::from_samples(
        "GET /memories of one namespace",
        store_size.clone(),
        &mut list_reads,
        list_wall,
    ));
    // The last namespace: the mix has used few of its memories, if any.
    let quiet = format!("/memories?repo={}&limit=20", name(settings.namespaces - 1));
    let (mut confirms, confirm_wall) = confirm_each(&client, &quiet).await?;
    report.rows.push(Row::from_samples(
        "a lifecycle change (POST /memories/{id}/confirm) in one namespace",
        store_size.clone(),
        &mut confirms,
        confirm_wall,
    ));
    let briefs: Vec<Value> = (0..STATS_READS)
        .map(|read| json!({"turn_id": format!("brief-{read}"), "repo": name(0)}))
        .collect();
    let (mut brief_reads, _, brief_wall) = clients::sequential(&client, &briefs).await?;
    report.rows.push(Row::from_samples(
        "retrieval without a query (filters only) of one namespace",
        store_size,
        &mut brief_reads,
        brief_wall,
    ));
    let detail = format!(
        "{} namespaces of {}, index.max_memory_mb {}",
        settings.namespaces, settings.per_namespace, settings.max_memory_mb
    );
    let mut all: Vec<Duration> = hot_reads.iter().chain(&cold_reads).copied().collect();
    report.rows.push(Row::from_samples(
        "retrieval, skewed mix (9 in 10 to the hottest tenth)",
        detail.clone(),
        &mut all,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "  of which to the hottest tenth",
        detail.clone(),
        &mut hot_reads,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "  of which to any namespace",
        detail,
        &mut cold_reads,
        wall,
    ));
    report.figure("process resident memory", measure::resident_mib(), "MiB");
    #[expect(clippy::cast_precision_loss, reason = "a size")]
    let bytes = residency["resident_bytes"].as_u64().unwrap_or(0) as f64;
    report.figure("index resident (/stats)", bytes / f64::from(1 << 20), "MiB");
    for key in [
        "resident_namespaces",
        "evicted_namespaces",
        "loads",
        "evictions",
    ] {
        #[expect(clippy::cast_precision_loss, reason = "a count")]
        let value = residency[key].as_u64().unwrap_or(0) as f64;
        report.figure(key, value, "");
    }
    server.stop().await;
    Ok(())
}
