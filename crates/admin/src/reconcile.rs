//! Reconciliation (`reconcile:`): a job per provider account reads the
//! provider's own usage and cost reports for each of the last
//! `reconcile.days` UTC days with the operator's admin key (OpenAI's
//! organization usage and costs API, Anthropic's Usage & Cost Admin API;
//! through the SSRF-guarded hook client; the cost reports in `costs`),
//! reads the ledger's tokens and their cost of the lanes that account
//! bills for the same days, and compares them per model and day
//! (`switchyard_governance::reconcile`). What it finds is kept in the
//! process's book (`Telemetry::reconciliation`) for
//! `GET /api/v1/admin/reconciliation`, `/metrics` and the console; a drift
//! of tokens or of cost past the tolerance alerts (`reconcile_drift`) once
//! per provider, model and day. A usage report that cannot be read fails
//! the run; a cost report that cannot be read leaves its lines without a
//! cost drift and says why. Off the request path; the job takes its clock
//! as an argument.

mod costs;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use switchyard_config::proof::{Account, AccountKind};
use switchyard_governance::reconcile::{amount, compare, day_of, Counted, Line, Metered};
use switchyard_state::governance::now_ms;
use switchyard_state::Gateway;
use switchyard_store::{SpendBy, TotalsQuery};
use switchyard_telemetry::alert::AlertKind;
use switchyard_telemetry::reconcile::Costs;
use utoipa::ToSchema;

use crate::shared::*;

/// One day in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// The most pages of one report read in a run.
const MAX_PAGES: usize = 20;

/// How long one report request may take.
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts `gateway`'s job when `reconcile:` is set: a first run a few
/// seconds after boot, then one every `reconcile.every`; it ends with the
/// gateway, and a reload starts the next one.
pub fn spawn(gateway: &Arc<Gateway>) {
    let Some(every) = gateway.config.reconcile.as_ref().map(|r| r.every) else { return };
    let weak = Arc::downgrade(gateway);
    switchyard_tasks::service("reconciliation", async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(gateway) = weak.upgrade() else { return };
            run(&gateway, now_ms()).await;
        }
    });
}

/// One run at `now_ms`: every account, every day of its window.
pub async fn run(gateway: &Gateway, now_ms: u64) {
    let Some(reconcile) = &gateway.config.reconcile else { return };
    for account in &reconcile.accounts {
        let provider = account.kind.as_str();
        match account_lines(gateway, account, reconcile.days, reconcile.tolerance, now_ms).await {
            Ok((lines, costs)) => {
                if let Some(error) = &costs.error {
                    tracing::warn!(provider, %error, "reconciliation: the provider's cost report could not be read");
                }
                let fresh = gateway.telemetry.reconciliation.publish(provider, lines, costs, now_ms);
                if let Some(alerts) = &gateway.telemetry.alerts {
                    for line in fresh {
                        let subject = format!("{} / {} / {}", line.provider, line.model, line.day);
                        alerts.notify(AlertKind::ReconcileDrift, &subject, detail(&line, reconcile.tolerance), now_ms);
                    }
                }
            }
            Err(error) => {
                tracing::warn!(provider, %error, "reconciliation: the provider's usage report could not be read");
                gateway.telemetry.reconciliation.failed(provider, error, now_ms);
            }
        }
    }
}

/// What a drift alert says: each drift past the tolerance, tokens or cost.
fn detail(line: &Line, tolerance: f64) -> String {
    let mut drifts = Vec::new();
    if line.over {
        drifts.push(format!(
            "tokens: {} reports {} where the ledger holds {} ({:+.2}%)",
            line.provider,
            line.reported.total(),
            line.ledger.total(),
            line.drift * 100.0
        ));
    }
    if let (true, Some(billed), Some(drift)) = (line.cost_over, line.reported_nano, line.cost_drift) {
        drifts.push(format!(
            "cost: {} bills ${} where the ledger holds ${} ({:+.2}%)",
            line.provider,
            usd_text(billed),
            usd_text(line.ledger_nano),
            drift * 100.0
        ));
    }
    format!("{} (tolerance {:.2}%)", drifts.join("; "), tolerance * 100.0)
}

