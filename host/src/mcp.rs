//! The MCP server: the bank API as Model Context Protocol tools, over stdio (`hindsight mcp`) or
//! streamable HTTP (`hindsight serve --http`). Every call runs on the bank's instance in the
//! pool (bank affinity); an engine error or a bad argument comes back as a tool error with the
//! engine's message, which the calling model can read and act on.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Map, Value};

use crate::convert::{self, RetainLine};
use crate::pool::Pool;
use crate::types::{RecallQuery, Step, TaskUpdate};
use crate::{CallError, Host};

const INSTRUCTIONS: &str = "Long-term memory across tasks. Before a task, call memory_search with \
what you are about to do and put the returned `prompt` block in your context. While or after \
working, memory_write what is worth keeping: what worked, what failed and why, the user's \
constraints and preferences — one self-contained statement each. memory_summarize ends a task \
(or takes a whole trajectory) and keeps its lessons; memory_feedback says whether recalled \
memories helped; memory_forget removes one; memory_history shows what replaced what.";

/// Tool arguments, parsed inside the call so that a wrong argument is a tool error naming the
/// field (which the model can correct) rather than a protocol error.
pub struct Args<T>(Result<T, String>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Args<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(Args(serde_json::from_value(value).map_err(|e| format!("arguments: {e}"))))
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

fn one_of(names: &[&str]) -> Schema {
    json_schema!({"type": "string", "enum": names})
}
fn kind_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::KIND_NAMES)
}
fn kinds_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "string", "enum": convert::KIND_NAMES}})
}
fn source_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::SOURCE_NAMES)
}
fn scope_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::SCOPE_LEVEL_NAMES)
}
fn failure_type_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::FAILURE_TYPE_NAMES)
}
fn feedback_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::FEEDBACK_NAMES)
}
fn task_outcome_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::TASK_OUTCOME_NAMES)
}
fn step_kind_schema(_: &mut SchemaGenerator) -> Schema {
    one_of(convert::STEP_KIND_NAMES)
}

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
    /// Store exactly as given: skip the write filter, duplicate, merge and conflict checks.
    pub force: Option<bool>,
    /// The memory bank (tenant); default: the server's --bank.
    pub bank: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What you are about to do or want to know, in plain words.
    pub query: String,
    /// How many memories to return (default 5).
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
    /// success (following them worked: confidence up), failure (confidence down) or correction
    /// (the user corrected them: confidence halved).
    #[schemars(schema_with = "feedback_schema")]
    pub outcome: String,
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

#[derive(Clone)]
pub struct MemoryServer {
    pool: Arc<Pool>,
    default_bank: String,
    tool_router: ToolRouter<Self>,
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// The argument struct, or the tool error that names what is wrong with it.
macro_rules! parsed {
    ($args:expr) => {
        match $args.0 {
            Ok(a) => a,
            Err(message) => return tool_error(message),
        }
    };
}

impl MemoryServer {
    pub fn new(pool: Arc<Pool>, default_bank: String) -> MemoryServer {
        MemoryServer { pool, default_bank, tool_router: Self::tool_router() }
    }

    /// Runs `f` on the bank's instance; its value, shaped by `to_json`, is the tool's result.
    async fn on_bank<T: Send + 'static>(
        &self,
        bank: Option<String>,
        f: impl FnOnce(&mut Host, &str) -> Result<T, CallError> + Send + 'static,
        to_json: impl FnOnce(T) -> Value,
    ) -> CallToolResult {
        let bank = bank.unwrap_or_else(|| self.default_bank.clone());
        let key = bank.clone();
        match self.pool.run(&key, move |host| f(host, &bank)).await {
            Ok(Ok(value)) => CallToolResult::structured(to_json(value)),
            Ok(Err(e)) => tool_error(e.to_string()),
            Err(e) => tool_error(format!("{e:#}")),
        }
    }
}

