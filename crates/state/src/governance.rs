//! Governance on the request path and behind the admin API: who is
//! calling (a virtual key from whichever header its SDK uses, or a SigV4
//! signature by a minted AWS pair), whether the key may name the pool,
//! and whether its chain of budget and limit buckets has room — all
//! answered from memory. Keys are cached (a change made here is effective
//! at once), counters live in a [`Governor`] behind one short lock, and
//! ledger rows are written behind ([`ledger`]).
//!
//! An admitted request's reservation is held by its `settle::Record` until
//! it is settled to what the request really cost (or released when it cost
//! nothing).

pub mod admission;
pub mod authenticate;
pub mod budget_watch;
pub mod jwt;
pub mod ledger;
mod metrics;
pub mod owner;
mod pricing;

/// Maps on the admission path hash with foldhash: their keys are key
/// hashes and ids the gateway made, and SipHash cost more than the lookup.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use switchyard_config::{AuthMode, Config};
use switchyard_governance::money::Price;
use switchyard_governance::{BucketId, BucketSpec, Estimate, Governor, KeyHash, KeyRecord, Reservation};
use switchyard_store::{GroupRecord, SpendBy, StoreError, Stores, TotalsQuery};

pub use admission::Denied;
pub use authenticate::{Presented, Refused};
use ledger::{LedgerQueue, LedgerWriter};
pub use metrics::encode_metrics;

pub use crate::clock::now_ms;

/// A cached key: its record and its bucket chain, computed once per change.
#[derive(Debug)]
pub struct CachedKey {
    /// The record.
    pub record: KeyRecord,
    /// Its id, shared.
    pub id: Arc<str>,
    /// Its buckets: the key's own, its group's, then the group's parents.
    pub chain: Arc<[BucketId]>,
    /// The same buckets' names in a fleet's Redis.
    pub fleet_keys: Arc<[String]>,
    /// A bucket of the chain has a USD budget.
    pub budgeted: bool,
    /// The end-user policies on its chain (the key's own, its groups'),
    /// each with its owner (`key:<id>`, `group:<name>`): a request that
    /// names its end user is held on one more bucket per policy.
    pub end_users: Vec<(Arc<str>, Arc<switchyard_governance::key::EndUserPolicy>)>,
    /// A budget on its chain downgrades rather than refuse.
    pub downgrades: bool,
    /// Per model or pool named in a `per_model` limit on its chain, the
    /// chain a request naming it is held on (the key's chain, then one
    /// bucket per owner that limits it); empty when none does.
    pub scoped: Box<[ScopedChain]>,
}

/// A bucket's use in a window, as the ledger holds it.
struct LedgerUse {
    /// Spend at today's prices (nano-USD).
    spent: u64,
    /// Requests.
    requests: u64,
    /// Tokens, input plus output.
    tokens: u64,
}

/// The chain of the requests that name one model or pool.
#[derive(Debug)]
pub struct ScopedChain {
    /// The model or pool.
    pub name: Arc<str>,
    /// The key's chain and the per-model buckets.
    pub chain: Arc<[BucketId]>,
    /// Their names in a fleet's Redis.
    pub fleet_keys: Arc<[String]>,
}

impl CachedKey {
    /// The chain a request naming `name` is held on (and its buckets'
    /// names in a fleet): the key's, with the `per_model` buckets of
    /// `name` when its chain has any.
    pub fn chain_for(&self, name: Option<&str>) -> (&Arc<[BucketId]>, &Arc<[String]>) {
        if let (false, Some(name)) = (self.scoped.is_empty(), name) {
            if let Some(scoped) = self.scoped.iter().find(|s| &*s.name == name) {
                return (&scoped.chain, &scoped.fleet_keys);
            }
        }
        (&self.chain, &self.fleet_keys)
    }
}

