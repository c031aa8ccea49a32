//! The contract every protocol codec implements, and the pieces they share.
//!
//! A codec is pure: it turns bytes into IR and IR into bytes, with no I/O, no
//! clock (time is passed in where signing needs it), no logging and no global
//! state. One codec per protocol lives in its own crate
//! (`switchyard-protocol-<name>`); `switchyard-protocol` gathers them into a
//! registry keyed by [`Protocol`].

pub mod auth;
pub mod aws;
pub mod beside;
pub mod call_id;
pub mod continuation;
pub mod count;
pub mod effort;
pub mod embed;
pub mod embed_by_type;
pub mod form;
pub mod frame;
pub mod function;
pub mod hide;
pub mod image;
pub mod ingress;
pub mod json;
pub mod lineage;
pub mod logprobs;
pub mod media;
pub mod opaque;
pub mod prefix;
pub mod rerank;
pub mod scan;
pub mod signature;
pub mod system;
pub mod tap;

pub use auth::{bearer_header, key_header, AuthError, Credentials, Outbound};
use http::{HeaderName, HeaderValue};
pub use switchyard_ir as ir;
pub use switchyard_ir::Protocol;
use switchyard_ir::{Capabilities, Dropped, ErrorInfo, ErrorKind, Field, Request, Response, StreamEvent};

/// The leaf path of a dropped field as the caller of `codec`'s protocol
/// wrote it: the protocol's own path for a modelled parameter, the caller's
/// path for an unmodelled field, else the field's fixed name.
pub fn dropped_path<'a>(codec: &dyn Codec, dropped: &'a Dropped) -> std::borrow::Cow<'a, str> {
    match (&dropped.extra_path, codec.parameter_path(dropped.field)) {
        (Some(path), _) => std::borrow::Cow::Borrowed(path.as_str()),
        (None, Some(path)) => std::borrow::Cow::Borrowed(path),
        (None, None) => std::borrow::Cow::Borrowed(dropped.field.as_str()),
    }
}

/// Bytes written by a codec, with what could not be expressed in them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded {
    /// The wire body.
    pub body: Vec<u8>,
    /// Fields the target protocol could not carry (for logs and metrics).
    pub dropped: Vec<Dropped>,
}

/// Why bytes could not be read as the protocol's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, or not the JSON shape the protocol defines.
    #[error("malformed json: {0}")]
    Json(String),
    /// Well-formed but invalid (a missing required field, a bad value).
    #[error("{message}")]
    Invalid {
        /// What is wrong, lowercase, no trailing period.
        message: String,
        /// The offending parameter, when known.
        param: Option<String>,
    },
    /// A stream frame that breaks the framing (bad prelude, CRC mismatch).
    #[error("malformed stream frame: {0}")]
    Frame(String),
}

impl DecodeError {
    /// An invalid-request error naming the parameter at fault.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> DecodeError {
        DecodeError::Invalid { message: message.into(), param: Some(param.into()) }
    }

    /// The caller-facing error this decode failure becomes.
    pub fn to_error_info(&self) -> ErrorInfo {
        let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, self.to_string());
        if let DecodeError::Invalid { param, .. } = self {
            info.param = param.clone();
        }
        info
    }
}

impl From<serde_json::Error> for DecodeError {
    fn from(err: serde_json::Error) -> DecodeError {
        DecodeError::Json(err.to_string())
    }
}

/// Turns a protocol's stream bytes into IR events, whatever the chunking.
pub trait StreamDecoder: Send {
    /// Consumes one chunk (any split, even mid-frame) and appends the events
    /// it completes.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError>;
    /// The upstream closed: flush what remains. A stream that ended without
    /// its terminator yields no synthetic `MessageStop`; the caller decides.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError>;
    /// The answer is complete (its finish reason arrived) and only the
    /// stream's terminator is still to come: a relay that hears nothing
    /// more finishes the stream instead of failing it.
    fn answered(&self) -> bool {
        false
    }
    /// The answer's usage has arrived but is held for the closing event
    /// (OpenAI's trailing usage chunk): with [`answered`](Self::answered),
    /// nothing but the terminator is left to come.
    fn usage_seen(&self) -> bool {
        false
    }
}

