//! One suite, every backend: what a store must do, checked the same way
//! over memory, SQLite and PostgreSQL (and any backend added later: add it
//! to `backends!`). PostgreSQL is the real server `scripts/services.sh`
//! starts (`SWITCHYARD_TEST_POSTGRES_URL`); each test gets a fresh database.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::disallowed_methods, reason = "test code")]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use switchyard_governance::key::{new_secret, visible_prefix, AwsCredential};
use switchyard_governance::{Budget, KeyHash, KeyRecord, Limits, Window};

use switchyard_store::postgres::PostgresStore;
use switchyard_store::{
    Attempt, AuditEntry, Change, ChangeFeed, ConfigVersion, GroupRecord, Idempotency, KeptContent, KeptSignature,
    KeyStore, LedgerRow, Location, RowFilter, SpendBy, StoreError, Stores, Tokens, TotalsQuery, Written,
};
use switchyard_store::{BatchJob, KeptObject, LineOutcome, LineState, ObjectKind, QueuedLine};

fn key(n: u8) -> KeyRecord {
    let secret = new_secret(&[n; 32]);
    KeyRecord {
        id: format!("key_{n:04}"),
        name: format!("key {n}"),
        prefix: visible_prefix(&secret).to_owned(),
        hash: KeyHash::of(&secret),
        group: Some("team".into()),
        pools: Some(vec!["fast".into()]),
        policies: n.is_multiple_of(2).then(|| vec!["pii".into()]),
        budget: Some(Budget::new(5.0, Window::Day)),
        limits: Limits { rpm: Some(60), tpm: None, concurrent: Some(4), ..Limits::default() },
        expires_at: None,
        revoked_at: None,
        metadata: serde_json::json!({"owner": "ana"}).as_object().unwrap().clone(),
        created_at: 1_000,
        rotated_at: None,
        suspended_until: None,
        mcp: None,
        passthrough: n.is_multiple_of(2).then(|| vec!["openai".into()]),
        a2a: n.is_multiple_of(2).then(|| vec!["research".into()]),
        end_users: None,
        aws: n.is_multiple_of(2).then(|| AwsCredential::new(&[n; switchyard_governance::key::AWS_RANDOM_BYTES])),
        version: 0,
    }
}

/// A request time for idempotency keys.
const NOW_MS: i64 = 1_796_067_065_000;

fn row(at_ms: i64, key: Option<&str>, group: Option<&str>, lane: &str, input: u64, output: u64) -> LedgerRow {
    LedgerRow {
        entry: at_ms + 1,
        at_ms,
        request_id: format!("r{at_ms}"),
        key_id: key.map(str::to_owned),
        group: group.map(str::to_owned),
        pool: "fast".into(),
        lane: lane.into(),
        model: format!("wire-{lane}"),
        operation: "chat".into(),
        // Every kind billed apart is stored and summed too.
        tokens: Tokens {
            input,
            output,
            cache_read: 1,
            cache_write: input / 4,
            cache_write_1h: input / 8,
            reasoning: output / 2,
            audio_input: input / 5,
            audio_output: output / 3,
            image_input: input / 6,
            image_output: output / 4,
            requests: 1,
            ..Tokens::default()
        },
        status: 200,
        latency_ms: 12,
        ttfb_ms: Some(3),
        failovers: 0,
        estimated: output % 3 == 1,
        attempts: Vec::new(),
        // Every row's notes round-trip through each store.
        notes: switchyard_store::Notes {
            cache_saved_nano: (output == 0).then_some(1234),
            guardrails: vec!["pii/email/mask/request".into()],
            refused: None,
            tool: (output == 7).then(|| switchyard_store::ToolCall {
                server: "tickets".into(),
                bytes_in: 12,
                bytes_out: 40,
                error: None,
                uri: Some("tickets+tickets://readme".into()),
                task: Some("task-1".into()),
            }),
            passthrough: (output == 1)
                .then(|| switchyard_store::RawCall { method: "GET".into(), path: "/v1/fine_tuning/jobs".into() }),
            estimated: (output % 3 == 1).then_some(switchyard_store::Estimated::CallerLeft),
            service_tier: output.is_multiple_of(2).then(|| "priority".into()),
            web_searches: (output == 7).then_some(3),
        },
        // Every row's end user, protocol and stream flag round-trip too.
        end_user: key.map(|k| format!("user-of-{k}")),
        ingress: Some("anthropic".into()),
        stream: output % 2 == 1,
        // What it cost and was charged round-trips, and so does a row from
        // before the ledger kept them.
        charge: (output % 4 != 3).then_some(switchyard_store::Charge {
            cost_nano: input * 1_000 + output,
            price_nano: input * 1_150 + output,
        }),
    }
}

async fn keys_round_trip_with_idempotency_and_pagination(stores: Stores) {
    let first = key(1);
    let idem = Idempotency { key: "create-1".into(), fingerprint: "f1".into(), at_ms: NOW_MS };
    assert_eq!(stores.keys.create_key(first.clone(), Some(idem.clone())).await.unwrap(), Written::New(first.clone()));
    // A retried create with the same idempotency key mints nothing new.
    let mut retry = key(2);
    retry.id = "key_other".into();
    assert_eq!(stores.keys.create_key(retry, Some(idem)).await.unwrap(), Written::Replayed(first.clone()));
    assert!(stores.keys.get_key("key_other").await.unwrap().is_none());
    // The same idempotency key with another request is a conflict.
    let reused = Idempotency { key: "create-1".into(), fingerprint: "f2".into(), at_ms: NOW_MS };
    assert!(matches!(stores.keys.create_key(key(3), Some(reused)).await, Err(StoreError::Conflict(_))));
    // A duplicate id or hash is a conflict.
    assert!(matches!(stores.keys.create_key(first.clone(), None).await, Err(StoreError::Conflict(_))));
    for n in 10..15 {
        stores.keys.create_key(key(n), None).await.unwrap();
    }
    let page = stores.keys.list_keys(None, 3).await.unwrap();
    assert_eq!(page.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(), ["key_0001", "key_0010", "key_0011"]);
    let next = stores.keys.list_keys(Some("key_0011"), 10).await.unwrap();
    assert_eq!(next.len(), 3);
    assert_eq!(stores.keys.get_key("key_0012").await.unwrap(), Some(key(12)));
}

async fn rotation_and_revocation(stores: Stores) {
    let original = key(4);
    stores.keys.create_key(original.clone(), None).await.unwrap();
    let mut rotated = original.clone();
    rotated.hash = KeyHash::of("sy-rotated");
    rotated.prefix = "sy-rotat".into();
    rotated.rotated_at = Some(2_000);
    let idem = Idempotency { key: "rot-1".into(), fingerprint: "r".into(), at_ms: NOW_MS };
    let stored = KeyRecord { version: 1, ..rotated.clone() };
    assert_eq!(
        stores.keys.rotate_key(rotated.clone(), Some(idem.clone())).await.unwrap(),
        Written::New(stored.clone())
    );
    let mut again = rotated.clone();
    again.hash = KeyHash::of("sy-rotated-twice");
    assert_eq!(stores.keys.rotate_key(again, Some(idem)).await.unwrap(), Written::Replayed(stored.clone()));
    let mut revoked = stored.clone();
    revoked.revoked_at = Some(3_000);
    assert_eq!(stores.keys.update_key(revoked.clone()).await.unwrap(), KeyRecord { version: 2, ..revoked.clone() });
    assert_eq!(stores.keys.get_key(&original.id).await.unwrap(), Some(KeyRecord { version: 2, ..revoked }));
    let mut ghost = key(99);
    ghost.id = "key_ghost".into();
    assert_eq!(stores.keys.update_key(ghost).await, Err(StoreError::NotFound));
}

