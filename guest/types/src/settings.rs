//! Engine settings: every tunable rule of the engine, with its default. They cross into the
//! component as JSON text; a missing key takes its default, an unknown key is an error (typos
//! must not pass silently).

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::names::{Kind, Source};

type Result<T> = std::result::Result<T, FieldError>;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// Every tunable rule of the engine; `Settings::default()` is what the engine uses when given none.
pub struct Settings {
    /// What a retained item gets for a field it leaves unset.
    pub defaults: Defaults,
    /// Size limits on inputs.
    pub limits: Limits,
    /// Recall: score weights, half-lives, candidates, the prompt block.
    pub recall: RecallSettings,
    /// The keyword index (BM25).
    pub lexical: LexicalSettings,
    /// The write path: filter, dedup, merge, conflict.
    pub write: WriteSettings,
    /// What feedback on recalled memories does to them.
    pub feedback: FeedbackSettings,
    /// `maintain`: decay, archiving, capacity, late merging.
    pub maintain: MaintainSettings,
    /// Distillation at a task's end, and consolidation.
    pub distill: DistillSettings,
    /// The vector index.
    pub index: IndexSettings,
    /// Tasks' working memory: how much one task may hold.
    pub tasks: TaskSettings,
    /// Private and shared spaces.
    pub spaces: SpacesSettings,
    /// The recall log: which memories each recall returned, and what became of them.
    pub audit: AuditSettings,
    /// What the write path guards against: secrets kept verbatim, instructions planted in tool
    /// output, recalled memories extracted again as new ones.
    pub defence: DefenceSettings,
}

/// What the write path does with a secret or a piece of personal data it finds in an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DefenceAction {
    /// Store the text with each finding replaced by `[redacted:KIND]`.
    Redact,
    /// Refuse the whole call with an error naming the item and the kind; nothing is stored.
    Refuse,
    /// Store the text as given.
    Allow,
}

/// Write-time defence: applied by retain (and so by distillation and consolidation) and by
/// `correct`, before anything is embedded or stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DefenceSettings {
    /// Credentials in an item's content or context (provider API keys, bearer and JSON web tokens, private key blocks, passwords in URLs and `password=` pairs, Luhn-checked card numbers): `redact`, `refuse` or `allow`.
    pub secrets: DefenceAction,
    /// Personal data in an item's content or context (e-mail addresses, phone numbers): `redact`, `refuse` or `allow`.
    pub personal: DefenceAction,
    /// Mark instruction-like text ("ignore previous instructions", role prefixes, tool-call syntax, hidden Unicode) that did not come from the user `untrusted`, with the reason in its `untrusted_reason` metadata: the prompt block quotes it as data, and `trusted_only` recall leaves it out. It is kept, never dropped.
    pub mark_untrusted: bool,
    /// Recall-log entries (newest first) whose served memories an item is checked against: an item that restates one of them (the agent feeding a recalled memory back) reinforces it instead of being stored again. 0 turns the guard off.
    pub reextraction_window: u32,
}

impl Default for DefenceSettings {
    fn default() -> Self {
        DefenceSettings {
            secrets: DefenceAction::Redact,
            personal: DefenceAction::Allow,
            mark_untrusted: true,
            reextraction_window: 20,
        }
    }
}

/// The recall log each bank keeps, and what the audit calls never useful.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditSettings {
    /// Recall log entries a bank keeps; the oldest is dropped in the commit that adds one more.
    pub max_entries: u32,
    /// Log each recall's query text; false: only a hash of it.
    pub store_queries: bool,
    /// A memory recalled this many times and never cited or marked helpful is never useful.
    pub unused_after: u32,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings { max_entries: 10_000, store_queries: true, unused_after: 5 }
    }
}

/// Private and shared spaces (banks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpacesSettings {
    /// Where a copy of a distilled lesson marked `share` goes (the task's own bank keeps the
    /// lesson too), when `share_lessons` is on and the caller may write there.
    pub shared_bank: String,
    /// Copy lessons the LLM marks as general knowledge to `shared_bank`. Off by default: the mark
    /// comes from a model that reads tool output. Never copied, whatever the mark: what the user
    /// said, preferences and constraints, and text holding a secret.
    pub share_lessons: bool,
}

impl Default for SpacesSettings {
    fn default() -> Self {
        SpacesSettings { shared_bank: "shared".into(), share_lessons: false }
    }
}

