//! The component boundary: WIT types in, engine types out, and back. Nothing else lives here.

use std::cell::RefCell;
use std::rc::Rc;

wit_bindgen::generate!({
    path: "../../wit/memory.wit",
    world: "memory",
});

use exports::hindsight::memory::api as wit;
use hindsight::memory::llm as wit_llm;
use hindsight::memory::store as wit_store;
use hindsight::memory::types as t;
use hindsight_types as core;
use hindsight_types::time::now as wall_clock;

use crate::{Error, RecallQuery};

struct Component;

export!(Component);

impl wit::Guest for Component {
    type Engine = EngineResource;
    type Bank = BankResource;
}

pub struct EngineResource(crate::Engine);

pub struct BankResource(RefCell<crate::Bank>);

/// The host's store, reached through the `store` import.
struct HostStore;

fn store_error(e: wit_store::StoreError) -> core::StoreError {
    match e {
        wit_store::StoreError::Conflict(m) => core::StoreError::Conflict(m),
        wit_store::StoreError::ReadOnly(m) => core::StoreError::ReadOnly(m),
        wit_store::StoreError::Failed(m) => core::StoreError::Failed(m),
    }
}

impl core::Store for HostStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, core::StoreError> {
        wit_store::get(key).map_err(store_error)
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, core::StoreError> {
        wit_store::scan(prefix, start_after, limit).map_err(store_error)
    }

    fn commit(&self, ops: Vec<core::Op>) -> Result<(), core::StoreError> {
        let ops: Vec<wit_store::Op> = ops
            .into_iter()
            .map(|op| match op {
                core::Op::Put(k, v) => wit_store::Op::Put((k, v)),
                core::Op::Delete(k) => wit_store::Op::Delete(k),
                core::Op::Expect(k, v) => wit_store::Op::Expect((k, v)),
            })
            .collect();
        wit_store::commit(&ops).map_err(store_error)
    }
}

/// The host's language model, reached through the `llm` import.
struct HostLlm;

impl core::Llm for HostLlm {
    fn complete(&self, r: &core::LlmRequest) -> Result<core::LlmResponse, core::LlmError> {
        let request = wit_llm::Request {
            operation: operation_out(r.operation),
            system: r.system.clone(),
            prompt: r.prompt.clone(),
            json_schema: r.json_schema.clone(),
            max_tokens: r.max_tokens,
            temperature: r.temperature,
        };
        match wit_llm::complete(&request) {
            Ok(a) => Ok(core::LlmResponse {
                text: a.text,
                prompt_tokens: a.prompt_tokens,
                completion_tokens: a.completion_tokens,
            }),
            Err(wit_llm::LlmError::Unavailable(m)) => Err(core::LlmError::Unavailable(m)),
            Err(wit_llm::LlmError::Failed(m)) => Err(core::LlmError::Failed(m)),
        }
    }
}

fn now_or_clock(now: Option<i64>) -> i64 {
    now.unwrap_or_else(wall_clock)
}

impl wit::GuestEngine for EngineResource {
    fn create(model: Vec<u8>, tokenizer: Vec<u8>, settings: String) -> Result<wit::Engine, t::Error> {
        let engine = crate::Engine::new(&model, &tokenizer, &settings)?.with_llm(Rc::new(HostLlm));
        Ok(wit::Engine::new(EngineResource(engine)))
    }

    fn model_id(&self) -> String {
        self.0.model_id().to_string()
    }

    fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, t::Error> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Ok(self.0.embed(&refs)?)
    }

    fn open_bank(&self, id: String) -> Result<wit::Bank, t::Error> {
        let bank = self.0.open_bank(&id, Box::new(HostStore))?;
        Ok(wit::Bank::new(BankResource(RefCell::new(bank))))
    }
}

impl wit::GuestBank for BankResource {
    fn id(&self) -> String {
        self.0.borrow().id().to_string()
    }

    fn retain(&self, items: Vec<t::NewMemory>, now: Option<i64>) -> Result<Vec<t::RetainOutcome>, t::Error> {
        let items = items.into_iter().map(new_memory_in).collect();
        let outcomes = self.0.borrow_mut().retain(items, now_or_clock(now))?;
        Ok(outcomes.into_iter().map(outcome_out).collect())
    }

