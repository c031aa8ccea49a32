//! The call's IR: read from the caller's body once, on first use, by
//! whichever stage needs it first (the plan's lineage check, the send
//! step's translation, the signature restore), and shared after.

use switchyard_ir::{ErrorInfo, ErrorKind, Request};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

/// The call's IR, read from the caller's body on first use.
pub(crate) fn read_once<'t>(
    gateway: &Gateway,
    call: &Call,
    translated: &'t mut Option<Request>,
) -> Result<&'t mut Request, ErrorInfo> {
    if translated.is_none() {
        let mut request = gateway.codec(call.ingress).read_request(&call.body).map_err(|err| err.to_error_info())?;
        request.stream = call.stream;
        *translated = Some(request);
    }
    translated.as_mut().ok_or_else(|| ErrorInfo::new(ErrorKind::Internal, "request was not translated"))
}
