//! Gemini's ingress: the model and the action share the path's last
//! segment (`models/gemini-2.5-flash:streamGenerateContent`), the action
//! decides the operation and streaming, and `alt=sse` the framing. Vertex
//! AI's express mode (an API key, no project) names models under
//! `publishers/google/`: google-genai's `generate_images` goes only there.

use switchyard_codec::ingress::{Action, Asks, FramingFrom, Ingress, Key, Model, Route, Sample, Serves, Stream};
use switchyard_codec::Framing;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation};

/// The paths Gemini's SDKs post to.
pub static INGRESS: Ingress = Ingress {
    routes: &ROUTES,
    owns: |path| PREFIXES.iter().any(|prefix| path.starts_with(prefix)),
    stream_endpoints: "POST .../models/{model}:generateContent answers whole; :streamGenerateContent streams",
    keeps_conversations: false,
    key: Key::header("x-goog-api-key", "x-goog-api-key (or ?key=)"),
    sample: Sample { chat_path: "/v1beta/models/{model}:generateContent", headers: &[] },
    signing: switchyard_codec::lineage::Signing::reads(Some(switchyard_codec::lineage::Signer::Gemini))
        .taking(switchyard_codec::lineage::Lineage { gemini: true, ..switchyard_codec::lineage::Lineage::NONE }),
    trace_system: "gcp.gemini",
};

const PREFIXES: [&str; 4] =
    ["/v1/models/", "/v1beta/models/", "/v1/publishers/google/models/", "/v1beta1/publishers/google/models/"];

const ROUTES: [Route; 4] = [
    route("/v1/models/{*target}", Serves::Callers),
    route("/v1beta/models/{*target}", Serves::Both),
    route("/v1/publishers/google/models/{*target}", Serves::Callers),
    route("/v1beta1/publishers/google/models/{*target}", Serves::Both),
];

const fn route(path: &'static str, serves: Serves) -> Route {
    Route {
        path,
        asks: Asks::Action,
        model: Model::Action(split),
        stream: Stream::Action,
        framing: FramingFrom::Query { pair: "alt=sse", present: Framing::Sse, absent: Framing::JsonArray },
        form: false,
        same_path: false,
        serves,
    }
}

/// Splits `MODEL:ACTION` at its last colon (the router cannot split inside
/// a segment) and says what the action asks.
pub fn split(target: &str) -> Result<(&str, Action), ErrorInfo> {
    let Some((model, action)) = target.rsplit_once(':') else {
        return Err(ErrorInfo::new(
            ErrorKind::NotFound,
            format!("`{target}` names no action; use MODEL:generateContent or MODEL:streamGenerateContent"),
        ));
    };
    let (operation, stream) = match action {
        "generateContent" => (Operation::Chat, false),
        "streamGenerateContent" => (Operation::Chat, true),
        "countTokens" => (Operation::CountTokens, false),
        "embedContent" | "batchEmbedContents" => (Operation::Embed, false),
        // Imagen's image generation.
        "predict" => (Operation::Image, false),
        other => {
            return Err(ErrorInfo::new(
                ErrorKind::NotFound,
                format!(
                    "action `{other}` is not supported; use generateContent, streamGenerateContent, \
                     countTokens, embedContent, batchEmbedContents or predict"
                ),
            ))
        }
    };
    Ok((model, Action { operation, stream }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_after_the_last_colon_decides() {
        let (model, action) = split("tunedModels/a:b:streamGenerateContent").unwrap();
        assert_eq!(model, "tunedModels/a:b");
        assert_eq!(action, Action { operation: Operation::Chat, stream: true });
        assert_eq!(split("m:countTokens").unwrap().1.operation, Operation::CountTokens);
        assert_eq!(split("m:predict").unwrap().1.operation, Operation::Image);
        assert_eq!(split("m:batchEmbedContents").unwrap().1, Action { operation: Operation::Embed, stream: false });
    }

    #[test]
    fn a_missing_or_unknown_action_is_not_found() {
        for target in ["gemini-2.5-flash", "m:deleteEverything", "m:", ""] {
            let err = split(target).unwrap_err();
            assert_eq!(err.kind, ErrorKind::NotFound, "{target}");
        }
    }
}
