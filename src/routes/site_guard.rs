//! Who may talk to the service from a browser: the `Host` allow-list
//! (DNS rebinding) and the refusal of cross-site writes, for every route.
//!
//! A web page can get a browser to send requests to `127.0.0.1` under a
//! host name it controls, with its own `Origin`. It cannot choose the
//! `Host` header (its own name) nor the `Origin` (its own origin). So:
//!
//! - A request whose `Host` is not the `listen` address, a loopback name
//!   (`localhost`, `127.0.0.1`, `::1`) or one of `http.allowed_hosts` is
//!   refused with `403` before any handler runs. A request with no `Host`
//!   at all (not a browser: HTTP/1.0 tools, in-process calls) is let
//!   through; every browser sends one.
//! - A state-changing request (any method but `GET`, `HEAD`, `OPTIONS`)
//!   that carries an `Origin` other than the service's own or a configured
//!   one (`cors.allowed_origins`, `mcp.allowed_origins`) is refused with
//!   `403`, whatever its content type: a "simple" `text/plain` POST needs
//!   no preflight, so CORS alone would let it through. One without
//!   `Origin` but marked `Sec-Fetch-Site: cross-site` or `same-site` is
//!   refused too. This is the one `Origin` check, `/mcp`'s included.
//!
//! The service's own origin is `http://` or `https://` plus its `Host`;
//! on a service listening on loopback, also any loopback name (`localhost`,
//! `127.0.0.0/8`, `[::1]`) at the port the request came to, when the
//! `Host` is a loopback name too: that port on this machine is this
//! service, whatever name the page used (what the MCP conformance suite's
//! DNS-rebinding scenario checks). A page on another loopback port is
//! another program's, and needs `mcp.allowed_origins` or
//! `cors.allowed_origins` (`http://localhost:6274`).
//!
//! `/healthz` and `/readyz` are exempt: container health checks call them
//! under whatever name the container has, and they disclose nothing.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::{Config, parse_host};
use crate::error::ApiError;

/// The names always answered, besides the `listen` address.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Routes answered whatever the `Host`.
const EXEMPT_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// The allow-lists, built once from the configuration.
#[derive(Clone, Debug)]
pub struct SiteGuard {
    hosts: Arc<[HostPattern]>,
    origins: Arc<[OriginPattern]>,
    /// Whether the service listens on a loopback address, where any
    /// loopback name at its port is its own origin.
    loopback: bool,
}

/// An allowed `Host`: a name, and a port unless any port will do.
#[derive(Debug, PartialEq)]
struct HostPattern {
    name: String,
    port: Option<u16>,
}

/// An allowed `Origin`: `null`, or scheme, name and port (`None`: any).
#[derive(Debug, PartialEq)]
enum OriginPattern {
    Null,
    Site {
        scheme: String,
        name: String,
        port: Option<u16>,
    },
}

/// A request's origin, as the browser sent it.
#[derive(Debug, PartialEq)]
enum Origin {
    Null,
    Site {
        scheme: String,
        name: String,
        port: u16,
    },
}

impl SiteGuard {
    pub fn from_config(config: &Config) -> Self {
        let listen = config.listen.ip();
        let loopback = listen.is_loopback();
        let listen = (!listen.is_unspecified()).then(|| listen.to_string());
        let hosts = LOOPBACK_NAMES
            .iter()
            .map(|name| (*name).to_owned())
            .chain(listen)
            .chain(config.http.allowed_hosts.iter().cloned())
            .filter_map(|host| parse_host(&host))
            .map(|(name, port)| HostPattern { name, port })
            .collect();
        // Validated at start-up; an origin that does not parse matches nothing.
        let origins = config
            .cors
            .allowed_origins
            .iter()
            .chain(&config.mcp.allowed_origins)
            .filter_map(|origin| parse_origin_pattern(origin))
            .collect();
        Self {
            hosts,
            origins,
            loopback,
        }
    }

