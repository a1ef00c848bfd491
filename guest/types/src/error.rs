//! What is wrong with an input: the item of a batch, the field, and the problem.

use std::fmt;

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
