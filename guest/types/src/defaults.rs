//! Defaults every host shares: where the embedding model lives and what its files are called.

use std::path::PathBuf;

/// The ONNX model's file name in a models directory.
pub const MODEL_FILE: &str = "model.onnx";
/// Its tokenizer's file name.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The environment variable naming the models directory.
pub const MODELS_ENV: &str = "HINDSIGHT_MODELS";

/// The models directory on every platform: `HINDSIGHT_MODELS`, else
/// `$XDG_CACHE_HOME/hindsight/models`, else `~/.cache/hindsight/models` (the Node and Python
/// hosts follow the same rule, so a model fetched by one is found by all).
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(MODELS_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    cache_dir().join("models")
}

/// `$XDG_CACHE_HOME/hindsight`, else `~/.cache/hindsight` (the system temp dir without a home).
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("hindsight")
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}
