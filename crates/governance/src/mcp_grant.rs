//! What a key's `mcp` grants reach of the MCP gateway's catalogue. No
//! grant, no reach: a key (or template) without `mcp` sees and uses no
//! tool, prompt or resource. A grant is one of
//!
//! - a server glob (`tickets`, `tick*`, `*`): everything of the servers it
//!   matches (tools, prompts and resources);
//! - `<server glob>__<tool glob>` (`files__*`, `tickets__read_*`): tools;
//! - `prompt:<server glob>__<prompt glob>`: prompts;
//! - `resource:<server glob>+<uri glob>` (`resource:files+file:///docs/*`):
//!   resources.
//!
//! The server glob is matched against a server's (or pool's) name, the
//! other against the server's own name for the item, so a `*` never spans
//! from one into the other. Pure.

use crate::key::glob;

/// What a grant is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `tools/list`, `tools/call`.
    Tool,
    /// `prompts/list`, `prompts/get`.
    Prompt,
    /// `resources/list`, `resources/templates/list`, `resources/read`.
    Resource,
}

impl Kind {
    /// How a grant of this kind starts (a tool's has no prefix).
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Tool => "",
            Kind::Prompt => PROMPT,
            Kind::Resource => RESOURCE,
        }
    }

    /// Between the server and the item in a grant of this kind.
    fn separator(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "__",
            Kind::Resource => "+",
        }
    }
}

const PROMPT: &str = "prompt:";
const RESOURCE: &str = "resource:";
/// The longest grant.
pub const MAX_GRANT: usize = 1_000;
/// The most grants one key or template holds.
pub const MAX_GRANTS: usize = 256;

/// One grant, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant<'a> {
    /// Everything of the servers this glob matches.
    Server(&'a str),
    /// A kind's items: a server glob, and a glob over the server's own
    /// name (or URI) for them.
    Items { kind: Kind, server: &'a str, item: &'a str },
}

fn read(grant: &str) -> Result<Grant<'_>, String> {
    if grant.is_empty() || grant.len() > MAX_GRANT {
        return Err(format!("a grant is 1 to {MAX_GRANT} bytes"));
    }
    if grant.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(format!("`{grant}` holds a space or a character that is not printable ASCII"));
    }
    let (kind, rest) = if let Some(rest) = grant.strip_prefix(PROMPT) {
        (Some(Kind::Prompt), rest)
    } else if let Some(rest) = grant.strip_prefix(RESOURCE) {
        (Some(Kind::Resource), rest)
    } else {
        (None, grant)
    };
    let server_glob = |server: &str| {
        !server.is_empty() && server.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-*".contains(&b))
    };
    let shape = match kind {
        Some(Kind::Resource) => "resource:<server>+<uri glob>, e.g. resource:files+file:///docs/*",
        Some(_) => "prompt:<server>__<prompt glob>, e.g. prompt:tickets__*",
        None => "a server (tickets, *), or <server>__<tool glob> (files__*, tickets__read_*)",
    };
    let wrong = || format!("`{grant}` is not a grant: write {shape}");
    let kind = match kind {
        Some(kind) => kind,
        None if rest.contains("__") => Kind::Tool,
        None if server_glob(rest) => return Ok(Grant::Server(rest)),
        None => return Err(wrong()),
    };
    let (server, item) = rest.split_once(kind.separator()).ok_or_else(wrong)?;
    if !server_glob(server) || item.is_empty() {
        return Err(wrong());
    }
    Ok(Grant::Items { kind, server, item })
}

/// Whether `grant` is a grant (its refusal names the shapes there are).
pub fn check(grant: &str) -> Result<(), String> {
    read(grant).map(|_| ())
}

/// Whether `grants` reach `item` (the server's own name or URI for it) of
/// kind `kind` on server (or pool) `server`.
pub fn grants(grants: &[String], kind: Kind, server: &str, item: &str) -> bool {
    grants.iter().filter_map(|grant| read(grant).ok()).any(|grant| match grant {
        Grant::Server(servers) => glob(servers.as_bytes(), server.as_bytes()),
        Grant::Items { kind: granted, server: servers, item: items } => {
            granted == kind && glob(servers.as_bytes(), server.as_bytes()) && glob(items.as_bytes(), item.as_bytes())
        }
    })
}

