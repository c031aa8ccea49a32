//! The legacy completion request: read into a chat request of one user
//! message, and written back from one.

use serde_json::{Map, Value};
use switchyard_codec::ir::{
    Block, DropReason, Dropped, Field, Message, Protocol, Request, ResponseFormat, Role, Thinking,
};
use switchyard_codec::{DecodeError, Encoded};

use super::DEFAULT_MAX_TOKENS;
use crate::request::{insert_f64, read_stop, take, take_bool, take_f64, take_i64, take_string, take_u64};
use crate::wire::report;

/// The most alternatives a completion's `logprobs` takes.
const MOST_LOGPROBS: u32 = 5;

/// Reads a completion request: the prompt as one user message, the
/// sampling knobs chat has, and in `extra` what asks for something chat
/// cannot say.
pub(crate) fn read(body: &[u8]) -> Result<Request, DecodeError> {
    let value: Value = serde_json::from_slice(body)?;
    let Value::Object(mut fields) = value else {
        return Err(DecodeError::invalid("body", "request body must be a json object"));
    };
    let mut request = Request {
        model: take_string(&mut fields, "model")?.ok_or_else(|| DecodeError::invalid("model", "model is required"))?,
        ..Request::default()
    };
    let prompt = read_prompt(take(&mut fields, "prompt"))?;
    request.messages = vec![Message::text(Role::User, prompt)];
    request.max_tokens = Some(take_u64(&mut fields, "max_tokens")?.unwrap_or(DEFAULT_MAX_TOKENS));
    request.temperature = take_f64(&mut fields, "temperature")?;
    request.top_p = take_f64(&mut fields, "top_p")?;
    request.seed = take_i64(&mut fields, "seed")?;
    request.frequency_penalty = take_f64(&mut fields, "frequency_penalty")?;
    request.presence_penalty = take_f64(&mut fields, "presence_penalty")?;
    request.stop = read_stop(take(&mut fields, "stop"))?;
    request.user = take_string(&mut fields, "user")?;
    // `logprobs`: the likeliest alternatives at each token (0 to 5), its
    // own tokens' log probabilities with them.
    request.logprobs = take_u64(&mut fields, "logprobs")?.map(|top| u32::try_from(top).unwrap_or(u32::MAX));
    request.n = take_u64(&mut fields, "n")?.filter(|n| *n != 1).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    request.stream = take_bool(&mut fields, "stream")?.unwrap_or(false);
    if let Some(options) = take(&mut fields, "stream_options") {
        // The writer always asks for usage, as chat's does.
        let only_usage = matches!(&options, Value::Object(o) if o.keys().all(|k| k == "include_usage"));
        if !only_usage {
            request.extra.insert(Protocol::OpenAi, "stream_options".to_owned(), options);
        }
    }
    // What asks for nothing (OpenAI's defaults, written out) is not kept:
    // a translation need not report it.
    for (key, value) in fields {
        let asks = match (key.as_str(), &value) {
            (_, Value::Null) => false,
            ("echo", Value::Bool(echo)) => *echo,
            ("n" | "best_of", count) => count.as_u64() != Some(1),
            ("suffix", Value::String(suffix)) => !suffix.is_empty(),
            ("logit_bias", Value::Object(bias)) => !bias.is_empty(),
            _ => true,
        };
        if asks {
            request.extra.insert(Protocol::OpenAi, key, value);
        }
    }
    Ok(request)
}

/// The prompt's text: a string, or an array of one string. Several
/// prompts, or token ids, have no chat form.
fn read_prompt(prompt: Option<Value>) -> Result<String, DecodeError> {
    let several = || {
        DecodeError::invalid(
            "prompt",
            "a prompt of several strings or of token ids can only be sent to an OpenAI lane; send one string",
        )
    };
    match prompt {
        // No prompt: the model begins a document (nothing to say to a chat lane).
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text),
        Some(Value::Array(mut prompts)) => match (prompts.pop(), prompts.is_empty()) {
            (None, _) => Ok(String::new()),
            (Some(Value::String(text)), true) => Ok(text),
            _ => Err(several()),
        },
        Some(_) => Err(DecodeError::invalid("prompt", "prompt must be a string or an array of strings")),
    }
}

