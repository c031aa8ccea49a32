//! `generateContent` request bodies ↔ `ir::Request`.
//!
//! Streaming is chosen by the endpoint (`:streamGenerateContent`), not the
//! body: the reader leaves `stream` false and the writer has no field for it.
//!
//! The model travels in the URL path, so the reader leaves `model` empty
//! and the writer never puts one in the body (the writer does look at
//! `request.model`, the wire model on egress, to pick between Gemini 2.x
//! and Gemini 3 spellings of reasoning controls).
//!
//! Unmodelled fields are kept in `extra` under their wire key
//! (`safetySettings`, `cachedContent`, `labels`, ...). Unmodelled parts of
//! modelled objects are kept under the object's key, holding only the
//! leftover fields: `generationConfig` (e.g. `candidateCount`,
//! `responseModalities`, `thinkingConfig.includeThoughts` when it differs
//! from the writer's default), `toolConfig` (e.g. `VALIDATED` mode, several
//! `allowedFunctionNames`), `tools` (non-function tools such as
//! `googleSearch`, appended on write) and `functionDeclarations` (per tool
//! name, e.g. `behavior`, `response`). On a same-protocol hop the writer
//! merges them back: the IR-derived value wins, extra fills the gaps.
//!
//! Schemas in Gemini's OpenAPI subset (`parameters`, `responseSchema`) are
//! read as JSON Schema and written back in the form the target model takes
//! (see `schema`). Reasoning: `thinkingBudget` 0 is thinking off, -1 on with
//! no budget, n a budget; `thinkingLevel` is the effort. Gemini 3 takes a
//! level (the nearest of minimal, low, medium, high); 2.x only a budget, the
//! one an effort stands for. `includeThoughts` is kept only when the caller
//! set it to other than what the writer sends (true with thinking on).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use switchyard_codec::ir::{
    Capabilities, DropReason, Dropped, Effort, Efforts, Field, Message, Protocol, Reasoning, Request, ResponseFormat,
    Role, TextBlock, Thinking, Tool, ToolChoice,
};
use switchyard_codec::{effort, json, DecodeError, Encoded};

use crate::parts::{
    blocks_to_parts, drop_once, parts_to_blocks, take_unmodelled, CallLedger, PartMode, WriteParts, SKIP_SIGNATURE,
};
use crate::schema;
use crate::wire::{
    Content, FunctionCallingConfigIn, FunctionDeclarationIn, GenerationConfigIn, Part, ThinkingConfigIn, ToolConfigIn,
};

/// The name a JSON schema read from this protocol, which names none, gets.
pub(crate) const SCHEMA_NAME: &str = ResponseFormat::UNNAMED;

const JSON_MIME: &str = "application/json";

/// The levels `thinkingLevel` takes.
const LEVELS: [Effort; 4] = [Effort::Minimal, Effort::Low, Effort::Medium, Effort::High];

/// Where generateContent requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "generationConfig.maxOutputTokens",
        Field::Temperature => "generationConfig.temperature",
        Field::TopP => "generationConfig.topP",
        Field::TopK => "generationConfig.topK",
        Field::Stop => "generationConfig.stopSequences",
        Field::Seed => "generationConfig.seed",
        Field::FrequencyPenalty => "generationConfig.frequencyPenalty",
        Field::PresencePenalty => "generationConfig.presencePenalty",
        Field::JsonMode => "generationConfig.responseMimeType",
        Field::JsonSchema => "generationConfig.responseJsonSchema",
        Field::ReasoningEffort => "generationConfig.thinkingConfig.thinkingLevel",
        Field::ReasoningBudget => "generationConfig.thinkingConfig.thinkingBudget",
        Field::ReasoningOff => "generationConfig.thinkingConfig.thinkingBudget",
        Field::ToolChoice => "toolConfig.functionCallingConfig",
        Field::Thinking => "contents.parts.thought",
        Field::Audio => "contents.parts.inlineData",
        Field::SchemaKeyword => "tools.functionDeclarations.parameters",
        Field::Dimensions => "outputDimensionality",
        Field::InputType => "taskType",
        Field::Truncate => "autoTruncate",
        Field::Logprobs => "generationConfig.responseLogprobs",
        Field::TopLogprobs => "generationConfig.logprobs",
        Field::Choices => "generationConfig.candidateCount",
        _ => return None,
    })
}

/// Reads a request body.
pub(crate) fn read(body: &[u8]) -> Result<Request, DecodeError> {
    let value: Value = json::parse(body)?;
    let Value::Object(mut map) = value else {
        return Err(DecodeError::Json("request body must be a json object".to_owned()));
    };
    let mut request = Request::default();

    let mut contents = take(&mut map, "contents", "contents")
        .ok_or_else(|| DecodeError::invalid("contents", "contents is required"))?;
    let kept = take_unmodelled(&mut contents);
    let mut contents: Vec<Content> = typed(contents, "contents", "contents must be an array of contents")?;
    for (content, kept) in contents.iter_mut().zip(kept) {
        for (part, kept) in content.parts.iter_mut().zip(kept) {
            part.kept = kept;
        }
    }
    let mut ledger = CallLedger::new("call_");
    for (index, content) in contents.into_iter().enumerate() {
        let at = format!("contents[{index}]");
        let role = match content.role.as_deref() {
            None | Some("") | Some("user") | Some("function") | Some("tool") => Role::User,
            Some("model") | Some("assistant") => Role::Assistant,
            Some(other) => {
                return Err(DecodeError::invalid(
                    format!("{at}.role"),
                    format!("role must be user or model, not {other}"),
                ))
            }
        };
        let blocks = parts_to_blocks(content.parts, &mut ledger, PartMode::Request, &at)?;
        request.messages.push(Message::new(role, blocks));
    }

    if let Some(system) = take(&mut map, "systemInstruction", "system_instruction") {
        request.system = read_system(system)?;
    }
    if let Some(tools) = take(&mut map, "tools", "tools") {
        read_tools(tools, &mut request)?;
    }
    if let Some(config) = take(&mut map, "toolConfig", "tool_config") {
        let config: ToolConfigIn = typed(config, "toolConfig", "toolConfig is invalid")?;
        read_tool_config(config, &mut request)?;
    }
    if let Some(config) = take(&mut map, "generationConfig", "generation_config") {
        let config: GenerationConfigIn = typed(config, "generationConfig", "generationConfig is invalid")?;
        read_generation_config(config, &mut request)?;
    }
    // The path names the model; a body copy is redundant, not an extra.
    map.remove("model");
    for (key, value) in map {
        request.extra.insert(Protocol::Gemini, key, value);
    }
    Ok(request)
}

