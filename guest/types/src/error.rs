//! Every way a call can fail ([`Error`]), and what is wrong with an input ([`FieldError`]: the
//! item of a batch, the field, and the problem).

use std::fmt;

use crate::access::Denied;
use crate::names::{ErrorKind, Failure};
use crate::store::StoreError;

use serde::{Deserialize, Serialize};

/// One invalid field of an input: which item of a batch (when it came in one), which field, and
/// what is wrong with it. Callers read `item` and `field` instead of parsing the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// The index of the item in the batch it came in, if it came in one.
    pub item: Option<usize>,
    /// The field, e.g. `importance`, `tags[2]`, `metadata[turn]`.
    pub field: String,
    /// What is wrong, e.g. `must be a number from 0 to 1, got 7`.
    pub message: String,
}

impl FieldError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { item: None, field: field.into(), message: message.into() }
    }

    /// The same problem, located in item `index` of a batch.
    pub fn in_item(mut self, index: usize) -> FieldError {
        self.item = Some(index);
        self
    }

    /// The same problem, in a field nested under `outer` (e.g. `steps[3]`).
    pub fn within(mut self, outer: &str) -> FieldError {
        self.field =
            if self.field.is_empty() { outer.to_string() } else { format!("{outer}.{}", self.field) };
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(item) = self.item {
            write!(f, "items[{item}].")?;
        }
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Every way a hindsight call can fail, in the engine and in every host. Messages name the field
/// or the thing at fault; [`Error::kind`] says what kind of failure it is, as every host and the
/// CLI's `--json` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A field of the input is wrong (with the item of its batch, when it came in one).
    InvalidInput(FieldError),
    /// No such memory, task or bank: `what` names the kind of thing, `id` which one.
    NotFound {
        /// `memory`, `task` or `bank`.
        what: String,
        /// The id asked for.
        id: String,
        /// The whole message, e.g. `no memory "m-1" in bank "agent"`.
        message: String,
    },
    /// The store failed. A [`StoreError::Conflict`] (another writer committed first) is retried
    /// by the engine and reaches callers as [`Error::Conflict`] when it keeps happening.
    Store(StoreError),
    /// The embedding model is missing, unreadable, or failed.
    Model(String),
    /// A configured size limit was exceeded.
    Limit(String),
    /// Stored data could not be read back.
    Corrupt(String),
    /// The language model was needed and is unavailable, failed, or answered unusably.
    Llm(String),
    /// Another writer changed it first (a task updated against a stale version; commits that
    /// kept losing to other writers). Nothing was changed: reload and retry.
    Conflict(String),
    /// The stored data was written by a newer version of hindsight.
    Unsupported(String),
    /// The component stopped: the call passed its deadline or its memory cap, or the engine hit
    /// a bug. The instance was discarded; the next call starts a fresh one from the store.
    Trap(String),
    /// The host is configured wrongly (an unreadable component file, a bad LLM setting).
    Config(String),
    /// The principal acting has no right to do this to the bank. Nothing was read or changed.
    Denied(String),
}

impl Error {
    /// An invalid `field` outside any batch: `field: problem`.
    pub fn invalid(field: impl Into<String>, problem: impl fmt::Display) -> Error {
        Error::InvalidInput(FieldError::new(field, problem.to_string()))
    }

    /// No `what` with this `id`; `message` says where it was looked for.
    pub fn not_found(what: &str, id: impl Into<String>, message: impl Into<String>) -> Error {
        Error::NotFound { what: what.to_string(), id: id.into(), message: message.into() }
    }

    /// A store failure with this message.
    pub fn store(message: impl fmt::Display) -> Error {
        Error::Store(StoreError::failed(message))
    }

    /// What kind of failure it is ([`ErrorKind::as_str`](crate::Named::as_str) spells it as the
    /// hosts do: `invalid-input`, …).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Store(StoreError::Conflict(_)) | Error::Conflict(_) => ErrorKind::Conflict,
            Error::Store(_) => ErrorKind::Store,
            Error::Model(_) => ErrorKind::Model,
            Error::Limit(_) => ErrorKind::Limit,
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::Llm(_) => ErrorKind::Llm,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Trap(_) => ErrorKind::Trap,
            Error::Config(_) => ErrorKind::Config,
            Error::Denied(_) => ErrorKind::Denied,
        }
    }

    /// The message without the kind, e.g. `importance: must be a number from 0 to 1, got 7`.
    pub fn message(&self) -> String {
        match self {
            Error::InvalidInput(f) => f.to_string(),
            Error::NotFound { message, .. } => message.clone(),
            Error::Store(e) => e.to_string(),
            Error::Model(m)
            | Error::Limit(m)
            | Error::Corrupt(m)
            | Error::Llm(m)
            | Error::Conflict(m)
            | Error::Unsupported(m)
            | Error::Trap(m)
            | Error::Config(m)
            | Error::Denied(m) => m.clone(),
        }
    }

    /// The invalid field, when an input was at fault.
    pub fn field(&self) -> Option<&FieldError> {
        match self {
            Error::InvalidInput(f) => Some(f),
            _ => None,
        }
    }

    /// Locates an invalid field in item `index` of a batch.
    pub fn in_item(self, index: usize) -> Error {
        match self {
            Error::InvalidInput(f) => Error::InvalidInput(f.in_item(index)),
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind().label(), self.message())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::InvalidInput(e) => Some(e),
            Error::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl Failure for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
    fn message(&self) -> String {
        Error::message(self)
    }
}

impl From<FieldError> for Error {
    fn from(e: FieldError) -> Self {
        Error::InvalidInput(e)
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<Denied> for Error {
    fn from(e: Denied) -> Self {
        Error::Denied(e.0)
    }
}

/// `Result` with hindsight's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
