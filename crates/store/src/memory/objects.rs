//! Files and stored responses ([`ObjectStore`]), bounded by count and bytes.

use super::{ready, Inner, MemoryStore, ObjectKey, MEMORY_OBJECTS, MEMORY_OBJECT_BYTES};
use crate::kept::{KeptObject, ObjectKind, ObjectStore, ORPHAN_CHUNKS_MS};
use crate::StoreFuture;

impl Inner {
    /// The range of `key`'s chunks.
    fn chunk_range(key: &ObjectKey) -> std::ops::RangeInclusive<(ObjectKey, u32)> {
        (key.clone(), 0)..=(key.clone(), u32::MAX)
    }

    /// Removes an object and its chunks; whether there was an object.
    fn remove_object(&mut self, key: &ObjectKey) -> bool {
        let chunks: Vec<(ObjectKey, u32)> = self.chunks.range(Self::chunk_range(key)).map(|(k, _)| k.clone()).collect();
        for chunk in chunks {
            if let Some((_, data)) = self.chunks.remove(&chunk) {
                if self.objects.contains_key(key) {
                    self.object_bytes = self.object_bytes.saturating_sub(data.len() as u64);
                }
            }
        }
        match self.objects.remove(key) {
            Some(object) => {
                self.object_bytes = self.object_bytes.saturating_sub(object.body.len() as u64);
                true
            }
            None => false,
        }
    }

    /// The bytes of `key`'s chunks.
    fn chunk_bytes(&self, key: &ObjectKey) -> u64 {
        self.chunks.range(Self::chunk_range(key)).map(|(_, (_, data))| data.len() as u64).sum()
    }
}

impl ObjectStore for MemoryStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            let key = (object.kind, object.owner.clone(), object.id.clone());
            if let Some(old) = inner.objects.remove(&key) {
                inner.object_bytes = inner.object_bytes.saturating_sub(old.body.len() as u64 + inner.chunk_bytes(&key));
            } else {
                inner.object_order.push_back(key.clone());
            }
            let past: Vec<(ObjectKey, u32)> = inner
                .chunks
                .range((key.clone(), object.chunks)..=(key.clone(), u32::MAX))
                .map(|(k, _)| k.clone())
                .collect();
            for chunk in past {
                inner.chunks.remove(&chunk);
            }
            inner.object_bytes += object.body.len() as u64 + inner.chunk_bytes(&key);
            inner.objects.insert(key, object);
            while inner.objects.len() > MEMORY_OBJECTS || inner.object_bytes > MEMORY_OBJECT_BYTES {
                let Some(oldest) = inner.object_order.pop_front() else { break };
                inner.remove_object(&oldest);
            }
            if inner.object_order.len() > 2 * MEMORY_OBJECTS {
                let objects = &inner.objects;
                let kept: std::collections::VecDeque<_> =
                    inner.object_order.iter().filter(|k| objects.contains_key(*k)).cloned().collect();
                inner.object_order = kept;
            }
            Ok(())
        }))
    }

    fn put_chunk(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        seq: u32,
        at_ms: i64,
        data: Vec<u8>,
    ) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            inner.chunks.insert(((kind, owner, id), seq), (at_ms, data));
            Ok(())
        }))
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        ready(self.with(|inner| Ok(inner.chunks.get(&((kind, owner, id), seq)).map(|(_, data)| data.clone()))))
    }

    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>> {
        ready(self.with(|inner| {
            Ok(inner.objects.get(&(kind, owner, id)).filter(|o| o.expires_ms.is_none_or(|at| at > now_ms)).cloned())
        }))
    }

    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>> {
        ready(self.with(|inner| {
            let mut found: Vec<KeptObject> = inner
                .objects
                .values()
                .filter(|o| o.kind == kind && o.owner == owner && o.expires_ms.is_none_or(|at| at > now_ms))
                .map(|o| KeptObject { body: Vec::new(), ..o.clone() })
                .collect();
            found.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| b.id.cmp(&a.id)));
            found.truncate(limit);
            Ok(found)
        }))
    }

    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool> {
        ready(self.with(|inner| Ok(inner.remove_object(&(kind, owner, id)))))
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let expired: Vec<ObjectKey> = inner
                .objects
                .iter()
                .filter(|(_, o)| o.expires_ms.is_some_and(|at| at <= now_ms))
                .map(|(k, _)| k.clone())
                .collect();
            for key in &expired {
                inner.remove_object(key);
            }
            let objects = &inner.objects;
            inner.chunks.retain(|(key, _), (at, _)| objects.contains_key(key) || *at > now_ms - ORPHAN_CHUNKS_MS);
            Ok(expired.len() as u64)
        }))
    }

    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let theirs: Vec<ObjectKey> = inner
                .objects
                .iter()
                .filter(|(_, o)| o.user_tag.as_deref() == Some(user_tag.as_str()))
                .map(|(k, _)| k.clone())
                .collect();
            for key in &theirs {
                inner.remove_object(key);
            }
            Ok(theirs.len() as u64)
        }))
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            Ok(inner
                .objects
                .values()
                .filter(|o| o.owner == owner && o.expires_ms.is_none_or(|at| at > now_ms))
                .map(|o| o.size)
                .sum())
        }))
    }
}
