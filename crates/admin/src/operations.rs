//! The running gateway over the admin API: its config (redacted), a
//! candidate validated without applying it, a reload of the file, lane
//! states with a manual breaker reset, and the audit log.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;

use crate::sampler::now_minute;
use crate::shared::*;
use crate::versions::{empty_problem, newest_number, scrubbed};
use switchyard_state::Gateway;

#[utoipa::path(get, path = "/api/v1/admin/config", responses((status = 200, description = "the config file's text as last loaded (comments and layout kept), secrets replaced by `<redacted>` where they stand, and `restart_pending`: sections it changes that keep their running values until a restart")))]
pub(crate) async fn running_config(State(admin): State<Admin>) -> Response {
    let yaml = switchyard_config::redacted(&admin.gateway.config.source).unwrap_or_default();
    // The newest version's ETag, for `If-Match` on the next change.
    let version = match admin.gateway.governance {
        Some(_) => newest_number(&admin).await.ok(),
        None => None,
    };
    let body = Json(serde_json::json!({
        "yaml": yaml,
        "metrics": admin.gateway.metrics().is_some(),
        "restart_pending": admin.gateway.restart_pending,
        "version": version,
        "locked": admin.gateway.config.control.locked,
    }));
    match version {
        Some(version) => tagged(&version.to_string(), body),
        None => axum::response::IntoResponse::into_response(body),
    }
}

#[utoipa::path(post, path = "/api/v1/admin/config/validate", request_body(content = String, content_type = "application/yaml"),
    responses((status = 200, description = "`valid`, and every problem as `switchyard check` lists them (and a stdio MCP server's command, args or env changed, which only the file may; a `<redacted>` that keeps no running secret; an empty config); `kept_secrets`: the placeholders that keep running secrets; nothing is applied")))]
pub(crate) async fn validate_config(
    State(admin): State<Admin>,
    body: axum::body::Bytes,
) -> ApiResult<Json<serde_json::Value>> {
    let sent = std::str::from_utf8(&body).map_err(|_| bad("body: the config must be UTF-8 text"))?;
    let refused = |problems: Vec<serde_json::Value>| {
        Ok(Json(serde_json::json!({"valid": false, "problems": problems, "warnings": [], "kept_secrets": 0})))
    };
    if switchyard_config::round_trip::is_empty(sent) {
        return refused(vec![empty_problem()]);
    }
    // Placeholders that came back are the running secrets again, as an
    // apply would take them; the answer never quotes one.
    let restored = match switchyard_config::round_trip::restored(sent, &admin.gateway.config.source) {
        Ok(restored) => restored,
        Err(issues) => return refused(issues.iter().map(problem).collect()),
    };
    let text = restored.text.as_str();
    // The real environment, so the candidate is checked as it would run
    // (`load` never echoes a value it substituted).
    let env = |name: &str| std::env::var(name).ok();
    let issue = problem;
    let mut answer = match switchyard_config::load(text, &env) {
        Ok(config) => {
            let warnings: Vec<_> = config.warnings.iter().map(issue).collect();
            // What applying it over the API would be refused for.
            let file_only =
                switchyard_config::mcp::file_only_changes(admin.gateway.config.mcp.as_ref(), config.mcp.as_ref());
            if !file_only.is_empty() {
                let problems: Vec<_> = file_only.iter().map(issue).collect();
                return Ok(Json(scrubbed(
                    serde_json::json!({"valid": false, "problems": problems, "warnings": warnings}),
                    &restored.secrets,
                )));
            }
            match Gateway::new(config, admin.gateway.codecs) {
                Ok(_) => serde_json::json!({"valid": true, "problems": [], "warnings": warnings}),
                Err(err) => serde_json::json!({"valid": false, "warnings": warnings,
                    "problems": [{"path": "", "message": format!("valid but cannot be served: {err}"), "fix": "fix the file"}]}),
            }
        }
        Err(err) => {
            serde_json::json!({"valid": false, "problems": err.0.iter().map(issue).collect::<Vec<_>>(), "warnings": []})
        }
    };
    answer["kept_secrets"] = restored.secrets.len().into();
    Ok(Json(scrubbed(answer, &restored.secrets)))
}

fn problem(issue: &switchyard_config::Issue) -> serde_json::Value {
    serde_json::json!({"path": issue.path, "message": issue.message, "fix": issue.fix})
}

