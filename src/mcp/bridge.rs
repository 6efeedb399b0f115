//! `engram mcp`: MCP over stdio, for clients that only start local
//! processes. A thin bridge: it connects to a running Engram's `/mcp` and
//! passes the tool list and every tool call through, with the key from
//! `ENGRAM_API_KEY`. It never opens the data directory, so the service
//! stays its only owner.

use std::process::ExitCode;

use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};

/// `engram mcp`'s arguments.
#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// The running Engram to serve (its API root; `/mcp` is added).
    #[arg(long, env = "ENGRAM_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
}

/// A stdio MCP server whose tools are the running service's.
struct Bridge {
    upstream: RunningService<RoleClient, ()>,
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        // The service's own description, as it answered the handshake.
        self.upstream
            .peer_info()
            .map_or_else(ServerConfig::default, |info| {
                ServerConfig::new(info.capabilities.clone())
                    .with_server_info(info.server_info.clone().unwrap_or_default())
                    .with_instructions(info.instructions.clone().unwrap_or_default())
            })
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.upstream
            .list_tools(request)
            .await
            .map_err(upstream_error)
    }

    fn get_tool(&self, _name: &str) -> Option<Tool> {
        // Unknown here; the service answers for its tools.
        None
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.upstream
            .call_tool_once(request)
            .await
            .map_err(upstream_error)
    }
}

/// The service's own protocol error as it sent it; anything else (the
/// service down, a refused key) as an internal error that says so.
fn upstream_error(err: ServiceError) -> ErrorData {
    match err {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("Engram did not answer: {other}"), None),
    }
}

/// Runs the bridge until the client closes stdin.
pub fn run(args: &BridgeArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("engram mcp: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("engram mcp: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: &BridgeArgs) -> Result<(), String> {
    let endpoint = format!("{}/mcp", args.url.trim_end_matches('/'));
    let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.as_str());
    if let Some(key) = std::env::var("ENGRAM_API_KEY")
        .ok()
        .filter(|key| !key.is_empty())
    {
        config = config.auth_header(key);
    }
    let upstream = ()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|err| format!("cannot reach {endpoint}: {err}"))?;
    let server = Bridge { upstream }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|err| format!("stdio: {err}"))?;
    server
        .waiting()
        .await
        .map(drop)
        .map_err(|err| format!("stdio: {err}"))
}
