//! What AWS endpoints look like: the region of a Bedrock Runtime host,
//! which config reads when a provider names none and the SigV4 signer signs
//! for. Here, beside the other auth pieces, so config need not depend on the
//! Bedrock codec.

/// The region of a Bedrock Runtime endpoint host, e.g. `us-east-1` for
/// `bedrock-runtime.us-east-1.amazonaws.com`,
/// `bedrock-runtime-fips.us-east-1.amazonaws.com` or a VPC endpoint
/// `vpce-1a2b.bedrock-runtime.us-east-1.vpce.amazonaws.com`. A port is
/// ignored; hosts that are not Bedrock Runtime endpoints give `None`.
pub fn region_from_host(host: &str) -> Option<String> {
    let host = host.trim().trim_end_matches('.');
    let host = host.rsplit_once(':').map_or(
        host,
        |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        },
    );
    let labels: Vec<&str> = host.split('.').collect();
    let position = labels.iter().position(|label| {
        label.eq_ignore_ascii_case("bedrock-runtime") || label.eq_ignore_ascii_case("bedrock-runtime-fips")
    })?;
    let region = labels.get(position + 1)?;
    let looks_like_region = region.contains('-')
        && region.ends_with(|c: char| c.is_ascii_digit())
        && region.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    looks_like_region.then(|| region.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_come_from_runtime_hosts() {
        let cases = [
            ("bedrock-runtime.us-east-1.amazonaws.com", Some("us-east-1")),
            ("bedrock-runtime-fips.us-gov-west-1.amazonaws.com", Some("us-gov-west-1")),
            ("bedrock-runtime.cn-north-1.amazonaws.com.cn", Some("cn-north-1")),
            ("vpce-0a1b.bedrock-runtime.eu-west-3.vpce.amazonaws.com", Some("eu-west-3")),
            ("bedrock-runtime.ap-southeast-2.amazonaws.com:443", Some("ap-southeast-2")),
            ("api.anthropic.com", None),
            ("bedrock-runtime.amazonaws.com", None),
            ("localhost:9000", None),
        ];
        for (host, region) in cases {
            assert_eq!(region_from_host(host).as_deref(), region, "{host}");
        }
    }
}
