//! Filters: the concerns that act on a request and its reply, one file
//! each, in the order the chain's builder states ([`build`], in the manner
//! of Pingora's `HttpModules`). A request's chain is built once, after
//! admission, from the concerns that apply to it: a concern that does not
//! apply is not in the chain and costs nothing, and a chain of none
//! allocates nothing.
//!
//! Request hooks run in chain order. Reply hooks run in reverse: the
//! filter nearest the upstream sees the reply first. A filter that answers
//! a request in place of the upstream (the response cache's hit) sends its
//! answer back through the filters before it in the chain (the reply
//! guardrails), never through itself or those after it.
//!
//! What a filter may read and write is its hooks' arguments: the call (its
//! body only on the request side), the request's record, and its own state.
//! Filters never see each other; what one tells another goes through the
//! exchange's [`Marks`].

mod continuation;
mod guard;
mod identity;
mod metering;
mod receipt;
mod response_cache;
mod retention;
mod signatures;
#[cfg(test)]
mod stamp;
#[cfg(test)]
mod tests;
mod usage_mark;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::HeaderMap;
use switchyard_ir::{ErrorInfo, Response, StreamEvent};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use crate::env::Env;
use crate::exchange::Shape;
use crate::render::Whole;
use crate::settle::Record;

pub(crate) use continuation::{add_usage, Switched};

/// A filter's asynchronous work.
pub(crate) type FilterFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a request hook decides.
pub(crate) enum Flow {
    /// The next filter, then routing.
    Continue,
    /// The request ends with this refusal, in the caller's protocol.
    Refuse(Refusal),
    /// The filter answers in place of the upstream.
    Answer(StoodIn),
}

/// A refusal a filter makes.
pub(crate) struct Refusal {
    pub(crate) info: ErrorInfo,
    /// The refusal is of the caller's own conduct (it counts toward the
    /// key's suspension).
    pub(crate) own: bool,
}

/// An answer a filter gives in place of the upstream: its head's headers
/// and its body, in the caller's protocol (a whole reply's bytes) or as
/// events the caller's encoder writes (a stream).
pub(crate) struct StoodIn {
    pub(crate) headers: HeaderMap,
    pub(crate) reply: StoodInReply,
}

/// The body of an answer given in place of the upstream.
pub(crate) enum StoodInReply {
    /// A whole reply, written for the caller.
    Whole(Bytes),
    /// A stream's events, in order.
    Events(Vec<StreamEvent>),
}

/// What filters tell each other through the exchange.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Marks {
    /// The request's values were swapped for reversible placeholders: its
    /// reply is for it alone (the response cache leaves it be).
    pub(crate) pseudonymised: bool,
}

/// What a request hook reads and writes.
pub(crate) struct RequestCx<'a> {
    pub(crate) env: Env<'a>,
    pub(crate) call: &'a mut Call,
    pub(crate) record: &'a mut Record,
    pub(crate) marks: &'a mut Marks,
}

/// What a reply hook reads and writes.
pub(crate) struct ReplyCx<'a> {
    pub(crate) env: Env<'a>,
    pub(crate) call: &'a Call,
    pub(crate) record: &'a mut Record,
    /// A stream's usage so far from the lane serving it now.
    pub(crate) part: switchyard_ir::Usage,
}

/// The lane that serves a request, told once its answer is taken.
pub(crate) struct Serving<'a> {
    pub(crate) call: &'a Call,
    /// The call's IR, when some step read it.
    pub(crate) ir: Option<&'a switchyard_ir::Request>,
    /// The plan's candidates in try order.
    pub(crate) slots: &'a [switchyard_state::call::Slot],
    /// The serving lane's index.
    pub(crate) lane: usize,
    /// The upstream's answer head, when a lane answered.
    pub(crate) upstream: Option<&'a HeaderMap>,
}

/// How a stream ended, for the end hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It ended whole.
    Whole,
    /// It was cut, failed or refused.
    Damaged,
    /// Its caller went away before it ended (an end hook's future is not
    /// awaited then).
    Abandoned,
}