/// Keys by what a caller presents.
#[derive(Default)]
struct KeyIndex {
    by_hash: HashMap<KeyHash, Arc<CachedKey>>,
    by_aws: HashMap<String, Arc<CachedKey>>,
    by_id: HashMap<String, Arc<CachedKey>>,
    /// A token's caller per (issuer in `auth.jwt`, group): a key of its
    /// own in memory, never stored and never found by a secret.
    by_jwt: HashMap<(usize, String), Arc<CachedKey>>,
    /// A client certificate's caller per group (`cert:<group>`).
    by_cert: HashMap<String, Arc<CachedKey>>,
    /// The in-memory keys (a token's, a certificate's) by id, for a batch
    /// line that runs as one.
    in_memory: HashMap<String, Arc<CachedKey>>,
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Its key (for a token's caller, the one its issuer and group share).
    pub key: Arc<CachedKey>,
    /// A token's subject: the request's end user, whatever the request
    /// names.
    pub subject: Option<Arc<str>>,
    /// Who owns what it keeps, its cache partition and its signatures
    /// ([`owner`]): its key's id, or for a key callers share, that and
    /// the caller's own subject.
    pub owner: Arc<str>,
}

impl Caller {
    /// The caller of its own key (a virtual key, a batch line's key).
    pub fn of_key(key: Arc<CachedKey>) -> Caller {
        Caller { owner: key.id.clone(), key, subject: None }
    }
}

/// The id of the in-memory key a token of issuer `name` and group `group`
/// is admitted as (`jwt:corp:research`): what the ledger and spend name.
pub fn jwt_key_id(name: &str, group: &str) -> String {
    format!("jwt:{name}:{group}")
}

/// What governance counts, for `/stats` and metrics.
#[derive(Debug, Default)]
pub struct GovernanceStats {
    /// Refusals by reason, indexed by [`Refused::index`].
    pub refused: [AtomicU64; Refused::ALL.len()],
}

/// Why governance could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The receipts' chain file cannot be opened.
    #[error("{0}")]
    Receipts(#[from] crate::receipts::ReceiptError),
}

/// Governance's state.
pub struct Governance {
    /// How callers authenticate.
    pub mode: AuthMode,
    /// The stores.
    pub stores: Stores,
    keys: ArcSwap<KeyIndex>,
    groups: ArcSwap<HashMap<String, GroupRecord>>,
    /// Each group's markup and own card, read from its record when the
    /// groups load.
    pricing: ArcSwap<pricing::GroupPrices>,
    governor: Mutex<Governor>,
    /// The ledger writer, when there is a ledger.
    pub ledger: Option<LedgerQueue>,
    /// The writer of kept text (sealed), and its purge.
    pub content: crate::retention::ContentQueue,
    /// The receipt writer (`receipts:`), when receipts are on.
    pub receipts: Option<crate::receipts::ReceiptQueue>,
    /// Output tokens reserved for a request that names no maximum.
    pub default_max_tokens: u64,
    /// Counters.
    pub stats: GovernanceStats,
    /// Serialises admin writes (reads of the caches never wait for it).
    pub writes: tokio::sync::Mutex<()>,
    /// The fleet's shared counters (`storage.redis_url`); `None`: this
    /// instance's own counters decide.
    pub fleet: Option<Arc<switchyard_fleet::counters::Fleet>>,
    /// The audit log's per-source budget of refused attempts.
    pub audit_gate: crate::audit::AuditGate,
    /// Each lane's rate-card price, for spend read back from the ledger.
    prices: ArcSwap<Prices>,
    /// Abuse suspension (`governance.suspend`), when on.
    pub suspend: Option<switchyard_config::Suspend>,
    /// Identity providers whose tokens callers may present (`auth.jwt`).
    pub jwt: Option<Arc<jwt::Issuers>>,
    /// What a verified client certificate's name names (`server.tls.client_identity`).
    pub client_identity: Option<switchyard_config::ClientIdentity>,
    /// The MCP grants of a certificate's group caller (`client_identity.mcp`).
    client_mcp: Vec<String>,
    /// Each key's refusals of its own in the current window: (window
    /// start in Unix ms, count). Touched only when a request is refused.
    abuse: Mutex<HashMap<Arc<str>, (u64, u32)>>,
    /// Itself, for the tasks it starts (an end user's spend read behind).
    me: std::sync::OnceLock<std::sync::Weak<Governance>>,
    /// Each budget's burn and forecast, and the signals not yet told.
    watches: Mutex<budget_watch::Watches>,
    /// Every agent run this instance has seen (`groups.<g>.runs`; empty,
    /// and never touched, when no group configures runs).
    pub(crate) runs: Mutex<switchyard_governance::run::RunBook>,
}

/// The alert subject of a key's suspension.
pub fn suspension_subject(record: &KeyRecord) -> String {
    format!("key `{}` ({})", record.name, record.id)
}

/// The in-memory key a token of `issuer` naming `group` is admitted as:
/// no secret (its hash is of a random value no caller holds), no budget or
/// limits of its own (the group's apply; the token's subject is its end
/// user, so a group's end-user policy caps each workload), the issuer's
/// pools and MCP grants.
fn jwt_record(issuer: &switchyard_config::JwtIssuer, group: &str) -> KeyRecord {
    let name = format!("{} token ({group})", issuer.name);
    let mut record = in_memory_record(&jwt_key_id(&issuer.name, group), &name, group, issuer.pools.clone());
    record.prefix = format!("jwt:{}", issuer.name);
    record.mcp = Some(issuer.mcp.clone());
    record.passthrough = Some(issuer.passthrough.clone());
    record
}

/// Where a key of the cache is found: by its secret (a stored key), or as
/// a token's or a client certificate's caller (an in-memory key).
enum Place {
    Stored,
    Token(usize, String),
    Cert(String),
}

/// True for an in-memory key (a token's or a client certificate's caller):
/// no store holds it, so it is never suspended or changed.
fn in_memory(id: &str) -> bool {
    id.starts_with("jwt:") || id.starts_with("cert:")
}

/// The in-memory key a client certificate naming `group` is admitted as
/// (`cert:<group>`): like a token's, no secret opens it and the group's
/// budget and limits apply; its MCP grants are `client_identity.mcp`.
fn cert_record(group: &str, mcp: &[String]) -> KeyRecord {
    let mut record = in_memory_record(&format!("cert:{group}"), &format!("client certificate ({group})"), group, None);
    record.prefix = "cert".to_owned();
    record.mcp = Some(mcp.to_vec());
    record
}

/// A key `id` held in memory only, drawing on `group`: no secret opens it
/// (its hash is of a random value no caller holds), no budget or limits of
/// its own, no MCP grants.
fn in_memory_record(id: &str, name: &str, group: &str, pools: Option<Vec<String>>) -> KeyRecord {
    let unguessable: String = (0..4).map(|_| format!("{:016x}", fastrand::u64(..))).collect();
    KeyRecord {
        name: name.to_owned(),
        prefix: String::new(),
        hash: KeyHash::of(&unguessable),
        group: Some(group.to_owned()),
        pools,
        policies: None,
        budget: None,
        limits: Default::default(),
        expires_at: None,
        revoked_at: None,
        metadata: serde_json::Map::new(),
        created_at: 0,
        rotated_at: None,
        aws: None,
        end_users: None,
        suspended_until: None,
        mcp: None,
        passthrough: None,
        a2a: None,
        version: 0,
        id: id.to_owned(),
    }
}

/// A budgeted bucket's spend in its current window (nano-USD).
#[derive(Debug, Clone)]
pub struct BudgetUsage {
    /// Whose: `key `name` (id)` or `group `name``.
    pub who: String,
    /// Settled spend in the window.
    pub spent: u64,
    /// The budget's cap.
    pub cap: u64,
    /// When the window began (Unix seconds).
    pub window_start: i64,
}

/// Tries of a key change read again after another write came first.
const CHANGE_TRIES: usize = 8;

/// Why [`Governance::change_key`] changed nothing.
#[derive(Debug)]
pub enum KeyChange<E> {
    /// No key has that id.
    Missing,
    /// The key is revoked: revocation is final.
    Revoked,
    /// The change itself refused.
    Refused(E),
    /// The store failed (or kept being written by others).
    Store(StoreError),
}

/// The most keys whose refusals are counted at once (past it the count
/// starts over: a flood of keys cannot grow the table).
const MAX_ABUSE_ENTRIES: usize = 100_000;

/// Each lane's rate-card price, by lane name.
pub type Prices = std::collections::HashMap<Arc<str>, Price>;

/// An admitted request's hold on its chain, and whose counters hold it.
#[derive(Debug, Clone)]
pub struct Hold {
    /// What is held.
    pub reservation: Reservation,
    /// Held in the fleet's counters (else this instance's).
    pub in_fleet: bool,
    /// The hold's id in the fleet (its settlement is applied once by it).
    pub hold: u64,
    /// The chain's bucket names in the fleet's Redis.
    pub fleet_keys: Arc<[String]>,
    /// Admitted on this instance's lease of the chain (`hold` is the
    /// lease's id), neither in Redis nor in this instance's counters.
    pub leased: bool,
}

impl Hold {
    /// A request admitted on lease `id` of `keys`' chain.
    pub(crate) fn leased(chain: &Arc<[BucketId]>, estimate: Estimate, id: u64, keys: &Arc<[String]>) -> Hold {
        let reservation = switchyard_governance::Reservation { chain: chain.clone(), estimate };
        Hold { reservation, in_fleet: false, hold: id, fleet_keys: keys.clone(), leased: true }
    }
}

/// What leases read of this instance's governor: each chain's limits (again
/// at every renewal, so an edit reaches the lease), and the settlement of
/// what a dropped lease had not reported.
impl switchyard_fleet::lease::LeaseSpecs for Governance {
    fn lease_buckets(&self, chain: &[BucketId], now_ms: u64) -> Option<Vec<switchyard_governance::lease::LeaseBucket>> {
        self.governor().lease_buckets(chain, now_ms)
    }

