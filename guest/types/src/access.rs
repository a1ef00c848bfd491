//! Who may read and write which banks. A [`Principal`] names a caller and the banks it may read
//! and write (exact ids, or a prefix ending in `*`). [`Principals`] is a server's list of callers
//! and their bearer tokens (the `--auth` file of `hindsight serve`, `auth.json` of the edge
//! component): one home for the format, so every server reads it alike.

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::FieldError;

/// A principal lacks the right a call needs; the message names the principal, right and bank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Denied {}

/// What a call does to a bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// Recall, get, history, stats, task state: the bank's contents are seen.
    Read,
    /// Retain, forget, restore, feedback, maintain, tasks: the bank changes.
    Write,
}

impl Right {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Write => "write",
        }
    }
}

/// A caller and the banks it may read and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    name: String,
    read: Vec<String>,
    write: Vec<String>,
}

impl Principal {
    /// A principal that may do nothing yet.
    pub fn new(name: impl Into<String>) -> Principal {
        Principal { name: name.into(), read: Vec::new(), write: Vec::new() }
    }

    /// Adds banks it may read: ids, or prefixes ending in `*` (`user:*`, or `*` for all).
    pub fn read<I: IntoIterator<Item = S>, S: Into<String>>(mut self, banks: I) -> Principal {
        self.read.extend(banks.into_iter().map(Into::into));
        self
    }

    /// Adds banks it may write.
    pub fn write<I: IntoIterator<Item = S>, S: Into<String>>(mut self, banks: I) -> Principal {
        self.write.extend(banks.into_iter().map(Into::into));
        self
    }

