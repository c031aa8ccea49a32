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

/// `capabilities` as if the fact kept under `name` said what every model
/// takes (`Capabilities::ALL`).
fn lifted(capabilities: &Capabilities, name: &str) -> Capabilities {
    let all = Capabilities::ALL;
    let mut out = *capabilities;
    match name {
        "limits" => (out.max_output, out.reasoning) = (all.max_output, all.reasoning),
        "adaptive_thinking" => out.adaptive_thinking = all.adaptive_thinking,
        "effort" => out.effort = all.effort,
        "temperature_with_top_p" => out.temperature_with_top_p = all.temperature_with_top_p,
        "prefill" => out.prefill = all.prefill,
        "system_messages" => out.system_messages = all.system_messages,
        "bedrock_betas" => out.bedrock_betas = all.bedrock_betas,
        // Every level, and thinking off: more than any protocol's own.
        "efforts" => {
            use switchyard_protocol::ir::{Effort, Efforts};
            out.efforts = Some(Efforts::of(&Effort::ALL).with_off());
        }
        "refused_while_reasoning" => out.refused_while_reasoning = all.refused_while_reasoning,
        "thinks_by_default" => out.thinks_by_default = all.thinks_by_default,
        _ => {}
    }
    out
}

/// One row of the model-drop table: a parameter a lane protocol has a
/// field for, which some models cannot take, and the fact that says so.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ModelDrop {
    field: &'static str,
    lane: String,
    fact: &'static str,
    models: Vec<String>,
}

/// Whether writing `field` (as the lane's own caller says it) for a model
/// with `capabilities` on `lane` drops it.
fn drops(field: Field, lane: Protocol, model: &str, capabilities: &Capabilities) -> bool {
    let Some(said) = fragment(field, lane) else { return false };
    let mut body = base(lane);
    merge(&mut body, &said);
    let mut request = codec(Column::Of(lane)).read_request(&serde_json::to_vec(&body).unwrap()).unwrap();
    model.clone_into(&mut request.model);
    let written = codec(Column::Of(lane)).write_request_for(&request, capabilities);
    written.dropped.iter().any(|d| d.field == field && d.reason != switchyard_protocol::ir::DropReason::Converted)
}

/// The lane protocols a model of the facts is served on (its vendor's API,
/// and Bedrock for the families AWS serves); image models take none of the
/// table's parameters.
fn served_on(id: &str) -> &'static [Protocol] {
    use Protocol::*;
    let family = |prefix: &str| id.starts_with(prefix);
    if family("claude-") {
        &[Anthropic, Bedrock]
    } else if family("gpt-oss") {
        &[OpenAi, Responses, Bedrock]
    } else if family("gpt-") || family("o1") || family("o3") || family("o4") || family("grok-") {
        &[OpenAi, Responses]
    } else if family("gemini-") {
        &[Gemini]
    } else if family("command-") {
        &[Cohere]
    } else if family("nova-") && !family("nova-canvas") {
        &[Bedrock]
    } else {
        &[]
    }
}

/// Every drop of a parameter a lane's protocol has, made because the model
/// cannot take it: found by writing each parameter for each model the facts
/// know, on each lane protocol that serves it, and named by the one fact which, saying
/// the model takes what every model takes, carries it (a drop no fact
/// accounts for fails). The engine's own rules
/// (sampling a reasoning model refuses, reasoning asked of a model that
/// does not reason) are read from the facts that drive them.
fn model_drops() -> Vec<ModelDrop> {
    use std::collections::BTreeMap;
    let mut rows: BTreeMap<(&'static str, String, &'static str), Vec<String>> = BTreeMap::new();
    let mut unexplained = Vec::new();
    for fact in &switchyard_config::facts::snapshot().models {
        for &lane in served_on(&fact.id) {
            let capabilities = switchyard_config::facts::capabilities_of(fact, lane);
            for field in Field::PARAMETERS {
                if !drops(field, lane, &fact.id, &capabilities) {
                    continue;
                }
                let cause =
                    fact.stated().into_iter().find(|name| !drops(field, lane, &fact.id, &lifted(&capabilities, name)));
                let Some(cause) = cause else {
                    unexplained.push(format!("{field} for {} on a {lane} lane", fact.id));
                    continue;
                };
                rows.entry((field.as_str(), lane.to_string(), cause)).or_default().push(fact.id.clone());
            }
        }
        // The engine's: what a reasoning model refuses while it reasons,
        // and reasoning asked of a model that does not reason, on any lane.
        for name in fact.refused_while_reasoning.iter().flatten() {
            rows.entry((sampling_name(name), "any".into(), "refused_while_reasoning"))
                .or_default()
                .push(fact.id.clone());
        }
        if fact.reasoning == Some(false) {
            for field in [Field::ReasoningEffort, Field::ReasoningBudget] {
                rows.entry((field.as_str(), "any".into(), "limits")).or_default().push(fact.id.clone());
            }
        }
    }
    assert!(unexplained.is_empty(), "dropped, and no fact of the model says why:\n{}", unexplained.join("\n"));
    rows.into_iter().map(|((field, lane, fact), models)| ModelDrop { field, lane, fact, models }).collect()
}