/// Two writers of one key: the one that read an older version is refused
/// (`Stale`), never silently undoing the other; and a revoked key takes no
/// change at all, not even from a writer that read it before the revocation.
async fn key_writes_are_conditional_and_revocation_is_final(stores: Stores) {
    let read = key(5);
    stores.keys.create_key(read.clone(), None).await.unwrap();
    // Instance A revokes while instance B holds what it read before.
    let revoked = KeyRecord { revoked_at: Some(4_000), ..read.clone() };
    stores.keys.update_key(revoked).await.unwrap();
    let renamed = KeyRecord { name: "renamed".into(), ..read.clone() };
    assert!(stores.keys.update_key(renamed).await.is_err(), "a write over a revocation must fail");
    let mut rotated = read.clone();
    rotated.hash = KeyHash::of("sy-sneaky");
    assert!(stores.keys.rotate_key(rotated, None).await.is_err(), "a rotation over a revocation must fail");
    let now = stores.keys.get_key(&read.id).await.unwrap().unwrap();
    assert_eq!((now.revoked_at, now.name.as_str(), now.hash), (Some(4_000), read.name.as_str(), read.hash));
    // Even a writer that read the revoked record cannot take it back.
    let unrevoked = KeyRecord { revoked_at: None, ..now.clone() };
    assert!(matches!(stores.keys.update_key(unrevoked).await, Err(StoreError::Conflict(_))));

    // Without a revocation: the later writer of an old read is stale.
    let other = key(6);
    stores.keys.create_key(other.clone(), None).await.unwrap();
    let first = stores.keys.update_key(KeyRecord { name: "first".into(), ..other.clone() }).await.unwrap();
    assert_eq!(first.version, 1);
    let late = KeyRecord { name: "late".into(), ..other.clone() };
    assert_eq!(stores.keys.update_key(late).await, Err(StoreError::Stale));
    let second = stores.keys.update_key(KeyRecord { name: "second".into(), ..first }).await.unwrap();
    assert_eq!((second.version, second.name.as_str()), (2, "second"));
}

/// An idempotency key holds for a day: after that, a request that reuses
/// it is a new request.
async fn idempotency_keys_expire(stores: Stores) {
    let original = key(8);
    let day = switchyard_store::IDEMPOTENCY_TTL_MS;
    let at = |ms: i64| Idempotency { key: "reused".into(), fingerprint: "rot".into(), at_ms: ms };
    stores.keys.create_key(original.clone(), None).await.unwrap();
    let rotation = |n: &str, version: u64| KeyRecord { hash: KeyHash::of(n), version, ..original.clone() };
    let first = stores.keys.rotate_key(rotation("sy-one", 0), Some(at(NOW_MS))).await.unwrap();
    assert!(matches!(first, Written::New(_)));
    let retried = stores.keys.rotate_key(rotation("sy-two", 1), Some(at(NOW_MS + day - 1))).await.unwrap();
    assert!(matches!(retried, Written::Replayed(_)), "within a day the key replays");
    let later = stores.keys.rotate_key(rotation("sy-three", 1), Some(at(NOW_MS + day + 1))).await.unwrap();
    assert!(matches!(later, Written::New(ref r) if r.hash == KeyHash::of("sy-three")), "a day later it rotates");
}

async fn groups_are_put_listed_and_deleted(stores: Stores) {
    let team = GroupRecord {
        name: "team".into(),
        parent: Some("org".into()),
        budget: Some(Budget::new(20.0, Window::Month)),
        limits: Limits { rpm: Some(600), tpm: Some(200_000), concurrent: Some(20), ..Limits::default() },
        // Its pricing comes back as written: the markup and every figure of its card.
        markup: Some(switchyard_governance::card::Markup(150_000)),
        rate_card: [(
            "sonnet".to_owned(),
            serde_json::json!({"input_utok": 3.3, "output_utok": 16.5, "cache_read_utok": 0.33,
                "cache_write_utok": 4.125, "tiers": [{"above_input_tokens": 200_000, "input_utok": 6.6,
                "output_utok": 24.75, "cache_read_utok": 0.66, "cache_write_utok": 8.25}],
                "batch_discount": 0.5, "service_tiers": {"priority": 1.8}}),
        )]
        .into(),
        from_config: true,
        retention: None,
        end_users: None,
        created_at: 1,
    };
    let org = GroupRecord {
        name: "org".into(),
        parent: None,
        budget: None,
        limits: Limits::default(),
        markup: None,
        rate_card: Default::default(),
        from_config: false,
        retention: None,
        end_users: None,
        created_at: 1,
    };
    stores.groups.put_group(team.clone()).await.unwrap();
    stores.groups.put_group(org.clone()).await.unwrap();
    let mut changed = team.clone();
    changed.budget = Some(Budget::new(30.0, Window::Month));
    stores.groups.put_group(changed.clone()).await.unwrap();
    assert_eq!(stores.groups.list_groups().await.unwrap(), vec![org.clone(), changed]);
    stores.groups.delete_group("team").await.unwrap();
    assert_eq!(stores.groups.delete_group("team").await, Err(StoreError::NotFound));
    assert_eq!(stores.groups.list_groups().await.unwrap(), vec![org]);
}

async fn the_ledger_sums_tokens_by_dimension_and_lane(stores: Stores) {
    // A request that failed over keeps its attempts.
    let mut failed_over = row(1_000, Some("k1"), Some("team"), "gpt", 100, 10);
    failed_over.failovers = 1;
    failed_over.attempts = vec![
        Attempt {
            lane: "claude".into(),
            status: Some(503),
            failure: Some("upstream_error".into()),
            ms: 40,
            error: Some("{\"error\":\"overloaded\"}".into()),
        },
        Attempt { lane: "gpt".into(), status: Some(200), failure: None, ms: 120, error: None },
    ];
    let rows = [
        failed_over,
        row(2_000, Some("k1"), Some("team"), "claude", 200, 20),
        row(3_000, Some("k2"), Some("other"), "gpt", 300, 30),
        row(4_000, None, None, "gpt", 400, 40),
        row(9_000, Some("k1"), Some("team"), "gpt", 1, 1),
    ];
    stores.ledger.append(rows[..3].into()).await.unwrap();
    stores.ledger.append(rows[3..].into()).await.unwrap();
    assert_eq!(stores.ledger.count().await.unwrap(), 5);

    let by_key = stores
        .ledger
        .totals(TotalsQuery { by: SpendBy::Key, from_ms: 0, to_ms: 5_000, key: None, groups: None, end_user: None })
        .await
        .unwrap();
    let k1_gpt = by_key.iter().find(|t| t.value.as_deref() == Some("k1") && t.lane == "gpt").unwrap();
    assert_eq!((k1_gpt.requests, k1_gpt.tokens.input, k1_gpt.tokens.output, k1_gpt.tokens.cache_read), (1, 100, 10, 1));
    assert!(by_key.iter().any(|t| t.value.is_none() && t.tokens.input == 400), "rows without a key count too");
    assert_eq!(by_key.len(), 4);

    let team = stores
        .ledger
        .totals(TotalsQuery {
            by: SpendBy::Group,
            from_ms: 0,
            to_ms: 10_000,
            key: None,
            groups: Some(vec!["team".into()]),
            end_user: None,
        })
        .await
        .unwrap();
    let input: u64 = team.iter().map(|t| t.tokens.input).sum();
    assert_eq!(input, 301);
    let one_key = stores
        .ledger
        .totals(TotalsQuery {
            by: SpendBy::Lane,
            from_ms: 1_500,
            to_ms: 10_000,
            key: Some("k1".into()),
            groups: None,
            end_user: None,
        })
        .await
        .unwrap();
    assert_eq!(one_key.iter().map(|t| t.requests).sum::<u64>(), 2);

    let recent = stores.ledger.rows(RowFilter { limit: 2, ..RowFilter::default() }).await.unwrap();
    assert_eq!(recent.iter().map(|r| r.row.at_ms).collect::<Vec<_>>(), [9_000, 4_000]);
    let older =
        stores.ledger.rows(RowFilter { before: Some(recent[1].id), limit: 10, ..RowFilter::default() }).await.unwrap();
    assert_eq!(older.len(), 3);
    let filtered = stores
        .ledger
        .rows(RowFilter { key: Some("k1".into()), lane: Some("gpt".into()), limit: 10, ..RowFilter::default() })
        .await
        .unwrap();
    assert_eq!(filtered.len(), 2);
    assert_eq!(filtered[1].row, rows[0]);
    // By end user, by request id, by status class.
    let by_user = RowFilter { end_user: Some("user-of-k1".into()), limit: 10, ..RowFilter::default() };
    let found = stores.ledger.rows(by_user).await.unwrap();
    assert!(!found.is_empty() && found.iter().all(|r| r.row.end_user.as_deref() == Some("user-of-k1")));
    let by_id = RowFilter { request_id: Some(rows[0].request_id.clone()), limit: 10, ..RowFilter::default() };
    assert_eq!(stores.ledger.rows(by_id).await.unwrap().len(), 1);
    let chats = RowFilter { operation: Some("chat".into()), limit: 10, ..RowFilter::default() };
    assert_eq!(stores.ledger.rows(chats).await.unwrap().len(), rows.len(), "every row here is a chat");
    let tools = RowFilter { operation: Some("mcp".into()), limit: 10, ..RowFilter::default() };
    assert!(stores.ledger.rows(tools).await.unwrap().is_empty());
    // By groups (a tenant admin's subtree): only those groups' rows; none named, none.
    let in_team = RowFilter { groups: Some(vec!["team".into()]), limit: 10, ..RowFilter::default() };
    let found = stores.ledger.rows(in_team).await.unwrap();
    assert!(!found.is_empty() && found.iter().all(|r| r.row.group.as_deref() == Some("team")));
    assert_eq!(found.len(), rows.iter().filter(|r| r.group.as_deref() == Some("team")).count());
    let nowhere = RowFilter { groups: Some(Vec::new()), limit: 10, ..RowFilter::default() };
    assert!(stores.ledger.rows(nowhere).await.unwrap().is_empty());
    let class = RowFilter { status: Some((200, 300)), limit: 10, ..RowFilter::default() };
    assert_eq!(stores.ledger.rows(class).await.unwrap().len(), rows.len());
    let none = RowFilter { status: Some((500, 600)), limit: 10, ..RowFilter::default() };
    assert!(stores.ledger.rows(none).await.unwrap().is_empty());
    let window = RowFilter { at_ms: Some((4_000, 9_000)), limit: 10, ..RowFilter::default() };
    let inside = stores.ledger.rows(window).await.unwrap();
    assert!(!inside.is_empty() && inside.iter().all(|r| (4_000..9_000).contains(&r.row.at_ms)), "{inside:?}");
}

