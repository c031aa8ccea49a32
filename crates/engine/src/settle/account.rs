//! Settling a record: the budget reservation replaced by what the request
//! cost, the ledger rows (the request's, and a row for each attempt billed
//! apart: a hedge's cancelled loser, a continued stream's earlier parts),
//! and the kept text handed to the content writer under the row's entry.
//! The one place a ledger row is made.

use std::sync::Arc;

use switchyard_governance::money::Tokens;
use switchyard_ir::Usage;
use switchyard_state::governance::now_ms;
use switchyard_state::receipts::ReceiptQueue;
use switchyard_state::Gateway;
use switchyard_store::LedgerRow;

use super::{billed, next_entry, Record};

impl Record {
    /// Settles and queues the rows; returns the waits of those that found
    /// the queue full.
    pub(super) fn settle_queued(&mut self, status: u16) -> Vec<switchyard_state::governance::ledger::Waiting> {
        let (row, cancelled) = self.settle(status);
        let Some(queue) = self.gateway.governance.as_ref().and_then(|g| g.ledger.as_ref()) else {
            return Vec::new();
        };
        row.into_iter().chain(cancelled).filter_map(|row| queue.offer(row)).collect()
    }

    /// Settles and queues the rows without waiting.
    pub(super) fn settle_detached(&mut self, status: u16) {
        let (row, cancelled) = self.settle(status);
        if let Some(queue) = self.gateway.governance.as_ref().and_then(|g| g.ledger.as_ref()) {
            for row in row.into_iter().chain(cancelled) {
                queue.push_detached(row);
            }
        }
    }

    /// Everything but the ledger push; returns the ledger row, if any,
    /// and those of cancelled attempts.
    pub(super) fn settle(&mut self, status: u16) -> (Option<LedgerRow>, Vec<LedgerRow>) {
        if std::mem::replace(&mut self.done, true) {
            return (None, Vec::new());
        }
        let gone = self.caller_gone.as_ref().is_some_and(|gone| gone.load(std::sync::atomic::Ordering::Relaxed));
        let status = if gone { 499 } else { status };
        let gateway = self.gateway.clone();
        let total = self.started.elapsed();
        let bill = self.bill(&gateway);
        let side = self.side_bills(&gateway);
        let spent = || {
            side.iter().fold((bill.tokens.total(), bill.cost), |(tokens, cost), c| {
                (tokens.saturating_add(c.tokens.total()), cost.saturating_add(c.cost))
            })
        };
        if let (Some(governance), Some(run)) = (&gateway.governance, &self.run) {
            let (tokens, cost) = spent();
            governance.settle_run(run, cost, tokens);
        }
        if let (Some(governance), Some(reservation)) = (&gateway.governance, &self.reservation) {
            let (tokens, cost) = spent();
            // A hit is given back to the rate limits, unless the operator
            // counts hits (`cache.count_hits`).
            if self.cache_saved.is_some() && side.is_empty() && !gateway.config.cache.count_hits {
                governance.settle_hit(reservation);
            } else {
                governance.settle(reservation, tokens, cost);
            }
        }
        let names = match (&self.tool, &self.raw) {
            (Some(tool), _) => Names {
                pool: Some(Arc::from(tool.route.as_str())),
                lane: Some(tool.lane.clone()),
                key: self.caller.as_ref().map(|c| c.key.id.clone()),
            },
            (None, Some(raw)) => Names {
                pool: Some(raw.lane.clone()),
                lane: Some(raw.lane.clone()),
                key: self.caller.as_ref().map(|c| c.key.id.clone()),
            },
            (None, None) => Names {
                pool: self.pool.map(|p| gateway.pools[p].name.clone()),
                lane: bill.lane.map(|l| gateway.lanes[l].name.clone()),
                key: self.caller.as_ref().map(|c| c.key.id.clone()),
            },
        };
        self.count(&gateway, status, total);
        self.log(&gateway, &bill, &names, status, total);
        self.end_trace(&gateway, &bill, &names, status);
        self.feed_sinks(&gateway, &bill, &names, status, total);
        let receipts = gateway.governance.as_ref().and_then(|g| g.receipts.as_ref());
        let rows = side
            .into_iter()
            .filter_map(|c| {
                let row = self.side_row(&gateway, c, &names)?;
                if let Some(receipts) = receipts {
                    receipts.push(ReceiptQueue::draft(&row, None, None));
                }
                Some(row)
            })
            .collect();
        let served = self.served_as(self.usage.as_ref());
        let charge = self.charge(&gateway, bill.lane, &bill.tokens, served, bill.row_cost);
        let row = self.ledger_row(&gateway, bill.tokens, charge, &names, status);
        if let Some(row) = &row {
            self.hand_over_text(&gateway, row);
            if let (Some(receipts), true) = (receipts, self.admitted) {
                let said = self.said.take().map(|said| *said).unwrap_or_default();
                receipts.push(ReceiptQueue::draft(row, said.model, said.id));
            }
        }
        (row, rows)
    }

