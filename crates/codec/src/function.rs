//! The function-tool shapes OpenAI Chat Completions and Cohere v2 share: a
//! tool `{"type": "function", "function": {"name", "description",
//! "parameters"}}` and a call `{"id", "type": "function", "function":
//! {"name", "arguments"}}`, read and written in one place. What differs
//! (OpenAI's custom tools and `extra_content`, Cohere's id carrier and its
//! required `parameters`) stays with each protocol.

use serde_json::{json, Map, Value};
use switchyard_ir::{Tool, ToolUse};

use crate::DecodeError;

/// Reads a function tool at `path`, taking its parts (a tool's parameters
/// are its largest member; moved, not copied). A missing or `null`
/// `parameters` is `Value::Null` (a function without arguments); `strict`
/// is the tool's.
pub fn read_tool(value: Value, path: &str) -> Result<Tool, DecodeError> {
    let Value::Object(mut tool) = value else {
        return Err(DecodeError::invalid(path, format!("{path} must be an object")));
    };
    match tool.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "function" => {}
        Some(other) => {
            return Err(DecodeError::invalid(
                format!("{path}.type"),
                format!("{path}.type must be function, not {other}"),
            ))
        }
    }
    let function_path = format!("{path}.function");
    let mut function = match tool.remove("function") {
        Some(Value::Object(function)) => function,
        Some(_) => return Err(DecodeError::invalid(&function_path, format!("{function_path} must be an object"))),
        None => return Err(DecodeError::invalid(&function_path, format!("{function_path} is required"))),
    };
    let parameters = match function.remove("parameters") {
        None | Some(Value::Null) => Value::Null,
        Some(parameters @ Value::Object(_)) => parameters,
        Some(_) => {
            let param = format!("{function_path}.parameters");
            return Err(DecodeError::invalid(&param, format!("{param} must be an object")));
        }
    };
    let strict = match function.remove("strict") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(strict)) => Some(strict),
        Some(_) => {
            let param = format!("{function_path}.strict");
            return Err(DecodeError::invalid(&param, format!("{param} must be a boolean")));
        }
    };
    Ok(Tool {
        name: take_string(&mut function, "name", &function_path)?.ok_or_else(|| {
            DecodeError::invalid(format!("{function_path}.name"), format!("{function_path}.name is required"))
        })?,
        description: take_string(&mut function, "description", &function_path)?,
        parameters,
        strict,
        ..Tool::default()
    })
}

/// Writes a function tool; `parameters` only when the tool has them. Its
/// `strict` is the writer's to say (OpenAI's `function.strict`; Cohere has
/// only a request-wide flag).
pub fn tool_value(tool: &Tool) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), Value::String(tool.name.clone()));
    if let Some(description) = &tool.description {
        function.insert("description".into(), Value::String(description.clone()));
    }
    if !tool.parameters.is_null() {
        function.insert("parameters".into(), tool.parameters.clone());
    }
    json!({"type": "function", "function": function})
}

/// Reads a function call at `path`, taking its parts: its `id` (empty when
/// missing), name and argument text (an object where text belongs is kept
/// as its JSON text).
pub fn read_call(value: Value, path: &str) -> Result<ToolUse, DecodeError> {
    let Value::Object(mut call) = value else {
        return Err(DecodeError::invalid(path, format!("{path} must be an object")));
    };
    let function_path = format!("{path}.function");
    let mut function = match call.remove("function") {
        Some(Value::Object(function)) => function,
        Some(_) => return Err(DecodeError::invalid(&function_path, format!("{function_path} must be an object"))),
        None => return Err(DecodeError::invalid(&function_path, format!("{function_path} is required"))),
    };
    Ok(ToolUse::new(
        take_string(&mut call, "id", path)?.unwrap_or_default(),
        take_string(&mut function, "name", &function_path)?.unwrap_or_default(),
        arguments_text(function.remove("arguments")),
    ))
}

/// Writes a function call under `id` (the call's own, or one carrying more).
pub fn call_value(id: &str, call: &ToolUse) -> Value {
    json!({"id": id, "type": "function", "function": {"name": call.name, "arguments": call.input}})
}

/// Argument text: a string as it is, anything else as its JSON text.
pub fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        Some(other) => other.to_string(),
    }
}

fn take_string(object: &mut Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, DecodeError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(DecodeError::invalid(format!("{path}.{key}"), format!("{path}.{key} must be a string"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_and_calls_read_back_what_is_written() {
        let tool = Tool::function("f", Some("d".into()), json!({"type": "object"}));
        assert_eq!(read_tool(tool_value(&tool), "tools[0]"), Ok(tool));
        let strict = json!({"type": "function", "function": {"name": "f", "strict": true}});
        assert_eq!(read_tool(strict, "tools[0]").map(|t| t.strict), Ok(Some(true)));
        let bare = Tool::function("g", None, Value::Null);
        assert_eq!(tool_value(&bare), json!({"type": "function", "function": {"name": "g"}}));
        let call = ToolUse::new("c1", "f", "{\"a\":1}");
        assert_eq!(read_call(call_value("c1", &call), "tool_calls[0]"), Ok(call));
        let object_arguments = json!({"id": "c", "function": {"name": "f", "arguments": {"a": 1}}});
        assert_eq!(read_call(object_arguments, "t").map(|c| c.input), Ok("{\"a\":1}".to_owned()));
    }

    #[test]
    fn bad_tools_name_the_field() {
        let cases = [
            (json!({"type": "retrieval"}), "tools[0].type"),
            (json!({"type": "function"}), "tools[0].function"),
            (json!({"function": {"description": "x"}}), "tools[0].function.name"),
            (json!({"function": {"name": "f", "parameters": []}}), "tools[0].function.parameters"),
            (json!([]), "tools[0]"),
        ];
        for (tool, param) in cases {
            assert!(
                matches!(read_tool(tool.clone(), "tools[0]"), Err(DecodeError::Invalid { param: Some(ref p), .. }) if p == param),
                "{tool}"
            );
        }
    }
}
