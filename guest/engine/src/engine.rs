//! The engine: a loaded embedding model and settings, from which banks are opened.

use std::rc::Rc;

use crate::bank::Bank;
use crate::embed::{Embedder, QueryCached, TextEmbedder};
use crate::llm::{Llm, NoLlm};
use crate::settings::Settings;
use crate::store::Store;
use crate::Result;

pub struct Engine {
    embedder: Rc<dyn TextEmbedder>,
    llm: Rc<dyn Llm>,
    settings: Rc<Settings>,
}

impl Engine {
    pub fn new(model: &[u8], tokenizer: &[u8], settings_json: &str) -> Result<Engine> {
        let settings = Settings::from_json(settings_json)?;
        Ok(Engine::from_embedder(Embedder::load(model, tokenizer)?, settings))
    }

    /// An engine over a model already loaded, its query embeddings cached as the settings say.
    pub fn from_embedder(embedder: Embedder, settings: Settings) -> Engine {
        let cached = QueryCached::new(embedder, settings.recall.query_cache as usize);
        Engine::with_embedder(Rc::new(cached), settings)
    }

    pub fn with_embedder(embedder: Rc<dyn TextEmbedder>, settings: Settings) -> Engine {
        Engine { embedder, llm: Rc::new(NoLlm), settings: Rc::new(settings) }
    }

    /// The model the engine asks for importance scores, conflict verdicts and distillation.
    pub fn with_llm(mut self, llm: Rc<dyn Llm>) -> Engine {
        self.llm = llm;
        self
    }

    pub fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embedder.embed_batch(texts)
    }

    /// The ids of the banks `store` holds.
    pub fn banks(&self, store: &dyn Store) -> Result<Vec<String>> {
        crate::bank::banks(store)
    }

    pub fn open_bank(&self, id: &str, store: Box<dyn Store>) -> Result<Bank> {
        Bank::open(id, store, self.embedder.clone(), self.llm.clone(), self.settings.clone())
    }
}
