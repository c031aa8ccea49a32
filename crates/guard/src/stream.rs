//! A stream's text screened as it comes, never releasing text that could
//! still become a match: a match is at most the screen's reach long (in
//! folded text, [`crate::fold`]), so all but what folds to the last `reach`
//! bytes of what arrived can be decided now (and a match that straddles
//! that line waits whole). A match split across any number of chunks is
//! masked or blocked exactly as in one piece. The hold ends at the block's
//! end ([`StreamMask::flush`]). A private key's header withholds everything
//! up to its footer. The same hold-back screens a long string of a body in
//! windows ([`Held`]).

use std::sync::Arc;

use crate::fold::{self, Folded};
use crate::{Action, Blocked, Decision, Direction, Masks, Screen};

/// Bytes of already released text kept in front of the held text, so a
/// pattern's leading `\b` sees what came before it.
const CONTEXT: usize = 8;

/// The footer a private key's header withholds text up to.
const KEY_FOOTER: &str = "PRIVATE KEY-----";

/// One stream block's screen and held text.
#[derive(Debug)]
pub struct StreamMask {
    screen: Arc<Screen>,
    held: Held,
}

impl StreamMask {
    /// A block's mask under `screen`'s reply rules.
    pub fn new(screen: Arc<Screen>) -> StreamMask {
        StreamMask { screen, held: Held::new(Direction::Response) }
    }

    /// A mask for text a vendor's signature may cover (a reasoning block,
    /// whose signature comes at its end): it releases text no rule
    /// matches, and where a rule would mask it stops with
    /// [`Blocked::signed`], releasing nothing of that match and keeping
    /// what it held ([`StreamMask::take_held`]).
    pub fn signed(screen: Arc<Screen>) -> StreamMask {
        StreamMask { screen, held: Held { signed: true, ..Held::new(Direction::Response) } }
    }

    /// The text held back, not yet released; the mask starts empty again.
    pub fn take_held(&mut self) -> String {
        let held = self.held.buffer.split_off(self.held.context);
        self.held.buffer.clear();
        self.held.context = 0;
        held
    }

    /// Bytes held back now.
    pub fn held(&self) -> usize {
        self.held.held()
    }

    /// Takes the next piece of text; returns what may be released now
    /// (masked), or the rule that blocks the reply.
    pub fn push(&mut self, text: &str, masks: &mut Masks, decisions: &mut Vec<Decision>) -> Result<String, Blocked> {
        let mut out = String::new();
        self.held.push(&self.screen, text, masks, decisions, &mut out)?;
        Ok(out)
    }

    /// [`push`](Self::push) in place: `text` is taken and replaced by what
    /// may be released now (its buffer reused: a stream's delta costs no
    /// second allocation).
    pub fn push_in_place(
        &mut self,
        text: &mut String,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
    ) -> Result<(), Blocked> {
        let moves = self.held.take(text);
        text.clear();
        match moves {
            true => self.held.release(&self.screen, false, masks, decisions, text),
            false => Ok(()),
        }
    }

    /// The block ended: everything held is decided and released.
    pub fn flush(&mut self, masks: &mut Masks, decisions: &mut Vec<Decision>) -> Result<String, Blocked> {
        let mut out = String::new();
        self.held.flush(&self.screen, masks, decisions, &mut out)?;
        Ok(out)
    }
}

/// Text held back under a screen's rules of one direction.
#[derive(Debug)]
pub(crate) struct Held {
    direction: Direction,
    /// Released context (its first `context` bytes), then held text.
    buffer: String,
    context: usize,
    /// Inside a private key: nothing is released until its footer.
    withholding: bool,
    /// The text is signed: a mask stops rather than change it.
    signed: bool,
}

impl Held {
    pub(crate) fn new(direction: Direction) -> Held {
        Held { direction, buffer: String::new(), context: 0, withholding: false, signed: false }
    }

    fn held(&self) -> usize {
        self.buffer.len() - self.context
    }

    /// Takes `text`; what may be released now goes to `out`.
    pub(crate) fn push(
        &mut self,
        screen: &Screen,
        text: &str,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
        out: &mut String,
    ) -> Result<(), Blocked> {
        match self.take(text) {
            true => self.release(screen, false, masks, decisions, out),
            false => Ok(()),
        }
    }

    /// Appends `text`; whether anything may be released after it.
    /// Ignorables alone fold to nothing: the line cannot move, and a flood
    /// of them costs no pass over what is held.
    #[inline]
    fn take(&mut self, text: &str) -> bool {
        self.buffer.push_str(text);
        text.is_ascii() || !text.chars().all(fold::ignorable)
    }

