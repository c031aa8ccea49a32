//! A fleet's shared state in Redis (`storage.redis_url`): the budget,
//! rate and concurrency counters every instance admits and settles on
//! ([`counters`], two Lua scripts), and breaker changes and session pins
//! shared between instances ([`shared`]). Every read on the request path
//! stays local but admission's one script call.

pub mod counters;
pub mod shared;
