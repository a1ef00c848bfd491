//! The component's interface as wasmtime generates it, and the conversions between its types and
//! the API's (`hindsight_types`). Nothing generated leaves this module.

use hindsight_types as api;

wasmtime::component::bindgen!({
    path: "wit/memory.wit",
    world: "memory",
});

pub(crate) use self::hindsight::memory::{llm, store, types};
pub(crate) use exports::hindsight::memory::api as guest;

/// One mapping per enum pair, in both directions.
macro_rules! enums {
    ($($wit:ty => $api:ty { $($v:ident),+ $(,)? })+) => {$(
        impl From<$wit> for $api {
            fn from(v: $wit) -> Self {
                match v { $(<$wit>::$v => <$api>::$v),+ }
            }
        }
        impl From<$api> for $wit {
            fn from(v: $api) -> Self {
                match v { $(<$api>::$v => <$wit>::$v),+ }
            }
        }
    )+};
}

enums! {
    types::MemoryKind => api::Kind { Episodic, Semantic, Procedural }
    types::ScopeLevel => api::ScopeLevel { Global, Project, Session }
    types::Source => api::Source { UserExplicit, UserFeedback, AgentInference, ToolResult, Imported }
    types::FailureType => api::FailureType { Transient, Permanent }
    types::Status => api::Status { Active, Superseded, Merged, Archived }
    types::RetainAction => api::RetainAction { Created, Reinforced, Merged, Superseded, Filtered }
    types::FeedbackOutcome => api::FeedbackOutcome { Success, Failure, Correction }
    types::HistoryEvent => api::HistoryEvent { Created, Superseded, Merged, Archived }
    types::MaintainAction => api::MaintainAction { Archived, Merged }
    types::StepKind => api::StepKind { Thought, ToolCall, ToolResult, UserMessage, Answer }
    types::TaskOutcome => api::Outcome { Success, Failure, Interrupted }
    types::DistillMethod => api::DistillMethod { Llm, Rules, Skipped }
    types::ListOrder => api::ListOrder { Newest, MostRecalled }
    types::UseEvent => api::UseEvent { Feedback, Cited, RecalledNotUsed, Used, Cascade, Corrected }
    llm::Operation => api::LlmOperation { Extract, Importance, Consolidate, Judge }
}

impl From<types::Scope> for api::Scope {
    fn from(s: types::Scope) -> Self {
        api::Scope { level: s.level.into(), id: s.id }
    }
}

impl From<api::Scope> for types::Scope {
    fn from(s: api::Scope) -> Self {
        types::Scope { level: s.level.into(), id: s.id }
    }
}

impl From<types::Memory> for api::MemoryRecord {
    fn from(m: types::Memory) -> Self {
        api::MemoryRecord {
            id: m.id,
            kind: m.kind.into(),
            content: m.content,
            task_type: m.task_type,
            task_description: m.task_description,
            context: m.context,
            tags: m.tags,
            scope: m.scope.into(),
            agent_id: m.agent_id,
            importance: m.importance,
            confidence: m.confidence,
            source: m.source.into(),
            failure_type: m.failure_type.map(Into::into),
            occurred_at: m.occurred_at,
            created_at: m.created_at,
            updated_at: m.updated_at,
            last_accessed_at: m.last_accessed_at,
            access_count: m.access_count,
            status: m.status.into(),
            supersedes: m.supersedes,
            superseded_by: m.superseded_by,
            valid_until: m.valid_until,
            metadata: m.metadata,
            embedding_model: m.embedding_model,
            conflicts_with: m.conflicts_with,
            reinforcements: m.reinforcements,
        }
    }
}

