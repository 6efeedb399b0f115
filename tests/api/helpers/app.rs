//! The apps a test runs, and what they own: [`TestApp::builder`] starts
//! a fake upstream, makes a temporary data directory and builds the app
//! on them, in process ([`Builder::spawn`]) or on a real port
//! ([`Builder::serve`]). The app keeps both for as long as it lives, and
//! hands them on as a [`Ground`] to restart on the same data.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use axum::Router;
use engram::app::App;
use engram::config::{Config, EmbeddingProvider};
use engram::serve::connections::Traffic;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::wait_until_async;
use crate::upstream::{self, Upstream};

/// What an app stands on: a data directory and a fake upstream. A test
/// makes one itself only to prepare either before the app starts;
/// otherwise the builder makes it, and a stopped app hands it back.
pub struct Ground {
    pub upstream: Upstream,
    pub data_dir: PathBuf,
    /// Removes the directory when dropped; `None` for a directory the
    /// test owns.
    temp: Option<TempDir>,
}

impl Ground {
    /// A fresh temporary directory and a fresh upstream.
    pub async fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        Self {
            upstream: Upstream::start().await,
            data_dir: temp.path().to_owned(),
            temp: Some(temp),
        }
    }

    pub fn path(&self) -> &Path {
        &self.data_dir
    }
}

/// An app on its own temporary data directory and fake upstream, driven
/// in process through its router.
pub struct TestApp {
    pub router: Router,
    pub data_dir: PathBuf,
    pub upstream: Upstream,
    /// The [`Ground`]'s temporary directory, kept as long as the app.
    temp: Option<TempDir>,
}

impl TestApp {
    /// A fresh ground, no upstream wired in, the tests' configuration.
    pub fn builder<'a>() -> Builder<'a> {
        Builder {
            ground: None,
            llm: false,
            embedder: false,
            adjust: Vec::new(),
        }
    }

    /// The data directory and upstream, for an app started next on them.
    /// This app's background work (indexing, capture) goes on until the
    /// test ends, as a process killed without a stop would leave it.
    pub fn into_ground(self) -> Ground {
        Ground {
            upstream: self.upstream,
            data_dir: self.data_dir,
            temp: self.temp,
        }
    }
}

/// How a test's app is configured, before it is built.
pub struct Builder<'a> {
    ground: Option<Ground>,
    llm: bool,
    embedder: bool,
    adjust: Vec<Adjustment<'a>>,
}

/// The tests' upstream timeouts and retrieval budget: the widest budget
/// the configuration takes, far past anything the fake upstream needs,
/// so that a loaded runner never cuts a call short. A test of a timeout
/// or of the budget sets its own.
pub const UNHURRIED_MS: u64 = 60_000;

/// A change to the configuration, applied when the app is built.
type Adjustment<'a> = Box<dyn FnOnce(&mut Config) + 'a>;

impl<'a> Builder<'a> {
    /// Runs on `ground` (a restart, or a directory prepared beforehand)
    /// instead of a fresh one.
    pub fn on(mut self, ground: Ground) -> Self {
        self.ground = Some(ground);
        self
    }

    /// Points the chat model (HyDE, the classifier) at the fake upstream.
    pub fn llm(mut self) -> Self {
        self.llm = true;
        self
    }

    /// Points the embedder at the fake upstream (otherwise it is the
    /// embedded model).
    pub fn embedder(mut self) -> Self {
        self.embedder = true;
        self
    }

    /// Adjusts the configuration, after the upstream is wired in and after
    /// the adjustments given before this one.
    pub fn config(mut self, adjust: impl FnOnce(&mut Config) + 'a) -> Self {
        self.adjust.push(Box::new(adjust));
        self
    }

    /// The app in process, once `/readyz` says it is ready: its start-up
    /// index build is done (and, over PostgreSQL, it has caught up with
    /// the change log).
    pub async fn spawn(self) -> TestApp {
        let app = self.spawn_unready().await;
        wait_until_async("the app is ready", async || {
            app.get("/readyz").await.status == axum::http::StatusCode::OK
        })
        .await;
        app
    }

