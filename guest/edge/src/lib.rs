//! hindsight for stock component hosts: the engine, linked as a library, behind an MCP front on
//! `wasi:http/incoming-handler`, with its store in a directory ([`FileStore`] over
//! wasi:filesystem) and its language model an OpenAI-compatible endpoint reached over outgoing
//! wasi:http. The built `hindsight-edge.wasm` imports only WASI, so `wasmtime serve` (and any
//! host of the wasi:http proxy world that also lends a directory) runs it with no code of ours.
//!
//! With `--features spin` (`hindsight-edge-spin.wasm`) the store is Spin's `spin:sqlite` database
//! ([`SqlStore`]) instead.
//!
//! The component is pre-initialised (`pre_init`): the model is loaded when it is built, into the
//! memory snapshot every instance starts from, so a fresh instance answers its first request in
//! tens of milliseconds, not half a second ([`warm`]).
//!
//! Everything but `http` (the wasi:http glue), `llm_http`, `pre_init` and `spin` is plain Rust,
//! tested natively. The MCP tools' names, descriptions and argument shapes come from `hindsight-mcp`, the same
//! crate the CLI's server uses.

pub mod file_store;
mod front;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod llm_http;
#[cfg(target_arch = "wasm32")]
mod pre_init;
#[cfg(all(target_arch = "wasm32", feature = "spin"))]
mod spin;
pub mod sql_store;
pub mod warm;

/// The bindings of `wit/edge.wit`: the pre-initialiser's export, and Spin's SQLite in the Spin
/// build (wasi:http's are the `wasi` crate's).
#[cfg(target_arch = "wasm32")]
mod bindings {
    #[cfg(not(feature = "spin"))]
    wit_bindgen::generate!({ path: "wit", world: "edge" });
    #[cfg(feature = "spin")]
    wit_bindgen::generate!({ path: "wit", world: "edge-spin", generate_all });
}

pub use file_store::FileStore;
pub use front::{Edge, OpenStore, Reply, Request, MAX_BODY};
pub use sql_store::SqlStore;