    fn settle_unreported(&self, keys: &[String], chain: &Arc<[BucketId]>, cost: u64) {
        let Some(fleet) = &self.fleet else { return };
        let hold = fleet.new_hold();
        let now = now_ms();
        let mut settlement = fleet.settlement(
            keys,
            (&mut self.governor(), chain),
            hold,
            Estimate::default(),
            cost,
            0,
            (false, false),
            now,
        );
        settlement.chain = Some(chain.clone());
        fleet.settle(hold, settlement);
    }
}

/// Governance as the config asks for it: `None` when nothing is to be
/// governed or accounted (no `auth: keys`, no `storage:`, no admin tokens),
/// else the stores opened where `storage:` says ([`switchyard_store::Location`]), the
/// ledger writer started and the caches loaded.
pub async fn from_config(
    config: &Config,
    prices: Prices,
) -> Result<Option<(Arc<Governance>, LedgerWriter)>, StartError> {
    let wanted = config.auth == AuthMode::Keys
        || config.storage.sqlite_path.is_some()
        || config.storage.postgres_url.is_some()
        || !config.admin.tokens.is_empty();
    if !wanted {
        return Ok(None);
    }
    let location = switchyard_store::Location::of(
        config.storage.postgres_url.as_deref(),
        config.storage.sqlite_path.as_deref().map(std::path::Path::new),
    );
    let stores = location.open().await?;
    // A fleet's ledger rows wait on local disk while PostgreSQL is away.
    let spool = location.spool(config.storage.ledger_spool.as_deref().map(std::path::Path::new))?;
    let pacing = ledger::Pacing {
        flush: config.governance.ledger_flush_interval,
        write_timeout: config.governance.ledger_write_timeout,
    };
    let (queue, writer) = LedgerQueue::start(stores.ledger.clone(), config.governance.ledger_queue, pacing, spool);
    let changes = stores.changes.as_ref().map(|feed| feed.subscribe());
    let mut governance = Governance::start(config, stores, Some(queue), prices).await?;
    if let Some(url) = &config.storage.redis_url {
        let fleet = switchyard_fleet::counters::Fleet::connect(
            url,
            config.storage.on_redis_error,
            config.governance.hold_lease,
        )
        .await
        .map_err(|err| StartError::Store(StoreError::Unavailable(format!("storage.redis_url: {err}"))))?;
        governance.fleet = Some(fleet);
    }
    // Callers' tokens: each issuer's keys fetched before the first request
    // (an identity provider that is down is logged and fetched again).
    if let Some(issuers) = &governance.jwt {
        for (index, issuer) in issuers.configs().enumerate() {
            if let Err(err) = issuers.refresh(index).await {
                tracing::warn!(issuer = %issuer.name, error = %err, "JWKS could not be fetched at boot; tokens are refused until it is");
            }
        }
        jwt::Issuers::spawn_refreshers(issuers);
    }
    let governance = Arc::new(governance);
    let _ = governance.me.set(Arc::downgrade(&governance));
    if let (Some(fleet), Some(lease)) = (&governance.fleet, config.storage.lease) {
        let limits = switchyard_governance::lease::SliceLimits {
            share_permille: lease.share_permille,
            max_usd: lease.max_usd_nano,
            max_requests: lease.max_requests,
            max_tokens: lease.max_tokens,
        };
        let specs: std::sync::Weak<dyn switchyard_fleet::lease::LeaseSpecs> =
            Arc::downgrade(&governance) as std::sync::Weak<Governance>;
        fleet.start_leasing(switchyard_fleet::lease::Leasing { ttl: lease.ttl, limits }, specs);
    }
    if let Some(seeded) = governance.fleet.as_ref().and_then(|fleet| fleet.take_seeded()) {
        switchyard_tasks::service("ledger reseed", reseed_from_ledger(Arc::downgrade(&governance), seeded));
    }
    crate::audit::spawn_purge(Arc::downgrade(&governance.stores.audit), config.admin.audit_retention);
    budget_watch::spawn(Arc::downgrade(&governance));
    if let Some(changes) = changes {
        switchyard_tasks::service("store changes", follow_changes(Arc::downgrade(&governance), changes));
    }
    Ok(Some((governance, writer)))
}

/// Keeps this instance's key and group caches in step with a store other
/// instances write (a revocation anywhere is refused here as soon as its
/// notification arrives). Ends with the governance it follows.
async fn follow_changes(
    governance: std::sync::Weak<Governance>,
    mut changes: tokio::sync::broadcast::Receiver<switchyard_store::Change>,
) {
    use switchyard_store::Change;
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let change = match changes.recv().await {
            Ok(change) => change,
            // Missed some: reread everything.
            Err(RecvError::Lagged(_)) => Change::Resync,
            Err(RecvError::Closed) => return,
        };
        let Some(governance) = governance.upgrade() else { return };
        // As an admin write does: read the store and update the cache under
        // the write lock, so a change arriving here never overwrites a newer
        // one this instance just made (the cache update is load-modify-store).
        let _write = governance.writes.lock().await;
        let applied = match &change {
            Change::Key(id) => match governance.stores.keys.get_key(id).await {
                // This instance's own write comes back too: nothing to do.
                Ok(Some(record)) if governance.key(id).is_some_and(|cached| cached.record == record) => Ok(()),
                Ok(Some(record)) => governance.cache(record).await,
                Ok(None) => Ok(()),
                Err(err) => Err(err),
            },
            Change::Groups => match governance.stores.groups.list_groups().await {
                Ok(groups) => governance.set_groups(groups).await,
                Err(err) => Err(err),
            },
            // The config's versions are followed by the gateway's reloader.
            Change::Config(_) => Ok(()),
            Change::Resync => {
                async {
                    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
                    governance.reindex_and_seed(all_keys(&governance.stores).await?).await
                }
                .await
            }
        };
        if let Err(err) = applied {
            tracing::warn!(error = %err, ?change, "a change from another instance could not be read; the cache keeps its last state");
        }
    }
}

