//! What the ledger says, over the admin API: spend by key, group, model or
//! lane, what it cost and what its tenants are charged, as settled (rows
//! from before the ledger kept charges at today's prices; whole hours from
//! the rollup, ragged edges from the rows; JSON or CSV), recent requests with their attempts, one
//! request's detail, and the console's history.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};
use switchyard_governance::money::usd;
use switchyard_governance::Window;
use switchyard_store::{RowFilter, SpendBy, TotalsQuery};
use utoipa::ToSchema;

use crate::sampler::now_minute;
use crate::shared::*;
use crate::tenancy;
use switchyard_state::governance::now_ms;
use switchyard_state::Gateway;
use switchyard_telemetry::history::Span;

/// `GET /api/v1/admin/spend` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SpendQuery {
    /// `key`, `group`, `user`, `model`, `lane` or `operation`.
    pub by: Option<String>,
    /// Only this key's requests (its end users' spend, with `by=user`).
    pub key: Option<String>,
    /// Only the requests of this group and the groups below it.
    pub group: Option<String>,
    /// From: RFC 3339 or Unix seconds (default: the start of this month, UTC).
    pub from: Option<String>,
    /// To, exclusive: RFC 3339 or Unix seconds (default: the end of this hour).
    pub to: Option<String>,
    /// `json` (the default) or `csv`.
    pub format: Option<String>,
}

/// One spend line: tokens, what they cost and what they were charged.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpendLine {
    /// The key id, group, model or lane (absent: requests without one).
    pub value: Option<String>,
    /// The key's name, when the lines are by key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Requests.
    pub requests: u64,
    /// Input tokens (cached included).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cache writes.
    pub cache_write_tokens: u64,
    /// Units billed beyond tokens (search units, images, characters,
    /// seconds of audio).
    pub units: u64,
    /// USD they cost: what the providers bill, at the rate card in force
    /// when each settled (its tier, a batch line's discount, the service
    /// tier's factor). What budgets count.
    pub usd: f64,
    /// The same, exactly: nano-USD.
    pub cost_nano: u64,
    /// USD its tenants are charged: the cost and each group's markup.
    pub price_usd: f64,
    /// The same, exactly: nano-USD.
    pub price_nano: u64,
    /// USD response-cache hits saved (at the price each hit was served at).
    pub saved_usd: f64,
    /// Requests answered from the response cache.
    pub cache_hits: u64,
    /// Guardrail decisions made on its requests.
    pub guarded: u64,
    /// Refusals at the door (keys, limits, budgets, policies): not requests.
    pub refused: u64,
    /// By group: the group's own USD, without its subgroups' (`usd`
    /// includes them, so groups' `usd` add up to more than the total;
    /// their `own_usd` add up to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_usd: Option<f64>,
    /// `own_usd` in nano-USD, summed exactly.
    #[serde(skip)]
    own_nano: u64,
}

/// Spend over a range.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpendReport {
    /// The dimension.
    pub by: String,
    /// From (Unix seconds).
    pub from: i64,
    /// To (Unix seconds).
    pub to: i64,
    /// One line per value, largest spend first. A group's line is its
    /// whole subtree (what its budget sees).
    pub data: Vec<SpendLine>,
    /// Total USD cost (what budgets count).
    pub total_usd: f64,
    /// Total USD charged (cost and markups).
    pub total_price_usd: f64,
    /// Total USD response-cache hits saved.
    pub saved_usd: f64,
    /// Total cache hits, guardrail decisions and refusals.
    #[schema(value_type = Object)]
    pub outcomes: switchyard_store::Outcomes,
    /// Each key's and group's budget: its spend in its window, its burn
    /// and when it runs out at that pace.
    #[serde(default)]
    pub budgets: Vec<BudgetOutlookView>,
}

