use std::fmt;

/// Every way an engine call can fail. Messages name the field or the thing at fault.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    InvalidInput(String),
    NotFound(String),
    Store(String),
    Model(String),
    Limit(String),
    Corrupt(String),
    /// The language model was needed and is unavailable, failed, or answered unusably.
    Llm(String),
    /// Another instance committed first: the commit was refused and changed nothing. Banks
    /// reload and try again; callers see it only when that keeps failing (as a store error).
    Conflict(String),
}

impl Error {
    /// `field: problem`, the shape every validation message takes.
    pub fn invalid(field: impl fmt::Display, problem: impl fmt::Display) -> Self {
        Error::InvalidInput(format!("{field}: {problem}"))
    }

    pub fn message(&self) -> &str {
        match self {
            Error::InvalidInput(m)
            | Error::NotFound(m)
            | Error::Store(m)
            | Error::Model(m)
            | Error::Limit(m)
            | Error::Corrupt(m)
            | Error::Llm(m)
            | Error::Conflict(m) => m,
        }
    }

    /// Prefixes the field path of a nested item, e.g. `items[3].importance`.
    pub fn within(self, outer: impl fmt::Display) -> Self {
        match self {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{outer}.{m}")),
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Error::InvalidInput(_) => "invalid input",
            Error::NotFound(_) => "not found",
            Error::Store(_) => "store error",
            Error::Model(_) => "model error",
            Error::Limit(_) => "limit exceeded",
            Error::Corrupt(_) => "corrupt data",
            Error::Llm(_) => "language model error",
            Error::Conflict(_) => "conflicting write",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
