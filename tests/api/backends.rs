//! One suite over both backends: a test written as `async fn(Backend)` and
//! named in [`over_both_backends!`] runs once over files and once over a
//! PostgreSQL database of its own (skipped, saying so, where PostgreSQL
//! is not installed outside CI; see `pg_cluster`).

use std::path::Path;

use engram::config::{self, Config};

use crate::helpers::{Builder, TestApp};
use crate::pg_cluster::{self, TestDatabase};

pub enum Backend {
    Files,
    Postgres(TestDatabase),
}

impl Backend {
    /// A fresh PostgreSQL database, or `None` where there is none to be had.
    pub async fn postgres() -> Option<Self> {
        pg_cluster::database().await.map(Self::Postgres)
    }

    /// Another empty store of the same kind: for files, a fresh data
    /// directory as any app gets; for PostgreSQL, a database of its own.
    pub async fn another(&self) -> Self {
        match self {
            Self::Files => Self::Files,
            Self::Postgres(_) => Self::postgres()
                .await
                .expect("PostgreSQL gave one database, so it gives another"),
        }
    }

    /// Points `config` at this backend.
    pub fn configure(&self, config: &mut Config) {
        if let Self::Postgres(database) = self {
            config.store.backend = config::Backend::Postgres;
            config.store.postgres.url = Some(config::DatabaseUrl::new(&database.url));
        }
    }

    /// An app over this backend, on a fresh data directory.
    pub async fn spawn_app(&self) -> TestApp {
        self.builder().spawn().await
    }

    /// An app over this backend, to be adjusted further.
    pub fn builder(&self) -> Builder<'_> {
        TestApp::builder().config(|config| self.configure(config))
    }

    /// Whether memory `id` is durably stored: its file under `data_dir`'s
    /// `namespace_dir` (`users/ana`), or its row in the database.
    pub async fn holds(&self, data_dir: &Path, namespace_dir: &str, id: &str) -> bool {
        match self {
            Self::Files => data_dir.join(format!("{namespace_dir}/{id}.md")).exists(),
            Self::Postgres(database) => {
                let client = pg_cluster::connect(&database.url).await;
                let id: uuid::Uuid = id.parse().unwrap();
                let row = client
                    .query_opt("SELECT 1 FROM engram_memories WHERE id = $1", &[&id])
                    .await
                    .unwrap();
                row.is_some()
            }
        }
    }
}

/// Runs each named test, an `async fn(Backend)` of the module, over both
/// backends: as `files::<name>` and `postgres::<name>`.
macro_rules! over_both_backends {
    ($($test:ident),+ $(,)?) => {
        mod files {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test($crate::backends::Backend::Files).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $test() {
                    if let Some(backend) = $crate::backends::Backend::postgres().await {
                        super::$test(backend).await;
                    }
                }
            )+
        }
    };
}
pub(crate) use over_both_backends;
