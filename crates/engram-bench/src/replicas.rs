//! Replicas over PostgreSQL (issue 33), measured on real `engram`
//! processes over one database: a write on replica A until a retrieval on
//! replica B returns it; retrieval and `POST /turns` latency in postgres
//! mode beside files mode over the same corpus, in one run; retrieval
//! throughput with one replica and with two; and the start of a replica
//! over a large store, to `/readyz` and to every memory indexed.
//!
//! The embedder is the fake OpenAI-compatible upstream (it also stands in
//! for the chat model), so every embedding is a loopback HTTP call that
//! answers at once: the figures are Engram's and PostgreSQL's, not a
//! model's.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use engram::memory::Namespace;
use engram_fake_upstream as upstream;
use serde_json::{Value, json};

use crate::clients::{CONCURRENT_CLIENTS, check_answer, concurrent};
use crate::corpus;
use crate::databases::{self, Databases};
use crate::measure::{Report, Row};
use crate::process::{Process, engram_binary};
use crate::scratch::{ScratchDir, write_memories};
use crate::server::Client;
use crate::workload::Result;

/// A write on A not found on B by then has failed.
const GIVE_UP: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
pub struct Settings {
    /// Memories of the store the retrievals, captures and writes run over
    /// (the same corpus in both backends).
    #[arg(long, default_value_t = 10_000)]
    corpus: usize,
    /// Memories of the database a replica is started over, timed.
    #[arg(long, default_value_t = 100_000)]
    start_memories: usize,
    /// Writes on A, each timed until a retrieval on B returns it.
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// Retrievals from one client, per backend; four times as many from
    /// 32 clients for the throughput.
    #[arg(long, default_value_t = 500)]
    requests: usize,
    /// `POST /turns` from 32 clients, per backend.
    #[arg(long, default_value_t = 4000)]
    turns: usize,
    /// The `engram` binary (default: beside this one).
    #[arg(long)]
    engram: Option<PathBuf>,
    /// A PostgreSQL server to run on instead of a throwaway cluster; its
    /// role must be allowed to create databases (each measurement makes
    /// one, dropped at the end).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
}

pub async fn replicas(report: &mut Report, settings: &Settings) -> Result {
    let binary = engram_binary(settings.engram.as_deref())?;
    let mut databases = Databases::start(settings.database_url.as_deref()).await?;
    let upstream = upstream::Upstream::start_with(upstream::Setup::BENCH).await;
    let environment = Environment {
        binary,
        upstream: upstream.base_url.clone(),
    };
    let measured = measure(report, settings, &environment, &mut databases).await;
    // Every replica is stopped by now (dropped on an error).
    databases.drop_created().await?;
    measured
}

async fn measure(
    report: &mut Report,
    settings: &Settings,
    environment: &Environment,
    databases: &mut Databases,
) -> Result {
    let namespace = Namespace::Repo("bench".parse()?);
    let memories = corpus::memories(&namespace, settings.corpus, 1);
    let files_dir = ScratchDir::new()?;
    write_memories(&files_dir.path().join("data"), &namespace, &memories)?;
    let corpus_url = databases.create().await?;
    databases::load(&corpus_url, memories).await?;

    let mut files = Process::spawn_in(&environment.binary, files_dir, &environment.files())?;
    let mut first = environment.replica(&corpus_url)?;
    for process in [&mut files, &mut first] {
        process.wait_ready().await?;
        process.wait_indexed().await?;
    }
    let size = settings.corpus;
    retrieval_latency(
        report,
        &[
            (format!("files, {size} memories"), files.client()),
            (format!("postgres, {size} memories"), first.client()),
        ],
        settings.requests,
    )
    .await?;

    throughput(report, &[first.client()], settings.requests * 4, size).await?;
    let mut second = environment.replica(&corpus_url)?;
    second.wait_ready().await?;
    second.wait_indexed().await?;
    throughput(
        report,
        &[first.client(), second.client()],
        settings.requests * 4,
        size,
    )
    .await?;

    propagation(report, &first.client(), &second.client(), settings.rounds).await?;
    second.stop().await?;

    // One backend at a time: the other's classifier would work meanwhile.
    turns(report, "files", &files.client(), settings.turns).await?;
    files.stop().await?;
    turns(report, "postgres", &first.client(), settings.turns).await?;
    first.stop().await?;

    start(
        report,
        environment,
        databases,
        &namespace,
        settings.start_memories,
    )
    .await
}

