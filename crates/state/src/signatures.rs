//! Tool-call signatures kept for callers that drop them.
//!
//! A Gemini lane signs the first function call of each step and wants it
//! back on a later turn. `codec::signature` carries the signature in what
//! each caller protocol echoes, but a caller that rebuilds its assistant
//! turn from id, name and arguments (common with the OpenAI, Responses and
//! Bedrock SDKs) drops the carrier. So the gateway also keeps each signature
//! under the caller's owner (its key, or a token's or a certificate's own
//! subject under the key they share: `state::governance::owner`) and the call's
//! id for [`KEPT_FOR`], in the
//! gateway's store: in process by default, SQLite or PostgreSQL with
//! governance's store, Redis in a fleet. A later request that sends the
//! call back unsigned gets it restored before the Gemini writer runs; the
//! writer's placeholder is the last resort.

use std::sync::Arc;
use std::time::Duration;

use switchyard_codec::signature;
use switchyard_ir::Request;
use switchyard_store::{KeptSignature, SignatureStore, StoreError, StoreFuture, MAX_KEPT_SIGNATURE};

/// How long a signature is kept after its reply: longer than a tool loop's
/// pauses, shorter than a conversation is worth resuming unsigned.
pub const KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest tool-call id looked up or kept (ids are the caller's input).
pub const MAX_CALL_ID: usize = 256;

/// What restoring a request's signatures came to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// Calls that came back signed (in the caller's carrier, or already).
    pub carried: u32,
    /// Unsigned calls whose kept signature was put back.
    pub restored: u32,
    /// Unsigned calls with none kept: the writer signs them with the
    /// placeholder.
    pub placeholder: u32,
}

/// The gateway's signature memory: a store, with the caller's key in every
/// entry's key so one caller never reads another's.
#[derive(Clone)]
pub struct Signatures {
    store: Arc<dyn SignatureStore>,
}

impl Signatures {
    /// Signatures kept in `store`.
    pub fn new(store: Arc<dyn SignatureStore>) -> Signatures {
        Signatures { store }
    }

    /// Signatures kept in this process only.
    pub fn in_process() -> Signatures {
        Signatures::new(Arc::new(switchyard_store::memory::MemoryStore::new()))
    }

    /// Keeps the signed calls (id, signature) of a reply to `owner` (the
    /// caller's key id, `None` without governance). Nothing to keep costs
    /// nothing.
    pub async fn keep<'a>(
        &self,
        owner: Option<&str>,
        calls: impl IntoIterator<Item = (&'a str, &'a str)>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let kept: Vec<KeptSignature> = calls
            .into_iter()
            .filter(|(id, signature)| id.len() <= MAX_CALL_ID && signature.len() <= MAX_KEPT_SIGNATURE)
            .map(|(id, signature)| KeptSignature {
                key: entry_key(owner, id),
                signature: signature.to_owned(),
                expires_ms: now_ms.saturating_add(KEPT_FOR.as_millis() as i64),
            })
            .collect();
        if kept.is_empty() {
            return Ok(());
        }
        self.store.keep_signatures(kept, now_ms).await
    }

    /// Puts kept signatures back on the calls of `request` that Gemini
    /// wants signed and came back without one. A store that cannot answer
    /// leaves them to the placeholder.
    pub async fn restore(&self, owner: Option<&str>, request: &mut Request, now_ms: i64) -> Restored {
        let signed = request
            .messages
            .iter()
            .filter(|m| m.role == switchyard_ir::Role::Assistant)
            .filter(|m| signature::signed_calls(&m.content).next().is_some())
            .count();
        let mut unsigned = signature::unsigned_first_calls(&mut request.messages);
        let mut outcome = Restored { carried: signed as u32, ..Restored::default() };
        // An id longer than any kept one was never kept: the placeholder.
        let kept_id = |id: &str| id.len() <= MAX_CALL_ID;
        outcome.placeholder = unsigned.iter().filter(|call| !kept_id(&call.id)).count() as u32;
        unsigned.retain(|call| kept_id(&call.id));
        if unsigned.is_empty() {
            return outcome;
        }
        let keys: Vec<String> = unsigned.iter().map(|call| entry_key(owner, &call.id)).collect();
        let found = match self.store.find_signatures(keys, now_ms).await {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(error = %err, "kept tool-call signatures could not be read");
                Vec::new()
            }
        };
        for (index, call) in unsigned.iter_mut().enumerate() {
            match found.get(index).cloned().flatten() {
                Some(signature) => {
                    call.signature = Some(signature);
                    outcome.restored += 1;
                }
                None => outcome.placeholder += 1,
            }
        }
        outcome
    }
}

