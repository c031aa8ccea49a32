//! Tenant admins over real TCP: a token scoped to `acme` (`admin.tenants`)
//! against a gateway holding `globex`'s keys, groups, budgets and traffic
//! too. One test walks every route the admin listener registers (read from
//! the router's source, so a route added later is walked too) with acme's
//! token aimed at globex's objects and checks that nothing leaks: each
//! answer is a 403 at the door (server-wide routes), a 404 worded exactly as
//! for an object that does not exist, or a list holding acme's alone; and
//! that globex's objects are unchanged after. Another sends the hostile
//! changes one by one (a key made in globex, a group moved under globex,
//! acme's own group re-parented or its cap raised, a budget above acme's,
//! a globex key read by id, requests filtered by a globex key), and one
//! checks what acme's admin may do, and that the audit log names it with
//! its group.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::net::SocketAddr;

use common::*;
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

/// acme's tenant admin token.
const ACME: &str = "acme-tenant-token-0123456789";

/// Lanes on the fake, priced, keys required; `corp` above `acme`, and
/// `globex` beside them.
fn config() -> String {
    let mut yaml = lanes_config("mock://");
    yaml.push_str("rate_card:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n"));
    }
    yaml.push_str(
        "auth: { mode: keys }\ngovernance: { ledger_flush_interval: 20ms }\n\
         groups:\n  corp: { budget: { usd: 1000, window: 1mo } }\n  acme: { parent: corp, budget: { usd: 100, window: 1mo } }\n  \
         globex: { budget: { usd: 100, window: 1mo } }\n",
    );
    yaml.push_str(&format!(
        "admin:\n  tokens: [{ADMIN_TOKEN}]\n  tenants: [ {{ token: {ACME}, group: acme, name: acme-lead }} ]\n"
    ));
    yaml
}

/// What a test knows of globex (made by the gateway's admin).
struct Globex {
    key_id: String,
    key_name: String,
    prefix: String,
    row_id: i64,
    request_id: String,
}

/// A governed gateway with globex's key, subgroup and traffic, and one
/// acme request.
async fn world() -> (SocketAddr, Globex) {
    let (addr, _) = governed(&config()).await;
    let admin_made = |body| admin_call(addr, "POST", "/api/v1/admin/groups", Some(ADMIN_TOKEN), Some(body));
    assert_eq!(admin_made(json!({"name": "globex-rnd", "parent": "globex"})).await.status, 201);
    let globex = create_key(addr, json!({"name": "globex-payroll", "group": "globex-rnd"})).await;
    let acme = create_key(addr, json!({"name": "acme-web", "group": "acme"})).await;
    // A per-user override on globex's key and group, so a DELETE of it would succeed for the gateway's admin.
    let put = json!({"budget": {"usd": 1, "window": "1d"}});
    let id = globex["id"].as_str().unwrap().to_owned();
    let override_path = format!("/api/v1/admin/keys/{id}/end-users/u1");
    assert_eq!(admin_call(addr, "PUT", &override_path, Some(ADMIN_TOKEN), Some(put.clone())).await.status, 200);
    let override_path = "/api/v1/admin/groups/globex-rnd/end-users/u1";
    assert_eq!(admin_call(addr, "PUT", override_path, Some(ADMIN_TOKEN), Some(put)).await.status, 200);
    for key in [&globex, &acme] {
        let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
        let body = chat_body(Protocol::OpenAi, "lane-openai", "hi", false);
        let reply = post(addr, "/v1/chat/completions", &[("authorization", &bearer)], body).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    }
    let rows = ledger_rows(addr, &format!("key={id}"), 1).await;
    ledger_rows(addr, "", 2).await;
    let globex = Globex {
        key_id: id,
        key_name: "globex-payroll".into(),
        prefix: globex["prefix"].as_str().unwrap().to_owned(),
        row_id: rows[0]["id"].as_i64().unwrap(),
        request_id: rows[0]["request_id"].as_str().unwrap().to_owned(),
    };
    (addr, globex)
}

