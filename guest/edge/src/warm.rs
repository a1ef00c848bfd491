//! The warm start: the embedding model loaded once, when the component is built, and kept in its
//! memory snapshot (`./dev component` pre-initialises `hindsight-edge.wasm` with `wasmtime
//! wizer`), so that a fresh instance — one per request under a plain `wasmtime serve` — does not
//! parse and optimise the ONNX model again (about 0.5 s in the component).
//!
//! The data directory still decides which model serves: a `model.onnx` or `tokenizer.json` there
//! that is not the one loaded (another length or checksum) makes the instance load the data
//! directory's files instead, as the component does without a snapshot.

use std::io::ErrorKind;
use std::path::Path;

use hindsight_engine::embed::Embedder;

/// What identifies a model file cheaply enough to check on every fresh instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    len: u64,
    crc32: u32,
}

impl Digest {
    pub fn of(bytes: &[u8]) -> Digest {
        Digest { len: bytes.len() as u64, crc32: crc32fast::hash(bytes) }
    }
}

/// The model files a warm engine was loaded from.
pub const MODEL: &str = "model.onnx";
pub const TOKENIZER: &str = "tokenizer.json";

/// An embedder loaded before the first request, with the digests of the files it came from.
pub struct Preloaded {
    embedder: Embedder,
    model: Digest,
    tokenizer: Digest,
}

impl Preloaded {
    /// Loads the model and tokenizer in `dir` (the build's models directory).
    pub fn load(dir: &Path) -> Result<Preloaded, String> {
        let model = read(dir, MODEL)?;
        let tokenizer = read(dir, TOKENIZER)?;
        let embedder = Embedder::load(&model, &tokenizer).map_err(|e| e.to_string())?;
        Ok(Preloaded { embedder, model: Digest::of(&model), tokenizer: Digest::of(&tokenizer) })
    }

    /// Whether this embedder serves the data directory `data`: its model files are absent there
    /// or the same as the preloaded ones.
    pub fn serves(&self, data: &Path) -> bool {
        let same = |name: &str, digest: Digest| match std::fs::metadata(data.join(name)) {
            Err(e) if e.kind() == ErrorKind::NotFound => true,
            // A file of another length is another model: no need to read it.
            Ok(meta) if meta.len() != digest.len => false,
            _ => read(data, name).is_ok_and(|bytes| Digest::of(&bytes) == digest),
        };
        same(MODEL, self.model) && same(TOKENIZER, self.tokenizer)
    }

    pub fn into_embedder(self) -> Embedder {
        self.embedder
    }
}

pub fn read(dir: &Path, name: &str) -> Result<Vec<u8>, String> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
}
