//! The memory browser at `/ui`: hand-written HTML, CSS and JavaScript
//! modules from `ui/`, embedded in the binary at build time, so it works
//! offline and with no build step.
//!
//! The pages need no key: they hold no data. The browser asks for the key
//! once per tab and sends it as the bearer on every API call. Every answer
//! carries a strict Content-Security-Policy (scripts, styles and
//! connections from this origin only, no inline script, no plugins, no
//! framing), so even a rendering bug could not run script from a memory.
//! Assets are not fingerprinted, so they are revalidated on every load
//! (`no-cache` with a content `ETag`): a new binary's UI shows at once.

use std::collections::HashMap;
use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The policy every page and asset is served with.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    content_type: &'static str,
    body: &'static [u8],
    etag: HeaderValue,
}

/// Declares the embedded files: (name under `ui/`, content type).
macro_rules! assets {
    ($(($name:literal, $content_type:expr)),+ $(,)?) => {
        [$((
            $name,
            $content_type,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $name)).as_slice(),
        )),+]
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: LazyLock<HashMap<&'static str, Asset>> = LazyLock::new(|| {
    assets![
        ("index.html", "text/html; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("app.js", JS),
        ("api.js", JS),
        ("dom.js", JS),
        ("dialogs.js", JS),
        ("markdown.js", JS),
        ("list.js", JS),
        ("memory.js", JS),
        ("graph.js", JS),
        ("capture.js", JS),
        ("review.js", JS),
        ("search.js", JS),
        ("favicon.svg", "image/svg+xml"),
    ]
    .into_iter()
    .map(|(name, content_type, body)| {
        let digest = Sha256::digest(body);
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header");
        (
            name,
            Asset {
                content_type,
                body,
                etag,
            },
        )
    })
    .collect()
});

/// `/ui`, `/ui/` and `/ui/{file}`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/ui/{file}",
            get(
                |axum::extract::Path(file): axum::extract::Path<String>, headers: HeaderMap| async move {
                    serve(&file, &headers)
                },
            ),
        )
}

/// The asset `name`, or `304` when the browser's copy is current.
fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.get(name) else {
        return ApiError::not_found(format!("the memory browser has no file {name:?}"))
            .into_response();
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|tags| tags.as_bytes() == asset.etag.as_bytes());
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, asset.etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