/// Writes a completion request. A conversation becomes its text, turn by
/// turn (its roles reported); what a prompt of text cannot hold is
/// reported.
pub(crate) fn write(request: &Request) -> Encoded {
    let mut dropped = Vec::new();
    let extra = request.extra.for_target(Protocol::OpenAi, &mut dropped);
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("prompt".into(), Value::String(prompt_of(request, &mut dropped)));
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_tokens".into(), max_tokens.into());
    }
    insert_f64(&mut body, "temperature", request.temperature);
    insert_f64(&mut body, "top_p", request.top_p);
    if let Some(seed) = request.seed {
        body.insert("seed".into(), seed.into());
    }
    insert_f64(&mut body, "frequency_penalty", request.frequency_penalty);
    insert_f64(&mut body, "presence_penalty", request.presence_penalty);
    if !request.stop.is_empty() {
        body.insert("stop".into(), request.stop.iter().cloned().map(Value::String).collect());
    }
    if let Some(user) = &request.user {
        body.insert("user".into(), Value::String(user.clone()));
    }
    if let Some(top) = request.logprobs {
        // A completion takes at most 5 alternatives.
        if top > MOST_LOGPROBS {
            Dropped::push_once(&mut dropped, Field::TopLogprobs, DropReason::Converted);
        }
        body.insert("logprobs".into(), top.min(MOST_LOGPROBS).into());
    }
    crate::request::write_n(request, &mut body, &mut dropped);
    for field in lost_fields(request) {
        report(&mut dropped, field);
    }
    if !request.tools.is_empty() {
        dropped.push(Dropped {
            field: Field::Unmodelled,
            extra_path: Some("tools".to_owned()),
            reason: DropReason::Unsupported,
        });
    }
    let extra_stream_options = extra.and_then(|e| e.get("stream_options"));
    if request.stream {
        body.insert("stream".into(), Value::Bool(true));
        // The gateway meters streams, so usage is always asked for.
        let mut options = match extra_stream_options {
            Some(Value::Object(options)) => options.clone(),
            _ => Map::new(),
        };
        options.insert("include_usage".into(), Value::Bool(true));
        body.insert("stream_options".into(), Value::Object(options));
    } else if extra_stream_options.is_some() {
        report(&mut dropped, Field::StreamOptions);
    }
    for (key, value) in extra.into_iter().flatten() {
        if !body.contains_key(key) && key != "stream_options" {
            body.insert(key.clone(), value.clone());
        }
    }
    Encoded { body: switchyard_codec::json::to_vec(&Value::Object(body)), dropped }
}

/// The parameters of `request` a completion has no field for, each named
/// as precisely as the table of parameters names it.
fn lost_fields(request: &Request) -> Vec<Field> {
    let mut lost = Vec::new();
    let mut lose = |field: Field, when: bool| {
        if when {
            lost.push(field);
        }
    };
    lose(Field::TopK, request.top_k.is_some());
    match &request.response_format {
        None => {}
        Some(ResponseFormat::JsonObject) => lose(Field::JsonMode, true),
        Some(ResponseFormat::JsonSchema { name, strict, .. }) => {
            lose(Field::JsonSchema, true);
            lose(Field::JsonSchemaName, !name.is_empty() && name != "response");
            lose(Field::JsonSchemaStrict, strict.is_some());
        }
    }
    if let Some(reasoning) = &request.reasoning {
        lose(Field::ReasoningOff, reasoning.thinking == Thinking::Off);
        lose(Field::ReasoningBudget, reasoning.budget_tokens.is_some());
        let on = reasoning.thinking == Thinking::On && reasoning.budget_tokens.is_none();
        lose(Field::ReasoningEffort, reasoning.effort.is_some() || on);
    }
    lose(Field::ToolChoice, request.tool_choice.is_some());
    lose(Field::ParallelToolCalls, request.parallel_tool_calls.is_some());
    lose(Field::ToolStrict, request.tools.iter().any(|tool| tool.strict.is_some()));
    lose(Field::Metadata, !request.metadata.is_empty());
    lose(Field::Betas, !request.betas.is_empty());
    lost
}

/// The prompt a request's text makes: one user message is its text;
/// anything else is every turn's text (the system prompt first), a blank
/// line apart, its roles reported.
fn prompt_of(request: &Request, dropped: &mut Vec<Dropped>) -> String {
    let one_turn = request.system.is_empty() && matches!(request.messages.as_slice(), [m] if m.role == Role::User);
    if !one_turn {
        dropped.push(Dropped {
            field: Field::Unmodelled,
            extra_path: Some("messages.role".to_owned()),
            reason: DropReason::Converted,
        });
    }
    let mut parts: Vec<String> = request.system.iter().map(|block| block.text.clone()).collect();
    for message in &request.messages {
        message.extra.for_target_under(Protocol::OpenAi, "messages", dropped);
        let mut text = String::new();
        for block in &message.content {
            match block {
                Block::Text(block) => {
                    if block.cache_control.is_some() {
                        report(dropped, Field::CacheControl);
                    }
                    text.push_str(&block.text);
                }
                Block::Thinking { .. } => report(dropped, Field::Thinking),
                Block::RedactedThinking { .. } => report(dropped, Field::RedactedThinking),
                Block::Image { .. } | Block::Document { .. } => report(dropped, Field::MediaType),
                Block::Audio { .. } => report(dropped, Field::Audio),
                Block::ToolUse(_) | Block::ToolResult(_) | Block::Unmodelled(_) => {
                    report(dropped, Field::MisplacedBlock)
                }
            }
        }
        parts.push(text);
    }
    parts.join("\n\n")
}

/// Where completion requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "max_tokens",
        Field::Temperature => "temperature",
        Field::TopP => "top_p",
        Field::Stop => "stop",
        Field::Seed => "seed",
        Field::FrequencyPenalty => "frequency_penalty",
        Field::PresencePenalty => "presence_penalty",
        Field::User => "user",
        Field::StreamOptions => "stream_options",
        Field::Logprobs | Field::TopLogprobs => "logprobs",
        Field::Choices => "n",
        _ => return None,
    })
}
