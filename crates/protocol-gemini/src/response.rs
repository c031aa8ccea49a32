//! `GenerateContentResponse` bodies ↔ `ir::Response`, and the finish
//! reason, usage and timestamp mappings the stream codec shares.
//!
//! The candidate of index 0 is the response; the others (`candidateCount`
//! above 1) its `choices`, in order.

use switchyard_codec::ir::{Choice, Field, Response, StopReason, Usage};
use switchyard_codec::{json, DecodeError, Encoded};

use crate::parts::{blocks_to_parts, drop_once, parts_to_blocks, reply_call_prefix, CallLedger, PartMode, WriteParts};
use crate::wire::{Candidate, Content, GenerateContentResponse, LogprobsResult, ModalityTokenCount, UsageMetadata};

/// Reads a non-streamed reply.
pub(crate) fn read(body: &[u8]) -> Result<Response, DecodeError> {
    let wire: GenerateContentResponse = json::parse(body)?;
    if let Some(error) = &wire.error {
        return Err(DecodeError::Invalid {
            message: format!("upstream returned an error: {}", error.message),
            param: None,
        });
    }
    let id = wire.response_id.clone().unwrap_or_default();
    let mut ledger = CallLedger::new(reply_call_prefix(&id));
    let mut response = Response {
        id,
        model: wire.model_version.clone().unwrap_or_default(),
        created: wire.create_time.as_deref().and_then(parse_rfc3339),
        usage: wire.usage_metadata.as_ref().map(usage_from_wire).unwrap_or_default(),
        ..Response::default()
    };
    let blocked = wire
        .prompt_feedback
        .as_ref()
        .and_then(|f| f.block_reason.as_deref())
        .is_some_and(|r| !r.is_empty() && r != "BLOCK_REASON_UNSPECIFIED");
    let mut candidates = wire.candidates;
    if candidates.len() > 1 {
        candidates.sort_by_key(|c| c.index.unwrap_or(0));
    }
    for (place, candidate) in candidates.into_iter().enumerate() {
        let mut choice = Choice::default();
        if let Some(content) = candidate.content {
            let path = format!("candidates[{place}].content");
            choice.content = parts_to_blocks(content.parts, &mut ledger, PartMode::Response, &path)?;
        }
        let has_call = choice.content.iter().any(|b| matches!(b, switchyard_codec::ir::Block::ToolUse(_)));
        choice.stop_reason = candidate.finish_reason.as_deref().and_then(|reason| stop_from_wire(reason, has_call));
        choice.logprobs = candidate.logprobs_result.map(LogprobsResult::into_ir).unwrap_or_default();
        if place == 0 {
            response.content = choice.content;
            response.stop_reason = choice.stop_reason;
            response.logprobs = choice.logprobs;
        } else {
            response.choices.push(choice);
        }
    }
    if response.stop_reason.is_none() && blocked {
        response.stop_reason = Some(StopReason::ContentFilter);
    }
    Ok(response)
}

/// The candidate with index 0, else the first one.
pub(crate) fn first_candidate(candidates: Vec<Candidate>) -> Option<Candidate> {
    let position = candidates.iter().position(|c| c.index.unwrap_or(0) == 0).unwrap_or(0);
    candidates.into_iter().nth(position)
}

/// Writes a non-streamed reply.
pub(crate) fn write(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    let mut calls = Vec::new();
    let mut candidates = Vec::with_capacity(1 + response.choices.len());
    let first = std::iter::once((&response.content, response.stop_reason, &response.logprobs));
    let others = response.choices.iter().map(|c| (&c.content, c.stop_reason, &c.logprobs));
    for (index, (content, stop_reason, logprobs)) in (0..).zip(first.chain(others)) {
        let parts = blocks_to_parts(
            content,
            &mut WriteParts { call_ids: true, dropped: &mut dropped, calls: &mut calls, audio_input: None },
        );
        candidates.push(Candidate {
            content: Some(Content { role: Some("model".to_owned()), parts }),
            finish_reason: stop_reason.map(|r| stop_to_wire(r).to_owned()),
            index: Some(index),
            logprobs_result: LogprobsResult::of(logprobs),
        });
    }
    if response.stop_sequence.is_some() {
        drop_once(&mut dropped, Field::StopSequence);
    }
    if response.usage.cache_write_tokens != 0 {
        drop_once(&mut dropped, Field::CacheWriteTokens);
    }
    let wire = GenerateContentResponse {
        candidates,
        usage_metadata: Some(usage_to_wire(&response.usage)),
        model_version: non_empty(&response.model),
        response_id: non_empty(&response.id),
        create_time: response.created.map(format_rfc3339),
        ..GenerateContentResponse::default()
    };
    Encoded { body: json::to_vec(&wire), dropped }
}

