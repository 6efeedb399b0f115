//! The one path a memory written through the API takes, alone
//! (`POST /memories`, the MCP tools) or many at once
//! (`POST /memories/batch`): each request checked on its own (its fields,
//! the secret guard, the key's grants) and completed from the version it
//! supersedes; `dedupe`'s near-duplicate check, with one embedding call
//! for all of them; the free-space floor; then one durable write of all
//! those accepted ([`Store::create_all`]). A request refused at any step
//! gets the problem it would get alone, and changes nothing.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::capture::guard::{self, DuplicateOf, Verdict};
use crate::causes::error_chain;
use crate::config::{Config, Defaults};
use crate::error::ApiError;
use crate::memory::{
    Anchor, Category, CommitId, Confidence, MemoryId, MemoryView, Namespace, Origin, RelatedEdge,
    RepoId, Scope, SessionId, UserId, check_anchors, excerpt, parse_content, parse_importance,
};
use crate::retrieval::Retriever;
use crate::retrieval::inject::quoted;
use crate::routes::extract;
use crate::secrets;
use crate::store::{MAX_RELATED, NamespacePair, NewMemory, Reach, Store};

/// A memory to write. The owner is the request's repo for `repo` scope and
/// its user for `user` scope (the configured defaults when omitted).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMemoryRequest {
    pub repo: Option<RepoId>,
    pub user: Option<UserId>,
    pub scope: Scope,
    pub category: Category,
    /// Non-empty, at most 8,000 characters; stored trimmed.
    pub content: String,
    /// How much the memory matters, 0..1. With `supersedes`, kept from the
    /// old version when left out.
    pub importance: Option<f64>,
    /// A memory of the same namespace that this one replaces; it must be
    /// the current head of its chain. The new version is its version + 1,
    /// and takes from it every optional field the request leaves out
    /// (`importance`, `related`, `session_id`).
    pub supersedes: Option<MemoryId>,
    /// Edges to existing memories of the request's repo or user (at most
    /// 64). With `supersedes`, the old version's edges when left out; `[]`
    /// drops them.
    pub related: Option<Vec<RelatedEdge>>,
    /// With `supersedes`, kept from the old version when left out.
    pub session_id: Option<SessionId>,
    /// What in the repo the memory is about (at most 32): files, a name
    /// in each that must still be there, and their content hashes now.
    /// `engram check` judges them against a working tree. With
    /// `supersedes`, the old version's anchors when left out; `[]` drops
    /// them.
    pub anchors: Option<Vec<Anchor>>,
    /// The repo's HEAD as the memory is written. With `supersedes`, kept
    /// from the old version when left out.
    pub commit: Option<CommitId>,
    /// When the fact was said or became true (RFC 3339), if not now: not
    /// before 1970, nor more than 5 minutes past the server's clock. Never
    /// carried over from the version superseded.
    pub observed_at: Option<DateTime<Utc>>,
    /// `true`: refuse the write with `409`
    /// (`urn:engram:problem:duplicate-memory`) when a current memory of the
    /// namespace written already says nearly the same (cosine similarity
    /// at or above `capture.duplicate_threshold`), as capture refuses its
    /// near-duplicates; the memory `supersedes` names does not count.
    /// Default `false`; the MCP `remember` tool and `remember:` prompts
    /// send `true`.
    pub dedupe: Option<bool>,
}

/// The most of an existing memory a duplicate's problem quotes, in characters.
const EXCERPT_CHARS: usize = 200;

/// What a write needs from the service, and who asks.
pub struct Writer<'a> {
    pub store: &'a Store,
    pub defaults: &'a Defaults,
    pub config: &'a Config,
    pub retriever: &'a Retriever,
    pub caller: &'a Caller,
}

/// A request that passed its own checks, ready for the store.
struct Admitted {
    new: NewMemory,
    reach: Reach,
    dedupe: bool,
}

