//! The hindsight memory engine as a `wasm32-wasip2` component, world `hindsight:memory/memory`
//! at the version this crate's version names (the WIT is in the repository's `wit/`). The bytes
//! are built by the workspace's `./dev component` (simd128, opt-level 3, fat LTO), so nothing
//! downstream needs the wasm32 target: the `hindsight` crate embeds, precompiles and runs them.

#![warn(missing_docs)]

/// The component.
pub const WASM: &[u8] = include_bytes!("../hindsight.wasm");

/// sha256 of [`WASM`], lower-case hex: identifies the engine build (compiled-component cache keys).
pub const SHA256: &str = trim(include_str!("../hindsight.wasm.sha256"));

/// sha256 over the sources the component was built from (`guest/types`, `guest/engine`, `wit`):
/// the workspace's tests compare it with the sources to catch a stale build.
pub const SOURCES_SHA256: &str = trim(include_str!("../sources.sha256"));

/// The hex digest at the start of a `sha256sum`-style line.
const fn trim(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut end = 0;
    while end < bytes.len() && bytes[end].is_ascii_hexdigit() {
        end += 1;
    }
    match line.split_at_checked(end) {
        Some((digest, _)) => digest,
        None => line,
    }
}
