//! Local token counts. Anthropic, Gemini and Bedrock count a request's
//! tokens themselves; for a lane of any other protocol the gateway counts
//! it with a maintained tokenizer (`tiktoken-rs`) and says it estimated.
//! OpenAI's models are counted with their own encoding (`cl100k_base` for
//! GPT-3.5 and GPT-4, `o200k_base` for everything since GPT-4o), and with
//! the per-message framing OpenAI documents; other families, whose
//! tokenizers are not published as data a crate ships, with `o200k_base`,
//! a close estimate for modern vocabularies.
//!
//! The tokenizers are built on first use (a few milliseconds each) and
//! kept: a gateway that never counts locally never builds one.

use std::sync::LazyLock;

use switchyard_ir::{Block, MediaSource, Request};
use tiktoken_rs::CoreBPE;

/// Tokens OpenAI frames each message with.
const PER_MESSAGE: u64 = 3;
/// Tokens that prime the reply.
const REPLY_PRIMING: u64 = 3;
/// An image, counted as OpenAI counts a 1024×1024 image at high detail.
pub const IMAGE_TOKENS: u64 = 765;
/// A document (PDF) whose pages the lane would read, counted flat.
pub const DOCUMENT_TOKENS: u64 = 1_500;

/// Audio tokens a second, as Gemini counts audio (OpenAI's audio models
/// count about a third of that).
const AUDIO_TOKENS_PER_SECOND: u64 = 32;
/// Bytes a second of compressed speech (a 128 kbit/s MP3; WAV at 16 kHz
/// is twice that, so it counts high).
const AUDIO_BYTES_PER_SECOND: u64 = 16_000;
/// Audio referenced by URL, whose length the gateway cannot see: a minute.
pub const AUDIO_URL_TOKENS: u64 = 60 * AUDIO_TOKENS_PER_SECOND;

/// The tokens of an audio block: its seconds at [`AUDIO_BYTES_PER_SECOND`]
/// (from the base64 text's length, never decoding it), at least one.
fn audio_tokens(source: &MediaSource) -> u64 {
    match source {
        MediaSource::Base64 { data, .. } => {
            let bytes = data.len() as u64 / 4 * 3;
            bytes.div_ceil(AUDIO_BYTES_PER_SECOND).max(1) * AUDIO_TOKENS_PER_SECOND
        }
        MediaSource::Url { .. } => AUDIO_URL_TOKENS,
    }
}

/// An encoding, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// GPT-3.5 and GPT-4.
    Cl100k,
    /// GPT-4o and later, and the estimate for other families.
    O200k,
}

static CL100K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::cl100k_base().ok());
static O200K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::o200k_base().ok());

/// The encoding `model` is counted with.
pub fn encoding_for(model: &str) -> Encoding {
    let model = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let legacy = model.starts_with("gpt-3.5")
        || model.starts_with("text-embedding-3")
        || model.starts_with("text-embedding-ada")
        || (model.starts_with("gpt-4")
            && !model.starts_with("gpt-4o")
            && !model.starts_with("gpt-4.")
            && !model.starts_with("gpt-4-o"));
    if legacy {
        Encoding::Cl100k
    } else {
        Encoding::O200k
    }
}

/// Tokens of `text` in `encoding` (a character count over four, should the
/// encoding fail to build).
pub fn count_text(text: &str, encoding: Encoding) -> u64 {
    let bpe = match encoding {
        Encoding::Cl100k => &*CL100K,
        Encoding::O200k => &*O200K,
    };
    match bpe {
        Some(bpe) => bpe.encode_ordinary(text).len() as u64,
        None => (text.chars().count() as u64).div_ceil(4),
    }
}

/// The prompt tokens of `request` for `model`: its system text, each
/// message's content and framing, and its tools' definitions.
pub fn count_request(request: &Request, model: &str) -> u64 {
    let encoding = encoding_for(model);
    let text = |t: &str| count_text(t, encoding);
    let mut tokens = REPLY_PRIMING;
    if !request.system.is_empty() {
        tokens += PER_MESSAGE + request.system.iter().map(|b| text(&b.text)).sum::<u64>();
    }
    for message in &request.messages {
        tokens += PER_MESSAGE + message.content.iter().map(|block| count_block(block, &text)).sum::<u64>();
    }
    for tool in &request.tools {
        tokens += text(&tool.name) + tool.description.as_deref().map_or(0, text) + text(&tool.parameters.to_string());
    }
    tokens
}

fn count_block(block: &Block, text: &dyn Fn(&str) -> u64) -> u64 {
    match block {
        Block::Text(t) => text(&t.text),
        Block::Image { .. } => IMAGE_TOKENS,
        Block::Document { .. } => DOCUMENT_TOKENS,
        Block::Audio { source } => audio_tokens(source),
        Block::Thinking { text: thought, .. } => text(thought),
        Block::RedactedThinking { .. } => 0,
        Block::ToolUse(call) => text(&call.name) + text(&call.input),
        Block::ToolResult(result) => result.content.iter().map(|b| count_block(b, text)).sum(),
        // A block the IR does not model (a server tool's result) is its JSON.
        Block::Unmodelled(block) => text(&block.value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::{Message, Role};

    #[test]
    fn audio_counts_by_its_length() {
        let audio = |data: &str| Block::Audio {
            source: MediaSource::Base64 { media_type: "audio/wav".into(), data: data.into() },
        };
        let text = |t: &str| count_text(t, Encoding::O200k);
        assert_eq!(count_block(&audio("AAAA"), &text), 32, "at least a second");
        // 64,000 base64 characters are 48,000 bytes: three seconds.
        assert_eq!(count_block(&audio(&"A".repeat(64_000)), &text), 96);
        let url = Block::Audio { source: MediaSource::Url { url: "gs://b/a.wav".into(), media_type: None } };
        assert_eq!(count_block(&url, &text), AUDIO_URL_TOKENS);
    }

    #[test]
    fn openai_models_use_their_own_encoding() {
        assert_eq!(encoding_for("gpt-4"), Encoding::Cl100k);
        assert_eq!(encoding_for("gpt-3.5-turbo"), Encoding::Cl100k);
        assert_eq!(encoding_for("gpt-4o-mini"), Encoding::O200k);
        assert_eq!(encoding_for("gpt-4.1"), Encoding::O200k);
        assert_eq!(encoding_for("openai/gpt-5"), Encoding::O200k);
        assert_eq!(encoding_for("command-r"), Encoding::O200k);
    }

    #[test]
    fn a_request_counts_as_openai_frames_it() {
        // "Hello world" is two tokens in both encodings.
        assert_eq!(count_text("Hello world", Encoding::O200k), 2);
        assert_eq!(count_text("Hello world", Encoding::Cl100k), 2);
        let request = Request {
            messages: vec![Message::new(Role::User, vec![Block::text("Hello world")])],
            ..Request::default()
        };
        assert_eq!(count_request(&request, "gpt-4o"), 2 + PER_MESSAGE + REPLY_PRIMING);
        let longer = Request {
            messages: vec![Message::new(
                Role::User,
                vec![Block::text("Hello world, this is a much longer message to count")],
            )],
            ..Request::default()
        };
        assert!(count_request(&longer, "gpt-4o") > count_request(&request, "gpt-4o"));
    }
}