/// How much one task's working memory may hold: a step log without bounds would make every
/// update rewrite, and every distillation read, an unbounded record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskSettings {
    /// Steps in one task's log.
    pub max_steps: u32,
    /// One step, fact, note or question.
    pub max_text_bytes: u32,
    /// All of one task's text together.
    pub max_total_bytes: u32,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings { max_steps: 1000, max_text_bytes: 32 * 1024, max_total_bytes: 1 << 20 }
    }
}

/// What a retained item gets for a field it leaves unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Defaults {
    /// The kind of an item that names none.
    pub kind: Kind,
    /// The importance of an item that names none, 0..1.
    pub importance: f32,
    /// Starting confidence by source: what the user said outranks what the agent inferred.
    pub confidence_user_explicit: f32,
    /// Starting confidence of what came from the user's feedback.
    pub confidence_user_feedback: f32,
    /// Starting confidence of what a tool returned.
    pub confidence_tool_result: f32,
    /// Starting confidence of what the agent inferred.
    pub confidence_agent_inference: f32,
    /// Starting confidence of what was imported.
    pub confidence_imported: f32,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            kind: Kind::Episodic,
            importance: 0.5,
            confidence_user_explicit: 0.9,
            confidence_user_feedback: 0.85,
            confidence_tool_result: 0.8,
            confidence_agent_inference: 0.7,
            confidence_imported: 0.6,
        }
    }
}

