//! Translation settings: a model's `capabilities:` (what the lane's model
//! takes where the models of its protocol differ, handed to the request
//! writer) and a pool's `translation:` (`lenient`, the default: what a lane
//! cannot carry is dropped and reported; `strict`: such a request is
//! refused with a 400 naming the fields).

use switchyard_ir::Capabilities;

use crate::facts::Fact;
use crate::raw::RawCapabilities;
use crate::Issue;

/// How a pool treats a request its lane's protocol cannot fully carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Translation {
    /// Send what can be carried; report the rest (`x-switchyard-dropped`).
    #[default]
    Lenient,
    /// Refuse the request, naming what cannot be carried.
    Strict,
}

/// A model's capabilities: each key left out is what the bundled model
/// facts say of its wire model (`facts`), else the common ground
/// (`Capabilities::default`).
pub(crate) fn capabilities(raw: Option<&RawCapabilities>, fact: Option<&Fact>) -> Capabilities {
    let common = Capabilities::default();
    let max_output = raw.and_then(|r| r.max_output).or(fact.and_then(|f| f.max_output));
    let known = |pick: fn(&Fact) -> Option<bool>| fact.and_then(pick);
    let raw = |pick: fn(&RawCapabilities) -> Option<bool>| raw.and_then(pick);
    Capabilities {
        adaptive_thinking: raw(|r| r.adaptive_thinking)
            .or(known(|f| f.adaptive_thinking))
            .unwrap_or(common.adaptive_thinking),
        effort: raw(|r| r.effort).or(known(|f| f.effort)).unwrap_or(common.effort),
        temperature_with_top_p: raw(|r| r.temperature_with_top_p)
            .or(known(|f| f.temperature_with_top_p))
            .unwrap_or(common.temperature_with_top_p),
        max_output,
        reasoning: raw(|r| r.reasoning).or(known(|f| f.reasoning)),
    }
}

/// A pool's `translation:` value.
pub(crate) fn translation(raw: Option<&str>, path: &str, issues: &mut Vec<Issue>) -> Translation {
    match raw {
        None | Some("lenient") => Translation::Lenient,
        Some("strict") => Translation::Strict,
        Some(other) => {
            issues.push(Issue::new(
                path,
                format!("`{other}` is not a translation mode"),
                "use lenient (drop and report what a lane cannot carry) or strict (refuse such requests)",
            ));
            Translation::Lenient
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn capabilities_and_translation_are_read_with_defaults() {
        let text = r#"
providers:
  claude: { protocol: anthropic, base_url: "mock://" }
models:
  opus: { provider: claude, capabilities: { adaptive_thinking: true, effort: true } }
  sonnet: { provider: claude, capabilities: { temperature_with_top_p: false } }
  plain: { provider: claude }
pools:
  exact: { translation: strict, members: [{ model: opus }] }
  loose: { members: [{ model: sonnet }] }
"#;
        let config = load(text, &no_env).unwrap();
        let model = |name: &str| config.models[config.model_index(name).unwrap()].capabilities;
        assert_eq!(
            model("opus"),
            Capabilities {
                adaptive_thinking: true,
                effort: true,
                temperature_with_top_p: true,
                max_output: None,
                reasoning: None
            }
        );
        assert_eq!(model("sonnet"), Capabilities { temperature_with_top_p: false, ..Capabilities::default() });
        assert_eq!(model("plain"), Capabilities::default());
        let pool = |name: &str| config.pools[config.pool_index(name).unwrap()].translation;
        assert_eq!(pool("exact"), Translation::Strict);
        assert_eq!(pool("loose"), Translation::Lenient);
    }

    #[test]
    fn the_bundled_facts_fill_what_a_model_leaves_out_field_by_field() {
        let text = r#"
providers:
  claude: { protocol: anthropic, base_url: "mock://" }
models:
  sonnet: { provider: claude, model: claude-sonnet-4-5-20250929 }
  mine: { provider: claude, model: claude-sonnet-4-5, context_window: 1000000, capabilities: { temperature_with_top_p: true, max_output: 1000 } }
  unknown: { provider: claude, model: wire-anthropic }
"#;
        let config = load(text, &no_env).unwrap();
        let model = |name: &str| &config.models[config.model_index(name).unwrap()];
        assert_eq!(model("sonnet").context_window, Some(200_000));
        assert_eq!(
            model("sonnet").capabilities,
            Capabilities {
                temperature_with_top_p: false,
                max_output: Some(64_000),
                reasoning: Some(true),
                ..Capabilities::default()
            }
        );
        assert_eq!(model("mine").context_window, Some(1_000_000));
        assert_eq!(
            model("mine").capabilities,
            Capabilities {
                temperature_with_top_p: true,
                max_output: Some(1000),
                reasoning: Some(true),
                ..Capabilities::default()
            }
        );
        assert_eq!(model("unknown").context_window, None);
        assert_eq!(model("unknown").capabilities, Capabilities::default());
        assert_eq!(config.model_facts.matched, 2);
    }

    #[test]
    fn bad_values_are_named_with_their_fix() {
        let text = r#"
providers:
  p: { protocol: anthropic, base_url: "mock://" }
models:
  m: { provider: p }
pools:
  a: { translation: exact, members: [{ model: m }] }
"#;
        let err = load(text, &no_env).unwrap_err();
        assert_eq!(err.0.len(), 1);
        assert_eq!(err.0[0].path, "pools.a.translation");
        assert!(err.0[0].fix.contains("strict"));
        let text = "providers:\n  p: { protocol: anthropic, base_url: \"mock://\" }\nmodels:\n  m: { provider: p, capabilities: { thinks: true } }\n";
        let err = load(text, &no_env).unwrap_err();
        assert!(err.0[0].path.starts_with("models.m.capabilities"), "{}", err.0[0]);
    }
}
