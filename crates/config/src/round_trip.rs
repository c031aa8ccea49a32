//! The config file's own text through the admin API and back. Shown: the
//! operator's text with each secret replaced where it stands (comments and
//! layout kept), by the rules of `redact`. Sent back: each placeholder at
//! the path it was shown at, unchanged, takes the running secret's own text
//! again; any other placeholder is refused with its path, so a config
//! written through the API never holds `<redacted>`. Everything else the
//! operator sent is kept verbatim.

use std::collections::HashMap;
use std::ops::Range;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_yaml_ng::Value;

use crate::interpolate;
use crate::redact::{self, REDACTED};
use crate::Issue;

/// One step of a path into the file's tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    Key(String),
    Index(usize),
}

type TreePath = Vec<Step>;

/// `pools.fast.members[1].model`, as issues name paths.
fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) if out.is_empty() => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

/// A string the redaction rules change: where, what it is, what is shown.
#[derive(Debug)]
struct Hidden {
    path: TreePath,
    value: String,
    shown: String,
}

fn parse(text: &str) -> Option<Value> {
    serde_yaml_ng::from_str(&interpolate::protect(text)).ok()
}

/// Every string of `tree` the redaction rules change.
fn hidden_in(tree: &Value) -> Vec<Hidden> {
    let mut shown = tree.clone();
    redact::redact_tree(&mut shown);
    let mut out = Vec::new();
    differences(tree, &shown, &mut Vec::new(), &mut out);
    out
}

fn key_name(key: &Value) -> String {
    match key {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        _ => "?".to_owned(),
    }
}

fn differences(before: &Value, after: &Value, path: &mut TreePath, out: &mut Vec<Hidden>) {
    match (before, after) {
        (Value::String(value), Value::String(shown)) if value != shown => out.push(Hidden {
            path: path.clone(),
            value: interpolate::unprotect(value),
            shown: interpolate::unprotect(shown),
        }),
        (Value::Sequence(before), Value::Sequence(after)) => {
            for (index, (b, a)) in before.iter().zip(after).enumerate() {
                path.push(Step::Index(index));
                differences(b, a, path, out);
                path.pop();
            }
        }
        (Value::Mapping(before), Value::Mapping(after)) => {
            for ((key, b), (_, a)) in before.iter().zip(after.iter()) {
                path.push(Step::Key(key_name(key)));
                differences(b, a, path, out);
                path.pop();
            }
        }
        (Value::Tagged(before), Value::Tagged(after)) => differences(&before.value, &after.value, path, out),
        _ => {}
    }
}

