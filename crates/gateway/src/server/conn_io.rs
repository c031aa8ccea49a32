//! A connection's socket with the deadlines HTTP servers need and hyper
//! does not keep on its own: headers that never finish, a connection idle
//! too long between requests, and a caller that stopped reading. Each
//! missed deadline fails the read or write with `TimedOut`, so hyper
//! closes the connection and drops what it served — the upstream stream,
//! its concurrency permit and its in-flight count with it.
//!
//! Whether a request is active is told by the listener's service
//! ([`ConnState::begin_request`] and the guard it returns); the socket only
//! measures time.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The deadlines of one connection.
#[derive(Debug, Clone, Copy)]
pub struct IoTimeouts {
    /// From the first byte of a request (or the accept) to the end of its headers.
    pub header_read: Duration,
    /// Idle between two requests.
    pub keepalive_idle: Duration,
    /// A write that makes no progress.
    pub write: Duration,
}

/// What a connection's socket and its requests share.
#[derive(Debug)]
pub struct ConnState {
    born: Instant,
    /// Requests (HTTP/2 streams) whose responses are not finished.
    active: AtomicUsize,
    /// When the last request finished, in ms since `born`.
    idle_since: AtomicU64,
    /// When bytes of a not-yet-complete request head arrived, in ms since
    /// `born`, plus one (0: none).
    head_since: AtomicU64,
    /// Request-body bytes held by this connection's requests.
    body_bytes: AtomicUsize,
    /// The most request-body bytes it may hold.
    max_body: usize,
    /// Upgraded to another protocol (a WebSocket): no read deadline from
    /// here on, the session keeps its own (the write stall still closes).
    upgraded: std::sync::atomic::AtomicBool,
}

