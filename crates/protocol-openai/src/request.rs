//! The Chat Completions request: reading a wire body into `ir::Request` and
//! writing one back out.
//!
//! The reader walks the JSON object by hand rather than through derived
//! structs so that every bad field is reported by name and every unknown field
//! lands in `extra` untouched.

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    Block, Capabilities, Dropped, Extra, Field, MediaSource, Message, Protocol, Reasoning, Request, ResponseFormat,
    Role, TextBlock, Thinking, Tool, ToolChoice, ToolResult, ToolUse, Unmodelled,
};
use switchyard_codec::{beside, call_id, effort, function, DecodeError, Encoded};

use switchyard_codec::media::{self, data_url, parse_data_url, source_from_url, url_of};

use crate::wire::{carried_signature, report, EFFORTS};

/// OpenAI accepts only PDFs as chat file inputs, so raw base64 `file_data`
/// without a data-URL header is taken to be one.
const DEFAULT_FILE_MEDIA_TYPE: &str = "application/pdf";

/// Reads a Chat Completions request body.
pub(crate) fn read(body: &[u8]) -> Result<Request, DecodeError> {
    let value: Value = serde_json::from_slice(body)?;
    let Value::Object(mut fields) = value else {
        return Err(DecodeError::invalid("body", "request body must be a json object"));
    };
    let mut request = Request {
        model: take_string(&mut fields, "model")?.ok_or_else(|| DecodeError::invalid("model", "model is required"))?,
        ..Request::default()
    };

    let messages = match take(&mut fields, "messages") {
        Some(Value::Array(messages)) => messages,
        Some(_) => return Err(DecodeError::invalid("messages", "messages must be an array")),
        None => return Err(DecodeError::invalid("messages", "messages is required")),
    };
    let mut reader = MessageReader::default();
    for (index, message) in messages.into_iter().enumerate() {
        reader.read(message, &format!("messages[{index}]"))?;
    }
    request.system = reader.system;
    request.messages = reader.messages;

    // `max_completion_tokens` supersedes the deprecated `max_tokens`.
    let max_tokens = take_u64(&mut fields, "max_tokens")?;
    request.max_tokens = take_u64(&mut fields, "max_completion_tokens")?.or(max_tokens);
    request.temperature = take_f64(&mut fields, "temperature")?;
    request.top_p = take_f64(&mut fields, "top_p")?;
    request.seed = take_i64(&mut fields, "seed")?;
    request.frequency_penalty = take_f64(&mut fields, "frequency_penalty")?;
    request.presence_penalty = take_f64(&mut fields, "presence_penalty")?;
    request.stop = read_stop(take(&mut fields, "stop"))?;
    request.response_format = read_response_format(take(&mut fields, "response_format"))?;
    if let Some(effort) = take_string(&mut fields, "reasoning_effort")? {
        request.reasoning = Some(effort::read_level(&effort, "reasoning_effort")?);
    }
    if let Some(object) = take(&mut fields, "reasoning") {
        let (reasoning, rest) = read_reasoning_object(object)?;
        if reasoning != Reasoning::default() {
            request.reasoning = Some(reasoning);
        }
        if let Some(rest) = rest {
            request.extra.insert(Protocol::OpenAi, "reasoning".to_owned(), rest);
        }
    }
    let (tools, other_tools) = read_tools(take(&mut fields, "tools"))?;
    request.tools = tools;
    if !other_tools.is_empty() {
        // Tools of a type the IR does not model (`custom`) ride along as
        // an extra: written back beside the function tools on a
        // same-protocol hop, reported at `tools` on another.
        request.extra.insert(Protocol::OpenAi, "tools".to_owned(), Value::Array(other_tools));
    }
    match take(&mut fields, "tool_choice") {
        None => {}
        Some(value) => match read_tool_choice(&value)? {
            Some(choice) => request.tool_choice = Some(choice),
            // A shape the IR does not model (`allowed_tools`, custom tools)
            // still survives a same-protocol hop.
            None => request.extra.insert(Protocol::OpenAi, "tool_choice".to_owned(), value),
        },
    }
    request.parallel_tool_calls = take_bool(&mut fields, "parallel_tool_calls")?;
    request.user = take_string(&mut fields, "user")?;
    match take(&mut fields, "metadata") {
        None => {}
        Some(Value::Object(metadata)) => request.metadata = metadata,
        Some(_) => return Err(DecodeError::invalid("metadata", "metadata must be an object")),
    }
    read_logprobs(&mut fields, &mut request)?;
    request.n = take_u64(&mut fields, "n")?.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    request.stream = take_bool(&mut fields, "stream")?.unwrap_or(false);
    if let Some(options) = take(&mut fields, "stream_options") {
        // The writer always asks for usage, so an `include_usage`-only
        // object carries nothing worth keeping.
        let only_usage = matches!(&options, Value::Object(o) if o.keys().all(|k| k == "include_usage"));
        if !only_usage {
            request.extra.insert(Protocol::OpenAi, "stream_options".to_owned(), options);
        }
    }
    for (key, value) in fields {
        request.extra.insert(Protocol::OpenAi, key, value);
    }
    Ok(request)
}

/// Writes a Chat Completions request body.
pub(crate) fn write(request: &Request, capabilities: &Capabilities) -> Encoded {
    let mut dropped = Vec::new();
    let extra = request.extra.for_target(Protocol::OpenAi, &mut dropped);
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(write_messages(request, capabilities, &mut dropped)));
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_completion_tokens".into(), max_tokens.into());
    }
    insert_f64(&mut body, "temperature", request.temperature);
    insert_f64(&mut body, "top_p", request.top_p);
    if request.top_k.is_some() {
        report(&mut dropped, Field::TopK);
    }
    if !request.betas.is_empty() {
        report(&mut dropped, Field::Betas);
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if let Some(seed) = request.seed {
        body.insert("seed".into(), seed.into());
    }
    insert_f64(&mut body, "frequency_penalty", request.frequency_penalty);
    insert_f64(&mut body, "presence_penalty", request.presence_penalty);
    if let Some(format) = &request.response_format {
        body.insert("response_format".into(), write_response_format(format));
    }
    // A caller's OpenRouter `reasoning` object (its members the IR does not
    // model kept) takes the reasoning back in its own form.
    let reasoning_object = extra.and_then(|e| e.get("reasoning")).and_then(Value::as_object);
    match (&request.reasoning, reasoning_object) {
        (Some(reasoning), Some(object)) => {
            body.insert("reasoning".into(), Value::Object(write_reasoning_object(reasoning, object)));
        }
        // Models without reasoning refuse `reasoning_effort` and reasoning
        // models before gpt-5.1 have no "none": thinking off is said only to
        // a model said to turn it off.
        (Some(reasoning), None) => {
            if let Some(level) = effort::openai_level(reasoning, &EFFORTS, capabilities, false, &mut dropped) {
                body.insert("reasoning_effort".into(), Value::String(level.to_owned()));
            }
        }
        (None, _) => {}
    }
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|tool| write_tool(tool, &mut dropped)).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = &request.tool_choice {
        body.insert("tool_choice".into(), write_tool_choice(choice));
    }
    if let Some(parallel) = request.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
    }
    if let Some(user) = &request.user {
        body.insert("user".into(), Value::String(user.clone()));
    }
    if !request.metadata.is_empty() {
        body.insert("metadata".into(), Value::Object(request.metadata.clone()));
    }
    if let Some(top) = request.logprobs {
        body.insert("logprobs".into(), Value::Bool(true));
        if top > 0 {
            body.insert("top_logprobs".into(), top.into());
        }
    }
    write_n(request, &mut body, &mut dropped);
    let extra_stream_options = extra.and_then(|e| e.get("stream_options"));
    if request.stream {
        body.insert("stream".into(), Value::Bool(true));
        // The gateway meters streams, so usage is always requested.
        let mut options = match extra_stream_options {
            Some(Value::Object(options)) => options.clone(),
            _ => Map::new(),
        };
        options.insert("include_usage".into(), Value::Bool(true));
        body.insert("stream_options".into(), Value::Object(options));
    } else if extra_stream_options.is_some() {
        // OpenAI rejects `stream_options` on a request that does not stream.
        report(&mut dropped, Field::StreamOptions);
    }
    if let Some(extra) = extra {
        for (key, value) in extra {
            match (body.get_mut(key), value) {
                // Tools the IR does not model join the function tools.
                (Some(Value::Array(tools)), Value::Array(others)) if key == "tools" => {
                    tools.extend(others.iter().cloned());
                }
                // Modelled fields win over a colliding pass-through field.
                (Some(_), _) => {}
                (None, _) if key == "stream_options" => {}
                (None, _) => {
                    body.insert(key.clone(), value.clone());
                }
            }
        }
    }
    Encoded { body: switchyard_codec::json::to_vec(&Value::Object(body)), dropped }
}

