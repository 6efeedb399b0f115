//! `engram-bench`: how fast Engram is, measured from the repository.
//!
//! Every workload runs the real service in process on a real loopback port
//! and drives it over HTTP. Upstreams are either a fake OpenAI-compatible
//! server that answers at once (so the figures are Engram's own overhead)
//! or the embedded local model. Corpora are synthetic and seeded, so runs
//! are comparable. Prints a markdown table, or JSON with `--json`.

mod abuse;
mod backfill;
mod capture_cost;
mod corpus;
mod dump;
mod embedref;
mod freshness;
mod guard;
mod locomo;
mod longmemeval;
mod mcp;
mod measure;
mod scan;
mod scratch;
mod semantic;
mod server;
mod soak;
mod sync;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use engram::embed::{Embedder, Priority};
use engram::memory::Namespace;
use serde_json::{Value, json};

use measure::{Report, Row};
use scratch::{ScratchDir, write_corpus};
use server::Server;
use workload::{EmbedderChoice, Result};

#[derive(Parser)]
#[command(about = "Measure Engram: latency, throughput, start-up and memory use")]
struct Args {
    /// Print JSON instead of a markdown table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The local embedder's throughput, one sentence at a time and batched.
    Embed {
        #[arg(long, default_value_t = 256)]
        sentences: usize,
    },
    /// The local embedder against sentence-transformers on PyTorch (CPU)
    /// on the same sentences, batch 1 and 32, in one run; sets up the
    /// reference's virtual environment on first use.
    Embedref(embedref::Settings),
    /// `POST /retrieve` in query mode over stores of each size.
    Retrieve {
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
        memories: Vec<usize>,
        #[arg(long, default_value_t = 500)]
        requests: usize,
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Fake)]
        embedder: EmbedderChoice,
    },
    /// Start-up to ready over a store, with a cold and then a warm
    /// embedding cache.
    Startup {
        #[arg(long, default_value_t = 10_000)]
        memories: usize,
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Local)]
        embedder: EmbedderChoice,
    },
    /// Read-after-write under a backlog: a burst of writes, then a memory
    /// with a rare word; how long from its `201` until a retrieval finds it.
    Freshness {
        /// Burst sizes, each on a fresh service.
        #[arg(long, value_delimiter = ',', default_value = "0,400,4000")]
        backlogs: Vec<usize>,
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Local)]
        embedder: EmbedderChoice,
    },
    /// Live sync: a file edited on disk → found by a retrieval (p50/p95),
    /// and a checkout of many files → settled.
    Sync {
        /// Files edited one at a time, each timed.
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// Files of the bulk checkout (0: none).
        #[arg(long, default_value_t = 1000)]
        bulk: usize,
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Fake)]
        embedder: EmbedderChoice,
    },
    /// `POST /turns` accepted under 32 concurrent clients.
    Turns {
        #[arg(long, default_value_t = 4000)]
        requests: usize,
    },
    /// `POST /memories`, one client.
    Write {
        #[arg(long, default_value_t = 1000)]
        requests: usize,
    },
    /// A bounded mixed load (writes, captures, retrievals, deletes), then
    /// checks that everything accepted is accounted for.
    Soak {
        #[arg(long, default_value_t = 180)]
        seconds: u64,
    },
    /// Hostile loads (idle sockets, cache growth, compaction floods,
    /// oversized upstream replies): memory and descriptors before, at the
    /// peak and after; fails if `/healthz` goes 1 s without answering.
    Abuse {
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "idle,cache,compactions,oversized"
        )]
        only: Vec<abuse::Abuse>,
        #[command(flatten)]
        settings: abuse::Settings,
    },
    /// LoCoMo retrieval quality, scored by the benchmark's own scorer.
    Locomo {
        #[arg(long, value_enum, default_value_t = locomo::Split::Dev)]
        split: locomo::Split,
        /// The converted LoCoMo directory.
        #[arg(long, default_value = locomo::DEFAULT_DATA)]
        data: PathBuf,
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Local)]
        embedder: EmbedderChoice,
        /// Where to write the results file (default: the temp directory).
        #[arg(long)]
        out: Option<PathBuf>,
        /// `retrieval.lexical_weight` (0: vector search only).
        #[arg(long, default_value_t = 0.8)]
        lexical_weight: f64,
        /// Also write every question's candidates and their evidence here
        /// (JSON lines), for replaying fusion variants offline.
        #[arg(long)]
        dump: Option<PathBuf>,
    },
    /// LongMemEval_S retrieval quality, scored as the benchmark's own
    /// retrieval evaluation does, with BM25 on the same data in the same run.
    Longmemeval(longmemeval::Settings),
    /// Retrieval by meaning on the repository's own eval set
    /// (`semantic_eval.jsonl`): top-1 and R@5, fused and vector only.
    Semantic {
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Local)]
        embedder: EmbedderChoice,
        /// `retrieval.lexical_weight` of the fused run.
        #[arg(long, default_value_t = 0.8)]
        lexical_weight: f64,
        /// Also write the fused run's candidates and their evidence here
        /// (JSON lines), for replaying fusion variants offline.
        #[arg(long)]
        dump: Option<PathBuf>,
    },
    /// `recall` over MCP beside `POST /retrieve`, in turns, on one store.
    Mcp {
        #[arg(long, default_value_t = 10_000)]
        memories: usize,
        #[arg(long, default_value_t = 500)]
        requests: usize,
    },
    /// What capture costs in model tokens: a scripted 50-turn coding
    /// session through `POST /turns`, the whole window each turn, as the
    /// hooks send it; tokens per turn and per memory written.
    CaptureCost,
    /// The secret guard, line by line, on conversations, code and a
    /// fixture of secrets: lines flagged, the rate, and each flagged line.
    Guard(guard::Settings),
    /// `engram import claude-code` over generated sessions: time, the
    /// compactions sent, tokens estimated against tokens spent.
    Backfill {
        #[arg(long, default_value_t = 200)]
        sessions: usize,
    },
    /// Every workload at the sizes `docs/benchmarks.md` reports.
    All,
}

