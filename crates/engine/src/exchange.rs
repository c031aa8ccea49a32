//! One request's exchange (Pingora's `ProxyHttp::CTX`): owned by the
//! request from the moment the engine takes it to its settlement. It holds
//! the call as the ingress framed it, the record (settled exactly once
//! however the request ends: answered, refused, abandoned by its caller, a
//! filter that panicked, a shutdown — the record's `Drop` settles what was
//! not), the pool, how the reply is carried ([`Shape`], decided once before
//! routing), the call's IR (read at most once, by whichever step needs it
//! first) and the request's filters. A stream hands the whole exchange to
//! the body that relays it; nothing passes it by `Option`.

use bytes::Bytes;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Protocol, Request, StreamEvent};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use crate::env::Env;
use crate::filter::{Filters, Flow, Marks, ReplyCx, RequestCx};
use crate::render::Whole;
use crate::settle::Record;

/// A request from the engine's first step to its settlement.
pub(crate) struct Exchange {
    /// What the ingress framed. Request filters may rewrite its body;
    /// nothing else changes it.
    pub(crate) call: Call,
    /// What the request did, settled once.
    pub(crate) record: Box<Record>,
    /// The pool the call named.
    pub(crate) pool: usize,
    /// How its reply is carried.
    pub(crate) shape: Shape,
    /// The call's IR, once read.
    ir: Option<Request>,
    /// Its filters, outermost first.
    pub(crate) filters: Filters,
    /// What its filters tell each other.
    pub(crate) marks: Marks,
}

/// How a request's reply is carried, decided once before routing from the
/// call, its pool and whether it is metered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The request is metered and its stream would not carry usage if
    /// passed through, and its protocol cannot ask for usage and hide it
    /// again: it is translated even to a lane of the same protocol.
    pub(crate) meter_stream: bool,
    /// The request is metered and its stream would not carry usage: a
    /// same-protocol lane is asked for usage, and the caller's stream has
    /// it taken out again (`Codec::request_stream_usage`).
    pub(crate) hide_usage: bool,
    /// The pool carries a stream that breaks after its first content on to
    /// another lane (`failover.stream_failure: continue`): the stream is
    /// decoded and written again even on a same-protocol hop.
    pub(crate) continue_stream: bool,
}

impl Shape {
    /// The shape of `call`'s reply in `pool`.
    pub(crate) fn of(gateway: &Gateway, call: &Call, pool: usize) -> Shape {
        let chat_stream = call.stream && call.operation == Operation::Chat;
        let mut shape = Shape {
            continue_stream: chat_stream && gateway.pools[pool].failover.continuations > 0,
            ..Shape::default()
        };
        // A metered stream must carry usage. One that would not (an OpenAI
        // caller that did not ask for it) asks the upstream for it and hides
        // it from the caller again; a protocol that cannot is translated.
        let metered = gateway.governance.as_ref().is_some_and(|g| g.ledger.is_some());
        let codec = gateway.codec_for(call.operation, call.ingress);
        if metered && call.stream && !codec.stream_reports_usage(&call.body) {
            shape.hide_usage = codec.stream_usage_filter().is_some();
            shape.meter_stream = !shape.hide_usage;
        }
        shape
    }
}

impl Exchange {
    /// The exchange of `call` in `pool`, with no filters yet.
    pub(crate) fn new(call: Call, record: Box<Record>, pool: usize) -> Exchange {
        Exchange {
            call,
            record,
            pool,
            shape: Shape::default(),
            ir: None,
            filters: Filters::default(),
            marks: Marks::default(),
        }
    }

    /// Splits the exchange into the call (read only) and what the attempt
    /// stage writes: the record, the IR cache and the filters.
    pub(crate) fn split(&mut self) -> (&Call, Progress<'_>) {
        let progress =
            Progress { record: &mut self.record, ir: &mut self.ir, shape: self.shape, filters: &mut self.filters };
        (&self.call, progress)
    }

    /// The call (to rewrite) and the IR cache, for the plan stage (a
    /// routing hook's rewrite replaces the body and drops the IR).
    pub(crate) fn plan_parts(&mut self) -> (&mut Call, &mut Option<Request>) {
        (&mut self.call, &mut self.ir)
    }

    /// Runs the request filters.
    pub(crate) async fn request_filters(&mut self, gateway: &Gateway) -> Flow {
        let Exchange { call, record, filters, marks, .. } = self;
        let mut cx = RequestCx { env: Env::of(gateway), call, record, marks };
        filters.request(&mut cx).await
    }

    /// A stream's events through the filters.
    pub(crate) fn filter_events(&mut self, env: Env<'_>, events: &mut Vec<StreamEvent>) -> Result<(), ErrorInfo> {
        let Exchange { call, record, filters, .. } = self;
        filters.events(events, &mut ReplyCx { env, call, record, part: switchyard_ir::Usage::default() })
    }

    /// A whole reply through the filters.
    pub(crate) fn filter_whole(&mut self, env: Env<'_>, whole: &mut Whole) -> Result<(), ErrorInfo> {
        let Exchange { call, record, filters, .. } = self;
        filters.whole(whole, &mut ReplyCx { env, call, record, part: switchyard_ir::Usage::default() })
    }

    /// Lets go of what only the request needed (its body and headers),
    /// once a stream's relay holds the exchange for the stream's life.
    pub(crate) fn release_request(&mut self) {
        self.call.body = Bytes::new();
        self.call.headers = http::HeaderMap::new();
        self.ir = None;
    }
}

/// What the attempt stage writes while it reads the call: the record, the
/// IR cache and the filters.
pub(crate) struct Progress<'a> {
    pub(crate) record: &'a mut Record,
    ir: &'a mut Option<Request>,
    /// How the reply is carried.
    pub(crate) shape: Shape,
    pub(crate) filters: &'a mut Filters,
}

impl Progress<'_> {
    /// The call's IR, read from its body on first use.
    pub(crate) fn ir(&mut self, gateway: &Gateway, call: &Call) -> Result<&mut Request, ErrorInfo> {
        read_once(gateway, call, self.ir)
    }

    /// The filters learn the lane that serves (with the call's IR, when
    /// some step read it).
    pub(crate) fn serving(&mut self, serving: &crate::filter::Serving<'_>) {
        let serving = crate::filter::Serving { ir: self.ir.as_ref(), ..*serving };
        self.filters.serving(&serving);
    }

    /// True when the request body may go to a lane of `protocol` as it came.
    pub(crate) fn sends_as_came_to(&self, call: &Call, protocol: Protocol) -> bool {
        protocol == call.ingress && !self.shape.meter_stream && !self.shape.continue_stream
    }

    /// True when, besides, the reply passes back as it came.
    pub(crate) fn passes_through_to(&self, call: &Call, protocol: Protocol) -> bool {
        self.sends_as_came_to(call, protocol) && !(call.stream && self.filters.reads_events())
    }
}

/// The call's IR, read from its body into `slot` on first use.
pub(crate) fn read_once<'t>(
    gateway: &Gateway,
    call: &Call,
    slot: &'t mut Option<Request>,
) -> Result<&'t mut Request, ErrorInfo> {
    if slot.is_none() {
        let codec = gateway.codec_for(call.operation, call.ingress);
        let mut request = codec.read_request(&call.body).map_err(|err| err.to_error_info())?;
        codec.read_headers(&call.headers, &mut request);
        request.stream = call.stream;
        *slot = Some(request);
    }
    slot.as_mut().ok_or_else(|| ErrorInfo::new(ErrorKind::Internal, "request was not read"))
}