/// A sampling parameter's table name, as the facts name it.
fn sampling_name(name: &str) -> &'static str {
    Field::PARAMETERS
        .into_iter()
        .find(|field| field.as_str() == name)
        .unwrap_or_else(|| panic!("`{name}` is no parameter of the table"))
        .as_str()
}

/// The model-drop table of `docs/protocols.md`.
fn model_drop_table() -> String {
    let mut table = String::from("| parameter | lane | fact | models |\n|---|---|---|---|\n");
    for row in model_drops() {
        table.push_str(&format!("| `{}` | {} | `{}` | {} |\n", row.field, row.lane, row.fact, row.models.join(", ")));
    }
    table
}

/// Every drop the parameter table lists is justified: a "—" cell is a
/// protocol without the field (the table's data says so and the writer
/// reports it `unsupported` or `converted`, never as the model's), and a
/// drop of a parameter the lane has is a model's, named in the model-drop
/// table by a fact every model listed states, with its source.
#[test]
fn every_drop_the_table_lists_is_unrepresentable_or_a_model_fact_with_its_source() {
    use switchyard_protocol::ir::DropReason;
    for field in Field::PARAMETERS {
        for caller in columns() {
            let Some(said) = fragment_of(field, caller) else { continue };
            let mut body = base_of(caller);
            merge(&mut body, &said);
            let request = codec(caller).read_request(&serde_json::to_vec(&body).unwrap()).unwrap();
            for lane in columns() {
                if fragment_of(field, lane).is_some() {
                    continue;
                }
                let written = codec(lane).write_request_for(&request, &Capabilities::ALL);
                for entry in written.dropped.iter().filter(|d| d.field == field) {
                    assert!(
                        matches!(entry.reason, DropReason::Unsupported | DropReason::Converted),
                        "{field}: {caller} -> {lane} has no field, but its drop is {:?}",
                        entry.reason
                    );
                }
            }
        }
    }
    let facts = &switchyard_config::facts::snapshot().models;
    let rows = model_drops();
    assert!(!rows.is_empty());
    for row in &rows {
        for model in &row.models {
            let fact = facts.iter().find(|f| &f.id == model).unwrap();
            assert!(fact.stated().contains(&row.fact), "{model} does not state `{}`", row.fact);
            let source = fact.sources.get(row.fact).map(String::as_str).unwrap_or("");
            assert!(source.starts_with("https://"), "{model}: `{}` has no source", row.fact);
        }
    }
}

const DROPS_BEGIN: &str = "<!-- model-drop-table: generated by crates/protocol/tests/parameters.rs -->\n";
const DROPS_END: &str = "<!-- model-drop-table: end -->";

#[test]
fn the_docs_model_drop_table_is_the_facts() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocols.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    let start = docs.find(DROPS_BEGIN).expect("docs/protocols.md has no model-drop table marker") + DROPS_BEGIN.len();
    let end = docs[start..].find(DROPS_END).expect("docs/protocols.md has no model-drop table end") + start;
    let table = model_drop_table();
    if docs[start..end] != table {
        if std::env::var_os("SWITCHYARD_UPDATE_DOCS").is_some() {
            let updated = format!("{}{table}{}", &docs[..start], &docs[end..]);
            std::fs::write(&path, updated).unwrap();
        } else {
            panic!("docs/protocols.md's model-drop table is stale; run with SWITCHYARD_UPDATE_DOCS=1 to rewrite it:\n{table}");
        }
    }
}