/// A budget's spend, burn over the last hour and forecast.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BudgetOutlookView {
    /// `key:<id>` or `group:<name>`.
    pub bucket: String,
    /// Whose, for people.
    pub who: String,
    /// Settled spend in the current window, USD.
    pub spent_usd: f64,
    /// The cap, USD.
    pub cap_usd: f64,
    /// Spend per hour over the last hour (absent: not watched yet).
    pub burn_usd_per_hour: Option<f64>,
    /// When it runs out at that pace (Unix seconds), if before its window
    /// ends (absent: it does not).
    pub exhausts_at: Option<i64>,
    /// The same as a wait: "6 h 10 m".
    pub runs_out_in: Option<String>,
    /// Its window (`1d`, `1mo`, ...).
    #[serde(default)]
    pub window: String,
    /// When the window running now ends (Unix seconds; absent: a total
    /// budget, which never renews).
    #[serde(default)]
    pub window_ends_at: Option<i64>,
    /// The shares of the cap that raise a `budget_warning` (percent;
    /// empty: the alerts' own thresholds).
    #[serde(default)]
    pub warn: Vec<f64>,
}

/// Every budget's outlook at `now` (Unix ms).
pub(crate) fn budget_outlooks(
    governance: &switchyard_state::governance::Governance,
    now: u64,
) -> Vec<BudgetOutlookView> {
    let mut views: Vec<BudgetOutlookView> = governance
        .budget_outlooks(now)
        .into_iter()
        .map(|outlook| {
            let at = outlook.forecast.and_then(|f| f.exhausts_at_ms);
            BudgetOutlookView {
                bucket: outlook.bucket,
                who: outlook.who,
                spent_usd: usd(outlook.spent),
                cap_usd: usd(outlook.cap),
                burn_usd_per_hour: outlook.forecast.map(|f| usd(f.per_hour)),
                exhausts_at: at.map(|at| (at / 1000) as i64),
                runs_out_in: at.map(|at| switchyard_governance::forecast::in_words(at.saturating_sub(now))),
                window: outlook.window.to_owned(),
                window_ends_at: outlook.window_end,
                warn: outlook.warn,
            }
        })
        .collect();
    views.sort_by(|a, b| a.bucket.cmp(&b.bucket));
    views
}

/// Every budget's outlook.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetsView {
    /// One per budgeted key and group, by bucket.
    pub data: Vec<BudgetOutlookView>,
}

#[utoipa::path(get, path = "/api/v1/admin/budgets",
    responses((status = 200, body = BudgetsView)))]
/// `GET /api/v1/admin/budgets`: each budget's spend, burn and forecast.
pub(crate) async fn budgets(State(admin): State<Admin>, Extension(actor): Extension<Actor>) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let mut data = budget_outlooks(governance, now_ms());
    data.retain(|b| tenancy::reaches_bucket(governance, &actor, &b.bucket));
    Ok(Json(BudgetsView { data }).into_response())
}

#[utoipa::path(get, path = "/api/v1/admin/budgets/{bucket}",
    responses((status = 200, body = BudgetOutlookView), (status = 404)))]
/// `GET /api/v1/admin/budgets/{bucket}`: one budget's (`key:<id>`,
/// `group:<name>`).
pub(crate) async fn budget(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(bucket): Path<String>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let reached = tenancy::reaches_bucket(governance, &actor, &bucket);
    match budget_outlooks(governance, now_ms()).into_iter().find(|b| b.bucket == bucket && reached) {
        Some(found) => Ok(Json(found).into_response()),
        None => Err(ApiError(StatusCode::NOT_FOUND, format!("no budget `{bucket}`: name key:<id> or group:<name>"))),
    }
}

/// `GET /api/v1/admin/requests` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RequestsQuery {
    /// Only this key's.
    pub key: Option<String>,
    /// Only this pool's.
    pub pool: Option<String>,
    /// Only this lane's.
    pub lane: Option<String>,
    /// Only this status (`503`) or class (`5xx`, `4xx`, `2xx`).
    pub status: Option<String>,
    /// Only this end user's.
    pub end_user: Option<String>,
    /// Only the request with this id (`x-request-id`).
    pub request_id: Option<String>,
    /// Only this operation's (`chat`, `embed`, `mcp`: tool calls, ...).
    pub operation: Option<String>,
    /// Only requests finished from then on: RFC 3339 or Unix seconds.
    pub from: Option<String>,
    /// Only requests finished before then: RFC 3339 or Unix seconds.
    pub to: Option<String>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<usize>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
}

