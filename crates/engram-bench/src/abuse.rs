//! The abuse workload: bounded hostile loads on loopback, each against a
//! fresh service, that stop by themselves. For each: resident memory and
//! open descriptors of the process (the service runs in it) before, at the
//! peak and after, while a watchdog asks `/healthz` every 100 ms on a fresh
//! connection; one answer missing for 1 s fails the run (after the
//! workload has finished, so its figures are complete).
//!
//! - idle connections: hundreds of sockets that never send a byte;
//! - cache growth: many distinct turns with `top_k` 1000 and a 128,000-token
//!   budget over a few hundred long memories;
//! - compaction flood: hundreds of 200 KB compactions from one session and
//!   from many;
//! - oversized upstream: a chat model whose replies are hundreds of MB.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use engram::memory::Namespace;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::corpus;
use crate::measure::{self, Report};
use crate::scratch::ScratchDir;
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};
use engram_fake_upstream as upstream;

/// One abuse, run on its own service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Abuse {
    Idle,
    Cache,
    Compactions,
    Oversized,
}

/// How hard each abuse pushes.
#[derive(clap::Args)]
pub struct Settings {
    /// Silent sockets opened by the idle abuse.
    #[arg(long, default_value_t = 400)]
    pub idle_sockets: usize,
    /// Memories of 7,000 characters the cache abuse retrieves from.
    #[arg(long, default_value_t = 300)]
    pub long_memories: usize,
    /// Distinct turn ids the cache abuse retrieves for.
    #[arg(long, default_value_t = 300)]
    pub distinct_turns: usize,
    /// Compactions of 200 KB per flood.
    #[arg(long, default_value_t = 300)]
    pub compactions: usize,
    /// The size of each oversized upstream reply, in MiB.
    #[arg(long, default_value_t = 300)]
    pub reply_mib: usize,
    /// Resident memory (MiB) past which a workload stops and the run fails.
    #[arg(long, default_value_t = 4096.0)]
    pub rss_ceiling_mib: f64,
    /// Clients sending at once in the cache and compaction abuses.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
}

/// The connection cap and header timeout the idle abuse runs with, so the
/// cap is reached and the timeout seen within seconds.
const IDLE_CAP: usize = 256;
const IDLE_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long `/healthz` may take before the service counts as not answering.
const HEALTH_LIMIT: Duration = Duration::from_secs(1);
const WATCH_EVERY: Duration = Duration::from_millis(100);
/// The size of one compaction's window.
const COMPACTION_BYTES: usize = 200 * 1024;

