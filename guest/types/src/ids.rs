//! Bank ids: they become store key prefixes, so they keep to a safe alphabet. Checked here, once,
//! for the engine and every host.

use crate::error::FieldError;

/// The longest bank id.
pub const MAX_BANK_ID: usize = 128;

/// A bank id is 1 to 128 characters of `A-Z a-z 0-9 - _ . :`. The `agent:`, `user:` and
/// `shared:` prefixes are conventions for private, per-user and shared spaces; the engine treats
/// every id alike.
pub fn validate_bank_id(id: &str) -> Result<(), FieldError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_BANK_ID
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            "bank",
            format!("{id:?} must be 1 to {MAX_BANK_ID} characters of A-Z a-z 0-9 - _ . :"),
        ))
    }
}