/// One request from the ledger, priced today.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestView {
    /// Row id.
    pub id: i64,
    /// When it finished (Unix ms).
    pub at_ms: i64,
    /// Request id.
    pub request_id: String,
    /// Key id.
    pub key_id: Option<String>,
    /// Group.
    pub group: Option<String>,
    /// Pool named.
    pub pool: String,
    /// Lane that served.
    pub lane: String,
    /// Wire model.
    pub model: String,
    /// What it asked for (`chat`, `embed`, ..., `count_tokens`).
    pub operation: String,
    /// Units billed beyond tokens.
    pub units: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cache writes.
    pub cache_write_tokens: u64,
    /// Of the cache writes, those that live an hour.
    pub cache_write_1h_tokens: u64,
    /// Of the output, reasoning.
    pub reasoning_tokens: u64,
    /// Of the input, audio.
    pub audio_input_tokens: u64,
    /// Of the output, audio.
    pub audio_output_tokens: u64,
    /// Of the input, images.
    pub image_input_tokens: u64,
    /// Of the output, images.
    pub image_output_tokens: u64,
    /// Status.
    pub status: u16,
    /// Total time (ms).
    pub latency_ms: u64,
    /// Time to first byte (ms).
    pub ttfb_ms: Option<u64>,
    /// Lanes tried before the one that answered.
    pub failovers: u32,
    /// Tokens estimated by the gateway; `notes.estimated` says why
    /// (`no_usage`, `caller_left`, `hedge_loser`, `answer_broken`).
    pub estimated: bool,
    /// USD it cost (what the provider bills), as settled.
    pub usd: f64,
    /// The same, exactly: nano-USD (10⁻⁹ USD), rounded up.
    pub cost_nano: u64,
    /// What its tenant is charged (the cost and its group's markup), nano-USD.
    pub price_nano: u64,
    /// Every upstream attempt in order, when there was more than one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub attempts: Vec<switchyard_store::Attempt>,
    /// A response-cache hit's saving (`cache_saved_nano`), the guardrail
    /// decisions (`guardrails`: policy/rule/action/direction).
    #[serde(skip_serializing_if = "switchyard_store::Notes::is_empty")]
    #[schema(value_type = Object)]
    pub notes: switchyard_store::Notes,
    /// The end user it was made for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_user: Option<String>,
    /// The caller's protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    /// The caller asked for a stream.
    pub stream: bool,
}

/// A page of requests.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestPage {
    /// Newest first.
    pub data: Vec<RequestView>,
    /// For the next (older) page.
    pub next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/admin/spend",
    params(("by" = Option<String>, Query, description = "key, group, user (end user), model, lane or operation"),
        ("key" = Option<String>, Query, description = "only this key's requests"),
        ("group" = Option<String>, Query, description = "only the requests of this group and those below it"),
        ("from" = Option<String>, Query), ("to" = Option<String>, Query),
        ("format" = Option<String>, Query, description = "json (the default) or csv")),
    responses((status = 200, body = SpendReport)))]
