//! One dispatcher for every server of the tools: the table of tools with the right each needs,
//! the rights check on what a call does *and* on what it answers, the caller's name on what it
//! writes, the rule for several banks in one search, argument errors that name the field, and
//! error text. A server lends a [`Backend`] (the `hindsight` library in the CLI, the engine in the
//! edge component) and moves bytes.

use hindsight_types::{
    Audit, Correction, EndTask, Erasure, ErrorKind, Explanation, Failure, FeedbackOutcome, HealthReport,
    HistoryEntry, ListPage, ListQuery, Memory, MemoryRecord, Named, Outcome, Principal, Query, RecallResult,
    RetainOutcome, Right, Stats, Step, StepKind, TaskEnd, Trajectory, Usage,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::describe;
use crate::{
    input_schema, list_query, summary, write_item, BankArgs, CorrectArgs, FeedbackArgs, ForgetArgs,
    HistoryArgs, ListArgs, NoArgs, SearchArgs, ShareArgs, SummarizeArgs, TaskDeleteArgs, WriteArgs,
};

/// What a server lends the tools: banks by id, in the API's types. The dispatcher has checked
/// the caller's right on every bank a call names before it calls one of these, and stamped the
/// caller's name on what it writes; a backend may check again.
pub trait Backend {
    /// The backend's error.
    type Error: Failure;

    /// Retains one item.
    fn retain(&mut self, bank: &str, item: Memory) -> Result<RetainOutcome, Self::Error>;
    /// One recall over the banks listed (one or more), ranked together.
    fn recall(&mut self, banks: &[String], query: Query) -> Result<RecallResult, Self::Error>;
    /// Archives a memory.
    fn forget(&mut self, bank: &str, id: &str) -> Result<(), Self::Error>;
    /// Erases a memory and every copy of its text; the receipt.
    fn erase(&mut self, bank: &str, id: &str) -> Result<Erasure, Self::Error>;
    /// A verdict on memories.
    fn feedback(
        &mut self,
        bank: &str,
        ids: &[String],
        outcome: FeedbackOutcome,
    ) -> Result<Vec<MemoryRecord>, Self::Error>;
    /// The caller used these memories (for a task, if given).
    fn used(
        &mut self,
        bank: &str,
        ids: &[String],
        task_id: Option<&str>,
    ) -> Result<Vec<MemoryRecord>, Self::Error>;
    /// Ends a task begun before and distils it; `may_share`: lessons marked for sharing may go to
    /// the shared bank (the caller may write there).
    fn end_task(
        &mut self,
        bank: &str,
        task_id: &str,
        end: EndTask,
        may_share: bool,
    ) -> Result<TaskEnd, Self::Error>;
    /// Distils a whole trajectory in one call.
    fn distill(
        &mut self,
        bank: &str,
        trajectory: Trajectory,
        may_share: bool,
    ) -> Result<TaskEnd, Self::Error>;
    /// Erases a task's record.
    fn delete_task(&mut self, bank: &str, task_id: &str) -> Result<(), Self::Error>;
    /// A memory's supersede and merge chain.
    fn history(&mut self, bank: &str, id: &str) -> Result<Vec<HistoryEntry>, Self::Error>;
    /// One memory, whatever its status.
    fn get(&mut self, bank: &str, id: &str) -> Result<MemoryRecord, Self::Error>;
    /// A page of memories.
    fn list(&mut self, bank: &str, query: ListQuery) -> Result<ListPage, Self::Error>;
    /// The user's correction, written as `agent`.
    fn correct(
        &mut self,
        bank: &str,
        id: &str,
        text: &str,
        agent: Option<&str>,
    ) -> Result<Correction, Self::Error>;
    /// Where a memory came from and how it was used.
    fn explain(&mut self, bank: &str, id: &str) -> Result<Explanation, Self::Error>;
    /// The bank's audit.
    fn audit(&mut self, bank: &str) -> Result<Audit, Self::Error>;
    /// The bank's health report.
    fn health(&mut self, bank: &str) -> Result<HealthReport, Self::Error>;
    /// What the last write, search or summary cost, when the backend knows (the tools add it
    /// to their result as `usage`).
    fn last_usage(&mut self) -> Option<Usage> {
        None
    }
    /// The bank's counts.
    fn stats(&mut self, bank: &str) -> Result<Stats, Self::Error>;
    /// Brings an archived memory back.
    fn restore(&mut self, bank: &str, id: &str) -> Result<MemoryRecord, Self::Error>;
    /// Undoes a wrong supersede.
    fn unsupersede(&mut self, bank: &str, id: &str) -> Result<MemoryRecord, Self::Error>;
    /// Copies memory `id` of `bank` into bank `to` through its write path.
    fn share(&mut self, bank: &str, id: &str, to: &str) -> Result<RetainOutcome, Self::Error>;
    /// The banks in the store.
    fn banks(&mut self) -> Result<Vec<String>, Self::Error>;
    /// The bank lessons marked for sharing may be copied to (the setting `spaces.shared_bank`).
    fn shared_bank(&mut self) -> Result<String, Self::Error>;
}

/// Who is calling, and the bank a call that names none works on.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The principal the request authenticated as; `None` for a server without auth (stdio, or
    /// HTTP on loopback without `--auth`): every right on every bank.
    pub principal: Option<&'a Principal>,
    /// The server's default bank.
    pub default_bank: &'a str,
}

