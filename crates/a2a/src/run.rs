//! The run identity an A2A call carries (issue 51's runs): the caller's
//! `x-switchyard-run`, and the A2A task the call names or creates, which
//! comes first in a run's identity. Both go to the agent, so the model
//! and tool calls it makes through the gateway on the task's behalf name
//! the same run; the same headers are what the gateway's own run counting
//! reads for this call ([`Handoff::headers`]).
//!
//! Hand-off for the runs module: count an A2A call by calling it with
//! [`Handoff::headers`] where `call::forward` builds the agent's request;
//! `x-switchyard-a2a-task` is the run's id when present, else
//! `x-switchyard-run`.

use http::{HeaderMap, HeaderName, HeaderValue};

/// The caller's own run id, passed on as it came.
pub const RUN_HEADER: HeaderName = HeaderName::from_static("x-switchyard-run");
/// The A2A task a call is part of.
pub const TASK_HEADER: HeaderName = HeaderName::from_static("x-switchyard-a2a-task");

/// The longest run id passed on.
const MAX_RUN_BYTES: usize = 256;

/// The run identity of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handoff {
    run: Option<HeaderValue>,
    task: Option<HeaderValue>,
}

impl Handoff {
    /// The identity of a call whose caller sent `headers`, naming (or
    /// continuing) task `task`. A run id too long or not visible ASCII is
    /// not passed on.
    pub fn of(headers: &HeaderMap, task: Option<&str>) -> Handoff {
        let visible = |v: &&HeaderValue| {
            v.len() <= MAX_RUN_BYTES && !v.is_empty() && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
        };
        let run = headers.get(&RUN_HEADER).filter(visible).cloned();
        let task = task.and_then(|t| HeaderValue::from_str(t).ok()).filter(|v| visible(&v));
        Handoff { run, task }
    }

    /// The task once the agent named it (a new task's first answer).
    pub fn named(&mut self, task: &str) {
        if self.task.is_none() {
            self.task = HeaderValue::from_str(task).ok().filter(|v| v.len() <= MAX_RUN_BYTES);
        }
    }

    /// The run id this call counts to: the task's, else the caller's.
    pub fn run_id(&self) -> Option<&str> {
        self.task.as_ref().or(self.run.as_ref()).and_then(|v| v.to_str().ok())
    }

    /// The headers carrying it (to the agent, and to run counting).
    pub fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = Vec::with_capacity(2);
        if let Some(run) = &self.run {
            headers.push((RUN_HEADER, run.clone()));
        }
        if let Some(task) = &self.task {
            headers.push((TASK_HEADER, task.clone()));
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_comes_first_and_odd_run_ids_stay_behind() {
        let mut headers = HeaderMap::new();
        headers.insert(RUN_HEADER, HeaderValue::from_static("run-7"));
        let mut handoff = Handoff::of(&headers, None);
        assert_eq!(handoff.run_id(), Some("run-7"));
        handoff.named("task-1");
        assert_eq!(handoff.run_id(), Some("task-1"));
        let names: Vec<_> =
            handoff.headers().into_iter().map(|(n, v)| format!("{n}={}", v.to_str().unwrap_or(""))).collect();
        assert_eq!(names, ["x-switchyard-run=run-7", "x-switchyard-a2a-task=task-1"]);
        headers.insert(RUN_HEADER, HeaderValue::from_static("has space"));
        assert_eq!(Handoff::of(&headers, Some("t")).headers().len(), 1, "only the task");
        headers.insert(RUN_HEADER, HeaderValue::from_str(&"r".repeat(300)).unwrap_or(HeaderValue::from_static("r")));
        assert_eq!(Handoff::of(&headers, None).run_id(), None);
    }
}
