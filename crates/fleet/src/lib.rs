//! A fleet's shared state in Redis (`storage.redis_url`): the budget,
//! rate and concurrency counters every instance admits and settles on
//! ([`counters`], two Lua scripts), the slices of them an instance
//! leases to admit on without a round trip ([`lease`], a third script),
//! agent runs' counters and stopped
//! state ([`runs`], one hash per run), breaker changes and session pins
//! shared between instances ([`shared`]), and the response cache's
//! entries, bounded in bytes ([`cache`]). Every read on the request path
//! stays local but admission's one script call (and a caching pool's
//! lookup).

pub mod cache;
pub mod counters;
pub mod lease;
pub mod runs;
pub mod shared;