/// Requests, input, output, units, billed requests and saved nano-USD of a
/// spend line, its outcomes, then every token count by kind.
type Sums = (u64, u64, u64, u64, u64, u64, u64, u64, u64, [u64; 12], [u64; 3]);

/// Spend over ranges that cross hour boundaries: whole hours come from the
/// rollup and the edges from the rows, and the two must add up to what the
/// rows alone say, for every dimension and filter.
async fn spend_over_many_hours_equals_the_sum_of_its_rows(stores: Stores) {
    const H: i64 = 3_600_000;
    let mut rows = Vec::new();
    for i in 0..60i64 {
        let at = 1_800_000_000_000 + i * (H / 4) + i; // every quarter hour or so, over 15 hours
        let key = ["k1", "k2"][(i % 2) as usize];
        let group = (i % 3 != 0).then_some("team");
        let mut r = row(
            at,
            (i % 5 != 0).then_some(key),
            group,
            ["gpt", "claude"][(i % 4 / 2) as usize],
            10 + i as u64,
            i as u64,
        );
        r.entry = 10_000 + i;
        // Some rows are another operation's, billed in units too.
        if i % 3 == 1 {
            r.operation = "rerank".into();
            r.tokens.units = (i % 7) as u64;
        }
        // Some are response-cache hits, with what they saved.
        if i % 4 == 3 {
            r.notes.cache_saved_nano = Some(1_000 * i as u64);
        }
        // End users: three of them, and rows without one.
        r.end_user = (i % 7 != 0).then(|| format!("u{}", i % 3));
        // What each cost and was charged, as settled; a few rows from
        // before the ledger kept charges have none.
        r.charge = (i % 13 != 7)
            .then_some(switchyard_store::Charge { cost_nano: 1_000_003 * i as u64, price_nano: 1_150_007 * i as u64 });
        // Some made several guardrail decisions.
        if i % 5 == 2 {
            r.notes.guardrails.push("pii/phone/block/response".into());
        }
        // Some are refusals at the door: in the log and counted, never
        // spend; a row may stand for a minute's refusals past the log's limit.
        if i % 11 == 5 {
            r.operation = switchyard_store::REFUSED.into();
            r.tokens = Tokens::default();
            let count = (i % 3 + 1) as u64;
            r.notes.refused =
                Some(switchyard_store::Refusal { kind: "rate_limit".into(), operation: "chat".into(), count });
        }
        rows.push(r);
    }
    // In batches, as the writer sends them.
    for batch in rows.chunks(7) {
        stores.ledger.append(batch[..].into()).await.unwrap();
    }
    let start = rows[0].at_ms;
    let ranges = [
        (start, start + 15 * H),
        (start - start % H, start - start % H + 6 * H),
        (start + H / 3, start + 9 * H + 17),
        (start + 10, start + 20),
    ];
    for by in [SpendBy::Key, SpendBy::Group, SpendBy::Model, SpendBy::Lane, SpendBy::Operation, SpendBy::User] {
        for (from_ms, to_ms) in ranges {
            for (key, groups, end_user) in [
                (None, None, None),
                (Some("k1".to_owned()), None, None),
                (None, Some(vec!["team".to_owned()]), None),
                (Some("k2".to_owned()), None, Some("u1".to_owned())),
            ] {
                let query = TotalsQuery {
                    by,
                    from_ms,
                    to_ms,
                    key: key.clone(),
                    groups: groups.clone(),
                    end_user: end_user.clone(),
                };
                let got = stores.ledger.totals(query).await.unwrap();
                // What the rows alone say.
                let mut want: std::collections::BTreeMap<(Option<String>, String), Sums> = Default::default();
                for r in rows.iter().filter(|r| r.at_ms >= from_ms && r.at_ms < to_ms) {
                    if key.as_ref().is_some_and(|k| r.key_id.as_ref() != Some(k)) {
                        continue;
                    }
                    if groups.as_ref().is_some_and(|gs| !r.group.as_ref().is_some_and(|g| gs.contains(g))) {
                        continue;
                    }
                    if end_user.as_ref().is_some_and(|u| r.end_user.as_ref() != Some(u)) {
                        continue;
                    }
                    // A refusal is counted as many as it stands for, never as a request.
                    let refused = r.refusals();
                    let served = u64::from(r.operation != switchyard_store::REFUSED);
                    let value = match by {
                        SpendBy::Key => r.key_id.clone(),
                        SpendBy::Group => r.group.clone(),
                        SpendBy::Model => Some(r.model.clone()),
                        SpendBy::Lane => Some(r.lane.clone()),
                        SpendBy::Operation => Some(r.operation.clone()),
                        SpendBy::User => r.end_user.clone(),
                    };
                    let line = want.entry((value, r.lane.clone())).or_default();
                    let t = &r.tokens;
                    let saved = r.notes.cache_saved_nano.unwrap_or(0);
                    *line = (
                        line.0 + served,
                        line.1 + t.input,
                        line.2 + t.output,
                        line.3 + t.units,
                        line.4 + t.requests,
                        line.5 + saved,
                        line.6 + u64::from(r.notes.cache_saved_nano.is_some()),
                        line.7 + r.notes.guardrails.len() as u64,
                        line.8 + refused,
                        {
                            let mut kinds = Tokens::of_counts(line.9);
                            kinds.add(t);
                            kinds.counts()
                        },
                        [
                            line.10[0] + r.charge.map_or(0, |c| c.cost_nano),
                            line.10[1] + r.charge.map_or(0, |c| c.price_nano),
                            line.10[2] + u64::from(r.charge.is_none()),
                        ],
                    );
                }
                let mut got: Vec<_> = got
                    .iter()
                    .map(|t| {
                        let sums = (
                            t.requests,
                            t.tokens.input,
                            t.tokens.output,
                            t.tokens.units,
                            t.tokens.requests,
                            t.saved_nano,
                            t.outcomes.cache_hits,
                            t.outcomes.guarded,
                            t.outcomes.refused,
                            t.tokens.counts(),
                            [t.settled.cost_nano, t.settled.price_nano, t.settled.unsettled],
                        );
                        ((t.value.clone(), t.lane.clone()), sums)
                    })
                    .collect();
                got.sort();
                assert_eq!(
                    got,
                    want.into_iter().collect::<Vec<_>>(),
                    "{by:?} over [{from_ms}, {to_ms}) key {key:?} groups {groups:?}"
                );
            }
        }
    }
}

