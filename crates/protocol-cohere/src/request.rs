//! The v2 chat request body: reading it into an `ir::Request` and writing
//! one back, with what Cohere cannot say reported as dropped. System
//! messages before the first turn are the system prompt; one after it is a
//! `Role::System` message, written back where it was (v2 takes a system
//! message anywhere in `messages`). `strict_tools` is every tool's
//! `strict`.

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    Block, Capabilities, Dropped, Field, Message, Protocol, Reasoning, Request, ResponseFormat, Role, Thinking,
    ToolChoice, ToolResult,
};
use switchyard_codec::media::url_of;
use switchyard_codec::{call_id, effort, function, json as codec_json, DecodeError, Encoded};

use crate::content::{
    self, cohere_document, dedup, invalid, note_text_markers, object, optional_str, required_str, unsupported,
    ContentForm,
};

/// The name a JSON schema read from this protocol, which names none, gets.
pub(crate) const SCHEMA_NAME: &str = ResponseFormat::UNNAMED;

/// Reads a v2 chat request body.
pub(crate) fn read(body: &[u8]) -> Result<Request, DecodeError> {
    let value: Value = codec_json::parse(body)?;
    let Value::Object(fields) = value else {
        return Err(invalid("body", "must be a json object"));
    };
    let mut request = Request::default();
    let mut model = None;
    let mut messages = None;
    let mut strict_tools = None;
    for (key, value) in fields {
        // An explicit null means "not set" for every modelled field.
        if value.is_null() && is_modelled(&key) {
            continue;
        }
        match key.as_str() {
            "model" => match value {
                Value::String(name) => model = Some(name),
                _ => return Err(invalid("model", "must be a string")),
            },
            "messages" => messages = Some(value),
            "tools" => read_tools(value, &mut request)?,
            "tool_choice" => request.tool_choice = Some(read_tool_choice(&value)?),
            "max_tokens" => request.max_tokens = Some(unsigned("max_tokens", &value)?),
            "temperature" => request.temperature = Some(float("temperature", &value)?),
            "p" => request.top_p = Some(float("p", &value)?),
            "k" => request.top_k = Some(unsigned("k", &value)?),
            "stop_sequences" => request.stop = strings("stop_sequences", &value)?,
            "seed" => {
                request.seed = Some(value.as_i64().ok_or_else(|| invalid("seed", "must be an integer"))?);
            }
            "frequency_penalty" => {
                request.frequency_penalty = Some(float("frequency_penalty", &value)?);
            }
            "presence_penalty" => {
                request.presence_penalty = Some(float("presence_penalty", &value)?);
            }
            "response_format" => request.response_format = read_response_format(&value)?,
            "strict_tools" => {
                strict_tools = Some(value.as_bool().ok_or_else(|| invalid("strict_tools", "must be a boolean"))?);
            }
            "thinking" => request.reasoning = Some(read_thinking(&value)?),
            "stream" => {
                request.stream = value.as_bool().ok_or_else(|| invalid("stream", "must be a boolean"))?;
            }
            "logprobs" => {
                let asked = value.as_bool().ok_or_else(|| invalid("logprobs", "must be a boolean"))?;
                request.logprobs = asked.then_some(0);
            }
            _ => request.extra.insert(Protocol::Cohere, key, value),
        }
    }
    request.model = model.ok_or_else(|| invalid("model", "is required"))?;
    let messages = messages.ok_or_else(|| invalid("messages", "is required"))?;
    read_messages(&messages, &mut request)?;
    if let Some(strict) = strict_tools {
        for tool in &mut request.tools {
            tool.strict = Some(strict);
        }
    }
    Ok(request)
}

/// Fields read into the IR (the rest go to `extra`).
fn is_modelled(key: &str) -> bool {
    matches!(
        key,
        "model"
            | "messages"
            | "tools"
            | "tool_choice"
            | "max_tokens"
            | "temperature"
            | "p"
            | "k"
            | "stop_sequences"
            | "seed"
            | "frequency_penalty"
            | "presence_penalty"
            | "response_format"
            | "thinking"
            | "stream"
            | "strict_tools"
            | "logprobs"
    )
}

