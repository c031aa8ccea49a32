//! Converse request body ↔ `ir::Request`. The model travels in the URL path,
//! never in the body; fields the IR does not model are kept in `extra`
//! under their top-level key (for nested objects, only the unmodelled part).
//!
//! - `outputConfig` is read member by member: `textFormat` (a JSON schema)
//!   ↔ `ResponseFormat::JsonSchema`, `effort` ↔ the IR effort (thinking
//!   `Unset` unless `additionalModelRequestFields.thinking` says more);
//!   what is left stays in `extra`.
//! - `requestMetadata.user` ↔ `Request::user` (so invocation logs can be
//!   filtered by the caller's user whatever protocol the caller speaks); the
//!   other keys ↔ `Request::metadata`.
//! - Reasoning on write follows the lane's capabilities, as Anthropic's
//!   writer does: `outputConfig.effort` only for models that take an effort,
//!   adaptive thinking only for models that take it, else `thinking` enabled
//!   with the budget the effort stands for.
//! - A `system` message in `messages` is a `Role::System` message. On write
//!   a Claude model that takes them (`capabilities.system_messages`) gets
//!   them where they were; another model's prompt template knows only
//!   user and assistant turns, so their text joins `system`
//!   (`codec::system::fold`, the move reported).
//! - A Claude model gets the caller's Anthropic betas in
//!   `additionalModelRequestFields.anthropic_beta`, where Bedrock takes
//!   them; another model reports them (Bedrock hands the key to the model,
//!   which refuses a key it does not know). Whether the model is Claude is
//!   the lane's `capabilities.bedrock_betas` (the model facts say it of
//!   every Claude family), else its name. `toolSpec.strict` ↔
//!   `Tool::strict`.

use serde_json::{json, Value};
use switchyard_codec::effort::{self, ClaudeSampling, ClaudeThinking};
use switchyard_codec::ir::{
    Block, Capabilities, DropReason, Dropped, Field, Message, Protocol, Reasoning, Request, ResponseFormat, Role,
    TextBlock, Tool, ToolChoice,
};
use switchyard_codec::{json as codec_json, DecodeError, Encoded};

use crate::content::{cache_point, read_blocks, read_cache_point, write_blocks, Mode};
use crate::wire::{array, drop_field, field, object, opt_f64, opt_str, opt_u64, req, req_str, string, Object};

/// The `requestMetadata` key that carries the caller's end user.
const USER_KEY: &str = "user";

/// Where Converse requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "inferenceConfig.maxTokens",
        Field::Temperature => "inferenceConfig.temperature",
        Field::TopP => "inferenceConfig.topP",
        Field::TopK => "additionalModelRequestFields.top_k",
        Field::Stop => "inferenceConfig.stopSequences",
        Field::JsonSchema => "outputConfig.textFormat.structure.jsonSchema.schema",
        Field::JsonSchemaName => "outputConfig.textFormat.structure.jsonSchema.name",
        Field::ReasoningEffort => "outputConfig.effort",
        Field::ReasoningBudget => "additionalModelRequestFields.thinking.budget_tokens",
        Field::ReasoningOff => "additionalModelRequestFields.thinking.type",
        Field::ToolChoice => "toolConfig.toolChoice",
        Field::User => "requestMetadata.user",
        Field::Metadata => "requestMetadata",
        Field::Thinking => "messages.content.reasoningContent",
        Field::CacheControl => "cachePoint",
        Field::SystemMessage => "messages.system",
        Field::Audio => "messages.content.audio",
        Field::ToolStrict => "toolConfig.tools.toolSpec.strict",
        Field::Betas => "additionalModelRequestFields.anthropic_beta",
        _ => return None,
    })
}

/// Top-level keys the reader models; every other key goes to `extra`.
const MODELLED: [&str; 7] = [
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "additionalModelRequestFields",
    "outputConfig",
    "requestMetadata",
];

