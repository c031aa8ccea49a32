//! A problem found in a configuration ([`Issue`]: its key path, what is
//! wrong, the fix) and every problem of one load ([`ConfigError`]).

/// One problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Dotted key path (`pools.fast.members[1].model`).
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl Issue {
    pub(crate) fn new(path: &str, message: impl Into<String>, fix: impl Into<String>) -> Issue {
        Issue { path: path.to_owned(), message: message.into(), fix: fix.into() }
    }
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} (fix: {})", self.message, self.fix)
        } else {
            write!(f, "{}: {} (fix: {})", self.path, self.message, self.fix)
        }
    }
}

/// Every problem in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_issues(.0))]
pub struct ConfigError(pub Vec<Issue>);

fn render_issues(issues: &[Issue]) -> String {
    let mut out =
        format!("invalid configuration ({} problem{}):", issues.len(), if issues.len() == 1 { "" } else { "s" });
    for issue in issues {
        out.push_str("\n  - ");
        out.push_str(&issue.to_string());
    }
    out
}

/// Names for a fix's hint (`a, b, c`), or that there are none.
pub(crate) fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "(none defined)".to_owned()
    } else {
        names.join(", ")
    }
}
