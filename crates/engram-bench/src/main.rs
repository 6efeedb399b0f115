//! `engram-bench`: how fast Engram is, measured from the repository.
//!
//! Every workload runs the real service in process on a real loopback port
//! and drives it over HTTP. Upstreams are either a fake OpenAI-compatible
//! server that answers at once (so the figures are Engram's own overhead)
//! or the embedded local model. Corpora are synthetic and seeded, so runs
//! are comparable. Prints a markdown table, or JSON with `--json`.

mod abuse;
mod backfill;
mod bulk;
mod capture_cost;
mod clients;
mod corpus;
mod databases;
mod drift;
mod dump;
mod embedding;
mod embedref;
mod floor;
mod freshness;
mod guard;
mod injection;
mod locomo;
mod longmemeval;
mod mcp;
mod measure;
mod paraphrase;
mod process;
mod reads;
mod replicas;
mod resident;
mod scale;
mod scan;
mod scratch;
mod semantic;
mod server;
mod soak;
mod sync;
mod workload;
mod writes;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use measure::Report;
use workload::{EmbedderChoice, Result, Weighing};

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
    /// Whether what is injected stays true while the code moves: a git
    /// repository evolves over 100 commits under its memories; stale
    /// share, right answers and tokens injected before and after
    /// `engram check` and retention, invalidation along links, and the
    /// check's time (needs the release `engram` binary beside this one).
    Drift(drift::Settings),
    /// `POST /retrieve` in query mode over stores of each size.
    Retrieve {
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
        memories: Vec<usize>,
        #[arg(long, default_value_t = 500)]
        requests: usize,
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Fake)]
        embedder: EmbedderChoice,
    },
    /// The vector search at scale: one namespace of each size, through
    /// the index directly (build time, latency, recall@10 against the
    /// exact scan) and through the service (vector-only retrievals'
    /// `timings_ms.search`).
    Scale(scale::Settings),
    /// Memory follows use: a namespace's load back into memory, resident
    /// memory and retrievals over a skewed mix of hot and cold
    /// namespaces under `index.max_memory_mb` (fake embedder, files mode).
    Resident(resident::Settings),
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
    /// Writing in bulk, one client, the fake embedder: memories/s one at
    /// a time (`POST /memories`) and in batches of 100 and 1,000
    /// (`POST /memories/batch`), each durable before its answer.
    Bulk {
        /// Memories written in each batch size.
        #[arg(long, default_value_t = 20_000)]
        memories: usize,
        /// Memories written one at a time (at most `--memories`).
        #[arg(long, default_value_t = 2_000)]
        single: usize,
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
        #[command(flatten)]
        weighing: Weighing,
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
        /// The fused run's weights.
        #[command(flatten)]
        weighing: Weighing,
        /// Also write the fused run's candidates and their evidence here
        /// (JSON lines), for replaying fusion variants offline.
        #[arg(long)]
        dump: Option<PathBuf>,
    },
    /// What the vector search's floor (`retrieval.min_similarity`) costs
    /// and saves on the semantic set and the coding set: prompts whose
    /// memory falls under each floor, other memories over it, R@5.
    Floor {
        #[arg(long, value_enum, default_value_t = EmbedderChoice::Local)]
        embedder: EmbedderChoice,
    },
    /// The consolidation pass's thresholds on the paraphrase set
    /// (`paraphrase_pairs.jsonl`), with the embedded model: precision,
    /// recall and F1 of merging at each duplicate threshold, the one
    /// chosen, and what each subject threshold flags as contradictions.
    Paraphrase,
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
    /// What the agent hooks inject over a scripted 50-prompt coding
    /// session whose needed memories are known: tokens per session and
    /// per prompt, and the share of prompts whose needed memories were in
    /// the context, before (no session) and after (per session, a brief
    /// at the start) for each `inject` setting measured.
    Injection(injection::Settings),
    /// The secret guard, line by line, on conversations, code and a
    /// fixture of secrets: lines flagged, the rate, and each flagged line.
    Guard(guard::Settings),
    /// `engram import claude-code` over generated sessions: time, the
    /// compactions sent, tokens estimated against tokens spent.
    Backfill {
        #[arg(long, default_value_t = 200)]
        sessions: usize,
    },
    /// Replicas over PostgreSQL, as real `engram` processes: a write on
    /// one found on another, retrieval and capture beside files mode,
    /// throughput with one and two replicas, a replica's start over a
    /// large store. Starts a throwaway PostgreSQL unless `DATABASE_URL`
    /// names one.
    Replicas(replicas::Settings),
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
            Command::Embed { sentences } => embedding::embed(&mut report, sentences).await,
            Command::Embedref(settings) => embedref::embedref(&mut report, settings).await,
            Command::Drift(settings) => drift::drift(&mut report, &settings).await,
            Command::Retrieve {
                memories,
                requests,
                embedder,
            } => {
                for size in memories {
                    reads::retrieve(&mut report, size, requests, embedder).await?;
                }
                Ok(())
            }
            Command::Scale(settings) => scale::scale(&mut report, &settings).await,
            Command::Resident(settings) => resident::resident(&mut report, &settings).await,
            Command::Startup { memories, embedder } => {
                reads::startup(&mut report, memories, embedder).await
            }
            Command::Freshness { backlogs, embedder } => {
                freshness::freshness(&mut report, &backlogs, embedder).await
            }
            Command::Sync {
                rounds,
                bulk,
                embedder,
            } => sync::sync(&mut report, rounds, bulk, embedder).await,
            Command::Write { requests } => writes::write(&mut report, requests).await,
            Command::Turns { requests } => writes::turns(&mut report, requests).await,
            Command::Bulk { memories, single } => bulk::bulk(&mut report, memories, single).await,
            Command::Soak { seconds } => soak::soak(&mut report, seconds).await,
            Command::Abuse { only, settings } => abuse::abuse(&mut report, &only, &settings).await,
            Command::Locomo {
                split,
                data,
                embedder,
                out,
                weighing,
                dump,
            } => {
                let dump = dump.as_deref();
                locomo::locomo(&mut report, split, &data, embedder, out, weighing, dump).await
            }
            Command::Longmemeval(settings) => longmemeval::longmemeval(&mut report, settings).await,
            Command::Semantic {
                embedder,
                weighing,
                dump,
            } => semantic::semantic(&mut report, embedder, weighing, dump.as_deref()).await,
            Command::Floor { embedder } => floor::floor(&mut report, embedder).await,
            Command::Paraphrase => paraphrase::paraphrase(&mut report).await,
            Command::Mcp { memories, requests } => mcp::mcp(&mut report, memories, requests).await,
            Command::Guard(settings) => guard::guard(&mut report, &settings),
            Command::CaptureCost => capture_cost::capture_cost(&mut report).await,
            Command::Injection(settings) => injection::injection(&mut report, &settings).await,
            Command::Backfill { sessions } => backfill::backfill(&mut report, sessions).await,
            Command::Replicas(settings) => replicas::replicas(&mut report, &settings).await,
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
    embedding::embed(report, 256).await?;
    for size in [1000, 10_000, 100_000] {
        reads::retrieve(report, size, 500, EmbedderChoice::Fake).await?;
    }
    reads::retrieve(report, 10_000, 300, EmbedderChoice::Local).await?;
    writes::write(report, 1000).await?;
    writes::turns(report, 4000).await?;
    reads::startup(report, 10_000, EmbedderChoice::Local).await
}
