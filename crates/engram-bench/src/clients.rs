//! Driving the service over HTTP from one client in turn or from many at
//! once, and what counts as a complete answer.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::server;
use crate::workload::Result;

/// Clients of the concurrency workloads.
pub const CONCURRENT_CLIENTS: usize = 32;

/// Sends `bodies` one after another; returns end-to-end latencies, the
/// server's own search times, and the wall time.
pub async fn sequential(
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

/// POSTs `bodies` to `path` from `clients` tasks at once, spread over
/// `targets` in turn (task i sends to target i mod their number), each
/// answer expected with `status`; returns each latency with what `keep` makes of
/// its answer (as it arrives, so that the bench holds no more of the
/// answers than it needs, and the resident memory after it is the
/// service's), and the wall time.
pub async fn concurrent<T: Send + 'static>(
    targets: &[server::Client],
    path: &'static str,
    status: u16,
    bodies: Vec<Value>,
    clients: usize,
    keep: fn(Value) -> Result<T>,
) -> Result<(Vec<(Duration, T)>, Duration)> {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    if targets.is_empty() {
        return Err("no service to send to".into());
    }
    for task in 0..clients {
        let (client, queue) = (targets[task % targets.len()].clone(), queue.clone());
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
pub fn check_answer(answer: &Value) -> Result {
    if answer["degraded"] != Value::Null || answer["memories"].as_array().is_none_or(Vec::is_empty)
    {
        return Err(format!("a retrieval came back degraded or empty: {answer}").into());
    }
    Ok(())
}
