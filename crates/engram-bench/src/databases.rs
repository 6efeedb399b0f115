//! The PostgreSQL server the replicas workload runs on: a throwaway
//! cluster of its own (the `pg-throwaway` crate the API tests use too), or
//! the server `DATABASE_URL` names. Either way each measurement gets a
//! fresh database of its own, made there and dropped at the end, and a
//! corpus is loaded through Engram's own store code, so it lands in the
//! real schema exactly as replicas write it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use engram::config::{DatabaseUrl, PostgresConfig};
use engram::memory::Memory;
use engram::store::postgres::Database;

use crate::workload::Result;

/// How long the server may take to accept its first connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Writers loading a corpus at once: each write takes the log's head
/// row, so more would only wait on it.
const LOADERS: usize = 4;

pub struct Databases {
    /// The throwaway cluster, stopped when dropped; `None` on a server
    /// that `DATABASE_URL` names.
    _cluster: Option<pg_throwaway::Cluster>,
    /// A connection to the server's `postgres` database (or the one
    /// `DATABASE_URL` names), to make and drop databases.
    admin: tokio_postgres::Client,
    /// The URL new databases' URLs are made from.
    base: reqwest::Url,
    created: Vec<String>,
}

impl Databases {
    /// Starts a throwaway cluster, or connects to the server of `url`
    /// (whose role must be allowed to create databases).
    pub async fn start(url: Option<&str>) -> Result<Self> {
        let (cluster, base) = match url {
            Some(url) => (None, url.to_owned()),
            None => {
                let bin = pg_throwaway::find_binaries().ok_or(pg_throwaway::NOT_INSTALLED)?;
                let cluster =
                    tokio::task::spawn_blocking(move || pg_throwaway::Cluster::create(&bin))
                        .await??;
                let base = cluster.url("postgres");
                (Some(cluster), base)
            }
        };
        let admin = pg_throwaway::connect_within(&base, CONNECT_TIMEOUT)
            .await
            .map_err(|err| format!("connecting to PostgreSQL: {err}"))?;
        Ok(Self {
            _cluster: cluster,
            admin,
            base: base
                .parse()
                .map_err(|_| "DATABASE_URL is not a postgres:// URL")?,
            created: Vec::new(),
        })
    }

    /// A fresh, empty database: its URL.
    pub async fn create(&mut self) -> Result<String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "engram_bench_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        self.created.push(name.clone());
        let mut url = self.base.clone();
        url.set_path(&name);
        Ok(url.to_string())
    }

    /// Drops every database this run made (on a throwaway cluster they go
    /// with it anyway). Call once every replica is stopped.
    pub async fn drop_created(&mut self) -> Result {
        for name in self.created.drain(..) {
            self.admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await?;
        }
        Ok(())
    }
}

/// How many memories one loader's transaction commits, as
/// `POST /memories/batch` commits its largest batch.
const LOAD_CHUNK: usize = 1000;

/// Writes `memories` into the database at `url` (migrating it first) as a
/// replica's `POST /memories/batch` commits them: each row with its
/// change in the log, a chunk of them in one transaction.
pub async fn load(url: &str, memories: Vec<Memory>) -> Result {
    let settings = PostgresConfig {
        url: Some(DatabaseUrl::new(url)),
        pool_size: LOADERS,
        ..PostgresConfig::default()
    };
    let database = Database::open(&settings).await?;
    let queue = Arc::new(std::sync::Mutex::new(memories));
    let mut loaders = tokio::task::JoinSet::new();
    for _ in 0..LOADERS {
        let (database, queue) = (database.clone(), queue.clone());
        loaders.spawn(async move {
            loop {
                let chunk: Vec<Memory> = {
                    let mut queue = queue.lock().map_err(|_| "a loader panicked")?;
                    let from = queue.len().saturating_sub(LOAD_CHUNK);
                    queue.split_off(from)
                };
                if chunk.is_empty() {
                    return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(());
                }
                let chunk: Vec<&Memory> = chunk.iter().collect();
                database
                    .write(&chunk, false)
                    .await?
                    .map_err(|refusal| format!("the database refused a write: {refusal:?}"))?;
            }
        });
    }
    while let Some(done) = loaders.join_next().await {
        done??;
    }
    Ok(())
}
