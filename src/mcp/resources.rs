//! Memories as MCP resources: `resources/list`, `resources/read` and
//! `resources/templates/list` at `/mcp`.
//!
//! A memory is `engram://repo/<repo>/<id>` or `engram://user/<user>/<id>`,
//! read as its markdown file: the front-matter and the body, as on disk,
//! with the edges the caller may see. `resources/list` pages through the
//! current memories (no superseded or archived version) the caller's key
//! holds, newest first, [`PAGE_SIZE`] a page. The templates name what else
//! can be read: a namespace's listing (`engram://repo/{repo}`,
//! `engram://user/{user}`) and a search (`engram://search{?q,repo,user}`,
//! what the `recall` tool finds, as markdown).
//!
//! Each goes through the REST operation (`GET /memories`,
//! `GET /memories/{id}`, `POST /retrieve`) with the caller's key, so a key
//! sees here exactly what it sees there, and a memory or namespace it may
//! not see is "Resource not found", as a missing one is. A uri that is not
//! one of these forms is invalid params.
//!
//! No `subscribe` and no `listChanged` here: `/mcp` is stateless with
//! JSON replies (no session, no `GET` event stream), so it has no channel
//! to send a notification on. The stdio bridge has one, and offers both
//! (`client::bridge::watch`), reading through REST what it watches and
//! checking each subscription with this module's [`Target::parse`] and
//! `resources/read`.

use axum::extract::State;
use rmcp::ErrorData;
use rmcp::model::{
    Annotations, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::memory::{MemoryId, MemoryView, Namespace, RepoId, UserId};
use crate::retrieval::Outcome;
use crate::routes::extract::{ApiJson, ApiPath, ApiQuery, from_arguments};
use crate::routes::memories::{self, ListMemoriesResponse};
use crate::routes::retrieve::{self, RetrieveRequest};
use crate::routes::state::AppState;
use crate::store::markdown;

/// How many memories a page of `resources/list` holds, and a namespace's
/// listing at most: `GET /memories`'s default page.
pub const PAGE_SIZE: usize = 50;
/// What every resource here is.
const MARKDOWN: &str = "text/markdown";
const SCHEME: &str = "engram://";
/// The longest title made from a memory's first line, in characters.
const TITLE_CHARS: usize = 80;

/// What a uri names.
#[derive(Debug, PartialEq)]
pub enum Target {
    /// One memory: `engram://repo/<repo>/<id>`, `engram://user/<user>/<id>`.
    Memory { namespace: Namespace, id: MemoryId },
    /// A namespace's current memories: `engram://repo/<repo>`,
    /// `engram://user/<user>`.
    Listing(Namespace),
    /// `engram://search?q=<query>[&repo=<repo>][&user=<user>]`.
    Search {
        query: String,
        repo: Option<RepoId>,
        user: Option<UserId>,
    },
}

impl Target {
    /// The target of `uri`, or why it is none.
    pub fn parse(uri: &str) -> Result<Self, String> {
        let rest = uri
            .strip_prefix(SCHEME)
            .ok_or_else(|| format!("`{uri}` is not an `{SCHEME}` uri"))?;
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (rest, None),
        };
        let segments: Vec<&str> = path.split('/').collect();
        match (segments.as_slice(), query) {
            (["search"], Some(query)) => search(query),
            ([scope, owner], None) => Ok(Self::Listing(namespace(scope, owner)?)),
            ([scope, owner, id], None) => Ok(Self::Memory {
                namespace: namespace(scope, owner)?,
                id: id
                    .parse()
                    .map_err(|_| format!("`{id}` is not a memory id (a UUID)"))?,
            }),
            _ => Err(format!(
                "`{uri}` is none of engram://repo/<repo>/<id>, engram://user/<user>/<id>, \
                 engram://repo/<repo>, engram://user/<user>, engram://search?q=<query>"
            )),
        }
    }
}

/// `repo/<repo>` or `user/<user>`.
fn namespace(scope: &str, owner: &str) -> Result<Namespace, String> {
    let owner = owner.to_owned();
    match scope {
        "repo" => RepoId::try_from(owner)
            .map(Namespace::Repo)
            .map_err(|err| format!("repo: {err}")),
        "user" => UserId::try_from(owner)
            .map(Namespace::User)
            .map_err(|err| format!("user: {err}")),
        other => Err(format!("`{other}` is neither `repo` nor `user`")),
    }
}

/// A search's query string: `q`, and optionally `repo` and `user`.
fn search(query: &str) -> Result<Target, String> {
    let (mut text, mut repo, mut user) = (None, None, None);
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match key.as_ref() {
            "q" => &mut text,
            "repo" => &mut repo,
            "user" => &mut user,
            other => {
                return Err(format!(
                    "a search takes `q`, `repo` and `user`, not `{other}`"
                ));
            }
        };
        if slot.replace(value.into_owned()).is_some() {
            return Err(format!("`{key}` is given twice"));
        }
    }
    let query = text
        .filter(|text| !text.trim().is_empty())
        .ok_or("a search needs `q`, the text to look for")?;
    Ok(Target::Search {
        query,
        repo: repo
            .map(RepoId::try_from)
            .transpose()
            .map_err(|err| format!("repo: {err}"))?,
        user: user
            .map(UserId::try_from)
            .transpose()
            .map_err(|err| format!("user: {err}"))?,
    })
}

