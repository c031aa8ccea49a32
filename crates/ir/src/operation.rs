//! The operations a lane serves beyond chat, and the IR of the ones that
//! translate between protocols: embeddings (several inputs, in order, each
//! turned into one vector) and rerank (documents scored against a query).
//! Like chat, each protocol reads its wire form into these types and writes
//! them back; what a writer cannot say is reported as `Dropped`.

use serde::{Deserialize, Serialize};

use crate::Extra;

/// What a request asks for, by the route it comes to, and (but for token
/// counting, which chat lanes answer) what a lane and so a pool serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Chat.
    #[default]
    Chat,
    /// Embeddings.
    Embed,
    /// Rerank.
    Rerank,
    /// Moderation.
    Moderation,
    /// Image generation.
    Image,
    /// Text to speech.
    Speech,
    /// Speech to text.
    Transcription,
    /// A chat request's token count: asked of chat lanes (counted by the
    /// gateway where the lane's protocol cannot count), never billed.
    CountTokens,
    /// OpenAI's legacy text completion (`/v1/completions`): asked of chat
    /// lanes, as it came of an OpenAI lane and as a chat request of any
    /// other.
    Completion,
    /// A Realtime session (`/v1/realtime`, a WebSocket): relayed to a lane
    /// of the OpenAI protocol, each generation on it admitted and billed.
    Realtime,
    /// A Gemini Live session (`BidiGenerateContent`, a WebSocket): relayed
    /// to a lane of the Gemini protocol, each generation on it admitted and
    /// billed.
    Live,
}

impl Operation {
    /// Every operation, in a fixed order (dense indexes for counters).
    pub const ALL: [Operation; 11] = [
        Operation::Chat,
        Operation::Embed,
        Operation::Rerank,
        Operation::Moderation,
        Operation::Image,
        Operation::Speech,
        Operation::Transcription,
        Operation::CountTokens,
        Operation::Completion,
        Operation::Realtime,
        Operation::Live,
    ];

    /// Its position in [`Operation::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The config and label name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Chat => "chat",
            Operation::Embed => "embed",
            Operation::Rerank => "rerank",
            Operation::Moderation => "moderation",
            Operation::Image => "image",
            Operation::Speech => "speech",
            Operation::Transcription => "transcription",
            Operation::CountTokens => "count_tokens",
            Operation::Completion => "completion",
            Operation::Realtime => "realtime",
            Operation::Live => "live",
        }
    }

    /// The operation called `name` (in config, a ledger row, a label).
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.as_str() == name)
    }

    /// The operation of the lanes that answer it: chat's for a token count
    /// and a legacy completion.
    pub fn lane(self) -> Operation {
        match self {
            Operation::CountTokens | Operation::Completion => Operation::Chat,
            other => other,
        }
    }

    /// Whether a lane of `protocol` can serve this operation: chat
    /// everywhere; embeddings on OpenAI, Gemini, Cohere and Bedrock
    /// (`InvokeModel`); rerank on Cohere, Bedrock and OpenAI-compatible
    /// rerank servers; images on OpenAI, Gemini (Imagen `:predict`) and
    /// Bedrock (`InvokeModel`); Live sessions on Gemini; the rest on OpenAI only. The codec registry's test
    /// holds every codec to this table.
    pub fn served_by(self, protocol: crate::Protocol) -> bool {
        use crate::Protocol::{Bedrock, Cohere, Gemini, OpenAi};
        match self {
            Operation::Chat | Operation::CountTokens | Operation::Completion => true,
            Operation::Embed => matches!(protocol, OpenAi | Gemini | Cohere | Bedrock),
            Operation::Rerank => matches!(protocol, Cohere | Bedrock | OpenAi),
            Operation::Image => matches!(protocol, OpenAi | Gemini | Bedrock),
            Operation::Moderation | Operation::Speech | Operation::Transcription | Operation::Realtime => {
                protocol == OpenAi
            }
            Operation::Live => protocol == Gemini,
        }
    }

    /// The OpenTelemetry GenAI `gen_ai.operation.name`.
    pub fn genai_name(self) -> &'static str {
        match self {
            Operation::Chat => "chat",
            Operation::Embed => "embeddings",
            Operation::Rerank => "rerank",
            Operation::Moderation => "moderation",
            Operation::Image => "generate_image",
            Operation::Speech => "text_to_speech",
            Operation::Transcription => "speech_to_text",
            Operation::CountTokens => "count_tokens",
            Operation::Completion => "text_completion",
            Operation::Realtime => "realtime",
            Operation::Live => "live",
        }
    }

    /// Whether it is a chat request to a chat lane (a legacy completion
    /// is one in another shape): what the chat path's stages apply to.
    pub fn is_chat(self) -> bool {
        matches!(self, Operation::Chat | Operation::Completion)
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the embedded text is for: vendors embed a query and a document
/// differently, and some ask which it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputType {
    /// A search query (Cohere `search_query`, Gemini `RETRIEVAL_QUERY`).
    Query,
    /// A document to search (Cohere `search_document`, Gemini `RETRIEVAL_DOCUMENT`).
    Document,
    /// Text to classify.
    Classification,
    /// Text to cluster.
    Clustering,
    /// Text compared for similarity (Gemini `SEMANTIC_SIMILARITY`).
    Similarity,
}

