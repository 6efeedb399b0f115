//! Whether Engram answers at a URL: `GET /healthz` (the process serves),
//! then `GET /readyz` (it is ready to retrieve), each within
//! [`PROBE_TIMEOUT`]. `engram doctor` and `engram setup` both ask; the
//! URL is shown without its userinfo.

use std::time::Duration;

use super::Finding;
use crate::client::http::{self, Api, redact_userinfo};

/// How long each of the two requests may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What to do when nothing answers.
const HOW_TO_START: &str = "start it with `engram serve` (or `docker compose up -d`; \
    docs/operations.md), or give the hooks the URL it runs at with `engram setup <agent> --url URL`";

/// Asks Engram at `url` whether it serves and is ready.
pub async fn check(url: &str) -> Finding {
    let shown = redact_userinfo(url.trim_end_matches('/')).into_owned();
    let api = match Api::new(url, None) {
        Ok(api) => api,
        Err(err) => {
            return Finding::problem(format!("{err}: give Engram's http(s) URL with --url"));
        }
    };
    match get(&api, "/healthz").await {
        Ok(()) => {}
        Err(Failure::NoAnswer(reason)) => {
            return Finding::problem(format!(
                "nothing answers at {shown} ({reason}): the hooks and the MCP server fail until \
                 Engram runs there (the hooks silently, into their log); {HOW_TO_START}"
            ));
        }
        Err(Failure::Answered(answer)) => {
            return Finding::problem(format!(
                "{shown}/healthz answered {answer}: that is not Engram, or something in front \
                 of it refuses; check the URL"
            ));
        }
    }
    match get(&api, "/readyz").await {
        Ok(()) => Finding::ok(format!("Engram answers at {shown} and is ready")),
        Err(Failure::NoAnswer(reason)) => Finding::problem(format!(
            "Engram at {shown} answered /healthz but not /readyz ({reason}): see its log"
        )),
        Err(Failure::Answered(answer)) => Finding::problem(format!(
            "Engram answers at {shown} but is not ready ({answer}): it retrieves nothing until \
             it is; if this lasts, see its log"
        )),
    }
}

/// Why a probe did not get a 2xx.
enum Failure {
    /// No HTTP answer: the innermost cause (connection refused, a timeout).
    NoAnswer(String),
    /// An answer other than a 2xx with JSON: its status and detail.
    Answered(String),
}

async fn get(api: &Api, path: &str) -> Result<(), Failure> {
    match tokio::time::timeout(PROBE_TIMEOUT, api.get(path)).await {
        Err(_) => Err(Failure::NoAnswer(format!(
            "no answer within {} s",
            PROBE_TIMEOUT.as_secs()
        ))),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(http::Error::Request { source, .. })) => {
            Err(Failure::NoAnswer(innermost_cause(&source)))
        }
        Ok(Err(http::Error::Status { status, detail, .. })) => {
            Err(Failure::Answered(format!("{status}: {detail}")))
        }
        Ok(Err(err)) => Err(Failure::Answered(err.to_string())),
    }
}

/// The last cause in `err`'s chain: what went wrong, without the layers
/// that say where.
fn innermost_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    redact_userinfo(&cause.to_string()).into_owned()
}
