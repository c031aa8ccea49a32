//! Governance as pure logic, fed by the gateway and unit-tested with no
//! network and no clock it does not receive:
//!
//! - [`mcp_grant`]: what a key's `mcp` grants reach of the MCP catalogue
//!   (nothing without them);
//! - [`key`]: virtual key secrets (generated from bytes the caller draws
//!   from the OS RNG), their SHA-256 hashes compared in constant time, the
//!   minted AWS key pairs, and the key record a store keeps;
//! - [`window`]: calendar budget windows in UTC;
//! - [`spec`]: what a bucket enforces: its budget (warnings, a downgrade
//!   once spent) and its rates, quotas and per-model limits;
//! - [`rate`]: GCRA for requests and tokens per second and minute;
//! - [`forecast`]: a budget's burn over the last hour and when it runs out;
//! - [`money`]: prices and costs in nano-USD (integers: sums never drift);
//! - [`card`]: a rate card entry whole (tiers by input size, a batch
//!   discount, service-tier factors) and a group's pricing (a markup in
//!   millionths, a card of its own) resolved along its chain;
//! - [`admission`]: a request admitted only when every bucket of its chain
//!   (key, group, parents) has room, with a reservation settled to the
//!   actual usage or released;
//! - [`fleet`]: the same admission on counters a fleet shares (the
//!   arguments of its scripts and the reading of their answers);
//! - [`lease`]: admission by leased slices of a fleet's budgets and
//!   rates (how big a slice is, what a lease has left and reports);
//! - [`run`]: an agent run's own limits (spend, calls, tool calls,
//!   tokens, wall clock) and its loop breaker, across keys and pools;
//! - [`sigv4`]: the inbound AWS SigV4 check for Bedrock callers;
//! - [`reconcile`]: the ledger's tokens beside a provider's usage report;
//! - [`receipt`]: signed, hash-chained receipts of settled requests and
//!   their offline check.

pub mod admission;
pub mod card;
pub mod estimate;
pub mod fleet;
pub mod forecast;
pub mod key;
pub mod lease;
pub mod mcp_grant;
pub mod money;
pub mod rate;
pub mod receipt;
pub mod reconcile;
pub mod run;
pub mod run_fleet;
pub mod sigv4;
pub mod spec;
pub mod window;

pub use admission::{Actual, BucketId, Estimate, Governor, Per, Refusal, RefusalKind, Reservation};
pub use key::{KeyHash, KeyRecord};
pub use money::{NanoUsd, Price, Tokens};
pub use spec::{BucketSpec, Budget, Downgrade, Limits, Metric, Quota, Trigger};
pub use window::Window;
