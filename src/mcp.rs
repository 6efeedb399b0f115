//! Engram as MCP tools, at `/mcp` (Streamable HTTP, stateless, JSON
//! replies) behind the same API keys as REST.
//!
//! Each tool is the REST operation it names, called with the caller's key:
//! `remember` is `POST /memories` (with `dedupe` unless the arguments turn
//! it off), `recall` is `POST /retrieve`, `forget`
//! is `DELETE /memories/{id}`, `get_memory` is `GET /memories/{id}`,
//! `list_memories` is `GET /memories`, and `update_memory` writes a new
//! version that supersedes the memory, as `POST /memories` with
//! `supersedes` does. The arguments are read by the REST request types
//! (described by their OpenAPI schemas, see [`schema`]), so the limits,
//! the grants and the error wording are the REST ones. A refused call is a
//! tool result with `isError` and the problem document as JSON text, which
//! a model can read and act on ([`problem_result`]); only an unknown tool
//! is a protocol error. The memories are resources too ([`resources`]),
//! and a person may pick two prompts ([`prompts`]).
//!
//! `Host` and `Origin` are checked as for every route (DNS-rebinding and
//! cross-site protection, `routes::site_guard`): the service's own origin
//! (on loopback, any loopback name at its port) and `mcp.allowed_origins`
//! may call the tools.

pub mod prompts;
pub mod resources;
pub mod schema;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::request::Parts;
use axum::middleware;
use chrono::{DateTime, Utc};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::auth::{self, Caller};
use crate::error::ApiError;
use crate::memory::{
    Anchor, Category, CommitId, MemoryId, MemoryView, RelatedEdge, RepoId, UserId,
};
use crate::retrieval::Outcome;
use crate::routes::extract::{ApiJson, ApiPath, ApiQuery, from_arguments};
use crate::routes::lifecycle::{self, ReviewAction};
use crate::routes::memories::{self, ListMemoriesQuery, ListMemoriesResponse, MemoryDetail};
use crate::routes::retrieve::{self, FiltersRequest, RetrieveRequest};
use crate::routes::state::AppState;
use crate::routes::writing::CreateMemoryRequest;
use crate::window::Message;
use schema::Components;

/// What the server tells a client about itself when it connects: how to
/// use the tools, and what is worth remembering (with no classifier
/// configured, the agent's own calls are all that Engram learns).
const INSTRUCTIONS: &str = "Engram is this project's long-term memory. Call `recall` with \
the task at hand before answering to get what is known, each with why it was found. Call \
`remember` (one fact per memory; scope `repo` for the project, `user` for the person) when you \
learn something worth keeping across sessions: the user's preferences, the project's \
conventions, a decision and its reason, a correction of something you got wrong. Not \
what the code or git already records, and never secrets. If a memory already covers it, \
call `update_memory` instead of writing a duplicate (`remember` refuses near-duplicates, \
naming the memory); `forget` when the user asks to.";

/// `/mcp`, to merge into the application's router: not a REST resource
/// (it has no place in the OpenAPI document), but behind the same keys.
pub fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .nest_service("/mcp", service(state))
        .route_layer(middleware::from_fn_with_state(
            state.access.clone(),
            auth::require_credentials,
        ))
}

/// The `/mcp` endpoint: a tower service to nest in the router.
///
/// Stateless, with JSON replies: a call is one request and one response, so
/// nothing outlives it and the service's request limits and timeouts apply.
pub fn service(state: &AppState) -> StreamableHttpService<Tools, NeverSessionManager> {
    let tools = Tools::new(state.clone());
    let config = &state.config;
    // `Host` and `Origin` are checked for every route in front of the
    // router (`routes::site_guard`), by one rule; the transport's own checks
    // would refuse what that rule lets in (every `Origin`, with an empty
    // list). Stateless, `/mcp` answers `POST` alone, which that rule covers.
    let http = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(config.limits.max_body_bytes)
        .disable_allowed_hosts()
        .disable_allowed_origins();
    StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        http,
    )
}

