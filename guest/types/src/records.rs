//! What the engine returns: stored memories, recall results, outcomes, reports, task states.
//! Their serde form is what `--json` and the MCP tools print: times as ISO 8601, scores to six
//! decimals, a memory's scope as `scope` and `scope_id`, metadata as an object.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::item::Scope;
use crate::names::{
    DistillMethod, FailureType, HistoryEvent, Kind, MaintainAction, Outcome, RetainAction, ScopeLevel,
    Source, Status, StepKind,
};
use crate::time::{format_iso, Timestamp};

/// A stored memory, as recall, `get` and `history` return it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecord {
    /// Its id in the bank.
    pub id: String,
    /// Episodic, semantic or procedural.
    pub kind: Kind,
    /// Plain text.
    pub content: String,
    /// The kind of task it applies to.
    pub task_type: Option<String>,
    /// The task it came from.
    pub task_description: Option<String>,
    /// JSON text: tools used, parameters, samples.
    pub context: Option<String>,
    /// Labels.
    pub tags: Vec<String>,
    /// Where it applies.
    pub scope: Scope,
    /// The agent that wrote it.
    pub agent_id: Option<String>,
    /// 0..1.
    pub importance: f32,
    /// 0..1; feedback, reinforcement, supersession and decay move it.
    pub confidence: f32,
    /// Who said it.
    pub source: Source,
    /// For a failure: may it pass?
    pub failure_type: Option<FailureType>,
    /// When the remembered thing happened.
    pub occurred_at: Timestamp,
    /// When it was stored.
    pub created_at: Timestamp,
    /// When the record last changed.
    pub updated_at: Timestamp,
    /// When it was last recalled or confirmed.
    pub last_accessed_at: Option<Timestamp>,
    /// Times it was recalled.
    pub access_count: u32,
    /// Active, superseded, merged or archived.
    pub status: Status,
    /// Memories this one replaced or absorbed.
    pub supersedes: Vec<String>,
    /// The memory that replaced or absorbed this one.
    pub superseded_by: Option<String>,
    /// After this it is no longer recalled.
    pub valid_until: Option<Timestamp>,
    /// Caller metadata.
    pub metadata: Vec<(String, String)>,
    /// The embedding model its vector was made with.
    pub embedding_model: String,
    /// Active memories that say otherwise and are kept beside this one.
    pub conflicts_with: Vec<String>,
    /// Times it was confirmed (each lengthens its recency half-life).
    pub reinforcements: u32,
}

impl MemoryRecord {
    /// The metadata value under `key`.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The item that shares this memory (of bank `from`) into another bank: what it says and how
    /// much it is worth, with `metadata.shared_from` = `from/id`. Not the private context it was
    /// made in: the task it was distilled from, that task's description, the tool context.
    pub fn shared_copy(&self, from: &str) -> crate::Memory {
        let metadata = self
            .metadata
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "shared_from" | "task" | "task_outcome"))
            .cloned()
            .chain([("shared_from".to_string(), format!("{from}/{}", self.id))])
            .collect();
        crate::Memory {
            kind: Some(self.kind),
            task_type: self.task_type.clone(),
            tags: self.tags.clone(),
            scope: Some(self.scope.clone()),
            agent_id: self.agent_id.clone(),
            importance: Some(self.importance),
            confidence: Some(self.confidence),
            source: Some(self.source),
            failure_type: self.failure_type,
            occurred_at: Some(self.occurred_at),
            valid_until: self.valid_until,
            metadata,
            ..crate::Memory::new(self.content.clone())
        }
    }
}

/// Six decimals: enough to compare scores across hosts, without f32 noise in the output.
fn round(x: f32) -> f64 {
    (f64::from(x) * 1e6).round() / 1e6
}

struct Iso(Timestamp);

impl Serialize for Iso {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_iso(self.0))
    }
}

