//! Gemini's OpenAPI-subset `Schema` (function `parameters`, `responseSchema`)
//! ↔ JSON Schema, the IR's schema language.
//!
//! Read: upper-case type names become JSON Schema's (`OBJECT` → `object`),
//! `nullable` becomes a `null` member of `type`, integer-valued `enum`
//! strings become numbers and `format: enum` goes (JSON Schema's `enum` says
//! it), int64 counts sent as strings (`maxItems: "3"`) become numbers,
//! `example` becomes `examples`, and `propertyOrdering` is dropped after
//! ordering `properties` by it: every JSON-Schema target that honours an
//! order (OpenAI's structured outputs, Gemini's own `responseJsonSchema`)
//! takes it from the key order, so the order still arrives.
//!
//! Written: for the Gemini models that take `parametersJsonSchema` and
//! `responseJsonSchema` the IR schema goes there unchanged. Older models
//! (1.x, 2.0) take only the subset: types go upper-case, `null` in a type
//! becomes `nullable`, `const` becomes a one-value `enum`, `oneOf` becomes
//! `anyOf`, and the keywords the subset has no word for
//! (`additionalProperties`, `$ref`, `allOf`, ...) are left out and reported.

use serde_json::{Map, Value};
use switchyard_codec::ir::{DropReason, Dropped, Field};

/// Deeper schemas are left as they are (a hostile body cannot make the
/// converters recurse without end).
const MAX_DEPTH: u32 = 64;

/// Gemini `Schema` → JSON Schema.
pub(crate) fn to_json_schema(schema: &Value) -> Value {
    convert_in(schema, 0)
}

fn convert_in(schema: &Value, depth: u32) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    if depth > MAX_DEPTH {
        return schema.clone();
    }
    let kind = map.get("type").and_then(Value::as_str).map(str::to_ascii_lowercase);
    let kind = kind.filter(|k| k != "type_unspecified");
    let numeric = matches!(kind.as_deref(), Some("integer" | "number"));
    let ordering: Vec<&str> =
        map.get("propertyOrdering").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "type" => {
                if let Some(kind) = &kind {
                    out.insert("type".into(), Value::String(kind.clone()));
                }
            }
            "nullable" | "propertyOrdering" => {}
            "format" if value.as_str() == Some("enum") => {}
            "enum" if numeric => {
                let values = value.as_array().into_iter().flatten().map(number_if_numeric).collect();
                out.insert("enum".into(), Value::Array(values));
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" | "minProperties" | "maxProperties" => {
                out.insert(key.clone(), count(value));
            }
            "example" => {
                out.insert("examples".into(), Value::Array(vec![value.clone()]));
            }
            "items" => {
                out.insert(key.clone(), convert_in(value, depth + 1));
            }
            "anyOf" => {
                let members = value.as_array().into_iter().flatten().map(|m| convert_in(m, depth + 1)).collect();
                out.insert(key.clone(), Value::Array(members));
            }
            "properties" => {
                out.insert(key.clone(), Value::Object(ordered_properties(value, &ordering, depth)));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if map.get("nullable").and_then(Value::as_bool) == Some(true) {
        make_nullable(&mut out);
    }
    Value::Object(out)
}

/// `properties`, converted, in `propertyOrdering` order (names it does not
/// list follow in their own order).
fn ordered_properties(properties: &Value, ordering: &[&str], depth: u32) -> Map<String, Value> {
    let Value::Object(properties) = properties else {
        return Map::new();
    };
    let mut out = Map::new();
    for name in ordering {
        if let Some(property) = properties.get(*name) {
            out.insert((*name).to_owned(), convert_in(property, depth + 1));
        }
    }
    for (name, property) in properties {
        if !out.contains_key(name) {
            out.insert(name.clone(), convert_in(property, depth + 1));
        }
    }
    out
}

/// Adds `null` to what a converted schema allows.
fn make_nullable(schema: &mut Map<String, Value>) {
    match schema.get_mut("type") {
        Some(Value::String(kind)) => {
            let kind = std::mem::take(kind);
            schema.insert("type".into(), Value::Array(vec![Value::String(kind), Value::from("null")]));
        }
        Some(_) => {}
        None => {
            if let Some(Value::Array(members)) = schema.get_mut("anyOf") {
                members.push(serde_json::json!({"type": "null"}));
            }
        }
    }
}

