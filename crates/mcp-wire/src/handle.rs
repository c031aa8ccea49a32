//! Sealed handles: what the gateway hands a caller to send back (a session
//! id, a list cursor), encrypted and authenticated with a key derived from
//! the gateway secret (ChaCha20-Poly1305), carrying what it is bound to:
//! its kind, the route it was minted on (`/mcp`, `/mcp/tickets`), its
//! caller, the server set behind that route, and when it expires. A handle
//! opens only where all of those are the same, so one replayed by another
//! key, on another route, after the servers behind it changed, after its
//! expiry, or altered by a byte, is refused, each with its own reason (the
//! advisory GHSA-mvgg-jvj2-4frq was a session id honoured across routes).
//! Pure: the nonce and the clock come from the caller.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::digest::{Context, SHA256};

/// The layout's version (its first byte, inside the seal).
const LAYOUT: u8 = 1;
/// Bytes of each bound value's digest kept.
const DIGEST: usize = 16;
/// The fixed part: layout, kind, expiry, three digests.
const FIXED: usize = 1 + 1 + 8 + 3 * DIGEST;
/// The longest handle opened (a cursor or session id is far shorter).
const MAX_HANDLE: usize = 1024;

/// What a handle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A session id (`mcp-session-id`).
    Session = 1,
    /// A list's `nextCursor`.
    Cursor = 2,
}

/// What a handle is bound to: where and for whom it was minted.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The route (`/mcp`, `/mcp/<name>`).
    pub route: &'a str,
    /// The caller (its owner: key id, and a token's subject).
    pub caller: &'a str,
    /// The servers behind the route, as [`servers_digest`] gives them.
    pub servers: &'a [u8; 32],
}

/// Why a handle is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a handle of this gateway's shape, or altered, or sealed with
    /// another secret.
    #[error("it was not minted by this gateway, or was altered")]
    Forged,
    /// A handle of another kind (a cursor sent as a session id).
    #[error("it is a handle of another kind")]
    OtherKind,
    /// Minted for another caller.
    #[error("it was minted for another caller")]
    OtherCaller,
    /// Minted on another route.
    #[error("it was minted on another MCP route")]
    OtherRoute,
    /// The servers behind the route changed since.
    #[error("the servers behind its route changed since it was minted")]
    OtherServers,
    /// Past its expiry.
    #[error("it expired")]
    Expired,
}

/// The digest of a route's server set: each server's name and where it
/// is reached, in order.
pub fn servers_digest<'a>(servers: impl IntoIterator<Item = (&'a str, &'a str)>) -> [u8; 32] {
    let mut hasher = Context::new(&SHA256);
    for (name, target) in servers {
        for part in [name, target] {
            hasher.update(&(part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
    }
    sha256_of(hasher)
}

/// The 32 bytes of a finished SHA-256. ring's, not a portable one: it
/// takes the CPU's SHA extensions, and every MCP message opens a handle
/// (about 13,000 instructions a tool call with the portable code).
fn sha256_of(hasher: Context) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(hasher.finish().as_ref());
    out
}

fn digest(label: &[u8], value: &[u8]) -> [u8; DIGEST] {
    let mut hasher = Context::new(&SHA256);
    hasher.update(label);
    hasher.update(&(value.len() as u64).to_be_bytes());
    hasher.update(value);
    let full = sha256_of(hasher);
    let mut out = [0u8; DIGEST];
    out.copy_from_slice(&full[..DIGEST]);
    out
}

/// The sealing key, from the gateway secret.
pub struct Sealer {
    key: LessSafeKey,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer for `secret` (any length; its SHA-256 under a label of
    /// its own, so the secret serves nothing else as it is). `None` only
    /// if the cipher refused a 32-byte key, which it never does.
    pub fn new(secret: &[u8]) -> Option<Sealer> {
        let mut hasher = Context::new(&SHA256);
        hasher.update(b"switchyard mcp handles v1\0");
        hasher.update(secret);
        let bytes = sha256_of(hasher);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes).ok()?;
        Some(Sealer { key: LessSafeKey::new(key) })
    }

    /// A handle of `kind` for `binding`, expiring at `expires_ms` (Unix
    /// ms), carrying `payload`; `nonce` must never repeat under one
    /// secret (96 random bits).
    pub fn seal(
        &self,
        kind: Kind,
        binding: Binding<'_>,
        expires_ms: u64,
        payload: &[u8],
        nonce: [u8; NONCE_LEN],
    ) -> String {
        let mut sealed = Vec::with_capacity(NONCE_LEN + FIXED + payload.len() + 16);
        sealed.extend_from_slice(&nonce);
        sealed.push(LAYOUT);
        sealed.push(kind as u8);
        sealed.extend_from_slice(&expires_ms.to_be_bytes());
        sealed.extend_from_slice(&digest(b"route", binding.route.as_bytes()));
        sealed.extend_from_slice(&digest(b"caller", binding.caller.as_bytes()));
        sealed.extend_from_slice(&digest(b"servers", binding.servers));
        sealed.extend_from_slice(payload);
        let mut body = sealed.split_off(NONCE_LEN);
        // Sealing in place cannot fail for a buffer this size.
        let sealed_ok = self.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut body);
        debug_assert!(sealed_ok.is_ok());
        sealed.extend_from_slice(&body);
        encode(&sealed)
    }

    /// The payload of `handle`, when it is a `kind` minted for `binding`
    /// and unexpired at `now_ms`.
    pub fn open(&self, kind: Kind, handle: &str, binding: Binding<'_>, now_ms: u64) -> Result<Vec<u8>, Refused> {
        if handle.len() > MAX_HANDLE {
            return Err(Refused::Forged);
        }
        let mut bytes = decode(handle).ok_or(Refused::Forged)?;
        if bytes.len() < NONCE_LEN + FIXED + 16 {
            return Err(Refused::Forged);
        }
        let mut body = bytes.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| Refused::Forged)?;
        let plain = self.key.open_in_place(nonce, Aad::empty(), &mut body).map_err(|_| Refused::Forged)?;
        if plain.len() < FIXED || plain[0] != LAYOUT {
            return Err(Refused::Forged);
        }
        let (fixed, payload) = plain.split_at(FIXED);
        if fixed[1] != kind as u8 {
            return Err(Refused::OtherKind);
        }
        let at = |n: usize| &fixed[10 + n * DIGEST..10 + (n + 1) * DIGEST];
        // The caller first: another key learns nothing of where the
        // handle was minted.
        if at(1) != digest(b"caller", binding.caller.as_bytes()) {
            return Err(Refused::OtherCaller);
        }
        if at(0) != digest(b"route", binding.route.as_bytes()) {
            return Err(Refused::OtherRoute);
        }
        if at(2) != digest(b"servers", binding.servers) {
            return Err(Refused::OtherServers);
        }
        let mut expires = [0u8; 8];
        expires.copy_from_slice(&fixed[2..10]);
        if now_ms >= u64::from_be_bytes(expires) {
            return Err(Refused::Expired);
        }
        Ok(payload.to_vec())
    }
}