fn take(map: &mut Map<String, Value>, camel: &str, snake: &str) -> Option<Value> {
    map.remove(camel).or_else(|| map.remove(snake)).filter(|v| !v.is_null())
}

fn typed<T: DeserializeOwned>(value: Value, field: &str, what: &str) -> Result<T, DecodeError> {
    serde_json::from_value(value).map_err(|err| DecodeError::invalid(field, format!("{what}: {err}")))
}

fn read_system(value: Value) -> Result<Vec<TextBlock>, DecodeError> {
    // The REST API takes a Content; SDKs also accept a bare string.
    if let Value::String(text) = value {
        return Ok(vec![TextBlock::new(text)]);
    }
    let content: Content = typed(value, "systemInstruction", "systemInstruction is invalid")?;
    let mut system = Vec::with_capacity(content.parts.len());
    for (index, part) in content.parts.into_iter().enumerate() {
        match part.text {
            Some(text) if part.function_call.is_none() && part.inline_data.is_none() => {
                system.push(TextBlock::new(text));
            }
            _ => {
                return Err(DecodeError::invalid(
                    format!("systemInstruction.parts[{index}]"),
                    "system instruction parts must be text",
                ))
            }
        }
    }
    Ok(system)
}

fn read_tools(value: Value, request: &mut Request) -> Result<(), DecodeError> {
    let Value::Array(tools) = value else {
        return Err(DecodeError::invalid("tools", "tools must be an array"));
    };
    let mut others = Vec::new();
    let mut declaration_extra = Map::new();
    for (index, tool) in tools.into_iter().enumerate() {
        let Value::Object(mut tool) = tool else {
            return Err(DecodeError::invalid(format!("tools[{index}]"), "a tool must be an object"));
        };
        if let Some(declarations) = take(&mut tool, "functionDeclarations", "function_declarations") {
            let field = format!("tools[{index}].functionDeclarations");
            let declarations: Vec<FunctionDeclarationIn> =
                typed(declarations, &field, "functionDeclarations is invalid")?;
            for declaration in declarations {
                if declaration.name.is_empty() {
                    return Err(DecodeError::invalid(field, "a function declaration needs a name"));
                }
                if !declaration.rest.is_empty() {
                    declaration_extra.insert(declaration.name.clone(), Value::Object(declaration.rest));
                }
                request.tools.push(Tool {
                    name: declaration.name,
                    description: declaration.description,
                    parameters: match (declaration.parameters_json_schema, declaration.parameters) {
                        (Some(json_schema), _) => json_schema,
                        (None, Some(openapi)) => schema::to_json_schema(&openapi),
                        (None, None) => Value::Null,
                    },
                    cache_control: None,
                    ..Tool::default()
                });
            }
        }
        if !tool.is_empty() {
            others.push(Value::Object(tool));
        }
    }
    if !others.is_empty() {
        request.extra.insert(Protocol::Gemini, "tools".to_owned(), Value::Array(others));
    }
    if !declaration_extra.is_empty() {
        request.extra.insert(Protocol::Gemini, "functionDeclarations".to_owned(), Value::Object(declaration_extra));
    }
    Ok(())
}

fn read_tool_config(config: ToolConfigIn, request: &mut Request) -> Result<(), DecodeError> {
    let mut leftover = config.rest;
    if let Some(calling) = config.function_calling_config {
        let FunctionCallingConfigIn { mode, allowed_function_names, rest } = calling;
        let names = allowed_function_names.unwrap_or_default();
        let mut calling_leftover = rest;
        let mode = mode.map(|m| m.to_ascii_uppercase());
        request.tool_choice = match mode.as_deref() {
            None | Some("MODE_UNSPECIFIED") | Some("AUTO") => Some(ToolChoice::Auto),
            Some("NONE") => Some(ToolChoice::None),
            Some("ANY") if names.len() == 1 => names.first().cloned().map(ToolChoice::Tool),
            Some("ANY") => Some(ToolChoice::Any),
            // VALIDATED (auto with constrained decoding) has no IR choice:
            // it stays unset (auto everywhere) and travels in extra.
            Some("VALIDATED") => None,
            Some(other) => {
                return Err(DecodeError::invalid(
                    "toolConfig.functionCallingConfig.mode",
                    format!("unknown function calling mode {other}"),
                ))
            }
        };
        if request.tool_choice.is_none() {
            if let Some(mode) = mode {
                calling_leftover.insert("mode".to_owned(), Value::String(mode));
            }
        }
        let names_kept = matches!(request.tool_choice, Some(ToolChoice::Tool(_)));
        if !names.is_empty() && !names_kept {
            calling_leftover.insert(
                "allowedFunctionNames".to_owned(),
                Value::Array(names.into_iter().map(Value::String).collect()),
            );
        }
        if !calling_leftover.is_empty() {
            leftover.insert("functionCallingConfig".to_owned(), Value::Object(calling_leftover));
        }
    }
    if !leftover.is_empty() {
        request.extra.insert(Protocol::Gemini, "toolConfig".to_owned(), Value::Object(leftover));
    }
    Ok(())
}

