//! What the bank needs from an embedding model, so bank logic can be tested and fuzzed without
//! loading one.

use crate::embed::Embedder;
use crate::error::Result;

pub trait TextEmbedder {
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// Unit-length vectors, one per text.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

impl TextEmbedder for Embedder {
    fn model_id(&self) -> &str {
        Embedder::model_id(self)
    }
    fn dimension(&self) -> usize {
        Embedder::dimension(self)
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        // Long batches are split: padding every text to the longest one wastes work.
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(16) {
            out.extend(Embedder::embed_batch(self, chunk)?);
        }
        Ok(out)
    }
}

/// A deterministic bag-of-terms embedder (hashed lexical terms): texts sharing terms are close.
/// For tests and fuzzing of bank logic only; it knows nothing of meaning.
pub struct HashEmbedder {
    pub dimension: usize,
}

impl TextEmbedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "hash-test-embedder"
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; self.dimension];
                for term in crate::lexical::tokenize(t) {
                    let h = term
                        .bytes()
                        .fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
                    v[(h % self.dimension as u64) as usize] += 1.0;
                }
                if v.iter().all(|x| *x == 0.0) {
                    v[0] = 1.0;
                }
                crate::embed::normalize(&mut v);
                v
            })
            .collect())
    }
}
