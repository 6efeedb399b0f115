//! The embedded embedder against its reference runtime: Engram's
//! all-MiniLM-L6-v2 (candle, in process) and sentence-transformers on
//! PyTorch (CPU, a child process, see [`reference`]) embed the same bench
//! sentences from the same model directory, with the same number of
//! threads, one sentence per call and in calls of 32, in the same run.
//!
//! Before anything is timed, both embed every sentence and each of
//! Engram's vectors (one at a time and batched) must be within cosine
//! 0.9999 of the reference's. Then each round times both runtimes over
//! every sentence at each batch size, the two taking turns to go first so
//! that a change in the machine's load falls on both. The figures are the
//! mean time per sentence over all rounds and Engram's time over the
//! reference's; the load average beside them says how busy the machine was.

mod reference;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use engram::embed::local::{LocalEmbedder, Source};

use crate::corpus;
use crate::measure::{self, Report, Row};
use crate::workload::Result;

use reference::{Pass, Reference};

/// Vectors must agree at least this well before timings count.
const MIN_COSINE: f32 = 0.9999;
const BATCHES: [usize; 2] = [1, 32];

#[derive(clap::Args)]
pub struct Settings {
    /// Sentences from the bench corpus, each embedded once per round and
    /// batch size by each runtime.
    #[arg(long, default_value_t = 320)]
    sentences: usize,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The reference's virtual environment, created and filled on first use.
    #[arg(long, default_value = reference::DEFAULT_VENV)]
    venv: PathBuf,
}

pub async fn embedref(report: &mut Report, settings: Settings) -> Result {
    let measured = tokio::task::spawn_blocking(move || measure(&settings)).await??;
    report.rows.extend(measured.rows);
    report.figures.extend(measured.figures);
    Ok(())
}

/// Writes the bundled model's files into `<venv>/model` for the reference
/// to read, and returns that directory; both runtimes then load it.
fn unpack_bundled(venv: &std::path::Path) -> Result<PathBuf> {
    let files = engram_model::BUNDLED.ok_or("no model was bundled at build time")?;
    let dir = venv.join("model");
    std::fs::create_dir_all(&dir)?;
    for (file, bytes) in [
        (engram_model::pinned::CONFIG, files.config),
        (engram_model::pinned::TOKENIZER, files.tokenizer),
        (engram_model::pinned::WEIGHTS, files.weights),
    ] {
        std::fs::write(dir.join(file.name), bytes)?;
    }
    Ok(dir)
}

fn measure(settings: &Settings) -> Result<Report> {
    let model_dir = match std::env::var_os("ENGRAM_MODEL_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => unpack_bundled(&settings.venv)?,
    };
    let engram = LocalEmbedder::load(Source::Dir(&model_dir))?;
    // Candle runs each matrix product on rayon with this many threads; the
    // reference gets as many intra-op threads.
    let threads = candle_core::utils::get_num_threads();
    let mut python = Reference::start(&settings.venv, &model_dir, threads)?;
    let info = python.info()?;

    let mut rng = corpus::Rng::new(23);
    let texts: Vec<String> = (0..settings.sentences)
        .map(|serial| corpus::sentence(&mut rng, serial))
        .collect();

    let mut report = Report::default();
    report.figure("load average (1 min) at the start", load_average(), "");
    report.figure("candle threads (Engram)", count(threads), "");
    report.figure(
        "torch intra-op threads (reference)",
        count(info.threads),
        "",
    );
    report.figure(
        "torch inter-op threads (reference)",
        count(info.interop_threads),
        "",
    );
    check_agreement(&mut report, &engram, &mut python, &texts)?;

    let mut engram_passes: [Vec<Pass>; 2] = Default::default();
    let mut python_passes: [Vec<Pass>; 2] = Default::default();
    for round in 0..settings.rounds {
        for (slot, batch) in BATCHES.into_iter().enumerate() {
            if round % 2 == 0 {
                python_passes[slot].push(python.time(&texts, batch)?);
                engram_passes[slot].push(time_engram(&engram, &texts, batch)?);
            } else {
                engram_passes[slot].push(time_engram(&engram, &texts, batch)?);
                python_passes[slot].push(python.time(&texts, batch)?);
            }
        }
    }

    let reference_name = format!(
        "sentence-transformers {} (torch {}, {})",
        info.sentence_transformers, info.torch, info.cpu_capability
    );
    for (slot, batch) in BATCHES.into_iter().enumerate() {
        let detail = format!("batch {batch}, per call, {} rounds", settings.rounds);
        let ours = Totals::of(&engram_passes[slot], texts.len());
        let theirs = Totals::of(&python_passes[slot], texts.len());
        report.rows.push(ours.row("Engram (candle)", &detail));
        report.rows.push(theirs.row(&reference_name, &detail));
        for (runtime, totals) in [("Engram", &ours), ("reference", &theirs)] {
            report.figure(
                format!("{runtime}, ms per sentence, batch {batch}"),
                totals.wall_ms_per_sentence(),
                "ms",
            );
            report.figure(
                format!("{runtime}, CPU ms per sentence (all threads), batch {batch}"),
                totals.cpu_ms_per_sentence(),
                "ms",
            );
        }
        report.figure(
            format!("Engram / reference, wall time, batch {batch} (below 1: Engram faster)"),
            ours.wall_ms_per_sentence() / theirs.wall_ms_per_sentence(),
            "",
        );
    }
    report.figure("load average (1 min) at the end", load_average(), "");
    Ok(report)
}

