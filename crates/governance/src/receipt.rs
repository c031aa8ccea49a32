//! Receipts: what a settled request billed, made provable afterwards. Each
//! receipt names the one before it by its hash (a chain), and seals —
//! signatures with Ed25519 under a key drawn from the operator's secret —
//! vouch for the chain's head as it grows, so a receipt changed, removed
//! or moved is found by [`verify`] offline, and a chain rewritten from a
//! receipt on (every hash after it recomputed) no longer matches the seal
//! that covers it.
//!
//! A chain file is JSON lines of two kinds:
//! `{"receipt":{…},"hash":"<hex hash of the receipt's bytes>"}` and, after
//! some receipts, `{"seal":{"chain":…,"seq":N,"hash":"<link N's hash>"},"sig":"<hex Ed25519 of the seal's bytes>","signer":"<hex public key>"}`.
//! Hashes and signatures are over the bytes as written, so a verifier needs
//! no canonical form. A seal vouches for every receipt up to it (each hash
//! commits to all before it): one signature covers many receipts, which
//! keeps a receipt's cost to one hash. The hash is the receipt format's:
//! BLAKE3 from format 2 on, SHA-256 in format 1 (which [`verify`] still
//! reads, so a chain begun by an older gateway goes on verifying). Both
//! are 256-bit hashes; BLAKE3 costs a fifth of SHA-256 where the CPU has
//! no SHA instructions. Pure: no I/O, no clock.

use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::money::Tokens;

/// The `prev` of a chain's first receipt.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The format this module writes.
pub const VERSION: u8 = 2;

/// The hash of a receipt's bytes in format `v` (`None`: a format this
/// module does not know).
fn link_hash(v: u8, bytes: &[u8]) -> Option<[u8; 32]> {
    match v {
        1 => Some(Sha256::digest(bytes).into()),
        2 => Some(*blake3::hash(bytes).as_bytes()),
        _ => None,
    }
}

/// One settled request, as its receipt says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The format (1).
    pub v: u8,
    /// The chain it belongs to (one per instance).
    pub chain: String,
    /// Its place in the chain, from 1.
    pub seq: u64,
    /// The hash of the receipt before it ([`GENESIS`] for the first).
    pub prev: String,
    /// When the request settled (Unix ms).
    pub at_ms: i64,
    /// Its ledger entry.
    pub entry: i64,
    /// The gateway's request id.
    pub request_id: String,
    /// The pool the caller named.
    pub pool: String,
    /// The lane that served.
    pub lane: String,
    /// The model the lane was asked for.
    pub model: String,
    /// The model the upstream says served it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_model: Option<String>,
    /// The upstream's id of the request (its request-id header, else its
    /// reply's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_id: Option<String>,
    /// What it billed, by kind.
    pub tokens: Tokens,
    /// Its price at the lane's rate card (nano-USD).
    pub cost_nano: u64,
    /// The status the caller got.
    pub status: u16,
    /// Why the tokens are the gateway's estimate, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated: Option<String>,
}

/// What a seal vouches for: the chain's head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// The chain.
    pub chain: String,
    /// The last link it covers.
    pub seq: u64,
    /// That link's hash.
    pub hash: String,
}

/// A line of a chain file: a receipt or a seal.
#[derive(Debug, Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    receipt: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    hash: Option<String>,
    #[serde(borrow, default)]
    seal: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    sig: Option<String>,
    #[serde(default)]
    signer: Option<String>,
}

/// `receipt` as a chain line (no newline), and its hash (the next
/// receipt's `prev`).
pub fn line(receipt: &Receipt) -> (String, String) {
    let mut out = Vec::with_capacity(640);
    let hash = write_line(&mut out, receipt);
    (String::from_utf8(out).unwrap_or_default(), hash)
}