struct Pairs<'a>(&'a [(String, String)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for MemoryRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            id: &'a str,
            kind: Kind,
            content: &'a str,
            task_type: &'a Option<String>,
            task_description: &'a Option<String>,
            context: Option<serde_json::Value>,
            tags: &'a [String],
            scope: ScopeLevel,
            scope_id: &'a Option<String>,
            agent_id: &'a Option<String>,
            importance: f64,
            confidence: f64,
            source: Source,
            failure_type: Option<FailureType>,
            occurred_at: Iso,
            created_at: Iso,
            updated_at: Iso,
            last_accessed_at: Option<Iso>,
            access_count: u32,
            status: Status,
            supersedes: &'a [String],
            superseded_by: &'a Option<String>,
            valid_until: Option<Iso>,
            metadata: Pairs<'a>,
            embedding_model: &'a str,
            conflicts_with: &'a [String],
            reinforcements: u32,
        }
        Wire {
            id: &self.id,
            kind: self.kind,
            content: &self.content,
            task_type: &self.task_type,
            task_description: &self.task_description,
            context: self.context.as_deref().and_then(|c| serde_json::from_str(c).ok()),
            tags: &self.tags,
            scope: self.scope.level,
            scope_id: &self.scope.id,
            agent_id: &self.agent_id,
            importance: round(self.importance),
            confidence: round(self.confidence),
            source: self.source,
            failure_type: self.failure_type,
            occurred_at: Iso(self.occurred_at),
            created_at: Iso(self.created_at),
            updated_at: Iso(self.updated_at),
            last_accessed_at: self.last_accessed_at.map(Iso),
            access_count: self.access_count,
            status: self.status,
            supersedes: &self.supersedes,
            superseded_by: &self.superseded_by,
            valid_until: self.valid_until.map(Iso),
            metadata: Pairs(&self.metadata),
            embedding_model: &self.embedding_model,
            conflicts_with: &self.conflicts_with,
            reinforcements: self.reinforcements,
        }
        .serialize(s)
    }
}

/// What to recall: the query text and optional filters.
///
/// ```
/// use hindsight_types::{Kind, Query};
/// let q = Query::new("garbled headers when reading a CSV").k(3).kinds([Kind::Procedural]);
/// assert_eq!(q.k, Some(3));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// What the agent is about to do or wants to know.
    pub query: String,
    /// How many memories (default `recall.default_k`).
    pub k: Option<u32>,
    /// "Now" for recency (default: the wall clock).
    pub now: Option<Timestamp>,
    /// Memories of this task type score higher.
    pub task_type: Option<String>,
    /// Only these kinds (empty: every kind).
    pub kinds: Vec<Kind>,
    /// A memory must carry one of these tags (empty: any).
    pub tags: Vec<String>,
    /// Only this scope (and global memories).
    pub scope: Option<Scope>,
    /// Drop memories scoring below this.
    pub min_score: Option<f32>,
    /// Token budget of the prompt block (default `recall.prompt_tokens`; 0: no block).
    pub prompt_tokens: Option<u32>,
    /// The query's vector when the caller already has it (made by the bank's model).
    pub vector: Option<Vec<f32>>,
    /// Also recall superseded and merged memories (never archived ones).
    pub include_superseded: bool,
    /// Who is recalling (the principal or agent), for the recall log.
    pub agent_id: Option<String>,
    /// The task the recall is for: its prompt block's citation handles are the task's, and the
    /// memories cited when the task ends get its outcome as feedback.
    pub task_id: Option<String>,
    /// Leave out memories marked `untrusted` (instruction-like text from a tool, an import or
    /// the agent's inference).
    pub trusted_only: bool,
    /// Answer with what the bank held and believed at this time: memories created by then,
    /// superseded or merged only after it, valid then; recency is reckoned from it.
    pub as_of: Option<Timestamp>,
}

impl Query {
    /// A query with no filters.
    pub fn new(query: impl Into<String>) -> Query {
        Query { query: query.into(), ..Query::default() }
    }

    /// How many memories to return.
    pub fn k(mut self, k: u32) -> Self {
        self.k = Some(k);
        self
    }

    /// "Now" for recency.
    pub fn at(mut self, now: Timestamp) -> Self {
        self.now = Some(now);
        self
    }

    /// The current task's type.
    pub fn task_type(mut self, task_type: impl Into<String>) -> Self {
        self.task_type = Some(task_type.into());
        self
    }

