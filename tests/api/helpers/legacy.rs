//! The helpers the tests used before [`TestApp::builder`], kept as thin
//! wrappers over it so that test files written against them still build.
//! New tests use the builder; once no test calls these, delete this file.
#![expect(
    dead_code,
    reason = "kept for test files written against the old helpers until they move to the builder"
)]

use std::path::Path;

use engram::config::Config;

use super::app::{Builder, Ground, RunningApp, TestApp};

impl RunningApp {
    /// An app serving with this configuration, on its data directory (the
    /// test's own) and a fresh upstream.
    pub async fn start(config: Config) -> Self {
        let ground = Ground::at(&config.data_dir).await;
        Self::on(ground, config).await
    }
}

/// An app on an existing data directory, with the configuration adjusted,
/// once its start-up index build is done.
pub async fn spawn_app_on(data_dir: &Path, adjust: impl FnOnce(&mut Config)) -> TestApp {
    on_dir(data_dir, adjust).await.spawn().await
}

/// An app on an existing data directory, as soon as it is built: its
/// start-up index build may still be running.
pub async fn spawn_unready_app_on(data_dir: &Path, adjust: impl FnOnce(&mut Config)) -> TestApp {
    on_dir(data_dir, adjust).await.spawn_unready().await
}

async fn on_dir<'a>(data_dir: &Path, adjust: impl FnOnce(&mut Config) + 'a) -> Builder<'a> {
    TestApp::builder()
        .on(Ground::at(data_dir).await)
        .config(adjust)
}
