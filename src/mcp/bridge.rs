//! `engram mcp`: MCP over stdio, for clients that only start local
//! processes. A thin bridge: it passes the tool list and every tool call
//! through to a running Engram's `/mcp`, with the key from
//! `ENGRAM_API_KEY`. It never opens the data directory, so the service
//! stays its only owner.
//!
//! It answers the client's handshake itself, with the service's own
//! description, and connects to the service at the first call: an agent
//! started before Engram, or across a restart of Engram, gets a tool error
//! saying Engram is not answering, and the next call connects again.
//!
//! Its one addition is the namespace: a tool call that names no `repo` or
//! `user` gets the bridge's (`--repo`, `--user`, else the project of the
//! directory the agent started it in and the OS user, as `engram hook`
//! finds them), so the memories an agent reaches through MCP are the ones
//! its hooks capture and retrieve.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::causes::error_chain;
use crate::hook::project;

/// `engram mcp`'s arguments.
#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// The running Engram to serve (its API root; `/mcp` is added).
    #[arg(long, env = "ENGRAM_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The repo id for calls that name none (default: the git checkout's
    /// directory name of the current directory).
    #[arg(long)]
    pub repo: Option<String>,
    /// The user id for calls that name none (default: the OS user).
    #[arg(long)]
    pub user: Option<String>,
}

/// A stdio MCP server whose tools are the running service's.
struct Bridge {
    /// The service's `/mcp`.
    endpoint: String,
    key: Option<String>,
    /// `repo` and `user`, for the calls that leave them out.
    owners: Map<String, Value>,
    /// The connection to the service: made at the first call that needs
    /// it, dropped when it fails, made again at the next call.
    upstream: Mutex<Option<Arc<Upstream>>>,
}

/// One connection to the service, with what it said of its tools.
struct Upstream {
    service: RunningService<RoleClient, ()>,
    /// The tools whose arguments take a `repo` and a `user`.
    owned_tools: Vec<String>,
}

impl Upstream {
    async fn connect(endpoint: &str, key: Option<&str>) -> Result<Self, Error> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint);
        if let Some(key) = key {
            config = config.auth_header(key);
        }
        let service =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .map_err(|source| Error::Connect {
                    endpoint: endpoint.to_owned(),
                    source: Box::new(source),
                })?;
        let tools = service
            .list_all_tools()
            .await
            .map_err(|source| Error::Tools {
                endpoint: endpoint.to_owned(),
                source,
            })?;
        Ok(Self {
            owned_tools: owned_tools(&tools),
            service,
        })
    }
}

impl Bridge {
    /// The live connection, or a new one; a tool error when the service
    /// cannot be reached.
    async fn upstream(&self) -> Result<Arc<Upstream>, ErrorData> {
        let mut slot = self.upstream.lock().await;
        if let Some(upstream) = slot.as_ref().filter(|u| !u.service.is_closed()) {
            return Ok(upstream.clone());
        }
        *slot = None;
        let upstream = Upstream::connect(&self.endpoint, self.key.as_deref())
            .await
            .map_err(|err| ErrorData::internal_error(error_chain(&err), None))?;
        let upstream = Arc::new(upstream);
        *slot = Some(upstream.clone());
        Ok(upstream)
    }

    /// The service's own protocol error as it sent it. Anything else (the
    /// service gone, a refused key) drops the connection, so the next call
    /// connects again, and is an internal error that says so.
    async fn upstream_error(&self, used: &Arc<Upstream>, err: ServiceError) -> ErrorData {
        if let ServiceError::McpError(error) = err {
            return error;
        }
        let mut slot = self.upstream.lock().await;
        if slot.as_ref().is_some_and(|live| Arc::ptr_eq(live, used)) {
            *slot = None;
        }
        ErrorData::internal_error(
            format!("Engram did not answer at {}: {err}", self.endpoint),
            None,
        )
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        super::server_config()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let upstream = self.upstream().await?;
        match upstream.service.list_tools(request).await {
            Ok(tools) => Ok(tools),
            Err(err) => Err(self.upstream_error(&upstream, err).await),
        }
    }

    fn get_tool(&self, _name: &str) -> Option<Tool> {
        // Unknown here; the service answers for its tools.
        None
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let upstream = self.upstream().await?;
        if upstream
            .owned_tools
            .iter()
            .any(|name| name.as_str() == request.name)
        {
            let arguments = request.arguments.get_or_insert_default();
            for (owner, id) in &self.owners {
                arguments.entry(owner.clone()).or_insert_with(|| id.clone());
            }
        }
        match upstream.service.call_tool_once(request).await {
            Ok(response) => Ok(response),
            Err(err) => Err(self.upstream_error(&upstream, err).await),
        }
    }
}

/// Runs the bridge until the client closes stdin.
pub fn run(args: &BridgeArgs) -> ExitCode {
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)
        .and_then(|runtime| runtime.block_on(serve(args)));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("engram mcp: {}", error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// The bridge's `repo` and `user`: the flags, else the project of the
/// current directory and the OS user. An owner that cannot be made a valid
/// id is left out, and the service's default applies.
fn owners(args: &BridgeArgs, env: impl Fn(&str) -> Option<String>) -> Map<String, Value> {
    let repo = match &args.repo {
        Some(repo) => project::to_id(repo),
        None => std::env::current_dir()
            .ok()
            .and_then(|dir| project::repo_name(&dir)),
    };
    let user = match &args.user {
        Some(user) => project::to_id(user),
        None => project::os_user(env),
    };
    [("repo", repo), ("user", user)]
        .into_iter()
        .filter_map(|(owner, id)| Some((owner.to_owned(), Value::String(id?))))
        .collect()
}

/// The tools whose input schema has both a `repo` and a `user` property.
fn owned_tools(tools: &[Tool]) -> Vec<String> {
    tools
        .iter()
        .filter(|tool| {
            tool.input_schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|properties| {
                    properties.contains_key("repo") && properties.contains_key("user")
                })
        })
        .map(|tool| tool.name.to_string())
        .collect()
}

/// Why the bridge stopped, or could not reach the service.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot reach {endpoint}")]
    Connect {
        endpoint: String,
        #[source]
        source: Box<rmcp::service::ClientInitializeError>,
    },
    #[error("listing the tools of {endpoint}")]
    Tools {
        endpoint: String,
        #[source]
        source: ServiceError,
    },
    #[error("serving over stdio")]
    Serve(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error("serving over stdio")]
    Stopped(#[source] tokio::task::JoinError),
}

async fn serve(args: &BridgeArgs) -> Result<(), Error> {
    let bridge = Bridge {
        endpoint: format!("{}/mcp", args.url.trim_end_matches('/')),
        key: std::env::var("ENGRAM_API_KEY")
            .ok()
            .filter(|key| !key.is_empty()),
        owners: owners(args, |var| std::env::var(var).ok()),
        upstream: Mutex::default(),
    };
    // Connecting early only tells the person reading the client's log; the
    // calls connect again on their own.
    if let Err(err) = bridge.upstream().await {
        eprintln!("engram mcp: {}; tool calls will try again", err.message);
    }
    let server = bridge
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|source| Error::Serve(Box::new(source)))?;
    server.waiting().await.map(drop).map_err(Error::Stopped)
}
