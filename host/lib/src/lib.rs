//! Agent memory as a sandboxed WebAssembly component.
//!
//! After a task, an agent keeps what happened as small structured memories — what worked, what
//! failed and why, the user's constraints and preferences; before the next task, hindsight
//! recalls the few that matter, scored by meaning, keywords, recency, confidence and source, as a
//! block ready to put in the prompt. The engine (embeddings included) runs inside a wasmtime
//! sandbox; this crate lends it a store and, optionally, a language model.
//!
//! ```
//! use hindsight::{Hindsight, Kind, Memory, Outcome, Query, Step};
//!
//! # fn main() -> Result<(), hindsight::Error> {
//! // The model comes from `Models::default_dir()`; `hindsight model fetch` puts it there.
//! let hs = Hindsight::builder().memory().no_llm().open()?;
//! let bank = hs.bank("agent")?;
//! bank.retain([
//!     Memory::new("pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV")
//!         .kind(Kind::Procedural)
//!         .tags(["csv", "encoding"]),
//!     Memory::new("The user wants PostgreSQL for every new service"),
//! ])?;
//!
//! let hits = bank.recall(Query::new("garbled headers when reading a CSV").k(1))?;
//! assert!(hits.items[0].memory.content.contains("utf-8-sig"));
//! println!("{}", hits.prompt); // ready to put in the agent's prompt
//!
//! let task = bank.begin_task("clean the vendor CSV")?;
//! task.step(Step::tool_call("python", "pd.read_csv('v.csv')"))?;
//! task.fact("the vendor CSV starts with a BOM")?;
//! let end = task.end(Outcome::Success)?;
//! println!("{:?}: {}", end.method, end.reason);
//! # Ok(())
//! # }
//! ```
//!
//! A [`Hindsight`] is cheap to clone and shared across threads: each bank is served by one of a
//! few sandboxed instances (see [`Builder::workers`]). Stores: [`SqliteStore`] (the default
//! feature `sqlite`), `PostgresStore` (feature `postgres`, shared by several hosts), an in-memory
//! one, or any [`Store`]. Language models: [`OpenAi`] (feature
//! `openai`, read from `HINDSIGHT_LLM_*` by default) or any [`Llm`].

#![warn(missing_docs)]

mod bank;
mod error;
mod hindsight;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod keys;
mod models;
#[cfg(feature = "openai")]
mod openai;
mod pool;
#[cfg(feature = "postgres")]
mod postgres;
mod runtime;
#[cfg(feature = "sqlite")]
mod sqlite;
mod usage;
mod wit;

pub use bank::{Bank, Task};
pub use error::{Error, Result};
pub use hindsight::{Builder, Hindsight, DEFAULT_DEADLINE, DEFAULT_MEMORY_LIMIT, MAX_WORKERS};
pub use hindsight_types::defaults;
pub use hindsight_types::settings::{self, Settings};
pub use hindsight_types::time::{self, Timestamp};
pub use hindsight_types::{
    split_list, Audit, AuditItem, Cascaded, Correction, Denied, DistillMethod, Distilled, EndTask, Erasure,
    ErrorKind, Explanation, FailureType, FeedbackOutcome, FieldError, HistoryEntry, HistoryEvent,
    ImportReport, Kind, ListOrder, ListPage, ListQuery, Llm, LlmError, LlmOperation, LlmRequest, LlmResponse,
    MaintainAction, MaintainReport, MaintainStep, Memory, MemoryRecord, MemoryStore, Named, NewTask, Op,
    Outcome, Principal, Principals, Query, RecallHit, RecallLogEntry, RecallResult, Recalled, RetainAction,
    RetainOutcome, Right, Scope, ScopeLevel, Score, Source, Stats, Status, Step, StepKind, Store, StoreError,
    TaskEnd, TaskState, TaskUpdate, ToolCall, Trajectory, UseEvent, UseRecord, FORMAT_VERSION,
    MIN_TOKEN_CHARS,
};
pub use models::Models;
#[cfg(feature = "openai")]
pub use openai::{JsonMode, OpenAi, DEFAULT_BACKOFF, DEFAULT_RETRIES, DEFAULT_TIMEOUT, ENV_URL, MAX_BACKOFF};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, DEFAULT_POOL_SIZE, POSTGRES_FORMAT};
pub use runtime::Timings;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SQLITE_FORMAT};
pub use usage::LlmUsage;

/// sha256 of the built-in component (the engine build this crate runs unless told otherwise).
pub const COMPONENT_SHA256: &str = hindsight_component::SHA256;

#[doc(hidden)]
pub mod __private {
    //! For this workspace's own tests only; not part of the API.
    pub use crate::runtime::{load_component, sandbox_wasi};
}
