//! API errors as `application/problem+json` (RFC 9457).
//!
//! This is the one table from error to HTTP status and problem `type`: every
//! handler returns `ApiError`, and every `type` is a stable URN clients may
//! match on. A 5xx carries a generic `detail`; its cause is logged here, once,
//! inside the request's span.
//!
//! The error policy, for the whole crate:
//!
//! - **Bad input** is a 4xx problem naming the field, and changes nothing.
//! - **A blocking task that panics is a bug.** Every `spawn_blocking` is
//!   awaited through [`crate::blocking::run`], which resumes the panic on the
//!   awaiting task: a request's `CatchPanicLayer` answers a 500 problem and
//!   logs it once; a long-lived task's `JoinHandle` reports it. A panic
//!   never becomes an error value, an empty result or a default.
//! - **Upstream faults** (the embedder, the LLM: slow, down, or answering
//!   nonsense) are no fault of the request and never a 5xx. Retrieval
//!   reports them as data (`degraded`) and serves what it still can;
//!   capture and the indexer keep their work and retry it with backoff.
//! - **Disk faults** (a file that cannot be read or written) are a 5xx, or
//!   `507` when the disk is full; nothing accepted is lost.
//! - **Database faults** (postgres mode: down, hung, out of connections)
//!   are a `503` with `Retry-After` that changed nothing, for every route
//!   that needs the database; a commit the database never confirmed is
//!   the one `504`, saying its outcome is unknown.
//! - Errors are typed (a `thiserror` enum per component), never `String`s.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::capture::queue;
use crate::causes::error_chain;
use crate::secrets;
use crate::store::postgres;
use crate::{disk, store};

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem document.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A stable identifier of the kind of problem, e.g.
    /// `urn:engram:problem:invalid-field`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind of problem.
    pub title: String,
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The request field at fault, as a path such as `related[0].id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Marks an error response that is no fault of the service (`not-ready`
/// while start-up work runs, `database-unavailable` while the database is
/// down), so the request log does not call it an error.
#[derive(Clone, Copy, Debug)]
pub struct NotAFault;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON at all.
    #[error("{detail}")]
    MalformedJson { detail: String },
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("{detail}")]
    InvalidField { field: String, detail: String },
    #[error("the request body must be JSON (Content-Type: application/json)")]
    UnsupportedMediaType,
    #[error("the request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{detail}")]
    Unauthorized { detail: String },
    #[error("{detail}")]
    Forbidden { detail: String },
    /// `auth.oauth`'s authorization server could not give its keys, so no
    /// access token can be checked; retrying shortly may succeed.
    #[error("{detail}")]
    IssuerUnavailable { detail: String },
    /// A `Host` the service does not answer to, or a write from another
    /// site (see `routes::site_guard`).
    #[error("{detail}")]
    SiteNotAllowed { detail: String },
    #[error("{detail}")]
    NotFound { detail: String },
    #[error("{detail}")]
    MethodNotAllowed { detail: String },
    /// Valid, but in conflict with the current state.
    #[error("{detail}")]
    Conflict { field: String, detail: String },
    /// `/readyz` before start-up is done, or while this replica is behind
    /// the database or cut off from it: says which.
    #[error("{0}")]
    NotReady(&'static str),
    /// The database (`store.backend: postgres`) could not be reached, so
    /// the change was not committed; retrying shortly may succeed.
    #[error("the database cannot be reached, so nothing was changed; retry shortly")]
    DatabaseUnavailable(#[source] store::Error),
    /// The database did not confirm a write's commit and could not be
    /// asked whether it was made: the one answer that does not say what
    /// happened, and says so (never a `503`, which means nothing changed).
    #[error(
        "the database did not confirm the change to memory {id} in time: it may have been made; \
         read the memory (GET /memories/{id}) once the database answers, before writing it again"
    )]
    CommitUnconfirmed {
        id: crate::memory::MemoryId,
        #[source]
        cause: store::Error,
    },
    /// Turns and compactions need a classifier model and none is
    /// configured: capture is agent-driven.
    #[error(
        "capture is agent-driven: no `llm` is configured, so turns and compactions are not \
         classified; the agent writes memories (the MCP `remember` tool, `remember:` prompts, \
         `POST /memories`); configure `llm` to classify them"
    )]
    CaptureDisabled,
    /// A write with `dedupe` that says what a current memory already says.
    #[error("{detail}")]
    DuplicateMemory { detail: String },
    #[error("the request took longer than {limit_ms} ms")]
    Timeout { limit_ms: u64 },
    #[error("the server is at its limit of concurrent requests; retry shortly")]
    Overloaded,
    #[error("the request body did not arrive in time")]
    BodyTimeout,
    #[error("the request body could not be read")]
    BodyUnreadable,
    /// Memory content that looks like a credential.
    #[error(transparent)]
    Secret(#[from] secrets::SecretFound),
    /// The capture queue is at its byte budget; retry after the hint.
    #[error("{detail}")]
    CaptureBacklog { detail: String, retry_after_s: u64 },
    #[error(transparent)]
    InsufficientStorage(#[from] disk::LowSpace),
    /// Our fault, never the client's; the cause is logged, not sent.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::InvalidField {
            field: field.into(),
            detail: detail.into(),
        }
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::NotFound {
            detail: detail.into(),
        }
    }

    pub fn internal(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(err))
    }

    /// The status, the problem slug and its title: the one mapping table.
    fn classify(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            Self::MalformedJson { .. } => (
                StatusCode::BAD_REQUEST,
                "malformed-json",
                "The body is not valid JSON",
            ),
            Self::InvalidField { .. } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-field",
                "A field is invalid",
            ),
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "The body must be JSON",
            ),
            Self::PayloadTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                "The body is too large",
            ),
            Self::Unauthorized { .. } => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Authentication required",
            ),
            Self::Forbidden { .. } => (
                StatusCode::FORBIDDEN,
                "forbidden",
                "The API key does not reach this namespace",
            ),
            Self::IssuerUnavailable { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "issuer-unavailable",
                "The authorization server's keys cannot be fetched",
            ),
            Self::SiteNotAllowed { .. } => (
                StatusCode::FORBIDDEN,
                "site-not-allowed",
                "The request's host or origin is not allowed",
            ),
            Self::NotFound { .. } => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            Self::MethodNotAllowed { .. } => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Method not allowed",
            ),
            Self::Conflict { .. } => (
                StatusCode::CONFLICT,
                "conflict",
                "The request conflicts with the current state",
            ),
            Self::CaptureDisabled => (
                StatusCode::CONFLICT,
                "capture-disabled",
                "No classifier is configured: capture is agent-driven",
            ),
            Self::DuplicateMemory { .. } => (
                StatusCode::CONFLICT,
                "duplicate-memory",
                "A current memory already says this",
            ),
            Self::NotReady(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "not-ready",
                "The service is not ready",
            ),
            Self::DatabaseUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "database-unavailable",
                "The database cannot be reached",
            ),
            Self::CommitUnconfirmed { .. } => (
                StatusCode::GATEWAY_TIMEOUT,
                "commit-unconfirmed",
                "The database did not confirm the change",
            ),
            Self::Timeout { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout",
                "The request timed out",
            ),
            Self::Overloaded => (
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "The server is overloaded",
            ),
            Self::BodyTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                "body-timeout",
                "The request body was too slow",
            ),
            Self::BodyUnreadable => (
                StatusCode::BAD_REQUEST,
                "body-unreadable",
                "The request body could not be read",
            ),
            Self::Secret(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "secret-content",
                "The content looks like a secret",
            ),
            Self::CaptureBacklog { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "capture-backlog",
                "The capture queue is at its byte budget",
            ),
            Self::InsufficientStorage(_) => (
                StatusCode::INSUFFICIENT_STORAGE,
                "insufficient-storage",
                "The data directory is nearly full",
            ),
            Self::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal server error",
            ),
        }
    }

    /// The problem to answer with; an internal error's cause (or why the
    /// database could not be reached) is logged here, never sent.
    pub fn report(&self) -> Problem {
        match self {
            Self::Internal(cause) => {
                tracing::error!(error = %error_chain(cause.as_ref()), "request failed");
            }
            Self::DatabaseUnavailable(cause) => {
                tracing::warn!(error = %error_chain(cause), "the database cannot be reached; the request is refused");
            }
            Self::CommitUnconfirmed { cause, .. } => {
                tracing::error!(error = %error_chain(cause), "the database did not confirm a commit; its outcome is unknown");
            }
            _ => {}
        }
        self.to_problem()
    }

    pub fn to_problem(&self) -> Problem {
        let (status, slug, title) = self.classify();
        let field = match self {
            Self::InvalidField { field, .. } | Self::Conflict { field, .. } => Some(field.clone()),
            Self::Secret(found) => Some(found.field.to_string()),
            Self::DuplicateMemory { .. } => Some("content".to_owned()),
            _ => None,
        };
        Problem {
            kind: format!("urn:engram:problem:{slug}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: self.to_string(),
            field,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.report();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&problem).expect("a problem always serializes");
        let mut response = (status, body).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(self, Self::NotReady(_) | Self::DatabaseUnavailable(_)) {
            response.extensions_mut().insert(NotAFault);
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Self::CaptureBacklog { retry_after_s, .. } = self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
        }
        response
    }
}

impl From<store::Error> for ApiError {
    fn from(err: store::Error) -> Self {
        match &err {
            store::Error::Database(postgres::Error::Unconfirmed { id }) => {
                Self::CommitUnconfirmed {
                    id: *id,
                    cause: err,
                }
            }
            store::Error::Database(database) if database.is_unavailable() => {
                Self::DatabaseUnavailable(err)
            }
            _ => Self::internal(err),
        }
    }
}

impl From<store::WriteError> for ApiError {
    fn from(err: store::WriteError) -> Self {
        match err {
            store::WriteError::Invalid { field, reason } => Self::InvalidField {
                detail: format!("`{field}` {reason}"),
                field,
            },
            store::WriteError::Conflict { field, reason } => Self::Conflict {
                detail: format!("`{field}` {reason}"),
                field,
            },
            store::WriteError::Exists(id) => Self::Conflict {
                detail: format!("`id` {id} is written already"),
                field: "id".to_owned(),
            },
            store::WriteError::Store(err) => err.into(),
        }
    }
}

impl From<queue::Error> for ApiError {
    fn from(err: queue::Error) -> Self {
        match err {
            queue::Error::OverBudget { .. } => Self::CaptureBacklog {
                detail: err.to_string(),
                retry_after_s: queue::OVER_BUDGET_RETRY_AFTER_S,
            },
            queue::Error::TooLarge { budget_bytes, .. } => Self::PayloadTooLarge {
                limit: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            },
            queue::Error::LowSpace(low) => low.into(),
            queue::Error::NoSuchFailed(_) => Self::not_found(err.to_string()),
            queue::Error::AlreadyQueued(_) => Self::Conflict {
                field: "id".to_owned(),
                detail: err.to_string(),
            },
            queue::Error::Database(database) => store::Error::Database(database).into(),
            queue::Error::Write { .. } | queue::Error::Read { .. } => Self::internal(err),
        }
    }
}