async fn the_audit_log_keeps_every_attempt(stores: Stores) {
    for outcome in [201, 403, 200] {
        let entry = AuditEntry {
            at_ms: 5,
            actor: "ops".into(),
            action: "POST /api/v1/admin/keys".into(),
            target: None,
            outcome,
        };
        stores.audit.record(entry).await.unwrap();
    }
    let entries = stores.audit.entries(None, 2).await.unwrap();
    assert_eq!(entries.iter().map(|e| e.entry.outcome).collect::<Vec<_>>(), [200, 403]);
    assert_eq!(stores.audit.entries(Some(entries[1].id), 10).await.unwrap().len(), 1);
}

async fn signatures_are_kept_until_they_expire(stores: Stores) {
    let kept = |key: &str, signature: &str, expires_ms| KeptSignature {
        key: key.into(),
        signature: signature.into(),
        expires_ms,
    };
    stores
        .signatures
        .keep_signatures(vec![kept("k1:call_a", "c2lnQQ==", 1_000), kept("k1:call_b", "c2lnQg==", 50)], 10)
        .await
        .unwrap();
    // A later signature under the same key replaces the first, even in one batch.
    stores
        .signatures
        .keep_signatures(vec![kept("k2:call_a", "old", 1_000), kept("k2:call_a", "new", 2_000)], 10)
        .await
        .unwrap();
    let keys = || vec!["k1:call_a".to_owned(), "k1:call_b".to_owned(), "k2:call_a".to_owned(), "k3:call_a".to_owned()];
    let found = stores.signatures.find_signatures(keys(), 20).await.unwrap();
    assert_eq!(found, [Some("c2lnQQ==".to_owned()), Some("c2lnQg==".to_owned()), Some("new".to_owned()), None]);
    // Past its expiry a signature is gone, read before or after a purge.
    let found = stores.signatures.find_signatures(keys(), 60).await.unwrap();
    assert_eq!(found, [Some("c2lnQQ==".to_owned()), None, Some("new".to_owned()), None]);
    stores.signatures.keep_signatures(Vec::new(), 1_500).await.unwrap();
    let found = stores.signatures.find_signatures(keys(), 1_500).await.unwrap();
    assert_eq!(found, [None, None, Some("new".to_owned()), None]);
}

/// Kept text: stored once per entry, found by entry, erased by its end
/// user's tag (no one else's), purged by age.
async fn config_versions_append_in_order_and_refuse_a_lost_update(stores: Stores) {
    let version = |text: &str| ConfigVersion {
        version: 0,
        at_ms: NOW_MS,
        author: "ops".into(),
        message: format!("set {text}"),
        text: text.into(),
    };
    assert!(stores.configs.config_versions(None, 10).await.unwrap().is_empty());
    let first = stores.configs.append_config(0, version("a: 1")).await.unwrap();
    assert_eq!(first.version, 1);
    let second = stores.configs.append_config(1, version("a: 2")).await.unwrap();
    assert_eq!((second.version, second.text.as_str(), second.author.as_str()), (2, "a: 2", "ops"));
    // A writer that read version 1 is too late.
    assert_eq!(stores.configs.append_config(1, version("a: 3")).await, Err(StoreError::Stale));
    assert_eq!(stores.configs.append_config(0, version("a: 3")).await, Err(StoreError::Stale));
    let listed = stores.configs.config_versions(None, 10).await.unwrap();
    assert_eq!(listed.iter().map(|v| v.version).collect::<Vec<_>>(), [2, 1]);
    assert_eq!(stores.configs.config_versions(Some(2), 10).await.unwrap(), vec![first.clone()]);
    assert_eq!(stores.configs.config_version(1).await.unwrap(), Some(first));
    assert_eq!(stores.configs.config_version(9).await.unwrap(), None);
}

async fn kept_content_is_found_erased_by_user_and_purged_by_age(stores: Stores) {
    let kept = |entry: i64, at_ms: i64, user: Option<&str>| KeptContent {
        entry,
        at_ms,
        request_id: format!("req-{entry}"),
        key_id: Some("k1".into()),
        group: Some("support".into()),
        user_tag: user.map(str::to_owned),
        retention: "redacted".into(),
        sealed: vec![1, 0, 255, entry as u8],
    };
    let content = &stores.content;
    content
        .keep_content(vec![kept(1, 1_000, Some("alice")), kept(2, 2_000, Some("alice")), kept(3, 3_000, Some("bob"))])
        .await
        .unwrap();
    content.keep_content(vec![kept(4, 4_000, None), kept(1, 9_000, Some("bob"))]).await.unwrap();
    assert_eq!(content.find_content(1).await.unwrap(), Some(kept(1, 1_000, Some("alice"))), "kept once");
    assert_eq!(content.find_content(99).await.unwrap(), None);
    assert_eq!(content.erase_content("alice".into()).await.unwrap(), 2);
    assert_eq!(content.find_content(1).await.unwrap(), None);
    assert_eq!(content.find_content(2).await.unwrap(), None);
    assert!(content.find_content(3).await.unwrap().is_some(), "another user's text stays");
    assert_eq!(content.erase_content("alice".into()).await.unwrap(), 0);
    assert_eq!(content.purge_content(3_500).await.unwrap(), 1);
    assert_eq!(content.find_content(3).await.unwrap(), None);
    assert!(content.find_content(4).await.unwrap().is_some(), "newer text stays");
}

async fn objects_belong_to_their_owner_and_expire(stores: Stores) {
    let objects = &stores.objects;
    let object = |owner: &str, id: &str, at: i64, expires: Option<i64>| KeptObject {
        kind: ObjectKind::File,
        owner: owner.into(),
        id: id.into(),
        created_ms: at,
        expires_ms: expires,
        meta: format!("{{\"n\":{at}}}"),
        body: vec![at as u8; 3],
        size: 3,
        chunks: 0,
        user_tag: None,
    };
    objects.put_object(object("k1", "file-a", 10, None)).await.unwrap();
    objects.put_object(object("k1", "file-b", 20, Some(1_000))).await.unwrap();
    objects.put_object(object("k2", "file-a", 30, None)).await.unwrap();
    let got = objects.get_object(ObjectKind::File, "k1".into(), "file-a".into(), 0).await.unwrap().unwrap();
    assert_eq!(got, object("k1", "file-a", 10, None));
    // Another owner, or another kind, finds nothing by the same id.
    assert!(objects.get_object(ObjectKind::File, "k3".into(), "file-a".into(), 0).await.unwrap().is_none());
    assert!(objects.get_object(ObjectKind::Response, "k1".into(), "file-a".into(), 0).await.unwrap().is_none());
    let listed = objects.list_objects(ObjectKind::File, "k1".into(), 0, 10).await.unwrap();
    assert_eq!(listed.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["file-b", "file-a"], "newest first");
    assert!(listed.iter().all(|o| o.body.is_empty()), "a list carries no bodies");
    // Expired: not found, not listed, then purged.
    assert!(objects.get_object(ObjectKind::File, "k1".into(), "file-b".into(), 1_000).await.unwrap().is_none());
    assert_eq!(objects.list_objects(ObjectKind::File, "k1".into(), 1_000, 10).await.unwrap().len(), 1);
    assert_eq!(objects.purge_objects(1_000).await.unwrap(), 1);
    assert!(!objects.delete_object(ObjectKind::File, "k2".into(), "file-b".into()).await.unwrap());
    assert!(objects.delete_object(ObjectKind::File, "k2".into(), "file-a".into()).await.unwrap());
    assert!(objects.get_object(ObjectKind::File, "k2".into(), "file-a".into(), 0).await.unwrap().is_none());
    assert!(objects.get_object(ObjectKind::File, "k1".into(), "file-a".into(), 0).await.unwrap().is_some());
}