/// An int64 the API may have written as a string.
fn count(value: &Value) -> Value {
    match value {
        Value::String(text) => text.parse::<u64>().map_or_else(|_| value.clone(), Value::from),
        other => other.clone(),
    }
}

/// An enum value of a numeric schema (Gemini writes them as strings).
fn number_if_numeric(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            serde_json::from_str::<serde_json::Number>(text).map_or_else(|_| value.clone(), Value::Number)
        }
        other => other.clone(),
    }
}

/// JSON Schema → Gemini `Schema`, for models without the JSON-Schema
/// fields. What the subset cannot say is left out and reported.
pub(crate) fn to_openapi(schema: &Value, dropped: &mut Vec<Dropped>) -> Value {
    convert_out(schema, 0, dropped)
}

/// Keywords of the subset that carry over as they are.
const KEPT: [&str; 14] = [
    "format",
    "title",
    "description",
    "required",
    "minimum",
    "maximum",
    "pattern",
    "default",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
];

/// Keywords the subset cannot say, left out without a word: they only
/// describe the schema document.
const SILENT: [&str; 4] = ["$schema", "$id", "$comment", "examples"];

fn convert_out(schema: &Value, depth: u32, dropped: &mut Vec<Dropped>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    if depth > MAX_DEPTH {
        return schema.clone();
    }
    let mut out = Map::new();
    let mut nullable = false;
    for (key, value) in map {
        match key.as_str() {
            "type" => match value {
                Value::String(kind) if kind == "null" => nullable = true,
                Value::String(kind) => {
                    out.insert("type".into(), Value::String(kind.to_ascii_uppercase()));
                }
                Value::Array(kinds) => {
                    let (nulls, others): (Vec<&Value>, Vec<&Value>) =
                        kinds.iter().partition(|k| k.as_str() == Some("null"));
                    nullable |= !nulls.is_empty();
                    match others.as_slice() {
                        [only] => {
                            let kind = only.as_str().unwrap_or_default().to_ascii_uppercase();
                            out.insert("type".into(), Value::String(kind));
                        }
                        many => {
                            let members = many
                                .iter()
                                .map(|k| serde_json::json!({"type": k.as_str().unwrap_or_default().to_ascii_uppercase()}))
                                .collect();
                            out.insert("anyOf".into(), Value::Array(members));
                        }
                    }
                }
                _ => report(dropped, DropReason::Unsupported),
            },
            "enum" => {
                let values = value.as_array().into_iter().flatten().map(as_enum_text).collect();
                out.insert("enum".into(), Value::Array(values));
                out.insert("format".into(), Value::from("enum"));
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![as_enum_text(value)]));
                out.insert("format".into(), Value::from("enum"));
            }
            "properties" => {
                let properties = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| (name.clone(), convert_out(property, depth + 1, dropped)))
                    .collect();
                out.insert(key.clone(), Value::Object(properties));
            }
            "items" => {
                out.insert(key.clone(), convert_out(value, depth + 1, dropped));
            }
            "anyOf" | "oneOf" => {
                if key == "oneOf" {
                    // "Exactly one" becomes "at least one".
                    report(dropped, DropReason::Converted);
                }
                let mut members = Vec::new();
                for member in value.as_array().into_iter().flatten() {
                    if member.get("type").and_then(Value::as_str) == Some("null")
                        && member.as_object().is_some_and(|m| m.len() == 1)
                    {
                        nullable = true;
                    } else {
                        members.push(convert_out(member, depth + 1, dropped));
                    }
                }
                match <[Value; 1]>::try_from(members) {
                    // A lone member with `null` beside it is that member, nullable.
                    Ok([Value::Object(only)]) => out.extend(only),
                    Ok([other]) => {
                        out.insert("anyOf".into(), Value::Array(vec![other]));
                    }
                    Err(members) => {
                        out.insert("anyOf".into(), Value::Array(members));
                    }
                }
            }
            kept if KEPT.contains(&kept) => {
                out.insert(key.clone(), value.clone());
            }
            silent if SILENT.contains(&silent) => {}
            _ => report(dropped, DropReason::Unsupported),
        }
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    Value::Object(out)
}

