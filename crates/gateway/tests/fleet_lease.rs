//! Admission by leased slices (`storage.redis.lease`) on two instances
//! sharing one real PostgreSQL and a real Redis: a USD cap and an rpm cap
//! hold across both under concurrent load while they admit on their
//! slices; a lease returned is at once what the other instance can lease;
//! a lease whose instance died (stopped renewing, never returned) comes
//! back within its ttl, reclaimed by the next script that meets it.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use http::StatusCode;
use switchyard_fleet::counters::Fleet;
use switchyard_fleet::lease::{LeaseAdmit, LeaseSpecs, Leasing};
use switchyard_governance::lease::{LeaseBucket, SliceLimits};
use switchyard_governance::{BucketId, BucketSpec, Budget, Estimate, Governor, Limits, Window};

use crate::common::{create_key, governed, ADMIN_TOKEN};
use crate::fleet::{ask, field, fleet_client, fresh_database, spend, spool_path, Redis};

/// `fleet.rs`'s fleet, with leases of at most $0.20 (two requests'
/// reservations), half of what is left divided between live leases.
fn leasing_config(database: &str, redis: &str) -> String {
    let spool = spool_path();
    format!(
        "auth: {{ mode: keys }}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\n\
         storage: {{ postgres_url: \"{database}\", redis_url: \"{redis}\", on_redis_error: fail_closed, ledger_spool: \"{spool}\",\n\
         \x20 redis: {{ lease: {{ ttl: 6s, share: 50%, max_usd: 0.2, max_requests: 5 }} }} }}\n\
         governance: {{ ledger_flush_interval: 100ms }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  m: {{ provider: fake }}\n\
         rate_card:\n  m: {{ input_utok: 1000, output_utok: 1000 }}\n"
    )
}

/// The names of a key's counters and holds in Redis.
fn key_names(id: &str) -> [String; 2] {
    switchyard_governance::fleet::bucket_keys("switchyard", &BucketId::Key(Arc::from(id)))
}