impl Caller<'_> {
    fn may(&self, right: Right, bank: &str) -> bool {
        self.principal.is_none_or(|p| p.may(right, bank))
    }

    fn check(&self, right: Right, bank: &str) -> Result<(), ToolError> {
        match self.principal {
            Some(p) => p.check(right, bank).map_err(|e| ToolError::new(ErrorKind::Denied, e.0)),
            None => Ok(()),
        }
    }

    fn bank<'b>(&'b self, named: &'b Option<String>) -> &'b str {
        named.as_deref().unwrap_or(self.default_bank)
    }

    /// The name a principal's writes carry (unless the item names an agent).
    fn agent(&self) -> Option<String> {
        self.principal.map(|p| p.name().to_string())
    }
}

/// What a tool call failed with, as the calling model reads it (`kind: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The kind.
    pub kind: ErrorKind,
    /// The message, naming the field for an invalid input.
    pub message: String,
}

impl ToolError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ToolError {
        ToolError { kind, message: message.into() }
    }

    /// An invalid input (`field: problem`).
    pub fn invalid(message: impl std::fmt::Display) -> ToolError {
        ToolError::new(ErrorKind::InvalidInput, message.to_string())
    }

    /// Any failure, as the tools report it.
    pub fn from_backend(e: impl Failure) -> ToolError {
        ToolError::new(e.kind(), e.message())
    }
}

impl Failure for ToolError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
    fn message(&self) -> String {
        self.message.clone()
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.label(), self.message)
    }
}

/// What a tool needs of the banks it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read on the bank (on each of `banks` for a search: those it may not read are skipped).
    Read,
    /// Write on the bank; without read too, the answer names nothing stored.
    Write,
    /// Read on the bank a memory is shared from, write on the bank it is shared to.
    Share,
    /// Nothing: lists only what the caller may read.
    List,
}

/// A tool: its name, what the calling model reads about it, what it needs, and its arguments'
/// JSON Schema.
pub struct Tool {
    /// Its name.
    pub name: &'static str,
    /// Its description.
    pub description: &'static str,
    /// The right it needs.
    pub access: Access,
    /// Its input schema.
    pub schema: fn() -> Value,
}