    /// The text the group keeps, to the content writer (which seals it),
    /// under the row's entry.
    pub(super) fn hand_over_text(&mut self, gateway: &Gateway, row: &LedgerRow) {
        let (Some(retained), Some(retention), Some(governance)) =
            (self.retained.take(), &gateway.retention, &gateway.governance)
        else {
            return;
        };
        governance.content.push(switchyard_state::retention::Pending {
            retention: retention.clone(),
            codec: gateway
                .codec_for(switchyard_ir::Operation::from_name(self.operation).unwrap_or_default(), self.ingress),
            captured: switchyard_state::retention::Captured {
                entry: row.entry,
                at_ms: row.at_ms,
                request_id: row.request_id.clone(),
                key_id: row.key_id.clone(),
                group: row.group.clone(),
                keeps: self.keeps,
                user: retained.user,
                request: retained.request,
                reply: retained.reply,
                stream: retained.stream,
            },
        });
    }

    /// What each side row cost: a cancelled attempt its prompt (the
    /// gateway's estimate), a continued stream's earlier part its usage,
    /// at its own lane's price. Their tokens reach the metrics here.
    pub(super) fn side_bills(&self, gateway: &Gateway) -> Vec<SideBill> {
        self.side
            .iter()
            .map(|side| {
                let tokens = match &side.usage {
                    None => Tokens { input: self.input_estimate, requests: 1, ..Tokens::default() },
                    Some(usage) => billed(usage, 0),
                };
                if let (Some(usage), true) = (&side.usage, gateway.telemetry.metrics_on) {
                    gateway.metrics.tokens(side.lane, usage);
                }
                let served = self.served_as(side.usage.as_ref());
                let cost =
                    gateway.lanes.get(side.lane).and_then(|l| l.card.as_ref()).map_or(0, |c| c.cost(&tokens, served));
                SideBill { side: side.clone(), tokens, cost }
            })
            .collect()
    }

    /// The ledger row of a side bill: its lane, its tokens, its status.
    pub(super) fn side_row(&self, gateway: &Gateway, bill: SideBill, names: &Names) -> Option<LedgerRow> {
        let served = self.served_as(bill.side.usage.as_ref());
        let charge = self.charge(gateway, Some(bill.side.lane), &bill.tokens, served, bill.cost);
        let mut row = self.ledger_row(gateway, bill.tokens, charge, names, bill.side.status)?;
        row.entry = next_entry();
        row.lane = gateway.lanes.get(bill.side.lane).map(|l| l.name.to_string()).unwrap_or_default();
        row.model = bill.side.wire_model.to_string();
        row.estimated = bill.side.estimated.is_some();
        row.ttfb_ms = None;
        row.failovers = 0;
        row.attempts = Vec::new();
        row.notes = switchyard_store::Notes { estimated: bill.side.estimated, ..switchyard_store::Notes::default() };
        Some(row)
    }

