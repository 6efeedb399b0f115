//! `recall` over MCP beside `POST /retrieve`, in the same run on the same
//! store: what the MCP layer (JSON-RPC framing, the SDK's dispatch, the
//! argument schema checks) adds to a retrieval.

use std::time::{Duration, Instant};

use engram::memory::Namespace;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::corpus;
use crate::measure::{Report, Row};
use crate::scratch::{ScratchDir, write_corpus};
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};

/// `requests` recalls over MCP and as many retrievals over REST, in turns,
/// over `size` memories.
pub async fn mcp(report: &mut Report, size: usize, requests: usize) -> Result {
    let dir = ScratchDir::new()?;
    write_corpus(dir.path(), &Namespace::Repo("bench".parse()?), size, 1)?;
    let (server, _) = Server::start(dir.path(), EmbedderChoice::Fake).await?;
    let rest = server.client();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", rest.base_url())),
    );
    let mcp = ().serve(transport).await?;
    let mut rng = corpus::Rng::new(7);
    let mut over_rest = Vec::with_capacity(requests);
    let mut over_mcp = Vec::with_capacity(requests);
    let started = Instant::now();
    for turn in 0..requests + 20 {
        let query = corpus::query(&mut rng);
        let body = json!({"turn_id": format!("r-{turn}"), "repo": "bench", "query": query});
        let one = Instant::now();
        rest.retrieve(&body).await?;
        let rest_took = one.elapsed();
        let Value::Object(arguments) =
            json!({"turn_id": format!("m-{turn}"), "repo": "bench", "query": query})
        else {
            unreachable!("an object literal");
        };
        let one = Instant::now();
        let result = mcp
            .call_tool(CallToolRequestParams::new("recall").with_arguments(arguments))
            .await?;
        let mcp_took = one.elapsed();
        if result.is_error == Some(true) {
            return Err(format!("recall failed: {:?}", result.content).into());
        }
        // The first twenty of each warm the caches and the connection.
        if turn >= 20 {
            over_rest.push(rest_took);
            over_mcp.push(mcp_took);
        }
    }
    let wall: Duration = started.elapsed() / 2;
    let detail = format!("{size} memories, fake embedder");
    report.rows.push(Row::from_samples(
        "retrieve over REST (POST /retrieve)",
        detail.clone(),
        &mut over_rest,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "recall over MCP (/mcp, tools/call)",
        detail,
        &mut over_mcp,
        wall,
    ));
    mcp.cancel().await?;
    server.stop().await;
    Ok(())
}
