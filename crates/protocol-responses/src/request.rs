//! Request codec: the Responses create body (`POST /v1/responses`) to and
//! from `ir::Request`.
//!
//! Conversation shape. `input` is a flat list of items; the IR groups blocks
//! into role turns. Reading appends a function call or reasoning item to the
//! current assistant turn and a function-call output to the current user
//! turn; a message item continues the current turn only after such an item
//! (otherwise it opens a new turn). Writing splits each turn back into one
//! message item per run of content blocks plus one item per call, result or
//! reasoning block, so a read-write hop yields the same items in the same
//! order.
//!
//! System and developer items before the conversation are the system
//! prompt; one after a turn is a `Role::System` message at its place,
//! written back as a `system` item there.
//!
//! Partly modelled fields keep their unmodelled remainder in `extra` under
//! the wire key, and a same-protocol write merges the IR back into it:
//! `tools` (non-function tools, `strict` and other tool flags), `text`
//! (`verbosity`, schema `description`), `reasoning` (`summary`, ...), and
//! `input` (items the IR cannot model, such as built-in tool calls, each
//! with the count of conversation items before it).

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{self, Block, CacheControl, Dropped, Field, Message, Protocol, Role, TextBlock};
use switchyard_codec::media::{data_url, parse_data_url, source_from_url};
use switchyard_codec::{beside, call_id, effort, json as codec_json, signature, DecodeError, Encoded};

use crate::items;
use crate::wire::{
    as_array, as_object, filename_for_media_type, is_file_id, media_type_for_filename, opt_bool, opt_f64, opt_str,
    opt_u64, report, req_str, EFFORTS,
};

const PROTOCOL: Protocol = Protocol::Responses;

/// Body keys the IR models (wholly or in part); every other key is extra.
const MODELLED: [&str; 16] = [
    "model",
    "instructions",
    "input",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "text",
    "reasoning",
    "stream",
    "user",
    "metadata",
    "include",
    "top_logprobs",
];

/// Extra keys a same-protocol write merges instead of copying verbatim.
const MERGED: [&str; 4] = ["input", "tools", "text", "reasoning"];

/// Wire body → IR request.
pub(crate) fn read_request(body: &[u8]) -> Result<ir::Request, DecodeError> {
    let value: Value = codec_json::parse(body)?;
    let map = value.as_object().ok_or_else(|| DecodeError::invalid("body", "request body must be a json object"))?;
    let mut request =
        ir::Request { model: opt_str(map, "model", "model")?.unwrap_or_default(), ..ir::Request::default() };
    if let Some(instructions) = opt_str(map, "instructions", "instructions")? {
        request.system.push(TextBlock::new(instructions));
    }
    match map.get("input") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => request.messages.push(Message::text(Role::User, text)),
        Some(Value::Array(list)) => read_input(list, &mut request)?,
        Some(_) => return Err(DecodeError::invalid("input", "input must be a string or an array of items")),
    }
    if let Some(tools) = map.get("tools").filter(|v| !v.is_null()) {
        read_tools(tools, &mut request)?;
    }
    if let Some(choice) = map.get("tool_choice").filter(|v| !v.is_null()) {
        read_tool_choice(choice, &mut request)?;
    }
    request.parallel_tool_calls = opt_bool(map, "parallel_tool_calls", "parallel_tool_calls")?;
    request.max_tokens = opt_u64(map, "max_output_tokens", "max_output_tokens")?;
    request.temperature = opt_f64(map, "temperature", "temperature")?;
    request.top_p = opt_f64(map, "top_p", "top_p")?;
    if let Some(text) = map.get("text").filter(|v| !v.is_null()) {
        read_text_config(text, &mut request)?;
    }
    if let Some(reasoning) = map.get("reasoning").filter(|v| !v.is_null()) {
        read_reasoning_config(reasoning, &mut request)?;
    }
    request.stream = opt_bool(map, "stream", "stream")?.unwrap_or(false);
    request.user = opt_str(map, "user", "user")?;
    match map.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(metadata)) => request.metadata = metadata.clone(),
        Some(_) => return Err(DecodeError::invalid("metadata", "metadata must be an object")),
    }
    read_logprobs(map, &mut request)?;
    for (key, value) in map {
        if !MODELLED.contains(&key.as_str()) {
            request.extra.insert(PROTOCOL, key.clone(), value.clone());
        }
    }
    Ok(request)
}

/// What `include` names to have the output text's log probabilities.
const LOGPROBS_INCLUDE: &str = "message.output_text.logprobs";

/// `include: ["message.output_text.logprobs"]` or `top_logprobs` (0 to
/// 20) ask for log probabilities; what else `include` names is kept.
fn read_logprobs(map: &Map<String, Value>, request: &mut ir::Request) -> Result<(), DecodeError> {
    let top = opt_u64(map, "top_logprobs", "top_logprobs")?;
    let mut asked = top.is_some();
    match map.get("include") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            let rest: Vec<Value> =
                names.iter().filter(|name| name.as_str() != Some(LOGPROBS_INCLUDE)).cloned().collect();
            asked |= rest.len() != names.len();
            if !rest.is_empty() {
                request.extra.insert(PROTOCOL, "include".to_owned(), Value::Array(rest));
            }
        }
        Some(other) => request.extra.insert(PROTOCOL, "include".to_owned(), other.clone()),
    }
    if asked {
        request.logprobs = Some(top.map_or(0, |top| u32::try_from(top).unwrap_or(u32::MAX)));
    }
    Ok(())
}

