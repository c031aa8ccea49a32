//! The access line: one per request, written by the settle stage. It is
//! formatted here by hand, in the layout `tracing`'s formatter gives every
//! other line (human or JSON), because formatting it through `tracing`'s
//! field visitors cost a quarter of a passthrough request's instructions;
//! this costs a few percent. The line goes to a [`LineWriter`] the binary
//! provides (its non-blocking log writer), so a request never waits on
//! stderr; without one, the line is a `tracing` event like any other.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Where finished access lines go (the binary's log writer).
pub trait LineWriter: Send + Sync {
    /// Takes one line, newline included; must not block.
    fn write_line(&self, line: &[u8]);
}

/// Lines as `tracing` events (what a gateway without the binary's writer
/// uses: tests, embedders).
#[derive(Debug)]
pub struct TracingLines;

impl LineWriter for TracingLines {
    fn write_line(&self, line: &[u8]) {
        tracing::info!(target: TARGET, "{}", String::from_utf8_lossy(line).trim_end());
    }
}

/// The layout of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// `tracing`'s default: timestamp, level, target, message, `key=value`.
    Human,
    /// `tracing`'s JSON: `{"timestamp", "level", "fields": {...}, "target"}`.
    Json,
}

/// The access log's output.
#[derive(Clone)]
pub struct AccessLog {
    format: LineFormat,
    writer: Arc<dyn LineWriter>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog").field("format", &self.format).finish_non_exhaustive()
    }
}

impl AccessLog {
    /// Lines in `format` to `writer`.
    pub fn new(format: LineFormat, writer: Arc<dyn LineWriter>) -> AccessLog {
        AccessLog { format, writer }
    }

    /// Writes the line of one request.
    pub fn write(&self, line: &Line<'_>) {
        let mut out = String::with_capacity(384);
        line.format(self.format, SystemTime::now(), &mut out);
        self.writer.write_line(out.as_bytes());
    }
}

/// What an access line says about one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    /// The request id.
    pub request_id: &'a str,
    /// The virtual key's id, or `-`.
    pub key: &'a str,
    /// The caller's protocol.
    pub ingress: &'a str,
    /// The pool named, or `-`.
    pub pool: &'a str,
    /// The lane that served or last failed, or `-`.
    pub lane: &'a str,
    /// The status the caller got.
    pub status: u16,
    /// Streamed.
    pub stream: bool,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost at today's prices.
    pub usd: f64,
    /// Time to first byte, when a byte went out (written in ms).
    pub ttfb: Option<Duration>,
    /// Total time (written in ms).
    pub total: Duration,
    /// Lanes that failed before the one that answered.
    pub failovers: u32,
    /// The tokens are the gateway's estimate.
    pub estimated: bool,
}

/// A field's value.
enum Field<'a> {
    Str(&'a str),
    Int(u64),
    Float(f64),
    /// Milliseconds, to the microsecond.
    Millis(Duration),
    Bool(bool),
}

impl Line<'_> {
    fn fields(&self) -> [(&'static str, Option<Field<'_>>); 14] {
        [
            ("request_id", Some(Field::Str(self.request_id))),
            ("key", Some(Field::Str(self.key))),
            ("ingress", Some(Field::Str(self.ingress))),
            ("pool", Some(Field::Str(self.pool))),
            ("lane", Some(Field::Str(self.lane))),
            ("status", Some(Field::Int(u64::from(self.status)))),
            ("stream", Some(Field::Bool(self.stream))),
            ("input_tokens", Some(Field::Int(self.input_tokens))),
            ("output_tokens", Some(Field::Int(self.output_tokens))),
            ("usd", Some(Field::Float(self.usd))),
            ("ttfb_ms", self.ttfb.map(Field::Millis)),
            ("total_ms", Some(Field::Millis(self.total))),
            ("failovers", Some(Field::Int(u64::from(self.failovers)))),
            ("estimated", Some(Field::Bool(self.estimated))),
        ]
    }

    /// Appends the line (newline included) as of `now` to `out`.
    pub fn format(&self, format: LineFormat, now: SystemTime, out: &mut String) {
        let json = format == LineFormat::Json;
        if json {
            out.push_str(r#"{"timestamp":""#);
        }
        let _ = write!(out, "{}", humantime::format_rfc3339_micros(now));
        out.push_str(if json {
            r#"","level":"INFO","fields":{"message":"request""#
        } else {
            "  INFO switchyard::access: request"
        });
        let mut numbers = itoa::Buffer::new();
        let mut floats = ryu::Buffer::new();
        for (name, value) in self.fields() {
            let Some(value) = value else { continue };
            if json {
                out.push_str(",\"");
                out.push_str(name);
                out.push_str("\":");
            } else {
                out.push(' ');
                out.push_str(name);
                out.push('=');
            }
            match value {
                Field::Str(text) if json => json_string(text, out),
                Field::Str(text) => quoted(text, out),
                Field::Int(n) => out.push_str(numbers.format(n)),
                // Neither can be NaN or infinite; JSON could not say so anyway.
                Field::Float(x) if !x.is_finite() => out.push_str(if json { "null" } else { "NaN" }),
                Field::Float(x) => out.push_str(floats.format_finite(x)),
                Field::Millis(duration) => push_millis(out, duration),
                Field::Bool(b) => out.push_str(if b { "true" } else { "false" }),
            }
        }
        if json {
            out.push_str(r#"},"target":""#);
            out.push_str(TARGET);
            out.push_str("\"}");
        }
        out.push('\n');
    }
}

/// `duration` in milliseconds to the microsecond (`12.034`), written
/// without float formatting.
pub fn push_millis(out: &mut String, duration: Duration) {
    // In u64 (585,000 years of microseconds): itoa formats u128 far slower.
    let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    let mut numbers = itoa::Buffer::new();
    out.push_str(numbers.format(micros / 1000));
    out.push('.');
    let fraction = numbers.format(1000 + micros % 1000);
    out.push_str(&fraction[1..]);
}

/// The target access lines are filed under (a log filter can single them out).
pub const TARGET: &str = "switchyard::access";

/// True when `text` can be written between quotes as it is.
fn plain(text: &str) -> bool {
    text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f)
}