/// Whether `grants` reach anything of kind `kind` on server `server` (a
/// listing asks it before asking the server).
pub fn reaches(grants: &[String], kind: Kind, server: &str) -> bool {
    grants.iter().filter_map(|grant| read(grant).ok()).any(|grant| match grant {
        Grant::Server(servers) => glob(servers.as_bytes(), server.as_bytes()),
        Grant::Items { kind: granted, server: servers, .. } => {
            granted == kind && glob(servers.as_bytes(), server.as_bytes())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(grants: &[&str]) -> Vec<String> {
        grants.iter().map(|g| (*g).to_owned()).collect()
    }

    #[test]
    fn no_grant_reaches_nothing() {
        let none = list(&[]);
        for kind in [Kind::Tool, Kind::Prompt, Kind::Resource] {
            assert!(!grants(&none, kind, "files", "delete_everything"));
            assert!(!reaches(&none, kind, "files"));
        }
    }

    #[test]
    fn a_server_grant_reaches_all_of_it_and_only_it() {
        let files = list(&["files"]);
        assert!(grants(&files, Kind::Tool, "files", "delete"));
        assert!(grants(&files, Kind::Prompt, "files", "greeting"));
        assert!(grants(&files, Kind::Resource, "files", "file:///etc/motd"));
        assert!(!grants(&files, Kind::Tool, "filesx", "delete"));
        let everything = list(&["*"]);
        assert!(grants(&everything, Kind::Resource, "tickets", "tickets://readme"));
        assert!(reaches(&list(&["tick*"]), Kind::Prompt, "tickets"));
    }

    #[test]
    fn a_tool_grant_opens_no_prompt_or_resource() {
        let some = list(&["files__*", "tickets__read_*"]);
        assert!(grants(&some, Kind::Tool, "files", "delete"));
        assert!(grants(&some, Kind::Tool, "tickets", "read_queue"));
        assert!(!grants(&some, Kind::Tool, "tickets", "close_ticket"));
        assert!(!grants(&some, Kind::Prompt, "files", "greeting"), "a tool grant is for tools");
        assert!(!grants(&some, Kind::Resource, "files", "files://readme"));
        assert!(reaches(&some, Kind::Tool, "tickets") && !reaches(&some, Kind::Prompt, "tickets"));
        assert!(!reaches(&some, Kind::Tool, "wiki"));
        // A tool's own name may hold the separator; the server glob never spans it.
        assert!(grants(&list(&["files__a__*"]), Kind::Tool, "files", "a__b"));
        assert!(!grants(&list(&["fi*__b"]), Kind::Tool, "files", "a__b"));
    }

    #[test]
    fn prompt_and_resource_grants_reach_their_kind() {
        let granted = list(&["prompt:tickets__greet*", "resource:files+file:///docs/*"]);
        assert!(grants(&granted, Kind::Prompt, "tickets", "greeting"));
        assert!(!grants(&granted, Kind::Tool, "tickets", "greeting"));
        assert!(!grants(&granted, Kind::Prompt, "tickets", "farewell"));
        assert!(grants(&granted, Kind::Resource, "files", "file:///docs/a.txt"));
        assert!(!grants(&granted, Kind::Resource, "files", "file:///etc/passwd"));
        assert!(reaches(&granted, Kind::Resource, "files") && !reaches(&granted, Kind::Resource, "tickets"));
    }

    #[test]
    fn what_is_not_a_grant_is_named() {
        for fine in ["*", "files", "files__*", "*__read_*", "prompt:*__*", "resource:files+file:///docs/*"] {
            assert_eq!(check(fine), Ok(()), "{fine}");
        }
        for wrong in
            ["", "Files", "files read", "prompt:files", "resource:files", "resource:Files+x", "prompt:__x", "a.b"]
        {
            assert!(check(wrong).is_err(), "{wrong}");
        }
        assert!(check("resource:files").unwrap_err().contains("resource:<server>+<uri glob>"));
        assert!(check(&"a".repeat(MAX_GRANT + 1)).is_err());
    }
}
