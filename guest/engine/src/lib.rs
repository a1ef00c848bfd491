//! hindsight's memory engine: plain Rust, tested natively. The component is this crate built
//! for `wasm32-wasip2`; `wit_glue` is the only module that knows the component model.
//!
//! Layers, each using only those above it: `hindsight_types` (names, settings, the store and LLM
//! protocols) → `text` → `record`, `task` → `embed`, `index`, `segment`, `lexical` →
//! `filter`, `conflict`, `score`, `recall`, `prompt` → `bank` → `engine` → `wit_glue`.

pub mod bank;
pub mod defence;
pub mod embed;
pub mod engine;
pub mod error;
pub mod filter;
pub mod fingerprint;
pub mod index;
pub mod judge;
pub mod lexical;
pub mod llm;
pub mod prompt;
pub mod record;
pub mod score;
pub mod segment;
pub mod store;
pub mod task;
pub mod text;

#[cfg(any(test, feature = "test-support"))]
pub mod invariants;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;

pub use hindsight_types::settings;
pub use hindsight_types::{
    DistillMethod, Distilled, FailureType, FeedbackOutcome, HistoryEntry, HistoryEvent, Kind, MaintainAction,
    MaintainReport, MaintainStep, Memory, MemoryRecord, Outcome, Query, RecallResult, Recalled, RetainAction,
    RetainOutcome, Scope, ScopeLevel, Settings, Source, Stats, Status, TaskEnd, TaskState, Timestamp,
};

pub use bank::{banks, recall_across, Bank, FORMAT_VERSION};
pub use engine::Engine;
pub use error::{Error, Result};
pub use record::Record;
