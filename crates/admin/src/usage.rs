//! Usage over time: spend, tokens, requests, cache hits, guardrail
//! decisions and refusals per key, group, end user,
//! model, lane or operation in hourly or daily steps over a range, for the
//! console's charts. Each step is one spend question, whole hours read
//! from the ledger's hourly rollup (end users from the rows); the values
//! that spent most over the range get a series each, the rest are summed
//! as `other`.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use switchyard_governance::money::usd;
use switchyard_store::TotalsQuery;
use utoipa::ToSchema;

use crate::shared::*;
use switchyard_state::governance::now_ms;

/// `GET /api/v1/admin/usage` query.
#[derive(Debug, Deserialize)]
pub struct UsageQuery {
    /// `key` (default), `group`, `user` (end user), `model`, `lane` or `operation`.
    pub by: Option<String>,
    /// `hour` or `day` (default: hour for a range of 2 days or less).
    pub step: Option<String>,
    /// From: RFC 3339 or Unix seconds (default: 24 hours ago).
    pub from: Option<String>,
    /// To, exclusive (default: the end of this hour).
    pub to: Option<String>,
    /// Series kept (default 8, at most 20); the rest are `other`.
    pub top: Option<usize>,
    /// Only this key's requests.
    pub key: Option<String>,
}

/// One value's figures per step.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageSeries {
    /// The key id, group, model, lane or operation (`other`: the rest;
    /// absent: requests without one).
    pub value: Option<String>,
    /// The key's name, by key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its figures, step by step.
    #[serde(flatten)]
    pub steps: Steps,
}

/// Usage over a range, step by step.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageReport {
    /// The dimension.
    pub by: String,
    /// Seconds per step.
    pub step_seconds: i64,
    /// Each step's start (Unix seconds).
    pub starts: Vec<i64>,
    /// The series, most spent first.
    pub series: Vec<UsageSeries>,
}

/// One value's figures, step by step.
#[derive(Debug, Serialize, ToSchema)]
pub struct Steps {
    /// USD per step, at today's rate card.
    pub usd: Vec<f64>,
    /// Tokens (in and out) per step.
    pub tokens: Vec<u64>,
    /// Requests per step (refusals are not requests).
    pub requests: Vec<u64>,
    /// USD response-cache hits saved per step.
    pub saved_usd: Vec<f64>,
    /// Requests answered from the response cache per step.
    pub cache_hits: Vec<u64>,
    /// Guardrail decisions per step.
    pub guarded: Vec<u64>,
    /// Refusals at the door (keys, limits, budgets, policies) per step.
    pub refused: Vec<u64>,
}

impl Steps {
    fn new(width: usize) -> Steps {
        Steps {
            usd: vec![0.0; width],
            tokens: vec![0; width],
            requests: vec![0; width],
            saved_usd: vec![0.0; width],
            cache_hits: vec![0; width],
            guarded: vec![0; width],
            refused: vec![0; width],
        }
    }

    /// USD and requests over the whole range, for ranking.
    fn spent(&self) -> (f64, u64) {
        (self.usd.iter().sum(), self.requests.iter().sum())
    }

    fn add(&mut self, other: &Steps) {
        for at in 0..self.usd.len() {
            self.usd[at] += other.usd[at];
            self.tokens[at] += other.tokens[at];
            self.requests[at] += other.requests[at];
            self.saved_usd[at] += other.saved_usd[at];
            self.cache_hits[at] += other.cache_hits[at];
            self.guarded[at] += other.guarded[at];
            self.refused[at] += other.refused[at];
        }
    }
}

/// The most steps one question reads (a month of days, or 4 days of hours).
const MAX_STEPS: i64 = 96;

#[utoipa::path(get, path = "/api/v1/admin/usage",
    params(("by" = Option<String>, Query, description = "key, group, user, model, lane or operation"),
        ("step" = Option<String>, Query, description = "hour or day"), ("from" = Option<String>, Query),
        ("to" = Option<String>, Query), ("top" = Option<usize>, Query), ("key" = Option<String>, Query, description = "only this key's requests")),
    responses((status = 200, body = UsageReport)))]
