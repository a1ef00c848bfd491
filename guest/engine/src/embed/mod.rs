//! Sentence embeddings: what the bank needs from a model (so bank logic is tested without one),
//! and the ONNX encoder run by tract inside the sandbox.

mod cache;
mod encoder;
mod kernels;
mod onnx;
mod sentences;

pub use cache::QueryCached;
pub use onnx::{gather_before_dequantize, Embedder, InferencePath, MAX_TOKENS};
pub use sentences::{sentence_spans, SentenceKeys, MAX_KEYS};

use crate::Result;

/// What the bank needs from an embedding model.
pub trait TextEmbedder {
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// Which code computes the vectors: `encoder` or `tract` for the ONNX model.
    fn inference(&self) -> &str;
    /// Unit-length vectors, one per text.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// Each text's vector with its sentence keys (see [`SentenceKeys`]); an embedder that makes
    /// none returns its vectors alone.
    fn embed_keyed(&self, texts: &[&str]) -> Result<Vec<Keyed>> {
        Ok(self
            .embed_batch(texts)?
            .into_iter()
            .map(|vector| Keyed { vector, sentences: Vec::new() })
            .collect())
    }
    /// A recall's query in bank `bank` (an embedder may answer a repeated one from a cache
    /// kept per bank).
    fn embed_query(&self, bank: &str, text: &str) -> Result<Vec<f32>> {
        let _ = bank;
        Ok(self.embed_batch(&[text])?.remove(0))
    }
}

/// A text's vector and its sentence keys (unit vectors; none for a text of one sentence).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keyed {
    pub vector: Vec<f32>,
    pub sentences: Vec<Vec<f32>>,
}

/// Scales to unit length (mean pooling's 1/n cancels out here). A vector already of unit length
/// is left bit for bit as it is: dividing by a norm that rounds to 1 ± an ulp would change its
/// last bits, and an exported vector imported again would no longer score what it scored before.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && (norm - 1.0).abs() > 1e-6 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn normalizing_a_unit_vector_again_keeps_every_bit() {
        // Seeded values whose first normalization leaves a norm an ulp away from 1.
        let mut state = 0x9e37_79b9_u32;
        for _ in 0..200 {
            let mut v: Vec<f32> = (0..384)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    (state as f32 / u32::MAX as f32) - 0.5
                })
                .collect();
            normalize(&mut v);
            let once = v.clone();
            normalize(&mut v);
            assert_eq!(once, v);
        }
    }
}