/// What a vendor does with an input longer than the model takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Truncate {
    /// Refuse it.
    None,
    /// Cut its start.
    Start,
    /// Cut its end.
    End,
}

/// How the vectors come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// JSON numbers.
    #[default]
    Float,
    /// Base64 of little-endian float32s.
    Base64,
}

/// One of Cohere's quantised forms of a vector (its `embedding_types`
/// beyond float), which only Cohere's models make: Cohere's API and its
/// models on Bedrock. A lane of another protocol reports it unsent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantized {
    /// Signed bytes, -128 to 127, one a dimension.
    Int8,
    /// Unsigned bytes, 0 to 255, one a dimension.
    Uint8,
    /// Signed bytes, eight dimensions a byte.
    Binary,
    /// Unsigned bytes, eight dimensions a byte.
    Ubinary,
}

impl Quantized {
    /// Every form, in Cohere's order.
    pub const ALL: [Quantized; 4] = [Quantized::Int8, Quantized::Uint8, Quantized::Binary, Quantized::Ubinary];

    /// Cohere's name of it.
    pub fn as_str(self) -> &'static str {
        match self {
            Quantized::Int8 => "int8",
            Quantized::Uint8 => "uint8",
            Quantized::Binary => "binary",
            Quantized::Ubinary => "ubinary",
        }
    }

    /// The form Cohere calls `name`.
    pub fn parse(name: &str) -> Option<Quantized> {
        Quantized::ALL.into_iter().find(|form| form.as_str() == name)
    }
}

/// An embeddings request: inputs in order, each embedded to one vector.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EmbedRequest {
    /// The model or pool the caller named.
    pub model: String,
    /// The texts, in order.
    pub inputs: Vec<String>,
    /// The vector size asked for.
    pub dimensions: Option<u32>,
    /// What the texts are for.
    pub input_type: Option<InputType>,
    /// What to do with an input longer than the model takes.
    pub truncate: Option<Truncate>,
    /// How the caller wants the vectors.
    pub encoding: Encoding,
    /// The quantised forms the caller wants too (Cohere's), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quantized: Vec<Quantized>,
    /// A title for the documents (Gemini).
    pub title: Option<String>,
    /// The end user.
    pub user: Option<String>,
    /// Which of its protocol's request forms the caller used (Gemini's one
    /// `content`, Bedrock's Titan or Cohere body, Cohere's embedding
    /// types), so the reply takes the same form.
    pub form: Option<String>,
    /// Fields outside the model, by protocol.
    pub extra: Extra,
}

/// An embeddings reply: one vector per input, in input order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EmbedResponse {
    /// The model that answered.
    pub model: String,
    /// The vectors, exactly as the lane produced them, in input order.
    pub vectors: Vec<Vector>,
    /// Prompt tokens the vendor counted, when it says.
    pub input_tokens: Option<u64>,
    /// Each quantised form the lane made, its vectors in input order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quantized: Vec<(Quantized, Vec<Vec<i64>>)>,
}