/// Reads a Converse / ConverseStream request body.
pub(crate) fn read_request(body: &[u8]) -> Result<Request, DecodeError> {
    let root: Value = codec_json::parse(body)?;
    let root = root.as_object().ok_or_else(|| DecodeError::invalid("body", "request body must be a json object"))?;
    let mut request = Request::default();

    if let Some(messages) = field(root, "messages") {
        for (position, message) in array(messages, "messages")?.iter().enumerate() {
            request.messages.push(read_message(message, &format!("messages[{position}]"))?);
        }
    }
    if let Some(system) = field(root, "system") {
        request.system = read_system(array(system, "system")?)?;
    }
    if let Some(config) = field(root, "inferenceConfig") {
        read_inference_config(object(config, "inferenceConfig")?, &mut request)?;
    }
    if let Some(config) = field(root, "toolConfig") {
        read_tool_config(object(config, "toolConfig")?, &mut request)?;
    }
    if let Some(fields) = field(root, "additionalModelRequestFields") {
        read_additional_fields(object(fields, "additionalModelRequestFields")?, &mut request);
    }
    if let Some(config) = field(root, "outputConfig") {
        read_output_config(config, &mut request)?;
    }
    if let Some(metadata) = field(root, "requestMetadata") {
        for (key, value) in object(metadata, "requestMetadata")? {
            if key == USER_KEY {
                request.user = Some(string(value, "requestMetadata.user")?.to_owned());
            } else {
                request.metadata.insert(key.clone(), value.clone());
            }
        }
    }
    for (key, value) in root {
        if !MODELLED.contains(&key.as_str()) {
            request.extra.insert(Protocol::Bedrock, key.clone(), value.clone());
        }
    }
    Ok(request)
}

fn read_message(value: &Value, path: &str) -> Result<Message, DecodeError> {
    let message = object(value, path)?;
    let role = match req_str(message, "role", path)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        other => {
            return Err(DecodeError::invalid(
                format!("{path}.role"),
                format!("{path}.role must be user, assistant or system, not `{other}`"),
            ))
        }
    };
    let content_path = format!("{path}.content");
    let content = array(req(message, "content", path)?, &content_path)?;
    Ok(Message::new(role, read_blocks(content, &content_path, Mode::Request)?))
}

fn read_system(items: &[Value]) -> Result<Vec<TextBlock>, DecodeError> {
    let mut system = Vec::with_capacity(items.len());
    for block in read_blocks(items, "system", Mode::Request)? {
        match block {
            Block::Text(text) => system.push(text),
            _ => return Err(DecodeError::invalid("system", "system blocks must be text, guardContent or cachePoint")),
        }
    }
    Ok(system)
}

fn read_inference_config(config: &Object, request: &mut Request) -> Result<(), DecodeError> {
    let path = "inferenceConfig";
    request.max_tokens = opt_u64(config, "maxTokens", path)?;
    request.temperature = opt_f64(config, "temperature", path)?;
    request.top_p = opt_f64(config, "topP", path)?;
    if let Some(stops) = field(config, "stopSequences") {
        let stops_path = "inferenceConfig.stopSequences";
        for stop in array(stops, stops_path)? {
            request.stop.push(string(stop, stops_path)?.to_owned());
        }
    }
    keep_rest(config, &["maxTokens", "temperature", "topP", "stopSequences"], path, request);
    Ok(())
}

fn read_tool_config(config: &Object, request: &mut Request) -> Result<(), DecodeError> {
    // Tools of a kind the IR does not model (`systemTool`), as they came.
    let mut others = Vec::new();
    if let Some(tools) = field(config, "tools") {
        for (position, tool) in array(tools, "toolConfig.tools")?.iter().enumerate() {
            let path = format!("toolConfig.tools[{position}]");
            let tool = object(tool, &path)?;
            if let Some(point) = field(tool, "cachePoint") {
                let cache = read_cache_point(point, &format!("{path}.cachePoint"))?;
                if let Some(last) = request.tools.last_mut() {
                    last.cache_control = Some(cache);
                }
                continue;
            }
            let spec_path = format!("{path}.toolSpec");
            let Some(spec) = field(tool, "toolSpec") else {
                if tool.len() != 1 {
                    return Err(DecodeError::invalid(&path, format!("{path} must hold exactly one kind of tool")));
                }
                others.push(Value::Object(tool.clone()));
                continue;
            };
            let spec = object(spec, &spec_path)?;
            let parameters = match field(spec, "inputSchema") {
                Some(schema) => {
                    let schema_path = format!("{spec_path}.inputSchema");
                    req(object(schema, &schema_path)?, "json", &schema_path)?.clone()
                }
                None => json!({ "type": "object" }),
            };
            let strict = match field(spec, "strict") {
                Some(strict) => Some(strict.as_bool().ok_or_else(|| {
                    DecodeError::invalid(format!("{spec_path}.strict"), format!("{spec_path}.strict must be a boolean"))
                })?),
                None => None,
            };
            request.tools.push(Tool {
                name: req_str(spec, "name", &spec_path)?.to_owned(),
                description: opt_str(spec, "description", &spec_path)?.map(str::to_owned),
                parameters,
                strict,
                ..Tool::default()
            });
        }
    }
    if let Some(choice) = field(config, "toolChoice") {
        let path = "toolConfig.toolChoice";
        let choice = object(choice, path)?;
        request.tool_choice = Some(if field(choice, "auto").is_some() {
            ToolChoice::Auto
        } else if field(choice, "any").is_some() {
            ToolChoice::Any
        } else if let Some(tool) = field(choice, "tool") {
            let tool_path = "toolConfig.toolChoice.tool";
            ToolChoice::Tool(req_str(object(tool, tool_path)?, "name", tool_path)?.to_owned())
        } else {
            return Err(DecodeError::invalid(path, "toolConfig.toolChoice must hold auto, any or tool"));
        });
    }
    keep_rest(config, &["tools", "toolChoice"], "toolConfig", request);
    if !others.is_empty() {
        // Written back beside the tool specs on a same-protocol hop,
        // reported at `toolConfig.tools` on another.
        let mut kept = match request.extra.fields.remove("toolConfig") {
            Some(Value::Object(kept)) => kept,
            _ => Object::new(),
        };
        kept.insert("tools".into(), Value::Array(others));
        request.extra.insert(Protocol::Bedrock, "toolConfig".into(), Value::Object(kept));
    }
    Ok(())
}