/// `text` in double quotes with `"`, `\` and control characters escaped
/// (as `tracing` writes a `Debug` string), so a caller's request id cannot
/// forge a field or a line.
fn quoted(text: &str, out: &mut String) {
    out.push('"');
    if plain(text) {
        out.push_str(text);
    } else {
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => {
                    let _ = write!(out, "{}", c.escape_default());
                }
                c => out.push(c),
            }
        }
    }
    out.push('"');
}

fn json_string(text: &str, out: &mut String) {
    if plain(text) {
        out.push('"');
        out.push_str(text);
        out.push('"');
        return;
    }
    match serde_json::to_string(text) {
        Ok(encoded) => out.push_str(&encoded),
        Err(_) => out.push_str("\"\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn line() -> Line<'static> {
        Line {
            request_id: "req-1",
            key: "key_abc",
            ingress: "openai",
            pool: "demo",
            lane: "demo-openai",
            status: 200,
            stream: false,
            input_tokens: 12,
            output_tokens: 9,
            usd: 0.000_005_55,
            ttfb: Some(Duration::from_micros(209)),
            total: Duration::from_micros(1_224_050),
            failovers: 0,
            estimated: false,
        }
    }

    fn at() -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(1_796_073_866_513_750)
    }

    #[test]
    fn the_human_line_reads_like_every_other_log_line() {
        let mut out = String::new();
        line().format(LineFormat::Human, at(), &mut out);
        assert_eq!(
            out,
            "2026-11-30T21:24:26.513750Z  INFO switchyard::access: request request_id=\"req-1\" key=\"key_abc\" \
             ingress=\"openai\" pool=\"demo\" lane=\"demo-openai\" status=200 stream=false input_tokens=12 \
             output_tokens=9 usd=5.55e-6 ttfb_ms=0.209 total_ms=1224.050 failovers=0 estimated=false\n"
        );
    }

    #[test]
    fn the_json_line_is_json_in_tracings_layout() {
        let mut out = String::new();
        let mut no_byte = line();
        no_byte.ttfb = None;
        no_byte.request_id = "a\"b\\c\nd";
        no_byte.format(LineFormat::Json, at(), &mut out);
        assert!(out.ends_with('\n'));
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["level"], "INFO");
        assert_eq!(value["target"], "switchyard::access");
        assert_eq!(value["timestamp"], "2026-11-30T21:24:26.513750Z");
        let fields = &value["fields"];
        assert_eq!(fields["message"], "request");
        assert_eq!(fields["request_id"], "a\"b\\c\nd");
        assert_eq!(fields["status"], 200);
        assert_eq!(fields["usd"], 0.000_005_55);
        assert!(fields.get("ttfb_ms").is_none());
        assert_eq!(fields["total_ms"], 1224.05);
    }

    #[test]
    fn a_request_id_cannot_forge_fields_or_lines() {
        let mut out = String::new();
        let mut forged = line();
        forged.request_id = "x\" status=500\nfake line";
        forged.format(LineFormat::Human, at(), &mut out);
        assert_eq!(out.matches('\n').count(), 1, "{out}");
        assert!(out.contains(r#"request_id="x\" status=500\nfake line""#), "{out}");
    }
}
