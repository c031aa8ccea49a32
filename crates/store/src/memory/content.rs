//! Kept request and reply text ([`ContentStore`]).

use super::{ready, MemoryStore};
use crate::{ContentStore, KeptContent, StoreFuture};

impl ContentStore for MemoryStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for record in kept {
                inner.content.entry(record.entry).or_insert(record);
            }
            Ok(())
        }))
    }

    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>> {
        ready(self.with(|inner| Ok(inner.content.get(&entry).cloned())))
    }

    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.content.len();
            inner.content.retain(|_, record| record.user_tag.as_deref() != Some(user_tag.as_str()));
            Ok((before - inner.content.len()) as u64)
        }))
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.content.len();
            inner.content.retain(|_, record| record.at_ms >= before_ms);
            Ok((before - inner.content.len()) as u64)
        }))
    }
}
