//! The MCP server: the bank API as Model Context Protocol tools, over stdio (`hindsight mcp`) or
//! streamable HTTP (`hindsight serve --http`). Every call runs on the library's pool (each bank on
//! its own instance); an engine error or a bad argument comes back as a tool error naming the
//! field, which the calling model can read and act on.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use hindsight::{
    Bank, EndTask, FeedbackOutcome, Hindsight, Kind, Memory, Named, Outcome, Query, Scope, Step, StepKind,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_handler, tool_router, RoleServer, ServerHandler, ServiceExt};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

use crate::error::{CliError, CliResult};

mod auth;
mod frame;
mod http;
mod panel;
mod stdio;

pub use auth::Auth;

const INSTRUCTIONS: &str = "Long-term memory across tasks. Before a task, call memory_search with \
what you are about to do and put the returned `prompt` block in your context. While or after \
working, memory_write what is worth keeping: what worked, what failed and why, the user's \
constraints and preferences — one self-contained statement each. memory_summarize ends a task \
(or takes a whole trajectory) and keeps its lessons; memory_feedback says whether recalled \
memories helped; memory_forget removes one; memory_history shows what replaced what, and \
memory_unsupersede undoes a wrong replacement.";

/// Tool arguments, parsed inside the call so that a wrong argument is a tool error naming the
/// field (which the model can correct) rather than a protocol error. The raw value is kept.
pub struct Args<T> {
    parsed: Result<T, String>,
    raw: Value,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Args<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        Ok(Args { parsed: serde_json::from_value(raw.clone()).map_err(|e| format!("arguments: {e}")), raw })
    }
}

impl<T: JsonSchema> JsonSchema for Args<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

fn one_of<T: Named>() -> Schema {
    let names: Vec<&str> = T::ALL.iter().map(|v| v.as_str()).collect();
    json_schema!({"type": "string", "enum": names})
}
fn kind_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<Kind>()
}
fn kinds_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = Kind::ALL.iter().map(|v| v.as_str()).collect();
    json_schema!({"type": "array", "items": {"type": "string", "enum": names}})
}
fn source_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<hindsight::Source>()
}
fn scope_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<hindsight::ScopeLevel>()
}
fn failure_type_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<hindsight::FailureType>()
}
fn feedback_schema(_: &mut SchemaGenerator) -> Schema {
    let mut names: Vec<&str> = FeedbackOutcome::ALL.iter().map(|v| v.as_str()).collect();
    names.push("used");
    json_schema!({"type": "string", "enum": names})
}
fn task_outcome_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<Outcome>()
}
fn step_kind_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<StepKind>()
}

