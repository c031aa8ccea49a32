//! The batch worker: each instance claims lines from the store's queue
//! (at most `batches.concurrency` at once; owners take turns, so no
//! tenant's batch waits behind another's), runs each through the data
//! router as the key that submitted it, and records its outcome. Leases
//! are renewed while lines run; an instance that dies stops renewing, and
//! its lines are claimed again once their lease ends.
//!
//! A line is sent once per claim and its slot freed as soon as it is
//! answered: a refusal that asks to wait (429 or 503 with `Retry-After`)
//! gives the line back to the queue with a not-before time (its owner
//! rests with it), to run again until its batch's window ends; a spent
//! budget (the caller protocol's quota error) is recorded at once, as any
//! other answer.
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
use switchyard_ir::{ErrorKind, Protocol};
use switchyard_state::kept::{Delegated, KeptStores};
use switchyard_state::CodecFor;
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

/// The longest a line refused for a moment waits in the queue before it is
/// tried again (a longer `Retry-After` is cut to it).
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Starts the worker; it runs for the life of the process. `codecs` read
/// a refusal in its line's protocol.
pub fn spawn(kept: KeptStores, config: Batches, codecs: CodecFor, dispatch: Arc<dyn Dispatch>) {
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX);
    {
        let kept = kept.clone();
        switchyard_tasks::service("batch lease renewal", async move {
            let mut every = tokio::time::interval(config.lease / 3);
            loop {
                every.tick().await;
                if let Err(err) = kept.batches.renew_lines(kept.worker.to_string(), now_ms(), lease_ms).await {
                    tracing::warn!(error = %err, "batch leases could not be renewed");
                }
            }
        });
    }
    switchyard_tasks::service("batch worker", async move {
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
                switchyard_tasks::work(async move {
                    run(&kept, codecs, dispatch.as_ref(), line).await;
                    drop(permit);
                    kept.wake.notify_one();
                });
            }
        }
    });
}

/// Runs one line and records what it came to, or gives it back to wait.
async fn run(kept: &KeptStores, codecs: CodecFor, dispatch: &dyn Dispatch, line: ClaimedLine) {
    let (status, wait, body) = send(dispatch, &line).await;
    let kind =
        (!(200..300).contains(&status)).then(|| codecs(protocol_of(&line.endpoint)).extract_error(status, &body).kind);
    let worker = kept.worker.to_string();
    match judge(status, kind, wait) {
        Judged::Later(wait) => {
            let not_before = now_ms().saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
            match kept.batches.release_line(worker, line.batch.clone(), line.index, line.attempt, not_before).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(batch = %line.batch, line = line.index, "a batch line was given back after its claim passed on")
                }
                Err(err) => {
                    tracing::warn!(batch = %line.batch, line = line.index, error = %err, "a batch line could not be given back; it runs again once its lease ends")
                }
            }
        }
        Judged::Done(state) => {
            let outcome =
                LineOutcome { index: line.index, custom_id: line.custom_id, state, status, body, done_ms: now_ms() };
            match kept.batches.finish_line(worker, line.batch.clone(), line.attempt, outcome).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(batch = %line.batch, line = line.index, "a batch line finished after its claim passed on")
                }
                Err(err) => {
                    tracing::warn!(batch = %line.batch, line = line.index, error = %err, "a batch line's outcome could not be stored; it runs again")
                }
            }
        }
    }
}

/// What a line's answer comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judged {
    /// Recorded as it is.
    Done(LineState),
    /// Given back to the queue, to be tried again after this wait.
    Later(Duration),
}

/// A line's answer judged: a 2xx succeeded; a refusal that asks to wait
/// (429 or 503 with `Retry-After`) waits in the queue, unless it is a spent
/// budget (`kind` is the quota error), which no wait within the batch's
/// window would change; anything else failed.
fn judge(status: u16, kind: Option<ErrorKind>, wait: Option<Duration>) -> Judged {
    if (200..300).contains(&status) {
        return Judged::Done(LineState::Succeeded);
    }
    match wait {
        Some(wait) if matches!(status, 429 | 503) && kind != Some(ErrorKind::QuotaExceeded) => {
            Judged::Later(wait.min(LONGEST_WAIT))
        }
        _ => Judged::Done(LineState::Failed),
    }
}

/// The protocol a line's endpoint speaks.
fn protocol_of(endpoint: &str) -> Protocol {
    match endpoint {
        "/v1/messages" => Protocol::Anthropic,
        "/v1/responses" => Protocol::Responses,
        _ => Protocol::OpenAi,
    }
}

