//! Resource subscriptions on `engram mcp`, the stdio bridge, driven by the
//! official SDK's client with a handler that hears its notifications: a
//! subscribed memory changed or forgotten through REST is
//! `notifications/resources/updated`, an unsubscribed one is not; a
//! namespace's listing and the list hear of a new memory; a subscription
//! is checked as a read is; the watch outlives Engram going down. The bridge polls every 100 ms here
//! (`--watch-ms`), so that waits are short; nothing is timed.
//! Files only: the bridge is under test.

#![expect(
    deprecated,
    reason = "`resources/subscribe` is the SDK's legacy request (2026-07-28 has \
              `subscriptions/listen`); the bridge's clients speak the earlier versions"
)]

use std::path::Path;

use rmcp::model::{
    ErrorCode, ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;
use tokio::sync::mpsc;

use crate::helpers::{Ground, RunningApp, finishes};
use crate::mcp::bridge::{bridge_command, free_address, serve_at};
use crate::mcp::resources::{protocol_error, remember};
use crate::mcp::{LIMITED, ROOT, app_post, service};

/// A notification the client heard.
#[derive(Debug, PartialEq)]
enum Heard {
    Updated(String),
    ListChanged,
}

/// A client that passes on each resource notification it hears.
struct Listener(mpsc::UnboundedSender<Heard>);

impl ClientHandler for Listener {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(Heard::Updated(params.uri));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(Heard::ListChanged);
    }
}

type Subscriber = RunningService<RoleClient, Listener>;

/// The bridge for `key` in `project`, reading every 100 ms, with what its
/// client hears.
async fn subscriber(
    app: &RunningApp,
    project: &Path,
    key: &str,
) -> (Subscriber, mpsc::UnboundedReceiver<Heard>) {
    let (heard, hearing) = mpsc::unbounded_channel();
    let command = bridge_command(&app.base_url, project, key, &["--watch-ms", "100"], &[]);
    let handshake = Listener(heard).serve(TokioChildProcess::new(command).unwrap());
    let client = finishes("the bridge to answer the handshake", handshake)
        .await
        .expect("the handshake over stdio");
    (client, hearing)
}

/// Everything heard up to and including `expected`.
async fn hear(hearing: &mut mpsc::UnboundedReceiver<Heard>, expected: Heard) -> Vec<Heard> {
    let mut heard = Vec::new();
    while heard.last() != Some(&expected) {
        let next = finishes(&format!("the bridge to send {expected:?}"), hearing.recv())
            .await
            .expect("the bridge is running");
        heard.push(next);
    }
    heard
}

async fn subscribe(client: &Subscriber, uri: &str) -> Result<(), rmcp::ServiceError> {
    client.subscribe(SubscribeRequestParams::new(uri)).await
}

async fn unsubscribe(client: &Subscriber, uri: &str) -> Result<(), rmcp::ServiceError> {
    client.unsubscribe(UnsubscribeRequestParams::new(uri)).await
}

/// A new version of memory `id` of repo `forge`, through REST.
async fn supersede(app: &RunningApp, id: &str, content: &str) {
    let (status, written) = app_post(
        app,
        "/memories",
        ROOT,
        &json!({"repo": "forge", "scope": "repo", "category": "patterns", "supersedes": id,
                "content": content}),
    )
    .await;
    assert_eq!(status.as_u16(), 201, "{written:#}");
}

/// Forgets memory `id`, through REST.
async fn forget(app: &RunningApp, id: &str) {
    let response = reqwest::Client::new()
        .delete(format!("{}/memories/{id}", app.base_url))
        .bearer_auth(ROOT)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
}