/// A file's content written in chunks ahead of its object: found only once
/// the object is put, counted in its owner's bytes, removed with it (or,
/// never put, by the purge once old), and an end user's objects erased by
/// their tag.
async fn objects_in_chunks_are_found_once_put_counted_and_erased(stores: Stores) {
    let objects = &stores.objects;
    let file = |id: &str, chunks: u32, size: u64, user: Option<&str>| KeptObject {
        kind: ObjectKind::File,
        owner: "k1".into(),
        id: id.into(),
        created_ms: 100,
        expires_ms: Some(10_000),
        meta: "{}".into(),
        body: Vec::new(),
        size,
        chunks,
        user_tag: user.map(str::to_owned),
    };
    let chunk = |id: &str, seq: u32, at: i64, data: &[u8]| {
        objects.put_chunk(ObjectKind::File, "k1".into(), id.into(), seq, at, data.to_vec())
    };
    chunk("file-a", 0, 100, b"hello ").await.unwrap();
    chunk("file-a", 1, 100, b"world").await.unwrap();
    assert!(objects.get_object(ObjectKind::File, "k1".into(), "file-a".into(), 0).await.unwrap().is_none());
    assert_eq!(objects.object_bytes("k1".into(), 0).await.unwrap(), 0, "chunks count once their object is put");
    objects.put_object(file("file-a", 2, 11, Some("tag-ada"))).await.unwrap();
    let got = objects.get_object(ObjectKind::File, "k1".into(), "file-a".into(), 0).await.unwrap().unwrap();
    assert_eq!((got.chunks, got.size, got.user_tag.as_deref()), (2, 11, Some("tag-ada")));
    let read = |id: &'static str, seq: u32| objects.get_chunk(ObjectKind::File, "k1".into(), id.into(), seq);
    assert_eq!(read("file-a", 0).await.unwrap().as_deref(), Some(&b"hello "[..]));
    assert_eq!(read("file-a", 1).await.unwrap().as_deref(), Some(&b"world"[..]));
    assert_eq!(read("file-a", 2).await.unwrap(), None);
    assert!(objects.get_chunk(ObjectKind::File, "k2".into(), "file-a".into(), 0).await.unwrap().is_none());
    // Listed without a body, with its size; counted against its owner.
    let listed = objects.list_objects(ObjectKind::File, "k1".into(), 0, 10).await.unwrap();
    assert_eq!((listed[0].size, listed[0].chunks), (11, 2));
    let response = KeptObject {
        kind: ObjectKind::Response,
        owner: "k1".into(),
        id: "resp_1".into(),
        created_ms: 100,
        expires_ms: None,
        meta: String::new(),
        body: b"{\"r\":1}".to_vec(),
        size: 7,
        chunks: 0,
        user_tag: Some("tag-ada".into()),
    };
    objects.put_object(response).await.unwrap();
    assert_eq!(objects.object_bytes("k1".into(), 0).await.unwrap(), 18, "every kind counts");
    assert_eq!(objects.object_bytes("k1".into(), 10_000).await.unwrap(), 7, "an expired file does not");
    assert_eq!(objects.object_bytes("k2".into(), 0).await.unwrap(), 0);
    // Deleted with its chunks.
    assert!(objects.delete_object(ObjectKind::File, "k1".into(), "file-a".into()).await.unwrap());
    assert_eq!(read("file-a", 0).await.unwrap(), None);
    // An upload cut short: its chunks go once old; a live object's stay.
    chunk("file-b", 0, 1_000, b"cut").await.unwrap();
    chunk("file-c", 0, 1_000, b"kept").await.unwrap();
    objects.put_object(KeptObject { expires_ms: None, ..file("file-c", 1, 4, None) }).await.unwrap();
    objects.purge_objects(2_000).await.unwrap();
    assert!(read("file-b", 0).await.unwrap().is_some(), "a young orphan may still be uploading");
    objects.purge_objects(1_000 + switchyard_store::ORPHAN_CHUNKS_MS).await.unwrap();
    assert_eq!(read("file-b", 0).await.unwrap(), None);
    assert!(read("file-c", 0).await.unwrap().is_some());
    // Put again with fewer chunks: the rest go.
    chunk("file-c", 1, 1_000, b"more").await.unwrap();
    objects.put_object(KeptObject { expires_ms: None, ..file("file-c", 1, 4, None) }).await.unwrap();
    assert_eq!(read("file-c", 1).await.unwrap(), None);
    // Expired objects go with their chunks.
    chunk("file-d", 0, 1_000, b"old").await.unwrap();
    objects.put_object(file("file-d", 1, 3, None)).await.unwrap();
    assert_eq!(objects.purge_objects(10_000).await.unwrap(), 1);
    assert_eq!(read("file-d", 0).await.unwrap(), None);
    // The end user's erase: their objects, no one else's.
    chunk("file-e", 0, 1_000, b"hers").await.unwrap();
    objects.put_object(KeptObject { expires_ms: None, ..file("file-e", 1, 4, Some("tag-ada")) }).await.unwrap();
    assert_eq!(objects.erase_objects("tag-ada".into()).await.unwrap(), 2);
    assert!(objects.get_object(ObjectKind::Response, "k1".into(), "resp_1".into(), 0).await.unwrap().is_none());
    assert_eq!(read("file-e", 0).await.unwrap(), None);
    assert!(objects.get_object(ObjectKind::File, "k1".into(), "file-c".into(), 0).await.unwrap().is_some());
    assert_eq!(objects.erase_objects("tag-ada".into()).await.unwrap(), 0);
}

