//! The Messages request body: reading it into `ir::Request` and writing one.
//!
//! Mapping decisions (the IR crate docs give the general rules):
//! - `max_tokens` is required by Anthropic. A request without it is still
//!   read (IR `None`, the gateway is lenient); on write a missing cap becomes
//!   [`DEFAULT_MAX_TOKENS`], plus the thinking budget when one is set, since
//!   the budget is counted inside the cap and must stay below it.
//! - `thinking`: `enabled` ↔ thinking on with `Reasoning::budget_tokens`,
//!   `disabled` ↔ off, `adaptive` ↔ on with no budget. `output_config.effort`
//!   is the IR effort, with or without `thinking` (without it, thinking is
//!   `Unset`: the effort tunes the whole reply). What the writer sends
//!   follows the lane's capabilities: an effort only to models that take
//!   one (`capabilities.effort`), adaptive thinking only to models that take
//!   it (`capabilities.adaptive_thinking`); otherwise thinking on is
//!   `enabled` with the budget its effort stands for, and what could not be
//!   said is reported.
//! - `temperature` and `top_p` together go only to models that take both
//!   (`capabilities.temperature_with_top_p`); otherwise `top_p` is reported.
//! - `output_config.format` (`json_schema`) ↔ `ResponseFormat::JsonSchema`;
//!   the beta top-level `output_format` is read too. Anthropic schemas have
//!   no name, so one is read as [`SCHEMA_NAME`].
//! - `tool_choice.disable_parallel_tool_use` ↔ `!parallel_tool_calls`.
//! - `metadata.user_id` ↔ `user`; other metadata keys (which Anthropic
//!   rejects) are read into IR metadata but never written.
//! - A `system` message anywhere in `messages` is a `Role::System` message
//!   at its place (its text, and its beta tool changes as unmodelled
//!   blocks); its other members (`clear_at`, `output_config`) are the
//!   message's extras. The top-level `system` is `Request::system`. The
//!   writer keeps system messages in place for a model that takes them
//!   (`capabilities.system_messages`); for another their text joins
//!   `system` (`codec::system::fold`), reported.
//! - A tool's `strict` is the IR's; its other members (`defer_loading`,
//!   `input_examples`, ...) are the tool's extras.
//! - The caller's `anthropic-beta` header is `Request::betas`
//!   (`read_headers`); the writer leaves them to the header, which reaches
//!   an Anthropic lane as it came.
//! - Server tools (tools with a `type` other than `custom`) and every other
//!   unmodelled field are Anthropic extras.

use serde_json::{json, Map, Value};
use switchyard_codec::effort::{self, ClaudeSampling, ClaudeThinking};
use switchyard_codec::ir::{
    Block, Capabilities, DropReason, Dropped, Extra, Field, Message, Protocol, Reasoning, Request, ResponseFormat,
    Role, TextBlock, Thinking, Tool, ToolChoice, Unmodelled,
};
use switchyard_codec::{DecodeError, Encoded};

use crate::blocks::{
    is_plain_text, read_block, read_text_block, write_block, write_text_block, Target, ToolNames, Unknown,
};
use crate::wire::{
    as_array, as_bool, as_f64, as_object, as_str, as_u64, at, opt_bool, opt_str, opt_value, put_cache_control,
    read_cache_control, req_str,
};
use crate::DEFAULT_MAX_TOKENS;

/// The name a JSON schema read from this protocol, which names none, gets.
pub const SCHEMA_NAME: &str = ResponseFormat::UNNAMED;

/// Where Messages requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "max_tokens",
        Field::Temperature => "temperature",
        Field::TopP => "top_p",
        Field::TopK => "top_k",
        Field::Stop => "stop_sequences",
        Field::JsonSchema => "output_config.format",
        Field::ReasoningEffort => "output_config.effort",
        Field::ReasoningBudget => "thinking.budget_tokens",
        Field::ReasoningOff => "thinking.type",
        Field::ToolChoice => "tool_choice",
        Field::ParallelToolCalls => "tool_choice.disable_parallel_tool_use",
        Field::User => "metadata.user_id",
        Field::Thinking => "messages.content.thinking",
        Field::CacheControl => "cache_control",
        Field::SystemMessage => "messages.system",
        Field::ToolStrict => "tools.strict",
        Field::Betas => "anthropic-beta",
        _ => return None,
    })
}

/// Top-level fields this module models; the rest become extras.
#[derive(Default)]
struct Known {
    model: Option<Value>,
    max_tokens: Option<Value>,
    system: Option<Value>,
    messages: Option<Value>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
    temperature: Option<Value>,
    top_p: Option<Value>,
    top_k: Option<Value>,
    stop_sequences: Option<Value>,
    stream: Option<Value>,
    metadata: Option<Value>,
    thinking: Option<Value>,
    output_config: Option<Value>,
    output_format: Option<Value>,
}