impl Defaults {
    /// The starting confidence of an item from `source`.
    pub fn confidence_for(&self, source: Source) -> f32 {
        match source {
            Source::UserExplicit => self.confidence_user_explicit,
            Source::UserFeedback => self.confidence_user_feedback,
            Source::ToolResult => self.confidence_tool_result,
            Source::AgentInference => self.confidence_agent_inference,
            Source::Imported => self.confidence_imported,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// Size limits on inputs: an input past one is refused with an error naming it.
pub struct Limits {
    /// A memory's text, and its context.
    pub max_content_bytes: usize,
    /// Tags, ids, task types, metadata keys and values.
    pub max_field_bytes: usize,
    /// Tags on one memory.
    pub max_tags: usize,
    /// Metadata pairs on one memory.
    pub max_metadata_pairs: usize,
    /// Items in one retain call.
    pub max_items_per_retain: usize,
    /// Memories one recall may return.
    pub max_k: u32,
    /// A recall query's text.
    pub max_query_bytes: usize,
    /// LLM tokens (prompt and answer) one call — a task end, a distillation, a retain's
    /// judgement, a consolidation — may spend; an LLM call that would go past it is not made and
    /// the rules decide instead (the call's usage says `over_budget`). 0: no cap.
    pub llm_token_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 32 * 1024,
            max_field_bytes: 1024,
            max_tags: 32,
            max_metadata_pairs: 32,
            max_items_per_retain: 1000,
            max_k: 1000,
            max_query_bytes: 8 * 1024,
            llm_token_budget: 0,
        }
    }
}

/// Weights of the fused recall score; each factor lies in 0..1 before weighting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Weights {
    /// Cosine similarity, min-max normalised over the query's candidates.
    pub semantic: f32,
    /// BM25, divided by the best candidate's BM25.
    pub lexical: f32,
    /// exp(-ln2 · age / half-life of the memory's kind).
    pub recency: f32,
    /// The memory's confidence.
    pub confidence: f32,
    /// The memory's importance.
    pub importance: f32,
    /// 1 when the memory's task type equals the query's.
    pub task_match: f32,
    /// The weight of the memory's source (see `recall.source_weight_*`).
    pub source: f32,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            semantic: 0.45,
            lexical: 0.45,
            recency: 0.04,
            confidence: 0.03,
            importance: 0.03,
            task_match: 0.05,
            source: 0.03,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// How recall scores and ranks.
pub struct RecallSettings {
    /// Weights of the fused score.
    pub weights: Weights,
    /// Memories returned when a query names no `k`.
    pub default_k: u32,
    /// Candidates taken from each of the vector and lexical rankings, as a multiple of k.
    pub candidate_factor: u32,
    /// Recency half-life of episodic memories, in days.
    pub half_life_days_episodic: f32,
    /// Recency half-life of semantic memories, in days.
    pub half_life_days_semantic: f32,
    /// Recency half-life of procedural memories, in days.
    pub half_life_days_procedural: f32,
    /// Memories tagged `preference` decay slowly; `constraint` never; `transient` (or with a
    /// transient failure) fast.
    pub half_life_days_preference: f32,
    /// Recency half-life of transient memories, in days.
    pub half_life_days_transient: f32,
    /// Each reinforcement (a duplicate retained again, a successful feedback) lengthens the
    /// half-life by this fraction, up to `max_half_life_multiplier` times the base.
    pub reinforcement_half_life_step: f32,
    /// The most reinforcement can stretch a half-life, as a multiple of the base.
    pub max_half_life_multiplier: f32,
    /// A recalled memory whose event is older than this is marked possibly stale.
    pub stale_after_days: f32,
    /// What each source is worth, 0..1: the user's word above the agent's inference.
    pub source_weight_user_explicit: f32,
    /// What the user's feedback is worth.
    pub source_weight_user_feedback: f32,
    /// What a tool's result is worth.
    pub source_weight_tool_result: f32,
    /// What the agent's inference is worth.
    pub source_weight_agent_inference: f32,
    /// What imported memories are worth.
    pub source_weight_imported: f32,
    /// Token budget of the prompt block.
    pub prompt_tokens: u32,
    /// The prompt block leaves out a memory with no evidence of relevance: no query word in it
    /// and a cosine similarity to the query below this (recall's items still list it, marked).
    pub prompt_min_relevance: f32,
    /// Query embeddings an engine keeps, per bank and query text, the least recently used
    /// dropped first (agent loops repeat their queries); 0 embeds every query.
    pub query_cache: u32,
    /// Speaker prior, for questions that gather what a person has done or ask what they would
    /// do: when the question names people who speak in the bank (a turn's `Name:` prefix or
    /// `speaker` metadata), a memory spoken by someone else counts its relevance at 1 − this.
    /// A prior, never a filter (questions do name the wrong person); 0 turns it off.
    pub person_prior: f32,
    /// A memory that mostly asks (it ends in a question and says fewer than eight words of
    /// statement, e.g. "Wow! What got you into running?") counts its relevance at 1 − this: it
    /// shares the words of a question about its topic but holds no answer. 0 turns it off.
    pub question_penalty: f32,
    /// Embed the query with the bank's speakers it names replaced by "they": embedded with the
    /// name, a question leans towards every turn that says the name rather than towards what it
    /// asks. Keyword search and the speaker prior still see the names.
    pub embed_without_names: bool,
    /// A memory of several sentences is also embedded per sentence, from the same model run (its
    /// tokens' states averaged per sentence, kept as int8 beside its vector), so a question about
    /// one sentence of a chatty message finds it. Off: new memories get no keys and recall
    /// ignores those stored.
    pub sentence_keys: bool,
    /// How much a memory's best sentence counts in its similarity to the query, 0..1; the rest is
    /// its whole vector's cosine.
    pub sentence_weight: f32,
    /// A conversation turn that speaks about the one it is addressed to (it says "you" or
    /// "your" and never "I", "my", "we" or "our": "Wow, Caroline, your painting is awesome!")
    /// counts its relevance at 1 − this: whatever its words share with a question about its
    /// speaker, it tells what the other person did. 0 turns it off.
    pub addressee_penalty: f32,
    /// For a question that gathers a list ("What activities has Melanie done?"), the keyword
    /// weight is multiplied by this: a list's items rarely share the question's words ("pottery"
    /// and "camping" for "activities"), so the turns that do say them talk about the topic more
    /// often than they hold an item. 1 turns it off.
    pub gathering_lexical_scale: f32,
    /// Co-mention expansion: the names a recall's top hits share with other memories (a place, a
    /// title, a CJK term: rare in the bank, never a speaker or the question's own words) lend
    /// those memories up to this much keyword score, weighted by how rare the name is, so a
    /// memory that shares no word with the question is found through one that does. 0 turns it
    /// off.
    pub entity_expansion: f32,
    /// A name more memories than this say is a hub (a town every other turn mentions) and lends
    /// nothing in co-mention expansion; a name must be in two memories to lend, so 1 lends none.
    pub entity_fanout: u32,
}

impl Default for RecallSettings {
    fn default() -> Self {
        RecallSettings {
            weights: Weights::default(),
            default_k: 5,
            candidate_factor: 4,
            half_life_days_episodic: 30.0,
            half_life_days_semantic: 180.0,
            half_life_days_procedural: 365.0,
            half_life_days_preference: 365.0,
            half_life_days_transient: 7.0,
            reinforcement_half_life_step: 0.25,
            max_half_life_multiplier: 4.0,
            stale_after_days: 180.0,
            source_weight_user_explicit: 1.0,
            source_weight_user_feedback: 0.9,
            source_weight_tool_result: 0.7,
            source_weight_agent_inference: 0.5,
            source_weight_imported: 0.4,
            prompt_tokens: 600,
            prompt_min_relevance: 0.3,
            query_cache: 256,
            person_prior: 0.5,
            question_penalty: 0.35,
            embed_without_names: true,
            sentence_keys: true,
            sentence_weight: 0.85,
            addressee_penalty: 0.3,
            gathering_lexical_scale: 0.75,
            entity_expansion: 0.2,
            entity_fanout: 8,
        }
    }
}

/// The write path: what is kept, and what happens when a new memory meets a close old one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteSettings {
    /// Drop filler and in-call repeats by rule (a caller's `force` skips the whole write path).
    pub filter: bool,
    /// When the host has an LLM, items no rule keeps are scored 1–10 and kept at this or above.
    pub importance_threshold: u8,
    /// A duplicate above this cosine reinforces the memory it repeats; below it (with the same
    /// kind) the two are merged, the new wording kept in history.
    pub dedup_cosine: f32,
    /// A new item is judged against at most this many of its nearest active memories in the
    /// same scope (by the rules, or in one `judge` LLM call per retain).
    pub judge_candidates: u32,
    /// A memory is a candidate when its cosine to the new item is at least this, or it shares
    /// words with it.
    pub judge_min_cosine: f32,
    /// A superseded memory's confidence is multiplied by this.
    pub supersede_confidence_factor: f32,
    /// Confidence a reinforced memory gains, up to `confidence_cap`.
    pub reinforce_confidence_step: f32,
    /// The highest confidence reinforcement reaches.
    pub confidence_cap: f32,
}

