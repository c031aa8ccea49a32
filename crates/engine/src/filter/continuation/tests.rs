//! The continuation's eligibility and its splice into the caller's stream,
//! the seam check included.

use super::*;
use switchyard_ir::BlockStart;

fn continuation() -> Continuation {
    Continuation {
        request: Request::default(),
        slots: Vec::new(),
        served: Vec::new(),
        left: 1,
        timeout: std::time::Duration::from_secs(1),
        deadline: Instant::now(),
        ingress: Protocol::OpenAi,
        headers: HeaderMap::new(),
        request_id: HeaderValue::from_static("r"),
        caller_key: None,
        text: String::new(),
        text_only: true,
        open_text: None,
        next_index: 0,
        splice: None,
    }
}

fn text(index: u32, text: &str) -> StreamEvent {
    StreamEvent::BlockDelta { index, delta: Delta::Text(text.into()) }
}

#[test]
fn only_a_stream_of_text_so_far_may_be_continued() {
    let mut plain = continuation();
    assert!(!plain.eligible(false), "nothing delivered yet");
    assert!(plain.eligible(true), "nothing delivered, but a screen held text back: answered afresh");
    plain.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "Hello")]);
    assert!(plain.eligible(false));
    for disqualifier in [
        BlockStart::ToolUse { id: "c".into(), name: "f".into(), signature: None },
        BlockStart::Thinking,
        BlockStart::RedactedThinking { data: "x".into() },
    ] {
        let mut stream = continuation();
        stream.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "Hi")]);
        stream.observe(&[StreamEvent::BlockStart { index: 1, block: disqualifier.clone() }]);
        assert!(!stream.eligible(false), "{disqualifier:?}");
    }
    plain.left = 0;
    assert!(!plain.eligible(false), "its continuations are spent");
}

#[test]
fn a_continuations_blocks_join_the_callers_stream() {
    let mut stream = continuation();
    stream.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "Hello ")]);
    stream.splice = Some(Splice {
        seam: Seam::new("Hello ", Mechanism::Prefill),
        merge_into: stream.open_text,
        map: Vec::new(),
        text_index: stream.open_text,
    });
    let mut events = vec![
        StreamEvent::MessageStart { id: "m".into(), model: "x".into(), created: None, usage: Default::default() },
        StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
        text(0, " world"),
        StreamEvent::BlockStop { index: 0 },
        StreamEvent::BlockStart { index: 1, block: BlockStart::Text },
        text(1, "!"),
    ];
    assert_eq!(stream.splice(&mut events).unwrap(), Some(Joined::Prefilled));
    assert_eq!(
        events,
        [
            text(0, "world"),
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::BlockStart { index: 1, block: BlockStart::Text },
            text(1, "!"),
        ]
    );
}

fn instructed(so_far: &str) -> Continuation {
    let mut stream = continuation();
    stream.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, so_far)]);
    stream.splice = Some(Splice {
        seam: Seam::new(so_far, Mechanism::Instruction),
        merge_into: stream.open_text,
        map: Vec::new(),
        text_index: stream.open_text,
    });
    stream
}

#[test]
fn an_instructed_continuation_is_held_until_its_seam_is_proven() {
    // Its text arrives in pieces; nothing leaves before the anchor is whole.
    let mut stream = instructed("The quick brown");
    let mut first = vec![StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "The qu")];
    assert_eq!(stream.splice(&mut first).unwrap(), None);
    assert!(first.is_empty(), "{first:?}");
    let mut rest = vec![text(0, "ick brown fox"), StreamEvent::BlockStop { index: 0 }];
    assert_eq!(stream.splice(&mut rest).unwrap(), Some(Joined::Anchored));
    assert_eq!(rest, [text(0, " fox"), StreamEvent::BlockStop { index: 0 }]);
    // A lane that starts over and repeats everything: the repeat is skipped.
    let long = "The quick brown fox jumps over the lazy dog, and then the dog";
    let mut stream = instructed(long);
    let mut again = vec![text(0, long), text(0, " sleeps."), StreamEvent::MessageStop];
    assert_eq!(stream.splice(&mut again).unwrap(), Some(Joined::Restarted));
    assert_eq!(again, [text(0, " sleeps."), StreamEvent::MessageStop]);
    // Something unrelated never reaches the caller.
    let mut stream = instructed("The quick brown");
    let mut other = vec![text(0, "Sure! Here is a haiku.")];
    assert!(stream.splice(&mut other).is_err());
    // Nor does a continuation that ends before it proves anything.
    let mut stream = instructed("The quick brown");
    let mut short = vec![text(0, "The"), StreamEvent::BlockStop { index: 0 }];
    assert!(stream.splice(&mut short).is_err());
}
