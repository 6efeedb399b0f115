//! The stdio bridge's resource subscriptions: what `resources/subscribe`
//! sets up and the poll that sends `notifications/resources/updated` and
//! `notifications/resources/list_changed`.
//!
//! The bridge never opens the data directory and the service has no change
//! feed, so it learns of changes by asking, with the bridge's key, as any
//! reader would: every `--watch-ms` it reads each subscribed uri through
//! REST and compares what it read with the last reading. A memory
//! (`GET /memories/{id}`) has changed when its version's fields, its edges,
//! its lifecycle (archived, under review, superseded by consolidation) or
//! the newest version of its chain changed, or when it is no longer there
//! (forgotten, or the key lost its grant); the bookkeeping of use and
//! checks (`used_at`, `checked_at`, `checked_commit`, the use count) is
//! not a change. A namespace's listing (`GET /memories` of that namespace,
//! the newest [`PAGE_SIZE`]) has changed when its memories or their
//! `updated_at` did. In the same tick one more request, the key's newest
//! current memory (`GET /memories?limit=1`), tells whether a memory or a
//! version was written: the list changed.
//!
//! Nothing is polled while nothing is subscribed: the poll starts with
//! the first subscription and ends at the first tick with none. A tick
//! the service does not answer (down, slow, refusing the key) is skipped
//! where it stopped, with nothing sent to the client, and the next tick
//! reads again. A uri is read at most once a tick, and at most
//! [`MAX_SUBSCRIPTIONS`] are watched, so a tick is a bounded number of
//! small requests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::client::http::{self, Api};
use crate::mcp::resources::{PAGE_SIZE, Target};
use crate::memory::{MemoryId, Namespace};

/// The most uris one bridge watches: each is a request a tick.
pub const MAX_SUBSCRIPTIONS: usize = 100;

/// What a subscribed uri names, as the bridge reads it.
#[derive(Clone, Debug)]
pub enum Subject {
    /// `engram://repo/<repo>/<id>`, `engram://user/<user>/<id>`.
    Memory(MemoryId),
    /// `engram://repo/<repo>`, `engram://user/<user>`.
    Listing(Namespace),
}

impl Subject {
    /// What `uri` names, or the invalid-params error `resources/read`
    /// gives for it; a search is not watched (each reading would be a
    /// retrieval).
    pub fn of(uri: &str) -> Result<Self, ErrorData> {
        let invalid = |detail: String| ErrorData::invalid_params(detail, Some(json!({"uri": uri})));
        match Target::parse(uri).map_err(invalid)? {
            Target::Memory { id, .. } => Ok(Self::Memory(id)),
            Target::Listing(namespace) => Ok(Self::Listing(namespace)),
            Target::Search { .. } => Err(invalid(
                "a search cannot be subscribed to: subscribe to the memories it finds, or to \
                 their namespace's listing"
                    .to_owned(),
            )),
        }
    }

    /// The REST path (and query) that reads it.
    fn path(&self) -> String {
        match self {
            Self::Memory(id) => format!("/memories/{id}"),
            Self::Listing(namespace) => {
                let mut query = form_urlencoded::Serializer::new(String::new());
                match namespace {
                    Namespace::Repo(repo) => query
                        .append_pair("scope", "repo")
                        .append_pair("repo", repo.as_str()),
                    Namespace::User(user) => query
                        .append_pair("scope", "user")
                        .append_pair("user", user.as_str()),
                };
                query.append_pair("limit", &PAGE_SIZE.to_string());
                format!("/memories?{}", query.finish())
            }
        }
    }

    /// What of `answer` counts as a change (see the module's header).
    fn marker(&self, mut answer: Value) -> Value {
        match self {
            Self::Memory(_) => {
                let newest = answer["chain"]
                    .as_array()
                    .and_then(|chain| chain.last())
                    .map(|head| head["id"].clone());
                if let Some(fields) = answer.as_object_mut() {
                    for bookkeeping in [
                        "used_at",
                        "checked_at",
                        "checked_commit",
                        "access_count",
                        "chain",
                        "edges",
                    ] {
                        fields.remove(bookkeeping);
                    }
                    fields.insert("newest".to_owned(), newest.unwrap_or_default());
                }
                answer
            }
            Self::Listing(_) => listed(&answer),
        }
    }
}

