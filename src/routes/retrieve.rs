//! `POST /retrieve` and `POST /suggestions`: parse and check the request,
//! then hand it to the [`Retriever`].

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
pub use crate::config::WeightsRequest;
use crate::config::{Config, RetrievalOverrides, bounds};
use crate::error::{ApiError, Problem};
use crate::memory::{Category, MemoryId, MemoryView, RepoId, Scope, SessionId, UserId};
use crate::retrieval::session::{self, Injecting};
use crate::retrieval::time_words::time_in;
use crate::retrieval::{Degraded, Filters, Input, Outcome, Request, Retriever};
use crate::routes::extract::{self, ApiJson, in_range};
use crate::routes::problems::{BodyProblems, Unauthorized};
use crate::window::{self, Line, Message};

/// The longest `query`, in characters.
const MAX_QUERY_CHARS: usize = 10_000;
/// The most ids `exclude_ids` may list.
const MAX_EXCLUDED: usize = 1000;

/// What to retrieve for. With `query`, it is searched for directly. With
/// `messages` (the conversation window), the retrieval model writes HyDE
/// hypotheses to search for, or, with no model configured, the latest user
/// message is the query. With both, `query` wins. With neither, the
/// memories the filters admit are ranked by recency, importance and use.
/// Every other field defaults to the configuration.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRequest {
    /// Stable across the sub-turns of one user message (1–256 characters).
    #[schema(example = "t-17")]
    pub turn_id: String,
    pub repo: Option<RepoId>,
    pub user: Option<UserId>,
    /// The conversation window; tool calls and tool results are ignored.
    pub messages: Option<Vec<Message>>,
    /// Text to search for directly (at most 10,000 characters).
    pub query: Option<String>,
    /// How many memories to return, 1–1000 (hops come on top).
    pub top_k: Option<usize>,
    /// How many `related` edges to follow from the results, 0–3.
    pub hop_depth: Option<usize>,
    /// How many HyDE hypotheses to ask for, 1–10.
    pub hypothesis_count: Option<usize>,
    /// The most o200k_base tokens `injection` may take, 1–128000.
    pub token_budget: Option<usize>,
    /// Leave out memories less relevant than this, 0..1.
    pub min_relevance: Option<f64>,
    /// Any of the weights; the others keep their configured values.
    pub weights: Option<WeightsRequest>,
    pub filters: Option<FiltersRequest>,
    /// Memories never to return (at most 1000).
    #[serde(default)]
    pub exclude_ids: Vec<MemoryId>,
    /// `false` skips the per-turn cache (the fresh answer is still stored).
    pub use_cache: Option<bool>,
    /// Add related terms to `query` (from the retrieval model, or from the
    /// best matches' own words when there is none) and search for both.
    pub expand_query: Option<bool>,
    /// Text (e.g. the current task) whose similarity lifts memories by up
    /// to 0.1 relevance; at most 10,000 characters.
    pub context_boost: Option<String>,
    /// Answer as it would have been at this moment (RFC 3339, not before
    /// 1970 nor later than now): memories observed after it are left out,
    /// each version chain is answered by the version that stood then, and
    /// recency is measured from it.
    pub as_of: Option<DateTime<Utc>>,
    /// The agent session the retrieval is for. Then a memory injected at
    /// an earlier turn of the session is returned but not injected again,
    /// and per prompt only memories at `inject.min_relevance` or above
    /// are injected, within `inject.prompt_tokens`; with no `query` and
    /// no `messages`, it is the session's start: a brief of the most
    /// important confirmed memories within `inject.session_start_tokens`,
    /// and the session begins anew. `token_budget`, when given, caps both.
    pub session_id: Option<SessionId>,
}

/// Which memories may be returned.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FiltersRequest {
    /// Only memories of this scope.
    pub scope: Option<Scope>,
    /// Only memories of these categories (a non-empty list).
    pub categories: Option<Vec<Category>>,
}

