//! Session pins kept across restarts ([`PinStore`]): a single node's
//! only (a fleet shares pins through Redis).

use rusqlite::params;

use super::{unavailable, SqliteStore};
use crate::{KeptPin, PinStore, StoreFuture};

impl PinStore for SqliteStore {
    fn keep_pins(&self, pins: Vec<KeptPin>, now_ms: i64) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut upsert =
                    tx.prepare_cached(include_str!("pins/keep_pins_insert_session_pins.sql")).map_err(unavailable)?;
                for pin in &pins {
                    upsert
                        .execute(params![pin.pool, pin.session, pin.lane, pin.expires_ms, i64::from(pin.switches)])
                        .map_err(unavailable)?;
                }
            }
            tx.execute(include_str!("pins/keep_pins_delete_session_pins.sql"), params![now_ms]).map_err(unavailable)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn live_pins(&self, now_ms: i64, per_pool: usize) -> StoreFuture<'_, Vec<KeptPin>> {
        self.run(move |conn| {
            conn.execute(include_str!("pins/live_pins_delete_session_pins.sql"), params![now_ms])
                .map_err(unavailable)?;
            let per_pool = i64::try_from(per_pool).unwrap_or(i64::MAX);
            // The longest-lived first, at most `per_pool` of each pool.
            let mut select =
                conn.prepare_cached(include_str!("pins/live_pins_select_session_pins.sql")).map_err(unavailable)?;
            let pins = select
                .query_map(params![per_pool], |row| {
                    Ok(KeptPin {
                        pool: row.get(0)?,
                        session: row.get(1)?,
                        lane: row.get(2)?,
                        expires_ms: row.get(3)?,
                        switches: u32::try_from(row.get::<_, i64>(4)?).unwrap_or(u32::MAX),
                    })
                })
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            Ok(pins)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(pool: &str, session: &str, lane: &str, expires_ms: i64, switches: u32) -> KeptPin {
        KeptPin { pool: pool.into(), session: session.into(), lane: lane.into(), expires_ms, switches }
    }

    #[tokio::test]
    async fn pins_are_replaced_expire_and_come_back_longest_lived_first_per_pool() {
        let store = SqliteStore::in_memory().unwrap();
        store
            .keep_pins(
                vec![
                    pin("chat", "s1", "a", 5_000, 0),
                    pin("chat", "s2", "a", 9_000, 0),
                    pin("eu", "s1", "b", 2_000, 0),
                ],
                1_000,
            )
            .await
            .unwrap();
        // A later pin of the same pool and session replaces it; one expired by now goes.
        store.keep_pins(vec![pin("chat", "s1", "b", 8_000, 1)], 2_500).await.unwrap();
        let live = store.live_pins(3_000, 10).await.unwrap();
        assert_eq!(live, vec![pin("chat", "s2", "a", 9_000, 0), pin("chat", "s1", "b", 8_000, 1)]);
        // At most `per_pool` of each pool, the longest-lived.
        assert_eq!(store.live_pins(3_000, 1).await.unwrap(), vec![pin("chat", "s2", "a", 9_000, 0)]);
        // Expired at read: dropped, and gone from the table.
        assert_eq!(store.live_pins(8_500, 10).await.unwrap(), vec![pin("chat", "s2", "a", 9_000, 0)]);
        assert!(store.live_pins(9_000, 10).await.unwrap().is_empty());
    }
}