#[utoipa::path(get, path = "/api/v1/admin/lanes", responses((status = 200, description = "every pool's lanes with breaker state")))]
pub(crate) async fn lanes(State(admin): State<Admin>) -> Json<serde_json::Value> {
    let mut pools = crate::stats::stats(&admin.gateway)["pools"].take();
    // Each lane's share of its pool's traffic over the last minutes.
    let history = &admin.gateway.telemetry.history;
    let served = history.lane_counts(now_minute());
    let latency = history.lane_latency(now_minute());
    for pool in pools.as_array_mut().into_iter().flatten() {
        let name: Arc<str> = Arc::from(pool["pool"].as_str().unwrap_or_default());
        let Some(lanes) = pool["lanes"].as_array_mut() else { continue };
        let counts: Vec<u64> = lanes
            .iter()
            .map(|lane| {
                let lane: Arc<str> = Arc::from(lane["lane"].as_str().unwrap_or_default());
                served.get(&(name.clone(), lane)).copied().unwrap_or(0)
            })
            .collect();
        let total: u64 = counts.iter().sum();
        for (lane, count) in lanes.iter_mut().zip(counts) {
            let recent = lane["lane"].as_str().and_then(|name| latency.get(name));
            lane["p50_ms"] = recent.and_then(|l| l.p50_ms).into();
            lane["p99_ms"] = recent.and_then(|l| l.p99_ms).into();
            lane["recent_requests"] = count.into();
            lane["share"] = if total == 0 { serde_json::Value::Null } else { (count as f64 / total as f64).into() };
        }
    }
    Json(pools)
}

/// Pool `pool`'s state and the member index of its lane `lane`.
fn member_of<'a>(gateway: &'a Gateway, pool: &str, lane: &str) -> ApiResult<(&'a switchyard_state::PoolState, usize)> {
    let state = gateway
        .resolve(pool)
        .map(|index| &gateway.pools[index])
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("pool `{pool}` does not exist")))?;
    let member = state
        .members
        .iter()
        .position(|&l| *gateway.lanes[l].name == *lane)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("pool `{pool}` has no lane `{lane}`")))?;
    Ok((state, member))
}

#[utoipa::path(post, path = "/api/v1/admin/lanes/{pool}/{lane}/reset", responses((status = 200), (status = 404)))]
pub(crate) async fn reset_lane(
    State(admin): State<Admin>,
    Path((pool, lane)): Path<(String, String)>,
) -> ApiResult<Response> {
    let target = format!("{pool}/{lane}");
    let (state, member) = member_of(&admin.gateway, &pool, &lane)?;
    state.breaker(member).reset();
    tracing::info!(pool = %pool, lane = %lane, "breaker reset by an operator");
    Ok(audited(&target, Json(serde_json::json!({"pool": pool, "lane": lane, "breaker": "closed"}))))
}

/// The highest weight an operator may give a lane (configured weights are
/// 1 or more; shares stay exact in `u32` arithmetic far below this).
pub const MAX_WEIGHT: u32 = 1_000_000;

/// An operator's change to one lane of one pool.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchLane {
    /// `true`: the lane takes no new requests from this pool (in-flight
    /// ones finish); `false`: it takes them again.
    pub drained: Option<bool>,
    /// A weight (1 to 1,000,000) in place of the configured one; `null`:
    /// back to the configured weight.
    #[serde(default, deserialize_with = "crate::shared::double_option")]
    #[schema(value_type = Option<u32>)]
    pub weight: Option<Option<u32>>,
}

#[utoipa::path(patch, path = "/api/v1/admin/lanes/{pool}/{lane}", request_body = PatchLane,
    responses((status = 200, description = "the lane's `drained`, `weight` (the operator's or the configured one) and `configured_weight`; held by this instance and kept across reloads while the lane stays in the pool"),
        (status = 400, description = "a weight out of 1 to 1,000,000"), (status = 404)))]