/// `logprobs` (a flag) with `top_logprobs` (0 to 20): asked when the flag
/// is on. A `top_logprobs` without the flag on is the vendor's to judge,
/// kept as it came for an OpenAI lane.
fn read_logprobs(fields: &mut Map<String, Value>, request: &mut Request) -> Result<(), DecodeError> {
    let flag = take_bool(fields, "logprobs")?;
    let top = take_u64(fields, "top_logprobs")?;
    match (flag, top) {
        (Some(true), top) => request.logprobs = Some(top.map_or(0, |t| u32::try_from(t).unwrap_or(u32::MAX))),
        (_, None) => {}
        (flag, Some(top)) => {
            if let Some(flag) = flag {
                request.extra.insert(Protocol::OpenAi, "logprobs".to_owned(), Value::Bool(flag));
            }
            request.extra.insert(Protocol::OpenAi, "top_logprobs".to_owned(), top.into());
        }
    }
    Ok(())
}

/// `n`: said as asked, but a streamed request's replies after the first,
/// which no stream of the IR carries, are not asked for (reported).
pub(crate) fn write_n(request: &Request, body: &mut Map<String, Value>, dropped: &mut Vec<Dropped>) {
    let Some(n) = request.n else { return };
    if n > 1 && request.stream {
        report(dropped, Field::Choices);
        return;
    }
    body.insert("n".into(), n.into());
}

/// OpenRouter's `reasoning` object: `effort` (`none` is off), `max_tokens`
/// (a budget), `enabled` (on or off); what else it holds (`exclude`) is
/// given back to be kept for a same-protocol hop.
fn read_reasoning_object(value: Value) -> Result<(Reasoning, Option<Value>), DecodeError> {
    let Value::Object(mut object) = value else {
        return Err(DecodeError::invalid("reasoning", "reasoning must be an object"));
    };
    let mut reasoning = Reasoning::default();
    if let Some(level) = take_string(&mut object, "effort")? {
        reasoning = effort::read_level(&level, "reasoning.effort")?;
    }
    if let Some(budget) = take_u64(&mut object, "max_tokens")? {
        reasoning.budget_tokens = Some(budget);
        if reasoning.thinking == Thinking::Unset {
            reasoning.thinking = Thinking::On;
        }
    }
    match take_bool(&mut object, "enabled")? {
        Some(false) => reasoning = Reasoning::off(),
        Some(true) if reasoning.thinking == Thinking::Unset => reasoning.thinking = Thinking::On,
        _ => {}
    }
    Ok((reasoning, (!object.is_empty()).then_some(Value::Object(object))))
}

/// The `reasoning` object written back for a same-protocol hop: the IR's
/// reasoning in OpenRouter's members beside the ones kept.
fn write_reasoning_object(reasoning: &Reasoning, kept: &Map<String, Value>) -> Map<String, Value> {
    let mut object = kept.clone();
    if reasoning.is_off() {
        object.insert("enabled".into(), Value::Bool(false));
        return object;
    }
    if let Some(level) = reasoning.effort {
        object.insert("effort".into(), Value::String(level.as_str().to_owned()));
    }
    if let Some(budget) = reasoning.budget_tokens {
        object.insert("max_tokens".into(), budget.into());
    }
    if reasoning.effort.is_none() && reasoning.budget_tokens.is_none() && reasoning.thinking == Thinking::On {
        object.insert("enabled".into(), Value::Bool(true));
    }
    object
}

/// Folds wire messages into IR messages: system and developer messages
/// before the first turn are the system prompt, one after it is a
/// `Role::System` message at its place; tool messages (and a user message right after them) merge into
/// one user message, the shape a writer splits them back into.
#[derive(Default)]
struct MessageReader {
    system: Vec<TextBlock>,
    messages: Vec<Message>,
    /// The last message was opened by tool results and may take more.
    open_tool_turn: bool,
}

impl MessageReader {
    fn read(&mut self, message: Value, path: &str) -> Result<(), DecodeError> {
        let Value::Object(mut message) = message else {
            return Err(DecodeError::invalid(path, "each message must be an object"));
        };
        let role = match message.shift_remove("role") {
            Some(Value::String(role)) => role,
            _ => return Err(DecodeError::invalid(format!("{path}.role"), "message role must be a string")),
        };
        let content = take(&mut message, "content");
        let content_path = format!("{path}.content");
        match role.as_str() {
            "system" | "developer" if self.messages.is_empty() => {
                for block in text_content(content, &content_path)? {
                    self.system.push(block);
                }
            }
            "system" | "developer" => {
                let blocks = text_content(content, &content_path)?.into_iter().map(Block::Text).collect();
                self.open_tool_turn = false;
                self.messages.push(Message { extra: leftover(message), ..Message::new(Role::System, blocks) });
            }
            "user" => {
                let blocks = user_content(content, &content_path)?;
                self.push_user(blocks, false);
                if let Some(last) = self.messages.last_mut() {
                    for (key, value) in message {
                        last.extra.insert(Protocol::OpenAi, key, value);
                    }
                }
            }
            "assistant" => {
                let blocks = assistant_blocks(content, &mut message, path)?;
                self.open_tool_turn = false;
                self.messages.push(Message { extra: leftover(message), ..Message::new(Role::Assistant, blocks) });
            }
            "tool" => {
                let tool_use_id = take_string(&mut message, "tool_call_id")?.ok_or_else(|| {
                    DecodeError::invalid(format!("{path}.tool_call_id"), "tool messages need a tool_call_id")
                })?;
                // The id the caller was handed: the lane's back.
                let tool_use_id = call_id::restore(&tool_use_id, Protocol::OpenAi).into_owned();
                let result = ToolResult {
                    tool_use_id,
                    name: None,
                    content: text_content(content, &content_path)?.into_iter().map(Block::Text).collect(),
                    is_error: false,
                };
                self.push_user(vec![Block::ToolResult(result)], true);
            }
            // The deprecated function-calling shape: results are keyed by
            // the function's name, which stands in for the call id.
            "function" => {
                let name = take_string(&mut message, "name")?
                    .ok_or_else(|| DecodeError::invalid(format!("{path}.name"), "function messages need a name"))?;
                let result = ToolResult {
                    tool_use_id: name.clone(),
                    name: Some(name),
                    content: text_content(content, &content_path)?.into_iter().map(Block::Text).collect(),
                    is_error: false,
                };
                self.push_user(vec![Block::ToolResult(result)], true);
            }
            other => {
                return Err(DecodeError::invalid(format!("{path}.role"), format!("unknown message role `{other}`")))
            }
        }
        Ok(())
    }

