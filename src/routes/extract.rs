//! Extractors whose rejections are problem responses naming the field.
//!
//! `ApiJson` checks the media type, the body limit and the body deadline,
//! and deserializes exactly one JSON document with the path of the failing
//! field; `ApiQuery` does the same for the query
//! string; `ApiPath` parses the one path parameter with its type's `FromStr`,
//! so a bad id is refused before it could ever become a file path.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{FromRef, FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::header;
use axum::http::request::Parts;
use chrono::{DateTime, SubsecRound, Utc};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::memory::parse_timestamp;

/// The largest request body accepted, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// A JSON body of type `T`.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
        if !is_json {
            return Err(ApiError::UnsupportedMediaType);
        }
        let BodyLimit(limit) = BodyLimit::from_ref(state);
        let deadline = req.extensions().get::<BodyDeadline>().cloned();
        let reading = axum::body::to_bytes(req.into_body(), limit);
        let read = match &deadline {
            Some(deadline) => deadline.bound(reading).await?,
            None => reading.await,
        };
        let bytes = read.map_err(|err| body_error(&err, limit))?;
        parse_json(&bytes).map(Self)
    }
}

/// Arguments that arrived as JSON already (an MCP tool call's), read as
/// `T` exactly as a request body would be, with the same errors.
pub fn from_arguments<T: DeserializeOwned>(arguments: &serde_json::Value) -> Result<T, ApiError> {
    let bytes = serde_json::to_vec(arguments).map_err(ApiError::internal)?;
    parse_json(&bytes)
}

/// `bytes` as one JSON document of type `T`. Broken JSON, or anything
/// after the document, is `malformed-json` (400); well-formed JSON with a
/// field of the wrong type or value is `invalid-field` (422) naming it.
fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let malformed = |err: &serde_json::Error| ApiError::MalformedJson {
        detail: format!("the body is not valid JSON: {err}"),
    };
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize(&mut *deserializer) {
        // `end` refuses trailing data: `{...} garbage` is not one document.
        Ok(value) => deserializer
            .end()
            .map(|()| value)
            .map_err(|err| malformed(&err)),
        Err(err) => {
            let inner = err.inner();
            // serde_json reports a wrong type for an enum (`"scope": 1`) as
            // a syntax error; a body that is valid JSON says it is a field's.
            let well_formed = inner.classify() == serde_json::error::Category::Data
                || serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok();
            Err(if well_formed {
                field_error(err.path(), &json_message(inner))
            } else {
                malformed(inner)
            })
        }
    }
}

/// When a request's body must have arrived (set by the routes' timeout
/// middleware from `limits.body_timeout_ms`, counted from the request's
/// start), and whether it is still arriving, so that a request timeout
/// that strikes while the client is still sending is blamed on it (408).
#[derive(Clone, Debug)]
pub struct BodyDeadline {
    at: tokio::time::Instant,
    arriving: Arc<AtomicBool>,
}

impl BodyDeadline {
    pub fn new(at: tokio::time::Instant) -> Self {
        Self {
            at,
            arriving: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a reader was waiting for the body and it had not all come.
    pub fn still_arriving(&self) -> bool {
        self.arriving.load(Ordering::Acquire)
    }

    /// Runs `reading` until the deadline; past it, `body-timeout`. The
    /// flag is cleared only when reading ends, so a reader cancelled by
    /// the request timeout leaves it set.
    async fn bound<F: Future>(&self, reading: F) -> Result<F::Output, ApiError> {
        self.arriving.store(true, Ordering::Release);
        let read = tokio::time::timeout_at(self.at, reading).await;
        if read.is_ok() {
            self.arriving.store(false, Ordering::Release);
        }
        read.map_err(|_| ApiError::BodyTimeout)
    }
}

/// Why the body could not be read: too long, or broken off.
fn body_error(err: &axum::Error, limit: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(cause) = source {
        if cause.is::<http_body_util::LengthLimitError>() {
            return ApiError::PayloadTooLarge { limit };
        }
        source = cause.source();
    }
    ApiError::BodyUnreadable
}

/// The query string deserialized as `T`.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(Self)
            .map_err(|err| field_error(err.path(), &err.inner().to_string()))
    }
}

/// The route's single path parameter, parsed with `T::from_str`.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid("path", err.body_text()))?;
        let (name, value) = params
            .iter()
            .next()
            .ok_or_else(|| ApiError::invalid("path", "the route has no path parameter"))?;
        value
            .parse()
            .map(Self)
            .map_err(|err: T::Err| ApiError::invalid(name, format!("`{name}`: {err}")))
    }
}

/// The longest `turn_id`, in characters.
const MAX_TURN_ID_CHARS: usize = 256;

/// A `turn_id`, trimmed, if it is 1 to 256 characters and not all blank.
pub fn turn_id(text: &str) -> Result<String, ApiError> {
    bounded_text("turn_id", text, MAX_TURN_ID_CHARS)
}

/// `text` trimmed, if it is 1 to `max_chars` characters and not all blank;
/// otherwise an `invalid-field` problem naming `field`.
pub fn bounded_text(field: &str, text: &str, max_chars: usize) -> Result<String, ApiError> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.chars().count() > max_chars {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` must be 1 to {max_chars} characters, not all blank"),
        ));
    }
    Ok(trimmed.to_owned())
}

/// A moment sent with a request, if it is neither before 1970 nor later
/// than this server's clock allows; otherwise an `invalid-field` problem
/// naming `field`.
pub fn moment(field: &str, at: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    parse_timestamp(at, Utc::now())
        .map_err(|err| ApiError::invalid(field, format!("`{field}` {err}")))
}

/// An `observed_at` sent with a write, to the second (as `created_at`
/// is), checked as [`moment`] checks one.
pub fn observed_at(field: &str, at: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    moment(field, at.trunc_subsecs(0))
}

/// `value` (or `default` when absent) if it lies in `range`; otherwise an
/// `invalid-field` problem naming `field`.
/// Refuses a list of `len` `things` in `field` unless it holds 1 to
/// `max`: the bound of every batch a request carries.
pub fn one_to(field: &str, len: usize, max: usize, things: &str) -> Result<(), ApiError> {
    if (1..=max).contains(&len) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            field,
            format!("`{field}` holds {len} {things}; send 1 to {max}"),
        ))
    }
}

pub fn in_range(
    field: &str,
    value: Option<usize>,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, ApiError> {
    let value = value.unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::invalid(
            field,
            format!(
                "`{field}` must be between {} and {}, got {value}",
                range.start(),
                range.end()
            ),
        ))
    }
}

/// A deserialization error as `invalid-field`, naming the field. For an
/// unknown or missing field serde's path stops at its parent, so the name
/// comes from the message.
fn field_error(path: &serde_path_to_error::Path, message: &str) -> ApiError {
    let parent = path.to_string();
    let named = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split_once('`'))
        .map(|(name, _)| name);
    let field = match (named, parent.as_str()) {
        (Some(name), ".") => name.to_owned(),
        (Some(name), parent) if !parent.ends_with(name) => format!("{parent}.{name}"),
        (_, ".") => "body".to_owned(),
        (_, parent) => parent.to_owned(),
    };
    ApiError::invalid(field.clone(), format!("`{field}`: {message}"))
}

/// serde_json's message without its " at line 1 column 7" suffix.
fn json_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) if err.line() > 0 => message.to_owned(),
        _ => text,
    }
}
