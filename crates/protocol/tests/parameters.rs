//! One table of request parameters × protocols. For every parameter, every
//! caller protocol that can say it and every lane protocol: the caller's
//! value, written in the caller's own field, arrives in the lane's own field
//! (`Codec::parameter_path`) with that value; where the lane has no field, the
//! loss is reported as that parameter. The same table, rendered, is the
//! parameter table of `docs/protocols.md`, which a test keeps current.
//! OpenAI's legacy completions (`Codec::completions`) are a column of their
//! own: a completion's caller reaches every lane, and every lane protocol's
//! caller reaches an OpenAI lane asked for a completion.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use serde_json::{json, Map, Value};
use switchyard_protocol::ir::{Capabilities, Field, Protocol};
use switchyard_protocol::Codec;

/// A column of the table: a protocol, or OpenAI's legacy completions.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Column {
    Of(Protocol),
    Completions,
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Column::Of(protocol) => write!(f, "{protocol}"),
            Column::Completions => f.write_str("openai completions"),
        }
    }
}

/// Every column, in the table's order.
fn columns() -> Vec<Column> {
    let mut all: Vec<Column> = Protocol::ALL.into_iter().map(Column::Of).collect();
    all.insert(1, Column::Completions);
    all
}

/// The codec of a column.
fn codec(column: Column) -> &'static dyn Codec {
    match column {
        Column::Of(protocol) => switchyard_protocol::codec(protocol),
        Column::Completions => {
            switchyard_protocol::codec(Protocol::OpenAi).completions().expect("OpenAI has legacy completions")
        }
    }
}

/// A completion's fragment for `field`: OpenAI's own name for what it has.
fn completion_fragment(field: Field) -> Option<Value> {
    match field {
        Field::MaxTokens => Some(json!({"max_tokens": 321})),
        Field::Stop => Some(json!({"stop": ["END"]})),
        Field::Temperature
        | Field::TopP
        | Field::Seed
        | Field::FrequencyPenalty
        | Field::PresencePenalty
        | Field::User
        | Field::Choices => fragment_of(field, Column::Of(Protocol::OpenAi)),
        Field::Logprobs => Some(json!({"logprobs": 0})),
        Field::TopLogprobs => Some(json!({"logprobs": 5})),
        _ => None,
    }
}

/// How a column says `field` ([`fragment`]).
fn fragment_of(field: Field, column: Column) -> Option<Value> {
    match column {
        Column::Of(protocol) => fragment(field, protocol),
        Column::Completions => completion_fragment(field),
    }
}

/// The smallest request of a column.
fn base_of(column: Column) -> Value {
    match column {
        Column::Of(protocol) => base(protocol),
        Column::Completions => json!({"model": "m", "prompt": "hi"}),
    }
}

/// The JSON schema every structured-output row uses.
fn schema() -> Value {
    json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
}

/// The schema as the JSON text Bedrock carries it in.
fn schema_text() -> String {
    serde_json::to_string(&schema()).unwrap()
}

/// One tool, in each protocol's shape, for the rows about tool use.
fn tools(protocol: Protocol) -> Value {
    let parameters = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    match protocol {
        Protocol::OpenAi | Protocol::Cohere => {
            json!([{"type": "function", "function": {"name": "f", "parameters": parameters}}])
        }
        Protocol::Responses => json!([{"type": "function", "name": "f", "parameters": parameters}]),
        Protocol::Anthropic => json!([{"name": "f", "input_schema": parameters}]),
        Protocol::Gemini => json!([{"functionDeclarations": [{"name": "f", "parametersJsonSchema": parameters}]}]),
        Protocol::Bedrock => json!([{"toolSpec": {"name": "f", "inputSchema": {"json": parameters}}}]),
    }
}

/// The smallest request of each protocol: one user turn.
fn base(protocol: Protocol) -> Value {
    match protocol {
        Protocol::OpenAi | Protocol::Cohere => json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        Protocol::Responses => json!({"model": "m", "input": "hi"}),
        Protocol::Anthropic => json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        Protocol::Gemini => json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        Protocol::Bedrock => json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
    }
}

