//! Small readers for untyped JSON that name the offending field in errors,
//! plus the cache-control and usage shapes shared by requests, replies and
//! streams.

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{CacheControl, ServiceTier, Usage};
use switchyard_codec::DecodeError;

/// `path.key`, or `key` at the top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// `path[index]`.
pub(crate) fn at(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

fn invalid(param: String, what: &str) -> DecodeError {
    let message = format!("{param} {what}");
    DecodeError::invalid(param, message)
}

/// A value that is absent or JSON `null` counts as not given.
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

pub(crate) fn as_object<'a>(value: &'a Value, param: &str) -> Result<&'a Map<String, Value>, DecodeError> {
    value.as_object().ok_or_else(|| invalid(param.to_owned(), "must be an object"))
}

pub(crate) fn as_array<'a>(value: &'a Value, param: &str) -> Result<&'a [Value], DecodeError> {
    value.as_array().map(Vec::as_slice).ok_or_else(|| invalid(param.to_owned(), "must be an array"))
}

pub(crate) fn as_str<'a>(value: &'a Value, param: &str) -> Result<&'a str, DecodeError> {
    value.as_str().ok_or_else(|| invalid(param.to_owned(), "must be a string"))
}

pub(crate) fn as_u64(value: &Value, param: &str) -> Result<u64, DecodeError> {
    value.as_u64().ok_or_else(|| invalid(param.to_owned(), "must be a non-negative integer"))
}

pub(crate) fn as_f64(value: &Value, param: &str) -> Result<f64, DecodeError> {
    value.as_f64().ok_or_else(|| invalid(param.to_owned(), "must be a number"))
}

pub(crate) fn as_bool(value: &Value, param: &str) -> Result<bool, DecodeError> {
    value.as_bool().ok_or_else(|| invalid(param.to_owned(), "must be a boolean"))
}

pub(crate) fn opt_str<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<Option<&'a str>, DecodeError> {
    present(obj, key).map(|v| as_str(v, &join(path, key))).transpose()
}

pub(crate) fn req_str<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str, DecodeError> {
    opt_str(obj, key, path)?.ok_or_else(|| invalid(join(path, key), "is required"))
}

pub(crate) fn opt_bool(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<bool>, DecodeError> {
    present(obj, key).map(|v| as_bool(v, &join(path, key))).transpose()
}

pub(crate) fn opt_value<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    present(obj, key)
}

/// `cache_control: {type: "ephemeral", ttl?}`. Only `ephemeral` exists, so
/// the type is not checked (a future type still marks a breakpoint).
pub(crate) fn read_cache_control(obj: &Map<String, Value>, path: &str) -> Result<Option<CacheControl>, DecodeError> {
    let Some(value) = present(obj, "cache_control") else {
        return Ok(None);
    };
    let param = join(path, "cache_control");
    let cc = as_object(value, &param)?;
    let ttl = opt_str(cc, "ttl", &param)?.map(str::to_owned);
    Ok(Some(CacheControl { ttl }))
}

pub(crate) fn write_cache_control(cc: &CacheControl) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), json!("ephemeral"));
    if let Some(ttl) = &cc.ttl {
        obj.insert("ttl".into(), json!(ttl));
    }
    Value::Object(obj)
}

/// Adds `cache_control` to a block object when the IR has one.
pub(crate) fn put_cache_control(obj: &mut Map<String, Value>, cc: Option<&CacheControl>) {
    if let Some(cc) = cc {
        obj.insert("cache_control".into(), write_cache_control(cc));
    }
}

/// Anthropic's usage counts as the wire splits them: `input_tokens` is the
/// uncached part only; `cache_creation_input_tokens` every cache write,
/// `cache_creation` the same by lifetime. Fields are `None` when the wire
/// did not carry them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WireUsage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
    /// `cache_creation.ephemeral_5m_input_tokens`.
    pub cache_write_5m: Option<u64>,
    /// `cache_creation.ephemeral_1h_input_tokens`.
    pub cache_write_1h: Option<u64>,
    /// `output_tokens_details.thinking_tokens`, part of `output`.
    pub reasoning: Option<u64>,
    /// `server_tool_use.web_search_requests`.
    pub web_searches: Option<u64>,
    /// `service_tier`.
    pub service_tier: Option<ServiceTier>,
}