/// One concern of the request path. Every hook has a default that does
/// nothing, so a filter implements only the hooks it joins.
pub(crate) trait Filter: Send {
    /// Its name, for logs and the chain's order test.
    fn name(&self) -> &'static str;

    /// The request, after admission and before routing: rewrite the body,
    /// refuse, or answer in place of the upstream.
    fn on_request<'a>(&'a mut self, cx: &'a mut RequestCx<'_>) -> Option<FilterFuture<'a, Flow>> {
        let _ = cx;
        None
    }

    /// Once, before the first upstream send or an answer given in its
    /// place: what must be known by then (a moderator's verdict).
    fn before_send<'a>(
        &'a mut self,
        call: &'a Call,
        record: &'a mut Record,
    ) -> Option<FilterFuture<'a, Result<(), ErrorInfo>>> {
        let _ = (call, record);
        None
    }

    /// The lane whose answer is taken (a whole reply's or a stream's).
    fn on_serving(&mut self, serving: &Serving<'_>) {
        let _ = serving;
    }

    /// The filter reads a stream's events, so the stream is decoded and
    /// written again even on a same-protocol hop.
    fn reads_events(&self) -> bool {
        false
    }

    /// The answer's head, whatever produced it (a refusal's too).
    fn on_head(&mut self, headers: &mut HeaderMap) {
        let _ = headers;
    }

    /// A passthrough stream's bytes, before they leave.
    fn on_bytes(&mut self, bytes: Bytes) -> Bytes {
        bytes
    }

    /// What a passthrough stream's filter still holds when it ends.
    fn finish_bytes(&mut self) -> Bytes {
        Bytes::new()
    }

    /// A stream's decoded events before they are written for the caller.
    /// `Err` ends the stream with the caller's in-stream refusal.
    fn on_events(&mut self, events: &mut Vec<StreamEvent>, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        let _ = (events, cx);
        Ok(())
    }

    /// The events the caller is sent, after every filter's `on_events`.
    fn on_delivered(&mut self, events: &[StreamEvent]) {
        let _ = events;
    }

    /// The bytes the caller is sent.
    fn on_sent(&mut self, bytes: &[u8]) {
        let _ = bytes;
    }

    /// A translated whole reply, read into the IR before it is written for
    /// the caller (`lane`: the protocol that answered).
    fn on_reply<'a>(
        &'a mut self,
        reply: &'a mut Response,
        lane: switchyard_ir::Protocol,
        cx: &mut ReplyCx<'_>,
    ) -> Option<FilterFuture<'a, ()>> {
        let _ = (reply, lane, cx);
        None
    }

    /// A whole reply as the caller gets it. `Err` answers the caller's
    /// refusal instead (the request is still billed).
    fn on_whole(&mut self, whole: &mut Whole, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        let _ = (whole, cx);
        Ok(())
    }

    /// A stream's end, before its last bytes leave.
    fn on_end<'a>(&'a mut self, ended: Ended, cx: &mut ReplyCx<'_>) -> Option<FilterFuture<'a, ()>> {
        let _ = (ended, cx);
        None
    }

    /// Text is held back now (not yet sent to the caller).
    fn withholds(&self) -> bool {
        false
    }

    /// The stream broke mid-answer: the filter that carries streams on
    /// asks another lane (`withheld`: a filter holds text back that never
    /// reached the caller).
    fn on_break<'a>(&'a mut self, withheld: bool) -> Option<FilterFuture<'a, Option<Switched>>> {
        let _ = withheld;
        None
    }

    /// The stream goes on on another lane (`part`: what the broken part
    /// used, as billed): what a filter holds of its text was never sent,
    /// and the next lane writes it again.
    fn on_restart(&mut self, part: &switchyard_ir::Usage) {
        let _ = part;
    }
}

/// A request's filters, in chain order.
#[derive(Default)]
pub(crate) struct Filters {
    chain: Vec<Box<dyn Filter>>,
    /// Reply hooks run for the filters before this one (all, unless one
    /// answered in place of the upstream).
    reach: usize,
    /// `before_send` ran.
    sent: bool,
}

