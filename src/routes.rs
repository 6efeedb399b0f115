//! The HTTP surface: every route, its OpenAPI description, and the layers
//! around them (request ids, tracing, the `Host` and `Origin` checks,
//! timeouts, panics as problems).
//!
//! Routes are registered through `utoipa-axum`, so the served document at
//! `/openapi.json` is generated from the same handlers that answer.

pub mod batch;
pub mod check;
pub mod consolidate;
pub mod extract;
pub mod graph;
pub mod health;
pub mod import;
pub mod lifecycle;
pub mod memories;
pub mod problems;
pub mod protected_resource;
pub mod retrieve;
pub mod site_guard;
pub mod state;
pub mod stats;
pub mod triggers;
pub mod turns;
pub mod ui;
pub mod writing;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::classify::{
    ClassifiedResponse, ClassifyResponse, NeverClassifyEos, ServerErrorsAsFailures,
    ServerErrorsFailureClass, SharedClassifier,
};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::auth::{self, Access};
use crate::commit_point::CommitPoint;
use crate::error::{ApiError, NotAFault, Problem};
use crate::metrics::Metrics;
use crate::routes::extract::BodyDeadline;
use crate::routes::site_guard::SiteGuard;
use crate::routes::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Engram",
        description = "Long-term memory for AI coding agents. Memories are markdown files with YAML \
            front-matter; this API writes, lists, reads and forgets them. Errors are \
            `application/problem+json` (RFC 9457) with a stable `type` and the `field` at fault."
    ),
    tags(
        (name = "memories", description = "Write, list, read and forget memories"),
        (name = "retrieval", description = "The memories that matter now"),
        (name = "capture", description = "Conversation windows in, memories out, in the background"),
        (name = "operations", description = "Health, readiness and statistics"),
    ),
    components(schemas(Problem)),
    modifiers(&BearerScheme),
    security(("bearer" = []))
)]
struct ApiDoc;

/// Declares the `bearer` scheme that data routes need when the service has
/// an API key (`ENGRAM_API_KEY`).
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        api.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// Every documented route, with its OpenAPI description. Routes that hold
/// data sit behind `auth::require_credentials`; health, readiness and the
/// protected resource metadata do not.
fn api_router(access: Access) -> OpenApiRouter<AppState> {
    let guarded = OpenApiRouter::new()
        .routes(routes!(health::get_metrics))
        .routes(routes!(memories::list_memories, memories::create_memory))
        .routes(routes!(memories::get_memory, memories::delete_memory))
        .routes(routes!(memories::find_similar_memories))
        .routes(routes!(batch::create_memories))
        .routes(routes!(lifecycle::confirm_memory))
        .routes(routes!(lifecycle::review_memory))
        .routes(routes!(lifecycle::restore_memory))
        .routes(routes!(check::record_check))
        .routes(routes!(consolidate::consolidate_memories))
        .routes(routes!(consolidate::list_consolidations))
        .routes(routes!(consolidate::undo_consolidation))
        .routes(routes!(import::import_memories))
        .routes(routes!(graph::get_memory_graph))
        .routes(routes!(retrieve::retrieve_memories))
        .routes(routes!(retrieve::suggest_queries))
        .routes(routes!(turns::capture_turn))
        .routes(routes!(turns::capture_compaction))
        .routes(routes!(triggers::list_triggers))
        .routes(routes!(triggers::retry_trigger))
        .routes(routes!(stats::get_stats))
        .route_layer(middleware::from_fn_with_state(
            access,
            auth::require_credentials,
        ));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(guarded)
        .routes(routes!(health::get_healthz))
        .routes(routes!(health::get_readyz))
        .routes(routes!(protected_resource::get_protected_resource))
}

/// The OpenAPI document the service serves at `/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, api) = api_router(Access::default()).split_for_parts();
    api
}

/// The complete application: the API, `extra` (routes that are not part
/// of the OpenAPI document, such as `/mcp`), docs, the memory browser,
/// fallbacks and layers.
pub fn router(state: AppState, extra: Router<AppState>) -> Router {
    let limits = &state.config.limits;
    let request_timeout = Duration::from_millis(limits.request_timeout_ms);
    let body_timeout = Duration::from_millis(limits.body_timeout_ms);
    let capacity = Arc::new(Semaphore::new(limits.max_concurrent_requests));
    let cors = cors_layer(&state.config.cors);
    let (api, document) = api_router(state.access.clone()).split_for_parts();
    let layers = ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(
            TraceLayer::new(SharedClassifier::new(ServiceFaults))
                .make_span_with(request_span)
                .on_response(
                    DefaultOnResponse::new()
                        .level(Level::INFO)
                        .latency_unit(tower_http::LatencyUnit::Millis),
                ),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn_with_state(
            state.metrics.clone(),
            record_metrics,
        ))
        .layer(middleware::from_fn_with_state(
            SiteGuard::from_config(&state.config),
            site_guard::guard_site,
        ))
        .layer(middleware::from_fn_with_state(capacity, shed_load))
        .layer(middleware::from_fn_with_state(
            Timeouts {
                request: request_timeout,
                body: body_timeout,
            },
            enforce_timeouts,
        ))
        .option_layer(cors);
    api.merge(extra)
        .merge(ui::router())
        .route(
            &format!("{}/{{*path}}", auth::WELL_KNOWN),
            axum::routing::get(protected_resource::get_protected_resource_at),
        )
        .merge(
            Router::from(SwaggerUi::new("/docs").url("/openapi.json", document))
                .layer(middleware::map_response(forbid_framing)),
        )
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(layers)
        .with_state(state)
}

