//! The application's lifecycle: load the store and the embedder, bind,
//! build the vector index in the background, watch the data directory (or
//! follow the database's change log),
//! serve until told to stop, then let in-flight requests finish and stop
//! the background tasks (the indexer, the watcher, the capture worker, the
//! access-count and model-usage savers).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::Access;
use crate::blocking;
use crate::capture::backlog::{self, Backlog};
use crate::capture::ledger::Ledger;
use crate::capture::queue::{self, Queue};
use crate::capture::triggers::RecentTriggers;
use crate::capture::worker::{Worker, WorkerDeps};
use crate::capture::{Capture, CaptureStats};
use crate::config::{Backend, Config};
use crate::consolidate::Consolidator;
use crate::embed::{self, Embedder};
use crate::index::Index;
use crate::index::indexer::{Indexer, IndexerDeps};
use crate::llm::Llm;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::retrieval::access::AccessCounts;
use crate::retrieval::{Parts, Retriever, inject};
use crate::routes::extract::BodyLimit;
use crate::routes::state::AppState;
use crate::routes::stats::StatsSources;
use crate::routes::stats::scrape::StatsCollector;
use crate::serve;
use crate::serve::connections::{Connections, Traffic};
use crate::store::{self, Store};
use crate::usage::Meter;
use crate::{mcp, routes, upkeep};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("loading the memory store")]
    Store(#[from] store::Error),
    #[error("loading the embedder")]
    Embedder(#[from] embed::Error),
    #[error("opening the capture queue")]
    Queue(#[from] queue::Error),
    #[error("binding {addr}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("serving HTTP")]
    Serve(#[source] io::Error),
}

/// A built application, bound to its port but not yet serving.
pub struct App {
    listener: TcpListener,
    /// The connections it will serve, created here so that [`Self::traffic`]
    /// can be read before and while it serves.
    connections: Arc<Connections>,
    router: Router,
    state: AppState,
    /// The indexer, the data directory watcher (or the change log's
    /// follower), the capture worker and the access-count saver, stopped
    /// after serving ends.
    background: Vec<JoinHandle<()>>,
    stop: CancellationToken,
}

impl App {
    /// Loads the store and the embedder, binds the listener (`127.0.0.1:0`
    /// picks a free port) and starts building the index; the service is
    /// ready once that build is done.
    pub async fn build(config: Config) -> Result<Self, Error> {
        let (store, follow) = open_store(&config).await?;
        let (embedder, access, queue, meter) = {
            let config = config.clone();
            let database = store.database().cloned();
            blocking::run(move || -> Result<_, Error> {
                let data_dir = &config.data_dir;
                let meter = Meter::open(&config, database.clone());
                let queue_limits = queue::Limits::from_config(&config);
                let queue = match database {
                    Some(database) => Backlog::Postgres(Arc::new(backlog::postgres::Shared::new(
                        database,
                        queue_limits,
                        config.capture.lease(),
                        config.store.postgres.catch_up(),
                    ))),
                    None => Backlog::Files(Arc::new(Queue::open(
                        &data_dir.join("queue"),
                        queue_limits,
                    )?)),
                };
                let embedder = Embedder::from_config(&config.embedding)?.metered(meter.clone());
                let cache_dir = data_dir.join(".cache");
                Ok((embedder, AccessCounts::load(&cache_dir), queue, meter))
            })
            .await?
        };
        // Replicas share one embedding cache; one process keeps its own file.
        let cache = match store.database() {
            Some(database) => embedder.open_shared_cache(database.clone()).await,
            None => {
                let (embedder, cache_dir) = (embedder.clone(), config.data_dir.join(".cache"));
                blocking::run(move || embedder.open_cache(&cache_dir)).await
            }
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
        let metrics = Metrics::default();
        let index = Arc::new(
            Index::new(embedder.dimensions())
                .approximate_above(config.index.approximate_above)
                .evicting(config.index.residency()),
        );
        let stop = CancellationToken::new();
        let (indexer_stats, indexer) = Indexer::spawn(
            IndexerDeps {
                store: store.clone(),
                index: index.clone(),
                embedder: embedder.clone(),
                cache,
                readiness: readiness.clone(),
                metrics: metrics.clone(),
                passages: config.retrieval.passage_weight > 0.0,
            },
            stop.clone(),
        );
        let llm = config
            .llm
            .clone()
            .map(|settings| Llm::new(settings, meter.clone()));
        let capture_stats = Arc::new(CaptureStats::default());
        let recent_triggers = Arc::new(RecentTriggers::default());
        let wake = Arc::new(Notify::new());
        let capture = Capture::new(
            queue.clone(),
            capture_stats.clone(),
            recent_triggers.clone(),
            wake.clone(),
            meter.clone(),
            llm.is_some(),
        );
        let mut background = vec![indexer];
        background.extend(crate::index::spawn_sweeper(index.clone(), stop.clone()));
        match follow {
            Follow::Watch(fingerprints) if config.store.watch => {
                match store::watch::spawn(
                    &store,
                    fingerprints,
                    config.store.debounce(),
                    stop.clone(),
                ) {
                    Ok(watcher) => background.push(watcher),
                    // Serving without live sync beats not serving: `/stats`
                    // says the directory is not watched.
                    Err(err) => tracing::error!(
                        error = %err,
                        cause = %std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default(),
                        "cannot watch the data directory; changes made on disk are taken in at the next start"
                    ),
                }
            }
            Follow::Watch(_) => {}
            Follow::ChangeLog { database, cursor } => background.push(
                store::postgres::follow::spawn(store.clone(), database, cursor, stop.clone()),
            ),
        }
        if let Some(llm) = &llm {
            let deps = WorkerDeps {
                queue,
                store: store.clone(),
                index: index.clone(),
                embedder: embedder.clone(),
                llm: llm.clone(),
                ledger: Arc::new(match store.database() {
                    Some(database) => Ledger::in_database(database.clone()),
                    None => Ledger::new(config.data_dir.join("queue").join("classified")),
                }),
                stats: capture_stats,
                recent: recent_triggers,
                wake,
                metrics: metrics.clone(),
            };
            background.push(Worker::spawn(&config.capture, deps, stop.clone()));
        }
        let retriever = Retriever::new(Parts {
            store: store.clone(),
            index,
            embedder,
            llm,
            index_ready: readiness.clone(),
            access,
            settings: config.retrieval.clone(),
            metrics: metrics.clone(),
        });
        background.push(tokio::spawn(upkeep::save_uses(
            retriever.clone(),
            stop.clone(),
        )));
        background.push(tokio::spawn(upkeep::save_usage(
            meter.clone(),
            metrics.clone(),
            store.database().is_some(),
            stop.clone(),
        )));
        background.push(tokio::spawn(upkeep::let_go_of_unused(
            store.clone(),
            readiness.clone(),
            config.retention.clone(),
            config.data_dir.clone(),
            stop.clone(),
        )));
        let access = Access::from_config(&config);
        let registry = Arc::new(metrics.registry(StatsCollector(StatsSources {
            store: store.clone(),
            retriever: retriever.clone(),
            capture: capture.clone(),
            indexer: indexer_stats.clone(),
            readiness: readiness.clone(),
            meter: meter.clone(),
        })));
        let consolidator = Consolidator::new(
            retriever.clone(),
            &config.consolidation,
            config.defaults.clone(),
        );
        background.push(tokio::spawn(upkeep::consolidate_now_and_then(
            consolidator.clone(),
            store.clone(),
            config.consolidation.interval_hours,
            stop.clone(),
        )));
        let state = AppState {
            access,
            store,
            capture,
            retriever,
            consolidator,
            metrics,
            registry,
            indexer_stats,
            body_limit: BodyLimit(config.limits.max_body_bytes),
            defaults: config.defaults.clone(),
            config: Arc::new(config),
            readiness,
            meter,
        };
        let router = routes::router(state.clone(), mcp::router(&state));
        let connections =
            Connections::new(serve::connection_cap(state.config.limits.max_connections));
        Ok(Self {
            listener,
            connections,
            router,
            state,
            background,
            stop,
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

    /// What the served connections are doing (open, requests in flight,
    /// draining at a stop), for awaiting those states (tests).
    pub fn traffic(&self) -> Traffic {
        self.connections.traffic()
    }

    /// Serves until `shutdown` completes, then waits for in-flight requests.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        tracing::info!(listen = %self.local_addr().map_err(Error::Serve)?, "engram is serving");
        let header_timeout = Duration::from_millis(self.state.config.limits.body_timeout_ms);
        serve::serve(
            self.listener,
            self.router,
            self.connections,
            header_timeout,
            shutdown,
        )
        .await;
        self.stop.cancel();
        for task in self.background {
            if let Err(err) = task.await {
                tracing::error!(error = %err, "a background task failed");
            }
        }
        tracing::info!("engram stopped");
        Ok(())
    }
}

/// How the store learns of changes made outside this process.
enum Follow {
    /// Files mode: the watcher, from the files loaded at start.
    Watch(store::Fingerprints),
    /// Postgres mode: the change log, after the snapshot's change.
    ChangeLog {
        database: store::postgres::Database,
        cursor: u64,
    },
}

/// Opens the configured backend: the data directory's files, or the
/// database (migrated, then read as one snapshot).
async fn open_store(config: &Config) -> Result<(Store, Follow), Error> {
    match config.store.backend {
        Backend::Files => {
            let data_dir = config.data_dir.clone();
            let (store, fingerprints) = blocking::run(move || Store::open(&data_dir)).await?;
            Ok((store, Follow::Watch(fingerprints)))
        }
        Backend::Postgres => {
            let database = store::postgres::Database::open(&config.store.postgres)
                .await
                .map_err(store::Error::from)?;
            let (store, cursor) = Store::open_postgres(&config.data_dir, database.clone()).await?;
            Ok((store, Follow::ChangeLog { database, cursor }))
        }
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
