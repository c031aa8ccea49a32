//! The cache stages: lookup after request policy (an answer a stage keeps
//! stands in for routing the request) and store of a whole reply as the
//! caller gets it. They run the gateway's stages (`Gateway::stages`); with
//! none configured they cost one empty loop. The response cache joins here.

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt;
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use crate::render::{common_headers, ResponseBody};

/// The first stage's stored answer for `call`, if any.
pub(crate) async fn lookup(gateway: &Gateway, call: &Call) -> Option<Response<ResponseBody>> {
    for stage in &gateway.stages {
        let Some(found) = stage.lookup(call) else { continue };
        if let Some(stored) = found.await {
            let mut response =
                stored.map(|body| http_body_util::Full::new(body).map_err(|never| match never {}).boxed_unsync());
            common_headers(response.headers_mut(), call);
            return Some(response);
        }
    }
    None
}

/// Offers a whole reply, as the caller gets it, to every stage.
pub(crate) fn store(gateway: &Gateway, call: &Call, reply: &Bytes) {
    for stage in gateway.stages.iter() {
        stage.store(call, reply);
    }
}