impl ConnState {
    /// A new connection: its first request's headers are due within the header timeout.
    pub fn new(max_body: usize) -> Arc<ConnState> {
        Arc::new(ConnState {
            born: Instant::now(),
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(1),
            body_bytes: AtomicUsize::new(0),
            max_body,
            upgraded: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn millis(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    /// A request's head arrived: no read deadline until its response ends.
    pub fn begin_request(self: &Arc<ConnState>) -> ActiveRequest {
        self.active.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(0, Ordering::Relaxed);
        ActiveRequest { state: self.clone() }
    }

    /// The connection was upgraded to another protocol (a WebSocket).
    pub fn upgraded(&self) {
        self.upgraded.store(true, Ordering::Relaxed);
    }

    /// Reserves `bytes` of request body; `None` when the connection's
    /// budget would be exceeded. The reservation ends when the charge drops.
    pub fn charge_body(self: &Arc<ConnState>, bytes: usize) -> Option<BodyCharge> {
        let held = self.body_bytes.fetch_add(bytes, Ordering::Relaxed);
        if held.saturating_add(bytes) > self.max_body {
            self.body_bytes.fetch_sub(bytes, Ordering::Relaxed);
            return None;
        }
        Some(BodyCharge { state: self.clone(), bytes })
    }
}

/// A request in progress on a connection; dropping it (when the response
/// body is finished or abandoned) may start the connection's idle time.
#[derive(Debug)]
pub struct ActiveRequest {
    state: Arc<ConnState>,
}

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        let state = &self.state;
        if state.active.fetch_sub(1, Ordering::Relaxed) == 1 {
            state.idle_since.store(state.millis(), Ordering::Relaxed);
        }
    }
}

/// Request-body bytes reserved against a connection's budget.
#[derive(Debug)]
pub struct BodyCharge {
    state: Arc<ConnState>,
    bytes: usize,
}

impl BodyCharge {
    /// Grows the reservation by `bytes`; false when the budget would be exceeded.
    pub fn grow(&mut self, bytes: usize) -> bool {
        match self.state.charge_body(bytes) {
            Some(more) => {
                self.bytes += more.bytes;
                std::mem::forget(more);
                true
            }
            None => false,
        }
    }
}

impl Drop for BodyCharge {
    fn drop(&mut self) {
        self.state.body_bytes.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The socket with deadlines.
pub struct ConnIo<T> {
    inner: T,
    state: Arc<ConnState>,
    timeouts: IoTimeouts,
    /// Read deadline timer and the deadline it is set to.
    read_timer: Option<(Pin<Box<Sleep>>, Instant)>,
    /// Write stall timer, armed while a write cannot progress.
    write_timer: Option<Pin<Box<Sleep>>>,
    write_stalled: bool,
    /// Decided from the first bytes: HTTP/2 connections have no header
    /// deadline between streams (frames such as PINGs arrive while idle).
    http2: Option<bool>,
}

impl<T> ConnIo<T> {
    /// Wraps `inner` with `timeouts`, sharing `state` with the requests.
    pub fn new(inner: T, state: Arc<ConnState>, timeouts: IoTimeouts) -> ConnIo<T> {
        ConnIo { inner, state, timeouts, read_timer: None, write_timer: None, write_stalled: false, http2: None }
    }

    /// The deadline for the next read, when no request is active.
    fn read_deadline(&self) -> Option<Instant> {
        let state = &self.state;
        if state.active.load(Ordering::Relaxed) > 0 || state.upgraded.load(Ordering::Relaxed) {
            return None;
        }
        let since = |ms: u64| state.born + Duration::from_millis(ms);
        Some(match state.head_since.load(Ordering::Relaxed) {
            0 => since(state.idle_since.load(Ordering::Relaxed)) + self.timeouts.keepalive_idle,
            started => since(started - 1) + self.timeouts.header_read,
        })
    }

    fn wait_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(deadline) = self.read_deadline() else {
            return Poll::Pending;
        };
        let timer = match &mut self.read_timer {
            Some((timer, at)) => {
                if *at != deadline {
                    timer.as_mut().reset(deadline);
                    *at = deadline;
                }
                timer
            }
            None => &mut self.read_timer.insert((Box::pin(tokio::time::sleep_until(deadline)), deadline)).0,
        };
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "client idle or too slow"))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn stalled<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let deadline = Instant::now() + self.timeouts.write;
        let timer = match &mut self.write_timer {
            Some(timer) => {
                if !self.write_stalled {
                    timer.as_mut().reset(deadline);
                }
                timer
            }
            None => self.write_timer.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.write_stalled = true;
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "client stopped reading the response")))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn wrote<R>(&mut self, result: Poll<io::Result<R>>, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        match result {
            Poll::Ready(result) => {
                self.write_stalled = false;
                Poll::Ready(result)
            }
            Poll::Pending => self.stalled(cx),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ConnIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if !read.is_empty() && self.state.active.load(Ordering::Relaxed) == 0 {
                    let http2 = *self.http2.get_or_insert_with(|| read.starts_with(b"PRI * HTTP/2.0"));
                    let state = &self.state;
                    let now = state.millis();
                    if http2 {
                        state.idle_since.store(now, Ordering::Relaxed);
                    } else if state.head_since.load(Ordering::Relaxed) == 0 {
                        state.head_since.store(now + 1, Ordering::Relaxed);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => self.wait_read(cx),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ConnIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, data);
        self.wrote(result, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, data);
        self.wrote(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.wrote(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.wrote(result, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn timeouts() -> IoTimeouts {
        IoTimeouts {
            header_read: Duration::from_secs(10),
            keepalive_idle: Duration::from_secs(60),
            write: Duration::from_secs(30),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn headers_must_finish_in_time_and_idle_connections_close() {
        let (client, server) = tokio::io::duplex(1024);
        let state = ConnState::new(1 << 20);
        let mut io = ConnIo::new(server, state.clone(), timeouts());
        let mut client = client;
        client.write_all(b"GET / HT").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(io.read(&mut buf).await.unwrap(), 8);
        let started = Instant::now();
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10), "header deadline from the accept");

        // A finished request starts the keep-alive idle time instead.
        let state = ConnState::new(1 << 20);
        let (mut client, server) = tokio::io::duplex(1024);
        let mut io = ConnIo::new(server, state.clone(), timeouts());
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(io.read(&mut buf).await.unwrap() > 0);
        let request = state.begin_request();
        tokio::time::sleep(Duration::from_secs(300)).await;
        drop(request);
        let idle = Instant::now();
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(idle.elapsed(), Duration::from_secs(60), "no deadline while a request was active");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_cannot_progress_times_out() {
        let (client, server) = tokio::io::duplex(16);
        let state = ConnState::new(1 << 20);
        let mut io = ConnIo::new(server, state.clone(), timeouts());
        let _request = state.begin_request();
        let started = Instant::now();
        let err = io.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        drop(client);
    }

    #[test]
    fn body_charges_respect_the_connection_budget() {
        let state = ConnState::new(100);
        let mut first = state.charge_body(60).unwrap();
        assert!(state.charge_body(50).is_none());
        assert!(first.grow(40));
        assert!(!first.grow(1));
        drop(first);
        assert!(state.charge_body(100).is_some());
    }
}
