//! What admission does with a caller's body, driven end to end with no
//! I/O: the members it reads (`Codec::metered`), the prompt estimate, the
//! bounded worst case, the arguments a fleet's scripts get, and one
//! node's counters admitting and settling it. Shared by the property test
//! (`tests/admission_numbers.rs`, in CI) and the fuzz target
//! (`fuzz/fuzz_targets/admission_numbers.rs`, in `scripts/fuzz.sh`): each
//! panics when an invariant breaks.

use std::sync::Arc;

use switchyard_governance::estimate::{input_tokens, worst_case, MAX_REQUEST_COST, MAX_REQUEST_TOKENS};
use switchyard_governance::fleet::SCRIPT_MAX;
use switchyard_governance::{Actual, BucketId, BucketSpec, Budget, Governor, Limits, Price, Window};
use switchyard_protocol::codec;
use switchyard_protocol::ir::Protocol;

/// Prices from free to absurd: every estimate must stay bounded at each.
const PRICES: [Price; 3] = [
    Price {
        input_utok: 0.0,
        output_utok: 0.0,
        cache_read_utok: 0.0,
        cache_write_utok: 0.0,
        per_request_usd: 0.0,
        per_unit_usd: 0.0,
        ..Price::ZERO
    },
    Price {
        input_utok: 3.0,
        output_utok: 15.0,
        cache_read_utok: 0.3,
        cache_write_utok: 3.75,
        per_request_usd: 0.01,
        per_unit_usd: 0.002,
        ..Price::ZERO
    },
    Price {
        input_utok: 1e12,
        output_utok: 1e300,
        cache_read_utok: 0.0,
        cache_write_utok: 0.0,
        per_request_usd: 1e300,
        per_unit_usd: 1e300,
        ..Price::ZERO
    },
];

/// A body naming each member admission reads, in `protocol`'s own place,
/// with the raw JSON number texts given (`max` for the output cap, `n` for
/// the replies asked for).
pub fn body_with_numbers(protocol: Protocol, max: &str, n: &str) -> String {
    match protocol {
        Protocol::OpenAi => format!(
            r#"{{"model":"m","max_tokens":{max},"max_completion_tokens":{max},"n":{n},"messages":[{{"role":"user","content":"hi"}}]}}"#
        ),
        Protocol::Responses => format!(r#"{{"model":"m","max_output_tokens":{max},"input":"hi"}}"#),
        Protocol::Anthropic => {
            format!(r#"{{"model":"m","max_tokens":{max},"messages":[{{"role":"user","content":"hi"}}]}}"#)
        }
        Protocol::Gemini => format!(
            r#"{{"contents":[{{"role":"user","parts":[{{"text":"hi"}}]}}],"generationConfig":{{"maxOutputTokens":{max},"candidateCount":{n}}}}}"#
        ),
        Protocol::Cohere => {
            format!(r#"{{"model":"m","max_tokens":{max},"messages":[{{"role":"user","content":"hi"}}]}}"#)
        }
        Protocol::Bedrock => format!(
            r#"{{"messages":[{{"role":"user","content":[{{"text":"hi"}}]}}],"inferenceConfig":{{"maxTokens":{max}}}}}"#
        ),
    }
}

/// Runs `body` (a `protocol` request) through admission's arithmetic and
/// checks that every figure stays within its bound, that no script ever
/// gets a number it cannot add or write back, and that a node's counters
/// give every reservation back.
pub fn drive(protocol: Protocol, body: &[u8], actual: (u64, u64)) {
    let codec = codec(protocol);
    let Ok(metered) = codec.metered(body) else { return };
    assert!(metered.choices >= 1);
    let input = input_tokens(body, codec.media_members());
    let now_ms = 1_796_067_065_000;
    for price in &PRICES {
        let estimate = worst_case(input, metered.max_tokens, 4096, metered.choices, price);
        assert!(estimate.cost <= MAX_REQUEST_COST, "{estimate:?}");
        assert!(estimate.tokens <= 2 * MAX_REQUEST_TOKENS, "{estimate:?}");
        // A bucket the governor does not know, and one at every extreme.
        let mut huge = Governor::new();
        let wide = BucketId::Key(Arc::from("wide"));
        let spec = BucketSpec {
            budget: Some(Budget::new(1e300, Window::Month)),
            limits: Limits {
                rpm: Some(u64::MAX),
                tpm: Some(u64::MAX),
                concurrent: Some(u64::MAX),
                rps: Some(u64::MAX),
                tpd: Some(u64::MAX),
                usd_per_month: Some(1e300),
                ..Limits::default()
            },
        };
        huge.set_spec(wide.clone(), spec, 0);
        huge.seed_spent(&wide, 0, u64::MAX);
        let buckets = [BucketId::Key(Arc::from("unknown")), wide];
        let args = huge
            .fleet_admit_args(&buckets, estimate, u64::MAX, now_ms, true)
            .into_iter()
            .chain(huge.fleet_settle_args(&buckets, estimate, actual.0, actual.1, true, u64::MAX, now_ms));
        for arg in args {
            assert!((-SCRIPT_MAX..=SCRIPT_MAX).contains(&arg), "{arg} reaches a script");
        }
        let mut governor = Governor::new();
        let key = BucketId::Key(Arc::from("k"));
        let spec = BucketSpec {
            budget: Some(Budget::new(1_000.0, Window::Day)),
            limits: Limits { rpm: Some(1_000), tpm: Some(u64::MAX / 2), concurrent: Some(10), ..Limits::default() },
        };
        governor.set_spec(key.clone(), spec, 0);
        let chain: Arc<[BucketId]> = Arc::from(vec![key.clone()]);
        if let Ok(reservation) = governor.admit(&chain, estimate, now_ms) {
            governor.settle(&reservation, Actual { tokens: actual.1, cost: actual.0 }, now_ms);
        }
        let view = governor.view(&key, now_ms).expect("the bucket exists");
        assert_eq!((view.reserved, view.in_flight), (0, 0), "{view:?}");
        assert!(view.spent <= MAX_REQUEST_COST, "{view:?}");
    }
}