fn read_generation_config(config: GenerationConfigIn, request: &mut Request) -> Result<(), DecodeError> {
    let mut leftover = config.rest;
    request.max_tokens = config.max_output_tokens;
    request.temperature = config.temperature;
    request.top_p = config.top_p;
    if let Some(top_k) = config.top_k {
        if !(top_k >= 0.0 && top_k.fract() == 0.0 && top_k <= u32::MAX as f64) {
            return Err(DecodeError::invalid("generationConfig.topK", "topK must be a non-negative integer"));
        }
        request.top_k = Some(top_k as u64);
    }
    request.stop = config.stop_sequences.unwrap_or_default();
    request.seed = config.seed;
    request.frequency_penalty = config.frequency_penalty;
    request.presence_penalty = config.presence_penalty;
    request.n = config.candidate_count;
    // `logprobs` (the likeliest tokens at each step) is valid only with
    // `responseLogprobs`: alone, it is the vendor's to judge.
    match (config.response_logprobs, config.logprobs) {
        (Some(true), top) => request.logprobs = Some(top.unwrap_or(0)),
        (Some(false), Some(top)) => {
            leftover.insert("responseLogprobs".to_owned(), Value::Bool(false));
            leftover.insert("logprobs".to_owned(), Value::from(top));
        }
        (None, Some(top)) => {
            leftover.insert("logprobs".to_owned(), Value::from(top));
        }
        (_, None) => {}
    }

    let schema_key = if config.response_json_schema.is_some() { "responseJsonSchema" } else { "responseSchema" };
    let from_openapi = config.response_json_schema.is_none();
    let schema = config.response_json_schema.or(config.response_schema);
    // `text/plain` is the default, not a format.
    let mime = config.response_mime_type.filter(|m| !m.eq_ignore_ascii_case("text/plain"));
    match mime.as_deref() {
        Some(JSON_MIME) | None if schema.is_some() => {
            let schema = schema.unwrap_or(Value::Null);
            let schema = if from_openapi { schema::to_json_schema(&schema) } else { schema };
            request.response_format =
                Some(ResponseFormat::JsonSchema { name: SCHEMA_NAME.to_owned(), schema, strict: None });
        }
        Some(JSON_MIME) => request.response_format = Some(ResponseFormat::JsonObject),
        None => {}
        // text/x.enum: not a response format the IR knows.
        Some(other) => {
            leftover.insert("responseMimeType".to_owned(), Value::String(other.to_owned()));
            if let Some(schema) = schema {
                leftover.insert(schema_key.to_owned(), schema);
            }
        }
    }

    if let Some(thinking) = config.thinking_config {
        if let Some(thinking_leftover) = read_thinking(thinking, request)? {
            leftover.insert("thinkingConfig".to_owned(), Value::Object(thinking_leftover));
        }
    }
    if !leftover.is_empty() {
        request.extra.insert(Protocol::Gemini, "generationConfig".to_owned(), Value::Object(leftover));
    }
    Ok(())
}

/// `thinkingBudget`: 0 disables, -1 is dynamic (no budget), n > 0 a budget.
/// `thinkingLevel` is the effort. `includeThoughts` is kept in extra only
/// when the caller set it and it differs from what the writer sends (true
/// with thinking on), so a request that left it out reports nothing lost.
fn read_thinking(config: ThinkingConfigIn, request: &mut Request) -> Result<Option<Map<String, Value>>, DecodeError> {
    let ThinkingConfigIn { thinking_budget, include_thoughts, thinking_level, rest } = config;
    let mut leftover = rest;
    let level = thinking_level.filter(|l| !l.is_empty() && !l.eq_ignore_ascii_case("thinking_level_unspecified"));
    let effort = match level {
        None => None,
        Some(level) => Some(effort::read_effort(&level, "generationConfig.thinkingConfig.thinkingLevel")?),
    };
    let mut reasoning = Reasoning { thinking: Thinking::On, effort, budget_tokens: None };
    match thinking_budget {
        None | Some(-1) => {}
        Some(0) => reasoning.thinking = Thinking::Off,
        Some(budget) if budget > 0 => reasoning.budget_tokens = Some(budget as u64),
        Some(_) => {
            return Err(DecodeError::invalid(
                "generationConfig.thinkingConfig.thinkingBudget",
                "thinkingBudget must be -1, 0 or a positive token count",
            ))
        }
    }
    let controls = thinking_budget.is_some() || reasoning.effort.is_some();
    if controls || include_thoughts == Some(true) {
        let written = !reasoning.is_off();
        if let Some(include) = include_thoughts.filter(|include| *include != written) {
            leftover.insert("includeThoughts".to_owned(), Value::Bool(include));
        }
        request.reasoning = Some(reasoning);
    } else if let Some(include) = include_thoughts {
        leftover.insert("includeThoughts".to_owned(), Value::Bool(include));
    }
    Ok((!leftover.is_empty()).then_some(leftover))
}

/// True for model families that predate `thinkingLevel` and thought
/// signatures (Gemini 1.x/2.x, Gemma, LearnLM). Unknown or empty names are
/// taken for current models.
pub(crate) fn is_legacy_model(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    ["gemini-1", "gemini-2", "gemma", "learnlm"].iter().any(|prefix| name.starts_with(prefix))
}

/// True for models that predate `parametersJsonSchema` and
/// `responseJsonSchema` (Gemini 1.x and 2.0): they take only the OpenAPI
/// subset.
fn schema_subset_only(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    ["gemini-1", "gemini-2.0"].iter().any(|prefix| name.starts_with(prefix))
}

