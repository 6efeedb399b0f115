//! The protected resource metadata (RFC 9728) of Engram as an OAuth 2.1
//! resource server: which authorization server issues its tokens, for
//! which resource, with which scopes. A client that got a `401` follows
//! the challenge's `resource_metadata` here, then asks that server for a
//! token. Served at the well-known path and at it followed by the
//! audience's path (`/.well-known/oauth-protected-resource/mcp` for
//! `https://engram.example.com/mcp`), where RFC 9728 puts it; a `404`
//! without `auth.oauth`. It needs no credentials: it is how a client
//! learns to get them.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{WELL_KNOWN, metadata_path};
use crate::config::Config;
use crate::error::{ApiError, Problem};

/// RFC 9728's metadata, the fields Engram has.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProtectedResource {
    /// Engram's resource URL (`auth.oauth.audience`), which tokens must
    /// name in `aud`.
    pub resource: String,
    /// The authorization server (`auth.oauth.issuer`).
    pub authorization_servers: Vec<String>,
    /// The scopes clients ask for (`auth.oauth.scopes`).
    pub scopes_supported: Vec<String>,
    /// Tokens go in the `Authorization` header.
    pub bearer_methods_supported: Vec<&'static str>,
    pub resource_name: &'static str,
}

/// The protected resource metadata (RFC 9728), when `auth.oauth` is set.
#[utoipa::path(
    get,
    path = "/.well-known/oauth-protected-resource",
    tag = "operations",
    security(()),
    responses(
        (status = 200, body = ProtectedResource),
        (status = 404, description = "OAuth is not configured (`auth.oauth`)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_protected_resource(
    State(config): State<Arc<Config>>,
) -> Result<Json<ProtectedResource>, ApiError> {
    metadata(&config, "")
}

/// The same metadata at the well-known path followed by the audience's
/// path; any other path is a `404`.
pub async fn get_protected_resource_at(
    State(config): State<Arc<Config>>,
    Path(path): Path<String>,
) -> Result<Json<ProtectedResource>, ApiError> {
    metadata(&config, &path)
}

fn metadata(config: &Config, path: &str) -> Result<Json<ProtectedResource>, ApiError> {
    let not_found = || ApiError::NotFound {
        detail: "no protected resource metadata here: OAuth is not configured (`auth.oauth`), \
                 or the path is not the audience's"
            .to_owned(),
    };
    let oauth = config.auth.oauth.as_ref().ok_or_else(not_found)?;
    if !path.is_empty() && format!("{WELL_KNOWN}/{path}") != metadata_path(&oauth.audience) {
        return Err(not_found());
    }
    Ok(Json(ProtectedResource {
        resource: oauth.audience.clone(),
        authorization_servers: vec![oauth.issuer.clone()],
        scopes_supported: oauth.scopes.clone(),
        bearer_methods_supported: vec!["header"],
        resource_name: "Engram",
    }))
}
