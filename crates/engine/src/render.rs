//! What the engine writes on every answer: the response headers it adds
//! (`x-request-id`, the lane that served) and every error it writes itself,
//! rendered once, in the caller's own protocol, with no side effect.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use switchyard_codec::Codec;
use switchyard_ir::ErrorInfo;
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use switchyard_transport::{full_body, BoxError};

// Header names built at compile time (a name built at run time is parsed each time).
pub(crate) const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub(crate) const X_AMZN_ERRORTYPE: HeaderName = HeaderName::from_static("x-amzn-errortype");
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(crate) const X_SWITCHYARD_ESTIMATED: HeaderName = HeaderName::from_static("x-switchyard-estimated");
pub(crate) const X_SWITCHYARD_USAGE: HeaderName = HeaderName::from_static("x-switchyard-usage");
pub(crate) const X_SWITCHYARD_BILLING: HeaderName = HeaderName::from_static("x-switchyard-billing");
pub(crate) const X_SWITCHYARD_LANE: HeaderName = HeaderName::from_static("x-switchyard-lane");
pub(crate) const X_SWITCHYARD_PROVIDER: HeaderName = HeaderName::from_static("x-switchyard-provider");
pub(crate) const X_SWITCHYARD_ROUTE_POLICY: HeaderName = HeaderName::from_static("x-switchyard-route-policy");
/// Why a budget sent the call to a cheaper pool: `<trigger>; bucket=<whose
/// budget>; from=<the name the call gave>`.
pub(crate) const X_SWITCHYARD_DOWNGRADE: HeaderName = HeaderName::from_static("x-switchyard-downgrade");
pub(crate) const X_SWITCHYARD_ROUTE_TARGET: HeaderName = HeaderName::from_static("x-switchyard-route-target");
pub(crate) const X_SWITCHYARD_SESSION: HeaderName = HeaderName::from_static("x-switchyard-session");

/// The body type of every response the engine writes.
pub type ResponseBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

pub(crate) fn common_headers(headers: &mut HeaderMap, call: &Call) {
    headers.insert(X_REQUEST_ID, call.request_id.clone());
    if let Some(session) = &call.session {
        headers.insert(X_SWITCHYARD_SESSION, session.clone());
    }
}

pub(crate) fn lane_headers(headers: &mut HeaderMap, lane: &HeaderValue, provider: &HeaderValue) {
    headers.insert(X_SWITCHYARD_LANE, lane.clone());
    headers.insert(X_SWITCHYARD_PROVIDER, provider.clone());
}

/// An error written by the gateway, in the caller's protocol.
pub(crate) fn error_response(gateway: &Gateway, call: &Call, info: &ErrorInfo) -> Response<ResponseBody> {
    let mut response = render_error(gateway.codec_for(call.operation, call.ingress), info);
    common_headers(response.headers_mut(), call);
    response
}

/// Renders `info` as `codec`'s protocol error response.
pub fn render_error(codec: &dyn Codec, info: &ErrorInfo) -> Response<ResponseBody> {
    let rendered = codec.error_response(info);
    let mut builder =
        Response::builder().status(StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if let Some(headers) = builder.headers_mut() {
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in rendered.headers {
            headers.insert(name, value);
        }
    }
    builder.body(full_body(rendered.body)).unwrap_or_else(|_| internal_error())
}

pub(crate) fn internal_error() -> Response<ResponseBody> {
    let mut response = Response::new(
        Full::new(Bytes::from_static(b"{\"error\":\"internal error\"}")).map_err(|never| match never {}).boxed_unsync(),
    );
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// A whole reply for the caller, and the headers it adds (a content type
/// other than JSON, a token count a protocol carries in a header).
pub(crate) struct Whole {
    pub(crate) body: Bytes,
    pub(crate) headers: HeaderMap,
}
