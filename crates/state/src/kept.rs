//! Where the gateway keeps what it holds for callers (uploaded files,
//! stored responses, batch jobs): governance's store when there is one (so
//! SQLite on one node, PostgreSQL across a fleet, where any instance reads
//! what another kept), else this process's memory. Kept across reloads,
//! with the bytes each key has arriving on this instance (counted with
//! what the store holds against the key's quota).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use switchyard_store::{BatchQueue, ObjectStore};

/// The stores, and this process's name as a batch worker.
#[derive(Clone)]
pub struct KeptStores {
    /// Files and stored responses.
    pub objects: Arc<dyn ObjectStore>,
    /// Batch jobs and their lines.
    pub batches: Arc<dyn BatchQueue>,
    /// This process's name on the lines it claims (unique per process, so
    /// a restarted instance never finishes its previous life's claims).
    pub worker: Arc<str>,
    /// Wakes this instance's batch worker: a batch was queued here, or one
    /// of its lines ended. Per instance, so gateways sharing a process
    /// (tests, an embedding) never wake each other's worker.
    pub wake: Arc<tokio::sync::Notify>,
    /// Bytes each key's uploads and batches in progress here have taken.
    pub arriving: Arc<Arriving>,
}

/// The bytes each owner's uploads in progress on this instance have taken
/// of its quota: what the store does not hold yet.
#[derive(Debug, Default)]
pub struct Arriving {
    bytes: Mutex<HashMap<String, u64>>,
}

impl Arriving {
    /// Takes `n` more bytes for `owner` when what it keeps (`stored`), what
    /// is arriving for it and `n` stay within `quota`; whether they did.
    pub fn take(&self, owner: &str, n: u64, stored: u64, quota: u64) -> bool {
        let mut bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        let arriving = bytes.get(owner).copied().unwrap_or(0);
        if stored.saturating_add(arriving).saturating_add(n) > quota {
            return false;
        }
        bytes.insert(owner.to_owned(), arriving + n);
        true
    }

    /// Gives back `n` bytes `owner` took (written to the store, or dropped).
    pub fn give_back(&self, owner: &str, n: u64) {
        let mut bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(arriving) = bytes.get_mut(owner) {
            *arriving = arriving.saturating_sub(n);
            if *arriving == 0 {
                bytes.remove(owner);
            }
        }
    }

    /// The bytes arriving for `owner`.
    pub fn of(&self, owner: &str) -> u64 {
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner).get(owner).copied().unwrap_or(0)
    }
}

impl KeptStores {
    /// In this process's memory.
    pub fn in_process() -> KeptStores {
        let store = Arc::new(switchyard_store::memory::MemoryStore::new());
        KeptStores::over(store.clone(), store)
    }

    /// Over a backend's stores.
    pub fn over(objects: Arc<dyn ObjectStore>, batches: Arc<dyn BatchQueue>) -> KeptStores {
        let worker = format!("{}-{:016x}", std::process::id(), fastrand::u64(..));
        KeptStores { objects, batches, worker: Arc::from(worker), wake: Arc::default(), arriving: Arc::default() }
    }
}

/// A request the gateway makes for a caller who is not on the line: a
/// batch line, sent through the data router as the key that submitted it.
/// Only in-process code sets this extension; nothing a client sends can.
#[derive(Debug, Clone)]
pub struct Delegated {
    /// The caller the request runs as: its owner (a key's id, or a
    /// token's or certificate's subject under its key:
    /// `governance::owner`; empty on an open gateway).
    pub owner: Arc<str>,
    /// The ledger row's entry, drawn from the line: the line run twice
    /// (after a crash) is billed once.
    pub entry: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_arriving_counts_with_what_is_stored_against_the_quota() {
        let arriving = Arriving::default();
        assert!(arriving.take("k1", 60, 30, 100));
        assert!(!arriving.take("k1", 11, 30, 100), "30 stored, 60 arriving: 11 more would pass 100");
        assert!(arriving.take("k1", 10, 30, 100));
        assert!(arriving.take("k2", 100, 0, 100), "each owner its own");
        assert_eq!(arriving.of("k1"), 70);
        arriving.give_back("k1", 70);
        assert_eq!(arriving.of("k1"), 0);
        assert!(arriving.bytes.lock().unwrap().get("k1").is_none(), "an owner with nothing arriving is forgotten");
        assert!(arriving.take("k1", 70, 30, 100));
    }
}
