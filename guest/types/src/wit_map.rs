//! The one table of what the WIT world (`wit/memory.wit`) shares with this crate: every enum's
//! variants and every record's fields, listed once. The component's glue (wit-bindgen's types)
//! and the `hindsight` host (wasmtime's bindgen types) each expand it over their own generated
//! modules, so a field added to the WIT is added here once and both sides follow.
//!
//! Both generators give records the WIT's field names and enums the WIT's case names in
//! PascalCase, so one table fits both. Conversions go through [`WitInto`] rather than `From`:
//! a blanket impl maps `Option`, `Vec` and pairs element-wise, which `From` cannot do without
//! overlapping the standard library's impls.

/// A conversion between a generated WIT type and its twin here (or between two values of the
/// same plain type). Not for use outside the workspace's glue.
#[doc(hidden)]
pub trait WitInto<T> {
    /// The value as `T`.
    fn wit_into(self) -> T;
}

macro_rules! plain {
    ($($t:ty),* $(,)?) => {$(
        impl WitInto<$t> for $t {
            #[inline]
            fn wit_into(self) -> $t {
                self
            }
        }
    )*};
}

plain!(String, bool, u8, u32, u64, i64, f32);

impl WitInto<u32> for usize {
    fn wit_into(self) -> u32 {
        u32::try_from(self).unwrap_or(u32::MAX)
    }
}

impl WitInto<usize> for u32 {
    fn wit_into(self) -> usize {
        self as usize
    }
}

impl<A: WitInto<B>, B> WitInto<Option<B>> for Option<A> {
    #[inline]
    fn wit_into(self) -> Option<B> {
        self.map(WitInto::wit_into)
    }
}

impl<A: WitInto<B>, B> WitInto<Vec<B>> for Vec<A> {
    #[inline]
    fn wit_into(self) -> Vec<B> {
        // Same-layout element types (bytes, floats, strings) are collected in place.
        self.into_iter().map(WitInto::wit_into).collect()
    }
}

impl<A: WitInto<C>, B: WitInto<D>, C, D> WitInto<(C, D)> for (A, B) {
    #[inline]
    fn wit_into(self) -> (C, D) {
        (self.0.wit_into(), self.1.wit_into())
    }
}