    /// What the request cost: the usage the reply reported at the serving
    /// lane's price, or (when the upstream took the request and its answer
    /// never came whole) the reservation.
    pub(super) fn bill(&mut self, gateway: &Gateway) -> Bill {
        if let Some(tool) = &self.tool {
            let tokens = Tokens { requests: u64::from(tool.billed), ..Tokens::default() };
            return Bill { tokens, cost: tool.cost_nano, row_cost: tool.cost_nano, lane: None };
        }
        if let Some(raw) = &self.raw {
            // What the reply stated, at the card of the model it named.
            let tokens = self.usage.as_ref().map_or_else(Tokens::default, |usage| billed(usage, 0));
            let cost = raw.card.as_ref().map_or(0, |card| card.cost(&tokens, self.served_as(self.usage.as_ref())));
            return Bill { tokens, cost, row_cost: cost, lane: None };
        }
        // A lane served it when usage came: only then are its units and
        // its request billed.
        let tokens = self.usage.as_ref().map_or_else(Tokens::default, |usage| billed(usage, self.units));
        let lane = self.served.as_ref().map(|(_, lane, _)| *lane);
        let served = self.served_as(self.usage.as_ref());
        let cost = lane.and_then(|l| gateway.lanes[l].card.as_ref()).map_or(0, |c| c.cost(&tokens, served));
        let reserved = self.reservation.as_ref().map(|hold| hold.reservation.estimate);
        match (self.usage.is_none() && self.at_reservation, reserved) {
            // No usage came: the reservation is the most it can have cost.
            (true, Some(estimate)) => {
                self.estimated = Some(super::Estimated::AnswerBroken);
                let input = self.input_estimate.min(estimate.tokens);
                let tokens = Tokens { input, output: estimate.tokens - input, ..Tokens::default() };
                // The row prices those tokens at its card; the budget keeps the reservation.
                let priced = lane.and_then(|l| gateway.lanes[l].card.as_ref()).map_or(0, |c| c.cost(&tokens, served));
                Bill { tokens, cost: estimate.cost, row_cost: priced, lane }
            }
            _ => Bill { tokens, cost, row_cost: cost, lane },
        }
    }

    /// How a request (or one of its side attempts, that used `usage`) was
    /// served, for its price: a batch line's, and the upstream's tier.
    fn served_as(&self, usage: Option<&Usage>) -> switchyard_governance::card::Served {
        switchyard_governance::card::Served { batch: self.batch_line, tier: usage.and_then(|u| u.service_tier) }
    }

    /// What else the ledger row records: a cache hit's saving, the
    /// guardrail decisions (named from the config's catalog of rules).
    pub(super) fn notes(&self, gateway: &Gateway) -> switchyard_store::Notes {
        let guardrails = self
            .guardrails
            .iter()
            .filter_map(|&(id, response)| {
                let (policy, rule, action) = gateway.metrics.guardrail_rules.get(id)?;
                let direction = if response { "response" } else { "request" };
                Some(format!("{policy}/{rule}/{action}/{direction}"))
            })
            .collect();
        switchyard_store::Notes {
            cache_saved_nano: self.cache_saved,
            guardrails,
            refused: None,
            tool: None,
            passthrough: None,
            estimated: self.estimated,
            service_tier: self.usage.and_then(|u| u.service_tier).map(|tier| tier.as_str().to_owned()),
            web_searches: self.usage.map(|u| u.web_searches).filter(|n| *n != 0),
        }
    }

    /// Every attempt, for the ledger, when there was more than one.
    pub(super) fn attempts(&self) -> Vec<switchyard_store::Attempt> {
        // A lone attempt that answered says nothing the row does not; a
        // failed one keeps what its upstream said.
        if self.earlier_attempts.is_empty() && self.last_attempt.as_ref().is_none_or(|a| a.failure.is_none()) {
            return Vec::new();
        }
        self.earlier_attempts
            .iter()
            .chain(&self.last_attempt)
            .map(|note| switchyard_store::Attempt {
                lane: self.gateway.lanes.get(note.lane).map(|l| l.name.to_string()).unwrap_or_default(),
                status: (note.status != 0).then_some(note.status),
                failure: note.failure.map(str::to_owned),
                ms: note.ms,
                error: note.error.as_deref().map(str::to_owned),
            })
            .collect()
    }

    /// What `tokens` served on `lane` as `served`, that `cost` what they
    /// cost, are charged to the caller's group: the nearest card on its
    /// chain naming the lane, else the nearest markup, else the cost
    /// (`Governance::price_of`). Fixed here, once, for the row to keep.
    pub(super) fn charge(
        &self,
        gateway: &Gateway,
        lane: Option<usize>,
        tokens: &Tokens,
        served: switchyard_governance::card::Served,
        cost: switchyard_governance::NanoUsd,
    ) -> switchyard_store::Charge {
        let price_nano = match &gateway.governance {
            Some(governance) => {
                let group = self.caller.as_ref().and_then(|c| c.key.record.group.as_deref());
                let lane = lane.and_then(|l| gateway.lanes.get(l)).map(|l| (&*l.name, &*l.provider));
                governance.price_of(group, lane, tokens, served, cost)
            }
            None => cost,
        };
        switchyard_store::Charge { cost_nano: cost, price_nano }
    }