pub(crate) async fn usage(
    State(admin): State<Admin>,
    axum::Extension(actor): axum::Extension<Actor>,
    Query(query): Query<UsageQuery>,
) -> ApiResult<Json<UsageReport>> {
    let governance = governance(&admin)?;
    // By end user each step reads the ledger's rows (the rollup keeps no
    // end user): the steps' time bounds keep each read to its hour or day.
    let by = spend_by(query.by.as_deref().unwrap_or("key"))?;
    let now = (now_ms() / 1000) as i64;
    let to = query.to.as_deref().map(|t| parse_time_text(t, "to")).transpose()?.unwrap_or((now / 3600 + 1) * 3600);
    let from = query.from.as_deref().map(|t| parse_time_text(t, "from")).transpose()?.unwrap_or(to - 86_400);
    if from >= to {
        return Err(bad("from: must be before to"));
    }
    let step = match query.step.as_deref() {
        Some("hour") => 3_600,
        Some("day") => 86_400,
        None if to - from <= 2 * 86_400 => 3_600,
        None => 86_400,
        Some(other) => return Err(bad(format!("step: `{other}` is not hour or day"))),
    };
    // Steps start on whole hours or days (UTC), so each reads the rollup.
    let first = from.div_euclid(step) * step;
    let steps = (to - first + step - 1) / step;
    if steps > MAX_STEPS {
        return Err(bad(format!("{steps} steps: at most {MAX_STEPS}; use a shorter range or step=day")));
    }
    let top = query.top.unwrap_or(8).clamp(1, 20);
    let starts: Vec<i64> = (0..steps).map(|i| first + i * step).collect();
    let mut lines: HashMap<Option<String>, Steps> = HashMap::new();
    let width = starts.len();
    for (at, &start) in starts.iter().enumerate() {
        let question = TotalsQuery {
            by,
            from_ms: start * 1000,
            to_ms: (start + step) * 1000,
            key: query.key.clone(),
            // A tenant admin's steps read its subtree's rows alone.
            groups: crate::reports::scoped_groups(governance, &actor, None),
            end_user: None,
        };
        for total in governance.stores.ledger.totals(question).await? {
            let line = lines.entry(total.value.clone()).or_insert_with(|| Steps::new(width));
            line.usd[at] += usd(total.charge(admin.gateway.price_of(&total.lane).as_ref()).cost_nano);
            line.tokens[at] += total.tokens.input + total.tokens.output;
            line.requests[at] += total.requests;
            line.saved_usd[at] += usd(total.saved_nano);
            line.cache_hits[at] += total.outcomes.cache_hits;
            line.guarded[at] += total.outcomes.guarded;
            line.refused[at] += total.outcomes.refused;
        }
    }
    let mut ranked: Vec<(Option<String>, Steps)> = lines.into_iter().collect();
    ranked.sort_by(|a, b| {
        let (a_usd, a_requests) = a.1.spent();
        let (b_usd, b_requests) = b.1.spent();
        b_usd.total_cmp(&a_usd).then(b_requests.cmp(&a_requests)).then_with(|| a.0.cmp(&b.0))
    });
    let mut series = Vec::new();
    let mut other: Option<Steps> = None;
    for (index, (value, line)) in ranked.into_iter().enumerate() {
        if index < top {
            let name = key_name(governance, by, value.as_deref()).filter(|_| {
                let key = value.as_deref().and_then(|id| governance.key(id));
                key.is_some_and(|k| crate::tenancy::reaches_key(governance, &actor, &k.record))
            });
            series.push(UsageSeries { value, name, steps: line });
        } else {
            other.get_or_insert_with(|| Steps::new(width)).add(&line);
        }
    }
    if let Some(rest) = other {
        series.push(UsageSeries { value: Some("other".into()), name: None, steps: rest });
    }
    let by = format!("{by:?}").to_lowercase();
    Ok(Json(UsageReport { by, step_seconds: step, starts, series }))
}