/// Every route of the admin listener, as `(method, template)`, read from
/// the source of the routers `admin_router` merges behind the token check.
fn admin_routes() -> Vec<(String, String)> {
    let api = include_str!("../../admin/src/api.rs");
    let api = &api[..api.find("pub async fn require_token").unwrap()];
    let server = include_str!("../src/server.rs");
    let start = server.find("pub fn admin_router").unwrap();
    let guarded = &server[start..start + server[start..].find(".layer(").unwrap()];
    let playground = include_str!("../src/playground.rs");
    let mut routes = Vec::new();
    for source in [api, guarded, playground] {
        for part in source.split(".route(").skip(1) {
            let Some(path) = part.trim_start().strip_prefix('"').and_then(|rest| rest.split('"').next()) else {
                continue;
            };
            if !path.starts_with('/') {
                continue;
            }
            // The call's own text, to its closing parenthesis.
            let mut depth = 1;
            let end = part
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(part.len(), |(at, _)| at);
            let call = &part[..end];
            for method in ["get", "post", "put", "patch", "delete"] {
                let needle = format!("{method}(");
                let named = call.match_indices(&needle).any(|(at, _)| {
                    at == 0 || !(call.as_bytes()[at - 1].is_ascii_alphanumeric() || call.as_bytes()[at - 1] == b'_')
                });
                if named {
                    routes.push((method.to_uppercase(), path.to_owned()));
                }
            }
        }
    }
    routes
}

/// `template` with each placeholder filled for an attack on globex
/// (`missing`: for an object that does not exist instead), and the values
/// that name the object.
fn fill(template: &str, globex: &Globex, missing: bool) -> (String, Vec<String>) {
    let pick = |real: String, absent: &str| if missing { absent.to_owned() } else { real };
    let id = if template.starts_with("/api/v1/admin/requests/") {
        pick(globex.row_id.to_string(), "987654321")
    } else {
        pick(globex.key_id.clone(), "key_00000000deadbeef")
    };
    let name =
        if template.contains("/mcp/") { "files__read".to_owned() } else { pick("globex-rnd".into(), "nosuch-rnd") };
    let bucket = pick("group:globex".into(), "group:nosuch");
    let mut named = Vec::new();
    for (placeholder, value) in [("{id}", &id), ("{name}", &name), ("{bucket}", &bucket)] {
        if template.contains(placeholder) {
            named.push(value.clone());
        }
    }
    let path = template
        .replace("{id}", &id)
        .replace("{name}", &name)
        .replace("{user}", "u1")
        .replace("{bucket}", &bucket)
        .replace("{pool}", "mixed")
        .replace("{lane}", "lane-openai")
        .replace("{v}", "1");
    (path, named)
}

/// A body that would succeed for the gateway's admin on that route,
/// aimed at globex (or at a group that does not exist).
fn body_for(method: &str, template: &str, missing: bool) -> Option<Value> {
    let group = if missing { "nosuch" } else { "globex" };
    Some(match (method, template) {
        ("POST", "/api/v1/admin/keys") => json!({"name": "sneaky", "group": group}),
        ("POST", "/api/v1/admin/groups") => json!({"name": "acme-sneak", "parent": group}),
        ("PATCH", "/api/v1/admin/keys/{id}") => json!({"name": "stolen"}),
        ("PATCH", "/api/v1/admin/groups/{name}") => json!({"budget": {"usd": 1, "window": "1d"}}),
        ("PUT", _) => json!({"budget": {"usd": 2, "window": "1d"}}),
        ("PATCH", "/api/v1/admin/lanes/{pool}/{lane}") => json!({"drained": true}),
        ("POST", "/api/v1/admin/config/validate") => return None,
        ("POST", "/api/v1/admin/playground") => json!({"dialect": "openai", "model": "mixed", "prompt": "hi"}),
        ("POST", "/api/v1/self/keys") => json!({"name": "mine"}),
        ("POST", _) | ("PATCH", _) => json!({}),
        _ => return None,
    })
}

/// The tenant admin's name in the audit log.
const ACME_ACTOR: &str = "acme-lead (tenant admin of acme)";

/// The text an answer may hold after the values the caller sent are taken
/// out (and, in the audit log, acme's own attempts: they name what acme sent).
fn unechoed(body: &[u8], sent: &[&str]) -> String {
    let mut text = String::from_utf8_lossy(body).into_owned();
    if let Ok(mut page) = serde_json::from_slice::<Value>(body) {
        if let Some(entries) =
            page.get_mut("data").and_then(Value::as_array_mut).filter(|e| e.iter().any(|e| e.get("actor").is_some()))
        {
            entries.retain(|e| e["actor"] != ACME_ACTOR);
            text = page.to_string();
        }
    }
    for value in sent {
        text = text.replace(value, "");
    }
    text
}