    fn push_user(&mut self, blocks: Vec<Block>, from_tool: bool) {
        if self.open_tool_turn {
            if let Some(last) = self.messages.last_mut() {
                last.content.extend(blocks);
                // Tool results keep the turn open; a user message closes it.
                self.open_tool_turn = from_tool;
                return;
            }
        }
        self.messages.push(Message::new(Role::User, blocks));
        self.open_tool_turn = from_tool;
    }
}

/// A message's members the IR does not model (`name`, an assistant's
/// `audio`): written back on a same-protocol hop, reported at
/// `messages.<member>` on another.
fn leftover(message: Map<String, Value>) -> Extra {
    let mut extra = Extra::new();
    for (key, value) in message {
        extra.insert(Protocol::OpenAi, key, value);
    }
    extra
}

/// Content that may only hold text: a string or an array of text parts.
fn text_content(content: Option<Value>, path: &str) -> Result<Vec<TextBlock>, DecodeError> {
    match content {
        None => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![TextBlock::new(text)]),
        Some(Value::Array(parts)) => parts
            .into_iter()
            .enumerate()
            .map(|(index, part)| {
                let path = format!("{path}[{index}]");
                let (kind, mut part) = part_type(part, &path)?;
                match kind.as_str() {
                    "text" => Ok(TextBlock::new(part_text(&mut part, "text", &path)?)),
                    other => {
                        Err(DecodeError::invalid(path, format!("content part type `{other}` is not allowed here")))
                    }
                }
            })
            .collect(),
        Some(_) => Err(DecodeError::invalid(path, "content must be a string or an array of content parts")),
    }
}