impl From<api::Memory> for types::NewMemory {
    fn from(m: api::Memory) -> Self {
        types::NewMemory {
            content: m.content,
            kind: m.kind.map(Into::into),
            task_type: m.task_type,
            task_description: m.task_description,
            context: m.context,
            tags: m.tags,
            scope: m.scope.map(Into::into),
            agent_id: m.agent_id,
            importance: m.importance,
            confidence: m.confidence,
            source: m.source.map(Into::into),
            failure_type: m.failure_type.map(Into::into),
            occurred_at: m.occurred_at,
            valid_until: m.valid_until,
            metadata: m.metadata,
            force: m.force,
            parallel: m.parallel,
            sequence: m.sequence,
            vector: m.vector,
        }
    }
}

impl From<api::Query> for types::RecallQuery {
    fn from(q: api::Query) -> Self {
        types::RecallQuery {
            query: q.query,
            k: q.k,
            now: q.now,
            task_type: q.task_type,
            kinds: q.kinds.into_iter().map(Into::into).collect(),
            tags: q.tags,
            scope: q.scope.map(Into::into),
            min_score: q.min_score,
            prompt_tokens: q.prompt_tokens,
            vector: q.vector,
            include_superseded: q.include_superseded,
            agent_id: q.agent_id,
            task_id: q.task_id,
        }
    }
}

impl From<types::Score> for api::Score {
    fn from(s: types::Score) -> Self {
        api::Score {
            semantic: s.semantic,
            lexical: s.lexical,
            recency: s.recency,
            confidence: s.confidence,
            importance: s.importance,
            task_match: s.task_match,
            source: s.source,
            total: s.total,
            similarity: s.similarity,
        }
    }
}

impl From<types::RecallResult> for api::RecallResult {
    fn from(r: types::RecallResult) -> Self {
        api::RecallResult {
            items: r
                .items
                .into_iter()
                .map(|i| api::Recalled {
                    memory: i.memory.into(),
                    score: i.score.into(),
                    conflicting: i.conflicting,
                    possibly_stale: i.possibly_stale,
                    in_prompt: i.in_prompt,
                    bank: i.bank,
                    handle: i.handle,
                })
                .collect(),
            prompt: r.prompt,
            skipped_banks: Vec::new(),
        }
    }
}

impl From<types::RetainOutcome> for api::RetainOutcome {
    fn from(o: types::RetainOutcome) -> Self {
        api::RetainOutcome { id: o.id, action: o.action.into(), related: o.related, reason: o.reason }
    }
}

impl From<types::Stats> for api::Stats {
    fn from(s: types::Stats) -> Self {
        api::Stats {
            bank: s.bank,
            total: s.total,
            active: s.active,
            archived: s.archived,
            superseded: s.superseded,
            merged: s.merged,
            active_by_kind: s.active_by_kind.into_iter().map(|kc| (kc.kind.into(), kc.count)).collect(),
            embedding_model: s.embedding_model,
            dimension: s.dimension,
            sequence: s.sequence,
            format_version: s.format_version,
        }
    }
}

impl From<types::HistoryEntry> for api::HistoryEntry {
    fn from(e: types::HistoryEntry) -> Self {
        api::HistoryEntry { at: e.at, event: e.event.into(), memory: e.memory.into(), other: e.other }
    }
}

impl From<types::MaintainReport> for api::MaintainReport {
    fn from(r: types::MaintainReport) -> Self {
        api::MaintainReport {
            active_before: r.active_before,
            active_after: r.active_after,
            decayed: r.decayed,
            weakened: r.weakened,
            sealed: r.sealed,
            steps: r
                .steps
                .into_iter()
                .map(|s| api::MaintainStep {
                    id: s.id,
                    action: s.action.into(),
                    into: s.into,
                    reason: s.reason,
                })
                .collect(),
        }
    }
}

impl From<types::Step> for api::Step {
    fn from(s: types::Step) -> Self {
        api::Step {
            id: s.id,
            kind: s.kind.into(),
            text: s.text,
            tool: s.tool,
            error: s.error,
            at: Some(s.at),
        }
    }
}