    fn recall(&self, q: t::RecallQuery) -> Result<t::RecallResult, t::Error> {
        let result = self.0.borrow_mut().recall(recall_query_in(q))?;
        Ok(recall_result_out(result))
    }

    fn recall_with(
        &self,
        others: Vec<wit::BankBorrow<'_>>,
        q: t::RecallQuery,
    ) -> Result<t::RecallResult, t::Error> {
        let mut guards = Vec::with_capacity(others.len() + 1);
        for bank in std::iter::once(self).chain(others.iter().map(|b| b.get::<BankResource>())) {
            // A bank listed twice is already borrowed.
            let guard = bank.0.try_borrow_mut().map_err(|_| {
                t::Error::InvalidInput(t::FieldError {
                    item: None,
                    field: "banks".into(),
                    message: "a bank is listed twice".into(),
                })
            })?;
            guards.push(guard);
        }
        let mut banks: Vec<&mut crate::Bank> = guards.iter_mut().map(|g| &mut **g).collect();
        Ok(recall_result_out(crate::recall_across(&mut banks, recall_query_in(q))?))
    }

    fn get(&self, id: String) -> Result<t::Memory, t::Error> {
        Ok(memory_out(self.0.borrow_mut().get(&id)?))
    }

    fn forget(&self, id: String, hard: bool, now: Option<i64>) -> Result<(), t::Error> {
        Ok(self.0.borrow_mut().forget(&id, hard, now_or_clock(now))?)
    }

    fn restore(&self, id: String, now: Option<i64>) -> Result<t::Memory, t::Error> {
        Ok(memory_out(self.0.borrow_mut().restore(&id, now_or_clock(now))?))
    }

    fn unsupersede(&self, id: String, now: Option<i64>) -> Result<t::Memory, t::Error> {
        Ok(memory_out(self.0.borrow_mut().unsupersede(&id, now_or_clock(now))?))
    }

    fn stats(&self) -> Result<t::Stats, t::Error> {
        let s = self.0.borrow_mut().stats()?;
        Ok(t::Stats {
            bank: s.bank,
            total: s.total,
            active: s.active,
            archived: s.archived,
            superseded: s.superseded,
            merged: s.merged,
            active_by_kind: s
                .active_by_kind
                .into_iter()
                .map(|(kind, count)| t::KindCount { kind: kind_out(kind), count })
                .collect(),
            embedding_model: s.embedding_model,
            dimension: s.dimension,
            sequence: s.sequence,
            format_version: s.format_version,
        })
    }

    fn feedback(
        &self,
        ids: Vec<String>,
        outcome: t::FeedbackOutcome,
        now: Option<i64>,
    ) -> Result<Vec<t::Memory>, t::Error> {
        let memories = self.0.borrow_mut().feedback(&ids, feedback_in(outcome), now_or_clock(now))?;
        Ok(memories.into_iter().map(memory_out).collect())
    }

    fn history(&self, id: String) -> Result<Vec<t::HistoryEntry>, t::Error> {
        let entries = self.0.borrow_mut().history(&id)?;
        Ok(entries.into_iter().map(history_entry_out).collect())
    }

    fn maintain(&self, now: Option<i64>, dry_run: bool) -> Result<t::MaintainReport, t::Error> {
        let mut bank = self.0.borrow_mut();
        let r = if dry_run {
            bank.maintain_dry_run(now_or_clock(now))?
        } else {
            bank.maintain(now_or_clock(now))?
        };
        Ok(t::MaintainReport {
            active_before: r.active_before,
            active_after: r.active_after,
            decayed: r.decayed,
            weakened: r.weakened,
            sealed: r.sealed,
            steps: r
                .steps
                .into_iter()
                .map(|s| t::MaintainStep {
                    id: s.id,
                    action: maintain_out(s.action),
                    into: s.into,
                    reason: s.reason,
                })
                .collect(),
        })
    }

    fn begin_task(
        &self,
        goal: String,
        task_type: Option<String>,
        now: Option<i64>,
    ) -> Result<t::TaskState, t::Error> {
        Ok(task_out(self.0.borrow_mut().begin_task(&goal, task_type, now_or_clock(now))?))
    }

