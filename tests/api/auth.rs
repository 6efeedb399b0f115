//! `ENGRAM_API_KEY`: data routes need the key; health, readiness and the
//! API description do not.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use engram::config::ApiKey;

use crate::backends::{Backend, over_both_backends};
use crate::helpers::memory;

over_both_backends!(data_routes_need_the_key_and_health_does_not,);

async fn data_routes_need_the_key_and_health_does_not(backend: Backend) {
    let app = backend
        .builder()
        .config(|config| {
            config.api_key = Some(ApiKey::new("s3cret"));
        })
        .spawn()
        .await;
    let get = |uri: &str, authorization: Option<&str>| {
        let mut request = Request::builder().uri(uri);
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        request.body(Body::empty()).unwrap()
    };

    for uri in [
        "/memories",
        "/stats",
        "/memories/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d",
    ] {
        app.send(get(uri, None))
            .await
            .assert_problem(StatusCode::UNAUTHORIZED, None);
        app.send(get(uri, Some("Bearer wrong")))
            .await
            .assert_problem(StatusCode::UNAUTHORIZED, None);
        app.send(get(uri, Some("s3cret")))
            .await
            .assert_problem(StatusCode::UNAUTHORIZED, None);
    }
    let unauthorized = app
        .post("/memories", &memory("repo", "forge", "patterns", "Sneaky."))
        .await;
    unauthorized.assert_problem(StatusCode::UNAUTHORIZED, None);
    assert!(backend.stored(&app.data_dir).await.is_empty());

    assert_eq!(
        app.send(get("/memories", Some("Bearer s3cret")))
            .await
            .status,
        StatusCode::OK
    );
    for uri in ["/healthz", "/readyz", "/openapi.json", "/docs/"] {
        assert_eq!(
            app.send(get(uri, None)).await.status,
            StatusCode::OK,
            "{uri}"
        );
    }
}
