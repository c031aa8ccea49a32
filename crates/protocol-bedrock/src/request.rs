//! Converse request body ↔ `ir::Request`. The model travels in the URL path,
//! never in the body; fields the IR does not model are kept in `extra`
//! under their top-level key (for nested objects, only the unmodelled part).

use serde_json::{json, Value};
use switchyard_codec::ir::{
    Block, Message, Protocol, Reasoning, Request, ResponseFormat, Role, TextBlock, Tool, ToolChoice,
};
use switchyard_codec::{json as codec_json, DecodeError, Encoded};

use crate::content::{cache_point, read_blocks, read_cache_point, write_blocks, Mode};
use crate::wire::{array, drop_field, field, object, opt_f64, opt_str, opt_u64, req, req_str, string, Object};

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
        request.metadata = object(metadata, "requestMetadata")?.clone();
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
        other => {
            return Err(DecodeError::invalid(
                format!("{path}.role"),
                format!("{path}.role must be user or assistant, not `{other}`"),
            ))
        }
    };
    let content_path = format!("{path}.content");
    let content = array(req(message, "content", path)?, &content_path)?;
    Ok(Message { role, content: read_blocks(content, &content_path, Mode::Request)? })
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
            let spec = field(tool, "toolSpec")
                .ok_or_else(|| DecodeError::invalid(&path, format!("{path} must hold toolSpec or cachePoint")))?;
            let spec = object(spec, &spec_path)?;
            let parameters = match field(spec, "inputSchema") {
                Some(schema) => {
                    let schema_path = format!("{spec_path}.inputSchema");
                    req(object(schema, &schema_path)?, "json", &schema_path)?.clone()
                }
                None => json!({ "type": "object" }),
            };
            request.tools.push(Tool {
                name: req_str(spec, "name", &spec_path)?.to_owned(),
                description: opt_str(spec, "description", &spec_path)?.map(str::to_owned),
                parameters,
                cache_control: None,
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
    keep_rest(fields, &taken, "additionalModelRequestFields", request);
}

/// `{"type":"enabled","budget_tokens":N}` or `{"type":"disabled"}`; any
/// other shape is not the IR's to interpret.
fn read_thinking(value: &Value) -> Option<Reasoning> {
    let thinking = value.as_object()?;
    match (thinking.get("type")?.as_str()?, thinking.len()) {
        ("enabled", 2) => Some(Reasoning {
            effort: None,
            budget_tokens: Some(thinking.get("budget_tokens")?.as_u64()?),
            disabled: false,
        }),
        ("disabled", 1) => Some(Reasoning { effort: None, budget_tokens: None, disabled: true }),
        _ => None,
    }
}

/// `outputConfig.textFormat` with a JSON schema becomes `response_format`;
/// any other shape (or a schema description, which the IR has no place
/// for) is kept whole in `extra`.
fn read_output_config(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let path = "outputConfig";
    let config = object(value, path)?;
    let format = (|| {
        if config.len() != 1 {
            return None;
        }
        let format = config.get("textFormat")?.as_object()?;
        if format.get("type")?.as_str()? != "json_schema" || format.len() != 2 {
            return None;
        }
        let definition = format.get("structure")?.get("jsonSchema")?.as_object()?;
        if definition.keys().any(|key| key != "schema" && key != "name") {
            return None;
        }
        let name = definition.get("name").and_then(Value::as_str).unwrap_or_default();
        Some((name, definition.get("schema")?.as_str()?))
    })();
    match format {
        Some((name, schema)) => {
            let schema: Value = serde_json::from_str(schema).map_err(|_| {
                DecodeError::invalid(
                    "outputConfig.textFormat.structure.jsonSchema.schema",
                    "outputConfig.textFormat.structure.jsonSchema.schema must be json text",
                )
            })?;
            request.response_format = Some(ResponseFormat::JsonSchema { name: name.to_owned(), schema, strict: None });
        }
        None => request.extra.insert(Protocol::Bedrock, path.into(), value.clone()),
    }
    Ok(())
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

/// Writes a Converse request body. Consecutive messages of one role are
/// merged, because Converse requires the roles to alternate.
pub(crate) fn write_request(request: &Request) -> Encoded {
    let mut dropped = Vec::new();
    let mut root = Object::new();

    let mut turns: Vec<(Role, Vec<Value>)> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        let content = write_blocks(&message.content, &mut dropped);
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
            };
            json!({ "role": role, "content": content })
        })
        .collect();
    root.insert("messages".into(), Value::Array(messages));

    if !request.system.is_empty() {
        let mut system = Vec::with_capacity(request.system.len());
        for block in &request.system {
            system.push(json!({ "text": block.text }));
            if let Some(cache) = &block.cache_control {
                system.push(cache_point(cache));
            }
        }
        root.insert("system".into(), Value::Array(system));
    }

    let mut inference = Object::new();
    if let Some(max_tokens) = request.max_tokens {
        inference.insert("maxTokens".into(), max_tokens.into());
    }
    if let Some(temperature) = request.temperature {
        inference.insert("temperature".into(), temperature.into());
    }
    if let Some(top_p) = request.top_p {
        inference.insert("topP".into(), top_p.into());
    }
    if !request.stop.is_empty() {
        inference.insert("stopSequences".into(), request.stop.clone().into());
    }
    if !inference.is_empty() {
        root.insert("inferenceConfig".into(), Value::Object(inference));
    }

    if let Some(config) = write_tool_config(request, &mut dropped) {
        root.insert("toolConfig".into(), config);
    }

    let mut additional = Object::new();
    if let Some(top_k) = request.top_k {
        additional.insert("top_k".into(), top_k.into());
    }
    if let Some(reasoning) = &request.reasoning {
        // Bedrock passes these fields to the model; the Anthropic `thinking`
        // shape is what its reasoning models take. An effort alone becomes
        // the IR's budget equivalent.
        if reasoning.disabled {
            additional.insert("thinking".into(), json!({ "type": "disabled" }));
        } else if let Some(budget) = reasoning.budget_or_from_effort() {
            additional.insert("thinking".into(), json!({ "type": "enabled", "budget_tokens": budget }));
        }
    }
    if !additional.is_empty() {
        root.insert("additionalModelRequestFields".into(), Value::Object(additional));
    }

    match &request.response_format {
        Some(ResponseFormat::JsonSchema { name, schema, strict }) => {
            if strict.is_some() {
                drop_field(&mut dropped, "response_format.strict");
            }
            root.insert("outputConfig".into(), output_config(name, schema));
        }
        // JSON mode is the schema of any object.
        Some(ResponseFormat::JsonObject) => {
            root.insert("outputConfig".into(), output_config("json_object", &json!({ "type": "object" })));
        }
        None => {}
    }

    if !request.metadata.is_empty() {
        // Bedrock's request metadata is string to string.
        let metadata: Object = request
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
        root.insert("requestMetadata".into(), Value::Object(metadata));
    }

    if request.parallel_tool_calls.is_some() {
        drop_field(&mut dropped, "parallel_tool_calls");
    }
    if request.seed.is_some() {
        drop_field(&mut dropped, "seed");
    }
    if request.frequency_penalty.is_some() {
        drop_field(&mut dropped, "frequency_penalty");
    }
    if request.presence_penalty.is_some() {
        drop_field(&mut dropped, "presence_penalty");
    }
    if request.user.is_some() {
        drop_field(&mut dropped, "user");
    }

    if let Some(extra) = request.extra.for_target(Protocol::Bedrock, &mut dropped) {
        for (key, value) in extra {
            match (root.get_mut(key), value) {
                (Some(Value::Object(written)), Value::Object(rest)) => {
                    for (name, value) in rest {
                        written.entry(name.clone()).or_insert_with(|| value.clone());
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

fn write_tool_config(request: &Request, dropped: &mut Vec<switchyard_codec::ir::Dropped>) -> Option<Value> {
    if request.tools.is_empty() {
        if matches!(&request.tool_choice, Some(choice) if *choice != ToolChoice::None) {
            drop_field(dropped, "tool_choice");
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
        Some(ToolChoice::Any) => {
            config.insert("toolChoice".into(), json!({ "any": {} }));
        }
        Some(ToolChoice::Tool(name)) => {
            config.insert("toolChoice".into(), json!({ "tool": { "name": name } }));
        }
        // Converse has no "none". The tools stay (Converse rejects tool
        // blocks in the history without a toolConfig); the policy is lost.
        Some(ToolChoice::None) => drop_field(dropped, "tool_choice"),
        None => {}
    }
    Some(Value::Object(config))
}

fn output_config(name: &str, schema: &Value) -> Value {
    let mut definition = Object::new();
    // Bedrock takes the schema as JSON text, not as an object.
    definition.insert("schema".into(), codec_json::value_to_arguments(schema).into());
    if !name.is_empty() {
        definition.insert("name".into(), name.into());
    }
    json!({
        "textFormat": {
            "type": "json_schema",
            "structure": { "jsonSchema": definition },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::DropReason;

    #[test]
    fn bad_input_names_the_field() {
        let err = read_request(br#"{"messages": {}}"#).unwrap_err();
        assert_eq!(err.to_string(), "messages must be an array");
        let err = read_request(br#"{"messages": [{"role": "system", "content": []}]}"#).unwrap_err();
        assert_eq!(err.to_string(), "messages[0].role must be user or assistant, not `system`");
        let err = read_request(br#"{"inferenceConfig": {"maxTokens": -1}}"#).unwrap_err();
        assert_eq!(err.to_string(), "inferenceConfig.maxTokens must be a non-negative integer");
        assert!(matches!(read_request(b"[1"), Err(DecodeError::Json(_))));
    }

    #[test]
    fn unmodelled_fields_survive_a_same_protocol_hop() {
        let body = json!({
            "messages": [{ "role": "user", "content": [{ "text": "hi" }] }],
            "inferenceConfig": { "maxTokens": 5, "somethingNew": 1 },
            "additionalModelRequestFields": { "top_k": 3, "reasoning_effort": "low" },
            "guardrailConfig": { "guardrailIdentifier": "g", "guardrailVersion": "1" },
            "outputConfig": { "textFormat": { "type": "json_schema", "structure": { "jsonSchema": { "schema": "{}", "description": "d" } } } }
        });
        let request = read_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(request.top_k, Some(3));
        assert_eq!(request.response_format, None);
        let written: Value = serde_json::from_slice(&write_request(&request).body).unwrap();
        assert_eq!(written, body);
    }

    #[test]
    fn what_converse_cannot_say_is_reported() {
        let request = Request {
            messages: vec![Message::text(Role::User, "a"), Message::text(Role::User, "b")],
            tools: vec![Tool { name: "f".into(), description: None, parameters: Value::Null, cache_control: None }],
            tool_choice: Some(ToolChoice::None),
            seed: Some(1),
            user: Some("u".into()),
            reasoning: Some(Reasoning { effort: Some("high".into()), budget_tokens: None, disabled: false }),
            ..Request::default()
        };
        let encoded = write_request(&request);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["messages"].as_array().unwrap().len(), 1);
        assert_eq!(
            written["toolConfig"],
            json!({ "tools": [{ "toolSpec": { "name": "f", "inputSchema": { "json": { "type": "object" } } } }] })
        );
        assert_eq!(written["additionalModelRequestFields"]["thinking"]["budget_tokens"], 16384);
        let fields: Vec<&str> = encoded.dropped.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["tool_choice", "seed", "user"]);
        assert!(encoded.dropped.iter().all(|d| d.reason == DropReason::Unsupported));
    }

    #[test]
    fn cross_protocol_extra_is_reported() {
        let mut request = Request::default();
        request.extra.insert(Protocol::OpenAi, "logprobs".into(), true.into());
        let encoded = write_request(&request);
        assert_eq!(encoded.dropped[0].field, "logprobs");
        assert_eq!(encoded.dropped[0].reason, DropReason::CrossProtocolExtra);
    }
}