fn main() -> ExitCode {
    // As the service's own `main` does: what is measured is what ships.
    engram::allocator::configure();
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("engram-bench: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut report = Report::default();
    let result = runtime.block_on(async {
        match args.command {
            Command::Embed { sentences } => embed(&mut report, sentences).await,
            Command::Embedref(settings) => embedref::embedref(&mut report, settings).await,
            Command::Retrieve {
                memories,
                requests,
                embedder,
            } => {
                for size in memories {
                    retrieve(&mut report, size, requests, embedder).await?;
                }
                Ok(())
            }
            Command::Startup { memories, embedder } => {
                startup(&mut report, memories, embedder).await
            }
            Command::Freshness { backlogs, embedder } => {
                freshness::freshness(&mut report, &backlogs, embedder).await
            }
            Command::Sync {
                rounds,
                bulk,
                embedder,
            } => sync::sync(&mut report, rounds, bulk, embedder).await,
            Command::Write { requests } => write(&mut report, requests).await,
            Command::Turns { requests } => turns(&mut report, requests).await,
            Command::Soak { seconds } => soak::soak(&mut report, seconds).await,
            Command::Abuse { only, settings } => abuse::abuse(&mut report, &only, &settings).await,
            Command::Locomo {
                split,
                data,
                embedder,
                out,
                lexical_weight,
                dump,
            } => {
                let dump = dump.as_deref();
                locomo::locomo(
                    &mut report,
                    split,
                    &data,
                    embedder,
                    out,
                    lexical_weight,
                    dump,
                )
                .await
            }
            Command::Longmemeval(settings) => longmemeval::longmemeval(&mut report, settings).await,
            Command::Semantic {
                embedder,
                lexical_weight,
                dump,
            } => semantic::semantic(&mut report, embedder, lexical_weight, dump.as_deref()).await,
            Command::Mcp { memories, requests } => mcp::mcp(&mut report, memories, requests).await,
            Command::Guard(settings) => guard::guard(&mut report, &settings),
            Command::CaptureCost => capture_cost::capture_cost(&mut report).await,
            Command::Backfill { sessions } => backfill::backfill(&mut report, sessions).await,
            Command::All => all(&mut report).await,
        }
    });
    // What was measured before a failure is printed too.
    report.print(args.json);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("engram-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn all(report: &mut Report) -> Result {
    embed(report, 256).await?;
    for size in [1000, 10_000, 100_000] {
        retrieve(report, size, 500, EmbedderChoice::Fake).await?;
    }
    retrieve(report, 10_000, 300, EmbedderChoice::Local).await?;
    write(report, 1000).await?;
    turns(report, 4000).await?;
    startup(report, 10_000, EmbedderChoice::Local).await
}

async fn embed(report: &mut Report, sentences: usize) -> Result {
    let embedder = engram::blocking::run(|| Embedder::from_config(&Default::default())).await?;
    let mut rng = corpus::Rng::new(7);
    let texts: Vec<String> = (0..sentences)
        .map(|i| corpus::sentence(&mut rng, i))
        .collect();
    embedder.embed(texts[..8].to_vec()).await?; // warm up

    let mut samples = Vec::with_capacity(texts.len());
    let started = Instant::now();
    for text in &texts {
        let one = Instant::now();
        embedder.embed(vec![text.clone()]).await?;
        samples.push(one.elapsed());
    }
    report.rows.push(Row::from_samples(
        "embed (local)",
        "one sentence per call",
        &mut samples,
        started.elapsed(),
    ));

    embed_in_calls(
        report,
        &embedder,
        &texts,
        32,
        Priority::Query,
        "batches of 32 (per batch)",
        "local embedder, batched",
    )
    .await?;
    // As the indexer embeds: calls of its batch size, on the backlog's
    // threads, passes side by side.
    embed_in_calls(
        report,
        &embedder,
        &texts,
        engram::index::indexer::BATCH_SIZE,
        Priority::Backlog,
        "indexer batches on the backlog threads (per batch)",
        "local embedder, backlog batches",
    )
    .await
}

/// Embeds `texts` in calls of `size` on `priority`'s threads: a row of the
/// calls' times and a figure of sentences a second.
async fn embed_in_calls(
    report: &mut Report,
    embedder: &Embedder,
    texts: &[String],
    size: usize,
    priority: Priority,
    calls: &str,
    figure: &str,
) -> Result {
    let mut samples = Vec::new();
    let started = Instant::now();
    for batch in texts.chunks(size) {
        let one = Instant::now();
        embedder.embed_as(batch.to_vec(), priority).await?;
        samples.push(one.elapsed());
    }
    let wall = started.elapsed();
    report.rows.push(Row::from_samples(
        "embed (local)",
        calls,
        &mut samples,
        wall,
    ));
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    let rate = texts.len() as f64 / wall.as_secs_f64();
    report.figure(figure, rate, "sentences/s");
    Ok(())
}

async fn retrieve(
    report: &mut Report,
    size: usize,
    requests: usize,
    embedder: EmbedderChoice,
) -> Result {
    let dir = ScratchDir::new()?;
    let namespace = Namespace::Repo("bench".parse()?);
    report.figure(
        format!("resident memory before the corpus at {size} ({embedder:?})"),
        measure::resident_mib(),
        "MiB",
    );
    write_corpus(dir.path(), &namespace, size, 1)?;
    report.figure(
        format!("resident memory once the corpus is written, before the service, at {size} ({embedder:?})"),
        measure::resident_mib(),
        "MiB",
    );
    let (server, ready_in) = Server::start(dir.path(), embedder).await?;
    report.figure(
        format!("resident memory once indexed at {size} ({embedder:?})"),
        measure::resident_mib(),
        "MiB",
    );
    let detail = format!("{size} memories, {embedder:?} embedder");
    report
        .rows
        .push(Row::single("startup, cold cache", detail.clone(), ready_in));
    let client = server.client();
    let mut rng = corpus::Rng::new(99);
    for turn in 0..20 {
        let query = corpus::query(&mut rng);
        client
            .retrieve(&json!({"turn_id": format!("warm-{turn}"), "repo": "bench", "query": query}))
            .await?;
    }

    let bodies: Vec<Value> = (0..requests)
        .map(|turn| json!({"turn_id": format!("q-{turn}"), "repo": "bench", "query": corpus::query(&mut rng)}))
        .collect();
    let (mut total, mut search, wall) = sequential(&client, &bodies).await?;
    report.rows.push(Row::from_samples(
        "retrieve (query), end to end",
        detail.clone(),
        &mut total,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "retrieve (query), search only",
        detail.clone(),
        &mut search,
        wall,
    ));

    let bodies: Vec<Value> = (0..requests)
        .map(|turn| {
            let message = corpus::query(&mut rng);
            json!({"turn_id": format!("h-{turn}"), "repo": "bench",
                "messages": [{"role": "user", "content": message}]})
        })
        .collect();
    let (mut total, _, wall) = sequential(&client, &bodies).await?;
    report.rows.push(Row::from_samples(
        "retrieve (hyde, instant model), end to end",
        detail.clone(),
        &mut total,
        wall,
    ));

    let same_turn = json!({"turn_id": "cached", "repo": "bench", "query": corpus::query(&mut rng)});
    client.retrieve(&same_turn).await?;
    let (mut total, _, wall) = sequential(&client, &vec![same_turn; requests]).await?;
    report.rows.push(Row::from_samples(
        "retrieve, cache hit",
        detail.clone(),
        &mut total,
        wall,
    ));

    let bodies: Vec<Value> = (0..requests * 4)
        .map(|turn| json!({"turn_id": format!("c-{turn}"), "repo": "bench", "query": corpus::query(&mut rng)}))
        .collect();
    let cpu_before = measure::cpu_time();
    let (answers, wall) = concurrent(
        &client,
        "/retrieve",
        200,
        bodies,
        CONCURRENT_CLIENTS,
        |answer| check_answer(&answer),
    )
    .await?;
    let cpu = measure::cpu_time().saturating_sub(cpu_before);
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    let per_request = cpu.as_secs_f64() * 1000.0 / answers.len().max(1) as f64;
    report.figure(
        format!("CPU time per retrieval, 32 concurrent clients, at {size} (service, client and fake upstream together)"),
        per_request,
        "ms",
    );
    report.figure(
        format!("cores busy during the 32-client retrievals at {size}"),
        cpu.as_secs_f64() / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        "",
    );
    let mut total: Vec<Duration> = answers.into_iter().map(|(took, ())| took).collect();
    report.rows.push(Row::from_samples(
        "retrieve (query), 32 concurrent clients",
        detail.clone(),
        &mut total,
        wall,
    ));
    report.figure(
        format!("resident memory after retrieve at {size} ({embedder:?})"),
        measure::resident_mib(),
        "MiB",
    );
    server.stop().await;
    // After the resident figure: this builds an index of its own.
    scan::scan(report, size).await
}

/// Clients of the concurrency workloads.
const CONCURRENT_CLIENTS: usize = 32;

/// Sends `bodies` one after another; returns end-to-end latencies, the
/// server's own search times, and the wall time.
async fn sequential(
    client: &server::Client,
    bodies: &[Value],
) -> Result<(Vec<Duration>, Vec<Duration>, Duration)> {
    let mut total = Vec::with_capacity(bodies.len());
    let mut search = Vec::with_capacity(bodies.len());
    let started = Instant::now();
    for body in bodies {
        let one = Instant::now();
        let answer = client.retrieve(body).await?;
        total.push(one.elapsed());
        check_answer(&answer)?;
        let search_ms = answer["timings_ms"]["search"].as_f64().unwrap_or_default();
        search.push(Duration::from_secs_f64(search_ms / 1000.0));
    }
    Ok((total, search, started.elapsed()))
}

/// POSTs `bodies` to `path` from `clients` tasks at once, each answer
/// expected with `status`; returns each latency with what `keep` makes of
/// its answer (as it arrives, so that the bench holds no more of the
/// answers than it needs, and the resident memory after it is the
/// service's), and the wall time.
async fn concurrent<T: Send + 'static>(
    client: &server::Client,
    path: &'static str,
    status: u16,
    bodies: Vec<Value>,
    clients: usize,
    keep: fn(Value) -> Result<T>,
) -> Result<(Vec<(Duration, T)>, Duration)> {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (client, queue) = (client.clone(), queue.clone());
        tasks.spawn(async move {
            let mut samples = Vec::new();
            loop {
                let next = queue.lock().map_err(|_| "a client panicked")?.pop();
                let Some(body) = next else {
                    return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(samples);
                };
                let one = Instant::now();
                let (answered, answer) = client.send("POST", path, Some(&body)).await?;
                let took = one.elapsed();
                if answered != status {
                    return Err(format!("{path} answered {answered}: {answer}").into());
                }
                samples.push((took, keep(answer)?));
            }
        });
    }
    let mut samples = Vec::new();
    while let Some(done) = tasks.join_next().await {
        samples.extend(done??);
    }
    Ok((samples, started.elapsed()))
}