    /// Everything held is decided and released to `out`.
    pub(crate) fn flush(
        &mut self,
        screen: &Screen,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
        out: &mut String,
    ) -> Result<(), Blocked> {
        self.release(screen, true, masks, decisions, out)
    }

    pub(crate) fn release(
        &mut self,
        screen: &Screen,
        all: bool,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
        out: &mut String,
    ) -> Result<(), Blocked> {
        let direction = self.direction;
        loop {
            if self.withholding {
                match self.buffer[self.context..].find(KEY_FOOTER) {
                    Some(at) => {
                        let end = self.context + at + KEY_FOOTER.len();
                        self.keep_from(end);
                        self.withholding = false;
                    }
                    None => {
                        // Keep only what could be the start of the footer.
                        let keep =
                            if all { self.buffer.len() } else { self.buffer.len().saturating_sub(KEY_FOOTER.len()) };
                        self.keep_from(floor_boundary(&self.buffer, keep.max(self.context)));
                        return Ok(());
                    }
                }
            }
            let (line, findings) = {
                let folded = Folded::new(&self.buffer);
                // What folds to the last `reach` bytes may still become
                // part of a match; so may the segment that holds its start.
                let line = match all {
                    true => self.buffer.len(),
                    false => {
                        let text = folded.as_str();
                        let folded_line = floor_boundary(text, text.len().saturating_sub(screen.reach(direction)));
                        folded.start(folded_line)
                    }
                };
                if line <= self.context {
                    return Ok(());
                }
                (line, screen.find_folded(&folded, direction))
            };
            let mut cut = line;
            for f in &findings {
                if f.start >= self.context && f.start < line && f.end > line {
                    cut = cut.min(f.start);
                }
            }
            let mut at = self.context;
            let mut key_opened = None;
            for f in findings.iter().filter(|f| f.start >= self.context && f.end <= cut) {
                let action = screen.action(f.rule);
                let decision = Decision { rule: f.rule, action, direction };
                if !decisions.contains(&decision) {
                    decisions.push(decision);
                }
                match action {
                    Action::Block => return Err(screen.blocked(f.rule)),
                    Action::Flag => {}
                    Action::Mask if self.signed => return Err(Blocked { signed: true, ..screen.blocked(f.rule) }),
                    Action::Mask => {
                        out.push_str(&self.buffer[at..f.start]);
                        let rule = &screen.rules[f.rule];
                        let reversible = screen.reversible(f.rule);
                        out.push_str(&masks.placeholder(&rule.label, &self.buffer[f.start..f.end], reversible));
                        at = f.end;
                        if &*rule.name == "private_key" {
                            key_opened = Some(f.end);
                            break;
                        }
                    }
                }
            }
            match key_opened {
                Some(end) => {
                    // The key itself is withheld up to its footer; then go on.
                    self.keep_from(end);
                    self.withholding = true;
                }
                None => {
                    out.push_str(&self.buffer[at..cut]);
                    self.keep_from(cut);
                    return Ok(());
                }
            }
        }
    }

    /// Drops the buffer before `at`, keeping a little released context.
    fn keep_from(&mut self, at: usize) {
        let start = floor_boundary(&self.buffer, at.saturating_sub(CONTEXT));
        self.buffer.drain(..start);
        self.context = at - start;
    }
}

