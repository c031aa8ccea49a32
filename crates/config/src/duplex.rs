//! `duplex:`: the bounds of long-lived sockets (Responses over
//! WebSocket): how many a key and the instance hold open, how long one
//! lives and may sit idle, the largest message, and how long a socket is
//! given to finish its turns when the process stops.

use std::time::Duration;

use serde::Deserialize;

use crate::{duration_or, size_or, Issue};

/// `duplex:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duplex {
    /// Sockets one key holds open at once.
    pub sessions_per_key: u32,
    /// Sockets this instance holds open at once.
    pub max_sessions: u32,
    /// The longest a socket lives (OpenAI's own sockets live 60 minutes).
    pub max_duration: Duration,
    /// A socket with no message either way for this long is closed.
    pub idle_timeout: Duration,
    /// The largest message a caller may send (a frame's payload and a
    /// message's, reassembled): a larger one is refused with the
    /// protocol's error and the socket lives on.
    pub max_message: u64,
    /// After a stop, how long a socket may go on to finish the turns it
    /// has open before it is closed.
    pub drain: Duration,
}

impl Default for Duplex {
    fn default() -> Duplex {
        Duplex {
            sessions_per_key: 16,
            max_sessions: 10_000,
            max_duration: Duration::from_secs(60 * 60),
            idle_timeout: Duration::from_secs(10 * 60),
            max_message: 16 << 20,
            drain: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDuplex {
    pub sessions_per_key: Option<u32>,
    pub max_sessions: Option<u32>,
    pub max_duration: Option<String>,
    pub idle_timeout: Option<String>,
    pub max_message: Option<serde_yaml_ng::Value>,
    pub drain: Option<String>,
}

pub(crate) fn validate(raw: Option<&RawDuplex>, issues: &mut Vec<Issue>) -> Duplex {
    let default = Duplex::default();
    let Some(raw) = raw else { return default };
    let count = |value: Option<u32>, fallback: u32, most: u32, path: &str, issues: &mut Vec<Issue>| {
        let value = value.unwrap_or(fallback);
        if !(1..=most).contains(&value) {
            issues.push(Issue::new(path, format!("{value} is out of range"), format!("write 1 to {most}")));
        }
        value.clamp(1, most)
    };
    let within = |value: Duration, least: Duration, most: Duration, path: &str, issues: &mut Vec<Issue>| {
        if !(least..=most).contains(&value) {
            issues.push(Issue::new(
                path,
                format!("must be {} to {}", humantime::format_duration(least), humantime::format_duration(most)),
                "write e.g. 30s or 10m",
            ));
        }
        value.clamp(least, most)
    };
    let sessions_per_key =
        count(raw.sessions_per_key, default.sessions_per_key, 10_000, "duplex.sessions_per_key", issues);
    let max_sessions = count(raw.max_sessions, default.max_sessions, 1_000_000, "duplex.max_sessions", issues);
    let max_duration = duration_or(raw.max_duration.as_deref(), default.max_duration, "duplex.max_duration", issues);
    let max_duration =
        within(max_duration, Duration::from_secs(1), Duration::from_secs(24 * 3600), "duplex.max_duration", issues);
    let idle_timeout = duration_or(raw.idle_timeout.as_deref(), default.idle_timeout, "duplex.idle_timeout", issues);
    let idle_timeout =
        within(idle_timeout, Duration::from_secs(1), Duration::from_secs(24 * 3600), "duplex.idle_timeout", issues);
    let max_message = size_or(raw.max_message.as_ref(), default.max_message, 64 << 20, "duplex.max_message", issues);
    let drain = duration_or(raw.drain.as_deref(), default.drain, "duplex.drain", issues);
    let drain = within(drain, Duration::ZERO, Duration::from_secs(3600), "duplex.drain", issues);
    Duplex { sessions_per_key, max_sessions, max_duration, idle_timeout, max_message, drain }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

    use super::*;

    #[test]
    fn the_bounds_are_read_and_an_impossible_one_is_named() {
        let config = crate::load(
            "duplex: { sessions_per_key: 2, max_duration: 5m, idle_timeout: 30s, max_message: 1MiB }\n",
            &|_| None,
        )
        .unwrap();
        let duplex = config.duplex;
        assert_eq!((duplex.sessions_per_key, duplex.max_message), (2, 1 << 20));
        assert_eq!((duplex.max_duration, duplex.idle_timeout), (Duration::from_secs(300), Duration::from_secs(30)));
        assert_eq!(duplex.drain, Duplex::default().drain);
        let err = crate::load("duplex: { sessions_per_key: 0, idle_timeout: 0s }\n", &|_| None).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("duplex.sessions_per_key") && text.contains("duplex.idle_timeout"), "{text}");
    }
}