fn float(key: &str, value: &Value) -> Result<f64, DecodeError> {
    value.as_f64().ok_or_else(|| invalid(key, "must be a number"))
}

fn unsigned(key: &str, value: &Value) -> Result<u64, DecodeError> {
    value.as_u64().ok_or_else(|| invalid(key, "must be a non-negative integer"))
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, DecodeError> {
    let Value::Array(items) = value else {
        return Err(invalid(key, "must be an array of strings"));
    };
    items
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| invalid(key, "must be an array of strings")))
        .collect()
}

fn read_messages(value: &Value, request: &mut Request) -> Result<(), DecodeError> {
    let Value::Array(items) = value else {
        return Err(invalid("messages", "must be an array"));
    };
    // True while the last IR message holds only results of tool messages, so
    // that consecutive tool messages share one user turn.
    let mut in_tool_results = false;
    for (i, item) in items.iter().enumerate() {
        let path = format!("messages[{i}]");
        let message = object(&path, item)?;
        let role = required_str(&path, message, "role")?;
        match role.as_str() {
            "system" if request.messages.is_empty() => {
                let blocks = content::read_system(&path, message.get("content"))?;
                request.system.extend(blocks);
                in_tool_results = false;
            }
            "system" => {
                let blocks = content::read_system(&path, message.get("content"))?;
                request.messages.push(Message::new(Role::System, blocks.into_iter().map(Block::Text).collect()));
                in_tool_results = false;
            }
            "user" => {
                let blocks = content::read_user(&path, message.get("content"))?;
                request.messages.push(Message::new(Role::User, blocks));
                in_tool_results = false;
            }
            "assistant" => {
                let blocks = content::read_assistant(&path, message)?;
                request.messages.push(Message::new(Role::Assistant, blocks));
                in_tool_results = false;
            }
            "tool" => {
                let result = Block::ToolResult(ToolResult {
                    tool_use_id: call_id::read(&required_str(&path, message, "tool_call_id")?, Protocol::Cohere).0,
                    name: None,
                    content: content::read_tool_content(&path, message.get("content"))?,
                    is_error: false,
                });
                match request.messages.last_mut() {
                    Some(last) if in_tool_results => last.content.push(result),
                    _ => request.messages.push(Message::new(Role::User, vec![result])),
                }
                in_tool_results = true;
            }
            other => {
                return Err(invalid(
                    format!("{path}.role"),
                    &format!("{other:?} is not a role (expected system, user, assistant or tool)"),
                ))
            }
        }
    }
    Ok(())
}

fn read_tools(value: Value, request: &mut Request) -> Result<(), DecodeError> {
    let Value::Array(items) = value else {
        return Err(invalid("tools", "must be an array"));
    };
    for (i, item) in items.into_iter().enumerate() {
        request.tools.push(function::read_tool(item, &format!("tools[{i}]"))?);
    }
    Ok(())
}

fn read_tool_choice(value: &Value) -> Result<ToolChoice, DecodeError> {
    let choice = value.as_str().ok_or_else(|| invalid("tool_choice", "must be a string"))?;
    match choice.to_ascii_uppercase().as_str() {
        "REQUIRED" => Ok(ToolChoice::Any),
        "NONE" => Ok(ToolChoice::None),
        "AUTO" => Ok(ToolChoice::Auto),
        _ => {
            Err(invalid("tool_choice", &format!("{choice:?} is not a tool choice (expected \"REQUIRED\" or \"NONE\")")))
        }
    }
}

fn read_response_format(value: &Value) -> Result<Option<ResponseFormat>, DecodeError> {
    let format = object("response_format", value)?;
    let kind = required_str("response_format", format, "type")?;
    match kind.as_str() {
        // Plain text is the default, so it is the same as no format.
        "text" => Ok(None),
        "json_object" => Ok(Some(match format.get("json_schema") {
            None | Some(Value::Null) => ResponseFormat::JsonObject,
            Some(schema @ Value::Object(_)) => {
                ResponseFormat::JsonSchema { name: SCHEMA_NAME.to_owned(), schema: schema.clone(), strict: None }
            }
            Some(_) => return Err(invalid("response_format.json_schema", "must be an object")),
        })),
        _ => Err(invalid(
            "response_format.type",
            &format!("{kind:?} is not a response format (expected \"text\" or \"json_object\")"),
        )),
    }
}