/// Nano-USD as an exact decimal of USD, at least to the cent (`0.05562`).
fn usd_text(nano: u64) -> String {
    let text = format!("{}.{:09}", nano / 1_000_000_000, nano % 1_000_000_000);
    let kept = text.trim_end_matches('0').len().max(text.len() - 7);
    text[..kept].to_owned()
}

/// One account's lines for the days up to `now_ms`'s, and how its cost
/// report was read.
async fn account_lines(
    gateway: &Gateway,
    account: &Account,
    days: u32,
    tolerance: f64,
    now_ms: u64,
) -> Result<(Vec<Line>, Costs), String> {
    let (_, today) = day_of(now_ms as i64);
    let first = today - i64::from(days.saturating_sub(1)) * DAY_MS;
    let end = today + DAY_MS;
    let reported = pages(
        gateway,
        account,
        "usage",
        |page| report_url(account, first, end, page),
        |body| match account.kind {
            AccountKind::OpenAi => read_openai(body),
            AccountKind::Anthropic => read_anthropic(body),
        },
    )
    .await?;
    let (billed, costs) = match costs::report(gateway, account, first, end).await {
        Ok((rows, skipped)) => (Some(rows), Costs { error: None, skipped }),
        Err(error) => (None, Costs { error: Some(error), skipped: amount::Skipped::default() }),
    };
    let lanes: HashSet<&str> = gateway
        .lanes
        .iter()
        .filter(|lane| account.providers.contains(&lane.provider_index))
        .map(|lane| &*lane.name)
        .collect();
    let Some(governance) = &gateway.governance else { return Err("no ledger: storage is off".into()) };
    let mut lines = Vec::new();
    let mut start = first;
    while start < end {
        let (day, _) = day_of(start);
        let query = TotalsQuery {
            by: SpendBy::Model,
            from_ms: start,
            to_ms: start + DAY_MS,
            key: None,
            groups: None,
            end_user: None,
        };
        let totals = governance.stores.ledger.totals(query).await.map_err(|err| format!("ledger: {err}"))?;
        let mut ledger: BTreeMap<String, Metered> = BTreeMap::new();
        for total in totals.iter().filter(|t| lanes.contains(t.lane.as_str())) {
            let Some(model) = &total.value else { continue };
            let t = &total.tokens;
            let metered = Metered {
                tokens: Counted { input: t.input, output: t.output, cache_read: t.cache_read, requests: t.requests },
                cost_nano: total.charge(gateway.price_of(&total.lane).as_ref()).cost_nano,
            };
            ledger.entry(model.clone()).or_default().add(&metered);
        }
        let of_day: Vec<(String, Counted)> =
            reported.iter().filter(|(d, _, _)| *d == day).map(|(_, m, c)| (m.clone(), *c)).collect();
        let billed_of_day: Option<Vec<(String, amount::PicoUsd)>> = billed
            .as_ref()
            .map(|rows| rows.iter().filter(|(d, _, _)| *d == day).map(|(_, m, pico)| (m.clone(), *pico)).collect());
        lines.extend(compare(account.kind.as_str(), &day, &ledger, &of_day, billed_of_day.as_deref(), tolerance));
        start += DAY_MS;
    }
    Ok((lines, costs))
}

/// Every page of one of the account's reports (`what`: `usage`, `cost`):
/// `url` of a page cursor, `read` of a page's body.
async fn pages<T>(
    gateway: &Gateway,
    account: &Account,
    what: &str,
    url: impl Fn(Option<&str>) -> String,
    read: impl Fn(&[u8]) -> Result<Page<T>, serde_json::Error>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    let mut page: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let url = url(page.as_deref());
        let body = gateway
            .hooks
            .get_with(&url, auth_headers(account)?, REPORT_TIMEOUT)
            .await
            .map_err(|err| format!("{}: {err}", switchyard_config::shown_url(&url)))?;
        let read = read(&body).map_err(|err| format!("the {what} report cannot be read: {err}"))?;
        out.extend(read.rows);
        match read.next_page {
            Some(next) if read.has_more => page = Some(next),
            _ => return Ok(out),
        }
    }
    Err(format!("the {what} report has more than {MAX_PAGES} pages"))
}