    /// The ledger row of an admitted request, or of a refusal at the door
    /// (operation `refused`, never spend: see [`Record::refusal`]), when
    /// there is a ledger: its tokens, and what they cost and its group is
    /// charged for them ([`Record::charge`]).
    pub(super) fn ledger_row(
        &self,
        gateway: &Gateway,
        tokens: Tokens,
        charge: switchyard_store::Charge,
        names: &Names,
        status: u16,
    ) -> Option<LedgerRow> {
        let governance = gateway.governance.as_ref()?;
        governance.ledger.as_ref()?;
        let refused = match self.admitted {
            true => None,
            false => Some(self.refusal(status)?),
        };
        let mut notes = self.notes(gateway);
        notes.refused.clone_from(&refused);
        if let Some(tool) = &self.tool {
            notes.guardrails.extend(tool.decisions.iter().cloned());
            notes.tool = Some(tool.detail.clone());
        }
        if let Some(raw) = &self.raw {
            notes.passthrough =
                Some(switchyard_store::RawCall { method: raw.method.as_str().to_owned(), path: raw.path.clone() });
        }
        let group = self.caller.as_ref().and_then(|c| c.key.record.group.as_deref());
        let model = match (&self.tool, &self.raw) {
            (Some(tool), _) => tool.model.clone(),
            (None, Some(raw)) => raw.model.clone().unwrap_or_default(),
            (None, None) => self.served.as_ref().map(|(_, _, wire)| wire.to_string()).unwrap_or_default(),
        };
        Some(LedgerRow {
            entry: self.entry,
            at_ms: now_ms() as i64,
            request_id: self.request_id.to_str().unwrap_or("").to_owned(),
            key_id: names.key.as_deref().map(str::to_owned),
            group: group.map(str::to_owned),
            pool: names.pool.as_deref().unwrap_or("-").to_owned(),
            lane: names.lane.as_deref().unwrap_or("").to_owned(),
            model,
            operation: if refused.is_some() { switchyard_store::REFUSED } else { self.operation }.to_owned(),
            tokens,
            status,
            latency_ms: now_ms().saturating_sub(self.started_ms),
            ttfb_ms: self.ttfb.map(|t| t.as_millis() as u64),
            failovers: self.tool.as_ref().map_or(self.failovers, |t| t.failovers),
            estimated: self.estimated.is_some(),
            attempts: self.attempts(),
            notes,
            end_user: self.end_user.as_deref().map(str::to_owned),
            ingress: Some(if self.tool.is_some() { self.operation } else { self.ingress.as_str() }.to_owned()),
            stream: self.stream,
            charge: Some(charge),
        })
    }

    /// Why a request that was never admitted was refused, for its row in
    /// the request log: only a refusal the gateway made (a 4xx; past the
    /// log's rows a minute, the ledger's queue counts it on a shared row).
    pub(super) fn refusal(&self, status: u16) -> Option<switchyard_store::Refusal> {
        let kind = self.refusal?;
        if !(400..500).contains(&status) {
            return None;
        }
        Some(switchyard_store::Refusal {
            kind: serde_json::to_value(kind).ok()?.as_str()?.to_owned(),
            operation: self.operation.to_owned(),
            count: 1,
        })
    }
}

/// An attempt billed on a row of its own.
#[derive(Debug, Clone)]
pub(super) struct Side {
    pub(super) lane: usize,
    pub(super) wire_model: Arc<str>,
    /// What it used (`None`: a cancelled attempt, billed its prompt).
    pub(super) usage: Option<Usage>,
    pub(super) estimated: Option<super::Estimated>,
    /// The row's status: 499 cancelled, 206 a part of a continued answer.
    pub(super) status: u16,
}

/// What a side row cost.
pub(super) struct SideBill {
    pub(super) side: Side,
    pub(super) tokens: Tokens,
    pub(super) cost: switchyard_governance::NanoUsd,
}

/// What a finished request cost, and the lane it is billed to.
pub(super) struct Bill {
    pub(super) tokens: Tokens,
    /// What its budgets are settled with (a broken answer: its reservation).
    pub(super) cost: switchyard_governance::NanoUsd,
    /// What its ledger row costs: its tokens at its card.
    pub(super) row_cost: switchyard_governance::NanoUsd,
    pub(super) lane: Option<usize>,
}

/// The names a finished request is recorded under.
pub(super) struct Names {
    pub(super) pool: Option<Arc<str>>,
    pub(super) lane: Option<Arc<str>>,
    pub(super) key: Option<Arc<str>>,
}