/// Every tool, in the order servers list them.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "memory_write",
        description: describe::MEMORY_WRITE,
        access: Access::Write,
        schema: input_schema::<WriteArgs>,
    },
    Tool {
        name: "memory_search",
        description: describe::MEMORY_SEARCH,
        access: Access::Read,
        schema: input_schema::<SearchArgs>,
    },
    Tool {
        name: "memory_summarize",
        description: describe::MEMORY_SUMMARIZE,
        access: Access::Write,
        schema: input_schema::<SummarizeArgs>,
    },
    Tool {
        name: "memory_forget",
        description: describe::MEMORY_FORGET,
        access: Access::Write,
        schema: input_schema::<ForgetArgs>,
    },
    Tool {
        name: "memory_feedback",
        description: describe::MEMORY_FEEDBACK,
        access: Access::Write,
        schema: input_schema::<FeedbackArgs>,
    },
    Tool {
        name: "memory_task_delete",
        description: describe::MEMORY_TASK_DELETE,
        access: Access::Write,
        schema: input_schema::<TaskDeleteArgs>,
    },
    Tool {
        name: "memory_history",
        description: describe::MEMORY_HISTORY,
        access: Access::Read,
        schema: input_schema::<HistoryArgs>,
    },
    Tool {
        name: "memory_share",
        description: describe::MEMORY_SHARE,
        access: Access::Share,
        schema: input_schema::<ShareArgs>,
    },
    Tool {
        name: "memory_list",
        description: describe::MEMORY_LIST,
        access: Access::Read,
        schema: input_schema::<ListArgs>,
    },
    Tool {
        name: "memory_get",
        description: describe::MEMORY_GET,
        access: Access::Read,
        schema: input_schema::<HistoryArgs>,
    },
    Tool {
        name: "memory_correct",
        description: describe::MEMORY_CORRECT,
        access: Access::Write,
        schema: input_schema::<CorrectArgs>,
    },
    Tool {
        name: "memory_explain",
        description: describe::MEMORY_EXPLAIN,
        access: Access::Read,
        schema: input_schema::<HistoryArgs>,
    },
    Tool {
        name: "memory_audit",
        description: describe::MEMORY_AUDIT,
        access: Access::Read,
        schema: input_schema::<BankArgs>,
    },
    Tool {
        name: "memory_health",
        description: describe::MEMORY_HEALTH,
        access: Access::Read,
        schema: input_schema::<BankArgs>,
    },
    Tool {
        name: "memory_stats",
        description: describe::MEMORY_STATS,
        access: Access::Read,
        schema: input_schema::<BankArgs>,
    },
    Tool {
        name: "memory_restore",
        description: describe::MEMORY_RESTORE,
        access: Access::Write,
        schema: input_schema::<HistoryArgs>,
    },
    Tool {
        name: "memory_banks",
        description: describe::MEMORY_BANKS,
        access: Access::List,
        schema: input_schema::<NoArgs>,
    },
    Tool {
        name: "memory_unsupersede",
        description: describe::MEMORY_UNSUPERSEDE,
        access: Access::Write,
        schema: input_schema::<HistoryArgs>,
    },
];