/// The report's URL for `[from_ms, to_ms)`, one bucket a day by model.
fn report_url(account: &Account, from_ms: i64, to_ms: i64, page: Option<&str>) -> String {
    let days = (to_ms - from_ms).div_euclid(DAY_MS).max(1);
    let mut url = match account.kind {
        AccountKind::OpenAi => format!(
            "{}/v1/organization/usage/completions?start_time={}&end_time={}&bucket_width=1d&group_by=model&limit={days}",
            account.base_url,
            from_ms / 1000,
            to_ms / 1000
        ),
        AccountKind::Anthropic => format!(
            "{}/v1/organizations/usage_report/messages?starting_at={}&ending_at={}&bucket_width=1d&group_by[]=model&limit={days}",
            account.base_url,
            rfc3339(from_ms),
            rfc3339(to_ms)
        ),
    };
    if let Some(scope) = &account.scope {
        let name = match account.kind {
            AccountKind::OpenAi => "project_ids",
            AccountKind::Anthropic => "workspace_ids[]",
        };
        url.push_str(&format!("&{name}={}", query_value(scope)));
    }
    if let Some(page) = page {
        url.push_str(&format!("&page={}", query_value(page)));
    }
    url
}

fn auth_headers(account: &Account) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, String> {
    let secret = |text: String| {
        let mut value =
            http::HeaderValue::try_from(text).map_err(|_| "the admin key is not a header value".to_owned())?;
        value.set_sensitive(true);
        Ok::<_, String>(value)
    };
    Ok(match account.kind {
        AccountKind::OpenAi => vec![(http::header::AUTHORIZATION, secret(format!("Bearer {}", account.admin_key))?)],
        AccountKind::Anthropic => vec![
            (http::HeaderName::from_static("x-api-key"), secret(account.admin_key.clone())?),
            (http::HeaderName::from_static("anthropic-version"), http::HeaderValue::from_static("2023-06-01")),
        ],
    })
}