pub(crate) async fn spend(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Query(query): Query<SpendQuery>,
) -> ApiResult<Response> {
    let csv = match query.format.as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => return Err(bad(format!("format: `{other}` is not json or csv"))),
    };
    let governance = governance(&admin)?;
    let by = spend_by(query.by.as_deref().unwrap_or("key"))?;
    let now = (now_ms() / 1000) as i64;
    let from =
        query.from.as_deref().map(|t| parse_time_text(t, "from")).transpose()?.unwrap_or(Window::Month.start(now));
    // No row is later than now, so the default end is the next whole hour:
    // a range of whole hours is read from the hourly rollup alone.
    let to = query.to.as_deref().map(|t| parse_time_text(t, "to")).transpose()?.unwrap_or((now / 3600 + 1) * 3600);
    let ms = |seconds: i64, path: &str| {
        seconds.checked_mul(1000).ok_or_else(|| bad(format!("{path}: `{seconds}` is out of range")))
    };
    let (from_ms, to_ms) = (ms(from, "from")?, ms(to, "to")?);
    let groups = scoped_groups(governance, &actor, query.group.as_deref());
    let question = TotalsQuery { by, from_ms, to_ms, key: query.key.clone(), groups, end_user: None };
    let totals = governance.stores.ledger.totals(question).await?;
    let mut lines: HashMap<Option<String>, SpendLine> = HashMap::new();
    let mut add = |value: Option<String>, total: &switchyard_store::Total, own: bool| {
        let charge = total.charge(admin.gateway.price_of(&total.lane).as_ref());
        let line = lines.entry(value.clone()).or_insert_with(|| SpendLine {
            name: key_name(governance, by, value.as_deref()).filter(|_| {
                value
                    .as_deref()
                    .and_then(|id| governance.key(id))
                    .is_some_and(|k| tenancy::reaches_key(governance, &actor, &k.record))
            }),
            value,
            requests: 0,
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            units: 0,
            usd: 0.0,
            cost_nano: 0,
            price_usd: 0.0,
            price_nano: 0,
            saved_usd: 0.0,
            cache_hits: 0,
            guarded: 0,
            refused: 0,
            own_usd: (by == SpendBy::Group).then_some(0.0),
            own_nano: 0,
        });
        line.cache_hits += total.outcomes.cache_hits;
        line.guarded += total.outcomes.guarded;
        line.refused += total.outcomes.refused;
        line.requests += total.requests;
        line.input_tokens += total.tokens.input;
        line.output_tokens += total.tokens.output;
        line.cache_read_tokens += total.tokens.cache_read;
        line.cache_write_tokens += total.tokens.cache_write;
        line.units += total.tokens.units;
        line.cost_nano = line.cost_nano.saturating_add(charge.cost_nano);
        line.price_nano = line.price_nano.saturating_add(charge.price_nano);
        line.usd = usd(line.cost_nano);
        line.price_usd = usd(line.price_nano);
        if own {
            line.own_nano = line.own_nano.saturating_add(charge.cost_nano);
            let own_nano = line.own_nano;
            if let Some(own_usd) = line.own_usd.as_mut() {
                *own_usd = usd(own_nano);
            }
        }
        line.saved_usd += usd(total.saved_nano);
    };
    let groups = governance.groups();
    for total in &totals {
        if by == SpendBy::Group {
            // A group's spend is its subtree's: credit the row's group and every ancestor.
            let mut at = total.value.clone();
            let mut seen = Vec::new();
            add(at.clone(), total, true);
            while let Some(name) = at.take() {
                seen.push(name.clone());
                at =
                    groups.iter().find(|g| g.name == name).and_then(|g| g.parent.clone()).filter(|p| !seen.contains(p));
                if at.is_some() {
                    add(at.clone(), total, false);
                }
            }
        } else {
            add(total.value.clone(), total, true);
        }
    }
    let mut data: Vec<SpendLine> = lines.into_values().collect();
    // A tenant admin's group lines stop at its own group (its ancestors'
    // lines would be only its share of theirs, under names not its own).
    if let (SpendBy::Group, Some(root)) = (by, actor.tenant()) {
        data.retain(|line| tenancy::within(&groups, root, line.value.as_deref()));
    }
    data.sort_by(|a, b| b.usd.total_cmp(&a.usd).then_with(|| a.value.cmp(&b.value)));
    let (mut total_cost, mut total_price) = (0u64, 0u64);
    for total in &totals {
        let charge = total.charge(admin.gateway.price_of(&total.lane).as_ref());
        total_cost = total_cost.saturating_add(charge.cost_nano);
        total_price = total_price.saturating_add(charge.price_nano);
    }
    let (total_usd, total_price_usd) = (usd(total_cost), usd(total_price));
    let by = match by {
        SpendBy::Key => "key",
        SpendBy::Group => "group",
        SpendBy::Model => "model",
        SpendBy::Lane => "lane",
        SpendBy::Operation => "operation",
        SpendBy::User => "user",
    };
    let saved_usd = usd_sum(totals.iter().map(|t| usd(t.saved_nano)));
    let mut outcomes = switchyard_store::Outcomes::default();
    for total in &totals {
        outcomes.add(&total.outcomes);
    }
    let mut budgets = budget_outlooks(governance, now_ms());
    budgets.retain(|b| tenancy::reaches_bucket(governance, &actor, &b.bucket));
    let report =
        SpendReport { by: by.to_owned(), from, to, data, total_usd, total_price_usd, saved_usd, outcomes, budgets };
    if csv {
        let day = |seconds: i64| {
            time::OffsetDateTime::from_unix_timestamp(seconds)
                .map_or_else(|_| seconds.to_string(), |t| t.date().to_string())
        };
        let name = format!("attachment; filename=\"switchyard-spend-by-{by}-{}-to-{}.csv\"", day(from), day(to));
        let headers = [
            (axum::http::header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (axum::http::header::CONTENT_DISPOSITION, name),
        ];
        return Ok((headers, spend_csv(&report)).into_response());
    }
    Ok(Json(report).into_response())
}

