//! The accept loop: HTTP/1 and HTTP/2 connections served with the router,
//! bounded in number and in idleness, with a graceful stop that lets
//! in-flight requests finish.
//!
//! A connection that sends no request for the header timeout (counted from
//! its opening, or from its previous response) is closed, whether it never
//! sent a byte, trickles its headers or idles between keep-alive requests.
//! At most `max_connections` are open: at the cap the longest-idle one
//! makes room, and with none idle a newcomer is refused at once with a
//! `503`, so the loop keeps accepting and `/healthz` keeps answering.

pub mod connections;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

use crate::error::{ApiError, PROBLEM_JSON};
use connections::{Connection, Connections, IdleCheck};

/// How long to wait before accepting again after `accept` failed (say,
/// out of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Descriptors kept for everything but client connections: data files,
/// the capture queue, the embedding cache, upstream connections, logs.
pub const RESERVED_FDS: usize = 128;

/// Serves `router` on `listener`, keeping `connections` (at most their
/// cap, each closed after `header_timeout` without a request), until
/// `shutdown` completes; then stops accepting and waits for open requests
/// to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    connections: Arc<Connections>,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    let refusal = refusal_response();
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Most likely out of descriptors: free the longest-idle
                    // connection's, so the next accept can succeed.
                    let freed = connections.close_longest_idle_now();
                    tracing::warn!(error = %err, connections.open = connections.open_count(), connections.freed_idle = freed, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(lease) = connections.admit() else {
            refuse(&stream, &refusal);
            tracing::debug!(peer = %peer, connections.open = connections.open_count(), "refused a connection: every open one is busy");
            continue;
        };
        let connection = lease.connection().clone();
        let service = TowerToHyperService::new(Tracked {
            router: router.clone(),
            connection: connection.clone(),
        });
        let served = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let served = graceful.watch(served);
        tokio::spawn(async move {
            tokio::pin!(served);
            let mut check_at = tokio::time::Instant::now() + header_timeout;
            loop {
                tokio::select! {
                    result = &mut served => {
                        if let Err(err) = result {
                            tracing::debug!(peer = %peer, error = %err, "connection ended with an error");
                        }
                        break;
                    }
                    () = connection.closing() => {
                        tracing::debug!(peer = %peer, "closed an idle connection to make room");
                        break;
                    }
                    () = tokio::time::sleep_until(check_at) => match connection.check_idle(header_timeout) {
                        IdleCheck::At(next) => check_at = next,
                        IdleCheck::Close => {
                            tracing::debug!(peer = %peer, "closed a connection that sent no request in time");
                            break;
                        }
                    },
                }
            }
            drop(lease);
        });
    }
    drop(listener);
    connections.begin_draining();
    graceful.shutdown().await;
}

/// The connection cap to serve with: `configured`, or fewer if the open-file
/// limit (`ulimit -n`) would not hold that many connections besides
/// [`RESERVED_FDS`], with a warning naming the key.
pub fn connection_cap(configured: usize) -> usize {
    let Some(open_files) = open_file_limit() else {
        return configured;
    };
    let room = open_files.saturating_sub(RESERVED_FDS).max(1);
    if configured <= room {
        return configured;
    }
    tracing::warn!(
        limits.max_connections = configured,
        open_files.limit = open_files,
        connections.cap = room,
        "`limits.max_connections` is more than the open-file limit leaves room for; serving at most {room} connections (raise `ulimit -n` or lower the key)"
    );
    room
}

/// The soft limit on open files, where the platform tells it.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_file_limit(&limits)
}

/// The soft "Max open files" of a `/proc/<pid>/limits` text; `None` when
/// unlimited or absent.
fn parse_open_file_limit(limits: &str) -> Option<usize> {
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse().ok())
}

/// The bytes sent to a connection refused at the cap: a complete HTTP/1.1
/// `503` problem that closes the connection.
fn refusal_response() -> Vec<u8> {
    let problem = ApiError::Overloaded.to_problem();
    let body = serde_json::to_string(&problem).expect("a problem always serializes");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {PROBLEM_JSON}\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends the refusal without waiting (a fresh socket's send buffer takes
/// it whole) and closes the connection by dropping it.
fn refuse(stream: &TcpStream, refusal: &[u8]) {
    // A client gone already needs no answer.
    let _ = stream.try_write(refusal);
}

/// The router, with each request marked in flight on its connection until
/// its response body has been sent.
#[derive(Clone)]
struct Tracked {
    router: Router,
    connection: Arc<Connection>,
}

impl<B> tower::Service<axum::http::Request<B>> for Tracked
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let Some(in_flight) = self.connection.begin_request() else {
            // Lost a race with closing this idle connection: nothing done.
            let mut refused = ApiError::Overloaded.into_response();
            refused.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            return Box::pin(std::future::ready(Ok(refused)));
        };
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    // Held until hyper drops the body, having sent it.
                    let _held = &in_flight;
                    frame
                }))
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_open_file_limit_is_read_from_proc_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            256                  524288               files     \n";
        assert_eq!(parse_open_file_limit(limits), Some(256));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_open_file_limit(unlimited), None);
    }
}
