//! One suite over both backends: a test written as `async fn(Backend)` and
//! named in [`over_both_backends!`] runs once over files and once over a
//! PostgreSQL database of its own (skipped, saying so, where PostgreSQL
//! is not installed outside CI; see `pg_cluster`). Each test's database
//! is a copy of one migrated once for the whole binary, so a test pays for
//! a copy, not for the migrations.

use std::path::Path;

use engram::config::{self, Config, PostgresConfig};
use tokio::sync::OnceCell;

use crate::helpers::{Builder, TestApp, files_under};
use crate::pg_cluster::{self, TestDatabase};

pub enum Backend {
    Files,
    Postgres(TestDatabase),
}

impl Backend {
    /// A fresh PostgreSQL database with Engram's schema, or `None` where
    /// there is none to be had.
    pub async fn postgres() -> Option<Self> {
        let template = migrated_template().await.as_ref()?;
        pg_cluster::copy_of(template).await.map(Self::Postgres)
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

    /// Where `text` is durably stored: the files under `data_dir` (but
    /// `.cache/`) that hold it, or the rows of [`Self::stored`] that do.
    pub async fn holding(&self, data_dir: &Path, text: &str) -> Vec<String> {
        match self {
            Self::Files => files_under(data_dir)
                .into_iter()
                .filter(|file| {
                    let bytes = std::fs::read(data_dir.join(file)).unwrap_or_default();
                    String::from_utf8_lossy(&bytes).contains(text)
                })
                .collect(),
            Self::Postgres(_) => {
                let mut rows = self.stored(data_dir).await;
                rows.retain(|row| row.contains(text));
                rows
            }
        }
    }

    /// Deletes the embedding cache, derived data that is safe to lose:
    /// `.cache/` under `data_dir`, or the database's `engram_embeddings`.
    pub async fn forget_embeddings(&self, data_dir: &Path) {
        match self {
            Self::Files => std::fs::remove_dir_all(data_dir.join(".cache")).unwrap(),
            Self::Postgres(database) => {
                let client = pg_cluster::connect(&database.url).await;
                let forgotten = client
                    .execute("DELETE FROM engram_embeddings", &[])
                    .await
                    .unwrap();
                assert!(forgotten > 0, "the cache held no embedding to forget");
            }
        }
    }

    /// What is durably stored, to compare before and after a request that
    /// must change nothing: every file under `data_dir` but the derived
    /// ones in `.cache/`, or every row of the memories, their change log,
    /// the capture queue and its ledger (the embedding cache is derived).
    pub async fn stored(&self, data_dir: &Path) -> Vec<String> {
        match self {
            Self::Files => files_under(data_dir),
            Self::Postgres(database) => {
                let client = pg_cluster::connect(&database.url).await;
                let mut rows = Vec::new();
                for table in STORED_TABLES {
                    let query = format!("SELECT row_to_json(t)::text FROM {table} t ORDER BY 1");
                    for row in client.query(&query, &[]).await.unwrap() {
                        rows.push(format!("{table}: {}", row.get::<_, String>(0)));
                    }
                }
                rows
            }
        }
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

/// The tables that hold what a request may durably change.
const STORED_TABLES: [&str; 4] = [
    "engram_memories",
    "engram_changes",
    "engram_triggers",
    "engram_classified",
];

/// The database every test's is copied from, migrated once by Engram
/// itself and left with no one connected; `None` where PostgreSQL is not
/// to be had.
async fn migrated_template() -> &'static Option<TestDatabase> {
    static TEMPLATE: OnceCell<Option<TestDatabase>> = OnceCell::const_new();
    TEMPLATE
        .get_or_init(async || {
            let template = pg_cluster::database().await?;
            let settings = PostgresConfig {
                url: Some(config::DatabaseUrl::new(&template.url)),
                ..PostgresConfig::default()
            };
            drop(
                engram::store::postgres::Database::open(&settings)
                    .await
                    .unwrap(),
            );
            pg_cluster::disconnected(&template).await;
            Some(template)
        })
        .await
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
