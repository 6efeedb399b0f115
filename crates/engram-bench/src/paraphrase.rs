//! The consolidation pass's thresholds, measured: `paraphrase_pairs.jsonl`
//! holds pairs of statements as coding agents store them (conventions,
//! preferences, decisions, facts about the user), each pair one of
//! - `paraphrase`: the same fact in other words, which a pass should
//!   reduce to one memory;
//! - `related`: two facts on one topic that both hold;
//! - `contradiction`: two statements on one subject that disagree, which
//!   a pass must never merge and should flag.
//!
//! Every statement is embedded with the embedded model (the default
//! embedder), and each pair's cosine similarity judged as the pass judges
//! it: a pair is merged when its similarity is at or above the duplicate
//! threshold and its words do not disagree
//! (`engram::consolidate::disagree`), and flagged when its similarity is
//! at or above the subject threshold and its words disagree.
//!
//! The figures: for each duplicate threshold, the precision, recall and
//! F1 of merging paraphrases, by cosine alone (as capture's near-duplicate
//! guard judges) and as the pass judges; the threshold chosen (the best
//! F1 of the pass among those that merge no pair that is not a
//! paraphrase); for each subject threshold, what the pass flags, and the
//! threshold chosen (the lowest that flags no paraphrase and no related
//! pair). The defaults of `consolidation.duplicate_threshold` and
//! `consolidation.subject_threshold` are the two chosen.
//!
//! The set is written for this repository; it is no benchmark's data.

use engram::consolidate::disagree::disagreement;
use engram::embed::Embedder;
use engram::index::cosine;
use serde::Deserialize;

use crate::measure::Report;
use crate::workload::Result;

const PAIRS: &str = include_str!("paraphrase_pairs.jsonl");

/// Duplicate thresholds measured, in hundredths.
const DUPLICATE_THRESHOLDS: std::ops::RangeInclusive<u32> = 70..=97;
/// Subject thresholds measured, in hundredths.
const SUBJECT_THRESHOLDS: [u32; 7] = [40, 50, 55, 60, 65, 70, 75];
/// Capture's near-duplicate guard (`capture.duplicate_threshold`).
const CAPTURE_THRESHOLD: u32 = 92;

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Paraphrase,
    Related,
    Contradiction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Pair {
    kind: Kind,
    a: String,
    b: String,
}

/// A pair as the measure sees it.
struct Judged {
    kind: Kind,
    similarity: f64,
    disagree: bool,
}

fn pairs() -> Result<Vec<Pair>> {
    PAIRS
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(Into::into))
        .collect()
}

/// Precision, recall and F1 of merging exactly the pairs `merged` admits.
fn scores(judged: &[Judged], merged: impl Fn(&Judged) -> bool) -> (f64, f64, f64) {
    let paraphrase = |pair: &&Judged| pair.kind == Kind::Paraphrase;
    let true_merges = judged
        .iter()
        .filter(paraphrase)
        .filter(|p| merged(p))
        .count();
    let merges = judged.iter().filter(|p| merged(p)).count();
    let paraphrases = judged.iter().filter(paraphrase).count();
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let ratio = |part: usize, whole: usize| {
        if whole == 0 {
            1.0
        } else {
            part as f64 / whole as f64
        }
    };
    let (precision, recall) = (ratio(true_merges, merges), ratio(true_merges, paraphrases));
    let f1 = if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    };
    (precision, recall, f1)
}

fn hundredths(value: u32) -> f64 {
    f64::from(value) / 100.0
}

pub async fn paraphrase(report: &mut Report) -> Result {
    let pairs = pairs()?;
    let embedder = engram::blocking::run(|| Embedder::from_config(&Default::default())).await?;
    let texts: Vec<String> = pairs
        .iter()
        .flat_map(|pair| [pair.a.clone(), pair.b.clone()])
        .collect();
    let vectors = embedder.embed(texts).await?;
    let judged: Vec<Judged> = pairs
        .iter()
        .zip(vectors.chunks(2))
        .map(|(pair, vectors)| Judged {
            kind: pair.kind,
            similarity: f64::from(cosine(&vectors[0], &vectors[1])),
            disagree: disagreement(&pair.a, &pair.b).is_some(),
        })
        .collect();
    for kind in [Kind::Paraphrase, Kind::Related, Kind::Contradiction] {
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let count = judged.iter().filter(|pair| pair.kind == kind).count() as f64;
        report.figure(format!("{kind:?} pairs"), count, "");
    }

    let mut chosen: Option<(u32, f64)> = None;
    for threshold in DUPLICATE_THRESHOLDS {
        let at = hundredths(threshold);
        let (precision, recall, f1) = scores(&judged, |pair| pair.similarity >= at);
        report.figure(
            format!("cosine ≥ {at:.2}: precision / recall / F1"),
            precision,
            &format!("/ {recall:.3} / {f1:.3}"),
        );
        let (precision, recall, f1) =
            scores(&judged, |pair| pair.similarity >= at && !pair.disagree);
        report.figure(
            format!("pass at {at:.2}: precision / recall / F1"),
            precision,
            &format!("/ {recall:.3} / {f1:.3}"),
        );
        if precision >= 1.0 && chosen.is_none_or(|(_, best)| f1 > best) {
            chosen = Some((threshold, f1));
        }
    }
    let (duplicate, _) = chosen.ok_or("no threshold merges paraphrases alone")?;
    report.figure("chosen duplicate threshold", hundredths(duplicate), "");
    let capture = hundredths(CAPTURE_THRESHOLD);
    let (precision, recall, f1) = scores(&judged, |pair| pair.similarity >= capture);
    report.figure(
        format!("capture's guard, cosine ≥ {capture:.2}: precision / recall / F1"),
        precision,
        &format!("/ {recall:.3} / {f1:.3}"),
    );

    let duplicate = hundredths(duplicate);
    let mut chosen_subject = None;
    for subject in SUBJECT_THRESHOLDS {
        let at = hundredths(subject);
        let flagged = |kind: Kind| {
            judged
                .iter()
                .filter(|pair| pair.kind == kind && pair.disagree && pair.similarity >= at)
                .count()
        };
        let (paraphrases, related) = (flagged(Kind::Paraphrase), flagged(Kind::Related));
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        report.figure(
            format!("subject ≥ {at:.2}: paraphrases / related / contradictions flagged"),
            paraphrases as f64,
            &format!("/ {related} / {}", flagged(Kind::Contradiction)),
        );
        if paraphrases + related == 0 && chosen_subject.is_none() {
            chosen_subject = Some(at);
        }
    }
    let chosen_subject =
        chosen_subject.ok_or("every subject threshold flags a pair that agrees")?;
    report.figure("chosen subject threshold", chosen_subject, "");
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let merged_contradictions = judged
        .iter()
        .filter(|pair| {
            pair.kind == Kind::Contradiction && pair.similarity >= duplicate && !pair.disagree
        })
        .count() as f64;
    report.figure(
        format!("contradictions merged at {duplicate:.2}"),
        merged_contradictions,
        "",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_holds_enough_pairs_of_each_kind() {
        let pairs = pairs().unwrap();
        let count = |kind| pairs.iter().filter(|pair| pair.kind == kind).count();
        assert!(count(Kind::Paraphrase) >= 60);
        assert!(count(Kind::Related) + count(Kind::Contradiction) >= 60);
        assert!(count(Kind::Contradiction) >= 30);
    }
}