/// Turns IR events into a protocol's stream bytes.
pub trait StreamEncoder: Send {
    /// Appends the wire bytes for one event (possibly none, possibly several
    /// frames). `StreamEvent::Error` becomes the protocol's in-stream error.
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>);
    /// The stream is over: append any closing bytes the framing needs.
    fn finish(&mut self, out: &mut Vec<u8>);
}

/// How a stream is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream`.
    Sse,
    /// A JSON array streamed element by element (Gemini without `alt=sse`).
    JsonArray,
    /// AWS `application/vnd.amazon.eventstream` binary frames.
    EventStream,
}

impl Framing {
    /// The `content-type` of a stream in this framing.
    pub fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::JsonArray => "application/json",
            Framing::EventStream => "application/vnd.amazon.eventstream",
        }
    }
}

/// The upstream's error, as its protocol reported it (stage 1a of failure
/// disposition). Classification into a disposition happens above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawUpstreamError {
    /// HTTP status.
    pub status: u16,
    /// The class the protocol's own type/code and message imply.
    pub kind: ErrorKind,
    /// The vendor's error type (`invalid_request_error`, `ThrottlingException`, `RESOURCE_EXHAUSTED`).
    pub vendor_type: Option<String>,
    /// The vendor's finer error code, when it has one (`context_length_exceeded`).
    pub vendor_code: Option<String>,
    /// The vendor's message.
    pub message: String,
}

impl RawUpstreamError {
    /// The caller-facing error: the vendor's message and status, with its
    /// type kept as the code.
    pub fn to_error_info(&self) -> ErrorInfo {
        ErrorInfo {
            kind: self.kind,
            status: self.status,
            message: self.message.clone(),
            code: self.vendor_code.clone().or_else(|| self.vendor_type.clone()),
            param: None,
        }
    }
}

/// A caller header a lane of the caller's own protocol gets as it came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerHeader {
    /// Its name (lower case).
    pub name: &'static str,
    /// It turns on features of the vendor: a lane of another protocol that
    /// does not get it reports it dropped. A version header is not (the
    /// lane's writer speaks its own version), nor a header the codec reads
    /// into the IR ([`Codec::read_headers`]: Anthropic's betas), whose
    /// writers carry it or report it.
    pub features: bool,
    /// It selects or attributes within the caller's own account at the
    /// vendor (Anthropic's workspace and user profile): it goes only to a
    /// lane of the caller's protocol that sends the caller's own key
    /// (`passthrough_credentials`), and any other lane reports it dropped
    /// (the operator's `forward_headers` may still pass it on). The
    /// operator's key may belong to another workspace, or to several.
    pub credential: bool,
}

/// An error response ready to send: status, extra headers, JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers beyond `content-type: application/json` (Bedrock's `x-amzn-errortype`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The protocol's error JSON.
    pub body: Vec<u8>,
}

/// What admission reads of a request: the largest output it allows and how
/// many replies it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metered {
    /// The most output tokens per reply the request allows, when it says
    /// (the largest of the members that name it).
    pub max_tokens: Option<u64>,
    /// Replies asked for (at least 1).
    pub choices: u64,
}

/// One protocol's reader and writer.
pub trait Codec: Send + Sync {
    /// Which protocol this is.
    fn protocol(&self) -> Protocol;