    /// Why the request must be refused, if it must.
    fn refusal(
        &self,
        method: &Method,
        uri: &axum::http::Uri,
        headers: &HeaderMap,
    ) -> Option<String> {
        let host = match headers.get(header::HOST) {
            Some(value) => Some(value.to_str().unwrap_or("?")),
            // HTTP/2 carries it as the `:authority` of the URI.
            None => uri.authority().map(axum::http::uri::Authority::as_str),
        };
        let host = match host {
            None => None,
            Some(value) => {
                let Some(parsed) = parse_host(value).filter(|host| self.host_is_allowed(host))
                else {
                    return Some(format!(
                        "this service does not answer to the host `{value}`; if clients reach it \
                         by that name, add it to `http.allowed_hosts`"
                    ));
                };
                Some(parsed)
            }
        };
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return None;
        }
        match headers.get(header::ORIGIN) {
            Some(value) => {
                let text = value.to_str().unwrap_or("?");
                let origin = parse_origin(text);
                let allowed = origin.as_ref().is_some_and(|origin| {
                    host.as_ref()
                        .is_some_and(|host| is_same_origin(origin, host, self.loopback))
                        || self.origins.iter().any(|pattern| pattern.admits(origin))
                });
                (!allowed).then(|| {
                    format!(
                        "a {method} from the origin `{text}` is refused: only this service's own \
                         pages and the origins in `cors.allowed_origins` may change anything"
                    )
                })
            }
            None => headers
                .get("sec-fetch-site")
                .and_then(|value| value.to_str().ok())
                .filter(|site| matches!(*site, "cross-site" | "same-site"))
                .map(|site| format!("a {method} sent {site} by a browser is refused")),
        }
    }

    fn host_is_allowed(&self, (name, port): &(String, Option<u16>)) -> bool {
        self.hosts
            .iter()
            .any(|allowed| allowed.name == *name && allowed.port.is_none_or(|p| Some(p) == *port))
    }
}

/// The middleware: refuses what [`SiteGuard`] refuses with `403`.
pub async fn guard_site(State(guard): State<SiteGuard>, request: Request, next: Next) -> Response {
    if EXEMPT_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    match guard.refusal(request.method(), request.uri(), request.headers()) {
        None => next.run(request).await,
        Some(detail) => {
            tracing::warn!(reason = %detail, "refused a request from another site (DNS rebinding or cross-site write?)");
            ApiError::SiteNotAllowed { detail }.into_response()
        }
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// `scheme://host[:port]` split into its parts; `None` for anything else.
fn split_origin(text: &str) -> Option<(String, String, Option<&str>)> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    default_port(&scheme)?;
    let (authority, port) = match rest.rsplit_once(':') {
        Some((authority, port)) if !port.contains(']') => (authority, Some(port)),
        _ => (rest, None),
    };
    let (name, _) = parse_host(authority)?;
    Some((scheme, name, port))
}

fn parse_origin(text: &str) -> Option<Origin> {
    if text == "null" {
        return Some(Origin::Null);
    }
    let (scheme, name, port) = split_origin(text)?;
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port(&scheme)?,
    };
    Some(Origin::Site { scheme, name, port })
}

fn parse_origin_pattern(text: &str) -> Option<OriginPattern> {
    if text == "null" {
        return Some(OriginPattern::Null);
    }
    let (scheme, name, port) = split_origin(text)?;
    let port = match port {
        Some("*") => None,
        Some(port) => Some(port.parse().ok()?),
        None => default_port(&scheme),
    };
    Some(OriginPattern::Site { scheme, name, port })
}

impl OriginPattern {
    fn admits(&self, origin: &Origin) -> bool {
        match (self, origin) {
            (Self::Null, Origin::Null) => true,
            (
                Self::Site { scheme, name, port },
                Origin::Site {
                    scheme: their_scheme,
                    name: their_name,
                    port: their_port,
                },
            ) => {
                scheme == their_scheme
                    && name == their_name
                    && port.is_none_or(|port| port == *their_port)
            }
            _ => false,
        }
    }
}

/// Whether `origin` is the service itself as reached through `host`: a
/// page the service served (the memory browser, Swagger UI), under the
/// same name or, on a `loopback` service, under any loopback name.
fn is_same_origin(origin: &Origin, (name, port): &(String, Option<u16>), loopback: bool) -> bool {
    match origin {
        Origin::Null => false,
        Origin::Site {
            scheme,
            name: origin_name,
            port: origin_port,
        } => {
            let same_name =
                origin_name == name || (loopback && is_loopback(origin_name) && is_loopback(name));
            same_name && port.or_else(|| default_port(scheme)) == Some(*origin_port)
        }
    }
}