async fn lease_members(redis: &Redis, holds: &str) -> Vec<String> {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let members: Vec<String> =
        redis::cmd("ZRANGE").arg(holds).arg(0).arg(-1).query_async(&mut connection).await.unwrap();
    members.into_iter().filter(|m| m.starts_with('L')).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_slices_hold_a_usd_cap_fleet_wide_under_400_concurrent_requests() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&leasing_config(&database, &redis.url())).await;
    let (two, _) = governed(&leasing_config(&database, &redis.url())).await;
    // Each request reserves about $0.1 and costs about $0.01: a $1 budget
    // fits ten at once and a hundred in all.
    let created = create_key(one, serde_json::json!({"name": "capped", "budget": {"usd": 1.0, "window": "1d"}})).await;
    let (id, key) = (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned());
    while ask(two, &key).await.0 == StatusCode::UNAUTHORIZED {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let [counters, holds] = key_names(&id);
    // The first request took a lease: its hold is in Redis.
    assert!(!lease_members(&redis, &holds).await.is_empty(), "no lease was taken");
    let mut calls = Vec::new();
    for n in 0..400 {
        let (addr, key) = (if n % 2 == 0 { one } else { two }, key.clone());
        calls.push(tokio::spawn(async move { ask(addr, &key).await }));
    }
    let (mut ok, mut refused) = (1, 0);
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(body.contains("insufficient_quota"), "{body}");
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(refused > 0 && ok > 10, "{ok} served, {refused} refused");
    let spent = spend(one, ok).await;
    eprintln!("leased fleet budget: {ok} served, {refused} refused, ${spent:.4} spent of $1");
    // Slices are held in Redis beside every request's hold: with no
    // instance dying and no edit, the cap holds as without leases.
    assert!(spent <= 1.0, "the fleet spent ${spent} of a $1 budget ({ok} served)");
    // What Redis counts never passes the cap either.
    let counted = field(&redis, &counters, "spent").await + field(&redis, &counters, "reserved").await;
    assert!(counted <= 1_000_000_000, "redis counts {counted} nano-USD spent and held of $1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_slices_hold_an_rpm_cap_across_instances() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&leasing_config(&database, &redis.url())).await;
    let (two, _) = governed(&leasing_config(&database, &redis.url())).await;
    let created = create_key(one, serde_json::json!({"name": "limited", "limits": {"rpm": 30}})).await;
    let (id, key) = (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut calls = Vec::new();
    for n in 0..120 {
        let (addr, key) = (if n % 2 == 0 { one } else { two }, key.clone());
        calls.push(tokio::spawn(async move { ask(addr, &key).await }));
    }
    let mut served = 0;
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            StatusCode::OK => served += 1,
            StatusCode::TOO_MANY_REQUESTS => assert!(body.contains("requests-per-minute"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    eprintln!("leased rpm: {served} of 120 served under 30 a minute");
    // A slice takes its requests from the fleet's rate when leased, so
    // never more than 30; requests stranded on the other instance's slice
    // (at most its 5) can leave fewer.
    assert!(served <= 30, "{served} served under 30 a minute across two instances");
    assert!(served >= 20, "only {served} served: slices stranded more than two of 5");
    assert!(!lease_members(&redis, &key_names(&id)[1]).await.is_empty(), "no lease was taken");
}

/// A governor of the test's own, read by its fleet client's leases.
struct Specs(Mutex<Governor>);

impl LeaseSpecs for Specs {
    fn lease_buckets(&self, chain: &[BucketId], now_ms: u64) -> Option<Vec<LeaseBucket>> {
        self.0.lock().unwrap().lease_buckets(chain, now_ms)
    }

    fn settle_unreported(&self, _: &[String], _: &Arc<[BucketId]>, _: u64) {
        panic!("no lease of this test is dropped");
    }
}

fn specs_for(chain: &[BucketId], usd: f64) -> Arc<Specs> {
    let mut governor = Governor::new();
    for id in chain {
        let spec = BucketSpec { budget: Some(Budget::new(usd, Window::Total)), limits: Limits::default() };
        governor.set_spec(id.clone(), spec, 0);
    }
    Arc::new(Specs(Mutex::new(governor)))
}

async fn leasing_client(redis: &Redis, specs: &Arc<Specs>, ttl: Duration) -> Arc<Fleet> {
    let fleet = fleet_client(redis, Duration::from_secs(5)).await;
    let limits = SliceLimits { share_permille: 500, max_usd: 600, max_requests: 10, max_tokens: 1000 };
    let weak: Weak<dyn LeaseSpecs> = Arc::downgrade(specs) as Weak<Specs>;
    fleet.start_leasing(Leasing { ttl, limits }, weak);
    fleet
}

fn now() -> u64 {
    switchyard_state::governance::now_ms()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returned_lease_is_what_the_other_instance_can_lease_at_once() {
    let Some(redis) = Redis::start() else { return };
    let chain: Arc<[BucketId]> = Arc::from(vec![BucketId::Key(Arc::from("returned"))]);
    let keys = switchyard_fleet::counters::bucket_names(&chain);
    let specs = specs_for(&chain, 1e-6); // a cap of 1,000 nano-USD
    let one = leasing_client(&redis, &specs, Duration::from_secs(30)).await;
    let two = leasing_client(&redis, &specs, Duration::from_secs(30)).await;
    let small = Estimate { tokens: 1, cost: 100 };

    // One leases half of 1,000 (500, under the 600 cap), spends 100 of it.
    let (admitted, _) = one.admit_leasing(&keys, &chain, small, now()).await.unwrap();
    let LeaseAdmit::Admitted(lease) = admitted else { panic!("{admitted:?}") };
    assert_eq!(field(&redis, &keys[0], "reserved").await, 500);
    assert!(one.settle_leased(&keys, lease, small, 100, 1));
    // The other asks for more than is left beside that slice: refused.
    let big = Estimate { tokens: 1, cost: 600 };
    let (refused, _) = two.admit_leasing(&keys, &chain, big, now()).await.unwrap();
    assert!(matches!(refused, LeaseAdmit::Refused(_)), "{refused:?}");

    // One shuts down: its slice comes back, its 100 spent counted.
    one.return_leases().await;
    assert_eq!(field(&redis, &keys[0], "spent").await, 100);
    assert_eq!(field(&redis, &keys[0], "reserved").await, 0, "the unspent 400 were returned");
    assert_eq!(one.live_leases(), 0);
    // The other's next call (its lease was taken, refused, so it renews)
    // has the 900 left to lease from.
    let (admitted, _) = two.admit_leasing(&keys, &chain, big, now()).await.unwrap();
    assert!(matches!(admitted, LeaseAdmit::Admitted(_)), "{admitted:?}");
    assert_eq!(field(&redis, &keys[0], "reserved").await, 600);
}

/// Each lease's hold in Redis, by lease id (`L<id>|0|<usd>`).
fn holds_of(members: &[String]) -> Vec<(String, i64)> {
    members
        .iter()
        .map(|m| {
            let (id, usd) = m.split_once("|0|").unwrap();
            (id.to_owned(), usd.parse().unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instances_lease_is_reclaimed_after_its_ttl() {
    let Some(redis) = Redis::start() else { return };
    let chain: Arc<[BucketId]> = Arc::from(vec![BucketId::Key(Arc::from("dead"))]);
    let keys = switchyard_fleet::counters::bucket_names(&chain);
    let specs = specs_for(&chain, 1e-6);
    let ttl = Duration::from_secs(3);
    let dying = leasing_client(&redis, &specs, ttl).await;
    let other = leasing_client(&redis, &specs, ttl).await;
    let small = Estimate { tokens: 1, cost: 100 };

    // The dying instance leases 500 and admits a request it never settles.
    let (admitted, _) = dying.admit_leasing(&keys, &chain, small, now()).await.unwrap();
    assert!(matches!(admitted, LeaseAdmit::Admitted(_)), "{admitted:?}");
    assert_eq!(field(&redis, &keys[0], "reserved").await, 500);
    // The other leases beside it: half of the 500 left, between two.
    let (admitted, _) = other.admit_leasing(&keys, &chain, small, now()).await.unwrap();
    let LeaseAdmit::Admitted(lease) = admitted else { panic!("{admitted:?}") };
    assert_eq!(field(&redis, &keys[0], "reserved").await, 625);
    assert!(other.settle_leased(&keys, lease, small, 0, 0));
    assert_eq!(lease_members(&redis, &keys[1]).await.len(), 2);

    // Past its ttl, a living instance's lease is still held: idle, it was
    // returned but for its request in flight (100), and that hold renewed.
    tokio::time::sleep(ttl + Duration::from_millis(500)).await;
    let held = holds_of(&lease_members(&redis, &keys[1]).await);
    let dead = held.iter().find(|(_, usd)| *usd == 100).map(|(id, _)| id.clone());
    let dead = dead.unwrap_or_else(|| panic!("the in-flight request's hold lives with its instance: {held:?}"));

    // The instance dies: its renewals stop, nothing is returned.
    let died = Instant::now();
    drop(dying);
    // Requests keep coming to the other: the first script past the dead
    // lease's end reclaims it.
    loop {
        let (admitted, _) = other.admit_leasing(&keys, &chain, small, now()).await.unwrap();
        if let LeaseAdmit::Admitted(lease) = admitted {
            other.settle_leased(&keys, lease, small, 0, 0);
        }
        let held = holds_of(&lease_members(&redis, &keys[1]).await);
        if held.iter().all(|(id, _)| *id != dead) {
            // What Redis reserves is exactly the living leases' holds.
            let reserved: i64 = held.iter().map(|(_, usd)| usd).sum();
            assert_eq!(field(&redis, &keys[0], "reserved").await, reserved, "{held:?}");
            assert_eq!(field(&redis, &keys[0], "leases").await, held.len() as i64);
            break;
        }
        assert!(died.elapsed() < ttl + Duration::from_secs(2), "a dead lease was never reclaimed: {held:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("a dead lease reclaimed {:?} after its instance died (ttl {ttl:?})", died.elapsed());
}
