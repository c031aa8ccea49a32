//! What the vendor fake refuses of a model, as the vendor's reference says
//! its model refuses it, so a translation that sends a model what it does
//! not take fails a test with the vendor's own 400. The rules are written
//! here from the vendors' pages, apart from the gateway's model facts, so
//! a wrong fact is caught rather than agreed with:
//! - OpenAI's reasoning models (o-series, gpt-5 and later: "Reasoning
//!   models" guide, limitations) refuse `temperature`, `top_p` and the
//!   penalties while they reason, and take only their own effort levels
//!   (API reference, `reasoning_effort`: o-series low to high, gpt-5
//!   minimal to high, gpt-5.1 none to high, gpt-5-pro high);
//! - OpenAI's models on Bedrock take `reasoning_effort` (low to high), and
//!   no Anthropic `thinking` ("extraneous key");
//! - a Bedrock model that is not Claude takes no `anthropic_beta` among
//!   the fields Bedrock hands it (`additionalModelRequestFields`): only
//!   Claude's request parameters list the key, and a model refuses a key
//!   its parameters do not have ("extraneous key");
//! - xAI's reasoning models refuse the penalties and stop sequences (xAI's
//!   reasoning guide);
//! - Claude (Anthropic's API, and on Bedrock) takes a `system` message
//!   inside `messages` only on the models Anthropic's "Mid-conversation
//!   system messages" page lists (Fable 5 and 5.1, Mythos 5 and 5.1, Opus
//!   4.8, Opus 5; not Sonnet 5): another answers the API's own 400,
//!   `messages: Unexpected role "system"...`; and from the 4.6 models on
//!   refuses an assistant turn last (the 4.6 migration notes, "prefill
//!   removal");
//! - Claude while it thinks takes
//!   `temperature` 1 only, no `top_k`, a `top_p` from 0.95, a budget from
//!   1,024 tokens under `max_tokens`, and no forced tool; Claude Opus 4.1
//!   and the 4.5 generation on take `temperature` or `top_p`, not both
//!   (Anthropic's extended thinking guide, and the models' migration
//!   notes);
//! - Gemini (Google's thinking guide): 2.5 models take a budget, not a
//!   level; Gemini 3 a level or a budget, not both; Gemini 3 Pro the
//!   levels low and high; 2.5 Pro and Gemini 3 Pro cannot stop thinking;
//! - Bedrock checks a strict tool's schema against the JSON Schema subset
//!   structured outputs take and answers a 400 for a feature outside it
//!   (Bedrock's "Get validated JSON results from models": no numerical or
//!   string-length constraints, no `additionalProperties` but `false`);
//!   the wording of that 400 is the fake's own, AWS documents only the
//!   refusal;
//! - Cohere's embedding models on Bedrock: Embed v3 refuses
//!   `output_dimension` (an extraneous key), Embed v4 takes 256, 512, 1024
//!   or 1536 (Bedrock's Cohere Embed v4 parameters);
//! - Anthropic's API and Bedrock, every model, refuse a thinking block
//!   whose text is not the text its signature was given for (Anthropic's
//!   extended thinking guide: "the complete unmodified block"; Bedrock's
//!   `ReasoningTextBlock`: "include the text and its signature
//!   unmodified"), with Anthropic's "Invalid `signature` in `thinking`
//!   block" (`mock::forged_reasoning`);
//! - every vendor but Gemini (whose requests carry no call ids) refuses a
//!   tool result that answers no call of the conversation
//!   (`mock::unanswered_result`);
//! - audio input (`Block::Audio`): OpenAI's Chat Completions takes an
//!   `input_audio` part only on its audio models (`gpt-4o-audio-preview`,
//!   `gpt-4o-mini-audio-preview`, `gpt-audio`: the models' pages list
//!   audio input; gpt-4o, gpt-4.1, gpt-5 and the o-series say "Audio: not
//!   supported") and answers another model's with a 400 (the wording is
//!   the fake's own); on Bedrock, Claude, Nova 1 and Cohere's models take
//!   no `audio` block (their pages list text, image, video or document
//!   input only; the wording is the fake's own, after Bedrock's refusal of
//!   a block type a model lacks); Gemini takes audio parts on every model
//!   (its models page lists audio input for each); the Messages API and
//!   Cohere's chat have no audio block at all, which their readers refuse;
//! - image generation: Imagen on the Gemini API (`:predict`) makes 1 to 4
//!   images a call at 1:1, 3:4, 4:3, 9:16 or 16:9, takes no negative
//!   prompt after imagen-3.0-generate-002 and no member it does not know;
//!   Nova Canvas and Titan Image (`TEXT_IMAGE`) make 1 to 5 a call, sides
//!   from 320 to 4096 pixels in steps of 16, quality `standard` or
//!   `premium`, and refuse an extraneous key, as Stability's models on
//!   Bedrock do (their bodies have no count: one image a call); OpenAI
//!   makes 1 to 10, dall-e-3 one;
//! - OpenAI's Chat Completions and Responses (API reference,
//!   `top_logprobs`: "an integer between 0 and 20") refuse more than 20
//!   alternatives, and its reasoning models refuse `logprobs` while they
//!   reason (the reasoning guide's limitations list it with the sampling
//!   parameters);
//! - OpenAI's legacy completions (API reference, "Create completion"):
//!   `best_of` results cannot be streamed, `best_of` must be at least `n`,
//!   and `logprobs` is at most 5.