fn assert_no_globex(text: &str, globex: &Globex, what: &str) {
    for marker in ["globex", &globex.key_id, &globex.key_name, &globex.prefix, &globex.request_id] {
        assert!(!text.contains(marker), "{what} leaks `{marker}`: {text}");
    }
}

/// The routes a tenant admin reaches and whose answers are lists (filtered).
const LISTS: [&str; 10] = [
    "/api/v1/admin/keys",
    "/api/v1/admin/groups",
    "/api/v1/admin/spend",
    "/api/v1/admin/budgets",
    "/api/v1/admin/usage",
    "/api/v1/admin/requests",
    "/api/v1/admin/audit",
    "/api/v1/admin/alerts",
    "/api/v1/admin/runs",
    "/api/v1/admin/openapi.json",
];

#[tokio::test]
async fn a_tenant_admin_of_acme_reaches_nothing_of_globex_on_any_admin_route() {
    let (addr, globex) = world().await;
    let routes = admin_routes();
    assert!(routes.len() >= 45, "the walk found only {} routes: {routes:?}", routes.len());
    let before =
        admin_call(addr, "GET", &format!("/api/v1/admin/keys/{}", globex.key_id), Some(ADMIN_TOKEN), None).await.body;
    let before_group = admin_call(addr, "GET", "/api/v1/admin/groups/globex-rnd", Some(ADMIN_TOKEN), None).await.body;
    let (mut refused_at_door, mut hidden, mut filtered) = (0, 0, 0);
    for (method, template) in &routes {
        let (path, mut named) = fill(template, &globex, false);
        let body = body_for(method, template, false);
        if body.as_ref().is_some_and(|b| b.to_string().contains("\"globex\"")) {
            named.push("globex".into());
        }
        let reply = admin_call(addr, method, &path, Some(ACME), body.clone()).await;
        let status = reply.status.as_u16();
        let what = format!("{method} {path} → {status}");
        // What the caller named may come back (the door's message names the
        // route it refused; a 404 the object asked for); nothing else may.
        let named_refs: Vec<&str> = named.iter().map(String::as_str).collect();
        assert_no_globex(&unechoed(&reply.body, &named_refs), &globex, &what);
        if !switchyard_admin::tenancy::tenant_may(&method.parse().unwrap(), &path) {
            // Server-wide: refused at the door, naming no object.
            assert_eq!(status, 403, "{what}: {}", String::from_utf8_lossy(&reply.body));
            refused_at_door += 1;
            continue;
        }
        if LISTS.contains(&template.as_str()) && method == "GET" {
            assert_eq!(status, 200, "{what}: lists are filtered, not refused");
            filtered += 1;
            continue;
        }
        // An object of globex's (or a change aimed there): a 404, worded
        // as for one that does not exist.
        assert_eq!(status, 404, "{what}: {}", String::from_utf8_lossy(&reply.body));
        let (absent_path, mut absent_named) = fill(template, &globex, true);
        let absent_body = body_for(method, template, true);
        if absent_body.as_ref().is_some_and(|b| b.to_string().contains("\"nosuch\"")) {
            absent_named.push("nosuch".into());
        }
        let absent = admin_call(addr, method, &absent_path, Some(ACME), absent_body).await;
        assert_eq!(absent.status, reply.status, "{what}: a missing object answers {}", absent.status);
        let message = |body: &[u8], named: &[String]| {
            let answer: Value = serde_json::from_slice(body).unwrap();
            let mut text = answer["error"]["message"].as_str().unwrap().to_owned();
            for value in named {
                text = text.replace(value.as_str(), "<object>");
            }
            text
        };
        assert_eq!(
            message(&reply.body, &named),
            message(&absent.body, &absent_named),
            "{what}: globex's object is told apart from a missing one"
        );
        hidden += 1;
    }
    // Every route is one of the three: refused, a hidden object, a filtered list.
    assert_eq!(refused_at_door + hidden + filtered, routes.len());
    assert!(hidden >= 15 && filtered == LISTS.len(), "{hidden} hidden, {filtered} filtered");
    assert!(refused_at_door >= 20, "{refused_at_door} routes refused at the door");

    // Nothing of globex's changed.
    let after =
        admin_call(addr, "GET", &format!("/api/v1/admin/keys/{}", globex.key_id), Some(ADMIN_TOKEN), None).await;
    assert_eq!(after.body, before, "globex's key changed");
    let after_group = admin_call(addr, "GET", "/api/v1/admin/groups/globex-rnd", Some(ADMIN_TOKEN), None).await;
    assert_eq!(after_group.body, before_group, "globex's group changed");
    let keys = admin_call(addr, "GET", "/api/v1/admin/keys?limit=1000", Some(ADMIN_TOKEN), None).await;
    let keys: Value = serde_json::from_slice(&keys.body).unwrap();
    let in_globex: Vec<&Value> = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["group"].as_str().is_some_and(|g| g.starts_with("globex")))
        .collect();
    assert_eq!(in_globex.len(), 1, "{keys}");
    let groups = admin_call(addr, "GET", "/api/v1/admin/groups", Some(ADMIN_TOKEN), None).await;
    assert!(!String::from_utf8_lossy(&groups.body).contains("acme-sneak"));

    // The lists hold acme's alone, and its keys, spend and requests are there.
    let globex = &globex;
    let list = |path: &'static str| async move {
        let reply = admin_call(addr, "GET", path, Some(ACME), None).await;
        assert_eq!(reply.status, 200, "{path}");
        assert_no_globex(&unechoed(&reply.body, &[]), globex, path);
        serde_json::from_slice::<Value>(&reply.body).unwrap()
    };
    let keys = list("/api/v1/admin/keys").await;
    assert_eq!(keys["data"].as_array().unwrap().len(), 1, "{keys}");
    assert_eq!(keys["data"][0]["name"], "acme-web");
    let groups = list("/api/v1/admin/groups").await;
    let names: Vec<&str> = groups.as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["acme"], "not its parent `corp`, nor globex's");
    let spend = list("/api/v1/admin/spend?by=group").await;
    let values: Vec<&str> = spend["data"].as_array().unwrap().iter().filter_map(|l| l["value"].as_str()).collect();
    assert_eq!(values, ["acme"], "{spend}");
    assert!(spend["total_usd"].as_f64().unwrap() > 0.0);
    let budgets = list("/api/v1/admin/budgets").await;
    let buckets: Vec<&str> =
        budgets["data"].as_array().unwrap().iter().map(|b| b["bucket"].as_str().unwrap()).collect();
    assert_eq!(buckets, ["group:acme"], "{budgets}");
    let requests = list("/api/v1/admin/requests").await;
    assert_eq!(requests["data"].as_array().unwrap().len(), 1, "{requests}");
    assert_eq!(requests["data"][0]["group"], "acme");
    list("/api/v1/admin/usage?by=key").await;
    list("/api/v1/admin/usage?by=group").await;
    list("/api/v1/admin/spend?by=key").await;
    list("/api/v1/admin/spend?by=model").await;
    list("/api/v1/admin/audit?limit=1000").await;
}

