//! Admission as the request path pays for it: hash the presented key and
//! find it, estimate the prompt of a ~2 KB chat body, admit on a chain of
//! three buckets (key, group, parent) with a budget and rate limits on
//! each, then settle. The goal is under 20 µs at p99; besides criterion's
//! mean, a direct run over 200,000 admissions reports p50/p99/p999.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use switchyard_governance::key::new_secret;
use switchyard_governance::money::{Price, Tokens};
use switchyard_governance::{
    estimate, Actual, BucketId, BucketSpec, Budget, Estimate, Governor, KeyHash, Limits, Window,
};

fn chat_body() -> Vec<u8> {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(8);
    serde_json::json!({
        "model": "gpt-4o-mini", "max_tokens": 512,
        "messages": [
            {"role": "system", "content": format!("You are a helpful assistant. {filler}")},
            {"role": "user", "content": format!("Summarise this: {filler}")},
            {"role": "assistant", "content": format!("Here is a summary. {filler}")},
            {"role": "user", "content": format!("Now the weather in Paris. {filler}")},
        ],
    })
    .to_string()
    .into_bytes()
}

struct Fixture {
    keys: HashMap<KeyHash, Arc<[BucketId]>>,
    secret: String,
    governor: Governor,
    body: Vec<u8>,
    price: Price,
}

fn fixture() -> Fixture {
    let mut governor = Governor::new();
    let limits =
        Limits { rpm: Some(u64::MAX / 4), tpm: Some(u64::MAX / 4), concurrent: Some(1_000_000), ..Limits::default() };
    let spec = |window| BucketSpec { budget: Some(Budget::new(1e9, window)), limits: limits.clone() };
    let chain: Arc<[BucketId]> = Arc::from([
        BucketId::Key(Arc::from("key_1")),
        BucketId::Group(Arc::from("team")),
        BucketId::Group(Arc::from("org")),
    ]);
    governor.set_spec(chain[0].clone(), spec(Window::Day), 0);
    governor.set_spec(chain[1].clone(), spec(Window::Month), 0);
    governor.set_spec(chain[2].clone(), spec(Window::Total), 0);
    let mut keys = HashMap::new();
    let secret = new_secret(&[9; 32]);
    for n in 0..10_000u32 {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&n.to_le_bytes());
        keys.insert(KeyHash::of(&new_secret(&bytes)), chain.clone());
    }
    keys.insert(KeyHash::of(&secret), chain);
    Fixture {
        keys,
        secret,
        governor,
        body: chat_body(),
        price: Price { input_utok: 0.15, output_utok: 0.6, ..Price::default() },
    }
}

/// One admission and its settlement, as the gateway does them.
fn admit_and_settle(f: &mut Fixture, now_ms: u64) {
    let hash = KeyHash::of(&f.secret);
    let chain = f.keys.get(&hash).cloned().unwrap_or_else(|| Arc::from([]));
    let tokens = Tokens { input: estimate::input_tokens(&f.body, &["url", "data"]), output: 512, ..Tokens::default() };
    let reservation =
        f.governor.admit(&chain, Estimate { tokens: tokens.total(), cost: f.price.cost(&tokens) }, now_ms);
    if let Ok(reservation) = reservation {
        f.governor.settle(&reservation, Actual { tokens: 300, cost: 100 }, now_ms);
    }
}

fn bench_admission(c: &mut Criterion) {
    let mut f = fixture();
    let mut now = 1_796_067_065_000u64;
    c.bench_function("admission_key_estimate_admit_settle_3_buckets", |b| {
        b.iter(|| {
            now += 1;
            admit_and_settle(&mut f, now);
        })
    });

    // Percentiles of single admissions (criterion reports means).
    let mut samples: Vec<u64> = Vec::with_capacity(200_000);
    for _ in 0..200_000 {
        now += 1;
        let started = Instant::now();
        admit_and_settle(&mut f, now);
        samples.push(started.elapsed().as_nanos() as u64);
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    eprintln!("admission over 200000 runs: p50 {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs", at(0.5), at(0.99), at(0.999));
}

criterion_group!(benches, bench_admission);
criterion_main!(benches);
