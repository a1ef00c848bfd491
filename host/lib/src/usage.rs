//! LLM usage, counted in the store: calls, failures and tokens by operation, summed over the
//! store's life, whatever model answered.

use std::collections::BTreeMap;
use std::sync::Arc;

use hindsight_types::{Llm, LlmError, LlmRequest, LlmResponse, Named, Op, Store, StoreError};
use serde::{Deserialize, Serialize};

/// Calls, failures and tokens of one operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmUsage {
    /// Calls made.
    pub calls: u64,
    /// Calls that failed or answered unusably.
    pub failures: u64,
    /// Prompt tokens spent.
    pub prompt_tokens: u64,
    /// Answer tokens spent.
    pub completion_tokens: u64,
}

const PREFIX: &str = "host/llm-usage/";

/// Usage by operation, as recorded in `store`.
pub(crate) fn read(store: &dyn Store) -> Result<BTreeMap<String, LlmUsage>, StoreError> {
    let mut out = BTreeMap::new();
    for (key, value) in store.scan(PREFIX, None, 1000)? {
        out.insert(key[PREFIX.len()..].to_string(), serde_json::from_slice(&value).unwrap_or_default());
    }
    Ok(out)
}

/// Wraps a model so that every call's outcome and tokens are added to the store's counts.
pub(crate) struct Metered {
    pub(crate) llm: Arc<dyn Llm>,
    pub(crate) store: Arc<dyn Store>,
}

impl Metered {
    fn record(&self, operation: &str, ok: bool, prompt: u32, completion: u32) -> Result<(), StoreError> {
        let key = format!("{PREFIX}{operation}");
        // Two hosts may count at once: read, add, and commit only over what was read.
        for _ in 0..4 {
            let before = self.store.get(&key)?;
            let mut usage: LlmUsage =
                before.as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
            usage.calls += 1;
            usage.failures += u64::from(!ok);
            usage.prompt_tokens += u64::from(prompt);
            usage.completion_tokens += u64::from(completion);
            let bytes = serde_json::to_vec(&usage).expect("usage serialises");
            match self.store.commit(vec![Op::Expect(key.clone(), before), Op::Put(key.clone(), bytes)]) {
                Err(StoreError::Conflict(_)) => continue,
                other => return other,
            }
        }
        Ok(())
    }
}

impl Llm for Metered {
    fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let result = self.llm.complete(request);
        let (ok, prompt, completion) = match &result {
            // An answer with no JSON in it, when JSON was asked for, is a failure too: the engine
            // cannot use it (it reads answers with the same parser).
            Ok(r) => {
                let usable = request.json_schema.is_none()
                    || hindsight_types::llm::parse_json::<serde_json::Value>(&r.text).is_ok();
                (usable, r.prompt_tokens, r.completion_tokens)
            }
            Err(LlmError::Unavailable(_)) => return result,
            Err(LlmError::Failed(_)) => (false, 0, 0),
        };
        // Accounting must never fail the call itself.
        let _ = self.record(request.operation.as_str(), ok, prompt, completion);
        result
    }
}
