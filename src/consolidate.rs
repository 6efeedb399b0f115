//! Consolidation: a pass over a namespace's current memories that reduces
//! near-duplicates to one and finds contradictions, on demand
//! (`POST /consolidate`) and on a schedule (`consolidation.interval_hours`,
//! [`Consolidator::consolidate_everything`]).
//!
//! A pass with no model ([`plan`]) keeps the best-supported member of
//! each group of near-duplicates and makes the others `superseded_by` it
//! (a lifecycle change: no new version, chains kept, nothing deleted), and
//! puts both memories of a contradiction under review, each naming the
//! other. Every change is kept in the store's log of passes with its
//! reason and the lifecycles it set, before it is made, and can be undone
//! ([`undo`]). A pass deletes nothing.
//!
//! Passes and undos run one at a time in a process, and in postgres mode
//! one at a time across replicas, each on a view that holds the changes of
//! the one before ([`Store::pass_turn`]). The memories a pass
//! weighs are its namespace's current ones that are neither archived nor
//! `gone` and whose vectors are indexed, the newest [`MAX_CANDIDATES`] of
//! them (every pair of those is compared).

mod apply;
pub mod disagree;
mod model;
pub mod plan;
mod undo;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::blocking;
use crate::config::{self, Defaults};
use crate::memory::{MemoryId, Namespace, RepoId, Scope, UserId, Validity};
use crate::retrieval::Retriever;
use crate::store::consolidations::{Action, Pass, PassTrigger};
use crate::store::{ListFilter, Store, WriteError};
use crate::usage::Owner;
use model::Decisions;
use model::Model;
use plan::{Candidate, History, Thresholds, pair};

pub use undo::{UndoError, Undone};

/// The most memories of a namespace one pass weighs: the newest.
pub const MAX_CANDIDATES: usize = 5_000;

/// Runs consolidation passes; cheap to clone.
#[derive(Clone)]
pub struct Consolidator {
    inner: Arc<Inner>,
}

struct Inner {
    retriever: Retriever,
    thresholds: Thresholds,
    /// The owners a version the model writes is written for, beside its
    /// own namespace's.
    defaults: Defaults,
    /// Held through a pass or an undo: they run one at a time.
    running: tokio::sync::Mutex<()>,
}

/// What one namespace held when a pass went over it.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
pub struct Scanned {
    pub scope: Scope,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<UserId>,
    /// The memories weighed.
    pub memories: usize,
    /// Current memories left out because their vectors are not indexed
    /// yet (a later pass weighs them).
    pub not_indexed: usize,
}

/// What a run of passes did.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
pub struct Consolidated {
    /// Each namespace gone over.
    pub scanned: Vec<Scanned>,
    /// The passes that changed something, each with its changes (a pass
    /// that changed nothing is not kept).
    pub passes: Vec<Pass>,
}