/// Appends `receipt` as a chain line (no newline) to `out` and returns its
/// hash: the receipt is written once, straight into the batch, and hashed
/// where it lies.
pub fn write_line(out: &mut Vec<u8>, receipt: &Receipt) -> String {
    out.extend_from_slice(br#"{"receipt":"#);
    let start = out.len();
    write_receipt(out, receipt);
    let digest = link_hash(receipt.v, &out[start..]).unwrap_or([0; 32]);
    let hash = hex(&digest);
    out.extend_from_slice(br#","hash":""#);
    out.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(br#""}"#);
    hash
}

/// `receipt` as JSON, written by hand: the writer's thread writes one per
/// settled request, and serde's general string escaping cost more than the
/// receipt's hash. Strings that need no escape (ids, names) are copied as
/// they are, any other goes through serde_json; token kinds that are zero
/// are left out (they read back as zero). The proptest below holds it to
/// what serde reads back.
fn write_receipt(out: &mut Vec<u8>, r: &Receipt) {
    let mut ints = itoa::Buffer::new();
    let mut int = |out: &mut Vec<u8>, name: &[u8], value: u64| {
        out.extend_from_slice(name);
        out.extend_from_slice(ints.format(value).as_bytes());
    };
    int(out, br#"{"v":"#, u64::from(r.v));
    string(out, br#","chain":"#, &r.chain);
    int(out, br#","seq":"#, r.seq);
    string(out, br#","prev":"#, &r.prev);
    let mut signed = itoa::Buffer::new();
    out.extend_from_slice(br#","at_ms":"#);
    out.extend_from_slice(signed.format(r.at_ms).as_bytes());
    out.extend_from_slice(br#","entry":"#);
    out.extend_from_slice(signed.format(r.entry).as_bytes());
    string(out, br#","request_id":"#, &r.request_id);
    string(out, br#","pool":"#, &r.pool);
    string(out, br#","lane":"#, &r.lane);
    string(out, br#","model":"#, &r.model);
    if let Some(model) = &r.upstream_model {
        string(out, br#","upstream_model":"#, model);
    }
    if let Some(id) = &r.upstream_id {
        string(out, br#","upstream_id":"#, id);
    }
    out.extend_from_slice(br#","tokens":{"#);
    let t = &r.tokens;
    let kinds: [(&[u8], u64); 12] = [
        (br#""input":"#, t.input),
        (br#""output":"#, t.output),
        (br#""cache_read":"#, t.cache_read),
        (br#""cache_write":"#, t.cache_write),
        (br#""cache_write_1h":"#, t.cache_write_1h),
        (br#""reasoning":"#, t.reasoning),
        (br#""audio_input":"#, t.audio_input),
        (br#""audio_output":"#, t.audio_output),
        (br#""image_input":"#, t.image_input),
        (br#""image_output":"#, t.image_output),
        (br#""units":"#, t.units),
        (br#""requests":"#, t.requests),
    ];
    let mut first = true;
    for (name, value) in kinds {
        if value != 0 {
            if !first {
                out.push(b',');
            }
            first = false;
            int(out, name, value);
        }
    }
    out.push(b'}');
    int(out, br#","cost_nano":"#, r.cost_nano);
    int(out, br#","status":"#, u64::from(r.status));
    if let Some(why) = &r.estimated {
        string(out, br#","estimated":"#, why);
    }
    out.push(b'}');
}

/// `name` then `value` as a JSON string.
fn string(out: &mut Vec<u8>, name: &[u8], value: &str) {
    out.extend_from_slice(name);
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, value).is_err() {
        // A `str` always serialises; an empty string keeps the line JSON.
        out.extend_from_slice(b"\"\"");
    }
}

/// Signs seals.
pub struct Signer {
    pair: Ed25519KeyPair,
    public: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("public", &self.public).finish_non_exhaustive()
    }
}

impl Signer {
    /// The signer drawn from the operator's secret (any text: the Ed25519
    /// seed is its SHA-256 under this format's label).
    pub fn from_secret(secret: &str) -> Option<Signer> {
        let mut hasher = Sha256::new();
        hasher.update(b"switchyard receipts v1\0");
        hasher.update(secret.as_bytes());
        let seed = hasher.finalize();
        let pair = Ed25519KeyPair::from_seed_unchecked(seed.as_slice()).ok()?;
        let public = hex(pair.public_key().as_ref());
        Some(Signer { pair, public })
    }

    /// Its public key (hex): what a verifier trusts.
    pub fn public_key(&self) -> &str {
        &self.public
    }

    /// A seal of `chain` up to link `head` as a chain line (no newline).
    pub fn seal(&self, chain: &str, head: &Head) -> String {
        let seal = Seal { chain: chain.to_owned(), seq: head.seq, hash: head.hash.clone() };
        let body = serde_json::to_string(&seal).unwrap_or_default();
        let sig = hex(self.pair.sign(body.as_bytes()).as_ref());
        format!(r#"{{"seal":{body},"sig":"{sig}","signer":"{}"}}"#, self.public)
    }
}

/// Where a chain stands (the head a writer continues from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The last receipt's place.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

impl Head {
    /// A chain with nothing in it yet.
    pub fn genesis() -> Head {
        Head { seq: 0, hash: GENESIS.to_owned() }
    }

    /// The head a chain line leaves: a receipt's, or the one a seal
    /// covers (`None`: not a chain line).
    pub fn of_line(line: &str) -> Option<Head> {
        let line: Line<'_> = serde_json::from_str(line).ok()?;
        if let (Some(receipt), Some(hash)) = (line.receipt, line.hash) {
            let receipt: Receipt = serde_json::from_str(receipt.get()).ok()?;
            return Some(Head { seq: receipt.seq, hash });
        }
        let seal: Seal = serde_json::from_str(line.seal?.get()).ok()?;
        Some(Head { seq: seal.seq, hash: seal.hash })
    }
}

/// What a whole chain verified to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Receipts checked.
    pub links: u64,
    /// The last link a seal covers (links after it are not sealed yet).
    pub sealed: u64,
    /// The signer's public key (hex).
    pub signer: Option<String>,
    /// The chain's name.
    pub chain: Option<String>,
}

/// The first broken link of a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} (link {link}): {why}")]
pub struct Broken {
    /// The line of the file (from 1).
    pub line: usize,
    /// The link's place in the chain (the one expected there when the
    /// line's own cannot be read; a seal's first uncovered link).
    pub link: u64,
    /// What is wrong.
    pub why: String,
}

/// Checks a chain's lines in order: each receipt's hash is its bytes',
/// and it follows the one before it (its place one on, its `prev` that
/// one's hash; the first at place 1 after [`GENESIS`]); each seal names
/// the chain's head where it stands and is signed by the trusted key
/// (`trusted`, or else the first seal's signer). Empty lines are skipped.
/// The first broken link is named.
pub fn verify<'a>(lines: impl IntoIterator<Item = &'a str>, trusted: Option<&str>) -> Result<Verified, Broken> {
    let mut head = Head::genesis();
    let mut signer: Option<String> = trusted.map(str::to_ascii_lowercase);
    let mut chain: Option<String> = None;
    let (mut links, mut sealed) = (0, 0);
    for (at, text) in lines.into_iter().enumerate() {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let line_no = at + 1;
        let expected = head.seq + 1;
        let broken = |link: u64, why: String| Broken { line: line_no, link, why };
        let line: Line<'_> =
            serde_json::from_str(text).map_err(|err| broken(expected, format!("not a chain line: {err}")))?;
        let mut same_chain = |name: &str, link: u64| match &chain {
            Some(ours) if ours != name => Err(broken(link, format!("it is of chain `{name}`, not `{ours}`"))),
            Some(_) => Ok(()),
            None => {
                chain = Some(name.to_owned());
                Ok(())
            }
        };
        if let (Some(raw), Some(hash)) = (line.receipt, &line.hash) {
            let receipt: Receipt = serde_json::from_str(raw.get())
                .map_err(|err| broken(expected, format!("its receipt cannot be read: {err}")))?;
            let link = receipt.seq;
            let Some(digest) = link_hash(receipt.v, raw.get().as_bytes()) else {
                return Err(broken(link, format!("its format {} is not one this verifier knows", receipt.v)));
            };
            if hex(&digest) != *hash {
                return Err(broken(link, "its contents do not match its hash: the receipt was changed".into()));
            }
            same_chain(&receipt.chain, link)?;
            if link != expected {
                let why = match (link > expected, expected) {
                    (true, 1) => format!("the chain starts at link {link}: links 1 to {} are missing", link - 1),
                    (true, _) => format!(
                        "link {expected} should follow link {} but link {link} does: link {expected} was removed or moved",
                        expected - 1
                    ),
                    (false, _) => {
                        format!("link {link} comes after link {}: links are out of order or repeated", head.seq)
                    }
                };
                return Err(broken(expected, why));
            }
            if receipt.prev != head.hash {
                return Err(broken(
                    link,
                    format!("its `prev` is not link {}'s hash: the chain was rewritten", head.seq),
                ));
            }
            head = Head { seq: link, hash: hash.clone() };
            links += 1;
            continue;
        }
        let (Some(raw), Some(sig), Some(by)) = (line.seal, &line.sig, &line.signer) else {
            return Err(broken(expected, "neither a receipt nor a seal".into()));
        };
        let seal: Seal = serde_json::from_str(raw.get())
            .map_err(|err| broken(expected, format!("its seal cannot be read: {err}")))?;
        same_chain(&seal.chain, sealed + 1)?;
        let key = signer.get_or_insert_with(|| by.to_ascii_lowercase());
        if by.to_ascii_lowercase() != *key {
            return Err(broken(sealed + 1, format!("a seal signed by {by}, not by the trusted key {key}")));
        }
        let (Some(public), Some(sig)) = (unhex(key), unhex(sig)) else {
            return Err(broken(sealed + 1, "a seal whose signer or signature is not hex".into()));
        };
        if UnparsedPublicKey::new(&ED25519, &public).verify(raw.get().as_bytes(), &sig).is_err() {
            return Err(broken(sealed + 1, "a seal whose signature does not verify: it was changed or forged".into()));
        }
        if seal.seq != head.seq || seal.hash != head.hash {
            let why = match seal.seq == head.seq {
                true => format!(
                    "the seal of links {} to {} does not match them: a link among them was rewritten",
                    sealed + 1,
                    seal.seq
                ),
                false => format!("a seal of link {} where the chain stands at link {}", seal.seq, head.seq),
            };
            return Err(broken(sealed + 1, why));
        }
        sealed = seal.seq;
    }
    Ok(Verified { links, sealed, signer, chain })
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| text.get(at..at + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(seq: u64, prev: &str) -> Receipt {
        Receipt {
            v: VERSION,
            chain: "gw-1".into(),
            seq,
            prev: prev.into(),
            at_ms: 1_765_000_000_000 + seq as i64,
            entry: seq as i64,
            request_id: format!("req-{seq}"),
            pool: "chat".into(),
            lane: "openai".into(),
            model: "gpt-4o".into(),
            upstream_model: Some("gpt-4o-2024-08-06".into()),
            upstream_id: Some(format!("req_{seq}")),
            tokens: Tokens { input: 100 + seq, output: 20, requests: 1, ..Tokens::default() },
            cost_nano: 450_000,
            status: 200,
            estimated: None,
        }
    }

    /// A chain of `n` receipts, sealed after every `seal_every` and at its end.
    fn chain_of(signer: &Signer, n: u64, seal_every: u64, edit: impl Fn(Receipt) -> Receipt) -> Vec<String> {
        let mut head = Head::genesis();
        let mut lines = Vec::new();
        for seq in 1..=n {
            let (text, hash) = line(&edit(receipt(seq, &head.hash)));
            lines.push(text);
            head = Head { seq, hash };
            if seq % seal_every == 0 || seq == n {
                lines.push(signer.seal("gw-1", &head));
            }
        }
        lines
    }

    fn chain(signer: &Signer, n: u64) -> Vec<String> {
        chain_of(signer, n, n, |r| r)
    }

    fn check(lines: &[String], trusted: Option<&str>) -> Result<Verified, Broken> {
        verify(lines.iter().map(String::as_str), trusted)
    }

    proptest::proptest! {
        /// What the hand-written receipt says is what serde reads back, for
        /// any text (quotes, escapes, control characters, any script) and
        /// any numbers.
        #[test]
        fn a_written_receipt_reads_back_the_same(
            text in proptest::collection::vec(".*", 8),
            numbers in proptest::collection::vec(proptest::num::u64::ANY, 16),
            small in proptest::collection::vec(0u64..3, 12),
            signed in (proptest::num::i64::ANY, proptest::num::i64::ANY),
            v in 1u8..=2,
            status in proptest::num::u16::ANY,
            options in proptest::collection::vec(proptest::bool::ANY, 3),
        ) {
            let pick = |at: usize| if small[at] == 0 { 0 } else { numbers[at] };
            let receipt = Receipt {
                v,
                chain: text[0].clone(),
                seq: numbers[12],
                prev: text[1].clone(),
                at_ms: signed.0,
                entry: signed.1,
                request_id: text[2].clone(),
                pool: text[3].clone(),
                lane: text[4].clone(),
                model: text[5].clone(),
                upstream_model: options[0].then(|| text[6].clone()),
                upstream_id: options[1].then(|| text[7].clone()),
                tokens: Tokens {
                    input: pick(0), output: pick(1), cache_read: pick(2), cache_write: pick(3),
                    cache_write_1h: pick(4), reasoning: pick(5), audio_input: pick(6), audio_output: pick(7),
                    image_input: pick(8), image_output: pick(9), units: pick(10), requests: pick(11),
                },
                cost_nano: numbers[13],
                status,
                estimated: options[2].then(|| text[0].clone()),
            };
            let mut out = Vec::new();
            write_receipt(&mut out, &receipt);
            let back: Receipt = serde_json::from_slice(&out).map_err(|e| {
                proptest::test_runner::TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&out)))
            })?;
            proptest::prop_assert_eq!(back, receipt);
        }
    }

    #[test]
    fn a_chain_verifies_and_names_its_signer() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let lines = chain_of(&signer, 5, 2, |r| r);
        let verified = check(&lines, Some(signer.public_key())).unwrap();
        assert_eq!((verified.links, verified.sealed), (5, 5));
        assert_eq!(verified.signer.as_deref(), Some(signer.public_key()));
        assert_eq!(verified.chain.as_deref(), Some("gw-1"));
        assert_eq!(Head::of_line(lines.last().unwrap()).unwrap().seq, 5);
        // The same secret signs as the same key.
        assert_eq!(Signer::from_secret("s3cret").unwrap().public_key(), signer.public_key());
        // Links after the last seal verify as links, not yet sealed.
        let verified = check(&lines[..lines.len() - 2], None).unwrap();
        assert_eq!((verified.links, verified.sealed), (4, 4));
    }

    #[test]
    fn changed_tokens_are_found_at_their_link() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let mut lines = chain(&signer, 5);
        lines[2] = lines[2].replace(r#""input":103"#, r#""input":13"#);
        let broken = check(&lines, None).unwrap_err();
        assert_eq!((broken.line, broken.link), (3, 3));
        assert!(broken.why.contains("changed"), "{broken}");
    }

    #[test]
    fn a_chain_rewritten_without_the_key_fails_its_seal() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let honest = chain_of(&signer, 6, 3, |r| r);
        // Links 4 to 6 rewritten with every hash recomputed, the old seals kept.
        let forged = chain_of(&signer, 6, 3, |r| if r.seq == 5 { Receipt { cost_nano: 1, ..r } } else { r });
        let mut lines: Vec<String> = honest[..4].to_vec();
        lines.extend(forged[4..7].iter().cloned());
        lines.push(honest[7].clone());
        let broken = check(&lines, Some(signer.public_key())).unwrap_err();
        assert_eq!((broken.line, broken.link), (8, 4), "{broken}");
        assert!(broken.why.contains("links 4 to 6"), "{broken}");
        // A seal forged by another key is refused.
        let mut lines = forged.clone();
        let other = Signer::from_secret("another").unwrap();
        lines[7] =
            other.seal("gw-1", &Head::of_line(&forged[6]).unwrap()).replace(other.public_key(), signer.public_key());
        let broken = check(&lines, Some(signer.public_key())).unwrap_err();
        assert!(broken.why.contains("does not verify"), "{broken}");
    }

    #[test]
    fn a_deleted_link_is_named() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let mut lines = chain(&signer, 5);
        lines.remove(2);
        let broken = check(&lines, None).unwrap_err();
        assert_eq!((broken.line, broken.link), (3, 3));
        assert!(broken.why.contains("link 3 was removed or moved"), "{broken}");
        // The first one removed.
        let mut lines = chain(&signer, 3);
        lines.remove(0);
        let broken = check(&lines, None).unwrap_err();
        assert_eq!(broken.link, 1);
        assert!(broken.why.contains("starts at link 2"), "{broken}");
    }

    #[test]
    fn a_reordered_pair_is_named() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let mut lines = chain(&signer, 5);
        lines.swap(1, 2);
        let broken = check(&lines, None).unwrap_err();
        assert_eq!((broken.line, broken.link), (2, 2));
        assert!(broken.why.contains("link 2 was removed or moved"), "{broken}");
    }

    #[test]
    fn a_chain_begun_in_format_1_goes_on_verifying_in_format_2() {
        let signer = Signer::from_secret("s3cret").unwrap();
        // Links 1 and 2 hashed with SHA-256 (format 1), 3 to 5 with BLAKE3.
        let lines = chain_of(&signer, 5, 5, |r| Receipt { v: if r.seq <= 2 { 1 } else { VERSION }, ..r });
        assert!(lines[0].contains(r#""v":1"#) && lines[2].contains(r#""v":2"#));
        let body = |line: &str| line[r#"{"receipt":"#.len()..line.rfind(r#","hash":"#).unwrap()].to_owned();
        let sha = hex(&Sha256::digest(body(&lines[0])));
        assert!(lines[0].ends_with(&format!(r#""hash":"{sha}"}}"#)), "{}", lines[0]);
        let blake = hex(blake3::hash(body(&lines[2]).as_bytes()).as_bytes());
        assert!(lines[2].ends_with(&format!(r#""hash":"{blake}"}}"#)), "{}", lines[2]);
        assert_eq!(check(&lines, Some(signer.public_key())).unwrap().links, 5);
        // A changed format-1 link is found like any other.
        let mut changed = lines.clone();
        changed[1] = changed[1].replace(r#""input":102"#, r#""input":12"#);
        assert_eq!(check(&changed, None).unwrap_err().link, 2);
        // A format this verifier does not know is named, not guessed at.
        let future = chain_of(&signer, 1, 1, |r| Receipt { v: 9, ..r });
        let broken = check(&future, None).unwrap_err();
        assert!(broken.why.contains("format 9"), "{broken}");
    }

    #[test]
    fn another_signer_is_refused_when_a_key_is_trusted() {
        let lines = chain(&Signer::from_secret("s3cret").unwrap(), 2);
        let trusted = Signer::from_secret("mine").unwrap();
        let broken = check(&lines, Some(trusted.public_key())).unwrap_err();
        assert_eq!((broken.line, broken.link), (3, 1));
        assert!(broken.why.contains("not by the trusted key"), "{broken}");
    }
}