/// A spend report as CSV (RFC 4180), one line per value (and, by key, the
/// key's name).
pub(crate) fn spend_csv(report: &SpendReport) -> String {
    use std::fmt::Write;
    // Text cells are quoted, with quotes doubled, and a leading formula
    // character defused, so a spreadsheet never runs a key's name.
    let cell = |text: &str| {
        let defused =
            if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}") } else { text.to_owned() };
        format!("\"{}\"", defused.replace('"', "\"\""))
    };
    let mut out = format!(
        "{},name,requests,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,units,usd,saved_usd,\
         cache_hits,guardrail_decisions,refused,price_usd\r\n",
        report.by
    );
    for line in &report.data {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{:.9},{:.9},{},{},{},{:.9}\r\n",
            cell(line.value.as_deref().unwrap_or("")),
            cell(line.name.as_deref().unwrap_or("")),
            line.requests,
            line.input_tokens,
            line.output_tokens,
            line.cache_read_tokens,
            line.cache_write_tokens,
            line.units,
            line.usd,
            line.saved_usd,
            line.cache_hits,
            line.guarded,
            line.refused,
            line.price_usd
        );
    }
    out
}

#[utoipa::path(get, path = "/api/v1/admin/requests",
    params(("key" = Option<String>, Query, description = "a key's id, or its name"), ("pool" = Option<String>, Query), ("lane" = Option<String>, Query),
        ("status" = Option<String>, Query, description = "a status (`503`) or a class (`5xx`)"),
        ("end_user" = Option<String>, Query), ("request_id" = Option<String>, Query),
        ("operation" = Option<String>, Query, description = "`chat`, `embed`, ..., `mcp` (tool calls)"),
        ("from" = Option<String>, Query, description = "finished from then on (RFC 3339 or Unix seconds)"),
        ("to" = Option<String>, Query, description = "finished before then"), ("limit" = Option<usize>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = RequestPage)))]
pub(crate) async fn requests(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Query(query): Query<RequestsQuery>,
) -> ApiResult<Json<RequestPage>> {
    let governance = governance(&admin)?;
    let limit = query.limit.unwrap_or(50).clamp(1, 1000);
    let before =
        query.cursor.as_deref().map(|c| c.parse::<i64>().map_err(|_| bad("cursor: not a cursor"))).transpose()?;
    let status = query.status.as_deref().map(status_range).transpose()?;
    let ms = |text: &str, path: &str| -> ApiResult<i64> {
        let seconds = parse_time_text(text, path)?;
        seconds.checked_mul(1000).ok_or_else(|| bad(format!("{path}: `{text}` is out of range")))
    };
    let at_ms = match (query.from.as_deref(), query.to.as_deref()) {
        (None, None) => None,
        (from, to) => Some((
            from.map(|t| ms(t, "from")).transpose()?.unwrap_or(i64::MIN),
            to.map(|t| ms(t, "to")).transpose()?.unwrap_or(i64::MAX),
        )),
    };
    let rows = governance
        .stores
        .ledger
        .rows(RowFilter {
            key: query.key.map(|key| key_id_of(governance, &actor, key)),
            groups: tenancy::subtree(governance, &actor),
            pool: query.pool,
            lane: query.lane,
            status,
            end_user: query.end_user,
            request_id: query.request_id,
            operation: query.operation,
            at_ms,
            before,
            limit,
        })
        .await?;
    let next_cursor = (rows.len() == limit).then(|| rows.last().map(|r| r.id.to_string())).flatten();
    let data = rows.into_iter().map(|stored| request_view(&admin.gateway, stored)).collect();
    Ok(Json(RequestPage { data, next_cursor }))
}