/// The tools, over the application's state.
#[derive(Clone)]
pub struct Tools {
    state: AppState,
    catalogue: Catalogue,
}

/// Every tool, with its schemas and hints: what `/mcp` and the stdio
/// bridge both list, built from the one definition in [`catalogue`].
#[derive(Clone)]
pub struct Catalogue(Arc<Vec<Tool>>);

impl Default for Catalogue {
    fn default() -> Self {
        Self(Arc::new(catalogue()))
    }
}

impl Catalogue {
    /// The answer to `tools/list`.
    pub fn list(&self) -> ListToolsResult {
        ListToolsResult::with_all_items(self.0.to_vec())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<Tool> {
        self.0.iter().find(|tool| tool.name == name).cloned()
    }
}

/// `recall`'s arguments: `POST /retrieve`'s, with `turn_id` optional.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArguments {
    /// Retrievals with the same `turn_id` (and namespaces) share a cached
    /// answer; each call is its own turn when it is left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<UserId>,
    /// What to look for. Leave it out and give `messages` to search with
    /// the conversation instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The recent conversation, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<Message>>,
    /// How many memories, 1–1000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
    /// The most tokens the injection text may hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<FiltersRequest>,
    /// The answer as it would have been at this moment (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
}

/// The memory a tool acts on.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryArguments {
    pub id: MemoryId,
}

/// `update_memory`'s arguments: the new content, and what else changes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArguments {
    /// The memory to replace; it must be the current version of its chain.
    pub id: MemoryId,
    /// The new version's content (non-empty, at most 8,000 characters).
    pub content: String,
    /// Kept from the old version when left out.
    pub category: Option<Category>,
    /// Kept from the old version when left out.
    pub importance: Option<f64>,
    /// Kept from the old version when left out.
    pub related: Option<Vec<RelatedEdge>>,
    /// What in the repo the new version is about; kept from the old
    /// version when left out, `[]` drops them.
    pub anchors: Option<Vec<Anchor>>,
    /// The repo's HEAD now; kept from the old version when left out.
    pub commit: Option<CommitId>,
    /// When the new fact was said or became true (RFC 3339), if not now.
    pub observed_at: Option<DateTime<Utc>>,
}

/// `review_memory`'s arguments.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewArguments {
    /// The memory under review (`needs_review`).
    pub id: MemoryId,
    /// `keep`: it still holds, and is no longer under review; `forget`:
    /// it no longer holds, and is deleted.
    pub action: ReviewAction,
}

/// What `review_memory` did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Reviewed {
    pub id: MemoryId,
    pub action: ReviewAction,
    /// The memory as kept (absent when forgotten).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryView>,
}

/// What `forget` did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Forgotten {
    pub id: MemoryId,
    pub forgotten: bool,
}

impl Tools {
    fn new(state: AppState) -> Self {
        Self {
            state,
            catalogue: Catalogue::default(),
        }
    }