/// Writes a request body.
pub(crate) fn write(request: &Request, capabilities: &Capabilities) -> Encoded {
    let mut dropped = Vec::new();
    let extra = request.extra.for_target(Protocol::Gemini, &mut dropped).cloned().unwrap_or_default();
    let legacy = is_legacy_model(&request.model);
    let subset = schema_subset_only(&request.model);
    let mut body = Map::new();

    // Gemini keeps system instructions only before the conversation: a
    // system message's text joins them, where the model still takes it as
    // the operator's and not as the user's words (`codec::system`).
    let (system, conversation) = switchyard_codec::system::fold(request, &mut dropped);
    let mut calls = Vec::new();
    let mut contents: Vec<Content> = Vec::with_capacity(conversation.len());
    for message in conversation.iter() {
        message.extra.for_target_under(Protocol::Gemini, "messages", &mut dropped);
        let mut parts = blocks_to_parts(
            &message.content,
            &mut WriteParts {
                call_ids: false,
                dropped: &mut dropped,
                calls: &mut calls,
                audio_input: capabilities.audio_input,
            },
        );
        if parts.is_empty() {
            // Gemini rejects a content without parts; an empty turn says nothing.
            continue;
        }
        if message.role == Role::Assistant && !legacy {
            sign_first_call(&mut parts);
        }
        // Gemini wants all answers to one model turn in one content; readers
        // of protocols with a message per result may have split them.
        if message.role == Role::User && only_results(&parts) {
            if let Some(previous) = contents.last_mut() {
                if previous.role.as_deref() == Some("user") && only_results(&previous.parts) {
                    previous.parts.extend(parts);
                    continue;
                }
            }
        }
        contents.push(Content {
            role: Some(
                match message.role {
                    // `fold` took the system messages out.
                    Role::User | Role::System => "user",
                    Role::Assistant => "model",
                }
                .to_owned(),
            ),
            parts,
        });
    }
    body.insert("contents".to_owned(), to_value(&contents));

    if !system.is_empty() {
        let parts: Vec<Part> = system
            .iter()
            .map(|block| {
                if block.cache_control.is_some() {
                    drop_once(&mut dropped, Field::CacheControl);
                }
                Part { text: Some(block.text.clone()), ..Part::default() }
            })
            .collect();
        body.insert("systemInstruction".to_owned(), to_value(&Content { role: None, parts }));
    }

    let tools = write_tools(request, &extra, subset, &mut dropped);
    if !tools.is_empty() {
        body.insert("tools".to_owned(), Value::Array(tools));
    }
    if let Some(choice) = &request.tool_choice {
        body.insert("toolConfig".to_owned(), write_tool_choice(choice));
    }
    if !request.betas.is_empty() {
        drop_once(&mut dropped, Field::Betas);
    }
    if request.parallel_tool_calls == Some(false) {
        drop_once(&mut dropped, Field::ParallelToolCalls);
    }

    let generation =
        write_generation_config(request, &extra, Model { legacy, subset, efforts: capabilities.efforts }, &mut dropped);
    if !generation.is_empty() {
        body.insert("generationConfig".to_owned(), Value::Object(generation));
    }
    if request.user.is_some() {
        drop_once(&mut dropped, Field::User);
    }
    if !request.metadata.is_empty() {
        drop_once(&mut dropped, Field::Metadata);
    }

    for (key, value) in &extra {
        if key == "tools" || key == "functionDeclarations" {
            continue;
        }
        merge_missing(&mut body, key, value);
    }
    Encoded { body: json::to_vec(&Value::Object(body)), dropped }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn only_results(parts: &[Part]) -> bool {
    !parts.is_empty() && parts.iter().all(|p| p.function_response.is_some())
}

/// Gemini 3 rejects a history function call without a signature; the
/// first call of a model turn with none gets the documented placeholder.
fn sign_first_call(parts: &mut [Part]) {
    if let Some(first) = parts.iter_mut().find(|p| p.function_call.is_some()) {
        if first.thought_signature.is_none() {
            first.thought_signature = Some(SKIP_SIGNATURE.to_owned());
        }
    }
}

/// Inserts `value` at `key` unless the body already has it; objects merge
/// recursively, the body's own values winning.
fn merge_missing(target: &mut Map<String, Value>, key: &str, value: &Value) {
    match (target.get_mut(key), value) {
        (None, _) => {
            target.insert(key.to_owned(), value.clone());
        }
        (Some(Value::Object(existing)), Value::Object(more)) => {
            for (inner_key, inner_value) in more {
                merge_missing(existing, inner_key, inner_value);
            }
        }
        (Some(_), _) => {}
    }
}

fn write_tools(request: &Request, extra: &Map<String, Value>, subset: bool, dropped: &mut Vec<Dropped>) -> Vec<Value> {
    let mut tools = Vec::new();
    if !request.tools.is_empty() {
        let declaration_extra = extra.get("functionDeclarations").and_then(Value::as_object);
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                if tool.cache_control.is_some() {
                    drop_once(dropped, Field::CacheControl);
                }
                if tool.strict == Some(true) {
                    // A function declaration has no strict flag.
                    drop_once(dropped, Field::ToolStrict);
                }
                tool.extra.for_target_under(Protocol::Gemini, "tools", dropped);
                let mut declaration = Map::new();
                declaration.insert("name".to_owned(), Value::String(tool.name.clone()));
                if let Some(description) = &tool.description {
                    declaration.insert("description".to_owned(), Value::String(description.clone()));
                }
                if !tool.parameters.is_null() {
                    let (key, schema) =
                        write_schema(&tool.parameters, subset, ("parameters", "parametersJsonSchema"), dropped);
                    declaration.insert(key.to_owned(), schema);
                }
                if let Some(Value::Object(more)) = declaration_extra.and_then(|d| d.get(&tool.name)) {
                    for (key, value) in more {
                        merge_missing(&mut declaration, key, value);
                    }
                }
                Value::Object(declaration)
            })
            .collect();
        let mut tool = Map::new();
        tool.insert("functionDeclarations".to_owned(), Value::Array(declarations));
        tools.push(Value::Object(tool));
    }
    if let Some(Value::Array(others)) = extra.get("tools") {
        tools.extend(others.iter().cloned());
    }
    tools
}