/// Takes `top_k` and an Anthropic-style `thinking` into the IR; whatever
/// else the model takes stays in `extra` for a same-protocol hop.
fn read_additional_fields(fields: &Object, request: &mut Request) {
    let mut taken: Vec<&str> = Vec::new();
    if let Some(top_k) = fields.get("top_k").and_then(Value::as_u64) {
        request.top_k = Some(top_k);
        taken.push("top_k");
    }
    if let Some(reasoning) = fields.get("thinking").and_then(read_thinking) {
        request.reasoning = Some(reasoning);
        taken.push("thinking");
    }
    // OpenAI's models on Bedrock: `reasoning_effort`, `none` thinking off.
    if let Some(reasoning) =
        fields.get("reasoning_effort").and_then(Value::as_str).and_then(|level| effort::read_level(level, "").ok())
    {
        request.reasoning = Some(reasoning);
        taken.push("reasoning_effort");
    }
    keep_rest(fields, &taken, "additionalModelRequestFields", request);
}

/// `{"type":"enabled","budget_tokens":N}`, `{"type":"adaptive"}` or
/// `{"type":"disabled"}`; any other shape is not the IR's to interpret.
fn read_thinking(value: &Value) -> Option<Reasoning> {
    let thinking = value.as_object()?;
    match (thinking.get("type")?.as_str()?, thinking.len()) {
        ("enabled", 2) => Some(Reasoning::with_budget(thinking.get("budget_tokens")?.as_u64()?)),
        ("adaptive", 1) => Some(Reasoning::on()),
        ("disabled", 1) => Some(Reasoning::off()),
        _ => None,
    }
}

/// `outputConfig`, member by member: a JSON-schema `textFormat` becomes
/// `response_format` and `effort` the IR effort; the members left (or a
/// `textFormat` in a shape the IR does not model, such as one with a
/// schema `description`) stay in `extra` and merge back on write.
fn read_output_config(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let path = "outputConfig";
    let config = object(value, path)?;
    let mut taken: Vec<&str> = Vec::new();
    if let Some(format) = field(config, "textFormat").and_then(json_schema_format) {
        let (name, schema) = format;
        let schema: Value = serde_json::from_str(schema).map_err(|_| {
            DecodeError::invalid(
                "outputConfig.textFormat.structure.jsonSchema.schema",
                "outputConfig.textFormat.structure.jsonSchema.schema must be json text",
            )
        })?;
        request.response_format = Some(ResponseFormat::JsonSchema { name: name.to_owned(), schema, strict: None });
        taken.push("textFormat");
    }
    if let Some(level) = field(config, "effort") {
        let effort = effort::read_effort(string(level, "outputConfig.effort")?, "outputConfig.effort")?;
        request.reasoning.get_or_insert_with(Reasoning::default).effort = Some(effort);
        taken.push("effort");
    }
    keep_rest(config, &taken, path, request);
    Ok(())
}

