//! Continuing an answer another lane began: the request that asks a lane
//! to go on from the text the caller already has, and the seam between the
//! two parts (no text twice, no text lost). Pure: the engine's relay does
//! the sending.
//!
//! Two mechanisms, by what the lane takes:
//! - **prefill** (a lane that continues an assistant message last: Claude
//!   on Anthropic and Bedrock when it is not thinking, and an
//!   OpenAI-compatible server the operator says does, `prefill:`): the
//!   text so far as the last, assistant, turn; the model writes what
//!   follows. Claude refuses a prefill that ends in whitespace, so that is
//!   trimmed, and a continuation that starts with whitespace the caller
//!   already has loses it.
//! - **instruction** (every other lane): the text so far as an assistant
//!   turn, then [`instruction`] as a user turn, which asks the model to
//!   begin with the text's last words (its *anchor*) and go on. Nothing
//!   of such a continuation reaches the caller until its seam is proven
//!   ([`Seam`]): it begins with the anchor (what follows the anchor goes
//!   on), or it starts the answer again and repeats all the caller has
//!   (what follows the repeat goes on); anything else is held back and the
//!   stream ends with the caller's error: a repeated or altered answer is
//!   never presented as a whole one. Where the caller's text begins as it
//!   ends, a restart also begins with the anchor: such a continuation is
//!   held until it parts from one reading, and refused when it fits both.

use switchyard_ir::{Block, Message, Protocol, Request, Role, TextBlock, Thinking};

/// How every continuation instruction begins (the vendor fake knows one by it).
pub const INSTRUCTION: &str = "Your previous reply was cut off after the text above. Continue it from exactly \
     where it stopped.";

/// The instruction asking a lane to go on from `anchor`, the last words
/// the caller has.
pub fn instruction(anchor: &str) -> String {
    format!(
        "{INSTRUCTION} Begin your reply with its last words, exactly as written between the markers: \
         <<<{anchor}>>> and then go on writing. Do not comment and do not start over."
    )
}

/// The anchor of a continuation: the last words of `so_far` (at most
/// [`ANCHOR_BYTES`], from a word's start when there is one in reach).
pub fn anchor(so_far: &str) -> &str {
    let text = so_far.trim_end();
    if text.len() <= ANCHOR_BYTES {
        return text.trim_start();
    }
    let mut start = text.len() - ANCHOR_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    match tail.find(char::is_whitespace) {
        Some(at) if !tail[at..].trim().is_empty() => tail[at..].trim_start(),
        _ => tail,
    }
}

/// The longest anchor, in bytes.
pub const ANCHOR_BYTES: usize = 48;

/// The shortest repeated text cut from a continuation's start (shorter
/// agreement is as likely chance as repetition).
const MIN_OVERLAP: usize = 4;

/// How a continuation was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Nothing reached the caller: the lane answers afresh.
    Afresh,
    /// The text so far as the assistant's turn.
    Prefill,
    /// The text so far, then [`instruction`].
    Instruction,
}

/// Whether `request` may be continued by prefill on a lane that takes
/// one: a model that is thinking takes none (Claude refuses a prefill with
/// thinking on).
pub fn takes_prefill(request: &Request) -> bool {
    let thinking = request.reasoning.as_ref().is_some_and(|r| {
        !r.is_off() && (r.thinking == Thinking::On || r.budget_tokens.is_some() || r.effort.is_some())
    });
    !thinking
}

/// Whether lanes of `protocol` continue an assistant message last unless
/// the operator says otherwise (Claude's protocols do; an OpenAI-compatible
/// server does only where it is configured to, `prefill:`).
pub fn prefill_by_default(protocol: Protocol) -> bool {
    matches!(protocol, Protocol::Anthropic | Protocol::Bedrock)
}

/// `request` (the caller's, as read) asking a lane to go on from
/// `so_far`, and how it asks. `prefill`: the lane continues an assistant
/// message last and is not known to refuse one (a model that refused a
/// prefill is asked by instruction).
pub fn request(request: &Request, so_far: &str, prefill: bool) -> (Request, Mechanism) {
    let mut next = request.clone();
    next.stream = true;
    // Nothing reached the caller yet (a screened stream held it all back):
    // the next lane answers afresh.
    if so_far.is_empty() {
        return (next, Mechanism::Afresh);
    }
    if prefill && takes_prefill(request) {
        next.messages.push(Message::new(Role::Assistant, vec![Block::Text(TextBlock::new(so_far.trim_end()))]));
        (next, Mechanism::Prefill)
    } else {
        next.messages.push(Message::new(Role::Assistant, vec![Block::Text(TextBlock::new(so_far))]));
        next.messages.push(Message::text(Role::User, instruction(anchor(so_far))));
        (next, Mechanism::Instruction)
    }
}