/// A key named by id, or else by name (the first key of that name that
/// `actor` reaches: a tenant admin's name never finds another's key).
fn key_id_of(governance: &switchyard_state::governance::Governance, actor: &Actor, key: String) -> String {
    if governance.key(&key).is_some() {
        return key;
    }
    governance
        .records()
        .into_iter()
        .find(|record| record.name == key && tenancy::reaches_key(governance, actor, record))
        .map_or(key, |record| record.id)
}

/// The groups a spend or usage question reads: the `group` asked for and
/// those below it; for a tenant admin, only inside its subtree (a group
/// outside it reads nothing, as one that does not exist).
pub(crate) fn scoped_groups(
    governance: &switchyard_state::governance::Governance,
    actor: &Actor,
    group: Option<&str>,
) -> Option<Vec<String>> {
    match (actor.tenant(), group) {
        (None, group) => group.map(|group| governance.subtree(group)),
        (Some(root), None) => Some(governance.subtree(root)),
        (Some(root), Some(group)) if tenancy::within(&governance.groups(), root, Some(group)) => {
            Some(governance.subtree(group))
        }
        (Some(_), Some(_)) => Some(Vec::new()),
    }
}

/// A status filter as a range: `503` alone, or `5xx` (case-insensitive)
/// for the class.
fn status_range(text: &str) -> ApiResult<(u16, u16)> {
    let text = text.trim();
    let class = text.strip_suffix("xx").or_else(|| text.strip_suffix("XX"));
    match class.map(str::parse::<u16>) {
        Some(Ok(class @ 1..=5)) => Ok((class * 100, class * 100 + 100)),
        Some(_) => Err(bad(format!("status: `{text}` is not a class (1xx to 5xx)"))),
        None => match text.parse::<u16>() {
            Ok(status @ 100..=599) => Ok((status, status + 1)),
            _ => Err(bad(format!("status: `{text}` is neither a status (e.g. 503) nor a class (e.g. 5xx)"))),
        },
    }
}

/// A ledger row priced at today's rate.
pub(crate) fn request_view(gateway: &Gateway, stored: switchyard_store::StoredRow) -> RequestView {
    let row = stored.row;
    let charge = row.charged(gateway.price_of(&row.lane).as_ref());
    let cost_nano = charge.cost_nano;
    RequestView {
        id: stored.id,
        at_ms: row.at_ms,
        usd: usd(cost_nano),
        cost_nano,
        price_nano: charge.price_nano,
        request_id: row.request_id,
        key_id: row.key_id,
        group: row.group,
        pool: row.pool,
        lane: row.lane,
        model: row.model,
        operation: row.operation,
        units: row.tokens.units,
        input_tokens: row.tokens.input,
        output_tokens: row.tokens.output,
        cache_read_tokens: row.tokens.cache_read,
        cache_write_tokens: row.tokens.cache_write,
        cache_write_1h_tokens: row.tokens.cache_write_1h,
        reasoning_tokens: row.tokens.reasoning,
        audio_input_tokens: row.tokens.audio_input,
        audio_output_tokens: row.tokens.audio_output,
        image_input_tokens: row.tokens.image_input,
        image_output_tokens: row.tokens.image_output,
        status: row.status,
        latency_ms: row.latency_ms,
        ttfb_ms: row.ttfb_ms,
        failovers: row.failovers,
        estimated: row.estimated,
        attempts: row.attempts,
        notes: row.notes,
        end_user: row.end_user,
        ingress: row.ingress,
        stream: row.stream,
    }
}

#[utoipa::path(get, path = "/api/v1/admin/requests/{id}",
    responses((status = 200, body = RequestView, description = "the row; for a token whose scope reads text (`read_text` or `full`), with `text` (request and reply bodies) while the newest requests' text is kept: only with `telemetry.request_log.include_text`; and `kept` (`retention`, `request`, `reply`) when its group's retention keeps text"), (status = 404)))]
