//! `engram mcp`: MCP over stdio, for clients that only start local
//! processes. A thin bridge: it passes every tool call through to a running
//! Engram's `/mcp`, with the key from `ENGRAM_API_KEY`. It never opens the
//! data directory, so the service stays its only owner.
//!
//! It needs no service to start: it answers the client's handshake and the
//! tool list itself, from the same definitions the service's `/mcp` serves
//! ([`Catalogue`](crate::mcp::Catalogue)), so an agent started before Engram still has
//! Engram's tools. It connects to the service at the first call; a call
//! while the service is down or not answering is a tool error the model
//! can read ("Engram is not answering at …; start it with `engram serve`"),
//! and the next call connects again, so the tools work as soon as Engram
//! is up, without restarting the agent.
//!
//! Bounded: connecting and each call take at most `--timeout-ms`, after
//! which the call is a tool error and the connection is dropped; the bridge
//! exits when its client closes stdin, leaving any call still waiting.
//! The key never goes through a proxy for a loopback URL; for another, the
//! proxy variables apply with `NO_PROXY` honoured.
//!
//! Resources and prompts pass through the same way (the prompt and
//! template lists are answered here, from the service's definitions); a
//! request the service did not answer is an internal error with the same
//! words.
//!
//! Resources may be subscribed to here, which `/mcp` cannot offer: the
//! bridge has a channel to its client, so it advertises `subscribe` and
//! `listChanged`, checks each `resources/subscribe` as the service's
//! `resources/read` would answer it, and sends the notifications that the
//! poll of [`watch`] finds (every `--watch-ms`, only while something is
//! subscribed).
//!
//! Its other addition is the namespace: a tool call that names no `repo` or
//! `user` gets the bridge's (`--repo`, `--user`, else the project of the
//! directory the agent started it in and the OS user, as `engram hook`
//! finds them), and so does a prompt that names no `repo`, so the memories
//! an agent reaches through MCP are the ones its hooks capture and
//! retrieve.

mod watch;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use reqwest::Url;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
    SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{ClientInitializeError, RequestContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::causes::error_chain;
use crate::client::hook::project;
use crate::client::http::{Api, redact_userinfo};
use crate::error::Problem;
use crate::mcp::Catalogue;
use watch::{Subject, Watch};

/// `engram mcp`'s arguments.
#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// The running Engram to serve (its API root; `/mcp` is added).
    #[arg(
        long,
        env = "ENGRAM_URL",
        hide_env_values = true,
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// The repo id for calls that name none (default: the git checkout's
    /// directory name of the current directory).
    #[arg(long)]
    pub repo: Option<String>,
    /// The user id for calls that name none (default: the OS user).
    #[arg(long)]
    pub user: Option<String>,
    /// The most connecting to Engram, and then each call, may take, in
    /// milliseconds; past it the call is a tool error. Above the service's
    /// default request timeout (10 s), so a slow call gets the service's
    /// own answer.
    #[arg(long, default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// How often, in milliseconds, the bridge reads the resources its
    /// client subscribed to (one small request each, and one for the list)
    /// while it is subscribed to any; 100 ms to 10 minutes.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub watch_ms: u64,
}

/// A stdio MCP server whose tool calls the running service answers.
struct Bridge {
    /// The service's `/mcp`.
    endpoint: Url,
    /// `endpoint` as messages show it: without userinfo.
    shown: String,
    key: Option<String>,
    http: reqwest::Client,
    timeout: Duration,
    /// The tools, as the service's `/mcp` lists them.
    catalogue: Catalogue,
    /// `repo` and `user`, for the calls that leave them out.
    owners: Map<String, Value>,
    /// The connection to the service: made at the first call that needs
    /// it, dropped when it fails, made again at the next call.
    upstream: Mutex<Option<Arc<Upstream>>>,
    /// The resources the client subscribed to.
    watch: Arc<Watch>,
}

type Upstream = RunningService<RoleClient, ()>;

/// Why a call did not reach the service, as the model reads it.
enum Unanswered {
    /// The service refused the key (`401`).
    KeyRefused,
    /// Connecting or sending failed (nothing listening, say): the cause.
    Failed(String),
    /// No answer within the bound.
    Silent,
}