/// A prefill request's body written for an OpenAI-compatible lane, marked
/// the way the lane continues an assistant message last: vLLM's
/// `continue_final_message: true` with `add_generation_prompt: false`, or
/// DeepSeek's and Mistral's `prefix: true` on that message. `None` when
/// the body is not an OpenAI chat body with an assistant message last (it
/// goes as it is), or the lane continues one as it is (Claude).
pub fn mark_prefill(body: &[u8], prefill: switchyard_ir::Prefill) -> Option<Vec<u8>> {
    use switchyard_ir::Prefill;
    let mut value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let last = value.get_mut("messages")?.as_array_mut()?.last_mut()?;
    if last.get("role")?.as_str()? != "assistant" {
        return None;
    }
    match prefill {
        Prefill::Prefix => {
            last.as_object_mut()?.insert("prefix".to_owned(), serde_json::Value::Bool(true));
        }
        Prefill::ContinueFinalMessage => {
            let top = value.as_object_mut()?;
            top.insert("continue_final_message".to_owned(), serde_json::Value::Bool(true));
            top.insert("add_generation_prompt".to_owned(), serde_json::Value::Bool(false));
        }
        Prefill::No | Prefill::Assistant => return None,
    }
    serde_json::to_vec(&value).ok()
}

/// The part of a continuation's first text the caller does not have yet:
/// `first` without the whitespace a prefill trimmed from `so_far`, or
/// without the longest end of `so_far` it repeats.
pub fn seam<'a>(so_far: &str, first: &'a str, mechanism: Mechanism) -> &'a str {
    match mechanism {
        Mechanism::Afresh => first,
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

/// How a continuation's first text joined what the caller has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// A prefill (or an answer afresh): the lane wrote what follows by
    /// construction.
    Prefilled,
    /// It began with the anchor: what follows the anchor goes on.
    Anchored,
    /// It started the answer again and repeated all the caller has: what
    /// follows the repeat goes on.
    Restarted,
    /// Neither: nothing of it reaches the caller, whose stream ends with
    /// its error.
    Unrelated,
}

/// One step of a seam's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Held back: not yet proven.
    Hold,
    /// Goes to the caller.
    Release(String),
    /// Refused: the stream ends with the caller's error.
    Refuse,
}

/// The most of a continuation held back while its seam is unproven: a
/// restart must repeat all the caller has, so the bound is that plus the
/// anchor's reach, and never more than this.
pub const MAX_HELD: usize = 256 << 10;

/// The check of one continuation's seam: its text is pushed as it comes,
/// and nothing is released until the seam is proven (an instruction's
/// continuation) or at once (a prefill's, trimmed where the caller has the
/// whitespace already). Pure; whitespace never decides a comparison.
#[derive(Debug)]
pub struct Seam {
    mechanism: Mechanism,
    so_far: String,
    anchor: String,
    held: String,
    joined: Option<Joined>,
}

impl Seam {
    /// The seam of a continuation asked for by `mechanism` after `so_far`.
    pub fn new(so_far: &str, mechanism: Mechanism) -> Seam {
        Seam {
            mechanism,
            so_far: so_far.to_owned(),
            anchor: anchor(so_far).to_owned(),
            held: String::new(),
            joined: None,
        }
    }

    /// How it joined, once decided.
    pub fn joined(&self) -> Option<Joined> {
        self.joined
    }

    /// The continuation's next text.
    pub fn push(&mut self, text: &str) -> Step {
        match self.joined {
            Some(Joined::Unrelated) => return Step::Refuse,
            Some(_) => return Step::Release(text.to_owned()),
            None => {}
        }
        if self.mechanism != Mechanism::Instruction {
            self.joined = Some(Joined::Prefilled);
            return Step::Release(seam(&self.so_far, text, self.mechanism).to_owned());
        }
        self.held.push_str(text);
        self.judge(false)
    }

    /// The continuation's text ended (its block closed, or another began):
    /// what is held is decided now.
    pub fn finish(&mut self) -> Step {
        match self.joined {
            Some(Joined::Unrelated) => Step::Refuse,
            Some(_) => Step::Release(String::new()),
            None if self.mechanism != Mechanism::Instruction => {
                self.joined = Some(Joined::Prefilled);
                Step::Release(String::new())
            }
            None => self.judge(true),
        }
    }

