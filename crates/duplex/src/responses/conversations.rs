//! The conversations a Responses socket keeps for `previous_response_id`
//! (`store: false` included, as OpenAI's socket does): each response that
//! ended on the socket, by its id, with the whole conversation to go on
//! from (the turns before, its input, its output) as JSON bytes, never
//! parsed. Bounded: the most recent are kept, at most [`MAX_KEPT`] and
//! `max_bytes` in all; a turn naming a forgotten one is looked up in the
//! kept store, else gets OpenAI's `previous_response_not_found` (Codex then
//! sends its whole input again).

use std::collections::VecDeque;

use bytes::Bytes;

/// The most responses one socket keeps.
pub(crate) const MAX_KEPT: usize = 32;

/// A socket's kept conversations, newest last.
#[derive(Debug)]
pub(crate) struct Conversations {
    kept: VecDeque<(Box<str>, Bytes)>,
    bytes: usize,
    max_bytes: usize,
}

impl Conversations {
    /// None kept yet; at most `max_bytes` ever.
    pub(crate) fn new(max_bytes: usize) -> Conversations {
        Conversations { kept: VecDeque::new(), bytes: 0, max_bytes }
    }

    /// The conversation to go on from after response `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Bytes> {
        self.kept.iter().rev().find(|(kept, _)| &**kept == id).map(|(_, context)| context.clone())
    }

    /// Keeps the conversation after response `id`, forgetting the oldest
    /// ones past the bounds (one larger than all of them is not kept).
    pub(crate) fn keep(&mut self, id: &str, context: Bytes) {
        if context.len() > self.max_bytes {
            return;
        }
        self.bytes += context.len();
        self.kept.push_back((Box::from(id), context));
        while self.kept.len() > MAX_KEPT || self.bytes > self.max_bytes {
            match self.kept.pop_front() {
                Some((_, dropped)) => self.bytes -= dropped.len(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_are_kept_within_the_bounds() {
        let mut kept = Conversations::new(10);
        kept.keep("a", Bytes::from_static(b"[1,2]"));
        kept.keep("b", Bytes::from_static(b"[3,4]"));
        assert_eq!(kept.get("a").as_deref(), Some(&b"[1,2]"[..]));
        kept.keep("c", Bytes::from_static(b"[5]"));
        assert!(kept.get("a").is_none(), "the oldest goes past 10 bytes");
        assert_eq!(kept.get("c").as_deref(), Some(&b"[5]"[..]));
        kept.keep("huge", Bytes::from(vec![b' '; 11]));
        assert!(kept.get("huge").is_none() && kept.get("b").is_some(), "too large is not kept, and drops nothing");
        let mut many = Conversations::new(usize::MAX);
        for n in 0..=MAX_KEPT {
            many.keep(&n.to_string(), Bytes::from_static(b"[]"));
        }
        assert!(many.get("0").is_none() && many.get("1").is_some());
    }
}
