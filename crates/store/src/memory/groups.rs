//! The group tree ([`GroupStore`]).

use super::{ready, MemoryStore};
use crate::{GroupRecord, GroupStore, StoreError, StoreFuture};

impl GroupStore for MemoryStore {
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            inner.groups.insert(group.name.clone(), group);
            Ok(())
        }))
    }

    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| inner.groups.remove(name).map(|_| ()).ok_or(StoreError::NotFound)))
    }

    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>> {
        ready(self.with(|inner| Ok(inner.groups.values().cloned().collect())))
    }
}
