//! One error type for every call: what went wrong, typed, with the field and item when an input
//! was at fault.

use std::fmt;

use hindsight_types::ErrorKind;

/// What went wrong. The variants mirror the component's error cases, plus what only a host can
/// meet (a trapped instance, a bad configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A field of the input is wrong. `item` is its index when it came in a batch (retain).
    InvalidInput {
        /// The item of the batch, if any.
        item: Option<usize>,
        /// The field, e.g. `importance`, `tags[2]`, `settings.recall.default_k`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// No such memory, task or file.
    NotFound(String),
    /// The store failed (I/O, a locked or read-only database, a lost connection).
    Store(String),
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
    /// The principal acting has no right to do this to the bank (see
    /// [`crate::Hindsight::as_principal`]). Nothing was read or changed.
    Denied(String),
}

impl Error {
    /// An invalid `field` outside any batch.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
        Error::InvalidInput { item: None, field: field.into(), message: message.into() }
    }

    /// What kind of failure it is (`ErrorKind::as_str` spells it as `--json` errors and the other
    /// hosts do: `invalid-input`, …).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Store(_) => ErrorKind::Store,
            Error::Model(_) => ErrorKind::Model,
            Error::Limit(_) => ErrorKind::Limit,
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::Llm(_) => ErrorKind::Llm,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Trap(_) => ErrorKind::Trap,
            Error::Config(_) => ErrorKind::Config,
            Error::Denied(_) => ErrorKind::Denied,
        }
    }

    /// The message without the kind (for an invalid field: `field: problem`).
    pub fn message(&self) -> String {
        match self {
            Error::InvalidInput { field, message, .. } => format!("{field}: {message}"),
            Error::NotFound(m)
            | Error::Store(m)
            | Error::Model(m)
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
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind().label();
        match self {
            Error::InvalidInput { item: Some(i), .. } => write!(f, "{kind}: items[{i}].{}", self.message()),
            _ => write!(f, "{kind}: {}", self.message()),
        }
    }
}

impl std::error::Error for Error {}

impl hindsight_types::Failure for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
    fn message(&self) -> String {
        Error::message(self)
    }
}

impl From<hindsight_types::FieldError> for Error {
    fn from(e: hindsight_types::FieldError) -> Self {
        Error::InvalidInput { item: e.item, field: e.field, message: e.message }
    }
}

impl From<hindsight_types::Denied> for Error {
    fn from(e: hindsight_types::Denied) -> Self {
        Error::Denied(e.0)
    }
}

impl From<hindsight_types::StoreError> for Error {
    fn from(e: hindsight_types::StoreError) -> Self {
        Error::Store(e.to_string())
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