fn read_thinking(value: &Value) -> Result<Reasoning, DecodeError> {
    let thinking = object("thinking", value)?;
    let mode = match optional_str("thinking", thinking, "type")?.as_deref() {
        None | Some("enabled") => Thinking::On,
        Some("disabled") => Thinking::Off,
        Some(other) => {
            return Err(invalid(
                "thinking.type",
                &format!("{other:?} is not a thinking type (expected \"enabled\" or \"disabled\")"),
            ))
        }
    };
    let budget_tokens = match thinking.get("token_budget") {
        None | Some(Value::Null) => None,
        Some(budget) => Some(unsigned("thinking.token_budget", budget)?),
    };
    Ok(Reasoning { thinking: mode, effort: None, budget_tokens })
}

/// Where v2 chat requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "max_tokens",
        Field::Temperature => "temperature",
        Field::TopP => "p",
        Field::TopK => "k",
        Field::Stop => "stop_sequences",
        Field::Seed => "seed",
        Field::FrequencyPenalty => "frequency_penalty",
        Field::PresencePenalty => "presence_penalty",
        Field::JsonMode => "response_format",
        Field::JsonSchema => "response_format.json_schema",
        Field::ReasoningBudget => "thinking.token_budget",
        Field::ReasoningOff => "thinking.type",
        Field::ToolChoice => "tool_choice",
        Field::Thinking => "messages.content.thinking",
        Field::SystemMessage => "messages.system",
        Field::ToolStrict => "strict_tools",
        Field::Dimensions => "output_dimension",
        Field::Encoding => "embedding_types",
        Field::Logprobs => "logprobs",
        _ => return None,
    })
}