/// How `protocol` says `field` with the table's value: a fragment of its
/// request body holding the value at `parameter_path(field)`. `None` where
/// the protocol has no field for it.
fn fragment(field: Field, protocol: Protocol) -> Option<Value> {
    use Protocol::*;
    let sampling = |openai: &str, value: Value| -> Option<Value> {
        Some(match protocol {
            OpenAi | Responses | Anthropic | Cohere => json!({ openai: value }),
            Gemini => json!({"generationConfig": { gemini_name(openai): value }}),
            Bedrock => json!({"inferenceConfig": { bedrock_name(openai): value }}),
        })
    };
    match field {
        Field::MaxTokens => match protocol {
            OpenAi => Some(json!({"max_completion_tokens": 321})),
            Responses => Some(json!({"max_output_tokens": 321})),
            _ => sampling("max_tokens", json!(321)),
        },
        Field::Temperature => sampling("temperature", json!(0.25)),
        Field::TopP => match protocol {
            Cohere => Some(json!({"p": 0.75})),
            _ => sampling("top_p", json!(0.75)),
        },
        Field::TopK => match protocol {
            OpenAi | Responses => None,
            Anthropic => Some(json!({"top_k": 17})),
            Gemini => Some(json!({"generationConfig": {"topK": 17}})),
            Cohere => Some(json!({"k": 17})),
            Bedrock => Some(json!({"additionalModelRequestFields": {"top_k": 17}})),
        },
        Field::Stop => match protocol {
            Responses => None,
            OpenAi => Some(json!({"stop": ["END"]})),
            Anthropic | Cohere => Some(json!({"stop_sequences": ["END"]})),
            Gemini => Some(json!({"generationConfig": {"stopSequences": ["END"]}})),
            Bedrock => Some(json!({"inferenceConfig": {"stopSequences": ["END"]}})),
        },
        Field::Seed => penalty_like(protocol, "seed", json!(42)),
        Field::FrequencyPenalty => penalty_like(protocol, "frequency_penalty", json!(0.5)),
        Field::PresencePenalty => penalty_like(protocol, "presence_penalty", json!(0.25)),
        Field::JsonMode => match protocol {
            OpenAi | Cohere => Some(json!({"response_format": {"type": "json_object"}})),
            Responses => Some(json!({"text": {"format": {"type": "json_object"}}})),
            Gemini => Some(json!({"generationConfig": {"responseMimeType": "application/json"}})),
            Anthropic | Bedrock => None,
        },
        Field::JsonSchema => Some(structured_output(protocol, "response", None)),
        Field::JsonSchemaName => match protocol {
            OpenAi | Responses | Bedrock => Some(structured_output(protocol, "contact", None)),
            _ => None,
        },
        Field::JsonSchemaStrict => match protocol {
            OpenAi | Responses => Some(structured_output(protocol, "response", Some(true))),
            _ => None,
        },
        Field::ReasoningEffort => match protocol {
            OpenAi => Some(json!({"reasoning_effort": "high"})),
            Responses => Some(json!({"reasoning": {"effort": "high"}})),
            Anthropic => Some(json!({"output_config": {"effort": "high"}})),
            Gemini => Some(json!({"generationConfig": {"thinkingConfig": {"thinkingLevel": "high"}}})),
            Bedrock => Some(json!({"outputConfig": {"effort": "high"}})),
            Cohere => None,
        },
        Field::ReasoningBudget => match protocol {
            OpenAi | Responses => None,
            Anthropic => Some(json!({"thinking": {"type": "enabled", "budget_tokens": 4096}})),
            Gemini => Some(json!({"generationConfig": {"thinkingConfig": {"thinkingBudget": 4096}}})),
            Cohere => Some(json!({"thinking": {"type": "enabled", "token_budget": 4096}})),
            Bedrock => {
                Some(json!({"additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 4096}}}))
            }
        },
        Field::ReasoningOff => match protocol {
            OpenAi => None,
            Responses => Some(json!({"reasoning": {"effort": "none"}})),
            Anthropic | Cohere => Some(json!({"thinking": {"type": "disabled"}})),
            Gemini => Some(json!({"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}})),
            Bedrock => Some(json!({"additionalModelRequestFields": {"thinking": {"type": "disabled"}}})),
        },
        Field::ToolChoice => Some(with_tools(
            protocol,
            match protocol {
                OpenAi | Responses => json!({"tool_choice": "required"}),
                Anthropic => json!({"tool_choice": {"type": "any"}}),
                Gemini => json!({"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}),
                Cohere => json!({"tool_choice": "REQUIRED"}),
                Bedrock => json!({"toolConfig": {"toolChoice": {"any": {}}}}),
            },
        )),
        Field::ParallelToolCalls => match protocol {
            OpenAi | Responses => Some(with_tools(protocol, json!({"parallel_tool_calls": false}))),
            Anthropic => {
                Some(with_tools(protocol, json!({"tool_choice": {"type": "auto", "disable_parallel_tool_use": true}})))
            }
            Gemini | Cohere | Bedrock => None,
        },
        Field::ToolStrict => {
            let parameters = json!({"type": "object", "properties": {"q": {"type": "string"}}});
            match protocol {
                OpenAi => Some(json!({"tools": [{"type": "function",
                    "function": {"name": "f", "parameters": parameters, "strict": true}}]})),
                Responses => Some(
                    json!({"tools": [{"type": "function", "name": "f", "parameters": parameters, "strict": true}]}),
                ),
                Anthropic => Some(json!({"tools": [{"name": "f", "input_schema": parameters, "strict": true}]})),
                Cohere => Some(with_tools(protocol, json!({"strict_tools": true}))),
                Bedrock => Some(json!({"toolConfig": {"tools": [{"toolSpec": {"name": "f",
                    "inputSchema": {"json": parameters}, "strict": true}}]}})),
                Gemini => None,
            }
        }
        Field::User => match protocol {
            OpenAi | Responses => Some(json!({"user": "user-7"})),
            Anthropic => Some(json!({"metadata": {"user_id": "user-7"}})),
            Bedrock => Some(json!({"requestMetadata": {"user": "user-7"}})),
            Gemini | Cohere => None,
        },
        Field::Metadata => match protocol {
            OpenAi | Responses => Some(json!({"metadata": {"team": "a"}})),
            Bedrock => Some(json!({"requestMetadata": {"team": "a"}})),
            _ => None,
        },
        Field::Logprobs => match protocol {
            OpenAi | Cohere => Some(json!({"logprobs": true})),
            Responses => Some(json!({"include": ["message.output_text.logprobs"]})),
            Gemini => Some(json!({"generationConfig": {"responseLogprobs": true}})),
            Anthropic | Bedrock => None,
        },
        Field::TopLogprobs => match protocol {
            OpenAi => Some(json!({"logprobs": true, "top_logprobs": 5})),
            Responses => Some(json!({"include": ["message.output_text.logprobs"], "top_logprobs": 5})),
            Gemini => Some(json!({"generationConfig": {"responseLogprobs": true, "logprobs": 5}})),
            Anthropic | Cohere | Bedrock => None,
        },
        Field::Choices => match protocol {
            OpenAi => Some(json!({"n": 2})),
            Gemini => Some(json!({"generationConfig": {"candidateCount": 2}})),
            _ => None,
        },
        other => panic!("{other} has no row in the table"),
    }
}

fn gemini_name(name: &str) -> &'static str {
    match name {
        "max_tokens" => "maxOutputTokens",
        "temperature" => "temperature",
        "top_p" => "topP",
        other => panic!("no Gemini name for {other}"),
    }
}

fn bedrock_name(name: &str) -> &'static str {
    match name {
        "max_tokens" => "maxTokens",
        "temperature" => "temperature",
        "top_p" => "topP",
        other => panic!("no Bedrock name for {other}"),
    }
}

/// Seed and penalties: OpenAI, Cohere and Gemini only.
fn penalty_like(protocol: Protocol, name: &str, value: Value) -> Option<Value> {
    match protocol {
        Protocol::OpenAi | Protocol::Cohere => Some(json!({ name: value })),
        Protocol::Gemini => {
            let gemini = match name {
                "seed" => "seed",
                "frequency_penalty" => "frequencyPenalty",
                _ => "presencePenalty",
            };
            Some(json!({"generationConfig": { gemini: value }}))
        }
        _ => None,
    }
}

/// A schema-constrained reply in each protocol's shape.
fn structured_output(protocol: Protocol, name: &str, strict: Option<bool>) -> Value {
    let mut definition = json!({"name": name, "schema": schema()});
    if let Some(strict) = strict {
        definition["strict"] = json!(strict);
    }
    match protocol {
        Protocol::OpenAi => json!({"response_format": {"type": "json_schema", "json_schema": definition}}),
        Protocol::Responses => {
            let mut format = definition;
            format["type"] = json!("json_schema");
            json!({"text": {"format": format}})
        }
        Protocol::Anthropic => json!({"output_config": {"format": {"type": "json_schema", "schema": schema()}}}),
        Protocol::Gemini => {
            json!({"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema()}})
        }
        Protocol::Cohere => json!({"response_format": {"type": "json_object", "json_schema": schema()}}),
        Protocol::Bedrock => json!({"outputConfig": {"textFormat": {"type": "json_schema",
            "structure": {"jsonSchema": {"name": name, "schema": schema_text()}}}}}),
    }
}

/// A fragment with the tools it is about.
fn with_tools(protocol: Protocol, fragment: Value) -> Value {
    let mut fragment = fragment;
    match protocol {
        Protocol::Bedrock => fragment["toolConfig"]["tools"] = tools(protocol),
        _ => fragment["tools"] = tools(protocol),
    }
    fragment
}

/// Parameters a lane carries without a field of its own (a schema that is
/// always enforced says `strict: true`).
fn implied(field: Field, lane: Protocol) -> bool {
    field == Field::JsonSchemaStrict && matches!(lane, Protocol::Anthropic | Protocol::Gemini | Protocol::Cohere)
}

fn merge(into: &mut Value, fragment: &Value) {
    match (into, fragment) {
        (Value::Object(into), Value::Object(fragment)) => {
            for (key, value) in fragment {
                match into.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (into, fragment) => *into = fragment.clone(),
    }
}

/// The value at a dotted path; an array on the way is its first element
/// (`tools.function.strict`).
fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |value, key| match value {
        Value::Array(items) => items.first()?.get(key),
        _ => value.get(key),
    })
}

/// The model a lane of `protocol` is asked for: the current generation, so
/// every field the protocol has is in play.
fn lane_model(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Gemini => "gemini-3-pro-preview",
        _ => "m",
    }
}

#[test]
fn every_representable_parameter_arrives_in_the_lanes_own_field() {
    let mut checked = 0;
    for field in Field::PARAMETERS {
        for caller in columns() {
            let Some(said) = fragment_of(field, caller) else {
                continue;
            };
            let path =
                codec(caller).parameter_path(field).unwrap_or_else(|| panic!("{caller} has no path for {field}"));
            assert!(at(&said, path).is_some(), "the {caller} row for {field} does not hold `{path}`: {said}");
            let mut body = base_of(caller);
            merge(&mut body, &said);
            let mut request = codec(caller)
                .read_request(&serde_json::to_vec(&body).unwrap())
                .unwrap_or_else(|e| panic!("{caller} cannot read its {field}: {e}"));
            for lane in columns() {
                let pair = format!("{field}: {caller} -> {lane}");
                let protocol = match lane {
                    Column::Of(protocol) => protocol,
                    Column::Completions => Protocol::OpenAi,
                };
                lane_model(protocol).clone_into(&mut request.model);
                let written = codec(lane).write_request_for(&request, &Capabilities::ALL);
                let out: Value = serde_json::from_slice(&written.body).unwrap();
                let reported = written.dropped.iter().any(|d| d.field == field);
                match (codec(lane).parameter_path(field), fragment_of(field, lane)) {
                    (Some(lane_path), Some(expected)) => {
                        assert_eq!(at(&out, lane_path), at(&expected, lane_path), "{pair} at `{lane_path}`: {out}");
                        assert!(!reported, "{pair}: carried but reported: {:?}", written.dropped);
                    }
                    (None, None) => {
                        let implied = matches!(lane, Column::Of(protocol) if implied(field, protocol));
                        assert!(reported || implied, "{pair}: lost without a report: {out}");
                    }
                    (path, row) => panic!("{pair}: the table and the codec disagree ({path:?}, {row:?})"),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 300, "{checked}");
}

#[test]
fn what_is_lost_is_named_in_the_callers_own_terms() {
    // A Gemini caller's topK and an Anthropic caller's effort, to lanes
    // without them: the header names the caller's leaf path.
    let codec = switchyard_protocol::codec;
    let gemini = codec(Protocol::Gemini)
        .read_request(br#"{"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"topK": 3, "temperature": 0.5}}"#)
        .unwrap();
    let written = codec(Protocol::OpenAi).write_request(&gemini);
    let paths: Vec<String> = written
        .dropped
        .iter()
        .map(|d| switchyard_protocol::dropped_path(codec(Protocol::Gemini), d).into_owned())
        .collect();
    assert_eq!(paths, ["generationConfig.topK"]);
    let anthropic = codec(Protocol::Anthropic)
        .read_request(br#"{"model": "m", "messages": [], "output_config": {"effort": "low"}}"#)
        .unwrap();
    let written = codec(Protocol::Cohere).write_request(&anthropic);
    let paths: Vec<String> = written
        .dropped
        .iter()
        .map(|d| switchyard_protocol::dropped_path(codec(Protocol::Anthropic), d).into_owned())
        .collect();
    assert_eq!(paths, ["output_config.effort"]);
}

/// The parameter table of `docs/protocols.md`, rendered from the codecs.
fn parameter_table() -> String {
    let mut table = String::from("| parameter |");
    for column in columns() {
        table.push_str(&format!(" {} |", column_title(column)));
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(columns().len()));
    table.push('\n');
    for field in Field::PARAMETERS {
        table.push_str(&format!("| `{}` |", field.as_str()));
        for column in columns() {
            match codec(column).parameter_path(field) {
                Some(path) => table.push_str(&format!(" `{path}` |")),
                None => table.push_str(" — |"),
            }
        }
        table.push('\n');
    }
    table
}

fn column_title(column: Column) -> &'static str {
    match column {
        Column::Of(Protocol::OpenAi) => "OpenAI Chat",
        Column::Completions => "OpenAI Completions",
        Column::Of(Protocol::Responses) => "Responses",
        Column::Of(Protocol::Anthropic) => "Anthropic",
        Column::Of(Protocol::Gemini) => "Gemini",
        Column::Of(Protocol::Cohere) => "Cohere v2",
        Column::Of(Protocol::Bedrock) => "Bedrock Converse",
    }
}

const BEGIN: &str = "<!-- parameter-table: generated by crates/protocol/tests/parameters.rs -->\n";
const END: &str = "<!-- parameter-table: end -->";

#[test]
fn the_docs_parameter_table_is_the_codecs() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocols.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    let start = docs.find(BEGIN).expect("docs/protocols.md has no parameter table marker") + BEGIN.len();
    let end = docs[start..].find(END).expect("docs/protocols.md has no parameter table end") + start;
    let table = parameter_table();
    if docs[start..end] != table {
        if std::env::var_os("SWITCHYARD_UPDATE_DOCS").is_some() {
            let updated = format!("{}{table}{}", &docs[..start], &docs[end..]);
            std::fs::write(&path, updated).unwrap();
        } else {
            panic!(
                "docs/protocols.md's parameter table is stale; run with SWITCHYARD_UPDATE_DOCS=1 to rewrite it:\n{table}"
            );
        }
    }
}

#[test]
fn every_parameter_is_said_by_some_protocol() {
    let _: Map<String, Value> = Map::new();
    for field in Field::PARAMETERS {
        assert!(columns().into_iter().any(|c| codec(c).parameter_path(field).is_some()), "{field} has no protocol");
    }
}
