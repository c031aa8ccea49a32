//! Metering a passthrough stream whose caller did not ask for usage: the
//! lane was asked for it (`Codec::request_stream_usage`, decided in
//! `exchange::Shape`), the usage tap reads it, and this filter takes it
//! out of the caller's bytes again (`Codec::stream_usage_filter`), so the
//! caller gets the stream it asked for and the ledger gets the usage.
//!
//! Reads and writes: a passthrough stream's bytes.

use bytes::Bytes;
use switchyard_codec::hide::EventFilter;
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use super::Filter;
use crate::exchange::Shape;

/// Usage hidden from a passthrough stream.
pub(crate) struct HideUsage(EventFilter);

impl HideUsage {
    /// Hiding, when the lane is asked for usage the caller did not ask for.
    pub(crate) fn of(gateway: &Gateway, call: &Call, shape: &Shape) -> Option<HideUsage> {
        if !shape.hide_usage {
            return None;
        }
        gateway.codec_for(call.operation, call.ingress).stream_usage_filter().map(HideUsage)
    }
}

impl Filter for HideUsage {
    fn name(&self) -> &'static str {
        "hide_usage"
    }

    fn on_bytes(&mut self, bytes: Bytes) -> Bytes {
        self.0.filter(bytes)
    }

    fn finish_bytes(&mut self) -> Bytes {
        self.0.finish()
    }
}
