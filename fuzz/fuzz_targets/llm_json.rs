#![no_main]
//! The tolerant reader of model answers (fences, <think> blocks, prose around the JSON) on any
//! text: an error or a value, never a panic; a value it finds serialises and parses again.
//! (Not compared for equality: serde_json's default float parsing is not round-trip exact.)

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(value) = hindsight_engine::llm::parse_json::<serde_json::Value>(text) {
        let again = serde_json::to_string(&value).expect("a parsed value serialises");
        assert!(serde_json::from_str::<serde_json::Value>(&again).is_ok(), "{again}");
    }
});
