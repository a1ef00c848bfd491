//! The host's ordered key-value space, as the engine sees it.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Put(String, Vec<u8>),
    Delete(String),
    /// The commit applies only if the key holds exactly this value (None: absent); otherwise it
    /// changes nothing and fails with `Error::Conflict`.
    Expect(String, Option<Vec<u8>>),
}

pub trait Store {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Keys starting with `prefix` in byte order, after `start_after`, at most `limit` of them.
    fn scan(&self, prefix: &str, start_after: Option<&str>, limit: u32) -> Result<Vec<(String, Vec<u8>)>>;
    /// Applies all ops atomically, or none when an `Expect` does not hold.
    fn commit(&self, ops: Vec<Op>) -> Result<()>;
}

/// Reads every key under `prefix`, page by page.
pub fn scan_all(
    store: &dyn Store,
    prefix: &str,
    mut each: impl FnMut(String, Vec<u8>) -> Result<()>,
) -> Result<()> {
    const PAGE: u32 = 2048;
    let mut after: Option<String> = None;
    loop {
        let page = store.scan(prefix, after.as_deref(), PAGE)?;
        let full = page.len() as u32 == PAGE;
        let mut last = None;
        for (key, value) in page {
            if !key.starts_with(prefix) {
                return Err(Error::Store(format!("scan of {prefix:?} returned foreign key {key:?}")));
            }
            last = Some(key.clone());
            each(key, value)?;
        }
        if !full {
            return Ok(());
        }
        after = last;
    }
}

/// An in-memory store: for tests and for hosts that want no persistence.
#[derive(Debug, Default)]
pub struct MemStore {
    map: RefCell<BTreeMap<String, Vec<u8>>>,
    /// When set, the next commit fails (tests of "an error loses nothing").
    pub fail_next_commit: std::cell::Cell<bool>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.map.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.borrow().is_empty()
    }

    /// Every stored byte, for tests that check something is really gone.
    pub fn contains_bytes(&self, needle: &[u8]) -> bool {
        self.map.borrow().iter().any(|(k, v)| {
            k.as_bytes().windows(needle.len()).any(|w| w == needle)
                || v.windows(needle.len()).any(|w| w == needle)
        })
    }
}

impl Store for MemStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.map.borrow().get(key).cloned())
    }

    fn scan(&self, prefix: &str, start_after: Option<&str>, limit: u32) -> Result<Vec<(String, Vec<u8>)>> {
        use std::ops::Bound;
        let map = self.map.borrow();
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

    fn commit(&self, ops: Vec<Op>) -> Result<()> {
        if self.fail_next_commit.replace(false) {
            return Err(Error::Store("injected commit failure".into()));
        }
        let mut map = self.map.borrow_mut();
        for op in &ops {
            if let Op::Expect(k, want) = op {
                if map.get(k) != want.as_ref() {
                    return Err(Error::Conflict(format!("{k} changed since it was read")));
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

impl<S: Store + ?Sized> Store for std::rc::Rc<S> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn scan(&self, prefix: &str, start_after: Option<&str>, limit: u32) -> Result<Vec<(String, Vec<u8>)>> {
        (**self).scan(prefix, start_after, limit)
    }
    fn commit(&self, ops: Vec<Op>) -> Result<()> {
        (**self).commit(ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_pages_through_a_prefix_only() {
        let store = MemStore::new();
        let mut ops: Vec<Op> = (0..5000).map(|i| Op::Put(format!("a/{i:05}"), vec![1])).collect();
        ops.push(Op::Put("b/0".into(), vec![2]));
        ops.push(Op::Put("a".into(), vec![3]));
        store.commit(ops).unwrap();
        let mut seen = 0;
        scan_all(&store, "a/", |k, _| {
            assert!(k.starts_with("a/"));
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 5000);
    }
}