/// The schema of `memory_write`'s arguments; they are read by `Memory::from_json` (one home for
/// an item's fields), so these fields are only described, never read.
#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The memory: one self-contained statement another task can act on, e.g. "pandas.read_csv
    /// needs encoding='utf-8-sig' for the vendor's CSV export (headers were garbled otherwise)".
    pub content: String,
    /// episodic: something that happened (the default); semantic: a fact, constraint or
    /// preference; procedural: how to do something.
    #[serde(default)]
    #[schemars(schema_with = "kind_schema")]
    pub kind: Option<String>,
    /// 0 to 1: how much it matters for future tasks. Low-importance text may be filtered out.
    pub importance: Option<f64>,
    /// 0 to 1: how sure this is.
    pub confidence: Option<f64>,
    /// Where it came from: user-explicit (the user said so), user-feedback, agent-inference,
    /// tool-result, imported.
    #[serde(default)]
    #[schemars(schema_with = "source_schema")]
    pub source: Option<String>,
    /// The kind of task it applies to, e.g. "data-cleaning"; search favours the same task type.
    pub task_type: Option<String>,
    /// The task it came from, in a sentence.
    pub task_description: Option<String>,
    /// Free-form labels; search can require them.
    pub tags: Option<Vec<String>>,
    /// global (the default), project or session.
    #[serde(default)]
    #[schemars(schema_with = "scope_schema")]
    pub scope: Option<String>,
    /// Which project or session, with scope project or session.
    pub scope_id: Option<String>,
    /// String key-value pairs kept with the memory.
    pub metadata: Option<BTreeMap<String, String>>,
    /// For a failure: transient (may work on a retry) or permanent.
    #[serde(default)]
    #[schemars(schema_with = "failure_type_schema")]
    pub failure_type: Option<String>,
    /// When it happened (ISO 8601); default now.
    pub occurred_at: Option<String>,
    /// After this (ISO 8601) it is no longer recalled.
    pub valid_until: Option<String>,
    /// The agent writing it.
    pub agent_id: Option<String>,
    /// Store exactly as given: skip the write filter, duplicate, merge and conflict checks.
    pub force: Option<bool>,
    /// Valid beside any memory it contradicts: both are kept and flagged as conflicting.
    pub parallel: Option<bool>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What you are about to do or want to know, in plain words.
    pub query: String,
    /// Search several banks at once, ranked together, private first (e.g. ["agent:coder",
    /// "shared"]); each item names its bank. Instead of `bank`.
    pub banks: Option<Vec<String>>,
    /// How many memories to return (default: the server's recall.default_k, 5).
    pub k: Option<u32>,
    /// Only these kinds.
    #[serde(default)]
    #[schemars(schema_with = "kinds_schema")]
    pub kinds: Option<Vec<String>>,
    /// The current task's type: memories of the same type score higher.
    pub task_type: Option<String>,
    /// Only memories carrying all these tags.
    pub tags: Option<Vec<String>>,
    /// Only this scope: global, project or session.
    #[serde(default)]
    #[schemars(schema_with = "scope_schema")]
    pub scope: Option<String>,
    /// Which project or session, with scope.
    pub scope_id: Option<String>,
    /// Also return memories that newer ones replaced.
    pub include_superseded: Option<bool>,
    /// The task you are working on (from memory_summarize's task or `hindsight task begin`): the
    /// prompt's [m1]-style handles are the task's; cite the ones you rely on in your answer.
    pub task_id: Option<String>,
    /// "Now" for recency (ISO 8601), when replaying something that happened at another time;
    /// default: the wall clock.
    pub now: Option<String>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskDeleteArgs {
    /// The task's id: its record (steps, facts, notes) is erased for good.
    pub task_id: String,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepArgs {
    /// thought, tool-call, tool-result, user-message or answer.
    #[serde(rename = "type")]
    #[schemars(schema_with = "step_kind_schema")]
    pub kind: String,
    /// What was thought, called, returned, said or answered.
    pub text: String,
    /// The tool, for tool-call and tool-result.
    pub tool: Option<String>,
    /// A tool result that is an error.
    pub error: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizeArgs {
    /// End this task (begun with `hindsight task begin`); or leave it out and pass `goal` and
    /// `steps`.
    pub task_id: Option<String>,
    /// How the task ended: success, failure or interrupted.
    #[schemars(schema_with = "task_outcome_schema")]
    pub outcome: String,
    /// What happened at the end, in a sentence (e.g. the error that stopped it).
    pub detail: Option<String>,
    /// For a trajectory: what the task set out to do.
    pub goal: Option<String>,
    /// For a trajectory: the kind of task, e.g. "data-cleaning".
    pub task_type: Option<String>,
    /// For a trajectory: the steps in order.
    pub steps: Option<Vec<StepArgs>>,
    /// For a trajectory: facts that were confirmed along the way.
    pub facts: Option<Vec<String>>,
    /// Distil even a short or uneventful task.
    pub force: Option<bool>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The memory's id.
    pub id: String,
    /// false (the default): soft — archived, no longer recalled, restorable; true: hard — erased
    /// from the store for good.
    pub hard: Option<bool>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackArgs {
    /// The ids of the recalled memories this is about.
    pub ids: Vec<String>,
    /// success (following them worked: confidence up), failure (confidence down), correction
    /// (the user corrected them: confidence halved), or used (you relied on them: counted as
    /// cited, confidence unchanged).
    #[schemars(schema_with = "feedback_schema")]
    pub outcome: String,
    /// With outcome used: the task they were used in.
    pub task_id: Option<String>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// The memory's id.
    pub id: String,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShareArgs {
    /// The memory to copy.
    pub id: String,
    /// The bank to copy it into, e.g. "shared".
    pub to: String,
    /// The bank it is in; default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only this kind.
    #[serde(default)]
    #[schemars(schema_with = "kind_schema")]
    pub kind: Option<String>,
    /// active (the default), superseded, merged, archived, or any.
    pub status: Option<String>,
    /// Only memories carrying this tag.
    pub tag: Option<String>,
    /// Only this task type.
    pub task_type: Option<String>,
    /// Only this source.
    #[serde(default)]
    #[schemars(schema_with = "source_schema")]
    pub source: Option<String>,
    /// Only memories whose content contains this text (case-insensitive).
    pub text: Option<String>,
    /// newest (the default) or most_recalled first.
    pub order: Option<String>,
    /// At most this many, 1 to 1000 (default 50).
    pub limit: Option<u32>,
    /// The previous page's next_cursor.
    pub cursor: Option<String>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrectArgs {
    /// The memory that is wrong.
    pub id: String,
    /// What is true instead: it replaces the memory (source user-feedback), and similar memories
    /// lose confidence.
    pub text: String,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BankArgs {
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Clone)]
pub struct MemoryServer {
    hs: Hindsight,
    default_bank: String,
    /// Requests reach the tools only with a principal (`serve --http --auth`).
    auth_required: bool,
    tool_router: ToolRouter<Self>,
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// The argument struct, or the tool error that names what is wrong with it.
macro_rules! parsed {
    ($args:expr) => {
        match $args.parsed {
            Ok(a) => a,
            Err(message) => return tool_error(message),
        }
    };
}

/// What `memory_summarize` answers: what became of the task's lessons, and the task in brief —
/// never its whole step log, which can be large and was the caller's to begin with.
fn summary(end: hindsight::TaskEnd) -> Value {
    let t = &end.task;
    json!({
        "method": end.method,
        "reason": end.reason,
        "items": end.items,
        "task": {
            "id": t.id, "goal": t.goal, "outcome": t.outcome, "version": t.version,
            "steps": t.steps.len(), "tool_calls": t.tool_calls.len(), "facts": t.confirmed_facts.len(),
        },
    })
}

/// A blocking call's value as the tool's structured result, or its error as a tool error.
fn structured<T: Serialize>(done: Result<hindsight::Result<T>, tokio::task::JoinError>) -> CallToolResult {
    match done {
        Ok(Ok(value)) => CallToolResult::structured(serde_json::to_value(value).expect("results serialise")),
        Ok(Err(e)) => tool_error(engine_error(e)),
        Err(e) => tool_error(format!("the call failed in the server: {e}")),
    }
}

/// An engine error as the calling model should read it: for one item, the field without the
/// batch's item index.
fn engine_error(e: hindsight::Error) -> String {
    match e {
        hindsight::Error::InvalidInput { field, message, .. } => format!("invalid input: {field}: {message}"),
        other => other.to_string(),
    }
}

impl MemoryServer {
    pub fn new(hs: Hindsight, default_bank: String, auth_required: bool) -> MemoryServer {
        MemoryServer { hs, default_bank, auth_required, tool_router: Self::tool_router() }
    }

    /// Runs `f` on the bank (off the async threads: engine calls block) as the request's
    /// principal, when the server has one for it; its value is the tool's structured result.
    async fn on_bank<T: Serialize + Send + 'static>(
        &self,
        ctx: &RequestContext<RoleServer>,
        bank: Option<String>,
        f: impl FnOnce(Bank) -> hindsight::Result<T> + Send + 'static,
    ) -> CallToolResult {
        let bank =
            match self.caller(ctx).and_then(|hs| hs.bank(bank.as_deref().unwrap_or(&self.default_bank))) {
                Ok(bank) => bank,
                Err(e) => return tool_error(engine_error(e)),
            };
        structured(tokio::task::spawn_blocking(move || f(bank)).await)
    }

    /// The library handle acting as the request's principal; with auth, none is denied.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> hindsight::Result<Hindsight> {
        match auth::principal(ctx) {
            Some(principal) => Ok(self.hs.as_principal(principal)),
            None if self.auth_required => {
                Err(hindsight::Error::Denied("the request carries no principal's token".into()))
            }
            None => Ok(self.hs.clone()),
        }
    }
}

#[tool_router]
impl MemoryServer {
    #[tool(
        description = "Keep a memory for future tasks: what worked, what failed and why, a user's constraint or preference. Returns what became of it: action created, reinforced (a duplicate), merged, superseded (it replaced an older memory that it contradicts) or filtered (not worth keeping), with the memory's id and the reason."
    )]
    async fn memory_write(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<WriteArgs>>,
    ) -> CallToolResult {
        let bank = match args.raw.get("bank") {
            None | Some(Value::Null) => None,
            Some(Value::String(b)) => Some(b.clone()),
            Some(other) => return tool_error(format!("bank: expected a string, got {other}")),
        };
        let mut fields = args.raw;
        if let Some(map) = fields.as_object_mut() {
            map.remove("bank");
        }
        let item = match Memory::from_json(&fields) {
            Ok(item) => item,
            Err(e) => return tool_error(format!("invalid input: {e}")),
        };
        self.on_bank(&ctx, bank, move |b| Ok(b.retain([item])?.remove(0))).await
    }

    #[tool(
        description = "Recall the memories that matter for a task or question, best first, scored by meaning, keywords, recency, confidence and source. Returns `items` (each with id, content, kind, score breakdown, and flags for conflicting or possibly stale memories) and `prompt`, a block ready to put in your context."
    )]
    async fn memory_search(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<SearchArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        let mut query = Query::new(a.query);
        query.k = a.k;
        query.task_type = a.task_type;
        query.tags = a.tags.unwrap_or_default();
        query.include_superseded = a.include_superseded.unwrap_or(false);
        query.task_id = a.task_id;
        for (i, k) in a.kinds.unwrap_or_default().iter().enumerate() {
            match Kind::parse(&format!("kinds[{i}]"), k) {
                Ok(kind) => query.kinds.push(kind),
                Err(e) => return tool_error(format!("invalid input: {e}")),
            }
        }
        query.scope = match Scope::parse("scope", a.scope.as_deref(), a.scope_id) {
            Ok(scope) => scope,
            Err(e) => return tool_error(format!("invalid input: {e}")),
        };
        query.now = match a.now.as_deref().map(|t| hindsight::time::parse_iso("now", t)).transpose() {
            Ok(now) => now,
            Err(e) => return tool_error(format!("invalid input: {e}")),
        };
        match a.banks {
            Some(_) if a.bank.is_some() => tool_error("banks: give either bank or banks, not both"),
            Some(banks) => {
                let hs = match self.caller(&ctx) {
                    Ok(hs) => hs,
                    Err(e) => return tool_error(engine_error(e)),
                };
                structured(tokio::task::spawn_blocking(move || hs.recall(banks, query)).await)
            }
            None => self.on_bank(&ctx, a.bank, move |b| b.recall(query)).await,
        }
    }

    #[tool(
        description = "End a task and keep its lessons (hindsight): give task_id and outcome, or pass a whole trajectory (goal, steps, outcome) to distil. Uses the host's language model when one is configured, rules otherwise. Returns the method, the reason, and each candidate memory with what became of it."
    )]
    async fn memory_summarize(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<SummarizeArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        let outcome = match Outcome::parse("outcome", &a.outcome) {
            Ok(o) => o,
            Err(e) => return tool_error(format!("invalid input: {e}")),
        };
        let mut end = EndTask::new(outcome);
        end.force = a.force.unwrap_or(false);
        end.detail = a.detail;
        let trajectory = a.goal.is_some() || a.steps.is_some() || a.facts.is_some();
        match (a.task_id, trajectory) {
            (Some(_), true) => tool_error(
                "task_id: give either task_id (to end that task) or goal and steps (a trajectory), not both",
            ),
            (Some(id), false) => {
                self.on_bank(&ctx, a.bank, move |b| Ok(summary(b.resume_task(&id)?.end(end)?))).await
            }
            (None, _) => {
                let Some(goal) = a.goal else {
                    return tool_error("goal: missing (or give task_id to end a task that was begun)");
                };
                let mut steps = Vec::new();
                for (i, s) in a.steps.unwrap_or_default().into_iter().enumerate() {
                    let kind = match StepKind::parse(&format!("steps[{i}].type"), &s.kind) {
                        Ok(k) => k,
                        Err(e) => return tool_error(format!("invalid input: {e}")),
                    };
                    steps.push(Step {
                        tool: s.tool,
                        error: s.error.unwrap_or(false),
                        ..Step::new(kind, s.text)
                    });
                }
                let facts = a.facts.unwrap_or_default();
                let mut new = hindsight::NewTask::new(goal);
                new.task_type = a.task_type;
                self.on_bank(&ctx, a.bank, move |b| {
                    let task = b.begin_task(new)?;
                    let filled = steps
                        .into_iter()
                        .try_for_each(|step| task.step(step).map(drop))
                        .and_then(|()| facts.into_iter().try_for_each(|fact| task.fact(fact).map(drop)));
                    if let Err(e) = filled {
                        // A trajectory is kept whole or not at all: no half-filled open task.
                        let _ = b.delete_task(task.id());
                        return Err(e);
                    }
                    Ok(summary(task.end(end)?))
                })
                .await
            }
        }
    }

    #[tool(
        description = "Forget a memory by id: soft (the default) archives it — no longer recalled, restorable; hard erases it from the store."
    )]
    async fn memory_forget(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<ForgetArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        let hard = a.hard.unwrap_or(false);
        self.on_bank(&ctx, a.bank, move |b| {
            if hard {
                b.forget_hard(&a.id)?;
            } else {
                b.forget(&a.id)?;
            }
            Ok(json!({"id": a.id, "forgotten": if hard { "hard" } else { "soft" }}))
        })
        .await
    }

    #[tool(
        description = "Say how recalled memories worked out: success (following them worked), failure (it did not) or correction (the user corrected them). Adjusts their confidence; returns the updated memories."
    )]
    async fn memory_feedback(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<FeedbackArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        if a.outcome.trim() == "used" {
            return self
                .on_bank(&ctx, a.bank, move |b| Ok(json!({"memories": b.used(a.ids, a.task_id.as_deref())?})))
                .await;
        }
        let outcome = match FeedbackOutcome::parse("outcome", &a.outcome) {
            Ok(o) => o,
            Err(e) => return tool_error(format!("invalid input: {e}; or used")),
        };
        self.on_bank(&ctx, a.bank, move |b| Ok(json!({"memories": b.feedback(a.ids, outcome)?}))).await
    }

    #[tool(
        description = "Erase a task's working memory (its steps, facts and notes) for good, e.g. when it holds a secret. Memories distilled from it stay (forget those with memory_forget)."
    )]
    async fn memory_task_delete(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<TaskDeleteArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| {
            b.delete_task(&a.task_id)?;
            Ok(json!({"task_id": a.task_id, "deleted": "hard"}))
        })
        .await
    }

    #[tool(
        description = "The history of a memory: the memories it replaced or absorbed and what replaced it, with times (event created, superseded, merged or archived)."
    )]
    async fn memory_history(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| Ok(json!({"entries": b.history(&a.id)?}))).await
    }

    #[tool(
        description = "Share a memory: copy it into another bank (e.g. a shared space other agents recall from) through that bank's duplicate, update and conflict checks; the copy's metadata.shared_from names the bank and id it came from. Returns what became of the copy."
    )]
    async fn memory_share(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<ShareArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.share(&a.id, &a.to)).await
    }

    #[tool(
        description = "List a bank's memories by kind, status, tag, task type, source and a text filter, newest or most recalled first, a page at a time: returns items, next_cursor (pass it back as cursor for the next page) and total."
    )]
    async fn memory_list(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<ListArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        let query = match list_query(&a) {
            Ok(q) => q,
            Err(e) => return tool_error(format!("invalid input: {e}")),
        };
        self.on_bank(&ctx, a.bank, move |b| b.list(query)).await
    }

    #[tool(
        description = "One memory by id, whatever its status (active, superseded, merged or archived), with all its fields."
    )]
    async fn memory_get(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.get(&a.id)).await
    }

    #[tool(
        description = "Correct a wrong memory: the given text replaces it as a new memory (source user-feedback, high confidence) that supersedes it, and active memories close to the old content lose some confidence. Returns the new memory, the superseded id, and every memory whose confidence was lowered (cascade)."
    )]
    async fn memory_correct(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<CorrectArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.correct(&a.id, &a.text)).await
    }

    #[tool(
        description = "Explain a memory: where it came from (source, agent, the task it was distilled from with its steps, the episodes it was consolidated from, what it replaced), every feedback event, and every recall that returned it, with counts (recalled, cited, helpful)."
    )]
    async fn memory_explain(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.explain(&a.id)).await
    }

    #[tool(
        description = "Audit a bank from its recall log: memories recalled often but never cited or helpful (never_useful), never recalled, and the most useful."
    )]
    async fn memory_audit(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<BankArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.audit()).await
    }

    #[tool(
        description = "Counts of a bank's memories by status and kind, its embedding model and stored format."
    )]
    async fn memory_stats(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<BankArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.stats()).await
    }

    #[tool(description = "Bring an archived (softly forgotten) memory back. Returns the memory.")]
    async fn memory_restore(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.restore(&a.id)).await
    }

    #[tool(description = "The banks in the store (those the caller may read, with auth).")]
    async fn memory_banks(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<NoArgs>>,
    ) -> CallToolResult {
        let _ = parsed!(args);
        let hs = match self.caller(&ctx) {
            Ok(hs) => hs,
            Err(e) => return tool_error(engine_error(e)),
        };
        structured(
            tokio::task::spawn_blocking(move || {
                let banks: Vec<String> = hs
                    .banks()?
                    .into_iter()
                    .filter(|b| hs.principal().is_none_or(|p| p.check(hindsight::Right::Read, b).is_ok()))
                    .collect();
                Ok(json!({"banks": banks}))
            })
            .await,
        )
    }

    #[tool(
        description = "Undo a wrong supersede: a superseded memory (see memory_history) becomes active again and is kept beside the memory that replaced it, both flagged as conflicting, so the same pair is not superseded again. Returns the memory."
    )]
    async fn memory_unsupersede(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.unsupersede(&a.id)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hindsight", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// The `list` query `memory_list`'s arguments describe.
fn list_query(a: &ListArgs) -> Result<hindsight::ListQuery, hindsight::FieldError> {
    let mut q = hindsight::ListQuery {
        tag: a.tag.clone(),
        task_type: a.task_type.clone(),
        text: a.text.clone(),
        limit: a.limit,
        cursor: a.cursor.clone(),
        ..Default::default()
    };
    q.kind = a.kind.as_deref().map(|k| Kind::parse("kind", k)).transpose()?;
    q.source = a.source.as_deref().map(|s| hindsight::Source::parse("source", s)).transpose()?;
    if let Some(status) = &a.status {
        q = q.status_named(status)?;
    }
    if let Some(order) = a.order.as_deref() {
        q.order = hindsight::ListOrder::parse("order", &order.replace('_', "-"))?;
    }
    Ok(q)
}

fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("config", format!("starting the async runtime: {e}")))
}