/// Owners take turns: one line each a round, the owner served least
/// recently first, across claims and claimers, however old or long its
/// batch; a line given back with a not-before time waits in the queue, and
/// its owner rests with it.
async fn owners_take_turns_and_a_refused_line_waits_in_the_queue(stores: Stores) {
    let queue = &stores.batches;
    // k1's long batch came first; k2's and k3's after it.
    queue.submit_batch(job("long", "k1", 100, 20), lines(20)).await.unwrap();
    queue.submit_batch(job("short2", "k2", 200, 2), lines(2)).await.unwrap();
    queue.submit_batch(job("short3", "k3", 300, 1), lines(1)).await.unwrap();
    let who = |claimed: &[switchyard_store::ClaimedLine]| {
        claimed.iter().map(|l| (l.owner.clone(), l.index)).collect::<Vec<_>>()
    };
    let owned = |pairs: &[(&str, u32)]| pairs.iter().map(|(o, i)| ((*o).to_owned(), *i)).collect::<Vec<_>>();
    let first = queue.claim_lines("w1".into(), 1_000, 60_000, 4).await.unwrap();
    assert_eq!(who(&first), owned(&[("k1", 0), ("k2", 0), ("k3", 0), ("k1", 1)]), "one each a round");
    // One line at a time, from another claimer: the owners served least recently go first.
    let next = queue.claim_lines("w2".into(), 1_000, 60_000, 1).await.unwrap();
    assert_eq!(who(&next), owned(&[("k2", 1)]), "k1 was served last");
    let next = queue.claim_lines("w1".into(), 1_000, 60_000, 1).await.unwrap();
    assert_eq!(who(&next), owned(&[("k1", 2)]), "k3 has nothing left; k1 before k2 now");
    // k4 arrives: it goes before owners already served.
    queue.submit_batch(job("late", "k4", 400, 2), lines(2)).await.unwrap();
    let next = queue.claim_lines("w1".into(), 1_000, 60_000, 2).await.unwrap();
    assert_eq!(who(&next), owned(&[("k4", 0), ("k1", 3)]));
    // A refused line goes back with a not-before time; its owner rests.
    let held = &first[0];
    assert!(queue.release_line("w1".into(), held.batch.clone(), held.index, held.attempt, 5_000).await.unwrap());
    assert!(!queue.release_line("w1".into(), held.batch.clone(), held.index, held.attempt, 5_000).await.unwrap());
    assert!(
        !queue
            .release_line("w2".into(), first[1].batch.clone(), first[1].index, first[1].attempt, 5_000)
            .await
            .unwrap(),
        "only the claim's holder gives it back"
    );
    let meanwhile = queue.claim_lines("w1".into(), 2_000, 60_000, 10).await.unwrap();
    assert_eq!(who(&meanwhile), owned(&[("k4", 1)]), "k1 rests until 5000, its refused line with it");
    let after = queue.claim_lines("w1".into(), 5_000, 60_000, 2).await.unwrap();
    assert_eq!(who(&after), owned(&[("k1", 0), ("k1", 4)]), "the refused line first, as attempt 2");
    assert_eq!(after[0].attempt, 2);
    // A line given back still expires with its batch.
    queue.submit_batch(BatchJob { expires_ms: 9_000, ..job("brief", "k5", 500, 1) }, lines(1)).await.unwrap();
    let brief = queue.claim_lines("w1".into(), 6_000, 60_000, 1).await.unwrap();
    assert_eq!(who(&brief), owned(&[("k5", 0)]));
    assert!(queue.release_line("w1".into(), "brief".into(), 0, 1, 20_000).await.unwrap());
    queue.claim_lines("w1".into(), 9_000, 60_000, 0).await.unwrap();
    let state = queue.batch("k5".into(), "brief".into()).await.unwrap().unwrap();
    assert_eq!((state.counts.expired, state.counts.pending), (1, 0), "{state:?}");
}

/// A batch staged in parts is found, listed and claimed by no one until it
/// is opened; its lines' bytes count against its owner from the start; one
/// never opened is purged once old.
async fn a_batch_staged_in_parts_is_claimed_only_once_opened(stores: Stores) {
    let queue = &stores.batches;
    queue.stage_batch(job("parts", "k1", 1_000, 0)).await.unwrap();
    assert!(matches!(queue.stage_batch(job("parts", "k1", 1_000, 0)).await, Err(StoreError::Conflict(_))));
    let part = |from: u32, n: u32| -> Vec<QueuedLine> {
        (from..from + n).map(|i| QueuedLine { index: i, custom_id: format!("c{i}"), body: vec![b'x'; 10] }).collect()
    };
    queue.stage_lines("parts".into(), part(0, 3)).await.unwrap();
    queue.stage_lines("parts".into(), part(3, 2)).await.unwrap();
    assert_eq!(queue.batch_bytes("k1".into()).await.unwrap(), 50);
    assert!(queue.batch("k1".into(), "parts".into()).await.unwrap().is_none(), "staged: not found");
    assert!(queue.batches("k1".into(), 10).await.unwrap().is_empty(), "staged: not listed");
    assert!(queue.claim_lines("w".into(), 2_000, 60_000, 10).await.unwrap().is_empty(), "staged: not claimed");
    assert!(!queue.delete_batch("k1".into(), "parts".into()).await.unwrap());
    assert!(queue.open_batch("parts".into(), 5).await.unwrap());
    assert!(!queue.open_batch("parts".into(), 5).await.unwrap(), "opened once");
    assert!(matches!(queue.stage_lines("parts".into(), part(5, 1)).await, Err(StoreError::NotFound)));
    let state = queue.batch("k1".into(), "parts".into()).await.unwrap().unwrap();
    assert_eq!((state.job.total, state.counts.pending), (5, 5));
    assert_eq!(queue.claim_lines("w".into(), 2_000, 60_000, 10).await.unwrap().len(), 5);
    // Abandoned part-way: purged once old, with its lines; an opened job stays.
    queue.stage_batch(job("cut", "k2", 1_000, 0)).await.unwrap();
    queue.stage_lines("cut".into(), part(0, 2)).await.unwrap();
    assert_eq!(queue.purge_batches(2_000).await.unwrap(), 0, "it may still be arriving");
    assert_eq!(queue.purge_batches(1_000 + switchyard_store::STAGED_BATCH_MS).await.unwrap(), 1);
    assert_eq!(queue.batch_bytes("k2".into()).await.unwrap(), 0);
    assert!(queue.batch("k1".into(), "parts".into()).await.unwrap().is_some());
    assert_eq!(queue.batch_bytes("k1".into()).await.unwrap(), 50);
}

fn job(id: &str, owner: &str, created_ms: i64, total: u32) -> BatchJob {
    BatchJob {
        id: id.into(),
        owner: owner.into(),
        shape: "openai".into(),
        endpoint: "/v1/chat/completions".into(),
        created_ms,
        expires_ms: created_ms + 86_400_000,
        cancelled_ms: None,
        total,
        meta: "{}".into(),
    }
}

fn lines(n: u32) -> Vec<QueuedLine> {
    (0..n)
        .map(|i| QueuedLine { index: i, custom_id: format!("c{i}"), body: format!("{{\"i\":{i}}}").into_bytes() })
        .collect()
}

fn outcome(index: u32, state: LineState, done_ms: i64) -> LineOutcome {
    LineOutcome { index, custom_id: format!("c{index}"), state, status: 200, body: b"{}".to_vec(), done_ms }
}

