//! The HTTP front: `GET /health`, and MCP's streamable HTTP transport on `POST /mcp`, answered
//! statelessly in JSON (every call names its bank, so no session is needed). Tokens, routes and
//! the tools' semantics live here; the wasi:http glue only moves bytes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hindsight_engine::embed::Embedder;
use hindsight_engine::settings::Settings;
use hindsight_engine::{recall_across, Bank, Engine};
use hindsight_mcp::{Backend, Caller, ToolError, INSTRUCTIONS};
use hindsight_types::{
    Audit, Correction, EndTask, Erasure, ErrorKind, Explanation, FeedbackOutcome, HealthReport, HistoryEntry,
    ListPage, ListQuery, Memory, MemoryRecord, Principal, Principals, Query, RecallResult, RetainOutcome,
    Stats, Store, StoreError, TaskEnd, Trajectory, Usage,
};
use serde_json::{json, Value};

use crate::file_store::FileStore;
use crate::warm::{self, Preloaded};

/// The largest request body read (as `hindsight serve --http`).
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// MCP protocol versions this front speaks; a client asking for another gets the newest.
const PROTOCOLS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub body: &'a [u8],
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    fn empty(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Vec::new() }
    }
}

/// Opens an instance's store, given the data directory: the data directory's `store/`
/// ([`FileStore`]) unless the glue opens another (Spin's SQLite, `SqlStore`).
pub type OpenStore = Box<dyn Fn(&Path) -> Result<Arc<dyn Store>, StoreError>>;

/// One instance's engine and open banks. The data directory holds `auth.json`, optionally
/// `model.onnx` and `tokenizer.json` (when they are not the preloaded model) and `settings.json`,
/// and the file store (`store/`).
pub struct Edge {
    data: PathBuf,
    engine: Option<Engine>,
    open_store: OpenStore,
    store: Option<Arc<dyn Store>>,
    banks: HashMap<String, Bank>,
    default_bank: String,
    llm: Option<std::rc::Rc<dyn hindsight_types::Llm>>,
    preloaded: Option<Preloaded>,
    /// What the last write, search or summary cost (the tools add it to their result).
    usage: Option<Usage>,
}

fn engine_error(e: hindsight_engine::Error) -> ToolError {
    ToolError::from_backend(e)
}

fn store_error(e: StoreError) -> ToolError {
    ToolError::new(ErrorKind::Store, e.to_string())
}

impl Edge {
    /// An instance over `data`; the engine loads on the first MCP request (so `/health` answers
    /// at once), then stays for as long as the host keeps the instance.
    pub fn new(data: impl Into<PathBuf>) -> Edge {
        Edge {
            data: data.into(),
            engine: None,
            open_store: Box::new(|data| Ok(Arc::new(FileStore::open(data.join("store"))?))),
            store: None,
            banks: HashMap::new(),
            default_bank: "default".into(),
            llm: None,
            preloaded: None,
            usage: None,
        }
    }

    /// Keeps the banks in the store `open` gives instead of the data directory's `store/`.
    pub fn with_store(mut self, open: OpenStore) -> Edge {
        self.open_store = open;
        self
    }

    /// The embedder to use instead of loading the data directory's model files, when they are
    /// absent or the same files it was loaded from.
    pub fn with_preloaded(mut self, preloaded: Option<Preloaded>) -> Edge {
        self.preloaded = preloaded;
        self
    }

    /// The language model the engine is given when it loads.
    pub fn with_llm(mut self, llm: std::rc::Rc<dyn hindsight_types::Llm>) -> Edge {
        self.llm = Some(llm);
        self
    }