pub(crate) async fn patch_lane(
    State(admin): State<Admin>,
    Path((pool, lane)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let change: PatchLane = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    if let Some(Some(weight)) = change.weight {
        if !(1..=MAX_WEIGHT).contains(&weight) {
            return Err(bad(format!(
                "weight: {weight} is out of 1 to {MAX_WEIGHT} (drain the lane to send it nothing)"
            )));
        }
    }
    let (state, member) = member_of(&admin.gateway, &pool, &lane)?;
    let control = &state.controls[member];
    let before = serde_json::json!({"drained": control.drained(), "weight": state.weight(member)});
    if let Some(drained) = change.drained {
        control.set_drained(drained);
    }
    if let Some(weight) = change.weight {
        control.set_weight(weight);
    }
    tracing::info!(pool = %pool, lane = %lane, drained = control.drained(), weight = ?control.weight(), "lane changed by an operator");
    let view = serde_json::json!({
        "pool": pool, "lane": lane, "drained": control.drained(),
        "weight": state.weight(member), "configured_weight": state.weights[member],
    });
    let after = serde_json::json!({"drained": control.drained(), "weight": state.weight(member)});
    let note = change_note(&before, &after, &[]);
    Ok(noted(note, audited(&format!("{pool}/{lane}"), Json(view))))
}

#[utoipa::path(post, path = "/api/v1/admin/config/reload",
    responses((status = 200, description = "the file was valid and is now served; `restart_required` names changed sections that keep their running values"),
        (status = 422, description = "the file was refused, with every problem as `switchyard check` lists them; the running config keeps serving"),
        (status = 404, description = "this gateway was not started by the binary (no file to read)")))]
pub(crate) async fn reload_config(State(admin): State<Admin>) -> ApiResult<Response> {
    let reloader = admin.gateway.reloader.get().and_then(std::sync::Weak::upgrade).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "this gateway has no config file to reload (it was not started by the binary)".into(),
        )
    })?;
    match reloader.reload().await {
        Ok(outcome) => Ok(audited("config", Json(serde_json::json!({"reloaded": true, "outcome": outcome})))),
        Err(issues) => {
            let problems: Vec<serde_json::Value> = issues
                .iter()
                .map(|issue| serde_json::json!({"path": issue.path, "message": issue.message, "fix": issue.fix}))
                .collect();
            let body = serde_json::json!({"error": {
                "message": "the config was refused; the running config keeps serving",
                "status": 422,
                "problems": problems,
            }});
            Ok(audited("config", (StatusCode::UNPROCESSABLE_ENTITY, Json(body))))
        }
    }
}

#[utoipa::path(get, path = "/api/v1/admin/audit", params(("limit" = Option<usize>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "admin mutation attempts, newest first")))]
pub(crate) async fn audit(
    State(admin): State<Admin>,
    axum::Extension(actor): axum::Extension<Actor>,
    Query(page): Query<PageQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    let governance = governance(&admin)?;
    let limit = page.limit.unwrap_or(50).clamp(1, 1000);
    let before =
        page.cursor.as_deref().map(|c| c.parse::<i64>().map_err(|_| bad("cursor: not a cursor"))).transpose()?;
    let mut entries = governance.stores.audit.entries(before, limit).await?;
    let next_cursor = (entries.len() == limit).then(|| entries.last().map(|e| e.id.to_string())).flatten();
    // A tenant admin reads what it did and what was done to its subtree's
    // keys and groups (a page may come back shorter; the cursor goes on).
    if let Some(root) = actor.tenant() {
        let (me, groups) = (actor.audit_name(), governance.groups());
        let reached = |target: &str| match governance.key(target) {
            Some(key) => crate::tenancy::within(&groups, root, key.record.group.as_deref()),
            None => crate::tenancy::within(&groups, root, Some(target)),
        };
        entries.retain(|e| e.entry.actor == me || e.entry.target.as_deref().is_some_and(reached));
    }
    Ok(Json(serde_json::json!({"data": entries, "next_cursor": next_cursor})))
}

/// The console's playground, as the OpenAPI document describes it. The
/// route itself is the HTTP surface's (`switchyard_gateway::playground`):
/// it sends through the data plane's router, which this crate never sees.
#[utoipa::path(post, path = "/api/v1/admin/playground",
    request_body(content = Object, description = "`dialect` (openai, responses, anthropic, gemini, cohere or bedrock), `pool`, `prompt`, `key` (its secret; under auth: keys), `max_tokens`"),
    responses((status = 200, description = "`status`, `text` or `error`, `lane`, `dropped`, `request_id`, `took_ms`, `input_tokens`, `output_tokens`, `usd`, `request` (the body sent)"),
        (status = 400, description = "an unknown dialect, or an empty or oversized prompt")))]
#[allow(dead_code, reason = "documents a route served by the HTTP surface")]
pub(crate) fn playground() {}