/// Writes a v2 chat request body.
pub(crate) fn write(request: &Request, capabilities: &Capabilities) -> Encoded {
    let mut dropped = Vec::new();
    let mut body = Map::new();
    body.insert("stream".to_owned(), Value::Bool(request.stream));
    body.insert("model".to_owned(), Value::from(request.model.as_str()));

    let mut messages = Vec::new();
    let mut documents = Vec::new();
    if !request.system.is_empty() {
        let mut parts = Vec::with_capacity(request.system.len());
        for block in &request.system {
            note_text_markers(block, &mut dropped);
            parts.push(json!({"type": "text", "text": block.text}));
        }
        let content = match request.system.as_slice() {
            [only] => Value::from(only.text.as_str()),
            _ => Value::Array(parts),
        };
        messages.push(json!({"role": "system", "content": content}));
    }
    for message in &request.messages {
        message.extra.for_target_under(Protocol::Cohere, "messages", &mut dropped);
        match message.role {
            Role::User => write_user(message, &mut messages, &mut documents, &mut dropped),
            Role::Assistant => {
                let written = content::write_assistant(&message.content, ContentForm::Flexible, &mut dropped);
                messages.push(Value::Object(written));
            }
            Role::System => {
                let content = content::write_tool_content(&message.content, &mut dropped);
                messages.push(json!({"role": "system", "content": content}));
            }
        }
    }
    body.insert("messages".to_owned(), Value::Array(messages));

    let (tools, choice) = tools_and_choice(request, &mut dropped);
    if !tools.is_empty() {
        body.insert("tools".to_owned(), Value::Array(tools));
        if let Some(strict) = strict_tools(&request.tools, &mut dropped) {
            body.insert("strict_tools".to_owned(), Value::Bool(strict));
        }
    }
    if !request.betas.is_empty() {
        dropped.push(unsupported(Field::Betas));
    }
    if let Some(choice) = choice {
        body.insert("tool_choice".to_owned(), Value::from(choice));
    }
    if request.parallel_tool_calls == Some(false) {
        // Cohere may always call several tools in one turn.
        dropped.push(unsupported(Field::ParallelToolCalls));
    }
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_tokens".to_owned(), Value::from(max_tokens));
    }
    if let Some(top) = request.logprobs {
        // Cohere gives the chosen tokens' log probabilities, no alternatives.
        body.insert("logprobs".to_owned(), Value::Bool(true));
        if top > 0 {
            dropped.push(unsupported(Field::TopLogprobs));
        }
    }
    if request.extra_choices() > 0 {
        dropped.push(unsupported(Field::Choices));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".to_owned(), Value::from(temperature));
    }
    if let Some(top_p) = request.top_p {
        body.insert("p".to_owned(), Value::from(top_p));
    }
    if let Some(top_k) = request.top_k {
        body.insert("k".to_owned(), Value::from(top_k));
    }
    if !request.stop.is_empty() {
        body.insert("stop_sequences".to_owned(), json!(request.stop));
    }
    if let Some(seed) = request.seed {
        body.insert("seed".to_owned(), Value::from(seed));
    }
    if let Some(penalty) = request.frequency_penalty {
        body.insert("frequency_penalty".to_owned(), Value::from(penalty));
    }
    if let Some(penalty) = request.presence_penalty {
        body.insert("presence_penalty".to_owned(), Value::from(penalty));
    }
    match &request.response_format {
        None => {}
        Some(ResponseFormat::JsonObject) => {
            body.insert("response_format".to_owned(), json!({"type": "json_object"}));
        }
        Some(ResponseFormat::JsonSchema { name, schema, strict }) => {
            // Cohere enforces a schema strictly and gives it no name.
            if *strict == Some(false) {
                dropped.push(unsupported(Field::JsonSchemaStrict));
            }
            if !name.is_empty() && name != SCHEMA_NAME {
                dropped.push(unsupported(Field::JsonSchemaName));
            }
            body.insert("response_format".to_owned(), json!({"type": "json_object", "json_schema": schema}));
        }
    }
    if let Some(reasoning) = &request.reasoning {
        if let Some(thinking) = write_thinking(reasoning, capabilities, &mut dropped) {
            body.insert("thinking".to_owned(), thinking);
        }
    }
    if request.user.is_some() {
        dropped.push(unsupported(Field::User));
    }
    if !request.metadata.is_empty() {
        dropped.push(unsupported(Field::Metadata));
    }
    if let Some(extra) = request.extra.for_target(Protocol::Cohere, &mut dropped) {
        for (key, value) in extra {
            body.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    if !documents.is_empty() {
        // Documents from user turns join the request's grounding documents.
        match body.get_mut("documents") {
            Some(Value::Array(existing)) => existing.extend(documents),
            _ => {
                body.insert("documents".to_owned(), Value::Array(documents));
            }
        }
    }
    dedup(&mut dropped);
    Encoded { body: codec_json::to_vec(&Value::Object(body)), dropped }
}

/// A user turn: each tool result as its own tool message first (Cohere wants
/// them right after the calls), then the rest as one user message. Text and
/// JSON documents move to the request's `documents`, the only place Cohere
/// takes documents from the caller.
fn write_user(message: &Message, messages: &mut Vec<Value>, documents: &mut Vec<Value>, dropped: &mut Vec<Dropped>) {
    let mut parts = Vec::new();
    let mut had_results = false;
    for block in &message.content {
        match block {
            Block::Text(text) => {
                note_text_markers(text, dropped);
                parts.push(json!({"type": "text", "text": text.text}));
            }
            Block::Image { source, cache_control } => {
                if cache_control.is_some() {
                    dropped.push(unsupported(Field::CacheControl));
                }
                parts.push(json!({
                    "type": "image_url",
                    "image_url": {"url": url_of(source)},
                }));
            }
            Block::Document { source, name, cache_control } => {
                if cache_control.is_some() {
                    dropped.push(unsupported(Field::CacheControl));
                }
                match cohere_document(source, name.as_deref()) {
                    Some(document) => documents.push(document),
                    None => dropped.push(unsupported(Field::Document)),
                }
            }
            // Cohere's chat takes no audio.
            Block::Audio { .. } => dropped.push(unsupported(Field::Audio)),
            Block::ToolResult(result) => {
                had_results = true;
                if result.is_error {
                    dropped.push(unsupported(Field::ToolResultError));
                }
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": result.tool_use_id,
                    "content": content::write_tool_content(&result.content, dropped),
                }));
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                dropped.push(unsupported(Field::MisplacedBlock));
            }
            Block::ToolUse(_) => dropped.push(unsupported(Field::MisplacedBlock)),
            Block::Unmodelled(block) => {
                block.for_target(Protocol::Cohere, dropped);
            }
        }
    }
    let content = match parts.as_slice() {
        [] if had_results || !message.content.is_empty() => return,
        [only] if only.get("type") == Some(&Value::from("text")) => only.get("text").cloned().unwrap_or_default(),
        _ => Value::Array(parts),
    };
    messages.push(json!({"role": "user", "content": content}));
}

