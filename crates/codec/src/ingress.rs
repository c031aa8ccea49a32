//! A protocol's ingress as data: the paths a caller posts to, what each
//! asks for, where the model, the stream flag and the framing come from,
//! and which of the protocol's paths an error must be written in. Each
//! protocol crate exports one [`Ingress`]; the HTTP surface builds its
//! routes from these tables and names no protocol. Grammar a table cannot
//! say (Gemini's `model:action`, Bedrock's `InvokeModel` body) is a
//! function the protocol crate names in its table.

use crate::Framing;
use switchyard_ir::{ErrorInfo, Operation};

/// Every path of one protocol's ingress.
#[derive(Debug)]
pub struct Ingress {
    /// The routes, in the HTTP router's path syntax (`{name}`, `{*target}`).
    /// Every ingress route takes POST.
    pub routes: &'static [Route],
    /// Whether a data-plane path is one of this protocol's (an error the
    /// listener or router writes itself is then in this protocol).
    pub owns: fn(&str) -> bool,
    /// The endpoints that decide streaming, told to a body whose `stream`
    /// contradicts its endpoint (empty when the body decides).
    pub stream_endpoints: &'static str,
    /// The protocol's conversations may be stored by the gateway (the
    /// Responses API's `store` and `previous_response_id`).
    pub keeps_conversations: bool,
    /// How the protocol's SDKs send a caller's key.
    pub key: Key,
    /// The chat request the console's playground sends in this protocol.
    pub sample: Sample,
    /// What its readers make of signed reasoning, and whose its lanes take
    /// back (a conversation carrying signed state is pinned by it).
    pub signing: crate::lineage::Signing,
    /// The vendor as OpenTelemetry's GenAI conventions name it
    /// (`gen_ai.provider.name` of an attempt at a lane of this protocol).
    pub trace_system: &'static str,
}

/// How a protocol's SDKs send a caller's key.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The header the playground writes the key in (`authorization`
    /// takes `Bearer <key>`; any other header the key alone).
    pub header: &'static str,
    /// What a request that presents no key is told to send, in the
    /// protocol's terms (`x-api-key`, `Authorization: Bearer`...).
    pub hint: &'static str,
}

impl Key {
    /// `Authorization: Bearer <key>`, as OpenAI's SDKs send it.
    pub const BEARER: Key = Key { header: "authorization", hint: "Authorization: Bearer" };

    /// The key written in `header` alone, the hint naming `hint`.
    pub const fn header(header: &'static str, hint: &'static str) -> Key {
        Key { header, hint }
    }

    /// Whether the key goes in `Authorization` as a bearer token.
    pub fn is_bearer(&self) -> bool {
        self.header.eq_ignore_ascii_case("authorization")
    }
}

/// The chat request the playground sends: where, and the headers the
/// protocol's SDK adds to every request.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// The chat path, `{model}` standing for the pool (one path segment,
    /// percent-encoded by the writer).
    pub chat_path: &'static str,
    /// Headers the SDK always sends (Anthropic's `anthropic-version`).
    pub headers: &'static [(&'static str, &'static str)],
}

impl Sample {
    /// The chat path with `model` (already one encoded segment) in place.
    pub fn path(&self, model: &str) -> String {
        self.chat_path.replace("{model}", model)
    }
}

/// One ingress route.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The path, in the router's syntax.
    pub path: &'static str,
    /// What the route asks for.
    pub asks: Asks,
    /// Where the caller names its model or pool.
    pub model: Model,
    /// Where the stream flag comes from.
    pub stream: Stream,
    /// How a stream from this route is framed.
    pub framing: FramingFrom,
    /// The body is a multipart form (audio), not JSON.
    pub form: bool,
    /// The lane is asked at this same path (OpenAI's own operations).
    pub same_path: bool,
    /// Who is served at this path: the gateway's callers, the vendor's
    /// (the vendor fake answers it), or both.
    pub serves: Serves,
}

/// Who a route's path is served to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// The gateway's callers and the vendor's (the fake answers it too).
    Both,
    /// Only the gateway's callers (a pool in the path, an ad-hoc lane, a
    /// second version prefix).
    Callers,
    /// Only the vendor's: the fake answers it, the gateway does not.
    Vendor,
}

impl Serves {
    /// The gateway serves this path.
    pub fn callers(self) -> bool {
        self != Serves::Vendor
    }

    /// The vendor (and so the fake) serves this path.
    pub fn vendor(self) -> bool {
        self != Serves::Callers
    }
}

/// What a route asks for.
#[derive(Debug, Clone, Copy)]
pub enum Asks {
    /// Always this operation.
    Op(Operation),
    /// The body says (Bedrock's `InvokeModel`).
    Body(fn(&[u8]) -> Result<Operation, ErrorInfo>),
    /// The path's action says (see [`Model::Action`]).
    Action,
}

/// Where a route finds the model or pool the caller named.
#[derive(Debug, Clone, Copy)]
pub enum Model {
    /// The body's `model` field.
    Body,
    /// The route's one path parameter (the body's `model` is ignored).
    Path,
    /// An ad-hoc lane: the path's `{provider}` and `{model}`.
    Direct,
    /// The route's one path parameter holds the model and an action
    /// (`gemini-2.5-flash:generateContent`), split by this function.
    Action(Split),
}

/// Splits a path's `model:action` target into the model and what the action
/// asks; an unknown or missing action is refused (404, in the protocol).
pub type Split = fn(&str) -> Result<(&str, Action), ErrorInfo>;

/// What a path's action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    /// The operation.
    pub operation: Operation,
    /// Whether the answer streams.
    pub stream: bool,
}

/// Where a route's stream flag comes from.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// The body's `stream` member (absent: whole).
    Body,
    /// The endpoint decides; a body that says otherwise is refused.
    Endpoint(bool),
    /// The path's action decides, as the endpoint does.
    Action,
}

/// Where a route's stream framing comes from.
#[derive(Debug, Clone, Copy)]
pub enum FramingFrom {
    /// Always this framing.
    Fixed(Framing),
    /// `pair` among the query's `&`-separated pairs picks `present`, else
    /// `absent` (Gemini's `alt=sse`).
    Query { pair: &'static str, present: Framing, absent: Framing },
}

impl FramingFrom {
    /// The framing for a request with this raw query.
    pub fn framing(self, query: Option<&str>) -> Framing {
        match self {
            FramingFrom::Fixed(framing) => framing,
            FramingFrom::Query { pair, present, absent } => {
                if query.is_some_and(|q| q.split('&').any(|p| p == pair)) {
                    present
                } else {
                    absent
                }
            }
        }
    }
}

impl Route {
    /// A route whose body names the model and the stream flag (SSE).
    pub const fn body(path: &'static str, operation: Operation) -> Route {
        Route {
            path,
            asks: Asks::Op(operation),
            model: Model::Body,
            stream: Stream::Body,
            framing: FramingFrom::Fixed(Framing::Sse),
            form: false,
            same_path: false,
            serves: Serves::Both,
        }
    }

    /// The same route, served to the gateway's callers only.
    pub const fn callers_only(self) -> Route {
        Route { serves: Serves::Callers, ..self }
    }

    /// The same route, served by the vendor only (the fake answers it).
    pub const fn vendor_only(self) -> Route {
        Route { serves: Serves::Vendor, ..self }
    }
}

/// Whether `path` is exactly one of the paths `routes` serve to callers
/// (for a protocol whose routes have no parameters).
pub fn is_route(routes: &[Route], path: &str) -> bool {
    routes.iter().any(|route| route.serves.callers() && route.path == path)
}