impl Default for WriteSettings {
    fn default() -> Self {
        WriteSettings {
            filter: true,
            importance_threshold: 6,
            dedup_cosine: 0.95,
            judge_candidates: 5,
            judge_min_cosine: 0.2,
            supersede_confidence_factor: 0.5,
            reinforce_confidence_step: 0.05,
            confidence_cap: 0.95,
        }
    }
}

/// What a caller's verdict on recalled memories does to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeedbackSettings {
    /// Confidence a success adds.
    pub success_step: f32,
    /// The highest confidence successes reach.
    pub success_cap: f32,
    /// Confidence a failure takes away.
    pub failure_step: f32,
    /// The lowest confidence failures leave.
    pub failure_floor: f32,
    /// A correction multiplies confidence by this.
    pub correction_factor: f32,
    /// `correct`: active memories closer than this (cosine) to the corrected memory's old
    /// content lose confidence too.
    pub correction_cascade_cosine: f32,
    /// `correct`: their confidence is multiplied by this.
    pub correction_cascade_factor: f32,
    /// `correct`: the confidence the user's replacement starts with.
    pub correction_confidence: f32,
}

impl Default for FeedbackSettings {
    fn default() -> Self {
        FeedbackSettings {
            success_step: 0.05,
            success_cap: 0.95,
            failure_step: 0.1,
            failure_floor: 0.1,
            correction_factor: 0.5,
            correction_cascade_cosine: 0.85,
            correction_cascade_factor: 0.9,
            correction_confidence: 0.95,
        }
    }
}

/// The vector index: an exact-scan buffer of recent vectors and sealed HNSW segments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexSettings {
    /// `maintain` seals the buffer into a segment when it holds at least this many vectors.
    /// Segments much smaller than this make a large bank search many graphs per query.
    pub seal_min: u32,
    /// A retain that leaves more than this many vectors in the buffer seals it at once.
    pub buffer_max: u32,
    /// HNSW build and search breadth (instant-distance's ef_construction and ef_search).
    pub ef_construction: u32,
    /// HNSW search breadth (instant-distance's ef_search).
    pub ef_search: u32,
    /// `maintain` merges sealed segments into one graph, smallest first, while it stays within
    /// this many vectors: a query then searches one graph instead of one per segment (a 100k
    /// bank sealed by bulk retains holds three). The merge rebuilds the graph (about 20 s per
    /// 100k vectors natively); 0 never merges.
    pub merge_max: u32,
}