/// Reads from the ledger the spend of the buckets a fleet script found
/// unknown to Redis (lost in a restart without persistence, or evicted)
/// and seeded from this instance's counters, and raises this instance's
/// counters and Redis's to it: the ledger holds every instance's settled
/// rows, the counters only what this instance saw. Ends with the
/// governance it serves.
async fn reseed_from_ledger(
    governance: std::sync::Weak<Governance>,
    mut seeded: tokio::sync::mpsc::Receiver<Vec<BucketId>>,
) {
    while let Some(first) = seeded.recv().await {
        let mut buckets: std::collections::BTreeSet<BucketId> = first.into_iter().collect();
        while let Ok(more) = seeded.try_recv() {
            buckets.extend(more);
        }
        let Some(governance) = governance.upgrade() else { return };
        let Some(fleet) = &governance.fleet else { return };
        let now = now_ms();
        for id in buckets {
            let (start, from_ledger) = match governance.ledger_spent(&id, now).await {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, bucket = %id, "a bucket redis lost could not be read from the ledger");
                    continue;
                }
            };
            let known = {
                let mut governor = governance.governor();
                governor.learn_spent(&id, from_ledger, now);
                governor.spent(&id, now).unwrap_or(from_ledger)
            };
            let names = switchyard_fleet::counters::bucket_names(std::slice::from_ref(&id));
            if let Some(counters) = names.first() {
                if let Err(err) = fleet.raise_spent(counters, start, known).await {
                    tracing::warn!(error = %err, bucket = %id, "a bucket redis lost could not be raised to the ledger's spend");
                }
            }
        }
    }
}

/// Writes the config file's groups to the store (creation times kept).
async fn write_config_groups(stores: &Stores, groups: &[switchyard_config::Group], now: u64) -> Result<(), StoreError> {
    let existing = stores.groups.list_groups().await?;
    for group in groups {
        let record = GroupRecord {
            name: group.name.to_string(),
            parent: group.parent.as_deref().map(str::to_owned),
            budget: group.budget.clone(),
            limits: group.limits.clone(),
            retention: group.retention.map(|r| r.as_str().to_owned()),
            end_users: end_users_of_config_group(group, existing.iter().find(|g| *g.name == *group.name)),
            markup: group.markup,
            rate_card: group
                .rate_card
                .iter()
                .map(|(lane, rate)| (lane.to_string(), switchyard_config::card::entry_json(rate)))
                .collect(),
            from_config: true,
            created_at: existing.iter().find(|g| *g.name == *group.name).map_or((now / 1000) as i64, |g| g.created_at),
        };
        stores.groups.put_group(record).await?;
    }
    Ok(())
}

/// A config group's end-user policy: the file's default, with the
/// overrides made over the API kept.
fn end_users_of_config_group(
    group: &switchyard_config::Group,
    stored: Option<&GroupRecord>,
) -> Option<switchyard_governance::key::EndUserPolicy> {
    let overrides = stored.and_then(|g| g.end_users.as_ref()).map(|p| p.overrides.clone()).unwrap_or_default();
    match (&group.end_users, overrides.is_empty()) {
        (None, true) => None,
        (None, false) => Some(switchyard_governance::key::EndUserPolicy { overrides, ..Default::default() }),
        (Some(policy), _) => Some(switchyard_governance::key::EndUserPolicy { overrides, ..policy.clone() }),
    }
}