    /// Its name: recorded as the agent id of what it writes when the caller gives none.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it has `right` on bank `bank`.
    pub fn may(&self, right: Right, bank: &str) -> bool {
        let patterns = match right {
            Right::Read => &self.read,
            Right::Write => &self.write,
        };
        patterns.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => bank.starts_with(prefix),
            None => p == bank,
        })
    }

    /// `Ok` when it has `right` on `bank`; otherwise the error naming both.
    pub fn check(&self, right: Right, bank: &str) -> Result<(), Denied> {
        if self.may(right, bank) {
            Ok(())
        } else {
            Err(Denied(format!("principal {:?} has no {} right on bank {bank:?}", self.name, right.as_str())))
        }
    }

    fn validate(&self, at: &str) -> Result<(), FieldError> {
        if self.name.trim().is_empty() {
            return Err(FieldError::new(format!("{at}.name"), "must not be empty"));
        }
        for (field, patterns) in [("read", &self.read), ("write", &self.write)] {
            for (i, p) in patterns.iter().enumerate() {
                let id = p.strip_suffix('*').unwrap_or(p);
                let valid = id.is_empty() && p == "*" || crate::validate_bank_id(id).is_ok();
                if !valid || id.contains('*') {
                    return Err(FieldError::new(
                        format!("{at}.{field}[{i}]"),
                        format!("{p:?} is not a bank id, or a bank id prefix ending in *"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The callers a server knows, each with the sha256 of its bearer token.
#[derive(Debug, Clone, Default)]
pub struct Principals {
    entries: Vec<(Principal, [u8; 32])>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    principals: Vec<EntryForm>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryForm {
    name: String,
    token: Option<String>,
    token_sha256: Option<String>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
}

/// The shortest token accepted: a guessable token is no identity.
pub const MIN_TOKEN_CHARS: usize = 16;

impl Principals {
    /// Parses the auth file's JSON: `{"principals": [{"name", "token" | "token_sha256", "read":
    /// [banks], "write": [banks]}]}`. Every problem names its field.
    pub fn from_json(text: &str) -> Result<Principals, FieldError> {
        let form: FileForm = serde_json::from_str(text)
            .map_err(|e| FieldError::new("auth", format!("not a principals file: {e}")))?;
        let mut names = BTreeSet::new();
        let mut entries = Vec::new();
        for (i, e) in form.principals.into_iter().enumerate() {
            let at = format!("principals[{i}]");
            let digest = match (&e.token, &e.token_sha256) {
                (Some(token), None) => {
                    if token.chars().count() < MIN_TOKEN_CHARS {
                        return Err(FieldError::new(
                            format!("{at}.token"),
                            format!("must be at least {MIN_TOKEN_CHARS} characters"),
                        ));
                    }
                    Sha256::digest(token.as_bytes()).into()
                }
                (None, Some(hex)) => parse_sha256(hex)
                    .ok_or_else(|| FieldError::new(format!("{at}.token_sha256"), "must be 64 hex digits"))?,
                _ => return Err(FieldError::new(at, "needs exactly one of token and token_sha256")),
            };
            let principal = Principal { name: e.name, read: e.read, write: e.write };
            principal.validate(&at)?;
            if !names.insert(principal.name.clone()) {
                return Err(FieldError::new(
                    format!("{at}.name"),
                    format!("{:?} is listed twice", principal.name),
                ));
            }
            if entries.iter().any(|(_, d)| *d == digest) {
                return Err(FieldError::new(format!("{at}.token"), "is the token of another principal"));
            }
            entries.push((principal, digest));
        }
        Ok(Principals { entries })
    }

    /// The principal whose token this is. Every entry is compared, in constant time, whatever
    /// matches: the time taken says nothing about which tokens exist.
    pub fn authenticate(&self, token: &str) -> Option<&Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (principal, expected) in &self.entries {
            // Eight bytes at a time: the byte-wise fold, auto-vectorised for wasm32 with simd128,
            // compared unequal digests as equal and equal ones as unequal under wasmtime 48.
            let diff = expected.chunks_exact(8).zip(digest.chunks_exact(8)).fold(0u64, |acc, (a, b)| {
                let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
                acc | (word(a) ^ word(b))
            });
            if diff == 0 {
                found = Some(principal);
            }
        }
        found
    }

    /// How many principals it lists.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it lists none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_ids_and_prefixes_only() {
        let p = Principal::new("coder").read(["shared", "user:*"]).write(["agent:coder"]);
        assert!(p.may(Right::Read, "shared"));
        assert!(p.may(Right::Read, "user:42"));
        assert!(!p.may(Right::Read, "shared-2"));
        assert!(!p.may(Right::Read, "agent:coder"));
        assert!(p.may(Right::Write, "agent:coder"));
        assert!(!p.may(Right::Write, "shared"));
        assert!(Principal::new("admin").read(["*"]).may(Right::Read, "anything"));
        let err = p.check(Right::Write, "shared").unwrap_err();
        assert!(err.to_string().contains("\"coder\" has no write right on bank \"shared\""), "{err}");
    }

    #[test]
    fn tokens_are_found_by_value_or_by_digest() {
        let hashed = format!("{:x}", Sha256::digest(b"analyst-token-0123456789"));
        let file = format!(
            r#"{{"principals": [
                {{"name": "coder", "token": "coder-token-0123456789", "read": ["shared"], "write": ["agent:coder"]}},
                {{"name": "analyst", "token_sha256": "{hashed}", "read": ["*"]}}
            ]}}"#
        );
        let all = Principals::from_json(&file).unwrap();
        assert_eq!(all.authenticate("coder-token-0123456789").unwrap().name(), "coder");
        assert_eq!(all.authenticate("analyst-token-0123456789").unwrap().name(), "analyst");
        assert!(all.authenticate("coder-token-012345678").is_none());
        assert!(all.authenticate("").is_none());
    }

    #[test]
    fn a_bad_file_names_the_field() {
        let field = |text: &str| Principals::from_json(text).unwrap_err().field;
        assert_eq!(field(r#"{"principals": [{"name": "a", "token": "short"}]}"#), "principals[0].token");
        assert_eq!(field(r#"{"principals": [{"name": "a"}]}"#), "principals[0]");
        assert_eq!(
            field(r#"{"principals": [{"name": "a", "token_sha256": "abc"}]}"#),
            "principals[0].token_sha256"
        );
        assert_eq!(
            field(
                r#"{"principals": [{"name": "a", "token": "aaaaaaaaaaaaaaaaaaaa", "read": ["no spaces"]}]}"#
            ),
            "principals[0].read[0]"
        );
        assert_eq!(
            field(
                r#"{"principals": [{"name": "a", "token": "aaaaaaaaaaaaaaaaaaaa"},
                                   {"name": "a", "token": "bbbbbbbbbbbbbbbbbbbb"}]}"#
            ),
            "principals[1].name"
        );
        assert_eq!(
            field(r#"{"principals": [{"name": "a", "token": "aaaaaaaaaaaaaaaaaaaa", "admin": true}]}"#),
            "auth"
        );
    }
}