/// A retrieval the bench can count: complete and not empty.
fn check_answer(answer: &Value) -> Result {
    if answer["degraded"] != Value::Null || answer["memories"].as_array().is_none_or(Vec::is_empty)
    {
        return Err(format!("a retrieval came back degraded or empty: {answer}").into());
    }
    Ok(())
}

async fn startup(report: &mut Report, size: usize, embedder: EmbedderChoice) -> Result {
    let dir = ScratchDir::new()?;
    write_corpus(dir.path(), &Namespace::Repo("bench".parse()?), size, 3)?;
    for label in ["cold cache", "warm cache"] {
        let (server, ready_in) = Server::start(dir.path(), embedder).await?;
        report.rows.push(Row::single(
            &format!("startup, {label}"),
            format!("{size} memories, {embedder:?} embedder"),
            ready_in,
        ));
        server.stop().await;
    }
    Ok(())
}

async fn write(report: &mut Report, requests: usize) -> Result {
    let dir = ScratchDir::new()?;
    write_corpus(dir.path(), &Namespace::Repo("bench".parse()?), 1000, 5)?;
    let (server, _) = Server::start(dir.path(), EmbedderChoice::Fake).await?;
    let client = server.client();
    let mut rng = corpus::Rng::new(11);
    let mut samples = Vec::with_capacity(requests);
    let started = Instant::now();
    for serial in 0..requests {
        let body = json!({"repo": "bench", "scope": "repo", "category": "patterns",
            "content": corpus::sentence(&mut rng, serial)});
        let one = Instant::now();
        client.create(&body).await?;
        samples.push(one.elapsed());
    }
    report.rows.push(Row::from_samples(
        "POST /memories",
        "1,000 memories stored, one client",
        &mut samples,
        started.elapsed(),
    ));
    server.stop().await;
    Ok(())
}