/// The tools and `tool_choice`. Cohere cannot name a tool to force; a named
/// choice becomes `REQUIRED` with only that tool offered, unless earlier
/// turns call other tools (Cohere checks calls against the tools), in which
/// case all tools stay and the name is reported as dropped.
fn tools_and_choice(request: &Request, dropped: &mut Vec<Dropped>) -> (Vec<Value>, Option<&'static str>) {
    let mut only: Option<&str> = None;
    let choice = match &request.tool_choice {
        None | Some(ToolChoice::Auto) => None,
        Some(ToolChoice::Any) => Some("REQUIRED"),
        Some(ToolChoice::None) => Some("NONE"),
        Some(ToolChoice::Tool(name)) => {
            let offered = request.tools.iter().any(|tool| &tool.name == name);
            let history_uses_others = request
                .messages
                .iter()
                .flat_map(|message| message.content.iter())
                .any(|block| matches!(block, Block::ToolUse(call) if &call.name != name));
            if offered && !history_uses_others {
                only = Some(name);
            } else {
                dropped.push(unsupported(Field::ToolChoice));
            }
            Some("REQUIRED")
        }
    };
    let mut tools = Vec::with_capacity(request.tools.len());
    for tool in &request.tools {
        if only.is_some_and(|name| name != tool.name) {
            continue;
        }
        if tool.cache_control.is_some() {
            dropped.push(unsupported(Field::CacheControl));
        }
        tool.extra.for_target_under(Protocol::Cohere, "tools", dropped);
        let mut value = function::tool_value(tool);
        if tool.parameters.is_null() {
            // Cohere wants a schema even for a function without arguments.
            value["function"]["parameters"] = json!({});
        }
        tools.push(value);
    }
    (tools, choice)
}

/// `strict_tools`, Cohere's one flag for every tool: said when all the tools
/// say the same; a strict tool among others that are not is reported.
fn strict_tools(tools: &[switchyard_codec::ir::Tool], dropped: &mut Vec<Dropped>) -> Option<bool> {
    let first = tools.first()?.strict;
    if tools.iter().all(|tool| tool.strict == first) {
        return first;
    }
    if tools.iter().any(|tool| tool.strict == Some(true)) {
        dropped.push(unsupported(Field::ToolStrict));
    }
    None
}

