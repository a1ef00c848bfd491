//! The store a host lends the engine: an ordered key-value space with atomic batches.
//!
//! Keys are UTF-8 and ordered by their bytes. A commit applies every op or none; an
//! [`Op::Expect`] makes it conditional, which is how several engine instances share one store
//! without overwriting each other's commits.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

/// One change of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Sets `key` to the value.
    Put(String, Vec<u8>),
    /// Removes `key` (nothing when absent).
    Delete(String),
    /// The commit applies only if `key` holds exactly this value now (`None`: absent);
    /// otherwise nothing is applied and the commit fails with [`StoreError::Conflict`].
    Expect(String, Option<Vec<u8>>),
}

/// Why a store call failed. Nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// An [`Op::Expect`] did not hold: another writer committed first. Names the key.
    Conflict(String),
    /// The store may only be read here (a read-only file or directory). Names what.
    ReadOnly(String),
    /// Anything else: I/O, a locked or corrupt database, a lost connection.
    Failed(String),
}

impl StoreError {
    /// A failure with this message.
    pub fn failed(message: impl fmt::Display) -> StoreError {
        StoreError::Failed(message.to_string())
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Conflict(key) => write!(f, "{key} changed since it was read"),
            StoreError::ReadOnly(message) | StoreError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for StoreError {}

/// An ordered key-value space with atomic multi-key commits. One store is shared by every
/// engine instance of a host (and, for a shared database, by other hosts).
pub trait Store: Send + Sync {
    /// The value of `key`, if any.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Keys starting with `prefix`, in byte order, after `start_after` when given, at most
    /// `limit` of them, with their values.
    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;
    /// Applies every op or none.
    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError>;

    /// Catches up on what other writers committed, for a store that answers reads from its own
    /// copy (a store that reads through to its database has nothing to do). A writer waiting
    /// for another calls it, or it would wait on what it saw when it began.
    fn refresh(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Moves whatever the store keeps beside its main data (a write-ahead log) into it, so
    /// erased bytes are gone from disk too. Hosts call it when they shut down.
    fn checkpoint(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Where an erased value may still be found after its commit and a checkpoint (old row
    /// versions a database keeps until it is vacuumed, say), for a hard forget's receipt.
    fn erasure_remains(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        (**self).get(key)
    }
    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        (**self).scan(prefix, start_after, limit)
    }
    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        (**self).commit(ops)
    }
    fn refresh(&self) -> Result<(), StoreError> {
        (**self).refresh()
    }
    fn checkpoint(&self) -> Result<(), StoreError> {
        (**self).checkpoint()
    }
    fn erasure_remains(&self) -> Vec<String> {
        (**self).erasure_remains()
    }
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        (**self).get(key)
    }
    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        (**self).scan(prefix, start_after, limit)
    }
    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        (**self).commit(ops)
    }
    fn refresh(&self) -> Result<(), StoreError> {
        (**self).refresh()
    }
    fn checkpoint(&self) -> Result<(), StoreError> {
        (**self).checkpoint()
    }
    fn erasure_remains(&self) -> Vec<String> {
        (**self).erasure_remains()
    }
}

/// Keys and values in memory: for tests, and hosts that need no persistence.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// Whether any key or value holds `needle`: for checking that something is really gone.
    pub fn contains_bytes(&self, needle: &[u8]) -> bool {
        let has = |hay: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        self.map().iter().any(|(k, v)| has(k.as_bytes()) || has(v))
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.map().get(key).cloned())
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        use std::ops::Bound;
        let map = self.map();
        let lower = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        Ok(map
            .range((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let mut map = self.map();
        for op in &ops {
            if let Op::Expect(key, want) = op {
                if map.get(key) != want.as_ref() {
                    return Err(StoreError::Conflict(key.clone()));
                }
            }
        }
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    map.insert(k, v);
                }
                Op::Delete(k) => {
                    map.remove(&k);
                }
                Op::Expect(..) => {}
            }
        }
        Ok(())
    }
}
