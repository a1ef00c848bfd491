//! The MCP server: the bank API as Model Context Protocol tools, over stdio (`hindsight mcp`) or
//! streamable HTTP (`hindsight serve --http`). Every call runs on the library's pool (each bank on
//! its own instance); an engine error or a bad argument comes back as a tool error naming the
//! field, which the calling model can read and act on.

use std::net::SocketAddr;

use hindsight::{Bank, EndTask, FeedbackOutcome, Hindsight, Named, Outcome, Step, StepKind};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_handler, tool_router, RoleServer, ServerHandler, ServiceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

use hindsight_mcp::{describe, list_query, summary, INSTRUCTIONS};
pub use hindsight_mcp::{
    BankArgs, CorrectArgs, FeedbackArgs, ForgetArgs, HistoryArgs, ListArgs, NoArgs, SearchArgs, ShareArgs,
    SummarizeArgs, TaskDeleteArgs, WriteArgs,
};

use crate::error::{CliError, CliResult};

mod auth;
mod frame;
mod http;
mod panel;
mod stdio;

pub use auth::Auth;

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
    #[tool(description = describe::MEMORY_WRITE)]
    async fn memory_write(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<WriteArgs>>,
    ) -> CallToolResult {
        let (bank, item) = match hindsight_mcp::write_item(&args.raw) {
            Ok(parsed) => parsed,
            Err(message) => return tool_error(message),
        };
        self.on_bank(&ctx, bank, move |b| Ok(b.retain([item])?.remove(0))).await
    }

    #[tool(description = describe::MEMORY_SEARCH)]
    async fn memory_search(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<SearchArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        let query = match a.to_query() {
            Ok(query) => query,
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

    #[tool(description = describe::MEMORY_SUMMARIZE)]
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

    #[tool(description = describe::MEMORY_FORGET)]
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

    #[tool(description = describe::MEMORY_FEEDBACK)]
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

    #[tool(description = describe::MEMORY_TASK_DELETE)]
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

    #[tool(description = describe::MEMORY_HISTORY)]
    async fn memory_history(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| Ok(json!({"entries": b.history(&a.id)?}))).await
    }

    #[tool(description = describe::MEMORY_SHARE)]
    async fn memory_share(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<ShareArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.share(&a.id, &a.to)).await
    }

    #[tool(description = describe::MEMORY_LIST)]
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

    #[tool(description = describe::MEMORY_GET)]
    async fn memory_get(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.get(&a.id)).await
    }

    #[tool(description = describe::MEMORY_CORRECT)]
    async fn memory_correct(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<CorrectArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.correct(&a.id, &a.text)).await
    }

    #[tool(description = describe::MEMORY_EXPLAIN)]
    async fn memory_explain(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.explain(&a.id)).await
    }

    #[tool(description = describe::MEMORY_AUDIT)]
    async fn memory_audit(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<BankArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.audit()).await
    }

    #[tool(description = describe::MEMORY_STATS)]
    async fn memory_stats(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<BankArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.stats()).await
    }

    #[tool(description = describe::MEMORY_RESTORE)]
    async fn memory_restore(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Args<HistoryArgs>>,
    ) -> CallToolResult {
        let a = parsed!(args);
        self.on_bank(&ctx, a.bank, move |b| b.restore(&a.id)).await
    }

    #[tool(description = describe::MEMORY_BANKS)]
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
                    .filter(|b| hs.principal().is_none_or(|p| p.may(hindsight::Right::Read, b)))
                    .collect();
                Ok(json!({"banks": banks}))
            })
            .await,
        )
    }

    #[tool(description = describe::MEMORY_UNSUPERSEDE)]
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
