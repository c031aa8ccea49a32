//! What a settled request tells operators besides the ledger: the metrics,
//! the access line, the trace and the request-log sinks.

use std::time::Duration;

use switchyard_state::governance::now_ms;
use switchyard_state::Gateway;
use switchyard_telemetry::access::Line;
use switchyard_telemetry::sink::SinkRecord;
use switchyard_telemetry::trace::Summary;

use super::account::{Bill, Names};
use super::{millis, Record};

impl Record {
    /// The request in the metrics.
    pub(super) fn count(&self, gateway: &Gateway, status: u16, total: Duration) {
        // An MCP call is counted by the MCP gateway's own series, not as a
        // request of a protocol.
        if !gateway.telemetry.metrics_on || self.tool.is_some() {
            return;
        }
        for &(rule, response) in &self.guardrails {
            gateway.metrics.guardrail(rule, response);
        }
        let member = self.served.as_ref().filter(|(slot, _, _)| Some(slot.pool) == self.pool).map(|(s, _, _)| s.member);
        let place = gateway.metrics.place(self.pool, member);
        gateway.metrics.request(place, self.ingress, status, total, self.ttfb);
        if let (Some((_, lane, _)), Some(usage)) = (&self.served, &self.usage) {
            gateway.metrics.tokens(*lane, usage);
        }
    }

    /// The access line.
    pub(super) fn log(&self, gateway: &Gateway, bill: &Bill, names: &Names, status: u16, total: Duration) {
        let Some(access) = &gateway.telemetry.access else { return };
        access.write(&Line {
            request_id: self.request_id.to_str().unwrap_or(""),
            key: names.key.as_deref().unwrap_or("-"),
            ingress: self.ingress.as_str(),
            pool: names.pool.as_deref().unwrap_or("-"),
            lane: names.lane.as_deref().unwrap_or("-"),
            status,
            stream: self.stream,
            input_tokens: bill.tokens.input,
            output_tokens: bill.tokens.output,
            usd: switchyard_governance::money::usd(bill.cost),
            ttfb: self.ttfb,
            total,
            failovers: self.failovers,
            estimated: self.estimated.is_some(),
        });
    }

    /// The request's trace, when it is sampled.
    pub(super) fn end_trace(&mut self, gateway: &Gateway, bill: &Bill, names: &Names, status: u16) {
        let (Some(trace), Some(tracer)) = (self.trace.take(), &gateway.telemetry.tracer) else { return };
        tracer.finish(
            trace,
            Summary {
                ingress: self.ingress.as_str(),
                operation: self.operation,
                pool: names.pool.clone(),
                lane: names.lane.clone(),
                provider: bill.lane.map(|l| gateway.codec(gateway.lanes[l].protocol).ingress().trace_system),
                response_model: self.served.as_ref().map(|(_, _, wire)| wire.clone()),
                usage: self.usage.is_some().then_some((bill.tokens.input, bill.tokens.output)),
                finish_reason: self.stop_reason,
                failovers: self.failovers,
                status,
            },
        );
    }

    /// The newest requests' text (for the console) and the request-log sinks.
    pub(super) fn feed_sinks(&mut self, gateway: &Gateway, bill: &Bill, names: &Names, status: u16, total: Duration) {
        let telemetry = &gateway.telemetry;
        // Only a request with a ledger row has a detail to show its text.
        let has_row = self.admitted && gateway.governance.as_ref().is_some_and(|g| g.ledger.is_some());
        if let (Some(recent), true) = (&telemetry.recent_text, has_row) {
            recent.keep(self.entry, self.request_body.as_ref(), self.response_body.as_ref());
        }
        let Some(sinks) = &telemetry.sinks else { return };
        let tokens = &bill.tokens;
        sinks.push(SinkRecord {
            at_ms: now_ms(),
            request_id: self.request_id.to_str().unwrap_or("").to_owned(),
            key_id: names.key.as_deref().map(str::to_owned),
            ingress: self.ingress.as_str(),
            pool: names.pool.as_deref().map(str::to_owned),
            lane: names.lane.as_deref().map(str::to_owned),
            model: self.served.as_ref().map(|(_, _, wire)| wire.to_string()),
            status,
            stream: self.stream,
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cache_read_tokens: tokens.cache_read,
            cache_write_tokens: tokens.cache_write,
            usd: switchyard_governance::money::usd(bill.cost),
            ttfb_ms: self.ttfb.map(millis),
            total_ms: millis(total),
            failovers: self.failovers,
            estimated: self.estimated.is_some(),
            request_body: self.request_body.take(),
            response_body: self.response_body.take(),
        });
    }
}