/// A `textFormat` of type `json_schema` holding only a name and a schema
/// (JSON text): (name, schema text).
fn json_schema_format(format: &Value) -> Option<(&str, &str)> {
    let format = format.as_object()?;
    if format.get("type")?.as_str()? != "json_schema" || format.len() != 2 {
        return None;
    }
    let definition = format.get("structure")?.get("jsonSchema")?.as_object()?;
    if definition.keys().any(|key| key != "schema" && key != "name") {
        return None;
    }
    let name = definition.get("name").and_then(Value::as_str).unwrap_or_default();
    Some((name, definition.get("schema")?.as_str()?))
}

/// Keeps the keys of a nested object that were not read into the IR.
fn keep_rest(object: &Object, taken: &[&str], key: &str, request: &mut Request) {
    let rest: Object = object
        .iter()
        .filter(|(name, _)| !taken.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    if !rest.is_empty() {
        request.extra.insert(Protocol::Bedrock, key.into(), Value::Object(rest));
    }
}

/// Whether a Bedrock model id (or inference profile) names a Claude model,
/// which takes Anthropic's system messages and betas: the fallback where
/// the lane's capabilities do not say (an application inference profile's
/// ARN names no model).
fn is_claude(model: &str) -> bool {
    model.contains("anthropic.") || model.contains("claude")
}

/// Whether a Bedrock model id names one of OpenAI's models (gpt-oss),
/// which take `reasoning_effort` among the fields passed to the model.
fn openai_model(model: &str) -> bool {
    model.contains("openai.") || model.contains("gpt-oss")
}

/// The levels OpenAI's models on Bedrock take.
const OPENAI_EFFORTS: [switchyard_ir::Effort; 3] =
    [switchyard_ir::Effort::Low, switchyard_ir::Effort::Medium, switchyard_ir::Effort::High];

/// Writes a Converse request body. Consecutive messages of one role are
/// merged, because Converse requires the roles to alternate.
pub(crate) fn write_request(request: &Request, capabilities: &Capabilities) -> Encoded {
    let mut dropped = Vec::new();
    let mut root = Object::new();
    let claude_model = capabilities.bedrock_betas.unwrap_or_else(|| is_claude(&request.model));

    let (system_prompt, conversation) = match claude_model && capabilities.system_messages {
        true => (std::borrow::Cow::Borrowed(&request.system[..]), std::borrow::Cow::Borrowed(&request.messages[..])),
        false => switchyard_codec::system::fold(request, &mut dropped),
    };
    let mut turns: Vec<(Role, Vec<Value>)> = Vec::with_capacity(conversation.len());
    for message in conversation.iter() {
        message.extra.for_target_under(Protocol::Bedrock, "messages", &mut dropped);
        let content = write_blocks(&message.content, Mode::Request, capabilities.audio_input, &mut dropped);
        match turns.last_mut() {
            Some((role, blocks)) if *role == message.role => blocks.extend(content),
            _ => turns.push((message.role, content)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System => "system",
            };
            json!({ "role": role, "content": content })
        })
        .collect();
    root.insert("messages".into(), Value::Array(messages));

    if !system_prompt.is_empty() {
        let mut system = Vec::with_capacity(system_prompt.len());
        for block in system_prompt.iter() {
            system.push(json!({ "text": block.text }));
            if let Some(cache) = &block.cache_control {
                system.push(cache_point(cache));
            }
        }
        root.insert("system".into(), Value::Array(system));
    }

    // Bedrock passes `thinking` to the model; the Anthropic shape is what
    // its reasoning models take, and Claude's rules for thinking hold. An
    // OpenAI model takes its own `reasoning_effort` instead.
    let openai_effort = match openai_model(&request.model) {
        true => request
            .reasoning
            .as_ref()
            .and_then(|r| effort::openai_level(r, &OPENAI_EFFORTS, capabilities, false, &mut dropped)),
        false => None,
    };
    let mut claude = match openai_model(&request.model) {
        true => None,
        false => request.reasoning.as_ref().map(|r| effort::claude_thinking(r, capabilities, &mut dropped)),
    };
    let budget = claude.as_mut().map_or(0, |c| c.least_budget(&mut dropped));
    let thinks = claude.as_ref().is_some_and(ClaudeThinking::is_on);
    let ClaudeSampling { temperature, top_p, top_k } =
        effort::claude_sampling(thinks, (request.temperature, request.top_p, request.top_k), &mut dropped);

    let mut inference = Object::new();
    if let Some(max_tokens) = effort::claude_max_tokens(request.max_tokens, budget, &mut dropped) {
        inference.insert("maxTokens".into(), max_tokens.into());
    }
    if let Some(temperature) = temperature {
        inference.insert("temperature".into(), temperature.into());
    }
    if let Some(top_p) = top_p {
        if temperature.is_some() && !capabilities.temperature_with_top_p {
            Dropped::push_once(&mut dropped, Field::TopP, DropReason::Capability);
        } else {
            inference.insert("topP".into(), top_p.into());
        }
    }
    if !request.stop.is_empty() {
        inference.insert("stopSequences".into(), request.stop.clone().into());
    }
    if !inference.is_empty() {
        root.insert("inferenceConfig".into(), Value::Object(inference));
    }

    if let Some(config) = write_tool_config(request, thinks, &mut dropped) {
        root.insert("toolConfig".into(), config);
    }

    let mut additional = Object::new();
    if let Some(level) = openai_effort {
        additional.insert("reasoning_effort".into(), level.into());
    }
    if let Some(top_k) = top_k {
        additional.insert("top_k".into(), top_k.into());
    }
    let mut output = Object::new();
    if !request.betas.is_empty() {
        match claude_model {
            true => {
                additional.insert("anthropic_beta".into(), request.betas.clone().into());
            }
            false => drop_field(&mut dropped, Field::Betas),
        }
    }
    if let Some(claude) = claude {
        if let Some(thinking) = claude.thinking {
            additional.insert("thinking".into(), thinking);
        }
        if let Some(effort) = claude.effort {
            output.insert("effort".into(), effort.as_str().into());
        }
    }
    if !additional.is_empty() {
        root.insert("additionalModelRequestFields".into(), Value::Object(additional));
    }

    match &request.response_format {
        Some(ResponseFormat::JsonSchema { name, schema, strict }) => {
            if strict.is_some() {
                drop_field(&mut dropped, Field::JsonSchemaStrict);
            }
            output.insert("textFormat".into(), text_format(name, schema));
        }
        // JSON mode is said as the schema of any object; a caller of
        // Converse reads that back as a schema, so it is reported.
        Some(ResponseFormat::JsonObject) => {
            Dropped::push_once(&mut dropped, Field::JsonMode, DropReason::Converted);
            output.insert("textFormat".into(), text_format("json_object", &json!({ "type": "object" })));
        }
        None => {}
    }
    if !output.is_empty() {
        root.insert("outputConfig".into(), Value::Object(output));
    }

    if !request.metadata.is_empty() || request.user.is_some() {
        // Bedrock's request metadata is string to string.
        let mut metadata: Object = request
            .metadata
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                (key.clone(), Value::String(value))
            })
            .collect();
        if let Some(user) = &request.user {
            metadata.insert(USER_KEY.into(), Value::String(user.clone()));
        }
        root.insert("requestMetadata".into(), Value::Object(metadata));
    }

    for (field, present) in [
        (Field::ParallelToolCalls, request.parallel_tool_calls.is_some()),
        (Field::Seed, request.seed.is_some()),
        (Field::FrequencyPenalty, request.frequency_penalty.is_some()),
        (Field::PresencePenalty, request.presence_penalty.is_some()),
    ] {
        if present {
            drop_field(&mut dropped, field);
        }
    }

    // No log probabilities and one reply only.
    request.report_logprobs_and_n(&mut dropped);

    if let Some(extra) = request.extra.for_target(Protocol::Bedrock, &mut dropped) {
        for (key, value) in extra {
            match (root.get_mut(key), value) {
                (Some(Value::Object(written)), Value::Object(rest)) => {
                    for (name, value) in rest {
                        match (written.get_mut(name), value) {
                            // Tools the IR does not model join the tool specs.
                            (Some(Value::Array(mine)), Value::Array(theirs)) if key == "toolConfig" => {
                                mine.extend(theirs.iter().cloned());
                            }
                            (Some(_), _) => {}
                            (None, _) => {
                                written.insert(name.clone(), value.clone());
                            }
                        }
                    }
                }
                (Some(_), _) => {}
                (None, _) => {
                    root.insert(key.clone(), value.clone());
                }
            }
        }
    }

    Encoded { body: codec_json::to_vec(&Value::Object(root)), dropped }
}