/// Builds a chain in the order its lines state.
#[derive(Default)]
pub(crate) struct Builder {
    chain: Vec<Box<dyn Filter>>,
}

impl Builder {
    /// Adds `filter` after those added before, when it applies.
    pub(crate) fn with(mut self, filter: Option<impl Filter + 'static>) -> Builder {
        if let Some(filter) = filter {
            self.chain.push(Box::new(filter));
        }
        self
    }

    pub(crate) fn build(self) -> Filters {
        let reach = self.chain.len();
        Filters { chain: self.chain, reach, sent: false }
    }
}

/// The chain of `call`'s filters in `pool`, outermost first. This list is
/// the order: a new concern is a file in this folder and a line here.
pub(crate) fn build(gateway: &std::sync::Arc<Gateway>, call: &Call, pool: usize, shape: &Shape) -> Filters {
    let chain = Filters::builder()
        // Writes what every answer carries that a protocol may lack.
        .with(identity::Identity::of(call, shape))
        // Notes what the upstream says of itself, for the request's receipt.
        .with(receipt::Notes::of(gateway))
        // Says whether the answer's usage is exact or the gateway's estimate.
        .with(usage_mark::MarkUsage::of(call))
        // Keeps the text its group's retention keeps (what the caller got).
        .with(retention::Retention::of(gateway))
        // Screens the request, and the reply as the caller would get it.
        .with(guard::Guard::of(gateway, call, pool))
        // Keeps a Gemini lane's call signatures for the caller's next turn.
        .with(signatures::Signatures::of(gateway, call, pool))
        // Answers from what it kept; keeps what the upstream answered.
        .with(response_cache::ResponseCache::of(gateway, call, pool))
        // Takes out of a passthrough stream what only metering asked for.
        .with(metering::HideUsage::of(gateway, call, shape))
        // Carries a stream that breaks mid-answer on to another lane.
        .with(continuation::Carry::of(gateway, call, shape));
    // A test's trivial filter: one file, and this line.
    #[cfg(test)]
    let chain = chain.with(stamp::Stamp::of(call));
    chain.build()
}

impl Filters {
    pub(crate) fn builder() -> Builder {
        Builder::default()
    }

    /// Whether a stream must be decoded (a filter reads its events).
    pub(crate) fn reads_events(&self) -> bool {
        self.reached().iter().any(|f| f.reads_events())
    }

    fn reached(&self) -> &[Box<dyn Filter>] {
        &self.chain[..self.reach]
    }

    fn reached_mut(&mut self) -> &mut [Box<dyn Filter>] {
        &mut self.chain[..self.reach]
    }

    /// Runs the request hooks in order; the first that does not continue
    /// ends the walk (an answer then passes back through the filters
    /// before it only).
    pub(crate) async fn request(&mut self, cx: &mut RequestCx<'_>) -> Flow {
        for at in 0..self.chain.len() {
            let Some(hook) = self.chain[at].on_request(cx) else { continue };
            match hook.await {
                Flow::Continue => {}
                Flow::Answer(answer) => {
                    tracing::debug!(filter = self.chain[at].name(), "a filter answered in place of the upstream");
                    self.reach = at;
                    return Flow::Answer(answer);
                }
                refused @ Flow::Refuse(_) => {
                    tracing::debug!(filter = self.chain[at].name(), "a filter refused the request");
                    return refused;
                }
            }
        }
        Flow::Continue
    }

    /// Runs every `before_send` once (in order; the first refusal wins,
    /// and the rest still run, so each records what it learned).
    pub(crate) async fn before_send(&mut self, call: &Call, record: &mut Record) -> Result<(), ErrorInfo> {
        if std::mem::replace(&mut self.sent, true) {
            return Ok(());
        }
        let mut outcome = Ok(());
        for filter in &mut self.chain {
            if let Some(hook) = filter.before_send(call, record) {
                if let Err(info) = hook.await {
                    outcome = outcome.and(Err(info));
                }
            }
        }
        outcome
    }

