//! What the gateway keeps for its callers: `files:` (uploads: the largest,
//! how long they stay, the most one key keeps), `batches:` (how many lines
//! run at once on each instance, the lease a running line holds, the most
//! lines a batch may have) and `responses:` (whether `store` keeps
//! Responses replies for `previous_response_id`, and for how long: a
//! group's retention decides which of two lifetimes).

use std::time::Duration;

use serde::Deserialize;

use crate::{duration_or, size_or, Issue};

/// `files:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Files {
    /// The largest upload, in bytes.
    pub max_bytes: u64,
    /// How long a file stays.
    pub ttl: Duration,
    /// The most bytes one key keeps (its files, its batches' lines and its
    /// stored responses); an upload or batch that would pass it is refused.
    pub quota_per_key: u64,
}

/// `batches:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batches {
    /// Lines each instance runs at once.
    pub concurrency: usize,
    /// How long a claimed line is held without renewal: a line whose
    /// instance died runs again elsewhere after at most this.
    pub lease: Duration,
    /// The most lines one batch may have.
    pub max_lines: usize,
}

/// `responses:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Responses {
    /// `store` (true unless the caller says false, as OpenAI's default is)
    /// keeps replies for `previous_response_id`; `false` passes both
    /// fields to the lane as before.
    pub store: bool,
    /// How long a stored response stays in a group whose retention keeps
    /// text (at most its `retention.days`).
    pub ttl: Duration,
    /// How long one stays in a group that keeps nothing (`retention: none`,
    /// or none set, and on an open gateway): long enough to continue the
    /// conversation, no longer (0: not kept at all).
    pub ttl_without_retention: Duration,
    /// The largest conversation kept for one response, in bytes.
    pub max_bytes: u64,
}

/// The three sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// `files:`.
    pub files: Files,
    /// `batches:`.
    pub batches: Batches,
    /// `responses:`.
    pub responses: Responses,
}

impl Default for Kept {
    fn default() -> Kept {
        Kept {
            files: Files {
                max_bytes: 200 * 1000 * 1000,
                ttl: Duration::from_secs(30 * 86_400),
                quota_per_key: 1000 * 1000 * 1000,
            },
            batches: Batches { concurrency: 8, lease: Duration::from_secs(30), max_lines: 50_000 },
            responses: Responses {
                store: true,
                ttl: Duration::from_secs(30 * 86_400),
                ttl_without_retention: Duration::from_secs(3_600),
                max_bytes: 16 << 20,
            },
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFiles {
    pub max_bytes: Option<serde_yaml_ng::Value>,
    pub ttl: Option<String>,
    pub quota_per_key: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBatches {
    pub concurrency: Option<usize>,
    pub lease: Option<String>,
    pub max_lines: Option<usize>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResponses {
    pub store: Option<bool>,
    pub ttl: Option<String>,
    pub ttl_without_retention: Option<String>,
    pub max_bytes: Option<serde_yaml_ng::Value>,
}

pub(crate) fn validate(
    files: Option<&RawFiles>,
    batches: Option<&RawBatches>,
    responses: Option<&RawResponses>,
    issues: &mut Vec<Issue>,
) -> Kept {
    let default = Kept::default();
    let files = files.map_or(default.files, |raw| {
        let max_bytes = size_or(raw.max_bytes.as_ref(), default.files.max_bytes, 1 << 30, "files.max_bytes", issues);
        let quota_per_key = size_or(
            raw.quota_per_key.as_ref(),
            default.files.quota_per_key.max(max_bytes),
            1 << 50,
            "files.quota_per_key",
            issues,
        );
        if quota_per_key < max_bytes {
            issues.push(Issue::new(
                "files.quota_per_key",
                "is smaller than files.max_bytes, so a largest file could never be kept",
                "raise files.quota_per_key to at least files.max_bytes",
            ));
        }
        Files { max_bytes, ttl: duration_or(raw.ttl.as_deref(), default.files.ttl, "files.ttl", issues), quota_per_key }
    });
    let batches = batches.map_or(default.batches, |raw| {
        let concurrency = raw.concurrency.unwrap_or(default.batches.concurrency);
        if !(1..=1024).contains(&concurrency) {
            issues.push(Issue::new("batches.concurrency", format!("{concurrency} is out of range"), "write 1 to 1024"));
        }
        let lease = duration_or(raw.lease.as_deref(), default.batches.lease, "batches.lease", issues);
        if !(Duration::from_secs(2)..=Duration::from_secs(3600)).contains(&lease) {
            issues.push(Issue::new("batches.lease", "must be 2s to 1h", "write e.g. 30s"));
        }
        let max_lines = raw.max_lines.unwrap_or(default.batches.max_lines);
        if !(1..=1_000_000).contains(&max_lines) {
            issues.push(Issue::new("batches.max_lines", format!("{max_lines} is out of range"), "write 1 to 1000000"));
        }
        Batches {
            concurrency: concurrency.clamp(1, 1024),
            lease: lease.clamp(Duration::from_secs(2), Duration::from_secs(3600)),
            max_lines: max_lines.clamp(1, 1_000_000),
        }
    });
    let responses = responses.map_or(default.responses, |raw| Responses {
        store: raw.store.unwrap_or(true),
        ttl: duration_or(raw.ttl.as_deref(), default.responses.ttl, "responses.ttl", issues),
        ttl_without_retention: duration_or(
            raw.ttl_without_retention.as_deref(),
            default.responses.ttl_without_retention,
            "responses.ttl_without_retention",
            issues,
        ),
        max_bytes: size_or(
            raw.max_bytes.as_ref(),
            default.responses.max_bytes,
            256 << 20,
            "responses.max_bytes",
            issues,
        ),
    });
    Kept { files, batches, responses }
}

/// `pools.<p>.batch`: Switchyard runs a batch's lines itself, through the
/// pool's routing, breakers and governance. Handing a batch to a lane's
/// own batch API is not built: asking for it fails at boot rather than
/// running the lines some other way than the operator chose.
pub(crate) fn pool_batch(value: Option<&str>, path: &str, issues: &mut Vec<Issue>) {
    match value {
        None | Some("gateway") => {}
        Some("native") => issues.push(Issue::new(
            path,
            "handing batches to a lane's own batch API is not supported by this build",
            "write `batch: gateway` (or leave it out): Switchyard runs each line through the pool",
        )),
        Some(other) => issues.push(Issue::new(path, format!("`{other}` is not a batch mode"), "write `gateway`")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

    use super::*;

    #[test]
    fn a_keys_quota_and_an_unretained_responses_lifetime_are_read_and_bounded() {
        let config =
            crate::load("files: { quota_per_key: 5GB }\nresponses: { ttl_without_retention: 0s }\n", &|_| None)
                .unwrap();
        assert_eq!(config.kept.files.quota_per_key, 5_000_000_000);
        assert_eq!(config.kept.responses.ttl_without_retention, Duration::ZERO);
        let defaults = Kept::default();
        assert_eq!(
            (defaults.files.quota_per_key, defaults.responses.ttl_without_retention.as_secs()),
            (1_000_000_000, 3_600)
        );
        let err = crate::load("files: { max_bytes: 100MB, quota_per_key: 10MB }\n", &|_| None).unwrap_err().to_string();
        assert!(err.contains("files.quota_per_key") && err.contains("at least files.max_bytes"), "{err}");
        // A larger upload limit raises the default quota with it.
        let config = crate::load("files: { max_bytes: 1GiB }\n", &|_| None).unwrap();
        assert_eq!(config.kept.files.quota_per_key, 1 << 30);
    }
}
