//! JSON helpers shared by the codecs: parsing with protocol-neutral errors and
//! writing values without intermediate trees.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::DecodeError;

/// Parses `body` as `T`, mapping serde errors to [`DecodeError`].
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(body).map_err(DecodeError::from)
}

/// Serialises `value` into a fresh buffer. Serialising derive-generated
/// wire structs cannot fail (string keys, no custom errors), so a failure
/// is turned into an empty object rather than a panic.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

/// Appends `text` as a JSON string, escaped exactly as `serde_json` escapes
/// it (`\"`, `\\`, the short forms of `\b \t \n \f \r`, other control
/// characters as lower-case `\u00xx`), copying unescaped runs whole: the
/// hot path of the stream encoders, which write one short string per event.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(offset) = bytes[start..].iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        let at = start + offset;
        out.extend_from_slice(&bytes[start..at]);
        match bytes[at] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            control => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(control >> 4)]);
                out.push(HEX[usize::from(control & 0xf)]);
            }
        }
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Parses tool-call argument text into a JSON value for protocols that carry
/// arguments as an object. Text that is not a JSON object is wrapped so that
/// nothing the model produced is lost.
pub fn arguments_to_value(arguments: &str) -> serde_json::Value {
    if arguments.trim().is_empty() {
        return serde_json::Value::Object(serde_json::Map::new());
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(value @ serde_json::Value::Object(_)) => value,
        Ok(other) => serde_json::json!({ "value": other }),
        Err(_) => serde_json::json!({ "_raw_arguments": arguments }),
    }
}

/// Serialises an argument object back to JSON text.
pub fn value_to_arguments(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_survive_as_objects() {
        assert_eq!(arguments_to_value(r#"{"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(arguments_to_value(""), serde_json::json!({}));
        assert_eq!(arguments_to_value("{not json"), serde_json::json!({"_raw_arguments": "{not json"}));
        assert_eq!(arguments_to_value("[1]"), serde_json::json!({"value": [1]}));
    }
}

#[cfg(test)]
mod write_str_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Byte for byte what `serde_json` writes, for any text.
        #[test]
        fn strings_are_escaped_as_serde_json_escapes_them(text in "\\PC*|[\\x00-\\x20\"\\\\a\\x7f]*") {
            let mut mine = Vec::new();
            write_str(&mut mine, &text);
            prop_assert_eq!(mine, serde_json::to_vec(&text).unwrap_or_default());
        }
    }
}