#[tokio::test]
async fn a_subscribed_memory_is_notified_when_it_changes_and_an_unsubscribed_one_is_not() {
    let app = service().await;
    let _upstream = &app.upstream;
    let kept = remember(&app, "forge", "Forge tags releases from main.").await;
    let dropped = remember(&app, "forge", "Forge builds with make.").await;
    app.wait_indexed_with(ROOT).await;
    let project = app.data_dir.join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let (client, mut hearing) = subscriber(&app, &project, LIMITED).await;

    let resources = client
        .peer_info()
        .and_then(|info| info.capabilities.resources.clone())
        .expect("resources");
    assert_eq!(resources.subscribe, Some(true), "the bridge can notify");
    assert_eq!(resources.list_changed, Some(true));

    let kept_uri = format!("engram://repo/forge/{kept}");
    let dropped_uri = format!("engram://repo/forge/{dropped}");
    subscribe(&client, &kept_uri).await.unwrap();
    subscribe(&client, &dropped_uri).await.unwrap();
    unsubscribe(&client, &dropped_uri).await.unwrap();

    // The unsubscribed memory changes first: had it still been watched,
    // its notification would have come in the same tick as the first one
    // below or before, so before the second.
    forget(&app, &dropped).await;
    supersede(&app, &kept, "Forge tags releases from main, signed.").await;
    let mut heard = hear(&mut hearing, Heard::Updated(kept_uri.clone())).await;
    // Superseded, then gone: each is a change.
    forget(&app, &kept).await;
    heard.extend(hear(&mut hearing, Heard::Updated(kept_uri.clone())).await);
    assert!(
        !heard.contains(&Heard::Updated(dropped_uri)),
        "nothing for an unsubscribed memory: {heard:?}"
    );

    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_new_memory_updates_its_namespaces_listing_and_the_list() {
    let app = service().await;
    let _upstream = &app.upstream;
    remember(&app, "forge", "Forge tags releases from main.").await;
    app.wait_indexed_with(ROOT).await;
    let project = app.data_dir.join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let (client, mut hearing) = subscriber(&app, &project, LIMITED).await;

    subscribe(&client, "engram://repo/forge").await.unwrap();
    remember(&app, "forge", "Forge runs clippy with warnings denied.").await;
    let heard = hear(
        &mut hearing,
        Heard::Updated("engram://repo/forge".to_owned()),
    )
    .await;
    if !heard.contains(&Heard::ListChanged) {
        hear(&mut hearing, Heard::ListChanged).await;
    }

    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_subscription_is_refused_as_a_read_is() {
    let app = service().await;
    let _upstream = &app.upstream;
    let theirs = remember(&app, "secret", "Secret pins nothing.").await;
    let project = app.data_dir.join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let (client, _hearing) = subscriber(&app, &project, LIMITED).await;

    for unseen in [
        format!("engram://repo/secret/{theirs}"),
        // Read under its own namespace only.
        format!("engram://repo/forge/{theirs}"),
        "engram://repo/secret".to_owned(),
    ] {
        let (code, _) = protocol_error(subscribe(&client, &unseen).await);
        assert_eq!(code, ErrorCode::RESOURCE_NOT_FOUND, "{unseen}");
        let (code, _) = protocol_error(unsubscribe(&client, &unseen).await);
        assert_eq!(code, ErrorCode::RESOURCE_NOT_FOUND, "{unseen}");
    }
    for invalid in [
        "file:///etc/passwd",
        "engram://repo/forge/not-a-uuid",
        "engram://search?q=releases",
    ] {
        let (code, message) = protocol_error(subscribe(&client, invalid).await);
        assert_eq!(code, ErrorCode::INVALID_PARAMS, "{invalid}: {message}");
        let (code, _) = protocol_error(unsubscribe(&client, invalid).await);
        assert_eq!(code, ErrorCode::INVALID_PARAMS, "{invalid}");
    }

    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_change_made_while_engram_was_down_is_sent_once_it_is_back() {
    let ground = Ground::new().await;
    let address = free_address();
    let start = |ground: Ground| serve_at(ground, address);
    let app = start(ground).await;
    let id = remember(&app, "forge", "Forge tags releases from main.").await;
    let uri = format!("engram://repo/forge/{id}");
    let project = app.data_dir.join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let (client, mut hearing) = subscriber(&app, &project, ROOT).await;
    subscribe(&client, &uri).await.unwrap();

    // Stopping and starting take many ticks: those find nothing answering,
    // send nothing, and end no watch.
    let ground = app.stop().await;
    let app = start(ground).await;
    supersede(&app, &id, "Forge tags releases from main, signed.").await;
    hear(&mut hearing, Heard::Updated(uri)).await;

    client.cancel().await.unwrap();
    app.stop().await;
}