/// Percent-encodes a query value (unreserved characters stay).
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(byte)),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `ms` as RFC 3339 in UTC, whole seconds.
fn rfc3339(ms: i64) -> String {
    let (day, start) = day_of(ms);
    let secs = (ms - start) / 1000;
    format!("{day}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// A page of a report, read: its rows (day first), and the next page's
/// cursor when there is one.
struct Page<T> {
    rows: Vec<T>,
    has_more: bool,
    next_page: Option<String>,
}

/// A usage report's row: day, model, tokens.
type UsageRow = (String, String, Counted);

/// A page of either vendor's usage or cost report: buckets by day, and the
/// cursor to the next page (shared by the usage and the cost readers).
#[derive(Deserialize)]
struct ReportPage<B> {
    data: Vec<B>,
    #[serde(default)]
    has_more: bool,
    next_page: Option<String>,
}

/// An OpenAI report's bucket of results `R`.
#[derive(Deserialize)]
#[serde(bound(deserialize = "R: Deserialize<'de>"))]
struct OpenAiBucket<R> {
    start_time: i64,
    /// `results` in the reference's examples, `result` in its schema.
    #[serde(default, alias = "result")]
    results: Vec<R>,
}

/// An Anthropic report's bucket of results `R`.
#[derive(Deserialize)]
#[serde(bound(deserialize = "R: Deserialize<'de>"))]
struct AnthropicBucket<R> {
    starting_at: String,
    #[serde(default)]
    results: Vec<R>,
}

#[derive(Deserialize)]
struct OpenAiResult {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_cached_tokens: u64,
    #[serde(default)]
    num_model_requests: u64,
    model: Option<String>,
}

/// A page of OpenAI's `GET /v1/organization/usage/completions`
/// (`input_tokens` counts cached tokens too).
fn read_openai(body: &[u8]) -> Result<Page<UsageRow>, serde_json::Error> {
    let page: ReportPage<OpenAiBucket<OpenAiResult>> = serde_json::from_slice(body)?;
    let rows = page
        .data
        .into_iter()
        .flat_map(|bucket| {
            let (day, _) = day_of(bucket.start_time.saturating_mul(1000));
            bucket.results.into_iter().map(move |r| {
                let counted = Counted {
                    input: r.input_tokens,
                    output: r.output_tokens,
                    cache_read: r.input_cached_tokens,
                    requests: r.num_model_requests,
                };
                (day.clone(), r.model.unwrap_or_else(|| "(all models)".to_owned()), counted)
            })
        })
        .collect();
    Ok(Page { rows, has_more: page.has_more, next_page: page.next_page })
}

#[derive(Deserialize, Default)]
struct CacheCreation {
    #[serde(default)]
    ephemeral_1h_input_tokens: u64,
    #[serde(default)]
    ephemeral_5m_input_tokens: u64,
}

#[derive(Deserialize)]
struct AnthropicResult {
    #[serde(default)]
    uncached_input_tokens: u64,
    #[serde(default)]
    cache_creation: Option<CacheCreation>,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    model: Option<String>,
}

/// A page of Anthropic's `GET /v1/organizations/usage_report/messages`:
/// input is its uncached, cache-write and cache-read tokens together, as
/// the ledger counts it.
fn read_anthropic(body: &[u8]) -> Result<Page<UsageRow>, serde_json::Error> {
    let page: ReportPage<AnthropicBucket<AnthropicResult>> = serde_json::from_slice(body)?;
    let rows = page
        .data
        .into_iter()
        .flat_map(|bucket| {
            let day = bucket.starting_at.get(..10).unwrap_or_default().to_owned();
            bucket.results.into_iter().map(move |r| {
                let writes = r.cache_creation.unwrap_or_default();
                let input = r
                    .uncached_input_tokens
                    .saturating_add(writes.ephemeral_5m_input_tokens)
                    .saturating_add(writes.ephemeral_1h_input_tokens)
                    .saturating_add(r.cache_read_input_tokens);
                let counted =
                    Counted { input, output: r.output_tokens, cache_read: r.cache_read_input_tokens, requests: 0 };
                (day.clone(), r.model.unwrap_or_else(|| "(all models)".to_owned()), counted)
            })
        })
        .collect();
    Ok(Page { rows, has_more: page.has_more, next_page: page.next_page })
}

/// `GET /api/v1/admin/reconciliation`'s query.
#[derive(Debug, Deserialize)]
pub struct ReconcileQuery {
    /// The first day: `YYYY-MM-DD`, RFC 3339 or Unix seconds (default: a
    /// week before `to`).
    pub from: Option<String>,
    /// The last day, likewise (default: today).
    pub to: Option<String>,
}

/// One provider, model and day.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReconcileLine {
    /// `openai` or `anthropic`.
    pub provider: String,
    /// The model, as the ledger names it.
    pub model: String,
    /// The UTC day.
    pub day: String,
    /// The ledger's input and output tokens.
    pub ledger_tokens: u64,
    /// The provider's.
    pub reported_tokens: u64,
    /// (reported − ledger) ÷ ledger: 0.03 is 3 % more billed than metered.
    pub drift: f64,
    /// Its size passed the tolerance.
    pub over: bool,
    /// What the ledger's tokens cost at the rate card (USD).
    pub ledger_usd: f64,
    /// The same, exactly: nano-USD.
    pub ledger_nano: u64,
    /// What the provider's cost report bills (USD; null when the cost
    /// report could not be read: see the run's `cost_error`).
    pub provider_usd: Option<f64>,
    /// The same, exactly: nano-USD.
    pub provider_nano: Option<u64>,
    /// (billed − ledger) ÷ ledger cost: 0.03 is 3 % more billed than the
    /// rate card prices (null with `provider_usd`).
    pub cost_drift: Option<f64>,
    /// Its size passed the tolerance.
    pub cost_over: bool,
    /// Both sides by kind.
    #[schema(value_type = Object)]
    pub ledger: Counted,
    /// Both sides by kind.
    #[schema(value_type = Object)]
    pub reported: Counted,
}

/// A provider's last run.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReconcileRun {
    /// The provider.
    pub provider: String,
    /// When it last ran (Unix ms).
    pub at: u64,
    /// Runs so far, and those that failed.
    pub runs: u64,
    /// Runs that failed.
    pub failures: u64,
    /// Why the last failed.
    pub error: Option<String>,
    /// Why the last run could not read the cost report (its lines have
    /// no cost drift).
    pub cost_error: Option<String>,
    /// The cost report's rows the last run left out, by reason
    /// (`negative`, `malformed`, `huge`, `currency`).
    #[schema(value_type = Object)]
    pub skipped: amount::Skipped,
}

