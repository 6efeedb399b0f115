//! The memory browser's files at `/ui`: embedded, served without a key,
//! with their content types, a strict Content-Security-Policy and
//! revalidation by `ETag`.
//! Nothing here depends on the storage backend.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use engram::config::ApiKey;

use crate::helpers::TestApp;

async fn keyed_app() -> TestApp {
    TestApp::builder()
        .config(|config| config.api_key = Some(ApiKey::new("root-key")))
        .spawn()
        .await
}

async fn get(app: &TestApp, uri: &str, if_none_match: Option<&str>) -> axum::response::Response {
    use tower::ServiceExt;
    let mut request = Request::builder().uri(uri);
    if let Some(tag) = if_none_match {
        request = request.header(header::IF_NONE_MATCH, tag);
    }
    app.router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

fn header(response: &axum::response::Response, name: header::HeaderName) -> &str {
    response.headers().get(name).unwrap().to_str().unwrap()
}

#[tokio::test]
async fn the_pages_need_no_key_and_carry_a_strict_policy() {
    let app = keyed_app().await;
    let redirect = get(&app, "/ui", None).await;
    assert_eq!(redirect.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(header(&redirect, header::LOCATION), "/ui/");

    let page = get(&app, "/ui/", None).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(
        header(&page, header::CONTENT_TYPE),
        "text/html; charset=utf-8"
    );
    let policy = header(&page, header::CONTENT_SECURITY_POLICY);
    assert!(
        policy.starts_with("default-src 'none'; script-src 'self';"),
        "{policy}"
    );
    assert!(!policy.contains("unsafe"), "{policy}");
    assert_eq!(header(&page, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    assert_eq!(header(&page, header::CACHE_CONTROL), "no-cache");

    for (file, content_type) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("markdown.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let asset = get(&app, &format!("/ui/{file}"), None).await;
        assert_eq!(asset.status(), StatusCode::OK, "{file}");
        assert_eq!(header(&asset, header::CONTENT_TYPE), content_type);
    }
    let data = get(&app, "/memories", None).await;
    assert_eq!(
        data.status(),
        StatusCode::UNAUTHORIZED,
        "data still needs the key"
    );
}

#[tokio::test]
async fn an_unchanged_file_is_revalidated_and_unknown_files_are_problems() {
    let app = keyed_app().await;
    let first = get(&app, "/ui/app.js", None).await;
    let tag = header(&first, header::ETAG).to_owned();
    let again = get(&app, "/ui/app.js", Some(&tag)).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let stale = get(&app, "/ui/app.js", Some("\"other\"")).await;
    assert_eq!(stale.status(), StatusCode::OK);
    for missing in ["/ui/nope.js", "/ui/..%2FCargo.toml", "/ui/a/b.js"] {
        let response = get(&app, missing, None).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{missing}");
        assert_eq!(
            header(&response, header::CONTENT_TYPE),
            "application/problem+json"
        );
    }
}