pub(crate) fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// Gemini's finish reasons. `STOP` covers a natural end, a stop sequence
/// and a turn that ends in function calls (then it reads as `ToolUse`).
pub(crate) fn stop_from_wire(reason: &str, has_call: bool) -> Option<StopReason> {
    Some(match reason {
        "" | "FINISH_REASON_UNSPECIFIED" => return None,
        "STOP" if has_call => StopReason::ToolUse,
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY"
        | "RECITATION"
        | "LANGUAGE"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "IMAGE_OTHER" => StopReason::ContentFilter,
        // MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
        // OTHER and reasons added later: generation failed.
        _ => StopReason::Error,
    })
}

/// The finish reason a stop reason is written as. Gemini cannot say
/// "refused", "paused" or "context full": the nearest reasons stand in.
pub(crate) fn stop_to_wire(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse | StopReason::Pause => "STOP",
        StopReason::MaxTokens | StopReason::ContextLength => "MAX_TOKENS",
        StopReason::ContentFilter | StopReason::Refusal => "SAFETY",
        StopReason::Error => "OTHER",
    }
}

/// `promptTokenCount` already includes cached tokens; tokens of built-in
/// tool prompts are input too (and kept apart). Output is candidates plus
/// thoughts. Audio and image tokens are the modality details' (video is
/// priced as text).
pub(crate) fn usage_from_wire(usage: &UsageMetadata) -> Usage {
    let candidates = usage.candidates_token_count.unwrap_or(0);
    let thoughts = usage.thoughts_token_count.unwrap_or(0);
    let tool_prompt = usage.tool_use_prompt_token_count.unwrap_or(0);
    let prompt = &usage.prompt_tokens_details;
    let generated = &usage.candidates_tokens_details;
    Usage {
        input_tokens: usage.prompt_token_count.unwrap_or(0).saturating_add(tool_prompt),
        output_tokens: candidates.saturating_add(thoughts),
        cache_read_tokens: usage.cached_content_token_count.unwrap_or(0),
        reasoning_tokens: thoughts,
        audio_input_tokens: ModalityTokenCount::of(prompt, "AUDIO"),
        image_input_tokens: ModalityTokenCount::of(prompt, "IMAGE"),
        audio_output_tokens: ModalityTokenCount::of(generated, "AUDIO"),
        image_output_tokens: ModalityTokenCount::of(generated, "IMAGE"),
        tool_prompt_tokens: tool_prompt,
        ..Usage::default()
    }
}

pub(crate) fn usage_to_wire(usage: &Usage) -> UsageMetadata {
    let nonzero = |n: u64| (n != 0).then_some(n);
    let prompt = usage.input_tokens.saturating_sub(usage.tool_prompt_tokens);
    let candidates = usage.output_tokens.saturating_sub(usage.reasoning_tokens);
    // By modality only when some tokens are not text (the whole count otherwise).
    let details = |total: u64, audio: u64, image: u64| match (audio, image) {
        (0, 0) => Vec::new(),
        _ => [("TEXT", total.saturating_sub(audio).saturating_sub(image)), ("AUDIO", audio), ("IMAGE", image)]
            .into_iter()
            .filter(|(_, n)| *n != 0)
            .map(|(modality, token_count)| ModalityTokenCount { modality: modality.to_owned(), token_count })
            .collect(),
    };
    UsageMetadata {
        prompt_token_count: Some(prompt),
        candidates_token_count: Some(candidates),
        total_token_count: Some(usage.total()),
        cached_content_token_count: nonzero(usage.cache_read_tokens),
        thoughts_token_count: nonzero(usage.reasoning_tokens),
        tool_use_prompt_token_count: nonzero(usage.tool_prompt_tokens),
        prompt_tokens_details: details(prompt, usage.audio_input_tokens, usage.image_input_tokens),
        candidates_tokens_details: details(candidates, usage.audio_output_tokens, usage.image_output_tokens),
    }
}

/// Unix seconds from an RFC 3339 timestamp (`createTime`, Vertex style).
pub(crate) fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    };
    if bytes.len() < 20 || bytes.get(4) != Some(&b'-') || bytes.get(7) != Some(&b'-') {
        return None;
    }
    if !matches!(bytes.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = text.get(19..)?;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        rest = fraction.get(digits..)?;
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let (hours, minutes) = rest.get(1..)?.split_once(':')?;
            let hours: i64 = hours.parse().ok()?;
            let minutes: i64 = minutes.parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// RFC 3339 in UTC for unix seconds.
pub(crate) fn format_rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let time = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", time / 3600, time % 3600 / 60, time % 60)
}