/// `thinking`: off, or on with a budget (an effort is turned into one, and
/// reported). An effort alone that does not ask for thinking (Anthropic's
/// `output_config.effort` without `thinking`) is the budget it stands for
/// to a model said to reason (command-a-reasoning thinks by default, and
/// the budget is how hard), and leaves any other model's default.
fn write_thinking(reasoning: &Reasoning, capabilities: &Capabilities, dropped: &mut Vec<Dropped>) -> Option<Value> {
    if reasoning.thinking == Thinking::Unset
        && reasoning.budget_tokens.is_none()
        && capabilities.reasoning != Some(true)
    {
        if reasoning.effort.is_some() {
            dropped.push(unsupported(Field::ReasoningEffort));
        }
        return None;
    }
    let budget = effort::budget_to_write(reasoning, dropped);
    if reasoning.is_off() || budget == Some(0) {
        return Some(json!({"type": "disabled"}));
    }
    Some(match budget {
        Some(budget) => json!({"type": "enabled", "token_budget": budget}),
        None => json!({"type": "enabled"}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::{DropReason, MediaSource, TextBlock, Tool, ToolUse};

    fn read_json(value: Value) -> Result<Request, DecodeError> {
        read(value.to_string().as_bytes())
    }

    fn written(request: &Request) -> (Value, Vec<Dropped>) {
        let encoded = write(request, &Capabilities::default());
        (serde_json::from_slice(&encoded.body).unwrap(), encoded.dropped)
    }

    #[test]
    fn reads_sampling_knobs_and_keeps_unknown_fields() {
        let request = read_json(json!({
            "model": "command-a-03-2025",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.3, "p": 0.75, "k": 40, "max_tokens": 100,
            "stop_sequences": ["END"], "seed": 7,
            "frequency_penalty": 0.1, "presence_penalty": 0.2,
            "safety_mode": "STRICT", "priority": 2, "citation_options": null,
            "thinking": {"type": "enabled", "token_budget": 500},
            "response_format": {"type": "json_object"},
            "tool_choice": null
        }))
        .unwrap();
        assert_eq!(request.temperature, Some(0.3));
        assert_eq!(request.top_p, Some(0.75));
        assert_eq!(request.top_k, Some(40));
        assert_eq!(request.max_tokens, Some(100));
        assert_eq!(request.stop, vec!["END".to_owned()]);
        assert_eq!(request.seed, Some(7));
        assert_eq!(request.tool_choice, None);
        assert_eq!(request.reasoning, Some(Reasoning::with_budget(500)));
        assert_eq!(request.response_format, Some(ResponseFormat::JsonObject));
        assert_eq!(request.extra.origin, Some(Protocol::Cohere));
        assert_eq!(
            request.extra.fields.keys().collect::<Vec<_>>(),
            vec!["safety_mode", "priority", "citation_options"]
        );
        let (body, dropped) = written(&request);
        assert_eq!(body["safety_mode"], "STRICT");
        assert_eq!(body["k"], 40);
        assert!(dropped.is_empty());
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (json!([]), "body"),
            (json!({"messages": []}), "model"),
            (json!({"model": "m"}), "messages"),
            (json!({"model": "m", "messages": {}}), "messages"),
            (json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}), "messages[0].role"),
            (json!({"model": "m", "messages": [{"role": "user"}]}), "messages[0].content"),
            (json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}), "messages[0].tool_call_id"),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]}),
                "messages[0].content[0].type",
            ),
            (json!({"model": "m", "messages": [], "p": "high"}), "p"),
            (json!({"model": "m", "messages": [], "tool_choice": "sometimes"}), "tool_choice"),
            (json!({"model": "m", "messages": [], "tools": [{"type": "function"}]}), "tools[0].function"),
            (json!({"model": "m", "messages": [], "thinking": {"type": "maybe"}}), "thinking.type"),
        ];
        for (body, param) in cases {
            match read_json(body.clone()) {
                Err(DecodeError::Invalid { param: Some(got), message }) => {
                    assert_eq!(got, param, "for {body}");
                    assert!(message.starts_with(param), "{message}");
                    assert!(!message.ends_with('.'), "{message}");
                }
                other => panic!("{body} gave {other:?}"),
            }
        }
        assert!(matches!(read(b"{not json"), Err(DecodeError::Json(_))));
    }

    #[test]
    fn consecutive_tool_messages_share_a_user_turn() {
        let request = read_json(json!({
            "model": "m",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "w", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "a", "content": "sunny"},
                {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "rain"}]},
                {"role": "user", "content": "thanks"}
            ]
        }))
        .unwrap();
        assert_eq!(request.messages.len(), 4);
        assert_eq!(request.messages[2].content.len(), 2);
        let (body, _) = written(&request);
        assert_eq!(body["messages"][2]["role"], "tool");
        assert_eq!(body["messages"][3]["content"], "rain");
        assert_eq!(body["messages"][4]["content"], "thanks");
    }

    #[test]
    fn mixed_user_turn_writes_results_first_and_hoists_documents() {
        use base64::Engine as _;
        let request = Request {
            model: "m".into(),
            messages: vec![Message::new(
                Role::User,
                vec![
                    Block::Text(TextBlock {
                        text: "see results".into(),
                        cache_control: Some(switchyard_codec::ir::CacheControl { ttl: None }),
                        citations: Vec::new(),
                    }),
                    Block::ToolResult(ToolResult {
                        tool_use_id: "t1".into(),
                        name: Some("w".into()),
                        content: vec![Block::text("ok")],
                        is_error: true,
                    }),
                    Block::Document {
                        source: MediaSource::Base64 {
                            media_type: "text/plain".into(),
                            data: base64::engine::general_purpose::STANDARD.encode("notes"),
                        },
                        name: Some("notes.txt".into()),
                        cache_control: None,
                    },
                    Block::Document {
                        source: MediaSource::Url { url: "https://x/y.pdf".into(), media_type: None },
                        name: None,
                        cache_control: None,
                    },
                ],
            )],
            user: Some("u1".into()),
            ..Request::default()
        };
        let (body, dropped) = written(&request);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "tool", "tool_call_id": "t1", "content": "ok"},
                {"role": "user", "content": "see results"}
            ])
        );
        assert_eq!(body["documents"], json!([{"data": {"text": "notes"}, "id": "notes.txt"}]));
        let fields: Vec<_> = dropped.iter().map(|d| d.field).collect();
        assert_eq!(fields, vec![Field::CacheControl, Field::ToolResultError, Field::Document, Field::User]);
    }

    #[test]
    fn tool_choice_forms() {
        let tool = |name: &str| Tool {
            name: name.into(),
            description: None,
            parameters: json!({"type": "object"}),
            cache_control: None,
            ..Tool::default()
        };
        let mut request = Request {
            model: "m".into(),
            tools: vec![tool("a"), tool("b")],
            tool_choice: Some(ToolChoice::Tool("b".into())),
            ..Request::default()
        };
        let (body, dropped) = written(&request);
        assert_eq!(body["tool_choice"], "REQUIRED");
        assert_eq!(body["tools"].as_array().unwrap().len(), 1);
        assert_eq!(body["tools"][0]["function"]["name"], "b");
        assert!(dropped.is_empty());

        request.messages = vec![Message::new(Role::Assistant, vec![Block::ToolUse(ToolUse::new("1", "a", "{}"))])];
        let (body, dropped) = written(&request);
        assert_eq!(body["tools"].as_array().unwrap().len(), 2);
        assert_eq!(dropped, vec![Dropped::new(Field::ToolChoice, DropReason::Unsupported)]);

        request.tool_choice = Some(ToolChoice::Auto);
        let (body, _) = written(&request);
        assert!(body.get("tool_choice").is_none());
        request.tool_choice = Some(ToolChoice::None);
        assert_eq!(written(&request).0["tool_choice"], "NONE");
    }

    #[test]
    fn reasoning_forms() {
        let mut dropped = Vec::new();
        let common = Capabilities::default();
        let effort = Reasoning::with_effort(switchyard_codec::ir::Effort::High);
        assert_eq!(
            write_thinking(&effort, &common, &mut dropped),
            Some(json!({"type": "enabled", "token_budget": 16384}))
        );
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
        let off = Reasoning::with_budget(0);
        assert_eq!(write_thinking(&off, &common, &mut dropped), Some(json!({"type": "disabled"})));
        // An effort that only tunes the reply (no thinking asked for) has no
        // Cohere form on a model not said to reason...
        dropped.clear();
        let tune = Reasoning { effort: Some(switchyard_codec::ir::Effort::Low), ..Reasoning::default() };
        assert_eq!(write_thinking(&tune, &common, &mut dropped), None);
        assert_eq!(dropped, vec![Dropped::unsupported(Field::ReasoningEffort)]);
        // ...and is the budget it stands for on a reasoning model.
        dropped.clear();
        let reasons = Capabilities { reasoning: Some(true), ..Capabilities::default() };
        assert_eq!(
            write_thinking(&tune, &reasons, &mut dropped),
            Some(json!({"type": "enabled", "token_budget": 2048}))
        );
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
    }

    #[test]
    fn cross_protocol_extras_are_reported() {
        let mut request = Request { model: "m".into(), ..Request::default() };
        request.extra.insert(Protocol::OpenAi, "logit_bias".into(), json!({}));
        let (body, dropped) = written(&request);
        assert!(body.get("logit_bias").is_none());
        assert_eq!(dropped, vec![Dropped::unmodelled("logit_bias".into())]);
    }
}
