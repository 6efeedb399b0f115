//! `http`: the names the service answers to, whatever the route.
//!
//! A web page can get a browser to send requests to `127.0.0.1` under a
//! host name of its choosing (DNS rebinding), but it cannot choose the
//! `Host` header the browser sends: that is the page's own name. So every
//! route answers only the `Host` values it knows: the `listen` address,
//! the loopback names, and the names listed here.

use std::net::IpAddr;

use reqwest::Url;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http {
    /// `Host` values (`name` or `name:port`) answered besides the `listen`
    /// address, `localhost`, `127.0.0.1` and `::1`: the name clients use
    /// behind a proxy or in a container. A name without a port matches any
    /// port.
    pub allowed_hosts: Vec<String>,
}

impl Http {
    /// The first entry of `allowed_hosts` that is not a host name or
    /// address with an optional port, with its index.
    pub fn invalid_host(&self) -> Option<usize> {
        self.allowed_hosts
            .iter()
            .position(|host| parse_host(host).is_none())
    }
}

/// A `Host` value (or an allowed one): its lower-cased name without IPv6
/// brackets, and its port if it names one. `None` for anything else
/// (empty, a scheme, a path, userinfo, a wildcard).
pub fn parse_host(value: &str) -> Option<(String, Option<u16>)> {
    let value = value.trim();
    // A bare IPv6 address (`::1`) is how people write one in a list.
    if value.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some((value.to_ascii_lowercase(), None));
    }
    let authority: axum::http::uri::Authority = value.parse().ok()?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return None;
    }
    let host = authority.host();
    // `Authority` takes any text after the last colon as the port.
    let port = match authority.as_str()[host.len()..].strip_prefix(':') {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    let name = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    let name_is_valid = name.parse::<std::net::IpAddr>().is_ok()
        || name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.');
    name_is_valid.then(|| (name.to_ascii_lowercase(), port))
}

/// Whether `url` names this machine: a loopback address, `localhost`, or a
/// name under `.localhost` (which resolves to loopback, RFC 6761).
pub fn is_loopback_url(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    // An IPv6 host comes in brackets; the URL parser has already written
    // IPv4 in its dotted form.
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => ip.to_canonical().is_loopback(),
        Err(_) => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_values_parse_to_name_and_port() {
        assert_eq!(
            parse_host("Engram.Internal"),
            Some(("engram.internal".into(), None))
        );
        assert_eq!(
            parse_host("engram:8080"),
            Some(("engram".into(), Some(8080)))
        );
        assert_eq!(parse_host("[::1]:8080"), Some(("::1".into(), Some(8080))));
        assert_eq!(parse_host("::1"), Some(("::1".into(), None)));
        assert_eq!(parse_host("127.0.0.1"), Some(("127.0.0.1".into(), None)));
        for bad in [
            "",
            "*",
            "http://engram",
            "engram/path",
            "user@engram",
            "engram:port",
        ] {
            assert_eq!(parse_host(bad), None, "{bad}");
        }
    }

    #[test]
    fn loopback_urls_are_recognised() {
        for url in [
            "http://127.0.0.1:8080/mcp",
            "http://127.9.0.1/mcp",
            "http://[::1]:8080/mcp",
            "http://[::ffff:127.0.0.1]/mcp",
            "http://localhost:8080/mcp",
            "http://LocalHost./mcp",
            "http://engram.localhost/mcp",
        ] {
            assert!(is_loopback_url(&Url::parse(url).unwrap()), "{url}");
        }
        for url in [
            "http://10.0.0.5/mcp",
            "https://memory.example/mcp",
            "http://localhost.example/mcp",
        ] {
            assert!(!is_loopback_url(&Url::parse(url).unwrap()), "{url}");
        }
    }
}