impl Bridge {
    /// The live connection, or a new one, within the bound.
    async fn upstream(&self) -> Result<Arc<Upstream>, Unanswered> {
        let mut slot = self.upstream.lock().await;
        if let Some(upstream) = slot.as_ref().filter(|u| !u.is_closed()) {
            return Ok(upstream.clone());
        }
        *slot = None;
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.endpoint.as_str());
        if let Some(key) = &self.key {
            config = config.auth_header(key);
        }
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let upstream = match tokio::time::timeout(self.timeout, ().serve(transport)).await {
            Ok(Ok(upstream)) => Arc::new(upstream),
            Ok(Err(err)) => return Err(Unanswered::connecting(&err)),
            Err(_) => return Err(Unanswered::Silent),
        };
        *slot = Some(upstream.clone());
        Ok(upstream)
    }

    /// Forgets `used` if it is still the live connection, so the next call
    /// connects again.
    async fn drop_upstream(&self, used: &Arc<Upstream>) {
        let mut slot = self.upstream.lock().await;
        if slot.as_ref().is_some_and(|live| Arc::ptr_eq(live, used)) {
            *slot = None;
        }
    }

    /// The tool error for a call the service did not answer.
    fn unanswered(&self, why: &Unanswered) -> CallToolResponse {
        let problem = serde_json::to_value(self.problem(why)).expect("a problem always serializes");
        crate::mcp::problem_result(&problem).into()
    }

    /// The protocol error for a request other than a tool call that the
    /// service did not answer: the same words, as an internal error.
    fn unanswered_request(&self, why: &Unanswered) -> ErrorData {
        let problem = self.problem(why);
        let detail = problem.detail.clone();
        ErrorData::internal_error(detail, serde_json::to_value(problem).ok())
    }

    /// Why the service did not answer, as the model reads it.
    fn problem(&self, why: &Unanswered) -> Problem {
        let (title, status, detail) = match why {
            Unanswered::KeyRefused => (
                "Engram refused the key",
                401,
                format!(
                    "Engram at {} refused the bridge's key: set ENGRAM_API_KEY, in the \
                     environment the agent starts `engram mcp` in, to a key it accepts.",
                    self.shown
                ),
            ),
            Unanswered::Failed(cause) => {
                // For the person reading the client's log.
                eprintln!(
                    "engram mcp: calling {}: {}",
                    self.shown,
                    redact_userinfo(cause)
                );
                (
                    "Engram is not answering",
                    503,
                    format!(
                        "Engram is not answering at {} ({}). {START}",
                        self.shown,
                        redact_userinfo(cause)
                    ),
                )
            }
            Unanswered::Silent => (
                "Engram is not answering",
                503,
                format!(
                    "Engram did not answer at {} within {} ms. {START}",
                    self.shown,
                    self.timeout.as_millis()
                ),
            ),
        };
        Problem {
            kind: "urn:engram:problem:unreachable".to_owned(),
            title: title.to_owned(),
            status,
            detail,
            field: None,
        }
    }

    /// Passes a request other than a tool call through to the service,
    /// within the bound: its answer, its protocol error as it sent it, or
    /// an internal error saying why it did not answer.
    async fn forward<T, Sent>(
        &self,
        send: impl FnOnce(Arc<Upstream>) -> Sent,
    ) -> Result<T, ErrorData>
    where
        Sent: Future<Output = Result<T, ServiceError>>,
    {
        let upstream = match self.upstream().await {
            Ok(upstream) => upstream,
            Err(why) => return Err(self.unanswered_request(&why)),
        };
        let why = match tokio::time::timeout(self.timeout, send(upstream.clone())).await {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(ServiceError::McpError(error))) => return Err(error),
            Ok(Err(err)) => Unanswered::calling(&err),
            Err(_) => Unanswered::Silent,
        };
        self.drop_upstream(&upstream).await;
        Err(self.unanswered_request(&why))
    }

    /// Whether the key may read `uri`: nothing if so, else the service's
    /// `resources/read` error as it sent it.
    async fn readable(&self, uri: &str) -> Result<(), ErrorData> {
        let request = ReadResourceRequestParams::new(uri);
        self.forward(|upstream| async move { upstream.read_resource_once(request).await })
            .await
            .map(drop)
    }
}

/// What a tool error for an unreachable service tells the model to do.
const START: &str = "Start it with `engram serve` (or point --url or ENGRAM_URL at a running \
Engram); the next call connects again.";

impl Unanswered {
    /// Why connecting failed.
    fn connecting(err: &ClientInitializeError) -> Self {
        if err.auth_challenge().is_some() {
            return Self::KeyRefused;
        }
        match err {
            // Its transport error is a field, not its `source`.
            ClientInitializeError::TransportError { error, .. } => Self::Failed(innermost(error)),
            other => Self::Failed(innermost(other)),
        }
    }

    /// Why a call failed.
    fn calling(err: &ServiceError) -> Self {
        if err.auth_challenge().is_some() {
            Self::KeyRefused
        } else {
            Self::Failed(innermost(err))
        }
    }
}