    /// The engine, loading it (model, tokenizer, settings) the first time.
    fn engine(&mut self) -> Result<&Engine, ToolError> {
        if self.engine.is_none() {
            let settings = match std::fs::read_to_string(self.data.join("settings.json")) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(ToolError::new(ErrorKind::Config, format!("settings.json: {e}"))),
            };
            let settings = Settings::from_json(&settings)
                .map_err(|e| e.within("settings.json"))
                .map_err(ToolError::invalid)?;
            // Kept when it does not serve: an instance's untouched snapshot pages cost no memory.
            let embedder = match self.preloaded.take_if(|warm| warm.serves(&self.data)) {
                Some(warm) => warm.into_embedder(),
                None => Embedder::load(
                    &warm::read(&self.data, warm::MODEL).map_err(|e| ToolError::new(ErrorKind::Model, e))?,
                    &warm::read(&self.data, warm::TOKENIZER)
                        .map_err(|e| ToolError::new(ErrorKind::Model, e))?,
                )
                .map_err(engine_error)?,
            };
            let mut engine = Engine::from_embedder(embedder, settings);
            if let Some(llm) = &self.llm {
                engine = engine.with_llm(llm.clone());
            }
            self.engine = Some(engine);
        }
        Ok(self.engine.as_ref().expect("loaded above"))
    }

    fn store(&mut self) -> Result<Arc<dyn Store>, ToolError> {
        match &self.store {
            Some(store) => {
                // Another instance may have committed since this one's last request.
                store.refresh().map_err(store_error)?;
                Ok(store.clone())
            }
            None => {
                let store = (self.open_store)(&self.data).map_err(store_error)?;
                self.store = Some(store.clone());
                Ok(store)
            }
        }
    }

    /// The principals of `auth.json`, read on every request so that a changed file applies at
    /// once; no file: nobody may call.
    fn principals(&self) -> Result<Option<Principals>, String> {
        match std::fs::read_to_string(self.data.join("auth.json")) {
            Ok(text) => Principals::from_json(&text)
                .map(Some)
                .map_err(|e| format!("auth.json: {}: {}", e.field, e.message)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("auth.json: {e}")),
        }
    }

    pub fn handle(&mut self, request: &Request) -> Reply {
        let path = request.path.split('?').next().unwrap_or("");
        match (request.method, path) {
            ("GET", "/health") => {
                Reply::json(200, &json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
            }
            (_, "/mcp") => {
                let principal = match self.authenticate(request.authorization) {
                    Ok(p) => p,
                    Err(why) => {
                        let mut reply =
                            Reply::json(401, &json!({"error": {"kind": "unauthorized", "message": why}}));
                        reply.headers.push(("www-authenticate", "Bearer".into()));
                        return reply;
                    }
                };
                match request.method {
                    "POST" => self.post(&principal, request.body),
                    // No server-initiated stream and no sessions to end.
                    _ => {
                        let mut reply = Reply::empty(405);
                        reply.headers.push(("allow", "POST".into()));
                        reply
                    }
                }
            }
            _ => Reply::json(404, &json!({"error": {"kind": "not-found", "message": "no such route"}})),
        }
    }

    fn authenticate(&self, header: Option<&str>) -> Result<Principal, String> {
        let Some(principals) = self.principals()? else {
            return Err("the server has no auth.json: every request is refused".into());
        };
        let token = header
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim);
        match token {
            None => Err("a bearer token is required".into()),
            Some(t) => {
                principals.authenticate(t).cloned().ok_or_else(|| "the bearer token is not valid".into())
            }
        }
    }

    fn post(&mut self, principal: &Principal, body: &[u8]) -> Reply {
        let message: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return Reply::json(400, &rpc_error(Value::Null, -32700, format!("request body: {e}"))),
        };
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // A response or anything else that is not a request: nothing to answer.
            return if message.is_object() {
                Reply::empty(202)
            } else {
                Reply::json(400, &rpc_error(Value::Null, -32600, "expected one JSON-RPC message"))
            };
        };
        let Some(id) = message.get("id").cloned() else {
            return Reply::empty(202); // a notification
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
                let version = PROTOCOLS.iter().find(|v| **v == asked).unwrap_or(&PROTOCOLS[0]);
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hindsight", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": INSTRUCTIONS,
                })
            }
            "ping" => json!({}),
            "tools/list" => hindsight_mcp::tools_list(),
            "tools/call" => {
                let Some(name) = params.get("name").and_then(Value::as_str) else {
                    return Reply::json(200, &rpc_error(id, -32602, "params.name: missing"));
                };
                if hindsight_mcp::tool(name).is_none() {
                    return Reply::json(
                        200,
                        &rpc_error(id, -32602, format!("params.name: no tool {name:?}")),
                    );
                }
                let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
                if !args.is_object() {
                    return Reply::json(200, &rpc_error(id, -32602, "params.arguments: expected an object"));
                }
                let default_bank = self.default_bank.clone();
                let caller = Caller { principal: Some(principal), default_bank: &default_bank };
                match hindsight_mcp::call(self, &caller, name, &args) {
                    Ok(value) => json!({
                        "content": [{"type": "text", "text": value.to_string()}],
                        "structuredContent": value,
                        "isError": false,
                    }),
                    Err(e) => json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true}),
                }
            }
            other => return Reply::json(200, &rpc_error(id, -32601, format!("method not found: {other}"))),
        };
        Reply::json(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// The open bank `id` (opened on first use).
    fn bank(&mut self, id: &str) -> Result<&mut Bank, ToolError> {
        let store = self.store()?;
        if !self.banks.contains_key(id) {
            let bank = self.engine()?.open_bank(id, Box::new(store)).map_err(engine_error)?;
            self.banks.insert(id.to_string(), bank);
        }
        Ok(self.banks.get_mut(id).expect("opened above"))
    }
}

