//! The batch worker: each instance claims lines from the store's queue
//! (at most `batches.concurrency` at once), runs each through the data
//! router as the key that submitted it, and records its outcome. Leases
//! are renewed while lines run; an instance that dies stops renewing, and
//! its lines are claimed again once their lease ends.
//!
//! Each line is run at least once and billed at most once: its ledger row
//! carries an entry drawn from the line ([`crate::batches`]), so a line
//! run again after a crash is one row, and a finish is recorded only by
//! the claim that still holds the line.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{HeaderValue, Request, Response};
use switchyard_config::kept::Batches;
use switchyard_state::kept::{Delegated, KeptStores};
use switchyard_store::{ClaimedLine, LineOutcome, LineState};
use tokio::sync::Semaphore;

use crate::batches::{line_entry, line_request_id};
use crate::now_ms;

/// Sends a request through the data plane (the binary's live router).
pub trait Dispatch: Send + Sync {
    /// Sends `request`; its answer.
    fn send(&self, request: Request<Body>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send + '_>>;
}

/// How long an idle worker waits before looking at the queue again (a
/// batch submitted to this instance wakes it at once).
const IDLE: Duration = Duration::from_millis(500);

/// The largest answer a line keeps.
const MAX_ANSWER: usize = 64 << 20;

/// How often a line refused for a moment (429 or 503 with `Retry-After`)
/// is tried again before it is recorded as failed, and the longest wait.
const RETRIES: u32 = 5;
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Starts the worker; it runs for the life of the process.
pub fn spawn(kept: KeptStores, config: Batches, dispatch: Arc<dyn Dispatch>) {
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX);
    {
        let kept = kept.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(config.lease / 3);
            loop {
                every.tick().await;
                if let Err(err) = kept.batches.renew_lines(kept.worker.to_string(), now_ms(), lease_ms).await {
                    tracing::warn!(error = %err, "batch leases could not be renewed");
                }
            }
        });
    }
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(config.concurrency));
        loop {
            let free = slots.available_permits();
            let claimed = if free == 0 {
                Vec::new()
            } else {
                match kept.batches.claim_lines(kept.worker.to_string(), now_ms(), lease_ms, free).await {
                    Ok(claimed) => claimed,
                    Err(err) => {
                        tracing::warn!(error = %err, "batch lines could not be claimed");
                        Vec::new()
                    }
                }
            };
            if claimed.is_empty() {
                let _ = tokio::time::timeout(IDLE, kept.wake.notified()).await;
                continue;
            }
            for line in claimed {
                let Ok(permit) = slots.clone().acquire_owned().await else { return };
                let kept = kept.clone();
                let dispatch = dispatch.clone();
                tokio::spawn(async move {
                    run(&kept, dispatch.as_ref(), line).await;
                    drop(permit);
                    kept.wake.notify_one();
                });
            }
        }
    });
}

/// Runs one line and records what it came to.
async fn run(kept: &KeptStores, dispatch: &dyn Dispatch, line: ClaimedLine) {
    let (status, body) = send(dispatch, &line).await;
    let state = if (200..300).contains(&status) { LineState::Succeeded } else { LineState::Failed };
    let outcome = LineOutcome { index: line.index, custom_id: line.custom_id, state, status, body, done_ms: now_ms() };
    match kept.batches.finish_line(kept.worker.to_string(), line.batch.clone(), line.attempt, outcome).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(batch = %line.batch, line = line.index, "a batch line finished after its claim passed on")
        }
        Err(err) => {
            tracing::warn!(batch = %line.batch, line = line.index, error = %err, "a batch line's outcome could not be stored; it runs again")
        }
    }
}

/// Sends a line until it is answered for good: its status and body.
async fn send(dispatch: &dyn Dispatch, line: &ClaimedLine) -> (u16, Vec<u8>) {
    let request_id = line_request_id(&line.batch, line.index);
    let mut tries = 0;
    loop {
        let mut request = Request::post(line.endpoint.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(line.body.clone()))
            .unwrap_or_default();
        let headers = request.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            headers.insert("x-request-id", value);
        }
        if line.endpoint == "/v1/messages" {
            headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        }
        request
            .extensions_mut()
            .insert(Delegated { key_id: Arc::from(line.owner.as_str()), entry: line_entry(&line.batch, line.index) });
        let response = dispatch.send(request).await;
        let status = response.status().as_u16();
        let wait = retry_after(&response);
        let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER).await.map(|b| b.to_vec()).unwrap_or_default();
        match wait {
            Some(wait) if matches!(status, 429 | 503) && tries < RETRIES => {
                tries += 1;
                tokio::time::sleep(wait.min(LONGEST_WAIT)).await;
            }
            _ => return (status, body),
        }
    }
}

/// A refusal's `Retry-After`, in seconds.
fn retry_after(response: &Response<Body>) -> Option<Duration> {
    let seconds: u64 = response.headers().get(http::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.max(1)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

    use switchyard_store::{BatchJob, QueuedLine};
    use tokio::sync::mpsc;

    use super::*;

    /// Answers every line at once, and says it was asked.
    struct Answer(mpsc::UnboundedSender<()>);

    impl Dispatch for Answer {
        fn send(&self, _request: Request<Body>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send + '_>> {
            let _ = self.0.send(());
            Box::pin(async { Response::new(Body::from("{}")) })
        }
    }

    /// Starts a worker over its own stores; what its dispatch is asked.
    async fn worker(kept: &KeptStores) -> mpsc::UnboundedReceiver<()> {
        let config = Batches { concurrency: 2, lease: Duration::from_secs(60), max_lines: 10 };
        let (asked, asks) = mpsc::unbounded_channel();
        spawn(kept.clone(), config, Arc::new(Answer(asked)));
        // Until it has found the queue empty and waits to be woken.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        asks
    }

    /// A batch queued on one gateway wakes that gateway's worker at once,
    /// though another gateway's worker in the same process was waiting
    /// first (time is paused: a worker that is not woken runs only when its
    /// idle wait ends).
    #[tokio::test(start_paused = true)]
    async fn a_queued_batch_wakes_its_own_worker_at_once() {
        let other = KeptStores::in_process();
        let _other_asks = worker(&other).await;
        let mine = KeptStores::in_process();
        let mut asks = worker(&mine).await;
        let queued = tokio::time::Instant::now();
        let now = now_ms();
        let job = BatchJob {
            id: "batch_wake".into(),
            owner: "k1".into(),
            shape: "openai".into(),
            endpoint: "/v1/chat/completions".into(),
            created_ms: now,
            expires_ms: now + 3_600_000,
            cancelled_ms: None,
            total: 1,
            meta: "{}".into(),
        };
        let line = QueuedLine { index: 0, custom_id: "a".into(), body: b"{}".to_vec() };
        mine.batches.submit_batch(job, vec![line]).await.unwrap();
        mine.wake.notify_one();
        asks.recv().await.unwrap();
        assert!(queued.elapsed() < IDLE, "woken at once, not after the idle wait ({:?})", queued.elapsed());
    }
}