/// `localhost`, or an address in `127.0.0.0/8` or `::1` (names come
/// lower-cased and without IPv6 brackets from `parse_host`).
fn is_loopback(name: &str) -> bool {
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(adjust: impl FnOnce(&mut Config)) -> SiteGuard {
        let mut config = Config::default();
        adjust(&mut config);
        SiteGuard::from_config(&config)
    }

    fn refused(guard: &SiteGuard, method: &Method, headers: &[(&'static str, &str)]) -> bool {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, value.parse().unwrap());
        }
        guard
            .refusal(method, &"/memories".parse().unwrap(), &map)
            .is_some()
    }

    #[test]
    fn hosts_are_the_loopback_names_the_listen_address_and_the_configured_ones() {
        let guard = guard(|config| {
            config.listen = "10.1.2.3:8080".parse().unwrap();
            config.http.allowed_hosts = vec!["engram.internal:9000".into()];
        });
        for host in [
            "localhost:8080",
            "127.0.0.1",
            "[::1]:8080",
            "10.1.2.3:8080",
            "LOCALHOST",
        ] {
            assert!(!refused(&guard, &Method::GET, &[("host", host)]), "{host}");
        }
        assert!(!refused(
            &guard,
            &Method::GET,
            &[("host", "engram.internal:9000")]
        ));
        for host in [
            "engram.internal:9001",
            "attacker.example:8080",
            "localhost.attacker.example",
            "bad host",
        ] {
            assert!(refused(&guard, &Method::GET, &[("host", host)]), "{host}");
        }
        assert!(
            !refused(&guard, &Method::GET, &[]),
            "no Host: not a browser"
        );
    }

    #[test]
    fn writes_from_other_origins_are_refused_unless_configured() {
        let guard = guard(|config| {
            config.cors.allowed_origins = vec!["https://ui.example.com".into()];
            config.mcp.allowed_origins = vec!["http://localhost:*".into()];
        });
        let host = ("host", "127.0.0.1:8080");
        let post = |origin: &str| refused(&guard, &Method::POST, &[host, ("origin", origin)]);
        assert!(!post("http://127.0.0.1:8080"), "the service's own pages");
        assert!(!post("https://ui.example.com"));
        assert!(!post("http://localhost:3000"));
        assert!(post("http://127.0.0.1:3000"));
        assert!(post("https://attacker.example"));
        assert!(post("null"));
        assert!(post("not an origin"));
        assert!(refused(
            &guard,
            &Method::DELETE,
            &[host, ("origin", "https://attacker.example")]
        ));
        assert!(!refused(
            &guard,
            &Method::GET,
            &[host, ("origin", "https://attacker.example")]
        ));
        assert!(refused(
            &guard,
            &Method::POST,
            &[host, ("sec-fetch-site", "cross-site")]
        ));
        assert!(!refused(
            &guard,
            &Method::POST,
            &[host, ("sec-fetch-site", "same-origin")]
        ));
        assert!(!refused(&guard, &Method::POST, &[host]), "not a browser");
    }

    #[test]
    fn a_loopback_service_answers_its_own_port_under_any_loopback_name() {
        let loopback = guard(|config| config.listen = "127.0.0.1:8080".parse().unwrap());
        let post = |guard: &SiteGuard, host: &str, origin: &str| {
            refused(guard, &Method::POST, &[("host", host), ("origin", origin)])
        };
        for (host, origin) in [
            ("127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("127.0.0.1:8080", "http://localhost:8080"),
            ("localhost:8080", "http://127.0.0.1:8080"),
            ("localhost:8080", "http://[::1]:8080"),
            ("[::1]:8080", "http://127.0.0.2:8080"),
            ("localhost", "http://127.0.0.1"),
        ] {
            assert!(!post(&loopback, host, origin), "{host} {origin}");
        }
        for (host, origin) in [
            ("127.0.0.1:8080", "http://localhost:3000"),
            ("127.0.0.1:8080", "http://localhost"),
            ("127.0.0.1:8080", "http://localhost.attacker.example:8080"),
            ("127.0.0.1:8080", "http://10.0.0.1:8080"),
        ] {
            assert!(post(&loopback, host, origin), "{host} {origin}");
        }
        // Listening on every address, a loopback name is only itself.
        let everywhere = guard(|config| config.listen = "0.0.0.0:8080".parse().unwrap());
        assert!(!post(
            &everywhere,
            "localhost:8080",
            "http://localhost:8080"
        ));
        assert!(post(&everywhere, "localhost:8080", "http://127.0.0.1:8080"));
    }
}
