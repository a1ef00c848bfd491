//! The MCP server: the tools of `hindsight-mcp` over stdio (`hindsight mcp`) or streamable HTTP
//! (`hindsight serve --http`). rmcp moves the messages; `hindsight_mcp::call` checks rights and
//! runs each tool on the library (each bank on its own instance), off the async threads. An
//! engine error or a bad argument comes back as a tool error naming the field, which the calling
//! model can read and act on.

use std::net::SocketAddr;

use hindsight::{
    types::{
        Audit, Correction, EndTask, Erasure, Explanation, FeedbackOutcome, HealthReport, HistoryEntry,
        ListPage, ListQuery, MemoryRecord, RecallResult, RetainOutcome, Stats, TaskEnd, Trajectory, Usage,
    },
    Hindsight, Memory, Query,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use hindsight_mcp::{Backend, Caller, INSTRUCTIONS, TOOLS};

use crate::error::{CliError, CliResult};

mod auth;
mod frame;
mod http;
mod listen;
mod panel;
mod stdio;

pub use auth::Auth;
pub use listen::Listen;

/// The library as the tools' backend: a handle acting as the request's principal (when the
/// server has one for it), so the library checks each call's right again.
struct Library(Hindsight, Option<Usage>);

impl Backend for Library {
    type Error = hindsight::Error;

    fn retain(&mut self, bank: &str, item: Memory) -> hindsight::Result<RetainOutcome> {
        let b = self.0.bank(bank)?;
        let outcome = b.retain([item])?.remove(0);
        self.1 = b.last_usage();
        Ok(outcome)
    }
    fn recall(&mut self, banks: &[String], query: Query) -> hindsight::Result<RecallResult> {
        match banks {
            [one] => {
                let b = self.0.bank(one)?;
                let result = b.recall(query);
                self.1 = b.last_usage();
                result
            }
            several => self.0.recall(several.iter().cloned(), query),
        }
    }
    fn forget(&mut self, bank: &str, id: &str) -> hindsight::Result<()> {
        self.0.bank(bank)?.forget(id)
    }
    fn erase(&mut self, bank: &str, id: &str) -> hindsight::Result<Erasure> {
        self.0.bank(bank)?.forget_hard(id)
    }
    fn feedback(
        &mut self,
        bank: &str,
        ids: &[String],
        outcome: FeedbackOutcome,
    ) -> hindsight::Result<Vec<MemoryRecord>> {
        self.0.bank(bank)?.feedback(ids.iter().cloned(), outcome)
    }
    fn used(
        &mut self,
        bank: &str,
        ids: &[String],
        task_id: Option<&str>,
    ) -> hindsight::Result<Vec<MemoryRecord>> {
        self.0.bank(bank)?.used(ids.iter().cloned(), task_id)
    }
    fn end_task(
        &mut self,
        bank: &str,
        task_id: &str,
        end: EndTask,
        _may_share: bool,
    ) -> hindsight::Result<TaskEnd> {
        let b = self.0.bank(bank)?;
        let ended = b.resume_task(task_id)?.end(end);
        self.1 = b.last_usage();
        ended
    }
    fn distill(
        &mut self,
        bank: &str,
        trajectory: Trajectory,
        _may_share: bool,
    ) -> hindsight::Result<TaskEnd> {
        let b = self.0.bank(bank)?;
        let ended = b.distill(trajectory);
        self.1 = b.last_usage();
        ended
    }
    fn delete_task(&mut self, bank: &str, task_id: &str) -> hindsight::Result<()> {
        self.0.bank(bank)?.delete_task(task_id)
    }
    fn history(&mut self, bank: &str, id: &str) -> hindsight::Result<Vec<HistoryEntry>> {
        self.0.bank(bank)?.history(id)
    }
    fn get(&mut self, bank: &str, id: &str) -> hindsight::Result<MemoryRecord> {
        self.0.bank(bank)?.get(id)
    }
    fn list(&mut self, bank: &str, query: ListQuery) -> hindsight::Result<ListPage> {
        self.0.bank(bank)?.list(query)
    }
    fn correct(
        &mut self,
        bank: &str,
        id: &str,
        text: &str,
        _agent: Option<&str>,
    ) -> hindsight::Result<Correction> {
        self.0.bank(bank)?.correct(id, text)
    }
    fn explain(&mut self, bank: &str, id: &str) -> hindsight::Result<Explanation> {
        self.0.bank(bank)?.explain(id)
    }
    fn audit(&mut self, bank: &str) -> hindsight::Result<Audit> {
        self.0.bank(bank)?.audit()
    }
    fn last_usage(&mut self) -> Option<Usage> {
        self.1
    }
    fn health(&mut self, bank: &str) -> hindsight::Result<HealthReport> {
        self.0.bank(bank)?.health()
    }
    fn stats(&mut self, bank: &str) -> hindsight::Result<Stats> {
        self.0.bank(bank)?.stats()
    }
    fn restore(&mut self, bank: &str, id: &str) -> hindsight::Result<MemoryRecord> {
        self.0.bank(bank)?.restore(id)
    }
    fn unsupersede(&mut self, bank: &str, id: &str) -> hindsight::Result<MemoryRecord> {
        self.0.bank(bank)?.unsupersede(id)
    }
    fn share(&mut self, bank: &str, id: &str, to: &str) -> hindsight::Result<RetainOutcome> {
        self.0.bank(bank)?.share(id, to)
    }
    fn banks(&mut self) -> hindsight::Result<Vec<String>> {
        self.0.banks()
    }
    fn shared_bank(&mut self) -> hindsight::Result<String> {
        Ok(self.0.shared_bank().to_string())
    }
}

#[derive(Clone)]
pub struct MemoryServer {
    hs: Hindsight,
    default_bank: String,
    /// Requests reach the tools only with a principal (`serve --http --auth`).
    auth_required: bool,
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl MemoryServer {
    pub fn new(hs: Hindsight, default_bank: String, auth_required: bool) -> MemoryServer {
        MemoryServer { hs, default_bank, auth_required }
    }

    /// Runs tool `name` as the request's principal, off the async threads (engine calls block).
    async fn run(&self, ctx: &RequestContext<RoleServer>, name: String, args: Value) -> CallToolResult {
        let principal = auth::principal(ctx);
        if principal.is_none() && self.auth_required {
            return tool_error("denied: the request carries no principal's token");
        }
        let hs = match &principal {
            Some(p) => self.hs.as_principal(p.clone()),
            None => self.hs.clone(),
        };
        let default_bank = self.default_bank.clone();
        let done = tokio::task::spawn_blocking(move || {
            let caller = Caller { principal: principal.as_ref(), default_bank: &default_bank };
            hindsight_mcp::call(&mut Library(hs, None), &caller, &name, &args)
        })
        .await;
        match done {
            Ok(Ok(value)) => CallToolResult::structured(value),
            Ok(Err(e)) => tool_error(e.to_string()),
            Err(e) => tool_error(format!("the call failed in the server: {e}")),
        }
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hindsight", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(TOOLS.iter().map(rmcp_tool).collect()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        hindsight_mcp::tool(name).map(rmcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if hindsight_mcp::tool(&request.name).is_none() {
            return Err(McpError::invalid_params(format!("no tool {:?}", request.name), None));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.run(&context, request.name.into_owned(), args).await.into())
    }
}

/// A tool of the table as rmcp lists it.
fn rmcp_tool(tool: &hindsight_mcp::Tool) -> Tool {
    let schema: JsonObject = match (tool.schema)() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(tool.name, tool.description, schema)
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
    hs.checkpoint()?;
    served
}

/// Serves MCP over streamable HTTP at `/mcp` (and `GET /health`) until Ctrl-C or SIGTERM; then
/// checkpoints the store.
pub fn serve_http(hs: Hindsight, default_bank: String, listen: Listen, auth: Auth) -> CliResult<()> {
    let server = MemoryServer::new(hs.clone(), default_bank.clone(), auth.required());
    let panel_state = panel::PanelState { hs: hs.clone(), default_bank, auth_required: auth.required() };
    let served = runtime()?.block_on(async move {
        let mut config = StreamableHttpServerConfig::default();
        // Against DNS rebinding, `Host` must name this machine, the address listened on or a
        // `--public-host`; a browser's `Origin`, a page served from one of them.
        config.allowed_hosts = listen.hosts.clone();
        config.allowed_origins = listen.origins.clone();
        let config = config.enforce_origin_validation();
        let stop = config.cancellation_token.clone();
        let sessions = std::sync::Arc::new(http::CappedSessions::new(http::MAX_SESSIONS));
        let gate = std::sync::Arc::new(http::Gate::new(sessions.clone(), listen.read_timeout));
        let service: StreamableHttpService<MemoryServer, http::CappedSessions> =
            StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(gate, http::guard))
            .route("/export", axum::routing::get(panel::export).with_state(panel_state))
            // Outermost: a request without a valid token goes no further.
            .layer(axum::middleware::from_fn_with_state(auth.clone(), auth::require_token))
            .route("/health", axum::routing::get(|| async { "ok" }))
            // The panel's page holds no data: it asks for a token, then calls /mcp with it.
            .route("/", axum::routing::get(panel::page));
        auth.reload_on_hangup();
        let addr = listen.addr;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::new("config", format!("listening on {addr}: {e}")))?;
        let bound = listener.local_addr().map_err(|e| CliError::new("config", e.to_string()))?;
        eprintln!("hindsight: MCP over streamable HTTP at http://{bound}/mcp{}", auth.describe());
        listen::serve(listener, router, listen.read_timeout, async move {
            shutdown_signal().await;
            stop.cancel();
        })
        .await;
        Ok(())
    });
    hs.checkpoint()?;
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
