//! The tools' error: a kind (as the CLI names them), a message, and the field and input line it
//! is about, as `--json` prints it.

use std::fmt;

use serde_json::{json, Value};

#[derive(Debug)]
pub struct CliError {
    pub kind: &'static str,
    pub message: String,
    pub field: Option<String>,
    pub line: Option<usize>,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> CliError {
        CliError { kind, message: message.into(), field: None, line: None }
    }

    /// A wrong flag or field.
    pub fn field(field: &str, message: impl Into<String>) -> CliError {
        CliError { field: Some(field.to_string()), ..CliError::new("invalid-input", message) }
    }

    /// The error is about this line (1-based) of an input file.
    pub fn at_line(self, line: usize) -> CliError {
        CliError { line: Some(line), ..self }
    }

    pub fn to_json(&self) -> Value {
        json!({"error": {"kind": self.kind, "message": self.to_string(), "field": self.field, "line": self.line}})
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        match &self.field {
            Some(field) if self.kind == "invalid-input" => {
                write!(f, "invalid input: {field}: {}", self.message)
            }
            _ => f.write_str(&self.message),
        }
    }
}

impl From<hindsight::Error> for CliError {
    fn from(e: hindsight::Error) -> Self {
        match e {
            hindsight::Error::InvalidInput(f) => CliError::field(&f.field, f.message),
            other => CliError::new(hindsight::types::Named::as_str(other.kind()), other.to_string()),
        }
    }
}

impl From<hindsight::types::FieldError> for CliError {
    fn from(e: hindsight::types::FieldError) -> Self {
        hindsight::Error::from(e).into()
    }
}

impl From<hindsight::store::StoreError> for CliError {
    fn from(e: hindsight::store::StoreError) -> Self {
        hindsight::Error::from(e).into()
    }
}
