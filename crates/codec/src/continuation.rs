//! Continuing an answer another lane began: the request that asks a lane
//! to go on from the text the caller already has, and the seam between the
//! two parts (no text twice, no text lost). Pure: the engine's relay does
//! the sending.
//!
//! Two mechanisms, by what the lane takes:
//! - **prefill** (Claude, on Anthropic and Bedrock, when it is not
//!   thinking): the text so far as the last, assistant, turn; the model
//!   writes what follows. Claude refuses a prefill that ends in whitespace,
//!   so that is trimmed, and a continuation that starts with whitespace the
//!   caller already has loses it.
//! - **instruction** (every other lane): the text so far as an assistant
//!   turn, then [`INSTRUCTION`] as a user turn. A model may start by
//!   repeating the end of what it was shown; the longest such overlap is
//!   cut from the continuation's first text.

use switchyard_ir::{Block, Message, Protocol, Request, Role, TextBlock, Thinking};

/// What asks a lane without prefill to go on.
pub const INSTRUCTION: &str = "Your previous reply was cut off after the text above. Continue it from exactly \
     where it stopped: do not repeat any of it, do not comment, do not start over.";

/// The shortest repeated text cut from a continuation's start (shorter
/// agreement is as likely chance as repetition).
const MIN_OVERLAP: usize = 4;

/// How a continuation was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// The text so far as the assistant's turn.
    Prefill,
    /// The text so far, then [`INSTRUCTION`].
    Instruction,
}

/// Whether a lane of `protocol` takes `request` with an assistant prefill.
pub fn takes_prefill(protocol: Protocol, request: &Request) -> bool {
    let thinking = request.reasoning.as_ref().is_some_and(|r| {
        !r.is_off() && (r.thinking == Thinking::On || r.budget_tokens.is_some() || r.effort.is_some())
    });
    matches!(protocol, Protocol::Anthropic | Protocol::Bedrock) && !thinking
}

/// `request` (the caller's, as read) asking a lane of `protocol` to go on
/// from `so_far`, and how it asks. `prefill`: the lane is not known to
/// refuse one (a model that refused a prefill is asked by instruction).
pub fn request(request: &Request, so_far: &str, protocol: Protocol, prefill: bool) -> (Request, Mechanism) {
    let mut next = request.clone();
    next.stream = true;
    // Nothing reached the caller yet (a screened stream held it all back):
    // the next lane answers afresh.
    if so_far.is_empty() {
        return (next, Mechanism::Prefill);
    }
    if prefill && takes_prefill(protocol, request) {
        next.messages
            .push(Message { role: Role::Assistant, content: vec![Block::Text(TextBlock::new(so_far.trim_end()))] });
        (next, Mechanism::Prefill)
    } else {
        next.messages.push(Message { role: Role::Assistant, content: vec![Block::Text(TextBlock::new(so_far))] });
        next.messages.push(Message::text(Role::User, INSTRUCTION));
        (next, Mechanism::Instruction)
    }
}

/// The part of a continuation's first text the caller does not have yet:
/// `first` without the whitespace a prefill trimmed from `so_far`, or
/// without the longest end of `so_far` it repeats.
pub fn seam<'a>(so_far: &str, first: &'a str, mechanism: Mechanism) -> &'a str {
    match mechanism {
        Mechanism::Prefill if so_far.len() != so_far.trim_end().len() => first.trim_start(),
        Mechanism::Prefill => first,
        Mechanism::Instruction => {
            let longest = so_far.len().min(first.len());
            let repeated = (MIN_OVERLAP..=longest)
                .rev()
                .filter(|&n| first.is_char_boundary(n) && so_far.is_char_boundary(so_far.len() - n))
                .find(|&n| so_far.ends_with(&first[..n]));
            repeated.map_or(first, |n| &first[n..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_so_far_the_request_is_asked_afresh() {
        let asked = Request { messages: vec![Message::text(Role::User, "hi")], ..Request::default() };
        let (next, mechanism) = request(&asked, "", Protocol::OpenAi, true);
        assert_eq!(mechanism, Mechanism::Prefill);
        assert_eq!(next.messages, asked.messages);
        assert!(next.stream);
        assert_eq!(seam("", "Hello", mechanism), "Hello");
    }
    use proptest::prelude::*;

    #[test]
    fn claude_gets_a_prefill_others_an_instruction() {
        let asked = Request { messages: vec![Message::text(Role::User, "hi")], ..Request::default() };
        let (next, mechanism) = request(&asked, "Hello, wor ", Protocol::Anthropic, true);
        assert_eq!(mechanism, Mechanism::Prefill);
        assert_eq!(next.messages.last(), Some(&Message::text(Role::Assistant, "Hello, wor")));
        assert!(next.stream);
        let (next, mechanism) = request(&asked, "Hello, wor ", Protocol::OpenAi, true);
        assert_eq!(mechanism, Mechanism::Instruction);
        assert_eq!(next.messages.len(), 3);
        assert_eq!(next.messages[2], Message::text(Role::User, INSTRUCTION));
        // A thinking Claude takes no prefill.
        let thinking = Request { reasoning: Some(switchyard_ir::Reasoning::on()), ..asked };
        assert_eq!(request(&thinking, "x", Protocol::Bedrock, true).1, Mechanism::Instruction);
        // A Claude known to refuse prefill is asked by instruction.
        let plain = Request { messages: vec![Message::text(Role::User, "hi")], ..Request::default() };
        assert_eq!(request(&plain, "x", Protocol::Anthropic, false).1, Mechanism::Instruction);
    }

    #[test]
    fn the_seam_drops_what_the_caller_has() {
        assert_eq!(seam("Hello, wor ", " world", Mechanism::Prefill), "world");
        assert_eq!(seam("Hello, wor", "ld", Mechanism::Prefill), "ld");
        assert_eq!(seam("The answer is forty", "is forty-two.", Mechanism::Instruction), "-two.");
        assert_eq!(seam("The answer is", "s 42", Mechanism::Instruction), "s 42", "too short to be a repeat");
        assert_eq!(seam("né", "é!", Mechanism::Instruction), "é!");
    }

    proptest! {
        /// A continuation that repeats any end of the text so far (of the
        /// shortest length that counts) loses exactly the repeat.
        #[test]
        fn a_repeated_end_is_cut_exactly(text in "[a-z ]{8,60}", cut in 0usize..60, rest in "[A-Z]{1,20}") {
            let cut = cut.min(text.len() - MIN_OVERLAP);
            let repeated = &text[cut..];
            let first = format!("{repeated}{rest}");
            prop_assert_eq!(seam(&text, &first, Mechanism::Instruction), rest.as_str());
        }
    }
}