/// Reads the `input` item list into system text and conversation turns.
fn read_input(list: &[Value], request: &mut ir::Request) -> Result<(), DecodeError> {
    let mut conversation_items = 0usize;
    let mut unmodelled = Vec::new();
    for (index, item) in list.iter().enumerate() {
        let field = format!("input[{index}]");
        let item = as_object(item, &field)?;
        let kind = match opt_str(item, "type", &format!("{field}.type"))? {
            Some(kind) => kind,
            None if item.contains_key("role") => "message".to_owned(),
            None => {
                return Err(DecodeError::invalid(format!("{field}.type"), format!("{field} needs a type or a role")))
            }
        };
        match kind.as_str() {
            "message" => {
                let role = req_str(item, "role", &format!("{field}.role"))?;
                let content = item.get("content").unwrap_or(&Value::Null);
                let content_field = format!("{field}.content");
                match role.as_str() {
                    "system" | "developer" if request.messages.is_empty() => {
                        read_system_content(content, &content_field, &mut request.system)?;
                        continue;
                    }
                    "system" | "developer" => {
                        let mut texts = Vec::new();
                        read_system_content(content, &content_field, &mut texts)?;
                        request.messages.push(Message::new(Role::System, texts.into_iter().map(Block::Text).collect()));
                    }
                    "user" | "assistant" => {
                        let role = if role == "user" { Role::User } else { Role::Assistant };
                        let blocks = read_content(content, role, &content_field)?;
                        let extra = item_members(item);
                        if extra.is_empty() {
                            push_message(&mut request.messages, role, blocks);
                        } else {
                            // Its own members (`phase`, `status`, `id`) make it a turn of its own.
                            request.messages.push(Message { extra, ..Message::new(role, blocks) });
                        }
                    }
                    other => {
                        return Err(DecodeError::invalid(
                            format!("{field}.role"),
                            format!("unknown role {other:?} in {field}"),
                        ))
                    }
                }
            }
            "function_call" => {
                req_str(item, "call_id", &format!("{field}.call_id"))?;
                req_str(item, "name", &format!("{field}.name"))?;
                opt_str(item, "arguments", &format!("{field}.arguments"))?;
                let call = items::read_function_call(item);
                push_block(&mut request.messages, Role::Assistant, Block::ToolUse(call));
            }
            "function_call_output" => {
                let result = read_call_output(item, &field)?;
                push_block(&mut request.messages, Role::User, Block::ToolResult(result));
            }
            "reasoning" => {
                push_block(&mut request.messages, Role::Assistant, items::read_reasoning(item));
            }
            _ => {
                unmodelled.push(json!({"after": conversation_items, "item": item}));
                continue;
            }
        }
        conversation_items += 1;
    }
    if !unmodelled.is_empty() {
        request.extra.insert(PROTOCOL, "input".to_owned(), Value::Array(unmodelled));
    }
    for message in &mut request.messages {
        signature::attach_carried(&mut message.content);
    }
    Ok(())
}

/// True for blocks that travel inside message items (as opposed to items of
/// their own).
fn is_message_content(block: &Block) -> bool {
    matches!(block, Block::Text(_) | Block::Image { .. } | Block::Audio { .. } | Block::Document { .. })
}

/// A message item's blocks: they continue the current turn only when it has
/// the same role and ends in an item-level block (call, result, reasoning).
fn push_message(messages: &mut Vec<Message>, role: Role, blocks: Vec<Block>) {
    if let Some(last) = messages.last_mut() {
        let continues =
            last.role == role && !blocks.is_empty() && last.content.last().is_some_and(|b| !is_message_content(b));
        if continues {
            last.content.extend(blocks);
            return;
        }
    }
    messages.push(Message::new(role, blocks));
}

/// An item-level block joins the current turn of its role or opens one.
fn push_block(messages: &mut Vec<Message>, role: Role, block: Block) {
    match messages.last_mut() {
        Some(last) if last.role == role => last.content.push(block),
        _ => messages.push(Message::new(role, vec![block])),
    }
}

/// System or developer content: text only.
fn read_system_content(content: &Value, field: &str, system: &mut Vec<TextBlock>) -> Result<(), DecodeError> {
    match content {
        Value::String(text) => system.push(TextBlock::new(text.clone())),
        Value::Array(parts) => {
            for (index, part) in parts.iter().enumerate() {
                let part_field = format!("{field}[{index}]");
                let part = as_object(part, &part_field)?;
                match opt_str(part, "type", &format!("{part_field}.type"))?.as_deref() {
                    Some("input_text" | "text" | "output_text") => {
                        let mut block = TextBlock::new(req_str(part, "text", &format!("{part_field}.text"))?);
                        block.cache_control = read_breakpoint(part);
                        system.push(block);
                    }
                    _ => {
                        return Err(DecodeError::invalid(
                            part_field.clone(),
                            format!("{part_field} must be text in a system or developer message"),
                        ))
                    }
                }
            }
        }
        _ => return Err(DecodeError::invalid(field, format!("{field} must be a string or an array of content parts"))),
    }
    Ok(())
}

/// User or assistant message content.
fn read_content(content: &Value, role: Role, field: &str) -> Result<Vec<Block>, DecodeError> {
    match content {
        Value::String(text) => Ok(vec![Block::text(text.clone())]),
        Value::Array(parts) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for (index, part) in parts.iter().enumerate() {
                blocks.extend(read_part_beside(part, role, &format!("{field}[{index}]"))?);
            }
            Ok(blocks)
        }
        _ => Err(DecodeError::invalid(field, format!("{field} must be a string or an array of content parts"))),
    }
}