/// `GET /api/v1/admin/reconciliation`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReconcileView {
    /// Whether `reconcile:` is set.
    pub configured: bool,
    /// The drift that alerts (a fraction).
    pub tolerance: f64,
    /// The days shown.
    pub from: String,
    /// The last day shown.
    pub to: String,
    /// Per provider, model and day.
    pub lines: Vec<ReconcileLine>,
    /// Each provider's last run.
    pub runs: Vec<ReconcileRun>,
}

/// A day bound from a query: `YYYY-MM-DD`, RFC 3339 or Unix seconds.
fn day_param(text: &str, path: &str) -> ApiResult<String> {
    let text = text.trim();
    let seconds = match text.len() == 10 && text.as_bytes().get(4) == Some(&b'-') {
        true => parse_time_text(&format!("{text}T00:00:00Z"), path)?,
        false => parse_time_text(text, path)?,
    };
    Ok(day_of(seconds.saturating_mul(1000)).0)
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/reconciliation",
    params(("from" = Option<String>, Query), ("to" = Option<String>, Query)),
    responses((status = 200, body = ReconcileView))
)]
pub(crate) async fn reconciliation(
    State(admin): State<Admin>,
    Query(query): Query<ReconcileQuery>,
) -> ApiResult<Json<ReconcileView>> {
    let gateway = &admin.gateway;
    let to = match &query.to {
        Some(text) => day_param(text, "to")?,
        None => day_of(now_ms() as i64).0,
    };
    let from = match &query.from {
        Some(text) => day_param(text, "from")?,
        None => {
            let to_ms = parse_time_text(&format!("{to}T00:00:00Z"), "to")?.saturating_mul(1000);
            day_of(to_ms - 6 * DAY_MS).0
        }
    };
    let book = &gateway.telemetry.reconciliation;
    let lines = book
        .lines(&from, &to)
        .into_iter()
        .map(|line| ReconcileLine {
            ledger_tokens: line.ledger.total(),
            reported_tokens: line.reported.total(),
            provider: line.provider,
            model: line.model,
            day: line.day,
            drift: line.drift,
            over: line.over,
            ledger_usd: switchyard_governance::money::usd(line.ledger_nano),
            ledger_nano: line.ledger_nano,
            provider_usd: line.reported_nano.map(switchyard_governance::money::usd),
            provider_nano: line.reported_nano,
            cost_drift: line.cost_drift,
            cost_over: line.cost_over,
            ledger: line.ledger,
            reported: line.reported,
        })
        .collect();
    let runs = book
        .runs()
        .into_iter()
        .map(|(provider, run)| ReconcileRun {
            provider,
            at: run.at,
            runs: run.runs,
            failures: run.failures,
            error: run.error,
            cost_error: run.cost_error,
            skipped: run.skipped,
        })
        .collect();
    let reconcile = gateway.config.reconcile.as_ref();
    Ok(Json(ReconcileView {
        configured: reconcile.is_some(),
        tolerance: reconcile.map_or(0.0, |r| r.tolerance),
        from,
        to,
        lines,
        runs,
    }))
}

