//! The deterministic vendor fake behind `mock://` lanes and
//! `switchyard mock-upstream`. It reads the request with the protocol's own
//! codec and answers in the same protocol, deriving everything from the
//! request: the reply names the protocol and model and echoes the last user
//! message; with tools it calls the first tool; with reasoning it thinks.
//! It refuses what its vendor refuses as far as the protocol's reader does
//! (an Anthropic message of a role the API does not know is a 400), what a
//! model refuses (`mock_rules`: sampling to a reasoning model, an effort
//! level it lacks, a system message inside the conversation of a Claude
//! model without them, a key Bedrock hands a model that does not know it),
//! and, as Anthropic and Bedrock do, signed reasoning whose text is not the
//! text it signed: its reasoning's signature is a keyed hash of the text
//! ([`reasoning_signature`]).
//!
//! A lane asked for OpenAI's legacy completion (its codec speaks
//! `/v1/completions`) is answered as OpenAI answers one: a `cmpl-` id, the
//! prompt before the answer when `echo` asks, and what OpenAI refuses of a
//! completion refused (`mock_rules::refused_completion`).
//!
//! For agents' tool loops: `[mock:tool=NAME {"arg": ...}]` in the last user
//! message calls tool NAME with those arguments (or arguments made from its
//! schema when none follow), `[mock:tool=none]` answers in text though
//! tools are offered; a conversation whose last turn (system messages
//! aside) holds a tool result gets the final answer, naming what the tool
//! returned. Its call ids have its vendor's form (`toolu_01…`, `call_…`,
//! `tooluse_…`, Cohere's `<tool>_…`) and end in a keyed check
//! ([`issued_id`]), so it knows its own: the answer to a result of a call
//! it issued says `(own call id)`, and a result naming no call of the
//! history is refused as its vendor refuses it ([`unanswered_result`]).
//!
//! Directives in the last user message drive failure tests:
//! `[mock:status=429]` answers that status in the protocol's error shape
//! (with `retry-after: 1` on 429/503), `[mock:context]` answers a
//! context-length error. For continuation tests: `[mock:plain]` answers
//! the caller's text alone (the same from every lane), `[mock:cut=N]` breaks
//! a `cut-` lane's stream off after N bytes of text, a `noprefill-` lane
//! refuses an assistant turn last, and an answer asked to go on is the
//! rest of the whole one (after a prefill), or the anchor the instruction
//! named and then the rest (`codec::continuation::instruction`). Lanes that
//! misbehave when asked to go on by instruction: a `restart-` lane starts
//! the whole answer again, an `unrelated-` lane answers something else.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use switchyard_codec::{Codec, Framing};
use switchyard_ir::{
    events_from_response, Block, BlockStart, Delta, ErrorInfo, ErrorKind, Protocol, Reasoning, Request, Response,
    StopReason, StreamEvent, ToolUse, Usage,
};

use crate::{chunked_body, full_body, UpstreamResponse};

/// The reasoning this fake gives when asked to think.
pub const MOCK_THOUGHT: &str = "the user wants a deterministic answer";

/// The key of the fake's reasoning signatures ([`reasoning_signature`]).
const SIGNING_KEY: &[u8] = b"switchyard-mock-reasoning-key";

/// Fixed creation time so replies are byte-for-byte reproducible.
const CREATED: i64 = 1_700_000_000;

/// Answers one upstream call. `path_model` is the model from the URL for
/// path protocols; `framing` is the stream framing the caller asked for.
pub fn respond(
    codec: &dyn Codec,
    path_model: Option<&str>,
    stream: bool,
    framing: Framing,
    body: &[u8],
) -> UpstreamResponse {
    respond_to(codec, path_model, stream, framing, body, &HeaderMap::new())
}