/// Gemini enums are strings.
fn as_enum_text(value: &Value) -> Value {
    match value {
        Value::String(_) => value.clone(),
        other => Value::String(other.to_string()),
    }
}

fn report(dropped: &mut Vec<Dropped>, reason: DropReason) {
    Dropped::push_once(dropped, Field::SchemaKeyword, reason);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn the_sdks_function_schemas_become_json_schema() {
        // What google-genai sends for a function declaration.
        let gemini = json!({
            "type": "OBJECT",
            "properties": {
                "unit": {"type": "STRING", "format": "enum", "enum": ["celsius", "fahrenheit"], "nullable": true},
                "city": {"type": "STRING", "description": "the city"},
                "days": {"type": "INTEGER", "format": "int32", "enum": ["1", "7"]},
                "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "maxItems": "3"},
                "when": {"anyOf": [{"type": "STRING", "format": "date-time"}, {"type": "NUMBER"}], "nullable": true}
            },
            "required": ["city"],
            "propertyOrdering": ["city", "unit"]
        });
        assert_eq!(
            to_json_schema(&gemini),
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "the city"},
                    "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "format": "int32", "enum": [1, 7]},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                    "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "number"}, {"type": "null"}]}
                },
                "required": ["city"]
            })
        );
        // The order `propertyOrdering` asked for is the key order now.
        let read = to_json_schema(&gemini);
        let keys: Vec<&str> = read["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["city", "unit", "days", "tags", "when"]);
    }

    #[test]
    fn json_schema_becomes_the_subset_with_what_it_cannot_say_reported() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "unit": {"type": ["string", "null"], "enum": ["c", "f"]},
                "kind": {"const": "reading"},
                "value": {"anyOf": [{"type": "number"}, {"type": "null"}]}
            },
            "required": ["unit"],
            "additionalProperties": false
        });
        let mut dropped = Vec::new();
        assert_eq!(
            to_openapi(&schema, &mut dropped),
            json!({
                "type": "OBJECT",
                "properties": {
                    "unit": {"type": "STRING", "enum": ["c", "f"], "format": "enum", "nullable": true},
                    "kind": {"enum": ["reading"], "format": "enum"},
                    "value": {"type": "NUMBER", "nullable": true}
                },
                "required": ["unit"]
            })
        );
        assert_eq!(dropped, vec![Dropped::new(Field::SchemaKeyword, DropReason::Unsupported)]);
    }

    #[test]
    fn schemas_deeper_than_the_limit_are_left_as_they_are() {
        // Parsed bodies nest at most 128 deep (serde_json's limit); past 64
        // the converters stop descending.
        let mut schema = json!({"type": "STRING"});
        for _ in 0..100 {
            schema = json!({"type": "ARRAY", "items": schema});
        }
        let read = to_json_schema(&schema);
        assert_eq!(read["type"], "array");
        let _ = to_openapi(&read, &mut Vec::new());
    }

    fn gemini_schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({"type": "STRING"})),
            Just(json!({"type": "INTEGER"})),
            Just(json!({"type": "NUMBER", "nullable": true})),
            Just(json!({"type": "BOOLEAN"})),
            Just(json!({"type": "STRING", "format": "enum", "enum": ["a", "b"]})),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|items| json!({"type": "ARRAY", "items": items})),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 1..4).prop_map(|properties| {
                    let names: Vec<&String> = properties.keys().collect();
                    json!({"type": "OBJECT", "properties": properties, "required": [names[0]]})
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_subset_survives_a_trip_through_json_schema(schema in gemini_schema()) {
            let mut dropped = Vec::new();
            let back = to_openapi(&to_json_schema(&schema), &mut dropped);
            prop_assert!(dropped.is_empty(), "{dropped:?}");
            prop_assert_eq!(back, schema);
        }
    }
}