use switchyard_ir::{Block, Effort, ErrorInfo, ErrorKind, Protocol, Request, Role, Thinking, ToolChoice};

/// The 400 the vendor answers `request` for `model` with, if it refuses it.
pub fn refused(protocol: Protocol, model: &str, request: &Request) -> Option<ErrorInfo> {
    if matches!(protocol, Protocol::Anthropic | Protocol::Bedrock) {
        if let Some(forged) = crate::mock::forged_reasoning(request) {
            return Some(forged);
        }
    }
    if protocol != Protocol::Gemini {
        if let Some(unanswered) = crate::mock::unanswered_result(protocol, request) {
            return Some(unanswered);
        }
    }
    if protocol == Protocol::Bedrock {
        if let Some(info) = strict_schema(request) {
            return Some(info);
        }
    }
    if let Some(info) = audio(protocol, model, request) {
        return Some(info);
    }
    if matches!(protocol, Protocol::OpenAi | Protocol::Responses) {
        if let Some(info) = openai_top_logprobs(request) {
            return Some(info);
        }
    }
    match protocol {
        Protocol::OpenAi | Protocol::Responses => openai(protocol, model, request),
        Protocol::Anthropic if model.contains("claude-") => claude(model, request),
        Protocol::Bedrock if model.contains("anthropic.claude") => claude(model, request),
        Protocol::Bedrock => bedrock(model, request),
        Protocol::Gemini if model.contains("gemini-") => gemini(model, request),
        _ => None,
    }
}

/// The 400 OpenAI answers a legacy completion (`request` as the
/// completions codec reads it: what chat lacks in `extra`) with, if it
/// refuses it.
pub fn refused_completion(request: &Request) -> Option<ErrorInfo> {
    let count = |name: &str| match name {
        "n" => request.n.map(u64::from),
        "logprobs" => request.logprobs.map(u64::from),
        _ => request.extra.fields.get(name).and_then(serde_json::Value::as_u64),
    };
    let invalid = |param: &str, message: &str| {
        let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message.to_owned()).with_status(400);
        info.param = Some(param.to_owned());
        Some(info)
    };
    match (count("best_of"), count("n").unwrap_or(1), count("logprobs")) {
        (Some(best_of), _, _) if best_of > 1 && request.stream => {
            invalid("best_of", "Cannot stream results with best_of greater than 1.")
        }
        (Some(best_of), n, _) if best_of < n => invalid("best_of", "best_of must be greater than or equal to n."),
        (_, _, Some(logprobs)) if logprobs > 5 => invalid("logprobs", "logprobs must be at most 5."),
        _ => None,
    }
}

/// The 400 the vendor answers an embeddings `body` for `model` with, if it
/// refuses it.
pub fn refused_embed(protocol: Protocol, model: &str, body: &[u8]) -> Option<ErrorInfo> {
    if protocol != Protocol::Bedrock || !model.contains("cohere.") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let dimension = value.get("output_dimension")?;
    let malformed = |detail: String| {
        Some(
            ErrorInfo::new(
                ErrorKind::InvalidRequest,
                format!("Malformed input request: {detail}, please reformat your input and try again."),
            )
            .with_status(400),
        )
    };
    if !model.contains("embed-v4") {
        return malformed("#: extraneous key [output_dimension] is not permitted".to_owned());
    }
    let allowed = [256, 512, 1024, 1536];
    match dimension.as_u64() {
        Some(size) if allowed.contains(&size) => None,
        _ => malformed(format!("#/output_dimension: {dimension} is not a valid enum value")),
    }
}