/// Every string of `tree` (unprotected) with its path.
fn strings(tree: &Value, path: &mut TreePath, out: &mut Vec<(TreePath, String)>) {
    match tree {
        Value::String(text) => out.push((path.clone(), interpolate::unprotect(text))),
        Value::Sequence(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(Step::Index(index));
                strings(item, path, out);
                path.pop();
            }
        }
        Value::Mapping(map) => {
            for (key, item) in map {
                path.push(Step::Key(key_name(key)));
                strings(item, path, out);
                path.pop();
            }
        }
        Value::Tagged(tagged) => strings(&tagged.value, path, out),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn at<'a>(tree: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let mut node = tree;
    for step in path {
        while let Value::Tagged(tagged) = node {
            node = &tagged.value;
        }
        node = match (step, node) {
            (Step::Key(key), Value::Mapping(map)) => map.iter().find(|(k, _)| key_name(k) == *key).map(|(_, v)| v)?,
            (Step::Index(index), Value::Sequence(items)) => items.get(*index)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Where a scalar value stands in the text: its bytes, and whether it is a
/// block scalar (`|`, `>`: its bytes hold only the content).
#[derive(Debug, Clone)]
struct Spot {
    bytes: Range<usize>,
    block: bool,
}

/// A mapping or sequence being read, and whether it pushed a step.
enum Frame {
    Map { key: Option<String>, stepped: bool },
    Seq { next: usize, stepped: bool },
}

/// The step to the next value inside the innermost frame.
fn next_step(frames: &mut [Frame]) -> Option<Option<Step>> {
    match frames.last_mut() {
        None => Some(None),
        Some(Frame::Map { key, .. }) => Some(Some(Step::Key(key.take()?))),
        Some(Frame::Seq { next, .. }) => {
            let step = Step::Index(*next);
            *next += 1;
            Some(Some(step))
        }
    }
}

/// Every scalar value of `text` by path; `None` when the text does not
/// parse or a key is not a scalar.
fn spots(text: &str) -> Option<HashMap<TreePath, Spot>> {
    // The parser counts characters; edits are made in bytes.
    let offsets: Vec<usize> = text.char_indices().map(|(at, _)| at).chain([text.len()]).collect();
    let guarded = interpolate::protect_in_place(text);
    let mut frames: Vec<Frame> = Vec::new();
    let mut path: TreePath = Vec::new();
    let mut out = HashMap::new();
    for event in Parser::new_from_str(&guarded) {
        let (event, span) = event.ok()?;
        let expecting_key = matches!(frames.last(), Some(Frame::Map { key: None, .. }));
        match event {
            Event::Scalar(value, ..) if expecting_key => {
                if let Some(Frame::Map { key, .. }) = frames.last_mut() {
                    *key = Some(value.into_owned());
                }
            }
            Event::Scalar(_, style, ..) => {
                let step = next_step(&mut frames)?;
                let mut full = path.clone();
                full.extend(step);
                let start = *offsets.get(span.start.index())?;
                let end = *offsets.get(span.end.index())?;
                // A quoted scalar's span can run on over the blanks after it.
                let end = start + text.get(start..end)?.trim_end_matches([' ', '\t']).len();
                let bytes = start..end;
                out.insert(full, Spot { bytes, block: matches!(style, ScalarStyle::Literal | ScalarStyle::Folded) });
            }
            Event::SequenceStart(..) | Event::MappingStart(..) | Event::Alias(_) if expecting_key => return None,
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let step = next_step(&mut frames)?;
                let stepped = step.is_some();
                path.extend(step);
                frames.push(match event {
                    Event::SequenceStart(..) => Frame::Seq { next: 0, stepped },
                    _ => Frame::Map { key: None, stepped },
                });
            }
            Event::Alias(_) => {
                next_step(&mut frames)?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(Frame::Map { stepped: true, .. } | Frame::Seq { stepped: true, .. }) = frames.pop() {
                    path.pop();
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// A string as a double-quoted YAML scalar (JSON's quoting is YAML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{REDACTED}\""))
}

/// `text` with each byte range replaced.
fn splice(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(range, _)| range.start);
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (range, with) in edits {
        out.push_str(text.get(from..range.start).unwrap_or_default());
        out.push_str(&with);
        from = range.end;
    }
    out.push_str(text.get(from..).unwrap_or_default());
    out
}

/// `text` (a config file) as the admin API shows it: its own text, each
/// secret replaced where it stands; or, where a secret cannot be replaced
/// in place (a block scalar, one reached through an alias), the tree
/// written out again. `None` when it is not YAML.
pub fn redacted(text: &str) -> Option<String> {
    in_place(text).or_else(|| redact::rewritten(text))
}

fn in_place(text: &str) -> Option<String> {
    let tree = parse(text)?;
    let hidden = hidden_in(&tree);
    let spots = spots(text)?;
    let mut edits = Vec::with_capacity(hidden.len());
    for secret in &hidden {
        let spot = spots.get(&secret.path).filter(|spot| !spot.block)?;
        edits.push((spot.bytes.clone(), quoted(&secret.shown)));
    }
    let out = splice(text, edits);
    // It shows no more than the tree written out again would: the same
    // tree, and no hidden value anywhere else (a comment, an anchor's
    // first use).
    let mut expected = tree;
    redact::redact_tree(&mut expected);
    if parse(&out)? != expected {
        return None;
    }
    let visible = |secret: &Hidden| secret.value.len() >= 4 && out.contains(secret.value.as_str());
    if hidden.iter().any(visible) {
        return None;
    }
    Some(out)
}

/// A config's text sent back through the admin API, placeholders put back.
#[derive(Debug)]
pub struct Restored {
    /// The text to validate, apply and write: what was sent, with each
    /// placeholder replaced by the running secret's own text.
    pub text: String,
    /// The running secrets put back (for scrubbing an answer that could
    /// quote them).
    pub secrets: Vec<String>,
}

/// `sent` (a whole config, as the admin API takes it) with every
/// `<redacted>` put back from `running` (the text serving now): a
/// placeholder that comes back at the path it was shown at, exactly as
/// shown, takes the running secret, provided every URL beside it (the
/// secret's destination: a provider's `base_url`) is unchanged. Any other
/// placeholder (moved, edited, new, or beside a changed URL) is an issue
/// naming its path. A text without placeholders comes back as it was sent.
pub fn restored(sent: &str, running: &str) -> Result<Restored, Vec<Issue>> {
    let kept = || Restored { text: sent.to_owned(), secrets: Vec::new() };
    if !sent.contains(REDACTED) {
        return Ok(kept());
    }
    // A text that does not parse is for the loader to refuse, with its own words.
    let Some(tree) = parse(sent) else { return Ok(kept()) };
    let running_tree = parse(running).unwrap_or(Value::Null);
    let running_hidden: HashMap<TreePath, Hidden> =
        hidden_in(&running_tree).into_iter().map(|h| (h.path.clone(), h)).collect();
    let running_spots = spots(running).unwrap_or_default();
    let sent_spots = spots(sent);
    // Which placeholders stand where a secret would: in a URL, or where
    // redaction hides a value (a probe value there would be hidden too).
    let mut probe = tree.clone();
    probe_placeholders(&mut probe);
    let secret_places: Vec<TreePath> = hidden_in(&probe).into_iter().map(|h| h.path).collect();

    let mut listed = Vec::new();
    strings(&tree, &mut Vec::new(), &mut listed);
    let mut issues = Vec::new();
    let mut back: Vec<(TreePath, &Hidden)> = Vec::new();
    for (path, value) in listed.iter().filter(|(_, value)| value.contains(REDACTED)) {
        let shown_here = running_hidden.get(path).filter(|secret| secret.shown == *value);
        match shown_here {
            Some(secret) => match moved_destination(&tree, &running_tree, path) {
                Some(changed) => issues.push(Issue::new(
                    &dotted(path),
                    format!(
                        "`{REDACTED}` stands for the running secret here, but `{}` beside it changed: the secret is not sent to a new destination unseen",
                        dotted(&changed)
                    ),
                    "write the secret itself (or a ${VAR} reference) here, or keep the destination",
                )),
                None => back.push((path.clone(), secret)),
            },
            None if value.contains("://") || secret_places.contains(path) => issues.push(Issue::new(
                &dotted(path),
                format!(
                    "`{REDACTED}` is the placeholder the admin API shows for a secret, and no running secret at this path is shown as `{value}`"
                ),
                "write the secret itself or a ${VAR} reference (a placeholder keeps the running secret only at the path it was shown at, unchanged)",
            )),
            // Text that merely holds the word (a guardrail's replacement).
            None => {}
        }
    }
    let Some(sent_spots) = sent_spots else {
        issues.extend(back.iter().map(|(path, _)| unplaceable(path)));
        return Err(issues);
    };
    let mut verbatim = Vec::new();
    let mut requoted = Vec::new();
    for (path, secret) in &back {
        match sent_spots.get(path).filter(|spot| !spot.block) {
            Some(spot) => {
                let own = running_spots
                    .get(path)
                    .filter(|spot| !spot.block)
                    .and_then(|spot| running.get(spot.bytes.clone()))
                    .map_or_else(|| quoted(&secret.value), str::to_owned);
                verbatim.push((spot.bytes.clone(), own));
                requoted.push((spot.bytes.clone(), quoted(&secret.value)));
            }
            None => issues.push(unplaceable(path)),
        }
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    let secrets: Vec<String> = back.iter().map(|(_, secret)| secret.value.clone()).collect();
    // The running secret's own text reads the same here, unless its quoting
    // meant something else where it stood (a plain scalar moved into a flow
    // mapping): then it goes in quoted.
    let text = splice(sent, verbatim);
    let reads_back = parse(&text).is_some_and(|tree| {
        back.iter().all(|(path, secret)| {
            at(&tree, path).and_then(Value::as_str).is_some_and(|v| interpolate::unprotect(v) == secret.value)
        })
    });
    let text = if reads_back { text } else { splice(sent, requoted) };
    Ok(Restored { text, secrets })
}

fn unplaceable(path: &[Step]) -> Issue {
    Issue::new(
        &dotted(path),
        format!("the running secret cannot be put back in place of this `{REDACTED}` (a block scalar or an alias)"),
        "write the secret itself or a ${VAR} reference",
    )
}

/// Every string holding a placeholder set to a plain probe value.
fn probe_placeholders(tree: &mut Value) {
    match tree {
        Value::String(text) if text.contains(REDACTED) => *text = "placeholder-probe".to_owned(),
        Value::Sequence(items) => items.iter_mut().for_each(probe_placeholders),
        Value::Mapping(map) => map.iter_mut().for_each(|(_, item)| probe_placeholders(item)),
        Value::Tagged(tagged) => probe_placeholders(&mut tagged.value),
        _ => {}
    }
}

/// The first URL that differs from the running one within the entry that
/// holds `path` (its first two steps: `providers.openai`), if any.
fn moved_destination(sent: &Value, running: &Value, path: &[Step]) -> Option<TreePath> {
    let entry = &path[..path.len().min(2)];
    let (Some(sent_entry), running_entry) = (at(sent, entry), at(running, entry)) else { return None };
    let mut urls = Vec::new();
    strings(sent_entry, &mut entry.to_vec(), &mut urls);
    let mut running_urls = Vec::new();
    if let Some(running_entry) = running_entry {
        strings(running_entry, &mut entry.to_vec(), &mut running_urls);
    }
    urls.into_iter().filter(|(_, value)| value.contains("://") && !value.contains(REDACTED)).find_map(|(at, value)| {
        let before = running_urls.iter().find(|(p, _)| *p == at).map(|(_, v)| v);
        (before != Some(&value)).then_some(at)
    })
}

/// True when `text` holds no config at all (nothing, or only comments).
pub fn is_empty(text: &str) -> bool {
    match parse(text) {
        Some(Value::Null) => true,
        Some(Value::Mapping(map)) => map.is_empty(),
        _ => text.trim().is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNNING: &str = "# The gateway of the platform team.
providers:
  # Our OpenAI account; rotated monthly.
  openai: { protocol: openai, base_url: \"https://api.openai.com\", api_key: sk-live-running-0123 }
  anthropic:
    protocol: anthropic
    base_url: https://api.anthropic.com
    api_key: \"${ANTHROPIC_KEY}\"
models:
  gpt: { provider: openai }
pools:
  main:
    members:
      - { model: gpt, weight: 3 } # the usual
operator:
  alerts:
    webhook: https://hooks.slack.com/services/T000/B000/SECRETPATH
admin:
  tokens: [admin-token-literal-1, \"${ADMIN_TOKEN}\"]
";

    #[test]
    fn shown_in_place_with_comments_and_no_secret() {
        let shown = redacted(RUNNING).unwrap();
        for secret in ["sk-live-running-0123", "SECRETPATH", "T000", "admin-token-literal-1"] {
            assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
        }
        for kept in [
            "# The gateway of the platform team.",
            "# Our OpenAI account; rotated monthly.",
            "# the usual",
            "${ANTHROPIC_KEY}",
            "${ADMIN_TOKEN}",
        ] {
            assert!(shown.contains(kept), "{kept} missing:\n{shown}");
        }
        assert!(shown.contains("api_key: \"<redacted>\" }"), "{shown}");
        assert!(shown.contains("webhook: \"https://hooks.slack.com/<redacted>\""), "{shown}");
        // Only the secrets' lines differ.
        let changed = RUNNING.lines().zip(shown.lines()).filter(|(a, b)| a != b).count();
        assert_eq!(changed, 3, "{shown}");
    }

    #[test]
    fn a_secret_also_written_elsewhere_falls_back_to_the_tree() {
        let text = "providers:\n  a: { protocol: openai, base_url: \"https://x.example\", api_key: sk-abcdef }\n# old: sk-abcdef\n";
        let shown = redacted(text).unwrap();
        assert!(!shown.contains("sk-abcdef"), "{shown}");
        // An anchor's first use in a plain member, aliased into a secret one.
        let text =
            "x: &k sk-anchored\nproviders:\n  a: { protocol: openai, base_url: \"https://x.example\", api_key: *k }\n";
        let shown = redacted(text).unwrap();
        assert!(!shown.contains("api_key: sk-anchored"), "{shown}");
    }

    #[test]
    fn the_shown_text_with_one_weight_changed_comes_back_whole() {
        let edited = redacted(RUNNING).unwrap().replace("weight: 3", "weight: 5");
        let back = restored(&edited, RUNNING).unwrap();
        assert_eq!(back.text, RUNNING.replace("weight: 3", "weight: 5"));
        assert_eq!(back.secrets.len(), 3, "{:?}", back.secrets);
        assert!(!back.text.contains(REDACTED));
    }

    #[test]
    fn a_text_without_placeholders_is_kept_verbatim() {
        let text = "# mine\npools: { p: { members: [{ model: m }] } }  # trailing\n";
        assert_eq!(restored(text, RUNNING).unwrap().text, text);
    }

    #[test]
    fn a_placeholder_moved_edited_or_new_is_refused_with_its_path() {
        let shown = redacted(RUNNING).unwrap();
        // Moved to the other provider.
        let moved = shown.replace("api_key: \"${ANTHROPIC_KEY}\"", "api_key: <redacted>");
        let issues = restored(&moved, RUNNING).unwrap_err();
        assert_eq!(issues.iter().map(|i| i.path.as_str()).collect::<Vec<_>>(), ["providers.anthropic.api_key"]);
        // A webhook on another host keeps no secret.
        let edited = shown.replace("hooks.slack.com", "attacker.example");
        let issues = restored(&edited, RUNNING).unwrap_err();
        assert_eq!(issues[0].path, "operator.alerts.webhook");
        // The secret's destination changed beside it.
        let redirected = shown.replace("https://api.openai.com", "https://attacker.example");
        let issues = restored(&redirected, RUNNING).unwrap_err();
        assert_eq!(issues[0].path, "providers.openai.api_key");
        assert!(issues[0].message.contains("providers.openai.base_url"), "{}", issues[0].message);
        // A placeholder in a new provider.
        let new = shown.replace(
            "models:",
            "  extra: { protocol: openai, base_url: \"https://e.example\", api_key: <redacted> }\nmodels:",
        );
        let issues = restored(&new, RUNNING).unwrap_err();
        assert_eq!(issues[0].path, "providers.extra.api_key");
    }

    #[test]
    fn the_word_in_plain_text_is_text() {
        let text = "guardrails:\n  pii: { replacement: \"<redacted>\" }\n";
        assert_eq!(restored(text, RUNNING).unwrap().text, text);
    }

    #[test]
    fn a_plain_secret_put_into_a_flow_mapping_is_quoted() {
        let running =
            "providers:\n  a:\n    protocol: openai\n    base_url: https://x.example\n    api_key: sk-with, comma\n";
        let sent = "providers:\n  a: { protocol: openai, base_url: https://x.example, api_key: \"<redacted>\" }\n";
        let back = restored(sent, running).unwrap();
        assert!(back.text.contains("api_key: \"sk-with, comma\""), "{}", back.text);
    }

    #[test]
    fn an_empty_config_is_empty() {
        assert!(is_empty(""));
        assert!(is_empty("# only a comment\n"));
        assert!(is_empty("{}"));
        assert!(!is_empty("pools: {}"));
    }
}
