//! The reference host for the hindsight memory component: loads and sandboxes the `.wasm`,
//! lends it a store (SQLite or memory) and an LLM, and offers the bank API to Rust callers.

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "memory",
    });
}

pub mod bench;
pub mod convert;
pub mod eval;
pub mod kv;
pub mod llm;
pub mod mcp;
pub mod models;
pub mod pool;
pub mod runtime;
pub mod scripted_llm;

pub use bindings::hindsight::memory::types;
pub use kv::{Kv, MemoryKv, SqliteKv};
pub use runtime::{CallError, CallResult, Host, HostConfig};
