//! The group tree ([`GroupStore`]).

use rusqlite::params;

use super::{unavailable, SqliteStore};
use crate::{from_json, to_json, GroupRecord, GroupStore, StoreError, StoreFuture};

impl GroupStore for SqliteStore {
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            conn.execute(include_str!("groups/put_group.sql"), params![group.name, to_json(&group)?])
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        self.run(move |conn| match conn.execute(include_str!("groups/delete_group.sql"), params![name]) {
            Ok(0) => Err(StoreError::NotFound),
            Ok(_) => Ok(()),
            Err(err) => Err(unavailable(err)),
        })
    }

    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>> {
        self.run(move |conn| {
            let mut statement = conn.prepare(include_str!("groups/list_groups.sql")).map_err(unavailable)?;
            let texts = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            texts.iter().map(|t| from_json(t)).collect()
        })
    }
}