/// A JSON Schema in the field the model takes: the JSON-Schema field as it
/// is, or (`subset`) the OpenAPI-subset field with the schema converted.
fn write_schema(
    schema: &Value,
    subset: bool,
    (openapi, json_schema): (&'static str, &'static str),
    dropped: &mut Vec<Dropped>,
) -> (&'static str, Value) {
    if subset {
        (openapi, schema::to_openapi(schema, dropped))
    } else {
        (json_schema, schema.clone())
    }
}

/// What the target model takes where Gemini generations differ.
#[derive(Debug, Clone, Copy)]
struct Model {
    /// Predates `thinkingLevel` (Gemini 1.x, 2.x).
    legacy: bool,
    /// Takes only the OpenAPI schema subset (Gemini 1.x, 2.0).
    subset: bool,
    /// The levels it takes and whether thinking turns off, where its facts
    /// say (Gemini 3 Pro: low and high, never off; 2.5 Pro: never off).
    efforts: Option<Efforts>,
}

fn write_tool_choice(choice: &ToolChoice) -> Value {
    let mut calling = Map::new();
    let mode = match choice {
        ToolChoice::Auto => "AUTO",
        ToolChoice::Any => "ANY",
        ToolChoice::None => "NONE",
        ToolChoice::Tool(name) => {
            calling.insert("allowedFunctionNames".to_owned(), Value::Array(vec![Value::String(name.clone())]));
            "ANY"
        }
    };
    calling.insert("mode".to_owned(), Value::String(mode.to_owned()));
    let mut config = Map::new();
    config.insert("functionCallingConfig".to_owned(), Value::Object(calling));
    Value::Object(config)
}

fn write_generation_config(
    request: &Request,
    extra: &Map<String, Value>,
    model: Model,
    dropped: &mut Vec<Dropped>,
) -> Map<String, Value> {
    let mut config = Map::new();
    if let Some(max) = request.max_tokens {
        config.insert("maxOutputTokens".to_owned(), Value::from(max));
    }
    if let Some(temperature) = request.temperature {
        config.insert("temperature".to_owned(), Value::from(temperature));
    }
    if let Some(top_p) = request.top_p {
        config.insert("topP".to_owned(), Value::from(top_p));
    }
    if let Some(top_k) = request.top_k {
        config.insert("topK".to_owned(), Value::from(top_k));
    }
    if !request.stop.is_empty() {
        config.insert(
            "stopSequences".to_owned(),
            Value::Array(request.stop.iter().cloned().map(Value::String).collect()),
        );
    }
    if let Some(seed) = request.seed {
        config.insert("seed".to_owned(), Value::from(seed));
    }
    if let Some(penalty) = request.frequency_penalty {
        config.insert("frequencyPenalty".to_owned(), Value::from(penalty));
    }
    if let Some(penalty) = request.presence_penalty {
        config.insert("presencePenalty".to_owned(), Value::from(penalty));
    }
    if let Some(top) = request.logprobs {
        config.insert("responseLogprobs".to_owned(), Value::Bool(true));
        if top > 0 {
            config.insert("logprobs".to_owned(), Value::from(top));
        }
    }
    match request.n {
        // A streamed request's candidates after the first, which no
        // stream of the IR carries, are not asked for.
        Some(n) if n > 1 && request.stream => Dropped::push_once(dropped, Field::Choices, DropReason::Unsupported),
        Some(n) => {
            config.insert("candidateCount".to_owned(), Value::from(n));
        }
        None => {}
    }
    match &request.response_format {
        None => {}
        Some(ResponseFormat::JsonObject) => {
            config.insert("responseMimeType".to_owned(), Value::from(JSON_MIME));
        }
        Some(ResponseFormat::JsonSchema { name, schema, .. }) => {
            // Gemini always constrains output to the schema, so `strict`
            // needs no field; a schema name has none.
            if name != SCHEMA_NAME {
                drop_once(dropped, Field::JsonSchemaName);
            }
            config.insert("responseMimeType".to_owned(), Value::from(JSON_MIME));
            let (key, schema) = write_schema(schema, model.subset, ("responseSchema", "responseJsonSchema"), dropped);
            config.insert(key.to_owned(), schema);
        }
    }
    if let Some(reasoning) = &request.reasoning {
        let extra_include = extra
            .get("generationConfig")
            .and_then(|g| g.get("thinkingConfig"))
            .and_then(|t| t.get("includeThoughts"))
            .is_some();
        let thinking = write_thinking(reasoning, model, extra_include, dropped);
        if !thinking.is_empty() {
            config.insert("thinkingConfig".to_owned(), Value::Object(thinking));
        }
    }
    if let Some(Value::Object(more)) = extra.get("generationConfig") {
        for (key, value) in more {
            merge_missing(&mut config, key, value);
        }
    }
    config
}

