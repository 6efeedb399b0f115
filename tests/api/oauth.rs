//! Engram as an OAuth 2.1 resource server (`auth.oauth`), against a real
//! OpenID provider ([`provider`]): the protected resource metadata, the
//! `401` challenge that points to it, tokens on REST and `/mcp` beside
//! API keys, every way a token can be wrong, key rotation, and grants
//! from claims and scopes that keep namespaces apart.

mod provider;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use engram::config::{ApiKey, Config, OAuth};

use crate::helpers::{RunningApp, TestApp, or_skip, wait_until_async};
use crate::mcp::connect;
use provider::{Client, Provider};

/// The resource Engram is: what its tokens' `aud` must name.
const AUDIENCE: &str = "https://engram.test/mcp";

fn oauth(issuer: &str) -> OAuth {
    OAuth {
        issuer: issuer.to_owned(),
        audience: AUDIENCE.to_owned(),
        scopes: vec!["repo:*".to_owned(), "user:*".to_owned()],
        grants_claim: "engram".to_owned(),
        user_claim: None,
        leeway_s: 0,
        keys_cooldown_s: 0,
    }
}

/// Engram serving with `auth.oauth` for `provider`, adjusted by `adjust`.
async fn engram(provider: &Provider, adjust: impl FnOnce(&mut Config) + 'static) -> RunningApp {
    let oauth = oauth(&provider.issuer);
    TestApp::builder()
        .embedder()
        .config(move |config| {
            config.auth.oauth = Some(oauth);
            adjust(config);
        })
        .serve()
        .await
}

/// A provider with `clients`, or `None` (the test skipped) where it
/// cannot run; its keys in `keys`.
async fn provider(keys: &TempDir, clients: &[Client]) -> Option<Provider> {
    or_skip(Provider::start(&keys.path().join("keys.json"), clients).await)
}

/// The client that may use repo `forge` and user `ana`, by its claim.
fn forge_client() -> Client {
    Client::new("forge-agent").claims(json!({"engram": {"repos": ["forge"], "users": ["ana"]}}))
}

struct Answer {
    status: StatusCode,
    challenge: String,
    json: Value,
}

async fn send(
    app: &RunningApp,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Answer {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", app.base_url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let json = response.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        challenge,
        json,
    }
}

async fn get(app: &RunningApp, path: &str, token: Option<&str>) -> Answer {
    send(app, reqwest::Method::GET, path, token, None).await
}

async fn post(app: &RunningApp, path: &str, token: &str, body: &Value) -> Answer {
    send(app, reqwest::Method::POST, path, Some(token), Some(body)).await
}

fn repo_memory(repo: &str, content: &str) -> Value {
    json!({"scope": "repo", "repo": repo, "category": "project-conventions", "content": content})
}