    /// Decides what is held, once it can be told apart. A restart repeats
    /// all the caller has; an anchored continuation begins with its last
    /// words. When the caller's text begins as it ends (a text that repeats
    /// itself), the anchor is also how a restart begins, and the two agree
    /// until the held text parts from what the caller has (anchored) or
    /// repeats all of it without parting from the anchor either: then it
    /// is both, the two would release different text, and it is refused
    /// rather than guessed.
    fn judge(&mut self, ended: bool) -> Step {
        let caller_spaced = self.so_far.ends_with(char::is_whitespace);
        let restarted = after_prefix(&self.held, &self.so_far);
        let anchored = after_prefix(&self.held, &self.anchor);
        // An anchor of all the caller has: a restart is an anchored continuation.
        let whole_anchor = self.anchor.len() == self.so_far.trim().len();
        let may_restart = !whole_anchor && (restarted.is_some() || starts_like(&self.held, &self.so_far));
        let may_anchor = anchored.is_some() || starts_like(&self.held, &self.anchor);
        let waiting = !ended && self.held.len() <= MAX_HELD;
        let proven = match (may_restart, may_anchor) {
            (true, true) if waiting && !(restarted.is_some() && anchored.is_some()) => return Step::Hold,
            (true, true) | (false, false) => None,
            (true, false) => match restarted {
                Some(rest) => Some((Joined::Restarted, rest)),
                None if waiting => return Step::Hold,
                None => None,
            },
            (false, true) => match anchored {
                Some(rest) => Some((Joined::Anchored, rest)),
                None if waiting => return Step::Hold,
                None => None,
            },
        };
        let Some((joined, rest)) = proven else {
            self.joined = Some(Joined::Unrelated);
            self.held.clear();
            return Step::Refuse;
        };
        // Nothing past the anchor or the repeat yet: the seam's spacing is
        // not known until something follows (a space there may be the
        // caller's own, already sent).
        if rest.trim_start().is_empty() && waiting {
            return Step::Hold;
        }
        let rest = if caller_spaced { rest.trim_start() } else { rest };
        let released = rest.to_owned();
        self.joined = Some(joined);
        self.held.clear();
        Step::Release(released)
    }
}

/// What follows `prefix` at the start of `text`, whitespace aside: `None`
/// when `text` does not begin with all of `prefix`'s other characters.
fn after_prefix<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let mut wanted = prefix.chars().filter(|c| !c.is_whitespace()).peekable();
    wanted.peek()?;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            continue;
        }
        match wanted.next() {
            Some(w) if w == c => {}
            _ => return None,
        }
        if wanted.peek().is_none() {
            return Some(&text[at + c.len_utf8()..]);
        }
    }
    None
}

