//! The checks that span sections: each section is valid alone, and these
//! refuse (or warn of) a combination that is not: an admin's group the
//! config lacks, a name the raw route owns, a group's limit on a pool there
//! is not, and [`effective_issues`], run again wherever a config changes
//! after load.

use crate::issue::{list, Issue};
use crate::mcp::Mcp;
use crate::{spend, Admin, AuthMode, Config, Group, Server, RAW_ROUTE_PREFIX};

/// The groups the admin plane names: OIDC members' parent must be defined;
/// a tenant admin's group not defined yet is a warning (one made over the
/// API is fine, one that is nowhere leaves the tenant an empty subtree).
pub(crate) fn admin_groups(admin: &Admin, groups: &[Group], issues: &mut Vec<Issue>, warnings: &mut Vec<Issue>) {
    if let Some(parent) = admin.oidc.as_ref().and_then(|o| o.members.as_ref()).map(|m| &m.parent) {
        if !groups.iter().any(|g| *g.name == **parent) {
            issues.push(Issue::new(
                "admin.oidc.members.parent",
                format!("group `{parent}` is not defined in the config"),
                "define it under groups: (members' own groups hang under it)",
            ));
        }
    }
    let bound = admin.oidc.iter().flat_map(|o| o.roles.iter().filter_map(|r| r.tenancy.as_ref()));
    for tenancy in admin.tokens.iter().filter_map(|t| t.tenancy.as_ref()).chain(bound) {
        if let Some(group) = tenancy.group.as_deref().filter(|g| !groups.iter().any(|c| &*c.name == *g)) {
            warnings.push(Issue::new(
                "admin.tenants",
                format!("group `{group}` of a tenant admin is not in the config"),
                "define it under groups: (or make it over the API before the tenant signs in)",
            ));
        }
    }
}

/// MCP behind the gateway: tools on an open gateway are anyone's who
/// reaches the port; in a fleet (`fleet`: a shared Redis) handles sealed
/// with each instance's own secret open only on that instance.
pub(crate) fn mcp(mcp: Option<&Mcp>, auth: AuthMode, fleet: bool, warnings: &mut Vec<Issue>) {
    if mcp.is_some_and(|mcp| !mcp.servers.is_empty()) && auth == AuthMode::Open {
        warnings.push(Issue::new(
            "mcp",
            "auth is open, so anyone who reaches the data port may use every MCP tool, prompt and resource",
            "set auth.mode: keys and grant each key its `mcp` list",
        ));
    }
    if mcp.is_some_and(|mcp| mcp.handles.secret.is_none()) && fleet {
        warnings.push(Issue::new(
            "mcp.handles.secret",
            "unset in a fleet: each instance seals MCP session ids and cursors with a secret of its own, so one minted by one instance does not open on another",
            "set mcp.handles.secret to one random secret shared by the fleet",
        ));
    }
}

/// Agents behind the gateway on an open gateway are anyone's who reaches
/// the port.
pub(crate) fn agents(agents: Option<&crate::agents::Agents>, auth: AuthMode, warnings: &mut Vec<Issue>) {
    if agents.is_some_and(|a| !a.agents.is_empty()) && auth == AuthMode::Open {
        warnings.push(Issue::new(
            "agents",
            "auth is open, so anyone who reaches the data port may call every agent",
            "set auth.mode: keys and grant each key its `a2a` list",
        ));
    }
}

/// Client certificates name callers only where callers must be named.
pub(crate) fn client_identity(server: &Server, auth: AuthMode, issues: &mut Vec<Issue>) {
    if server.tls.as_ref().is_some_and(|tls| tls.client_identity.is_some()) && auth != AuthMode::Keys {
        issues.push(Issue::new(
            "server.tls.client_identity",
            "client certificates name callers only when callers must prove who they are",
            "set auth.mode: keys",
        ));
    }
}

/// A name is also the first segment of `/{name}/v1/...`; the raw route
/// owns `/passthrough/...`, so a model or pool of that name could never be
/// reached that way.
pub(crate) fn route_names(model_names: &[&str], pool_names: &[&str], issues: &mut Vec<Issue>) {
    let models = model_names.iter().map(|n| ("models", n));
    for (section, name) in models.chain(pool_names.iter().map(|n| ("pools", n))) {
        if *name == RAW_ROUTE_PREFIX {
            issues.push(Issue::new(
                &format!("{section}.{name}"),
                format!("`{name}` is the raw route's prefix (`/{name}/{{provider}}/...`)"),
                "rename it: a caller could not reach it by its name in the path",
            ));
        }
    }
}

/// The pools and models a group's budget and limits name are defined.
pub(crate) fn group_pools(groups: &[Group], model_names: &[&str], pool_names: &[&str], issues: &mut Vec<Issue>) {
    for group in groups {
        let path = format!("groups.{}", group.name);
        for (path, name) in spend::named_pools(&path, group.budget.as_ref(), &group.limits) {
            if !model_names.contains(&name) && !pool_names.contains(&name) {
                issues.push(Issue::new(
                    &path,
                    format!("`{name}` is neither a pool nor a model"),
                    format!(
                        "name one of: {}",
                        list(&pool_names.iter().chain(model_names).copied().collect::<Vec<_>>())
                    ),
                ));
            }
        }
    }
}

/// The checks that span sections of a config, run on the config as it
/// will really serve: at load, and again wherever it changes after load
/// (command-line overrides of the listeners, a reload that keeps the
/// sections the process is built around at their running values). A
/// combination each part of which is valid alone is refused here, whichever
/// way it came about.
pub fn effective_issues(config: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    let admin_listen = config.admin_listen;
    if !admin_listen.ip().is_loopback() && config.admin.tls.is_none() && !config.admin.insecure {
        issues.push(Issue::new(
            "admin_listen",
            format!("the admin plane is off loopback ({admin_listen}) without client-certificate TLS"),
            "use 127.0.0.1:PORT, or set admin.tls { cert, key, client_ca }, or (behind your own mesh) admin.insecure: true",
        ));
    }
    if config.listen.port() != 0 && config.listen == admin_listen {
        issues.push(Issue::new(
            "admin_listen",
            "admin_listen is the same socket as listen",
            "give the admin plane its own port",
        ));
    }
    if config.auth == AuthMode::Keys {
        for provider in config.providers.iter().filter(|p| p.passthrough_credentials) {
            issues.push(Issue::new(
                &format!("providers.{}.upstream_credentials", provider.name),
                "with auth.mode: keys a caller's credential is its virtual key, so it cannot go upstream",
                "use upstream_credentials: own (the provider's api_key), or leave auth open",
            ));
        }
    }
    issues
}
