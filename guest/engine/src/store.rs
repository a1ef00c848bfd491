//! The host's ordered key-value space, as the engine reads it. The protocol itself (`Store`,
//! `Op`, `StoreError`, `MemoryStore`) lives in `hindsight_types`.

pub use hindsight_types::store::{MemoryStore, Op, Store, StoreError};

use crate::{Error, Result};

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
                return Err(Error::store(format!("scan of {prefix:?} returned foreign key {key:?}")));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_pages_through_a_prefix_only() {
        let store = MemoryStore::new();
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