    /// Wire request → IR. Path-model protocols leave `model` empty.
    fn read_request(&self, body: &[u8]) -> Result<Request, DecodeError>;
    /// Reads into `request` what the caller's headers say of it beside its
    /// body (Anthropic's `anthropic-beta`: `Request::betas`). Whoever reads a
    /// caller's request to write it for a lane calls it once, after
    /// [`Codec::read_request`].
    fn read_headers(&self, headers: &http::HeaderMap, request: &mut Request) {
        let _ = (headers, request);
    }
    /// IR → wire request for a model that takes `capabilities`: what the
    /// model is not said to take is not sent, and is reported in `dropped`.
    fn write_request_for(&self, request: &Request, capabilities: &Capabilities) -> Encoded;
    /// IR → wire request for a model that takes only what every model of
    /// the protocol takes.
    fn write_request(&self, request: &Request) -> Encoded {
        self.write_request_for(request, &Capabilities::default())
    }
    /// Where this protocol's requests carry a parameter, as a dotted leaf
    /// path (`generationConfig.topK`); `None` where it has no field for it.
    /// Drop reports name the caller's field with it, and the docs'
    /// parameter table is generated from it.
    fn parameter_path(&self, field: Field) -> Option<&'static str>;
    /// Wire response → IR.
    fn read_response(&self, body: &[u8]) -> Result<Response, DecodeError>;
    /// IR → wire response.
    fn write_response(&self, response: &Response) -> Encoded;

