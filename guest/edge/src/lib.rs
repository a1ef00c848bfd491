//! hindsight for stock component hosts: the engine, linked as a library, behind an MCP front on
//! `wasi:http/incoming-handler`, with its store in a directory ([`FileStore`] over
//! wasi:filesystem) and its language model an OpenAI-compatible endpoint reached over outgoing
//! wasi:http. The built `hindsight-edge.wasm` imports only WASI, so `wasmtime serve` (and any
//! host of the wasi:http proxy world that also lends a directory) runs it with no code of ours.
//!
//! Everything but `http` (the wasi:http glue) and `llm_http` is plain Rust, tested natively.
//! The MCP tools' names, descriptions and argument shapes come from `hindsight-mcp`, the same
//! crate the CLI's server uses.

pub mod file_store;
mod front;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod llm_http;

pub use file_store::FileStore;
pub use front::{Edge, Reply, Request, SharedStore, MAX_BODY};
