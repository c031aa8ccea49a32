//! The group tree ([`GroupStore`]), each write announced on
//! `switchyard_groups`.

use super::{col, unavailable, PostgresStore, GROUPS_CHANNEL};
use crate::{from_json, to_json, GroupRecord, GroupStore, StoreError, StoreFuture};

impl GroupStore for PostgresStore {
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(include_str!("groups/put_group_insert_groups.sql"), &[&group.name, &to_json(&group)?])
                .await
                .map_err(unavailable)?;
            tx.execute(include_str!("groups/put_group_notify.sql"), &[&GROUPS_CHANNEL]).await.map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            if tx.execute(include_str!("groups/delete_group_delete_groups.sql"), &[&name]).await.map_err(unavailable)?
                == 0
            {
                return Err(StoreError::NotFound);
            }
            tx.execute(include_str!("groups/delete_group_notify.sql"), &[&GROUPS_CHANNEL])
                .await
                .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client.query(include_str!("groups/list_groups.sql"), &[]).await.map_err(unavailable)?;
            rows.iter().map(|row| from_json(col::<&str>(row, 0)?)).collect()
        })
    }
}
