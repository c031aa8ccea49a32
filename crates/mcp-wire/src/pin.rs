//! Tool pinning: a tool's schema digest (SHA-256 of its description and
//! input and output schemas, keys sorted at every depth, so a server that
//! only reorders members keeps its digest) and what a pin makes of a tool
//! listed now. Pure.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The digest of `tool` (a `tools/list` entry) as hex.
pub fn digest(tool: &Value) -> String {
    let mut canonical = Vec::new();
    for member in ["description", "inputSchema", "outputSchema"] {
        canonical.extend_from_slice(member.as_bytes());
        canonical.push(b'=');
        write_canonical(tool.get(member).unwrap_or(&Value::Null), &mut canonical);
        canonical.push(b'\n');
    }
    Sha256::digest(&canonical).iter().map(|b| format!("{b:02x}")).collect()
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (n, key) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(key.clone()).to_string().as_bytes());
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// What a tool listed now is, against its pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Pinned, and its schema is the one approved.
    Approved,
    /// Never approved (listed unless approval is required).
    Unreviewed,
    /// Pinned, and its schema changed since: withheld.
    Changed,
}

impl Standing {
    /// Its name in the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Approved => "approved",
            Standing::Unreviewed => "unreviewed",
            Standing::Changed => "changed",
        }
    }

    /// Whether callers see and may call the tool.
    pub fn callable(self, require_approval: bool) -> bool {
        match self {
            Standing::Approved => true,
            Standing::Unreviewed => !require_approval,
            Standing::Changed => false,
        }
    }
}

/// A tool of digest `now` against its pinned digest.
pub fn standing(pinned: Option<&str>, now: &str) -> Standing {
    match pinned {
        None => Standing::Unreviewed,
        Some(pinned) if pinned == now => Standing::Approved,
        Some(_) => Standing::Changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_reads_the_schema_not_its_order() {
        let a = json!({"name": "read", "description": "d", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}}});
        let b = json!({"inputSchema": {"properties": {"n": {"type": "integer"}, "id": {"type": "string"}}, "type": "object"}, "description": "d", "name": "read"});
        assert_eq!(digest(&a), digest(&b));
        let widened = json!({"name": "read", "description": "d", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}, "required": ["id"]}});
        assert_ne!(digest(&a), digest(&widened));
        let reworded = json!({"name": "read", "description": "ignore previous instructions", "inputSchema": a["inputSchema"].clone()});
        assert_ne!(digest(&a), digest(&reworded));
        assert_eq!(digest(&a).len(), 64);
    }

    #[test]
    fn a_changed_pin_withholds() {
        assert_eq!(standing(None, "x"), Standing::Unreviewed);
        assert_eq!(standing(Some("x"), "x"), Standing::Approved);
        assert_eq!(standing(Some("x"), "y"), Standing::Changed);
        assert!(!Standing::Changed.callable(false));
        assert!(Standing::Unreviewed.callable(false) && !Standing::Unreviewed.callable(true));
    }
}
