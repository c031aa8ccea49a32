//! One backend as a set of concerns ([`Stores`], [`Backend`]) and the
//! change feed a shared store announces through ([`ChangeFeed`]).

use std::sync::Arc;

use crate::{
    AuditLog, BatchQueue, ConfigStore, ContentStore, GroupStore, KeyStore, Ledger, ObjectStore, PinStore,
    SignatureStore,
};

/// Every concern in one backend.
pub trait Backend:
    KeyStore + GroupStore + Ledger + AuditLog + SignatureStore + ContentStore + ConfigStore + ObjectStore + BatchQueue
{
}

impl<B> Backend for B where
    B: KeyStore
        + GroupStore
        + Ledger
        + AuditLog
        + SignatureStore
        + ContentStore
        + ConfigStore
        + ObjectStore
        + BatchQueue
{
}

/// A backend: every concern, usually served by one object.
#[derive(Clone)]
pub struct Stores {
    /// Keys.
    pub keys: Arc<dyn KeyStore>,
    /// Groups.
    pub groups: Arc<dyn GroupStore>,
    /// The ledger.
    pub ledger: Arc<dyn Ledger>,
    /// The audit log.
    pub audit: Arc<dyn AuditLog>,
    /// Tool-call signatures kept for callers that drop them.
    pub signatures: Arc<dyn SignatureStore>,
    /// Kept request and reply text.
    pub content: Arc<dyn ContentStore>,
    /// The config's versions.
    pub configs: Arc<dyn ConfigStore>,
    /// Files and stored responses.
    pub objects: Arc<dyn ObjectStore>,
    /// Batch jobs and their lines.
    pub batches: Arc<dyn BatchQueue>,
    /// Changes other instances make, when the store is shared.
    pub changes: Option<Arc<dyn ChangeFeed>>,
    /// Session pins kept across restarts: a single node's SQLite only (a
    /// fleet shares pins through Redis; memory keeps nothing past the
    /// process).
    pub pins: Option<Arc<dyn PinStore>>,
}

impl Stores {
    /// Every concern served by `backend`.
    pub fn of<B: Backend + 'static>(backend: B) -> Stores {
        let backend = Arc::new(backend);
        Stores {
            keys: backend.clone(),
            groups: backend.clone(),
            ledger: backend.clone(),
            audit: backend.clone(),
            signatures: backend.clone(),
            content: backend.clone(),
            configs: backend.clone(),
            objects: backend.clone(),
            batches: backend,
            changes: None,
            pins: None,
        }
    }

    /// The same stores, with pins kept in `pins`.
    pub fn with_pins(mut self, pins: Arc<dyn PinStore>) -> Stores {
        self.pins = Some(pins);
        self
    }

    /// A store other instances write too: its changes are announced.
    pub fn shared<B: Backend + ChangeFeed + 'static>(backend: B) -> Stores {
        let backend = Arc::new(backend);
        Stores {
            keys: backend.clone(),
            groups: backend.clone(),
            ledger: backend.clone(),
            audit: backend.clone(),
            signatures: backend.clone(),
            content: backend.clone(),
            configs: backend.clone(),
            objects: backend.clone(),
            batches: backend.clone(),
            changes: Some(backend),
            pins: None,
        }
    }
}

/// A change to the records, made by this instance or another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The key with this id was created or changed.
    Key(String),
    /// The group tree changed.
    Groups,
    /// A config version was made (its number).
    Config(i64),
    /// Changes may have been missed (the feed reconnected): reread everything.
    Resync,
}

/// Announces changes to a store several instances share.
pub trait ChangeFeed: Send + Sync {
    /// Changes from now on.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change>;
}
