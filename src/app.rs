//! The application's lifecycle: load the store, bind, serve until told to
//! stop, then let in-flight requests finish.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;

use crate::auth::ApiKeys;
use crate::config::{ApiKey, Config};
use crate::routes;
use crate::state::{AppState, Readiness};
use crate::store::{self, Store};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("loading the memory store")]
    Store(#[from] store::Error),
    #[error("the start-up task failed")]
    Task(#[from] tokio::task::JoinError),
    #[error("binding {addr}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("serving HTTP")]
    Serve(#[source] io::Error),
}

/// A built application, bound to its port but not yet serving.
pub struct App {
    listener: TcpListener,
    router: Router,
    state: AppState,
}

impl App {
    /// Loads the store and binds the listener (`127.0.0.1:0` picks a free port).
    pub async fn build(config: Config) -> Result<Self, Error> {
        let data_dir = config.data_dir.clone();
        let store = tokio::task::spawn_blocking(move || Store::open(&data_dir)).await??;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let readiness = Readiness::default();
        let api_keys = ApiKeys::new(config.api_key.iter().map(ApiKey::expose));
        let state = AppState {
            api_keys,
            store,
            config: Arc::new(config),
            readiness: readiness.clone(),
        };
        let router = routes::router(state.clone());
        // Everything start-up needs is loaded above.
        readiness.set_ready();
        Ok(Self {
            listener,
            router,
            state,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The router, for serving requests in process (tests).
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then waits for in-flight requests.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        tracing::info!(listen = %self.local_addr().map_err(Error::Serve)?, "engram is serving");
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(Error::Serve)?;
        tracing::info!("engram stopped");
        Ok(())
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
