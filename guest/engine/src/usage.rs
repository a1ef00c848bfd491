//! What a call costs: every LLM call and embedded text a bank's operation makes is counted by
//! wrappers around the model and the embedder it was given, and a call's LLM spending is capped
//! by `limits.llm_token_budget` (a call past it is not made: the caller's rules decide).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use hindsight_types::time::{now, Timestamp};
use hindsight_types::{OperationUsage, Usage};

use crate::embed::{Keyed, TextEmbedder};
use crate::llm::{Llm, LlmError, LlmRequest, LlmResponse};
use crate::Result;

/// How an over-budget refusal begins: callers that fall back to rules on an unavailable model say
/// this instead of "no LLM".
pub const OVER_BUDGET: &str = "over limits.llm_token_budget";

/// The usage of the call in progress on a bank (and banks it opened for the call), and of the
/// last one finished.
#[derive(Default)]
pub struct Meter {
    /// The operation being metered, none between calls (nothing is then counted).
    operation: Cell<Option<&'static str>>,
    /// The bank the call was made on: only its commits carry the call's totals (a shared bank
    /// the call also writes to does not).
    bank: RefCell<String>,
    started: Cell<Timestamp>,
    budget: Cell<u64>,
    current: Cell<Usage>,
    /// The part of `current` already added to the bank's stored totals (by an earlier commit of
    /// the same call), if a commit added any.
    stored: Cell<Option<Usage>>,
    last: Cell<Usage>,
}

impl Meter {
    /// Starts metering `operation` on `bank`, with an LLM budget of `budget` tokens (0: none).
    pub fn begin(&self, operation: &'static str, bank: &str, budget: u64) {
        self.operation.set(Some(operation));
        bank.clone_into(&mut self.bank.borrow_mut());
        self.started.set(now());
        self.budget.set(budget);
        self.current.set(Usage::default());
        self.stored.set(None);
    }

    /// Ends the call: its usage, kept as the last one.
    pub fn finish(&self) -> Usage {
        let usage = self.so_far();
        self.operation.set(None);
        self.last.set(usage);
        usage
    }

    /// The operation being metered.
    pub fn operation(&self) -> Option<&'static str> {
        self.operation.get()
    }

    /// Whether a call is being metered.
    pub fn is_active(&self) -> bool {
        self.operation.get().is_some()
    }

    /// Whether a commit to `bank` carries the metered call's totals: it is the call's own bank.
    pub fn carries(&self, bank: &str) -> bool {
        self.is_active() && *self.bank.borrow() == bank
    }

    /// The last finished call's usage.
    pub fn last(&self) -> Usage {
        self.last.get()
    }

    fn so_far(&self) -> Usage {
        let mut usage = self.current.get();
        usage.elapsed_ms = now().saturating_sub(self.started.get()).max(0) as u64;
        usage
    }

    fn count(&self, change: impl FnOnce(&mut Usage)) {
        if self.operation.get().is_some() {
            let mut usage = self.current.get();
            change(&mut usage);
            self.current.set(usage);
        }
    }

    /// What a commit now adds to `totals` (the bank's stored ones): the call's usage since its
    /// last commit, under its operation. None between calls.
    pub fn unstored(&self, totals: &mut Vec<OperationUsage>) -> Option<Usage> {
        let operation = self.operation.get()?;
        let (now, first) = (self.so_far(), self.stored.get().is_none());
        let stored = self.stored.get().unwrap_or_default();
        let delta = Usage {
            llm_calls: now.llm_calls - stored.llm_calls,
            prompt_tokens: now.prompt_tokens - stored.prompt_tokens,
            completion_tokens: now.completion_tokens - stored.completion_tokens,
            embed_texts: now.embed_texts - stored.embed_texts,
            elapsed_ms: now.elapsed_ms.saturating_sub(stored.elapsed_ms),
            over_budget: now.over_budget && !stored.over_budget,
        };
        match totals.iter_mut().find(|t| t.operation == operation) {
            Some(t) => t.add(&delta, first),
            None => {
                let mut t = OperationUsage { operation: operation.to_string(), ..Default::default() };
                t.add(&delta, true);
                totals.push(t);
            }
        }
        Some(now)
    }

    /// Whether the call has spent what its commits did not store: it made none, or it called the
    /// model or embedded after its last (time alone is not worth a write).
    pub fn has_unstored(&self) -> bool {
        if !self.is_active() {
            return false;
        }
        match self.stored.get() {
            None => true,
            Some(stored) => {
                Usage { elapsed_ms: 0, ..stored } != Usage { elapsed_ms: 0, ..self.current.get() }
            }
        }
    }

    /// Whether the call in progress called the model (or was stopped by the budget) or embedded.
    pub fn spent(&self) -> bool {
        Usage { elapsed_ms: 0, ..self.current.get() } != Usage::default()
    }

    /// The commit that carried [`Meter::unstored`]'s `usage` succeeded.
    pub fn stored(&self, usage: Usage) {
        self.stored.set(Some(usage));
    }
}

/// The bank's model, counted and held to the call's budget.
pub struct MeteredLlm {
    pub inner: Rc<dyn Llm>,
    pub meter: Rc<Meter>,
}

impl MeteredLlm {
    /// [`Llm::complete`], counted, unless the call's budget would be passed.
    pub fn complete(&self, request: &LlmRequest) -> std::result::Result<LlmResponse, LlmError> {
        let budget = self.meter.budget.get();
        if budget > 0 && self.meter.operation.get().is_some() {
            // A prompt's tokens are not known before it is sent: four bytes a token, the usual
            // rate for English, plus every answer token asked for.
            let expected =
                (request.system.len() + request.prompt.len()) as u64 / 4 + u64::from(request.max_tokens);
            let spent = self.meter.current.get().tokens();
            if spent + expected > budget {
                self.meter.count(|u| u.over_budget = true);
                return Err(LlmError::Unavailable(format!(
                    "{OVER_BUDGET} ({budget} tokens: {spent} spent, about {expected} more asked): rules only"
                )));
            }
        }
        let result = self.inner.complete(request);
        match &result {
            Ok(r) => self.meter.count(|u| {
                u.llm_calls += 1;
                u.prompt_tokens += u64::from(r.prompt_tokens);
                u.completion_tokens += u64::from(r.completion_tokens);
            }),
            Err(LlmError::Failed(_)) => self.meter.count(|u| u.llm_calls += 1),
            Err(LlmError::Unavailable(_)) => {}
        }
        result
    }
}

/// The bank's embedder, counting the texts it is given.
pub struct MeteredEmbedder {
    pub inner: Rc<dyn TextEmbedder>,
    pub meter: Rc<Meter>,
}

impl MeteredEmbedder {
    fn counted(&self, texts: usize) {
        self.meter.count(|u| u.embed_texts += texts as u32);
    }
}

impl TextEmbedder for MeteredEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn inference(&self) -> &str {
        self.inner.inference()
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.counted(texts.len());
        self.inner.embed_batch(texts)
    }
    fn embed_keyed(&self, texts: &[&str]) -> Result<Vec<Keyed>> {
        self.counted(texts.len());
        self.inner.embed_keyed(texts)
    }
    fn embed_query(&self, bank: &str, text: &str) -> Result<Vec<f32>> {
        self.counted(1);
        self.inner.embed_query(bank, text)
    }
}
