//! The A2A gateway's process state, made on the first call to an agent
//! (kept on `Gateway::a2a`, across reloads): the SSRF-guarded client
//! agents are reached with, the cards read from them (and the binding
//! each is spoken to in), which key each task belongs to, and each
//! agent's message rate.
//!
//! Task owners: a task an agent created for key A is bound to A the first
//! time an answer names it (the first binding wins), and every method
//! naming a task (reading, cancelling, subscribing, push configs, a
//! message continuing it) is sent on only for its owner: another key, or
//! a task this gateway never saw created, is answered "task not found". In
//! a fleet the bindings live in Redis (any instance answers); otherwise in
//! this process, bounded, for [`TASK_TTL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchyard_config::agents::Agent;
use switchyard_state::Gateway;
use switchyard_transport::hooks::HookClient;

/// How long a task stays bound to its key.
pub const TASK_TTL: Duration = Duration::from_secs(7 * 86_400);
/// How long a card read is served before it is read again.
const CARD_FRESH: Duration = Duration::from_secs(60);
/// How long a card that could not be read again is still served.
const CARD_STALE: Duration = Duration::from_secs(3_600);
/// Task bindings one process keeps without Redis.
const MEMORY_TASKS: usize = 200_000;

/// The A2A gateway of this process.
pub struct Hub {
    pub(crate) client: HookClient,
    cards: Mutex<HashMap<String, (Instant, Arc<Value>)>>,
    upstreams: Mutex<HashMap<Arc<str>, (Instant, Upstream)>>,
    tasks: Mutex<HashMap<TaskOf, Bound>>,
    rates: Mutex<HashMap<Arc<str>, (Instant, u32)>>,
}

/// The binding an agent is spoken to in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// JSON-RPC at its configured `url`.
    JsonRpc,
    /// HTTP+JSON under this base URL.
    Rest(String),
}

/// A task: its agent and its id.
type TaskOf = (Arc<str>, String);
/// The key a task is bound to, and since when.
type Bound = (String, Instant);

/// Why a task could not be bound or looked up.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// Redis could not answer.
    #[error("the task store is unreachable: {0}")]
    Store(String),
    /// This process holds as many bindings as it may.
    #[error("too many A2A tasks are bound in this process")]
    Full,
}

/// The hub of `gateway`'s process, made on first use.
pub fn hub_of(gateway: &Gateway) -> Option<&Hub> {
    gateway.a2a.get_or_init(|| Box::new(Hub::new())).downcast_ref::<Hub>()
}

impl Hub {
    fn new() -> Hub {
        Hub {
            client: HookClient::new(),
            cards: Mutex::default(),
            upstreams: Mutex::default(),
            tasks: Mutex::default(),
            rates: Mutex::default(),
        }
    }