/// `thinks`: Claude thinking is on, which takes no forced tool.
fn write_tool_config(
    request: &Request,
    thinks: bool,
    dropped: &mut Vec<switchyard_codec::ir::Dropped>,
) -> Option<Value> {
    if request.tools.is_empty() {
        if matches!(&request.tool_choice, Some(choice) if *choice != ToolChoice::None) {
            drop_field(dropped, Field::ToolChoice);
        }
        return None;
    }
    let mut tools = Vec::with_capacity(request.tools.len());
    for tool in &request.tools {
        let mut spec = Object::new();
        spec.insert("name".into(), tool.name.clone().into());
        if let Some(description) = &tool.description {
            spec.insert("description".into(), description.clone().into());
        }
        // Bedrock requires a schema; a tool without one takes any object.
        let schema = if tool.parameters.is_null() { json!({ "type": "object" }) } else { tool.parameters.clone() };
        spec.insert("inputSchema".into(), json!({ "json": schema }));
        if let Some(strict) = tool.strict {
            spec.insert("strict".into(), strict.into());
        }
        tool.extra.for_target_under(Protocol::Bedrock, "tools", dropped);
        tools.push(json!({ "toolSpec": spec }));
        if let Some(cache) = &tool.cache_control {
            tools.push(cache_point(cache));
        }
    }
    let mut config = Object::new();
    config.insert("tools".into(), Value::Array(tools));
    match &request.tool_choice {
        Some(ToolChoice::Auto) => {
            config.insert("toolChoice".into(), json!({ "auto": {} }));
        }
        // Claude thinking takes no forced tool: the model may call one.
        Some(ToolChoice::Any | ToolChoice::Tool(_)) if thinks => {
            Dropped::push_once(dropped, Field::ToolChoice, DropReason::Capability);
            config.insert("toolChoice".into(), json!({ "auto": {} }));
        }
        Some(ToolChoice::Any) => {
            config.insert("toolChoice".into(), json!({ "any": {} }));
        }
        Some(ToolChoice::Tool(name)) => {
            config.insert("toolChoice".into(), json!({ "tool": { "name": name } }));
        }
        // Converse has no "none". The tools stay (Converse rejects tool
        // blocks in the history without a toolConfig); the policy is lost.
        Some(ToolChoice::None) => drop_field(dropped, Field::ToolChoice),
        None => {}
    }
    Some(Value::Object(config))
}

