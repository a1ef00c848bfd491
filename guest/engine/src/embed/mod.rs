//! Sentence embeddings: what the bank needs from a model (so bank logic is tested without one),
//! and the ONNX encoder run by tract inside the sandbox.

mod cache;
mod encoder;
mod kernels;
mod onnx;

pub use cache::QueryCached;
pub use onnx::{gather_before_dequantize, Embedder, InferencePath, MAX_TOKENS};

use crate::Result;

/// What the bank needs from an embedding model.
pub trait TextEmbedder {
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// Which code computes the vectors: `encoder` or `tract` for the ONNX model.
    fn inference(&self) -> &str;
    /// Unit-length vectors, one per text.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// A recall's query in bank `bank` (an embedder may answer a repeated one from a cache
    /// kept per bank).
    fn embed_query(&self, bank: &str, text: &str) -> Result<Vec<f32>> {
        let _ = bank;
        Ok(self.embed_batch(&[text])?.remove(0))
    }
}

/// Scales to unit length (mean pooling's 1/n cancels out here).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}
