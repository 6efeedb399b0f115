//! Writes: `POST /memories` one at a time, and capture triggers accepted
//! from many clients beside the disk's own cost of a durable write.

use std::time::{Duration, Instant};

use engram::memory::Namespace;
use serde_json::json;

use crate::clients::{CONCURRENT_CLIENTS, concurrent};
use crate::corpus;
use crate::measure::{Report, Row};
use crate::scratch::{ScratchDir, write_corpus};
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};

pub async fn write(report: &mut Report, requests: usize) -> Result {
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
pub async fn turns(report: &mut Report, requests: usize) -> Result {
    let dir = ScratchDir::new()?;
    // A queue large enough that every trigger is stored (and fsynced).
    let (server, _) = Server::start_with(dir.path(), EmbedderChoice::Fake, |config| {
        config.capture.queue_capacity = 100_000;
    })
    .await?;
    let client = server.client();
    let bodies = corpus::turns(requests);
    let (samples, wall) = concurrent(
        std::slice::from_ref(&client),
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
pub fn bare_appends(
    dir: &std::path::Path,
    count: usize,
) -> std::io::Result<(Vec<Duration>, Duration)> {
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
pub fn bare_fsyncs(
    dir: &std::path::Path,
    count: usize,
) -> std::io::Result<(Vec<Duration>, Duration)> {
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