    async fn call(&self, name: &str, arguments: &Value, caller: Caller) -> Result<Value, ApiError> {
        let state = &self.state;
        match name {
            "remember" => {
                let mut request: CreateMemoryRequest = from_arguments(arguments)?;
                // A model asked to remember tends to repeat itself across
                // turns: the tool checks for a near-duplicate unless told not to.
                request.dedupe = request.dedupe.or(Some(true));
                self.create(request, caller).await
            }
            "recall" => {
                let arguments: RecallArguments = from_arguments(arguments)?;
                let mut request = serde_json::to_value(&arguments).map_err(ApiError::internal)?;
                if arguments.turn_id.is_none() {
                    request["turn_id"] = Value::from(format!("mcp-{}", uuid::Uuid::now_v7()));
                }
                let request: RetrieveRequest = from_arguments(&request)?;
                let axum::Json(outcome) = retrieve::retrieve_memories(
                    State(state.retriever.clone()),
                    State(state.config.clone()),
                    caller,
                    ApiJson(request),
                )
                .await?;
                to_value(&outcome)
            }
            "forget" => {
                let MemoryArguments { id } = from_arguments(arguments)?;
                memories::delete_memory(State(state.store.clone()), caller, ApiPath(id)).await?;
                to_value(&Forgotten {
                    id,
                    forgotten: true,
                })
            }
            "get_memory" => {
                let MemoryArguments { id } = from_arguments(arguments)?;
                let axum::Json(detail) = memories::get_memory(
                    State(state.store.clone()),
                    State(state.retriever.clone()),
                    caller,
                    ApiPath(id),
                )
                .await?;
                to_value(&detail)
            }
            "list_memories" => {
                let query: ListMemoriesQuery = from_arguments(arguments)?;
                let axum::Json(page) = memories::list_memories(
                    State(state.store.clone()),
                    State(state.retriever.clone()),
                    caller,
                    ApiQuery(query),
                )
                .await?;
                to_value(&page)
            }
            "update_memory" => self.update(from_arguments(arguments)?, caller).await,
            "confirm_memory" => {
                let MemoryArguments { id } = from_arguments(arguments)?;
                let axum::Json(view) =
                    lifecycle::confirm_memory(State(state.store.clone()), caller, ApiPath(id))
                        .await?;
                to_value(&view)
            }
            "review_memory" => {
                let ReviewArguments { id, action } = from_arguments(arguments)?;
                let memory = match action {
                    ReviewAction::Keep => {
                        Some(lifecycle::keep_memory(&state.store, &caller, id).await?.0)
                    }
                    ReviewAction::Forget => {
                        memories::delete_memory(State(state.store.clone()), caller, ApiPath(id))
                            .await?;
                        None
                    }
                };
                to_value(&Reviewed { id, action, memory })
            }
            _ => unreachable!("call_tool checks the name first"),
        }
    }

    /// A new version of the memory: what the arguments change, the rest as
    /// it was, written as `POST /memories` with `supersedes` (whose rule
    /// carries the optional fields left out over from the old version).
    async fn update(&self, arguments: UpdateArguments, caller: Caller) -> Result<Value, ApiError> {
        let state = &self.state;
        let axum::Json(current) = memories::get_memory(
            State(state.store.clone()),
            State(state.retriever.clone()),
            caller.clone(),
            ApiPath(arguments.id),
        )
        .await?;
        let old: MemoryView = current.memory;
        // The owner and scope name the chain, and `category` is required by
        // `POST /memories`: these come from the old version here.
        let request = CreateMemoryRequest {
            repo: old.repo,
            user: old.user,
            scope: old.scope,
            category: arguments.category.unwrap_or(old.category),
            content: arguments.content,
            importance: arguments.importance,
            supersedes: Some(arguments.id),
            related: arguments.related,
            session_id: None,
            anchors: arguments.anchors,
            commit: arguments.commit,
            observed_at: arguments.observed_at,
            dedupe: None,
        };
        self.create(request, caller).await
    }

    /// `POST /memories`.
    async fn create(
        &self,
        request: CreateMemoryRequest,
        caller: Caller,
    ) -> Result<Value, ApiError> {
        let state = &self.state;
        let (_, axum::Json(view)) = memories::create_memory(
            State(state.store.clone()),
            State(state.defaults.clone()),
            State(state.config.clone()),
            State(state.retriever.clone()),
            caller,
            ApiJson(request),
        )
        .await?;
        to_value(&view)
    }
}

fn to_value(value: &impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}