impl Default for IndexSettings {
    fn default() -> Self {
        IndexSettings {
            seal_min: 16_384,
            buffer_max: 32_768,
            ef_construction: 32,
            ef_search: 128,
            merge_max: 262_144,
        }
    }
}

/// Hindsight at the task boundary: when a task is worth distilling, and what is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DistillSettings {
    /// Distil when the task has more steps than this, or more tool calls than `min_tool_calls`,
    /// or the user asked to remember (or the caller forces it).
    pub min_steps: u32,
    /// See `min_steps`.
    pub min_tool_calls: u32,
    /// At most this many memories from one task.
    pub max_memories: u32,
    /// The LLM's items under this confidence are dropped.
    pub min_confidence: f32,
    /// The task types the LLM may assign (anything else becomes the task's own type).
    pub task_types: Vec<String>,
    /// A transient failure (timeout, rate limit, network) is kept only as an episodic memory
    /// of this importance that expires after this many days.
    pub transient_importance: f32,
    /// See `transient_importance`.
    pub transient_ttl_days: f32,
    /// Token budget of the distillation answer.
    pub max_tokens: u32,
    /// Episodes a consolidation looks at, newest first.
    pub consolidate_max_episodes: u32,
}

impl Default for DistillSettings {
    fn default() -> Self {
        DistillSettings {
            min_steps: 5,
            min_tool_calls: 3,
            max_memories: 5,
            min_confidence: 0.7,
            task_types: [
                "coding",
                "data-cleaning",
                "data-analysis",
                "research",
                "writing",
                "ops",
                "support",
                "other",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            transient_importance: 0.3,
            transient_ttl_days: 7.0,
            max_tokens: 800,
            consolidate_max_episodes: 200,
        }
    }
}

/// `maintain`: decay, archiving, expiry, capacity and late merging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaintainSettings {
    /// Confidence is multiplied by `decay_factor` for every full `decay_period_days` since the
    /// memory was last used (constraints do not decay).
    pub decay_factor: f32,
    /// See `decay_factor`.
    pub decay_period_days: f32,
    /// Archived: confidence below this and unused for `archive_idle_days`.
    pub archive_below_confidence: f32,
    /// See `archive_below_confidence`.
    pub archive_idle_days: f32,
    /// Episodic memories never recalled lose weight (importance × `weaken_factor`) after this
    /// many days, and are archived after `episodic_archive_days`.
    pub episodic_weaken_days: f32,
    /// See `episodic_weaken_days`.
    pub weaken_factor: f32,
    /// See `episodic_weaken_days`.
    pub episodic_archive_days: f32,
    /// Active memories per bank; beyond it the lowest by composite score are archived.
    pub capacity: u32,
    /// Near-duplicates above this cosine that slipped in (forced, or retained concurrently)
    /// are merged.
    pub merge_cosine: f32,
    /// Archive memories the audit finds never useful (recalled `audit.unused_after` times, never
    /// cited or marked helpful).
    pub archive_unused: bool,
}

impl Default for MaintainSettings {
    fn default() -> Self {
        MaintainSettings {
            decay_factor: 0.9,
            decay_period_days: 30.0,
            archive_below_confidence: 0.3,
            archive_idle_days: 60.0,
            episodic_weaken_days: 30.0,
            weaken_factor: 0.5,
            episodic_archive_days: 60.0,
            capacity: 10_000,
            merge_cosine: 0.95,
            archive_unused: false,
        }
    }
}

impl RecallSettings {
    /// The base half-life of a kind, in days.
    pub fn half_life_days(&self, kind: Kind) -> f32 {
        match kind {
            Kind::Episodic => self.half_life_days_episodic,
            Kind::Semantic => self.half_life_days_semantic,
            Kind::Procedural => self.half_life_days_procedural,
        }
    }

    /// What a source is worth.
    pub fn source_weight(&self, source: Source) -> f32 {
        match source {
            Source::UserExplicit => self.source_weight_user_explicit,
            Source::UserFeedback => self.source_weight_user_feedback,
            Source::ToolResult => self.source_weight_tool_result,
            Source::AgentInference => self.source_weight_agent_inference,
            Source::Imported => self.source_weight_imported,
        }
    }
}