/// The ids and `updated_at` of a listing's memories, in its order.
fn listed(page: &Value) -> Value {
    page["memories"]
        .as_array()
        .map(|memories| {
            memories
                .iter()
                .map(|memory| json!([memory["id"], memory["updated_at"]]))
                .collect()
        })
        .unwrap_or_default()
}

/// A reading of a subscribed uri.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Its marker ([`Subject::marker`]).
    Read(Value),
    /// Not there for the key: forgotten, or no longer granted.
    Gone,
}

/// The service did not answer this reading: the tick stops.
struct Unanswered;

/// A subscribed uri.
struct Subscription {
    subject: Subject,
    /// The last reading; none until one succeeded.
    seen: Option<Seen>,
}

#[derive(Default)]
struct Watched {
    subscriptions: BTreeMap<String, Subscription>,
    /// The key's newest current memory, as last read (for `list_changed`).
    newest: Option<Value>,
    /// Whether the poll runs.
    polling: bool,
}

/// The subscriptions of one bridge and the service it reads them from.
pub struct Watch {
    api: Api,
    /// How often the poll reads.
    every: Duration,
    /// The most each reading may take.
    timeout: Duration,
    watched: Mutex<Watched>,
}

impl Watch {
    pub fn new(api: Api, every: Duration, timeout: Duration) -> Self {
        Self {
            api,
            every,
            timeout,
            watched: Mutex::default(),
        }
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches `uri` (already found readable) for the client at `peer`,
    /// from what it reads as now; starts the poll if it is not running.
    pub async fn subscribe(
        self: &Arc<Self>,
        uri: String,
        subject: Subject,
        peer: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        {
            let watched = self.watched();
            if watched.subscriptions.len() >= MAX_SUBSCRIPTIONS
                && !watched.subscriptions.contains_key(&uri)
            {
                return Err(ErrorData::invalid_params(
                    format!(
                        "the bridge watches at most {MAX_SUBSCRIPTIONS} resources: unsubscribe \
                         from one first"
                    ),
                    Some(json!({"uri": uri})),
                ));
            }
        }
        // The readings the changes are measured from; one that fails is
        // taken at the first tick instead.
        let seen = self.read(&subject).await.ok();
        let watching = self.watched().newest.is_some();
        let newest = if watching {
            None
        } else {
            self.newest().await.ok()
        };
        let mut watched = self.watched();
        watched
            .subscriptions
            .entry(uri)
            .or_insert(Subscription { subject, seen });
        if watched.newest.is_none() {
            watched.newest = newest;
        }
        if !watched.polling {
            watched.polling = true;
            tokio::spawn(Arc::clone(self).poll(peer));
        }
        Ok(())
    }

    /// Stops watching `uri`; whether it was watched.
    pub fn unsubscribe(&self, uri: &str) -> bool {
        self.watched().subscriptions.remove(uri).is_some()
    }

    /// Reads every subscription each tick and tells `peer` what changed,
    /// until a tick finds nothing subscribed.
    async fn poll(self: Arc<Self>, peer: Peer<RoleServer>) {
        let start = tokio::time::Instant::now() + self.every;
        let mut ticks = tokio::time::interval_at(start, self.every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let subjects: Vec<(String, Subject)> = {
                let mut watched = self.watched();
                if watched.subscriptions.is_empty() {
                    watched.polling = false;
                    watched.newest = None;
                    return;
                }
                watched
                    .subscriptions
                    .iter()
                    .map(|(uri, subscription)| (uri.clone(), subscription.subject.clone()))
                    .collect()
            };
            // A tick the service did not answer stops where it did.
            let _ = self.tick(subjects, &peer).await;
        }
    }

    /// One tick: each subject read, each change sent as soon as it is
    /// found (a later failure loses none), then the list.
    async fn tick(
        &self,
        subjects: Vec<(String, Subject)>,
        peer: &Peer<RoleServer>,
    ) -> Result<(), Unanswered> {
        for (uri, subject) in subjects {
            let seen = self.read(&subject).await?;
            if self.record(&uri, seen) {
                // A client that has gone ends the bridge; nothing to do here.
                let _ = peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await;
            }
        }
        let newest = self.newest().await?;
        let list_changed = {
            let mut watched = self.watched();
            let previous = watched.newest.replace(newest.clone());
            previous.is_some_and(|previous| previous != newest)
        };
        if list_changed {
            let _ = peer.notify_resource_list_changed().await;
        }
        Ok(())
    }

    /// Keeps `seen` as `uri`'s reading, if it is still subscribed: whether
    /// it differs from the one before.
    fn record(&self, uri: &str, seen: Seen) -> bool {
        let mut watched = self.watched();
        let Some(subscription) = watched.subscriptions.get_mut(uri) else {
            return false;
        };
        let previous = subscription.seen.replace(seen);
        previous.is_some_and(|previous| Some(&previous) != subscription.seen.as_ref())
    }

    /// What `subject` reads as now.
    async fn read(&self, subject: &Subject) -> Result<Seen, Unanswered> {
        match self.get(&subject.path()).await? {
            Ok(answer) => Ok(Seen::Read(subject.marker(answer))),
            // A memory the key may not see is not found; a namespace it
            // does not hold is forbidden.
            Err(403 | 404) => Ok(Seen::Gone),
            Err(_) => Err(Unanswered),
        }
    }

    /// The key's newest current memory: its id and `updated_at` (none
    /// when it has none).
    async fn newest(&self) -> Result<Value, Unanswered> {
        let page = self
            .get("/memories?limit=1")
            .await?
            .map_err(|_| Unanswered)?;
        Ok(listed(&page))
    }

    /// `GET path` within the bound: its JSON answer, or the status it was
    /// refused with.
    async fn get(&self, path: &str) -> Result<Result<Value, u16>, Unanswered> {
        match tokio::time::timeout(self.timeout, self.api.get(path)).await {
            Ok(Ok(answer)) => Ok(Ok(answer)),
            Ok(Err(http::Error::Status { status, .. })) => Ok(Err(status)),
            Ok(Err(_)) | Err(_) => Err(Unanswered),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_read_through_its_namespace_and_a_search_is_not_watched() {
        let Subject::Listing(namespace) = Subject::of("engram://repo/forge").unwrap() else {
            panic!("a listing");
        };
        assert_eq!(
            Subject::Listing(namespace).path(),
            format!("/memories?scope=repo&repo=forge&limit={PAGE_SIZE}")
        );
        let id = MemoryId::new();
        assert_eq!(
            Subject::of(&format!("engram://user/ana/{id}"))
                .unwrap()
                .path(),
            format!("/memories/{id}")
        );
        for refused in ["engram://search?q=releases", "file:///etc/passwd"] {
            let err = Subject::of(refused).unwrap_err();
            assert_eq!(
                err.code,
                rmcp::model::ErrorCode::INVALID_PARAMS,
                "{refused}"
            );
        }
    }

    #[test]
    fn use_and_checks_are_not_changes_but_a_newer_version_is() {
        let subject = Subject::Memory(MemoryId::new());
        let detail = |used_at: &str, head: &str| {
            json!({"id": "a", "content": "Forge tags releases.", "used_at": used_at,
                   "checked_at": used_at, "access_count": 3,
                   "chain": [{"id": "a"}, {"id": head}], "edges": {}})
        };
        let first = subject.marker(detail("2026-01-01", "a"));
        assert_eq!(first, subject.marker(detail("2026-02-01", "a")));
        assert_ne!(first, subject.marker(detail("2026-01-01", "b")));
    }
}