/// How Engram describes itself to an MCP client, over HTTP and through the
/// stdio bridge alike: tools, resources and prompts. Resources without
/// `subscribe` or `listChanged`, which need a stream from server to client
/// that a stateless `/mcp` does not keep ([`resources`]).
pub fn server_config() -> ServerConfig {
    let capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_resources()
        .enable_prompts()
        .build();
    ServerConfig::new(capabilities)
        .with_server_info(Implementation::new("engram", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
}

/// The key's grant, as the REST extractor reads it: put there by the key
/// check in front of `/mcp`, absent when no key is configured.
fn caller_of(context: &RequestContext<RoleServer>) -> Caller {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>().cloned())
        .unwrap_or_else(Caller::everything)
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        server_config()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.catalogue.list())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.catalogue.get(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.get_tool(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("no tool named `{}`", request.name),
                None,
            ));
        }
        let caller = caller_of(&context);
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.call(&request.name, &arguments, caller).await {
            Ok(value) => CallToolResult::structured(value),
            Err(err) => problem_result(&json!(err.report())),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        resources::list(&self.state, caller_of(&context), cursor).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let result = resources::read(&self.state, caller_of(&context), &request.uri).await?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(prompts::list())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let result = prompts::get(
            &self.state,
            caller_of(&context),
            &request.name,
            request.arguments,
        )
        .await?;
        Ok(result.into())
    }
}

/// A refused call: `isError` with the problem document as JSON text, and
/// no `structuredContent`, which clients check against the tool's
/// `outputSchema` (the result's shape, not the problem's); the official
/// TypeScript SDK reports a schema error instead of the problem otherwise.
pub fn problem_result(problem: &Value) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(problem.to_string())])
}

/// Every tool, with its schemas and hints.
fn catalogue() -> Vec<Tool> {
    let components = Components::of_api();
    let tool = |name: &'static str,
                description: &'static str,
                input: Arc<Map<String, Value>>,
                output: Arc<Map<String, Value>>,
                annotations: ToolAnnotations| {
        Tool::new(name, description, input)
            .with_raw_output_schema(output)
            .with_annotations(annotations.open_world(false))
    };
    let reading = ToolAnnotations::new().read_only(true);
    let writing = ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .idempotent(false);
    vec![
        tool(
            "remember",
            "Write a memory: a fact, preference, convention or decision worth keeping across \
             sessions, in the repo's namespace (scope `repo`) or the user's (`user`). A \
             near-duplicate of a current memory is refused, naming it (`dedupe`, on unless \
             false): update that one instead.",
            components.schema_of::<CreateMemoryRequest>(),
            components.schema_of::<MemoryView>(),
            writing.clone(),
        ),
        tool(
            "recall",
            "The memories that matter for a query or for the recent conversation, best first, \
             each with its relevance, scores and the reason it was found, and `injection`: \
             them as markdown within `token_budget`.",
            components.schema_of::<RecallArguments>(),
            components.schema_of::<Outcome>(),
            reading.clone(),
        ),
        tool(
            "forget",
            "Delete a memory by id: its file is removed and edges to it are ignored.",
            components.schema_of::<MemoryArguments>(),
            components.schema_of::<Forgotten>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true),
        ),
        tool(
            "get_memory",
            "A memory by id, with every version of its chain and its edges both ways.",
            components.schema_of::<MemoryArguments>(),
            components.schema_of::<MemoryDetail>(),
            reading.clone(),
        ),
        tool(
            "list_memories",
            "Memories newest first, filtered by repo, user, scope, category or text, a page \
             at a time (`next_cursor` asks for the next).",
            components.schema_of::<ListMemoriesQuery>(),
            components.schema_of::<ListMemoriesResponse>(),
            reading,
        ),
        tool(
            "confirm_memory",
            "Confirm a memory you have found to hold: a provisional one (written by the \
             classifier) becomes confirmed, ranks with confirmed ones and is not let go \
             for want of confirmation.",
            components.schema_of::<MemoryArguments>(),
            components.schema_of::<MemoryView>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true),
        ),
        tool(
            "review_memory",
            "Settle a memory under review (`needs_review`: a memory it is linked to \
             changed): `keep` it if it still holds, or `forget` it if it does not.",
            components.schema_of::<ReviewArguments>(),
            components.schema_of::<Reviewed>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true),
        ),
        tool(
            "update_memory",
            "Replace a memory with a new version (the old one stays in its chain, superseded): \
             new content, and optionally a new category, importance or edges.",
            components.schema_of::<UpdateArguments>(),
            components.schema_of::<MemoryView>(),
            writing,
        ),
    ]
}
