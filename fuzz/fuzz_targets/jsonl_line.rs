#![no_main]
//! One line of a `retain --file` JSONL file: a memory or an error naming the field, never a
//! panic; numbers that pass are finite.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &str| {
    if let Ok(item) = hindsight_types::Memory::from_json_line(line) {
        assert!(item.importance.is_none_or(f32::is_finite));
        assert!(item.confidence.is_none_or(f32::is_finite));
        assert!(item.vector.iter().flatten().all(|x| x.is_finite()));
    }
});