    /// The app in process, as soon as it is built: its start-up index
    /// build may still be running.
    pub async fn spawn_unready(self) -> TestApp {
        let (ground, config) = self.ground_and_config().await;
        let app = App::build(config).await.unwrap();
        TestApp {
            router: app.router(),
            data_dir: ground.data_dir,
            upstream: ground.upstream,
            temp: ground.temp,
        }
    }

    /// The app serving on a real port (readiness not awaited).
    pub async fn serve(self) -> RunningApp {
        let (ground, config) = self.ground_and_config().await;
        RunningApp::on(ground, config).await
    }

    async fn ground_and_config(self) -> (Ground, Config) {
        let ground = match self.ground {
            Some(ground) => ground,
            None => Ground::new().await,
        };
        let config = test_config(&ground.data_dir, |config| {
            if self.embedder {
                embed_with(&ground.upstream, config);
            }
            if self.llm {
                llm_with(&ground.upstream, config);
            }
            for adjust in self.adjust {
                adjust(config);
            }
        });
        (ground, config)
    }
}

/// An app serving on a real port until it is stopped.
pub struct RunningApp {
    pub base_url: String,
    pub upstream: Upstream,
    pub data_dir: PathBuf,
    /// What its connections are doing, to await a request in flight or a
    /// stop under way.
    pub traffic: Traffic,
    temp: Option<TempDir>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
}

impl RunningApp {
    pub(super) async fn on(ground: Ground, config: Config) -> Self {
        let app = App::build(config).await.unwrap();
        let base_url = format!("http://{}", app.local_addr().unwrap());
        let traffic = app.traffic();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            app.run_until_stopped(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self {
            base_url,
            upstream: ground.upstream,
            data_dir: ground.data_dir,
            traffic,
            temp: ground.temp,
            stop,
            server,
        }
    }

    /// Signals shutdown; the returned handle completes once the server has
    /// stopped, with the data directory and upstream for a next app.
    pub fn begin_stop(self) -> JoinHandle<Ground> {
        self.stop.send(()).unwrap();
        let (server, ground) = (
            self.server,
            Ground {
                upstream: self.upstream,
                data_dir: self.data_dir,
                temp: self.temp,
            },
        );
        tokio::spawn(async move {
            server.await.unwrap();
            ground
        })
    }

    /// Stops the server gracefully; the data directory and upstream, for a
    /// next app.
    pub async fn stop(self) -> Ground {
        self.begin_stop().await.unwrap()
    }
}

/// Points the chat model (HyDE, the classifier) at `upstream`.
fn llm_with(upstream: &Upstream, config: &mut Config) {
    config.llm = Some(engram::config::Llm {
        base_url: upstream.base_url.clone(),
        retrieval_timeout_ms: UNHURRIED_MS,
        classifier_timeout_ms: UNHURRIED_MS,
        ..engram::config::Llm::default()
    });
}

/// Points the embedder at `upstream`.
fn embed_with(upstream: &Upstream, config: &mut Config) {
    config.embedding.provider = EmbeddingProvider::Openai;
    config.embedding.base_url = upstream.base_url.clone();
    config.embedding.model = "fake-embedding".to_owned();
    config.embedding.dimensions = Some(upstream::Vectors::SMALL.dimensions);
    config.embedding.timeout_ms = UNHURRIED_MS;
}

/// The tests' configuration over `data_dir` (port 0, the retrieval budget
/// [`UNHURRIED_MS`], no retention: it lets memories go by their dates, and
/// tests bring in memories written on fixed dates), adjusted.
fn test_config(data_dir: &Path, adjust: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        data_dir: data_dir.to_owned(),
        ..Config::default()
    };
    config.retrieval.budget_ms = UNHURRIED_MS;
    config.retention.provisional_days = 0;
    config.retention.unused_days = 0;
    adjust(&mut config);
    config
}

/// An app with the defaults on a fresh temporary data directory and
/// upstream: `TestApp::builder().spawn()`.
pub async fn spawn_app() -> TestApp {
    TestApp::builder().spawn().await
}