async fn batch_lines_are_claimed_once_leased_and_finished_once(stores: Stores) {
    let queue = &stores.batches;
    queue.submit_batch(job("b1", "k1", 100, 5), lines(5)).await.unwrap();
    queue.submit_batch(job("b2", "k1", 200, 2), lines(2)).await.unwrap();
    assert!(matches!(queue.submit_batch(job("b1", "k1", 100, 1), lines(1)).await, Err(StoreError::Conflict(_))));
    // Oldest job first; two workers never share a line.
    let a = queue.claim_lines("wa".into(), 1_000, 30_000, 3).await.unwrap();
    let b = queue.claim_lines("wb".into(), 1_000, 30_000, 10).await.unwrap();
    assert_eq!(a.iter().map(|l| (l.batch.as_str(), l.index)).collect::<Vec<_>>(), [("b1", 0), ("b1", 1), ("b1", 2)]);
    assert_eq!(b.len(), 4);
    assert!(b.iter().all(|l| !a.iter().any(|x| x.batch == l.batch && x.index == l.index)));
    assert_eq!((a[0].owner.as_str(), a[0].endpoint.as_str(), a[0].attempt), ("k1", "/v1/chat/completions", 1));
    assert_eq!(a[1].body, b"{\"i\":1}");
    assert!(queue.claim_lines("wc".into(), 1_000, 30_000, 10).await.unwrap().is_empty(), "all leased");
    // A finish by the holder counts once; a stranger's or a repeat does not.
    assert!(queue.finish_line("wa".into(), "b1".into(), 1, outcome(0, LineState::Succeeded, 1_500)).await.unwrap());
    assert!(!queue.finish_line("wa".into(), "b1".into(), 1, outcome(0, LineState::Failed, 1_600)).await.unwrap());
    assert!(!queue.finish_line("wb".into(), "b1".into(), 1, outcome(1, LineState::Succeeded, 1_500)).await.unwrap());
    // wa renews; wb dies: once wb's lease ends its lines go to another claimer, as attempt 2.
    queue.renew_lines("wa".into(), 20_000, 30_000).await.unwrap();
    let again = queue.claim_lines("wc".into(), 31_001, 30_000, 10).await.unwrap();
    assert_eq!(again.len(), 4, "{again:?}");
    assert!(again.iter().all(|l| l.attempt == 2 && b.iter().any(|x| x.batch == l.batch && x.index == l.index)));
    // The dead claimer's late finish is refused: the line is another's now.
    let late = &b[0];
    assert!(!queue
        .finish_line("wb".into(), late.batch.clone(), 1, outcome(late.index, LineState::Succeeded, 31_500))
        .await
        .unwrap());
    let state = queue.batch("k1".into(), "b1".into()).await.unwrap().unwrap();
    assert_eq!((state.counts.succeeded, state.counts.running, state.counts.pending), (1, 4, 0));
    assert_eq!(state.counts.last_done_ms, Some(1_500));
    assert!(queue.batch("k2".into(), "b1".into()).await.unwrap().is_none(), "another owner's job is not found");
    // Cancel: pending lines cancel at once, running ones finish.
    queue.submit_batch(job("b3", "k1", 300, 3), lines(3)).await.unwrap();
    let one = queue.claim_lines("wa".into(), 40_000, 30_000, 1).await.unwrap();
    assert_eq!((one[0].batch.as_str(), one[0].index), ("b3", 0));
    let cancelled = queue.cancel_batch("k1".into(), "b3".into(), 41_000).await.unwrap().unwrap();
    assert_eq!(cancelled.job.cancelled_ms, Some(41_000));
    assert_eq!((cancelled.counts.cancelled, cancelled.counts.running), (2, 1));
    assert!(queue.finish_line("wa".into(), "b3".into(), 1, outcome(0, LineState::Succeeded, 42_000)).await.unwrap());
    let outcomes = queue.line_outcomes("k1".into(), "b3".into()).await.unwrap();
    assert_eq!(
        outcomes.iter().map(|o| (o.index, o.state)).collect::<Vec<_>>(),
        [(0, LineState::Succeeded), (1, LineState::Cancelled), (2, LineState::Cancelled)]
    );
    assert!(queue.line_outcomes("k2".into(), "b3".into()).await.unwrap().is_empty());
    // A cancelled job's running line whose claimer died is cancelled, not left running.
    queue.submit_batch(job("b5", "k1", 350, 2), lines(2)).await.unwrap();
    let held = queue.claim_lines("wd".into(), 43_000, 1_000, 10).await.unwrap();
    assert_eq!(held.iter().filter(|l| l.batch == "b5").count(), 2, "{held:?}");
    queue.cancel_batch("k1".into(), "b5".into(), 43_500).await.unwrap();
    assert!(queue.claim_lines("we".into(), 45_000, 30_000, 10).await.unwrap().iter().all(|l| l.batch != "b5"));
    let over = queue.batch("k1".into(), "b5".into()).await.unwrap().unwrap();
    assert!(over.counts.done() && over.counts.cancelled == 2, "{over:?}");
    // An expired job's unclaimed lines expire instead of running.
    queue.submit_batch(BatchJob { expires_ms: 50_000, ..job("b4", "k2", 400, 2) }, lines(2)).await.unwrap();
    let claimed = queue.claim_lines("wa".into(), 60_000, 30_000, 10).await.unwrap();
    assert!(claimed.iter().all(|l| l.batch != "b4"), "{claimed:?}");
    let expired = queue.batch("k2".into(), "b4".into()).await.unwrap().unwrap();
    assert_eq!(expired.counts.expired, 2);
    assert_eq!(
        queue.batches("k1".into(), 10).await.unwrap().iter().map(|s| s.job.id.as_str()).collect::<Vec<_>>(),
        ["b5", "b3", "b2", "b1"]
    );
    assert!(queue.delete_batch("k1".into(), "b3".into()).await.unwrap());
    assert!(queue.batch("k1".into(), "b3".into()).await.unwrap().is_none());
    assert!(queue.line_outcomes("k1".into(), "b3".into()).await.unwrap().is_empty());
}

async fn a_ledger_entry_written_twice_is_billed_once(stores: Stores) {
    let mut first = row(1_000, Some("k1"), None, "lane-a", 10, 20);
    first.entry = 424_242;
    let mut again = row(2_000, Some("k1"), None, "lane-a", 11, 21);
    again.entry = 424_242;
    stores.ledger.append(vec![first].into()).await.unwrap();
    stores.ledger.append(vec![again].into()).await.unwrap();
    assert_eq!(rows_and_input(&stores).await, (1, 10), "the rollup counts the row once");
}

/// How many ledger rows are stored, and the input tokens the rollup bills.
async fn rows_and_input(stores: &Stores) -> (u64, u64) {
    let query =
        TotalsQuery { by: SpendBy::Key, from_ms: 0, to_ms: 10_000_000, key: None, groups: None, end_user: None };
    let totals = stores.ledger.totals(query).await.unwrap();
    (stores.ledger.count().await.unwrap(), totals.iter().map(|t| t.tokens.input).sum())
}

/// A batch long enough to be written many rows to a statement, holding rows
/// stored before and an entry repeated within it, stores and bills each
/// entry once, as first written.
async fn a_long_batch_with_rows_stored_before_bills_each_entry_once(stores: Stores) {
    let make = |entry: i64, input: u64| {
        let mut r = row(1_000 + entry, Some("k1"), None, "lane-a", input, 1);
        r.entry = entry;
        r
    };
    stores.ledger.append(vec![make(40, 1_000), make(41, 1_000)].into()).await.unwrap();
    // Entries 1..=100 billing their own number, with entry 3 again inside
    // the first 32 rows and entry 7 again at the end; 40 and 41 are stored.
    let mut batch: Vec<LedgerRow> = (1..=100).map(|e| make(e, e as u64)).collect();
    batch.insert(10, make(3, 7_000));
    batch.push(make(7, 5_000));
    stores.ledger.append(batch.into()).await.unwrap();
    let expected = 2_000 + (1..=100u64).sum::<u64>() - 40 - 41;
    assert_eq!(rows_and_input(&stores).await, (100, expected), "each entry once, as first written");
    // A whole batch of rows stored before changes nothing.
    stores.ledger.append((1..=64).map(|e| make(e, 9)).collect::<Vec<_>>().into()).await.unwrap();
    assert_eq!(rows_and_input(&stores).await, (100, expected));
}

macro_rules! backends {
    ($($backend:ident => $make:expr),* $(,)?) => {
        $(
            mod $backend {
                use super::*;

                #[tokio::test]
                async fn keys() {
                    keys_round_trip_with_idempotency_and_pagination($make).await;
                }

                #[tokio::test]
                async fn rotation() {
                    rotation_and_revocation($make).await;
                }

                #[tokio::test]
                async fn conditional_writes() {
                    key_writes_are_conditional_and_revocation_is_final($make).await;
                }

                #[tokio::test]
                async fn idempotency_expiry() {
                    idempotency_keys_expire($make).await;
                }

                #[tokio::test]
                async fn groups() {
                    groups_are_put_listed_and_deleted($make).await;
                }

                #[tokio::test]
                async fn ledger() {
                    the_ledger_sums_tokens_by_dimension_and_lane($make).await;
                }

                #[tokio::test]
                async fn spend_over_hours() {
                    spend_over_many_hours_equals_the_sum_of_its_rows($make).await;
                }

                #[tokio::test]
                async fn audit() {
                    the_audit_log_keeps_every_attempt($make).await;
                }

                #[tokio::test]
                async fn signatures() {
                    signatures_are_kept_until_they_expire($make).await;
                }

                #[tokio::test]
                async fn kept_content() {
                    kept_content_is_found_erased_by_user_and_purged_by_age($make).await;
                }

                #[tokio::test]
                async fn objects() {
                    objects_belong_to_their_owner_and_expire($make).await;
                }

                #[tokio::test]
                async fn batch_queue() {
                    batch_lines_are_claimed_once_leased_and_finished_once($make).await;
                }

                #[tokio::test]
                async fn object_chunks() {
                    objects_in_chunks_are_found_once_put_counted_and_erased($make).await;
                }

                #[tokio::test]
                async fn batch_turns() {
                    owners_take_turns_and_a_refused_line_waits_in_the_queue($make).await;
                }

                #[tokio::test]
                async fn batch_staging() {
                    a_batch_staged_in_parts_is_claimed_only_once_opened($make).await;
                }

                #[tokio::test]
                async fn ledger_entry_once() {
                    a_ledger_entry_written_twice_is_billed_once($make).await;
                }

                #[tokio::test]
                async fn ledger_long_batch_once() {
                    a_long_batch_with_rows_stored_before_bills_each_entry_once($make).await;
                }

                #[tokio::test]
                async fn config_versions() {
                    config_versions_append_in_order_and_refuse_a_lost_update($make).await;
                }
            }
        )*
    };
}