fn encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()
}

#[cfg(test)]
#[allow(clippy::expect_used, reason = "test code: a failed expect is a failed test")]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    fn servers(url: &str) -> [u8; 32] {
        servers_digest([("tickets", url), ("files", "/usr/bin/files")])
    }

    #[test]
    fn a_handle_opens_only_where_it_was_minted_and_until_it_expires() {
        let sealer = Sealer::new(b"a gateway secret of thirty-two bytes!").expect("a sealer");
        let set = servers("http://t/mcp");
        let here = Binding { route: "/mcp", caller: "key_a", servers: &set };
        let handle = sealer.seal(Kind::Session, here, NOW + 1_000, b"session-7", [7; NONCE_LEN]);
        assert!(handle.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "a header value");
        assert_eq!(sealer.open(Kind::Session, &handle, here, NOW), Ok(b"session-7".to_vec()));
        // Another key, another route, another server set, later, another kind.
        let other_key = Binding { caller: "key_b", ..here };
        assert_eq!(sealer.open(Kind::Session, &handle, other_key, NOW), Err(Refused::OtherCaller));
        let other_route = Binding { route: "/mcp/tickets", ..here };
        assert_eq!(sealer.open(Kind::Session, &handle, other_route, NOW), Err(Refused::OtherRoute));
        let moved = servers("http://elsewhere/mcp");
        let other_servers = Binding { servers: &moved, ..here };
        assert_eq!(sealer.open(Kind::Session, &handle, other_servers, NOW), Err(Refused::OtherServers));
        assert_eq!(sealer.open(Kind::Session, &handle, here, NOW + 1_000), Err(Refused::Expired));
        assert_eq!(sealer.open(Kind::Session, &handle, here, NOW + 999), Ok(b"session-7".to_vec()));
        assert_eq!(sealer.open(Kind::Cursor, &handle, here, NOW), Err(Refused::OtherKind));
    }

    #[test]
    fn an_altered_or_foreign_handle_is_forged() {
        let sealer = Sealer::new(b"a gateway secret of thirty-two bytes!").expect("a sealer");
        let set = servers("http://t/mcp");
        let here = Binding { route: "/mcp", caller: "key_a", servers: &set };
        let handle = sealer.seal(Kind::Cursor, here, NOW + 60_000, &[0, 0, 0, 10], [1; NONCE_LEN]);
        // Every single byte flipped is caught (the nonce, the body, the tag).
        let mut raw = decode(&handle).unwrap_or_default();
        for n in 0..raw.len() {
            raw[n] ^= 0x01;
            assert_eq!(sealer.open(Kind::Cursor, &encode(&raw), here, NOW), Err(Refused::Forged), "byte {n}");
            raw[n] ^= 0x01;
        }
        assert_eq!(sealer.open(Kind::Cursor, &encode(&raw), here, NOW), Ok(vec![0, 0, 0, 10]));
        // Sealed with another gateway's secret, cut short, not base64, huge.
        let other = Sealer::new(b"another gateway's secret, 32 bytes");
        assert_eq!(other.map(|other| other.open(Kind::Cursor, &handle, here, NOW)), Some(Err(Refused::Forged)));
        assert_eq!(sealer.open(Kind::Cursor, &handle[..20], here, NOW), Err(Refused::Forged));
        assert_eq!(sealer.open(Kind::Cursor, "not a handle!", here, NOW), Err(Refused::Forged));
        assert_eq!(sealer.open(Kind::Cursor, "", here, NOW), Err(Refused::Forged));
        assert_eq!(sealer.open(Kind::Cursor, &"A".repeat(5000), here, NOW), Err(Refused::Forged));
        // Two handles of the same payload differ by their nonce.
        let again = sealer.seal(Kind::Cursor, here, NOW + 60_000, &[0, 0, 0, 10], [2; NONCE_LEN]);
        assert_ne!(handle, again);
    }

    #[test]
    fn the_server_digest_reads_names_and_targets_apart() {
        // The length prefix keeps `ab`+`c` apart from `a`+`bc`.
        assert_ne!(servers_digest([("ab", "c")]), servers_digest([("a", "bc")]));
        assert_ne!(servers_digest([("a", "x"), ("b", "y")]), servers_digest([("b", "y"), ("a", "x")]));
        assert_eq!(servers_digest([("a", "x")]), servers_digest([("a", "x")]));
    }
}