    fn task(&self, id: String) -> Result<t::TaskState, t::Error> {
        Ok(task_out(self.0.borrow().task(&id)?))
    }

    fn update_task(
        &self,
        id: String,
        update: t::TaskUpdate,
        expected_version: Option<u32>,
        now: Option<i64>,
    ) -> Result<t::TaskState, t::Error> {
        let update = match update {
            t::TaskUpdate::Step(s) => core::TaskUpdate::Step(core::Step {
                id: s.id,
                kind: step_kind_in(s.kind),
                text: s.text,
                tool: s.tool,
                error: s.error,
                at: Some(s.at),
            }),
            t::TaskUpdate::Fact(x) => core::TaskUpdate::Fact(x),
            t::TaskUpdate::Assumption(x) => core::TaskUpdate::Assumption(x),
            t::TaskUpdate::Question(x) => core::TaskUpdate::Question(x),
            t::TaskUpdate::Note(x) => core::TaskUpdate::Note(x),
            t::TaskUpdate::CurrentStep(x) => core::TaskUpdate::CurrentStep(x),
        };
        let state = self.0.borrow_mut().update_task(&id, update, expected_version, now_or_clock(now))?;
        Ok(task_out(state))
    }

    fn end_task(
        &self,
        id: String,
        outcome: t::TaskOutcome,
        detail: Option<String>,
        force_distil: bool,
        may_share: bool,
        now: Option<i64>,
    ) -> Result<t::TaskEnd, t::Error> {
        let mut bank = self.0.borrow_mut();
        bank.set_may_share(may_share);
        let end = bank.end_task(&id, outcome_in(outcome), detail, force_distil, now_or_clock(now))?;
        Ok(task_end_out(end))
    }

    fn distill_task(
        &self,
        id: String,
        rules_only: bool,
        may_share: bool,
        now: Option<i64>,
    ) -> Result<t::TaskEnd, t::Error> {
        let mut bank = self.0.borrow_mut();
        bank.set_may_share(may_share);
        let end = bank.distill_task(&id, rules_only, now_or_clock(now))?;
        Ok(task_end_out(end))
    }

    fn delete_task(&self, id: String) -> Result<(), t::Error> {
        Ok(self.0.borrow_mut().delete_task(&id)?)
    }

    fn tasks(&self, include_ended: bool) -> Result<Vec<t::TaskState>, t::Error> {
        Ok(self.0.borrow().tasks(include_ended)?.into_iter().map(task_out).collect())
    }

    fn consolidate(&self, since: Option<i64>, now: Option<i64>) -> Result<Vec<t::Distilled>, t::Error> {
        let items = self.0.borrow_mut().consolidate(since, now_or_clock(now))?;
        Ok(items.into_iter().map(distilled_out).collect())
    }

    fn list(&self, q: t::ListQuery) -> Result<t::ListPage, t::Error> {
        let q = core::ListQuery {
            kind: q.kind.map(kind_in),
            status: q.status.map(status_in),
            any_status: q.any_status,
            tag: q.tag,
            task_type: q.task_type,
            source: q.source.map(source_in),
            text: q.text,
            order: list_order_in(q.order),
            limit: q.limit,
            cursor: q.cursor,
        };
        let page = self.0.borrow_mut().list(&q)?;
        Ok(t::ListPage {
            items: page.items.into_iter().map(memory_out).collect(),
            next_cursor: page.next_cursor,
            total: page.total,
        })
    }

    fn correct(&self, id: String, content: String, now: Option<i64>) -> Result<t::Correction, t::Error> {
        let c = self.0.borrow_mut().correct(&id, &content, now_or_clock(now))?;
        Ok(t::Correction {
            memory: memory_out(c.memory),
            superseded: c.superseded,
            cascade: c
                .cascade
                .into_iter()
                .map(|x| t::Cascaded { id: x.id, before: x.before, after: x.after })
                .collect(),
        })
    }

    fn used(
        &self,
        ids: Vec<String>,
        task_id: Option<String>,
        now: Option<i64>,
    ) -> Result<Vec<t::Memory>, t::Error> {
        let memories = self.0.borrow_mut().report_used(&ids, task_id, now_or_clock(now))?;
        Ok(memories.into_iter().map(memory_out).collect())
    }