impl WireUsage {
    /// Reads a `usage` object; counts that are not integers are ignored
    /// rather than failing a reply over bookkeeping.
    pub(crate) fn read(value: Option<&Value>) -> WireUsage {
        let Some(obj) = value.and_then(Value::as_object) else {
            return WireUsage::default();
        };
        let count = |key: &str| obj.get(key).and_then(Value::as_u64);
        let nested = |outer: &str, key: &str| obj.get(outer).and_then(|d| d.get(key)).and_then(Value::as_u64);
        WireUsage {
            input: count("input_tokens"),
            output: count("output_tokens"),
            cache_read: count("cache_read_input_tokens"),
            cache_write: count("cache_creation_input_tokens"),
            cache_write_5m: nested("cache_creation", "ephemeral_5m_input_tokens"),
            cache_write_1h: nested("cache_creation", "ephemeral_1h_input_tokens"),
            reasoning: nested("output_tokens_details", "thinking_tokens"),
            web_searches: nested("server_tool_use", "web_search_requests"),
            service_tier: obj.get("service_tier").and_then(Value::as_str).and_then(ServiceTier::parse),
        }
    }

    /// Folds a later report in: a field the later one carries replaces the
    /// earlier (Anthropic's stream reports cumulative counts).
    pub(crate) fn merge(&mut self, later: &WireUsage) {
        fn take<T: Copy>(mine: &mut Option<T>, theirs: Option<T>) {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        take(&mut self.input, later.input);
        take(&mut self.output, later.output);
        take(&mut self.cache_read, later.cache_read);
        take(&mut self.cache_write, later.cache_write);
        take(&mut self.cache_write_5m, later.cache_write_5m);
        take(&mut self.cache_write_1h, later.cache_write_1h);
        take(&mut self.reasoning, later.reasoning);
        take(&mut self.web_searches, later.web_searches);
        take(&mut self.service_tier, later.service_tier);
    }

    /// IR usage: input includes both cache counts (see the IR crate docs);
    /// the writes by lifetime add up to the total when the total is absent.
    pub(crate) fn to_ir(self) -> Usage {
        let cache_read = self.cache_read.unwrap_or(0);
        let by_lifetime = self.cache_write_5m.unwrap_or(0).saturating_add(self.cache_write_1h.unwrap_or(0));
        let cache_write = self.cache_write.unwrap_or(by_lifetime);
        Usage {
            input_tokens: self.input.unwrap_or(0).saturating_add(cache_read).saturating_add(cache_write),
            output_tokens: self.output.unwrap_or(0),
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            cache_write_1h_tokens: self.cache_write_1h.unwrap_or(0).min(cache_write),
            reasoning_tokens: self.reasoning.unwrap_or(0),
            web_searches: self.web_searches.unwrap_or(0),
            service_tier: self.service_tier,
            ..Usage::default()
        }
    }
}

/// The full wire usage object for IR usage (uncached input on the wire;
/// the thinking-token detail only when known).
pub(crate) fn write_usage(usage: &Usage) -> Value {
    // Plain numbers: serialising them cannot fail.
    serde_json::to_value(WireUsageOut::of(usage)).unwrap_or(Value::Null)
}

/// The wire usage object, serialised straight from the IR (a reply's usage;
/// [`write_usage`] is it as a value, for the stream's events).
#[derive(serde::Serialize)]
pub(crate) struct WireUsageOut {
    input_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation: CacheCreation,
    output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens_details: Option<ThinkingTokens>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_tool_use: Option<ServerToolUse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'static str>,
}

#[derive(serde::Serialize)]
struct CacheCreation {
    ephemeral_5m_input_tokens: u64,
    ephemeral_1h_input_tokens: u64,
}

#[derive(serde::Serialize)]
struct ThinkingTokens {
    thinking_tokens: u64,
}

#[derive(serde::Serialize)]
struct ServerToolUse {
    web_search_requests: u64,
}

impl WireUsageOut {
    pub(crate) fn of(usage: &Usage) -> WireUsageOut {
        WireUsageOut {
            input_tokens: usage.uncached_input(),
            cache_creation_input_tokens: usage.cache_write_tokens,
            cache_read_input_tokens: usage.cache_read_tokens,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: usage.cache_write_5m_tokens(),
                ephemeral_1h_input_tokens: usage.cache_write_1h_tokens,
            },
            output_tokens: usage.output_tokens,
            output_tokens_details: (usage.reasoning_tokens != 0)
                .then_some(ThinkingTokens { thinking_tokens: usage.reasoning_tokens }),
            server_tool_use: (usage.web_searches != 0)
                .then_some(ServerToolUse { web_search_requests: usage.web_searches }),
            service_tier: usage.service_tier.map(|tier| match tier {
                // Anthropic's tiers are standard, priority and batch.
                ServiceTier::Priority => "priority",
                ServiceTier::Batch => "batch",
                _ => "standard",
            }),
        }
    }
}

