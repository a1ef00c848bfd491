#![no_main]
//! Arbitrary sequences of bank operations at arbitrary times, checked by the same invariants as
//! the property test (`hindsight_engine::invariants`).

use arbitrary::Arbitrary;
use hindsight_engine::invariants::{run, Step, Text, PHRASES};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Op {
    Retain(Vec<(u8, Option<String>, u8, bool, bool)>),
    Recall(u8, Option<String>, u8, bool),
    Forget(u16, bool),
    Restore(u16),
    Feedback(Vec<u16>, u8),
    Maintain,
    Reopen,
}

fn text(phrase: u8, any: Option<String>) -> Text {
    match any {
        Some(s) => Text::Any(s),
        None => Text::Phrase(phrase as usize % PHRASES.len()),
    }
}

fuzz_target!(|ops: Vec<(Op, i32)>| {
    let steps: Vec<(Step, i64)> = ops
        .into_iter()
        .take(64)
        .map(|(op, minutes)| {
            let step = match op {
                Op::Retain(items) => Step::Retain(
                    items
                        .into_iter()
                        .take(8)
                        .map(|(p, s, kind, force, parallel)| (text(p, s), kind % 4, force, parallel))
                        .collect(),
                ),
                Op::Recall(p, s, k, superseded) => Step::Recall(text(p, s), u32::from(k % 16), superseded),
                Op::Forget(i, hard) => Step::Forget(i as usize, hard),
                Op::Restore(i) => Step::Restore(i as usize),
                Op::Feedback(ids, o) => {
                    Step::Feedback(ids.into_iter().take(4).map(usize::from).collect(), o % 3)
                }
                Op::Maintain => Step::Maintain,
                Op::Reopen => Step::Reopen,
            };
            (step, i64::from(minutes) * 60_000)
        })
        .collect();
    if let Err(broken) = run(steps) {
        panic!("{broken}");
    }
});
