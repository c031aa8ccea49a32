//! Parsing of durations (`250ms`, `30s`, `5m`, `1h`) and byte sizes
//! (`32MiB`, `512KiB`, `1000`).

use std::time::Duration;

/// Parses a duration written with a unit suffix.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a duration"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "" => return Err(format!("`{text}` has no unit")),
        other => return Err(format!("`{other}` is not a duration unit")),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("`{text}` is not a valid duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a byte size: a plain number, or a number with KiB/MiB/GiB (or KB/MB/GB).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number.parse().map_err(|_| format!("`{text}` is not a size"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "KB" | "k" | "K" => 1 << 10,
        "MiB" | "MB" | "M" => 1 << 20,
        "GiB" | "GB" | "G" => 1 << 30,
        other => return Err(format!("`{other}` is not a size unit")),
    };
    value.checked_mul(scale).ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("lots").is_err());
    }
}
