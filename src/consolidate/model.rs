//! A pass with a model (`llm` configured): the classifier model writes each
//! group of near-duplicates as one memory in its own words, and says of
//! each contradiction whether the two cannot both hold and whether it is
//! sure. Every call is metered (`consolidation`, against the capture
//! budget, checked before each call), its prompt redacted by the client
//! ([`Llm::complete`]); what it writes passes the same checks as any
//! memory (content, secrets). A call that fails, a reply that does not
//! read, a spent budget or a prompt past the model's context leaves the
//! decision to the pass with no model, and the reason says so.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use crate::llm::{Llm, Purpose, reply};
use crate::memory::{Memory, parse_content};
use crate::secrets;
use crate::store::Store;
use crate::tokens;
use crate::usage::{CallKind, Owner};

use super::plan::{Merge, Plan};

/// Tokens kept for the model's reply.
const REPLY_TOKENS: usize = 1024;

const MERGE_PROMPT: &str = "You merge the memories a coding agent keeps about a project or a \
person. The memories you are given say the same thing in different words. Write it once, as one \
memory of one or two plain sentences, keeping every detail any of them gives (names, paths, \
commands, numbers, reasons) and adding nothing. Answer with JSON only: {\"content\": \"...\"}";

const SETTLE_PROMPT: &str = "Two memories a coding agent keeps about a project or a person seem \
to disagree. Say whether they contradict each other (both cannot hold at once) and whether you are \
sure. Answer with JSON only: {\"contradict\": true or false, \"sure\": true or false, \"why\": \"one \
short sentence\"}";

/// What the model decided of a plan, in the plan's order; `None` where no
/// model was asked.
#[derive(Default)]
pub(super) struct Decisions {
    pub merges: Vec<Option<Merged>>,
    pub contradictions: Vec<Option<Settled>>,
}

/// What the model made of a group of near-duplicates.
pub(super) enum Merged {
    /// One memory in its words.
    Rewritten(String),
    /// No rewrite: why, for the change's reason.
    Declined(String),
}

/// What the model made of a contradiction.
pub(super) enum Settled {
    /// They contradict and it is sure: the newer holds. Its words why.
    ForNewer(String),
    /// It is sure they agree: nothing to do. Its words why.
    Agree(String),
    /// Not sure, or no answer: flagged. Why, for the reason.
    Unsure(String),
}

/// The model, as a pass over one namespace calls it.
pub(super) struct Model<'a> {
    pub llm: &'a Llm,
    pub owner: Owner,
}

impl Model<'_> {
    /// One memory saying what `members` say.
    pub async fn merge(&self, members: &[Arc<Memory>]) -> Merged {
        let mut prompt = String::from("MEMORIES:\n");
        for member in members {
            let _ = writeln!(prompt, "- {}", member.content);
        }
        let reply = match self.ask(MERGE_PROMPT, &prompt).await {
            Ok(reply) => reply,
            Err(why) => return Merged::Declined(why),
        };
        let content = reply
            .get("content")
            .and_then(Value::as_str)
            .map(parse_content)
            .and_then(Result::ok)
            .map(str::to_owned);
        match content {
            Some(content) if secrets::find_secret(&content).is_some() => {
                Merged::Declined("the model's version looks like it holds a secret".to_owned())
            }
            Some(content) => Merged::Rewritten(content),
            None => Merged::Declined("the model's reply held no content".to_owned()),
        }
    }

    /// Whether `older` and `newer` cannot both hold, as the model sees it.
    pub async fn settle(&self, older: &Memory, newer: &Memory) -> Settled {
        let prompt = format!(
            "OLDER (written {}): {}\nNEWER (written {}): {}",
            older.created_at.format("%Y-%m-%d"),
            older.content,
            newer.created_at.format("%Y-%m-%d"),
            newer.content
        );
        let reply = match self.ask(SETTLE_PROMPT, &prompt).await {
            Ok(reply) => reply,
            Err(why) => return Settled::Unsure(why),
        };
        let flag = |name: &str| reply.get(name).and_then(Value::as_bool);
        let why = reply
            .get("why")
            .and_then(Value::as_str)
            .map(|why| crate::memory::excerpt(why, 200))
            .unwrap_or_default();
        match (flag("contradict"), flag("sure")) {
            (Some(true), Some(true)) => Settled::ForNewer(why),
            (Some(false), Some(true)) => Settled::Agree(why),
            (Some(_), Some(false)) => Settled::Unsure(format!("the model is not sure: {why}")),
            _ => Settled::Unsure("the model's reply did not say".to_owned()),
        }
    }

    /// The JSON object the model answers `prompt` with, or why there is
    /// none.
    async fn ask(
        &self,
        system: &str,
        prompt: &str,
    ) -> Result<serde_json::Map<String, Value>, String> {
        if self.llm.meter().capture_gate().is_closed() {
            return Err("the daily capture token budget is spent".to_owned());
        }
        let room = self.llm.context_tokens().saturating_sub(REPLY_TOKENS);
        if tokens::count(system) + tokens::count(prompt) > room {
            return Err("the memories do not fit the model's context".to_owned());
        }
        let timeout = self.llm.timeout(Purpose::Classifier);
        let completion = self
            .llm
            .complete(
                CallKind::Consolidation,
                self.owner.clone(),
                system,
                prompt,
                timeout,
            )
            .await
            .map_err(|err| format!("the model could not be asked: {err}"))?;
        reply::find_json(&completion.text, |value| match value {
            Value::Object(object) => Some(vec![Value::Object(object)]),
            _ => None,
        })
        .and_then(|found| found.into_iter().next())
        .and_then(|value| match value {
            Value::Object(object) => Some(object),
            _ => None,
        })
        .ok_or_else(|| "the model's reply held no JSON object".to_owned())
    }
}

/// What the model makes of each merge and contradiction of `plan`, asked
/// one after the other.
pub(super) async fn decide(model: &Model<'_>, store: &Store, plan: &Plan) -> Decisions {
    let mut decisions = Decisions::default();
    for merge in &plan.merges {
        let members = members(store, merge);
        decisions.merges.push(Some(model.merge(&members).await));
    }
    for contradiction in &plan.contradictions {
        let (Some(first), Some(second)) = (
            store.get(contradiction.first.0),
            store.get(contradiction.second.0),
        ) else {
            decisions.contradictions.push(None);
            continue;
        };
        let (older, newer) = by_age(first, second);
        decisions
            .contradictions
            .push(Some(model.settle(&older, &newer).await));
    }
    decisions
}

/// The members of a group, the kept one first, for the model to read.
pub(super) fn members(store: &Store, merge: &Merge) -> Vec<Arc<Memory>> {
    std::iter::once(merge.kept)
        .chain(merge.others.iter().map(|(id, _)| *id))
        .filter_map(|id| store.get(id))
        .collect()
}

/// The older and the newer of two memories, by when each was written.
pub(super) fn by_age(one: Arc<Memory>, other: Arc<Memory>) -> (Arc<Memory>, Arc<Memory>) {
    if (one.created_at, one.id) <= (other.created_at, other.id) {
        (one, other)
    } else {
        (other, one)
    }
}