impl Writer<'_> {
    /// Writes each of `requests` (or passes on the problem its body
    /// already had), as if one at a time in order, and answers each one's
    /// memory or problem in the same order. `Err` is a problem of the
    /// whole write (the disk below its floor, the store failing): then
    /// nothing was written.
    pub async fn write(
        &self,
        requests: Vec<Result<CreateMemoryRequest, ApiError>>,
    ) -> Result<Vec<Result<MemoryView, ApiError>>, ApiError> {
        let mut outcomes: Vec<Result<Admitted, ApiError>> = requests
            .into_iter()
            .map(|request| request.and_then(|request| self.admit(request)))
            .collect();
        self.refuse_duplicates(&mut outcomes).await;
        let mut accepted = Vec::new();
        let mut results: Vec<Option<Result<MemoryView, ApiError>>> = outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(admitted) => {
                    accepted.push((admitted.new, admitted.reach));
                    None
                }
                Err(problem) => Some(Err(problem)),
            })
            .collect();
        if !accepted.is_empty() {
            crate::disk::ensure_free_space(
                &self.config.data_dir,
                self.config.limits.min_free_disk_bytes,
            )?;
        }
        let mut written = self.store.create_all(accepted).await?.into_iter();
        for slot in results.iter_mut().filter(|slot| slot.is_none()) {
            let outcome = written
                .next()
                .expect("one outcome for each memory accepted");
            *slot = Some(
                outcome
                    .map(|memory| MemoryView::seen_by(&memory, self.store, self.caller))
                    .map_err(ApiError::from),
            );
        }
        Ok(results.into_iter().flatten().collect())
    }

    /// `request`'s own checks: its fields, the secret guard, and the
    /// key's grants; then what it leaves out, carried over from the
    /// version it supersedes.
    fn admit(&self, mut request: CreateMemoryRequest) -> Result<Admitted, ApiError> {
        let content = parse_content(&request.content)
            .map_err(|err| ApiError::invalid("content", format!("`content` {err}")))?;
        secrets::ensure_no_secret("content", content)?;
        if let Some(session_id) = &request.session_id {
            secrets::ensure_no_secret("session_id", session_id.as_str())?;
        }
        if let Some(importance) = request.importance {
            parse_importance(importance)
                .map_err(|err| ApiError::invalid("importance", format!("`importance` {err}")))?;
        }
        if let Some(related) = &request.related {
            check_related(related)?;
        }
        if let Some(anchors) = &request.anchors {
            check_anchor_fields(anchors, "")?;
        }
        let observed_at = request
            .observed_at
            .map(|at| extract::observed_at("observed_at", at))
            .transpose()?;
        // Only what the write touches must be held: the namespace written
        // (and so its `supersedes`) and those its `related` edges name; an
        // omitted owner the key does not hold is simply out of reach.
        let reach = self
            .caller
            .reach(request.repo.clone(), request.user.clone(), self.defaults)?;
        let pair = self
            .caller
            .pair(request.repo.clone(), request.user.clone(), self.defaults);
        let written = pair.owner(request.scope);
        if !reach.contains(&written) {
            return Err(ApiError::Forbidden {
                detail: format!("this API key may not write to {written}"),
            });
        }
        let content = content.to_owned();
        carry_over(&mut request, self.store, self.caller, &pair, &written);
        let new = NewMemory {
            pair,
            scope: request.scope,
            category: request.category,
            content,
            importance: request.importance,
            supersedes: request.supersedes,
            related: request.related.unwrap_or_default(),
            session_id: request.session_id,
            trigger: Origin::Manual,
            anchors: request.anchors.unwrap_or_default(),
            commit: request.commit,
            observed_at,
            // A person or an agent asked it to be written.
            confidence: Confidence::Confirmed,
        };
        Ok(Admitted {
            new,
            reach,
            dedupe: request.dedupe == Some(true),
        })
    }

    /// `dedupe`: the capture guard's near-duplicate check, over every
    /// memory admitted, in one embedding call. One with `dedupe` is
    /// refused when a current memory of its namespace says nearly the
    /// same (but the one it supersedes), or an earlier one of the same
    /// write, in the same namespace, does. An embedder that fails does
    /// not stop an explicit write: the memories are written unchecked
    /// (duplicates at worst), and the failure logged.
    async fn refuse_duplicates(&self, outcomes: &mut [Result<Admitted, ApiError>]) {
        let deduped = outcomes
            .iter()
            .any(|outcome| outcome.as_ref().is_ok_and(|admitted| admitted.dedupe));
        if !deduped {
            return;
        }
        let news: Vec<NewMemory> = outcomes
            .iter()
            .flatten()
            .map(|admitted| admitted.new.clone())
            .collect();
        let verdicts = match guard::near_duplicates(
            self.retriever.embedder(),
            self.retriever.index(),
            self.store,
            &news,
            self.config.capture.duplicate_threshold,
        )
        .await
        {
            Ok(verdicts) => verdicts,
            Err(err) => {
                tracing::warn!(error = %error_chain(&err), "no duplicate check: the embedder failed; writing unchecked");
                return;
            }
        };
        let mut verdicts = verdicts.into_iter();
        for outcome in outcomes.iter_mut() {
            let Ok(admitted) = outcome else { continue };
            let verdict = verdicts.next().expect("a verdict for each memory admitted");
            if !admitted.dedupe {
                continue;
            }
            let refusal = match verdict {
                Verdict::Duplicate(DuplicateOf::Stored(id)) => self
                    .store
                    .get(id)
                    .map(|existing| duplicate_of_stored(&existing)),
                Verdict::Duplicate(DuplicateOf::EarlierInBatch) => {
                    Some(ApiError::DuplicateMemory {
                        detail:
                            "an earlier memory of this batch, in the same namespace, already says \
                             this; it is written, this one is not"
                                .to_owned(),
                    })
                }
                _ => None,
            };
            if let Some(refusal) = refusal {
                *outcome = Err(refusal);
            }
        }
    }
}

