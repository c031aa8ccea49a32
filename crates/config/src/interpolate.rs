//! `${VAR}` substitution in every string of the parsed YAML tree. Done on
//! the tree, not the text, so a variable's value can never inject YAML.
//!
//! `${` and `}` are YAML flow indicators, so `{ key: ${VAR} }` would not
//! parse; [`protect`] first rewrites each reference into a marker that is a
//! valid plain scalar, and the tree pass substitutes the markers.

/// Opens a protected reference (`${` in the source).
const OPEN: &str = "$\u{27e8}";
/// Closes a protected reference (`}` in the source).
const CLOSE: char = '\u{27e9}';

/// Rewrites `${NAME}` references so the text parses as YAML in any context.
pub fn protect(text: &str) -> String {
    protect_with(text, OPEN, CLOSE)
}

/// [`protect`] with `$(NAME)` instead: the same length in bytes and
/// characters, so what a parser of it says about positions holds in
/// `text` (the values it reads are not `text`'s).
pub fn protect_in_place(text: &str) -> String {
    protect_with(text, "$(", ')')
}

fn protect_with(text: &str, open: &str, close: char) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if after[..end].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && end > 0 => {
                out.push_str(open);
                out.push_str(&after[..end]);
                out.push(close);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

use serde_yaml_ng::Value;

use crate::Issue;

/// Where a `${NAME}` was substituted: the key path and the variable.
pub type Substituted = (String, String);

/// Replaces `${NAME}` in every string scalar of `value` using `lookup`;
/// every missing variable becomes an issue naming where it was used, and
/// every substitution is noted in `used` (its path and variable).
pub fn interpolate(
    value: &mut Value,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    issues: &mut Vec<Issue>,
    used: &mut Vec<Substituted>,
) {
    match value {
        Value::String(text) => {
            if text.contains(OPEN) || text.contains("${") {
                *text = substitute(text, path, lookup, issues, used);
            }
        }
        Value::Sequence(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                interpolate(item, &format!("{path}[{index}]"), lookup, issues, used);
            }
        }
        Value::Mapping(map) => {
            for (key, item) in map.iter_mut() {
                let key = key.as_str().unwrap_or("?");
                let child = if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") };
                interpolate(item, &child, lookup, issues, used);
            }
        }
        Value::Tagged(tagged) => interpolate(&mut tagged.value, path, lookup, issues, used),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn substitute(
    text: &str,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    issues: &mut Vec<Issue>,
    used: &mut Vec<Substituted>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, open_len)) = next_reference(rest) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open_len..];
        let Some(end) = after.find(['}', CLOSE]) else {
            issues.push(Issue::new(path, "unclosed `${` in value", "close it with `}` or remove it"));
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        match lookup(name) {
            Some(value) => {
                out.push_str(&value);
                used.push((path.to_owned(), name.to_owned()));
            }
            None => issues.push(Issue::new(
                path,
                format!("environment variable `{name}` is not set"),
                format!("export {name}=... before starting, or remove the reference"),
            )),
        }
        let close_len = after[end..].chars().next().map_or(1, char::len_utf8);
        rest = &after[end + close_len..];
    }
    out.push_str(rest);
    out
}

/// Values shorter than this are not hidden (they would garble messages and
/// are no secret: a port, a flag).
const HIDDEN_FROM: usize = 6;

/// `issue` as it may be shown, given the `values` substituted (name,
/// value) and where (`used`). An issue about a substituted value itself
/// never quotes it: its message is written from the variable's name alone,
/// before any text is formatted from the value (a value holding `"`, `\`
/// or a newline would otherwise appear escaped, in a form no later search
/// finds). Elsewhere, a value quoted in passing (a name another key refers
/// to) is written back as its `${NAME}`, as it appears and in the escaped
/// forms messages write.
pub fn shown_issue(issue: &mut Issue, values: &[(String, String)], used: &[Substituted]) {
    // A short value (a port, a flag) is no secret and keeps its message.
    let secret = |name: &str| values.iter().any(|(n, value)| n == name && value.len() >= HIDDEN_FROM);
    let mut names: Vec<&str> =
        used.iter().filter(|(at, name)| *at == issue.path && secret(name)).map(|(_, name)| name.as_str()).collect();
    names.dedup();
    if !names.is_empty() {
        let named: Vec<String> = names.iter().map(|name| format!("`${{{name}}}`")).collect();
        issue.message = format!(
            "the value {} gives here is not valid (the message would show it, so it is withheld)",
            named.join(" and ")
        );
    }
    for text in [&mut issue.path, &mut issue.message, &mut issue.fix] {
        *text = hide_values(text, values);
    }
}

/// `text` with each substituted value (raw, or escaped as Rust, JSON and
/// YAML write it) written back as its `${NAME}`.
fn hide_values(text: &str, substituted: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (name, value) in substituted {
        if value.len() < HIDDEN_FROM {
            continue;
        }
        let debug = format!("{value:?}");
        let json = serde_json::to_string(value).unwrap_or_default();
        let forms = [value.clone(), debug.trim_matches('"').to_owned(), json.trim_matches('"').to_owned()];
        for form in forms {
            if !form.is_empty() && out.contains(form.as_str()) {
                out = out.replace(form.as_str(), &format!("${{{name}}}"));
            }
        }
    }
    out
}

/// Undoes [`protect`] in text written out again.
pub fn unprotect(text: &str) -> String {
    text.replace(OPEN, "${").replace(CLOSE, "}")
}

/// True when `text` is one `${NAME}` reference and nothing else (protected
/// or not).
pub fn is_reference(text: &str) -> bool {
    let inner = text
        .strip_prefix(OPEN)
        .and_then(|t| t.strip_suffix(CLOSE))
        .or_else(|| text.strip_prefix("${").and_then(|t| t.strip_suffix('}')));
    inner.is_some_and(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// The next `${` or protected marker in `text`: its offset and length.
fn next_reference(text: &str) -> Option<(usize, usize)> {
    let plain = text.find("${").map(|at| (at, 2));
    let marked = text.find(OPEN).map(|at| (at, OPEN.len()));
    match (plain, marked) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_and_reports_missing_variables() {
        let mut value: Value = serde_yaml_ng::from_str(&protect("a: x-${K}-y\nb: [${NOPE}]\nc: { k: ${K} }")).unwrap();
        let mut issues = Vec::new();
        let lookup = |name: &str| (name == "K").then(|| "v: 1".to_owned());
        let mut used = Vec::new();
        interpolate(&mut value, "", &lookup, &mut issues, &mut used);
        assert_eq!(used, [("a".to_owned(), "K".to_owned()), ("c.k".to_owned(), "K".to_owned())]);
        assert_eq!(value["a"].as_str(), Some("x-v: 1-y"));
        assert_eq!(value["c"]["k"].as_str(), Some("v: 1"));
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].path, "b[0]");
        assert!(issues[0].message.contains("NOPE"));
    }
}