    /// A decoder for an upstream stream in this protocol.
    fn stream_decoder(&self) -> Box<dyn StreamDecoder>;
    /// An encoder for a caller's stream in this protocol.
    fn stream_encoder(&self, framing: Framing) -> Box<dyn StreamEncoder>;
    /// The bytes that end a stream of this protocol when they stand alone
    /// (`data: [DONE]`), for a passthrough whose upstream never sent them.
    /// `None` where the last event carries the reply itself, or the close
    /// of the connection is the end.
    fn stream_terminator(&self, framing: Framing) -> Option<&'static [u8]> {
        let _ = framing;
        None
    }
    /// An encoder for a caller whose request body was `request`: protocols
    /// whose stream shape depends on request options read them here
    /// (OpenAI sends its usage chunk only when `stream_options.include_usage`
    /// asked for it).
    fn stream_encoder_for(&self, framing: Framing, request: &[u8]) -> Box<dyn StreamEncoder> {
        let _ = request;
        self.stream_encoder(framing)
    }
    /// True when a passthrough stream for a caller whose request body was
    /// `request` carries the upstream's usage (OpenAI Chat sends it only
    /// when `stream_options.include_usage` asked). A stream that does not
    /// is translated instead when it must be metered: the writer asks for
    /// usage, and the caller's encoder leaves the usage chunk out.
    fn stream_reports_usage(&self, request: &[u8]) -> bool {
        let _ = request;
        true
    }

    /// A streaming request rewritten to ask the upstream for usage, for a
    /// metered stream that does not (see [`Codec::stream_reports_usage`]);
    /// `None` when this protocol cannot, and the stream is translated.
    fn request_stream_usage(&self, request: &[u8]) -> Option<Vec<u8>> {
        let _ = request;
        None
    }

    /// Takes out of a passthrough stream what [`Codec::request_stream_usage`]
    /// added, so the caller gets the stream it asked for.
    fn stream_usage_filter(&self) -> Option<hide::EventFilter> {
        None
    }

    /// The framing this protocol streams in by default.
    fn default_framing(&self) -> Framing {
        Framing::Sse
    }

    /// Decodes a stream given as `chunks`, in order, and finishes it.
    fn decode_stream(&self, chunks: &[&[u8]]) -> Result<Vec<StreamEvent>, DecodeError> {
        let mut decoder = self.stream_decoder();
        let mut events = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut events)?;
        }
        decoder.finish(&mut events)?;
        Ok(events)
    }

    /// Encodes a whole event sequence in `framing`, closing bytes included.
    fn encode_stream(&self, framing: Framing, events: &[StreamEvent]) -> Vec<u8> {
        let mut encoder = self.stream_encoder(framing);
        let mut out = Vec::new();
        for event in events {
            encoder.encode(event, &mut out);
        }
        encoder.finish(&mut out);
        out
    }

    /// The paths this protocol's callers post to, as data the HTTP surface
    /// builds its routes from (see [`ingress`]).
    fn ingress(&self) -> &'static ingress::Ingress;
    /// Whether the upstream path names the model (Gemini, Bedrock) rather
    /// than the body: the vendor fake reads it from there too.
    fn model_in_path(&self) -> bool;
    /// Path and query of the upstream endpoint for `model`.
    fn upstream_path(&self, model: &str, stream: bool) -> String;
    /// What a provider's path template puts in `{action}` for a chat call:
    /// this protocol's name for it on a cloud's own path (Vertex AI's
    /// `generateContent` and `rawPredict`, Azure's `chat/completions`); a
    /// query it needs (`?alt=sse`) comes after.
    fn path_action(&self, stream: bool) -> &'static str;
    /// Headers that authenticate an outbound call.
    fn auth_headers(
        &self,
        credentials: &Credentials,
        outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError>;

    /// Where a request names its most output tokens: member paths from the
    /// top level, tried in order (`[["max_completion_tokens"], ["max_tokens"]]`,
    /// `[["generationConfig", "maxOutputTokens"]]`). Empty: read the request.
    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[]
    }

    /// The output cap this protocol's vendor applies to a request that
    /// names none, when it has one (OpenAI's legacy completions: 16):
    /// admission reserves it, not the gateway's default.
    fn default_max_tokens(&self) -> Option<u64> {
        None
    }

    /// Where a request asks for several replies at once (OpenAI `n`, Gemini
    /// `candidateCount`): each is billed its own output. Empty: one reply.
    fn choices_members(&self) -> &'static [&'static [&'static str]] {
        &[]
    }

    /// The headers a caller of this protocol sends that reach a lane of
    /// the same protocol as they came (`anthropic-beta`), and what each is.
    /// Every other caller header stays at the gateway, but for those an
    /// operator lists in `forward_headers`.
    fn caller_headers(&self) -> &'static [CallerHeader] {
        &[]
    }

    /// Where this protocol keeps a conversation's head (system prompt,
    /// tools, first turn), for prompt-cache affinity; `None`: not a
    /// conversation.
    fn prefix_shape(&self) -> Option<prefix::PrefixShape> {
        None
    }

    /// A conversation's head in `body`, hashed (`prefix::prefix`).
    fn prompt_prefix(&self, body: &[u8]) -> Option<prefix::Prefix> {
        prefix::prefix(body, &self.prefix_shape()?)
    }

    /// Whether `body`, a request of this protocol, may hold audio input: a
    /// byte search for where the protocol keeps it, never a parse (a text
    /// that happens to quote the marker only costs a translation). A
    /// same-protocol request that may hold audio, bound for a model that
    /// takes none, is translated instead of sent as it came, so the audio
    /// is dropped and reported rather than refused by the vendor. `false`
    /// for a protocol without audio input.
    fn may_hold_audio(&self, _body: &[u8]) -> bool {
        false
    }

    /// Member names whose string values carry inline media (base64 images,
    /// documents, audio) in this protocol: the prompt estimate counts those
    /// as media and every other string as text.
    fn media_members(&self) -> &'static [&'static str] {
        &[]
    }

    /// Where this protocol's bodies hold strings that are not text as
    /// written (inline media, signed state): guardrails screen every other
    /// string ([`opaque`]).
    fn opaque(&self) -> opaque::Opaque {
        opaque::Opaque::NONE
    }

    /// How this protocol lets a past turn's signed reasoning go, where its
    /// vendor says it may ([`opaque::PastReasoning`]); `None`: it never
    /// does, or the vendor does not say.
    fn past_reasoning(&self) -> Option<&'static opaque::PastReasoning> {
        None
    }

    /// The top-level members whose values admission reads: the first
    /// name of each path in [`Codec::max_tokens_members`],
    /// [`Codec::choices_members`] and [`Codec::end_user_member`] (at most
    /// [`scan::FOUND`]). The ingress finds them in the scan it makes anyway
    /// ([`scan::scan_request`]).
    fn metered_heads(&self) -> &'static [&'static str] {
        &[]
    }

    /// Where a request names its end user (OpenAI `user`, Anthropic
    /// `metadata.user_id`, Bedrock `requestMetadata.user`); empty: the
    /// protocol has no such field.
    fn end_user_member(&self) -> &'static [&'static str] {
        &[]
    }

    /// The end user a request names in its own field. `found`: what the
    /// ingress scan found of [`Codec::metered_heads`] (`None` when it did
    /// not look, and the body is scanned here). A string, or nothing.
    fn end_user<'a>(&self, body: &'a [u8], found: Option<&scan::Found>) -> Option<std::borrow::Cow<'a, str>> {
        let (head, rest) = self.end_user_member().split_first()?;
        let looked = found.zip(self.metered_heads().iter().position(|h| h == head));
        let value = match looked {
            // The scan looked for it: absent there is absent.
            Some((found, at)) => {
                let (start, end) = (*found.get(at)?)?;
                body.get(start as usize..end as usize)?
            }
            None => scan::member_once(body, &[head]).ok()??,
        };
        let value = scan::member_once(value, rest).ok()??;
        scan::string_body(value.strip_prefix(b"\"")?.strip_suffix(b"\"")?)
    }

    /// What admission reads of a request, without a full parse where the
    /// protocol says where it is. Every member it reads must be named once
    /// (as `model` must): a body that names one twice is refused, because
    /// the upstream may read the other one.
    fn metered(&self, body: &[u8]) -> Result<Metered, scan::ScanError> {
        let top = scan::scan_request(body, self.metered_heads())?;
        self.metered_from(body, &top.found)
    }

    /// [`Codec::metered`] from the members a scan already found (`found`,
    /// in [`Codec::metered_heads`] order): only nested objects are walked.
    fn metered_from(&self, body: &[u8], found: &scan::Found) -> Result<Metered, scan::ScanError> {
        let heads = self.metered_heads();
        let value = |path: &[&'static str]| -> Result<Option<u64>, scan::ScanError> {
            let Some((head, rest)) = path.split_first() else { return Ok(None) };
            let Some((start, end)) = heads.iter().position(|h| h == head).and_then(|at| *found.get(at)?) else {
                return Ok(None);
            };
            let Some(value) = body.get(start as usize..end as usize) else { return Ok(None) };
            Ok(scan::member_once(value, rest)?.and_then(scan::count))
        };
        let members = self.max_tokens_members();
        let max_tokens = if members.is_empty() {
            self.read_request(body).ok().and_then(|request| request.max_tokens)
        } else {
            let mut most: Option<u64> = None;
            for path in members {
                if let Some(value) = value(path)? {
                    most = Some(most.map_or(value, |m| m.max(value)));
                }
            }
            most
        };
        let max_tokens = max_tokens.or_else(|| self.default_max_tokens());
        let mut choices = 1;
        for path in self.choices_members() {
            if let Some(value) = value(path)? {
                choices = choices.max(value);
            }
        }
        Ok(Metered { max_tokens, choices })
    }

    /// The usage of a complete reply, for metering a passthrough. The default
    /// reads the whole reply; codecs override it to read only the usage.
    fn read_usage(&self, body: &[u8]) -> Option<switchyard_ir::Usage> {
        self.read_response(body).ok().map(|response| response.usage)
    }

    /// Why a whole reply stopped, read cheaply when the protocol allows
    /// (a passthrough reply is not parsed otherwise; traces want it).
    fn read_stop_reason(&self, body: &[u8]) -> Option<switchyard_ir::StopReason> {
        self.read_response(body).ok()?.stop_reason
    }

    /// This protocol's native token counting, when it has one.
    fn count(&self) -> Option<&dyn count::CountCodec> {
        None
    }

    /// This protocol's rerank, when it has one.
    fn rerank(&self) -> Option<&dyn rerank::RerankCodec> {
        None
    }

    /// This protocol's embeddings, when it has them.
    fn embed(&self) -> Option<&dyn embed::EmbedCodec> {
        None
    }

    /// This protocol's image generation, when it has it.
    fn image(&self) -> Option<&dyn image::ImageCodec> {
        None
    }

    /// The codec of this protocol's legacy text completions, when it has
    /// them (OpenAI's `/v1/completions`): a whole codec of its own, whose
    /// requests, replies and streams are the completions shapes and whose
    /// IR is chat's (the prompt one user message). A completion's caller
    /// and a lane of this protocol are read and written with it.
    fn completions(&self) -> Option<&dyn Codec> {
        None
    }

    /// Stage 1a: what the upstream said went wrong.
    fn extract_error(&self, status: u16, body: &[u8]) -> RawUpstreamError;
    /// The protocol's own error response for `error`.
    fn error_response(&self, error: &ErrorInfo) -> ErrorResponse;
}

