#![no_main]
//! The write path's rules judge on any two texts and cosine: no panic, and a text judged
//! against itself is never an update of itself.

use hindsight_engine::judge::{judge, Nature, Verdict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &str, f32, u8)| {
    let (old, new, cosine, n) = input;
    let nature = [Nature::Statement, Nature::Episode, Nature::Turn][usize::from(n % 3)];
    judge(old, new, cosine, nature);
    let same = judge(new, new, 1.0, nature);
    if new.chars().any(char::is_alphanumeric) {
        assert_ne!(same.verdict, Verdict::Update, "{new:?} updates itself: {}", same.why);
    }
});
