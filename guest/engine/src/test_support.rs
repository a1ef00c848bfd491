//! Test doubles for the engine's own tests, the property test and the fuzz targets: compiled
//! only for tests or with the `test-support` feature, never into the component.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hindsight_types::{MemoryStore, Op, Store, StoreError};

use crate::embed::{normalize, sentence_spans, Keyed, TextEmbedder};
use crate::fingerprint::fingerprint;
use crate::Result;

/// A deterministic bag-of-terms embedder (hashed lexical terms): texts sharing terms are close.
/// It knows nothing of meaning.
pub struct HashEmbedder {
    pub dimension: usize,
}

impl TextEmbedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "hash-test-embedder"
    }
    fn inference(&self) -> &str {
        "test"
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.bag(t)).collect())
    }
    /// Each sentence's key is the bag of its own terms.
    fn embed_keyed(&self, texts: &[&str]) -> Result<Vec<Keyed>> {
        Ok(texts
            .iter()
            .map(|t| Keyed {
                vector: self.bag(t),
                sentences: sentence_spans(t).into_iter().map(|r| self.bag(&t[r])).collect(),
            })
            .collect())
    }
}

impl HashEmbedder {
    fn bag(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dimension];
        for term in crate::lexical::tokenize(text) {
            v[(fingerprint(term.as_bytes()) % self.dimension as u64) as usize] += 1.0;
        }
        if v.iter().all(|x| *x == 0.0) {
            v[0] = 1.0;
        }
        normalize(&mut v);
        v
    }
}

/// A memory store whose next commit fails when asked: "an error loses nothing" tests.
#[derive(Default)]
pub struct FailingStore {
    pub inner: Arc<MemoryStore>,
    fail_next: AtomicBool,
}

impl FailingStore {
    pub fn new(inner: Arc<MemoryStore>) -> FailingStore {
        FailingStore { inner, fail_next: AtomicBool::new(false) }
    }

    /// The next commit fails (and applies nothing).
    pub fn fail_next_commit(&self) {
        self.fail_next.store(true, Ordering::SeqCst);
    }
}

impl Store for FailingStore {
    fn get(&self, key: &str) -> std::result::Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> std::result::Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.scan(prefix, start_after, limit)
    }
    fn commit(&self, ops: Vec<Op>) -> std::result::Result<(), StoreError> {
        if self.fail_next.swap(false, Ordering::SeqCst) {
            return Err(StoreError::failed("injected commit failure"));
        }
        self.inner.commit(ops)
    }
}