/// [`respond`] to a call that brought `headers`: the `anthropic-beta` it
/// was sent is named at the end of the reply's text, so a test sees which
/// caller headers reached the lane.
pub fn respond_to(
    codec: &dyn Codec,
    path_model: Option<&str>,
    stream: bool,
    framing: Framing,
    body: &[u8],
    headers: &HeaderMap,
) -> UpstreamResponse {
    let protocol = codec.protocol();
    let request = match codec.read_request(body) {
        Ok(request) => request,
        Err(err) => return error(codec, &err.to_error_info()),
    };
    let model = path_model.filter(|m| !m.is_empty()).unwrap_or(&request.model).to_owned();
    let last = request.last_user_text().unwrap_or_default();
    if let Some(info) = directive_error(&last) {
        return error(codec, &info);
    }
    if let Some(info) = crate::mock_rules::refused(protocol, &model, &request) {
        return error(codec, &info);
    }
    let completion = speaks_completions(codec);
    if let Some(info) = completion.then(|| crate::mock_rules::refused_completion(&request)).flatten() {
        return error(codec, &info);
    }
    // A `noprefill-` lane refuses an assistant turn last, as models that
    // take no prefill do.
    if model.starts_with("noprefill-")
        && request.messages.last().is_some_and(|m| m.role == switchyard_ir::Role::Assistant)
    {
        let info = ErrorInfo::new(ErrorKind::InvalidRequest, "this model does not support assistant message prefill")
            .with_status(400);
        return error(codec, &info);
    }
    let mut response = reply(protocol, &model, &request);
    if completion {
        as_completion(&mut response, &request, &last);
    }
    let mut betas: Vec<&str> = headers.get_all("anthropic-beta").iter().filter_map(|v| v.to_str().ok()).collect();
    // Claude on Bedrock takes them in its body.
    let bedrock_betas = request.extra.fields.get("additionalModelRequestFields").and_then(|f| f.get("anthropic_beta"));
    betas.extend(bedrock_betas.and_then(serde_json::Value::as_array).into_iter().flatten().filter_map(|v| v.as_str()));
    let mut notes = String::new();
    if !betas.is_empty() {
        notes.push_str(&format!(" [anthropic-beta: {}]", betas.join(",")));
    }
    // The audio the lane heard, by MIME type (inline) or URI, so a test
    // sees what a translation delivered.
    let heard = heard_audio(&request);
    if !heard.is_empty() {
        notes.push_str(&format!(" [audio: {}]", heard.join(",")));
    }
    if !notes.is_empty() {
        let note = notes;
        match response.content.iter_mut().rev().find_map(|block| match block {
            Block::Text(text) => Some(text),
            _ => None,
        }) {
            Some(text) => text.text.push_str(&note),
            None => response.content.push(Block::text(note.trim_start())),
        }
    }
    several(&mut response, &request);
    if !stream {
        let encoded = codec.write_response(&response);
        return UpstreamResponse { status: StatusCode::OK, headers: json_headers(), body: full_body(encoded.body) };
    }
    let mut encoder = codec.stream_encoder(framing);
    let mut chunks = Vec::new();
    // A `cut-` lane asked to `[mock:cut=N]` breaks off after N bytes of
    // content (text, thinking or tool arguments; 0: before any).
    let mut cut_at = cut_directive(&model, &last);
    for event in split_deltas(events_from_response(&response)) {
        let mut event = event;
        let mut cut_here = false;
        if let (
            Some(left),
            StreamEvent::BlockDelta {
                delta: Delta::Text(piece) | Delta::Thinking(piece) | Delta::ToolInput(piece),
                ..
            },
        ) = (cut_at.as_mut(), &mut event)
        {
            if *left == 0 {
                return UpstreamResponse {
                    status: StatusCode::OK,
                    headers: stream_headers(framing),
                    body: chunked_body(chunks),
                };
            }
            if piece.len() >= *left {
                let mut end = *left;
                while !piece.is_char_boundary(end) {
                    end -= 1;
                }
                piece.truncate(end);
                cut_here = true;
            }
            *left -= piece.len().min(*left);
        }
        let mut out = Vec::new();
        encoder.encode(&event, &mut out);
        if !out.is_empty() {
            chunks.push(Bytes::from(out));
        }
        if cut_here {
            let headers = stream_headers(framing);
            return UpstreamResponse { status: StatusCode::OK, headers, body: chunked_body(chunks) };
        }
    }
    let mut tail = Vec::new();
    encoder.finish(&mut tail);
    if !tail.is_empty() {
        chunks.push(Bytes::from(tail));
    }
    UpstreamResponse { status: StatusCode::OK, headers: stream_headers(framing), body: chunked_body(chunks) }
}

/// Each audio block of `request`: `<MIME type>` for inline bytes,
/// `<MIME type or ?> <URI>` for a reference.
fn heard_audio(request: &Request) -> Vec<String> {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|block| match block {
            Block::Audio { source: switchyard_ir::MediaSource::Base64 { media_type, .. } } => Some(media_type.clone()),
            Block::Audio { source: switchyard_ir::MediaSource::Url { url, media_type } } => {
                Some(format!("{} {url}", media_type.as_deref().unwrap_or("?")))
            }
            _ => None,
        })
        .collect()
}