/// Capture triggers from 32 clients at once: how fast the `202` comes back
/// (each is durable in `queue/` first), beside the machine's own cost of a
/// durable write measured right after, in the same directory.
async fn turns(report: &mut Report, requests: usize) -> Result {
    let dir = ScratchDir::new()?;
    // A queue large enough that every trigger is stored (and fsynced).
    let (server, _) = Server::start_with(dir.path(), EmbedderChoice::Fake, |config| {
        config.capture.queue_capacity = 100_000;
    })
    .await?;
    let client = server.client();
    let mut rng = corpus::Rng::new(17);
    let bodies: Vec<Value> = (0..requests)
        .map(|serial| {
            json!({"session_id": format!("s{}", serial % 256), "repo": "bench",
                "messages": [{"role": "user", "content": corpus::sentence(&mut rng, serial)}]})
        })
        .collect();
    let (samples, wall) = concurrent(
        &client,
        "/turns",
        202,
        bodies,
        CONCURRENT_CLIENTS,
        |answer| Ok(answer["status"].as_str().unwrap_or_default().to_owned()),
    )
    .await?;
    for outcome in ["queued", "coalesced", "dropped"] {
        let count = samples
            .iter()
            .filter(|(_, status)| status == outcome)
            .count();
        report.figure(format!("POST /turns answered {outcome}"), count as f64, "");
    }
    let mut latencies: Vec<Duration> = samples.into_iter().map(|(took, _)| took).collect();
    report.rows.push(Row::from_samples(
        "POST /turns, 32 concurrent clients",
        "256 sessions, every trigger stored, the worker classifying",
        &mut latencies,
        wall,
    ));
    server.stop().await;
    let (mut syncs, wall) = bare_fsyncs(dir.path(), 200)?;
    report.rows.push(Row::from_samples(
        "bare fsync, one at a time",
        "write 1 KiB, fsync it, fsync its directory: the bound for one durable accept",
        &mut syncs,
        wall,
    ));
    let (mut appends, wall) = bare_appends(dir.path(), 200)?;
    report.rows.push(Row::from_samples(
        "bare append + fdatasync, one at a time",
        "append 1 KiB to one file, fdatasync it: the bound for one group of accepts",
        &mut appends,
        wall,
    ));
    Ok(())
}