pub(crate) fn read_request(body: &[u8]) -> Result<Request, DecodeError> {
    let value: Value = serde_json::from_slice(body)?;
    let Value::Object(obj) = value else {
        return Err(DecodeError::Invalid { message: "request body must be a json object".into(), param: None });
    };
    let mut request = Request::default();
    let mut known = Known::default();
    for (key, value) in obj {
        // `null` means "not given" for every modelled field.
        let slot = match key.as_str() {
            "model" => &mut known.model,
            "max_tokens" => &mut known.max_tokens,
            "system" => &mut known.system,
            "messages" => &mut known.messages,
            "tools" => &mut known.tools,
            "tool_choice" => &mut known.tool_choice,
            "temperature" => &mut known.temperature,
            "top_p" => &mut known.top_p,
            "top_k" => &mut known.top_k,
            "stop_sequences" => &mut known.stop_sequences,
            "stream" => &mut known.stream,
            "metadata" => &mut known.metadata,
            "thinking" => &mut known.thinking,
            "output_config" => &mut known.output_config,
            "output_format" => &mut known.output_format,
            _ => {
                request.extra.insert(Protocol::Anthropic, key, value);
                continue;
            }
        };
        if !value.is_null() {
            *slot = Some(value);
        }
    }

    request.model = match &known.model {
        Some(v) => as_str(v, "model")?.to_owned(),
        None => return Err(DecodeError::invalid("model", "model is required")),
    };
    request.max_tokens = known.max_tokens.as_ref().map(|v| as_u64(v, "max_tokens")).transpose()?;
    if let Some(system) = &known.system {
        request.system = read_system(system)?;
    }
    let Some(messages) = &known.messages else {
        return Err(DecodeError::invalid("messages", "messages is required"));
    };
    request.messages = read_messages(messages)?;
    if let Some(tools) = &known.tools {
        read_tools(tools, &mut request)?;
    }
    if let Some(choice) = &known.tool_choice {
        read_tool_choice(choice, &mut request)?;
    }
    request.temperature = known.temperature.as_ref().map(|v| as_f64(v, "temperature")).transpose()?;
    request.top_p = known.top_p.as_ref().map(|v| as_f64(v, "top_p")).transpose()?;
    request.top_k = known.top_k.as_ref().map(|v| as_u64(v, "top_k")).transpose()?;
    if let Some(stops) = &known.stop_sequences {
        for (i, stop) in as_array(stops, "stop_sequences")?.iter().enumerate() {
            request.stop.push(as_str(stop, &at("stop_sequences", i))?.to_owned());
        }
    }
    request.stream = known.stream.as_ref().map(|v| as_bool(v, "stream")).transpose()?.unwrap_or(false);
    if let Some(metadata) = &known.metadata {
        let metadata = as_object(metadata, "metadata")?;
        for (key, value) in metadata {
            if key == "user_id" {
                request.user = opt_str(metadata, "user_id", "metadata")?.map(str::to_owned);
            } else {
                request.metadata.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(thinking) = &known.thinking {
        read_thinking(thinking, &mut request)?;
    }
    if let Some(config) = &known.output_config {
        read_output_config(config, &mut request)?;
    }
    if let Some(format) = &known.output_format {
        let format_obj = as_object(format, "output_format")?;
        match read_format(format_obj, "output_format")? {
            Some(rf) if request.response_format.is_none() => request.response_format = Some(rf),
            _ => request.extra.insert(Protocol::Anthropic, "output_format".into(), format.clone()),
        }
    }
    Ok(request)
}

fn read_system(value: &Value) -> Result<Vec<TextBlock>, DecodeError> {
    match value {
        // An empty system string says nothing.
        Value::String(text) if text.is_empty() => Ok(Vec::new()),
        Value::String(text) => Ok(vec![TextBlock::new(text.clone())]),
        _ => {
            let items = as_array(value, "system")?;
            let mut blocks = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let path = at("system", i);
                let obj = as_object(item, &path)?;
                let kind = req_str(obj, "type", &path)?;
                if kind != "text" {
                    return Err(DecodeError::invalid(format!("{path}.type"), format!("{path}.type must be text")));
                }
                blocks.push(read_text_block(obj, &path)?);
            }
            Ok(blocks)
        }
    }
}

fn read_messages(value: &Value) -> Result<Vec<Message>, DecodeError> {
    let items = as_array(value, "messages")?;
    let mut names = ToolNames::new();
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = at("messages", i);
        let obj = as_object(item, &path)?;
        let role = match req_str(obj, "role", &path)? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            _ => {
                return Err(DecodeError::invalid(
                    format!("{path}.role"),
                    format!("{path}.role must be user, assistant or system"),
                ))
            }
        };
        let content_path = format!("{path}.content");
        let content = match opt_value(obj, "content") {
            None => return Err(DecodeError::invalid(content_path.clone(), format!("{content_path} is required"))),
            Some(Value::String(text)) => vec![Block::text(text.clone())],
            Some(value) => {
                let parts = as_array(value, &content_path)?;
                let mut blocks = Vec::with_capacity(parts.len());
                for (j, part) in parts.iter().enumerate() {
                    let part_path = at(&content_path, j);
                    if let Some(block) = read_block(part, &part_path, Unknown::Reject, &names)? {
                        if role == Role::System && !fits_system(&block) {
                            let param = format!("{part_path}.type");
                            return Err(DecodeError::invalid(
                                param.clone(),
                                format!("{param} must be text, tool_addition or tool_removal in a system message"),
                            ));
                        }
                        let marked_call = match &block {
                            Block::ToolUse(call) => {
                                names.insert(call.id.clone(), call.name.clone());
                                part.get("cache_control").filter(|marker| !marker.is_null())
                            }
                            _ => None,
                        };
                        blocks.push(block);
                        // The IR has no marker on a call: an Anthropic lane
                        // gets it back on the call, another reports it.
                        if let Some(marker) = marked_call {
                            blocks.push(Block::Unmodelled(Unmodelled {
                                origin: Protocol::Anthropic,
                                path: "messages.content.tool_use.cache_control".to_owned(),
                                value: json!({ "cache_control": marker }),
                                beside: true,
                            }));
                        }
                    }
                }
                blocks
            }
        };
        let mut message = Message::new(role, content);
        for (key, member) in obj {
            if key != "role" && key != "content" {
                message.extra.insert(Protocol::Anthropic, key.clone(), member.clone());
            }
        }
        messages.push(message);
    }
    Ok(messages)
}