impl EmbedResponse {
    /// `other` appended after this one (a batch split into several calls).
    pub fn extend(&mut self, other: EmbedResponse) {
        if self.model.is_empty() {
            self.model = other.model;
        }
        self.vectors.extend(other.vectors);
        for (form, vectors) in other.quantized {
            match self.quantized.iter_mut().find(|(mine, _)| *mine == form) {
                Some((_, mine)) => mine.extend(vectors),
                None => self.quantized.push((form, vectors)),
            }
        }
        self.input_tokens = match (self.input_tokens, other.input_tokens) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
    }
}

/// One embedding. A lane's JSON array of numbers is carried as the bytes
/// it wrote (`Json`): a translation copies it, byte for byte, and never
/// reads the numbers; the gateway holds numbers (`Floats`) only where it
/// made them (base64 decoded, the vendor fake).
#[derive(Debug, Clone)]
pub enum Vector {
    /// Numbers the gateway holds.
    Floats(Vec<f64>),
    /// A JSON array of numbers as the lane wrote it.
    Json(Box<serde_json::value::RawValue>),
}

impl Vector {
    /// A vector from a JSON value as a reply carries it: an array of
    /// numbers, kept as its bytes. `None` for anything but an array.
    pub fn from_json(raw: Box<serde_json::value::RawValue>) -> Option<Vector> {
        raw.get().starts_with('[').then_some(Vector::Json(raw))
    }

    /// Its numbers (read from the bytes of a `Json` vector: only for base64
    /// the caller asked for, and for comparisons).
    pub fn floats(&self) -> Result<std::borrow::Cow<'_, [f64]>, serde_json::Error> {
        match self {
            Vector::Floats(floats) => Ok(std::borrow::Cow::Borrowed(floats)),
            Vector::Json(raw) => serde_json::from_str::<Vec<f64>>(raw.get()).map(std::borrow::Cow::Owned),
        }
    }
}

impl From<Vec<f64>> for Vector {
    fn from(floats: Vec<f64>) -> Vector {
        Vector::Floats(floats)
    }
}

/// Two vectors are equal when their numbers are.
impl PartialEq for Vector {
    fn eq(&self, other: &Vector) -> bool {
        match (self, other) {
            (Vector::Json(a), Vector::Json(b)) if a.get() == b.get() => true,
            _ => matches!((self.floats(), other.floats()), (Ok(a), Ok(b)) if a == b),
        }
    }
}

impl PartialEq<Vec<f64>> for Vector {
    fn eq(&self, other: &Vec<f64>) -> bool {
        self.floats().is_ok_and(|floats| *floats == **other)
    }
}

/// Written as a JSON array of numbers: a `Json` vector's own bytes.
impl Serialize for Vector {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Vector::Floats(floats) => floats.serialize(serializer),
            Vector::Json(raw) => raw.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Vector {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vector, D::Error> {
        Vec::<f64>::deserialize(deserializer).map(Vector::Floats)
    }
}

/// A document to rerank: text, or an object the caller sent whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Document {
    /// Plain text.
    Text(String),
    /// A structured document (its text is what is ranked; the object comes back).
    Object(serde_json::Map<String, serde_json::Value>),
}

impl Document {
    /// The text a ranker reads: the text itself, or the object's `text`
    /// member (else the object as JSON).
    pub fn text(&self) -> String {
        match self {
            Document::Text(text) => text.clone(),
            Document::Object(object) => match object.get("text").and_then(|t| t.as_str()) {
                Some(text) => text.to_owned(),
                None => serde_json::Value::Object(object.clone()).to_string(),
            },
        }
    }
}

/// A rerank request: documents scored against a query.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RerankRequest {
    /// The model or pool the caller named.
    pub model: String,
    /// The query.
    pub query: String,
    /// The documents, in order.
    pub documents: Vec<Document>,
    /// How many results to return (all when unset).
    pub top_n: Option<u32>,
    /// Whether each result carries its document.
    pub return_documents: bool,
    /// Fields outside the model, by protocol.
    pub extra: Extra,
}

/// One ranked document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// The document's position in the request.
    pub index: usize,
    /// Its relevance, exactly as the lane scored it.
    pub score: f64,
}

/// A rerank reply: results, most relevant first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RerankResponse {
    /// The reply's id.
    pub id: String,
    /// The model that answered.
    pub model: String,
    /// The results, most relevant first.
    pub results: Vec<Ranked>,
    /// Search units billed, when the vendor says.
    pub search_units: Option<u64>,
}