/// The namespace a memory's view names: its repo, else its user (a view
/// is made from a memory's namespace, so it names one of them).
fn namespace_of(view: &MemoryView) -> Namespace {
    view.repo
        .clone()
        .map(Namespace::Repo)
        .or_else(|| view.user.clone().map(Namespace::User))
        .expect("a memory's view names its repo or its user")
}

/// The uri of a memory.
pub fn uri_of(view: &MemoryView) -> String {
    format!("{SCHEME}{}/{}", namespace_of(view), view.id)
}

/// A memory's title: its first line, cut to [`TITLE_CHARS`].
pub fn title_of(content: &str) -> String {
    let line = content.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(TITLE_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_owned(),
    }
}

/// A markdown link to a memory, its title as the text (brackets escaped,
/// so a title cannot end the link early).
fn link_to(view: &MemoryView) -> String {
    let title = title_of(&view.content)
        .replace('[', "\\[")
        .replace(']', "\\]");
    format!("[{title}]({})", uri_of(view))
}

/// A memory as a listed resource.
fn resource(view: &MemoryView) -> Resource {
    let mut annotations = Annotations::default().with_timestamp(view.updated_at);
    if let Some(importance) = view.importance {
        // Importance is 0..1, the range of a priority.
        annotations = annotations.with_priority(importance as f32);
    }
    Resource::new(uri_of(view), title_of(&view.content))
        .with_description(format!(
            "A {} memory of {} (version {})",
            view.category,
            namespace_of(view),
            view.version
        ))
        .with_mime_type(MARKDOWN)
        .with_annotations(annotations)
}

/// The templates: a namespace's listing and a search.
pub fn templates() -> ListResourceTemplatesResult {
    let template = |uri: &str, name: &str, description: &str| {
        ResourceTemplate::new(uri, name)
            .with_description(description)
            .with_mime_type(MARKDOWN)
    };
    ListResourceTemplatesResult::with_all_items(vec![
        template(
            "engram://repo/{repo}",
            "repo-memories",
            "A repo's current memories, newest first, each a link to its resource.",
        ),
        template(
            "engram://user/{user}",
            "user-memories",
            "A user's current memories, newest first, each a link to its resource.",
        ),
        template(
            "engram://search{?q,repo,user}",
            "search",
            "The memories that matter for `q` in a repo and a user's memories (the service's \
             defaults when left out), best first, as the `recall` tool finds them.",
        ),
    ])
}

/// One page of `resources/list`.
pub async fn list(
    state: &AppState,
    caller: Caller,
    cursor: Option<String>,
) -> Result<ListResourcesResult, ErrorData> {
    let page = list_memories(state, caller, json!({"limit": PAGE_SIZE, "cursor": cursor}))
        .await
        .map_err(|err| protocol_error(&err, json!({"cursor": cursor})))?;
    let mut result = ListResourcesResult::with_all_items(
        page.memories.iter().map(|m| resource(&m.memory)).collect(),
    );
    result.next_cursor = page.next_cursor;
    Ok(result)
}

/// `resources/read` of `uri`.
pub async fn read(
    state: &AppState,
    caller: Caller,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let target = Target::parse(uri)
        .map_err(|detail| ErrorData::invalid_params(detail, Some(json!({"uri": uri}))))?;
    let text = match target {
        Target::Memory { namespace, id } => memory_file(state, caller, &namespace, id).await,
        Target::Listing(namespace) => listing(state, caller, &namespace).await,
        Target::Search { query, repo, user } => {
            search_results(state, caller, &query, repo, user).await
        }
    }
    .map_err(|err| protocol_error(&err, json!({"uri": uri})))?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(MARKDOWN),
    ]))
}

/// The memory's file, if the caller may see it and it is in `namespace`.
async fn memory_file(
    state: &AppState,
    caller: Caller,
    namespace: &Namespace,
    id: MemoryId,
) -> Result<String, ApiError> {
    let axum::Json(detail) = memories::get_memory(
        State(state.store.clone()),
        State(state.retriever.clone()),
        caller,
        ApiPath(id),
    )
    .await?;
    let gone = || ApiError::not_found(format!("no memory has the id {id}"));
    let mut memory = (*state.store.get(id).ok_or_else(gone)?).clone();
    if memory.namespace != *namespace {
        return Err(gone());
    }
    // The edges as the caller may see them, as `GET /memories/{id}` gives them.
    memory.related = detail.memory.related;
    Ok(markdown::render(&memory))
}