/// The tools run on the engine directly; `hindsight_mcp::call` has checked the caller's rights
/// on every bank before any of these.
impl Backend for Edge {
    type Error = ToolError;

    fn retain(&mut self, bank: &str, item: Memory) -> Result<RetainOutcome, ToolError> {
        let now = hindsight_types::time::now();
        let b = self.bank(bank)?;
        let outcome = b.metered("retain", |b| b.retain(vec![item], now));
        self.usage = Some(b.last_usage());
        outcome
            .map_err(engine_error)?
            .into_iter()
            .next()
            .ok_or_else(|| ToolError::new(ErrorKind::Corrupt, "retain returned no outcome"))
    }

    fn recall(&mut self, ids: &[String], query: Query) -> Result<RecallResult, ToolError> {
        for id in ids {
            self.bank(id)?;
        }
        let mut taken: Vec<Bank> =
            ids.iter().map(|id| self.banks.remove(id).expect("opened above")).collect();
        let result = {
            let mut refs: Vec<&mut Bank> = taken.iter_mut().collect();
            refs[0].begin_metered("recall");
            let result = recall_across(&mut refs, query);
            refs[0].end_metered(result.is_ok());
            self.usage = Some(refs[0].last_usage());
            result
        };
        for (id, bank) in ids.iter().cloned().zip(taken) {
            self.banks.insert(id, bank);
        }
        result.map_err(engine_error)
    }

    fn forget(&mut self, bank: &str, id: &str) -> Result<(), ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.forget(id, now).map_err(engine_error)
    }

    fn erase(&mut self, bank: &str, id: &str) -> Result<Erasure, ToolError> {
        let now = hindsight_types::time::now();
        // An erasure reaches the copies in other banks: the banks open here were opened before
        // it and must catch up with it (their next call syncs them).
        let receipt = self.bank(bank)?.erase(id, now).map_err(engine_error)?;
        Ok(receipt)
    }

    fn feedback(
        &mut self,
        bank: &str,
        ids: &[String],
        outcome: FeedbackOutcome,
    ) -> Result<Vec<MemoryRecord>, ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.feedback(ids, outcome, now).map_err(engine_error)
    }

    fn used(
        &mut self,
        bank: &str,
        ids: &[String],
        task_id: Option<&str>,
    ) -> Result<Vec<MemoryRecord>, ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.report_used(ids, task_id.map(str::to_string), now).map_err(engine_error)
    }

    fn end_task(
        &mut self,
        bank: &str,
        task_id: &str,
        end: EndTask,
        may_share: bool,
    ) -> Result<TaskEnd, ToolError> {
        let now = hindsight_types::time::now();
        let b = self.bank(bank)?;
        let ended = b.metered("task_end", |b| b.end_task(task_id, end, may_share, now));
        self.usage = Some(b.last_usage());
        ended.map_err(engine_error)
    }

    fn distill(&mut self, bank: &str, trajectory: Trajectory, may_share: bool) -> Result<TaskEnd, ToolError> {
        let now = hindsight_types::time::now();
        let b = self.bank(bank)?;
        let ended = b.metered("distill", |b| b.distill_trajectory(trajectory, may_share, now));
        self.usage = Some(b.last_usage());
        ended.map_err(engine_error)
    }

    fn delete_task(&mut self, bank: &str, task_id: &str) -> Result<(), ToolError> {
        self.bank(bank)?.delete_task(task_id).map_err(engine_error)
    }

    fn history(&mut self, bank: &str, id: &str) -> Result<Vec<HistoryEntry>, ToolError> {
        self.bank(bank)?.history(id).map_err(engine_error)
    }

    fn get(&mut self, bank: &str, id: &str) -> Result<MemoryRecord, ToolError> {
        self.bank(bank)?.get(id).map_err(engine_error)
    }

    fn list(&mut self, bank: &str, query: ListQuery) -> Result<ListPage, ToolError> {
        self.bank(bank)?.list(&query).map_err(engine_error)
    }

    fn correct(
        &mut self,
        bank: &str,
        id: &str,
        text: &str,
        agent: Option<&str>,
    ) -> Result<Correction, ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.correct(id, text, agent, now).map_err(engine_error)
    }

    fn explain(&mut self, bank: &str, id: &str) -> Result<Explanation, ToolError> {
        self.bank(bank)?.explain(id).map_err(engine_error)
    }

    fn audit(&mut self, bank: &str) -> Result<Audit, ToolError> {
        self.bank(bank)?.audit().map_err(engine_error)
    }

    fn last_usage(&mut self) -> Option<Usage> {
        self.usage
    }

    fn health(&mut self, bank: &str) -> Result<HealthReport, ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.health(now).map_err(engine_error)
    }

    fn stats(&mut self, bank: &str) -> Result<Stats, ToolError> {
        self.bank(bank)?.stats().map_err(engine_error)
    }

    fn restore(&mut self, bank: &str, id: &str) -> Result<MemoryRecord, ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.restore(id, now).map_err(engine_error)
    }

    fn unsupersede(&mut self, bank: &str, id: &str) -> Result<MemoryRecord, ToolError> {
        let now = hindsight_types::time::now();
        self.bank(bank)?.unsupersede(id, now).map_err(engine_error)
    }

    fn share(&mut self, bank: &str, id: &str, to: &str) -> Result<RetainOutcome, ToolError> {
        if to == bank {
            return Err(ToolError::invalid(format!(
                "to: {id} is in {to} already: share it into another bank"
            )));
        }
        let m = self.get(bank, id)?;
        if m.status != hindsight_types::Status::Active {
            return Err(ToolError::invalid(format!(
                "id: {id} is {}: only an active memory is shared",
                m.status
            )));
        }
        self.retain(to, m.shared_copy(bank))
    }

    fn banks(&mut self) -> Result<Vec<String>, ToolError> {
        let store = self.store()?;
        self.engine()?.banks(&*store).map_err(engine_error)
    }

    fn shared_bank(&mut self) -> Result<String, ToolError> {
        Ok(self.engine()?.settings().spaces.shared_bank.clone())
    }
}

fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "edge-test-token-0123456789";

    fn edge_with_auth() -> (Edge, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("hindsight-edge-front-{}-{}", std::process::id(), line!()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("auth.json"),
            format!(r#"{{"principals": [{{"name": "t", "token": "{TOKEN}", "read": ["*"], "write": ["agent:*"]}}]}}"#),
        )
        .unwrap();
        (Edge::new(&dir), dir)
    }

    fn post(edge: &mut Edge, auth: Option<&str>, body: &str) -> Reply {
        edge.handle(&Request { method: "POST", path: "/mcp", authorization: auth, body: body.as_bytes() })
    }

    #[test]
    fn a_request_needs_a_principals_token() {
        let (mut edge, _dir) = edge_with_auth();
        let init =
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#;
        assert_eq!(post(&mut edge, None, init).status, 401);
        assert_eq!(post(&mut edge, Some("Bearer not-the-token-at-all"), init).status, 401);
        let ok = post(&mut edge, Some(&format!("Bearer {TOKEN}")), init);
        assert_eq!(ok.status, 200);
        let v: Value = serde_json::from_slice(&ok.body).unwrap();
        assert_eq!(v["result"]["protocolVersion"], "2025-03-26");
        let health = edge.handle(&Request { method: "GET", path: "/health", authorization: None, body: b"" });
        assert_eq!(health.status, 200);
    }

    #[test]
    fn without_auth_json_every_mcp_request_is_refused() {
        let dir = std::env::temp_dir().join(format!("hindsight-edge-noauth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut edge = Edge::new(&dir);
        let reply =
            post(&mut edge, Some(&format!("Bearer {TOKEN}")), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(reply.status, 401);
        assert!(String::from_utf8_lossy(&reply.body).contains("no auth.json"));
    }

    #[test]
    fn tools_list_names_every_tool_of_the_shared_table() {
        let (mut edge, _dir) = edge_with_auth();
        let reply = post(
            &mut edge,
            Some(&format!("Bearer {TOKEN}")),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        );
        let v: Value = serde_json::from_slice(&reply.body).unwrap();
        let tools = v["result"]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), hindsight_mcp::TOOLS.len());
        for tool in tools {
            assert!(!tool["description"].as_str().unwrap().is_empty(), "{tool}");
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        }
    }
}