    /// Only these kinds.
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = Kind>) -> Self {
        self.kinds.extend(kinds);
        self
    }

    /// Only memories carrying one of these tags.
    pub fn tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tags: I) -> Self {
        self.tags.extend(tags.into_iter().map(Into::into));
        self
    }

    /// Only this scope (and global memories).
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Drop memories scoring below this.
    pub fn min_score(mut self, min: f32) -> Self {
        self.min_score = Some(min);
        self
    }

    /// Token budget of the prompt block.
    pub fn prompt_tokens(mut self, tokens: u32) -> Self {
        self.prompt_tokens = Some(tokens);
        self
    }

    /// The query's vector (skips embedding the query).
    pub fn vector(mut self, vector: Vec<f32>) -> Self {
        self.vector = Some(vector);
        self
    }

    /// Also recall superseded and merged memories.
    pub fn include_superseded(mut self) -> Self {
        self.include_superseded = true;
        self
    }

    /// Who is recalling, for the recall log.
    pub fn agent(mut self, agent_id: impl Into<String>) -> Self {
        self.agent_id = Some(agent_id.into());
        self
    }

    /// The task the recall is for.
    pub fn for_task(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }

    /// Leave out memories marked `untrusted`.
    pub fn trusted_only(mut self) -> Self {
        self.trusted_only = true;
        self
    }

    /// What the bank held and believed at `at`.
    pub fn as_of(mut self, at: Timestamp) -> Self {
        self.as_of = Some(at);
        self
    }
}

impl From<&str> for Query {
    fn from(query: &str) -> Self {
        Query::new(query)
    }
}

impl From<String> for Query {
    fn from(query: String) -> Self {
        Query::new(query)
    }
}

/// Each factor's weighted contribution to a recall score; `total` is their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Score {
    /// Cosine similarity, normalised over the query's candidates, weighted.
    pub semantic: f32,
    /// BM25, normalised, weighted; plus what co-mention expansion lent (`recall.entity_expansion`).
    pub lexical: f32,
    /// How recent, by the memory's half-life.
    pub recency: f32,
    /// The memory's confidence.
    pub confidence: f32,
    /// The memory's importance.
    pub importance: f32,
    /// Same task type as the query's.
    pub task_match: f32,
    /// Who said it.
    pub source: f32,
    /// The sum.
    pub total: f32,
    /// Raw cosine similarity between query and memory (not part of the sum).
    pub similarity: f32,
}

impl Serialize for Score {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(9))?;
        for (k, v) in [
            ("semantic", self.semantic),
            ("lexical", self.lexical),
            ("recency", self.recency),
            ("confidence", self.confidence),
            ("importance", self.importance),
            ("task_match", self.task_match),
            ("source", self.source),
            ("similarity", self.similarity),
            ("total", self.total),
        ] {
            map.serialize_entry(k, &round(v))?;
        }
        map.end()
    }
}

/// One recalled memory with its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recalled {
    /// The memory.
    #[serde(flatten)]
    pub memory: MemoryRecord,
    /// Why it ranked where it did.
    pub score: Score,
    /// Active memories that say otherwise: the prompt block tells the agent to judge.
    pub conflicting: Vec<String>,
    /// Older than `recall.stale_after_days` yet recalled: the prompt block says so.
    pub possibly_stale: bool,
    /// In the prompt block: relevant enough (`recall.prompt_min_relevance`) and within its budget.
    pub in_prompt: bool,
    /// The bank it was recalled from.
    pub bank: String,
    /// Its citation handle in the prompt block (`m1`): an agent cites `[m1]` in its answer.
    pub handle: Option<String>,
}

/// What a recall returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecallResult {
    /// Best first.
    pub items: Vec<Recalled>,
    /// Ready to put in a prompt; empty when nothing was recalled.
    pub prompt: String,
    /// Banks asked for that were not searched: the caller may not read them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_banks: Vec<String>,
}

/// What became of one retained item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetainOutcome {
    /// The memory the item ended up in; none when it was filtered out.
    pub id: Option<String>,
    /// What happened.
    pub action: RetainAction,
    /// The other memory involved: the one superseded, the item's own merged record, or one it
    /// conflicts with.
    pub related: Option<String>,
    /// Why, in words.
    pub reason: String,
}

