//! How the servers' names become one catalogue's: a tool or prompt `t` of
//! the server (or pool) `s` is `s__t`; a resource's URI `u` is `s+u` (a
//! server's name is a valid URI scheme prefix: lower-case letters, digits
//! and `-`), so a read finds its server again. Pure.

/// Between a server's name and its tool's.
pub const SEPARATOR: &str = "__";

/// `tool` of `route`, as callers see it.
pub fn namespaced(route: &str, tool: &str) -> String {
    format!("{route}{SEPARATOR}{tool}")
}

/// A namespaced name's route and the server's own name for it.
pub fn split(name: &str) -> Option<(&str, &str)> {
    let (route, tool) = name.split_once(SEPARATOR)?;
    (!route.is_empty() && !tool.is_empty()).then_some((route, tool))
}

/// Resource `uri` of `route`, as callers see it.
pub fn resource_uri(route: &str, uri: &str) -> String {
    format!("{route}+{uri}")
}

/// A namespaced resource URI's route and the server's own URI.
pub fn split_uri(uri: &str) -> Option<(&str, &str)> {
    let (route, rest) = uri.split_once('+')?;
    (!route.is_empty() && !rest.is_empty()).then_some((route, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(split(&namespaced("tickets", "read_ticket")), Some(("tickets", "read_ticket")));
        // The server's own name may hold the separator: only the first splits.
        assert_eq!(split("files__a__b"), Some(("files", "a__b")));
        assert_eq!(split("files"), None);
        assert_eq!(split("__x"), None);
        assert_eq!(split_uri(&resource_uri("files", "file:///etc/motd")), Some(("files", "file:///etc/motd")));
        assert_eq!(split_uri("tickets+tickets://readme"), Some(("tickets", "tickets://readme")));
        assert_eq!(split_uri("plain://x"), None);
    }
}
