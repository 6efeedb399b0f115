//! How a test waits for what it expects: polling a condition
//! ([`wait_until`], [`wait_until_async`]) or awaiting what has to end
//! ([`finishes`]), each bounded by [`PATIENCE`]. The bound only ends a
//! test that would otherwise hang: a passing test never comes near it, so
//! it leaves room for a loaded 2-core runner starting processes,
//! PostgreSQL and a browser. A deadline that is the behaviour under test
//! (one of the server's timeouts, a hook's budget) is set by its test,
//! never taken from here.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a test waits for something to happen before it fails.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// How often a condition is looked at again.
const POLL: Duration = Duration::from_millis(5);

/// The moment a wait that starts now gives up.
pub fn deadline() -> Instant {
    Instant::now() + PATIENCE
}

/// Polls `condition` until it holds, failing the test after
/// [`PATIENCE`]: for work the service does in the background.
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = deadline();
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Like [`wait_until`], for a condition that has to await (a request).
pub async fn wait_until_async(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = deadline();
    while !condition().await {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `attempt` until it yields a value, failing the test after
/// [`PATIENCE`] with `what` and the last thing `attempt` saw: for a wait
/// whose failure should show the state it stopped at.
pub async fn wait_for<T, S: std::fmt::Display>(
    what: &str,
    mut attempt: impl AsyncFnMut() -> Result<T, S>,
) -> T {
    let deadline = deadline();
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "gave up waiting for {what}: {seen:#}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Awaits `future`, failing the test if it has not ended after
/// [`PATIENCE`]: for what has to end (a read, a stop, a call), by a
/// deadline that is not itself under test.
pub async fn finishes<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("gave up waiting for {what}"))
}