impl From<types::TaskState> for api::TaskState {
    fn from(t: types::TaskState) -> Self {
        api::TaskState {
            id: t.id,
            goal: t.goal,
            task_type: t.task_type,
            version: t.version,
            started_at: t.started_at,
            updated_at: t.updated_at,
            confirmed_facts: t.confirmed_facts,
            assumptions: t.assumptions,
            open_questions: t.open_questions,
            notes: t.notes,
            current_step: t.current_step,
            tool_calls: t
                .tool_calls
                .into_iter()
                .map(|c| api::ToolCall {
                    tool: c.tool,
                    input: c.input,
                    result: c.result,
                    error: c.error,
                    at: c.at,
                })
                .collect(),
            steps: t.steps.into_iter().map(Into::into).collect(),
            ended_at: t.ended_at,
            outcome: t.outcome.map(Into::into),
            detail: t.detail,
        }
    }
}

impl From<types::Distilled> for api::Distilled {
    fn from(d: types::Distilled) -> Self {
        api::Distilled { content: d.content, kind: d.kind.into(), outcome: d.outcome.into(), bank: d.bank }
    }
}

impl From<types::TaskEnd> for api::TaskEnd {
    fn from(e: types::TaskEnd) -> Self {
        api::TaskEnd {
            task: e.task.into(),
            method: e.method.into(),
            reason: e.reason,
            items: e.items.into_iter().map(Into::into).collect(),
            cited: e.cited,
            unused: e.unused,
        }
    }
}

impl From<types::Correction> for api::Correction {
    fn from(c: types::Correction) -> Self {
        api::Correction {
            memory: c.memory.into(),
            superseded: c.superseded,
            cascade: c
                .cascade
                .into_iter()
                .map(|x| api::Cascaded { id: x.id, before: x.before, after: x.after })
                .collect(),
        }
    }
}

impl From<api::ListQuery> for types::ListQuery {
    fn from(q: api::ListQuery) -> Self {
        types::ListQuery {
            kind: q.kind.map(Into::into),
            status: q.status.map(Into::into),
            any_status: q.any_status,
            tag: q.tag,
            task_type: q.task_type,
            source: q.source.map(Into::into),
            text: q.text,
            order: q.order.into(),
            limit: q.limit,
            cursor: q.cursor,
        }
    }
}

impl From<types::ListPage> for api::ListPage {
    fn from(p: types::ListPage) -> Self {
        api::ListPage {
            items: p.items.into_iter().map(Into::into).collect(),
            next_cursor: p.next_cursor,
            total: p.total,
        }
    }
}

impl From<types::UseRecord> for api::UseRecord {
    fn from(u: types::UseRecord) -> Self {
        api::UseRecord {
            at: u.at,
            event: u.event.into(),
            outcome: u.outcome.map(Into::into),
            task_id: u.task_id,
            other: u.other,
        }
    }
}

impl From<types::RecallLogEntry> for api::RecallLogEntry {
    fn from(e: types::RecallLogEntry) -> Self {
        api::RecallLogEntry {
            seq: e.seq,
            at: e.at,
            agent_id: e.agent_id,
            task_id: e.task_id,
            query: e.query,
            query_hash: e.query_hash,
            hits: e
                .hits
                .into_iter()
                .map(|h| api::RecallHit { id: h.id, score: h.score, handle: h.handle })
                .collect(),
        }
    }
}

impl From<types::Explanation> for api::Explanation {
    fn from(x: types::Explanation) -> Self {
        api::Explanation {
            memory: x.memory.into(),
            task: x.task.map(Into::into),
            consolidated_from: x.consolidated_from,
            history: x.history.into_iter().map(Into::into).collect(),
            events: x.events.into_iter().map(Into::into).collect(),
            recalls: x.recalls.into_iter().map(Into::into).collect(),
            recalled: x.recalled,
            cited: x.cited,
            helpful: x.helpful,
            unhelpful: x.unhelpful,
        }
    }
}

impl From<types::AuditItem> for api::AuditItem {
    fn from(i: types::AuditItem) -> Self {
        api::AuditItem {
            id: i.id,
            content: i.content,
            recalled: i.recalled,
            cited: i.cited,
            helpful: i.helpful,
        }
    }
}