/// A message item's members the IR does not model (`phase`, `status`,
/// `id`): written back on its item on a same-protocol hop, reported at
/// `messages.<member>` on another.
fn item_members(item: &Map<String, Value>) -> ir::Extra {
    let mut extra = ir::Extra::new();
    for (key, value) in item {
        if !matches!(key.as_str(), "type" | "role" | "content") {
            extra.insert(PROTOCOL, key.clone(), value.clone());
        }
    }
    extra
}

/// One content part, then what the IR does not model beside its data
/// (`detail` other than `auto`, an output's `logprobs`), to go back onto it.
fn read_part_beside(part: &Value, role: Role, field: &str) -> Result<Vec<Block>, DecodeError> {
    let block = read_part(part, role, field)?;
    let (Some(object), Some(kind)) = (part.as_object(), part.get("type").and_then(Value::as_str)) else {
        return Ok(vec![block]);
    };
    let modelled: &[&str] = match kind {
        "input_text" => &["type", "text", "prompt_cache_breakpoint"],
        "input_image" => &["type", "image_url", "file_id", "prompt_cache_breakpoint"],
        "input_file" => &["type", "file_data", "file_url", "file_id", "filename", "prompt_cache_breakpoint"],
        "output_text" => &["type", "text", "annotations"],
        "refusal" => &["type", "refusal"],
        _ => return Ok(vec![block]),
    };
    let default_detail = |key: &str, value: &Value| key == "detail" && value.as_str() == Some("auto");
    if object.iter().all(|(key, value)| modelled.contains(&key.as_str()) || default_detail(key, value)) {
        return Ok(vec![block]);
    }
    let mut rest = object.clone();
    if rest.get("detail").is_some_and(|detail| default_detail("detail", detail)) {
        rest.remove("detail");
    }
    let mut blocks = vec![block];
    blocks.extend(beside::take(PROTOCOL, &format!("input.content.{kind}"), &mut rest, modelled, None));
    Ok(blocks)
}

/// One content part.
fn read_part(part: &Value, role: Role, field: &str) -> Result<Block, DecodeError> {
    let part = as_object(part, field)?;
    let kind = opt_str(part, "type", &format!("{field}.type"))?;
    match kind.as_deref() {
        Some("input_text") => {
            let mut block = TextBlock::new(req_str(part, "text", &format!("{field}.text"))?);
            block.cache_control = read_breakpoint(part);
            Ok(Block::Text(block))
        }
        Some("output_text" | "refusal") => {
            let key = if kind.as_deref() == Some("refusal") { "refusal" } else { "text" };
            req_str(part, key, &format!("{field}.{key}"))?;
            match items::read_output_part(part) {
                Some((text, _)) => Ok(Block::Text(text)),
                None => Err(DecodeError::invalid(field, format!("{field} is not text"))),
            }
        }
        Some("input_image") => {
            let source = if let Some(url) = opt_str(part, "image_url", &format!("{field}.image_url"))? {
                source_from_url(url)
            } else if let Some(id) = opt_str(part, "file_id", &format!("{field}.file_id"))? {
                ir::MediaSource::Url { url: id, media_type: None }
            } else {
                return Err(DecodeError::invalid(field, format!("{field} needs image_url or file_id")));
            };
            Ok(Block::Image { source, cache_control: read_breakpoint(part) })
        }
        Some("input_file") => {
            let name = opt_str(part, "filename", &format!("{field}.filename"))?;
            let source = if let Some(data) = opt_str(part, "file_data", &format!("{field}.file_data"))? {
                match parse_data_url(&data) {
                    Some((media_type, data)) => {
                        ir::MediaSource::Base64 { media_type: media_type.to_owned(), data: data.to_owned() }
                    }
                    None => ir::MediaSource::Base64 { media_type: media_type_for_filename(name.as_deref()), data },
                }
            } else if let Some(url) = opt_str(part, "file_url", &format!("{field}.file_url"))? {
                source_from_url(url)
            } else if let Some(id) = opt_str(part, "file_id", &format!("{field}.file_id"))? {
                ir::MediaSource::Url { url: id, media_type: None }
            } else {
                return Err(DecodeError::invalid(field, format!("{field} needs file_data, file_url or file_id")));
            };
            Ok(Block::Document { source, name, cache_control: read_breakpoint(part) })
        }
        Some(other) => Err(DecodeError::invalid(
            format!("{field}.type"),
            format!("unsupported content part type {other:?} in a {} message", role_name(role)),
        )),
        None => Err(DecodeError::invalid(format!("{field}.type"), format!("{field}.type is required"))),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
    }
}

/// `prompt_cache_breakpoint` marks the end of a cacheable prefix; its TTL is
/// request-wide (`prompt_cache_options`), so the IR marker has none.
fn read_breakpoint(part: &Map<String, Value>) -> Option<CacheControl> {
    part.get("prompt_cache_breakpoint").filter(|v| v.is_object()).map(|_| CacheControl { ttl: None })
}

/// A `function_call_output` item.
fn read_call_output(item: &Map<String, Value>, field: &str) -> Result<ir::ToolResult, DecodeError> {
    let tool_use_id = req_str(item, "call_id", &format!("{field}.call_id"))?;
    // The id the caller was handed: the lane's back.
    let tool_use_id = call_id::restore(&tool_use_id, Protocol::Responses).into_owned();
    let output_field = format!("{field}.output");
    let content = match item.get("output") {
        Some(Value::String(text)) => vec![Block::text(text.clone())],
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(index, part)| read_part(part, Role::User, &format!("{output_field}[{index}]")))
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(DecodeError::invalid(
                output_field.clone(),
                format!("{output_field} must be a string or an array of content parts"),
            ))
        }
    };
    Ok(ir::ToolResult { tool_use_id, name: opt_str(item, "name", &format!("{field}.name"))?, content, is_error: false })
}