// Each backend opened the way the binary opens it: through `Location`.
backends! {
    memory => Location::Memory.open().await.unwrap(),
    sqlite => Location::Sqlite(Path::new(":memory:")).open().await.unwrap(),
    postgres => match fresh_database().await {
        Some(url) => Location::Postgres(&url).open().await.unwrap(),
        None => return,
    },
}

/// A PostgreSQL store on a database of its own, on the test server; `None`
/// (with a note) outside the test command, a failure under CI.
async fn fresh_postgres() -> Option<PostgresStore> {
    Some(PostgresStore::connect(&fresh_database().await?).await.unwrap())
}

/// The URL of a new, empty database on the test server.
async fn fresh_database() -> Option<String> {
    let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") else {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
        eprintln!(
            "SWITCHYARD_TEST_POSTGRES_URL is not set: PostgreSQL cases skipped (scripts/test.sh starts a server)"
        );
        return None;
    };
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!("conformance_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}

#[tokio::test]
async fn a_postgres_change_reaches_every_instance_and_migrations_run_once() {
    let Some(url) = fresh_database().await else { return };
    let first = PostgresStore::connect(&url).await.unwrap();
    // A second instance on the same database: the schema is already there.
    let second = PostgresStore::connect(&url).await.unwrap();
    let mut heard = second.subscribe();
    // Give the listening connection a moment to subscribe.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stores = Stores::shared(first);
    let mut record = key(3);
    stores.keys.create_key(record.clone(), None).await.unwrap();
    record.revoked_at = Some(2_000);
    stores.keys.update_key(record.clone()).await.unwrap();
    stores
        .groups
        .put_group(GroupRecord {
            name: "g".into(),
            parent: None,
            budget: None,
            limits: Limits::default(),
            markup: None,
            rate_card: Default::default(),
            from_config: false,
            retention: None,
            end_users: None,
            created_at: 1,
        })
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let change = tokio::time::timeout(std::time::Duration::from_secs(1), heard.recv())
            .await
            .expect("within a second")
            .unwrap();
        seen.push(change);
    }
    assert_eq!(seen, [Change::Key(record.id.clone()), Change::Key(record.id.clone()), Change::Groups]);
    // And the other instance reads the revoked record.
    assert_eq!(second.get_key(&record.id).await.unwrap().unwrap().revoked_at, Some(2_000));
}

#[tokio::test]
async fn sqlite_keeps_everything_across_a_reopen() {
    let dir = std::env::temp_dir().join(format!("switchyard-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("reopen.db");
    let _ = std::fs::remove_file(&path);
    {
        let stores = Stores::of(switchyard_store::sqlite::SqliteStore::open(&path).unwrap());
        stores.keys.create_key(key(7), None).await.unwrap();
        stores.ledger.append(vec![row(1, Some("key_0007"), None, "gpt", 5, 5)].into()).await.unwrap();
    }
    let stores = Stores::of(switchyard_store::sqlite::SqliteStore::open(&path).unwrap());
    assert_eq!(stores.keys.get_key("key_0007").await.unwrap(), Some(key(7)));
    assert_eq!(stores.ledger.count().await.unwrap(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn postgres_stores_a_batch_written_again_once() {
    // A commit whose acknowledgement was lost is retried by the ledger
    // writer: the rows' entries make the second write a no-op.
    let Some(store) = fresh_postgres().await else { return };
    let stores = Stores::shared(store);
    let batch = vec![row(1, Some("k"), None, "gpt", 5, 5), row(2, Some("k"), None, "gpt", 5, 5)];
    stores.ledger.append(batch.clone().into()).await.unwrap();
    stores.ledger.append(batch.into()).await.unwrap();
    assert_eq!(stores.ledger.count().await.unwrap(), 2);
    // Nor does the hourly rollup count them twice.
    let whole_hours =
        TotalsQuery { by: SpendBy::Key, from_ms: 0, to_ms: 3_600_000, key: None, groups: None, end_user: None };
    let totals = stores.ledger.totals(whole_hours).await.unwrap();
    assert_eq!(totals.iter().map(|t| t.requests).sum::<u64>(), 2);
}

#[tokio::test]
async fn postgres_keeps_the_hourly_rollup_for_every_writer() {
    // An instance of an older version, still writing during a rolling
    // upgrade, inserts rows without knowing the rollup: the database's
    // trigger counts them all the same.
    let Some(url) = fresh_database().await else { return };
    let store = PostgresStore::connect(&url).await.unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "INSERT INTO ledger (entry, at_ms, request_id, key_id, grp, pool, lane, model, input_tokens, output_tokens, \
             cache_read_tokens, cache_write_tokens, status, latency_ms, ttfb_ms, failovers, estimated) \
             VALUES (77, 7200001, 'old', 'k', NULL, 'p', 'gpt', 'wire-gpt', 40, 4, 0, 0, 200, 3, NULL, 0, false)",
        )
        .await
        .unwrap();
    let stores = Stores::shared(store);
    stores.ledger.append(vec![row(7_200_002, Some("k"), None, "gpt", 2, 2)].into()).await.unwrap();
    let whole_hours =
        TotalsQuery { by: SpendBy::Key, from_ms: 0, to_ms: 3 * 3_600_000, key: None, groups: None, end_user: None };
    let totals = stores.ledger.totals(whole_hours).await.unwrap();
    assert_eq!(totals.iter().map(|t| (t.requests, t.tokens.input)).collect::<Vec<_>>(), [(2, 42)]);
}

#[tokio::test]
async fn the_storage_fields_choose_the_backend_and_its_spool() {
    let dir = std::env::temp_dir().join(format!("switchyard-location-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("node.db");
    let spool = dir.join("spool.db");
    let url = "postgres://switchyard@127.0.0.1:1/none";
    // A URL wins over a file; a file over memory.
    assert_eq!(Location::of(Some(url), Some(&file)), Location::Postgres(url));
    assert_eq!(Location::of(None, Some(&file)), Location::Sqlite(&file));
    assert_eq!(Location::of(None, None), Location::Memory);
    // Only a fleet's database has a spool: a local file or memory is never away.
    assert!(Location::Memory.spool(Some(&spool)).unwrap().is_none());
    assert!(Location::Sqlite(&file).spool(Some(&spool)).unwrap().is_none());
    assert!(!spool.exists(), "no spool file made for a local store");
    assert!(Location::Postgres(url).spool(None).unwrap().is_none());
    assert!(Location::Postgres(url).spool(Some(&spool)).unwrap().is_some());
    assert!(spool.exists());
    // Memory announces nothing and keeps no pins; a file keeps pins and its
    // records across a reopen.
    let memory = Location::Memory.open().await.unwrap();
    assert!(memory.changes.is_none() && memory.pins.is_none());
    {
        let node = Location::Sqlite(&file).open().await.unwrap();
        assert!(node.changes.is_none() && node.pins.is_some());
        node.keys.create_key(key(9), None).await.unwrap();
    }
    let node = Location::Sqlite(&file).open().await.unwrap();
    assert_eq!(node.keys.get_key("key_0009").await.unwrap(), Some(key(9)));
    // A database that is not there is an error, not a fallback to memory.
    assert!(matches!(Location::Postgres(url).open().await, Err(StoreError::Unavailable(_))));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_postgres_location_announces_changes() {
    let Some(url) = fresh_database().await else { return };
    let fleet = Location::Postgres(&url).open().await.unwrap();
    assert!(fleet.changes.is_some() && fleet.pins.is_none());
}