/// A request of one token, used by active health probes.
pub fn probe_request(model: &str) -> Request {
    Request {
        model: model.to_owned(),
        messages: vec![switchyard_ir::Message::text(switchyard_ir::Role::User, "ping")],
        max_tokens: Some(1),
        ..Request::default()
    }
}

/// Percent-encodes caller-influenced text (a model name) as one URL path
/// segment: every byte but the unreserved `A-Z a-z 0-9 - . _ ~` is encoded,
/// so `/`, `?`, `#`, `:` and `%` can neither add a segment, start a query
/// or fragment, nor be decoded into one upstream. Borrowed when nothing
/// needs encoding (the common case).
pub fn path_segment(raw: &str) -> std::borrow::Cow<'_, str> {
    let plain = |byte: u8| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~');
    if raw.bytes().all(plain) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut encoded = String::with_capacity(raw.len() + 16);
    for byte in raw.bytes() {
        if plain(byte) {
            encoded.push(char::from(byte));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            encoded.push('%');
            encoded.push(char::from(HEX[usize::from(byte >> 4)]));
            encoded.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
    std::borrow::Cow::Owned(encoded)
}

/// The longest excerpt, in characters, of an error body that is not the
/// protocol's error JSON (a proxy's HTML page, plain text) kept as a message.
pub const MAX_ERROR_EXCERPT: usize = 1000;

/// The text of an error body that is not the protocol's error JSON, trimmed
/// and cut at [`MAX_ERROR_EXCERPT`] characters (empty for a blank body).
pub fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(MAX_ERROR_EXCERPT) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.to_owned(),
    }
}