/// Gemini 2.x takes a token budget, Gemini 3 a level (and still a budget).
/// An effort becomes the nearest level the model takes for current models
/// and the budget it stands for on 2.x ones; a budget is always written as
/// given. Thinking off goes only to a model that turns it off (2.5 Pro and
/// Gemini 3 Pro refuse a budget of 0): to another it is reported.
fn write_thinking(
    reasoning: &Reasoning,
    model: Model,
    extra_include: bool,
    dropped: &mut Vec<Dropped>,
) -> Map<String, Value> {
    let mut thinking = Map::new();
    if reasoning.is_off() {
        if model.efforts.is_some_and(|efforts| !efforts.takes_off()) {
            Dropped::push_once(dropped, Field::ReasoningOff, DropReason::Capability);
        } else {
            thinking.insert("thinkingBudget".to_owned(), Value::from(0));
        }
        return thinking;
    }
    if model.legacy {
        if let Some(budget) = effort::budget_to_write(reasoning, dropped) {
            thinking.insert("thinkingBudget".to_owned(), Value::from(budget));
            if reasoning.budget_tokens.is_some() && reasoning.effort.is_some() {
                Dropped::push_once(dropped, Field::ReasoningEffort, DropReason::Unsupported);
            }
        }
    } else {
        // Gemini 3 refuses a budget beside a level: the level goes.
        match reasoning.budget_tokens {
            Some(_) if reasoning.effort.is_some() => {
                Dropped::push_once(dropped, Field::ReasoningBudget, DropReason::Converted);
            }
            Some(budget) => {
                thinking.insert("thinkingBudget".to_owned(), Value::from(budget));
            }
            None => {}
        }
        if let Some(effort) = reasoning.effort {
            let taken = model.efforts.map(|efforts| efforts.within(&LEVELS)).filter(|levels| !levels.is_empty());
            let level = effort.nearest(taken.as_deref().unwrap_or(&LEVELS));
            if level != effort {
                Dropped::push_once(dropped, Field::ReasoningEffort, DropReason::Converted);
            }
            thinking.insert("thinkingLevel".to_owned(), Value::from(level.as_str()));
        }
    }
    if !extra_include {
        thinking.insert("includeThoughts".to_owned(), Value::Bool(true));
    }
    thinking
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_codec::ir::Block;

    fn read_json(value: Value) -> Request {
        read(&serde_json::to_vec(&value).unwrap()).unwrap()
    }

    fn write_json(request: &Request) -> (Value, Vec<Dropped>) {
        let encoded = write(request, &Capabilities::default());
        (serde_json::from_slice(&encoded.body).unwrap(), encoded.dropped)
    }

    #[test]
    fn snake_case_fields_are_read() {
        let request = read_json(json!({
            "contents": [{"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": "AA=="}}]}],
            "system_instruction": {"parts": [{"text": "be brief"}]},
            "generation_config": {"max_output_tokens": 5, "stop_sequences": ["x"], "top_k": 40.0},
            "tool_config": {"function_calling_config": {"mode": "ANY", "allowed_function_names": ["f"]}}
        }));
        assert_eq!(request.max_tokens, Some(5));
        assert_eq!(request.top_k, Some(40));
        assert_eq!(request.stop, vec!["x".to_owned()]);
        assert_eq!(request.system[0].text, "be brief");
        assert_eq!(request.tool_choice, Some(ToolChoice::Tool("f".into())));
        assert!(matches!(request.messages[0].content[0], Block::Image { .. }));
        assert!(request.extra.is_empty());
    }

    /// What the pinned SDK's `Part` holds and the IR does not model (a
    /// part's metadata beside its data, a part of `toolCall` alone) goes
    /// back as it came to a Gemini lane and is reported to any other: the
    /// typed reader used to skip it in silence or refuse the part.
    #[test]
    fn unmodelled_part_members_go_back_or_are_reported() {
        let file = json!({"fileData": {"mimeType": "video/mp4", "fileUri": "https://example.com/v.mp4"},
            "videoMetadata": {"fps": 1.0}});
        let image = json!({"inline_data": {"mime_type": "image/png", "data": "AA=="},
            "mediaResolution": {"level": "MEDIA_RESOLUTION_LOW"}, "partMetadata": {"k": "v"}});
        let tool_call = json!({"toolCall": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB"}});
        let request = read_json(json!({
            "contents": [
                {"role": "user", "parts": [{"text": "look"}, file, image]},
                {"role": "model", "parts": [tool_call.clone(), {"text": "done"}]}
            ]
        }));
        let (body, dropped) = write_json(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        let parts = &body["contents"][0]["parts"];
        assert_eq!(parts[1]["videoMetadata"], json!({"fps": 1.0}));
        assert_eq!(parts[1]["fileData"]["fileUri"], "https://example.com/v.mp4");
        assert_eq!(parts[2]["mediaResolution"], json!({"level": "MEDIA_RESOLUTION_LOW"}));
        assert_eq!(parts[2]["partMetadata"], json!({"k": "v"}));
        assert_eq!(parts.as_array().map(Vec::len), Some(3));
        assert_eq!(body["contents"][1]["parts"], json!([tool_call, {"text": "done"}]));

        let mut lost = Vec::new();
        for message in &request.messages {
            for block in &message.content {
                if let Block::Unmodelled(block) = block {
                    block.for_target(Protocol::OpenAi, &mut lost);
                }
            }
        }
        let paths: Vec<&str> = lost.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(
            paths,
            [
                "contents.parts.videoMetadata",
                "contents.parts.mediaResolution",
                "contents.parts.partMetadata",
                "contents.parts.toolCall"
            ]
        );
    }

    #[test]
    fn missing_or_bad_contents_is_an_error_naming_the_field() {
        let err = read(b"{}").unwrap_err();
        assert_eq!(err, DecodeError::invalid("contents", "contents is required"));
        let err = read(br#"{"contents": [{"role": "robot", "parts": []}]}"#).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { param: Some(p), .. } if p == "contents[0].role"));
        let err = read(br#"{"contents": [{"parts": [{}]}]}"#).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { param: Some(p), .. } if p == "contents[0].parts[0]"));
        assert!(read(b"[1]").is_err());
        assert!(read(b"not json").is_err());
    }

    #[test]
    fn unmodelled_fields_survive_a_same_protocol_hop() {
        let wire = json!({
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [
                {"functionDeclarations": [{"name": "f", "behavior": "NON_BLOCKING"}]},
                {"googleSearch": {}}
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "VALIDATED"}},
            "generationConfig": {
                "candidateCount": 1,
                "responseMimeType": "text/x.enum",
                "responseSchema": {"type": "STRING", "enum": ["a", "b"]},
                "thinkingConfig": {"thinkingBudget": 128}
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
            "cachedContent": "cachedContents/abc",
            "model": "models/gemini-2.5-flash"
        });
        let request = read_json(wire);
        assert_eq!(request.tool_choice, None);
        assert_eq!(request.model, "");
        let (body, dropped) = write_json(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(
            body,
            json!({
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "tools": [
                    {"functionDeclarations": [{"name": "f", "behavior": "NON_BLOCKING"}]},
                    {"googleSearch": {}}
                ],
                "generationConfig": {
                    // The writer asks for thoughts unless the caller said no.
                    "thinkingConfig": {"thinkingBudget": 128, "includeThoughts": true},
                    "candidateCount": 1,
                    "responseMimeType": "text/x.enum",
                    "responseSchema": {"type": "STRING", "enum": ["a", "b"]}
                },
                "toolConfig": {"functionCallingConfig": {"mode": "VALIDATED"}},
                "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
                "cachedContent": "cachedContents/abc"
            })
        );
    }

    #[test]
    fn cross_protocol_extras_and_unsupported_fields_are_reported() {
        let mut request = Request { user: Some("u".into()), parallel_tool_calls: Some(false), ..Request::default() };
        request.extra.insert(Protocol::OpenAi, "logprobs".into(), json!(true));
        request.metadata.insert("k".into(), json!("v"));
        request
            .messages
            .push(Message::new(Role::Assistant, vec![Block::RedactedThinking { data: "x".into() }, Block::text("a")]));
        let (body, dropped) = write_json(&request);
        let fields: Vec<Field> = dropped.iter().map(|d| d.field).collect();
        assert_eq!(
            fields,
            [Field::Unmodelled, Field::RedactedThinking, Field::ParallelToolCalls, Field::User, Field::Metadata]
        );
        assert_eq!(dropped[0].extra_path.as_deref(), Some("logprobs"));
        assert!(body.get("logprobs").is_none());
    }

    #[test]
    fn reasoning_follows_the_model_generation() {
        let mut request = Request { reasoning: Some(Reasoning::with_effort(Effort::Low)), ..Request::default() };
        let (body, _) = write_json(&request);
        assert_eq!(
            body["generationConfig"]["thinkingConfig"],
            json!({"thinkingLevel": "low", "includeThoughts": true})
        );
        request.model = "gemini-2.5-flash".into();
        let (body, _) = write_json(&request);
        assert_eq!(
            body["generationConfig"]["thinkingConfig"],
            json!({"thinkingBudget": 2048, "includeThoughts": true})
        );
        request.reasoning = Some(Reasoning::off());
        let (body, _) = write_json(&request);
        assert_eq!(body["generationConfig"]["thinkingConfig"], json!({"thinkingBudget": 0}));
    }

    /// Gemini 3 Pro takes low and high and never turns thinking off (nor
    /// does 2.5 Pro): a medium effort is the nearest it takes, thinking
    /// off is reported rather than sent as a budget of 0.
    #[test]
    fn reasoning_follows_the_models_own_levels() {
        let pro = Capabilities { efforts: Some(Efforts::of(&[Effort::Low, Effort::High])), ..Capabilities::default() };
        let medium = Request {
            model: "gemini-3-pro-preview".into(),
            reasoning: Some(Reasoning::with_effort(Effort::Medium)),
            ..Request::default()
        };
        let encoded = write(&medium, &pro);
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(body["generationConfig"]["thinkingConfig"]["thinkingLevel"], "high");
        assert_eq!(encoded.dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
        let off = Request { reasoning: Some(Reasoning::off()), ..medium };
        let encoded = write(&off, &pro);
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert!(body.get("generationConfig").is_none(), "{body}");
        assert_eq!(encoded.dropped, vec![Dropped::new(Field::ReasoningOff, DropReason::Capability)]);
    }

    #[test]
    fn dynamic_budget_and_thought_flags_read_back() {
        let request = read_json(json!({
            "contents": [],
            "generationConfig": {"thinkingConfig": {"thinkingBudget": -1, "includeThoughts": true}}
        }));
        assert_eq!(request.reasoning, Some(Reasoning::on()));
        assert!(request.extra.is_empty());
        let request = read_json(json!({
            "contents": [],
            "generationConfig": {"thinkingConfig": {"includeThoughts": false}}
        }));
        assert_eq!(request.reasoning, None);
        let (body, _) = write_json(&request);
        assert_eq!(body["generationConfig"], json!({"thinkingConfig": {"includeThoughts": false}}));
    }

    #[test]
    fn history_calls_get_the_placeholder_signature_on_current_models() {
        let request = Request {
            messages: vec![Message::new(
                Role::Assistant,
                vec![
                    Block::ToolUse(switchyard_codec::ir::ToolUse::new("toolu_1", "f", "{}")),
                    Block::ToolUse(switchyard_codec::ir::ToolUse::new("toolu_2", "f", "{}")),
                ],
            )],
            ..Request::default()
        };
        let (body, _) = write_json(&request);
        assert_eq!(
            body["contents"][0]["parts"],
            json!([
                {"thoughtSignature": SKIP_SIGNATURE, "functionCall": {"name": "f", "args": {}}},
                {"functionCall": {"name": "f", "args": {}}}
            ])
        );
        let legacy = Request { model: "models/gemini-2.0-flash".into(), ..request };
        let (body, _) = write_json(&legacy);
        assert!(body["contents"][0]["parts"][0].get("thoughtSignature").is_none());
    }

    #[test]
    fn tool_results_are_named_from_the_call() {
        let request = Request {
            messages: vec![
                Message::new(
                    Role::Assistant,
                    vec![Block::ToolUse(switchyard_codec::ir::ToolUse::new(
                        "call_abc",
                        "weather",
                        r#"{"city":"Paris"}"#,
                    ))],
                ),
                Message::new(
                    Role::User,
                    vec![Block::ToolResult(switchyard_codec::ir::ToolResult {
                        tool_use_id: "call_abc".into(),
                        name: None,
                        content: vec![Block::text("rain")],
                        is_error: false,
                    })],
                ),
            ],
            model: "gemini-2.5-pro".into(),
            ..Request::default()
        };
        let (body, _) = write_json(&request);
        assert_eq!(
            body["contents"][1],
            json!({"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"output": "rain"}}}]})
        );
        assert_eq!(
            body["contents"][0]["parts"][0],
            json!({"functionCall": {"name": "weather", "args": {"city": "Paris"}}})
        );
    }

    #[test]
    fn split_tool_results_are_sent_as_one_turn() {
        let result = |id: &str| {
            Message::new(
                Role::User,
                vec![Block::ToolResult(switchyard_codec::ir::ToolResult {
                    tool_use_id: id.into(),
                    name: Some("f".into()),
                    content: vec![Block::text("ok")],
                    is_error: false,
                })],
            )
        };
        let request = Request {
            messages: vec![result("a"), result("b"), Message::text(Role::User, "next")],
            ..Request::default()
        };
        let (body, _) = write_json(&request);
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 2);
        assert_eq!(contents[0]["parts"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn openapi_schemas_are_read_as_json_schema_and_written_as_the_model_takes_them() {
        let request = read_json(json!({
            "contents": [],
            "tools": [{"functionDeclarations": [{"name": "f", "parameters": {
                "type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": true}}}}]}],
            "generationConfig": {"responseMimeType": "application/json",
                "responseSchema": {"type": "ARRAY", "items": {"type": "INTEGER"}}}
        }));
        let expected = json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}});
        assert_eq!(request.tools[0].parameters, expected);
        let Some(ResponseFormat::JsonSchema { schema, .. }) = &request.response_format else { panic!("no schema") };
        assert_eq!(schema, &json!({"type": "array", "items": {"type": "integer"}}));
        // Current models take JSON Schema as it is.
        let (body, dropped) = write_json(&Request { model: "gemini-2.5-flash".into(), ..request.clone() });
        assert_eq!(body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"], expected);
        assert_eq!(
            body["generationConfig"]["responseJsonSchema"],
            json!({"type": "array", "items": {"type": "integer"}})
        );
        assert!(dropped.is_empty());
        // Gemini 2.0 takes only the subset.
        let (body, dropped) = write_json(&Request { model: "gemini-2.0-flash".into(), ..request });
        assert_eq!(
            body["tools"][0]["functionDeclarations"][0]["parameters"],
            json!({"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": true}}})
        );
        assert_eq!(body["generationConfig"]["responseSchema"], json!({"type": "ARRAY", "items": {"type": "INTEGER"}}));
        assert!(dropped.is_empty());
    }

    #[test]
    fn every_generation_config_member_that_arrives_is_not_reported() {
        // Before: `includeThoughts` the caller never sent was kept (and
        // reported as `generationConfig`) whenever a budget was set.
        let request = read_json(json!({
            "contents": [],
            "generationConfig": {"temperature": 0.5, "topK": 3, "responseMimeType": "text/plain",
                "thinkingConfig": {"thinkingBudget": 1024}}
        }));
        assert!(request.extra.is_empty(), "{:?}", request.extra);
        let request = read_json(json!({
            "contents": [],
            "generationConfig": {"candidateCount": 2, "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": false}}
        }));
        assert_eq!(request.n, Some(2), "candidates are modelled");
        let mut dropped = Vec::new();
        request.extra.for_target(Protocol::OpenAi, &mut dropped);
        let paths: Vec<&str> = dropped.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(paths, ["generationConfig.thinkingConfig.includeThoughts"]);
    }

    /// `responseLogprobs` with `logprobs` and `candidateCount`, as Gemini's
    /// `GenerationConfig` reference names them: read into the IR, written
    /// back as they came; `logprobs` without `responseLogprobs` is the
    /// vendor's to judge and kept as it came.
    #[test]
    fn logprobs_and_candidates_are_read_and_written() {
        let wire = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"responseLogprobs": true, "logprobs": 3, "candidateCount": 2}});
        let request = read_json(wire.clone());
        assert_eq!((request.logprobs, request.n), (Some(3), Some(2)));
        let (body, dropped) = write_json(&request);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(body["generationConfig"], wire["generationConfig"]);
        let alone = read_json(json!({"contents": [], "generationConfig": {"logprobs": 3}}));
        assert_eq!(alone.logprobs, None);
        assert_eq!(write_json(&alone).0["generationConfig"], json!({"logprobs": 3}));
        // A streamed request's extra candidates have no stream to come back in.
        let streamed = Request { stream: true, ..request };
        let (body, dropped) = write_json(&streamed);
        assert!(body["generationConfig"].get("candidateCount").is_none());
        assert_eq!(dropped.iter().map(|d| d.field).collect::<Vec<_>>(), [Field::Choices]);
    }
}