/// A user message's content: text, images and files.
fn user_content(content: Option<Value>, path: &str) -> Result<Vec<Block>, DecodeError> {
    let parts = match content {
        None => return Ok(Vec::new()),
        Some(Value::String(text)) => return Ok(vec![Block::text(text)]),
        Some(Value::Array(parts)) => parts,
        Some(_) => return Err(DecodeError::invalid(path, "content must be a string or an array of content parts")),
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (index, part) in parts.into_iter().enumerate() {
        let path = format!("{path}[{index}]");
        let (kind, mut part) = part_type(part, &path)?;
        // What the IR does not model beside a part's data (`image_url.detail`,
        // `prompt_cache_breakpoint`) follows its block, to go back onto it.
        let under = format!("messages.content.{kind}");
        let beside = match kind.as_str() {
            "text" => beside::take(Protocol::OpenAi, &under, &mut part, &["text"], None),
            "image_url" => {
                // `auto` is what a part without `detail` gets: nothing to keep.
                if let Some(Value::Object(image)) = part.get_mut("image_url") {
                    if image.get("detail").and_then(Value::as_str) == Some("auto") {
                        image.shift_remove("detail");
                    }
                }
                beside::take(Protocol::OpenAi, &under, &mut part, &["image_url"], Some(("image_url", &["url"])))
            }
            "file" => {
                let file = ["file_data", "file_id", "filename"];
                beside::take(Protocol::OpenAi, &under, &mut part, &["file"], Some(("file", &file)))
            }
            _ => Vec::new(),
        };
        let block = match kind.as_str() {
            "text" => Block::text(part_text(&mut part, "text", &path)?),
            "image_url" => read_image(part.shift_remove("image_url"), &format!("{path}.image_url"))?,
            "file" => read_file(part.shift_remove("file"), &format!("{path}.file"))?,
            "input_audio" => read_audio(part.shift_remove("input_audio"), &format!("{path}.input_audio"))?,
            other => return Err(DecodeError::invalid(path, format!("unknown content part type `{other}`"))),
        };
        blocks.push(block);
        blocks.extend(beside);
    }
    Ok(blocks)
}

fn read_image(image: Option<Value>, path: &str) -> Result<Block, DecodeError> {
    let url = match image {
        Some(Value::Object(mut image)) => take_string(&mut image, "url")?,
        // Some clients send the URL bare.
        Some(Value::String(url)) => Some(url),
        _ => None,
    }
    .ok_or_else(|| DecodeError::invalid(format!("{path}.url"), "image_url needs a url"))?;
    Ok(Block::Image { source: source_from_url(url), cache_control: None })
}

/// An `input_audio` part: base64 `data` and its `format`, `wav` or `mp3`
/// (the API refuses any other, and so does this reader).
fn read_audio(audio: Option<Value>, path: &str) -> Result<Block, DecodeError> {
    let Some(Value::Object(mut audio)) = audio else {
        return Err(DecodeError::invalid(path, "input_audio must be an object"));
    };
    let data = take_string(&mut audio, "data")?
        .ok_or_else(|| DecodeError::invalid(format!("{path}.data"), "input_audio needs data"))?;
    let format = take_string(&mut audio, "format")?
        .ok_or_else(|| DecodeError::invalid(format!("{path}.format"), "input_audio needs a format"))?;
    let media_type = media::openai_audio_media_type(&format).ok_or_else(|| {
        DecodeError::invalid(
            format!("{path}.format"),
            format!("invalid value '{format}': supported values are 'wav' and 'mp3'"),
        )
    })?;
    Ok(Block::Audio { source: MediaSource::Base64 { media_type: media_type.to_owned(), data } })
}

fn read_file(file: Option<Value>, path: &str) -> Result<Block, DecodeError> {
    let Some(Value::Object(mut file)) = file else {
        return Err(DecodeError::invalid(path, "file must be an object"));
    };
    let name = take_string(&mut file, "filename")?;
    let source = if let Some(data) = take_string(&mut file, "file_data")? {
        match parse_data_url(&data) {
            Some((media_type, data)) => {
                MediaSource::Base64 { media_type: media_type.to_owned(), data: data.to_owned() }
            }
            None => MediaSource::Base64 { media_type: DEFAULT_FILE_MEDIA_TYPE.to_owned(), data },
        }
    } else if let Some(file_id) = take_string(&mut file, "file_id")? {
        // An uploaded file's id is the vendor's file URI.
        MediaSource::Url { url: file_id, media_type: None }
    } else {
        return Err(DecodeError::invalid(path, "file needs file_data or file_id"));
    };
    Ok(Block::Document { source, name, cache_control: None })
}

/// An assistant message's blocks: reasoning, text, refusal, then calls.
fn assistant_blocks(
    content: Option<Value>,
    message: &mut Map<String, Value>,
    path: &str,
) -> Result<Vec<Block>, DecodeError> {
    let mut blocks = Vec::new();
    // Signed and redacted reasoning a reply gave the caller (`thinking`);
    // when present, it holds the same reasoning as the text fields.
    let signed = match message.shift_remove("thinking_blocks") {
        Some(Value::Null) | None => false,
        Some(value) => {
            blocks.extend(crate::thinking::read_blocks(value, &format!("{path}.thinking_blocks"))?);
            true
        }
    };
    // OpenAI-compatible reasoning servers echo their reasoning here.
    for key in ["reasoning_content", "reasoning"] {
        if let Some(Value::String(text)) = message.shift_remove(key) {
            if !text.is_empty() && !signed {
                blocks.push(Block::Thinking { text, signature: None });
            }
        }
    }
    let content_path = format!("{path}.content");
    match content {
        None => {}
        Some(Value::String(text)) => blocks.push(Block::text(text)),
        Some(Value::Array(parts)) => {
            for (index, part) in parts.into_iter().enumerate() {
                let path = format!("{content_path}[{index}]");
                let (kind, mut part) = part_type(part, &path)?;
                let text = match kind.as_str() {
                    "text" => part_text(&mut part, "text", &path)?,
                    "refusal" => part_text(&mut part, "refusal", &path)?,
                    other => {
                        return Err(DecodeError::invalid(
                            path,
                            format!("content part type `{other}` is not allowed in assistant messages"),
                        ))
                    }
                };
                blocks.push(Block::text(text));
            }
        }
        Some(_) => {
            return Err(DecodeError::invalid(content_path, "content must be a string or an array of content parts"))
        }
    }
    if let Some(refusal) = take_string(message, "refusal")? {
        blocks.push(Block::text(refusal));
    }
    match take(message, "tool_calls") {
        None => {}
        Some(Value::Array(calls)) => {
            for (index, call) in calls.into_iter().enumerate() {
                let path = format!("{path}.tool_calls[{index}]");
                blocks.push(Block::ToolUse(read_tool_call(call, &path)?));
            }
        }
        Some(_) => return Err(DecodeError::invalid(format!("{path}.tool_calls"), "tool_calls must be an array")),
    }
    // The deprecated single `function_call`; its name stands in for an id.
    if let Some(Value::Object(mut call)) = take(message, "function_call") {
        let name = take_string(&mut call, "name")?.unwrap_or_default();
        blocks.push(Block::ToolUse(ToolUse::new(
            name.clone(),
            name,
            function::arguments_text(take(&mut call, "arguments")),
        )));
    }
    Ok(blocks)
}

fn read_tool_call(mut call: Value, path: &str) -> Result<ToolUse, DecodeError> {
    let signature = carried_signature(call.get("extra_content"));
    // Custom (free-form) tool calls carry their input as plain text.
    if call.get("function").is_none() {
        if let Some(Value::Object(custom)) = call.get_mut("custom") {
            let name = take_string(custom, "name")?.unwrap_or_default();
            let input = function::arguments_text(take(custom, "input"));
            let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
            return Ok(ToolUse::new(call_id::restore(id, Protocol::OpenAi), name, input));
        }
    }
    let mut read = function::read_call(call, path)?;
    read.signature = signature;
    // The id the caller was handed: the lane's back.
    if let std::borrow::Cow::Owned(lane) = call_id::restore(&read.id, Protocol::OpenAi) {
        read.id = lane;
    }
    Ok(read)
}

/// Function tools, and the tools of other types (`custom`) as they came.
fn read_tools(tools: Option<Value>) -> Result<(Vec<Tool>, Vec<Value>), DecodeError> {
    let tools = match tools {
        None => return Ok((Vec::new(), Vec::new())),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(DecodeError::invalid("tools", "tools must be an array")),
    };
    let (mut functions, mut others) = (Vec::new(), Vec::new());
    for (index, tool) in tools.into_iter().enumerate() {
        match tool.get("type").and_then(Value::as_str) {
            Some(kind) if kind != "function" => {
                if !tool.get(kind).is_some_and(Value::is_object) {
                    let path = format!("tools[{index}].{kind}");
                    return Err(DecodeError::invalid(&path, format!("a {kind} tool needs a {kind} object")));
                }
                others.push(tool);
            }
            _ => functions.push(function::read_tool(tool, &format!("tools[{index}]"))?),
        }
    }
    Ok((functions, others))
}

/// `None` for a valid shape the IR does not model.
fn read_tool_choice(choice: &Value) -> Result<Option<ToolChoice>, DecodeError> {
    match choice {
        Value::String(choice) => match choice.as_str() {
            "auto" => Ok(Some(ToolChoice::Auto)),
            "none" => Ok(Some(ToolChoice::None)),
            "required" => Ok(Some(ToolChoice::Any)),
            other => Err(DecodeError::invalid("tool_choice", format!("unknown tool_choice `{other}`"))),
        },
        Value::Object(object) => {
            let is_function = object.get("type").and_then(Value::as_str) == Some("function");
            let name = object.get("function").and_then(|f| f.get("name")).and_then(Value::as_str);
            match (is_function, name) {
                (true, Some(name)) => Ok(Some(ToolChoice::Tool(name.to_owned()))),
                (true, None) => Err(DecodeError::invalid(
                    "tool_choice.function.name",
                    "a function tool_choice needs a function name",
                )),
                (false, _) => Ok(None),
            }
        }
        _ => Err(DecodeError::invalid("tool_choice", "tool_choice must be a string or an object")),
    }
}

fn read_response_format(format: Option<Value>) -> Result<Option<ResponseFormat>, DecodeError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let Value::Object(mut format) = format else {
        return Err(DecodeError::invalid("response_format", "response_format must be an object"));
    };
    match take_string(&mut format, "type")?.as_deref() {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(ResponseFormat::JsonObject)),
        Some("json_schema") => {
            let Some(Value::Object(mut schema)) = take(&mut format, "json_schema") else {
                return Err(DecodeError::invalid(
                    "response_format.json_schema",
                    "a json_schema response_format needs a json_schema object",
                ));
            };
            // `description` has no IR field and is not kept.
            Ok(Some(ResponseFormat::JsonSchema {
                name: take_string(&mut schema, "name")?.unwrap_or_default(),
                schema: take(&mut schema, "schema").unwrap_or(Value::Null),
                strict: take_bool(&mut schema, "strict")?,
            }))
        }
        Some(other) => {
            Err(DecodeError::invalid("response_format.type", format!("unknown response_format type `{other}`")))
        }
        None => Err(DecodeError::invalid("response_format.type", "response_format needs a type")),
    }
}