/// Sets the spec of each `per_model` bucket of `owner`'s `limits`, noting
/// each in `ids`.
fn set_scoped(
    governor: &mut Governor,
    ids: &mut std::collections::HashSet<BucketId>,
    owner: &Arc<str>,
    limits: &switchyard_governance::Limits,
    now: u64,
) {
    for (name, scoped) in &limits.per_model {
        let id = BucketId::Scoped { owner: owner.clone(), name: Arc::from(name.as_str()) };
        if !ids.contains(&id) {
            governor.set_spec(id.clone(), BucketSpec { budget: None, limits: scoped.own() }, now);
            ids.insert(id);
        }
    }
}

/// A key's chain per model or pool its chain's `per_model` limits name:
/// the chain, then each owner's bucket for that name (key first, then
/// its groups upward).
fn scoped_chains(
    record: &KeyRecord,
    groups: &HashMap<String, GroupRecord>,
    chain: &Arc<[BucketId]>,
) -> Box<[ScopedChain]> {
    let owners: Vec<(String, &switchyard_governance::Limits)> = chain
        .iter()
        .filter_map(|bucket| match bucket {
            BucketId::Key(id) => Some((format!("key:{id}"), &record.limits)),
            BucketId::Group(name) => groups.get(&**name).map(|g| (format!("group:{name}"), &g.limits)),
            _ => None,
        })
        .filter(|(_, limits)| !limits.per_model.is_empty())
        .collect();
    let mut names: Vec<&String> = owners.iter().flat_map(|(_, limits)| limits.per_model.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let mut scoped: Vec<BucketId> = chain.to_vec();
            for (owner, limits) in &owners {
                if limits.per_model.contains_key(name) {
                    scoped.push(BucketId::Scoped { owner: Arc::from(owner.as_str()), name: Arc::from(name.as_str()) });
                }
            }
            let scoped: Arc<[BucketId]> = scoped.into();
            ScopedChain {
                name: Arc::from(name.as_str()),
                fleet_keys: switchyard_fleet::counters::bucket_names(&scoped),
                chain: scoped,
            }
        })
        .collect()
}

/// Every key record in the store, page by page.
async fn all_keys(stores: &Stores) -> Result<Vec<KeyRecord>, StoreError> {
    let mut records = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = stores.keys.list_keys(after.as_deref(), 1000).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        records.extend(page);
    }
    Ok(records)
}

impl Governance {
    /// Loads keys and groups (config groups first written to the store),
    /// and seeds every budget with what the ledger holds for its current
    /// window at today's `prices`.
    pub async fn start(
        config: &Config,
        stores: Stores,
        ledger: Option<LedgerQueue>,
        prices: Prices,
    ) -> Result<Governance, StartError> {
        let now = now_ms();
        write_config_groups(&stores, &config.groups, now).await?;
        let groups: HashMap<String, GroupRecord> =
            stores.groups.list_groups().await?.into_iter().map(|g| (g.name.clone(), g)).collect();
        let records = all_keys(&stores).await?;
        let content = crate::retention::ContentQueue::start(
            stores.content.clone(),
            config.governance.ledger_queue,
            config.retention.as_ref().map_or(switchyard_config::retention::DEFAULT_DAYS, |r| r.days),
            config.governance.ledger_flush_interval,
        );
        let receipts = match &config.receipts {
            Some(receipts) => Some(crate::receipts::ReceiptQueue::start(receipts, config.governance.ledger_queue)?),
            None => None,
        };
        let governance = Governance {
            mode: config.auth,
            stores,
            receipts,
            keys: ArcSwap::from_pointee(KeyIndex::default()),
            pricing: ArcSwap::from_pointee(pricing::compile(groups.values())),
            groups: ArcSwap::from_pointee(groups),
            governor: Mutex::new(Governor::new()),
            content,
            ledger,
            default_max_tokens: config.governance.default_max_tokens,
            stats: GovernanceStats::default(),
            writes: tokio::sync::Mutex::new(()),
            fleet: None,
            audit_gate: crate::audit::AuditGate::default(),
            prices: ArcSwap::from_pointee(prices),
            suspend: config.governance.suspend,
            jwt: jwt::Issuers::new(&config.jwt),
            client_identity: config.server.tls.as_ref().and_then(|tls| tls.client_identity),
            client_mcp: config.server.tls.as_ref().map(|tls| tls.client_mcp.clone()).unwrap_or_default(),
            abuse: Mutex::new(HashMap::default()),
            me: std::sync::OnceLock::new(),
            watches: Mutex::new(budget_watch::Watches::default()),
            runs: Mutex::new(switchyard_governance::run::RunBook::new()),
        };
        let unseeded = governance.reindex(records);
        governance.seed(&unseeded, now).await?;
        Ok(governance)
    }

    /// Prices lanes from now on (a reload's rate card).
    pub fn set_prices(&self, prices: Prices) {
        self.prices.store(Arc::new(prices));
    }

    fn governor(&self) -> std::sync::MutexGuard<'_, Governor> {
        self.governor.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bucket chain of a key in `groups`.
    fn chain_of(record: &KeyRecord, groups: &HashMap<String, GroupRecord>) -> Arc<[BucketId]> {
        let mut chain = vec![BucketId::Key(Arc::from(record.id.as_str()))];
        let mut at = record.group.clone();
        while let Some(name) = at {
            if chain.iter().any(|b| matches!(b, BucketId::Group(g) if **g == *name)) {
                break;
            }
            let Some(group) = groups.get(&name) else { break };
            chain.push(BucketId::Group(Arc::from(name.as_str())));
            at = group.parent.clone();
        }
        chain.into()
    }

