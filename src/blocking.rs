//! Running work apart from the task that awaits it, by one rule:
//! CPU-bound or blocking work on the blocking pool ([`run`]), and async
//! work that must finish even if its caller is dropped ([`run_to_end`]).
//!
//! [`run`] is the only way the crate awaits `spawn_blocking`. Work that
//! panics is a bug, so its panic is resumed on the awaiting task,
//! as if the work had run in place: a request's `CatchPanicLayer` answers
//! a 500 problem and logs it once, and a long-lived task's `JoinHandle`
//! reports it. A panic never becomes an error value, an empty result or a
//! default. See `error.rs` for the whole policy. [`run`] carries the
//! request's [`CommitPoint`] over to the blocking thread, and
//! [`run_to_end`] to its task.

use crate::commit_point::CommitPoint;

/// Runs `work` on the blocking pool and returns its value; a panic in it
/// is resumed here.
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    // The work may commit a change of the request handing it over.
    let point = CommitPoint::current();
    match tokio::task::spawn_blocking(move || CommitPoint::within(point, work)).await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        // Blocking tasks cannot be aborted: only a runtime shutting down
        // cancels one, and then the awaiting task is being torn down too.
        Err(err) => panic!("a blocking task was cancelled: {err}"),
    }
}

/// Runs `work` on its own task and returns its value; a panic in it is
/// resumed here. Dropping the returned future (a client that hangs up, a
/// timeout) does not stop `work`: for steps that must not be cut short
/// half-way, such as a durable write and the bookkeeping after it.
pub async fn run_to_end<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> T {
    let point = CommitPoint::current();
    let work = async move {
        match point {
            Some(point) => point.scope(work).await,
            None => work.await,
        }
    };
    match tokio::spawn(work).await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("a task run to its end was cancelled: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::Notify;

    use super::{run, run_to_end};

    #[tokio::test]
    async fn returns_the_value() {
        assert_eq!(run(|| 6 * 7).await, 42);
    }

    #[tokio::test]
    async fn resumes_a_panic_on_the_awaiting_task() {
        let awaiting = tokio::spawn(run(|| -> u32 { panic!("boom in the pool") }));
        let err = awaiting
            .await
            .expect_err("the panic reaches the awaiting task");
        let payload = err.into_panic();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in the pool"));
    }

    #[tokio::test]
    async fn work_run_to_its_end_outlives_a_dropped_caller() {
        let [started, released, finished] = [(); 3].map(|()| Arc::new(Notify::new()));
        let work = {
            let (started, released, finished) =
                (started.clone(), released.clone(), finished.clone());
            async move {
                started.notify_one();
                released.notified().await;
                finished.notify_one();
            }
        };
        let caller = tokio::spawn(run_to_end(work));
        started.notified().await;
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        released.notify_one();
        tokio::time::timeout(Duration::from_secs(10), finished.notified())
            .await
            .expect("the work went on without its caller");
    }
}