/// The largest char boundary of `text` at or below `at`.
pub(crate) fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Compiled once for every case.
    fn screen() -> Arc<Screen> {
        static SCREEN: std::sync::OnceLock<Arc<Screen>> = std::sync::OnceLock::new();
        SCREEN.get_or_init(|| Arc::new(crate::tests::pii())).clone()
    }

    /// The text released for `pieces`, or the block.
    fn streamed(screen: &Arc<Screen>, pieces: &[&str]) -> Result<String, String> {
        let mut mask = StreamMask::new(screen.clone());
        let (mut masks, mut decisions) = (Masks::default(), Vec::new());
        let mut out = String::new();
        // Every other piece in place: both doors release the same.
        for (at, piece) in pieces.iter().enumerate() {
            let released = if at % 2 == 0 {
                mask.push(piece, &mut masks, &mut decisions)
            } else {
                let mut text = (*piece).to_owned();
                mask.push_in_place(&mut text, &mut masks, &mut decisions).map(|()| text)
            };
            out.push_str(&released.map_err(|b| b.rule.to_string())?);
        }
        out.push_str(&mask.flush(&mut masks, &mut decisions).map_err(|b| b.rule.to_string())?);
        Ok(out)
    }

    fn whole(screen: &Screen, text: &str) -> Result<String, String> {
        let (mut masks, mut decisions) = (Masks::default(), Vec::new());
        match screen.screen(text, Direction::Response, &mut masks, &mut decisions) {
            Ok(changed) => Ok(changed.unwrap_or_else(|| text.to_owned())),
            Err(blocked) => Err(blocked.rule.to_string()),
        }
    }

    const TEXTS: [&str; 5] = [
        "Write to ann@example.com today, or call +44 20 7946 0958.",
        "The card 4111 1111 1111 1111 and ticket TCK-123456 and AKIAIOSFODNN7EXAMPLE.",
        "nothing to see here, just text that runs on for a while",
        "first ann@example.com then ann@example.com again",
        "a Forbidden-Phrase in the middle",
    ];

    #[test]
    fn a_match_split_at_every_byte_is_masked_as_in_one_piece() {
        let screen = screen();
        for text in TEXTS {
            let expected = whole(&screen, text);
            for split in 1..text.len() {
                if !text.is_char_boundary(split) {
                    continue;
                }
                let got = streamed(&screen, &[&text[..split], &text[split..]]);
                assert_eq!(got, expected, "split at {split} of {text:?}");
            }
        }
    }

    #[test]
    fn a_private_key_is_withheld_to_its_footer() {
        let screen = screen();
        let pieces =
            ["here:\n-----BEGIN RSA PRI", "VATE KEY-----\nMIIE", "ow\n-----END RSA PRIVATE", " KEY-----\nthanks"];
        assert_eq!(streamed(&screen, &pieces), Ok("here:\n[SECRET_1]\nthanks".to_owned()));
    }

    #[test]
    fn nothing_is_released_that_could_still_match() {
        let screen = screen();
        let mut mask = StreamMask::new(screen.clone());
        let (mut masks, mut decisions) = (Masks::default(), Vec::new());
        let released = mask.push("mail ann@exam", &mut masks, &mut decisions).unwrap_or_default();
        assert!(!released.contains("ann"), "{released:?}");
        assert!(mask.held() <= screen.response_reach);
    }

    proptest! {
        /// Any text cut into any pieces is released as the whole text is
        /// screened: the same masks, the same block.
        #[test]
        fn pieces_never_change_the_outcome(
            pick in 0..TEXTS.len(),
            cuts in proptest::collection::vec(0usize..80, 0..6),
        ) {
            let screen = screen();
            let text = TEXTS[pick];
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (text.len() + 1)).filter(|&c| text.is_char_boundary(c)).collect();
            points.sort_unstable();
            points.dedup();
            let mut pieces = Vec::new();
            let mut from = 0;
            for point in points {
                pieces.push(&text[from..point]);
                from = point;
            }
            pieces.push(&text[from..]);
            prop_assert_eq!(streamed(&screen, &pieces), whole(&screen, text));
        }
    }
}

/// A stream's text with its reversible placeholders put back, never
/// releasing a `[` that could still open one: at most
/// [`MAX_PLACEHOLDER`](crate::MAX_PLACEHOLDER) bytes are held.
#[derive(Debug, Default)]
pub struct Restorer {
    held: String,
}

impl Restorer {
    /// Takes released text; returns it restored up to any placeholder
    /// that may still be open.
    pub fn push(&mut self, text: &str, masks: &Masks) -> String {
        self.held.push_str(text);
        let keep_from = match self.held.rfind('[') {
            Some(open) if !self.held[open..].contains(']') && self.held.len() - open < crate::MAX_PLACEHOLDER => open,
            _ => self.held.len(),
        };
        let rest = self.held.split_off(keep_from);
        let ready = std::mem::replace(&mut self.held, rest);
        masks.restore(&ready).unwrap_or(ready)
    }

    /// The block ended: everything held, restored.
    pub fn flush(&mut self, masks: &Masks) -> String {
        let ready = std::mem::take(&mut self.held);
        masks.restore(&ready).unwrap_or(ready)
    }
}

#[cfg(test)]
mod restore_tests {
    use super::*;

    #[test]
    fn a_placeholder_split_at_every_byte_is_put_back() {
        let mut masks = Masks::default();
        let label: Arc<str> = Arc::from("EMAIL");
        masks.placeholder(&label, "ann@example.com", true);
        let text = "mail [EMAIL_1] or [NOT_1], [ end";
        let expected = "mail ann@example.com or [NOT_1], [ end";
        for split in 0..=text.len() {
            let mut restorer = Restorer::default();
            let mut out = restorer.push(&text[..split], &masks);
            out.push_str(&restorer.push(&text[split..], &masks));
            out.push_str(&restorer.flush(&masks));
            assert_eq!(out, expected, "split at {split}");
        }
    }
}