    /// Rebuilds the key index from `records` and the governor's bucket
    /// specs; returns the buckets whose spend must be read from the ledger
    /// (see [`Governance::seed`]).
    #[must_use]
    fn reindex(&self, records: Vec<KeyRecord>) -> Vec<BucketId> {
        let groups = self.groups.load();
        let mut index = KeyIndex::default();
        let mut unseeded = Vec::new();
        let now = now_ms();
        let mut governor = self.governor();
        let mut scoped_ids = std::collections::HashSet::new();
        for group in groups.values() {
            let id = BucketId::Group(Arc::from(group.name.as_str()));
            let spec = BucketSpec { budget: group.budget.clone(), limits: group.limits.own() };
            if governor.set_spec(id.clone(), spec, now) {
                unseeded.push(id);
            }
            let owner: Arc<str> = Arc::from(format!("group:{}", group.name).as_str());
            set_scoped(&mut governor, &mut scoped_ids, &owner, &group.limits, now);
        }
        // Beside the stored keys, the in-memory ones: a token's callers (one
        // key per trusted issuer and group, limited to the issuer's pools)
        // and a client certificate's (one per group, when its name names a
        // group), each drawing on the group's budget tree.
        let tokens = self.jwt.iter().flat_map(|issuers| issuers.configs().enumerate().collect::<Vec<_>>()).flat_map(
            |(index, issuer)| {
                groups.keys().map(move |group| (jwt_record(issuer, group), Place::Token(index, group.clone())))
            },
        );
        let certs = groups
            .keys()
            .filter(|_| self.client_identity == Some(switchyard_config::ClientIdentity::Group))
            .map(|group| (cert_record(group, &self.client_mcp), Place::Cert(group.clone())));
        let records = records.into_iter().map(|record| (record, Place::Stored)).chain(tokens).chain(certs);
        for (record, place) in records {
            let chain = Governance::chain_of(&record, &groups);
            let id: Arc<str> = Arc::from(record.id.as_str());
            let spec = BucketSpec { budget: record.budget.clone(), limits: record.limits.own() };
            if governor.set_spec(BucketId::Key(id.clone()), spec, now) {
                unseeded.push(BucketId::Key(id.clone()));
            }
            let key_owner: Arc<str> = Arc::from(format!("key:{id}").as_str());
            set_scoped(&mut governor, &mut scoped_ids, &key_owner, &record.limits, now);
            let fleet_keys = switchyard_fleet::counters::bucket_names(&chain);
            let scoped = scoped_chains(&record, &groups, &chain);
            let downgrades = chain.iter().any(|bucket| {
                governor.spec(bucket).and_then(|s| s.budget.as_ref()).is_some_and(|b| b.on_exhaust.is_some())
            });
            let mut end_users = Vec::new();
            for bucket in chain.iter() {
                let (owner, policy) = match bucket {
                    BucketId::Key(key) => (format!("key:{key}"), record.end_users.as_ref()),
                    BucketId::Group(name) => {
                        (format!("group:{name}"), groups.get(&**name).and_then(|g| g.end_users.as_ref()))
                    }
                    BucketId::EndUser { .. } | BucketId::Scoped { .. } => continue,
                };
                if let Some(policy) = policy {
                    end_users.push((Arc::from(owner.as_str()), Arc::new(policy.clone())));
                }
            }
            let budgeted = chain.iter().any(|bucket| governor.spec(bucket).is_some_and(|s| s.budget.is_some()))
                || end_users
                    .iter()
                    .any(|(_, p)| p.budget.is_some() || p.overrides.values().any(|o| o.budget.is_some()));
            let cached = Arc::new(CachedKey { record, id, chain, fleet_keys, budgeted, end_users, downgrades, scoped });
            match place {
                Place::Token(issuer, group) => {
                    index.in_memory.insert(cached.record.id.clone(), cached.clone());
                    index.by_jwt.insert((issuer, group), cached);
                    continue;
                }
                Place::Cert(group) => {
                    index.in_memory.insert(cached.record.id.clone(), cached.clone());
                    index.by_cert.insert(group, cached);
                    continue;
                }
                Place::Stored => {}
            }
            index.by_hash.insert(cached.record.hash, cached.clone());
            if let Some(aws) = &cached.record.aws {
                index.by_aws.insert(aws.access_key_id.clone(), cached.clone());
            }
            index.by_id.insert(cached.record.id.clone(), cached);
        }
        // Per-model buckets of limits no longer configured go.
        governor.retain(|id| !matches!(id, BucketId::Scoped { .. }) || scoped_ids.contains(id));
        drop(governor);
        self.keys.store(Arc::new(index));
        unseeded
    }

    /// Rebuilds the caches from `records` and reads the spend of every
    /// bucket that does not know its window's spend yet (a new budget, a
    /// changed window) from the ledger, so a change never forgets spend.
    pub async fn reindex_and_seed(&self, records: Vec<KeyRecord>) -> Result<(), StoreError> {
        let unseeded = self.reindex(records);
        self.seed(&unseeded, now_ms()).await
    }

    /// Every cached key record.
    pub fn records(&self) -> Vec<KeyRecord> {
        self.keys.load().by_id.values().map(|k| k.record.clone()).collect()
    }

    /// Puts one changed or new record into the cache at once.
    pub async fn cache(&self, record: KeyRecord) -> Result<(), StoreError> {
        let mut records: Vec<KeyRecord> =
            self.keys.load().by_id.values().filter(|k| k.record.id != record.id).map(|k| k.record.clone()).collect();
        records.push(record);
        self.reindex_and_seed(records).await
    }

    /// Replaces the group cache (after an admin change) and re-derives chains.
    pub async fn set_groups(&self, groups: Vec<GroupRecord>) -> Result<(), StoreError> {
        let names: Vec<String> = self.groups.load().keys().cloned().collect();
        self.pricing.store(Arc::new(pricing::compile(&groups)));
        self.groups.store(Arc::new(groups.into_iter().map(|g| (g.name.clone(), g)).collect()));
        {
            let current = self.groups.load();
            let mut governor = self.governor();
            for gone in names.iter().filter(|n| !current.contains_key(*n)) {
                governor.remove(&BucketId::Group(Arc::from(gone.as_str())));
            }
        }
        self.reindex_and_seed(self.records()).await
    }