/// The 400 an image model answers `body` with, if it refuses it.
pub fn refused_image(protocol: Protocol, model: &str, body: &[u8]) -> Option<ErrorInfo> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let invalid = |message: String| Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400));
    let unknown = |object: &serde_json::Value, known: &[&str]| -> Option<String> {
        object.as_object()?.keys().find(|key| !known.contains(&key.as_str())).cloned()
    };
    match protocol {
        Protocol::Gemini => {
            if let Some(key) = unknown(&value, &["instances", "parameters"]) {
                return invalid(format!("Invalid JSON payload received. Unknown name \"{key}\": Cannot find field."));
            }
            let parameters = value.get("parameters").cloned().unwrap_or_default();
            let known = [
                "sampleCount",
                "aspectRatio",
                "negativePrompt",
                "personGeneration",
                "outputOptions",
                "imageSize",
                "includeRaiReason",
                "includeSafetyAttributes",
                "enhancePrompt",
                "language",
            ];
            if let Some(key) = unknown(&parameters, &known) {
                return invalid(format!(
                    "Invalid JSON payload received. Unknown name \"{key}\" at 'parameters': Cannot find field."
                ));
            }
            if let Some(count) = parameters.get("sampleCount").and_then(serde_json::Value::as_u64) {
                if !(1..=4).contains(&count) {
                    return invalid(format!("sampleCount must be between 1 and 4, got {count}."));
                }
            }
            if let Some(ratio) = parameters.get("aspectRatio").and_then(serde_json::Value::as_str) {
                if !["1:1", "3:4", "4:3", "9:16", "16:9"].contains(&ratio) {
                    return invalid(format!("Unsupported aspect ratio: {ratio}."));
                }
            }
            if parameters.get("negativePrompt").is_some() && model.contains("imagen-") && !model.contains("imagen-3") {
                return invalid("Negative prompts are not supported by this model.".to_owned());
            }
            None
        }
        Protocol::Bedrock => {
            let malformed = |detail: String| {
                invalid(format!("Malformed input request: {detail}, please reformat your input and try again."))
            };
            let extraneous = |key: String| malformed(format!("#: extraneous key [{key}] is not permitted"));
            if model.contains("stability.") {
                let known =
                    ["prompt", "negative_prompt", "aspect_ratio", "output_format", "seed", "mode", "image", "strength"];
                if let Some(key) = unknown(&value, &known) {
                    return extraneous(key);
                }
                let ratios = ["16:9", "1:1", "21:9", "2:3", "3:2", "4:5", "5:4", "9:16", "9:21"];
                if let Some(ratio) = value.get("aspect_ratio").and_then(serde_json::Value::as_str) {
                    if !ratios.contains(&ratio) {
                        return malformed(format!("#/aspect_ratio: {ratio} is not a valid enum value"));
                    }
                }
                return None;
            }
            if let Some(key) = unknown(&value, &["taskType", "textToImageParams", "imageGenerationConfig"]) {
                return extraneous(key);
            }
            let text = ["text", "negativeText", "style", "conditionImage", "controlMode", "controlStrength"];
            if let Some(key) = value.get("textToImageParams").and_then(|params| unknown(params, &text)) {
                return extraneous(format!("textToImageParams/{key}"));
            }
            let config = value.get("imageGenerationConfig").cloned().unwrap_or_default();
            let known = ["numberOfImages", "width", "height", "quality", "cfgScale", "seed"];
            if let Some(key) = unknown(&config, &known) {
                return extraneous(format!("imageGenerationConfig/{key}"));
            }
            if let Some(count) = config.get("numberOfImages").and_then(serde_json::Value::as_u64) {
                if count > 5 {
                    return malformed(format!(
                        "#/imageGenerationConfig/numberOfImages: {count} is not less or equal to 5"
                    ));
                }
            }
            for side in ["width", "height"] {
                if let Some(pixels) = config.get(side).and_then(serde_json::Value::as_u64) {
                    if !(320..=4096).contains(&pixels) || pixels % 16 != 0 {
                        return invalid(format!(
                            "Invalid {side}: {pixels}. Width and height must be between 320 and 4096 pixels and divisible by 16."
                        ));
                    }
                }
            }
            match config.get("quality").and_then(serde_json::Value::as_str) {
                None | Some("standard" | "premium") => None,
                Some(other) => malformed(format!("#/imageGenerationConfig/quality: {other} is not a valid enum value")),
            }
        }
        Protocol::OpenAi => {
            let n = value.get("n").and_then(serde_json::Value::as_u64).unwrap_or(1);
            if model.starts_with("dall-e-3") && n != 1 {
                return invalid("You must provide n=1 for this model.".to_owned());
            }
            (!(1..=10).contains(&n)).then(|| {
                ErrorInfo::new(
                    ErrorKind::InvalidRequest,
                    format!("Invalid 'n': integer above maximum value. Expected a value <= 10, but got {n} instead."),
                )
                .with_status(400)
            })
        }
        _ => None,
    }
}

