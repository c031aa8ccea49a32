//! Lane health as pure state machines, read and fed by the engine.
//!
//! `disposition` decides who is at fault for an upstream failure and what
//! follows for the lane and the request; `breaker` is the per-(pool, lane)
//! circuit breaker; `retry` says which failures earn a retry on the same
//! lane and how long to wait; `hedge` when a late first token earns a
//! second attempt and how many the traffic allows; `quota` reads what an upstream's rate-limit
//! headers say before it ever answers 429. None reads a clock or a random
//! source: the caller passes `now` and a jitter sample in.

pub mod breaker;
pub mod disposition;
pub mod hedge;
pub mod quota;
pub mod retry;

pub use breaker::{Admission, Breaker, BreakerPolicy, BreakerSnapshot, BreakerState, Unavailable};
pub use disposition::{classify, effects, normalize, Disposition, ErrorMap, LaneEffect, RequestEffect, StatusClass};