impl RetainOutcome {
    /// An item dropped for `reason`.
    pub fn filtered(reason: impl Into<String>) -> RetainOutcome {
        RetainOutcome { id: None, action: RetainAction::Filtered, related: None, reason: reason.into() }
    }
}

/// What one call cost: the LLM calls it made and their tokens, the texts it embedded, its time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Usage {
    /// LLM calls made (answered or failed).
    pub llm_calls: u32,
    /// Prompt tokens the LLM counted.
    pub prompt_tokens: u64,
    /// Answer tokens the LLM counted.
    pub completion_tokens: u64,
    /// Texts given to the embedding model.
    pub embed_texts: u32,
    /// Time in the engine, in milliseconds.
    pub elapsed_ms: u64,
    /// An LLM call was skipped because it would have gone past `limits.llm_token_budget`: the
    /// call used the rules instead.
    pub over_budget: bool,
}

impl Usage {
    /// Tokens spent, prompt and answer.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Running totals of one operation's usage on a bank.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct OperationUsage {
    /// `retain`, `recall`, `task_end`, `distill`, `consolidate` or `maintain`.
    pub operation: String,
    /// Calls counted.
    pub calls: u64,
    /// LLM calls made.
    pub llm_calls: u64,
    /// Prompt tokens spent.
    pub prompt_tokens: u64,
    /// Answer tokens spent.
    pub completion_tokens: u64,
    /// Texts embedded.
    pub embed_texts: u64,
    /// Time in the engine, in milliseconds.
    pub elapsed_ms: u64,
    /// Calls that went over `limits.llm_token_budget` and used the rules.
    pub over_budget: u64,
}

impl OperationUsage {
    /// Adds one call's `usage`, or the part of it not yet added (`new_call`: the first part, so
    /// the call counts; `over_budget` is set in one part of a call at most).
    pub fn add(&mut self, usage: &Usage, new_call: bool) {
        self.calls += u64::from(new_call);
        self.llm_calls += u64::from(usage.llm_calls);
        self.prompt_tokens += usage.prompt_tokens;
        self.completion_tokens += usage.completion_tokens;
        self.embed_texts += u64::from(usage.embed_texts);
        self.elapsed_ms += usage.elapsed_ms;
        self.over_budget += u64::from(usage.over_budget);
    }
}

/// Counts of a bank's memories.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// The bank's id.
    pub bank: String,
    /// Every memory, whatever its status.
    pub total: u32,
    /// Recalled ones.
    pub active: u32,
    /// Forgotten softly or aged out.
    pub archived: u32,
    /// Replaced by newer ones.
    pub superseded: u32,
    /// Absorbed into others.
    pub merged: u32,
    /// Active memories by kind.
    pub active_by_kind: Vec<(Kind, u32)>,
    /// The bank's embedding model.
    pub embedding_model: String,
    /// Its vectors' dimension.
    pub dimension: u32,
    /// Which code computes the model's vectors: `encoder` (the engine's own) or `tract`.
    pub inference: String,
    /// The bank's commit sequence number.
    pub sequence: u64,
    /// The version of the stored format the bank is in.
    pub format_version: u32,
    /// Running totals per operation (retain, recall, task_end, distill, consolidate, maintain).
    pub usage: Vec<OperationUsage>,
}

impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            bank: &'a str,
            total: u32,
            active: u32,
            archived: u32,
            superseded: u32,
            merged: u32,
            active_by_kind: std::collections::BTreeMap<&'static str, u32>,
            embedding_model: &'a str,
            dimension: u32,
            inference: &'a str,
            sequence: u64,
            format_version: u32,
            usage: std::collections::BTreeMap<&'a str, &'a OperationUsage>,
        }
        use crate::names::Named;
        Wire {
            bank: &self.bank,
            total: self.total,
            active: self.active,
            archived: self.archived,
            superseded: self.superseded,
            merged: self.merged,
            active_by_kind: self.active_by_kind.iter().map(|(k, n)| (k.as_str(), *n)).collect(),
            embedding_model: &self.embedding_model,
            dimension: self.dimension,
            inference: &self.inference,
            sequence: self.sequence,
            format_version: self.format_version,
            usage: self.usage.iter().map(|u| (u.operation.as_str(), u)).collect(),
        }
        .serialize(s)
    }
}

