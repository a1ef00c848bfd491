#![no_main]
//! The keyword tokenizer on any text: no panic, and every token is non-empty.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    for token in hindsight_engine::lexical::tokenize(text) {
        assert!(!token.is_empty());
    }
});
