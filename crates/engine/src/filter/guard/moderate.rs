//! A screen's moderators (an OpenAI-moderation endpoint, a webhook, or an
//! AWS Bedrock guardrail), asked about a request's prose at once, each
//! within its timeout, on a task of their own while the request is routed;
//! their verdict is awaited before anything answers the request.

use std::sync::Arc;

use bytes::Bytes;
use switchyard_guard::{json, Blocked, Direction, Screen};
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::Gateway;

use super::refusal;
use crate::settle::Record;

/// The moderators' verdict on a request, being asked while it is routed.
/// Dropped unawaited (the request ended first), the asking stops.
pub(crate) struct Moderation(tokio::task::JoinHandle<Verdict>);

impl Moderation {
    /// Asks on a task of its own.
    pub(super) fn spawn(task: impl std::future::Future<Output = Verdict> + Send + 'static) -> Moderation {
        Moderation(switchyard_tasks::work(task))
    }

    /// Waits for the verdict (records it), and answers the refusal when the
    /// moderators block the request.
    pub(super) async fn verdict(mut self, record: &mut Record) -> Result<(), ErrorInfo> {
        let verdict = (&mut self.0).await.unwrap_or_else(|err| Verdict {
            flagged: Vec::new(),
            refusal: Some(ErrorInfo::new(ErrorKind::Internal, format!("the moderators' task failed: {err}"))),
        });
        for id in verdict.flagged {
            record.guarded_id(id, false);
        }
        verdict.refusal.map_or(Ok(()), Err)
    }
}

impl Drop for Moderation {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the moderators said: the moderators that flagged the request (by
/// catalog id), and the refusal when one blocks it.
pub(crate) struct Verdict {
    flagged: Vec<usize>,
    refusal: Option<ErrorInfo>,
}

/// Sends the request's prose (as masked) to the screen's moderators at
/// once, each within its timeout; a flagged verdict is its policy's
/// action, and a moderator without a verdict lets the request pass or
/// refuses it (`on_error`). Every moderator's flag is recorded, even
/// after one blocks.
pub(super) async fn moderate(
    gateway: Arc<Gateway>,
    request_id: http::HeaderValue,
    body: Bytes,
    places: super::Places,
    screen: Arc<Screen>,
) -> Verdict {
    let gateway = &*gateway;
    let mut outcome = Verdict { flagged: Vec::new(), refusal: None };
    let mut text = String::new();
    let _ = json::rewrite_strings::<()>(&body, places, |piece, _signed| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(piece);
        Ok(None)
    });
    let asks = screen.moderators.iter().map(|(policy, moderator)| {
        let text = &text;
        async move {
            let reply = match &moderator.bedrock {
                None => {
                    let mut payload = serde_json::json!({ "input": text });
                    if let Some(model) = &moderator.model {
                        payload["model"] = serde_json::Value::from(&**model);
                    }
                    let body = serde_json::to_vec(&payload).unwrap_or_default();
                    gateway.hooks.call(&moderator.url, body, moderator.timeout).await
                }
                Some(guardrail) => apply_guardrail(gateway, moderator, guardrail, text).await,
            };
            (*policy, moderator, reply)
        }
    });
    for (policy, moderator, reply) in futures_util::future::join_all(asks).await {
        let name = &screen.policies[policy].name;
        let verdict = reply.as_deref().ok().and_then(switchyard_guard::flagged);
        match verdict {
            Some(false) => {}
            Some(true) => {
                outcome.flagged.push(moderator.id);
                if screen.policies[policy].action == switchyard_guard::Action::Block && outcome.refusal.is_none() {
                    let blocked = Blocked { policy: name.clone(), rule: Arc::from("moderator"), signed: false };
                    outcome.refusal = Some(refusal(&blocked, Direction::Request));
                }
            }
            None => {
                let why = match &reply {
                    Err(err) => err.to_string(),
                    Ok(_) => "its reply is not a verdict".to_owned(),
                };
                tracing::warn!(request_id = ?request_id, policy = %name, %why, "a moderator gave no verdict");
                if moderator.block_on_error && outcome.refusal.is_none() {
                    let message = format!(
                        "the moderator of policy `{name}` gave no verdict ({why}), and the policy refuses unmoderated requests"
                    );
                    outcome.refusal = Some(ErrorInfo::new(ErrorKind::Unavailable, message).with_status(503));
                }
            }
        }
    }
    outcome
}

/// Asks an AWS Bedrock guardrail (`ApplyGuardrail`) about `text`, signed
/// with its provider's credentials as a Bedrock lane's calls are.
async fn apply_guardrail(
    gateway: &Gateway,
    moderator: &switchyard_guard::Moderator,
    guardrail: &switchyard_guard::BedrockGuardrail,
    text: &str,
) -> Result<bytes::Bytes, switchyard_transport::hooks::HookError> {
    use switchyard_transport::hooks::HookError;
    let provider = gateway
        .config
        .providers
        .iter()
        .find(|p| p.name == guardrail.provider)
        .ok_or_else(|| HookError::Transport(format!("provider `{}` is gone", guardrail.provider)))?;
    let body = switchyard_guard::BedrockGuardrail::body(text);
    let outbound = switchyard_codec::Outbound {
        method: "POST",
        url: &moderator.url,
        body: &body,
        time: std::time::SystemTime::now(),
    };
    let headers = gateway
        .codec(switchyard_ir::Protocol::Bedrock)
        .auth_headers(&provider.auth, &outbound)
        .map_err(|err| HookError::Transport(format!("signing the guardrail call: {err}")))?;
    let body = http_body_util::Full::new(bytes::Bytes::from(body));
    gateway.hooks.post_with(&moderator.url, "application/json", body, headers, moderator.timeout).await
}
