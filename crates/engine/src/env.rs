//! What a filter's hooks read of the running gateway, and nothing more:
//! the codecs, the lanes (their names and prices), the metrics when they
//! are on, and the clock. Filters take their own handles (a screen, a
//! store) when they are built; the hooks take an [`Env`]. A test builds
//! one from a gateway made in-process (`crate::testing`: no listener) and
//! stops its clock with [`Env::at`].

use switchyard_codec::Codec;
use switchyard_ir::Protocol;
use switchyard_state::{CodecFor, Gateway, Lane};
use switchyard_telemetry::metrics::Metrics;

/// The narrow view of the gateway a hook reads.
#[derive(Clone, Copy)]
pub(crate) struct Env<'a> {
    codecs: CodecFor,
    lanes: &'a [Lane],
    metrics: Option<&'a Metrics>,
    /// Milliseconds since the Unix epoch.
    now_ms: fn() -> u64,
}

impl<'a> Env<'a> {
    /// The view of `gateway`.
    pub(crate) fn of(gateway: &'a Gateway) -> Env<'a> {
        Env {
            codecs: gateway.codecs,
            lanes: &gateway.lanes,
            metrics: gateway.metrics(),
            now_ms: switchyard_state::clock::now_ms,
        }
    }

    /// The codec of `protocol`.
    /// The codec of `operation`'s bodies in `protocol` (`Gateway::codec_for`).
    pub(crate) fn codec_for(&self, operation: switchyard_ir::Operation, protocol: Protocol) -> &'static dyn Codec {
        switchyard_state::codec_for(self.codecs, operation, protocol)
    }

    /// Lane `index`, when it exists.
    pub(crate) fn lane(&self, index: usize) -> Option<&'a Lane> {
        self.lanes.get(index)
    }

    /// The request path's counters, when metrics are on.
    pub(crate) fn metrics(&self) -> Option<&'a Metrics> {
        self.metrics
    }

    /// Now, in milliseconds since the Unix epoch.
    pub(crate) fn now_ms(&self) -> u64 {
        (self.now_ms)()
    }

    /// The same view with the clock stopped at `now_ms` (tests).
    #[cfg(test)]
    pub(crate) fn at(mut self, now_ms: fn() -> u64) -> Env<'a> {
        self.now_ms = now_ms;
        self
    }
}