/// A tenant admin's call: the status and the body as JSON.
async fn acme(addr: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let reply = admin_call(addr, method, path, Some(ACME), body).await;
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn hostile_changes_by_acme_are_refused_and_change_nothing() {
    let (addr, globex) = world().await;
    // acme's admin makes a subgroup of its own to play with.
    let (status, team) = acme(addr, "POST", "/api/v1/admin/groups", Some(json!({"name": "acme-team"}))).await;
    assert_eq!(status, 201, "{team}");
    assert_eq!(team["parent"], "acme", "a tenant's group hangs under its own by default");

    // A key made in globex: 404, as for a group that does not exist.
    let (status, answer) =
        acme(addr, "POST", "/api/v1/admin/keys", Some(json!({"name": "mole", "group": "globex"}))).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["message"], "group `globex` does not exist");
    let (status, _) =
        acme(addr, "POST", "/api/v1/admin/keys", Some(json!({"name": "mole", "group": "globex-rnd"}))).await;
    assert_eq!(status, 404);
    // A key moved into globex: 404.
    let (_, mine) = acme(addr, "POST", "/api/v1/admin/keys", Some(json!({"name": "mine", "group": "acme-team"}))).await;
    let mine_id = mine["id"].as_str().unwrap();
    let (status, _) =
        acme(addr, "PATCH", &format!("/api/v1/admin/keys/{mine_id}"), Some(json!({"group": "globex"}))).await;
    assert_eq!(status, 404);
    // Out of every group (nobody's subtree): refused.
    let (status, _) = acme(addr, "PATCH", &format!("/api/v1/admin/keys/{mine_id}"), Some(json!({"group": null}))).await;
    assert_eq!(status, 403);

    // A group moved under globex: 404; globex's moved under acme: 404.
    let patch = |name: &str| format!("/api/v1/admin/groups/{name}");
    let (status, answer) = acme(addr, "PATCH", &patch("acme-team"), Some(json!({"parent": "globex"}))).await;
    assert_eq!((status, answer["error"]["message"].as_str()), (404, Some("parent: group `globex` does not exist")));
    let (status, _) = acme(addr, "PATCH", &patch("globex-rnd"), Some(json!({"parent": "acme"}))).await;
    assert_eq!(status, 404);
    // Out of its subtree, to acme's parent or to the root: refused.
    let (status, _) = acme(addr, "PATCH", &patch("acme-team"), Some(json!({"parent": "corp"}))).await;
    assert_eq!(status, 404, "corp is above acme: outside its subtree");
    let (status, answer) = acme(addr, "PATCH", &patch("acme-team"), Some(json!({"parent": null}))).await;
    assert_eq!(status, 403, "{answer}");
    // acme's own group: its place and cap are the gateway admin's.
    let (status, _) = acme(addr, "PATCH", &patch("acme"), Some(json!({"parent": null}))).await;
    assert_eq!(status, 403);
    let (status, _) =
        acme(addr, "PATCH", &patch("acme"), Some(json!({"budget": {"usd": 100000, "window": "1mo"}}))).await;
    assert_eq!(status, 403);
    let (status, _) = acme(addr, "DELETE", &patch("acme"), None).await;
    assert_eq!(status, 403);
    // A budget above acme's own ($100): refused on a subgroup and a key;
    // within it, taken.
    let over = json!({"budget": {"usd": 500, "window": "1mo"}});
    let (status, answer) = acme(addr, "PATCH", &patch("acme-team"), Some(over.clone())).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("acme"), "{answer}");
    let (status, _) = acme(addr, "PATCH", &format!("/api/v1/admin/keys/{mine_id}"), Some(over.clone())).await;
    assert_eq!(status, 403);
    let (status, _) =
        acme(addr, "POST", "/api/v1/admin/keys", Some(json!({"name": "rich", "budget": over["budget"]}))).await;
    assert_eq!(status, 403);
    let (status, _) =
        acme(addr, "PATCH", &patch("acme-team"), Some(json!({"budget": {"usd": 50, "window": "1mo"}}))).await;
    assert_eq!(status, 200);
    // A budget on globex's group: 404.
    let (status, _) = acme(addr, "PATCH", &patch("globex"), Some(json!({"budget": {"usd": 1, "window": "1d"}}))).await;
    assert_eq!(status, 404);

    // Reading a globex key by id: 404, worded as for a key that does not exist.
    let (status, answer) = acme(addr, "GET", &format!("/api/v1/admin/keys/{}", globex.key_id), None).await;
    assert_eq!(status, 404);
    assert_eq!(answer["error"]["message"], format!("key `{}` does not exist", globex.key_id));
    let (status, _) = acme(addr, "GET", &format!("/api/v1/admin/budgets/key:{}", globex.key_id), None).await;
    assert_eq!(status, 404);
    let (status, _) = acme(addr, "GET", &format!("/api/v1/admin/requests/{}", globex.row_id), None).await;
    assert_eq!(status, 404);

    // Requests, spend and usage filtered by a globex key (by id or by
    // name) or group: nothing, as for a key that does not exist.
    for query in [
        format!("requests?key={}", globex.key_id),
        format!("requests?key={}", globex.key_name),
        format!("requests?request_id={}", globex.request_id),
        format!("spend?key={}", globex.key_id),
        "spend?group=globex".to_owned(),
        "spend?group=corp&by=group".to_owned(),
        format!("usage?key={}&by=key", globex.key_id),
    ] {
        let (status, page) = acme(addr, "GET", &format!("/api/v1/admin/{query}"), None).await;
        assert_eq!(status, 200, "{query}");
        assert_no_globex(&page.to_string(), &globex, &query);
        let rows = page["data"].as_array().or(page["series"].as_array()).unwrap();
        assert!(rows.is_empty(), "{query}: {page}");
    }

    // None of it changed globex: its key is where it was, named as it was.
    let key = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{}", globex.key_id), Some(ADMIN_TOKEN), None).await;
    let key: Value = serde_json::from_slice(&key.body).unwrap();
    assert_eq!((key["group"].as_str(), key["name"].as_str()), (Some("globex-rnd"), Some("globex-payroll")));
    let group = admin_call(addr, "GET", "/api/v1/admin/groups/globex-rnd", Some(ADMIN_TOKEN), None).await;
    let group: Value = serde_json::from_slice(&group.body).unwrap();
    assert_eq!((group["parent"].as_str(), &group["budget"]), (Some("globex"), &Value::Null));
    let acme_group = admin_call(addr, "GET", "/api/v1/admin/groups/acme", Some(ADMIN_TOKEN), None).await;
    let acme_group: Value = serde_json::from_slice(&acme_group.body).unwrap();
    assert_eq!(acme_group["budget"]["usd"], 100.0);
}