/// `output_tokens_details.thinking_tokens`, when the count is known.
pub(crate) fn put_reasoning(obj: &mut Map<String, Value>, usage: &Usage) {
    if usage.reasoning_tokens != 0 {
        obj.insert("output_tokens_details".into(), json!({"thinking_tokens": usage.reasoning_tokens}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_written_in_anthropics_order_with_thinking_only_when_known() {
        let usage = |reasoning_tokens| Usage {
            input_tokens: 120,
            output_tokens: 30,
            cache_read_tokens: 100,
            cache_write_tokens: 5,
            reasoning_tokens,
            ..Usage::default()
        };
        assert_eq!(
            serde_json::to_string(&WireUsageOut::of(&usage(0))).unwrap(),
            r#"{"input_tokens":15,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":0},"output_tokens":30}"#
        );
        assert_eq!(
            serde_json::to_string(&write_usage(&usage(7))).unwrap(),
            r#"{"input_tokens":15,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":0},"output_tokens":30,"output_tokens_details":{"thinking_tokens":7}}"#
        );
    }

    #[test]
    fn usage_adds_cache_counts_on_read_and_subtracts_on_write() {
        let wire = json!({"input_tokens": 10, "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation": {"ephemeral_5m_input_tokens": 5, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 7, "output_tokens_details": {"thinking_tokens": 3}});
        let ir = WireUsage::read(Some(&wire)).to_ir();
        assert_eq!(ir.input_tokens, 115);
        assert_eq!(ir.cache_read_tokens, 100);
        assert_eq!(ir.cache_write_tokens, 5);
        assert_eq!(ir.reasoning_tokens, 3);
        assert_eq!(write_usage(&ir), wire);
    }

    /// The usage object of the Messages API reference, every kind it
    /// reports: cache writes by lifetime, web searches, the service tier.
    #[test]
    fn usage_reads_every_kind_anthropic_reports() {
        let wire = json!({
            "input_tokens": 2095, "output_tokens": 503,
            "cache_creation_input_tokens": 2051, "cache_read_input_tokens": 1024,
            "cache_creation": {"ephemeral_5m_input_tokens": 51, "ephemeral_1h_input_tokens": 2000},
            "server_tool_use": {"web_search_requests": 2},
            "service_tier": "priority"
        });
        let ir = WireUsage::read(Some(&wire)).to_ir();
        assert_eq!(ir.input_tokens, 2095 + 2051 + 1024);
        assert_eq!((ir.cache_read_tokens, ir.cache_write_tokens, ir.cache_write_1h_tokens), (1024, 2051, 2000));
        assert_eq!(ir.cache_write_5m_tokens(), 51);
        assert_eq!((ir.output_tokens, ir.web_searches), (503, 2));
        assert_eq!(ir.service_tier, Some(ServiceTier::Priority));
        assert_eq!(write_usage(&ir), wire, "written back as Anthropic writes it");
        // A stream's `message_delta` may carry the lifetimes without the total.
        let split = json!({"cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}});
        let ir = WireUsage::read(Some(&split)).to_ir();
        assert_eq!((ir.cache_write_tokens, ir.cache_write_1h_tokens, ir.input_tokens), (40, 30, 40));
        // An hour-long part past the total is never more than it.
        let odd = json!({"cache_creation_input_tokens": 5, "cache_creation": {"ephemeral_1h_input_tokens": 9}});
        assert_eq!(WireUsage::read(Some(&odd)).to_ir().cache_write_1h_tokens, 5);
    }

    #[test]
    fn errors_name_the_field() {
        let obj = json!({"a": 1});
        let obj = obj.as_object().unwrap();
        let err = req_str(obj, "a", "messages[0]").unwrap_err();
        assert_eq!(err.to_string(), "messages[0].a must be a string");
        let err = req_str(obj, "b", "").unwrap_err();
        assert_eq!(err.to_string(), "b is required");
    }
}
