//! Screening cannot be bypassed by encoding (issue 43): what a policy
//! blocks or masks in plain text is blocked or masked in any encoding a
//! protocol allows, in each protocol's own shapes, whole and streamed. The
//! property is `encodings/property.rs`, shared with the fuzz target
//! `guardrail_encodings`.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

#[path = "encodings/property.rs"]
mod property;

use property::{check, screen, Case};
use proptest::prelude::*;
use switchyard_guard::Screen;

fn compiled() -> &'static Screen {
    static SCREEN: std::sync::OnceLock<Screen> = std::sync::OnceLock::new();
    SCREEN.get_or_init(screen)
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (0usize..6, 0usize..16, 0usize..32, any::<bool>(), any::<bool>()),
        (
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::collection::vec(any::<u8>(), 0..40),
            "\\PC{0,12}",
            "\\PC{0,12}",
            prop_oneof![8 => Just(0u8), 1 => Just(2u8), 1 => Just(70u8)],
            proptest::collection::vec(0usize..4096, 0..6),
        ),
    )
        .prop_map(
            |((protocol, place, member, mask, url_safe), (shapes, escapes, before, after, padding, cuts))| Case {
                protocol,
                place,
                member,
                mask,
                shapes,
                escapes,
                before,
                after,
                padding,
                url_safe,
                cuts,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_encoding_gets_past_the_screen(case in cases()) {
        if let Err(bypass) = check(compiled(), &case) {
            prop_assert!(false, "{bypass}\n{case:?}");
        }
    }
}

/// Each protocol's every place, plain and in every shape, as a table.
#[test]
fn every_place_of_every_protocol_is_screened() {
    for protocol in 0..6 {
        for place in 0..9 {
            for shape in 0..5u8 {
                for mask in [false, true] {
                    let case = Case {
                        protocol,
                        place,
                        mask,
                        shapes: vec![shape; 20],
                        escapes: vec![0, 1, 2],
                        ..Case::default()
                    };
                    check(compiled(), &case).unwrap_or_else(|bypass| panic!("{bypass}\n{case:?}"));
                }
            }
        }
    }
}