/// An OpenAI reasoning model's levels (`none`: thinking off) and whether it
/// reasons when a request says nothing.
fn openai_reasoning(model: &str) -> Option<(&'static [&'static str], bool)> {
    let model = model.rsplit('/').next().unwrap_or(model);
    if model.starts_with("gpt-5.1") || model.starts_with("gpt-5.2") {
        return Some((&["none", "low", "medium", "high"], false));
    }
    if model.starts_with("gpt-5-pro") {
        return Some((&["high"], true));
    }
    if model.starts_with("gpt-5") && !model.starts_with("gpt-5-chat") {
        return Some((&["minimal", "low", "medium", "high"], true));
    }
    let o_series = ["o1", "o3", "o4"]
        .iter()
        .any(|family| model.strip_prefix(family).is_some_and(|rest| rest.is_empty() || rest.starts_with('-')));
    o_series.then_some((&["low", "medium", "high"], true))
}

/// The 400 a vendor answers audio input with on a model that takes none.
fn audio(protocol: Protocol, model: &str, request: &Request) -> Option<ErrorInfo> {
    let position = request.messages.iter().enumerate().find_map(|(index, message)| {
        message.content.iter().position(|block| matches!(block, Block::Audio { .. })).map(|part| (index, part))
    })?;
    let name = model.rsplit('/').next().unwrap_or(model);
    match protocol {
        Protocol::OpenAi => {
            let family = ["gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4"]
                .iter()
                .any(|family| name.strip_prefix(family).is_some_and(|rest| rest.is_empty() || rest.starts_with('-')));
            let takes_audio = name.contains("audio");
            (family && !takes_audio).then(|| {
                invalid(
                    format!(
                        "Invalid content type. input_audio is only supported for audio models; \
                         the model `{name}` does not support audio input."
                    ),
                    &format!("messages[{}].content[{}].type", position.0, position.1),
                    "invalid_value",
                )
            })
        }
        Protocol::Bedrock => {
            let nova_1 = name.contains("nova-") && name.contains("-v1");
            let refuses = name.contains("anthropic.claude") || nova_1 || name.contains("cohere.");
            refuses.then(|| {
                ErrorInfo::new(
                    ErrorKind::InvalidRequest,
                    "This model doesn't support the audio content block that you provided. \
                     Try again with a supported content block type.",
                )
                .with_status(400)
            })
        }
        _ => None,
    }
}

/// The most alternatives OpenAI's `top_logprobs` takes.
const OPENAI_TOP_LOGPROBS: u32 = 20;

/// OpenAI's 400 for `top_logprobs` past 20.
fn openai_top_logprobs(request: &Request) -> Option<ErrorInfo> {
    let top = request.logprobs.filter(|top| *top > OPENAI_TOP_LOGPROBS)?;
    Some(invalid(
        format!(
            "Invalid 'top_logprobs': integer above maximum value. Expected a value <= {OPENAI_TOP_LOGPROBS}, \
             but got {top} instead."
        ),
        "top_logprobs",
        "integer_above_max_value",
    ))
}

fn invalid(message: String, param: &str, code: &str) -> ErrorInfo {
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400);
    info.param = Some(param.to_owned());
    info.code = Some(code.to_owned());
    info
}

fn openai(protocol: Protocol, model: &str, request: &Request) -> Option<ErrorInfo> {
    let (levels, by_default) = openai_reasoning(model)?;
    let effort_param = if protocol == Protocol::Responses { "reasoning.effort" } else { "reasoning_effort" };
    let level = request.reasoning.as_ref().map(|r| match (r.is_off(), r.effort) {
        (true, _) => "none",
        (false, Some(effort)) => effort.as_str(),
        // A budget or bare "on" has no OpenAI form: the reader made it up.
        (false, None) => "medium",
    });
    if let Some(level) = level.filter(|level| !levels.contains(level)) {
        let supported = levels.iter().map(|l| format!("'{l}'")).collect::<Vec<_>>().join(", ");
        return Some(invalid(
            format!(
                "Unsupported value: '{effort_param}' does not support '{level}' with this model. \
                 Supported values are: {supported}."
            ),
            effort_param,
            "unsupported_value",
        ));
    }
    let reasons = level.map_or(by_default, |level| level != "none");
    if !reasons {
        return None;
    }
    let sampling = [
        ("temperature", request.temperature.is_some()),
        ("top_p", request.top_p.is_some()),
        ("frequency_penalty", request.frequency_penalty.is_some()),
        ("presence_penalty", request.presence_penalty.is_some()),
        ("logprobs", request.logprobs.is_some()),
    ];
    let (name, _) = sampling.into_iter().find(|(_, sent)| *sent)?;
    Some(invalid(
        format!("Unsupported parameter: '{name}' is not supported with this model."),
        name,
        "unsupported_parameter",
    ))
}