impl Consolidator {
    pub fn new(retriever: Retriever, settings: &config::Consolidation, defaults: Defaults) -> Self {
        Self {
            inner: Arc::new(Inner {
                retriever,
                defaults,
                thresholds: Thresholds {
                    duplicate: settings.duplicate_threshold,
                    subject: settings.subject_threshold,
                },
                running: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn store(&self) -> &Store {
        self.inner.retriever.store()
    }

    /// One pass over each of `namespaces`, in turn.
    pub async fn consolidate(
        &self,
        namespaces: Vec<Namespace>,
        trigger: PassTrigger,
    ) -> Result<Consolidated, WriteError> {
        let mut consolidated = Consolidated {
            scanned: Vec::new(),
            passes: Vec::new(),
        };
        for namespace in namespaces {
            let (scanned, pass) = self.pass_in_turn(&namespace, trigger).await?;
            consolidated.scanned.push(scanned);
            consolidated.passes.extend(pass);
        }
        Ok(consolidated)
    }

    /// The schedule's run: one pass over every namespace that holds a
    /// memory. For a periodic task every `consolidation.interval_hours`.
    /// Each pass is counted and let go (it is in the store's log): over
    /// ten thousand namespaces, holding them all took gigabytes.
    pub async fn consolidate_everything(&self) -> Result<(), WriteError> {
        let namespaces = self.store().namespaces_held();
        let count = namespaces.len();
        let (mut passes, mut changes) = (0, 0);
        for namespace in namespaces {
            if let (_, Some(pass)) = self.pass_in_turn(&namespace, PassTrigger::Schedule).await? {
                passes += 1;
                changes += pass.changes.len();
            }
        }
        tracing::info!(
            namespaces = count,
            passes,
            changes,
            "scheduled consolidation finished"
        );
        Ok(())
    }

    /// One pass over `namespace` once it is this process's and this
    /// store's turn: a run over many namespaces takes a turn for each, so
    /// a request or an undo waits for one pass, not for the whole run.
    async fn pass_in_turn(
        &self,
        namespace: &Namespace,
        trigger: PassTrigger,
    ) -> Result<(Scanned, Option<Pass>), WriteError> {
        let _running = self.inner.running.lock().await;
        let _turn = self.store().pass_turn().await?;
        self.pass(namespace, trigger).await
    }

    /// One pass over `namespace`: what it weighed, and the pass if it
    /// changed anything.
    async fn pass(
        &self,
        namespace: &Namespace,
        trigger: PassTrigger,
    ) -> Result<(Scanned, Option<Pass>), WriteError> {
        let (candidates, not_indexed) = self.candidates(namespace);
        let (scope, repo, user) = namespace.owner_fields();
        let scanned = Scanned {
            scope,
            repo,
            user,
            memories: candidates.len(),
            not_indexed,
        };
        let history = history(&self.store().passes(vec![namespace.clone()]).await?);
        let thresholds = self.inner.thresholds;
        // Every pair is compared: CPU work, off the async workers.
        let planned = blocking::run(move || plan::plan(candidates, thresholds, &history)).await;
        let llm = self.inner.retriever.llm();
        let decisions = match llm {
            Some(llm) => {
                let (_, repo, user) = namespace.owner_fields();
                let model = Model {
                    llm,
                    owner: Owner { repo, user },
                };
                model::decide(&model, self.store(), &planned).await
            }
            None => Decisions::default(),
        };
        let mut pass = Pass::new(
            namespace,
            trigger,
            llm.map(|llm| llm.classifier_model().to_owned()),
        );
        let writes = apply::describe(
            self.store(),
            &self.inner.defaults,
            &planned,
            decisions,
            &mut pass,
        );
        if pass.changes.is_empty() {
            return Ok((scanned, None));
        }
        let pass = apply::apply(self.store(), pass, writes).await?;
        Ok((scanned, (!pass.changes.is_empty()).then_some(pass)))
    }

    /// The memories a pass over `namespace` weighs, and how many current
    /// ones it leaves out for want of a vector.
    fn candidates(&self, namespace: &Namespace) -> (Vec<Candidate>, usize) {
        let retriever = &self.inner.retriever;
        let filter = ListFilter {
            namespaces: vec![namespace.clone()],
            ..ListFilter::default()
        };
        let current: Vec<_> = self
            .store()
            .list(&filter, MAX_CANDIDATES, None, |_| true)
            .memories
            .into_iter()
            .filter(|memory| memory.lifecycle.validity != Validity::Gone)
            .collect();
        let ids: HashSet<MemoryId> = current.iter().map(|memory| memory.id).collect();
        let mut vectors: HashMap<MemoryId, Vec<f32>> = retriever
            .index()
            .snapshot()
            .vectors_of(std::slice::from_ref(namespace), &ids);
        let count = current.len();
        let candidates: Vec<Candidate> = current
            .into_iter()
            .filter_map(|memory| {
                let vector = vectors.remove(&memory.id)?;
                let uses = retriever.access_counts().get(memory.id);
                Some(Candidate {
                    memory,
                    vector,
                    uses,
                })
            })
            .collect();
        let not_indexed = count - candidates.len();
        (candidates, not_indexed)
    }

    /// Undoes the changes of pass `id` (those of `changes`, by their place
    /// in the pass; every one not undone yet when `None`) for a caller
    /// that sees the namespaces `visible` admits.
    pub async fn undo(
        &self,
        id: uuid::Uuid,
        changes: Option<Vec<usize>>,
        visible: impl Fn(&Namespace) -> bool,
    ) -> Result<undo::Undone, UndoError> {
        let _running = self.inner.running.lock().await;
        let _turn = self.store().pass_turn().await?;
        undo::undo(self.store(), id, changes, visible).await
    }
}

/// The pairs earlier passes decided about that a new pass must leave be.
fn history(passes: &[Pass]) -> History {
    let mut history = History::default();
    for change in passes.iter().flat_map(|pass| &pass.changes) {
        match change.action {
            Action::Flagged => {
                if let [first, second] = change.flagged[..] {
                    history.flagged.insert(pair(first, second));
                }
            }
            Action::Merged | Action::Rewritten | Action::Settled if change.undone_at.is_some() => {
                let members = change.kept.iter().chain(&change.superseded);
                for (at, &one) in members.clone().enumerate() {
                    for &other in members.clone().skip(at + 1) {
                        history.unmerged.insert(pair(one, other));
                    }
                }
            }
            Action::Merged | Action::Rewritten | Action::Settled => {}
        }
    }
    history
}