    fn explain(&self, id: String) -> Result<t::Explanation, t::Error> {
        let x = self.0.borrow_mut().explain(&id)?;
        let m = &x.memory;
        let (recalled, cited, helpful, unhelpful) = (m.recalled(), m.cited, m.helpful, m.unhelpful);
        let events = m.events.iter().cloned().map(use_record_out).collect();
        Ok(t::Explanation {
            memory: memory_out(x.memory),
            task: x.task.map(task_out),
            consolidated_from: x.consolidated_from,
            history: x.history.into_iter().map(history_entry_out).collect(),
            events,
            recalls: x.recalls.into_iter().map(log_entry_out).collect(),
            recalled,
            cited,
            helpful,
            unhelpful,
        })
    }

    fn audit(&self) -> Result<t::Audit, t::Error> {
        let a = self.0.borrow_mut().audit()?;
        let items = |v: Vec<core::AuditItem>| {
            v.into_iter()
                .map(|i| t::AuditItem {
                    id: i.id,
                    content: i.content,
                    recalled: i.recalled,
                    cited: i.cited,
                    helpful: i.helpful,
                })
                .collect()
        };
        Ok(t::Audit {
            bank: a.bank,
            never_useful: items(a.never_useful),
            never_recalled: items(a.never_recalled),
            most_useful: items(a.most_useful),
            log_entries: a.log_entries,
        })
    }

    fn export_page(
        &self,
        cursor: Option<String>,
        limit: u32,
        vectors: bool,
    ) -> Result<t::ExportPage, t::Error> {
        let page = self.0.borrow_mut().export_page(cursor.as_deref(), limit, vectors, wall_clock())?;
        Ok(t::ExportPage { lines: page.lines, next: page.next })
    }

    fn import_lines(
        &self,
        lines: Vec<String>,
        first_line: u32,
        reembed: bool,
        check_only: bool,
        now: Option<i64>,
    ) -> Result<t::ImportReport, t::Error> {
        let r =
            self.0.borrow_mut().import_lines(&lines, first_line, reembed, check_only, now_or_clock(now))?;
        Ok(t::ImportReport {
            memories: r.memories,
            embedded: r.embedded,
            tasks: r.tasks,
            log_entries: r.log_entries,
        })
    }

    fn reembed_pending(
        &self,
        model_id: String,
        dimension: u32,
        limit: u32,
    ) -> Result<Vec<(String, String)>, t::Error> {
        Ok(self.0.borrow_mut().reembed_pending(&model_id, dimension as usize, limit)?)
    }

    fn stage_vectors(
        &self,
        model_id: String,
        dimension: u32,
        vectors: Vec<(String, Vec<f32>)>,
    ) -> Result<(), t::Error> {
        Ok(self.0.borrow_mut().stage_vectors(&model_id, dimension as usize, vectors)?)
    }

    fn switch_model(&self, model_id: String, dimension: u32, now: Option<i64>) -> Result<u32, t::Error> {
        Ok(self.0.borrow_mut().switch_model(&model_id, dimension as usize, now_or_clock(now))?)
    }

    fn reindex(&self, now: Option<i64>) -> Result<u32, t::Error> {
        Ok(self.0.borrow_mut().reindex(now_or_clock(now))?)
    }
}

fn history_entry_out(e: crate::HistoryEntry) -> t::HistoryEntry {
    t::HistoryEntry { at: e.at, event: history_out(e.event), memory: memory_out(e.memory), other: e.other }
}

fn use_record_out(u: core::UseRecord) -> t::UseRecord {
    t::UseRecord {
        at: u.at,
        event: use_event_out(u.event),
        outcome: u.outcome.map(feedback_out),
        task_id: u.task_id,
        other: u.other,
    }
}

fn log_entry_out(e: core::RecallLogEntry) -> t::RecallLogEntry {
    t::RecallLogEntry {
        seq: e.seq,
        at: e.at,
        agent_id: e.agent_id,
        task_id: e.task_id,
        query: e.query,
        query_hash: e.query_hash,
        hits: e
            .hits
            .into_iter()
            .map(|h| t::RecallHit { id: h.id, score: h.score, handle: h.handle })
            .collect(),
    }
}

fn outcome_out(o: core::RetainOutcome) -> t::RetainOutcome {
    t::RetainOutcome { id: o.id, action: action_out(o.action), related: o.related, reason: o.reason }
}