/// The replies after the first a request asks for (`n`,
/// `candidateCount`: each the first's content, its text marked
/// `(choice i)`), and every reply's log probabilities when asked for, as
/// the vendors that have them answer.
fn several(response: &mut Response, request: &Request) {
    for index in 1..=request.extra_choices().min(MOST_CHOICES) {
        let mut content = response.content.clone();
        if let Some(text) = content.iter_mut().find_map(|block| match block {
            Block::Text(text) => Some(text),
            _ => None,
        }) {
            text.text.push_str(&format!(" (choice {index})"));
        }
        response.choices.push(switchyard_ir::Choice {
            content,
            stop_reason: response.stop_reason,
            logprobs: Vec::new(),
        });
    }
    let extra = response.choices.len() as u64;
    response.usage.output_tokens += response.usage.output_tokens * extra;
    let Some(top) = request.logprobs else { return };
    response.logprobs = token_logprobs(&response.content, top);
    for choice in &mut response.choices {
        choice.logprobs = token_logprobs(&choice.content, top);
    }
}

/// The most replies the fake makes for one request.
const MOST_CHOICES: u32 = 8;

/// The fake's tokens of a reply's first text: its pieces up to and with
/// each space, each with a log probability and `top` alternatives (the
/// token itself first) drawn from its text.
pub fn token_logprobs(content: &[Block], top: u32) -> Vec<switchyard_ir::TokenLogprob> {
    let Some(text) = content.iter().find_map(|block| match block {
        Block::Text(text) => Some(text.text.as_str()),
        _ => None,
    }) else {
        return Vec::new();
    };
    let logprob = |token: &str| -((fnv1a(token.as_bytes()) % 4096) as f64) / 1024.0;
    let id = |token: &str| (fnv1a(token.as_bytes()) % 100_000) as i64;
    text.split_inclusive(' ')
        .map(|token| switchyard_ir::TokenLogprob {
            token: token.to_owned(),
            logprob: logprob(token),
            bytes: None,
            id: Some(id(token)),
            top: (0..top)
                .map(|place| {
                    let alternative = if place == 0 { token.to_owned() } else { format!("{token}~{place}") };
                    switchyard_ir::TopLogprob {
                        logprob: logprob(token) - f64::from(place),
                        id: Some(id(&alternative)),
                        token: alternative,
                        bytes: None,
                    }
                })
                .collect(),
        })
        .collect()
}

/// Whether `codec` speaks OpenAI's legacy completions.
fn speaks_completions(codec: &dyn Codec) -> bool {
    codec.protocol() == Protocol::OpenAi && codec.path_action(false) == "completions"
}

/// A reply made a completion as OpenAI makes one: its id `cmpl-`, the
/// prompt before the text when the request asked for `echo`.
fn as_completion(response: &mut Response, request: &Request, prompt: &str) {
    response.id = format!("cmpl-{}", response.id.trim_start_matches("mock-"));
    if request.extra.fields.get("echo") == Some(&serde_json::Value::Bool(true)) {
        match response.content.iter_mut().find_map(|block| match block {
            Block::Text(text) => Some(text),
            _ => None,
        }) {
            Some(text) => text.text.insert_str(0, prompt),
            None => response.content.insert(0, Block::text(prompt)),
        }
    }
}

fn stream_headers(framing: Framing) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(framing.content_type()));
    headers
}

/// `[mock:cut=N]` on a lane whose wire model starts with `cut-`: the
/// stream breaks off after N bytes of content (no finish, no terminator).
fn cut_directive(model: &str, text: &str) -> Option<usize> {
    if !model.starts_with("cut-") {
        return None;
    }
    let start = text.find("[mock:cut=")? + "[mock:cut=".len();
    text[start..].split(']').next()?.parse().ok()
}

/// How a request asks to go on from text of an answer.
enum Continued {
    /// An assistant turn last: the rest of the answer.
    Prefill(String),
    /// An assistant turn then the instruction: the anchor, then the rest.
    Instruction(String),
}

/// The conversation a reply answers, and how a continuation asks for the
/// rest of its answer: an assistant turn last (a prefill, trimmed), or an
/// assistant turn then the continuation instruction.
fn continued(request: &Request) -> (String, Option<Continued>) {
    let text_of = |message: &switchyard_ir::Message| -> String {
        message
            .content
            .iter()
            .filter_map(|b| if let Block::Text(t) = b { Some(t.text.as_str()) } else { None })
            .collect()
    };
    let messages = request.messages.as_slice();
    let user_before = |end: usize| {
        messages[..end].iter().rev().find(|m| m.role == switchyard_ir::Role::User).map(text_of).unwrap_or_default()
    };
    match messages {
        [.., before, last]
            if last.role == switchyard_ir::Role::User
                && text_of(last).starts_with(switchyard_codec::continuation::INSTRUCTION)
                && before.role == switchyard_ir::Role::Assistant =>
        {
            (user_before(messages.len() - 2), Some(Continued::Instruction(text_of(before))))
        }
        [.., last] if last.role == switchyard_ir::Role::Assistant => {
            (user_before(messages.len() - 1), Some(Continued::Prefill(text_of(last))))
        }
        _ => (request.last_user_text().unwrap_or_default(), None),
    }
}