/// What a system message may hold: text, and the tool changes of the
/// `mid-conversation-tool-changes` beta.
fn fits_system(block: &Block) -> bool {
    match block {
        Block::Text(_) => true,
        Block::Unmodelled(block) => {
            matches!(block.value.get("type").and_then(Value::as_str), Some("tool_addition" | "tool_removal"))
        }
        _ => false,
    }
}

/// The caller's betas: every `anthropic-beta` header, each a comma-separated
/// list of names.
pub(crate) fn read_betas(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

fn read_tools(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let mut server_tools = Vec::new();
    for (i, item) in as_array(value, "tools")?.iter().enumerate() {
        let path = at("tools", i);
        let obj = as_object(item, &path)?;
        // Versioned server tools (`web_search_20250305`, `bash_...`) have no
        // IR form; they ride along as an extra.
        if opt_str(obj, "type", &path)?.is_some_and(|t| t != "custom") {
            server_tools.push(item.clone());
            continue;
        }
        let parameters = opt_value(obj, "input_schema").cloned().ok_or_else(|| {
            DecodeError::invalid(format!("{path}.input_schema"), format!("{path}.input_schema is required"))
        })?;
        let mut extra = Extra::new();
        for (key, member) in obj {
            if !matches!(key.as_str(), "type" | "name" | "description" | "input_schema" | "cache_control" | "strict") {
                extra.insert(Protocol::Anthropic, key.clone(), member.clone());
            }
        }
        request.tools.push(Tool {
            name: req_str(obj, "name", &path)?.to_owned(),
            description: opt_str(obj, "description", &path)?.map(str::to_owned),
            parameters,
            cache_control: read_cache_control(obj, &path)?,
            strict: opt_bool(obj, "strict", &path)?,
            extra,
        });
    }
    if !server_tools.is_empty() {
        request.extra.insert(Protocol::Anthropic, "tools".into(), Value::Array(server_tools));
    }
    Ok(())
}

fn read_tool_choice(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let obj = as_object(value, "tool_choice")?;
    request.tool_choice = Some(match req_str(obj, "type", "tool_choice")? {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Any,
        "none" => ToolChoice::None,
        "tool" => ToolChoice::Tool(req_str(obj, "name", "tool_choice")?.to_owned()),
        _ => return Err(DecodeError::invalid("tool_choice.type", "tool_choice.type must be auto, any, tool or none")),
    });
    if let Some(disable) = opt_bool(obj, "disable_parallel_tool_use", "tool_choice")? {
        request.parallel_tool_calls = Some(!disable);
    }
    Ok(())
}

fn read_thinking(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let obj = as_object(value, "thinking")?;
    let mut reasoning = Reasoning::on();
    match req_str(obj, "type", "thinking")? {
        "enabled" => {
            reasoning.budget_tokens =
                opt_value(obj, "budget_tokens").map(|v| as_u64(v, "thinking.budget_tokens")).transpose()?;
        }
        "disabled" => reasoning.thinking = Thinking::Off,
        "adaptive" => {}
        // A mode the IR does not know passes through whole.
        _ => {
            request.extra.insert(Protocol::Anthropic, "thinking".into(), value.clone());
            return Ok(());
        }
    }
    // Options beside the mode (`display`, ...) are kept as an extra that the
    // writer merges back into the `thinking` object.
    let rest: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| k.as_str() != "type" && k.as_str() != "budget_tokens")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !rest.is_empty() {
        request.extra.insert(Protocol::Anthropic, "thinking".into(), Value::Object(rest));
    }
    request.reasoning = Some(reasoning);
    Ok(())
}

