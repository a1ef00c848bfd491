//! Randomness for ids and tokens that must differ between processes and between instances.

/// 64 bits from the system's randomness (`salt` only matters if that fails). Not std's
/// `RandomState`: every instance made from one pre-initialised snapshot (hindsight-edge.wasm)
/// has the same keys, so two writers of one bank would make the same ids in the same millisecond.
pub fn random_u64(salt: u64) -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            (salt, crate::time::now()),
        )
    })
}