// Howard Hinnant's days-from-civil algorithms (proleptic Gregorian).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn timestamps_parse_with_fractions_and_offsets() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2026-03-10T14:54:45.066123Z"), Some(1_773_154_485));
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(format_rfc3339(1_773_154_485), "2026-03-10T14:54:45Z");
    }

    #[test]
    fn blocked_prompts_read_as_content_filter() {
        let body = br#"{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7}}"#;
        let response = read(body).unwrap();
        assert_eq!(response.stop_reason, Some(StopReason::ContentFilter));
        assert!(response.content.is_empty());
        assert_eq!(response.usage.input_tokens, 7);
    }

    #[test]
    fn unknown_parts_in_replies_are_skipped() {
        let body = br#"{"candidates": [{"content": {"role": "model", "parts": [{"videoMetadata": {}}, {"text": "ok"}]}, "finishReason": "STOP"}]}"#;
        let response = read(body).unwrap();
        assert_eq!(response.content, vec![switchyard_codec::ir::Block::text("ok")]);
        assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    }

    /// `usageMetadata` as the Gemini API reference shows it: cached
    /// content, thoughts, a built-in tool's prompt, and tokens by modality.
    #[test]
    fn usage_reads_every_kind_gemini_reports() {
        let body = br#"{"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 1800, "candidatesTokenCount": 1400, "totalTokenCount": 3650,
              "cachedContentTokenCount": 1024, "thoughtsTokenCount": 250, "toolUsePromptTokenCount": 200,
              "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 300}, {"modality": "IMAGE", "tokenCount": 1290},
                                      {"modality": "AUDIO", "tokenCount": 210}],
              "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 110}, {"modality": "IMAGE", "tokenCount": 1290}]}}"#;
        let usage = read(body).unwrap().usage;
        assert_eq!((usage.input_tokens, usage.tool_prompt_tokens, usage.cache_read_tokens), (2000, 200, 1024));
        assert_eq!((usage.image_input_tokens, usage.audio_input_tokens), (1290, 210));
        assert_eq!((usage.output_tokens, usage.reasoning_tokens, usage.image_output_tokens), (1650, 250, 1290));
        // Written back, the counts and modalities are Gemini's again.
        let wire = usage_to_wire(&usage);
        assert_eq!((wire.prompt_token_count, wire.candidates_token_count), (Some(1800), Some(1400)));
        assert_eq!(wire.tool_use_prompt_token_count, Some(200));
        assert_eq!(ModalityTokenCount::of(&wire.prompt_tokens_details, "IMAGE"), 1290);
        assert_eq!(ModalityTokenCount::of(&wire.prompt_tokens_details, "TEXT"), 300);
        assert_eq!(ModalityTokenCount::of(&wire.candidates_tokens_details, "IMAGE"), 1290);
        assert_eq!(usage_from_wire(&wire), usage);
    }

    /// Two candidates with `logprobsResult`, shaped as Gemini's
    /// `Candidate` and `LogprobsResult` references name them.
    #[test]
    fn candidates_and_logprobs_read_and_write_back() {
        let result = |t: &str, lp: f64| {
            serde_json::json!({
            "topCandidates": [{"candidates": [{"token": t, "tokenId": 7, "logProbability": lp},
                                              {"token": "x", "tokenId": 8, "logProbability": -3.5}]}],
            "chosenCandidates": [{"token": t, "tokenId": 7, "logProbability": lp}]})
        };
        let body = serde_json::json!({"candidates": [
            {"content": {"role": "model", "parts": [{"text": "Hello"}]}, "finishReason": "STOP", "index": 0,
             "logprobsResult": result("Hello", -0.25)},
            {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "MAX_TOKENS", "index": 1,
             "logprobsResult": result("Hi", -0.5)}]});
        let response = read(body.to_string().as_bytes()).unwrap();
        assert_eq!(response.logprobs[0].token, "Hello");
        assert_eq!((response.logprobs[0].id, response.logprobs[0].top.len()), (Some(7), 2));
        assert_eq!(response.choices.len(), 1);
        assert_eq!(response.choices[0].stop_reason, Some(StopReason::MaxTokens));
        assert_eq!(response.choices[0].logprobs[0].logprob, -0.5);
        let written: serde_json::Value = serde_json::from_slice(&write(&response).body).unwrap();
        assert_eq!(written["candidates"][0]["logprobsResult"], body["candidates"][0]["logprobsResult"]);
        assert_eq!(written["candidates"][1]["logprobsResult"], body["candidates"][1]["logprobsResult"]);
        assert_eq!(written["candidates"][1]["index"], 1);
    }

    proptest! {
        #[test]
        fn timestamps_round_trip(seconds in -62_135_596_800i64..253_402_300_799) {
            prop_assert_eq!(parse_rfc3339(&format_rfc3339(seconds)), Some(seconds));
        }
    }
}
