//! A fleet's agent runs, the pure half: the arguments of the run scripts
//! Redis runs (`switchyard_fleet::runs`) and the reading of their answers
//! and hashes. A run's counters live in one Redis hash per (key, run id),
//! so every instance admits on the same spend, calls and stopped state.

use crate::money::NanoUsd;
use crate::run::{CallKind, Limit, RunSpec, RunState, Stop};

/// A limit left unset, as the scripts read it.
const NONE: i64 = -1;

/// The admission script's arguments after the hash's fields: now (ms), the
/// call's kind (0 model, 1 tool), its reservation (nano-USD), the hash's
/// time to live (ms), then the caps `usd`, `calls`, `tool_calls`,
/// `tokens`, `wall` (ms), each -1 when unset. Numbers past `i64` are
/// clamped (no cap a config can hold comes near).
pub fn admit_args(spec: RunSpec, kind: CallKind, reserve: NanoUsd, now_ms: u64, ttl_ms: u64) -> Vec<i64> {
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let cap = |c: Option<u64>| c.map_or(NONE, int);
    vec![
        int(now_ms),
        match kind {
            CallKind::Model => 0,
            CallKind::Tool => 1,
        },
        int(reserve),
        int(ttl_ms.max(1)),
        cap(spec.usd),
        cap(spec.calls),
        cap(spec.tool_calls),
        cap(spec.tokens),
        cap(spec.wall_ms),
    ]
}

/// The settlement script's arguments: now (ms), what was reserved, what it
/// cost (nano-USD), the tokens it used, the hash's time to live (ms), then
/// the `usd` and `tokens` caps (-1 when unset).
pub fn settle_args(spec: RunSpec, reserved: NanoUsd, cost: NanoUsd, tokens: u64, now_ms: u64, ttl_ms: u64) -> Vec<i64> {
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let cap = |c: Option<u64>| c.map_or(NONE, int);
    vec![int(now_ms), int(reserved), int(cost), int(tokens), int(ttl_ms.max(1)), cap(spec.usd), cap(spec.tokens)]
}

/// An answer the run scripts cannot have given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a run script answered `{0}`")]
pub struct BadVerdict(pub String);

/// A run's stopped state as its hash holds it (`state`): empty while
/// open, `killed`, or a limit's config name.
pub fn read_state(text: &str) -> Result<RunState, BadVerdict> {
    Ok(match text {
        "" => RunState::Open,
        "killed" => RunState::Killed,
        "usd" => RunState::Limited(Limit::Usd),
        "calls" => RunState::Limited(Limit::Calls),
        "tool_calls" => RunState::Limited(Limit::ToolCalls),
        "tokens" => RunState::Limited(Limit::Tokens),
        "wall" => RunState::Limited(Limit::Wall),
        "loop" => RunState::Limited(Limit::Loop),
        other => return Err(BadVerdict(other.chars().take(64).collect())),
    })
}

/// What the stopped state `state` writes in a run's hash.
pub fn state_text(state: RunState) -> &'static str {
    match state {
        RunState::Open => "",
        RunState::Killed => "killed",
        RunState::Limited(limit) => limit.as_str(),
    }
}

/// The admission script's answer: `""` admitted, else the state that
/// stops the run (the first limit it reached, or `killed`).
pub fn read_admit(answer: &str) -> Result<Result<(), Stop>, BadVerdict> {
    Ok(match read_state(answer)? {
        RunState::Open => Ok(()),
        RunState::Killed => Err(Stop::Killed),
        RunState::Limited(limit) => Err(Stop::Limit(limit)),
    })
}

/// A run's hash name: its owner's length first, so that no owner and id
/// pair reads as another's whatever bytes either holds.
pub fn hash_name(prefix: &str, owner: &str, id: &str) -> String {
    format!("{prefix}:run:{}:{owner}:{id}", owner.len())
}

/// The owner and id a hash name from [`hash_name`] holds.
pub fn read_hash_name<'a>(prefix: &str, name: &'a str) -> Option<(&'a str, &'a str)> {
    let rest = name.strip_prefix(prefix)?.strip_prefix(":run:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let owner = rest.get(..len)?;
    let id = rest.get(len..)?.strip_prefix(':')?;
    Some((owner, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_arguments_name_every_cap_and_unset_ones_as_minus_one() {
        let spec = RunSpec { usd: Some(5_000), calls: Some(3), wall_ms: Some(60_000), ..Default::default() };
        assert_eq!(admit_args(spec, CallKind::Tool, 700, 1_000, 0), [1_000, 1, 700, 1, 5_000, 3, -1, -1, 60_000]);
        assert_eq!(admit_args(RunSpec::default(), CallKind::Model, u64::MAX, 2, 9)[..4], [2, 0, i64::MAX, 9]);
        let spec = RunSpec { tokens: Some(10), ..Default::default() };
        assert_eq!(settle_args(spec, 70, 75, 4, 3, 86_400_000), [3, 70, 75, 4, 86_400_000, -1, 10]);
    }

    #[test]
    fn a_verdict_reads_back_every_state_and_refuses_anything_else() {
        for state in [
            RunState::Open,
            RunState::Killed,
            RunState::Limited(Limit::Usd),
            RunState::Limited(Limit::Calls),
            RunState::Limited(Limit::ToolCalls),
            RunState::Limited(Limit::Tokens),
            RunState::Limited(Limit::Wall),
            RunState::Limited(Limit::Loop),
        ] {
            assert_eq!(read_state(state_text(state)), Ok(state));
        }
        assert_eq!(read_admit(""), Ok(Ok(())));
        assert_eq!(read_admit("usd"), Ok(Err(Stop::Limit(Limit::Usd))));
        assert_eq!(read_admit("killed"), Ok(Err(Stop::Killed)));
        assert!(read_admit("USD").is_err());
        assert_eq!(read_admit(&"x".repeat(500)).unwrap_err().0.len(), 64);
    }

    #[test]
    fn a_hash_name_keeps_owner_and_id_apart_whatever_they_hold() {
        let name = hash_name("switchyard", "k:1", "a:b");
        assert_eq!(read_hash_name("switchyard", &name), Some(("k:1", "a:b")));
        // Another split of the same bytes is another hash.
        assert_ne!(hash_name("switchyard", "k", "1:a:b"), name);
        assert_eq!(read_hash_name("switchyard", &hash_name("switchyard", "k", "1:a:b")), Some(("k", "1:a:b")));
        assert_eq!(read_hash_name("switchyard", "switchyard:run:9:k:1"), None);
        assert_eq!(read_hash_name("other", &name), None);
    }
}
