//! The soak: a bounded mixed load on loopback (writes, captures,
//! retrievals, deletes from many clients at once) that stops by itself,
//! then checks that everything accepted is accounted for, memory use
//! settled, and the service still answers.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::corpus;
use crate::measure::{self, Report, Row};
use crate::scratch::ScratchDir;
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};

/// Clients of each kind.
const CLIENTS_PER_KIND: usize = 4;

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    errors: AtomicU64,
    triggers_accepted: AtomicU64,
    /// Turns refused because the capture queue was full: by design.
    triggers_dropped: AtomicU64,
    /// Ids written and not deleted by the soak.
    live: Mutex<HashSet<String>>,
    deleted: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

pub async fn soak(report: &mut Report, seconds: u64) -> Result {
    let dir = ScratchDir::new()?;
    let (server, _) = Server::start(dir.path(), EmbedderChoice::Fake).await?;
    let client = server.client();
    let tally = Arc::new(Tally::default());
    let rss_start = measure::resident_mib();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let warm_until = Instant::now() + Duration::from_secs(seconds / 4);
    let rss_after_warmup = Arc::new(Mutex::new(0.0));

    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..CLIENTS_PER_KIND * 4 {
        let (client, tally, rss) = (client.clone(), tally.clone(), rss_after_warmup.clone());
        tasks.spawn(async move {
            let mut rng = corpus::Rng::new(1000 + worker as u64);
            let mut serial = 0;
            while Instant::now() < deadline {
                serial += 1;
                let started = Instant::now();
                let outcome = match worker % 4 {
                    0 => {
                        let body = json!({"repo": format!("soak{}", worker % 3), "scope": "repo",
                            "category": "patterns", "content": corpus::sentence(&mut rng, serial)});
                        client.send("POST", "/memories", Some(&body)).await.map(|(status, answer)| {
                            if status == 201 {
                                let id = answer["id"].as_str().unwrap_or_default().to_owned();
                                Some(("created", id))
                            } else {
                                None
                            }
                        })
                    }
                    1 => {
                        let body = json!({"session_id": format!("w{worker}-s{}", serial % 7),
                            "repo": format!("soak{}", worker % 3),
                            "messages": [{"role": "user", "content": corpus::sentence(&mut rng, serial)}]});
                        client.send("POST", "/turns", Some(&body)).await.map(|(status, answer)| {
                            match (status, answer["status"].as_str()) {
                                (202, Some("dropped")) => Some(("dropped", String::new())),
                                (202, _) => Some(("triggered", String::new())),
                                _ => None,
                            }
                        })
                    }
                    2 => {
                        let body = json!({"turn_id": format!("w{worker}-{serial}"), "repo": format!("soak{}", worker % 3),
                            "query": corpus::query(&mut rng)});
                        client.send("POST", "/retrieve", Some(&body)).await.map(|(status, _)| (status == 200).then(|| ("ok", String::new())))
                    }
                    _ => {
                        // Taken out of the live set first, so no two deleters race.
                        let victim = {
                            let mut live = tally.live.lock().await;
                            let victim = live.iter().next().cloned();
                            if let Some(id) = &victim {
                                live.remove(id);
                            }
                            victim
                        };
                        match victim {
                            Some(id) => client.send("DELETE", &format!("/memories/{id}"), None).await.map(|(status, _)| {
                                if status == 204 {
                                    Some(("deleted", id))
                                } else {
                                    Some(("not deleted", id))
                                }
                            }),
                            None => {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                continue;
                            }
                        }
                    }
                };
                let took = started.elapsed();
                tally.requests.fetch_add(1, Ordering::Relaxed);
                tally.latencies.lock().await.push(took);
                match outcome {
                    Ok(Some(("created", id))) => {
                        tally.live.lock().await.insert(id);
                    }
                    Ok(Some(("deleted", _))) => {
                        tally.deleted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(("not deleted", id))) => {
                        tally.live.lock().await.insert(id);
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(("triggered", _))) => {
                        tally.triggers_accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(("dropped", _))) => {
                        tally.triggers_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if Instant::now() > warm_until {
                    let mut rss = rss.lock().await;
                    if *rss == 0.0 {
                        *rss = measure::resident_mib();
                    }
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done?;
    }
    let wall = Duration::from_secs(seconds);

    // Accounting: the queue drains, every live write is there, every
    // accepted trigger was processed or replaced by a newer one.
    let stats = drained(&client).await?;
    let capture = &stats["capture"];
    let accepted = capture["accepted"].as_u64().unwrap_or_default();
    let settled = capture["processed"].as_u64().unwrap_or_default()
        + capture["coalesced"].as_u64().unwrap_or_default()
        + capture["failed"].as_u64().unwrap_or_default();
    if accepted != tally.triggers_accepted.load(Ordering::Relaxed) || settled != accepted {
        return Err(format!("capture does not add up: {capture}").into());
    }
    let live = tally.live.lock().await.clone();
    for id in &live {
        let (status, _) = client.send("GET", &format!("/memories/{id}"), None).await?;
        if status != 200 {
            return Err(format!("written memory {id} is missing ({status})").into());
        }
    }
    let (status, _) = client.send("GET", "/healthz", None).await?;
    if status != 200 {
        return Err("the service stopped answering".into());
    }

    let mut latencies = std::mem::take(&mut *tally.latencies.lock().await);
    report.rows.push(Row::from_samples(
        "soak, mixed load, 16 clients",
        format!("{seconds} s"),
        &mut latencies,
        wall,
    ));
    report.figure(
        "soak requests",
        tally.requests.load(Ordering::Relaxed) as f64,
        "",
    );
    report.figure(
        "soak errors",
        tally.errors.load(Ordering::Relaxed) as f64,
        "",
    );
    report.figure(
        "soak memories written and kept (all found)",
        live.len() as f64,
        "",
    );
    report.figure(
        "soak memories deleted",
        tally.deleted.load(Ordering::Relaxed) as f64,
        "",
    );
    report.figure(
        "soak triggers accepted (all processed or coalesced)",
        accepted as f64,
        "",
    );
    report.figure(
        "soak turns dropped on a full queue (by design)",
        tally.triggers_dropped.load(Ordering::Relaxed) as f64,
        "",
    );
    report.figure(
        "memories in the store at the end",
        stats["store"]["memories"].as_f64().unwrap_or_default(),
        "",
    );
    report.figure(
        "soak memories written by capture",
        capture["written"].as_f64().unwrap_or_default(),
        "",
    );
    report.figure("resident memory at start", rss_start, "MiB");
    report.figure(
        "resident memory after a quarter of the run",
        *rss_after_warmup.lock().await,
        "MiB",
    );
    report.figure("resident memory at the end", measure::resident_mib(), "MiB");
    server.stop().await;
    Ok(())
}

/// `/stats` once the capture queue is empty and the index caught up.
async fn drained(client: &crate::server::Client) -> Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, stats) = client.send("GET", "/stats", None).await?;
        if stats["capture"]["queue_depth"] == 0 && stats["index"]["pending"] == 0 {
            return Ok(stats);
        }
        if Instant::now() > deadline {
            return Err(format!("the queue never drained: {stats}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