/// `/metrics`: each provider's newest day's token and cost drift per model
/// (models the config's lanes name, so the labels stay the config's), the
/// runs, and the cost reports' rows left out.
pub(crate) fn encode_metrics(
    gateway: &Gateway,
    e: &mut prometheus_client::encoding::DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    use switchyard_telemetry::encode::{encode_counters, encode_gauges};
    if gateway.config.reconcile.is_none() {
        return Ok(());
    }
    let known: HashSet<&str> = gateway.lanes.iter().map(|lane| &*lane.wire_model).collect();
    let newest = gateway.telemetry.reconciliation.newest();
    encode_gauges(
        e,
        "switchyard_reconcile_drift_ratio",
        "A provider's usage report against the ledger on its newest day, per model: (reported - ledger) / ledger tokens.",
        newest
            .iter()
            .filter(|line| known.contains(line.model.as_str()))
            .map(|line| (vec![("provider", line.provider.as_str()), ("model", line.model.as_str())], line.drift)),
    )?;
    encode_gauges(
        e,
        "switchyard_reconcile_cost_drift_ratio",
        "A provider's cost report against the ledger's cost at the rate card on its newest day, per model: (billed - ledger) / ledger USD.",
        newest.iter().filter(|line| known.contains(line.model.as_str())).filter_map(|line| {
            let drift = line.cost_drift?;
            Some((vec![("provider", line.provider.as_str()), ("model", line.model.as_str())], drift))
        }),
    )?;
    let runs = gateway.telemetry.reconciliation.runs();
    let providers: Vec<(&'static str, u64, u64, amount::Skipped)> = [AccountKind::OpenAi, AccountKind::Anthropic]
        .into_iter()
        .filter_map(|kind| {
            runs.get(kind.as_str()).map(|run| (kind.as_str(), run.runs, run.failures, run.skipped_total))
        })
        .collect();
    encode_counters(
        e,
        "switchyard_reconcile_cost_rows_skipped",
        "Rows of the providers' cost reports left out, by reason: negative, malformed, huge (past a billion USD), currency (not USD).",
        providers.iter().flat_map(|(provider, _, _, skipped)| {
            skipped.by_reason().into_iter().map(move |(reason, n)| (vec![("provider", *provider), ("reason", reason)], n))
        }),
    )?;
    encode_counters(
        e,
        "switchyard_reconcile_runs",
        "Reconciliation runs per provider, by outcome.",
        providers.iter().flat_map(|&(provider, runs, failures, _)| {
            [
                (vec![("provider", provider), ("outcome", "read")], runs - failures.min(runs)),
                (vec![("provider", provider), ("outcome", "failed")], failures),
            ]
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example page of OpenAI's completions usage reference, grouped by model.
    const OPENAI_PAGE: &str = r#"{
      "object": "page",
      "data": [{
        "object": "bucket", "start_time": 1730419200, "end_time": 1730505600,
        "results": [{
          "object": "organization.usage.completions.result",
          "input_tokens": 1000, "output_tokens": 500, "input_cached_tokens": 800,
          "input_audio_tokens": 0, "output_audio_tokens": 0, "num_model_requests": 5,
          "project_id": null, "user_id": null, "api_key_id": null, "model": "gpt-4o-mini-2024-07-18", "batch": null
        }]
      }],
      "has_more": true,
      "next_page": "AAAAAGdGxdEiJdKOAAAAAGcqsYA="
    }"#;

    /// The example of Anthropic's messages usage report reference.
    const ANTHROPIC_PAGE: &str = r#"{
      "data": [{
        "starting_at": "2025-08-01T00:00:00Z", "ending_at": "2025-08-02T00:00:00Z",
        "results": [{
          "api_key_id": "apikey_01Rj2N8SVvo6BePZj99NhmiT",
          "cache_creation": { "ephemeral_1h_input_tokens": 1000, "ephemeral_5m_input_tokens": 500 },
          "cache_read_input_tokens": 200, "context_window": "0-200k", "model": "claude-sonnet-4-20250514",
          "output_tokens": 500, "server_tool_use": { "web_search_requests": 10 }, "service_tier": "standard",
          "uncached_input_tokens": 1500, "workspace_id": "wrkspc_01JwQvzr7rXLA5AGx3HKfFUJ"
        }]
      }],
      "has_more": false,
      "next_page": null
    }"#;

    #[test]
    fn openai_s_documented_page_is_read_by_day_and_model() {
        let page = read_openai(OPENAI_PAGE.as_bytes()).unwrap();
        assert!(page.has_more);
        assert_eq!(page.next_page.as_deref(), Some("AAAAAGdGxdEiJdKOAAAAAGcqsYA="));
        let (day, model, counted) = &page.rows[0];
        assert_eq!((day.as_str(), model.as_str()), ("2024-11-01", "gpt-4o-mini-2024-07-18"));
        assert_eq!((counted.input, counted.output, counted.cache_read, counted.requests), (1000, 500, 800, 5));
    }

    #[test]
    fn anthropic_s_documented_page_counts_every_input_kind() {
        let page = read_anthropic(ANTHROPIC_PAGE.as_bytes()).unwrap();
        assert!(!page.has_more);
        let (day, model, counted) = &page.rows[0];
        assert_eq!((day.as_str(), model.as_str()), ("2025-08-01", "claude-sonnet-4-20250514"));
        assert_eq!((counted.input, counted.output, counted.cache_read), (1500 + 500 + 1000 + 200, 500, 200));
    }

    #[test]
    fn a_drift_alert_says_which_drift_passed_the_tolerance() {
        assert_eq!(usd_text(55_620_000), "0.05562");
        assert_eq!(usd_text(1_000_000_000), "1.00");
        assert_eq!(usd_text(1), "0.000000001");
        let ledger = BTreeMap::from([(
            "gpt-4o".to_owned(),
            Metered { tokens: Counted { input: 1_000, output: 0, ..Counted::default() }, cost_nano: 54_000_000 },
        )]);
        let usage = [("gpt-4o".to_owned(), Counted { input: 1_100, output: 0, ..Counted::default() })];
        let billed = [("gpt-4o".to_owned(), amount::parse("5.562", amount::Unit::Cents).unwrap())];
        let line = &compare("openai", "d", &ledger, &usage, Some(&billed), 0.02)[0];
        assert_eq!(
            detail(line, 0.02),
            "tokens: openai reports 1100 where the ledger holds 1000 (+10.00%); \
             cost: openai bills $0.05562 where the ledger holds $0.054 (+3.00%) (tolerance 2.00%)"
        );
        // Only what passed is said: at 50 %, the tokens' -100 %, not the cost's +3 %.
        let line = &compare("openai", "d", &ledger, &[], Some(&billed), 0.5)[0];
        assert_eq!(
            detail(line, 0.5),
            "tokens: openai reports 0 where the ledger holds 1000 (-100.00%) (tolerance 50.00%)"
        );
    }

    #[test]
    fn report_urls_ask_for_days_by_model() {
        let account = |kind| Account {
            kind,
            base_url: "https://api.example".into(),
            admin_key: "k".into(),
            scope: Some("proj 1".into()),
            providers: Vec::new(),
        };
        let day = 1_765_065_600_000; // 2025-12-07
        let openai = report_url(&account(AccountKind::OpenAi), day, day + 2 * DAY_MS, Some("p/1"));
        assert_eq!(
            openai,
            "https://api.example/v1/organization/usage/completions?start_time=1765065600&end_time=1765238400&bucket_width=1d&group_by=model&limit=2&project_ids=proj%201&page=p%2F1"
        );
        let anthropic = report_url(&account(AccountKind::Anthropic), day, day + DAY_MS, None);
        assert_eq!(
            anthropic,
            "https://api.example/v1/organizations/usage_report/messages?starting_at=2025-12-07T00:00:00Z&ending_at=2025-12-08T00:00:00Z&bucket_width=1d&group_by[]=model&limit=1&workspace_ids[]=proj%201"
        );
    }
}
