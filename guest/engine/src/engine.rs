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

    /// Embeds as a bank's retain does (with `recall.sentence_keys`): each text's vector followed
    /// by its sentence keys, one list per text, for a host that embeds a batch before retaining it.
    pub fn embed_keyed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if !self.settings.recall.sentence_keys {
            return self.embed(texts);
        }
        Ok(self
            .embedder
            .embed_keyed(texts)?
            .into_iter()
            .map(|k| {
                let mut v = k.vector;
                k.sentences.iter().for_each(|s| v.extend_from_slice(s));
                v
            })
            .collect())
    }

    /// The ids of the banks `store` holds.
    pub fn banks(&self, store: &dyn Store) -> Result<Vec<String>> {
        crate::bank::banks(store)
    }

    pub fn open_bank(&self, id: &str, store: Box<dyn Store>) -> Result<Bank> {
        Bank::open(id, store, self.embedder.clone(), self.llm.clone(), self.settings.clone())
    }
}