/// The deterministic reply to `request`.
pub fn reply(protocol: Protocol, model: &str, request: &Request) -> Response {
    // A harness's system message after the last turn is not a turn.
    let last_message = request.messages.iter().rev().find(|m| m.role != switchyard_ir::Role::System);
    let tool_result = last_message.and_then(|m| {
        m.content.iter().find_map(|b| match b {
            Block::ToolResult(result) => Some(result),
            _ => None,
        })
    });
    let mut content = Vec::new();
    if wants_reasoning(request.reasoning.as_ref()) {
        content.push(Block::Thinking { text: MOCK_THOUGHT.into(), signature: Some(reasoning_signature(MOCK_THOUGHT)) });
    }
    let asked = request.last_user_text().as_deref().and_then(tool_directive);
    let tool = match &asked {
        Some(ToolDirective::None) => None,
        Some(ToolDirective::Call { name, .. }) => request.tools.iter().find(|tool| &tool.name == name),
        None => request.tools.first(),
    };
    let stop_reason = match (tool, tool_result) {
        (Some(tool), None) => {
            let input = match &asked {
                Some(ToolDirective::Call { arguments: Some(arguments), .. }) => arguments.clone(),
                _ => arguments_for(&tool.parameters),
            };
            let id = issued_id(protocol, &tool.name, &format!("{model}/{}/{input}", tool.name));
            let mut call = ToolUse::new(id, tool.name.clone(), input);
            if protocol == Protocol::Gemini {
                // Gemini signs the first function call of a step.
                call.signature = Some(mock_signature(&call.name));
            }
            content.push(Block::ToolUse(call));
            StopReason::ToolUse
        }
        (_, Some(result)) => {
            // Protocols whose results carry no name (OpenAI's) name the call.
            let called = request.messages.iter().flat_map(|m| &m.content).find_map(|block| match block {
                Block::ToolUse(call) if call.id == result.tool_use_id => Some(call),
                _ => None,
            });
            let name =
                result.name.clone().or(called.map(|call| call.name.clone())).unwrap_or_else(|| "tool".to_owned());
            let mut text = format!("[{protocol} {model}] tool {name} returned: {}", result.joined_text());
            if protocol == Protocol::Gemini {
                // Says whether the call came back with the signature this
                // fake gave it (a real Gemini reasons worse without it).
                let signed = signed_call(request, &name);
                text.push_str(if signed { " (signed)" } else { " (unsigned)" });
            }
            if kept_reasoning(request) {
                // The signed reasoning this fake gave came back (Claude
                // wants it back in a tool loop that thinks).
                text.push_str(" (reasoning kept)");
            }
            if called.is_some_and(|call| issued(protocol, call)) {
                // The call and its result came back under the id this
                // vendor gave (not one a gateway made for its caller).
                text.push_str(" (own call id)");
            }
            content.push(Block::text(text));
            StopReason::EndTurn
        }
        (None, None) => {
            let (last, so_far) = continued(request);
            // `[mock:plain]`: the answer is the caller's text alone, the
            // same from every lane (what a continuation test needs).
            let answer = match last.contains("[mock:plain]") {
                true => plain(&last),
                false => format!("[{protocol} {model}] you said: {last}"),
            };
            let rest = |so_far: &str| answer.strip_prefix(so_far).unwrap_or(&answer).to_owned();
            let answer = match so_far {
                None => answer.clone(),
                Some(Continued::Prefill(so_far)) => rest(&so_far),
                // Lanes that answer an instruction as some models do.
                Some(Continued::Instruction(_)) if model.starts_with("restart-") => answer.clone(),
                Some(Continued::Instruction(_)) if model.starts_with("unrelated-") => {
                    "Sure! Here is something else entirely.".to_owned()
                }
                Some(Continued::Instruction(so_far)) => {
                    format!("{}{}", switchyard_codec::continuation::anchor(&so_far), rest(&so_far))
                }
            };
            content.push(Block::text(answer));
            StopReason::EndTurn
        }
    };
    let mut stop_reason = Some(stop_reason);
    if request.max_tokens == Some(1) {
        content.retain(|b| matches!(b, Block::Text(_)));
        if let Some(Block::Text(text)) = content.first_mut() {
            text.text = text.text.split(' ').next().unwrap_or("").to_owned();
        }
        stop_reason = Some(StopReason::MaxTokens);
    }
    let output_chars: usize = content
        .iter()
        .map(|b| match b {
            Block::Text(t) => t.text.len(),
            Block::ToolUse(t) => t.input.len() + t.name.len(),
            Block::Thinking { text, .. } => text.len(),
            _ => 0,
        })
        .sum();
    let input_tokens = (request.total_chars() as u64 / 4).max(1);
    let output_tokens = (output_chars as u64 / 4).max(1);
    let id_seed = format!("{protocol}/{model}/{}", request.last_user_text().unwrap_or_default());
    Response {
        id: format!("mock-{:016x}", fnv1a(id_seed.as_bytes())),
        model: model.to_owned(),
        created: Some(CREATED),
        content,
        stop_reason,
        stop_sequence: None,
        usage: Usage { input_tokens, output_tokens, ..Usage::default() },
        ..Response::default()
    }
}