fn read_output_config(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let obj = as_object(value, "output_config")?;
    let mut rest = Map::new();
    for (key, item) in obj {
        match key.as_str() {
            "effort" if !item.is_null() => {
                let effort = effort::read_effort(as_str(item, "output_config.effort")?, "output_config.effort")?;
                // Without `thinking`, the effort alone tunes the reply.
                request.reasoning.get_or_insert_with(Reasoning::default).effort = Some(effort);
            }
            "format" if !item.is_null() => {
                let format = as_object(item, "output_config.format")?;
                match read_format(format, "output_config.format")? {
                    Some(rf) => request.response_format = Some(rf),
                    None => {
                        rest.insert(key.clone(), item.clone());
                    }
                }
            }
            _ => {
                rest.insert(key.clone(), item.clone());
            }
        }
    }
    if !rest.is_empty() {
        request.extra.insert(Protocol::Anthropic, "output_config".into(), Value::Object(rest));
    }
    Ok(())
}

/// `{type: "json_schema", schema}`; other format types are not modelled.
fn read_format(obj: &Map<String, Value>, path: &str) -> Result<Option<ResponseFormat>, DecodeError> {
    if req_str(obj, "type", path)? != "json_schema" {
        return Ok(None);
    }
    let schema = opt_value(obj, "schema")
        .cloned()
        .ok_or_else(|| DecodeError::invalid(format!("{path}.schema"), format!("{path}.schema is required")))?;
    Ok(Some(ResponseFormat::JsonSchema { name: SCHEMA_NAME.to_owned(), schema, strict: None }))
}

pub(crate) fn write_request(request: &Request, capabilities: &Capabilities) -> Encoded {
    let mut dropped = Vec::new();
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));

    let mut thinking = request.reasoning.as_ref().map(|r| effort::claude_thinking(r, capabilities, &mut dropped));
    let budget = thinking.as_mut().map_or(0, |t| t.least_budget(&mut dropped));
    let thinks = thinking.as_ref().is_some_and(ClaudeThinking::is_on);
    let max_tokens = effort::claude_max_tokens(request.max_tokens, budget, &mut dropped)
        .unwrap_or(DEFAULT_MAX_TOKENS.saturating_add(budget));
    body.insert("max_tokens".into(), json!(max_tokens));

    // A model that takes no system message inside the conversation gets
    // its text in the system prompt (`capabilities.system_messages`).
    let (system, conversation) = match capabilities.system_messages {
        true => (std::borrow::Cow::Borrowed(&request.system[..]), std::borrow::Cow::Borrowed(&request.messages[..])),
        false => switchyard_codec::system::fold(request, &mut dropped),
    };
    if !system.is_empty() {
        body.insert("system".into(), write_system(&system));
    }
    body.insert("messages".into(), Value::Array(write_messages(&conversation, &mut dropped)));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|tool| write_tool(tool, &mut dropped)).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(mut choice) = write_tool_choice(request) {
        // With thinking, Claude takes only `auto` or `none`: a forced tool
        // becomes a tool the model may call.
        if thinks && matches!(choice.get("type").and_then(Value::as_str), Some("any" | "tool")) {
            Dropped::push_once(&mut dropped, Field::ToolChoice, DropReason::Capability);
            if let Value::Object(obj) = &mut choice {
                obj.insert("type".into(), json!("auto"));
                obj.remove("name");
            }
        }
        body.insert("tool_choice".into(), choice);
    }
    let ClaudeSampling { temperature, top_p, top_k } =
        effort::claude_sampling(thinks, (request.temperature, request.top_p, request.top_k), &mut dropped);
    if let Some(t) = temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = top_p {
        if temperature.is_some() && !capabilities.temperature_with_top_p {
            // The model refuses both at once; the temperature is the knob
            // Anthropic documents first.
            Dropped::push_once(&mut dropped, Field::TopP, DropReason::Capability);
        } else {
            body.insert("top_p".into(), json!(p));
        }
    }
    if let Some(k) = top_k {
        body.insert("top_k".into(), json!(k));
    }
    if !request.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(request.stop));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    if let Some(user) = &request.user {
        body.insert("metadata".into(), json!({ "user_id": user }));
    }
    if !request.metadata.is_empty() {
        // Anthropic's metadata takes `user_id` alone.
        Dropped::push_once(&mut dropped, Field::Metadata, DropReason::Unsupported);
    }

    let mut output_config = Map::new();
    if let Some(thinking) = thinking {
        if let Some(value) = thinking.thinking {
            body.insert("thinking".into(), value);
        }
        if let Some(effort) = thinking.effort {
            output_config.insert("effort".into(), json!(effort.as_str()));
        }
    }
    match &request.response_format {
        None => {}
        Some(ResponseFormat::JsonObject) => {
            // Anthropic's structured output needs a schema.
            Dropped::push_once(&mut dropped, Field::JsonMode, DropReason::Unsupported);
        }
        Some(ResponseFormat::JsonSchema { name, schema, .. }) => {
            // Anthropic schemas are always enforced strictly and carry no
            // name; only a name the caller chose is worth reporting.
            if !name.is_empty() && name != SCHEMA_NAME {
                Dropped::push_once(&mut dropped, Field::JsonSchemaName, DropReason::Unsupported);
            }
            output_config.insert("format".into(), json!({"type": "json_schema", "schema": schema}));
        }
    }
    if !output_config.is_empty() {
        body.insert("output_config".into(), Value::Object(output_config));
    }

    for (field, present) in [
        (Field::Seed, request.seed.is_some()),
        (Field::FrequencyPenalty, request.frequency_penalty.is_some()),
        (Field::PresencePenalty, request.presence_penalty.is_some()),
    ] {
        if present {
            Dropped::push_once(&mut dropped, field, DropReason::Unsupported);
        }
    }

    // No log probabilities and one reply only.
    request.report_logprobs_and_n(&mut dropped);

    if let Some(extra) = request.extra.for_target(Protocol::Anthropic, &mut dropped) {
        for (key, value) in extra {
            merge_extra(&mut body, key, value);
        }
    }
    Encoded { body: switchyard_codec::json::to_vec(&Value::Object(body)), dropped }
}