/// Gemini's rules for thinking, with its messages.
fn gemini(model: &str, request: &Request) -> Option<ErrorInfo> {
    let invalid = |message: String| Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400));
    let reasoning = request.reasoning.as_ref()?;
    let generation_3 = model.contains("gemini-3");
    let pro = model.contains("gemini-2.5-pro") || model.contains("gemini-3-pro");
    if reasoning.is_off() && pro {
        return invalid("Budget 0 is invalid. This model only works in thinking mode.".to_owned());
    }
    let level = reasoning.effort?;
    if !generation_3 {
        return invalid("Thinking level is not supported for this model.".to_owned());
    }
    if reasoning.budget_tokens.is_some() {
        return invalid("You can only set thinking_budget or thinking_level, not both.".to_owned());
    }
    if model.contains("gemini-3-pro") && !matches!(level, Effort::Low | Effort::High) {
        return invalid(format!("Thinking level {} is not supported for this model.", level.as_str().to_uppercase()));
    }
    None
}

/// The Claude families that take a system message inside the
/// conversation (Anthropic's "Mid-conversation system messages" page).
const SYSTEM_MESSAGES: [&str; 4] = ["opus-4-8", "opus-5", "fable-5", "mythos-5"];

/// The Claude families that refuse an assistant turn last (prefill was
/// removed at 4.6: Anthropic's migration guide).
const NO_PREFILL: [&str; 9] =
    ["opus-4-6", "sonnet-4-6", "opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5", "mythos-5"];

/// What the Messages API answers a `system` message inside `messages` on a
/// model without them (the API's text, as callers have quoted it).
pub const UNEXPECTED_SYSTEM_ROLE: &str = "messages: Unexpected role \"system\". The Messages API accepts a top-level \
     `system` parameter, not \"system\" as an input message role.";

/// Claude's rules for the conversation's shape, sampling and thinking,
/// with Anthropic's messages.
fn claude(model: &str, request: &Request) -> Option<ErrorInfo> {
    let invalid = |message: &str| Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400));
    let takes_system_messages = SYSTEM_MESSAGES.iter().any(|family| model.contains(family));
    if !takes_system_messages && request.messages.iter().any(|m| m.role == Role::System) {
        return invalid(UNEXPECTED_SYSTEM_ROLE);
    }
    let refuses_prefill = NO_PREFILL.iter().any(|family| model.contains(family));
    if refuses_prefill && request.messages.last().is_some_and(|m| m.role == Role::Assistant) {
        return invalid(
            "This model does not support assistant message prefill. The conversation must end with a user message.",
        );
    }
    let thinking = request.reasoning.as_ref().filter(|r| r.thinking == Thinking::On);
    if let Some(thinking) = thinking {
        if let Some(budget) = thinking.budget_tokens {
            if budget < 1024 {
                return invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
            }
            if request.max_tokens.is_some_and(|max| max <= budget) {
                return invalid("`max_tokens` must be greater than `thinking.budget_tokens`.");
            }
        }
        if request.temperature.is_some_and(|t| t != 1.0) {
            return invalid("`temperature` may only be set to 1 when thinking is enabled or in adaptive mode.");
        }
        if request.top_k.is_some() {
            return invalid("`top_k` must be unset when thinking is enabled.");
        }
        if request.top_p.is_some_and(|p| p < 0.95) {
            return invalid("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.");
        }
        if matches!(request.tool_choice, Some(ToolChoice::Any | ToolChoice::Tool(_))) {
            return invalid("Thinking may not be enabled when tool_choice forces tool use.");
        }
    }
    let one_of_temperature_and_top_p = ["opus-4-1", "opus-4-5", "opus-4-6", "sonnet-4-5", "haiku-4-5"];
    let newer = one_of_temperature_and_top_p.iter().any(|family| model.contains(family));
    if newer && request.temperature.is_some() && request.top_p.is_some() {
        return invalid("`temperature` and `top_p` cannot both be specified for this model. Please use only one.");
    }
    None
}

