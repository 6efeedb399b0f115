//! Extractors whose rejections are problem responses naming the field.
//!
//! `ApiJson` checks the media type and the body limit and deserializes with
//! the path of the failing field; `ApiQuery` does the same for the query
//! string; `ApiPath` parses the one path parameter with its type's `FromStr`,
//! so a bad id is refused before it could ever become a file path.

use std::str::FromStr;

use axum::extract::{FromRef, FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

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
        let bytes = axum::body::to_bytes(req.into_body(), limit)
            .await
            .map_err(|err| body_error(&err, limit))?;
        let deserializer = &mut serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let inner = err.inner();
            match inner.classify() {
                serde_json::error::Category::Data => field_error(err.path(), &json_message(inner)),
                _ => ApiError::MalformedJson {
                    detail: format!("the body is not valid JSON: {inner}"),
                },
            }
        })?;
        Ok(Self(value))
    }
}

/// Why the body could not be read: too long, too slow, or broken off.
fn body_error(err: &axum::Error, limit: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(cause) = source {
        if cause.is::<http_body_util::LengthLimitError>() {
            return ApiError::PayloadTooLarge { limit };
        }
        if cause.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::BodyTimeout;
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

/// `value` (or `default` when absent) if it lies in `range`; otherwise an
/// `invalid-field` problem naming `field`.
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