/// BM25 parameters and what goes into a memory's keyword document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LexicalSettings {
    /// BM25's term-frequency saturation.
    pub k1: f32,
    /// BM25's length normalisation.
    pub b: f32,
    /// Add the month name and year of the memory's event time, so "in May 2023" matches.
    pub index_dates: bool,
    /// Add the text of this many sequence predecessors (items retained before it in the same
    /// call and scope), so a reply is found by the words of what it answers.
    pub context_previous: u32,
    /// A memory of more words than this carries its own context: it borrows no predecessor's
    /// text, and lends none of its own to a short reply after it (a 300-word turn would
    /// drown the reply's words and double its document).
    pub context_max_words: u32,
}

impl Default for LexicalSettings {
    fn default() -> Self {
        LexicalSettings { k1: 1.2, b: 0.75, index_dates: true, context_previous: 1, context_max_words: 100 }
    }
}

impl Settings {
    /// Parses settings JSON; "" means all defaults.
    pub fn from_json(text: &str) -> Result<Settings> {
        let settings: Settings = if text.trim().is_empty() {
            Settings::default()
        } else {
            serde_json::from_str(text).map_err(|e| FieldError::new("settings", e.to_string()))?
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Checks every value's range (and the few that must agree with each other).
    pub fn validate(&self) -> Result<()> {
        let unit = |field: &str, v: f32| -> Result<()> {
            if v.is_finite() && (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(FieldError::new(format!("settings.{field}"), format!("must be from 0 to 1, got {v}")))
            }
        };
        let d = &self.defaults;
        unit("defaults.importance", d.importance)?;
        for (field, v) in [
            ("defaults.confidence_user_explicit", d.confidence_user_explicit),
            ("defaults.confidence_user_feedback", d.confidence_user_feedback),
            ("defaults.confidence_tool_result", d.confidence_tool_result),
            ("defaults.confidence_agent_inference", d.confidence_agent_inference),
            ("defaults.confidence_imported", d.confidence_imported),
        ] {
            unit(field, v)?;
        }
        let w = &self.recall.weights;
        for (field, v) in [
            ("recall.weights.semantic", w.semantic),
            ("recall.weights.lexical", w.lexical),
            ("recall.weights.recency", w.recency),
            ("recall.weights.confidence", w.confidence),
            ("recall.weights.importance", w.importance),
            ("recall.weights.task_match", w.task_match),
            ("recall.weights.source", w.source),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(FieldError::new(format!("settings.{field}"), "must be a finite number ≥ 0"));
            }
        }
        let r = &self.recall;
        for (field, v) in [
            ("recall.half_life_days_episodic", r.half_life_days_episodic),
            ("recall.half_life_days_semantic", r.half_life_days_semantic),
            ("recall.half_life_days_procedural", r.half_life_days_procedural),
            ("recall.half_life_days_preference", r.half_life_days_preference),
            ("recall.half_life_days_transient", r.half_life_days_transient),
            ("recall.max_half_life_multiplier", r.max_half_life_multiplier),
            ("recall.stale_after_days", r.stale_after_days),
            ("maintain.decay_period_days", self.maintain.decay_period_days),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(FieldError::new(format!("settings.{field}"), "must be a number > 0"));
            }
        }
        if r.candidate_factor == 0 {
            return Err(FieldError::new("settings.recall.candidate_factor", "must be at least 1"));
        }
        if r.default_k == 0 || r.default_k > self.limits.max_k {
            return Err(FieldError::new("settings.recall.default_k", "must be from 1 to limits.max_k"));
        }
        let l = &self.lexical;
        if !(l.k1.is_finite() && l.k1 >= 0.0) {
            return Err(FieldError::new("settings.lexical.k1", "must be a finite number ≥ 0"));
        }
        unit("lexical.b", l.b)?;
        let (wr, f, m) = (&self.write, &self.feedback, &self.maintain);
        for (field, v) in [
            ("recall.source_weight_user_explicit", r.source_weight_user_explicit),
            ("recall.source_weight_user_feedback", r.source_weight_user_feedback),
            ("recall.source_weight_tool_result", r.source_weight_tool_result),
            ("recall.source_weight_agent_inference", r.source_weight_agent_inference),
            ("recall.source_weight_imported", r.source_weight_imported),
            ("recall.reinforcement_half_life_step", r.reinforcement_half_life_step),
            ("write.dedup_cosine", wr.dedup_cosine),
            ("write.judge_min_cosine", wr.judge_min_cosine),
            ("write.supersede_confidence_factor", wr.supersede_confidence_factor),
            ("write.reinforce_confidence_step", wr.reinforce_confidence_step),
            ("write.confidence_cap", wr.confidence_cap),
            ("feedback.success_step", f.success_step),
            ("feedback.success_cap", f.success_cap),
            ("feedback.failure_step", f.failure_step),
            ("feedback.failure_floor", f.failure_floor),
            ("feedback.correction_factor", f.correction_factor),
            ("feedback.correction_cascade_cosine", f.correction_cascade_cosine),
            ("feedback.correction_cascade_factor", f.correction_cascade_factor),
            ("feedback.correction_confidence", f.correction_confidence),
            ("maintain.decay_factor", m.decay_factor),
            ("maintain.archive_below_confidence", m.archive_below_confidence),
            ("maintain.weaken_factor", m.weaken_factor),
            ("maintain.merge_cosine", m.merge_cosine),
        ] {
            unit(field, v)?;
        }
        unit("recall.prompt_min_relevance", r.prompt_min_relevance)?;
        unit("recall.person_prior", r.person_prior)?;
        unit("recall.question_penalty", r.question_penalty)?;
        unit("recall.sentence_weight", r.sentence_weight)?;
        unit("recall.addressee_penalty", r.addressee_penalty)?;
        unit("recall.gathering_lexical_scale", r.gathering_lexical_scale)?;
        unit("recall.entity_expansion", r.entity_expansion)?;
        if r.entity_fanout == 0 {
            return Err(FieldError::new("settings.recall.entity_fanout", "must be at least 1"));
        }
        // An entry holds a vector (1.5 KB at 384 dimensions) and its query (up to
        // limits.max_query_bytes) inside the instance's memory cap.
        if r.query_cache > 4096 {
            return Err(FieldError::new("settings.recall.query_cache", "must be at most 4096"));
        }
        if self.audit.unused_after == 0 {
            return Err(FieldError::new("settings.audit.unused_after", "must be at least 1"));
        }
        crate::ids::validate_bank_id(&self.spaces.shared_bank)
            .map_err(|e| FieldError::new("settings.spaces.shared_bank", e.message))?;
        let t = &self.tasks;
        if t.max_steps == 0 || t.max_text_bytes == 0 || t.max_total_bytes < t.max_text_bytes {
            return Err(FieldError::new(
                "settings.tasks",
                "max_steps and max_text_bytes must be at least 1, max_total_bytes at least max_text_bytes",
            ));
        }
        let ix = &self.index;
        if ix.ef_construction == 0 || ix.ef_search == 0 {
            return Err(FieldError::new(
                "settings.index",
                "ef_construction and ef_search must be at least 1",
            ));
        }
        let d = &self.distill;
        unit("distill.min_confidence", d.min_confidence)?;
        unit("distill.transient_importance", d.transient_importance)?;
        if !(d.transient_ttl_days.is_finite() && d.transient_ttl_days > 0.0) {
            return Err(FieldError::new("settings.distill.transient_ttl_days", "must be a number > 0"));
        }
        if d.task_types.is_empty() {
            return Err(FieldError::new("settings.distill.task_types", "must list at least one task type"));
        }
        if !(1..=20).contains(&wr.judge_candidates) {
            return Err(FieldError::new(
                "settings.write.judge_candidates",
                format!("must be from 1 to 20, got {}", wr.judge_candidates),
            ));
        }
        if !(1..=10).contains(&wr.importance_threshold) {
            return Err(FieldError::new("settings.write.importance_threshold", "must be from 1 to 10"));
        }
        for (field, v) in [
            ("maintain.archive_idle_days", m.archive_idle_days),
            ("maintain.episodic_weaken_days", m.episodic_weaken_days),
            ("maintain.episodic_archive_days", m.episodic_archive_days),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(FieldError::new(format!("settings.{field}"), "must be a number ≥ 0"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_partial_json_take_defaults() {
        assert_eq!(Settings::from_json("").unwrap(), Settings::default());
        let s = Settings::from_json(r#"{"recall":{"weights":{"semantic":0.9}}}"#).unwrap();
        assert_eq!(s.recall.weights.semantic, 0.9);
        assert_eq!(s.recall.weights.lexical, Weights::default().lexical);
    }

    #[test]
    fn unknown_and_out_of_range_keys_are_named() {
        let err = Settings::from_json(r#"{"recal":{}}"#).unwrap_err();
        assert!(err.message.contains("recal"), "{err}");
        let err = Settings::from_json(r#"{"defaults":{"importance":3}}"#).unwrap_err();
        assert_eq!(err.field, "settings.defaults.importance", "{err}");
    }
}