pub(crate) fn read_stop(stop: Option<Value>) -> Result<Vec<String>, DecodeError> {
    match stop {
        None => Ok(Vec::new()),
        Some(Value::String(stop)) => Ok(vec![stop]),
        Some(Value::Array(stops)) => stops
            .into_iter()
            .map(|stop| match stop {
                Value::String(stop) => Ok(stop),
                _ => Err(DecodeError::invalid("stop", "stop sequences must be strings")),
            })
            .collect(),
        Some(_) => Err(DecodeError::invalid("stop", "stop must be a string or an array of strings")),
    }
}

fn write_messages(request: &Request, capabilities: &Capabilities, dropped: &mut Vec<Dropped>) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        let texts: Vec<&TextBlock> = request.system.iter().collect();
        out.push(json!({"role": "system", "content": text_parts(&texts, dropped)}));
    }
    for message in &request.messages {
        let extra = message.extra.for_target_under(Protocol::OpenAi, "messages", dropped);
        let written = out.len();
        match message.role {
            Role::User => write_user(message, capabilities, &mut out, dropped),
            Role::Assistant => out.push(write_assistant(message, dropped)),
            Role::System => out.push(write_system_message(message, dropped)),
        }
        // The message's own members go back on the message it became (the
        // last one written: a user message after its tool results).
        if let (Some(extra), true) = (extra, out.len() > written) {
            if let Some(Value::Object(last)) = out.last_mut() {
                for (key, value) in extra {
                    last.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    }
    out
}

/// A system message inside the conversation stays one there: its text.
fn write_system_message(message: &Message, dropped: &mut Vec<Dropped>) -> Value {
    let mut texts = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(text) => texts.push(text),
            Block::Unmodelled(block) => {
                block.for_target(Protocol::OpenAi, dropped);
            }
            _ => report(dropped, Field::MisplacedBlock),
        }
    }
    json!({"role": "system", "content": text_parts(&texts, dropped)})
}

/// One user message becomes one `tool` message per result, then a user
/// message with whatever else it held.
fn write_user(message: &Message, capabilities: &Capabilities, out: &mut Vec<Value>, dropped: &mut Vec<Dropped>) {
    let mut parts = Vec::new();
    let mut texts_only = true;
    let mut results = 0usize;
    for block in &message.content {
        match block {
            Block::Text(text) => {
                note_text_markers(text, dropped);
                parts.push(json!({"type": "text", "text": text.text}));
            }
            Block::Image { source, cache_control } => {
                texts_only = false;
                if cache_control.is_some() {
                    report(dropped, Field::CacheControl);
                }
                parts.push(json!({"type": "image_url", "image_url": {"url": url_of(source)}}));
            }
            Block::Document { source, name, cache_control } => {
                if cache_control.is_some() {
                    report(dropped, Field::CacheControl);
                }
                if let Some(part) = write_document(source, name.as_deref(), dropped) {
                    texts_only = false;
                    parts.push(part);
                }
            }
            Block::Audio { source } => {
                if let Some(part) = write_audio(source, capabilities, dropped) {
                    texts_only = false;
                    parts.push(part);
                }
            }
            Block::ToolResult(result) => {
                results += 1;
                out.push(write_tool_result(result, dropped));
            }
            Block::Thinking { .. } => report(dropped, Field::Thinking),
            Block::RedactedThinking { .. } => report(dropped, Field::RedactedThinking),
            Block::ToolUse(_) => report(dropped, Field::MisplacedBlock),
            Block::Unmodelled(block) => match (block.for_target(Protocol::OpenAi, dropped), parts.last_mut()) {
                (Some(members), Some(Value::Object(last))) if block.beside => {
                    texts_only = false;
                    Unmodelled::merge_into(members, last);
                }
                (Some(part), _) if !block.beside => {
                    texts_only = false;
                    parts.push(part.clone());
                }
                _ => {}
            },
        }
    }
    if parts.is_empty() && results > 0 {
        return;
    }
    let content = match parts.as_slice() {
        [] => Value::String(String::new()),
        [only] if texts_only => only.get("text").cloned().unwrap_or_default(),
        _ => Value::Array(parts),
    };
    out.push(json!({"role": "user", "content": content}));
}

/// A file part. OpenAI takes inline data or an uploaded file's id, not a URL.
fn write_document(source: &MediaSource, name: Option<&str>, dropped: &mut Vec<Dropped>) -> Option<Value> {
    let mut file = Map::new();
    match source {
        MediaSource::Base64 { media_type, data } => {
            file.insert("file_data".into(), Value::String(data_url(media_type, data)));
        }
        MediaSource::Url { url, .. } if !url.contains("://") => {
            file.insert("file_id".into(), Value::String(url.clone()));
        }
        MediaSource::Url { .. } => {
            report(dropped, Field::MediaUrl);
            return None;
        }
    }
    if let Some(name) = name {
        file.insert("filename".into(), Value::String(name.to_owned()));
    }
    Some(json!({"type": "file", "file": file}))
}

/// An `input_audio` part, for a model that may take audio: inline `wav`
/// or `mp3` only (a URL or file reference, or another type, cannot be
/// sent, and is reported).
fn write_audio(source: &MediaSource, capabilities: &Capabilities, dropped: &mut Vec<Dropped>) -> Option<Value> {
    if !capabilities.sends_audio(dropped) {
        return None;
    }
    let (media_type, data) = match source {
        MediaSource::Base64 { media_type, data } => (media_type.as_str(), data.as_str()),
        MediaSource::Url { url, .. } => match parse_data_url(url) {
            Some(inline) => inline,
            None => {
                report(dropped, Field::MediaUrl);
                return None;
            }
        },
    };
    let Some(format) = media::openai_audio_format(media_type) else {
        report(dropped, Field::MediaType);
        return None;
    };
    Some(json!({"type": "input_audio", "input_audio": {"data": data, "format": format}}))
}

fn write_tool_result(result: &ToolResult, dropped: &mut Vec<Dropped>) -> Value {
    if result.is_error {
        report(dropped, Field::ToolResultError);
    }
    let mut texts = Vec::new();
    for block in &result.content {
        match block {
            Block::Text(text) => texts.push(text),
            Block::Image { .. } | Block::Audio { .. } | Block::Document { .. } => {
                report(dropped, Field::ToolResultMedia)
            }
            Block::Unmodelled(block) => {
                block.for_target(Protocol::OpenAi, dropped);
            }
            _ => report(dropped, Field::MisplacedBlock),
        }
    }
    json!({
        "role": "tool",
        "tool_call_id": result.tool_use_id,
        "content": text_parts(&texts, dropped),
    })
}