/// The tool named `name`.
pub fn tool(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// `tools/list`'s answer: each tool's name, description and input schema.
pub fn tools_list() -> Value {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": (t.schema)()}))
        .collect();
    json!({"tools": tools})
}

fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, ToolError> {
    serde_json::from_value(args.clone()).map_err(|e| ToolError::invalid(format!("arguments: {e}")))
}

/// A backend's answer, its error as the tool's.
fn ok<T>(r: Result<T, impl Failure>) -> Result<T, ToolError> {
    r.map_err(ToolError::from_backend)
}

fn value(v: impl Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(v)
        .map_err(|e| ToolError::new(ErrorKind::Corrupt, format!("the result did not serialise: {e}")))
}

/// Calls tool `name` with `args` (a JSON object) for `caller` on `backend`: its structured result,
/// or the error the calling model reads.
pub fn call<B: Backend>(
    backend: &mut B,
    caller: &Caller,
    name: &str,
    args: &Value,
) -> Result<Value, ToolError> {
    let tool = tool(name).ok_or_else(|| ToolError::invalid(format!("name: no tool {name:?}")))?;
    match name {
        "memory_write" => {
            let (bank, mut item) = write_item(args).map_err(ToolError::invalid)?;
            let bank = caller.bank(&bank).to_string();
            caller.check(Right::Write, &bank)?;
            if item.agent_id.is_none() {
                item.agent_id = caller.agent();
            }
            let outcome = ok(backend.retain(&bank, item))?;
            if caller.may(Right::Read, &bank) {
                with_usage(value(outcome)?, backend)
            } else {
                Ok(accepted(&bank))
            }
        }
        "memory_search" => {
            let a: SearchArgs = parse(args)?;
            let mut query = a.to_query().map_err(ToolError::invalid)?;
            if query.agent_id.is_none() {
                query.agent_id = caller.agent();
            }
            let (banks, skipped) = match (a.banks, &a.bank) {
                (Some(_), Some(_)) => {
                    return Err(ToolError::invalid("banks: give either bank or banks, not both"))
                }
                (Some(banks), None) => readable(caller, banks)?,
                (None, bank) => {
                    let bank = caller.bank(bank).to_string();
                    caller.check(Right::Read, &bank)?;
                    (vec![bank], Vec::new())
                }
            };
            let mut result = ok(backend.recall(&banks, query))?;
            result.skipped_banks = skipped;
            with_usage(value(result)?, backend)
        }
        "memory_summarize" => summarize(backend, caller, args),
        "memory_forget" => {
            let a: ForgetArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(Right::Write, &bank)?;
            if !a.hard.unwrap_or(false) {
                ok(backend.forget(&bank, &a.id))?;
                return Ok(json!({"id": a.id, "forgotten": "soft"}));
            }
            let receipt = ok(backend.erase(&bank, &a.id))?;
            // The receipt names the copies and tasks it reached: a reader's to see.
            if caller.may(Right::Read, &bank) {
                Ok(json!({"id": a.id, "forgotten": "hard", "erased": receipt}))
            } else {
                Ok(json!({"id": a.id, "forgotten": "hard"}))
            }
        }
        "memory_feedback" => {
            let a: FeedbackArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(Right::Write, &bank)?;
            let memories = if a.outcome.trim() == "used" {
                ok(backend.used(&bank, &a.ids, a.task_id.as_deref()))?
            } else {
                let outcome = FeedbackOutcome::parse("outcome", &a.outcome)
                    .map_err(|e| ToolError::invalid(format!("{e}; or used")))?;
                ok(backend.feedback(&bank, &a.ids, outcome))?
            };
            if caller.may(Right::Read, &bank) {
                Ok(json!({"memories": memories}))
            } else {
                Ok(json!({"ids": a.ids, "outcome": a.outcome.trim(), "bank": bank}))
            }
        }
        "memory_task_delete" => {
            let a: TaskDeleteArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(Right::Write, &bank)?;
            ok(backend.delete_task(&bank, &a.task_id))?;
            Ok(json!({"task_id": a.task_id, "deleted": "hard"}))
        }
        "memory_share" => {
            let a: ShareArgs = parse(args)?;
            let from = caller.bank(&a.bank).to_string();
            caller.check(Right::Read, &from)?;
            hindsight_types::validate_bank_id(&a.to).map_err(ToolError::invalid)?;
            caller.check(Right::Write, &a.to)?;
            let outcome = ok(backend.share(&from, &a.id, &a.to))?;
            if caller.may(Right::Read, &a.to) {
                value(outcome)
            } else {
                Ok(accepted(&a.to))
            }
        }
        "memory_banks" => {
            let _: NoArgs = parse(args)?;
            let banks: Vec<String> =
                ok(backend.banks())?.into_iter().filter(|b| caller.may(Right::Read, b)).collect();
            Ok(json!({"banks": banks}))
        }
        _ => bank_tool(backend, caller, tool, args),
    }
}

/// The tools that take one bank (`bank`, else the default) and an id or nothing.
fn bank_tool<B: Backend>(
    backend: &mut B,
    caller: &Caller,
    tool: &Tool,
    args: &Value,
) -> Result<Value, ToolError> {
    let right = if tool.access == Access::Write { Right::Write } else { Right::Read };
    let reads = |bank: &str| caller.may(Right::Read, bank);
    match tool.name {
        "memory_history" => {
            let a: HistoryArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(right, &bank)?;
            Ok(json!({"entries": ok(backend.history(&bank, &a.id))?}))
        }
        "memory_list" => {
            let a: ListArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(right, &bank)?;
            let query = list_query(&a).map_err(ToolError::invalid)?;
            value(ok(backend.list(&bank, query))?)
        }
        "memory_get" | "memory_explain" | "memory_restore" | "memory_unsupersede" => {
            let a: HistoryArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(right, &bank)?;
            match tool.name {
                "memory_get" => value(ok(backend.get(&bank, &a.id))?),
                "memory_explain" => value(ok(backend.explain(&bank, &a.id))?),
                "memory_restore" => {
                    let m = ok(backend.restore(&bank, &a.id))?;
                    if reads(&bank) {
                        value(m)
                    } else {
                        Ok(json!({"id": m.id, "status": m.status}))
                    }
                }
                _ => {
                    let m = ok(backend.unsupersede(&bank, &a.id))?;
                    if reads(&bank) {
                        value(m)
                    } else {
                        Ok(json!({"id": m.id, "status": m.status}))
                    }
                }
            }
        }
        "memory_correct" => {
            let a: CorrectArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(right, &bank)?;
            let agent = caller.agent();
            let c = ok(backend.correct(&bank, &a.id, &a.text, agent.as_deref()))?;
            if reads(&bank) {
                value(c)
            } else {
                // The cascade names other memories: only the caller's own two ids.
                Ok(json!({"id": c.memory.id, "superseded": c.superseded}))
            }
        }
        "memory_audit" | "memory_health" | "memory_stats" => {
            let a: BankArgs = parse(args)?;
            let bank = caller.bank(&a.bank).to_string();
            caller.check(right, &bank)?;
            match tool.name {
                "memory_audit" => value(ok(backend.audit(&bank))?),
                "memory_health" => value(ok(backend.health(&bank))?),
                _ => value(ok(backend.stats(&bank))?),
            }
        }
        other => Err(ToolError::invalid(format!("name: no tool {other:?}"))),
    }
}

/// What a caller that may write a bank but not read it learns of a write: that it was taken.
/// Not what became of it — "reinforced" or "superseded" would tell it what the bank holds.
fn accepted(bank: &str) -> Value {
    json!({"action": "accepted", "bank": bank, "reason": "written; this principal may not read the bank, so what became of it is not shown"})
}

/// The banks of a several-bank search the caller may read, and those skipped.
fn readable(caller: &Caller, banks: Vec<String>) -> Result<(Vec<String>, Vec<String>), ToolError> {
    let (mut readable, mut skipped) = (Vec::new(), Vec::new());
    for bank in banks {
        hindsight_types::validate_bank_id(&bank).map_err(ToolError::invalid)?;
        if readable.contains(&bank) || skipped.contains(&bank) {
            return Err(ToolError::invalid(format!("banks: {bank:?} is listed twice")));
        }
        if caller.may(Right::Read, &bank) {
            readable.push(bank);
        } else {
            skipped.push(bank);
        }
    }
    if readable.is_empty() {
        return Err(match caller.principal {
            Some(p) if !skipped.is_empty() => ToolError::new(
                ErrorKind::Denied,
                format!("principal {:?} may read none of the banks {}", p.name(), skipped.join(", ")),
            ),
            _ => ToolError::invalid("banks: must name at least one bank"),
        });
    }
    Ok((readable, skipped))
}

fn summarize<B: Backend>(backend: &mut B, caller: &Caller, args: &Value) -> Result<Value, ToolError> {
    let a: SummarizeArgs = parse(args)?;
    let bank = caller.bank(&a.bank).to_string();
    caller.check(Right::Write, &bank)?;
    let outcome = Outcome::parse("outcome", &a.outcome).map_err(ToolError::invalid)?;
    let end = EndTask { outcome, detail: a.detail, force: a.force.unwrap_or(false) };
    // Lessons marked for sharing go to the shared bank only when the caller may write there
    // (the engine checks the rest: the bank's setting and what may be shared at all).
    let may_share = caller.may(Right::Write, &backend.shared_bank().map_err(ToolError::from_backend)?);
    let trajectory = a.goal.is_some() || a.steps.is_some() || a.facts.is_some();
    let ended = match (a.task_id, trajectory) {
        (Some(_), true) => {
            return Err(ToolError::invalid(
                "task_id: give either task_id (to end that task) or goal and steps (a trajectory), not both",
            ))
        }
        (Some(id), false) => backend.end_task(&bank, &id, end, may_share),
        (None, _) => {
            let goal = a.goal.ok_or_else(|| {
                ToolError::invalid("goal: missing (or give task_id to end a task that was begun)")
            })?;
            let mut steps = Vec::new();
            for (i, s) in a.steps.unwrap_or_default().into_iter().enumerate() {
                let kind =
                    StepKind::parse(&format!("steps[{i}].type"), &s.kind).map_err(ToolError::invalid)?;
                steps.push(Step { tool: s.tool, error: s.error.unwrap_or(false), ..Step::new(kind, s.text) });
            }
            let trajectory = Trajectory {
                goal,
                task_type: a.task_type,
                agent_id: caller.agent(),
                steps,
                facts: a.facts.unwrap_or_default(),
                end,
            };
            backend.distill(&bank, trajectory, may_share)
        }
    };
    let ended = ended.map_err(ToolError::from_backend)?;
    let mut shown = summary(ended);
    if !caller.may(Right::Read, &bank) {
        // A lesson may have been reinforced into what the bank holds, or superseded something:
        // the caller sees what it wrote, not what became of it.
        if let Some(items) = shown.get_mut("items").and_then(Value::as_array_mut) {
            for item in items {
                *item = json!({"content": item["content"], "kind": item["kind"], "bank": item["bank"], "action": "accepted"});
            }
        }
    }
    with_usage(shown, backend)
}

/// `result` with what the call cost under `usage`, when the backend says.
fn with_usage<B: Backend>(mut result: Value, backend: &mut B) -> Result<Value, ToolError> {
    if let (Some(usage), Value::Object(map)) = (backend.last_usage(), &mut result) {
        map.insert("usage".into(), value(usage)?);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    //! The dispatcher over a backend that records what it is asked: each tool's right, what a
    //! caller that may write a bank but not read it learns, and the caller's name on writes.

    use std::collections::BTreeMap;

    use hindsight_types::{Kind, Principals, RetainAction, Score, Status};

    use super::*;

    /// A backend holding one memory per bank ("m1"), answering every call with it.
    #[derive(Default)]
    struct Fake {
        calls: Vec<String>,
        written: Vec<Memory>,
    }

    #[derive(Debug)]
    struct Never;
    impl std::fmt::Display for Never {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("never")
        }
    }
    impl Failure for Never {
        fn kind(&self) -> ErrorKind {
            ErrorKind::Store
        }
        fn message(&self) -> String {
            "never".into()
        }
    }

    fn secret(bank: &str) -> MemoryRecord {
        MemoryRecord {
            id: "m1".into(),
            kind: Kind::Semantic,
            content: format!("The VPN secret of {bank} is PURPLE-OCTOPUS-77"),
            task_type: None,
            task_description: Some("onboard ACME (private contract #4471)".into()),
            context: None,
            tags: vec![],
            scope: hindsight_types::Scope::GLOBAL,
            agent_id: None,
            importance: 0.5,
            confidence: 0.5,
            source: hindsight_types::Source::UserExplicit,
            failure_type: None,
            occurred_at: 0,
            created_at: 0,
            updated_at: 0,
            last_accessed_at: None,
            access_count: 0,
            status: Status::Active,
            supersedes: vec![],
            superseded_by: None,
            valid_until: None,
            metadata: vec![],
            embedding_model: "m".into(),
            conflicts_with: vec![],
            reinforcements: 0,
        }
    }

    fn outcome() -> RetainOutcome {
        RetainOutcome {
            id: Some("m1".into()),
            action: RetainAction::Reinforced,
            related: Some("m0".into()),
            reason: "a duplicate of m1 (The VPN secret is PURPLE-OCTOPUS-77)".into(),
        }
    }

    impl Backend for Fake {
        type Error = Never;
        fn retain(&mut self, bank: &str, item: Memory) -> Result<RetainOutcome, Never> {
            self.calls.push(format!("retain {bank}"));
            self.written.push(item);
            Ok(outcome())
        }
        fn recall(&mut self, banks: &[String], _: Query) -> Result<RecallResult, Never> {
            self.calls.push(format!("recall {}", banks.join(",")));
            let items = banks
                .iter()
                .map(|b| hindsight_types::Recalled {
                    memory: secret(b),
                    score: Score::default(),
                    conflicting: vec![],
                    possibly_stale: false,
                    in_prompt: true,
                    bank: b.clone(),
                    handle: None,
                })
                .collect();
            Ok(RecallResult { items, prompt: String::new(), skipped_banks: vec![] })
        }
        fn forget(&mut self, bank: &str, _: &str) -> Result<(), Never> {
            self.calls.push(format!("forget {bank}"));
            Ok(())
        }
        fn erase(&mut self, bank: &str, _: &str) -> Result<Erasure, Never> {
            self.calls.push(format!("erase {bank}"));
            Ok(Erasure { memories: vec![format!("{bank}/m1"), "other/m9".into()], ..Erasure::default() })
        }
        fn feedback(
            &mut self,
            bank: &str,
            _: &[String],
            _: FeedbackOutcome,
        ) -> Result<Vec<MemoryRecord>, Never> {
            self.calls.push(format!("feedback {bank}"));
            Ok(vec![secret(bank)])
        }
        fn used(&mut self, bank: &str, _: &[String], _: Option<&str>) -> Result<Vec<MemoryRecord>, Never> {
            self.calls.push(format!("used {bank}"));
            Ok(vec![secret(bank)])
        }
        fn end_task(&mut self, bank: &str, _: &str, _: EndTask, may_share: bool) -> Result<TaskEnd, Never> {
            self.calls.push(format!("end_task {bank} {may_share}"));
            Err(Never)
        }
        fn distill(&mut self, bank: &str, _: Trajectory, may_share: bool) -> Result<TaskEnd, Never> {
            self.calls.push(format!("distill {bank} {may_share}"));
            Err(Never)
        }
        fn delete_task(&mut self, bank: &str, _: &str) -> Result<(), Never> {
            self.calls.push(format!("delete_task {bank}"));
            Ok(())
        }
        fn history(&mut self, bank: &str, _: &str) -> Result<Vec<HistoryEntry>, Never> {
            self.calls.push(format!("history {bank}"));
            Ok(vec![])
        }
        fn get(&mut self, bank: &str, _: &str) -> Result<MemoryRecord, Never> {
            self.calls.push(format!("get {bank}"));
            Ok(secret(bank))
        }
        fn list(&mut self, bank: &str, _: ListQuery) -> Result<ListPage, Never> {
            self.calls.push(format!("list {bank}"));
            Ok(ListPage { items: vec![secret(bank)], next_cursor: None, total: 1 })
        }
        fn correct(
            &mut self,
            bank: &str,
            _: &str,
            _: &str,
            agent: Option<&str>,
        ) -> Result<Correction, Never> {
            self.calls.push(format!("correct {bank} {}", agent.unwrap_or("-")));
            let cascade = vec![hindsight_types::Cascaded { id: "m7".into(), before: 0.9, after: 0.8 }];
            Ok(Correction {
                memory: MemoryRecord { id: "m2".into(), ..secret(bank) },
                superseded: "m1".into(),
                cascade,
            })
        }
        fn explain(&mut self, bank: &str, _: &str) -> Result<Explanation, Never> {
            self.calls.push(format!("explain {bank}"));
            Err(Never)
        }
        fn audit(&mut self, bank: &str) -> Result<Audit, Never> {
            self.calls.push(format!("audit {bank}"));
            Err(Never)
        }
        fn health(&mut self, bank: &str) -> Result<HealthReport, Never> {
            self.calls.push(format!("health {bank}"));
            Err(Never)
        }
        fn stats(&mut self, bank: &str) -> Result<Stats, Never> {
            self.calls.push(format!("stats {bank}"));
            Err(Never)
        }
        fn restore(&mut self, bank: &str, _: &str) -> Result<MemoryRecord, Never> {
            self.calls.push(format!("restore {bank}"));
            Ok(secret(bank))
        }
        fn unsupersede(&mut self, bank: &str, _: &str) -> Result<MemoryRecord, Never> {
            self.calls.push(format!("unsupersede {bank}"));
            Ok(secret(bank))
        }
        fn share(&mut self, bank: &str, _: &str, to: &str) -> Result<RetainOutcome, Never> {
            self.calls.push(format!("share {bank} {to}"));
            Ok(outcome())
        }
        fn banks(&mut self) -> Result<Vec<String>, Never> {
            Ok(vec!["agent:coder".into(), "shared".into(), "agent:support".into()])
        }
        fn shared_bank(&mut self) -> Result<String, Never> {
            Ok("shared".into())
        }
    }

    fn principals() -> Principals {
        Principals::from_json(
            r#"{"principals": [
                {"name": "coder", "token": "coder-token-0123456789", "read": ["agent:coder", "shared"], "write": ["agent:coder"]},
                {"name": "dropbox", "token": "dropbox-token-0123456789", "read": [], "write": ["shared"]}
            ]}"#,
        )
        .unwrap()
    }

    fn run(principal: &str, tool: &str, args: Value) -> (Result<Value, ToolError>, Fake) {
        let principals = principals();
        let p = principals.authenticate(&format!("{principal}-token-0123456789")).unwrap().clone();
        let caller = Caller { principal: Some(&p), default_bank: "agent:coder" };
        let mut fake = Fake::default();
        let out = call(&mut fake, &caller, tool, &args);
        (out, fake)
    }

    /// The arguments each tool is called with on `bank`.
    fn args(tool: &str, bank: &str) -> Value {
        match tool {
            "memory_write" => json!({"content": "a note", "bank": bank}),
            "memory_search" => json!({"query": "vpn", "bank": bank}),
            "memory_summarize" => json!({"goal": "g", "outcome": "success", "bank": bank}),
            "memory_feedback" => json!({"ids": ["m1"], "outcome": "success", "bank": bank}),
            "memory_task_delete" => json!({"task_id": "t1", "bank": bank}),
            "memory_share" => json!({"id": "m1", "to": "agent:elsewhere", "bank": bank}),
            "memory_list" | "memory_audit" | "memory_health" | "memory_stats" => json!({"bank": bank}),
            "memory_correct" => json!({"id": "m1", "text": "fixed", "bank": bank}),
            "memory_banks" => json!({}),
            _ => json!({"id": "m1", "bank": bank}),
        }
    }

    #[test]
    fn every_tool_is_denied_without_its_right_and_calls_nothing() {
        for tool in TOOLS {
            // coder may read but not write `shared`; dropbox may write `shared` and read nothing.
            let (caller, bank) = match tool.access {
                Access::Read | Access::Share => ("dropbox", "shared"),
                Access::Write => ("coder", "shared"),
                Access::List => continue,
            };
            let (out, fake) = run(caller, tool.name, args(tool.name, bank));
            let err = out.expect_err(tool.name);
            assert_eq!(err.kind, ErrorKind::Denied, "{}: {err}", tool.name);
            assert!(err.message.contains(r#"bank "shared""#), "{}: {err}", tool.name);
            assert!(fake.calls.is_empty(), "{}: {:?}", tool.name, fake.calls);
        }
    }

    #[test]
    fn every_tool_runs_with_its_right() {
        for tool in TOOLS {
            let args = match tool.name {
                // From a bank coder may read to one it may write.
                "memory_share" => json!({"id": "m1", "bank": "shared", "to": "agent:coder"}),
                name => args(name, "agent:coder"),
            };
            let (out, fake) = run("coder", tool.name, args);
            if let Err(e) = &out {
                assert_eq!(e.kind, ErrorKind::Store, "{}: {e}", tool.name);
            }
            assert!(tool.access == Access::List || !fake.calls.is_empty(), "{}", tool.name);
        }
    }

    /// Hard edge 0.2 #1: a principal that may write a bank but not read it learns nothing of
    /// what the bank holds from what a write tool answers.
    #[test]
    fn finding_0_2_01_a_write_only_principal_reads_nothing_through_write_tools() {
        for tool in
            ["memory_write", "memory_feedback", "memory_correct", "memory_restore", "memory_unsupersede"]
        {
            let (out, _) = run("dropbox", tool, args(tool, "shared"));
            let text = out.unwrap_or_else(|e| panic!("{tool}: {e}")).to_string();
            for leak in ["PURPLE-OCTOPUS", "m0", "m7", "reinforced", "duplicate", "#4471"] {
                assert!(!text.contains(leak), "{tool} shows {leak}: {text}");
            }
        }
        // The same calls by a principal that may read the bank show what became of them.
        let (out, _) = run("coder", "memory_write", args("memory_write", "agent:coder"));
        assert_eq!(out.unwrap()["action"], "reinforced");
    }

    #[test]
    fn what_a_principal_writes_carries_its_name() {
        let (_, fake) = run("coder", "memory_write", json!({"content": "a note"}));
        assert_eq!(fake.written[0].agent_id.as_deref(), Some("coder"));
        let (_, fake) = run("coder", "memory_write", json!({"content": "a note", "agent_id": "planner"}));
        assert_eq!(fake.written[0].agent_id.as_deref(), Some("planner"));
        let (_, fake) = run("coder", "memory_correct", args("memory_correct", "agent:coder"));
        assert_eq!(fake.calls, ["correct agent:coder coder"]);
    }

    #[test]
    fn a_search_over_several_banks_skips_and_names_the_unreadable_ones() {
        let (out, fake) = run(
            "coder",
            "memory_search",
            json!({"query": "vpn", "banks": ["agent:coder", "agent:support", "shared"]}),
        );
        let v = out.unwrap();
        assert_eq!(v["skipped_banks"], json!(["agent:support"]));
        assert_eq!(fake.calls, ["recall agent:coder,shared"]);
        let (out, _) = run("dropbox", "memory_search", json!({"query": "vpn", "banks": ["shared"]}));
        assert_eq!(out.unwrap_err().kind, ErrorKind::Denied);
        let (out, _) = run("coder", "memory_search", json!({"query": "vpn", "banks": ["shared", "shared"]}));
        assert!(out.unwrap_err().message.contains("listed twice"));
    }

    #[test]
    fn lessons_are_shared_only_by_a_caller_that_may_write_the_shared_bank() {
        let (_, fake) = run("coder", "memory_summarize", args("memory_summarize", "agent:coder"));
        assert_eq!(fake.calls, ["distill agent:coder false"]);
    }

    #[test]
    fn banks_lists_only_what_the_caller_may_read() {
        let (out, _) = run("coder", "memory_banks", json!({}));
        assert_eq!(out.unwrap()["banks"], json!(["agent:coder", "shared"]));
        let (out, _) = run("dropbox", "memory_banks", json!({}));
        assert_eq!(out.unwrap()["banks"], json!([]));
    }

    #[test]
    fn a_bad_argument_names_the_field() {
        let (out, _) = run("coder", "memory_search", json!({"query": "x", "k": -5}));
        let err = out.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        assert!(err.message.starts_with("arguments:"), "{err}");
        let (out, _) = run("coder", "memory_feedback", json!({"ids": ["m1"], "outcome": "great"}));
        assert!(out.unwrap_err().message.contains("outcome"));
    }

    #[test]
    fn the_instructions_name_only_tools_the_table_has() {
        let named: BTreeMap<&str, bool> = crate::INSTRUCTIONS
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("memory_"))
            .map(|w| (w, tool(w).is_some()))
            .collect();
        assert!(!named.is_empty() && named.values().all(|&known| known), "{named:?}");
    }
}