/// An extra goes in as read; where the writer already produced an object or
/// array under the same key (`thinking` options, `output_config` fields,
/// server tools) the extra's parts are merged into it.
fn merge_extra(body: &mut Map<String, Value>, key: &str, value: &Value) {
    match (body.get_mut(key), value) {
        (Some(Value::Object(mine)), Value::Object(theirs)) => {
            for (k, v) in theirs {
                mine.insert(k.clone(), v.clone());
            }
        }
        (Some(Value::Array(mine)), Value::Array(theirs)) => mine.extend(theirs.iter().cloned()),
        _ => {
            body.insert(key.to_owned(), value.clone());
        }
    }
}

fn write_system(system: &[TextBlock]) -> Value {
    if let [only] = system {
        if only.cache_control.is_none() && only.citations.is_empty() {
            return json!(only.text);
        }
    }
    Value::Array(system.iter().map(write_text_block).collect())
}

/// A message's blocks as parts; an Anthropic member read beside a block
/// (a call's `cache_control`) goes back on the part written for it.
fn write_parts(blocks: &[Block], dropped: &mut Vec<Dropped>) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::with_capacity(blocks.len());
    let mut wrote_last = false;
    for block in blocks {
        if let Block::Unmodelled(members @ Unmodelled { origin: Protocol::Anthropic, beside: true, .. }) = block {
            if let (true, Some(Value::Object(part))) = (wrote_last, parts.last_mut()) {
                Unmodelled::merge_into(&members.value, part);
            }
            continue;
        }
        let part = write_block(block, Target::Request, dropped);
        wrote_last = part.is_some();
        parts.extend(part);
    }
    parts
}

fn write_messages(messages: &[Message], dropped: &mut Vec<Dropped>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        };
        let content = match message.content.as_slice() {
            [only] if is_plain_text(only).is_some() => json!(is_plain_text(only)),
            blocks => {
                let parts = write_parts(blocks, dropped);
                // A turn emptied by drops (only unsigned thinking) would be
                // rejected; leaving it out is the lesser change.
                if parts.is_empty() && !blocks.is_empty() {
                    continue;
                }
                Value::Array(parts)
            }
        };
        let mut written = Map::new();
        written.insert("role".into(), json!(role));
        written.insert("content".into(), content);
        if let Some(extra) = message.extra.for_target_under(Protocol::Anthropic, "messages", dropped) {
            for (key, value) in extra {
                written.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        out.push(Value::Object(written));
    }
    out
}