impl From<types::Audit> for api::Audit {
    fn from(a: types::Audit) -> Self {
        let items = |v: Vec<types::AuditItem>| v.into_iter().map(Into::into).collect();
        api::Audit {
            bank: a.bank,
            never_useful: items(a.never_useful),
            never_recalled: items(a.never_recalled),
            most_useful: items(a.most_useful),
            log_entries: a.log_entries,
        }
    }
}

impl From<types::ImportReport> for api::ImportReport {
    fn from(r: types::ImportReport) -> Self {
        api::ImportReport {
            memories: r.memories,
            embedded: r.embedded,
            tasks: r.tasks,
            log_entries: r.log_entries,
        }
    }
}

/// A task update as the component takes it; a step without a time gets `now`.
pub(crate) fn task_update(update: api::TaskUpdate, now: api::Timestamp) -> types::TaskUpdate {
    match update {
        api::TaskUpdate::Step(s) => types::TaskUpdate::Step(types::Step {
            id: s.id,
            at: s.at.unwrap_or(now),
            kind: s.kind.into(),
            text: s.text,
            tool: s.tool,
            error: s.error,
        }),
        api::TaskUpdate::Fact(x) => types::TaskUpdate::Fact(x),
        api::TaskUpdate::Assumption(x) => types::TaskUpdate::Assumption(x),
        api::TaskUpdate::Question(x) => types::TaskUpdate::Question(x),
        api::TaskUpdate::Note(x) => types::TaskUpdate::Note(x),
        api::TaskUpdate::CurrentStep(x) => types::TaskUpdate::CurrentStep(x),
    }
}

impl From<types::Error> for crate::Error {
    fn from(e: types::Error) -> Self {
        use crate::Error;
        match e {
            types::Error::InvalidInput(f) => {
                Error::InvalidInput { item: f.item.map(|i| i as usize), field: f.field, message: f.message }
            }
            types::Error::NotFound(m) => Error::NotFound(m),
            types::Error::Store(m) => Error::Store(m),
            types::Error::Model(m) => Error::Model(m),
            types::Error::Limit(m) => Error::Limit(m),
            types::Error::Corrupt(m) => Error::Corrupt(m),
            types::Error::Llm(m) => Error::Llm(m),
            types::Error::Conflict(m) => Error::Conflict(m),
            types::Error::Unsupported(m) => Error::Unsupported(m),
        }
    }
}

impl From<store::Op> for api::Op {
    fn from(op: store::Op) -> Self {
        match op {
            store::Op::Put((k, v)) => api::Op::Put(k, v),
            store::Op::Delete(k) => api::Op::Delete(k),
            store::Op::Expect((k, v)) => api::Op::Expect(k, v),
        }
    }
}

impl From<api::StoreError> for store::StoreError {
    fn from(e: api::StoreError) -> Self {
        match e {
            api::StoreError::Conflict(key) => store::StoreError::Conflict(key),
            api::StoreError::ReadOnly(m) => store::StoreError::ReadOnly(m),
            api::StoreError::Failed(m) => store::StoreError::Failed(m),
        }
    }
}

impl From<llm::Request> for api::LlmRequest {
    fn from(r: llm::Request) -> Self {
        api::LlmRequest {
            operation: r.operation.into(),
            system: r.system,
            prompt: r.prompt,
            json_schema: r.json_schema,
            max_tokens: r.max_tokens,
            temperature: r.temperature,
        }
    }
}

impl From<api::LlmResponse> for llm::Response {
    fn from(r: api::LlmResponse) -> Self {
        llm::Response { text: r.text, prompt_tokens: r.prompt_tokens, completion_tokens: r.completion_tokens }
    }
}

impl From<api::LlmError> for llm::LlmError {
    fn from(e: api::LlmError) -> Self {
        match e {
            api::LlmError::Unavailable(m) => llm::LlmError::Unavailable(m),
            api::LlmError::Failed(m) => llm::LlmError::Failed(m),
        }
    }
}