/// How to run `engram`: the binary, and the fake upstream it embeds and
/// classifies with.
struct Environment {
    binary: PathBuf,
    upstream: String,
}

impl Environment {
    /// Files mode.
    fn files(&self) -> Vec<(&'static str, String)> {
        let base = &self.upstream;
        vec![
            ("ENGRAM_EMBEDDING__PROVIDER", "openai".to_owned()),
            ("ENGRAM_EMBEDDING__BASE_URL", base.clone()),
            ("ENGRAM_EMBEDDING__MODEL", "bench-fake".to_owned()),
            (
                "ENGRAM_EMBEDDING__DIMENSIONS",
                upstream::Vectors::MINILM.dimensions.to_string(),
            ),
            ("ENGRAM_LLM__BASE_URL", base.clone()),
            // Every trigger is stored: none is answered `dropped`.
            ("ENGRAM_CAPTURE__QUEUE_CAPACITY", "100000".to_owned()),
        ]
    }

    /// A replica over the database at `url`, started.
    fn replica(&self, url: &str) -> Result<Process> {
        Process::spawn(&self.binary, &self.postgres(url))
    }

    /// A replica over `url` on the data directory `dir` an earlier one left.
    fn replica_in(&self, url: &str, dir: ScratchDir) -> Result<Process> {
        Process::spawn_in(&self.binary, dir, &self.postgres(url))
    }

    fn postgres(&self, url: &str) -> Vec<(&'static str, String)> {
        let mut env = self.files();
        env.push(("ENGRAM_STORE__BACKEND", "postgres".to_owned()));
        env.push(("DATABASE_URL", url.to_owned()));
        env
    }
}

/// One client's retrievals, the same queries on each backend, taken in
/// turn (one on the first, the same on the second, and so on) so a swing
/// of the shared machine weighs on both alike.
async fn retrieval_latency(
    report: &mut Report,
    backends: &[(String, Client)],
    requests: usize,
) -> Result {
    let mut rng = corpus::Rng::new(99);
    for (_, client) in backends {
        for turn in 0..20 {
            let body = json!({"turn_id": format!("warm-{turn}"), "repo": "bench",
                "query": corpus::query(&mut rng)});
            client.retrieve(&body).await?;
        }
    }
    let mut samples = vec![Vec::with_capacity(requests); backends.len()];
    for turn in 0..requests {
        let query = corpus::query(&mut rng);
        for ((_, client), samples) in backends.iter().zip(&mut samples) {
            let body = json!({"turn_id": format!("q-{turn}"), "repo": "bench", "query": query});
            let one = Instant::now();
            let answer = client.retrieve(&body).await?;
            samples.push(one.elapsed());
            check_answer(&answer)?;
        }
    }
    for ((detail, _), mut samples) in backends.iter().zip(samples) {
        // Its own time, not the run's: the other backend's turns are not
        // this one's.
        let own: Duration = samples.iter().sum();
        report.rows.push(Row::from_samples(
            "replicas: retrieve (query), one client",
            detail.clone(),
            &mut samples,
            own,
        ));
    }
    Ok(())
}

/// Retrievals from 32 clients spread over `replicas`.
async fn throughput(
    report: &mut Report,
    replicas: &[Client],
    requests: usize,
    size: usize,
) -> Result {
    let mut rng = corpus::Rng::new(7 + replicas.len() as u64);
    let bodies: Vec<Value> = (0..requests)
        .map(|turn| {
            json!({"turn_id": format!("c{}-{turn}", replicas.len()), "repo": "bench",
            "query": corpus::query(&mut rng)})
        })
        .collect();
    let (answers, wall) = concurrent(
        replicas,
        "/retrieve",
        200,
        bodies,
        CONCURRENT_CLIENTS,
        |answer| check_answer(&answer),
    )
    .await?;
    let mut latencies: Vec<Duration> = answers.into_iter().map(|(took, ())| took).collect();
    let count = replicas.len();
    report.rows.push(Row::from_samples(
        &format!("replicas: retrieve (query), 32 clients over {count} replica(s)"),
        format!("postgres, {size} memories"),
        &mut latencies,
        wall,
    ));
    Ok(())
}

