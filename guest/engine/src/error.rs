//! Every way an engine call can fail. Messages name the field or the thing at fault.

use std::fmt;

use hindsight_types::{ErrorKind, FieldError, StoreError};

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A field of the input is wrong.
    InvalidInput(FieldError),
    NotFound(String),
    Store(String),
    Model(String),
    Limit(String),
    Corrupt(String),
    /// The language model was needed and is unavailable, failed, or answered unusably.
    Llm(String),
    /// Another writer changed it first: a task update against a stale version, or commits that
    /// kept losing to other writers. Nothing was changed.
    Stale(String),
    /// The stored data was written by a newer engine.
    Unsupported(String),
    /// A commit's `expect` did not hold: another instance committed first and nothing was
    /// applied. Banks reload and try again; callers see `Stale` when that keeps failing.
    Conflict(String),
}

impl Error {
    /// What kind of failure it is, as every host names it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Store(_) => ErrorKind::Store,
            Error::Model(_) => ErrorKind::Model,
            Error::Limit(_) => ErrorKind::Limit,
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::Llm(_) => ErrorKind::Llm,
            Error::Stale(_) | Error::Conflict(_) => ErrorKind::Conflict,
            Error::Unsupported(_) => ErrorKind::Unsupported,
        }
    }

    /// `field: problem`, the shape every validation error takes.
    pub fn invalid(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        Error::InvalidInput(FieldError::new(field, problem.to_string()))
    }

    /// The message without the kind, e.g. `importance: must be a number from 0 to 1, got 7`.
    pub fn message(&self) -> String {
        match self {
            Error::InvalidInput(f) => f.to_string(),
            Error::NotFound(m)
            | Error::Store(m)
            | Error::Model(m)
            | Error::Limit(m)
            | Error::Corrupt(m)
            | Error::Llm(m)
            | Error::Stale(m)
            | Error::Unsupported(m)
            | Error::Conflict(m) => m.clone(),
        }
    }

    /// Locates an invalid field in item `index` of a batch.
    pub fn in_item(self, index: usize) -> Self {
        match self {
            Error::InvalidInput(f) => Error::InvalidInput(f.in_item(index)),
            other => other,
        }
    }
}

impl hindsight_types::Failure for Error {
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
        match e {
            StoreError::Conflict(key) => Error::Conflict(format!("{key} changed since it was read")),
            StoreError::ReadOnly(m) | StoreError::Failed(m) => Error::Store(m),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Error::Conflict(_) => "conflicting write",
            other => other.kind().label(),
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
