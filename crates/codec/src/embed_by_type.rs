//! Cohere's embeddings by type, as Cohere's API and its models on Bedrock
//! both answer them: `{float, base64, int8, uint8, binary, ubinary}`, each a
//! list of vectors in input order. Floats are kept as the lane's bytes;
//! the quantised forms, which only Cohere's models make, are read as the
//! integers they are.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use switchyard_ir::{EmbedResponse, Quantized, Vector};

use crate::embed::{base64_of, from_base64, vector_of};
use crate::DecodeError;

/// Each quantised form a reply holds, its vectors in input order.
pub type QuantizedVectors = Vec<(Quantized, Vec<Vec<i64>>)>;

/// What an `embeddings` object by type holds: the float vectors and each
/// quantised form.
pub type Read = (Vec<Vector>, QuantizedVectors);

/// An `embeddings` object by type, as read.
#[derive(Deserialize, Default)]
pub struct ByType {
    float: Option<Vec<Box<RawValue>>>,
    base64: Option<Vec<String>>,
    int8: Option<Vec<Vec<i64>>>,
    uint8: Option<Vec<Vec<i64>>>,
    binary: Option<Vec<Vec<i64>>>,
    ubinary: Option<Vec<Vec<i64>>>,
}

impl ByType {
    /// The float vectors (from `float`, else decoded from `base64`; none
    /// when the reply holds only quantised forms) and each quantised form.
    pub fn read(text: &str) -> Result<Read, DecodeError> {
        let by_type: ByType = serde_json::from_str(text)?;
        let quantized: QuantizedVectors = [
            (Quantized::Int8, by_type.int8),
            (Quantized::Uint8, by_type.uint8),
            (Quantized::Binary, by_type.binary),
            (Quantized::Ubinary, by_type.ubinary),
        ]
        .into_iter()
        .filter_map(|(form, vectors)| Some((form, vectors?)))
        .collect();
        let vectors = match (by_type.float, by_type.base64) {
            (Some(floats), _) => floats.into_iter().map(vector_of).collect::<Result<_, _>>()?,
            (None, Some(encoded)) => {
                encoded.iter().map(|e| from_base64(e).map(Vector::Floats)).collect::<Result<_, _>>()?
            }
            (None, None) if !quantized.is_empty() => Vec::new(),
            (None, None) => return Err(DecodeError::Json("the reply has no embeddings by type".into())),
        };
        Ok((vectors, quantized))
    }
}

/// An `embeddings` object by type, as written for a caller: each type it
/// named (`types`, Cohere's names) that the reply holds.
#[derive(Serialize)]
pub struct OutByType<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    float: Option<&'a [Vector]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base64: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    int8: Option<&'a [Vec<i64>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uint8: Option<&'a [Vec<i64>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    binary: Option<&'a [Vec<i64>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ubinary: Option<&'a [Vec<i64>]>,
}

impl<'a> OutByType<'a> {
    /// The types among `types` that `response` holds.
    pub fn of<'t>(response: &'a EmbedResponse, types: impl Iterator<Item = &'t str> + Clone) -> OutByType<'a> {
        let named = |name: &str| types.clone().any(|t| t == name);
        let form = |form: Quantized| {
            let vectors = response.quantized.iter().find(|(f, _)| *f == form).map(|(_, v)| v.as_slice());
            vectors.filter(|_| named(form.as_str()))
        };
        OutByType {
            float: named("float").then_some(response.vectors.as_slice()),
            base64: named("base64").then(|| response.vectors.iter().map(base64_of).collect()),
            int8: form(Quantized::Int8),
            uint8: form(Quantized::Uint8),
            binary: form(Quantized::Binary),
            ubinary: form(Quantized::Ubinary),
        }
    }
}

/// Cohere's `embedding_types` to ask a lane for: floats (the gateway makes
/// base64 itself) and each quantised form the caller wants.
pub fn types_to_ask(quantized: &[Quantized]) -> Vec<&'static str> {
    std::iter::once("float").chain(quantized.iter().map(|form| form.as_str())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_forms_are_read_and_written_as_named() {
        let (vectors, quantized) = ByType::read(r#"{"float":[[0.5]],"int8":[[64]],"ubinary":[[3]]}"#).unwrap();
        assert_eq!(vectors, vec![vec![0.5]]);
        assert_eq!(quantized, vec![(Quantized::Int8, vec![vec![64]]), (Quantized::Ubinary, vec![vec![3]])]);
        let response = EmbedResponse { vectors, quantized, ..EmbedResponse::default() };
        let out = serde_json::to_value(OutByType::of(&response, ["int8", "uint8"].into_iter())).unwrap();
        assert_eq!(out, serde_json::json!({"int8": [[64]]}), "uint8 was not made: left out");
        let (vectors, quantized) = ByType::read(r#"{"int8":[[1]]}"#).unwrap();
        assert!(vectors.is_empty() && quantized.len() == 1);
        assert!(ByType::read("{}").is_err());
        assert_eq!(types_to_ask(&[Quantized::Int8]), ["float", "int8"]);
    }
}
