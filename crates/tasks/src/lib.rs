//! Every task the gateway starts has an owner: this crate, and it knows
//! two kinds. **Work** ends on its own: a request's stages running on after
//! its caller left, a cache write, a key's suspension, a batch line, an MCP
//! call. Shutdown waits for it ([`drain`], within a bound) before the
//! ledger writer's last flush, so a request admitted before the signal is
//! settled and written, not lost because the process stopped first.
//! **Services** run as long as the process: exporters, watchers,
//! write-behind loops (each flushed by its own `finish`), a fleet's
//! subscriptions, the listeners. They stop with the runtime.
//!
//! `tokio::spawn` is a disallowed method (`clippy.toml`): a new task says
//! which kind it is by the function that starts it.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// The work in flight, process-wide (a tracker is a counter and a notifier:
/// starting a task costs two atomic operations more).
static WORK: LazyLock<TaskTracker> = LazyLock::new(TaskTracker::new);

/// Starts `future`, work that ends on its own: shutdown waits for it.
pub fn work<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    WORK.spawn(future)
}

/// [`work`] on `runtime`, from a thread that may not be the runtime's (a
/// value's `Drop`).
pub fn work_on<F>(runtime: &tokio::runtime::Handle, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    WORK.spawn_on(future, runtime)
}

/// Starts `future`, a service that runs as long as the process; `name`
/// says which in the log should it end.
pub fn service<F>(name: &'static str, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // The one place a task is spawned without an owner's count: a service
    // is not waited for, it stops with the runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let out = future.await;
        tracing::debug!(service = name, "service ended");
        out
    })
}

/// The work running now.
pub fn in_flight() -> usize {
    WORK.len()
}

/// Waits for the work in flight to end, at most `bound`, and says how many
/// tasks were still running when it stopped waiting. Work started after
/// this call is waited for too, while the bound lasts.
pub async fn drain(bound: Duration) -> usize {
    WORK.close();
    let _ = tokio::time::timeout(bound, WORK.wait()).await;
    WORK.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    // One test: the tracker is process-wide, and the phases below must not
    // interleave with another test's work.
    #[tokio::test(start_paused = true)]
    async fn drain_waits_for_work_within_its_bound_and_not_for_services() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        work(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            flag.store(true, Ordering::SeqCst);
        });
        let service = service("forever", std::future::pending::<()>());
        assert_eq!(in_flight(), 1, "a service is not work");
        assert_eq!(drain(Duration::from_secs(5)).await, 0);
        assert!(done.load(Ordering::SeqCst), "drain returned before the work ended");
        assert!(!service.is_finished());

        // Work that outlives the bound is counted, not waited for.
        work(std::future::pending::<()>());
        assert_eq!(drain(Duration::from_secs(1)).await, 1);
        service.abort();
    }
}
