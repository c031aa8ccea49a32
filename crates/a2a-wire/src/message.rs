//! What the gateway reads in A2A messages and answers, in either
//! version's shape: text parts (1.0's `{ "text" }`, 0.3's
//! `{ "kind": "text", "text" }`) wherever a `parts` list holds them, the
//! task an answer names, the cost an agent reports, and the push URLs a
//! caller asks an agent to call.
//!
//! **Reported cost**: an agent states what a task cost in USD as a number
//! at `metadata.cost_usd` of the task, the message, or a stream's status
//! or artifact update it answers with (the last one stated counts).

use serde_json::Value;

/// How deep a walk for text parts goes (parts nest in messages, in
/// statuses, in tasks, in results).
const MAX_DEPTH: usize = 32;

/// The most USD one answer may report (more is not believed).
pub const MAX_COST_USD: f64 = 1000.0;

/// Calls `each` with every text part's `text` in `value`, for it to
/// replace (`Some`) or keep (`None`); stops at the first `Err`.
pub fn rewrite_text_parts<E>(
    value: &mut Value,
    each: &mut impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<(), E> {
    walk(value, each, 0)
}

fn walk<E>(value: &mut Value, each: &mut impl FnMut(&str) -> Result<Option<String>, E>, depth: usize) -> Result<(), E> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    match value {
        Value::Object(object) => {
            for (name, member) in object.iter_mut() {
                if name == "parts" {
                    if let Value::Array(parts) = member {
                        for part in parts.iter_mut().filter_map(Value::as_object_mut) {
                            // 0.3 marks a text part with its kind; 1.0 by
                            // the member it has.
                            let is_text = part.get("kind").is_none_or(|k| k == "text");
                            if let (true, Some(Value::String(text))) = (is_text, part.get_mut("text")) {
                                if let Some(new) = each(text)? {
                                    *text = new;
                                }
                            }
                        }
                    }
                }
                walk(member, each, depth + 1)?;
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|item| walk(item, each, depth + 1)),
        _ => Ok(()),
    }
}

/// The task an answer's `result` names: a task (`task.id`, 0.3's
/// `{ "kind": "task", "id" }`), a message of one (`taskId`), or a stream
/// event's (`statusUpdate.taskId`, `artifactUpdate.taskId`, 0.3's
/// `{ "kind": "status-update", "taskId" }`).
pub fn task_of(result: &Value) -> Option<&str> {
    if let Some(task) = result.get("task") {
        return task.get("id").and_then(Value::as_str);
    }
    for event in ["statusUpdate", "artifactUpdate", "message"] {
        if let Some(found) = result.get(event).and_then(|e| e.get("taskId")).and_then(Value::as_str) {
            return Some(found);
        }
    }
    match result.get("kind").and_then(Value::as_str) {
        Some("task") => result.get("id").and_then(Value::as_str),
        _ => result.get("taskId").and_then(Value::as_str),
    }
}

/// The cost an answer's `result` reports, in nano-USD (see the module's
/// docs for where): a finite number from 0 to [`MAX_COST_USD`].
pub fn reported_cost(result: &Value) -> Option<u64> {
    let of = |v: &Value| v.get("metadata").and_then(|m| m.get("cost_usd")).and_then(Value::as_f64);
    let usd = ["task", "message", "statusUpdate", "artifactUpdate"]
        .iter()
        .filter_map(|member| result.get(member))
        .find_map(of)
        .or_else(|| of(result))?;
    (usd.is_finite() && (0.0..=MAX_COST_USD).contains(&usd)).then(|| (usd * 1e9).round() as u64)
}

/// Every push URL in a request's `params`: a push config set directly
/// (1.0's `url`, 0.3's `pushNotificationConfig.url`) or with a message
/// (`configuration.taskPushNotificationConfig.url`, 0.3's
/// `configuration.pushNotificationConfig.url`). A `url` that is not a
/// string is returned as `Err` (refused, never passed on unchecked).
pub fn push_urls(params: &serde_json::Map<String, Value>) -> Result<Vec<&str>, NotAString> {
    let configuration = params.get("configuration");
    let places = [
        params.get("url"),
        params.get("pushNotificationConfig").and_then(|c| c.get("url")),
        configuration.and_then(|c| c.get("taskPushNotificationConfig")).and_then(|c| c.get("url")),
        configuration.and_then(|c| c.get("pushNotificationConfig")).and_then(|c| c.get("url")),
    ];
    let mut urls = Vec::new();
    for place in places.into_iter().flatten() {
        match place {
            Value::String(url) => urls.push(url.as_str()),
            Value::Null => {}
            _ => return Err(NotAString),
        }
    }
    Ok(urls)
}

/// A push URL that is not a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAString;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_parts_of_both_versions_are_found_wherever_they_nest() {
        let mut answer = json!({"task": {
            "id": "t", "status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "one"}]}},
            "artifacts": [{"parts": [{"text": "two"}, {"data": {"text": "not a part"}}, {"url": "u"}]}],
            "history": [{"parts": [{"kind": "text", "text": "three"}, {"kind": "file", "text": "x"}]}],
            "metadata": {"text": "not a part either"},
        }});
        let mut seen = Vec::new();
        let done: Result<(), ()> = rewrite_text_parts(&mut answer, &mut |text| {
            seen.push(text.to_owned());
            Ok(Some(text.to_uppercase()))
        });
        assert!(done.is_ok());
        assert_eq!(seen, ["one", "two", "three"], "in the order they come");
        assert_eq!(answer["task"]["artifacts"][0]["parts"][0]["text"], "TWO");
        assert_eq!(answer["task"]["artifacts"][0]["parts"][1]["data"]["text"], "not a part");
        assert_eq!(answer["task"]["history"][0]["parts"][1]["text"], "x", "a file part is not text");
        let stopped = rewrite_text_parts(&mut answer, &mut |_| Err("blocked"));
        assert_eq!(stopped, Err("blocked"));
    }

    #[test]
    fn a_deep_body_is_walked_only_so_far() {
        let mut deep = json!({"parts": [{"text": "deep"}]});
        for _ in 0..100 {
            deep = json!({ "x": deep });
        }
        let mut seen = 0;
        let _: Result<(), ()> = rewrite_text_parts(&mut deep, &mut |_| {
            seen += 1;
            Ok(None)
        });
        assert_eq!(seen, 0);
    }

    #[test]
    fn tasks_and_costs_are_read_from_each_kind_of_answer() {
        assert_eq!(task_of(&json!({"task": {"id": "t1"}})), Some("t1"));
        assert_eq!(task_of(&json!({"message": {"taskId": "t2"}})), Some("t2"));
        assert_eq!(task_of(&json!({"statusUpdate": {"taskId": "t3"}})), Some("t3"));
        assert_eq!(task_of(&json!({"kind": "task", "id": "t4"})), Some("t4"));
        assert_eq!(task_of(&json!({"kind": "status-update", "taskId": "t5"})), Some("t5"));
        assert_eq!(task_of(&json!({"message": {"messageId": "m"}})), None);
        assert_eq!(reported_cost(&json!({"task": {"metadata": {"cost_usd": 0.25}}})), Some(250_000_000));
        assert_eq!(reported_cost(&json!({"statusUpdate": {"metadata": {"cost_usd": 1}}})), Some(1_000_000_000));
        assert_eq!(reported_cost(&json!({"kind": "task", "metadata": {"cost_usd": 0.5}})), Some(500_000_000));
        assert_eq!(reported_cost(&json!({"task": {"metadata": {"cost_usd": -1}}})), None);
        assert_eq!(reported_cost(&json!({"task": {"metadata": {"cost_usd": 1e9}}})), None);
        assert_eq!(reported_cost(&json!({"task": {"metadata": {"cost_usd": "1"}}})), None);
    }

    #[test]
    fn push_urls_are_found_in_both_versions_and_odd_ones_refused() {
        let params = |v: Value| v.as_object().cloned().unwrap_or_default();
        let v1 = params(json!({"taskId": "t", "url": "https://hooks.example/a"}));
        assert_eq!(push_urls(&v1), Ok(vec!["https://hooks.example/a"]));
        let v03 = params(json!({"taskId": "t", "pushNotificationConfig": {"url": "https://hooks.example/b"}}));
        assert_eq!(push_urls(&v03), Ok(vec!["https://hooks.example/b"]));
        let with_message = params(
            json!({"message": {}, "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1/"}}}),
        );
        assert_eq!(push_urls(&with_message), Ok(vec!["http://127.0.0.1/"]));
        assert_eq!(push_urls(&params(json!({"url": ["https://a"]}))), Err(NotAString));
        assert_eq!(push_urls(&params(json!({"message": {}}))), Ok(vec![]));
    }
}
