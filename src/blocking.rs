//! Running CPU-bound or blocking work off the async workers, by one rule.
//!
//! [`run`] is the only way the crate awaits `spawn_blocking`. A blocking
//! task that panics is a bug, so its panic is resumed on the awaiting task,
//! as if the work had run in place: a request's `CatchPanicLayer` answers
//! a 500 problem and logs it once, and a long-lived task's `JoinHandle`
//! reports it. A panic never becomes an error value, an empty result or a
//! default. See `error.rs` for the whole policy.

/// Runs `work` on the blocking pool and returns its value; a panic in it
/// is resumed here.
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        // Blocking tasks cannot be aborted: only a runtime shutting down
        // cancels one, and then the awaiting task is being torn down too.
        Err(err) => panic!("a blocking task was cancelled: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::run;

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
}
