//! The bank's invariants (`hindsight_engine::invariants`) over random operation sequences at
//! arbitrary times. `PROPTEST_CASES=5000 cargo test -p hindsight-engine --test bank_properties`
//! for a longer run; `fuzz/` drives the same checks with cargo-fuzz.

use hindsight_engine::invariants::{run, Step, Text, PHRASES};
use proptest::prelude::*;

const DAY: i64 = 86_400_000;

fn text() -> impl Strategy<Value = Text> {
    prop_oneof![
        4 => (0..PHRASES.len()).prop_map(Text::Phrase),
        1 => ".{0,40}".prop_map(Text::Any),
    ]
}

fn step() -> impl Strategy<Value = (Step, i64)> {
    let step = prop_oneof![
        4 => prop::collection::vec((text(), 0u8..4, any::<bool>(), prop::bool::weighted(0.1)), 1..4).prop_map(Step::Retain),
        3 => (text(), 0u32..12, prop::bool::weighted(0.2)).prop_map(|(t, k, s)| Step::Recall(t, k, s)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, hard)| Step::Forget(i, hard)),
        1 => any::<usize>().prop_map(Step::Restore),
        1 => (prop::collection::vec(any::<usize>(), 0..3), 0u8..3).prop_map(|(ids, o)| Step::Feedback(ids, o)),
        1 => Just(Step::Maintain),
        1 => Just(Step::Reopen),
    ];
    // Time moves mostly forward, by up to a year, and sometimes back.
    (step, -3 * DAY..400 * DAY)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn bank_operations_keep_their_promises(steps in prop::collection::vec(step(), 1..40)) {
        run(steps).map_err(TestCaseError::fail)?;
    }
}
