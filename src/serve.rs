//! The accept loop: HTTP/1 and HTTP/2 connections served with the router,
//! with a header-read timeout (a client that trickles its headers is cut
//! off) and a graceful stop that lets in-flight requests finish.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How long to wait before accepting again after `accept` failed (say,
/// out of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting and waits for open requests to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(peer = %peer, error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
