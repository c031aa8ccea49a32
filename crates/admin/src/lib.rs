//! The admin plane, on its own loopback listener: the admin API ([`api`]:
//! keys, groups, spend, requests, lanes, config, with token scopes, audit,
//! idempotency and its OpenAPI document), the operator's console
//! ([`console`]), `/metrics` ([`scrape`]), `/stats` ([`stats`]) and the
//! sampler that turns the request path's counters into the console's
//! history ([`sampler`]). It reads the runtime (`switchyard_state`) and
//! never the request path's code.

pub mod alerts;
pub mod api;
pub mod console;
pub mod content;
pub mod end_users;
pub mod groups;
pub mod keys;
pub mod mcp;
pub mod oidc;
pub mod operations;
pub mod reconcile;
pub mod reports;
pub mod runs;
pub mod sampler;
pub mod scrape;
pub mod self_keys;
pub mod sessions;
pub mod shared;
pub mod stats;
pub mod tenancy;
pub mod usage;
pub mod versions;
pub mod watch;
