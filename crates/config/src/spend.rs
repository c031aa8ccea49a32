//! What the budget tree and the admin plane's roles are made of, read the
//! same way wherever they appear (groups, a member's template, role
//! bindings): a budget, limits, and a scope.

use serde::Deserialize;
use switchyard_governance::{Budget, Limits, Window};

use crate::Issue;

/// An admin token's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Reads only.
    Read,
    /// Reads and changes.
    Full,
    /// A member signed in through single sign-on: manages their own keys
    /// (`/api/v1/self/keys`) and nothing else.
    Member,
}

impl Scope {
    /// The lesser of two scopes (a ceiling applied): member < read < full.
    pub fn at_most(self, ceiling: Scope) -> Scope {
        let rank = |scope: Scope| match scope {
            Scope::Member => 0,
            Scope::Read => 1,
            Scope::Full => 2,
        };
        if rank(self) <= rank(ceiling) {
            self
        } else {
            ceiling
        }
    }

    /// Its name in the console and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Full => "full",
            Scope::Member => "member",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    pub usd: f64,
    pub window: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
    pub concurrent: Option<u64>,
}

/// Validates a budget (`path` names it).
pub(crate) fn budget(raw: &RawBudget, path: &str, issues: &mut Vec<Issue>) -> Option<Budget> {
    let window = Window::from_name(&raw.window).or_else(|| {
        issues.push(Issue::new(
            &format!("{path}.window"),
            format!("`{}` is not a window", raw.window),
            "use 1m, 1h, 1d, 7d, 1mo or total",
        ));
        None
    })?;
    if !raw.usd.is_finite() || raw.usd < 0.0 {
        issues.push(Issue::new(
            &format!("{path}.usd"),
            "a budget must be a finite amount, 0 or more",
            "write USD, e.g. 100",
        ));
        return None;
    }
    Some(Budget { usd: raw.usd, window })
}

pub(crate) fn limits(raw: &RawLimits, path: &str, issues: &mut Vec<Issue>) -> Limits {
    for (key, value) in [("rpm", raw.rpm), ("tpm", raw.tpm), ("concurrent", raw.concurrent)] {
        if value == Some(0) {
            issues.push(Issue::new(
                &format!("{path}.{key}"),
                "a limit of 0 refuses everything",
                "remove it (no limit) or set 1 or more",
            ));
        }
    }
    Limits { rpm: raw.rpm, tpm: raw.tpm, concurrent: raw.concurrent }
}