#[tokio::test]
async fn the_metadata_names_the_issuer_and_a_request_without_a_token_is_pointed_to_it() {
    let keys = TempDir::new().unwrap();
    let Some(provider) = provider(&keys, &[forge_client()]).await else {
        return;
    };
    let app = engram(&provider, |_| {}).await;

    let refused = get(&app, "/memories", None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        refused.challenge,
        "Bearer resource_metadata=\"https://engram.test/.well-known/oauth-protected-resource/mcp\", \
         scope=\"repo:* user:*\""
    );
    // Served where the challenge points (the audience's path) and at the
    // bare well-known path, with no token.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata = get(&app, path, None).await;
        assert_eq!(metadata.status, StatusCode::OK, "{path}");
        assert_eq!(
            metadata.json,
            json!({
                "resource": AUDIENCE,
                "authorization_servers": [provider.issuer],
                "scopes_supported": ["repo:*", "user:*"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Engram",
            })
        );
    }
    assert_eq!(
        get(&app, "/.well-known/oauth-protected-resource/other", None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // The metadata's issuer is a real authorization server: its own
    // metadata answers, naming the token endpoint a client uses.
    let discovery: Value = reqwest::get(format!(
        "{}/.well-known/openid-configuration",
        provider.issuer
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(discovery["issuer"], provider.issuer);
}

#[tokio::test]
async fn a_token_from_the_issuer_opens_rest_and_mcp_and_api_keys_still_work() {
    let keys = TempDir::new().unwrap();
    let es_client = Client::new("es-agent")
        .alg("ES256")
        .claims(json!({"engram": {"repos": ["*"], "users": ["*"]}}));
    let Some(provider) = provider(&keys, &[forge_client(), es_client]).await else {
        return;
    };
    let app = engram(&provider, |config| {
        config.api_key = Some(ApiKey::new("root-key"));
    })
    .await;
    let token = provider.token("forge-agent", AUDIENCE, "").await;

    let written = post(
        &app,
        "/memories",
        &token,
        &repo_memory("forge", "Use rustls."),
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    let listed = get(&app, "/memories?repo=forge", Some(&token)).await;
    assert_eq!(listed.json["memories"][0]["content"], "Use rustls.");

    let client = connect(&app.base_url, &token).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "recall"));
    client.cancel().await.unwrap();

    let es_token = provider.token("es-agent", AUDIENCE, "").await;
    assert_eq!(
        get(&app, "/memories", Some(&es_token)).await.status,
        StatusCode::OK,
        "an ES256 token"
    );
    assert_eq!(
        get(&app, "/memories", Some("root-key")).await.status,
        StatusCode::OK,
        "the API key beside the tokens"
    );
    assert_eq!(
        get(&app, "/memories", Some("not-a-key")).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn tokens_for_another_audience_or_issuer_tampered_or_signed_with_a_secret_are_refused() {
    let keys = TempDir::new().unwrap();
    let clients = [forge_client(), Client::new("hmac-agent").alg("HS256")];
    let Some(provider) = provider(&keys, &clients).await else {
        return;
    };
    // Another issuer that signs with the same keys: only `iss` tells its
    // tokens apart.
    let Some(impostor) = provider_named_like(&keys, &clients).await else {
        return;
    };
    let app = engram(&provider, |_| {}).await;
    let refused = |answer: Answer, says: &str| {
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.json);
        let detail = answer.json["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(says), "{detail}");
        assert!(
            answer
                .challenge
                .starts_with("Bearer error=\"invalid_token\""),
            "{}",
            answer.challenge
        );
        assert!(answer.challenge.contains("resource_metadata="));
    };

    let elsewhere = provider
        .token("forge-agent", "https://other.test/mcp", "")
        .await;
    refused(get(&app, "/memories", Some(&elsewhere)).await, "audience");

    let foreign = impostor.token("forge-agent", AUDIENCE, "").await;
    refused(get(&app, "/memories", Some(&foreign)).await, "issuer");

    let token = provider.token("forge-agent", AUDIENCE, "").await;
    let tampered = tamper(&token);
    refused(get(&app, "/memories", Some(&tampered)).await, "signature");

    let hmac = provider.token("hmac-agent", AUDIENCE, "").await;
    refused(get(&app, "/memories", Some(&hmac)).await, "HS256");

    refused(get(&app, "/memories", Some("a.b.c")).await, "not a JWT");
    // A key id nobody published, with a line break to forge a log line:
    // named escaped.
    let unknown = with_header(&token, &json!({"alg": "RS256", "kid": "made-up\nline"}));
    refused(
        get(&app, "/memories", Some(&unknown)).await,
        "publishes no key \"made-up\\nline\"",
    );
    assert_eq!(
        get(&app, "/memories", Some(&token)).await.status,
        StatusCode::OK,
        "the untouched token"
    );
}

/// A second provider on the same keys, so under another issuer URL.
async fn provider_named_like(keys: &TempDir, clients: &[Client]) -> Option<Provider> {
    let clients: Vec<Client> = clients
        .iter()
        .map(|client| {
            Client::new(client.id)
                .alg(client.alg)
                .claims(client.claims.clone())
        })
        .collect();
    provider(keys, &clients).await
}

/// `token` with its claims changed (the grants widened) and its
/// signature kept.
fn tamper(token: &str) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["engram"] = json!({"repos": ["*"], "users": ["*"]});
    let claims = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap());
    format!("{}.{claims}.{}", parts[0], parts[2])
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    let keys = TempDir::new().unwrap();
    let short = Client::new("short-lived")
        .ttl(1)
        .claims(json!({"engram": {"repos": ["*"], "users": ["*"]}}));
    let Some(provider) = provider(&keys, &[short]).await else {
        return;
    };
    let app = engram(&provider, |_| {}).await;
    let token = provider.token("short-lived", AUDIENCE, "").await;
    // With no leeway, the token lapses a second after it was issued.
    wait_until_async("the token to expire", async || {
        get(&app, "/memories", Some(&token)).await.status == StatusCode::UNAUTHORIZED
    })
    .await;
    let refused = get(&app, "/memories", Some(&token)).await;
    assert!(
        refused.json["detail"].as_str().unwrap().contains("expired"),
        "{}",
        refused.json
    );
}

#[tokio::test]
async fn a_token_signed_by_a_rotated_key_is_accepted_once_the_new_keys_are_fetched() {
    let keys = TempDir::new().unwrap();
    let Some(provider) = provider(&keys, &[forge_client()]).await else {
        return;
    };
    let app = engram(&provider, |_| {}).await;
    let before = provider.token("forge-agent", AUDIENCE, "").await;
    assert_eq!(
        get(&app, "/memories", Some(&before)).await.status,
        StatusCode::OK
    );

    provider.rotate_keys().await;
    let after = provider.token("forge-agent", AUDIENCE, "").await;
    assert_ne!(
        kid(&before),
        kid(&after),
        "the provider signs with a new key"
    );
    assert_eq!(
        get(&app, "/memories", Some(&after)).await.status,
        StatusCode::OK,
        "an unknown kid makes Engram fetch the keys again"
    );
}

/// `token` under another header, its claims and signature kept.
fn with_header(token: &str, header: &Value) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (_, rest) = token.split_once('.').unwrap();
    let header = URL_SAFE_NO_PAD.encode(serde_json::to_vec(header).unwrap());
    format!("{header}.{rest}")
}

fn kid(token: &str) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = token.split('.').next().unwrap();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_token_sees_only_the_namespaces_its_claims_or_scopes_grant() {
    let keys = TempDir::new().unwrap();
    // Granted by scopes alone: no `engram` claim.
    let other = Client::new("other-agent");
    let Some(provider) = provider(&keys, &[forge_client(), other]).await else {
        return;
    };
    let app = engram(&provider, |_| {}).await;
    let forge = provider.token("forge-agent", AUDIENCE, "").await;
    let other = provider
        .token("other-agent", AUDIENCE, "repo:other user:bob")
        .await;

    let written = post(
        &app,
        "/memories",
        &forge,
        &repo_memory("forge", "Deploys go out on Tuesdays."),
    )
    .await;
    let id = written.json["id"].as_str().unwrap().to_owned();
    assert_eq!(
        post(
            &app,
            "/memories",
            &other,
            &repo_memory("other", "Other's own convention.")
        )
        .await
        .status,
        StatusCode::CREATED
    );

    let listed = get(&app, "/memories?repo=other&user=bob", Some(&other)).await;
    let contents: Vec<&str> = listed.json["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["Other's own convention."]);
    assert_eq!(
        get(&app, &format!("/memories/{id}"), Some(&other))
            .await
            .status,
        StatusCode::NOT_FOUND,
        "another namespace's memory is not even there"
    );
    assert_eq!(
        post(&app, "/memories", &other, &repo_memory("forge", "Sneaky."))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let retrieved = post(
        &app,
        "/retrieve",
        &other,
        &json!({"turn_id": "t1", "query": "when do deploys go out", "repo": "forge", "user": "bob"}),
    )
    .await;
    assert_eq!(
        retrieved.status,
        StatusCode::FORBIDDEN,
        "{}",
        retrieved.json
    );
    // A scope the token was not given is not held either.
    assert_eq!(
        get(&app, "/memories?repo=forge&user=bob", Some(&other))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn the_user_claim_names_the_user_a_request_stands_for() {
    let keys = TempDir::new().unwrap();
    // The client credentials grant makes the client's id the `sub`.
    let ana = Client::new("ana").claims(json!({"engram": {"repos": ["forge"]}}));
    let Some(provider) = provider(&keys, &[ana]).await else {
        return;
    };
    let app = engram(&provider, |config| {
        if let Some(oauth) = &mut config.auth.oauth {
            oauth.user_claim = Some("sub".to_owned());
        }
    })
    .await;
    let token = provider.token("ana", AUDIENCE, "").await;
    let written = post(
        &app,
        "/memories",
        &token,
        &json!({"scope": "user", "category": "coding-preferences", "content": "Prefers short answers."}),
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    assert_eq!(written.json["user"], "ana", "{}", written.json);
    assert_eq!(
        get(&app, "/memories?user=bob", Some(&token)).await.status,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn a_person_signed_in_through_a_registered_client_remembers_through_mcp_as_themself() {
    let keys = TempDir::new().unwrap();
    let Some(provider) = provider(&keys, &[]).await else {
        return;
    };
    let app = engram(&provider, |config| {
        if let Some(oauth) = &mut config.auth.oauth {
            oauth.user_claim = Some("sub".to_owned());
        }
    })
    .await;
    let token = provider
        .authorize(AUDIENCE, "openid repo:forge user:ana", "ana")
        .await;

    let client = connect(&app.base_url, &token).await;
    let remembered = crate::mcp::ok(
        &client,
        "remember",
        json!({"scope": "user", "category": "coding-preferences", "content": "Ana reviews in the morning."}),
    )
    .await;
    assert_eq!(remembered["user"], "ana", "{remembered}");
    client.cancel().await.unwrap();
    let mine = get(&app, "/memories?user=ana", Some(&token)).await;
    assert_eq!(
        mine.json["memories"][0]["content"],
        "Ana reviews in the morning."
    );
    assert_eq!(
        get(&app, "/memories?repo=web", Some(&token)).await.status,
        StatusCode::FORBIDDEN,
        "only the scopes consented to"
    );
}

#[tokio::test]
async fn an_issuer_that_cannot_be_reached_makes_tokens_unavailable_not_invalid() {
    let app = TestApp::builder()
        .config(|config| config.auth.oauth = Some(oauth(&crate::helpers::closed_url())))
        .serve()
        .await;
    // A JWT's shape, signed with RS256 as far as its header says.
    let token = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.c2lnbmF0dXJl";
    let answer = get(&app, "/memories", Some(token)).await;
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.json
    );
    assert_eq!(answer.json["type"], "urn:engram:problem:issuer-unavailable");
}
