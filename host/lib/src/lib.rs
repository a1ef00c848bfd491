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
//! few sandboxed instances (see [`Builder::workers`]). Stores: [`SqliteStore`](store::SqliteStore) (the default
//! feature `sqlite`), `PostgresStore` (feature `postgres`, shared by several hosts), an in-memory
//! one, or any [`Store`](store::Store). Language models: [`OpenAi`](llm::OpenAi) (feature
//! `openai`, read from `HINDSIGHT_LLM_*` by default) or any [`Llm`](llm::Llm).

#![warn(missing_docs)]

mod bank;
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
pub use hindsight::{Builder, Hindsight, Trace};
pub use hindsight_types::defaults;
pub use hindsight_types::settings::{self, Settings};
pub use hindsight_types::time::{self, Timestamp};
pub use hindsight_types::{Error, Result};
pub use hindsight_types::{ErrorKind, Kind, Memory, Outcome, Query, Source, Step};
pub use models::Models;

/// What calls take and return besides the quickstart's few: recall results, task ends, audits,
/// histories, list pages, maintenance reports.
pub mod types {
    pub use crate::bank::{Distiller, TaskFilter, Vectors};
    pub use crate::runtime::Timings;
    pub use hindsight_types::{
        split_list, Audit, AuditItem, Cascaded, Correction, DayCount, DistillMethod, Distilled, EndTask,
        Erasure, Explanation, FailureType, FeedbackOutcome, FieldError, HealthFinding, HealthKind,
        HealthReport, HistoryEntry, HistoryEvent, ImportReport, ListOrder, ListPage, ListQuery,
        MaintainAction, MaintainReport, MaintainStep, MemoryRecord, Named, NewTask, OperationUsage,
        RecallHit, RecallLogEntry, RecallResult, Recalled, RetainAction, RetainOutcome, Score, Stats, Status,
        StepKind, TaskEnd, TaskState, TaskUpdate, ToolCall, Trajectory, Usage, UseEvent, UseRecord,
        MIN_TOKEN_CHARS,
    };
}

/// Where memories are kept: the [`Store`](store::Store) trait the engine commits through, and
/// the stores this crate ships.
pub mod store {
    #[cfg(feature = "postgres")]
    pub use crate::postgres::{PostgresStore, DEFAULT_POOL_SIZE, POSTGRES_FORMAT};
    #[cfg(feature = "sqlite")]
    pub use crate::sqlite::{SqliteStore, SQLITE_FORMAT};
    pub use hindsight_types::{MemoryStore, Op, Store, StoreError, FORMAT_VERSION};
}

/// The language model the engine borrows for distillation and judgement: the [`Llm`](llm::Llm)
/// trait, the OpenAI-compatible client, and what each operation cost.
pub mod llm {
    #[cfg(feature = "openai")]
    pub use crate::openai::{
        JsonMode, OpenAi, DEFAULT_BACKOFF, DEFAULT_RETRIES, DEFAULT_TIMEOUT, ENV_URL, MAX_BACKOFF,
    };
    pub use crate::usage::LlmUsage;
    pub use hindsight_types::{Llm, LlmError, LlmOperation, LlmRequest, LlmResponse};
}

/// Who may read and write which banks: principals, their rights and scopes.
pub mod access {
    pub use hindsight_types::{Denied, Principal, Principals, Right, Scope, ScopeLevel};
}

/// sha256 of the built-in component (the engine build this crate runs unless told otherwise).
pub const COMPONENT_SHA256: &str = hindsight_component::SHA256;

#[doc(hidden)]
pub mod __private {
    //! For this workspace's own tests only; not part of the API.
    pub use crate::runtime::{load_component, sandbox_wasi};
}
