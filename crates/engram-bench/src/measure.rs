//! Latency samples, their percentiles, and the report: a table for people
//! and JSON for machines.

use std::time::Duration;

use serde::Serialize;

/// One measured operation.
#[derive(Debug, Serialize)]
pub struct Row {
    pub workload: String,
    pub detail: String,
    pub count: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// Operations per second over the whole run.
    pub per_second: f64,
}

impl Row {
    /// Percentiles of `samples`; `wall` is the run's duration, for throughput.
    pub fn from_samples(
        workload: &str,
        detail: impl Into<String>,
        samples: &mut [Duration],
        wall: Duration,
    ) -> Self {
        samples.sort();
        #[expect(clippy::cast_precision_loss, reason = "sample counts are small")]
        let per_second = samples.len() as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE);
        Self {
            workload: workload.to_owned(),
            detail: detail.into(),
            count: samples.len(),
            p50_ms: percentile(samples, 0.50),
            p95_ms: percentile(samples, 0.95),
            p99_ms: percentile(samples, 0.99),
            per_second,
        }
    }

    /// A single timing (start-up, say): every percentile is that one value.
    pub fn single(workload: &str, detail: impl Into<String>, took: Duration) -> Self {
        Self::from_samples(workload, detail, &mut [took], took)
    }
}

/// The nearest-rank percentile of sorted samples, in ms.
fn percentile(sorted: &[Duration], quantile: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an index into a small sample"
    )]
    let rank = ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

/// A value that is not a latency (memory use, a count).
#[derive(Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub figures: Vec<Figure>,
}

impl Report {
    pub fn figure(&mut self, name: impl Into<String>, value: f64, unit: &str) {
        self.figures.push(Figure {
            name: name.into(),
            value,
            unit: unit.to_owned(),
        });
    }

    pub fn print(&self, json: bool) {
        if json {
            match serde_json::to_string_pretty(self) {
                Ok(text) => println!("{text}"),
                Err(err) => eprintln!("engram-bench: {err}"),
            }
            return;
        }
        println!(
            "| workload | detail | n | p50 ms | p95 ms | p99 ms | per s |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |"
        );
        for row in &self.rows {
            println!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} |",
                row.workload,
                row.detail,
                row.count,
                row.p50_ms,
                row.p95_ms,
                row.p99_ms,
                row.per_second
            );
        }
        if !self.figures.is_empty() {
            println!("\n| figure | value |\n| --- | ---: |");
            for figure in &self.figures {
                println!(
                    "| {} | {} {} |",
                    figure.name,
                    readable(figure.value),
                    figure.unit
                );
            }
        }
    }
}

/// Whole numbers as they are, one decimal for large values, three for
/// small ones (ratios), scientific notation for tiny ones (a cosine's
/// distance from 1).
fn readable(value: f64) -> String {
    match value.abs() {
        _ if value.fract() == 0.0 => format!("{value}"),
        magnitude if magnitude >= 10.0 => format!("{value:.1}"),
        magnitude if magnitude >= 0.01 => format!("{value:.3}"),
        _ => format!("{value:.2e}"),
    }
}

/// This process's resident memory, in MiB (Linux; 0 elsewhere).
pub fn resident_mib() -> f64 {
    status_mib("VmRSS:")
}

/// This process's peak resident memory since the last
/// [`reset_peak_resident`], in MiB (Linux; 0 elsewhere).
pub fn peak_resident_mib() -> f64 {
    status_mib("VmHWM:")
}

/// Starts a new peak for [`peak_resident_mib`] (Linux 4.0 and later).
pub fn reset_peak_resident() {
    // Elsewhere the peak stays the process's; the sampled peak still counts.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// CPU time this process has used so far, on every thread, user and
/// system: the bench's own client and fake upstreams included.
pub fn cpu_time() -> Duration {
    let spent = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(spent.tv_sec).unwrap_or_default(),
        u32::try_from(spent.tv_nsec).unwrap_or_default(),
    )
}

/// This process's open file descriptors (Linux; 0 elsewhere).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// A `kB` line of `/proc/self/status`, in MiB.
fn status_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
