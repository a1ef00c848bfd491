//! hindsight's memory engine: plain Rust that knows nothing of WIT, tested natively. The
//! component is `hindsight-glue` (guest/glue), which wraps this crate for `wasm32-wasip2`.
//!
//! Layers, each using only those above it: `hindsight_types` (names, settings, errors, the store
//! and LLM protocols) → `text` → `record`, `task` → `embed`, `index`, `segment`, `lexical` →
//! `filter`, `defence`, `judge`, `score`, `prompt`, `question`, `entities` → `bank` → `engine`.

pub mod bank;
pub mod defence;
pub mod embed;
pub mod engine;
pub mod entities;
pub mod filter;
pub mod fingerprint;
pub mod index;
pub mod judge;
pub mod lexical;
pub mod llm;
pub mod prompt;
pub mod question;
pub mod record;
pub mod score;
pub mod segment;
pub mod store;
pub mod task;
pub mod text;
pub mod usage;

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
pub use hindsight_types::{Error, Result};
pub use record::Record;