/// The machine's own cost of one durable append to a log file in `dir`.
fn bare_appends(dir: &std::path::Path, count: usize) -> std::io::Result<(Vec<Duration>, Duration)> {
    use std::io::Write;
    let path = dir.join("append-probe");
    let mut file = std::fs::File::create(&path)?;
    file.sync_all()?;
    std::fs::File::open(dir)?.sync_all()?;
    let started = Instant::now();
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let began = Instant::now();
        file.write_all(&[b'x'; 1024])?;
        file.sync_data()?;
        samples.push(began.elapsed());
    }
    let wall = started.elapsed();
    std::fs::remove_file(&path)?;
    Ok((samples, wall))
}

/// The machine's own cost of one durable small file, measured in `dir`.
fn bare_fsyncs(dir: &std::path::Path, count: usize) -> std::io::Result<(Vec<Duration>, Duration)> {
    use std::io::Write;
    let started = Instant::now();
    let directory = std::fs::File::open(dir)?;
    let mut samples = Vec::with_capacity(count);
    for serial in 0..count {
        let began = Instant::now();
        let path = dir.join(format!("fsync-probe-{serial}"));
        let mut file = std::fs::File::create(&path)?;
        file.write_all(&[b'x'; 1024])?;
        file.sync_all()?;
        directory.sync_all()?;
        samples.push(began.elapsed());
        std::fs::remove_file(&path)?;
    }
    Ok((samples, started.elapsed()))
}