#[tokio::test]
async fn acme_runs_its_subtree_and_the_audit_log_names_it_with_its_group() {
    let (addr, _globex) = world().await;
    // A subgroup, a key in it, a change, a rotation, a revocation.
    let (status, _) = acme(
        addr,
        "POST",
        "/api/v1/admin/groups",
        Some(json!({"name": "acme-ml", "budget": {"usd": 20, "window": "1d"}})),
    )
    .await;
    assert_eq!(status, 201);
    let (status, key) =
        acme(addr, "POST", "/api/v1/admin/keys", Some(json!({"name": "trainer", "group": "acme-ml"}))).await;
    assert_eq!(status, 201, "{key}");
    let id = key["id"].as_str().unwrap();
    let path = format!("/api/v1/admin/keys/{id}");
    assert_eq!(acme(addr, "GET", &path, None).await.0, 200);
    let (status, changed) = acme(addr, "PATCH", &path, Some(json!({"limits": {"rpm": 10, "tpd": 5000}}))).await;
    assert_eq!((status, changed["limits"]["tpd"].as_u64()), (200, Some(5000)));
    assert_eq!(acme(addr, "POST", &format!("{path}/rotate"), Some(json!({}))).await.0, 200);
    // The new key serves, inside acme's budget.
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let reply = post(
        addr,
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        chat_body(Protocol::OpenAi, "lane-openai", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 401, "the rotated-away secret stops");
    assert_eq!(acme(addr, "DELETE", &path, None).await.0, 200);
    // A subgroup moved inside the subtree.
    let (status, _) = acme(addr, "POST", "/api/v1/admin/groups", Some(json!({"name": "acme-ml-eu"}))).await;
    assert_eq!(status, 201);
    let (status, moved) =
        acme(addr, "PATCH", "/api/v1/admin/groups/acme-ml-eu", Some(json!({"parent": "acme-ml"}))).await;
    assert_eq!((status, moved["parent"].as_str()), (200, Some("acme-ml")));
    // A server-wide change: 403, and audited as the tenant's.
    assert_eq!(acme(addr, "POST", "/api/v1/admin/config/reload", None).await.0, 403);

    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=1000", Some(ADMIN_TOKEN), None).await;
    let audit: Value = serde_json::from_slice(&audit.body).unwrap();
    let by_acme: Vec<&Value> = audit["data"].as_array().unwrap().iter().filter(|e| e["actor"] == ACME_ACTOR).collect();
    assert!(by_acme.iter().any(|e| e["action"] == "POST /api/v1/admin/keys" && e["outcome"] == 201), "{audit}");
    assert!(
        by_acme.iter().any(|e| e["action"] == "POST /api/v1/admin/config/reload" && e["outcome"] == 403),
        "{audit}"
    );
    // acme's admin reads its own rows, and none of the gateway admin's about globex.
    let (_, own) = acme(addr, "GET", "/api/v1/admin/audit?limit=1000", None).await;
    let own = own["data"].as_array().unwrap();
    assert!(own.len() >= by_acme.len(), "{own:?}");
    assert!(!own.iter().any(|e| e.to_string().contains("globex")), "{own:?}");
}