fn task_end_out(end: crate::TaskEnd) -> t::TaskEnd {
    t::TaskEnd {
        task: task_out(end.task),
        method: distill_method_out(end.method),
        reason: end.reason,
        items: end.items.into_iter().map(distilled_out).collect(),
        cited: end.citations.cited,
        unused: end.citations.unused,
    }
}

fn distilled_out(d: core::Distilled) -> t::Distilled {
    t::Distilled { content: d.content, kind: kind_out(d.kind), outcome: outcome_out(d.outcome), bank: d.bank }
}

fn task_out(x: crate::task::Task) -> t::TaskState {
    let tool_calls = x
        .tool_calls()
        .into_iter()
        .map(|c| t::ToolCall { tool: c.tool, input: c.input, result: c.result, error: c.error, at: c.at })
        .collect();
    t::TaskState {
        id: x.id,
        goal: x.goal,
        task_type: x.task_type,
        version: x.version,
        started_at: x.started_at,
        updated_at: x.updated_at,
        confirmed_facts: x.confirmed_facts,
        assumptions: x.assumptions,
        open_questions: x.open_questions,
        notes: x.notes,
        current_step: x.current_step,
        tool_calls,
        steps: x
            .steps
            .into_iter()
            .map(|s| t::Step {
                id: s.id,
                at: s.at,
                kind: step_kind_out(s.kind),
                text: s.text,
                tool: s.tool,
                error: s.error,
            })
            .collect(),
        ended_at: x.ended_at,
        outcome: x.outcome.map(outcome_out_task),
        detail: x.detail,
    }
}

impl From<Error> for t::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidInput(f) => t::Error::InvalidInput(t::FieldError {
                item: f.item.map(|i| i as u32),
                field: f.field,
                message: f.message,
            }),
            Error::NotFound(m) => t::Error::NotFound(m),
            Error::Store(m) => t::Error::Store(m),
            Error::Model(m) => t::Error::Model(m),
            Error::Limit(m) => t::Error::Limit(m),
            Error::Corrupt(m) => t::Error::Corrupt(m),
            Error::Llm(m) => t::Error::Llm(m),
            Error::Stale(m) | Error::Conflict(m) => t::Error::Conflict(m),
            Error::Unsupported(m) => t::Error::Unsupported(m),
        }
    }
}

/// One mapping per enum pair, written once in each direction.
macro_rules! enum_map {
    ($in_fn:ident, $out_fn:ident, $wit:ty, $core:ty, [$($v:ident),+]) => {
        // Not every pair is crossed in both directions (records only leave the component).
        #[allow(dead_code)]
        fn $in_fn(v: $wit) -> $core {
            match v { $(<$wit>::$v => <$core>::$v),+ }
        }
        #[allow(dead_code)]
        fn $out_fn(v: $core) -> $wit {
            match v { $(<$core>::$v => <$wit>::$v),+ }
        }
    };
}

enum_map!(kind_in, kind_out, t::MemoryKind, core::Kind, [Episodic, Semantic, Procedural]);
enum_map!(level_in, level_out, t::ScopeLevel, core::ScopeLevel, [Global, Project, Session]);
enum_map!(
    source_in,
    source_out,
    t::Source,
    core::Source,
    [UserExplicit, UserFeedback, AgentInference, ToolResult, Imported]
);
enum_map!(failure_in, failure_out, t::FailureType, core::FailureType, [Transient, Permanent]);
enum_map!(status_in, status_out, t::Status, core::Status, [Active, Superseded, Merged, Archived]);
enum_map!(
    action_in,
    action_out,
    t::RetainAction,
    core::RetainAction,
    [Created, Reinforced, Merged, Superseded, Filtered]
);
enum_map!(
    feedback_in,
    feedback_out,
    t::FeedbackOutcome,
    core::FeedbackOutcome,
    [Success, Failure, Correction]
);
enum_map!(
    history_in,
    history_out,
    t::HistoryEvent,
    core::HistoryEvent,
    [Created, Superseded, Merged, Archived]
);
enum_map!(
    step_kind_in,
    step_kind_out,
    t::StepKind,
    core::StepKind,
    [Thought, ToolCall, ToolResult, UserMessage, Answer]
);
enum_map!(outcome_in, outcome_out_task, t::TaskOutcome, core::Outcome, [Success, Failure, Interrupted]);
enum_map!(
    distill_method_in,
    distill_method_out,
    t::DistillMethod,
    core::DistillMethod,
    [Llm, Rules, Skipped]
);
enum_map!(list_order_in, list_order_out, t::ListOrder, core::ListOrder, [Newest, MostRecalled]);
enum_map!(
    use_event_in,
    use_event_out,
    t::UseEvent,
    core::UseEvent,
    [Feedback, Cited, RecalledNotUsed, Used, Cascade, Corrected]
);
enum_map!(maintain_in, maintain_out, t::MaintainAction, core::MaintainAction, [Archived, Merged]);
enum_map!(
    operation_in,
    operation_out,
    wit_llm::Operation,
    core::LlmOperation,
    [Extract, Importance, Consolidate, Judge]
);