/// What `[mock:tool=...]` asks of the reply.
#[derive(Debug, PartialEq)]
enum ToolDirective {
    /// `[mock:tool=none]`: text, though tools are offered.
    None,
    /// `[mock:tool=NAME {...}]`: a call of NAME, with these arguments (JSON
    /// text) when given.
    Call { name: String, arguments: Option<String> },
}

fn tool_directive(text: &str) -> Option<ToolDirective> {
    let start = text.find("[mock:tool=")? + "[mock:tool=".len();
    let rest = &text[start..];
    let name_end = rest.find([' ', ']'])?;
    let name = &rest[..name_end];
    if name == "none" {
        return Some(ToolDirective::None);
    }
    // The arguments are one JSON value after the name; it may hold `]`.
    let after = rest[name_end..].trim_start();
    let arguments = match after.starts_with('{') {
        true => {
            let mut values = serde_json::Deserializer::from_str(after).into_iter::<serde_json::Value>();
            Some(values.next()?.ok()?.to_string())
        }
        false => None,
    };
    Some(ToolDirective::Call { name: name.to_owned(), arguments })
}

/// The id this fake gives a call of tool `name` (`seed` makes it the
/// call's), in its vendor's form: OpenAI's and Responses' `call_` and 24
/// characters, Anthropic's `toolu_01` and 22, Bedrock's `tooluse_` and 22,
/// Cohere's `<tool>_` and 12 (Gemini's replies carry no id the vendor
/// needs back; it gets OpenAI's form). The last 8 characters are a keyed
/// check of the ones before them ([`issued`]).
pub fn issued_id(protocol: Protocol, name: &str, seed: &str) -> String {
    let (prefix, head) = issued_form(protocol, name);
    let head = base62(fnv1a(seed.as_bytes()), head);
    let check = id_check(protocol, &head);
    format!("{prefix}{head}{check}")
}

/// Whether `call`'s id is one this fake's vendor gave ([`issued_id`]).
pub fn issued(protocol: Protocol, call: &ToolUse) -> bool {
    let (prefix, head) = issued_form(protocol, &call.name);
    let Some(rest) = call.id.strip_prefix(prefix.as_str()) else {
        return false;
    };
    rest.len() == head + ID_CHECK && rest.is_ascii() && id_check(protocol, &rest[..head]) == rest[head..]
}

/// Characters of an issued id's check.
const ID_CHECK: usize = 8;

/// An issued id's prefix and how many characters of its own follow it
/// (before the check).
fn issued_form(protocol: Protocol, name: &str) -> (String, usize) {
    match protocol {
        Protocol::Anthropic => ("toolu_01".to_owned(), 14),
        Protocol::Bedrock => ("tooluse_".to_owned(), 14),
        Protocol::Cohere => (format!("{name}_"), 4),
        Protocol::OpenAi | Protocol::Responses | Protocol::Gemini => ("call_".to_owned(), 16),
    }
}

/// The keyed check of an issued id's `head`.
fn id_check(protocol: Protocol, head: &str) -> String {
    let keyed = SIGNING_KEY.iter().chain(protocol.as_str().as_bytes()).chain(head.as_bytes());
    base62(
        keyed.fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)),
        ID_CHECK,
    )
}

/// `len` base-62 digits of `value` (and of its rehash past 64 bits).
fn base62(mut value: u64, len: usize) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(len);
    for place in 0..len {
        if place % 10 == 9 {
            value = fnv1a(&value.to_le_bytes());
        }
        out.push(char::from(DIGITS[(value % 62) as usize]));
        value /= 62;
    }
    out
}

