//! A group's run limits (`groups.<g>.runs`): what one agent run of the
//! group's keys may use (`usd`, `calls`, `tool_calls`, `tokens`, `wall`)
//! and its loop breaker (`loop.repeats`). A group without `runs:` takes its
//! nearest ancestor's (whole, not merged); none anywhere up: its keys'
//! runs are not tracked at all.

use serde::Deserialize;
use switchyard_governance::run::{RunSpec, LOOP_WINDOW};
use switchyard_governance::spec::{MAX_LIMIT, MAX_USD};

use crate::units::parse_duration;
use crate::Issue;

/// The longest `wall` a run may be given (a week).
const MAX_WALL_MS: u64 = 7 * 24 * 3600 * 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRuns {
    pub usd: Option<f64>,
    pub calls: Option<u64>,
    pub tool_calls: Option<u64>,
    pub tokens: Option<u64>,
    pub wall: Option<String>,
    #[serde(rename = "loop")]
    pub loop_breaker: Option<RawLoop>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLoop {
    pub repeats: u32,
}

/// Reads `groups.<g>.runs` at `path`, every problem in `issues`.
pub(crate) fn runs(raw: &RawRuns, path: &str, issues: &mut Vec<Issue>) -> RunSpec {
    let usd = raw.usd.and_then(|usd| {
        if usd.is_finite() && usd > 0.0 && usd <= MAX_USD {
            Some(switchyard_governance::money::from_usd(usd))
        } else {
            issues.push(Issue::new(
                &format!("{path}.usd"),
                format!("{usd} is not a spend a run can have"),
                format!("write a USD amount above 0 and at most {MAX_USD:e}, e.g. 5"),
            ));
            None
        }
    });
    let mut count = |value: Option<u64>, name: &str| {
        value.filter(|n| {
            let fits = (1..=MAX_LIMIT).contains(n);
            if !fits {
                issues.push(Issue::new(
                    &format!("{path}.{name}"),
                    format!("{n} is out of range"),
                    format!("write a whole number from 1 to {MAX_LIMIT}"),
                ));
            }
            fits
        })
    };
    let calls = count(raw.calls, "calls");
    let tool_calls = count(raw.tool_calls, "tool_calls");
    let tokens = count(raw.tokens, "tokens");
    let wall_ms = raw.wall.as_deref().and_then(|text| match parse_duration(text) {
        Ok(wall) if (1000..=u128::from(MAX_WALL_MS)).contains(&wall.as_millis()) => Some(wall.as_millis() as u64),
        Ok(_) => {
            issues.push(Issue::new(&format!("{path}.wall"), "must be between 1s and 7d", "write e.g. 30m"));
            None
        }
        Err(message) => {
            issues.push(Issue::new(&format!("{path}.wall"), message, "write a number with a unit: 90s, 30m, 2h"));
            None
        }
    });
    let loop_repeats = raw.loop_breaker.as_ref().and_then(|each| {
        if (2..=LOOP_WINDOW as u32).contains(&each.repeats) {
            Some(each.repeats)
        } else {
            issues.push(Issue::new(
                &format!("{path}.loop.repeats"),
                format!("{} repeats cannot be told from a loop within the last {LOOP_WINDOW} calls", each.repeats),
                format!("write a number from 2 to {LOOP_WINDOW}, e.g. 5"),
            ));
            None
        }
    });
    RunSpec { usd, calls, tool_calls, tokens, wall_ms, loop_repeats }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> (RunSpec, Vec<String>) {
        let raw: RawRuns = serde_yaml_ng::from_str(yaml).unwrap();
        let mut issues = Vec::new();
        let spec = runs(&raw, "groups.acme.runs", &mut issues);
        (spec, issues.into_iter().map(|i| format!("{}: {}", i.path, i.message)).collect())
    }

    #[test]
    fn the_contracts_example_reads() {
        let (spec, issues) = read("{ usd: 5, calls: 200, tool_calls: 500, wall: 30m, loop: { repeats: 5 } }");
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(
            spec,
            RunSpec {
                usd: Some(5_000_000_000),
                calls: Some(200),
                tool_calls: Some(500),
                tokens: None,
                wall_ms: Some(1_800_000),
                loop_repeats: Some(5),
            }
        );
    }

    #[test]
    fn each_bad_value_is_named() {
        let (_, issues) = read("{ usd: -1, calls: 0, tokens: 1, wall: 10ms, loop: { repeats: 1 } }");
        assert_eq!(issues.len(), 4, "{issues:?}");
        for key in ["runs.usd", "runs.calls", "runs.wall", "runs.loop.repeats"] {
            assert!(issues.iter().any(|i| i.starts_with(&format!("groups.acme.{key}"))), "{key}: {issues:?}");
        }
        let (_, issues) = read("{ wall: soon }");
        assert_eq!(issues.len(), 1);
        assert!(serde_yaml_ng::from_str::<RawRuns>("{ cals: 3 }").is_err());
    }
}
