//! The gateway's integration tests, one module per concern, in one test
//! binary: each module starts gateways (and vendor fakes) on real TCP ports
//! chosen by the OS, so they run side by side. One binary links once; a
//! binary per file linked the whole gateway 28 times.
#![allow(clippy::disallowed_methods, reason = "tests spawn their own tasks")]

mod common;

mod a2a;
mod admin_tls;
mod admission;
mod agents;
mod audio;
mod budgets;
mod cache;
mod chaos;
mod cloud;
mod commit_point;
mod console;
mod data_tls;
mod disconnect;
mod duplex;
mod edges;
mod errors;
mod fleet;
mod fleet_lease;
mod governance;
mod guardrails;
mod hardening;
mod identity;
mod images;
mod kept;
mod kept_limits;
mod live;
mod logprobs;
mod mcp;
mod mcp_revisions;
mod money;
mod oidc;
mod operations;
mod operator;
mod pairs;
mod passthrough;
mod proof;
mod rates;
mod realtime;
mod reload;
mod retention;
mod routes;
mod routing;
mod runs;
mod settlement;
mod telemetry;
mod tenants;
mod tool_ids;
mod translation;