/// The keywords Bedrock's structured outputs refuse in a strict tool's
/// schema (numerical and string-length constraints).
const UNSUPPORTED_STRICT: [&str; 5] = ["minimum", "maximum", "multipleOf", "minLength", "maxLength"];

/// The 400 Bedrock answers a strict tool whose schema has a feature
/// structured outputs do not take.
fn strict_schema(request: &Request) -> Option<ErrorInfo> {
    fn unsupported(schema: &serde_json::Value) -> Option<&str> {
        match schema {
            serde_json::Value::Object(members) => {
                let named = UNSUPPORTED_STRICT.iter().find(|keyword| members.contains_key(**keyword)).copied();
                let open = members.get("additionalProperties").is_some_and(|v| v != &serde_json::Value::Bool(false));
                named.or(open.then_some("additionalProperties")).or_else(|| members.values().find_map(unsupported))
            }
            serde_json::Value::Array(items) => items.iter().find_map(unsupported),
            _ => None,
        }
    }
    let (tool, keyword) = request
        .tools
        .iter()
        .filter(|tool| tool.strict == Some(true))
        .find_map(|tool| unsupported(&tool.parameters).map(|keyword| (tool, keyword)))?;
    let message = format!(
        "The JSON schema of tool {} uses `{keyword}`, which structured outputs do not support with strict: true",
        tool.name
    );
    Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400))
}

