//! A request of a provider's raw route (`/passthrough/{provider}/...`)
//! settled as every request is: through a [`Record`], so its hold is
//! replaced by what the reply stated it used and it is one ledger row
//! (operation `passthrough`, pool and lane `passthrough:<provider>`, its
//! method and path in the notes), written by the same settlement as chat.

use std::sync::Arc;

use switchyard_governance::card::Card;

use super::Record;

/// What the ledger row of a raw-route request says beyond a request's own.
#[derive(Debug, Clone)]
pub struct RawNote {
    /// The route's lane name (`passthrough:<provider>`): the row's pool and lane.
    pub lane: Arc<str>,
    /// The method.
    pub method: http::Method,
    /// The vendor's path (no query), bounded.
    pub path: String,
    /// The model the reply named, when it named one (the row's model).
    pub model: Option<String>,
    /// What its tokens are priced at: the card of that model's lane on the
    /// provider, else the provider's `provider/*` row (`None`: unpriced).
    pub card: Option<Card>,
}

impl Record {
    /// The request is one of a raw route: its row is operation
    /// `passthrough` (a refusal's row says so too).
    pub fn raw_route(&mut self, note: RawNote) {
        self.operation = "passthrough";
        self.raw = Some(Box::new(note));
    }

    /// The model the reply named, and the card it is priced at.
    pub fn raw_model(&mut self, model: Option<String>, card: Option<Card>) {
        if let Some(raw) = self.raw.as_mut() {
            if model.is_some() {
                raw.model = model;
            }
            if card.is_some() {
                raw.card = card;
            }
        }
    }
}
