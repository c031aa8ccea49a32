//! A content part's members the IR does not model, read beside the data
//! it does (OpenAI's `image_url.detail`, a part's `prompt_cache_breakpoint`):
//! taken out of the part as `Unmodelled` blocks marked `beside`, one per
//! member, which follow the part's own block. A writer of the same
//! protocol merges each back into the part it wrote for that block
//! (`Unmodelled::merge_into`); any other reports it at
//! `<under>.<member>` (`messages.content.image_url.detail`).

use serde_json::{Map, Value};
use switchyard_ir::{Block, Protocol, Unmodelled};

/// Takes from `part` every member but `modelled`, and from its object
/// `inner` (`image_url`) every member but `inner_modelled`, as blocks to
/// follow the part's own. `under` is the part's path by type
/// (`messages.content.image_url`); an inner object named after the type,
/// as OpenAI names them, is not named twice (`messages.content.image_url.detail`).
pub fn take(
    origin: Protocol,
    under: &str,
    part: &mut Map<String, Value>,
    modelled: &[&str],
    inner: Option<(&str, &[&str])>,
) -> Vec<Block> {
    let mut blocks = Vec::new();
    let block = |path: String, value: Map<String, Value>| {
        Block::Unmodelled(Unmodelled { origin, path, value: Value::Object(value), beside: true })
    };
    if let Some((name, inner_modelled)) = inner {
        if let Some(Value::Object(object)) = part.get_mut(name) {
            for (key, member) in take_members(object, inner_modelled) {
                let mut wrapped = Map::new();
                wrapped.insert(key.clone(), member);
                let mut value = Map::new();
                value.insert(name.to_owned(), Value::Object(wrapped));
                let path = match under.strip_suffix(name).is_some_and(|head| head.ends_with('.')) {
                    true => format!("{under}.{key}"),
                    false => format!("{under}.{name}.{key}"),
                };
                blocks.push(block(path, value));
            }
        }
    }
    for (key, member) in take_members(part, modelled) {
        let mut value = Map::new();
        value.insert(key.clone(), member);
        blocks.push(block(format!("{under}.{key}"), value));
    }
    blocks
}

fn take_members(object: &mut Map<String, Value>, modelled: &[&str]) -> Vec<(String, Value)> {
    let keys: Vec<String> = object.keys().filter(|key| !modelled.contains(&key.as_str())).cloned().collect();
    keys.into_iter().filter_map(|key| object.remove_entry(&key)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn members_beside_the_data_become_blocks_that_merge_back() {
        let Value::Object(mut part) =
            json!({"image_url": {"url": "u", "detail": "low"}, "prompt_cache_breakpoint": {}})
        else {
            unreachable!()
        };
        let blocks = take(
            Protocol::OpenAi,
            "messages.content.image_url",
            &mut part,
            &["image_url"],
            Some(("image_url", &["url"])),
        );
        assert_eq!(part, *json!({"image_url": {"url": "u"}}).as_object().unwrap_or(&Map::new()));
        let paths: Vec<&str> = blocks
            .iter()
            .filter_map(|b| if let Block::Unmodelled(u) = b { Some(u.path.as_str()) } else { None })
            .collect();
        assert_eq!(paths, ["messages.content.image_url.detail", "messages.content.image_url.prompt_cache_breakpoint"]);
        for block in &blocks {
            if let Block::Unmodelled(block) = block {
                assert!(block.beside);
                Unmodelled::merge_into(&block.value, &mut part);
            }
        }
        assert_eq!(
            Value::Object(part),
            json!({"image_url": {"url": "u", "detail": "low"}, "prompt_cache_breakpoint": {}})
        );
    }
}