    /// Every reached filter learns the lane that serves.
    pub(crate) fn serving(&mut self, serving: &Serving<'_>) {
        for filter in self.reached_mut() {
            filter.on_serving(serving);
        }
    }

    /// Every reached filter sees the answer's head.
    pub(crate) fn head(&mut self, headers: &mut HeaderMap) {
        for filter in self.reached_mut().iter_mut().rev() {
            filter.on_head(headers);
        }
    }

    /// A passthrough stream's bytes through the reached filters.
    pub(crate) fn bytes(&mut self, mut bytes: Bytes) -> Bytes {
        for filter in self.reached_mut().iter_mut().rev() {
            bytes = filter.on_bytes(bytes);
        }
        bytes
    }

    /// A stream's events through the reached filters, innermost first; a
    /// refusal stops the walk.
    pub(crate) fn events(&mut self, events: &mut Vec<StreamEvent>, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        for filter in self.reached_mut().iter_mut().rev() {
            filter.on_events(events, cx)?;
        }
        for filter in self.reached_mut().iter_mut().rev() {
            filter.on_delivered(events);
        }
        Ok(())
    }

    /// What the passthrough filters still hold when the stream ends.
    pub(crate) fn finish_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for filter in self.reached_mut().iter_mut().rev() {
            out.extend_from_slice(&filter.finish_bytes());
        }
        out
    }

    /// The bytes the caller is sent.
    pub(crate) fn sent(&mut self, bytes: &[u8]) {
        for filter in self.reached_mut().iter_mut().rev() {
            filter.on_sent(bytes);
        }
    }

    /// A translated whole reply through the reached filters.
    pub(crate) async fn reply(&mut self, reply: &mut Response, lane: switchyard_ir::Protocol, cx: &mut ReplyCx<'_>) {
        for filter in self.reached_mut().iter_mut().rev() {
            if let Some(hook) = filter.on_reply(reply, lane, cx) {
                hook.await;
            }
        }
    }

    /// A whole reply through the reached filters; a refusal stops the walk.
    pub(crate) fn whole(&mut self, whole: &mut Whole, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        for filter in self.reached_mut().iter_mut().rev() {
            filter.on_whole(whole, cx)?;
        }
        Ok(())
    }

    /// A stream's end through the reached filters: their end hooks run
    /// now, and what they await is given back, to be awaited once the
    /// record has settled.
    pub(crate) fn end(&mut self, ended: Ended, cx: &mut ReplyCx<'_>) -> Vec<FilterFuture<'_, ()>> {
        let mut awaited = Vec::new();
        for filter in self.reached_mut().iter_mut().rev() {
            if let Some(hook) = filter.on_end(ended, cx) {
                awaited.push(hook);
            }
        }
        awaited
    }

    /// A stream its caller left: the end hooks, their futures dropped.
    pub(crate) fn abandon(&mut self, cx: &mut ReplyCx<'_>) {
        for filter in self.reached_mut().iter_mut().rev() {
            drop(filter.on_end(Ended::Abandoned, cx));
        }
    }

    /// A filter holds text back.
    pub(crate) fn withholds(&self) -> bool {
        self.reached().iter().any(|f| f.withholds())
    }

    /// The stream broke: the lane the first filter that carries streams
    /// on found, if any.
    pub(crate) async fn carry_on(&mut self) -> Option<Switched> {
        let withheld = self.withholds();
        for filter in self.reached_mut().iter_mut().rev() {
            if let Some(hook) = filter.on_break(withheld) {
                return hook.await;
            }
        }
        None
    }

    /// The stream goes on on another lane, after a part that used `part`.
    pub(crate) fn restart(&mut self, part: &switchyard_ir::Usage) {
        for filter in self.reached_mut() {
            filter.on_restart(part);
        }
    }

    /// The chain's names in order (tests and debugging).
    #[cfg(test)]
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.chain.iter().map(|f| f.name()).collect()
    }
}