    /// A reloaded file's groups: written to the store and the caches (a
    /// group the file no longer names stays until deleted over the API).
    pub async fn reload_groups(&self, groups: &[switchyard_config::Group]) -> Result<(), StoreError> {
        let _writes = self.writes.lock().await;
        write_config_groups(&self.stores, groups, now_ms()).await?;
        self.set_groups(self.stores.groups.list_groups().await?).await
    }

    /// What a caller of `group` keeps of its text: the nearest retention
    /// set on the group or above it (`None`: none set on the chain).
    pub fn retention_of(&self, group: &str) -> Option<switchyard_config::Retention> {
        let groups = self.groups.load();
        let mut at = Some(group);
        // The tree has no loops (parents are checked); bounded anyway.
        for _ in 0..=groups.len() {
            let record = groups.get(at?)?;
            if let Some(retention) = record.retention.as_deref().and_then(switchyard_config::Retention::parse) {
                return Some(retention);
            }
            at = record.parent.as_deref();
        }
        None
    }

    /// Every group.
    pub fn groups(&self) -> Vec<GroupRecord> {
        let mut groups: Vec<GroupRecord> = self.groups.load().values().cloned().collect();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        groups
    }

    /// What a request of `group`'s that cost `cost` is charged (the price
    /// its ledger row keeps): on lane `lane` (its name and provider; `None`:
    /// an MCP tool call), `tokens` served as `served`, at the nearest card
    /// on the group's chain that names the lane, or the nearest markup over
    /// the cost, whichever group comes first; nothing: the cost.
    pub fn price_of(
        &self,
        group: Option<&str>,
        lane: Option<(&str, &str)>,
        tokens: &switchyard_governance::Tokens,
        served: switchyard_governance::card::Served,
        cost: switchyard_governance::NanoUsd,
    ) -> switchyard_governance::NanoUsd {
        pricing::charge(&self.pricing.load(), group, lane, tokens, served, cost)
    }

    /// The groups as loaded (the run limits' inheritance reads their parents).
    pub(crate) fn group_tree(&self) -> arc_swap::Guard<Arc<HashMap<String, GroupRecord>>> {
        self.groups.load()
    }

    /// The names of `group` and every group below it.
    pub fn subtree(&self, group: &str) -> Vec<String> {
        let groups = self.groups.load();
        let mut names = vec![group.to_owned()];
        let mut index = 0;
        while index < names.len() {
            let parent = names[index].clone();
            names.extend(groups.values().filter(|g| g.parent.as_deref() == Some(&parent)).map(|g| g.name.clone()));
            index += 1;
        }
        names
    }

    /// Sets the spend of each of `buckets` for its budget's current window,
    /// and what its quotas used in theirs, from the ledger, at today's
    /// prices. (A `per_model` bucket's quotas count from the instance's
    /// start: the ledger's rollup does not keep the name a request named.)
    pub(crate) async fn seed(&self, buckets: &[BucketId], now: u64) -> Result<(), StoreError> {
        let now_s = (now / 1000) as i64;
        for id in buckets {
            let (budget, quotas) = match self.governor().spec(id) {
                Some(spec) => (spec.budget.as_ref().map(|b| b.window), spec.limits.quotas().collect::<Vec<_>>()),
                None => continue,
            };
            let mut windows: Vec<switchyard_governance::Window> =
                budget.into_iter().chain(quotas.iter().map(|q| q.window)).collect();
            windows.sort_by_key(|w| w.start(now_s));
            windows.dedup();
            for window in windows {
                let start = window.start(now_s);
                let Some(used) = self.ledger_used(id, start).await? else { break };
                let mut governor = self.governor();
                if budget == Some(window) {
                    governor.seed_spent(id, start, used.spent);
                }
                for quota in quotas.iter().filter(|q| q.window == window) {
                    let used = match quota.metric {
                        switchyard_governance::Metric::Requests => used.requests,
                        switchyard_governance::Metric::Tokens => used.tokens,
                        switchyard_governance::Metric::Usd => used.spent,
                    };
                    governor.seed_quota(id, quota.name(), start, used);
                }
            }
        }
        Ok(())
    }

    /// What the ledger holds of a budgeted bucket's spend in its current
    /// window at today's prices, with the window's start (`None`: no budget).
    async fn ledger_spent(&self, id: &BucketId, now: u64) -> Result<Option<(i64, u64)>, StoreError> {
        let Some(window) = self.governor().spec(id).and_then(|spec| spec.budget.as_ref().map(|b| b.window)) else {
            return Ok(None);
        };
        let start = window.start((now / 1000) as i64);
        Ok(self.ledger_used(id, start).await?.map(|used| (start, used.spent)))
    }

    /// What the ledger holds of a bucket's use since `start` (Unix s):
    /// spend at today's prices, requests and tokens (`None`: a bucket the
    /// ledger cannot tell apart, a `per_model` one: its rollup does not
    /// keep the name a request named).
    async fn ledger_used(&self, id: &BucketId, start: i64) -> Result<Option<LedgerUse>, StoreError> {
        let (by, key, groups, end_user) = match id {
            BucketId::Key(key) => (SpendBy::Key, Some(key.to_string()), None, None),
            BucketId::Group(group) => (SpendBy::Group, None, Some(self.subtree(group)), None),
            BucketId::EndUser { owner, user } => {
                let (key, groups) = match owner.split_once(':') {
                    Some(("key", id)) => (Some(id.to_owned()), None),
                    Some((_, group)) => (None, Some(self.subtree(group))),
                    None => return Ok(None),
                };
                (SpendBy::User, key, groups, Some(user.to_string()))
            }
            BucketId::Scoped { .. } => return Ok(None),
        };
        let query = TotalsQuery { by, from_ms: start.saturating_mul(1000), to_ms: i64::MAX, key, groups, end_user };
        let totals = self.stores.ledger.totals(query).await?;
        let prices = self.prices.load();
        // Budgets count cost (what the provider bills), never the markup.
        Ok(Some(LedgerUse {
            spent: totals.iter().map(|t| t.charge(prices.get(t.lane.as_str())).cost_nano).sum(),
            requests: totals.iter().map(|t| t.requests).sum(),
            tokens: totals.iter().map(|t| t.tokens.total()).sum(),
        }))
    }