/// Embeds every text with both runtimes and fails unless each of Engram's
/// vectors, one sentence per call and batched, is within [`MIN_COSINE`]
/// of the reference's.
fn check_agreement(
    report: &mut Report,
    engram: &LocalEmbedder,
    python: &mut Reference,
    texts: &[String],
) -> Result {
    let theirs = python.embed(texts, BATCHES[1])?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batched = engram.embed(&refs)?;
    let mut one_by_one = Vec::with_capacity(texts.len());
    for text in &refs {
        one_by_one.extend(engram.embed(std::slice::from_ref(text))?);
    }
    for (label, ours) in [("one at a time", one_by_one), ("batched", batched)] {
        let lowest = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| cosine(a, b))
            .fold(f32::INFINITY, f32::min);
        report.figure(
            format!("1 - lowest cosine to the reference, Engram {label}"),
            f64::from(1.0 - lowest),
            "",
        );
        if lowest < MIN_COSINE || ours.len() != theirs.len() {
            return Err(format!(
                "Engram's vectors ({label}) disagree with the reference: lowest cosine \
                 {lowest}, {} vectors against {}",
                ours.len(),
                theirs.len()
            )
            .into());
        }
    }
    Ok(())
}

/// Times Engram's `embed` over `texts` in calls of `batch` texts.
fn time_engram(engram: &LocalEmbedder, texts: &[String], batch: usize) -> Result<Pass> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut seconds = Vec::with_capacity(refs.len().div_ceil(batch));
    let cpu_began = measure::cpu_time();
    for chunk in refs.chunks(batch) {
        let began = Instant::now();
        engram.embed(chunk)?;
        seconds.push(began.elapsed().as_secs_f64());
    }
    Ok(Pass {
        seconds,
        cpu_seconds: measure::cpu_time().saturating_sub(cpu_began).as_secs_f64(),
    })
}

/// One runtime's passes at one batch size, added up.
struct Totals {
    calls: Vec<Duration>,
    sentences: usize,
    wall_seconds: f64,
    cpu_seconds: f64,
}

impl Totals {
    /// `passes` over `texts` sentences each.
    fn of(passes: &[Pass], texts: usize) -> Self {
        let seconds = passes.iter().flat_map(|pass| pass.seconds.iter().copied());
        Self {
            calls: seconds.clone().map(Duration::from_secs_f64).collect(),
            sentences: texts * passes.len(),
            wall_seconds: seconds.sum(),
            cpu_seconds: passes.iter().map(|pass| pass.cpu_seconds).sum(),
        }
    }

    fn row(&self, runtime: &str, detail: &str) -> Row {
        let mut calls = self.calls.clone();
        Row::from_samples(
            runtime,
            detail,
            &mut calls,
            Duration::from_secs_f64(self.wall_seconds),
        )
    }

    fn wall_ms_per_sentence(&self) -> f64 {
        self.wall_seconds * 1000.0 / count(self.sentences)
    }

    fn cpu_ms_per_sentence(&self) -> f64 {
        self.cpu_seconds * 1000.0 / count(self.sentences)
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

#[expect(clippy::cast_precision_loss, reason = "small counts")]
fn count(n: usize) -> f64 {
    n as f64
}

/// The one-minute load average (Linux; 0 elsewhere).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or_default()
}