/// A namespace's newest current memories, as a list of links.
async fn listing(
    state: &AppState,
    caller: Caller,
    namespace: &Namespace,
) -> Result<String, ApiError> {
    let (scope, repo, user) = namespace.owner_fields();
    let page = list_memories(
        state,
        caller,
        json!({"repo": repo, "user": user, "scope": scope, "limit": PAGE_SIZE}),
    )
    .await?;
    let mut text = format!("# {namespace}\n\nIts current memories, newest first.\n\n");
    for listed in &page.memories {
        let view = &listed.memory;
        text.push_str(&format!(
            "- {}: {}, updated {}\n",
            link_to(view),
            view.category,
            view.updated_at.to_rfc3339()
        ));
    }
    if page.memories.is_empty() {
        text.push_str("None yet.\n");
    }
    if page.next_cursor.is_some() {
        text.push_str(&format!(
            "\nThe newest {PAGE_SIZE} only: `resources/list` pages through them all.\n"
        ));
    }
    Ok(text)
}

/// What `recall` finds for `query`, as markdown.
async fn search_results(
    state: &AppState,
    caller: Caller,
    query: &str,
    repo: Option<RepoId>,
    user: Option<UserId>,
) -> Result<String, ApiError> {
    let request: RetrieveRequest = from_arguments(&json!({
        "turn_id": format!("mcp-{}", uuid::Uuid::now_v7()),
        "query": query,
        "repo": repo,
        "user": user,
    }))?;
    let axum::Json(outcome) = retrieve::retrieve_memories(
        State(state.retriever.clone()),
        State(state.config.clone()),
        caller,
        ApiJson(request),
    )
    .await?;
    Ok(render_search(query, &outcome))
}

fn render_search(query: &str, outcome: &Outcome) -> String {
    let mut text = format!("# Memories for “{query}”\n\nMost relevant first.\n\n");
    for found in &outcome.memories {
        let view = &found.memory;
        text.push_str(&format!(
            "## {}\n\n{}: relevance {:.2}\n\n{}\n\n",
            link_to(view),
            view.category,
            found.relevance,
            view.content
        ));
    }
    if outcome.memories.is_empty() {
        text.push_str("Nothing found.\n");
    }
    text
}

/// `GET /memories` with `query`.
async fn list_memories(
    state: &AppState,
    caller: Caller,
    query: Value,
) -> Result<ListMemoriesResponse, ApiError> {
    let axum::Json(page) = memories::list_memories(
        State(state.store.clone()),
        State(state.retriever.clone()),
        caller,
        ApiQuery(from_arguments(&query)?),
    )
    .await?;
    Ok(page)
}

/// The protocol error for a refused read of what `asked` names (the uri,
/// or the cursor): what the caller may not see is not found, as what is
/// missing is, with nothing but `asked`; a bad value is invalid params;
/// the rest is the service's fault. Both of those carry the problem.
fn protocol_error(err: &ApiError, mut asked: Value) -> ErrorData {
    if let ApiError::NotFound { .. } | ApiError::Forbidden { .. } = err {
        return ErrorData::resource_not_found("Resource not found", Some(asked));
    }
    let problem = err.report();
    let detail = problem.detail.clone();
    asked["problem"] = json!(problem);
    match err {
        ApiError::InvalidField { .. } | ApiError::MalformedJson { .. } => {
            ErrorData::invalid_params(detail, Some(asked))
        }
        _ => ErrorData::internal_error(detail, Some(asked)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_memory_a_listing_or_a_search() {
        let id = MemoryId::new();
        let forge = || Namespace::Repo(RepoId::try_from("forge".to_owned()).unwrap());
        assert_eq!(
            Target::parse(&format!("engram://repo/forge/{id}")),
            Ok(Target::Memory {
                namespace: forge(),
                id
            })
        );
        assert_eq!(
            Target::parse("engram://repo/forge"),
            Ok(Target::Listing(forge()))
        );
        assert_eq!(
            Target::parse("engram://search?q=release%20day+now&repo=forge"),
            Ok(Target::Search {
                query: "release day now".to_owned(),
                repo: Some(RepoId::try_from("forge".to_owned()).unwrap()),
                user: None,
            })
        );
        for bad in [
            "file:///etc/passwd",
            "engram://repo/forge/not-a-uuid",
            "engram://repo/../x",
            "engram://team/forge",
            "engram://search",
            "engram://search?q=",
            "engram://search?q=a&q=b",
            "engram://search?q=a&colour=red",
            "engram://repo/forge?q=a",
            "engram://repo/forge/0193f0c1-0000-7000-8000-000000000001/more",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_title_is_the_first_line_cut_short() {
        assert_eq!(
            title_of("Forge releases on Tuesdays.\nAlways."),
            "Forge releases on Tuesdays."
        );
        let long = "é".repeat(100);
        assert_eq!(title_of(&long).chars().count(), TITLE_CHARS + 1);
    }
}
