//! hindsight's memory engine: plain Rust, tested natively. The component is this crate built
//! for `wasm32-wasip2`; `wit_glue` is the only module that knows the component model.
//!
//! Layers, each using only those above it: `hindsight_types` (names, settings, the store and LLM
//! protocols) → `text` → `record`, `task` → `embed`, `index`, `segment`, `lexical` →
//! `filter`, `conflict`, `score`, `recall`, `prompt` → `bank` → `engine` → `wit_glue`.

pub mod bank;
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
pub mod recall;
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

#[cfg(all(target_arch = "wasm32", feature = "component"))]
mod wit_glue;

pub use hindsight_types::settings;
pub use hindsight_types::{
    DistillMethod, Distilled, FailureType, FeedbackOutcome, HistoryEvent, Kind, MaintainAction,
    MaintainReport, MaintainStep, Memory, Outcome, RetainAction, RetainOutcome, Scope, ScopeLevel, Settings,
    Source, Stats, Status, Timestamp,
};

pub use bank::{
    recall_across, Bank, Citations, Corrected, Explained, HistoryEntry, Listed, TaskEnd, FORMAT_VERSION,
};
pub use engine::Engine;
pub use error::{Error, Result};
pub use recall::{RecallQuery, RecallResult, Recalled};
pub use record::Record;