/// The vendor's 400 for a tool result that names no call of the history
/// while it has calls: every vendor pairs each result with a call it
/// made (Anthropic: "unexpected `tool_use_id` found in `tool_result`
/// blocks"; OpenAI: a tool message "must be a response to a preceding
/// message with 'tool_calls'"; Responses: "No tool call found for function
/// call output"), so ids a gateway changed on the way in and did not
/// change back are refused.
pub fn unanswered_result(protocol: Protocol, request: &Request) -> Option<ErrorInfo> {
    let blocks = || request.messages.iter().flat_map(|m| &m.content);
    let calls: Vec<&str> = blocks()
        .filter_map(|block| match block {
            Block::ToolUse(call) => Some(call.id.as_str()),
            _ => None,
        })
        .collect();
    if calls.is_empty() {
        return None;
    }
    let id = blocks().find_map(|block| match block {
        Block::ToolResult(result) if !calls.contains(&result.tool_use_id.as_str()) => Some(&result.tool_use_id),
        _ => None,
    })?;
    let message = match protocol {
        Protocol::Anthropic => format!("unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
        Protocol::OpenAi => format!("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id {id})."),
        Protocol::Responses => format!("No tool call found for function call output with call_id {id}."),
        _ => format!("tool result {id} answers no tool call of the conversation"),
    };
    Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400))
}

/// The signature this fake gives a Gemini call of tool `name`: base64 (the
/// encoding of "mock-thought", then hex digits) like a real one. Gemini
/// requests carry no call ids, so it is the name's.
pub fn mock_signature(name: &str) -> String {
    let hash = fnv1a(name.as_bytes());
    format!("bW9jay10aG91Z2h0{hash:016x}{:016x}", hash.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15)
}

/// Whether the history's call of tool `name` carries the signature this
/// fake gave it.
fn signed_call(request: &Request, name: &str) -> bool {
    let signature = mock_signature(name);
    request.messages.iter().flat_map(|m| &m.content).any(|block| {
        matches!(block, Block::ToolUse(call) if call.name == name && call.signature.as_deref() == Some(&*signature))
    })
}

/// The caller's text without the mock's directives.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[mock:") {
        out.push_str(&rest[..start]);
        rest = rest[start..].split_once(']').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out.trim().to_owned()
}

/// Whether an assistant turn of the history carries signed reasoning this
/// fake gave (its text with its signature).
fn kept_reasoning(request: &Request) -> bool {
    request.messages.iter().flat_map(|m| &m.content).any(|block| {
        matches!(block, Block::Thinking { text, signature: Some(signature) } if *signature == reasoning_signature(text))
    })
}

/// The signature this fake gives reasoning `text`: a keyed hash of its
/// bytes (two FNV-1a passes under a key; a fake's, not a MAC), so a text
/// changed by one byte no longer matches it, as a vendor's signature does
/// not.
pub fn reasoning_signature(text: &str) -> String {
    let keyed = |salt: u8| {
        let hash = SIGNING_KEY
            .iter()
            .chain([&salt])
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        text.bytes().fold(hash, |hash, b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    };
    format!("mock-sig-{:016x}{:016x}", keyed(1), keyed(2))
}

/// The vendor's 400 for `request` when a thinking block's signature is not
/// the one this fake gives its text (Anthropic's message, which Claude on
/// Bedrock answers too): the signed reasoning was changed, or forged.
pub fn forged_reasoning(request: &Request) -> Option<ErrorInfo> {
    for (at, message) in request.messages.iter().enumerate() {
        for (index, block) in message.content.iter().enumerate() {
            if let Block::Thinking { text, signature: Some(signature) } = block {
                if *signature != reasoning_signature(text) {
                    let message = format!("messages.{at}.content.{index}: Invalid `signature` in `thinking` block");
                    return Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400));
                }
            }
        }
    }
    None
}

fn wants_reasoning(reasoning: Option<&Reasoning>) -> bool {
    reasoning.is_some_and(|r| !r.is_off() && (r.effort.is_some() || r.budget_tokens.is_some_and(|b| b > 0)))
}

/// Splits text deltas at spaces so a streamed reply has several frames;
/// the text's log probabilities, one token a piece, follow each piece.
fn split_deltas(events: Vec<StreamEvent>) -> Vec<StreamEvent> {
    let mut out = Vec::with_capacity(events.len() * 2);
    let mut events = events.into_iter().peekable();
    while let Some(event) = events.next() {
        match event {
            StreamEvent::BlockDelta { index, delta: Delta::Text(text) } => {
                let pieces: Vec<&str> = text.split_inclusive(' ').collect();
                let tokens = match events.peek() {
                    Some(StreamEvent::BlockDelta { delta: Delta::Logprobs(tokens), .. })
                        if tokens.len() == pieces.len() =>
                    {
                        match events.next() {
                            Some(StreamEvent::BlockDelta { delta: Delta::Logprobs(tokens), .. }) => tokens,
                            _ => Vec::new(),
                        }
                    }
                    _ => Vec::new(),
                };
                let mut tokens = tokens.into_iter();
                for piece in pieces {
                    out.push(StreamEvent::BlockDelta { index, delta: Delta::Text(piece.to_owned()) });
                    if let Some(token) = tokens.next() {
                        out.push(StreamEvent::BlockDelta { index, delta: Delta::Logprobs(vec![token]) });
                    }
                }
            }
            StreamEvent::BlockStart { index, block: BlockStart::Text } => {
                out.push(StreamEvent::BlockStart { index, block: BlockStart::Text });
            }
            other => out.push(other),
        }
    }
    out
}

