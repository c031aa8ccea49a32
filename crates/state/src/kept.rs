//! Where the gateway keeps what it holds for callers (uploaded files,
//! stored responses, batch jobs): governance's store when there is one (so
//! SQLite on one node, PostgreSQL across a fleet, where any instance reads
//! what another kept), else this process's memory. Kept across reloads.

use std::sync::Arc;

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
        KeptStores { objects, batches, worker: Arc::from(worker), wake: Arc::default() }
    }
}

/// A request the gateway makes for a caller who is not on the line: a
/// batch line, sent through the data router as the key that submitted it.
/// Only in-process code sets this extension; nothing a client sends can.
#[derive(Debug, Clone)]
pub struct Delegated {
    /// The key the request runs as (empty on an open gateway).
    pub key_id: Arc<str>,
    /// The ledger row's entry, drawn from the line: the line run twice
    /// (after a crash) is billed once.
    pub entry: i64,
}