    /// Agent `agent`'s card as last read, read again when older than a
    /// minute; one that cannot be read again is served for an hour more.
    pub async fn card(&self, agent: &Agent) -> Result<Arc<Value>, String> {
        let cached = self.cards.lock().unwrap_or_else(PoisonError::into_inner).get(&agent.card).cloned();
        if let Some((at, card)) = &cached {
            if at.elapsed() < CARD_FRESH {
                return Ok(card.clone());
            }
        }
        let mut headers = Vec::new();
        if let Some(value) =
            agent.bearer.as_ref().and_then(|b| http::HeaderValue::from_str(&format!("Bearer {b}")).ok())
        {
            headers.push((http::header::AUTHORIZATION, value));
        }
        let read = self.client.get_with(&agent.card, headers, agent.timeout.min(Duration::from_secs(30))).await;
        let fresh = match read {
            Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
                Ok(card @ Value::Object(_)) => Ok(Arc::new(card)),
                _ => Err(format!("the agent card of `{}` is not a JSON object", agent.name)),
            },
            Err(err) => Err(format!("the agent card of `{}` could not be read: {err}", agent.name)),
        };
        match (fresh, cached) {
            (Ok(card), _) => {
                self.cards
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(agent.card.clone(), (Instant::now(), card.clone()));
                Ok(card)
            }
            (Err(err), Some((at, card))) if at.elapsed() < CARD_STALE => {
                tracing::warn!(agent = %agent.name, error = %err, "an agent card is served stale");
                Ok(card)
            }
            (Err(err), _) => Err(err),
        }
    }

    /// The binding `agent` is spoken to in, as its card offers it
    /// (`card::upstream_binding`), decided again when the card is read
    /// again. An agent whose card cannot be read is spoken JSON-RPC to at
    /// its `url` (what `agents:` configures), and its card is not asked
    /// for again before a minute has passed, so a card that fails costs
    /// no call a round trip.
    pub async fn upstream(&self, agent: &Agent) -> Upstream {
        let cached = self.upstreams.lock().unwrap_or_else(PoisonError::into_inner).get(&agent.name).cloned();
        if let Some((at, upstream)) = cached {
            if at.elapsed() < CARD_FRESH {
                return upstream;
            }
        }
        let upstream = match self.card(agent).await {
            Ok(card) => match switchyard_a2a_wire::card::upstream_binding(&card, &agent.url) {
                switchyard_a2a_wire::card::Served::JsonRpc => Upstream::JsonRpc,
                switchyard_a2a_wire::card::Served::Rest(base) => Upstream::Rest(base),
            },
            Err(err) => {
                tracing::debug!(agent = %agent.name, error = %err, "no card: the agent is spoken JSON-RPC to");
                Upstream::JsonRpc
            }
        };
        self.upstreams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent.name.clone(), (Instant::now(), upstream.clone()));
        upstream
    }

    /// Binds task `task` of `agent` to key `owner` unless it is bound: the
    /// key it is bound to.
    pub async fn bind(
        &self,
        gateway: &Gateway,
        agent: &Arc<str>,
        task: &str,
        owner: &str,
    ) -> Result<String, OwnerError> {
        if let Some(fleet) = gateway.fleet_state.as_deref() {
            return fleet
                .bind_a2a_task(agent, task, owner, TASK_TTL)
                .await
                .map_err(|err| OwnerError::Store(err.to_string()));
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let key = (agent.clone(), task.to_owned());
        if let Some((bound, at)) = tasks.get(&key) {
            if at.elapsed() < TASK_TTL {
                return Ok(bound.clone());
            }
        }
        if tasks.len() >= MEMORY_TASKS {
            tasks.retain(|_, (_, at)| at.elapsed() < TASK_TTL);
            if tasks.len() >= MEMORY_TASKS {
                return Err(OwnerError::Full);
            }
        }
        tasks.insert(key, (owner.to_owned(), now));
        Ok(owner.to_owned())
    }

    /// The key task `task` of `agent` is bound to, if any.
    pub async fn owner(&self, gateway: &Gateway, agent: &Arc<str>, task: &str) -> Result<Option<String>, OwnerError> {
        if let Some(fleet) = gateway.fleet_state.as_deref() {
            return fleet.a2a_task_owner(agent, task).await.map_err(|err| OwnerError::Store(err.to_string()));
        }
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(tasks
            .get(&(agent.clone(), task.to_owned()))
            .filter(|(_, at)| at.elapsed() < TASK_TTL)
            .map(|(owner, _)| owner.clone()))
    }

    /// Counts one message to `agent` against its `rpm` (this process's
    /// minute): `Err` with the seconds until the minute ends when full.
    pub fn take_rate(&self, agent: &Agent) -> Result<(), u64> {
        let Some(rpm) = agent.rpm else { return Ok(()) };
        let mut rates = self.rates.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let (start, count) = rates.entry(agent.name.clone()).or_insert((now, 0));
        if now.duration_since(*start) >= Duration::from_secs(60) {
            *start = now;
            *count = 0;
        }
        if *count >= rpm {
            return Err(60u64.saturating_sub(now.duration_since(*start).as_secs()).max(1));
        }
        *count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(rpm: Option<u32>) -> Agent {
        Agent {
            name: Arc::from("research"),
            url: "http://127.0.0.1:1".into(),
            card: "http://127.0.0.1:1/.well-known/agent-card.json".into(),
            bearer: None,
            price_nano: None,
            policies: Vec::new(),
            timeout: Duration::from_secs(1),
            rpm,
        }
    }

    #[test]
    fn an_agents_rate_is_counted_per_minute() {
        let hub = Hub::new();
        assert!((0..100).all(|_| hub.take_rate(&agent(None)).is_ok()), "no rpm: no cap");
        let capped = agent(Some(2));
        assert!(hub.take_rate(&capped).is_ok() && hub.take_rate(&capped).is_ok());
        let wait = hub.take_rate(&capped);
        assert!(matches!(wait, Err(1..=60)), "{wait:?}");
    }
}
