//! Query embeddings remembered by bank and text: an agent loop asks the same few questions
//! again and again, and the model run is most of a recall's time. Entries are per bank, so one
//! tenant's recall cannot tell from its speed what another tenant asked.

use std::cell::RefCell;
use std::collections::HashMap;

use super::TextEmbedder;
use crate::Result;

/// An embedder whose [`TextEmbedder::embed_query`] answers repeated texts from memory, dropping
/// the least recently used entry when full. Documents (retain's batches) are never cached: each
/// is embedded once anyway.
pub struct QueryCached<E> {
    inner: E,
    capacity: usize,
    entries: RefCell<Entries>,
}

#[derive(Default)]
struct Entries {
    /// (bank, query text) → vector and last use.
    by_query: HashMap<(String, String), (Vec<f32>, u64)>,
    /// Bumped on every use; an entry's stamp says when it was last used.
    clock: u64,
}

impl<E: TextEmbedder> QueryCached<E> {
    pub fn new(inner: E, capacity: usize) -> QueryCached<E> {
        QueryCached { inner, capacity, entries: RefCell::default() }
    }
}

impl<E: TextEmbedder> TextEmbedder for QueryCached<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn inference(&self) -> &str {
        self.inner.inference()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.inner.embed_batch(texts)
    }

    fn embed_keyed(&self, texts: &[&str]) -> Result<Vec<super::Keyed>> {
        self.inner.embed_keyed(texts)
    }

    fn embed_query(&self, bank: &str, text: &str) -> Result<Vec<f32>> {
        if self.capacity == 0 {
            return self.inner.embed_query(bank, text);
        }
        let key = (bank.to_string(), text.to_string());
        {
            let mut e = self.entries.borrow_mut();
            e.clock += 1;
            let clock = e.clock;
            if let Some((vector, used)) = e.by_query.get_mut(&key) {
                *used = clock;
                return Ok(vector.clone());
            }
        }
        // No borrow is held across the model run.
        let vector = self.inner.embed_query(bank, text)?;
        let mut e = self.entries.borrow_mut();
        if e.by_query.len() >= self.capacity {
            // A linear scan: the cache is small next to one model run.
            if let Some(oldest) = e.by_query.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone())
            {
                e.by_query.remove(&oldest);
            }
        }
        let clock = e.clock;
        e.by_query.insert(key, (vector.clone(), clock));
        Ok(vector)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// Counts model runs; a text's vector is its length and first byte.
    struct Counting(Cell<usize>);

    impl TextEmbedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn inference(&self) -> &str {
            "test"
        }
        fn dimension(&self) -> usize {
            2
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.0.set(self.0.get() + texts.len());
            Ok(texts.iter().map(|t| vec![t.len() as f32, t.as_bytes()[0] as f32]).collect())
        }
    }

    #[test]
    fn a_repeated_query_is_not_embedded_again_and_the_least_recently_used_goes_first() {
        let cached = QueryCached::new(Counting(Cell::new(0)), 2);
        let runs = || cached.inner.0.get();
        assert_eq!(cached.embed_query("b", "alpha").unwrap(), vec![5.0, 97.0]);
        assert_eq!(cached.embed_query("b", "alpha").unwrap(), vec![5.0, 97.0]);
        assert_eq!(runs(), 1);
        cached.embed_query("b", "beta").unwrap();
        cached.embed_query("b", "alpha").unwrap(); // alpha is now the more recent
        cached.embed_query("b", "gamma").unwrap(); // full: beta goes
        assert_eq!(runs(), 3);
        cached.embed_query("b", "alpha").unwrap();
        assert_eq!(runs(), 3, "alpha stayed");
        cached.embed_query("b", "beta").unwrap();
        assert_eq!(runs(), 4, "beta was dropped");
        // Another bank's identical query is its own entry.
        cached.embed_query("c", "alpha").unwrap();
        assert_eq!(runs(), 5, "not shared across banks");
        // Documents always run the model.
        cached.embed_batch(&["alpha"]).unwrap();
        assert_eq!(runs(), 6);
    }

    #[test]
    fn capacity_zero_embeds_every_query() {
        let cached = QueryCached::new(Counting(Cell::new(0)), 0);
        cached.embed_query("b", "alpha").unwrap();
        cached.embed_query("b", "alpha").unwrap();
        assert_eq!(cached.inner.0.get(), 2);
    }
}
