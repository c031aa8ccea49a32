//! PLACEHOLDER: the Cohere codec is being written.
use http::{HeaderName, HeaderValue};
use switchyard_codec::{
    ir, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

/// The Cohere codec.
pub struct CohereCodec;

impl Codec for CohereCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::Cohere
    }
    fn read_request(&self, _body: &[u8]) -> Result<ir::Request, DecodeError> {
        Err(DecodeError::Json("todo".into()))
    }
    fn write_request(&self, _r: &ir::Request) -> Encoded {
        Encoded::default()
    }
    fn read_response(&self, _body: &[u8]) -> Result<ir::Response, DecodeError> {
        Err(DecodeError::Json("todo".into()))
    }
    fn write_response(&self, _r: &ir::Response) -> Encoded {
        Encoded::default()
    }
    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        unimplemented!()
    }
    fn stream_encoder(&self, _f: Framing) -> Box<dyn StreamEncoder> {
        unimplemented!()
    }
    fn upstream_path(&self, _model: &str, _stream: bool) -> String {
        String::new()
    }
    fn auth_headers(
        &self,
        _c: &Credentials,
        _o: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        Ok(Vec::new())
    }
    fn extract_error(&self, status: u16, _body: &[u8]) -> RawUpstreamError {
        RawUpstreamError {
            status,
            kind: ir::ErrorKind::from_status(status),
            vendor_type: None,
            vendor_code: None,
            message: String::new(),
        }
    }
    fn error_response(&self, e: &ir::ErrorInfo) -> ErrorResponse {
        ErrorResponse {
            status: e.status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}
