//! The guardrail screens a request passes: one compiled per pool and per
//! group that attaches policies (a caller's group's replace its pool's),
//! and the catalog of every policy's rules that metric labels come from.

use std::collections::HashMap;
use std::sync::Arc;

use switchyard_config::Config;
use switchyard_guard::Screen;

use crate::BuildError;

/// Every screen of a config.
#[derive(Debug, Default)]
pub struct Guardrails {
    /// By configured pool index (`None`: the pool attaches none).
    pub pools: Vec<Option<Arc<Screen>>>,
    /// By group name.
    pub groups: HashMap<Arc<str>, Arc<Screen>>,
    /// Every policy's rules, by [`switchyard_guard::Rule::id`]: (policy,
    /// rule, action).
    pub catalog: Vec<(Arc<str>, Arc<str>, &'static str)>,
    /// The config's policies, for keys that name their own.
    specs: Vec<switchyard_guard::PolicySpec>,
    /// Keys' policy lists, compiled on first use (a key's list names
    /// policies of the config, so there are few distinct ones).
    by_key: std::sync::Mutex<HashMap<Vec<String>, Option<Arc<Screen>>>>,
}

impl Guardrails {
    /// Compiles `config`'s screens.
    pub fn build(config: &Config) -> Result<Guardrails, BuildError> {
        let compile = |indexes: &[usize]| -> Result<Option<Arc<Screen>>, BuildError> {
            if indexes.is_empty() {
                return Ok(None);
            }
            let specs: Vec<_> = indexes.iter().filter_map(|&i| config.policies.get(i).cloned()).collect();
            Screen::compile(&specs)
                .map(|screen| Some(Arc::new(screen)))
                .map_err(|(rule, err)| BuildError::Guardrail(format!("policy rule {rule}: {err}")))
        };
        let pools = config.pools.iter().map(|pool| compile(&pool.policies)).collect::<Result<Vec<_>, _>>()?;
        let mut groups = HashMap::new();
        for group in &config.groups {
            if let Some(screen) = compile(&group.policies)? {
                groups.insert(group.name.clone(), screen);
            }
        }
        let all: Vec<usize> = (0..config.policies.len()).collect();
        let mut catalog: Vec<(Arc<str>, Arc<str>, &'static str)> = match compile(&all)? {
            Some(screen) => screen
                .rules
                .iter()
                .map(|rule| {
                    let policy = &screen.policies[rule.policy];
                    (policy.name.clone(), rule.name.clone(), policy.action.as_str())
                })
                .collect(),
            None => Vec::new(),
        };
        // Moderators after every regex rule, in policy order (their ids).
        for spec in config.policies.iter().filter(|spec| spec.moderator.is_some()) {
            catalog.push((spec.name.clone(), Arc::from("moderator"), spec.action.as_str()));
        }
        Ok(Guardrails { pools, groups, catalog, specs: config.policies.clone(), by_key: Default::default() })
    }

    /// The screen of a key that names its own policies (`None`: they are
    /// none, or none the config still defines). Compiled once per list.
    pub fn for_key(&self, names: &[String]) -> Option<Arc<Screen>> {
        let mut compiled = self.by_key.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = compiled.get(names) {
            return found.clone();
        }
        let specs: Vec<_> =
            names.iter().filter_map(|name| self.specs.iter().find(|s| &*s.name == name.as_str()).cloned()).collect();
        let screen = (!specs.is_empty()).then(|| Screen::compile(&specs).ok().map(Arc::new)).flatten();
        compiled.insert(names.to_vec(), screen.clone());
        screen
    }

    /// The screen of a request to configured pool `pool` (`None` for an
    /// implicit one) by a caller of `group`.
    pub fn screen(&self, pool: usize, group: Option<&str>) -> Option<&Arc<Screen>> {
        group.and_then(|g| self.groups.get(g)).or_else(|| self.pools.get(pool).and_then(Option::as_ref))
    }
}
