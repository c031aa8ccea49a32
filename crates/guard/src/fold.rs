//! Text as the rules read it: compatibility-normalised (NFKC: fullwidth
//! letters, ligatures, mathematical and circled letters become their plain
//! forms) with default-ignorable code points removed (zero-width spaces and
//! joiners, soft hyphens, variation selectors, bidi controls), each piece
//! mapped back to the bytes of the original it came from, so a match found
//! in the folded text is masked in the original. ASCII text, and text
//! already folded, is read as it is: no copy, no map.
//!
//! The text is cut into segments that normalise on their own: a segment
//! starts at a character whose decomposition starts with a starter that
//! combines with nothing before it (every ASCII character, most letters),
//! and takes the combining marks and ignorables after it.

use std::borrow::Cow;

use icu_properties::props::DefaultIgnorableCodePoint;
use icu_properties::CodePointSetData;
use unicode_normalization::char::{canonical_combining_class, decompose_compatible};
use unicode_normalization::{is_nfc_quick, is_nfkc_quick, IsNormalized, UnicodeNormalization};

/// A text folded, with the way back to the original.
#[derive(Debug)]
pub(crate) struct Folded<'a> {
    text: Cow<'a, str>,
    /// Each segment whose folded form differs from the original, in order:
    /// between two of them the texts are the same bytes.
    edits: Vec<Edit>,
}

/// A segment folded to other bytes (or to none: ignorables alone).
#[derive(Debug, Clone, Copy)]
struct Edit {
    folded_start: usize,
    folded_end: usize,
    original_start: usize,
    original_end: usize,
}

/// Whether `c` is ignored where text is read (Unicode's
/// `Default_Ignorable_Code_Point`).
pub(crate) fn ignorable(c: char) -> bool {
    !c.is_ascii() && CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// Whether `text` reads the same folded (no copy needed).
#[inline]
pub(crate) fn is_folded(text: &str) -> bool {
    text.is_ascii() || is_folded_unicode(text)
}

#[inline(never)]
fn is_folded_unicode(text: &str) -> bool {
    is_nfkc_quick(text.chars()) == IsNormalized::Yes && !text.chars().any(ignorable)
}

/// Whether a segment may start at `c`: it does not combine with, or reorder
/// against, anything before it.
fn starts_segment(c: char) -> bool {
    if c.is_ascii() {
        return true;
    }
    let mut first = None;
    decompose_compatible(c, |d| {
        first.get_or_insert(d);
    });
    let first = first.unwrap_or(c);
    canonical_combining_class(first) == 0 && is_nfc_quick(std::iter::once(first)) == IsNormalized::Yes
}

impl<'a> Folded<'a> {
    /// `text` folded.
    #[inline]
    pub(crate) fn new(text: &'a str) -> Folded<'a> {
        if is_folded(text) {
            return Folded { text: Cow::Borrowed(text), edits: Vec::new() };
        }
        Folded::fold(text)
    }

    #[inline(never)]
    fn fold(text: &'a str) -> Folded<'a> {
        let mut out = String::with_capacity(text.len());
        let mut edits = Vec::new();
        let mut segment: Option<(usize, usize)> = None;
        for (at, c) in text.char_indices() {
            let end = at + c.len_utf8();
            match segment {
                Some((start, _)) if ignorable(c) || !starts_segment(c) => segment = Some((start, end)),
                _ => {
                    if let Some((start, stop)) = segment {
                        fold_segment(text, start, stop, &mut out, &mut edits);
                    }
                    segment = Some((at, end));
                }
            }
        }
        if let Some((start, stop)) = segment {
            fold_segment(text, start, stop, &mut out, &mut edits);
        }
        if edits.is_empty() {
            return Folded { text: Cow::Borrowed(text), edits };
        }
        Folded { text: Cow::Owned(out), edits }
    }

    /// The folded text.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the folded text is the original.
    #[inline]
    pub(crate) fn is_original(&self) -> bool {
        self.edits.is_empty()
    }

    /// Where in the original the folded text's byte `at` comes from: the
    /// start of its segment (ignorables before it left out).
    #[inline]
    pub(crate) fn start(&self, at: usize) -> usize {
        if self.edits.is_empty() {
            return at;
        }
        let before = self.edits.partition_point(|e| e.folded_start <= at);
        match before.checked_sub(1).map(|i| self.edits[i]) {
            None => at,
            Some(edit) if at < edit.folded_end => edit.original_start,
            Some(edit) => edit.original_end + (at - edit.folded_end),
        }
    }

    /// Where in the original the folded text up to byte `at` (exclusive)
    /// ends: the end of the segment of its last byte.
    #[inline]
    pub(crate) fn end(&self, at: usize) -> usize {
        if self.edits.is_empty() {
            return at;
        }
        let before = self.edits.partition_point(|e| e.folded_start < at);
        match before.checked_sub(1).map(|i| self.edits[i]) {
            None => at,
            Some(edit) if at <= edit.folded_end => edit.original_end,
            Some(edit) => edit.original_end + (at - edit.folded_end),
        }
    }
}

/// Appends the folded form of `text[start..end]` to `out`, noting an edit
/// when it differs.
fn fold_segment(text: &str, start: usize, end: usize, out: &mut String, edits: &mut Vec<Edit>) {
    let original = &text[start..end];
    let folded_start = out.len();
    let mut chars = original.chars();
    match (chars.next(), chars.next()) {
        // One character that is its own folded form: the common case.
        (Some(c), None)
            if c.is_ascii() || (!ignorable(c) && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes) =>
        {
            out.push(c);
            return;
        }
        _ => out.extend(original.chars().filter(|c| !ignorable(*c)).nfkc().filter(|c| !ignorable(*c))),
    }
    if out[folded_start..] != *original {
        edits.push(Edit { folded_start, folded_end: out.len(), original_start: start, original_end: end });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The original text of each folded match of `needle`.
    fn found<'t>(text: &'t str, needle: &str) -> Vec<&'t str> {
        let folded = Folded::new(text);
        folded.as_str().match_indices(needle).map(|(at, m)| &text[folded.start(at)..folded.end(at + m.len())]).collect()
    }

    #[test]
    fn plain_and_folded_text_is_read_without_a_copy() {
        for text in ["plain ascii", "déjà vu, 東京", ""] {
            let folded = Folded::new(text);
            assert!(matches!(folded.text, Cow::Borrowed(_)) && folded.is_original(), "{text}");
        }
    }

    #[test]
    fn look_alikes_and_ignorables_fold_and_map_back() {
        assert_eq!(Folded::new("ｆｏｒｂｉｄｄｅｎ").as_str(), "forbidden");
        assert_eq!(Folded::new("for\u{200B}bid\u{00AD}den\u{FE0F}").as_str(), "forbidden");
        assert_eq!(Folded::new("𝐟𝐨𝐫𝐛𝐢𝐝𝐝𝐞𝐧 ﬁle ①").as_str(), "forbidden file 1");
        assert_eq!(Folded::new("cafe\u{0301}").as_str(), "café");
        assert_eq!(found("say ｆｏｒｂｉｄｄｅｎ now", "forbidden"), ["ｆｏｒｂｉｄｄｅｎ"]);
        // Ignorables go with the character before them.
        assert_eq!(found("a\u{200B}f\u{200B}o\u{200B}r\u{200B} b", "for"), ["f\u{200B}o\u{200B}r\u{200B}"]);
        // A match inside a ligature takes the whole ligature.
        assert_eq!(found("a ﬁle", "ile"), ["ﬁle"]);
        assert_eq!(found("\u{200B}\u{200B}x", "x"), ["x"]);
    }
}
