//! From the YAML tree to the raw serde forms, reporting every shape problem
//! in one run: serde stops at the first, so each problem found is recorded,
//! its key taken out of the tree, and decoding tried again. A newcomer with
//! two misspelt keys and a dangling reference hears of all three at once.

use serde_path_to_error::Segment;
use serde_yaml_ng::Value;

use crate::raw::RawConfig;
use crate::Issue;

/// More passes than any real file needs; a bound, not a budget.
const MAX_PASSES: usize = 64;

/// Decodes `tree`, pushing one issue per shape problem. `None` when the
/// file cannot be decoded even with the offending keys taken out (a
/// required key is missing or has the wrong type).
pub fn decode(mut tree: Value, issues: &mut Vec<Issue>) -> Option<RawConfig> {
    let mut taken_out: Vec<String> = Vec::new();
    for _ in 0..MAX_PASSES {
        let err = match serde_path_to_error::deserialize::<_, RawConfig>(tree.clone()) {
            Ok(raw) => return Some(raw),
            Err(err) => err,
        };
        let segments: Vec<Segment> = err.path().iter().cloned().collect();
        let path = display_path(&err.path().to_string());
        let message = err.into_inner().to_string();
        if let Some(field) = missing_field(&message) {
            let full = if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") };
            // A required key taken out for its type was already reported.
            if !taken_out.contains(&full) {
                issues.push(Issue::new(&path, format!("`{field}` is required here"), required_fix(field, &path)));
            }
            return None;
        }
        let fix = if message.contains("unknown field") {
            "remove or rename the key; the message lists the keys allowed here"
        } else if message.contains("unknown variant") {
            "use one of the values the message lists"
        } else {
            "give the value the type the message names"
        };
        issues.push(Issue::new(&path, message, fix));
        if !take_out(&mut tree, &segments) {
            return None;
        }
        taken_out.push(path);
    }
    None
}

/// serde_path_to_error writes the root as `.`.
fn display_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        path.to_owned()
    }
}

/// The field named by serde's "missing field `x`" message.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// What to write for a required key, in the file's own terms.
fn required_fix(field: &str, path: &str) -> String {
    let under = if path.is_empty() { String::from("at the top level") } else { format!("under `{path}`") };
    let example = match field {
        "members" => "the lanes this pool routes over, e.g. `members: [{ model: gpt-4o-mini }]`",
        "model" => "a lane's name from `models:`, e.g. `model: gpt-4o-mini`",
        "provider" => "a provider's name from `providers:`, e.g. `provider: openai`",
        "protocol" => "the wire protocol the backend speaks: openai, responses, anthropic, gemini, cohere or bedrock",
        "base_url" => "the backend's URL, e.g. `base_url: https://api.openai.com`",
        "url" => "the endpoint's URL, e.g. `url: https://hooks.example.com/route`",
        _ => "its value (the book's docs/configure.md shows its form)",
    };
    format!("add `{field}:` {under}: {example}")
}

/// Removes the node `segments` leads to; false when the path cannot be
/// followed (then decoding stops rather than loop on the same problem).
fn take_out(tree: &mut Value, segments: &[Segment]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut node = tree;
    for segment in parents {
        node = match (segment, node) {
            (Segment::Map { key }, Value::Mapping(map)) => match map.get_mut(key.as_str()) {
                Some(child) => child,
                None => return false,
            },
            (Segment::Seq { index }, Value::Sequence(items)) => match items.get_mut(*index) {
                Some(child) => child,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, node) {
        (Segment::Map { key }, Value::Mapping(map)) => map.remove(key.as_str()).is_some(),
        (Segment::Seq { index }, Value::Sequence(items)) if *index < items.len() => {
            items.remove(*index);
            true
        }
        _ => false,
    }
}