/// Function tools become IR tools. When any tool is not exactly what the
/// writer would produce for it (a built-in tool, `strict: true`, extra
/// flags), the raw list is also kept in `extra.tools` for a same-protocol
/// write to merge.
fn read_tools(tools: &Value, request: &mut ir::Request) -> Result<(), DecodeError> {
    let list = as_array(tools, "tools")?;
    let mut keep_raw = false;
    for (index, raw) in list.iter().enumerate() {
        let field = format!("tools[{index}]");
        let map = as_object(raw, &field)?;
        let kind = req_str(map, "type", &format!("{field}.type"))?;
        if kind != "function" {
            keep_raw = true;
            continue;
        }
        let tool = ir::Tool {
            name: req_str(map, "name", &format!("{field}.name"))?,
            description: opt_str(map, "description", &format!("{field}.description"))?,
            // A tool without parameters takes none; other protocols need a
            // schema object here, not null.
            parameters: match map.get("parameters") {
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(schema) => schema.clone(),
            },
            strict: opt_bool(map, "strict", &format!("{field}.strict"))?,
            ..ir::Tool::default()
        };
        keep_raw |= Value::Object(write_tool(&tool)) != *raw;
        request.tools.push(tool);
    }
    if keep_raw {
        request.extra.insert(PROTOCOL, "tools".to_owned(), tools.clone());
    }
    Ok(())
}

/// `tool_choice`: the four IR policies; hosted-tool and allowed-tools
/// choices stay in `extra`.
fn read_tool_choice(choice: &Value, request: &mut ir::Request) -> Result<(), DecodeError> {
    request.tool_choice = match choice {
        Value::String(mode) => Some(match mode.as_str() {
            "auto" => ir::ToolChoice::Auto,
            "none" => ir::ToolChoice::None,
            "required" => ir::ToolChoice::Any,
            other => return Err(DecodeError::invalid("tool_choice", format!("unknown tool_choice {other:?}"))),
        }),
        Value::Object(map) => {
            let is_function = map.get("type").and_then(Value::as_str) == Some("function") && map.len() == 2;
            match map.get("name").and_then(Value::as_str) {
                Some(name) if is_function => Some(ir::ToolChoice::Tool(name.to_owned())),
                _ => {
                    request.extra.insert(PROTOCOL, "tool_choice".to_owned(), choice.clone());
                    None
                }
            }
        }
        _ => return Err(DecodeError::invalid("tool_choice", "tool_choice must be a string or an object")),
    };
    Ok(())
}

/// `text.format` → response format; the rest of `text` stays in `extra`.
fn read_text_config(text: &Value, request: &mut ir::Request) -> Result<(), DecodeError> {
    let map = as_object(text, "text")?;
    let mut keep_raw = map.keys().any(|key| key != "format");
    if let Some(format) = map.get("format").filter(|v| !v.is_null()) {
        let format_map = as_object(format, "text.format")?;
        let kind = req_str(format_map, "type", "text.format.type")?;
        request.response_format = match kind.as_str() {
            "text" => None,
            "json_object" => Some(ir::ResponseFormat::JsonObject),
            "json_schema" => Some(ir::ResponseFormat::JsonSchema {
                name: opt_str(format_map, "name", "text.format.name")?.unwrap_or_default(),
                schema: format_map.get("schema").cloned().unwrap_or(Value::Null),
                strict: opt_bool(format_map, "strict", "text.format.strict")?,
            }),
            _ => None,
        };
        keep_raw |= match &request.response_format {
            Some(modelled) => write_format(modelled) != *format,
            None => kind != "text",
        };
    }
    if keep_raw {
        request.extra.insert(PROTOCOL, "text".to_owned(), text.clone());
    }
    Ok(())
}

/// `reasoning.effort` → IR reasoning (`none` means off); the rest of
/// `reasoning` stays in `extra`.
fn read_reasoning_config(reasoning: &Value, request: &mut ir::Request) -> Result<(), DecodeError> {
    let map = as_object(reasoning, "reasoning")?;
    if let Some(level) = opt_str(map, "effort", "reasoning.effort")? {
        request.reasoning = Some(effort::read_level(&level, "reasoning.effort")?);
    }
    if map.keys().any(|key| key != "effort") {
        request.extra.insert(PROTOCOL, "reasoning".to_owned(), reasoning.clone());
    }
    Ok(())
}