fn bedrock(model: &str, request: &Request) -> Option<ErrorInfo> {
    let validation = |message: &str| Some(ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400));
    let additional = request.extra.fields.get("additionalModelRequestFields");
    if additional.and_then(|a| a.get("anthropic_beta")).is_some() {
        return validation("The model returned the following errors: extraneous key [anthropic_beta] is not permitted");
    }
    if model.contains("openai.") {
        // Claude's `thinking` read into the IR as a budget or "on".
        let claude_thinking = request.reasoning.as_ref().is_some_and(|r| r.effort.is_none() && !r.is_off());
        if claude_thinking || additional.and_then(|a| a.get("thinking")).is_some() {
            return validation("The model returned the following errors: extraneous key [thinking] is not permitted");
        }
        let level = request.reasoning.as_ref().and_then(|r| r.effort).map(|e| e.as_str());
        if let Some(level) = level.filter(|level| !["low", "medium", "high"].contains(level)) {
            return validation(&format!(
                "The model returned the following errors: reasoning_effort must be one of low, medium, high, not {level}"
            ));
        }
    }
    if (model.contains("xai.") || model.contains("grok")) && !request.stop.is_empty() {
        return validation("The model returned the following errors: stop is not supported by reasoning models");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::{Effort, Reasoning};

    #[test]
    fn audio_is_refused_where_the_model_takes_none() {
        let source = switchyard_ir::MediaSource::Base64 { media_type: "audio/wav".into(), data: "UklGRg==".into() };
        let request = Request {
            messages: vec![switchyard_ir::Message::new(Role::User, vec![Block::text("hi"), Block::Audio { source }])],
            ..Request::default()
        };
        let refused = |protocol, model| refused(protocol, model, &request);
        let info = refused(Protocol::OpenAi, "gpt-4o").expect("gpt-4o takes no audio");
        assert_eq!(info.param.as_deref(), Some("messages[0].content[1].type"));
        assert!(refused(Protocol::OpenAi, "gpt-5-mini").is_some() && refused(Protocol::OpenAi, "o4-mini").is_some());
        assert!(refused(Protocol::OpenAi, "gpt-4o-audio-preview").is_none());
        assert!(refused(Protocol::OpenAi, "gpt-4o-mini-audio-preview-2024-12-17").is_none());
        assert!(refused(Protocol::OpenAi, "wire-openai").is_none(), "a model the rules do not know");
        assert!(refused(Protocol::Gemini, "gemini-2.5-flash").is_none());
        assert!(refused(Protocol::Bedrock, "us.anthropic.claude-opus-4-8").is_some());
        assert!(refused(Protocol::Bedrock, "amazon.nova-pro-v1:0").is_some());
        assert!(refused(Protocol::Bedrock, "mistral.voxtral-small-24b-2507").is_none());
    }

    #[test]
    fn openai_reasoning_models_refuse_sampling_and_foreign_levels() {
        let sampled = Request { temperature: Some(0.2), ..Request::default() };
        let refused = refused(Protocol::OpenAi, "o4-mini", &sampled).map(|info| info.param);
        assert_eq!(refused, Some(Some("temperature".to_owned())));
        assert!(refused_of("gpt-4o", &sampled).is_none());
        assert!(refused_of("gpt-5.1", &sampled).is_none(), "gpt-5.1 does not reason unasked");
        let minimal = Request { reasoning: Some(Reasoning::with_effort(Effort::Minimal)), ..Request::default() };
        let info = refused_of("o4-mini-2025-04-16", &minimal).map(|info| info.message).unwrap_or_default();
        assert!(info.contains("'minimal'") && info.contains("'low', 'medium', 'high'"), "{info}");
        assert!(refused_of("gpt-5", &minimal).is_none());
        let off = Request { reasoning: Some(Reasoning::off()), ..Request::default() };
        assert!(refused_of("o3", &off).is_some() && refused_of("gpt-5.1", &off).is_none());
        assert!(refused_of("o1-preview", &sampled).is_some() && refused_of("omni", &sampled).is_none());
    }

    fn refused_of(model: &str, request: &Request) -> Option<ErrorInfo> {
        refused(Protocol::OpenAi, model, request)
    }

    #[test]
    fn cohere_embed_models_on_bedrock_take_their_own_sizes() {
        let sized =
            |size: u32| serde_json::to_vec(&serde_json::json!({"texts": ["a"], "output_dimension": size})).unwrap();
        assert!(refused_embed(Protocol::Bedrock, "cohere.embed-english-v3", &sized(256)).is_some());
        assert!(refused_embed(Protocol::Bedrock, "cohere.embed-v4:0", &sized(256)).is_none());
        assert!(refused_embed(Protocol::Bedrock, "cohere.embed-v4:0", &sized(4)).is_some());
        assert!(refused_embed(Protocol::Bedrock, "cohere.embed-english-v3", br#"{"texts":["a"]}"#).is_none());
        assert!(refused_embed(Protocol::Cohere, "embed-english-v3.0", &sized(256)).is_none());
    }

    #[test]
    fn claude_refuses_sampling_and_forced_tools_while_it_thinks() {
        let thinks = |budget: u64| {
            Some(Reasoning { thinking: Thinking::On, budget_tokens: Some(budget), ..Reasoning::default() })
        };
        let claude = |request: &Request| refused(Protocol::Anthropic, "claude-sonnet-4-5-20250929", request);
        let fits = Request {
            max_tokens: Some(4096),
            reasoning: thinks(2048),
            temperature: Some(1.0),
            top_p: Some(0.95),
            ..Request::default()
        };
        assert!(claude(&Request { top_p: None, ..fits.clone() }).is_none());
        assert!(claude(&fits).is_some(), "sonnet 4.5 takes one of temperature and top_p");
        let fits = Request { top_p: None, ..fits };
        assert!(claude(&Request { reasoning: thinks(512), ..fits.clone() }).is_some());
        assert!(claude(&Request { max_tokens: Some(2048), ..fits.clone() }).is_some());
        assert!(claude(&Request { temperature: Some(0.3), ..fits.clone() }).is_some());
        assert!(claude(&Request { top_k: Some(5), ..fits.clone() }).is_some());
        assert!(claude(&Request { tool_choice: Some(ToolChoice::Any), ..fits.clone() }).is_some());
        let not_thinking = Request { temperature: Some(0.3), top_k: Some(5), ..Request::default() };
        assert!(claude(&not_thinking).is_none());
        let both = Request { temperature: Some(0.3), top_p: Some(0.9), ..Request::default() };
        assert!(refused(Protocol::Anthropic, "claude-sonnet-4-20250514", &both).is_none(), "sonnet 4 takes both");
        assert!(refused(Protocol::Bedrock, "us.anthropic.claude-haiku-4-5-20251001-v1:0", &both).is_some());
        assert!(refused(Protocol::Anthropic, "wire-anthropic", &both).is_none());
    }

    #[test]
    fn claude_takes_system_messages_and_prefill_as_its_generation_does() {
        use switchyard_ir::Message;
        let with = |roles: &[Role]| Request {
            messages: roles.iter().map(|role| Message::text(*role, "x")).collect(),
            ..Request::default()
        };
        let mid = with(&[Role::User, Role::System]);
        let anthropic = |model: &str, request: &Request| refused(Protocol::Anthropic, model, request);
        let info = anthropic("claude-sonnet-4-5-20250929", &mid).map(|info| info.message).unwrap_or_default();
        assert_eq!(info, UNEXPECTED_SYSTEM_ROLE);
        assert!(anthropic("claude-sonnet-5", &mid).is_some(), "not on Sonnet 5");
        for model in ["claude-opus-4-8", "claude-opus-5", "claude-fable-5-1", "claude-mythos-5"] {
            assert!(anthropic(model, &mid).is_none(), "{model}");
        }
        assert!(refused(Protocol::Bedrock, "us.anthropic.claude-haiku-4-5-20251001-v1:0", &mid).is_some());
        assert!(refused(Protocol::Bedrock, "us.anthropic.claude-opus-4-8", &mid).is_none());
        assert!(anthropic("wire-anthropic", &mid).is_none(), "a lane of no real model takes anything");
        let prefill = with(&[Role::User, Role::Assistant]);
        assert!(anthropic("claude-sonnet-4-5", &prefill).is_none());
        assert!(anthropic("claude-opus-4-6", &prefill).is_some() && anthropic("claude-opus-4-8", &prefill).is_some());
    }

    #[test]
    fn gemini_takes_the_thinking_its_generation_has() {
        let with = |reasoning: Reasoning| Request { reasoning: Some(reasoning), ..Request::default() };
        let gemini = |model: &str, request: &Request| refused(Protocol::Gemini, model, request);
        assert!(gemini("gemini-2.5-pro", &with(Reasoning::off())).is_some());
        assert!(gemini("gemini-2.5-flash", &with(Reasoning::off())).is_none());
        assert!(gemini("gemini-3-pro-preview", &with(Reasoning::off())).is_some());
        assert!(gemini("gemini-2.5-flash", &with(Reasoning::with_effort(Effort::Low))).is_some());
        assert!(gemini("gemini-3-pro-preview", &with(Reasoning::with_effort(Effort::Medium))).is_some());
        assert!(gemini("gemini-3-pro-preview", &with(Reasoning::with_effort(Effort::High))).is_none());
        let both = Reasoning { budget_tokens: Some(2048), ..Reasoning::with_effort(Effort::Low) };
        assert!(gemini("gemini-3-flash", &with(both)).is_some());
        assert!(gemini("wire-gemini", &with(Reasoning::off())).is_none());
    }

    #[test]
    fn bedrock_models_refuse_what_their_vendors_do() {
        let thinking = Request { reasoning: Some(Reasoning::with_budget(2048)), ..Request::default() };
        assert!(refused(Protocol::Bedrock, "openai.gpt-oss-120b-1:0", &thinking).is_some());
        assert!(refused(Protocol::Bedrock, "anthropic.claude-sonnet-4-5", &thinking).is_none());
        let low = Request { reasoning: Some(Reasoning::with_effort(Effort::Low)), ..Request::default() };
        assert!(refused(Protocol::Bedrock, "openai.gpt-oss-120b-1:0", &low).is_none());
        let stop = Request { stop: vec!["END".into()], ..Request::default() };
        assert!(refused(Protocol::Bedrock, "xai.grok-4", &stop).is_some());
        let mut betas = Request::default();
        let fields = serde_json::json!({"anthropic_beta": ["context-management-2025-06-27"]});
        betas.extra.insert(Protocol::Bedrock, "additionalModelRequestFields".into(), fields);
        let info = refused(Protocol::Bedrock, "amazon.nova-pro-v1:0", &betas).map(|info| info.message);
        assert!(info.is_some_and(|m| m.contains("extraneous key [anthropic_beta]")));
        assert!(refused(Protocol::Bedrock, "us.anthropic.claude-haiku-4-5-20251001-v1:0", &betas).is_none());
        let tool = |strict: Option<bool>, schema: serde_json::Value| Request {
            tools: vec![switchyard_ir::Tool { strict, ..switchyard_ir::Tool::function("f", None, schema) }],
            ..Request::default()
        };
        let bounded = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}});
        let haiku = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
        let info = refused(Protocol::Bedrock, haiku, &tool(Some(true), bounded.clone())).map(|info| info.message);
        assert!(info.is_some_and(|m| m.contains("`minimum`")));
        assert!(refused(Protocol::Bedrock, haiku, &tool(None, bounded)).is_none(), "only a strict schema is checked");
        let closed = serde_json::json!({"type": "object", "additionalProperties": false});
        assert!(refused(Protocol::Bedrock, haiku, &tool(Some(true), closed)).is_none());
    }
}
