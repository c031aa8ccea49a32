//! Routing decisions as pure functions: given a pool's members, the
//! request's shape and the candidates' live signals, produce the order in
//! which candidates are tried. No I/O, no clock, no locks: the engine owns
//! the state and passes it in.
//!
//! - `weighted`: smooth weighted round-robin, the zero-cost default floor.
//! - `strategy`: the native rankings (cheapest, fastest, least busy, usage,
//!   billing) and how a ranked preference is applied.
//! - `hook`: the external gate contract (payload, reply parsing, reconcile).

pub mod hook;
mod strategy;
mod weighted;

pub use strategy::{apply_preference, rank, BillingRank, Needs, Projection, Signals, Strategy};
pub use weighted::SmoothWeighted;
