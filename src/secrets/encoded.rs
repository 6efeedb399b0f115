//! Secrets hidden in base64 (`QUtJQ…` for an AWS key id, `cGFzc3dvcmQ6…`
//! for "password: …"): runs of base64 that decode to text are searched
//! again, once, by the detectors. Binary (images in `data:` URIs, digests,
//! random tokens) does not decode to text and is left to the detectors.

use std::sync::LazyLock;

use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use regex::Regex;

use super::{Finding, plain_findings};

/// Padding is optional in the text (it is often cut off), and bits past
/// the last whole byte are ignored as most decoders do.
const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, CONFIG);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, CONFIG);

/// Base64 of 12 bytes or more: the shortest secrets worth decoding
/// ("password: 1234" is 14).
static RUN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9+/_-]{16,}={0,2}").expect("the base64 pattern is valid")
});

/// A finding for each run of base64 whose decoded text holds a secret,
/// named by what the text holds and covering the whole run.
pub fn findings(text: &str) -> Vec<Finding> {
    RUN.find_iter(text)
        .filter_map(|run| {
            let decoded = decode(run.as_str())?;
            plain_findings(&decoded)
                .into_iter()
                .min_by_key(|finding| finding.rank)
                .map(|inner| Finding {
                    span: run.range(),
                    ..inner
                })
        })
        .collect()
}

/// The text `run` encodes, if it is base64 of printable text. Base64 of
/// text mixes cases, so single-case runs (paths, `snake_case` names, hex)
/// are not decoded at all.
fn decode(run: &str) -> Option<String> {
    let bytes = run.as_bytes();
    let mixes_cases =
        bytes.iter().any(u8::is_ascii_uppercase) && bytes.iter().any(u8::is_ascii_lowercase);
    let url_safe = run.contains(['-', '_']);
    if !mixes_cases || (url_safe && run.contains(['+', '/'])) {
        return None;
    }
    let decoded = String::from_utf8(decode_base64(run)?).ok()?;
    decoded
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
        .then_some(decoded)
}

/// The bytes `run` encodes, in the URL-safe alphabet where it uses `-` or
/// `_`, else the standard one.
pub fn decode_base64(run: &str) -> Option<Vec<u8>> {
    let engine = if run.contains(['-', '_']) {
        &URL_SAFE
    } else {
        &STANDARD
    };
    engine.decode(run).ok()
}