/// `127.0.0.1:8765`, `localhost:0`, `[::1]:8765`: the first address it resolves to.
pub fn parse_addr(text: &str) -> CliResult<SocketAddr> {
    use std::net::ToSocketAddrs;
    let mut addrs = text.to_socket_addrs().map_err(|e| {
        CliError::field("http", format!("{text:?} is not an address to listen on (e.g. 127.0.0.1:8765): {e}"))
    })?;
    addrs.next().ok_or_else(|| CliError::field("http", format!("{text:?} resolves to no address")))
}

/// Serves MCP on stdin/stdout until the client closes them; then checkpoints the store.
pub fn serve_stdio(hs: Hindsight, default_bank: String) -> CliResult<()> {
    let server = MemoryServer::new(hs.clone(), default_bank, false);
    let served = runtime()?.block_on(async move {
        let (transport, writer) = stdio::filtered();
        let running = server
            .serve(transport)
            .await
            .map_err(|e| CliError::new("config", format!("starting the MCP server: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| CliError::new("config", format!("the MCP server stopped: {e}")))?;
        let _ = writer.await;
        Ok(())
    });
    hs.close()?;
    served
}

/// Serves MCP over streamable HTTP at `/mcp` (and `GET /health`) until Ctrl-C or SIGTERM; then
/// checkpoints the store.
pub fn serve_http(hs: Hindsight, default_bank: String, addr: SocketAddr, auth: Auth) -> CliResult<()> {
    let server = MemoryServer::new(hs.clone(), default_bank.clone(), auth.required());
    let panel_state = panel::PanelState { hs: hs.clone(), default_bank, auth_required: auth.required() };
    let served = runtime()?.block_on(async move {
        let mut config = StreamableHttpServerConfig::default();
        // Browsers send `Origin`: only pages served from this machine may talk to the server.
        config.allowed_origins =
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"].map(String::from).to_vec();
        let config = config.enforce_origin_validation();
        let stop = config.cancellation_token.clone();
        let sessions = std::sync::Arc::new(http::CappedSessions::new(http::MAX_SESSIONS));
        let service: StreamableHttpService<MemoryServer, http::CappedSessions> =
            StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(sessions, http::reject_malformed))
            .route("/export", axum::routing::get(panel::export).with_state(panel_state))
            // Outermost: a request without a valid token goes no further.
            .layer(axum::middleware::from_fn_with_state(auth.clone(), auth::require_token))
            .route("/health", axum::routing::get(|| async { "ok" }))
            // The panel's page holds no data: it asks for a token, then calls /mcp with it.
            .route("/", axum::routing::get(panel::page));
        auth.reload_on_hangup();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::new("config", format!("listening on {addr}: {e}")))?;
        let bound = listener.local_addr().map_err(|e| CliError::new("config", e.to_string()))?;
        eprintln!("hindsight: MCP over streamable HTTP at http://{bound}/mcp{}", auth.describe());
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown_signal().await;
                stop.cancel();
            })
            .await
            .map_err(|e| CliError::new("config", format!("serving HTTP: {e}")))
    });
    hs.close()?;
    served
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return ctrl_c.await.unwrap_or(()),
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
