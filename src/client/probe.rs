//! `engram healthcheck`: asks a running Engram for `/healthz` (or, with
//! `--ready`, `/readyz`), so a container image needs no curl for its
//! health check.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long the whole probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether the service listening on `listen` answers `path` (`/healthz`
/// or `/readyz`) with 200. An unspecified address (`0.0.0.0`, `::`) is
/// probed on loopback.
pub fn probe(listen: SocketAddr, path: &str) -> io::Result<()> {
    let mut target = listen;
    if target.ip().is_unspecified() {
        target.set_ip(if target.is_ipv4() {
            [127, 0, 0, 1].into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let mut stream = TcpStream::connect_timeout(&target, PROBE_TIMEOUT)?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status_line = response.lines().next().unwrap_or_default();
    if status_line.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(io::Error::other(format!("{path} answered {status_line:?}")))
    }
}