/// One event in a memory's history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// When it happened.
    pub at: Timestamp,
    /// What happened.
    pub event: HistoryEvent,
    /// The memory it happened to, as it is now.
    pub memory: MemoryRecord,
    /// For superseded and merged: the memory that replaced or absorbed it.
    pub other: Option<String>,
}

impl Serialize for HistoryEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(5))?;
        map.serialize_entry("at", &Iso(self.at))?;
        map.serialize_entry("event", &self.event)?;
        map.serialize_entry("id", &self.memory.id)?;
        map.serialize_entry("other", &self.other)?;
        map.serialize_entry("memory", &self.memory)?;
        map.end()
    }
}

/// One memory `maintain` archived or merged, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MaintainStep {
    /// The memory.
    pub id: String,
    /// Archived or merged.
    pub action: MaintainAction,
    /// For merged: the memory it was merged into.
    pub into: Option<String>,
    /// Why.
    pub reason: String,
}

/// What `maintain` did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MaintainReport {
    /// Active memories before.
    pub active_before: u32,
    /// Active memories after.
    pub active_after: u32,
    /// Memories whose confidence decayed.
    pub decayed: u32,
    /// Never-recalled episodes whose importance was lowered.
    pub weakened: u32,
    /// Every memory archived or merged, and why.
    pub steps: Vec<MaintainStep>,
    /// Vectors sealed from the exact-scan buffer into a new index segment.
    pub sealed: u32,
}

impl MaintainReport {
    /// How many steps took `action`.
    pub fn count(&self, action: MaintainAction) -> usize {
        self.steps.iter().filter(|s| s.action == action).count()
    }
}

impl Serialize for MaintainReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(8))?;
        map.serialize_entry("active_before", &self.active_before)?;
        map.serialize_entry("active_after", &self.active_after)?;
        map.serialize_entry("decayed", &self.decayed)?;
        map.serialize_entry("weakened", &self.weakened)?;
        map.serialize_entry("sealed", &self.sealed)?;
        map.serialize_entry("archived", &self.count(MaintainAction::Archived))?;
        map.serialize_entry("merged", &self.count(MaintainAction::Merged))?;
        map.serialize_entry("steps", &self.steps)?;
        map.end()
    }
}

/// One entry of a task's step log.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The caller's id for the step: the same id sent twice (a retried request) is one step;
    /// without one, every step is recorded, repeats included.
    pub id: Option<String>,
    /// Thought, tool call, tool result, user message or answer.
    pub kind: StepKind,
    /// What was thought, called, returned, said or answered.
    pub text: String,
    /// The tool, for tool calls and results.
    pub tool: Option<String>,
    /// A tool result that is an error.
    pub error: bool,
    /// When (default: when it is recorded).
    pub at: Option<Timestamp>,
}

impl Step {
    /// A step of this kind.
    pub fn new(kind: StepKind, text: impl Into<String>) -> Step {
        Step { id: None, kind, text: text.into(), tool: None, error: false, at: None }
    }

    /// The agent's reasoning.
    pub fn thought(text: impl Into<String>) -> Step {
        Step::new(StepKind::Thought, text)
    }

    /// A call of `tool` with this input.
    pub fn tool_call(tool: impl Into<String>, input: impl Into<String>) -> Step {
        Step { tool: Some(tool.into()), ..Step::new(StepKind::ToolCall, input) }
    }

    /// What `tool` returned (`.error()` when it failed).
    pub fn tool_result(tool: impl Into<String>, output: impl Into<String>) -> Step {
        Step { tool: Some(tool.into()), ..Step::new(StepKind::ToolResult, output) }
    }

    /// What the user said.
    pub fn user_message(text: impl Into<String>) -> Step {
        Step::new(StepKind::UserMessage, text)
    }

