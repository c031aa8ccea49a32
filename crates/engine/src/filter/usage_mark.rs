//! Usage marking: a whole reply says whether the usage it is billed by is
//! what the upstream reported (`exact`) or the gateway's estimate
//! (`estimated`: the upstream reported none, the caller left first, the
//! answer broke) in `x-switchyard-usage`. A stream's head leaves before
//! its usage is known, and nothing may follow its last event (google-genai
//! reads every line after it as JSON), so a stream's mark is its ledger
//! row's, which says the same for every answer, and why.
//!
//! Reads: the record's usage and why it is estimated. Writes: a whole
//! reply's head.

use http::HeaderValue;
use switchyard_state::call::Call;

use super::{Filter, ReplyCx};
use crate::render::{Whole, X_SWITCHYARD_USAGE};
use crate::settle::Record;

/// The usage mark (a unit: in the chain it costs no allocation).
pub(crate) struct MarkUsage;

impl MarkUsage {
    /// Every whole reply is marked (a stream's mark is its row's).
    pub(crate) fn of(call: &Call) -> Option<MarkUsage> {
        (!call.stream).then_some(MarkUsage)
    }
}

/// The mark of `record`'s usage.
fn mark(record: &Record) -> &'static str {
    match record.estimated() {
        Some(_) => "estimated",
        None => "exact",
    }
}

impl Filter for MarkUsage {
    fn name(&self) -> &'static str {
        "usage_mark"
    }

    fn on_whole(&mut self, whole: &mut Whole, cx: &mut ReplyCx<'_>) -> Result<(), switchyard_ir::ErrorInfo> {
        whole.headers.insert(X_SWITCHYARD_USAGE, HeaderValue::from_static(mark(cx.record)));
        Ok(())
    }
}