    /// Each budgeted key's and group's spend in its current window, for
    /// the alerts watcher. The governor's lock (admission's) is held only
    /// to read the figures; the names are written after.
    pub fn budget_usage(&self, now: u64) -> Vec<BudgetUsage> {
        let keys = self.keys.load();
        let groups = self.groups.load();
        let now_s = (now / 1000) as i64;
        let budgeted_keys: Vec<&Arc<CachedKey>> =
            keys.by_id.values().filter(|k| k.record.budget.is_some() && k.record.revoked_at.is_none()).collect();
        let budgeted_groups: Vec<&GroupRecord> = groups.values().filter(|g| g.budget.is_some()).collect();
        let (key_spent, group_spent): (Vec<Option<u64>>, Vec<Option<u64>>) = {
            let mut governor = self.governor();
            let mut spent = |id: BucketId| governor.view(&id, now).map(|view| view.spent);
            (
                budgeted_keys.iter().map(|k| spent(BucketId::Key(k.id.clone()))).collect(),
                budgeted_groups.iter().map(|g| spent(BucketId::Group(Arc::from(g.name.as_str())))).collect(),
            )
        };
        let keyed = budgeted_keys.iter().zip(key_spent).filter_map(|(key, spent)| {
            let budget = key.record.budget.as_ref()?;
            let who = format!("key `{}` ({})", key.record.name, key.record.id);
            Some(BudgetUsage { who, spent: spent?, cap: budget.cap(), window_start: budget.window.start(now_s) })
        });
        let grouped = budgeted_groups.iter().zip(group_spent).filter_map(|(group, spent)| {
            let budget = group.budget.as_ref()?;
            let who = format!("group `{}`", group.name);
            Some(BudgetUsage { who, spent: spent?, cap: budget.cap(), window_start: budget.window.start(now_s) })
        });
        keyed.chain(grouped).collect()
    }

    /// Counts a refusal of `caller`'s own doing at `now` (Unix ms): when it
    /// is the one that reaches `governance.suspend.after` within its
    /// window, the time the key is suspended until (Unix seconds), for the
    /// caller to write (`suspended_until`, through [`Governance::change_key`])
    /// and alert on.
    pub fn note_refusal(&self, caller: &Caller, now: u64) -> Option<i64> {
        let suspend = self.suspend?;
        // Token and certificate callers share their group's in-memory key:
        // one workload's conduct cannot suspend the others.
        if in_memory(&caller.key.id) {
            return None;
        }
        let mut abuse = self.abuse.lock().unwrap_or_else(PoisonError::into_inner);
        if abuse.len() >= MAX_ABUSE_ENTRIES && !abuse.contains_key(&caller.key.id) {
            abuse.clear();
        }
        let window = suspend.within.as_millis() as u64;
        let entry = abuse.entry(caller.key.id.clone()).or_insert((now, 0));
        if now.saturating_sub(entry.0) >= window {
            *entry = (now, 0);
        }
        entry.1 += 1;
        if entry.1 < suspend.after {
            return None;
        }
        abuse.remove(&caller.key.id);
        Some(((now + suspend.duration.as_millis() as u64) / 1000) as i64)
    }

    /// Applies `change` to key `id` as it is stored and writes the result
    /// only if nobody wrote the key since it was read (another instance, a
    /// concurrent request); otherwise it is read again and `change` redone.
    /// Every change to a stored key goes through here (the admin API's, a
    /// suspension's); a revoked key refuses every change (the store checks
    /// it too). The cache takes the new record at once.
    pub async fn change_key<E>(
        &self,
        id: &str,
        mut change: impl FnMut(&mut KeyRecord) -> Result<(), E>,
    ) -> Result<KeyRecord, KeyChange<E>> {
        for _ in 0..CHANGE_TRIES {
            let mut record = self.stores.keys.get_key(id).await.map_err(KeyChange::Store)?.ok_or(KeyChange::Missing)?;
            if record.revoked_at.is_some() {
                return Err(KeyChange::Revoked);
            }
            change(&mut record).map_err(KeyChange::Refused)?;
            match self.stores.keys.update_key(record).await {
                Ok(stored) => {
                    self.cache(stored.clone()).await.map_err(KeyChange::Store)?;
                    return Ok(stored);
                }
                Err(StoreError::Stale) => continue,
                Err(err) => return Err(KeyChange::Store(err)),
            }
        }
        Err(KeyChange::Store(StoreError::Stale))
    }

    /// A key by id, from the cache.
    pub fn key(&self, id: &str) -> Option<Arc<CachedKey>> {
        self.keys.load().by_id.get(id).cloned()
    }

    /// The cached keys of group `group` (a member's own group is small: the
    /// scan is of the cache, never the store).
    pub fn keys_in(&self, group: &str) -> Vec<KeyRecord> {
        let mut keys: Vec<KeyRecord> = self
            .keys
            .load()
            .by_id
            .values()
            .filter(|key| key.record.group.as_deref() == Some(group))
            .map(|key| key.record.clone())
            .collect();
        keys.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.id.cmp(&b.id)));
        keys
    }

    /// How many keys are cached.
    pub fn key_count(&self) -> usize {
        self.keys.load().by_id.len()
    }
}
