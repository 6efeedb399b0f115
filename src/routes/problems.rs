//! The problem responses several operations share, described once for
//! OpenAPI. Each type only documents: the handlers answer through
//! `ApiError`, whose mapping in `error.rs` these rows describe.

use utoipa::IntoResponses;

use crate::error::Problem;

/// 401, for every operation behind the API key.
#[derive(IntoResponses)]
#[response(
    status = 401,
    description = "An API key is configured and the request lacks it",
    content_type = "application/problem+json"
)]
pub struct Unauthorized(pub Problem);

/// 400, 413 and 415, for every operation that reads a JSON body.
#[derive(IntoResponses)]
pub enum BodyProblems {
    #[response(
        status = 400,
        description = "The body is not JSON",
        content_type = "application/problem+json"
    )]
    NotJson(Problem),
    #[response(
        status = 413,
        description = "The body is too large",
        content_type = "application/problem+json"
    )]
    TooLarge(Problem),
    #[response(
        status = 415,
        description = "The body is not JSON",
        content_type = "application/problem+json"
    )]
    NotJsonMediaType(Problem),
}

/// 403, 409, 422 and 507, for `/turns` and `/compactions`.
#[derive(IntoResponses)]
pub enum CaptureProblems {
    #[response(
        status = 403,
        description = "The API key does not reach this repo or user",
        content_type = "application/problem+json"
    )]
    Forbidden(Problem),
    #[response(
        status = 409,
        description = "Capture is agent-driven: no `llm` is configured, so turns and compactions are not classified (`urn:engram:problem:capture-disabled`); write memories with `POST /memories`",
        content_type = "application/problem+json"
    )]
    Disabled(Problem),
    #[response(
        status = 422,
        description = "A field is invalid, or `session_id` (stored on every memory captured) looks like a secret (`urn:engram:problem:secret-content`)",
        content_type = "application/problem+json"
    )]
    Invalid(Problem),
    #[response(
        status = 507,
        description = "The data directory is below its free-space floor (`limits.min_free_disk_bytes`); nothing was queued",
        content_type = "application/problem+json"
    )]
    LowDisk(Problem),
}

/// 404, for every operation on one memory by its id.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such memory",
    content_type = "application/problem+json"
)]
pub struct NoSuchMemory(pub Problem);
