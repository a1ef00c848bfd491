//! The snapshot glue: `wizer-initialize`, which `hindsight-edge-pre-init` (wasmtime's wizer) runs
//! once when the component is built (`./dev component`), loads the model into memory, and the
//! snapshot taken afterwards is what every instance starts from; the first request takes the
//! model from there ([`take`]). The snapshot is mostly the loaded model itself (its weights as
//! f32, packed for the matrix kernels): the component is ~180 MB, the plain build 21.

use std::cell::RefCell;

use crate::bindings;
use crate::warm::Preloaded;

/// Where `wizer-initialize` reads the model files: the directory the build mounts.
const MODELS_AT_BUILD: &str = "/models";

thread_local! {
    static PRELOADED: RefCell<Option<Preloaded>> = const { RefCell::new(None) };
}

/// The model the snapshot holds, once: none in a component that was not pre-initialised.
pub fn take() -> Option<Preloaded> {
    PRELOADED.with(|p| p.borrow_mut().take())
}

unsafe extern "C" {
    /// wasi-libc keeps the preopened directories it found and the environment once read; neither
    /// may outlive the build's instance in the snapshot (a served instance has its own).
    fn __wasilibc_reset_preopens();
    fn __wasilibc_deinitialize_environ();
}

struct PreInit;

bindings::export!(PreInit with_types_in bindings);

impl bindings::Guest for PreInit {
    fn wizer_initialize() {
        // A failure here fails the build (wizer reports the trap), which is where it belongs.
        let preloaded = Preloaded::load(std::path::Path::new(MODELS_AT_BUILD))
            .unwrap_or_else(|e| panic!("pre-initialising the model: {e}"));
        PRELOADED.with(|p| *p.borrow_mut() = Some(preloaded));
        // SAFETY: both only reset libc's lazily filled tables; nothing holds a pointer into them.
        unsafe {
            __wasilibc_reset_preopens();
            __wasilibc_deinitialize_environ();
        }
    }
}