#[tool_router]
impl MemoryServer {
    #[tool(
        description = "Keep a memory for future tasks: what worked, what failed and why, a user's constraint or preference. Returns what became of it: action created, reinforced (a duplicate), merged, superseded (it replaced an older memory that it contradicts) or filtered (not worth keeping), with the memory's id and the reason."
    )]
    async fn memory_write(&self, Parameters(args): Parameters<Args<WriteArgs>>) -> CallToolResult {
        let a = parsed!(args);
        let line = RetainLine {
            text: Some(a.content),
            kind: a.kind,
            importance: a.importance,
            confidence: a.confidence,
            source: a.source,
            task_type: a.task_type,
            task_description: a.task_description,
            context: None,
            tags: a.tags.map(|t| json!(t)),
            scope: a.scope,
            scope_id: a.scope_id,
            agent_id: None,
            failure_type: a.failure_type,
            at: a.occurred_at,
            valid_until: None,
            meta: a
                .metadata
                .map(|m| m.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<Map<_, _>>()),
            force: a.force.unwrap_or(false),
            parallel: false,
            vector: None,
        };
        let item = match line.into_new_memory() {
            Ok(item) => item,
            Err(e) => return tool_error(e.to_string()),
        };
        self.on_bank(
            a.bank,
            // The engine names fields of a batch ("items[0].importance"); here there is one item.
            move |host, bank| host.retain(bank, &[item], None).map_err(|e| e.without_item_prefix()),
            |outcomes| outcomes.first().map(convert::outcome_json).unwrap_or(Value::Null),
        )
        .await
    }

    #[tool(
        description = "Recall the memories that matter for a task or question, best first, scored by meaning, keywords, recency, confidence and source. Returns `items` (each with id, content, kind, score breakdown, and flags for conflicting or possibly stale memories) and `prompt`, a block ready to put in your context."
    )]
    async fn memory_search(&self, Parameters(args): Parameters<Args<SearchArgs>>) -> CallToolResult {
        let a = parsed!(args);
        let kinds = match a.kinds.unwrap_or_default().iter().map(|k| convert::parse_kind(k)).collect() {
            Ok(kinds) => kinds,
            Err(e) => return tool_error(format!("kinds: {e}")),
        };
        let scope = match convert::scope(a.scope.as_deref(), a.scope_id) {
            Ok(scope) => scope,
            Err(e) => return tool_error(e.to_string()),
        };
        let query = RecallQuery {
            kinds,
            scope,
            task_type: a.task_type,
            tags: a.tags.unwrap_or_default(),
            include_superseded: a.include_superseded.unwrap_or(false),
            ..convert::recall_query(&a.query, a.k.unwrap_or(5))
        };
        self.on_bank(a.bank, move |host, bank| host.recall(bank, &query), |r| convert::recall_json(&r)).await
    }

    #[tool(
        description = "End a task and keep its lessons (hindsight): give task_id and outcome, or pass a whole trajectory (goal, steps, outcome) to distil. Uses the host's language model when one is configured, rules otherwise. Returns the method, the reason, and each candidate memory with what became of it."
    )]
    async fn memory_summarize(&self, Parameters(args): Parameters<Args<SummarizeArgs>>) -> CallToolResult {
        let a = parsed!(args);
        let outcome = match convert::parse_task_outcome(&a.outcome) {
            Ok(o) => o,
            Err(e) => return tool_error(e.to_string()),
        };
        let force = a.force.unwrap_or(false);
        let detail = a.detail;
        let trajectory = a.goal.is_some() || a.steps.is_some() || a.facts.is_some();
        match (a.task_id, trajectory) {
            (Some(_), true) => tool_error(
                "task_id: give either task_id (to end that task) or goal and steps (a trajectory), not both",
            ),
            (Some(id), false) => {
                self.on_bank(
                    a.bank,
                    move |host, bank| host.task_end(bank, &id, outcome, detail.as_deref(), force, None),
                    |end| convert::task_end_json(&end),
                )
                .await
            }
            (None, _) => {
                let Some(goal) = a.goal else {
                    return tool_error("goal: missing (or give task_id to end a task that was begun)");
                };
                let now = chrono::Utc::now().timestamp_millis();
                let mut updates = Vec::new();
                for (i, s) in a.steps.unwrap_or_default().into_iter().enumerate() {
                    let kind = match convert::parse_step_kind(&s.kind) {
                        Ok(k) => k,
                        Err(e) => return tool_error(format!("steps[{i}].{e}")),
                    };
                    let step =
                        Step { at: now, kind, text: s.text, tool: s.tool, error: s.error.unwrap_or(false) };
                    updates.push(TaskUpdate::Step(step));
                }
                updates.extend(a.facts.unwrap_or_default().into_iter().map(TaskUpdate::Fact));
                let task_type = a.task_type;
                self.on_bank(
                    a.bank,
                    move |host, bank| {
                        let task = host.task_begin(bank, &goal, task_type.as_deref(), None)?;
                        for update in &updates {
                            host.task_update(bank, &task.id, update, None, None)?;
                        }
                        host.task_end(bank, &task.id, outcome, detail.as_deref(), force, None)
                    },
                    |end| convert::task_end_json(&end),
                )
                .await
            }
        }
    }

    #[tool(
        description = "Forget a memory by id: soft (the default) archives it — no longer recalled, restorable; hard erases it from the store."
    )]
    async fn memory_forget(&self, Parameters(args): Parameters<Args<ForgetArgs>>) -> CallToolResult {
        let a = parsed!(args);
        let hard = a.hard.unwrap_or(false);
        let id = a.id;
        let shown = id.clone();
        self.on_bank(
            a.bank,
            move |host, bank| host.forget(bank, &id, hard, None),
            move |()| json!({"id": shown, "forgotten": if hard { "hard" } else { "soft" }}),
        )
        .await
    }

    #[tool(
        description = "Say how recalled memories worked out: success (following them worked), failure (it did not) or correction (the user corrected them). Adjusts their confidence; returns the updated memories."
    )]
    async fn memory_feedback(&self, Parameters(args): Parameters<Args<FeedbackArgs>>) -> CallToolResult {
        let a = parsed!(args);
        let outcome = match convert::parse_feedback(&a.outcome) {
            Ok(o) => o,
            Err(e) => return tool_error(e.to_string()),
        };
        let ids = a.ids;
        self.on_bank(
            a.bank,
            move |host, bank| host.feedback(bank, &ids, outcome, None),
            |memories| json!({"memories": memories.iter().map(convert::memory_json).collect::<Vec<_>>()}),
        )
        .await
    }

    #[tool(
        description = "The history of a memory: the memories it replaced or absorbed and what replaced it, with times (event created, superseded, merged or archived)."
    )]
    async fn memory_history(&self, Parameters(args): Parameters<Args<HistoryArgs>>) -> CallToolResult {
        let a = parsed!(args);
        let id = a.id;
        self.on_bank(
            a.bank,
            move |host, bank| host.history(bank, &id),
            |entries| json!({"entries": entries.iter().map(convert::history_json).collect::<Vec<_>>()}),
        )
        .await
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

/// Serves MCP on stdin/stdout until the client closes them.
pub async fn serve_stdio(server: MemoryServer) -> anyhow::Result<()> {
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// Serves MCP over streamable HTTP at `/mcp` (and `GET /health`) until Ctrl-C or SIGTERM;
/// `ready` is told the bound address (port 0 picks a free one).
pub async fn serve_http(
    server: MemoryServer,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let config = StreamableHttpServerConfig::default();
    let stop = config.cancellation_token.clone();
    let service: StreamableHttpService<MemoryServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config);
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .route("/health", axum::routing::get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    ready(listener.local_addr()?);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            stop.cancel();
        })
        .await?;
    Ok(())
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
