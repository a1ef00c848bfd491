//! The hindsight memory engine's domain model, shared by the engine inside the component and
//! every Rust host: the names of kinds, sources and statuses; the engine settings; the store and
//! LLM protocols a host lends; and the data the API takes (a [`Memory`] to retain, a [`Query`])
//! and returns ([`RecallResult`], [`MemoryRecord`], [`TaskEnd`], …), with their JSON forms.
//!
//! Most users reach these through the `hindsight` crate, which re-exports them.

#![warn(missing_docs)]

pub mod access;
mod audit;
pub mod defaults;
mod error;
mod ids;
mod item;
pub mod llm;
mod names;
pub mod openai;
mod random;
mod records;
pub mod settings;
pub mod store;
pub mod time;
#[doc(hidden)]
pub mod wit_map;

pub use access::{Denied, Principal, Principals, Right, MIN_TOKEN_CHARS};
pub use audit::{
    Audit, AuditItem, Cascaded, Correction, DayCount, Explanation, ExportPage, HealthFinding, HealthReport,
    ImportReport, ListPage, ListQuery, RecallHit, RecallLogEntry, UseRecord,
};
pub use error::{Error, FieldError, Result};
pub use ids::validate_bank_id;
pub use item::{split_list, Memory, Scope};
pub use llm::{Llm, LlmError, LlmRequest, LlmResponse, NoLlm};
pub use names::{
    DistillMethod, ErrorKind, Failure, FailureType, FeedbackOutcome, HealthKind, HistoryEvent, Kind,
    ListOrder, LlmOperation, MaintainAction, Named, Outcome, RetainAction, ScopeLevel, Source, Status,
    StepKind, UseEvent,
};
pub use random::random_u64;
pub use records::{
    Distilled, EndTask, Erasure, HistoryEntry, MaintainReport, MaintainStep, MemoryRecord, NewTask,
    OperationUsage, Query, RecallResult, Recalled, RetainOutcome, Score, Stats, Step, TaskEnd, TaskState,
    TaskUpdate, ToolCall, Trajectory, Usage,
};
pub use settings::Settings;
pub use store::{MemoryStore, Op, Store, StoreError};
pub use time::Timestamp;

/// The version of the stored format banks are written in (a bank's `format_version` in
/// [`Stats`]). 1: hindsight 0.1 (no version in the bank's `meta`; index segments as JSON or
/// postcard); 2: every segment in postcard, the version in `meta`. Older banks are migrated when
/// opened, in one commit; newer ones are refused.
pub const FORMAT_VERSION: u32 = 2;