/// Retrieve the memories relevant now, ranked, with the text to inject.
///
/// The answer is always `200` once the request is valid: when the
/// retrieval model or the embedder is slow or down, the budget runs out,
/// or the index is still being built, `degraded` says so and the answer
/// holds what could still be served honestly. The same (repo, user,
/// turn_id) again returns the cached answer (`cached: true`) until a write
/// to either namespace or the TTL ends it.
#[utoipa::path(
    post,
    path = "/retrieve",
    tag = "retrieval",
    request_body = RetrieveRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, body = Outcome),
        (status = 403, description = "The API key does not hold a repo or user the request names, or holds neither default when it names none", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn retrieve_memories(
    State(retriever): State<Retriever>,
    State(config): State<Arc<Config>>,
    caller: Caller,
    ApiJson(request): ApiJson<RetrieveRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let request = parse(request, &config, &caller)?;
    let mut outcome = retriever.run(request).await;
    // The outcome (perhaps cached for another caller) holds the memories
    // as stored; each caller sees them as its key allows.
    let store = retriever.store();
    for retrieved in &mut outcome.memories {
        if let Some(memory) = store.get(retrieved.memory.id) {
            retrieved.memory = MemoryView::seen_by(&memory, store, &caller);
        }
    }
    Ok(Json(outcome))
}

/// Checks every field and fills in the configured defaults. A repo or
/// user the request leaves out and `caller` does not hold is left out of
/// the search (see [`Caller::reach`]).
fn parse(request: RetrieveRequest, config: &Config, caller: &Caller) -> Result<Request, ApiError> {
    let turn_id = extract::turn_id(&request.turn_id)?;
    let input = match (&request.query, &request.messages) {
        (Some(query), _) => Input::Query(extract::bounded_text("query", query, MAX_QUERY_CHARS)?),
        (None, Some(messages)) => Input::Window(user_window(messages)?),
        (None, None) => Input::Filters,
    };
    let context_boost = request
        .context_boost
        .as_deref()
        .map(|text| extract::bounded_text("context_boost", text, MAX_QUERY_CHARS))
        .transpose()?;
    let brief = request.session_id.is_some() && matches!(input, Input::Filters);
    let mut overrides = RetrievalOverrides {
        top_k: request.top_k,
        hop_depth: request.hop_depth,
        hypothesis_count: request.hypothesis_count,
        token_budget: request.token_budget,
        min_relevance: request.min_relevance,
        weights: request.weights.unwrap_or_default(),
    };
    if brief {
        session::brief_overrides(&mut overrides);
    }
    let tuning = config.retrieval.tuning(&overrides).map_err(|err| {
        let field = err.field();
        ApiError::invalid(field, format!("`{field}` {err}"))
    })?;
    let filters = request.filters.unwrap_or_default();
    if filters.categories.as_ref().is_some_and(Vec::is_empty) {
        return Err(ApiError::invalid(
            "filters.categories",
            "`filters.categories` must not be empty; leave it out for every category",
        ));
    }
    let as_of = request
        .as_of
        .map(|at| extract::moment("as_of", at))
        .transpose()?;
    let asked = match &input {
        Input::Query(query) => Some(query.as_str()),
        Input::Window(lines) => window::latest_user_text(lines),
        Input::Filters => None,
    };
    let time = asked.and_then(|text| time_in(text, as_of.unwrap_or_else(Utc::now)));
    if request.exclude_ids.len() > MAX_EXCLUDED {
        return Err(ApiError::invalid(
            "exclude_ids",
            format!("`exclude_ids` lists more than {MAX_EXCLUDED} ids"),
        ));
    }
    Ok(Request {
        turn_id,
        pair: caller.reach(request.repo, request.user, &config.defaults)?,
        input,
        tuning,
        filters: Filters {
            scope: filters.scope,
            categories: filters.categories,
            confirmed_only: brief,
        },
        exclude_ids: request.exclude_ids.into_iter().collect::<HashSet<_>>(),
        use_cache: request.use_cache.unwrap_or(true),
        expand_query: request.expand_query.unwrap_or(false),
        context_boost,
        as_of,
        time,
        session: request
            .session_id
            .map(|session| Injecting::new(session, brief, &config.inject, request.token_budget)),
    })
}

/// The window of `messages`, which must hold a user message with text.
fn user_window(messages: &[Message]) -> Result<Vec<Line>, ApiError> {
    let lines = window::window(messages);
    if window::latest_user_text(&lines).is_none() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` holds no user message with text",
        ));
    }
    Ok(lines)
}

/// A conversation window to suggest queries for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuggestionsRequest {
    pub messages: Vec<Message>,
    /// How many suggestions, 1–10 (default: `retrieval.hypothesis_count`).
    pub count: Option<usize>,
}

/// Suggested queries, or why there are none.
#[derive(Debug, Serialize, ToSchema)]
pub struct SuggestionsResponse {
    /// Short statements a relevant memory might make; search for them with
    /// `POST /retrieve` (`query`).
    pub suggestions: Vec<String>,
    /// Set when the retrieval model is not configured, slow or failing;
    /// `suggestions` then holds the latest user message alone.
    pub degraded: Option<Degraded>,
}

/// Suggest queries for a conversation window: the HyDE hypotheses,
/// without the search.
#[utoipa::path(
    post,
    path = "/suggestions",
    tag = "retrieval",
    request_body = SuggestionsRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, body = SuggestionsResponse),
        (status = 422, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn suggest_queries(
    State(retriever): State<Retriever>,
    State(config): State<Arc<Config>>,
    ApiJson(request): ApiJson<SuggestionsRequest>,
) -> Result<Json<SuggestionsResponse>, ApiError> {
    let window = user_window(&request.messages)?;
    let count = in_range(
        "count",
        request.count,
        config.retrieval.hypothesis_count,
        bounds::HYPOTHESIS_COUNT,
    )?;
    Ok(Json(match retriever.suggestions(&window, count).await {
        Ok(suggestions) => SuggestionsResponse {
            suggestions,
            degraded: None,
        },
        Err(degraded) => SuggestionsResponse {
            suggestions: window::latest_user_text(&window)
                .map(str::to_owned)
                .into_iter()
                .collect(),
            degraded: Some(degraded),
        },
    }))
}