/// IR request → wire body.
pub(crate) fn write_request(request: &ir::Request, capabilities: &ir::Capabilities) -> Encoded {
    let mut dropped = Vec::new();
    let extra = request.extra.for_target(PROTOCOL, &mut dropped);
    let merged = |key: &str| extra.and_then(|fields| fields.get(key));
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));

    let (instructions, system_item) = write_system(&request.system, &mut dropped);
    if let Some(instructions) = instructions {
        body.insert("instructions".into(), json!(instructions));
    }
    let mut writer = InputWriter::new(merged("input"));
    if let Some(item) = system_item {
        writer.items.push(item);
    }
    for message in &request.messages {
        write_message(message, &mut writer, &mut dropped);
    }
    body.insert("input".into(), Value::Array(writer.finish()));

    if let Some(tools) = write_tools(&request.tools, merged("tools"), &mut dropped) {
        body.insert("tools".into(), tools);
    }
    if let Some(choice) = &request.tool_choice {
        body.insert("tool_choice".into(), write_tool_choice(choice));
    }
    if let Some(parallel) = request.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(parallel));
    }
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_output_tokens".into(), json!(max_tokens));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = request.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    if let Some(text) = write_text_config(request.response_format.as_ref(), merged("text")) {
        body.insert("text".into(), text);
    }
    if let Some(reasoning) =
        write_reasoning_config(request.reasoning.as_ref(), merged("reasoning"), capabilities, &mut dropped)
    {
        body.insert("reasoning".into(), reasoning);
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    if let Some(user) = &request.user {
        body.insert("user".into(), json!(user));
    }
    if !request.metadata.is_empty() {
        body.insert("metadata".into(), Value::Object(request.metadata.clone()));
    }
    if let Some(top) = request.logprobs {
        let mut include = match merged("include") {
            Some(Value::Array(names)) => names.clone(),
            _ => Vec::new(),
        };
        include.push(json!(LOGPROBS_INCLUDE));
        body.insert("include".into(), Value::Array(include));
        if top > 0 {
            body.insert("top_logprobs".into(), json!(top));
        }
    }

    // Knobs the Responses API does not have.
    let unsupported = [
        (Field::Betas, !request.betas.is_empty()),
        (Field::TopK, request.top_k.is_some()),
        (Field::Stop, !request.stop.is_empty()),
        (Field::Seed, request.seed.is_some()),
        (Field::FrequencyPenalty, request.frequency_penalty.is_some()),
        (Field::PresencePenalty, request.presence_penalty.is_some()),
        (Field::Choices, request.extra_choices() > 0),
    ];
    for (field, present) in unsupported {
        if present {
            report(&mut dropped, field);
        }
    }

    for (key, value) in extra.into_iter().flatten() {
        if !MERGED.contains(&key.as_str()) && !body.contains_key(key) {
            body.insert(key.clone(), value.clone());
        }
    }
    Encoded { body: codec_json::to_vec(&Value::Object(body)), dropped }
}

/// System text: one plain block is `instructions`; several blocks, or a
/// block with a cache breakpoint, become a leading system message (one
/// `input_text` part per block) so that nothing is merged or lost.
fn write_system(system: &[TextBlock], dropped: &mut Vec<Dropped>) -> (Option<String>, Option<Value>) {
    if system.iter().any(|block| !block.citations.is_empty()) {
        report(dropped, Field::Citations);
    }
    match system {
        [] => (None, None),
        [only] if only.cache_control.is_none() => (Some(only.text.clone()), None),
        blocks => {
            let parts: Vec<Value> = blocks.iter().map(|block| input_text(block, dropped)).collect();
            (None, Some(json!({"type": "message", "role": "system", "content": parts})))
        }
    }
}

/// Builds the `input` list, putting unmodelled items kept in `extra.input`
/// back after the same number of conversation items as when read.
struct InputWriter {
    items: Vec<Value>,
    conversation_items: u64,
    pending: std::collections::VecDeque<(u64, Value)>,
}

impl InputWriter {
    fn new(kept: Option<&Value>) -> InputWriter {
        let pending = kept
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                let after = entry.get("after").and_then(Value::as_u64)?;
                Some((after, entry.get("item")?.clone()))
            })
            .collect();
        InputWriter { items: Vec::new(), conversation_items: 0, pending }
    }

    fn push(&mut self, item: Value) {
        while let Some((after, _)) = self.pending.front() {
            if *after > self.conversation_items {
                break;
            }
            if let Some((_, kept)) = self.pending.pop_front() {
                self.items.push(kept);
            }
        }
        self.items.push(item);
        self.conversation_items += 1;
    }

    fn finish(mut self) -> Vec<Value> {
        self.items.extend(self.pending.into_iter().map(|(_, item)| item));
        self.items
    }
}

