//! MCP as data, apart from any I/O: `rpc` (one JSON-RPC message per POST,
//! the protocol versions served and negotiated, the stateless revision's
//! envelope, the error codes), `handle` (the sealed handles the gateway
//! mints for callers: session ids, cursors), `names`
//! (how several servers' tools, prompts and resources become one
//! catalogue's names) and `pin` (a tool's schema digest and its standing
//! against an approved one). The MCP gateway (`switchyard-mcp`) speaks
//! through these; the fuzz targets read untrusted bytes with them.

pub mod handle;
pub mod names;
pub mod pin;
pub mod rpc;