pub async fn abuse(report: &mut Report, abuses: &[Abuse], settings: &Settings) -> Result {
    let mut failures = Vec::new();
    for abuse in abuses {
        let outcome = match abuse {
            Abuse::Idle => idle(report, settings).await,
            Abuse::Cache => cache(report, settings).await,
            Abuse::Compactions => compactions(report, settings).await,
            Abuse::Oversized => oversized(report, settings).await,
        };
        if let Err(err) = outcome {
            eprintln!("engram-bench: abuse {abuse:?} failed: {err}");
            failures.push(format!("{abuse:?}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("abuses failed: {}", failures.join(", ")).into())
    }
}

/// Hundreds of sockets that connect and say nothing, past the cap.
async fn idle(report: &mut Report, settings: &Settings) -> Result {
    let dir = ScratchDir::new()?;
    let (server, _) = Server::start_with(dir.path(), EmbedderChoice::Fake, |config| {
        config.limits.max_connections = IDLE_CAP;
        config.limits.body_timeout_ms =
            u64::try_from(IDLE_HEADER_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
    })
    .await?;
    let watch = Watch::start(&server.client(), settings.rss_ceiling_mib);
    let addr = server
        .client()
        .base_url()
        .trim_start_matches("http://")
        .to_owned();
    let mut sockets = Vec::with_capacity(settings.idle_sockets);
    for _ in 0..settings.idle_sockets {
        sockets.push(TcpStream::connect(&addr).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let opened = watch.sample();
    // Every socket must be closed by the server: displaced at the cap, or
    // after the header timeout.
    let wait_until = Instant::now() + IDLE_HEADER_TIMEOUT * 3;
    let mut closed = 0;
    for socket in &sockets {
        let left = wait_until.saturating_duration_since(Instant::now());
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(left, upstream::read_some(socket, &mut byte)).await
        {
            closed += 1;
        }
    }
    drop(sockets);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let name = format!(
        "idle: {} silent sockets, cap {IDLE_CAP}",
        settings.idle_sockets
    );
    report.figure(
        format!("{name}: resident memory with all open"),
        opened.rss_mib,
        "MiB",
    );
    report.figure(
        format!("{name}: open fds with all open"),
        opened.fds as f64,
        "",
    );
    report.figure(format!("{name}: closed by the server"), closed as f64, "");
    let outcome = watch.finish(report, &name).await;
    server.stop().await;
    outcome?;
    if closed < settings.idle_sockets {
        return Err(format!(
            "{} idle sockets were never closed",
            settings.idle_sockets - closed
        )
        .into());
    }
    Ok(())
}

/// Distinct turns that each cache a huge answer.
async fn cache(report: &mut Report, settings: &Settings) -> Result {
    let dir = ScratchDir::new()?;
    let namespace = Namespace::Repo("abuse".parse()?);
    let mut memories = corpus::memories(&namespace, settings.long_memories, 23);
    let mut rng = corpus::Rng::new(29);
    for (serial, memory) in memories.iter_mut().enumerate() {
        let mut content = String::new();
        while content.len() < 7_000 {
            content.push_str(&corpus::sentence(&mut rng, serial));
            content.push(' ');
        }
        memory.content = content.trim_end().to_owned();
    }
    crate::scratch::write_memories(dir.path(), &namespace, &memories)?;
    let (server, _) = Server::start(dir.path(), EmbedderChoice::Fake).await?;
    let watch = Watch::start(&server.client(), settings.rss_ceiling_mib);
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..settings.clients {
        let (http, next, stop) = (server.client(), next.clone(), watch.stop.clone());
        let turns = settings.distinct_turns;
        clients.spawn(async move {
            let mut rng = corpus::Rng::new(31 + client as u64);
            let mut statuses = BTreeMap::<u16, usize>::new();
            while !stop.is_cancelled() {
                let turn = next.fetch_add(1, Ordering::Relaxed);
                if turn >= turns {
                    break;
                }
                let body = json!({"turn_id": format!("abuse-{turn}"), "repo": "abuse",
                    "query": corpus::query(&mut rng), "top_k": 1000, "token_budget": 128_000});
                let status = http.status_of("POST", "/retrieve", &body).await?;
                *statuses.entry(status).or_default() += 1;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(statuses)
        });
    }
    let statuses = join_statuses(clients).await?;
    let name = format!(
        "cache: {} distinct turns, top_k 1000, 128,000 tokens, {} memories of 7,000 chars",
        settings.distinct_turns, settings.long_memories
    );
    report_statuses(report, &name, &statuses);
    let outcome = watch.finish(report, &name).await;
    server.stop().await;
    outcome
}

/// 200 KB compactions from one session, then from as many sessions.
async fn compactions(report: &mut Report, settings: &Settings) -> Result {
    for many_sessions in [false, true] {
        let dir = ScratchDir::new()?;
        let (server, _) = Server::start(dir.path(), EmbedderChoice::Fake).await?;
        let watch = Watch::start(&server.client(), settings.rss_ceiling_mib);
        let window = compaction_window();
        let next = Arc::new(AtomicUsize::new(0));
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..settings.clients {
            let (http, next, stop) = (server.client(), next.clone(), watch.stop.clone());
            let (window, count) = (window.clone(), settings.compactions);
            clients.spawn(async move {
                let mut statuses = BTreeMap::<u16, usize>::new();
                while !stop.is_cancelled() {
                    let serial = next.fetch_add(1, Ordering::Relaxed);
                    if serial >= count {
                        break;
                    }
                    let session = if many_sessions {
                        format!("s-{serial}")
                    } else {
                        "s-one".to_owned()
                    };
                    let body = json!({"session_id": session, "repo": "abuse", "messages": window});
                    let status = http.status_of("POST", "/compactions", &body).await?;
                    *statuses.entry(status).or_default() += 1;
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(statuses)
            });
        }
        let statuses = join_statuses(clients).await?;
        let sessions = if many_sessions {
            "as many sessions"
        } else {
            "one session"
        };
        let name = format!(
            "compactions: {} of 200 KB from {sessions}",
            settings.compactions
        );
        report_statuses(report, &name, &statuses);
        let drained = drain(&server.client(), &watch.stop, Duration::from_secs(120)).await?;
        report.figure(
            format!("{name}: queue depth after up to 120 s"),
            drained,
            "",
        );
        let outcome = watch.finish(report, &name).await;
        server.stop().await;
        outcome?;
    }
    Ok(())
}

/// A chat model whose every reply is `reply_mib` MiB: once for HyDE on
/// the request path, once for the classifier in the background.
async fn oversized(report: &mut Report, settings: &Settings) -> Result {
    let dir = ScratchDir::new()?;
    let huge = upstream::start_oversized(settings.reply_mib * 1024 * 1024).await;
    let (server, _) = Server::start_with(dir.path(), EmbedderChoice::Fake, |config| {
        if let Some(llm) = &mut config.llm {
            llm.base_url = huge;
        }
    })
    .await?;
    let watch = Watch::start(&server.client(), settings.rss_ceiling_mib);
    let client = server.client();
    let retrieval = json!({"turn_id": "huge", "repo": "abuse",
        "messages": [{"role": "user", "content": "What do we use for builds?"}]});
    let (status, answer) = client.send("POST", "/retrieve", Some(&retrieval)).await?;
    report.figure(
        format!(
            "oversized: HyDE with a {} MiB reply answered {status}, degraded {}",
            settings.reply_mib, answer["degraded"]
        ),
        1.0,
        "",
    );
    let turn = json!({"session_id": "huge", "repo": "abuse",
        "messages": [{"role": "user", "content": "We build with cargo."}]});
    let (status, _) = client.send("POST", "/turns", Some(&turn)).await?;
    report.figure(format!("oversized: turn accepted with {status}"), 1.0, "");
    let depth = drain(&client, &watch.stop, Duration::from_secs(120)).await?;
    let name = format!("oversized: {} MiB chat replies", settings.reply_mib);
    report.figure(format!("{name}: queue depth after up to 120 s"), depth, "");
    let outcome = watch.finish(report, &name).await;
    server.stop().await;
    outcome
}

/// A conversation window of about [`COMPACTION_BYTES`].
fn compaction_window() -> Value {
    let mut rng = corpus::Rng::new(37);
    let mut messages = Vec::new();
    let mut size = 0;
    let mut serial = 0;
    while size < COMPACTION_BYTES {
        let mut text = String::new();
        while text.len() < 4_000 {
            text.push_str(&corpus::sentence(&mut rng, serial));
            text.push(' ');
            serial += 1;
        }
        size += text.len();
        let role = if messages.len() % 2 == 0 {
            "user"
        } else {
            "assistant"
        };
        messages.push(json!({"role": role, "content": text}));
    }
    Value::Array(messages)
}

async fn join_statuses(
    mut clients: tokio::task::JoinSet<Result<BTreeMap<u16, usize>>>,
) -> Result<BTreeMap<u16, usize>> {
    let mut statuses = BTreeMap::new();
    while let Some(done) = clients.join_next().await {
        for (status, count) in done?? {
            *statuses.entry(status).or_default() += count;
        }
    }
    Ok(statuses)
}

fn report_statuses(report: &mut Report, name: &str, statuses: &BTreeMap<u16, usize>) {
    for (status, count) in statuses {
        report.figure(format!("{name}: answered {status}"), *count as f64, "");
    }
}

/// Waits (at most `limit`, or until stopped) for the capture queue to
/// empty; the depth left.
async fn drain(client: &Client, stop: &CancellationToken, limit: Duration) -> Result<f64> {
    let deadline = Instant::now() + limit;
    loop {
        let (_, stats) = client.send("GET", "/stats", None).await?;
        let depth = stats["capture"]["queue_depth"].as_f64().unwrap_or_default();
        if depth == 0.0 || Instant::now() > deadline || stop.is_cancelled() {
            return Ok(depth);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Resident memory and open descriptors at one moment.
#[derive(Clone, Copy, Default)]
struct Sample {
    rss_mib: f64,
    fds: usize,
}

impl Sample {
    fn now() -> Self {
        Self {
            rss_mib: measure::resident_mib(),
            fds: measure::open_fds(),
        }
    }
}

/// What the watchdog saw.
#[derive(Default)]
struct Seen {
    peak: Sample,
    probes: usize,
    /// Probes not answered within [`HEALTH_LIMIT`].
    missed: usize,
    /// The slowest answered probe.
    slowest: Duration,
    /// Why the service counted as not answering, the first time it did.
    unanswered: Option<String>,
    /// Resident memory went past the ceiling.
    over_ceiling: Option<f64>,
}

/// Samples memory and descriptors and probes `/healthz` until finished;
/// cancels `stop` (so the workload winds down) when memory passes the
/// ceiling.
struct Watch {
    before: Sample,
    stop: CancellationToken,
    done: CancellationToken,
    task: JoinHandle<Seen>,
}

impl Watch {
    fn start(client: &Client, rss_ceiling_mib: f64) -> Self {
        measure::reset_peak_resident();
        let before = Sample::now();
        let (stop, done) = (CancellationToken::new(), CancellationToken::new());
        let url = format!("{}/healthz", client.base_url());
        let task = tokio::spawn(watch(url, rss_ceiling_mib, stop.clone(), done.clone()));
        Self {
            before,
            stop,
            done,
            task,
        }
    }

    fn sample(&self) -> Sample {
        Sample::now()
    }

    /// Stops watching, reports before, peak and after, and fails if the
    /// service stopped answering or memory passed the ceiling.
    async fn finish(self, report: &mut Report, name: &str) -> Result {
        self.done.cancel();
        let seen = self.task.await?;
        let after = Sample::now();
        let peak_rss = measure::peak_resident_mib().max(seen.peak.rss_mib);
        report.figure(
            format!("{name}: resident memory before"),
            self.before.rss_mib,
            "MiB",
        );
        report.figure(format!("{name}: resident memory at peak"), peak_rss, "MiB");
        report.figure(
            format!("{name}: resident memory after"),
            after.rss_mib,
            "MiB",
        );
        report.figure(
            format!("{name}: open fds before"),
            self.before.fds as f64,
            "",
        );
        report.figure(
            format!("{name}: open fds at peak"),
            seen.peak.fds as f64,
            "",
        );
        report.figure(format!("{name}: open fds after"), after.fds as f64, "");
        report.figure(format!("{name}: /healthz probes"), seen.probes as f64, "");
        report.figure(
            format!("{name}: /healthz probes not answered within 1 s"),
            seen.missed as f64,
            "",
        );
        report.figure(
            format!("{name}: slowest answered /healthz"),
            seen.slowest.as_secs_f64() * 1000.0,
            "ms",
        );
        if let Some(why) = seen.unanswered {
            return Err(format!(
                "{name}: /healthz did not answer within 1 s ({} times; first: {why})",
                seen.missed
            )
            .into());
        }
        if let Some(rss) = seen.over_ceiling {
            return Err(
                format!("{name}: resident memory reached {rss:.0} MiB, past the ceiling").into(),
            );
        }
        Ok(())
    }
}

async fn watch(
    url: String,
    rss_ceiling_mib: f64,
    stop: CancellationToken,
    done: CancellationToken,
) -> Seen {
    // A fresh connection per probe: a pooled one could hide a stalled
    // accept loop.
    let probe = match reqwest::Client::builder()
        .timeout(HEALTH_LIMIT)
        .pool_max_idle_per_host(0)
        .build()
    {
        Ok(probe) => probe,
        Err(err) => {
            stop.cancel();
            return Seen {
                unanswered: Some(format!("no probe client: {err}")),
                ..Seen::default()
            };
        }
    };
    let mut seen = Seen::default();
    let mut ticks = tokio::time::interval(WATCH_EVERY);
    while !done.is_cancelled() {
        tokio::select! {
            _ = ticks.tick() => {}
            () = done.cancelled() => break,
        }
        let sample = Sample::now();
        seen.peak.rss_mib = seen.peak.rss_mib.max(sample.rss_mib);
        seen.peak.fds = seen.peak.fds.max(sample.fds);
        if sample.rss_mib > rss_ceiling_mib && seen.over_ceiling.is_none() {
            seen.over_ceiling = Some(sample.rss_mib);
            stop.cancel();
        }
        seen.probes += 1;
        let asked = Instant::now();
        let answered = probe.get(&url).send().await;
        let took = asked.elapsed();
        let failure = match answered {
            Ok(response) if response.status().is_success() => {
                seen.slowest = seen.slowest.max(took);
                None
            }
            Ok(response) => Some(format!("answered {}", response.status())),
            Err(err) => Some(engram::causes::error_chain(&err)),
        };
        if let Some(failure) = failure {
            seen.missed += 1;
            seen.unanswered.get_or_insert(failure);
        }
    }
    seen
}