pub(crate) async fn request_detail(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<i64>,
) -> ApiResult<Json<serde_json::Value>> {
    let governance = governance(&admin)?;
    let rows = governance
        .stores
        .ledger
        .rows(RowFilter { before: id.checked_add(1), limit: 1, ..RowFilter::default() })
        .await?;
    // A tenant admin's row is one of its subtree's groups (another's is
    // worded as one that does not exist).
    let groups = governance.groups();
    let stored = rows
        .into_iter()
        .find(|r| r.id == id)
        .filter(|r| actor.tenant().is_none_or(|root| tenancy::within(&groups, root, r.row.group.as_deref())))
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("request row {id} does not exist")))?;
    let entry = stored.row.entry;
    let mut view = serde_json::to_value(request_view(&admin.gateway, stored)).unwrap_or_default();
    // Conversation text is for a scope that reads it (`read` does not).
    if !actor.scope.reads_text() {
        return Ok(Json(view));
    }
    // Its text, while the newest requests' text is kept (include_text).
    if let Some(text) = admin.gateway.telemetry.recent_text.as_ref().and_then(|recent| recent.find(entry)) {
        view["text"] = serde_json::to_value(text).unwrap_or_default();
    }
    // What its group's retention kept, opened.
    if let Some(kept) = crate::content::kept_text(&admin, entry).await {
        view["kept"] = kept;
    }
    Ok(Json(view))
}

/// `GET /api/v1/admin/history` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct HistoryQuery {
    /// `1h` (points of a minute, the default) or `1d` (points of 15 minutes).
    pub window: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/admin/history", params(("window" = Option<String>, Query, description = "1h or 1d")),
    responses((status = 200, body = Span)))]
pub(crate) async fn history(State(admin): State<Admin>, Query(query): Query<HistoryQuery>) -> ApiResult<Json<Span>> {
    let (minutes, step) = match query.window.as_deref().unwrap_or("1h") {
        "1h" => (60, 1),
        "1d" => (24 * 60, 15),
        other => return Err(bad(format!("window: `{other}` is not 1h or 1d"))),
    };
    Ok(Json(admin.gateway.telemetry.history.span(now_minute(), minutes, step)))
}

/// A sum of dollar figures folded from +0.0: `Iterator::sum` of no `f64`
/// is -0.0, which a report would show as `-0.0`.
fn usd_sum(figures: impl Iterator<Item = f64>) -> f64 {
    figures.fold(0.0, |sum, figure| sum + figure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_report_totals_zero_not_minus_zero() {
        let empty = usd_sum(std::iter::empty());
        assert_eq!(serde_json::to_string(&empty).unwrap(), "0.0");
        assert_eq!(usd_sum([0.25, 0.5].into_iter()), 0.75);
    }

    #[test]
    fn a_status_filter_is_a_status_or_a_class() {
        assert_eq!(status_range("503").ok(), Some((503, 504)));
        assert_eq!(status_range("5xx").ok(), Some((500, 600)));
        assert_eq!(status_range("4XX").ok(), Some((400, 500)));
        for bad in ["6xx", "0xx", "99", "600", "5x", "bogus", ""] {
            assert!(status_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn spend_csv_quotes_and_defuses_every_text_cell() {
        let line = |value: &str, name: Option<&str>| SpendLine {
            value: Some(value.to_owned()),
            name: name.map(str::to_owned),
            requests: 2,
            input_tokens: 3,
            output_tokens: 4,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            units: 0,
            usd: 0.5,
            cost_nano: 500_000_000,
            price_usd: 0.6,
            price_nano: 600_000_000,
            saved_usd: 0.25,
            cache_hits: 1,
            guarded: 5,
            refused: 7,
            own_usd: None,
            own_nano: 0,
        };
        let report = SpendReport {
            by: "key".into(),
            from: 0,
            to: 1,
            data: vec![line("key_1", Some("=cmd|' /C calc'!A0")), line("say \"hi\"", None)],
            total_usd: 1.0,
            total_price_usd: 1.2,
            saved_usd: 0.5,
            outcomes: switchyard_store::Outcomes::default(),
            budgets: Vec::new(),
        };
        let csv = spend_csv(&report);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "key,name,requests,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,units,usd,saved_usd,\
             cache_hits,guardrail_decisions,refused,price_usd"
        );
        assert_eq!(lines[1], "\"key_1\",\"'=cmd|' /C calc'!A0\",2,3,4,0,0,0,0.500000000,0.250000000,1,5,7,0.600000000");
        assert_eq!(lines[2], "\"say \"\"hi\"\"\",\"\",2,3,4,0,0,0,0.500000000,0.250000000,1,5,7,0.600000000");
    }
}
