//! The response cache's keys. A request is found by its bytes as they came
//! (a fast keyed hash, checked against the bytes it was stored with), else
//! by its IR normalised (no stream flag, no caller-given model name, user
//! or metadata), hashed with its pool and partition (the caller's key, or
//! its group when the operator says so; one partition in an open gateway).

use sha2::{Digest, Sha256};
use switchyard_state::call::Call;
use switchyard_state::response_cache::CacheKey;
use switchyard_state::Gateway;

/// What the raw key is made of: the partition, the pool, the caller's
/// protocol and stream flag, and the body's bytes as they came.
pub(super) fn raw_material(gateway: &Gateway, call: &Call, pool: usize) -> Vec<u8> {
    let partition = partition(gateway, call);
    let name = &gateway.pools[pool].name;
    let mut material = Vec::with_capacity(partition.len() + name.len() + call.body.len() + 4);
    material.extend_from_slice(partition.as_bytes());
    material.push(0);
    material.extend_from_slice(name.as_bytes());
    material.extend_from_slice(&[0, call.ingress.index() as u8, u8::from(call.stream)]);
    material.extend_from_slice(&call.body);
    material
}

/// The raw key: two seeded SipHashes of the material, tagged apart from
/// the IR's SHA-256 keys. A fast hash, not a digest: a hit is checked
/// against the material it was stored with.
pub(super) fn raw_key(material: &[u8]) -> CacheKey {
    use std::hash::{BuildHasher, Hasher};
    let mut key = [0u8; 32];
    key[0] = b'r';
    for (seed, at) in [(0x5357_4954_4348_5941u64, 8), (0x5244_4341_4348_4531u64, 16)] {
        let mut hasher =
            std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().build_hasher();
        hasher.write_u64(seed);
        hasher.write(material);
        key[at..at + 8].copy_from_slice(&hasher.finish().to_le_bytes());
    }
    key
}

/// Whose entries a call reads: its owner's (its key's, or a token's or a
/// certificate's own subject's under the key they share), its group's
/// (`scope: group`), or, on a gateway without keys, everyone's.
fn partition(gateway: &Gateway, call: &Call) -> String {
    match (gateway.config.cache.by_group, call.caller.as_ref()) {
        (_, None) => String::new(),
        (true, Some(caller)) => match &caller.key.record.group {
            Some(group) => format!("group:{group}"),
            None => format!("key:{}", caller.owner),
        },
        (false, Some(caller)) => format!("key:{}", caller.owner),
    }
}

pub(super) fn hex(key: &CacheKey) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of `call`: its partition, its pool, its request read to IR and
/// normalised (an operation's by its own reader). `None` when the body
/// cannot be read (the path reports it).
pub(super) fn key(gateway: &Gateway, call: &Call, pool: usize) -> Option<CacheKey> {
    let request = crate::operation::of(call.operation).cache_material(gateway, call)?;
    let mut hash = Sha256::new();
    hash.update(partition(gateway, call).as_bytes());
    hash.update([0]);
    hash.update(gateway.pools[pool].name.as_bytes());
    hash.update([0, call.operation as u8, 0]);
    hash.update(request);
    Some(hash.finalize().into())
}