/// Swagger UI may not be shown in another site's frame (clickjacking its
/// "Try it out" buttons): the header for current browsers and the one for
/// older ones, as the memory browser sends them.
async fn forbid_framing(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("frame-ancestors 'none'"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The span every log line of a request is recorded in.
fn request_span(request: &Request) -> tracing::Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| request.uri().path(), MatchedPath::as_str);
    tracing::info_span!("request", request.id = %request_id, http.method = %request.method(), http.route = %route)
}

/// What the trace layer logs as a failure (at `ERROR`): a 5xx, unless the
/// response says it is expected (`/readyz` before start-up is done).
#[derive(Clone, Copy)]
struct ServiceFaults;

impl ClassifyResponse for ServiceFaults {
    type FailureClass = ServerErrorsFailureClass;
    type ClassifyEos = NeverClassifyEos<ServerErrorsFailureClass>;

    fn classify_response<B>(
        self,
        response: &Response<B>,
    ) -> ClassifiedResponse<Self::FailureClass, Self::ClassifyEos> {
        if response.extensions().get::<NotAFault>().is_some() {
            return ClassifiedResponse::Ready(Ok(()));
        }
        ServerErrorsAsFailures::new().classify_response(response)
    }

    fn classify_error<E: std::fmt::Display + 'static>(self, error: &E) -> Self::FailureClass {
        ServerErrorsAsFailures::new().classify_error(error)
    }
}

/// CORS, only for the configured origins; none configured, none allowed.
fn cors_layer(config: &crate::config::Cors) -> Option<CorsLayer> {
    if config.allowed_origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = config
        .allowed_origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]),
    )
}

/// Counts and times every request by route, method and status.
async fn record_metrics(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let response = next.run(request).await;
    metrics.http_request(
        &route,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// Refuses work beyond the concurrency limit at once (503, `Retry-After`)
/// instead of queueing it; health and readiness always answer.
async fn shed_load(
    State(capacity): State<Arc<Semaphore>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(request).await;
    }
    match capacity.try_acquire_owned() {
        Ok(_permit) => next.run(request).await,
        Err(_) => ApiError::Overloaded.into_response(),
    }
}

/// `limits.request_timeout_ms` and `limits.body_timeout_ms`.
#[derive(Clone, Copy)]
struct Timeouts {
    request: Duration,
    body: Duration,
}

/// Bounds the whole request, and its body from the request's start (the
/// JSON extractor enforces the body's deadline). A timeout that strikes
/// while the handler still waits for the body is the client's: `408`, not
/// `503`, whichever limit is shorter. Either means nothing changed: a
/// request whose write has passed its commit point
/// ([`crate::commit_point`]) is answered with the write's outcome instead,
/// however long that takes.
async fn enforce_timeouts(
    State(limits): State<Timeouts>,
    mut request: Request,
    next: Next,
) -> Response {
    let body = BodyDeadline::new(tokio::time::Instant::now() + limits.body);
    request.extensions_mut().insert(body.clone());
    let point = CommitPoint::default();
    let handling = point.scope(next.run(request));
    tokio::pin!(handling);
    match tokio::time::timeout(limits.request, &mut handling).await {
        Ok(response) => response,
        Err(_) if !point.time_out() => handling.await,
        Err(_) if body.still_arriving() => ApiError::BodyTimeout.into_response(),
        Err(_) => ApiError::Timeout {
            limit_ms: u64::try_from(limits.request.as_millis()).unwrap_or(u64::MAX),
        }
        .into_response(),
    }
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "tower-http's panic handler hands the payload over by value"
)]
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a handler panicked".to_owned());
    ApiError::internal(std::io::Error::other(format!(
        "handler panicked: {message}"
    )))
    .into_response()
}

async fn route_not_found(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        request.method(),
        request.uri().path()
    ))
}

async fn method_not_allowed(method: Method, request: Request) -> ApiError {
    ApiError::MethodNotAllowed {
        detail: format!("{method} is not allowed on {}", request.uri().path()),
    }
}

#[cfg(test)]
mod tests {
    use utoipa::openapi::path::ParameterIn;

    use super::*;

    /// `ApiPath`, `ApiQuery` and `ApiJson` answer 422 for a value they
    /// cannot read, so every operation that takes one says so (a fuzzer
    /// reading the document finds the ones that do not).
    #[test]
    fn every_operation_that_reads_input_documents_its_422() {
        let mut silent = Vec::new();
        for (path, item) in &openapi().paths.paths {
            for (method, operation) in [
                ("get", &item.get),
                ("post", &item.post),
                ("put", &item.put),
                ("patch", &item.patch),
                ("delete", &item.delete),
            ] {
                let Some(operation) = operation else { continue };
                let reads_input = operation.request_body.is_some()
                    || operation.parameters.iter().flatten().any(|parameter| {
                        matches!(
                            parameter.parameter_in,
                            ParameterIn::Path | ParameterIn::Query
                        )
                    });
                if reads_input && !operation.responses.responses.contains_key("422") {
                    silent.push(format!("{method} {path}"));
                }
            }
        }
        assert!(silent.is_empty(), "no 422 documented: {silent:?}");
    }
}
