//! The policy stages: request policy after admission (a stage may rewrite
//! the call, or end it with an answer in the caller's protocol) and
//! response policy on every answer's head, whatever produced it. Each runs
//! the gateway's stages (`Gateway::stages`) in order; with none configured
//! they cost one empty loop. Guardrails join here.

use http::Response;
use switchyard_ir::ErrorInfo;
use switchyard_state::call::Call;
use switchyard_state::stage::Verdict;
use switchyard_state::Gateway;

use crate::render::ResponseBody;

/// Runs every stage's request policy; the first that ends the request
/// gives the caller's answer.
pub(crate) async fn request(gateway: &Gateway, call: &mut Call) -> Result<(), ErrorInfo> {
    for stage in &gateway.stages {
        let Some(verdict) = stage.on_request(call) else { continue };
        if let Verdict::Answer(info) = verdict.await {
            tracing::info!(request_id = ?call.request_id, stage = stage.name(), "a stage ended the request");
            return Err(info);
        }
    }
    Ok(())
}

/// Runs every stage's response policy on `response`'s head.
pub(crate) fn response(gateway: &Gateway, call: &Call, response: Response<ResponseBody>) -> Response<ResponseBody> {
    if gateway.stages.is_empty() {
        return response;
    }
    let (mut head, body) = response.into_parts();
    for stage in &gateway.stages {
        stage.on_response(call, &mut head);
    }
    Response::from_parts(head, body)
}