fn scope_in(s: t::Scope) -> core::Scope {
    core::Scope { level: level_in(s.level), id: s.id }
}

fn scope_out(s: core::Scope) -> t::Scope {
    t::Scope { level: level_out(s.level), id: s.id }
}

fn new_memory_in(m: t::NewMemory) -> core::Memory {
    core::Memory {
        content: m.content,
        kind: m.kind.map(kind_in),
        task_type: m.task_type,
        task_description: m.task_description,
        context: m.context,
        tags: m.tags,
        scope: m.scope.map(scope_in),
        agent_id: m.agent_id,
        importance: m.importance,
        confidence: m.confidence,
        source: m.source.map(source_in),
        failure_type: m.failure_type.map(failure_in),
        occurred_at: m.occurred_at,
        valid_until: m.valid_until,
        metadata: m.metadata,
        force: m.force,
        parallel: m.parallel,
        sequence: m.sequence,
        vector: m.vector,
    }
}

fn memory_out(m: crate::Record) -> t::Memory {
    t::Memory {
        id: m.id,
        kind: kind_out(m.kind),
        content: m.content,
        task_type: m.task_type,
        task_description: m.task_description,
        context: m.context,
        tags: m.tags,
        scope: scope_out(m.scope),
        agent_id: m.agent_id,
        importance: m.importance,
        confidence: m.confidence,
        source: source_out(m.source),
        failure_type: m.failure_type.map(failure_out),
        occurred_at: m.occurred_at,
        created_at: m.created_at,
        updated_at: m.updated_at,
        last_accessed_at: m.last_accessed_at,
        access_count: m.access_count,
        status: status_out(m.status),
        supersedes: m.supersedes,
        superseded_by: m.superseded_by,
        valid_until: m.valid_until,
        metadata: m.metadata,
        embedding_model: m.embedding_model,
        conflicts_with: m.conflicts_with,
        reinforcements: m.reinforcements,
    }
}

fn recall_query_in(q: t::RecallQuery) -> RecallQuery {
    RecallQuery {
        query: q.query,
        k: q.k,
        now: now_or_clock(q.now),
        task_type: q.task_type,
        kinds: q.kinds.into_iter().map(kind_in).collect(),
        tags: q.tags,
        scope: q.scope.map(scope_in),
        min_score: q.min_score,
        prompt_tokens: q.prompt_tokens,
        vector: q.vector,
        include_superseded: q.include_superseded,
        agent_id: q.agent_id,
        task_id: q.task_id,
    }
}

fn recall_result_out(result: crate::RecallResult) -> t::RecallResult {
    t::RecallResult {
        items: result
            .items
            .into_iter()
            .map(|r| t::Recalled {
                memory: memory_out(r.memory),
                score: t::Score {
                    semantic: r.score.semantic,
                    lexical: r.score.lexical,
                    recency: r.score.recency,
                    confidence: r.score.confidence,
                    importance: r.score.importance,
                    task_match: r.score.task_match,
                    source: r.score.source,
                    total: r.score.total,
                    similarity: r.score.similarity,
                },
                conflicting: r.conflicting,
                possibly_stale: r.possibly_stale,
                in_prompt: r.in_prompt,
                bank: r.bank,
                handle: r.handle,
            })
            .collect(),
        prompt: result.prompt,
    }
}
