//! A2A as data, with no I/O, so the fuzz targets reach it whole:
//!
//! - `rpc`: a caller's JSON-RPC request read, the methods of A2A 1.0
//!   (`SendMessage`, what `a2a-sdk` 1.x sends) and 0.3 (`message/send`)
//!   told apart, and errors in A2A's own shape;
//! - `card`: an agent's card rewritten so callers reach it through the
//!   gateway;
//! - `message`: what the gateway reads in messages and answers: text
//!   parts (screened by guardrails), the task an answer names, the cost an
//!   agent reports, and the push URLs a caller asks an agent to call;
//! - `rest`: the HTTP+JSON binding read as the JSON-RPC request it asks
//!   (and written back), with its errors; `v03` converts 0.3's protobuf
//!   JSON bodies; `path` holds the pieces both read and write (a path
//!   segment that never steps out of itself, the query, the refusal).

pub mod card;
pub mod message;
mod path;
pub mod rest;
pub mod rpc;
mod v03;
