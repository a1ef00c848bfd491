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
        // A model run pads every text to the longest: run texts of similar length together.
        let mut order: Vec<(usize, usize)> =
            texts.iter().enumerate().map(|(i, t)| Ok((self.token_count(t)?, i))).collect::<Result<_>>()?;
        order.sort_unstable();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(16) {
            let batch: Vec<&str> = chunk.iter().map(|&(_, i)| texts[i]).collect();
            for (&(_, i), v) in chunk.iter().zip(Embedder::embed_batch(self, &batch)?) {
                out[i] = v;
            }
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