/// Expands the table over generated modules: `wit_map!(types, llm, store)` with each argument a
/// module in scope (`use …::hindsight::memory::types;`). Emits `WitInto` both ways for every
/// pair below.
#[doc(hidden)]
#[macro_export]
macro_rules! wit_map {
    ($t:ident, $llm:ident, $store:ident) => {
        $crate::wit_map!(@enums
            $t::MemoryKind => Kind { Episodic, Semantic, Procedural }
            $t::ScopeLevel => ScopeLevel { Global, Project, Session }
            $t::Source => Source { UserExplicit, UserFeedback, AgentInference, ToolResult, Imported }
            $t::FailureType => FailureType { Transient, Permanent }
            $t::Status => Status { Active, Superseded, Merged, Archived }
            $t::RetainAction => RetainAction { Created, Reinforced, Merged, Superseded, Filtered }
            $t::FeedbackOutcome => FeedbackOutcome { Success, Failure, Correction }
            $t::HistoryEvent => HistoryEvent { Created, Superseded, Merged, Archived }
            $t::MaintainAction => MaintainAction { Archived, Merged }
            $t::HealthKind => HealthKind { Duplicate, Contradiction, Stale }
            $t::StepKind => StepKind { Thought, ToolCall, ToolResult, UserMessage, Answer }
            $t::TaskOutcome => Outcome { Success, Failure, Interrupted }
            $t::DistillMethod => DistillMethod { Llm, Rules, Skipped }
            $t::ListOrder => ListOrder { Newest, MostRecalled }
            $t::UseEvent => UseEvent { Feedback, Cited, RecalledNotUsed, Used, Cascade, Corrected }
            $llm::Operation => LlmOperation { Extract, Importance, Consolidate, Judge }
        );
        $crate::wit_map!(@variants
            $llm::LlmError => $crate::llm::LlmError { Unavailable, Failed }
            $store::StoreError => $crate::StoreError { Conflict, ReadOnly, Failed }
        );
        $crate::wit_map!(@records
            $t::Scope => Scope { level, id }
            $t::Memory => MemoryRecord {
                id, kind, content, task_type, task_description, context, tags, scope, agent_id,
                importance, confidence, source, failure_type, occurred_at, created_at, updated_at,
                last_accessed_at, access_count, status, supersedes, superseded_by, valid_until,
                metadata, embedding_model, conflicts_with, reinforcements
            }
            $t::NewMemory => Memory {
                content, kind, task_type, task_description, context, tags, scope, agent_id,
                importance, confidence, source, failure_type, occurred_at, valid_until, metadata,
                force, parallel, sequence, vector
            }
            $t::RetainOutcome => RetainOutcome { id, action, related, reason }
            $t::RecallQuery => Query {
                query, k, now, task_type, kinds, tags, scope, min_score, prompt_tokens, vector,
                include_superseded, agent_id, task_id, trusted_only, as_of
            }
            $t::Score => Score {
                semantic, lexical, recency, confidence, importance, task_match, source, total, similarity
            }
            $t::Recalled => Recalled { memory, score, conflicting, possibly_stale, in_prompt, bank, handle }
            $t::Stats => Stats {
                bank, total, active, archived, superseded, merged, active_by_kind, embedding_model,
                dimension, inference, sequence, format_version, usage
            }
            $t::Usage => Usage {
                llm_calls, prompt_tokens, completion_tokens, embed_texts, elapsed_ms, over_budget
            }
            $t::OperationUsage => OperationUsage {
                operation, calls, llm_calls, prompt_tokens, completion_tokens, embed_texts, elapsed_ms,
                over_budget
            }
            $t::HistoryEntry => HistoryEntry { at, event, memory, other }
            $t::MaintainStep => MaintainStep { id, action, into, reason }
            $t::MaintainReport => MaintainReport { active_before, active_after, decayed, weakened, steps, sealed }
            $t::ToolCall => ToolCall { tool, input, result, error, at }
            $t::TaskState => TaskState {
                id, goal, task_type, version, started_at, updated_at, confirmed_facts, assumptions,
                open_questions, notes, current_step, tool_calls, steps, ended_at, outcome, detail
            }
            $t::Distilled => Distilled { content, kind, outcome, bank }
            $t::TaskEnd => TaskEnd { task, method, reason, items, cited, unused }
            $t::ListQuery => ListQuery {
                kind, status, any_status, tag, task_type, source, text, order, limit, cursor
            }
            $t::ListPage => ListPage { items, next_cursor, total }
            $t::Cascaded => Cascaded { id, before, after }
            $t::Correction => Correction { memory, superseded, cascade }
            $t::UseRecord => UseRecord { at, event, outcome, task_id, other }
            $t::RecallHit => RecallHit { id, score, handle }
            $t::RecallLogEntry => RecallLogEntry { seq, at, agent_id, task_id, query, query_hash, hits }
            $t::Explanation => Explanation {
                memory, task, consolidated_from, history, events, recalls, recalled, cited, helpful,
                unhelpful
            }
            $t::AuditItem => AuditItem { id, content, recalled, cited, helpful }
            $t::Audit => Audit { bank, never_useful, never_recalled, most_useful, log_entries }
            $t::HealthFinding => HealthFinding { kind, ids, detail, fix }
            $t::DayCount => DayCount { day, created }
            $t::HealthReport => HealthReport {
                bank, active, checked, findings, never_recalled, never_recalled_share, recalled_unused,
                recalled_unused_share, untrusted, redacted, reextractions, growth
            }
            $t::ExportPage => ExportPage { lines, next }
            $t::NewTask => NewTask { goal, task_type, agent_id }
            $t::Erasure => Erasure { memories, vectors, recall_log_entries, tasks, remaining }
            $t::ImportReport => ImportReport { memories, embedded, tasks, log_entries }
            $t::FieldError => FieldError { item, field, message }
            $llm::Request => LlmRequest { operation, system, prompt, json_schema, max_tokens, temperature }
            $llm::Response => LlmResponse { text, prompt_tokens, completion_tokens }
        );

        // Where the two sides are not field for field.

        // A kind count is a record in the WIT, a pair here.
        impl $crate::wit_map::WitInto<($crate::Kind, u32)> for $t::KindCount {
            fn wit_into(self) -> ($crate::Kind, u32) {
                ($crate::wit_map::WitInto::wit_into(self.kind), self.count)
            }
        }
        impl $crate::wit_map::WitInto<$t::KindCount> for ($crate::Kind, u32) {
            fn wit_into(self) -> $t::KindCount {
                $t::KindCount { kind: $crate::wit_map::WitInto::wit_into(self.0), count: self.1 }
            }
        }

        // The banks a caller may not read are the host's business: not in the WIT.
        impl $crate::wit_map::WitInto<$crate::RecallResult> for $t::RecallResult {
            fn wit_into(self) -> $crate::RecallResult {
                $crate::RecallResult {
                    items: $crate::wit_map::WitInto::wit_into(self.items),
                    prompt: self.prompt,
                    skipped_banks: Vec::new(),
                }
            }
        }
        impl $crate::wit_map::WitInto<$t::RecallResult> for $crate::RecallResult {
            fn wit_into(self) -> $t::RecallResult {
                $t::RecallResult { items: $crate::wit_map::WitInto::wit_into(self.items), prompt: self.prompt }
            }
        }

        // A step's time is the host's to default (its clock) before it crosses.
        impl $crate::wit_map::WitInto<$crate::Step> for $t::Step {
            fn wit_into(self) -> $crate::Step {
                $crate::Step {
                    id: self.id,
                    kind: $crate::wit_map::WitInto::wit_into(self.kind),
                    text: self.text,
                    tool: self.tool,
                    error: self.error,
                    at: Some(self.at),
                }
            }
        }
        impl $crate::wit_map::WitInto<$t::Step> for $crate::Step {
            fn wit_into(self) -> $t::Step {
                $t::Step {
                    id: self.id,
                    at: self.at.unwrap_or_else($crate::time::now),
                    kind: $crate::wit_map::WitInto::wit_into(self.kind),
                    text: self.text,
                    tool: self.tool,
                    error: self.error,
                }
            }
        }

        impl $crate::wit_map::WitInto<$crate::TaskUpdate> for $t::TaskUpdate {
            fn wit_into(self) -> $crate::TaskUpdate {
                match self {
                    $t::TaskUpdate::Step(s) => $crate::TaskUpdate::Step($crate::wit_map::WitInto::wit_into(s)),
                    $t::TaskUpdate::Fact(x) => $crate::TaskUpdate::Fact(x),
                    $t::TaskUpdate::Assumption(x) => $crate::TaskUpdate::Assumption(x),
                    $t::TaskUpdate::Question(x) => $crate::TaskUpdate::Question(x),
                    $t::TaskUpdate::Note(x) => $crate::TaskUpdate::Note(x),
                    $t::TaskUpdate::CurrentStep(x) => $crate::TaskUpdate::CurrentStep(x),
                }
            }
        }
        impl $crate::wit_map::WitInto<$t::TaskUpdate> for $crate::TaskUpdate {
            fn wit_into(self) -> $t::TaskUpdate {
                match self {
                    $crate::TaskUpdate::Step(s) => $t::TaskUpdate::Step($crate::wit_map::WitInto::wit_into(s)),
                    $crate::TaskUpdate::Fact(x) => $t::TaskUpdate::Fact(x),
                    $crate::TaskUpdate::Assumption(x) => $t::TaskUpdate::Assumption(x),
                    $crate::TaskUpdate::Question(x) => $t::TaskUpdate::Question(x),
                    $crate::TaskUpdate::Note(x) => $t::TaskUpdate::Note(x),
                    $crate::TaskUpdate::CurrentStep(x) => $t::TaskUpdate::CurrentStep(x),
                }
            }
        }

        // The WIT flattens a trajectory's end into it.
        impl $crate::wit_map::WitInto<$crate::Trajectory> for $t::Trajectory {
            fn wit_into(self) -> $crate::Trajectory {
                $crate::Trajectory {
                    goal: self.goal,
                    task_type: self.task_type,
                    agent_id: self.agent_id,
                    steps: $crate::wit_map::WitInto::wit_into(self.steps),
                    facts: self.facts,
                    end: $crate::EndTask {
                        outcome: $crate::wit_map::WitInto::wit_into(self.outcome),
                        detail: self.detail,
                        force: self.force,
                    },
                }
            }
        }
        impl $crate::wit_map::WitInto<$t::Trajectory> for $crate::Trajectory {
            fn wit_into(self) -> $t::Trajectory {
                $t::Trajectory {
                    goal: self.goal,
                    task_type: self.task_type,
                    agent_id: self.agent_id,
                    steps: $crate::wit_map::WitInto::wit_into(self.steps),
                    facts: self.facts,
                    outcome: $crate::wit_map::WitInto::wit_into(self.end.outcome),
                    detail: self.end.detail,
                    force: self.end.force,
                }
            }
        }

        // The store's ops are tuple variants in the WIT.
        impl $crate::wit_map::WitInto<$crate::Op> for $store::Op {
            fn wit_into(self) -> $crate::Op {
                match self {
                    $store::Op::Put((k, v)) => $crate::Op::Put(k, v),
                    $store::Op::Delete(k) => $crate::Op::Delete(k),
                    $store::Op::Expect((k, v)) => $crate::Op::Expect(k, v),
                }
            }
        }
        impl $crate::wit_map::WitInto<$store::Op> for $crate::Op {
            fn wit_into(self) -> $store::Op {
                match self {
                    $crate::Op::Put(k, v) => $store::Op::Put((k, v)),
                    $crate::Op::Delete(k) => $store::Op::Delete(k),
                    $crate::Op::Expect(k, v) => $store::Op::Expect((k, v)),
                }
            }
        }

        // The WIT's error cases are what the engine can return; the others are the host's own.
        impl $crate::wit_map::WitInto<$crate::Error> for $t::Error {
            fn wit_into(self) -> $crate::Error {
                use $crate::Error as Ours;
                match self {
                    $t::Error::InvalidInput(f) => Ours::InvalidInput($crate::wit_map::WitInto::wit_into(f)),
                    $t::Error::NotFound(m) => Ours::NotFound { what: m.what, id: m.id, message: m.message },
                    $t::Error::Store(m) => Ours::Store($crate::StoreError::Failed(m)),
                    $t::Error::Model(m) => Ours::Model(m),
                    $t::Error::Limit(m) => Ours::Limit(m),
                    $t::Error::Corrupt(m) => Ours::Corrupt(m),
                    $t::Error::Llm(m) => Ours::Llm(m),
                    $t::Error::Conflict(m) => Ours::Conflict(m),
                    $t::Error::Unsupported(m) => Ours::Unsupported(m),
                }
            }
        }
        impl $crate::wit_map::WitInto<$t::Error> for $crate::Error {
            fn wit_into(self) -> $t::Error {
                use $crate::Error as Ours;
                match self {
                    Ours::InvalidInput(f) => $t::Error::InvalidInput($crate::wit_map::WitInto::wit_into(f)),
                    Ours::NotFound { what, id, message } => $t::Error::NotFound($t::Missing { what, id, message }),
                    Ours::Store($crate::StoreError::Conflict(key)) => {
                        $t::Error::Conflict(format!("{key} changed since it was read"))
                    }
                    Ours::Store(e) => $t::Error::Store(e.to_string()),
                    Ours::Model(m) => $t::Error::Model(m),
                    Ours::Limit(m) => $t::Error::Limit(m),
                    Ours::Corrupt(m) => $t::Error::Corrupt(m),
                    Ours::Llm(m) => $t::Error::Llm(m),
                    Ours::Conflict(m) => $t::Error::Conflict(m),
                    Ours::Unsupported(m) => $t::Error::Unsupported(m),
                    // Trap, Config and Denied are made by hosts; the engine never returns them.
                    other => $t::Error::Unsupported(other.to_string()),
                }
            }
        }
    };

    // A path fragment cannot be extended (`$wit::Case`) nor start a pattern: both go through a
    // local type alias.
    (@enums $($wit:path => $ours:ident { $($v:ident),+ $(,)? })+) => {$(
        impl $crate::wit_map::WitInto<$crate::$ours> for $wit {
            fn wit_into(self) -> $crate::$ours {
                type Wit = $wit;
                match self { $(Wit::$v => $crate::$ours::$v),+ }
            }
        }
        impl $crate::wit_map::WitInto<$wit> for $crate::$ours {
            fn wit_into(self) -> $wit {
                type Wit = $wit;
                // The enums that grow with the WIT are `#[non_exhaustive]` outside this crate, so
                // the match needs a last arm; the assertion below proves the table names every
                // case, so it is never taken.
                #[allow(unreachable_patterns)]
                match self {
                    $($crate::$ours::$v => Wit::$v,)+
                    _ => unreachable!(concat!(stringify!($ours), ": a case the WIT table lacks")),
                }
            }
        }
        const _: () = assert!(
            <$crate::$ours as $crate::Named>::ALL.len() == [$(stringify!($v)),+].len(),
            concat!("the WIT table does not name every case of ", stringify!($ours)),
        );
    )+};

    (@variants $($wit:path => $ours:path { $($v:ident),+ $(,)? })+) => {$(
        impl $crate::wit_map::WitInto<$ours> for $wit {
            fn wit_into(self) -> $ours {
                type Wit = $wit;
                type Ours = $ours;
                match self { $(Wit::$v(m) => Ours::$v(m)),+ }
            }
        }
        impl $crate::wit_map::WitInto<$wit> for $ours {
            fn wit_into(self) -> $wit {
                type Wit = $wit;
                type Ours = $ours;
                match self { $(Ours::$v(m) => Wit::$v(m)),+ }
            }
        }
    )+};

    (@records $($wit:path => $ours:ident { $($f:ident),+ $(,)? })+) => {$(
        impl $crate::wit_map::WitInto<$crate::$ours> for $wit {
            fn wit_into(self) -> $crate::$ours {
                $crate::$ours { $($f: $crate::wit_map::WitInto::wit_into(self.$f)),+ }
            }
        }
        impl $crate::wit_map::WitInto<$wit> for $crate::$ours {
            fn wit_into(self) -> $wit {
                type Wit = $wit;
                Wit { $($f: $crate::wit_map::WitInto::wit_into(self.$f)),+ }
            }
        }
    )+};
}
