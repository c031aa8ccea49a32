//! Receipts: what a settled request billed, made provable afterwards. Each
//! receipt names the one before it by its hash (a chain) and is signed with
//! Ed25519 under a key drawn from the operator's secret, so a receipt
//! changed, removed or moved is found by [`verify`] offline, and the
//! signer's public key shows who made the chain.
//!
//! A chain file is JSON lines, one receipt a line:
//! `{"receipt":{…},"hash":"<hex SHA-256 of the receipt's bytes>","sig":"<hex Ed25519 of the hash>","signer":"<hex public key>"}`.
//! The hash is over the receipt's bytes as written, so a verifier needs no
//! canonical form. Pure: no I/O, no clock.

use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::money::Tokens;

/// The `prev` of a chain's first receipt.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The format this module writes.
pub const VERSION: u8 = 1;

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

/// A receipt as a chain file's line holds it.
#[derive(Debug, Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    receipt: &'a serde_json::value::RawValue,
    hash: String,
    sig: String,
    signer: String,
}

/// Signs receipts and links them.
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

    /// `receipt` as a chain line (no newline), and its hash (the next
    /// receipt's `prev`).
    pub fn line(&self, receipt: &Receipt) -> (String, String) {
        let body = serde_json::to_string(receipt).unwrap_or_default();
        let digest = Sha256::digest(body.as_bytes());
        let hash = hex(digest.as_slice());
        let sig = hex(self.pair.sign(digest.as_slice()).as_ref());
        let line = format!(r#"{{"receipt":{body},"hash":"{hash}","sig":"{sig}","signer":"{}"}}"#, self.public);
        (line, hash)
    }
}

/// Where a chain line's receipt stands (the head a writer continues from).
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

    /// The head a chain line leaves (`None`: not a receipt line).
    pub fn of_line(line: &str) -> Option<Head> {
        let line: Line<'_> = serde_json::from_str(line).ok()?;
        let receipt: Receipt = serde_json::from_str(line.receipt.get()).ok()?;
        Some(Head { seq: receipt.seq, hash: line.hash })
    }
}

/// What a whole chain verified to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Receipts checked.
    pub links: u64,
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
    /// line's own cannot be read).
    pub link: u64,
    /// What is wrong.
    pub why: String,
}

/// Checks a chain's lines in order: each receipt's hash is its bytes',
/// its signature the signer's, its signer the one trusted (`trusted`, or
/// else the first line's), and it follows the one before it (its place
/// one on, its `prev` that one's hash; the first at place 1 after
/// [`GENESIS`]). Empty lines are skipped. The first broken link is named.
pub fn verify<'a>(lines: impl IntoIterator<Item = &'a str>, trusted: Option<&str>) -> Result<Verified, Broken> {
    let mut head = Head::genesis();
    let mut signer: Option<String> = trusted.map(str::to_ascii_lowercase);
    let mut chain: Option<String> = None;
    let mut links = 0;
    for (at, text) in lines.into_iter().enumerate() {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let line_no = at + 1;
        let expected = head.seq + 1;
        let broken = |link: u64, why: String| Broken { line: line_no, link, why };
        let line: Line<'_> =
            serde_json::from_str(text).map_err(|err| broken(expected, format!("not a receipt line: {err}")))?;
        let receipt: Receipt = serde_json::from_str(line.receipt.get())
            .map_err(|err| broken(expected, format!("its receipt cannot be read: {err}")))?;
        let link = receipt.seq;
        let digest = Sha256::digest(line.receipt.get().as_bytes());
        if hex(digest.as_slice()) != line.hash {
            return Err(broken(link, "its contents do not match its hash: the receipt was changed".into()));
        }
        let key = signer.get_or_insert_with(|| line.signer.to_ascii_lowercase());
        if line.signer.to_ascii_lowercase() != *key {
            return Err(broken(link, format!("signed by {}, not by the trusted key {key}", line.signer)));
        }
        let (Some(public), Some(sig)) = (unhex(key), unhex(&line.sig)) else {
            return Err(broken(link, "its signer or signature is not hex".into()));
        };
        if UnparsedPublicKey::new(&ED25519, &public).verify(digest.as_slice(), &sig).is_err() {
            return Err(broken(link, "its signature does not verify: the receipt was changed or not signed by its signer".into()));
        }
        match &chain {
            Some(name) if *name != receipt.chain => {
                return Err(broken(link, format!("it is of chain `{}`, not `{name}`", receipt.chain)));
            }
            Some(_) => {}
            None => chain = Some(receipt.chain.clone()),
        }
        if link != expected {
            let why = if link > expected {
                match expected {
                    1 => format!("the chain starts at link {link}: links 1 to {} are missing", link - 1),
                    _ => format!(
                        "link {expected} should follow link {} but link {link} does: link {expected} was removed or moved",
                        expected - 1
                    ),
                }
            } else {
                format!("link {link} comes after link {}: links are out of order or repeated", head.seq)
            };
            return Err(broken(expected, why));
        }
        if receipt.prev != head.hash {
            return Err(broken(link, format!("its `prev` is not link {}'s hash: the chain was rewritten", head.seq)));
        }
        head = Head { seq: link, hash: line.hash };
        links += 1;
    }
    Ok(Verified { links, signer, chain })
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
    if text.len() % 2 != 0 {
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

    /// A chain of `n` receipts, as lines.
    fn chain(signer: &Signer, n: u64) -> Vec<String> {
        let mut prev = GENESIS.to_owned();
        (1..=n)
            .map(|seq| {
                let (line, hash) = signer.line(&receipt(seq, &prev));
                prev = hash;
                line
            })
            .collect()
    }

    fn check(lines: &[String], trusted: Option<&str>) -> Result<Verified, Broken> {
        verify(lines.iter().map(String::as_str), trusted)
    }

    #[test]
    fn a_chain_verifies_and_names_its_signer() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let lines = chain(&signer, 5);
        let verified = check(&lines, Some(signer.public_key())).unwrap();
        assert_eq!(verified.links, 5);
        assert_eq!(verified.signer.as_deref(), Some(signer.public_key()));
        assert_eq!(verified.chain.as_deref(), Some("gw-1"));
        assert_eq!(Head::of_line(&lines[4]).unwrap().seq, 5);
        // The same secret signs as the same key.
        assert_eq!(Signer::from_secret("s3cret").unwrap().public_key(), signer.public_key());
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
    fn a_receipt_rehashed_without_the_key_fails_its_signature() {
        let signer = Signer::from_secret("s3cret").unwrap();
        let mut lines = chain(&signer, 3);
        let forged = receipt(2, &Head::of_line(&lines[0]).unwrap().hash);
        let forged = Receipt { tokens: Tokens { input: 1, ..forged.tokens }, ..forged };
        let (line, _) = Signer::from_secret("another").unwrap().line(&forged);
        // Signed by another key under the trusted one's name.
        lines[1] = line.replace(
            Signer::from_secret("another").unwrap().public_key(),
            signer.public_key(),
        );
        let broken = check(&lines, Some(signer.public_key())).unwrap_err();
        assert_eq!(broken.link, 2);
        assert!(broken.why.contains("signature"), "{broken}");
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
    fn another_signer_is_refused_when_a_key_is_trusted() {
        let lines = chain(&Signer::from_secret("s3cret").unwrap(), 2);
        let trusted = Signer::from_secret("mine").unwrap();
        let broken = check(&lines, Some(trusted.public_key())).unwrap_err();
        assert_eq!(broken.link, 1);
        assert!(broken.why.contains("not by the trusted key"), "{broken}");
    }
}
