//! The SSRF guard for URLs the gateway calls on an operator's behalf (hook
//! sidecars, log sinks): checked once at boot, and every resolved address
//! checked again when connecting, so DNS cannot point a call inside the
//! network. Ranges come from the IANA special-purpose registries, matched
//! with `ipnet`; ranges that embed an IPv4 address a translator would reach
//! (NAT64, 6to4, Teredo, IPv4-compatible IPv6) are refused whole.

use std::net::IpAddr;
use std::sync::LazyLock;

use ipnet::IpNet;

/// Networks an outbound call may never reach, except loopback for a URL
/// that names loopback itself.
static REFUSED: LazyLock<Vec<IpNet>> = LazyLock::new(|| RANGES.iter().filter_map(|net| net.parse().ok()).collect());

const RANGES: [&str; 27] = [
    // IPv4: this network, private, CGNAT, loopback, link-local (cloud
    // metadata), IETF assignments, documentation, 6to4 relays,
    // benchmarking, multicast, reserved and broadcast.
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    // IPv6: unspecified, loopback and IPv4-compatible (::/96), NAT64
    // (well-known and local-use), discard, IETF assignments (Teredo
    // among them), documentation, 6to4, unique-local, link-local,
    // site-local, multicast.
    "::/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/23",
    "2001:db8::/32",
    "3fff::/20",
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

/// True for addresses an outbound call may reach remotely: not private,
/// loopback, link-local, CGNAT, metadata, documentation, benchmarking,
/// multicast, reserved, nor an IPv6 form that embeds one of those.
pub fn is_public(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    };
    !REFUSED.iter().any(|net| net.contains(&ip))
}

/// The boot-time check of an outbound URL: http only to loopback; https to
/// a host name (its addresses are checked again when resolved) or a public
/// literal address.
pub fn check_outbound_url(url: &str) -> Result<(), String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("`{url}` is not an absolute url"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    if host.is_empty() || authority.contains('@') {
        return Err(format!("`{url}` has no plain host"));
    }
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match scheme {
        "http" if loopback => Ok(()),
        "http" => Err(format!("`{url}` is plain http to a remote host")),
        "https" => match host.parse::<IpAddr>() {
            Ok(ip) if !loopback && !is_public(ip) => {
                Err(format!("`{host}` is a private, link-local, metadata or otherwise internal address"))
            }
            _ => Ok(()),
        },
        other => Err(format!("`{other}` is not http or https")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refused_range_parses() {
        assert_eq!(REFUSED.len(), RANGES.len());
    }

    #[test]
    fn outbound_urls() {
        for ok in [
            "http://127.0.0.1:8731/route",
            "http://localhost:9/x",
            "http://[::1]:80/",
            "https://router.example.com/rank",
            "https://8.8.8.8/",
            "https://[2606:4700:4700::1111]/",
        ] {
            assert!(check_outbound_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://router.example.com/rank",
            "https://10.0.0.5/",
            "https://192.168.1.1/",
            "https://172.16.0.1/",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/",
            "https://[fd00:ec2::254]/",
            "https://[fe80::1]/",
            "ftp://127.0.0.1/",
            "https://user@host/",
            "not a url",
        ] {
            assert!(check_outbound_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_that_embed_or_reserve_addresses_are_refused() {
        for bad in [
            "64:ff9b::a9fe:a9fe",  // NAT64 of 169.254.169.254
            "64:ff9b:1::a00:1",    // local-use NAT64
            "2002:a9fe:a9fe::1",   // 6to4 of 169.254.169.254
            "::a9fe:a9fe",         // IPv4-compatible 169.254.169.254
            "::ffff:10.0.0.1",     // IPv4-mapped private
            "2001:0:4136:e378::1", // Teredo
            "198.18.0.1",          // benchmarking
            "198.19.255.254",
            "192.0.0.170", // IETF assignments (NAT64 discovery)
            "0.0.0.0",
            "255.255.255.255",
        ] {
            assert!(!is_public(bad.parse().unwrap()), "{bad}");
        }
        for good in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "198.20.0.1"] {
            assert!(is_public(good.parse().unwrap()), "{good}");
        }
    }
}
