//! The component: the WIT world (`wit/memory.wit`) bound by wit-bindgen over the engine. Only
//! the mapping lives here; the engine knows nothing of WIT. Built for `wasm32-wasip2` by
//! `./dev component` into `guest/component/hindsight.wasm`; natively this crate is empty.

#[cfg(target_arch = "wasm32")]
mod glue;