fn write_tool(tool: &Tool, dropped: &mut Vec<Dropped>) -> Value {
    let mut obj = Map::new();
    obj.insert("name".into(), json!(tool.name));
    if let Some(description) = &tool.description {
        obj.insert("description".into(), json!(description));
    }
    // Anthropic requires a schema; a tool declared without parameters takes
    // an empty object.
    let schema =
        if tool.parameters.is_null() { json!({"type": "object", "properties": {}}) } else { tool.parameters.clone() };
    obj.insert("input_schema".into(), schema);
    put_cache_control(&mut obj, tool.cache_control.as_ref());
    if let Some(strict) = tool.strict {
        obj.insert("strict".into(), json!(strict));
    }
    if let Some(extra) = tool.extra.for_target_under(Protocol::Anthropic, "tools", dropped) {
        for (key, value) in extra {
            obj.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Value::Object(obj)
}

fn write_tool_choice(request: &Request) -> Option<Value> {
    let mut obj = Map::new();
    match &request.tool_choice {
        Some(ToolChoice::Auto) => {
            obj.insert("type".into(), json!("auto"));
        }
        Some(ToolChoice::Any) => {
            obj.insert("type".into(), json!("any"));
        }
        Some(ToolChoice::Tool(name)) => {
            obj.insert("type".into(), json!("tool"));
            obj.insert("name".into(), json!(name));
        }
        // `none` takes no parallelism flag, and none is needed.
        Some(ToolChoice::None) => return Some(json!({"type": "none"})),
        // Parallelism alone is said with the default policy, and only
        // matters when there are tools.
        None if request.parallel_tool_calls.is_some() && !request.tools.is_empty() => {
            obj.insert("type".into(), json!("auto"));
        }
        None => return None,
    }
    if let Some(parallel) = request.parallel_tool_calls {
        obj.insert("disable_parallel_tool_use".into(), json!(!parallel));
    }
    Some(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::Effort;

    fn read(value: Value) -> Request {
        read_request(&serde_json::to_vec(&value).unwrap()).unwrap()
    }

    fn write(request: &Request) -> (Value, Vec<Dropped>) {
        write_for(request, &Capabilities::default())
    }

    fn write_for(request: &Request, capabilities: &Capabilities) -> (Value, Vec<Dropped>) {
        let encoded = write_request(request, capabilities);
        (serde_json::from_slice(&encoded.body).unwrap(), encoded.dropped)
    }

    /// A call's `cache_control` has no place in the IR: it goes back on the
    /// call for an Anthropic lane and is reported for any other.
    #[test]
    fn a_cache_marker_on_a_tool_call_goes_back_on_it_or_is_reported() {
        let call = json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1},
                          "cache_control": {"type": "ephemeral", "ttl": "1h"}});
        let request = read(json!({"model": "m", "max_tokens": 9, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "text", "text": "calling"}, call.clone()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]}));
        let (body, dropped) = write(&request);
        assert_eq!(body["messages"][1]["content"][1], call);
        assert_eq!(body["messages"][1]["content"].as_array().map(Vec::len), Some(2));
        assert!(dropped.is_empty(), "{dropped:?}");

        let mut lost = Vec::new();
        for block in &request.messages[1].content {
            if let Block::Unmodelled(marker) = block {
                assert!(marker.for_target(Protocol::OpenAi, &mut lost).is_none());
            }
        }
        let paths: Vec<_> = lost.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(paths, ["messages.content.tool_use.cache_control"]);
    }

    #[test]
    fn missing_max_tokens_is_read_as_none_and_defaulted_on_write() {
        let request = read(json!({"model": "m", "messages": []}));
        assert_eq!(request.max_tokens, None);
        let (body, _) = write(&request);
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
    }

    #[test]
    fn default_cap_leaves_room_above_the_thinking_budget() {
        let request = Request { reasoning: Some(Reasoning::with_budget(10_000)), ..Request::default() };
        let (body, _) = write(&request);
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS + 10_000);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 10_000}));
    }

    /// Claude's rules for thinking, kept whatever the caller sent: a budget
    /// of at least 1024 below `max_tokens`, no temperature but 1, no
    /// `top_k`, `top_p` from 0.95, and no forced tool; each change reported.
    #[test]
    fn thinking_keeps_claudes_rules_and_says_what_it_changed() {
        let request = Request {
            reasoning: Some(Reasoning::with_budget(2000)),
            max_tokens: Some(500),
            temperature: Some(0.2),
            top_p: Some(0.5),
            top_k: Some(5),
            tools: vec![Tool {
                name: "lookup".into(),
                description: None,
                parameters: json!({"type": "object"}),
                cache_control: None,
                ..Tool::default()
            }],
            tool_choice: Some(ToolChoice::Tool("lookup".into())),
            ..Request::default()
        };
        let (body, dropped) = write(&request);
        assert_eq!(body["max_tokens"], 2500, "the budget, and the caller's cap for the answer on top");
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2000}));
        for gone in ["temperature", "top_p", "top_k"] {
            assert!(body.get(gone).is_none(), "{gone}: {body}");
        }
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
        let fields: Vec<Field> = dropped.iter().map(|d| d.field).collect();
        for field in [Field::MaxTokens, Field::Temperature, Field::TopP, Field::TopK, Field::ToolChoice] {
            assert!(fields.contains(&field), "{field:?} reported: {dropped:?}");
        }
        // What Claude takes with thinking passes untouched.
        let fine = Request {
            reasoning: Some(Reasoning::with_budget(2000)),
            max_tokens: Some(8000),
            temperature: Some(1.0),
            top_p: Some(0.95),
            ..Request::default()
        };
        let (body, dropped) = write(&fine);
        assert_eq!(
            (body["max_tokens"].clone(), body["temperature"].clone(), body["top_p"].clone()),
            (json!(8000), json!(1.0), json!(0.95))
        );
        assert!(dropped.is_empty(), "{dropped:?}");
        // A budget under Claude's minimum is raised to it; without thinking
        // the sampling passes as it came.
        let small = Request { reasoning: Some(Reasoning::with_budget(100)), ..Request::default() };
        let (body, dropped) = write(&small);
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningBudget, DropReason::Converted)]);
        let plain = Request { temperature: Some(0.2), top_k: Some(5), ..Request::default() };
        let (body, dropped) = write(&plain);
        assert_eq!((body["temperature"].clone(), body["top_k"].clone()), (json!(0.2), json!(5)));
        assert!(dropped.is_empty());
    }

    #[test]
    fn an_effort_follows_what_the_model_takes() {
        let request = Request { reasoning: Some(Reasoning::with_effort(Effort::High)), ..Request::default() };
        // A current model: adaptive thinking at that effort, nothing lost.
        let (body, dropped) = write_for(&request, &Capabilities::ALL);
        assert_eq!(body["thinking"], json!({"type": "adaptive"}));
        assert_eq!(body["output_config"], json!({"effort": "high"}));
        assert!(dropped.is_empty(), "{dropped:?}");
        // A model that takes neither: enabled with the budget `high` stands for.
        let (body, dropped) = write(&request);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": Effort::High.budget()}));
        assert!(body.get("output_config").is_none());
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
        // Effort without adaptive thinking (Opus 4.5): a budget and the effort.
        let effort_only = Capabilities { effort: true, ..Capabilities::default() };
        let (body, dropped) = write_for(&request, &effort_only);
        assert_eq!(body["thinking"]["type"], "enabled");
        assert_eq!(body["output_config"], json!({"effort": "high"}));
        assert!(dropped.is_empty());
        // `minimal` has no Anthropic level: the nearest one, reported.
        let minimal = Request { reasoning: Some(Reasoning::with_effort(Effort::Minimal)), ..Request::default() };
        let (body, dropped) = write_for(&minimal, &Capabilities::ALL);
        assert_eq!(body["output_config"], json!({"effort": "low"}));
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
    }

    #[test]
    fn an_effort_without_thinking_is_read_and_written_back() {
        let wire = json!({"model": "m", "max_tokens": 5, "messages": [],
            "output_config": {"effort": "low"}});
        let request = read(wire.clone());
        assert_eq!(
            request.reasoning,
            Some(Reasoning { thinking: Thinking::Unset, effort: Some(Effort::Low), budget_tokens: None })
        );
        assert_eq!(write_for(&request, &Capabilities::ALL).0, wire);
        // A model without effort cannot be told; thinking is not switched on for it.
        let (body, dropped) = write(&request);
        assert!(body.get("output_config").is_none() && body.get("thinking").is_none());
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Capability)]);
        let bad = json!({"model": "m", "messages": [], "output_config": {"effort": "extreme"}});
        assert!(read_request(&serde_json::to_vec(&bad).unwrap()).is_err());
    }

    #[test]
    fn temperature_and_top_p_go_together_only_where_the_model_takes_both() {
        let request = Request { temperature: Some(0.5), top_p: Some(0.9), ..Request::default() };
        let (body, dropped) = write(&request);
        assert_eq!((body["temperature"].clone(), body["top_p"].clone()), (json!(0.5), json!(0.9)));
        assert!(dropped.is_empty());
        let one_knob = Capabilities { temperature_with_top_p: false, ..Capabilities::default() };
        let (body, dropped) = write_for(&request, &one_knob);
        assert_eq!(body["temperature"], 0.5);
        assert!(body.get("top_p").is_none());
        assert_eq!(dropped, vec![Dropped::new(Field::TopP, DropReason::Capability)]);
        let top_p_only = Request { top_p: Some(0.9), ..Request::default() };
        assert_eq!(write_for(&top_p_only, &one_knob).0["top_p"], 0.9);
    }

    #[test]
    fn thinking_options_and_server_tools_survive_a_same_protocol_hop() {
        let wire = json!({"model": "m", "max_tokens": 5, "messages": [],
            "tools": [{"name": "f", "input_schema": {"type": "object"}},
                      {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
            "thinking": {"type": "adaptive", "display": "omitted"},
            "output_config": {"effort": "high", "task_budget": {"type": "tokens", "total": 9}},
            "service_tier": "auto"});
        let request = read(wire.clone());
        assert_eq!(request.tools.len(), 1);
        assert_eq!(request.reasoning.as_ref().unwrap().effort, Some(Effort::High));
        let (body, dropped) = write_for(&request, &Capabilities::ALL);
        assert!(dropped.is_empty());
        assert_eq!(body, wire);
    }

    #[test]
    fn cross_protocol_extras_and_unsupported_fields_are_reported() {
        let mut request = Request {
            seed: Some(1),
            frequency_penalty: Some(0.5),
            response_format: Some(ResponseFormat::JsonObject),
            ..Request::default()
        };
        request.extra.insert(Protocol::OpenAi, "logprobs".into(), json!(true));
        request.metadata.insert("k".into(), json!("v"));
        let (body, dropped) = write(&request);
        assert!(body.get("logprobs").is_none());
        let fields: Vec<&str> = dropped.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["metadata", "json_mode", "seed", "frequency_penalty", "unmodelled"]);
        assert_eq!(dropped[4].extra_path.as_deref(), Some("logprobs"));
    }

    /// Claude Code's shape: a system message after the first user turn, with
    /// a beta's members and tool changes, survives a hop that reads and
    /// writes it; another protocol gets its text and hears what was lost.
    #[test]
    fn a_system_message_inside_the_conversation_is_carried() {
        let wire = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "the cwd is /srv", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": [
                {"type": "text", "text": "answer in french"},
                {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "Read"}}],
             "clear_at": "next_user_message", "output_config": {"effort": "low"}},
            {"role": "user", "content": "again"}
        ]});
        let request = read(wire.clone());
        let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::System, Role::Assistant, Role::System, Role::User]);
        assert!(request.system.is_empty());
        let (body, dropped) = write_for(&request, &Capabilities::ALL);
        assert_eq!(body, wire);
        assert!(dropped.is_empty(), "{dropped:?}");

        // A model that takes no system message inside the conversation gets
        // their text in its system prompt, and the move is said.
        let (body, dropped) = write(&request);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "the cwd is /srv", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "answer in french"}])
        );
        let roles: Vec<&Value> = body["messages"].as_array().unwrap().iter().map(|m| &m["role"]).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        let fields: Vec<Field> = dropped.iter().map(|d| d.field).collect();
        assert_eq!(fields, [Field::SystemMessage, Field::Unmodelled, Field::Unmodelled, Field::Unmodelled]);

        let mut lost = Vec::new();
        request.messages[3].extra.for_target_under(Protocol::OpenAi, "messages", &mut lost);
        let paths: Vec<Option<&str>> = lost.iter().map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(paths, [Some("messages.clear_at"), Some("messages.output_config.effort")]);
    }

    #[test]
    fn a_tools_strict_flag_is_modelled_and_its_other_members_kept() {
        let wire = json!({"model": "m", "max_tokens": 5, "messages": [],
            "tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": true},
                      {"name": "g", "input_schema": {"type": "object"}, "defer_loading": true}]});
        let request = read(wire.clone());
        assert_eq!(request.tools[0].strict, Some(true));
        assert!(request.tools[0].extra.is_empty());
        assert_eq!(request.tools[1].extra.fields.get("defer_loading"), Some(&json!(true)));
        assert_eq!(write(&request).0, wire);
    }

    #[test]
    fn betas_are_read_from_every_header_value() {
        let mut headers = http::HeaderMap::new();
        headers.append("anthropic-beta", http::HeaderValue::from_static("claude-code-20250219, effort-2025-11-24"));
        headers.append("anthropic-beta", http::HeaderValue::from_static("context-management-2025-06-27,"));
        assert_eq!(
            read_betas(&headers),
            ["claude-code-20250219", "effort-2025-11-24", "context-management-2025-06-27"]
        );
        assert!(read_betas(&http::HeaderMap::new()).is_empty());
    }

    #[test]
    fn parallel_tool_calls_ride_on_tool_choice() {
        let wire = json!({"model": "m", "max_tokens": 5, "messages": [],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true}});
        let request = read(wire.clone());
        assert_eq!(request.tool_choice, Some(ToolChoice::Any));
        assert_eq!(request.parallel_tool_calls, Some(false));
        assert_eq!(write(&request).0, wire);
    }

    #[test]
    fn tool_results_learn_the_tool_name() {
        let request = read(json!({"model": "m", "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
        ]}));
        let Block::ToolResult(result) = &request.messages[1].content[0] else { panic!("not a result") };
        assert_eq!(result.name.as_deref(), Some("f"));
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (json!([]), "request body must be a json object"),
            (json!({"messages": []}), "model is required"),
            (json!({"model": "m"}), "messages is required"),
            (json!({"model": "m", "messages": {}}), "messages must be an array"),
            (
                json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
                "messages[0].role must be user, assistant or system",
            ),
            (
                json!({"model": "m", "messages": [{"role": "system", "content": [{"type": "image",
                    "source": {"type": "url", "url": "https://example.com/a.png"}}]}]}),
                "messages[0].content[0].type must be text, tool_addition or tool_removal in a system message",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}]}),
                "messages[0].content[0].source.media_type is required",
            ),
            (json!({"model": "m", "messages": [], "max_tokens": -1}), "max_tokens must be a non-negative integer"),
            (
                json!({"model": "m", "messages": [], "tool_choice": {"type": "sometimes"}}),
                "tool_choice.type must be auto, any, tool or none",
            ),
        ];
        for (body, message) in cases {
            let err = read_request(&serde_json::to_vec(&body).unwrap()).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
        assert!(matches!(read_request(b"{not json"), Err(DecodeError::Json(_))));
    }
}
