//! OTLP/HTTP export bodies, encoded by hand: an `ExportTraceServiceRequest`
//! (opentelemetry-proto's `collector/trace/v1`) straight from the gateway's
//! typed spans, and an `ExportLogsServiceRequest` (`collector/logs/v1`) of
//! request records. The
//! generic route (building `opentelemetry-proto` messages with owned
//! strings for every attribute, then `prost`'s size pass and encode) cost
//! more than the whole request it traced; this writes each field once. The
//! tests decode the output with the official proto definitions.

use super::sink::SinkRecord;
use super::trace::{Finished, Resource, SpanView};

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

/// A protobuf writer over one buffer.
#[derive(Debug, Default)]
pub struct Proto {
    buf: Vec<u8>,
}

impl Proto {
    /// A writer with room for `bytes`.
    pub(crate) fn with_capacity(bytes: usize) -> Proto {
        Proto { buf: Vec::with_capacity(bytes) }
    }

    /// The message written.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Switchyard's `InstrumentationScope` (field 1 of every `Scope*`).
    pub(crate) fn scope(&mut self) {
        self.nested(1, |p| {
            p.bytes(1, b"switchyard");
            p.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
        });
    }

    /// A packed repeated fixed64 (or double, as bits) field.
    pub(crate) fn packed_fixed64(&mut self, field: u32, values: &[u64]) {
        if values.is_empty() {
            return;
        }
        self.key(field, LEN);
        self.varint((values.len() * 8) as u64);
        for value in values {
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    pub(crate) fn bytes(&mut self, field: u32, data: &[u8]) {
        self.key(field, LEN);
        self.varint(data.len() as u64);
        self.buf.extend_from_slice(data);
    }

    pub(crate) fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, VARINT);
            self.varint(value);
        }
    }

    pub(crate) fn fixed64(&mut self, field: u32, value: u64) {
        self.key(field, I64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    /// A nested message: written in place after a one-byte length, which
    /// is right for most (attributes, values); a longer one moves its body
    /// up to make room for the longer varint.
    pub(crate) fn nested(&mut self, field: u32, body: impl FnOnce(&mut Proto)) {
        self.key(field, LEN);
        let at = self.buf.len();
        self.buf.push(0);
        body(self);
        let length = self.buf.len() - at - 1;
        if length < 0x80 {
            self.buf[at] = length as u8;
            return;
        }
        let mut head = [0u8; 10];
        let mut used = 0;
        let mut rest = length as u64;
        while rest >= 0x80 {
            head[used] = (rest as u8) | 0x80;
            rest >>= 7;
            used += 1;
        }
        head[used] = rest as u8;
        used += 1;
        let end = self.buf.len();
        self.buf.resize(end + used - 1, 0);
        self.buf.copy_within(at + 1..end, at + used);
        self.buf[at..at + used].copy_from_slice(&head[..used]);
    }

    /// A `KeyValue` with a string value, as message field `field`.
    pub(crate) fn attr_str(&mut self, field: u32, key: &str, value: &str) {
        self.nested(field, |p| {
            p.bytes(1, key.as_bytes());
            p.nested(2, |p| p.bytes(1, value.as_bytes()));
        });
    }

    /// A `KeyValue` with an int64 value.
    fn attr_int(&mut self, field: u32, key: &str, value: i64) {
        self.nested(field, |p| {
            p.bytes(1, key.as_bytes());
            p.nested(2, |p| {
                p.key(3, VARINT);
                p.varint(value as u64);
            });
        });
    }

    /// A `KeyValue` with an array of one string.
    fn attr_strs(&mut self, field: u32, key: &str, value: &str) {
        self.nested(field, |p| {
            p.bytes(1, key.as_bytes());
            p.nested(2, |p| p.nested(5, |p| p.nested(1, |p| p.bytes(1, value.as_bytes()))));
        });
    }

    fn span(&mut self, span: &SpanView<'_>) {
        // ScopeSpans.spans = 2
        self.nested(2, |p| {
            p.bytes(1, span.trace_id);
            p.bytes(2, span.span_id);
            if let Some(parent) = span.parent {
                p.bytes(4, parent);
            }
            p.key(5, LEN);
            p.varint((span.operation.len() + 1 + span.name.len()) as u64);
            p.buf.extend_from_slice(span.operation.as_bytes());
            p.buf.push(b' ');
            p.buf.extend_from_slice(span.name.as_bytes());
            p.uint(6, span.kind as u64);
            p.fixed64(7, span.start_ns);
            p.fixed64(8, span.end_ns);
            for (key, value) in span.strings.iter().flatten() {
                p.attr_str(9, key, value);
            }
            for (key, value) in span.ints.iter().flatten() {
                p.attr_int(9, key, *value);
            }
            if let Some(reason) = span.finish_reason {
                p.attr_strs(9, "gen_ai.response.finish_reasons", reason);
            }
            if let Some(message) = span.error {
                // Status: message = 2, code = 3 (ERROR).
                p.nested(15, |p| {
                    p.bytes(2, message.as_bytes());
                    p.uint(3, 2);
                });
            }
        });
    }
}

impl Proto {
    /// A `KeyValue` with a double value.
    fn attr_double(&mut self, field: u32, key: &str, value: f64) {
        self.nested(field, |p| {
            p.bytes(1, key.as_bytes());
            p.nested(2, |p| p.fixed64(4, value.to_bits()));
        });
    }

    /// A `KeyValue` with a bool value.
    fn attr_bool(&mut self, field: u32, key: &str, value: bool) {
        self.nested(field, |p| {
            p.bytes(1, key.as_bytes());
            p.nested(2, |p| {
                p.key(2, VARINT);
                p.varint(u64::from(value));
            });
        });
    }

    /// One request as a `LogRecord` (`ScopeLogs.log_records` = 2), with
    /// the GenAI conventions' attribute names where they have one; never
    /// the prompt or reply text.
    fn log_record(&mut self, record: &SinkRecord) {
        self.nested(2, |p| {
            let at = record.at_ms.saturating_mul(1_000_000);
            p.fixed64(1, at);
            p.fixed64(11, at);
            // SeverityNumber: INFO 9, WARN 13, ERROR 17.
            let (severity, text) = match record.status {
                500.. => (17, "ERROR"),
                400.. => (13, "WARN"),
                _ => (9, "INFO"),
            };
            p.uint(2, severity);
            p.bytes(3, text.as_bytes());
            let pool = record.pool.as_deref().unwrap_or("-");
            let body = format!("{} {} {}", record.ingress, pool, record.status);
            p.nested(5, |p| p.bytes(1, body.as_bytes()));
            p.attr_str(6, "switchyard.request_id", &record.request_id);
            if let Some(key) = &record.key_id {
                p.attr_str(6, "switchyard.key_id", key);
            }
            p.attr_str(6, "switchyard.ingress", record.ingress);
            if let Some(pool) = &record.pool {
                p.attr_str(6, "gen_ai.request.model", pool);
            }
            if let Some(lane) = &record.lane {
                p.attr_str(6, "switchyard.lane", lane);
            }
            if let Some(model) = &record.model {
                p.attr_str(6, "gen_ai.response.model", model);
            }
            p.attr_int(6, "http.response.status_code", i64::from(record.status));
            p.attr_bool(6, "switchyard.stream", record.stream);
            let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            p.attr_int(6, "gen_ai.usage.input_tokens", tokens(record.input_tokens));
            p.attr_int(6, "gen_ai.usage.output_tokens", tokens(record.output_tokens));
            p.attr_int(6, "gen_ai.usage.cache_read.input_tokens", tokens(record.cache_read_tokens));
            p.attr_double(6, "switchyard.cost.usd", record.usd);
            p.attr_double(6, "switchyard.duration_ms", record.total_ms);
            p.attr_int(6, "switchyard.failovers", i64::from(record.failovers));
            p.attr_bool(6, "switchyard.estimated", record.estimated);
            p.bytes(12, b"switchyard.request");
        });
    }

    /// A `Resource` (field 1 of every OTLP `Resource*` message).
    pub(crate) fn resource(&mut self, resource: &Resource) {
        // Resource.attributes = 1
        self.nested(1, |p| {
            p.attr_str(1, "service.name", &resource.service);
            for (key, value) in &resource.attributes {
                p.attr_str(1, key, value);
            }
        });
    }
}

/// The body of one export: the resource, every span of `traces` (each
/// request's attempts, then the request).
pub fn encode(resource: &Resource, traces: &[Finished]) -> Vec<u8> {
    let mut p = Proto { buf: Vec::with_capacity(traces.len() * 768 + 128) };
    // ExportTraceServiceRequest.resource_spans = 1
    p.nested(1, |p| {
        p.resource(resource);
        // ResourceSpans.scope_spans = 2
        p.nested(2, |p| {
            // ScopeSpans.scope = 1 { name = 1, version = 2 }
            p.nested(1, |p| {
                p.bytes(1, b"switchyard");
                p.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for trace in traces {
                trace.each_span(|span| p.span(&span));
            }
        });
    });
    p.buf
}

/// The body of one log export: the resource and one record per request.
pub fn encode_logs(resource: &Resource, records: &[SinkRecord]) -> Vec<u8> {
    let mut p = Proto { buf: Vec::with_capacity(records.len() * 512 + 128) };
    // ExportLogsServiceRequest.resource_logs = 1
    p.nested(1, |p| {
        p.resource(resource);
        // ResourceLogs.scope_logs = 2
        p.nested(2, |p| {
            p.nested(1, |p| {
                p.bytes(1, b"switchyard");
                p.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for record in records {
                p.log_record(record);
            }
        });
    });
    p.buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use prost::Message;

    #[test]
    fn varints_and_nested_lengths_decode_with_the_official_definitions() {
        // Long enough values that lengths need two and three varint bytes.
        let long = "x".repeat(300);
        let huge = "y".repeat(20_000);
        let traces = vec![Finished::sample(&long), Finished::sample(&huge)];
        let resource =
            Resource { service: "svc".into(), attributes: vec![("deployment.environment".into(), "test".into())] };
        let body = encode(&resource, &traces);
        let export = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let resource = &export.resource_spans[0];
        let service = &resource.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        assert_eq!(service.value.as_ref().unwrap().value, Some(Value::StringValue("svc".into())));
        let environment = &resource.resource.as_ref().unwrap().attributes[1];
        assert_eq!(environment.key, "deployment.environment");
        assert_eq!(environment.value.as_ref().unwrap().value, Some(Value::StringValue("test".into())));
        let scope = &resource.scope_spans[0];
        assert_eq!(scope.scope.as_ref().unwrap().name, "switchyard");
        assert_eq!(scope.spans.len(), 4, "two attempts... one each, and two requests");
        let request = &scope.spans[1];
        assert_eq!(request.name, format!("chat {long}"));
        assert_eq!(request.kind, 2);
        assert_eq!(request.start_time_unix_nano, 1_000);
        assert_eq!(request.end_time_unix_nano, 9_000);
        assert_eq!(request.parent_span_id, vec![7; 8]);
        let attr = |key: &str| {
            request.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone()).and_then(|v| v.value)
        };
        assert_eq!(attr("gen_ai.request.model"), Some(Value::StringValue(long.clone())));
        assert_eq!(attr("gen_ai.usage.input_tokens"), Some(Value::IntValue(12)));
        assert_eq!(attr("switchyard.failovers"), Some(Value::IntValue(0)));
        let Some(Value::ArrayValue(reasons)) = attr("gen_ai.response.finish_reasons") else { panic!() };
        assert_eq!(reasons.values[0].value, Some(Value::StringValue("end_turn".into())));
        let attempt = &scope.spans[0];
        assert_eq!(attempt.kind, 3);
        assert_eq!(attempt.parent_span_id, request.span_id);
        assert_eq!(attempt.status.as_ref().unwrap().code, 2);
        assert_eq!(scope.spans[3].name, format!("chat {huge}"));
    }

    #[test]
    fn request_records_decode_as_otlp_logs_with_the_official_definitions() {
        use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
        let record = SinkRecord {
            at_ms: 1_700_000_000_123,
            request_id: "req-1".into(),
            key_id: Some("key_1".into()),
            ingress: "anthropic",
            pool: Some("chat".into()),
            lane: Some("gpt".into()),
            model: Some("gpt-4o-mini".into()),
            status: 502,
            stream: true,
            input_tokens: 12,
            output_tokens: 34,
            cache_read_tokens: 5,
            cache_write_tokens: 0,
            usd: 0.25,
            ttfb_ms: None,
            total_ms: 8.5,
            failovers: 1,
            estimated: false,
            request_body: Some(bytes::Bytes::from_static(b"secret prompt")),
            response_body: None,
        };
        let resource = Resource { service: "svc".into(), attributes: Vec::new() };
        let body = encode_logs(&resource, &[record.clone(), record]);
        let export = ExportLogsServiceRequest::decode(body.as_slice()).unwrap();
        let logs = &export.resource_logs[0];
        assert_eq!(logs.resource.as_ref().unwrap().attributes[0].key, "service.name");
        let records = &logs.scope_logs[0].log_records;
        assert_eq!(records.len(), 2);
        let log = &records[0];
        assert_eq!(log.time_unix_nano, 1_700_000_000_123_000_000);
        assert_eq!(log.severity_number, 17);
        assert_eq!(log.severity_text, "ERROR");
        assert_eq!(log.event_name, "switchyard.request");
        let attr = |key: &str| log.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone()?.value);
        assert_eq!(attr("gen_ai.request.model"), Some(Value::StringValue("chat".into())));
        assert_eq!(attr("gen_ai.usage.output_tokens"), Some(Value::IntValue(34)));
        assert_eq!(attr("http.response.status_code"), Some(Value::IntValue(502)));
        assert_eq!(attr("switchyard.cost.usd"), Some(Value::DoubleValue(0.25)));
        assert_eq!(attr("switchyard.stream"), Some(Value::BoolValue(true)));
        // The text stays out of the collector even when the file keeps it.
        assert!(!String::from_utf8_lossy(&body).contains("secret prompt"));
    }
}