/// Tool arguments that satisfy a simple JSON schema's required properties.
fn arguments_for(schema: &serde_json::Value) -> String {
    let mut args = serde_json::Map::new();
    if let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) {
        for (name, property) in properties {
            let value = match property.get("type").and_then(|t| t.as_str()) {
                Some("integer") | Some("number") => serde_json::json!(1),
                Some("boolean") => serde_json::json!(true),
                Some("array") => serde_json::json!([]),
                Some("object") => serde_json::json!({}),
                _ => match property.get("enum").and_then(|e| e.as_array()).and_then(|e| e.first()) {
                    Some(first) => first.clone(),
                    None => serde_json::json!("mock"),
                },
            };
            args.insert(name.clone(), value);
        }
    }
    serde_json::Value::Object(args).to_string()
}

pub(crate) fn directive_error(text: &str) -> Option<ErrorInfo> {
    if text.contains("[mock:context]") {
        return Some(ErrorInfo::new(
            ErrorKind::ContextLength,
            "prompt is too long: the input exceeds the context window of this mock model",
        ));
    }
    let start = text.find("[mock:status=")? + "[mock:status=".len();
    let status: u16 = text[start..].split(']').next()?.parse().ok()?;
    if !(400..=599).contains(&status) {
        return None;
    }
    Some(
        ErrorInfo::new(ErrorKind::from_status(status), format!("mock upstream answered {status} as asked"))
            .with_status(status),
    )
}

pub(crate) fn error(codec: &dyn Codec, info: &ErrorInfo) -> UpstreamResponse {
    let rendered = codec.error_response(info);
    let mut headers = json_headers();
    for (name, value) in rendered.headers {
        headers.insert(name, value);
    }
    if matches!(info.status, 429 | 503 | 529) {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    UpstreamResponse {
        status: StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::BAD_REQUEST),
        headers,
        body: full_body(rendered.body),
    }
}

pub(crate) fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers
}

