//! What a recall asks and what it returns, in the engine's terms (records, not the API's copies).

use hindsight_types::time::Timestamp;
use hindsight_types::{Kind, Scope, Score};

use crate::record::Record;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecallQuery {
    pub query: String,
    pub k: Option<u32>,
    pub now: Timestamp,
    pub task_type: Option<String>,
    pub kinds: Vec<Kind>,
    pub tags: Vec<String>,
    pub scope: Option<Scope>,
    pub min_score: Option<f32>,
    pub prompt_tokens: Option<u32>,
    /// The query's vector, when the caller has it; skips embedding.
    pub vector: Option<Vec<f32>>,
    /// Also recall memories that were superseded or merged (never archived ones).
    pub include_superseded: bool,
    /// Who is recalling, for the recall log.
    pub agent_id: Option<String>,
    /// The task the recall is for (citation handles are the task's).
    pub task_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    pub memory: Record,
    pub score: Score,
    /// Active memories that say otherwise and are kept beside this one.
    pub conflicting: Vec<String>,
    /// Old (by `recall.stale_after_days`) yet recalled: the prompt block says so.
    pub possibly_stale: bool,
    /// In the prompt block (relevant enough, and within its budget).
    pub in_prompt: bool,
    /// The bank it was recalled from.
    pub bank: String,
    /// Its citation handle in the prompt block (`m1`, `m2`, …).
    pub handle: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecallResult {
    pub items: Vec<Recalled>,
    pub prompt: String,
}
