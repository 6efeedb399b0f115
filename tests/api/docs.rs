//! The OpenAPI document and Swagger UI.
//! Nothing here depends on the storage backend.

use axum::http::StatusCode;
use serde_json::Value;

use crate::helpers::spawn_app;

/// Regenerate with `cargo run -- openapi > openapi/openapi.yaml`.
#[tokio::test]
async fn served_openapi_matches_the_committed_copy() {
    let app = spawn_app().await;
    let served = app.get("/openapi.json").await;
    assert_eq!(served.status, StatusCode::OK);
    let committed: Value = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.yaml"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        served.json == committed,
        "openapi/openapi.yaml is stale: regenerate it with `cargo run -- openapi > openapi/openapi.yaml`"
    );
    assert_eq!(served.json["openapi"], "3.1.0");
}

#[tokio::test]
async fn swagger_ui_is_served_offline() {
    let app = spawn_app().await;
    let page = app.get("/docs/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("swagger-ui"), "{}", page.text);
    let config = app.get("/docs/swagger-initializer.js").await;
    assert_eq!(config.status, StatusCode::OK);
    assert!(config.text.contains("/openapi.json"), "{}", config.text);
    let bundle = app.get("/docs/swagger-ui-bundle.js").await;
    assert_eq!(bundle.status, StatusCode::OK);
    assert!(
        bundle.text.len() > 100_000,
        "the UI bundle is vendored into the binary"
    );
}

#[tokio::test]
async fn swagger_ui_may_not_be_framed() {
    use axum::body::Body;
    use axum::http::{Request, header};
    use tower::ServiceExt;

    let app = spawn_app().await;
    for path in ["/docs/", "/docs/swagger-initializer.js"] {
        let response = app
            .router
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers();
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY", "{path}");
        assert!(
            headers[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'"),
            "{path}: {headers:?}"
        );
    }
}