fn write_assistant(message: &Message, dropped: &mut Vec<Dropped>) -> Value {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(text) => texts.push(text),
            // A vendor's call signature means nothing to an OpenAI upstream.
            Block::ToolUse(call) => calls.push(function::call_value(&call.id, call)),
            Block::Thinking { .. } => report(dropped, Field::Thinking),
            Block::RedactedThinking { .. } => report(dropped, Field::RedactedThinking),
            Block::Image { .. } | Block::Audio { .. } | Block::Document { .. } | Block::ToolResult(_) => {
                report(dropped, Field::MisplacedBlock)
            }
            Block::Unmodelled(block) => {
                block.for_target(Protocol::OpenAi, dropped);
            }
        }
    }
    let mut out = Map::new();
    out.insert("role".into(), Value::String("assistant".into()));
    let content = if texts.is_empty() && !calls.is_empty() { Value::Null } else { text_parts(&texts, dropped) };
    out.insert("content".into(), content);
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(out)
}

/// Text blocks as content: a plain string for one, text parts for several.
fn text_parts(texts: &[&TextBlock], dropped: &mut Vec<Dropped>) -> Value {
    for text in texts {
        note_text_markers(text, dropped);
    }
    match texts {
        [] => Value::String(String::new()),
        [only] => Value::String(only.text.clone()),
        _ => Value::Array(texts.iter().map(|t| json!({"type": "text", "text": t.text})).collect()),
    }
}

fn note_text_markers(text: &TextBlock, dropped: &mut Vec<Dropped>) {
    if text.cache_control.is_some() {
        report(dropped, Field::CacheControl);
    }
    if !text.citations.is_empty() {
        report(dropped, Field::Citations);
    }
}

fn write_tool(tool: &Tool, dropped: &mut Vec<Dropped>) -> Value {
    if tool.cache_control.is_some() {
        report(dropped, Field::CacheControl);
    }
    tool.extra.for_target_under(Protocol::OpenAi, "tools", dropped);
    let mut value = function::tool_value(tool);
    if let (Some(strict), Some(function)) = (tool.strict, value.get_mut("function").and_then(Value::as_object_mut)) {
        function.insert("strict".into(), Value::Bool(strict));
    }
    value
}

fn write_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Any => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

fn write_response_format(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema { name, schema, strict } => {
            let mut inner = Map::new();
            inner.insert("name".into(), Value::String(name.clone()));
            if !schema.is_null() {
                inner.insert("schema".into(), schema.clone());
            }
            if let Some(strict) = strict {
                inner.insert("strict".into(), Value::Bool(*strict));
            }
            json!({"type": "json_schema", "json_schema": inner})
        }
    }
}

pub(crate) fn insert_f64(body: &mut Map<String, Value>, key: &str, value: Option<f64>) {
    if let Some(value) = value {
        body.insert(key.to_owned(), Value::from(value));
    }
}

/// Removes a field, treating an explicit `null` as absent. `shift_remove`
/// keeps the remaining fields in the caller's order for `extra`.
pub(crate) fn take(fields: &mut Map<String, Value>, key: &str) -> Option<Value> {
    match fields.shift_remove(key) {
        None | Some(Value::Null) => None,
        Some(value) => Some(value),
    }
}

pub(crate) fn take_string(fields: &mut Map<String, Value>, key: &str) -> Result<Option<String>, DecodeError> {
    match take(fields, key) {
        None => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(DecodeError::invalid(key, format!("{key} must be a string"))),
    }
}

pub(crate) fn take_f64(fields: &mut Map<String, Value>, key: &str) -> Result<Option<f64>, DecodeError> {
    match take(fields, key) {
        None => Ok(None),
        Some(value) => {
            value.as_f64().map(Some).ok_or_else(|| DecodeError::invalid(key, format!("{key} must be a number")))
        }
    }
}

pub(crate) fn take_u64(fields: &mut Map<String, Value>, key: &str) -> Result<Option<u64>, DecodeError> {
    match take(fields, key) {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| DecodeError::invalid(key, format!("{key} must be a non-negative integer"))),
    }
}

pub(crate) fn take_i64(fields: &mut Map<String, Value>, key: &str) -> Result<Option<i64>, DecodeError> {
    match take(fields, key) {
        None => Ok(None),
        Some(value) => {
            value.as_i64().map(Some).ok_or_else(|| DecodeError::invalid(key, format!("{key} must be an integer")))
        }
    }
}

pub(crate) fn take_bool(fields: &mut Map<String, Value>, key: &str) -> Result<Option<bool>, DecodeError> {
    match take(fields, key) {
        None => Ok(None),
        Some(Value::Bool(value)) => Ok(Some(value)),
        Some(_) => Err(DecodeError::invalid(key, format!("{key} must be a boolean"))),
    }
}

/// A content part's `type` and the rest of its fields.
fn part_type(part: Value, path: &str) -> Result<(String, Map<String, Value>), DecodeError> {
    let Value::Object(mut part) = part else {
        return Err(DecodeError::invalid(path, "content parts must be objects"));
    };
    match part.shift_remove("type") {
        Some(Value::String(kind)) => Ok((kind, part)),
        _ => Err(DecodeError::invalid(format!("{path}.type"), "content parts need a type")),
    }
}

