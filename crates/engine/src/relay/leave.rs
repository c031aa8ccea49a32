//! A stream whose caller went away before it ended: closed at once, read
//! on briefly for a whole answer's usage, or read to its end
//! (`on_disconnect`), then settled with what the upstream reported or an
//! estimate of what was delivered.

use std::time::Duration;

use http_body_util::BodyExt;
use switchyard_config::OnDisconnect;
use tokio::time::Instant;

use super::{StreamRelay, TERMINATOR_GRACE};
use crate::env::Env;
use crate::exchange::Exchange;
use crate::filter::ReplyCx;
use crate::settle::Estimated;

impl StreamRelay {
    /// The caller went away before the stream ended. Under `on_disconnect:
    /// cancel` (the default) the upstream stream is closed at once, which
    /// stops its generation, unless its answer is whole and only its usage
    /// is still to come (it is read on for that, at most
    /// [`TERMINATOR_GRACE`]); under `finish` it is read to its end, at most
    /// the lane's request timeout. Either way with no caller, on a task of
    /// its own; then the record settles with what the upstream reported, or
    /// an estimate from what was delivered, marked so.
    pub(super) fn abandon(self) {
        if self.progress.settled {
            return;
        }
        let finish =
            self.gateway.pools.get(self.x.pool).is_some_and(|p| p.failover.on_disconnect == OnDisconnect::Finish);
        let usage_to_come = self.answered() && self.tally.usage.output_tokens == 0 && !self.source.decoder.usage_seen();
        let bound = match (finish, usage_to_come) {
            _ if self.progress.done || self.tally.ended() => None,
            (true, _) => Some(
                self.gateway
                    .lanes
                    .iter()
                    .find(|l| l.name == self.source.lane)
                    .map_or(TERMINATOR_GRACE, |l| l.timeouts.request),
            ),
            (false, true) => Some(TERMINATOR_GRACE),
            (false, false) => None,
        };
        match (bound, tokio::runtime::Handle::try_current()) {
            (Some(bound), Ok(runtime)) => {
                switchyard_tasks::work_on(&runtime, self.drain(bound));
            }
            _ => self.settle_abandoned(),
        }
    }

    /// Reads the upstream on with no caller, tallying its usage, until it
    /// ends or `bound` passes; then settles.
    async fn drain(mut self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while !self.tally.ended() {
            let frame = match tokio::time::timeout_at(deadline, self.source.upstream.frame()).await {
                Ok(Some(Ok(frame))) => frame,
                _ => break,
            };
            let Ok(data) = frame.into_data() else { continue };
            self.events.clear();
            if self.source.decoder.feed(&data, &mut self.events).is_err() {
                break;
            }
            for event in &self.events {
                self.tally.push(event);
            }
        }
        self.events.clear();
        let _ = self.source.decoder.finish(&mut self.events);
        for event in &self.events {
            self.tally.push(event);
        }
        self.settle_abandoned();
    }

    /// A stream whose caller left, billed for what the upstream reported,
    /// else an estimate from the prompt and the deltas that reached the
    /// caller (marked estimated); the filters' end hooks run (their
    /// futures dropped: there is no caller to wait for).
    fn settle_abandoned(mut self) {
        self.progress.settled = true;
        let env = Env::of(&self.gateway);
        let Exchange { call, record, filters, .. } = &mut self.x;
        filters.abandon(&mut ReplyCx { env, call, record, part: self.tally.usage });
        let record = &mut self.x.record;
        let (usage, estimated) = self.tally.delivered(record.input_estimate(), Estimated::CallerLeft);
        let status = if self.tally.failed { 502 } else { 499 };
        if let Some(reason) = self.tally.stop_reason {
            record.stop_reason(reason.as_str());
        }
        record.record_usage(usage, estimated);
        record.finish_detached(status);
    }
}