/// An upstream's error message, or a sentence naming the status when the
/// upstream gave none.
pub fn message_or_status(message: String, status: u16) -> String {
    if message.is_empty() {
        format!("upstream returned status {status}")
    } else {
        message
    }
}

/// True when an upstream message says the prompt did not fit the context
/// window; vendors signal this only in prose or in codes that vary by model.
pub fn mentions_context_length(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "exceeds the maximum number of tokens",
        "input token count",
        "too long for the model",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_cannot_leave_their_segment() {
        assert!(matches!(path_segment("gemini-2.5-flash"), std::borrow::Cow::Borrowed("gemini-2.5-flash")));
        assert_eq!(path_segment("a/b?c#d"), "a%2Fb%3Fc%23d");
        assert_eq!(path_segment("a%2Fb"), "a%252Fb");
        assert_eq!(path_segment("v1:0 é"), "v1%3A0%20%C3%A9");
    }

    #[test]
    fn error_bodies_become_bounded_messages() {
        assert_eq!(body_excerpt(b"  <html>bad gateway</html>\n"), "<html>bad gateway</html>");
        assert_eq!(body_excerpt("é".repeat(5000).as_bytes()).chars().count(), MAX_ERROR_EXCERPT);
        assert_eq!(message_or_status(body_excerpt(b" \n"), 504), "upstream returned status 504");
        assert_eq!(message_or_status("no".to_owned(), 504), "no");
    }
}