/// FNV-1a: a stable, dependency-free hash for deterministic ids.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::{Message, Role, Tool, ToolResult};

    /// The fake signs its reasoning's text: the reasoning it gave comes
    /// back accepted (and kept), a text changed by a mask is refused as
    /// Anthropic and Bedrock refuse it.
    #[test]
    fn signed_reasoning_is_refused_once_its_text_changes() {
        use switchyard_ir::Reasoning;
        let mut request = Request {
            messages: vec![Message::text(Role::User, "hi")],
            reasoning: Some(Reasoning::with_budget(1024)),
            ..Request::default()
        };
        let first = reply(Protocol::Anthropic, "m", &request);
        let Some(Block::Thinking { text, signature }) = first.content.first() else { panic!("{:?}", first.content) };
        assert_eq!((text.as_str(), signature.as_deref()), (MOCK_THOUGHT, Some(&*reasoning_signature(MOCK_THOUGHT))));
        assert_ne!(reasoning_signature(MOCK_THOUGHT), reasoning_signature("the user wants a [PLAN_1] answer"));
        request.messages.push(Message::new(Role::Assistant, first.content.clone()));
        request.messages.push(Message::text(Role::User, "more"));
        assert!(forged_reasoning(&request).is_none());
        assert!(kept_reasoning(&request));
        let Block::Thinking { text, .. } = &mut request.messages[1].content[0] else { unreachable!() };
        *text = text.replace("deterministic", "[PLAN_1]");
        let refused = forged_reasoning(&request).map(|info| (info.status, info.message));
        assert_eq!(refused, Some((400, "messages.1.content.0: Invalid `signature` in `thinking` block".to_owned())));
        assert!(crate::mock_rules::refused(Protocol::Bedrock, "anything", &request).is_some());
        assert!(crate::mock_rules::refused(Protocol::Gemini, "anything", &request).is_none());
    }

    #[test]
    fn a_tool_directive_names_the_tool_and_its_arguments() {
        assert_eq!(tool_directive("go [mock:tool=none] now"), Some(ToolDirective::None));
        assert_eq!(
            tool_directive(r#"[mock:tool=Read {"file_path": "/a]b", "n": [1]}] then"#),
            Some(ToolDirective::Call {
                name: "Read".into(),
                arguments: Some(r#"{"file_path":"/a]b","n":[1]}"#.into())
            })
        );
        assert_eq!(
            tool_directive("[mock:tool=Bash]"),
            Some(ToolDirective::Call { name: "Bash".into(), arguments: None })
        );
        assert_eq!(tool_directive("no directive"), None);
    }

    /// An agent's loop: the named tool is called with the arguments asked
    /// for, and the result (with the harness's system message after it)
    /// gets the final answer.
    #[test]
    fn an_agents_tool_loop_ends_in_an_answer() {
        let tools = ["Agent", "Read"].map(|name| Tool::function(name, None, serde_json::json!({"type": "object"})));
        let mut request = Request {
            tools: tools.to_vec(),
            messages: vec![
                Message::text(Role::User, r#"read it [mock:tool=Read {"file_path": "/srv/note.txt"}]"#),
                Message::text(Role::System, "the cwd is /srv"),
            ],
            ..Request::default()
        };
        let first = reply(Protocol::Anthropic, "m", &request);
        let [Block::ToolUse(call)] = first.content.as_slice() else { panic!("{:?}", first.content) };
        assert_eq!((call.name.as_str(), call.input.as_str()), ("Read", r#"{"file_path":"/srv/note.txt"}"#));
        assert_eq!(first.stop_reason, Some(StopReason::ToolUse));

        request.messages.push(Message::new(Role::Assistant, first.content.clone()));
        let result = ToolResult {
            tool_use_id: call.id.clone(),
            name: Some("Read".into()),
            content: vec![Block::text("1\tpaper tiger")],
            is_error: false,
        };
        request.messages.push(Message::new(Role::User, vec![Block::ToolResult(result)]));
        request.messages.push(Message::text(Role::System, "a reminder"));
        let last = reply(Protocol::Anthropic, "m", &request);
        assert_eq!(last.stop_reason, Some(StopReason::EndTurn));
        let Block::Text(text) = &last.content[0] else { panic!("{:?}", last.content) };
        assert_eq!(text.text, "[anthropic m] tool Read returned: 1\tpaper tiger (own call id)");

        request.messages.truncate(2);
        request.messages[0] = Message::text(Role::User, "just talk [mock:tool=none]");
        let plain = reply(Protocol::Anthropic, "m", &request);
        assert!(matches!(plain.content.as_slice(), [Block::Text(_)]), "{:?}", plain.content);
    }

    /// Each vendor's ids have its form, and only the ids it gave read as
    /// its own; a result naming no call of the history is refused.
    #[test]
    fn the_fake_knows_its_own_call_ids() {
        let cases = [
            (Protocol::Anthropic, "toolu_01", 30),
            (Protocol::OpenAi, "call_", 29),
            (Protocol::Responses, "call_", 29),
            (Protocol::Bedrock, "tooluse_", 30),
            (Protocol::Cohere, "get_weather_", 24),
        ];
        for (protocol, prefix, len) in cases {
            let mut call = ToolUse::new(issued_id(protocol, "get_weather", "seed"), "get_weather", "{}");
            assert!(call.id.starts_with(prefix) && call.id.len() == len, "{protocol}: {}", call.id);
            assert!(switchyard_codec::call_id::fits(&call.id, &switchyard_codec::call_id::form(protocol)));
            assert!(issued(protocol, &call), "{protocol}: {}", call.id);
            let other = if protocol == Protocol::OpenAi { Protocol::Responses } else { Protocol::OpenAi };
            assert!(!issued(other, &call), "{protocol}'s id is not {other}'s");
            let own = call.id.clone();
            call.id = format!("{}x", &own[..own.len() - 1]);
            assert!(!issued(protocol, &call), "{protocol}: a changed id is not its own");
            call.id.clone_from(&own);

            let result = |id: &str| ToolResult { tool_use_id: id.into(), name: None, content: vec![], is_error: false };
            let mut request = Request {
                messages: vec![
                    Message::text(Role::User, "hi"),
                    Message::new(Role::Assistant, vec![Block::ToolUse(call.clone())]),
                    Message::new(Role::User, vec![Block::ToolResult(result(&own))]),
                ],
                ..Request::default()
            };
            assert!(unanswered_result(protocol, &request).is_none());
            request.messages[2] = Message::new(Role::User, vec![Block::ToolResult(result("call_elsewhere"))]);
            let refused = unanswered_result(protocol, &request).map(|info| info.status);
            assert_eq!(refused, Some(400), "{protocol}");
            assert!(crate::mock_rules::refused(protocol, "m", &request).is_some());
        }
    }
}
