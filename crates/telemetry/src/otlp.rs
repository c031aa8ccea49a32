//! OTLP/HTTP trace export bodies, encoded by hand: an
//! `ExportTraceServiceRequest` (opentelemetry-proto's
//! `collector/trace/v1`) straight from the gateway's typed spans. The
//! generic route (building `opentelemetry-proto` messages with owned
//! strings for every attribute, then `prost`'s size pass and encode) cost
//! more than the whole request it traced; this writes each field once. The
//! tests decode the output with the official proto definitions.

use super::trace::{Finished, SpanView};

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

/// A protobuf writer over one buffer.
#[derive(Debug, Default)]
pub struct Proto {
    buf: Vec<u8>,
}

impl Proto {
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

    fn bytes(&mut self, field: u32, data: &[u8]) {
        self.key(field, LEN);
        self.varint(data.len() as u64);
        self.buf.extend_from_slice(data);
    }

    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, VARINT);
            self.varint(value);
        }
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        self.key(field, I64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    /// A nested message: written in place after a one-byte length, which
    /// is right for most (attributes, values); a longer one moves its body
    /// up to make room for the longer varint.
    fn nested(&mut self, field: u32, body: impl FnOnce(&mut Proto)) {
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
    fn attr_str(&mut self, field: u32, key: &str, value: &str) {
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

/// The body of one export: `service` as the resource's `service.name`,
/// every span of `traces` (each request's attempts, then the request).
pub fn encode(service: &str, traces: &[Finished]) -> Vec<u8> {
    let mut p = Proto { buf: Vec::with_capacity(traces.len() * 768 + 128) };
    // ExportTraceServiceRequest.resource_spans = 1
    p.nested(1, |p| {
        // ResourceSpans.resource = 1 { attributes = 1 }
        p.nested(1, |p| p.attr_str(1, "service.name", service));
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
        let body = encode("svc", &traces);
        let export = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let resource = &export.resource_spans[0];
        let service = &resource.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        assert_eq!(service.value.as_ref().unwrap().value, Some(Value::StringValue("svc".into())));
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
}
