//! hindsight's memory engine. Everything here is plain Rust, tested natively; `wit_glue` is the
//! only module that knows the component model.

pub mod bank;
pub mod conflict;
pub mod embed;
pub mod embed_api;
pub mod engine;
pub mod error;
pub mod filter;
pub mod fingerprint;
pub mod index;
#[doc(hidden)]
pub mod invariants;
pub mod lexical;
pub mod llm;
pub mod prompt;
pub mod record;
pub mod score;
pub mod segment;
pub mod settings;
pub mod store;
pub mod task;

#[cfg(target_arch = "wasm32")]
mod wit_glue;

pub use bank::{
    Bank, DistillMethod, Distilled, FeedbackOutcome, HistoryEntry, HistoryEvent, MaintainAction,
    MaintainReport, MaintainStep, RecallQuery, RecallResult, Recalled, RetainAction, RetainOutcome, Stats,
    TaskEnd,
};
pub use engine::Engine;
pub use error::{Error, Result};
pub use record::{FailureType, Kind, Memory, NewMemory, Scope, ScopeLevel, Source, Status, Timestamp};
pub use settings::Settings;
