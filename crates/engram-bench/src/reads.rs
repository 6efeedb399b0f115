//! Reads: retrieval latency from one client and throughput from many, at
//! several store sizes, and start-up over a stored corpus.

use std::time::Duration;

use engram::memory::Namespace;
use serde_json::{Value, json};

use crate::clients::{CONCURRENT_CLIENTS, check_answer, concurrent, sequential};
use crate::measure::{Report, Row};
use crate::scratch::{ScratchDir, write_corpus};
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};
use crate::{corpus, measure, scan};

pub async fn retrieve(
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
        std::slice::from_ref(&client),
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

pub async fn startup(report: &mut Report, size: usize, embedder: EmbedderChoice) -> Result {
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
