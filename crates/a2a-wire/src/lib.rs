//! A2A as data, with no I/O, so the fuzz targets reach it whole:
//!
//! - `rpc`: a caller's JSON-RPC request read, the methods of A2A 1.0
//!   (`SendMessage`, what `a2a-sdk` 1.x sends) and 0.3 (`message/send`)
//!   told apart, and errors in A2A's own shape;
//! - `card`: an agent's card rewritten so callers reach it through the
//!   gateway;
//! - `message`: what the gateway reads in messages and answers: text
//!   parts (screened by guardrails), the task an answer names, the cost an
//!   agent reports, and the push URLs a caller asks an agent to call.

pub mod card;
pub mod message;
pub mod rpc;