/// Writes on `a`, each with a word of its own; from each `201`,
/// retrievals of that word on `b` back to back until one returns it.
async fn propagation(report: &mut Report, a: &Client, b: &Client, rounds: usize) -> Result {
    let mut found_after = Vec::with_capacity(rounds);
    let mut retrievals = 0_usize;
    let started = Instant::now();
    for round in 0..rounds {
        let word = format!("quokka{round}");
        let written = a
            .create(
                &json!({"repo": "bench", "scope": "repo", "category": "patterns",
                "content": format!("The {word} cluster fails over to its standby at night.")}),
            )
            .await?;
        let acknowledged = Instant::now();
        let id = written["id"].as_str().ok_or("a 201 without an id")?;
        loop {
            retrievals += 1;
            let answer = b
                .retrieve(
                    &json!({"turn_id": format!("p-{round}-{retrievals}"), "repo": "bench",
                    "query": format!("{word} cluster"), "top_k": 5, "use_cache": false}),
                )
                .await?;
            if returns(&answer, id) {
                found_after.push(acknowledged.elapsed());
                break;
            }
            if acknowledged.elapsed() > GIVE_UP {
                return Err(format!("{word}, written on A, was never found on B: {answer}").into());
            }
        }
    }
    report.rows.push(Row::from_samples(
        "replicas: 201 on A → found by a retrieval on B",
        "postgres, two replicas, B retrieving back to back",
        &mut found_after,
        started.elapsed(),
    ));
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let per_write = retrievals as f64 / rounds.max(1) as f64;
    report.figure(
        "replicas: retrievals on B per write, until found",
        per_write,
        "",
    );
    Ok(())
}

fn returns(answer: &Value, id: &str) -> bool {
    answer["memories"]
        .as_array()
        .is_some_and(|memories| memories.iter().any(|memory| memory["id"] == id))
}

/// `POST /turns` from 32 clients over 256 sessions.
async fn turns(report: &mut Report, backend: &str, client: &Client, requests: usize) -> Result {
    let bodies = corpus::turns(requests);
    let (answers, wall) = concurrent(
        std::slice::from_ref(client),
        "/turns",
        202,
        bodies,
        CONCURRENT_CLIENTS,
        |_| Ok(()),
    )
    .await?;
    let mut latencies: Vec<Duration> = answers.into_iter().map(|(took, ())| took).collect();
    report.rows.push(Row::from_samples(
        "replicas: POST /turns, 32 clients",
        format!("{backend}, 256 sessions, the worker classifying"),
        &mut latencies,
        wall,
    ));
    Ok(())
}

/// A replica started over `size` memories loaded into a fresh database:
/// to `/readyz` and to every memory indexed, with a cold embedding cache
/// and then, restarted on the same data directory, a warm one.
async fn start(
    report: &mut Report,
    environment: &Environment,
    databases: &mut Databases,
    namespace: &Namespace,
    size: usize,
) -> Result {
    let url = databases.create().await?;
    let loading = Instant::now();
    databases::load(&url, corpus::memories(namespace, size, 3)).await?;
    report.figure(
        format!("replicas: loading {size} memories into PostgreSQL (setup, through the store)"),
        loading.elapsed().as_secs_f64(),
        "s",
    );
    let mut dir = None;
    for cache in ["cold", "warm"] {
        let spawned = Instant::now();
        let mut replica = match dir.take() {
            Some(dir) => environment.replica_in(&url, dir)?,
            None => environment.replica(&url)?,
        };
        replica.wait_ready().await?;
        let ready = spawned.elapsed();
        replica.wait_indexed().await?;
        let indexed = spawned.elapsed();
        let detail = format!("{size} memories, {cache} embedding cache, fake embedder");
        report.rows.push(Row::single(
            "replicas: start → /readyz 200",
            detail.clone(),
            ready,
        ));
        report.rows.push(Row::single(
            "replicas: start → every memory indexed",
            detail,
            indexed,
        ));
        dir = Some(replica.stop().await?);
    }
    Ok(())
}
