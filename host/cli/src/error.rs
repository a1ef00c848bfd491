//! The command line's error: the library's, or one of its own (a file, a flag), with the kind,
//! field and line a `--json` caller reads.

use std::fmt;

use serde_json::{json, Value};

#[derive(Debug)]
pub struct CliError {
    pub kind: &'static str,
    pub message: String,
    pub field: Option<String>,
    pub item: Option<usize>,
    pub line: Option<usize>,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> CliError {
        CliError { kind, message: message.into(), field: None, item: None, line: None }
    }

    /// A wrong flag or field.
    pub fn field(field: &str, message: impl Into<String>) -> CliError {
        CliError { field: Some(field.to_string()), ..CliError::new("invalid-input", message) }
    }

    /// The error is about this line (1-based) of an input file.
    pub fn at_line(self, line: usize) -> CliError {
        CliError { line: Some(line), ..self }
    }

    /// For a call with one item: the field, without the batch's item index.
    pub fn single_item(e: hindsight::Error) -> CliError {
        CliError { item: None, ..CliError::from(e) }
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
        match (&self.field, self.kind) {
            (Some(field), "invalid-input") => {
                let item = self.item.map(|i| format!("items[{i}].")).unwrap_or_default();
                write!(f, "invalid input: {item}{field}: {}", self.message)
            }
            _ => f.write_str(&self.message),
        }
    }
}

impl From<hindsight::Error> for CliError {
    fn from(e: hindsight::Error) -> Self {
        match e {
            hindsight::Error::InvalidInput(f) => CliError {
                kind: "invalid-input",
                message: f.message,
                field: Some(f.field),
                item: f.item,
                line: None,
            },
            other => CliError::new(hindsight::types::Named::as_str(other.kind()), other.to_string()),
        }
    }
}

impl From<hindsight::store::StoreError> for CliError {
    fn from(e: hindsight::store::StoreError) -> Self {
        hindsight::Error::from(e).into()
    }
}

impl From<hindsight::types::FieldError> for CliError {
    fn from(e: hindsight::types::FieldError) -> Self {
        hindsight::Error::from(e).into()
    }
}
