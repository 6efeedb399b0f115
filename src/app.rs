//! The application's lifecycle: load the store and the embedder, bind,
//! build the vector index in the background, serve until told to stop, then
//! let in-flight requests finish and stop the indexer.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::ApiKeys;
use crate::config::{ApiKey, Config};
use crate::embed::cache::EmbeddingCache;
use crate::embed::{self, Embedder};
use crate::index::Index;
use crate::index::indexer::{Indexer, IndexerStats};
use crate::retrieval::{Retriever, inject};
use crate::routes;
use crate::state::{AppState, Readiness};
use crate::store::{self, Store};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("loading the memory store")]
    Store(#[from] store::Error),
    #[error("loading the embedder")]
    Embedder(#[from] embed::Error),
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
    indexer: JoinHandle<()>,
    stop_indexer: CancellationToken,
}

impl App {
    /// Loads the store and the embedder, binds the listener (`127.0.0.1:0`
    /// picks a free port) and starts building the index; the service is
    /// ready once that build is done.
    pub async fn build(config: Config) -> Result<Self, Error> {
        let (store, embedder, cache) = {
            let data_dir = config.data_dir.clone();
            let embedding = config.embedding.clone();
            tokio::task::spawn_blocking(move || -> Result<_, Error> {
                let store = Store::open(&data_dir)?;
                let embedder = Embedder::from_config(&embedding)?;
                let cache = EmbeddingCache::open(
                    &data_dir.join(".cache"),
                    &embedder.model_key(),
                    embedder.dimensions(),
                );
                Ok((store, embedder, cache))
            })
            .await??
        };
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        // Loaded off the request path, so the first retrieval does not wait.
        tokio::task::spawn_blocking(inject::warm_up);

        let readiness = Readiness::default();
        let index = Arc::new(Index::new(embedder.dimensions()));
        let indexer_stats = Arc::new(IndexerStats::default());
        let stop_indexer = CancellationToken::new();
        let indexer = tokio::spawn(
            Indexer::new(
                store.clone(),
                index.clone(),
                embedder.clone(),
                cache,
                readiness.clone(),
                indexer_stats.clone(),
            )
            .run(stop_indexer.clone()),
        );
        let retriever = Retriever::new(
            store.clone(),
            index,
            embedder,
            readiness.clone(),
            Duration::from_millis(config.retrieval.budget_ms),
        );
        let api_keys = ApiKeys::new(config.api_key.iter().map(ApiKey::expose));
        let state = AppState {
            api_keys,
            store,
            retriever,
            indexer_stats,
            config: Arc::new(config),
            readiness,
        };
        let router = routes::router(state.clone());
        Ok(Self {
            listener,
            router,
            state,
            indexer,
            stop_indexer,
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
        self.stop_indexer.cancel();
        if let Err(err) = self.indexer.await {
            tracing::error!(error = %err, "the indexer task failed");
        }
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
