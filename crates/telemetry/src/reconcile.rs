//! What reconciliation found, kept for the admin API, `/metrics` and the
//! console, and which drifts were told: one alert per provider, model and
//! day whichever drift (tokens or cost) passed the tolerance, however
//! often the job runs again (the book is the process's, kept across
//! reloads).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use switchyard_governance::reconcile::amount::Skipped;
use switchyard_governance::reconcile::Line;

/// The most days kept per provider (older ones are forgotten).
const KEPT_DAYS: usize = 62;

/// The reconciliation book.
#[derive(Debug, Default)]
pub struct Reconciliation {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// (provider, day, model) → line.
    lines: BTreeMap<(String, String, String), Line>,
    /// The lines already alerted on.
    told: HashSet<(String, String, String)>,
    /// Each provider's last run: (Unix ms, error if it failed).
    runs: BTreeMap<String, Run>,
}

/// How a run read its provider's cost report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Costs {
    /// Why it could not be read (`None`: read).
    pub error: Option<String>,
    /// Its rows left out, by reason.
    pub skipped: Skipped,
}

/// A provider's last run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    /// When it ran (Unix ms).
    pub at: u64,
    /// Runs so far.
    pub runs: u64,
    /// Runs that failed so far.
    pub failures: u64,
    /// Why the last failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the last run's cost report could not be read, if it could not
    /// (its lines then have no cost drift).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_error: Option<String>,
    /// The cost report's rows the last run left out, by reason.
    pub skipped: Skipped,
    /// The same over every run so far.
    pub skipped_total: Skipped,
}

impl Reconciliation {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `provider`'s lines of a run at `now_ms` (each replacing the
    /// same provider, day and model's) and how its cost report was read;
    /// returns those with a drift over the tolerance not yet told, which
    /// are told from now on.
    pub fn publish(&self, provider: &str, lines: Vec<Line>, costs: Costs, now_ms: u64) -> Vec<Line> {
        let mut inner = self.inner();
        let mut fresh = Vec::new();
        for line in lines {
            let key = (line.provider.clone(), line.day.clone(), line.model.clone());
            if line.alerting() && inner.told.insert(key.clone()) {
                fresh.push(line.clone());
            }
            inner.lines.insert(key, line);
        }
        let mut days: Vec<String> =
            inner.lines.keys().filter(|(p, _, _)| p == provider).map(|(_, day, _)| day.clone()).collect();
        days.dedup();
        if days.len() > KEPT_DAYS {
            let cut = days[days.len() - KEPT_DAYS].clone();
            inner.lines.retain(|(p, day, _), _| p != provider || *day >= cut);
            inner.told.retain(|(p, day, _)| p != provider || *day >= cut);
        }
        let run = inner.runs.entry(provider.to_owned()).or_default();
        run.at = now_ms;
        run.runs += 1;
        run.error = None;
        run.cost_error = costs.error;
        run.skipped = costs.skipped;
        run.skipped_total.add(&costs.skipped);
        fresh
    }

    /// Notes that `provider`'s run at `now_ms` failed.
    pub fn failed(&self, provider: &str, error: String, now_ms: u64) {
        let mut inner = self.inner();
        let run = inner.runs.entry(provider.to_owned()).or_default();
        run.at = now_ms;
        run.runs += 1;
        run.failures += 1;
        run.error = Some(error);
    }

    /// The lines of days in `[from, to]` (`YYYY-MM-DD`), by provider, day
    /// and model.
    pub fn lines(&self, from: &str, to: &str) -> Vec<Line> {
        self.inner().lines.values().filter(|l| l.day.as_str() >= from && l.day.as_str() <= to).cloned().collect()
    }

    /// Each provider's newest day's lines (for `/metrics`).
    pub fn newest(&self) -> Vec<Line> {
        let inner = self.inner();
        let mut newest: BTreeMap<&str, &str> = BTreeMap::new();
        for (provider, day, _) in inner.lines.keys() {
            let at = newest.entry(provider.as_str()).or_insert(day.as_str());
            if day.as_str() > *at {
                *at = day.as_str();
            }
        }
        inner
            .lines
            .iter()
            .filter(|((p, d, _), _)| newest.get(p.as_str()) == Some(&d.as_str()))
            .map(|(_, l)| l.clone())
            .collect()
    }

    /// Each provider's last run.
    pub fn runs(&self) -> BTreeMap<String, Run> {
        self.inner().runs.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_governance::reconcile::Counted;

    fn line(day: &str, drift: f64, cost_drift: f64) -> Line {
        Line {
            provider: "openai".into(),
            model: "gpt-4o".into(),
            day: day.into(),
            ledger: Counted::default(),
            reported: Counted::default(),
            drift,
            over: drift > 0.02,
            ledger_nano: 0,
            reported_nano: Some(0),
            cost_drift: Some(cost_drift),
            cost_over: cost_drift > 0.02,
        }
    }

    #[test]
    fn a_drift_is_told_once_per_provider_model_and_day() {
        let book = Reconciliation::default();
        let read = Costs::default;
        assert_eq!(book.publish("openai", vec![line("2026-12-06", 0.03, 0.0)], read(), 1).len(), 1);
        // The cost drifting too that day is not told again.
        assert!(book.publish("openai", vec![line("2026-12-06", 0.04, 0.05)], read(), 2).is_empty());
        // A cost drift alone is told.
        assert_eq!(book.publish("openai", vec![line("2026-12-07", 0.0, 0.03)], read(), 3).len(), 1);
        assert_eq!(book.lines("2026-12-06", "2026-12-06")[0].drift, 0.04);
        assert_eq!(book.newest().len(), 1);
        assert_eq!(book.runs()["openai"].runs, 3);
    }

    #[test]
    fn a_run_keeps_how_its_cost_report_was_read() {
        let book = Reconciliation::default();
        let mut skipped = Skipped::default();
        skipped.count(switchyard_governance::reconcile::amount::Skip::Currency);
        book.publish("anthropic", Vec::new(), Costs { error: None, skipped }, 1);
        book.publish("anthropic", Vec::new(), Costs { error: Some("403".into()), skipped }, 2);
        let run = &book.runs()["anthropic"];
        assert_eq!((run.cost_error.as_deref(), run.skipped.currency, run.skipped_total.currency), (Some("403"), 1, 2));
        assert!(run.error.is_none());
    }
}