/// The innermost cause of `err`, which says what happened ("Connection
/// refused"); the layers above it name the SDK's transport types.
fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let mut config = crate::mcp::server_config();
        // Unlike `/mcp`, the bridge has a channel to send notifications on.
        if let Some(resources) = config.capabilities.resources.as_mut() {
            resources.subscribe = Some(true);
            resources.list_changed = Some(true);
        }
        config
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
        mut request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.get_tool(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named `{}`", request.name),
                None,
            ));
        };
        if takes_owners(&tool) {
            let arguments = request.arguments.get_or_insert_default();
            for (owner, id) in &self.owners {
                arguments.entry(owner.clone()).or_insert_with(|| id.clone());
            }
        }
        let upstream = match self.upstream().await {
            Ok(upstream) => upstream,
            Err(why) => return Ok(self.unanswered(&why)),
        };
        let why = match tokio::time::timeout(self.timeout, upstream.call_tool_once(request)).await {
            Ok(Ok(response)) => return Ok(response),
            // The service's own protocol error, as it sent it.
            Ok(Err(ServiceError::McpError(error))) => return Err(error),
            Ok(Err(err)) => Unanswered::calling(&err),
            Err(_) => Unanswered::Silent,
        };
        self.drop_upstream(&upstream).await;
        Ok(self.unanswered(&why))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.forward(|upstream| async move { upstream.list_resources(request).await })
            .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(crate::mcp::resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.forward(|upstream| async move { upstream.read_resource_once(request).await })
            .await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let subject = Subject::of(&request.uri)?;
        self.readable(&request.uri).await?;
        self.watch
            .subscribe(request.uri, subject, context.peer)
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Subject::of(&request.uri)?;
        if !self.watch.unsubscribe(&request.uri) {
            // Answered as a read is, so that unsubscribing tells a key
            // nothing a read would not.
            self.readable(&request.uri).await?;
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(crate::mcp::prompts::list())
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        // Both prompts take the repo: the bridge's, when the person names none.
        if let Some(repo) = self.owners.get("repo") {
            request
                .arguments
                .get_or_insert_default()
                .entry("repo")
                .or_insert_with(|| repo.clone());
        }
        self.forward(|upstream| async move { upstream.get_prompt_once(request).await })
            .await
    }
}

/// Runs the bridge until the client closes stdin.
pub fn run(args: &BridgeArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return failed(&Error::Runtime(err)),
    };
    let served = runtime.block_on(serve(args));
    // A call still waiting for the service must not keep the process once
    // its client has gone.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => failed(&err),
    }
}

fn failed(err: &Error) -> ExitCode {
    eprintln!("engram mcp: {}", redact_userinfo(&error_chain(err)));
    ExitCode::FAILURE
}

/// The bridge's `repo` and `user`: the flags, else the project of the
/// current directory and the OS user. An owner that cannot be made a valid
/// id is left out, and the service's default applies.
fn owners(args: &BridgeArgs, env: impl Fn(&str) -> Option<String>) -> Map<String, Value> {
    let found = project::owners(args.repo.as_deref(), args.user.as_deref(), env);
    if args.user.is_none() && !found.contains_key("user") {
        eprintln!(
            "engram mcp: no user name (USER and LOGNAME are unset and this uid is not \
             in /etc/passwd): calls that name no user get the service's default user; \
             pass --user to choose one"
        );
    }
    found
}

/// Whether a tool's input schema has both a `repo` and a `user` property.
fn takes_owners(tool: &Tool) -> bool {
    tool.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| {
            properties.contains_key("repo") && properties.contains_key("user")
        })
}

/// Why the bridge could not start or stopped.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    #[error("--url (or ENGRAM_URL)")]
    Api(#[source] crate::client::http::Error),
    #[error("serving over stdio")]
    Serve(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error("serving over stdio")]
    Stopped(#[source] tokio::task::JoinError),
}

async fn serve(args: &BridgeArgs) -> Result<(), Error> {
    let key = std::env::var("ENGRAM_API_KEY")
        .ok()
        .filter(|key| !key.is_empty());
    let timeout = Duration::from_millis(args.timeout_ms);
    let api = Api::new(&args.url, key.clone()).map_err(Error::Api)?;
    let endpoint = api.url("/mcp").map_err(Error::Api)?;
    let bridge = Bridge {
        shown: redact_userinfo(endpoint.as_str()).into_owned(),
        http: api.http().clone(),
        endpoint,
        key,
        timeout,
        catalogue: Catalogue::default(),
        owners: owners(args, |var| std::env::var(var).ok()),
        upstream: Mutex::default(),
        watch: Arc::new(Watch::new(
            api,
            Duration::from_millis(args.watch_ms),
            timeout,
        )),
    };
    let server = bridge
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|source| Error::Serve(Box::new(source)))?;
    server.waiting().await.map(drop).map_err(Error::Stopped)
}
