//! Durations (`250ms`, `30s`, `5m`, `1h30m`, parsed by `humantime`) and
//! byte sizes (`32MiB`, `512KiB`, `64MB`, a plain byte count, parsed by
//! `bytesize`), each with an upper bound: a value no deployment means (a
//! timeout of centuries, a body of a terabyte) is a config error at boot,
//! never an overflow at run time.

use std::net::SocketAddr;
use std::time::Duration;

use crate::issue::Issue;

/// Longer than any timeout, cooldown or window a gateway means.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a duration written with a unit, at most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!("`{text}` has no unit"));
    }
    let duration = humantime::parse_duration(text).map_err(|err| format!("`{text}` is not a duration: {err}"))?;
    if duration > MAX_DURATION {
        return Err(format!("`{text}` is longer than a year"));
    }
    Ok(duration)
}

/// Parses a byte size: a plain byte count, or a number with a unit
/// (`KiB`/`MiB`/`GiB` binary, `KB`/`MB`/`GB` decimal), at most `max`.
pub fn parse_size(text: &str, max: u64) -> Result<u64, String> {
    let text = text.trim();
    let size: bytesize::ByteSize = text.parse().map_err(|err| format!("`{text}` is not a size: {err}"))?;
    if size.as_u64() > max {
        return Err(format!("`{text}` is more than {}", bytesize::ByteSize(max).display().iec()));
    }
    Ok(size.as_u64())
}

/// A socket address at `path`, `default` when unset.
pub(crate) fn parse_addr(value: Option<&str>, default: &str, path: &str, issues: &mut Vec<Issue>) -> SocketAddr {
    let fallback = SocketAddr::from(([127, 0, 0, 1], 0));
    let text = value.unwrap_or(default);
    text.parse().unwrap_or_else(|_| {
        issues.push(Issue::new(
            path,
            format!("`{text}` is not a socket address"),
            "write it as host:port, e.g. 127.0.0.1:8080",
        ));
        fallback
    })
}

/// A duration at `path`, `default` when unset or unreadable (an issue then).
pub(crate) fn duration_or(value: Option<&str>, default: Duration, path: &str, issues: &mut Vec<Issue>) -> Duration {
    match value.map(parse_duration) {
        None => default,
        Some(Ok(duration)) => duration,
        Some(Err(message)) => {
            issues.push(Issue::new(path, message, "write a number with a unit: 250ms, 30s, 5m"));
            default
        }
    }
}

/// A size from a YAML number or string (`32MiB`), at most `max`, above zero.
pub(crate) fn size_or(
    value: Option<&serde_yaml_ng::Value>,
    default: u64,
    max: u64,
    path: &str,
    issues: &mut Vec<Issue>,
) -> u64 {
    let Some(value) = value else {
        return default;
    };
    let text = match value {
        serde_yaml_ng::Value::Number(n) => n.to_string(),
        serde_yaml_ng::Value::String(s) => s.clone(),
        _ => String::from("?"),
    };
    match parse_size(&text, max) {
        Ok(0) => {
            issues.push(Issue::new(path, "a size of 0 would refuse everything", "write e.g. 32MiB"));
            default
        }
        Ok(size) => size,
        Err(message) => {
            issues.push(Issue::new(path, message, "write e.g. 32MiB, 512KiB or a byte count"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-5s").is_err());
        // Representable, but an `Instant` plus it would overflow at run time.
        assert!(parse_duration("500000000000h").is_err());
        assert!(parse_duration("99999999999999999999999999s").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32MiB", u64::MAX), Ok(32 << 20));
        assert_eq!(parse_size("64KB", u64::MAX), Ok(64_000));
        assert_eq!(parse_size("1000", u64::MAX), Ok(1000));
        assert!(parse_size("lots", u64::MAX).is_err());
        assert!(parse_size("2GiB", 1 << 30).is_err());
        assert!(parse_size("99999999999999999999999", u64::MAX).is_err());
    }
}
