//! A trivial reply filter, built only in tests: it stamps the head of
//! every answer to a request that asks for it (`x-stamp` on the request),
//! whatever produced the answer (a lane, a filter in the upstream's place,
//! a refusal). It is what a new concern costs: this file, and one line in
//! [`super::build`].

use http::{HeaderMap, HeaderValue};
use switchyard_state::call::Call;

use super::Filter;

/// Stamps the answer's head.
pub(crate) struct Stamp(HeaderValue);

impl Stamp {
    /// The stamp, when the call asks for one.
    pub(crate) fn of(call: &Call) -> Option<Stamp> {
        call.headers.get("x-stamp").map(|value| Stamp(value.clone()))
    }
}

impl Filter for Stamp {
    fn name(&self) -> &'static str {
        "stamp"
    }

    fn on_head(&mut self, headers: &mut HeaderMap) {
        headers.insert("x-stamped", self.0.clone());
    }
}