/// Whether all of `text` (whitespace aside) could still become a prefix of
/// `of`: every character so far agrees.
fn starts_like(text: &str, of: &str) -> bool {
    let mut of = of.chars().filter(|c| !c.is_whitespace());
    text.chars().filter(|c| !c.is_whitespace()).all(|c| of.next() == Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_so_far_the_request_is_asked_afresh() {
        let asked = Request { messages: vec![Message::text(Role::User, "hi")], ..Request::default() };
        let (next, mechanism) = request(&asked, "", true);
        assert_eq!(mechanism, Mechanism::Afresh);
        assert_eq!(next.messages, asked.messages);
        assert!(next.stream);
        assert_eq!(seam("", "Hello", mechanism), "Hello");
    }
    use proptest::prelude::*;

    #[test]
    fn a_lane_that_takes_prefill_gets_one_others_an_instruction_with_the_anchor() {
        let asked = Request { messages: vec![Message::text(Role::User, "hi")], ..Request::default() };
        let (next, mechanism) = request(&asked, "Hello, wor ", true);
        assert_eq!(mechanism, Mechanism::Prefill);
        assert_eq!(next.messages.last(), Some(&Message::text(Role::Assistant, "Hello, wor")));
        assert!(next.stream);
        let (next, mechanism) = request(&asked, "Hello, wor ", false);
        assert_eq!(mechanism, Mechanism::Instruction);
        assert_eq!(next.messages.len(), 3);
        assert_eq!(next.messages[2], Message::text(Role::User, instruction("Hello, wor")));
        assert!(instruction("x").starts_with(INSTRUCTION));
        // A thinking model takes no prefill.
        let thinking = Request { reasoning: Some(switchyard_ir::Reasoning::on()), ..asked };
        assert_eq!(request(&thinking, "x", true).1, Mechanism::Instruction);
        assert!(prefill_by_default(Protocol::Anthropic) && prefill_by_default(Protocol::Bedrock));
        assert!(!prefill_by_default(Protocol::OpenAi));
    }

    #[test]
    fn an_openai_compatible_prefill_is_marked_the_lanes_way() {
        use switchyard_ir::Prefill;
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hel"}]}"#;
        let vllm: serde_json::Value =
            serde_json::from_slice(&mark_prefill(body, Prefill::ContinueFinalMessage).unwrap()).unwrap();
        assert_eq!(
            (vllm["continue_final_message"].clone(), vllm["add_generation_prompt"].clone()),
            (true.into(), false.into())
        );
        let mistral: serde_json::Value = serde_json::from_slice(&mark_prefill(body, Prefill::Prefix).unwrap()).unwrap();
        assert_eq!(mistral["messages"][1]["prefix"], true);
        assert!(mark_prefill(body, Prefill::Assistant).is_none(), "Claude continues it as it is");
        let user_last = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
        assert!(mark_prefill(user_last, Prefill::Prefix).is_none());
    }

    #[test]
    fn the_anchor_is_the_last_words_from_a_words_start() {
        assert_eq!(anchor("Hello, wor "), "Hello, wor");
        let long = "one two three four five six seven eight nine ten eleven twelve thirteen";
        let found = anchor(long);
        assert!(found.len() <= ANCHOR_BYTES && long.ends_with(found), "{found}");
        assert!(long[..long.len() - found.len()].ends_with(' '), "starts at a word: {found}");
        let word = "x".repeat(100);
        assert_eq!(anchor(&word).len(), ANCHOR_BYTES, "one long word is cut");
        let accented = format!("x{}", "é".repeat(40));
        let found = anchor(&accented);
        assert!(found.len() <= ANCHOR_BYTES && found.len() >= ANCHOR_BYTES - 1 && accented.ends_with(found));
    }

    fn run(seam: &mut Seam, pieces: &[&str]) -> (String, bool) {
        let mut out = String::new();
        for piece in pieces {
            match seam.push(piece) {
                Step::Hold => {}
                Step::Release(text) => out.push_str(&text),
                Step::Refuse => return (out, false),
            }
        }
        match seam.finish() {
            Step::Release(text) => out.push_str(&text),
            Step::Refuse => return (out, false),
            Step::Hold => unreachable!("finish decides"),
        }
        (out, true)
    }

    #[test]
    fn an_instructed_continuation_goes_on_only_from_a_proven_seam() {
        let so_far = "The quick brown fox";
        // It begins with the anchor: what follows goes on.
        let mut seam = Seam::new(so_far, Mechanism::Instruction);
        assert_eq!(run(&mut seam, &["The qu", "ick  brown", " fox jumps", " over."]), (" jumps over.".into(), true));
        assert_eq!(seam.joined(), Some(Joined::Anchored));
        // It starts again: the repeat is skipped, the rest goes on.
        let long = "Paris is the capital of France. It has many museums, and the Louvre is";
        let mut seam = Seam::new(long, Mechanism::Instruction);
        let restarted = [long, " the largest."];
        assert_eq!(run(&mut seam, &restarted), (" the largest.".into(), true));
        assert_eq!(seam.joined(), Some(Joined::Restarted));
        // It starts again and goes another way: refused, nothing released.
        let mut seam = Seam::new(long, Mechanism::Instruction);
        assert_eq!(run(&mut seam, &["Paris is the capital of France. It is known for food."]), (String::new(), false));
        assert_eq!(seam.joined(), Some(Joined::Unrelated));
        // Something else altogether.
        let mut seam = Seam::new(so_far, Mechanism::Instruction);
        assert_eq!(run(&mut seam, &["Sure! Here is a poem."]), (String::new(), false));
        // A continuation that ends before proving anything.
        let mut seam = Seam::new(so_far, Mechanism::Instruction);
        assert_eq!(run(&mut seam, &["The quick"]), (String::new(), false));
        // Whitespace the caller has is not written twice.
        let mut seam = Seam::new("The quick brown fox ", Mechanism::Instruction);
        assert_eq!(run(&mut seam, &["The quick brown fox jumps"]).0, "jumps");
        // A prefill's continuation goes at once, trimmed as the prefill was.
        let mut seam = Seam::new("Hello, wor ", Mechanism::Prefill);
        assert_eq!(run(&mut seam, &[" world", "!"]), ("world!".into(), true));
    }

    #[test]
    fn the_seam_drops_what_the_caller_has() {
        assert_eq!(seam("Hello, wor ", " world", Mechanism::Prefill), "world");
        assert_eq!(seam("Hello, wor", "ld", Mechanism::Prefill), "ld");
        assert_eq!(seam("The answer is forty", "is forty-two.", Mechanism::Instruction), "-two.");
        assert_eq!(seam("The answer is", "s 42", Mechanism::Instruction), "s 42", "too short to be a repeat");
        assert_eq!(seam("né", "é!", Mechanism::Instruction), "é!");
    }

    #[test]
    fn a_restart_of_a_text_that_repeats_itself_is_not_taken_for_its_anchor() {
        let sentence = "Switchyard keeps the answer whole when an upstream breaks. ";
        let answer = sentence.repeat(3);
        // Cut where the anchor (the last words) is also how the answer began.
        let so_far = &answer[..sentence.len() + 45];
        assert!(answer.starts_with(anchor(so_far)), "{:?}", anchor(so_far));
        // A lane that starts over fits both readings: refused, never released.
        let mut seam = Seam::new(so_far, Mechanism::Instruction);
        assert_eq!(run(&mut seam, &[&answer[..30], &answer[30..]]), (String::new(), false));
        // A lane that goes on from the anchor parts from the restart reading
        // where the caller's text goes on differently: released from there.
        let mut seam = Seam::new(so_far, Mechanism::Instruction);
        let went_on = format!("{}tream breaks. And then it stops.", anchor(so_far));
        let mut different = so_far.to_owned();
        different.push_str("tream breaks. And then it stops.");
        assert_eq!(run(&mut seam, &[&went_on]), ("tream breaks. And then it stops.".into(), true));
        assert_eq!(seam.joined(), Some(Joined::Anchored));
        assert!(!answer.starts_with(&different));
    }

    proptest! {
        /// A text that repeats itself, cut anywhere and continued by a lane
        /// that restarts or that goes on from the anchor: what the caller
        /// gets is the answer (its text so far, then the released rest) or
        /// its error, never a repeat.
        #[test]
        fn a_text_that_repeats_itself_is_never_repeated(
            sentence in "[a-z]{1,6}( [a-z]{1,6}){1,5}\\. ",
            times in 2usize..5,
            cut in 1usize..200,
            restart in any::<bool>(),
            cuts in proptest::collection::vec(1usize..20, 0..6),
        ) {
            let answer = sentence.repeat(times);
            let cut = cut.min(answer.len() - 1);
            let so_far = &answer[..cut];
            prop_assume!(!so_far.trim().is_empty());
            let continuation = match restart {
                true => answer.clone(),
                false => format!("{}{}", anchor(so_far), &answer[cut..]),
            };
            let mut pieces = Vec::new();
            let mut at = 0;
            for piece in cuts {
                let end = (at + piece).min(continuation.len());
                pieces.push(&continuation[at..end]);
                at = end;
            }
            pieces.push(&continuation[at..]);
            let mut seam = Seam::new(so_far, Mechanism::Instruction);
            let (out, ok) = run(&mut seam, &pieces);
            if ok {
                prop_assert_eq!(format!("{so_far}{out}"), answer);
            } else {
                prop_assert!(out.is_empty());
            }
        }

        /// Whatever a lane continues with, what the caller gets is the text
        /// so far and then either a proven continuation (after the anchor,
        /// or after a repeat of everything) or nothing: the text so far is
        /// never repeated after it, however the continuation is cut.
        #[test]
        fn the_caller_never_gets_a_repeat_or_an_altered_answer(
            so_far in "[a-z]{1,8}( [a-z]{1,8}){0,12}",
            rest in "( [a-z]{1,8}){0,6}",
            kind in 0u8..4,
            cuts in proptest::collection::vec(1usize..20, 0..6),
        ) {
            let continuation = match kind {
                0 => format!("{}{rest}", anchor(&so_far)),
                1 => format!("{so_far}{rest}"),
                2 => format!("Sure!{rest}"),
                _ => format!("{}x{rest}", &so_far[..so_far.len() / 2]),
            };
            let mut pieces = Vec::new();
            let mut at = 0;
            for cut in cuts {
                let end = (at + cut).min(continuation.len());
                pieces.push(&continuation[at..end]);
                at = end;
            }
            pieces.push(&continuation[at..]);
            let mut seam = Seam::new(&so_far, Mechanism::Instruction);
            let (out, ok) = run(&mut seam, &pieces);
            match kind {
                0 | 1 => { prop_assert!(ok); prop_assert_eq!(out, rest); }
                _ => {
                    // Refused, unless the stray text happened to prove a seam.
                    if ok {
                        let whole = format!("{so_far}{out}");
                        prop_assert!(!whole[so_far.len()..].trim_start().starts_with(so_far.trim()) || so_far.len() < 2);
                    } else {
                        prop_assert!(out.is_empty());
                    }
                }
            }
        }

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