/// One IR turn → its items.
fn write_message(message: &Message, writer: &mut InputWriter, dropped: &mut Vec<Dropped>) {
    let role = role_name(message.role);
    // A message item's own members (`phase`, `status`, `id`) go back on the
    // first item written for it.
    let mut members = message.extra.for_target_under(PROTOCOL, "messages", dropped);
    let mut parts: Vec<Value> = Vec::new();
    let mut flush = |parts: &mut Vec<Value>, writer: &mut InputWriter| {
        if !parts.is_empty() {
            let mut item = json!({"type": "message", "role": role, "content": std::mem::take(parts)});
            if let (Some(members), Value::Object(item)) = (members.take(), &mut item) {
                for (key, value) in members {
                    item.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            writer.push(item);
        }
    };
    if message.content.is_empty() {
        writer.push(json!({"type": "message", "role": role, "content": []}));
        return;
    }
    for block in &message.content {
        match block {
            Block::Text(text) => match message.role {
                Role::User | Role::System => parts.push(input_text(text, dropped)),
                Role::Assistant => {
                    if text.cache_control.is_some() {
                        report(dropped, Field::CacheControl);
                    }
                    parts.push(items::write_output_text(text, dropped));
                }
            },
            Block::Image { .. } | Block::Audio { .. } | Block::Document { .. } => match message.role {
                Role::User => {
                    if let Some(part) = media_part(block, dropped) {
                        parts.push(part);
                    }
                }
                Role::Assistant | Role::System => {
                    report(dropped, Field::MisplacedBlock);
                }
            },
            Block::ToolUse(call) => {
                flush(&mut parts, writer);
                writer.push(Value::Object(items::write_function_call(call, &call.id)));
            }
            Block::ToolResult(result) => {
                flush(&mut parts, writer);
                writer.push(write_call_output(result, dropped));
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                flush(&mut parts, writer);
                if let Some(item) = items::write_reasoning(block) {
                    writer.push(Value::Object(item));
                }
            }
            // Items a Responses caller sent that the IR does not model ride
            // in `extra.input`; another protocol's blocks are reported.
            Block::Unmodelled(block) => {
                let members = block.for_target(PROTOCOL, dropped);
                if let (Some(members), Some(Value::Object(last)), true) = (members, parts.last_mut(), block.beside) {
                    ir::Unmodelled::merge_into(members, last);
                }
            }
        }
    }
    flush(&mut parts, writer);
}

/// A user text block → `input_text`.
fn input_text(text: &TextBlock, dropped: &mut Vec<Dropped>) -> Value {
    if !text.citations.is_empty() {
        report(dropped, Field::Citations);
    }
    let mut part = Map::new();
    part.insert("type".into(), json!("input_text"));
    part.insert("text".into(), json!(text.text));
    write_breakpoint(&mut part, text.cache_control.as_ref(), dropped);
    Value::Object(part)
}

/// A cache marker → `prompt_cache_breakpoint` (its TTL cannot be set per
/// breakpoint).
fn write_breakpoint(part: &mut Map<String, Value>, cache_control: Option<&CacheControl>, dropped: &mut Vec<Dropped>) {
    if let Some(cache_control) = cache_control {
        if cache_control.ttl.is_some() {
            report(dropped, Field::CacheControl);
        }
        part.insert("prompt_cache_breakpoint".into(), json!({"mode": "explicit"}));
    }
}

/// An image or document block → `input_image` / `input_file`; audio is
/// reported. Base64 goes
/// as a data URL, a scheme-less URL as an uploaded file id.
fn media_part(block: &Block, dropped: &mut Vec<Dropped>) -> Option<Value> {
    let mut part = Map::new();
    match block {
        Block::Image { source, cache_control } => {
            part.insert("type".into(), json!("input_image"));
            part.insert("detail".into(), json!("auto"));
            match source {
                ir::MediaSource::Base64 { media_type, data } => {
                    part.insert("image_url".into(), json!(data_url(media_type, data)));
                }
                ir::MediaSource::Url { url, .. } if is_file_id(url) => {
                    part.insert("file_id".into(), json!(url));
                }
                ir::MediaSource::Url { url, .. } => {
                    part.insert("image_url".into(), json!(url));
                }
            }
            write_breakpoint(&mut part, cache_control.as_ref(), dropped);
        }
        Block::Document { source, name, cache_control } => {
            part.insert("type".into(), json!("input_file"));
            match source {
                ir::MediaSource::Base64 { media_type, data } => {
                    let filename = name.clone().unwrap_or_else(|| filename_for_media_type(media_type));
                    part.insert("filename".into(), json!(filename));
                    part.insert("file_data".into(), json!(data_url(media_type, data)));
                }
                ir::MediaSource::Url { url, .. } => {
                    if let Some(name) = name {
                        part.insert("filename".into(), json!(name));
                    }
                    let key = if is_file_id(url) { "file_id" } else { "file_url" };
                    part.insert(key.into(), json!(url));
                }
            }
            write_breakpoint(&mut part, cache_control.as_ref(), dropped);
        }
        // The Responses API takes no audio input (its SDKs' `input_audio`
        // content type was removed as never supported).
        Block::Audio { .. } => {
            report(dropped, Field::Audio);
            return None;
        }
        _ => return None,
    }
    Some(Value::Object(part))
}

/// A tool result → `function_call_output`: one plain text block is the
/// string form, anything else the content-part list. Responses has no error
/// flag and the IR tool name is not sent (the call id identifies the call).
fn write_call_output(result: &ir::ToolResult, dropped: &mut Vec<Dropped>) -> Value {
    if result.is_error {
        report(dropped, Field::ToolResultError);
    }
    let output = match result.content.as_slice() {
        [] => json!(""),
        [Block::Text(text)] if text.cache_control.is_none() && text.citations.is_empty() => {
            json!(text.text)
        }
        blocks => Value::Array(
            blocks
                .iter()
                .filter_map(|block| match block {
                    Block::Text(text) => Some(input_text(text, dropped)),
                    Block::Image { .. } | Block::Audio { .. } | Block::Document { .. } => media_part(block, dropped),
                    Block::Unmodelled(block) => block.for_target(PROTOCOL, dropped).cloned(),
                    _ => {
                        report(dropped, Field::MisplacedBlock);
                        None
                    }
                })
                .collect(),
        ),
    };
    json!({"type": "function_call_output", "call_id": result.tool_use_id, "output": output})
}

/// The canonical wire form of an IR tool. `strict` is written `false`
/// because Responses function tools are strict unless told otherwise, and a
/// tool from a non-strict protocol would otherwise be rejected.
fn write_tool(tool: &ir::Tool) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("type".into(), json!("function"));
    map.insert("name".into(), json!(tool.name));
    if let Some(description) = &tool.description {
        map.insert("description".into(), json!(description));
    }
    map.insert("parameters".into(), tool.parameters.clone());
    // Responses enforces a function's schema unless told not to, and a
    // schema from another protocol seldom fits its strict subset.
    map.insert("strict".into(), json!(tool.strict.unwrap_or(false)));
    map
}

/// Tools: on a same-protocol hop the kept raw list gives the order, the
/// built-in tools and each function tool's own flags; IR tools not in it
/// follow in canonical form.
fn write_tools(tools: &[ir::Tool], kept: Option<&Value>, dropped: &mut Vec<Dropped>) -> Option<Value> {
    if tools.iter().any(|tool| tool.cache_control.is_some()) {
        report(dropped, Field::CacheControl);
    }
    for tool in tools {
        tool.extra.for_target_under(PROTOCOL, "tools", dropped);
    }
    let mut out = Vec::new();
    let mut written = vec![false; tools.len()];
    for raw in kept.and_then(Value::as_array).into_iter().flatten() {
        let Some(raw_map) = raw.as_object() else {
            continue;
        };
        if raw_map.get("type").and_then(Value::as_str) != Some("function") {
            out.push(raw.clone());
            continue;
        }
        let name = raw_map.get("name").and_then(Value::as_str);
        let found = tools.iter().enumerate().find(|(index, tool)| !written[*index] && Some(tool.name.as_str()) == name);
        if let Some((index, tool)) = found {
            written[index] = true;
            let mut merged = raw_map.clone();
            let canonical = write_tool(tool);
            for key in ["name", "description", "parameters"] {
                match canonical.get(key) {
                    Some(value) => merged.insert(key.to_owned(), value.clone()),
                    None => merged.remove(key),
                };
            }
            out.push(Value::Object(merged));
        }
    }
    for (tool, done) in tools.iter().zip(written) {
        if !done {
            out.push(Value::Object(write_tool(tool)));
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

fn write_tool_choice(choice: &ir::ToolChoice) -> Value {
    match choice {
        ir::ToolChoice::Auto => json!("auto"),
        ir::ToolChoice::Any => json!("required"),
        ir::ToolChoice::None => json!("none"),
        ir::ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
    }
}

/// The canonical `text.format` of an IR response format.
fn write_format(format: &ir::ResponseFormat) -> Value {
    match format {
        ir::ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ir::ResponseFormat::JsonSchema { name, schema, strict } => {
            let mut map = Map::new();
            map.insert("type".into(), json!("json_schema"));
            map.insert("name".into(), json!(name));
            map.insert("schema".into(), schema.clone());
            if let Some(strict) = strict {
                map.insert("strict".into(), json!(strict));
            }
            Value::Object(map)
        }
    }
}

/// `text`: the kept object (same-protocol hop) with the IR format merged in.
fn write_text_config(format: Option<&ir::ResponseFormat>, kept: Option<&Value>) -> Option<Value> {
    let mut text = kept.and_then(Value::as_object).cloned().unwrap_or_default();
    match format {
        Some(format) => {
            let canonical = write_format(format);
            let merged = match (text.get("format").and_then(Value::as_object), &canonical) {
                (Some(old), Value::Object(new)) if old.get("type") == new.get("type") => {
                    let mut merged = old.clone();
                    merged.remove("strict");
                    merged.extend(new.clone());
                    Value::Object(merged)
                }
                _ => canonical,
            };
            text.insert("format".into(), merged);
        }
        None => {
            // A kept format the IR could have carried was removed from it.
            let kind = text.get("format").and_then(|f| f.get("type")).and_then(Value::as_str);
            if matches!(kind, Some("json_object" | "json_schema")) {
                text.remove("format");
            }
        }
    }
    (!text.is_empty()).then_some(Value::Object(text))
}

/// `reasoning`: effort (`none` when disabled; derived from a budget when only
/// a budget is known), merged into the kept object.
fn write_reasoning_config(
    reasoning: Option<&ir::Reasoning>,
    kept: Option<&Value>,
    capabilities: &ir::Capabilities,
    dropped: &mut Vec<Dropped>,
) -> Option<Value> {
    let mut out = kept.and_then(Value::as_object).cloned().unwrap_or_default();
    out.remove("effort");
    if let Some(reasoning) = reasoning {
        let level = effort::openai_level(reasoning, &EFFORTS, capabilities, true, dropped);
        if let Some(level) = level {
            out.insert("effort".into(), json!(level));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: Value) -> ir::Request {
        read_request(&codec_json::to_vec(&body)).unwrap()
    }

    fn written(request: &ir::Request) -> (Value, Vec<Dropped>) {
        let encoded = write_request(request, &ir::Capabilities::default());
        (serde_json::from_slice(&encoded.body).unwrap(), encoded.dropped)
    }

    /// What the pinned SDK's input types hold and the IR does not model
    /// (an image's `detail`, a file's, an output's `logprobs`, a message
    /// item's `phase`, `status` and `id`) goes back on its part or item to
    /// a Responses lane and is reported to any other: it used to be lost in
    /// silence (`detail` written back as `auto`).
    #[test]
    fn unmodelled_part_and_item_members_go_back_or_are_reported() {
        let image = json!({"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"});
        let said = json!({"type": "output_text", "text": "hello", "annotations": [], "logprobs": []});
        let request = read(json!({"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}, image]},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "phase": "final_answer",
             "content": [said.clone()]},
            {"role": "user", "content": "go on"}
        ]}));
        let (body, dropped) = written(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(body["input"][0]["content"][1]["detail"], "low");
        let item = &body["input"][1];
        assert_eq!(
            (&item["id"], &item["status"], &item["phase"]),
            (&json!("msg_1"), &json!("completed"), &json!("final_answer"))
        );
        assert_eq!(item["content"][0]["logprobs"], json!([]));
        assert!(body["input"][2].get("phase").is_none());

        let mut lost = Vec::new();
        for message in &request.messages {
            message.extra.for_target_under(Protocol::Anthropic, "messages", &mut lost);
            for block in &message.content {
                if let Block::Unmodelled(block) = block {
                    block.for_target(Protocol::Anthropic, &mut lost);
                }
            }
        }
        let paths: Vec<&str> = lost.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(
            paths,
            [
                "input.content.input_image.detail",
                "messages.id",
                "messages.status",
                "messages.phase",
                "input.content.output_text.logprobs"
            ]
        );
        // `auto` is what an image without `detail` gets: nothing to keep.
        let plain = read(json!({"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}]}]}));
        assert_eq!(plain.messages[0].content.len(), 1);
    }

    #[test]
    fn string_input_is_one_user_message() {
        let request = read(json!({"model": "m", "input": "hi", "instructions": "be brief"}));
        assert_eq!(request.messages, vec![Message::text(Role::User, "hi")]);
        assert_eq!(request.system, vec![TextBlock::new("be brief")]);
    }

    #[test]
    fn bad_fields_are_named() {
        let err = read_request(br#"{"model":"m","input":5}"#).unwrap_err();
        assert_eq!(err.to_error_info().param.as_deref(), Some("input"));
        let err = read_request(br#"{"model":"m","temperature":"hot"}"#).unwrap_err();
        assert_eq!(err.to_error_info().param.as_deref(), Some("temperature"));
        let err =
            read_request(br#"{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}"#).unwrap_err();
        assert_eq!(err.to_error_info().param.as_deref(), Some("input[0].content[0].type"));
        assert!(read_request(b"[1]").is_err());
        assert!(read_request(b"{").is_err());
    }

    #[test]
    fn unmodelled_fields_survive_a_same_protocol_hop() {
        let body = json!({
            "model": "m",
            "input": [
                {"role": "user", "content": "search"},
                {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                {"role": "assistant", "content": "found"}
            ],
            "tools": [{"type": "web_search"}, {"type": "function", "name": "f", "parameters": {}, "strict": true}],
            "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []},
            "text": {"format": {"type": "json_schema", "name": "n", "schema": {}, "description": "d"}, "verbosity": "low"},
            "reasoning": {"effort": "high", "summary": "auto"},
            "store": false,
            "include": ["reasoning.encrypted_content"]
        });
        let request = read(body.clone());
        assert_eq!(request.tools.len(), 1);
        assert_eq!(request.reasoning.as_ref().and_then(|r| r.effort), Some(ir::Effort::High));
        let (out, dropped) = written(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(out["input"][1], body["input"][1]);
        assert_eq!(out["tools"], body["tools"]);
        assert_eq!(out["tool_choice"], body["tool_choice"]);
        assert_eq!(out["text"], body["text"]);
        assert_eq!(out["reasoning"], body["reasoning"]);
        assert_eq!(out["store"], json!(false));
        assert_eq!(out["include"], body["include"]);
    }

    #[test]
    fn cross_protocol_writes_report_what_is_lost() {
        let mut request = ir::Request {
            model: "m".into(),
            top_k: Some(5),
            seed: Some(1),
            stop: vec!["x".into()],
            frequency_penalty: Some(0.5),
            presence_penalty: Some(0.5),
            ..ir::Request::default()
        };
        request.extra.insert(Protocol::Anthropic, "top_logprobs".into(), json!(1));
        request.messages.push(Message::new(
            Role::User,
            vec![Block::ToolResult(ir::ToolResult {
                tool_use_id: "c".into(),
                name: None,
                content: vec![Block::text("boom")],
                is_error: true,
            })],
        ));
        let (out, dropped) = written(&request);
        let fields: Vec<Field> = dropped.iter().map(|d| d.field).collect();
        for field in [
            Field::Unmodelled,
            Field::TopK,
            Field::Stop,
            Field::Seed,
            Field::FrequencyPenalty,
            Field::PresencePenalty,
            Field::ToolResultError,
        ] {
            assert!(fields.contains(&field), "{field} not in {fields:?}");
        }
        assert_eq!(dropped[0].extra_path.as_deref(), Some("top_logprobs"));
        assert!(out.get("top_logprobs").is_none());
        assert_eq!(out["input"][0]["output"], json!("boom"));
    }

    #[test]
    fn tools_from_elsewhere_are_written_non_strict() {
        let request = ir::Request {
            tools: vec![ir::Tool {
                name: "f".into(),
                description: Some("d".into()),
                parameters: json!({"type": "object"}),
                cache_control: None,
                ..ir::Tool::default()
            }],
            reasoning: Some(ir::Reasoning::with_budget(20000)),
            ..ir::Request::default()
        };
        let (out, dropped) = written(&request);
        assert_eq!(
            out["tools"],
            json!([{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": false}])
        );
        assert_eq!(out["reasoning"], json!({"effort": "high"}));
        assert_eq!(dropped[0], Dropped::new(Field::ReasoningBudget, ir::DropReason::Converted));
    }

    #[test]
    fn system_with_a_cache_marker_becomes_a_system_message() {
        let mut block = TextBlock::new("sys");
        block.cache_control = Some(CacheControl { ttl: None });
        let request = ir::Request { system: vec![block.clone(), TextBlock::new("more")], ..ir::Request::default() };
        let (out, _) = written(&request);
        assert!(out.get("instructions").is_none());
        assert_eq!(out["input"][0]["role"], json!("system"));
        assert_eq!(out["input"][0]["content"][0]["prompt_cache_breakpoint"], json!({"mode": "explicit"}));
        let back = read_request(&write_request(&request, &ir::Capabilities::default()).body).unwrap();
        assert_eq!(back.system, request.system);
    }

    /// `include: ["message.output_text.logprobs"]` with `top_logprobs`, as
    /// the Responses reference names them: read into the IR, written back
    /// beside what else `include` named.
    #[test]
    fn logprobs_are_asked_by_include_and_top_logprobs() {
        let body = json!({"model": "m", "input": "hi", "top_logprobs": 3,
            "include": ["reasoning.encrypted_content", "message.output_text.logprobs"]});
        let request = read(body);
        assert_eq!(request.logprobs, Some(3));
        let (out, dropped) = written(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(out["include"], json!(["reasoning.encrypted_content", "message.output_text.logprobs"]));
        assert_eq!(out["top_logprobs"], json!(3));
        assert_eq!(read(json!({"model": "m", "input": "hi"})).logprobs, None);
    }
}