/// The store's key of `owner`'s call `id`: the owner encoded (an owner
/// may hold a `:`, an encoded one never does), so no owner and call id
/// read as another's.
fn entry_key(owner: Option<&str>, id: &str) -> String {
    const OWNER: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    match owner {
        Some(owner) => format!("{}:{id}", percent_encoding::utf8_percent_encode(owner, OWNER)),
        None => format!("-:{id}"),
    }
}

/// A fleet's signatures, in its Redis (they expire there by themselves).
pub struct FleetSignatures(pub Arc<switchyard_fleet::shared::FleetState>);

impl SignatureStore for FleetSignatures {
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let Some(expires_ms) = kept.iter().map(|entry| entry.expires_ms).max() else { return Ok(()) };
            let ttl = Duration::from_millis(u64::try_from(expires_ms.saturating_sub(now_ms)).unwrap_or(0));
            let pairs: Vec<(String, String)> = kept.into_iter().map(|entry| (entry.key, entry.signature)).collect();
            self.0.keep_signatures(&pairs, ttl).await.map_err(|err| StoreError::Unavailable(format!("redis: {err}")))
        })
    }

    fn find_signatures(&self, keys: Vec<String>, _now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        Box::pin(async move {
            self.0.find_signatures(&keys).await.map_err(|err| StoreError::Unavailable(format!("redis: {err}")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::{Block, Message, Role, ToolUse};

    fn turn(id: &str, signature: Option<&str>) -> Message {
        let mut call = ToolUse::new(id, "lookup", "{}");
        call.signature = signature.map(str::to_owned);
        Message::new(Role::Assistant, vec![Block::ToolUse(call)])
    }

    fn signature_of(request: &Request, turn: usize) -> Option<&str> {
        match &request.messages[turn].content[0] {
            Block::ToolUse(call) => call.signature.as_deref(),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_kept_signature_comes_back_to_its_owner_only() {
        let signatures = Signatures::in_process();
        signatures.keep(Some("key_a"), [("call_1", "c2ln")], 1_000).await.unwrap();

        let mut request = Request { messages: vec![turn("call_1", None)], ..Request::default() };
        let restored = signatures.restore(Some("key_a"), &mut request, 2_000).await;
        assert_eq!(restored, Restored { carried: 0, restored: 1, placeholder: 0 });
        assert_eq!(signature_of(&request, 0), Some("c2ln"));

        let mut other = Request { messages: vec![turn("call_1", None)], ..Request::default() };
        let restored = signatures.restore(Some("key_b"), &mut other, 2_000).await;
        assert_eq!(restored, Restored { carried: 0, restored: 0, placeholder: 1 });
        assert_eq!(signature_of(&other, 0), None);
    }

    #[tokio::test]
    async fn a_signature_is_forgotten_after_its_time() {
        let signatures = Signatures::in_process();
        signatures.keep(None, [("call_1", "c2ln")], 0).await.unwrap();
        let late = KEPT_FOR.as_millis() as i64 + 1;
        let mut request =
            Request { messages: vec![turn("call_1", None), turn("call_2", Some("x"))], ..Request::default() };
        let restored = signatures.restore(None, &mut request, late).await;
        assert_eq!(restored, Restored { carried: 1, restored: 0, placeholder: 1 });
        // An id too long to have been kept is not looked up.
        let long = "c".repeat(MAX_CALL_ID + 1);
        signatures.keep(None, [(long.as_str(), "c2ln")], 0).await.unwrap();
        let mut request = Request { messages: vec![turn(&long, None)], ..Request::default() };
        assert_eq!(signatures.restore(None, &mut request, 1).await, Restored { placeholder: 1, ..Restored::default() });
    }
}