fn part_text(part: &mut Map<String, Value>, key: &str, path: &str) -> Result<String, DecodeError> {
    match part.shift_remove(key) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(DecodeError::invalid(format!("{path}.{key}"), format!("{key} parts need a string {key}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::Reasoning;

    fn read_json(value: Value) -> Result<Request, DecodeError> {
        read(value.to_string().as_bytes())
    }

    /// What the pinned SDK's types hold and the IR does not model (a
    /// message's `name`, an assistant's `audio`, a `custom` tool) goes back
    /// as it came to an OpenAI lane and is reported to any other, never lost
    /// in silence nor refused; an `input_audio` part, modelled, goes back
    /// too.
    #[test]
    fn unmodelled_messages_members_parts_and_tools_go_back_or_are_reported() {
        let audio = json!({"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}});
        let custom = json!({"type": "custom", "custom": {"name": "grammar"}});
        let function = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}});
        let request = read_json(json!({
            "model": "m",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}, audio.clone()], "name": "ann"},
                {"role": "assistant", "content": "hello", "audio": {"id": "audio_1"}, "name": "bot"},
                {"role": "developer", "content": "be brief", "name": "ops"},
                {"role": "user", "content": "go on"}
            ],
            "tools": [function.clone(), custom.clone()]
        }))
        .unwrap();
        let (body, dropped) = written(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(body["messages"][0]["name"], "ann");
        assert_eq!(body["messages"][0]["content"][1], audio);
        assert_eq!(body["messages"][1]["audio"], json!({"id": "audio_1"}));
        assert_eq!(body["messages"][1]["name"], "bot");
        assert_eq!(body["messages"][2]["name"], "ops");
        assert!(body["messages"][3].get("name").is_none());
        assert_eq!(body["tools"], json!([function, custom]));

        let mut lost = Vec::new();
        for message in &request.messages {
            message.extra.for_target_under(Protocol::Anthropic, "messages", &mut lost);
            for block in &message.content {
                if let Block::Unmodelled(block) = block {
                    block.for_target(Protocol::Anthropic, &mut lost);
                }
            }
        }
        request.extra.for_target(Protocol::Anthropic, &mut lost);
        let paths: Vec<&str> = lost.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        // The audio part is modelled (`Block::Audio`): Anthropic's writer
        // reports it as `Field::Audio`, not as an unmodelled part.
        assert_eq!(paths, ["messages.name", "messages.audio.id", "tools"]);
    }

    /// A part's members beside its data (`image_url.detail` but `auto`,
    /// `prompt_cache_breakpoint`) go back onto the part for an OpenAI lane
    /// and are reported to any other; `detail` used to be dropped in silence.
    #[test]
    fn part_members_beside_their_data_go_back_or_are_reported() {
        let image = json!({"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}});
        let text = json!({"type": "text", "text": "hi", "prompt_cache_breakpoint": {"mode": "explicit"}});
        let auto = json!({"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "auto"}});
        let request = read_json(json!({
            "model": "m",
            "messages": [{"role": "user", "content": [text.clone(), image.clone(), auto]}]
        }))
        .unwrap();
        let (body, dropped) = written(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        let parts = &body["messages"][0]["content"];
        assert_eq!(parts[0], text);
        assert_eq!(parts[1], image);
        assert_eq!(parts[2], json!({"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}));

        let mut lost = Vec::new();
        for block in &request.messages[0].content {
            if let Block::Unmodelled(block) = block {
                block.for_target(Protocol::Gemini, &mut lost);
            }
        }
        let paths: Vec<&str> = lost.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(paths, ["messages.content.text.prompt_cache_breakpoint", "messages.content.image_url.detail"]);
    }

    fn written(request: &Request) -> (Value, Vec<Dropped>) {
        let encoded = write(request, &Capabilities::default());
        (serde_json::from_slice(&encoded.body).unwrap(), encoded.dropped)
    }

    /// OpenRouter's `reasoning` object is read: effort, a budget, on or
    /// off; what else it holds comes back on a same-protocol hop, and
    /// another protocol's reasoning is written as `reasoning_effort`.
    #[test]
    fn openrouters_reasoning_object_is_read() {
        use switchyard_codec::ir::Effort;
        let request =
            read_json(json!({"model": "m", "messages": [], "reasoning": {"max_tokens": 2000, "exclude": true}}))
                .unwrap();
        assert_eq!(request.reasoning, Some(Reasoning::with_budget(2000)));
        let (body, dropped) = written(&request);
        assert_eq!(body["reasoning"], json!({"max_tokens": 2000, "exclude": true}));
        assert!(body.get("reasoning_effort").is_none() && dropped.is_empty(), "{body} {dropped:?}");
        let effort = read_json(json!({"model": "m", "messages": [], "reasoning": {"effort": "high"}})).unwrap();
        assert_eq!(effort.reasoning, Some(Reasoning::with_effort(Effort::High)));
        assert_eq!(written(&effort).0["reasoning_effort"], "high");
        let off = read_json(json!({"model": "m", "messages": [], "reasoning": {"enabled": false}})).unwrap();
        assert_eq!(off.reasoning, Some(Reasoning::off()));
        let on = read_json(json!({"model": "m", "messages": [], "reasoning": {"enabled": true}})).unwrap();
        assert_eq!(on.reasoning, Some(Reasoning::on()));
        assert!(read_json(json!({"model": "m", "messages": [], "reasoning": {"effort": "ultra"}})).is_err());
        assert!(read_json(json!({"model": "m", "messages": [], "reasoning": "high"})).is_err());
    }

    #[test]
    fn reads_the_basics_and_keeps_unknown_fields() {
        let request = read_json(json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
            ],
            "max_tokens": 5,
            "stop": "END",
            "n": 2,
            "logit_bias": {"50256": -100},
            "stream": true,
            "stream_options": {"include_usage": true}
        }))
        .unwrap();
        assert_eq!(request.model, "gpt-4o");
        let system: Vec<&str> = request.system.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(system, ["be brief"]);
        // A system message after the first turn stays where it was.
        let late = Message::new(Role::System, vec![Block::text("a"), Block::text("b")]);
        assert_eq!(request.messages, vec![Message::text(Role::User, "hi"), late]);
        let (body, dropped) = written(&request);
        assert_eq!(
            body["messages"],
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
        );
        // A stream carries one choice back: `n` is reported, not asked.
        assert_eq!(dropped.iter().map(|d| d.field).collect::<Vec<_>>(), [Field::Choices]);
        assert!(body.get("n").is_none());
        assert_eq!(request.n, Some(2));
        assert_eq!(request.max_tokens, Some(5));
        assert_eq!(request.stop, ["END"]);
        assert!(request.stream);
        assert_eq!(request.extra.origin, Some(Protocol::OpenAi));
        let keys: Vec<&str> = request.extra.fields.keys().map(String::as_str).collect();
        assert_eq!(keys, ["logit_bias"]);
    }

    #[test]
    fn max_completion_tokens_wins_and_is_what_is_written() {
        let request = read_json(json!({
            "model": "o3", "messages": [], "max_tokens": 5, "max_completion_tokens": 9
        }))
        .unwrap();
        assert_eq!(request.max_tokens, Some(9));
        let (body, _) = written(&request);
        assert_eq!(body["max_completion_tokens"], 9);
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (json!([]), "body"),
            (json!({"messages": []}), "model"),
            (json!({"model": "m"}), "messages"),
            (json!({"model": "m", "messages": {}}), "messages"),
            (json!({"model": "m", "messages": [], "temperature": "hot"}), "temperature"),
            (json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}), "messages[0].role"),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}),
                "messages[0].content[0].input_audio.data",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio",
                    "input_audio": {"data": "AAAA", "format": "flac"}}]}]}),
                "messages[0].content[0].input_audio.format",
            ),
            (json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}), "messages[0].tool_call_id"),
            (json!({"model": "m", "messages": [], "tools": [{"type": "custom"}]}), "tools[0].custom"),
            (json!({"model": "m", "messages": [], "tool_choice": "sometimes"}), "tool_choice"),
            (json!({"model": "m", "messages": [], "response_format": {"type": "yaml"}}), "response_format.type"),
            (json!({"model": "m", "messages": [], "metadata": []}), "metadata"),
        ];
        for (body, param) in cases {
            match read_json(body.clone()) {
                Err(DecodeError::Invalid { param: Some(p), message }) => {
                    assert_eq!(p, param, "{body}");
                    assert!(!message.ends_with('.'));
                    assert!(message.chars().next().is_some_and(|c| !c.is_uppercase()));
                }
                other => panic!("{body}: {other:?}"),
            }
        }
        assert!(matches!(read(b"{not json"), Err(DecodeError::Json(_))));
    }

    #[test]
    fn tool_messages_merge_and_split_back() {
        let request = read_json(json!({
            "model": "m",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "w", "arguments": "{\"city\":\"Rome\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "rainy"}]},
                {"role": "user", "content": "thanks"},
                {"role": "user", "content": "bye"}
            ]
        }))
        .unwrap();
        assert_eq!(request.messages.len(), 4);
        let merged = &request.messages[2];
        assert_eq!(merged.role, Role::User);
        assert_eq!(merged.content.len(), 3);
        assert!(
            matches!(&merged.content[0], Block::ToolResult(r) if r.tool_use_id == "c1" && r.joined_text() == "sunny")
        );
        assert!(matches!(&merged.content[2], Block::Text(t) if t.text == "thanks"));
        let (body, dropped) = written(&request);
        assert!(dropped.is_empty());
        let roles: Vec<&str> =
            body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user", "user"]);
        assert_eq!(body["messages"][1]["content"], Value::Null);
        assert_eq!(body["messages"][3]["content"], "rainy");
    }

    #[test]
    fn media_reads_as_base64_url_and_file_id() {
        let request = read_json(json!({
            "model": "m",
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
                {"type": "file", "file": {"file_data": "JVBE"}},
                {"type": "file", "file": {"file_id": "file-123"}}
            ]}]
        }))
        .unwrap();
        // The first image's `detail` follows it, to go back onto it.
        let (beside, blocks): (Vec<&Block>, Vec<&Block>) =
            request.messages[0].content.iter().partition(|b| matches!(b, Block::Unmodelled(u) if u.beside));
        assert_eq!(beside.len(), 1);
        assert!(
            matches!(blocks[0], Block::Image { source: MediaSource::Base64 { media_type, data }, .. } if media_type == "image/png" && data == "AAAA")
        );
        assert!(
            matches!(blocks[1], Block::Image { source: MediaSource::Url { url, .. }, .. } if url == "https://example.com/cat.jpg")
        );
        assert!(matches!(blocks[2], Block::Document { name: Some(n), .. } if n == "a.pdf"));
        assert!(
            matches!(blocks[3], Block::Document { source: MediaSource::Base64 { media_type, .. }, .. } if media_type == "application/pdf")
        );
        assert!(matches!(blocks[4], Block::Document { source: MediaSource::Url { url, .. }, .. } if url == "file-123"));
    }

    #[test]
    fn unrepresentable_fields_are_reported() {
        let request = Request {
            model: "m".into(),
            top_k: Some(40),
            system: vec![TextBlock {
                text: "s".into(),
                cache_control: Some(switchyard_codec::ir::CacheControl { ttl: None }),
                citations: Vec::new(),
            }],
            messages: vec![
                Message::new(
                    Role::Assistant,
                    vec![Block::Thinking { text: "hmm".into(), signature: Some("sig".into()) }, Block::text("ok")],
                ),
                Message::new(
                    Role::User,
                    vec![
                        Block::ToolResult(ToolResult {
                            tool_use_id: "c".into(),
                            name: None,
                            content: vec![Block::text("boom")],
                            is_error: true,
                        }),
                        Block::Document {
                            source: MediaSource::Url { url: "https://x/y.pdf".into(), media_type: None },
                            name: None,
                            cache_control: None,
                        },
                    ],
                ),
            ],
            reasoning: Some(Reasoning::with_budget(20000)),
            ..Request::default()
        };
        let (body, dropped) = written(&request);
        let fields: Vec<Field> = dropped.iter().map(|d| d.field).collect();
        assert_eq!(
            fields,
            [
                Field::CacheControl,
                Field::Thinking,
                Field::ToolResultError,
                Field::MediaUrl,
                Field::TopK,
                Field::ReasoningBudget
            ]
        );
        assert!(dropped[..5].iter().all(|d| d.reason == switchyard_codec::ir::DropReason::Unsupported));
        assert_eq!(dropped[5].reason, switchyard_codec::ir::DropReason::Converted);
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["messages"][1]["content"], "ok");
        // The results-only user message leaves just the tool message.
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn extras_pass_on_same_protocol_hops_only() {
        let mut request = read_json(json!({
            "model": "m", "messages": [], "stream": true,
            "stream_options": {"include_usage": false, "include_obfuscation": false},
            "service_tier": "flex",
            "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}
        }))
        .unwrap();
        assert!(request.tool_choice.is_none());
        let (body, dropped) = written(&request);
        assert!(dropped.is_empty());
        assert_eq!(body["service_tier"], "flex");
        assert_eq!(body["tool_choice"]["type"], "allowed_tools");
        assert_eq!(body["stream_options"], json!({"include_usage": true, "include_obfuscation": false}));

        request.extra.origin = Some(Protocol::Anthropic);
        let (body, dropped) = written(&request);
        assert!(body.get("service_tier").is_none());
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        let paths: Vec<&str> = dropped.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(
            paths,
            [
                "tool_choice.type",
                "tool_choice.allowed_tools.mode",
                "tool_choice.allowed_tools.tools",
                "stream_options.include_usage",
                "stream_options.include_obfuscation",
                "service_tier"
            ]
        );

        request.extra.origin = Some(Protocol::OpenAi);
        request.stream = false;
        let (body, dropped) = written(&request);
        assert!(body.get("stream_options").is_none());
        assert!(body.get("stream").is_none());
        assert_eq!(dropped[0].field, Field::StreamOptions);
    }

    #[test]
    fn efforts_read_as_ordered_levels_and_none_as_off() {
        let read_effort_of =
            |effort: &str| read_json(json!({"model": "m", "messages": [], "reasoning_effort": effort}));
        let high = switchyard_codec::ir::Effort::High;
        assert_eq!(read_effort_of("high").unwrap().reasoning, Some(Reasoning::with_effort(high)));
        assert_eq!(read_effort_of("none").unwrap().reasoning, Some(Reasoning::off()));
        assert!(
            matches!(read_effort_of("extreme"), Err(DecodeError::Invalid { param: Some(p), .. }) if p == "reasoning_effort")
        );
        // Anthropic's `max` has no Chat Completions level: the nearest one is sent and the change reported.
        let max = switchyard_codec::ir::Effort::Max;
        let request = Request { reasoning: Some(Reasoning::with_effort(max)), ..Request::default() };
        let (body, dropped) = written(&request);
        assert_eq!(body["reasoning_effort"], "xhigh");
        let converted = switchyard_codec::ir::DropReason::Converted;
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, converted)]);
        let (body, dropped) = written(&Request { reasoning: Some(Reasoning::off()), ..Request::default() });
        assert!(body.get("reasoning_effort").is_none());
        assert_eq!(dropped, vec![Dropped::unsupported(Field::ReasoningOff)]);
    }

    #[test]
    fn a_thought_signature_in_extra_content_is_read_onto_the_call() {
        let request =
            read_json(json!({"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"},
                 "extra_content": {"google": {"thought_signature": "c2ln"}}}
            ]}]}))
            .unwrap();
        let Block::ToolUse(call) = &request.messages[0].content[0] else { panic!("no call") };
        assert_eq!(call.signature.as_deref(), Some("c2ln"));
        assert!(request.extra.is_empty());
    }

    #[test]
    fn legacy_function_calls_read_as_tool_use() {
        let request = read_json(json!({
            "model": "m",
            "messages": [
                {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "42"}
            ]
        }))
        .unwrap();
        assert!(matches!(&request.messages[0].content[0], Block::ToolUse(c) if c.id == "f" && c.input == "{}"));
        assert!(
            matches!(&request.messages[1].content[0], Block::ToolResult(r) if r.tool_use_id == "f" && r.name.as_deref() == Some("f"))
        );
    }
}
