//! Content fingerprints that are persisted or shown, so stable across builds and platforms
//! (std's hashers promise neither).

/// FNV-1a, 64 bits: cheap, and enough to tell contents apart.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}
