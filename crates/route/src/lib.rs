//! Routing decisions as pure functions: given a pool's members, which of them
//! are usable and the state the caller keeps, produce the order in which the
//! candidates are tried. No I/O, no clock, no locks: the engine owns the state
//! and passes it in.

mod weighted;

pub use weighted::SmoothWeighted;