/// `outputConfig.textFormat` for a JSON schema.
fn text_format(name: &str, schema: &Value) -> Value {
    let mut definition = Object::new();
    // Bedrock takes the schema as JSON text, not as an object.
    definition.insert("schema".into(), codec_json::value_to_arguments(schema).into());
    if !name.is_empty() {
        definition.insert("name".into(), name.into());
    }
    json!({ "type": "json_schema", "structure": { "jsonSchema": definition } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::Effort;

    /// A tool the IR does not model (`systemTool`, in the pinned botocore's
    /// `Tool` union) is neither refused nor lost: it goes back beside the
    /// tool specs to a Bedrock lane and is reported to any other.
    #[test]
    fn system_tools_go_back_beside_tool_specs_or_are_reported() {
        let spec = json!({"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}});
        let system = json!({"systemTool": {"name": "nova_grounding"}});
        let body = json!({
            "messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "toolConfig": {"tools": [spec.clone(), system.clone()], "toolChoice": {"auto": {}}}
        });
        let request = read_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(request.tools.len(), 1);
        let encoded = write_request(&request, &Capabilities::default());
        assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["toolConfig"]["tools"], json!([spec, system]));

        let mut lost = Vec::new();
        request.extra.for_target(Protocol::OpenAi, &mut lost);
        let paths: Vec<Option<&str>> = lost.iter().map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(paths, [Some("toolConfig.tools")]);

        let two = json!({"messages": [], "toolConfig": {"tools": [{"systemTool": {}, "toolSpec": {}}]}});
        assert!(read_request(two.to_string().as_bytes()).is_err(), "a tool union holds one member");
    }

    /// Claude on Bedrock keeps Claude's rules for thinking, as the
    /// Anthropic writer does, and says what it changed.
    #[test]
    fn thinking_keeps_claudes_rules() {
        let request = Request {
            messages: vec![Message::text(Role::User, "hi")],
            reasoning: Some(Reasoning::with_budget(100)),
            max_tokens: Some(500),
            temperature: Some(0.2),
            top_k: Some(5),
            tools: vec![switchyard_codec::ir::Tool {
                name: "lookup".into(),
                description: None,
                parameters: json!({"type": "object"}),
                cache_control: None,
                ..switchyard_codec::ir::Tool::default()
            }],
            tool_choice: Some(ToolChoice::Any),
            ..Request::default()
        };
        let encoded = write_request(&request, &Capabilities::default());
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(
            body["additionalModelRequestFields"],
            json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})
        );
        assert_eq!(body["inferenceConfig"], json!({"maxTokens": 1524}));
        assert_eq!(body["toolConfig"]["toolChoice"], json!({"auto": {}}));
        let fields: Vec<Field> = encoded.dropped.iter().map(|d| d.field).collect();
        for field in [Field::ReasoningBudget, Field::MaxTokens, Field::Temperature, Field::TopK, Field::ToolChoice] {
            assert!(fields.contains(&field), "{field:?}: {:?}", encoded.dropped);
        }
    }

    /// OpenAI's models on Bedrock take their own `reasoning_effort`, within
    /// the levels they have, and not Claude's thinking; it reads back.
    #[test]
    fn openai_models_take_reasoning_effort() {
        let request = Request {
            model: "openai.gpt-oss-120b-1:0".into(),
            messages: vec![Message::text(Role::User, "hi")],
            reasoning: Some(Reasoning::with_budget(1024)),
            temperature: Some(0.2),
            ..Request::default()
        };
        let encoded = write_request(&request, &Capabilities::default());
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(body["additionalModelRequestFields"], json!({"reasoning_effort": "low"}));
        assert_eq!(body["inferenceConfig"]["temperature"], 0.2, "Claude's rules are not OpenAI's");
        let read = read_request(&encoded.body).unwrap();
        assert_eq!(read.reasoning, Some(Reasoning::with_effort(Effort::Low)));
    }

    /// Claude on Bedrock takes an Anthropic caller's betas in its body, its
    /// system messages where they were and a tool's `strict`; another model
    /// gets the system message's text in `system` and reports the betas.
    #[test]
    fn claude_takes_betas_system_messages_and_strict_tools() {
        let request = Request {
            model: "us.anthropic.claude-opus-4-6-v1".into(),
            messages: vec![
                Message::text(Role::User, "hi"),
                Message::text(Role::System, "the cwd is /srv"),
                Message::text(Role::User, "again"),
            ],
            tools: vec![Tool { strict: Some(true), ..Tool::function("f", None, json!({"type": "object"})) }],
            betas: vec!["context-management-2025-06-27".into(), "effort-2025-11-24".into()],
            ..Request::default()
        };
        let takes_them = Capabilities { system_messages: true, ..Capabilities::default() };
        let encoded = write_request(&request, &takes_them);
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        assert_eq!(
            body["additionalModelRequestFields"]["anthropic_beta"],
            json!(["context-management-2025-06-27", "effort-2025-11-24"])
        );
        let roles: Vec<&str> =
            body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "system", "user"]);
        assert_eq!(body["toolConfig"]["tools"][0]["toolSpec"]["strict"], true);
        let back = read_request(&encoded.body).unwrap();
        assert_eq!((back.messages[1].role, back.tools[0].strict), (Role::System, Some(true)));

        let nova = Request { model: "amazon.nova-pro-v1:0".into(), ..request };
        let encoded = write_request(&nova, &takes_them);
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(body["system"], json!([{"text": "the cwd is /srv"}]));
        assert_eq!(body["messages"].as_array().unwrap().len(), 1, "the two user turns merge: {body}");
        assert!(body.get("additionalModelRequestFields").is_none());
        let fields: Vec<(Field, DropReason)> = encoded.dropped.iter().map(|d| (d.field, d.reason)).collect();
        assert_eq!(fields, [(Field::SystemMessage, DropReason::Converted), (Field::Betas, DropReason::Unsupported)]);

        // The lane's word beats the name: an application inference
        // profile's ARN names no model, yet the facts (or the operator)
        // say it is Claude; a name that says Claude is overruled likewise.
        let profile = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123";
        let arn = Request { model: profile.into(), ..nova };
        let claude = Capabilities { bedrock_betas: Some(true), ..takes_them };
        let body: Value = serde_json::from_slice(&write_request(&arn, &claude).body).unwrap();
        assert_eq!(body["additionalModelRequestFields"]["anthropic_beta"][0], "context-management-2025-06-27");
        assert!(write_request(&arn, &takes_them).dropped.iter().any(|d| d.field == Field::Betas), "by its name");
        let named = Request { model: "us.anthropic.claude-opus-4-6-v1".into(), ..arn };
        let not_claude = Capabilities { bedrock_betas: Some(false), ..takes_them };
        assert!(write_request(&named, &not_claude).dropped.iter().any(|d| d.field == Field::Betas));
    }

    #[test]
    fn bad_input_names_the_field() {
        let err = read_request(br#"{"messages": {}}"#).unwrap_err();
        assert_eq!(err.to_string(), "messages must be an array");
        let err = read_request(br#"{"messages": [{"role": "robot", "content": []}]}"#).unwrap_err();
        assert_eq!(err.to_string(), "messages[0].role must be user, assistant or system, not `robot`");
        let err = read_request(br#"{"inferenceConfig": {"maxTokens": -1}}"#).unwrap_err();
        assert_eq!(err.to_string(), "inferenceConfig.maxTokens must be a non-negative integer");
        assert!(matches!(read_request(b"[1"), Err(DecodeError::Json(_))));
    }

    #[test]
    fn unmodelled_fields_survive_a_same_protocol_hop() {
        let body = json!({
            "messages": [{ "role": "user", "content": [{ "text": "hi" }] }],
            "inferenceConfig": { "maxTokens": 5, "somethingNew": 1 },
            "additionalModelRequestFields": { "top_k": 3, "response_style": "low" },
            "guardrailConfig": { "guardrailIdentifier": "g", "guardrailVersion": "1" },
            "outputConfig": { "textFormat": { "type": "json_schema", "structure": { "jsonSchema": { "schema": "{}", "description": "d" } } } }
        });
        let request = read_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(request.top_k, Some(3));
        assert_eq!(request.response_format, None);
        let written: Value = serde_json::from_slice(&write_request(&request, &Capabilities::default()).body).unwrap();
        assert_eq!(written, body);
    }

    #[test]
    fn what_converse_cannot_say_is_reported() {
        let request = Request {
            messages: vec![Message::text(Role::User, "a"), Message::text(Role::User, "b")],
            tools: vec![Tool {
                name: "f".into(),
                description: None,
                parameters: Value::Null,
                cache_control: None,
                ..Tool::default()
            }],
            tool_choice: Some(ToolChoice::None),
            seed: Some(1),
            user: Some("u".into()),
            reasoning: Some(Reasoning::with_effort(Effort::High)),
            ..Request::default()
        };
        let encoded = write_request(&request, &Capabilities::default());
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["messages"].as_array().unwrap().len(), 1);
        assert_eq!(
            written["toolConfig"],
            json!({ "tools": [{ "toolSpec": { "name": "f", "inputSchema": { "json": { "type": "object" } } } }] })
        );
        assert_eq!(written["additionalModelRequestFields"]["thinking"]["budget_tokens"], 16384);
        assert_eq!(written["requestMetadata"], json!({ "user": "u" }));
        let fields: Vec<Field> = encoded.dropped.iter().map(|d| d.field).collect();
        assert_eq!(fields, [Field::ReasoningEffort, Field::ToolChoice, Field::Seed]);
        assert_eq!(encoded.dropped[0].reason, DropReason::Converted);
    }

    #[test]
    fn output_config_is_read_member_by_member() {
        let body = json!({
            "messages": [],
            "outputConfig": {
                "effort": "high",
                "textFormat": { "type": "json_schema", "structure": { "jsonSchema": { "schema": "{\"type\":\"object\"}", "name": "r" } } },
                "somethingNew": true
            },
            "requestMetadata": { "user": "u-1", "team": "a" }
        });
        let request = read_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(request.reasoning, Some(Reasoning { effort: Some(Effort::High), ..Reasoning::default() }));
        assert!(matches!(&request.response_format, Some(ResponseFormat::JsonSchema { name, .. }) if name == "r"));
        assert_eq!(request.user.as_deref(), Some("u-1"));
        assert_eq!(request.metadata.get("team"), Some(&json!("a")));
        let extra = request.extra.fields.get("outputConfig");
        assert_eq!(extra, Some(&json!({ "somethingNew": true })));
        // A model that takes an effort gets the same body back.
        let written: Value = serde_json::from_slice(&write_request(&request, &Capabilities::ALL).body).unwrap();
        assert_eq!(written, body);
        // One that does not is not told, and that is reported.
        let encoded = write_request(&request, &Capabilities::default());
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert!(written["outputConfig"].get("effort").is_none());
        assert_eq!(encoded.dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Capability)]);
        let bad = json!({ "messages": [], "outputConfig": { "effort": "extreme" } });
        assert!(read_request(bad.to_string().as_bytes()).is_err());
    }

    #[test]
    fn cross_protocol_extra_is_reported() {
        let mut request = Request::default();
        request.extra.insert(Protocol::OpenAi, "logprobs".into(), true.into());
        let encoded = write_request(&request, &Capabilities::default());
        assert_eq!(encoded.dropped[0], Dropped::unmodelled("logprobs".into()));
        assert_eq!(encoded.dropped[0].reason, DropReason::CrossProtocolExtra);
    }
}