/// Sends a line once: its answer's status, `Retry-After` and body.
async fn send(dispatch: &dyn Dispatch, line: &ClaimedLine) -> (u16, Option<Duration>, Vec<u8>) {
    let request_id = line_request_id(&line.batch, line.index);
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
        .insert(Delegated { owner: Arc::from(line.owner.as_str()), entry: line_entry(&line.batch, line.index) });
    let response = dispatch.send(request).await;
    let status = response.status().as_u16();
    let wait = retry_after(&response);
    let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER).await.map(|b| b.to_vec()).unwrap_or_default();
    (status, wait, body)
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
        spawn(kept.clone(), config, switchyard_protocol::codec, Arc::new(Answer(asked)));
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

    #[test]
    fn a_refusal_that_asks_to_wait_waits_in_the_queue_and_a_spent_budget_does_not() {
        let after = Some(Duration::from_secs(7));
        assert_eq!(judge(200, None, None), Judged::Done(LineState::Succeeded));
        assert_eq!(judge(429, Some(ErrorKind::RateLimit), after), Judged::Later(Duration::from_secs(7)));
        assert_eq!(judge(503, Some(ErrorKind::Unavailable), after), Judged::Later(Duration::from_secs(7)));
        let long = Some(Duration::from_secs(86_400));
        assert_eq!(judge(429, Some(ErrorKind::RateLimit), long), Judged::Later(LONGEST_WAIT));
        assert_eq!(judge(429, Some(ErrorKind::QuotaExceeded), after), Judged::Done(LineState::Failed));
        assert_eq!(judge(429, Some(ErrorKind::RateLimit), None), Judged::Done(LineState::Failed));
        assert_eq!(judge(400, Some(ErrorKind::InvalidRequest), after), Judged::Done(LineState::Failed));
        assert_eq!(
            (protocol_of("/v1/messages"), protocol_of("/v1/embeddings")),
            (Protocol::Anthropic, Protocol::OpenAi)
        );
    }

    /// Answers by the line's text: `limited` a rate limit (wait 30 s),
    /// `broke` OpenAI's quota error (wait an hour), anything else at once;
    /// says when each was asked.
    struct Tenants(mpsc::UnboundedSender<(String, tokio::time::Instant)>);

    impl Dispatch for Tenants {
        fn send(&self, request: Request<Body>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send + '_>> {
            Box::pin(async move {
                let body = axum::body::to_bytes(request.into_body(), 1 << 20).await.unwrap();
                let text = String::from_utf8_lossy(&body).into_owned();
                let _ = self.0.send((text.clone(), tokio::time::Instant::now()));
                let refusal = |wait: &str, kind: &str| {
                    let body = format!(r#"{{"error":{{"message":"no","type":"{kind}","code":"{kind}"}}}}"#);
                    Response::builder().status(429).header("retry-after", wait).body(Body::from(body)).unwrap()
                };
                if text.contains("limited") {
                    refusal("30", "rate_limit_exceeded")
                } else if text.contains("broke") {
                    refusal("3600", "insufficient_quota")
                } else {
                    Response::new(Body::from("{}"))
                }
            })
        }
    }

    fn job(id: &str, owner: &str, at: i64) -> BatchJob {
        BatchJob {
            id: id.into(),
            owner: owner.into(),
            shape: "openai".into(),
            endpoint: "/v1/chat/completions".into(),
            created_ms: at,
            expires_ms: at + 3_600_000,
            cancelled_ms: None,
            total: 0,
            meta: "{}".into(),
        }
    }

    fn lines(text: &str, n: u32) -> Vec<QueuedLine> {
        (0..n)
            .map(|i| QueuedLine {
                index: i,
                custom_id: format!("c{i}"),
                body: format!("{{\"t\":\"{text}\"}}").into_bytes(),
            })
            .collect()
    }

    /// One slot, and a key whose lines are refused first in the queue: a
    /// rate limit's line goes back to the queue with its wait, a spent
    /// budget's lines are recorded at once, and another key's one-line
    /// batch runs at once, not after their waits (time is paused: a wait
    /// held in a slot would show in the time the batch ran at).
    #[tokio::test(start_paused = true)]
    async fn a_refused_line_never_holds_its_slot_and_other_keys_run_meanwhile() {
        let kept = KeptStores::in_process();
        let now = now_ms();
        kept.batches.submit_batch(job("limited", "k1", now - 3), lines("limited", 3)).await.unwrap();
        kept.batches.submit_batch(job("broke", "k2", now - 2), lines("broke", 3)).await.unwrap();
        kept.batches.submit_batch(job("small", "k3", now - 1), lines("small", 1)).await.unwrap();
        let config = Batches { concurrency: 1, lease: Duration::from_secs(60), max_lines: 10 };
        let (asked, mut asks) = mpsc::unbounded_channel();
        let start = tokio::time::Instant::now();
        spawn(kept.clone(), config, switchyard_protocol::codec, Arc::new(Tenants(asked)));
        let mut seen = Vec::new();
        while !seen.iter().any(|(text, _): &(String, _)| text.contains("small")) {
            seen.push(asks.recv().await.unwrap());
        }
        let small_at = seen.last().unwrap().1 - start;
        assert!(small_at < Duration::from_secs(2), "the other key's line waited {small_at:?}: {seen:?}");
        // The spent budget's lines are all recorded, failed, within moments.
        for _ in 0..100 {
            let state = kept.batches.batch("k2".into(), "broke".into()).await.unwrap().unwrap();
            if state.counts.done() {
                assert_eq!(state.counts.failed, 3, "{state:?}");
                assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
                break;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The rate-limited line is back in the queue with its wait (the
        // store's clock, not this test's, tells when it runs again), and
        // its key's other lines rest with it: none failed, none running.
        let limited = kept.batches.batch("k1".into(), "limited".into()).await.unwrap().unwrap();
        assert_eq!((limited.counts.pending, limited.counts.failed, limited.counts.running), (3, 0, 0), "{limited:?}");
        assert_eq!(seen.iter().filter(|(text, _)| text.contains("limited")).count(), 1, "{seen:?}");
    }
}
