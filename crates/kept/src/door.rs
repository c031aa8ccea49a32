//! What an upload or a batch passes before its body is read, and what it
//! holds while the body arrives: the caller (as any request's), the key's
//! rate and concurrency limits (it is admitted on the key's chain as a
//! request that costs nothing, so it counts toward `rpm` and `concurrent`
//! like any other), and the key's quota (`files.quota_per_key`: what the
//! store keeps for the key, and what is arriving for it on this instance,
//! may not pass it). The body itself is read within
//! `server.body_read_timeout`, as any request body is.

use std::future::Future;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::Response;
use switchyard_governance::Estimate;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::governance::{Caller, Hold};
use switchyard_state::Gateway;

use crate::{caller, now_ms, owner_of, unavailable};

/// A caller let in to upload or submit: its hold on the key's limits and
/// the bytes it has taken of the key's quota, both given back when it is
/// dropped (the upload kept, refused or cut short).
pub(crate) struct Door {
    gateway: Arc<Gateway>,
    /// Whose objects it makes.
    pub(crate) owner: String,
    hold: Option<Hold>,
    /// What the store held for the owner when it came in.
    stored: u64,
    /// What it has taken of the quota since.
    taken: u64,
}

impl Door {
    /// Lets a caller in: authenticated, admitted on its key's limits, with
    /// room left in its quota; else its refusal in `protocol`.
    pub(crate) async fn enter(gateway: &Arc<Gateway>, protocol: Protocol, parts: &Parts) -> Result<Door, Response> {
        let caller: Option<Caller> = caller(gateway, protocol, parts)?;
        let owner = owner_of(caller.as_ref());
        let hold = match (&gateway.governance, &caller) {
            (Some(governance), Some(caller)) => {
                match governance.admit_on_chain(caller, Estimate::bounded(0, 0), None).await {
                    Ok(hold) => Some(hold),
                    Err(denied) => return Err(refusal(gateway, protocol, &denied.info, denied.retry_after)),
                }
            }
            _ => None,
        };
        let mut door = Door { gateway: gateway.clone(), owner, hold, stored: 0, taken: 0 };
        let kept = &gateway.kept;
        let stored = async {
            let objects = kept.objects.object_bytes(door.owner.clone(), now_ms()).await?;
            let batches = kept.batches.batch_bytes(door.owner.clone()).await?;
            Ok::<u64, switchyard_store::StoreError>(objects.saturating_add(batches))
        };
        door.stored = stored.await.map_err(|err| unavailable(gateway, protocol, &err))?;
        let quota = gateway.config.kept.files.quota_per_key;
        let kept = door.stored.saturating_add(kept.arriving.of(&door.owner));
        if kept >= quota {
            return Err(crate::error(gateway, protocol, &over_quota(quota, kept)));
        }
        Ok(door)
    }

    /// Takes `n` more bytes of the key's quota for what is arriving, or the
    /// refusal naming the quota.
    pub(crate) fn take(&mut self, n: u64) -> Result<(), ErrorInfo> {
        let quota = self.gateway.config.kept.files.quota_per_key;
        let arriving = &self.gateway.kept.arriving;
        if !arriving.take(&self.owner, n, self.stored, quota) {
            let elsewhere = arriving.of(&self.owner).saturating_sub(self.taken);
            return Err(over_quota(quota, self.stored.saturating_add(elsewhere)));
        }
        self.taken += n;
        Ok(())
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.gateway.kept.arriving.give_back(&self.owner, self.taken);
        if let (Some(governance), Some(hold)) = (&self.gateway.governance, &self.hold) {
            governance.settle(hold, 0, 0);
        }
    }
}

/// The refusal of an upload or batch that would pass its key's quota: what
/// the key keeps (and is sending elsewhere) before it.
fn over_quota(quota: u64, kept: u64) -> ErrorInfo {
    ErrorInfo::new(
        ErrorKind::RequestTooLarge,
        format!(
            "this key keeps {kept} bytes of files, batches and stored responses, and may keep at most {quota} \
             (files.quota_per_key); this would pass it: delete files or batches, or ask the operator for a larger quota"
        ),
    )
}

/// A refusal in `protocol`, with its `Retry-After` when waiting helps.
pub(crate) fn refusal(gateway: &Gateway, protocol: Protocol, info: &ErrorInfo, retry_after: Option<u64>) -> Response {
    let mut response = crate::error(gateway, protocol, info);
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// `read` (a body's whole read) within `server.body_read_timeout`, or the
/// caller's 408.
pub(crate) async fn in_time<T>(gateway: &Gateway, read: impl Future<Output = T>) -> Result<T, ErrorInfo> {
    let limit = gateway.config.server.body_read_timeout;
    tokio::time::timeout(limit, read).await.map_err(|_| {
        ErrorInfo::new(
            ErrorKind::Timeout,
            format!("the request body did not arrive within {limit:?} (server.body_read_timeout)"),
        )
        .with_status(408)
    })
}