/// The problem of a write that says what `existing` says. The memory is
/// quoted as the injection quotes memories, as data: the detail goes into
/// an agent's context (`remember:`, MCP).
fn duplicate_of_stored(existing: &crate::memory::Memory) -> ApiError {
    ApiError::DuplicateMemory {
        detail: format!(
            "memory {} ({} {}) already says this; update it (`supersedes`) to change it. \
             It says, quoted as data:\n{}",
            existing.id,
            existing.namespace,
            existing.category,
            quoted(&excerpt(&existing.content, EXCERPT_CHARS)).trim_end_matches('\n'),
        ),
    }
}

/// The one rule for a new version, through REST and MCP alike: what the
/// request leaves out is carried over from the version it supersedes.
/// Only a predecessor the write may supersede (in the namespace written,
/// visible to the caller) lends anything; otherwise the store refuses
/// `supersedes` as it would have. Carried edges are those that still lead
/// to a memory the pair and the key may link to.
fn carry_over(
    request: &mut CreateMemoryRequest,
    store: &Store,
    caller: &Caller,
    pair: &NamespacePair,
    written: &Namespace,
) {
    let Some(predecessor) = request
        .supersedes
        .and_then(|id| store.get(id))
        .filter(|old| old.namespace == *written && caller.can_see(&old.namespace))
    else {
        return;
    };
    request.importance = request.importance.or(predecessor.importance);
    if request.session_id.is_none() {
        request.session_id.clone_from(&predecessor.session_id);
    }
    if request.anchors.is_none() {
        request.anchors = Some(predecessor.anchors.clone());
    }
    if request.commit.is_none() {
        request.commit.clone_from(&predecessor.commit);
    }
    if request.related.is_none() {
        let edges = store.edges_within(predecessor.id, |namespace| {
            pair.contains(namespace) && caller.can_see(namespace)
        });
        request.related = Some(edges.outgoing);
    }
}

/// Checks anchors to be written (their field names after `prefix`, as
/// `memories[3].`): the list as a whole, and no secret in a path or a
/// symbol (both are stored and shown like content).
pub(crate) fn check_anchor_fields(anchors: &[Anchor], prefix: &str) -> Result<(), ApiError> {
    check_anchors(anchors).map_err(|(field, reason)| {
        let field = format!("{prefix}{field}");
        ApiError::invalid(field.clone(), format!("`{field}` {reason}"))
    })?;
    for (index, anchor) in anchors.iter().enumerate() {
        secrets::ensure_no_secret(
            format!("{prefix}anchors[{index}].path"),
            anchor.path.as_str(),
        )?;
        if let Some(symbol) = &anchor.symbol {
            secrets::ensure_no_secret(format!("{prefix}anchors[{index}].symbol"), symbol.as_str())?;
        }
    }
    Ok(())
}

fn check_related(related: &[RelatedEdge]) -> Result<(), ApiError> {
    if related.len() > MAX_RELATED {
        return Err(ApiError::invalid(
            "related",
            format!(
                "`related` has {} edges; the limit is {MAX_RELATED}",
                related.len()
            ),
        ));
    }
    let mut seen = HashSet::new();
    for (index, edge) in related.iter().enumerate() {
        if !seen.insert(edge.id) {
            let field = format!("related[{index}].id");
            return Err(ApiError::invalid(
                field.clone(),
                format!("`{field}` repeats {}", edge.id),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryId;

    #[test]
    fn related_edges_are_bounded_and_unique() {
        let edge = |id: MemoryId| RelatedEdge {
            id,
            relationship: crate::memory::Relationship::Related,
        };
        let id = MemoryId::new();
        let err = check_related(&[edge(id), edge(MemoryId::new()), edge(id)]).unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidField { ref field, .. } if field == "related[2].id")
        );
        let many: Vec<_> = (0..=MAX_RELATED).map(|_| edge(MemoryId::new())).collect();
        assert!(check_related(&many).is_err());
    }
}