    /// The agent's final answer.
    pub fn answer(text: impl Into<String>) -> Step {
        Step::new(StepKind::Answer, text)
    }

    /// Marks a tool result as an error.
    pub fn error(mut self) -> Self {
        self.error = true;
        self
    }

    /// When it happened.
    pub fn at(mut self, at: Timestamp) -> Self {
        self.at = Some(at);
        self
    }

    /// The caller's id for it, which makes a retried request idempotent.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(6))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("at", &self.at.map(Iso))?;
        map.serialize_entry("type", &self.kind)?;
        map.serialize_entry("text", &self.text)?;
        map.serialize_entry("tool", &self.tool)?;
        map.serialize_entry("error", &self.error)?;
        map.end()
    }
}

/// One change to a task's working memory; the same change twice changes nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskUpdate {
    /// A step of the log.
    Step(Step),
    /// A confirmed fact.
    Fact(String),
    /// An assumption not yet checked.
    Assumption(String),
    /// An open question.
    Question(String),
    /// A note.
    Note(String),
    /// What the agent is doing now.
    CurrentStep(String),
}

/// A tool call paired with its result (from the step log).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool.
    pub tool: String,
    /// What it was called with.
    pub input: String,
    /// What it returned, if anything yet.
    pub result: Option<String>,
    /// The result is an error.
    pub error: bool,
    /// When it was called.
    pub at: Timestamp,
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(5))?;
        map.serialize_entry("tool", &self.tool)?;
        map.serialize_entry("input", &self.input)?;
        map.serialize_entry("result", &self.result)?;
        map.serialize_entry("error", &self.error)?;
        map.serialize_entry("at", &Iso(self.at))?;
        map.end()
    }
}

/// A task's working memory.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// Its id in the bank.
    pub id: String,
    /// What it set out to do.
    pub goal: String,
    /// Its kind, e.g. `data-cleaning`.
    pub task_type: Option<String>,
    /// Bumped by every change; an update made against another version is refused.
    pub version: u32,
    /// When it began.
    pub started_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// Facts confirmed along the way.
    pub confirmed_facts: Vec<String>,
    /// Assumptions.
    pub assumptions: Vec<String>,
    /// Open questions.
    pub open_questions: Vec<String>,
    /// Notes.
    pub notes: Vec<String>,
    /// What it is doing now.
    pub current_step: Option<String>,
    /// Tool calls paired with their results.
    pub tool_calls: Vec<ToolCall>,
    /// The step log.
    pub steps: Vec<Step>,
    /// When it ended.
    pub ended_at: Option<Timestamp>,
    /// How it ended.
    pub outcome: Option<Outcome>,
    /// What happened at the end.
    pub detail: Option<String>,
}

impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            id: &'a str,
            goal: &'a str,
            task_type: &'a Option<String>,
            version: u32,
            started_at: Iso,
            updated_at: Iso,
            confirmed_facts: &'a [String],
            assumptions: &'a [String],
            open_questions: &'a [String],
            notes: &'a [String],
            current_step: &'a Option<String>,
            tool_calls: &'a [ToolCall],
            steps: &'a [Step],
            ended_at: Option<Iso>,
            outcome: Option<Outcome>,
            detail: &'a Option<String>,
        }
        Wire {
            id: &self.id,
            goal: &self.goal,
            task_type: &self.task_type,
            version: self.version,
            started_at: Iso(self.started_at),
            updated_at: Iso(self.updated_at),
            confirmed_facts: &self.confirmed_facts,
            assumptions: &self.assumptions,
            open_questions: &self.open_questions,
            notes: &self.notes,
            current_step: &self.current_step,
            tool_calls: &self.tool_calls,
            steps: &self.steps,
            ended_at: self.ended_at.map(Iso),
            outcome: self.outcome,
            detail: &self.detail,
        }
        .serialize(s)
    }
}

/// A candidate memory from distillation or consolidation, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Distilled {
    /// What the memory says.
    pub content: String,
    /// Its kind.
    pub kind: Kind,
    /// The write path's outcome, or `filtered` with the reason verification dropped it.
    #[serde(flatten)]
    pub outcome: RetainOutcome,
    /// The bank it was written to: the task's own, or `spaces.shared_bank` for a lesson the
    /// LLM marked as worth sharing.
    pub bank: String,
}

