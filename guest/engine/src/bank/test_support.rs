//! Fixtures shared by the bank's tests: a bank over a memory store with the hashed embedder, a
//! fixed "now", queries, and a scripted LLM.

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use hindsight_types::settings::Settings;
use hindsight_types::time::Timestamp;
use hindsight_types::{Kind, Memory, RetainOutcome};

use super::Bank;
use crate::llm::{Llm, LlmError, LlmRequest, LlmResponse, NoLlm};
use crate::store::MemoryStore;
use crate::test_support::HashEmbedder;
use hindsight_types::{Query, RecallResult};

/// 2026-01-01T00:00:00Z: tests pass time in, never read the clock.
pub(super) const NOW: Timestamp = 1_767_225_600_000;

pub(super) fn open(store: &Arc<MemoryStore>) -> Bank {
    open_dim(store, 64, Rc::new(NoLlm), Settings::default())
}

/// Wide enough that the hashed test embedder rarely puts two different words in one slot.
pub(super) fn open_with(store: &Arc<MemoryStore>, llm: Rc<dyn Llm>, settings: Settings) -> Bank {
    open_dim(store, 1024, llm, settings)
}

/// A bank of its own (a fresh store, no LLM) with the default settings as `change` leaves them:
/// for comparing one setting's values.
pub(super) fn open_changed(change: impl FnOnce(&mut Settings)) -> Bank {
    let mut settings = Settings::default();
    change(&mut settings);
    open_with(&Arc::new(MemoryStore::new()), Rc::new(NoLlm), settings)
}

pub(super) fn open_dim(
    store: &Arc<MemoryStore>,
    dimension: usize,
    llm: Rc<dyn Llm>,
    settings: Settings,
) -> Bank {
    Bank::open("test", Box::new(store.clone()), Rc::new(HashEmbedder { dimension }), llm, Rc::new(settings))
        .unwrap()
}

pub(super) fn query(text: &str) -> Query {
    Query { query: text.into(), k: Some(3), now: Some(NOW), ..Default::default() }
}

pub(super) fn texts(result: &RecallResult) -> Vec<&str> {
    result.items.iter().map(|r| r.memory.content.as_str()).collect()
}

pub(super) fn retain_one(bank: &mut Bank, item: Memory, now: Timestamp) -> RetainOutcome {
    bank.retain(vec![item], now).unwrap().remove(0)
}

pub(super) fn semantic(text: &str) -> Memory {
    Memory::new(text).kind(Kind::Semantic)
}

/// Answers every call with the next scripted text and records the requests.
pub(super) struct Scripted {
    answers: Mutex<Vec<std::result::Result<String, LlmError>>>,
    pub(super) requests: Mutex<Vec<LlmRequest>>,
}

impl Scripted {
    pub(super) fn new(answers: Vec<std::result::Result<&str, LlmError>>) -> Rc<Scripted> {
        Rc::new(Scripted {
            answers: Mutex::new(answers.into_iter().rev().map(|a| a.map(str::to_string)).collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Llm for Scripted {
    fn complete(&self, request: &LlmRequest) -> std::result::Result<LlmResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        let answer =
            self.answers.lock().unwrap().pop().unwrap_or(Err(LlmError::Failed("script ran out".into())));
        answer.map(|text| LlmResponse { text, prompt_tokens: 10, completion_tokens: 5 })
    }
}
