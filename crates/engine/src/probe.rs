//! Active probes of tripped lanes (opt-in per provider). A probe only runs
//! while a breaker is open; its success moves the breaker to half-open,
//! where the next real request is the single trial, so a probe never
//! competes with it.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderValue;
use switchyard_ir::{EmbedRequest, Operation};
use switchyard_state::{Gateway, Lane};

use crate::send::{collect, send_to_lane, Outgoing};

/// Starts one probe loop per provider that enabled `health_probe`.
pub fn spawn_probes(gateway: &Arc<Gateway>) {
    for (provider, config) in gateway.config.providers.iter().enumerate() {
        let Some(interval) = config.probe_interval else { continue };
        // A probe loop ends with its gateway: a config reload replaces it.
        let gateway = Arc::downgrade(gateway);
        switchyard_tasks::service("lane probe", async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Some(gateway) = gateway.upgrade() else { return };
                probe_provider(&gateway, provider).await;
            }
        });
    }
}

/// Probes every lane of `provider` that has an open breaker in some pool.
pub async fn probe_provider(gateway: &Gateway, provider: usize) {
    for (index, lane) in gateway.lanes.iter().enumerate() {
        if lane.provider_index != provider {
            continue;
        }
        let open: Vec<(usize, usize)> = open_breakers(gateway, index);
        if open.is_empty() {
            continue;
        }
        let healthy = probe(gateway, lane).await;
        tracing::info!(lane = %lane.name, healthy, "health probe");
        if healthy {
            for (pool, member) in open {
                gateway.pools[pool].breaker(member).record_probe_success();
            }
        }
    }
}

fn open_breakers(gateway: &Gateway, lane: usize) -> Vec<(usize, usize)> {
    let mut open = Vec::new();
    for (pool_index, pool) in gateway.pools.iter().enumerate() {
        for (member, &member_lane) in pool.members.iter().enumerate() {
            if member_lane == lane && pool.breaker(member).is_open() {
                open.push((pool_index, member));
            }
        }
    }
    open
}

/// Sends a one-token probe to `lane`; true when a 2xx reply arrived whole
/// within the lane's response-headers timeout (a probe whose body hangs is
/// not a healthy lane, and must not hang the probe loop).
pub async fn probe(gateway: &Gateway, lane: &Lane) -> bool {
    let Some((body, path)) = probe_request(gateway, lane) else {
        // Nothing cheap to ask: the breaker's cooldown brings the lane back.
        return false;
    };
    let request_id = HeaderValue::from_static("switchyard-health-probe");
    let out = Outgoing {
        wire_model: &lane.wire_model,
        stream: false,
        request_id: &request_id,
        caller_key: None,
        traceparent: None,
        operation: lane.operation,
        path: path.as_deref(),
        content_type: None,
        caller: None,
    };
    let exchange = async {
        let response = send_to_lane(gateway, lane, out, body).await.ok()?;
        let ok = response.status.is_success();
        // Read it whole: the connection goes back to the pool, and a body
        // that never comes is a failed probe.
        collect(response.body).await.ok()?;
        Some(ok)
    };
    tokio::time::timeout(lane.timeouts.response_headers, exchange).await.ok().flatten().unwrap_or(false)
}

/// The cheapest request of the lane's operation (one token of chat, one
/// word to embed) and its path; `None` for an operation whose every call
/// costs real money (images, speech, transcription).
fn probe_request(gateway: &Gateway, lane: &Lane) -> Option<(Bytes, Option<String>)> {
    let codec = gateway.codec(lane.protocol);
    match lane.operation {
        Operation::Chat => {
            let request = switchyard_codec::probe_request(&lane.wire_model);
            Some((Bytes::from(codec.write_request(&request).body), None))
        }
        Operation::Embed => {
            let embed = codec.embed()?;
            let request = EmbedRequest {
                model: lane.wire_model.to_string(),
                inputs: vec!["ping".to_owned()],
                ..EmbedRequest::default()
            };
            Some((Bytes::from(embed.write_request(&request).body), Some(embed.upstream_path(&lane.wire_model))))
        }
        _ => None,
    }
}
