//! `POST /memories/batch`: up to 1,000 bodies of `POST /memories` in one
//! request, each written or refused on its own, those written made
//! durable together (one group of files, or one transaction) before the
//! answer. Each body goes the way one `POST /memories` goes
//! ([`crate::routes::writing`]): the same checks, grants, guards and
//! problems, as if the bodies were sent one at a time in order.
//!
//! The request itself is refused whole, writing nothing, when it is not
//! one: a body that is not JSON (`400`), over the body limit (`413`), not
//! an object with exactly `memories` (`422`), or with 0 or more than
//! 1,000 memories (`422`, naming `memories`); and when the disk is below
//! its floor (`507`) or the store fails (`5xx`). Anything wrong with one
//! memory, even one that is not an object, is that memory's own result.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::config::Defaults;
use crate::error::{ApiError, Problem};
use crate::memory::MemoryView;
use crate::retrieval::Retriever;
use crate::routes::extract::{self, ApiJson};
use crate::routes::problems::{BodyProblems, Unauthorized};
use crate::routes::writing::CreateMemoryRequest;
use crate::routes::writing::Writer;
use crate::store::Store;

/// The most memories one batch carries.
pub const MAX_BATCH: usize = 1000;

/// Memories to write together.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// 1 to 1,000 bodies of `POST /memories`. Each is read on its own: one
    /// that is not a valid body is refused in its result, not the batch.
    #[schema(value_type = Vec<CreateMemoryRequest>)]
    pub memories: Vec<serde_json::Value>,
}

/// One result per memory sent, in the same order.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResponse {
    pub results: Vec<BatchResult>,
}

/// What became of one memory of the batch.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum BatchResult {
    /// Written: `status` is 201.
    Written {
        status: u16,
        #[schema(value_type = MemoryView)]
        memory: Box<MemoryView>,
    },
    /// Refused, changing nothing: `status` is the 4xx `POST /memories`
    /// would have answered, and `problem` its problem.
    Refused { status: u16, problem: Problem },
}

/// Write up to 1,000 memories at once.
///
/// Each of `memories` is a body of `POST /memories`, checked on its own
/// as that route checks one (fields, grants, the secret guard, `dedupe`)
/// and answered in `results`, in order. Those accepted are written
/// durably together, once, before the answer; one refused changes
/// nothing. The batch behaves as if its memories were sent one at a time
/// in order: two that supersede the same memory, the second is refused
/// (`409`); one with `dedupe` that says what an earlier one of the batch
/// says, in the same namespace, is refused (`409`).
#[utoipa::path(
    post,
    path = "/memories/batch",
    tag = "memories",
    request_body = BatchRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, description = "One result per memory, in order: `{\"status\": 201, \"memory\"}` for each written, `{\"status\": 4xx, \"problem\"}` for each refused", body = BatchResponse),
        (status = 422, description = "`memories` is not a list of 1 to 1,000, or the body has another field", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "The data directory is below its free-space floor (`limits.min_free_disk_bytes`); nothing was written", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_memories(
    State(store): State<Store>,
    State(defaults): State<Defaults>,
    State(config): State<std::sync::Arc<crate::config::Config>>,
    State(retriever): State<Retriever>,
    caller: Caller,
    ApiJson(request): ApiJson<BatchRequest>,
) -> Result<Json<BatchResponse>, ApiError> {
    extract::one_to("memories", request.memories.len(), MAX_BATCH, "memories")?;
    let requests = request
        .memories
        .iter()
        .map(extract::from_arguments::<CreateMemoryRequest>)
        .collect();
    let writer = Writer {
        store: &store,
        defaults: &defaults,
        config: &config,
        retriever: &retriever,
        caller: &caller,
    };
    let results = writer
        .write(requests)
        .await?
        .into_iter()
        .map(|outcome| match outcome {
            Ok(memory) => BatchResult::Written {
                status: axum::http::StatusCode::CREATED.as_u16(),
                memory: Box::new(memory),
            },
            Err(refused) => {
                let problem = refused.report();
                BatchResult::Refused {
                    status: problem.status,
                    problem,
                }
            }
        })
        .collect();
    Ok(Json(BatchResponse { results }))
}