/// How a task ended and what hindsight kept from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskEnd {
    /// The ended task.
    pub task: TaskState,
    /// How its memories were made (or that it was skipped).
    pub method: DistillMethod,
    /// Why, in words.
    pub reason: String,
    /// Every candidate and what became of it.
    pub items: Vec<Distilled>,
    /// Memories recalled for the task and cited in its answer or detail: the task's outcome was
    /// applied to them as feedback.
    pub cited: Vec<String>,
    /// Memories recalled for the task and not cited.
    pub unused: Vec<String>,
}

/// How to end a task: its outcome, a detail, and whether to distil even a short task.
#[derive(Debug, Clone, PartialEq)]
pub struct EndTask {
    /// How it ended.
    pub outcome: Outcome,
    /// What happened at the end, in a sentence.
    pub detail: Option<String>,
    /// Distil even a short or uneventful task.
    pub force: bool,
}

impl EndTask {
    /// Ends with this outcome.
    pub fn new(outcome: Outcome) -> EndTask {
        EndTask { outcome, detail: None, force: false }
    }

    /// What happened at the end.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Distils even a short or uneventful task.
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }
}

impl From<Outcome> for EndTask {
    fn from(outcome: Outcome) -> Self {
        EndTask::new(outcome)
    }
}

/// What a hard forget erased, and what it could not: a receipt.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Erasure {
    /// Every memory record erased, as `bank/id`: the one asked for, the records merged into it,
    /// and the copies shared from it into other banks.
    pub memories: Vec<String>,
    /// Their vectors, and their entries in the keyword index.
    pub vectors: u32,
    /// Recall-log entries the erased ids were taken out of.
    pub recall_log_entries: u32,
    /// Tasks whose texts held the memory's text (the one it was distilled from, ones whose facts
    /// reinforced it), now marked erased, as `bank/task`; and tasks whose citation handles named it.
    pub tasks: Vec<String>,
    /// Where a trace remains that the engine cannot remove (the host adds its own: PostgreSQL's
    /// dead tuples until VACUUM, an export file already written).
    pub remaining: Vec<String>,
}

/// A whole task told at once, to distil: begun, filled with its steps and facts and ended in one
/// call, kept whole or not at all (what an agent that did not keep working memory hands over).
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    /// What the task set out to do.
    pub goal: String,
    /// Its kind, e.g. `data-cleaning`.
    pub task_type: Option<String>,
    /// Who worked on it.
    pub agent_id: Option<String>,
    /// The step log, in order.
    pub steps: Vec<Step>,
    /// Facts confirmed along the way.
    pub facts: Vec<String>,
    /// How it ended, a detail, and whether to distil even a short task.
    pub end: EndTask,
}

impl Trajectory {
    /// A trajectory with this goal and outcome and nothing else yet.
    pub fn new(goal: impl Into<String>, end: impl Into<EndTask>) -> Trajectory {
        Trajectory {
            goal: goal.into(),
            task_type: None,
            agent_id: None,
            steps: Vec::new(),
            facts: Vec::new(),
            end: end.into(),
        }
    }
}

/// A task to begin: its goal and, optionally, its type.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// What the task sets out to do.
    pub goal: String,
    /// Its kind, e.g. `data-cleaning`.
    pub task_type: Option<String>,
    /// Who works on it: the memories distilled from it carry this agent.
    pub agent_id: Option<String>,
}

impl NewTask {
    /// A task with this goal.
    pub fn new(goal: impl Into<String>) -> NewTask {
        NewTask { goal: goal.into(), task_type: None, agent_id: None }
    }

    /// Its kind.
    pub fn task_type(mut self, task_type: impl Into<String>) -> Self {
        self.task_type = Some(task_type.into());
        self
    }
}

impl From<&str> for NewTask {
    fn from(goal: &str) -> Self {
        NewTask::new(goal)
    }
}

impl From<String> for NewTask {
    fn from(goal: String) -> Self {
        NewTask::new(goal)
    }
}
