//! The HTTP front: `GET /health`, and MCP's streamable HTTP transport on `POST /mcp`, answered
//! statelessly in JSON (every call names its bank, so no session is needed). Tokens, routes and
//! the tools' semantics live here; the wasi:http glue only moves bytes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hindsight_engine::embed::Embedder;
use hindsight_engine::settings::Settings;
use hindsight_engine::{recall_across, Bank, Engine, RecallQuery, Record};
use hindsight_mcp::{
    describe, list_query, BankArgs, CorrectArgs, FeedbackArgs, ForgetArgs, HistoryArgs, ListArgs, SearchArgs,
    INSTRUCTIONS,
};
use hindsight_types::{
    Correction, FeedbackOutcome, HistoryEntry, ListPage, MemoryRecord, Named, Principal, Principals, Query,
    RecallResult, Recalled, Right, Store, StoreError,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::file_store::FileStore;
use crate::sql_store::{Sql, SqlStore};
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

/// What an instance's banks are kept in: the data directory's `store/` ([`FileStore`]) unless the
/// glue opens another (Spin's SQLite, [`SqlStore`]).
pub trait EdgeStore: Store {
    /// Catches up on what other instances committed, before a request is answered (a store that
    /// reads through to its database has nothing to do).
    fn refresh(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl EdgeStore for FileStore {
    fn refresh(&self) -> Result<(), StoreError> {
        FileStore::refresh(self).map(|_| ())
    }
}

impl<C: Sql> EdgeStore for SqlStore<C> {}

/// Opens an instance's store, given the data directory.
pub type OpenStore = Box<dyn Fn(&Path) -> Result<Arc<dyn EdgeStore>, StoreError>>;

/// One instance's engine and open banks. The data directory holds `auth.json`, optionally
/// `model.onnx` and `tokenizer.json` (when they are not the preloaded model) and `settings.json`,
/// and the file store (`store/`).
pub struct Edge {
    data: PathBuf,
    engine: Option<Engine>,
    open_store: OpenStore,
    store: Option<Arc<dyn EdgeStore>>,
    banks: HashMap<String, Bank>,
    default_bank: String,
    llm: Option<std::rc::Rc<dyn hindsight_types::Llm>>,
    preloaded: Option<Preloaded>,
}

type ToolResult = Result<Value, String>;

fn engine_error(e: hindsight_engine::Error) -> String {
    match e {
        hindsight_engine::Error::InvalidInput(f) => format!("invalid input: {}: {}", f.field, f.message),
        other => other.to_string(),
    }
}

fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, String> {
    serde_json::from_value(args.clone()).map_err(|e| format!("arguments: {e}"))
}

fn public(records: Vec<Record>) -> Vec<MemoryRecord> {
    records.iter().map(Record::to_public).collect()
}

/// The tools this front offers, with the argument type whose schema `tools/list` shows.
fn tool_schemas() -> Vec<(&'static str, Value)> {
    use hindsight_mcp::input_schema as schema;
    vec![
        ("memory_write", schema::<hindsight_mcp::WriteArgs>()),
        ("memory_search", schema::<SearchArgs>()),
        ("memory_forget", schema::<ForgetArgs>()),
        ("memory_feedback", schema::<FeedbackArgs>()),
        ("memory_history", schema::<HistoryArgs>()),
        ("memory_list", schema::<ListArgs>()),
        ("memory_get", schema::<HistoryArgs>()),
        ("memory_correct", schema::<CorrectArgs>()),
        ("memory_stats", schema::<BankArgs>()),
        ("memory_restore", schema::<HistoryArgs>()),
        ("memory_unsupersede", schema::<HistoryArgs>()),
    ]
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
    fn engine(&mut self) -> Result<&Engine, String> {
        if self.engine.is_none() {
            let settings = match std::fs::read_to_string(self.data.join("settings.json")) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(format!("settings.json: {e}")),
            };
            let settings = Settings::from_json(&settings)
                .map_err(|e| format!("invalid input: settings.json: {}: {}", e.field, e.message))?;
            // Kept when it does not serve: an instance's untouched snapshot pages cost no memory.
            let embedder = match self.preloaded.take_if(|warm| warm.serves(&self.data)) {
                Some(warm) => warm.into_embedder(),
                None => Embedder::load(
                    &warm::read(&self.data, warm::MODEL)?,
                    &warm::read(&self.data, warm::TOKENIZER)?,
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

    fn store(&mut self) -> Result<Arc<dyn EdgeStore>, String> {
        match &self.store {
            Some(store) => {
                // Another instance may have committed since this one's last request.
                store.refresh().map_err(|e| e.to_string())?;
                Ok(store.clone())
            }
            None => {
                let store = (self.open_store)(&self.data).map_err(|e| e.to_string())?;
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
            "tools/list" => {
                let tools: Vec<Value> = tool_schemas()
                    .into_iter()
                    .map(|(name, schema)| {
                        let description =
                            describe::TOOLS.iter().find(|(n, _)| *n == name).map_or("", |(_, d)| d);
                        json!({"name": name, "description": description, "inputSchema": schema})
                    })
                    .collect();
                json!({"tools": tools})
            }
            "tools/call" => {
                let Some(name) = params.get("name").and_then(Value::as_str) else {
                    return Reply::json(200, &rpc_error(id, -32602, "params.name: missing"));
                };
                if !tool_schemas().iter().any(|(n, _)| *n == name) {
                    return Reply::json(
                        200,
                        &rpc_error(id, -32602, format!("params.name: no tool {name:?}")),
                    );
                }
                let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
                if !args.is_object() {
                    return Reply::json(200, &rpc_error(id, -32602, "params.arguments: expected an object"));
                }
                match self.call(principal, name, &args) {
                    Ok(value) => json!({
                        "content": [{"type": "text", "text": value.to_string()}],
                        "structuredContent": value,
                        "isError": false,
                    }),
                    Err(message) => json!({"content": [{"type": "text", "text": message}], "isError": true}),
                }
            }
            other => return Reply::json(200, &rpc_error(id, -32601, format!("method not found: {other}"))),
        };
        Reply::json(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// The open bank `id`, as `principal` with `right` on it.
    fn bank(&mut self, principal: &Principal, right: Right, id: Option<&str>) -> Result<&mut Bank, String> {
        let id = id.unwrap_or(&self.default_bank).to_string();
        principal.check(right, &id).map_err(|e| format!("denied: {e}"))?;
        let store = self.store()?;
        if !self.banks.contains_key(&id) {
            let bank = self.engine()?.open_bank(&id, Box::new(store)).map_err(engine_error)?;
            self.banks.insert(id.clone(), bank);
        }
        Ok(self.banks.get_mut(&id).expect("opened above"))
    }

    fn call(&mut self, principal: &Principal, tool: &str, args: &Value) -> ToolResult {
        let now = hindsight_types::time::now();
        let e = engine_error;
        let value = match tool {
            "memory_write" => {
                let (bank, mut item) = hindsight_mcp::write_item(args)?;
                // What a principal writes carries its name unless it named an agent (as the library does).
                item.agent_id.get_or_insert_with(|| principal.name().to_string());
                let outcome = self
                    .bank(principal, Right::Write, bank.as_deref())?
                    .retain(vec![item], now)
                    .map_err(e)?;
                serde_json::to_value(outcome.into_iter().next())
            }
            "memory_search" => {
                let a: SearchArgs = parse(args)?;
                let mut query = a.to_query().map_err(|e| format!("invalid input: {e}"))?;
                query.agent_id.get_or_insert_with(|| principal.name().to_string());
                let (result, skipped) = match a.banks {
                    Some(_) if a.bank.is_some() => {
                        return Err("banks: give either bank or banks, not both".into())
                    }
                    Some(banks) => self.recall_across(principal, &banks, query)?,
                    None => {
                        let q = recall_query(query);
                        (
                            self.bank(principal, Right::Read, a.bank.as_deref())?.recall(q).map_err(e)?,
                            Vec::new(),
                        )
                    }
                };
                serde_json::to_value(recall_result(result, skipped))
            }
            "memory_forget" => {
                let a: ForgetArgs = parse(args)?;
                let hard = a.hard.unwrap_or(false);
                self.bank(principal, Right::Write, a.bank.as_deref())?.forget(&a.id, hard, now).map_err(e)?;
                Ok(json!({"id": a.id, "forgotten": if hard { "hard" } else { "soft" }}))
            }
            "memory_feedback" => {
                let a: FeedbackArgs = parse(args)?;
                let bank = self.bank(principal, Right::Write, a.bank.as_deref())?;
                let memories = if a.outcome.trim() == "used" {
                    bank.report_used(&a.ids, a.task_id.clone(), now).map_err(e)?
                } else {
                    let outcome = FeedbackOutcome::parse("outcome", &a.outcome)
                        .map_err(|err| format!("invalid input: {err}; or used"))?;
                    bank.feedback(&a.ids, outcome, now).map_err(e)?
                };
                Ok(json!({"memories": public(memories)}))
            }
            "memory_history" => {
                let a: HistoryArgs = parse(args)?;
                let entries =
                    self.bank(principal, Right::Read, a.bank.as_deref())?.history(&a.id).map_err(e)?;
                let entries: Vec<HistoryEntry> = entries
                    .into_iter()
                    .map(|h| HistoryEntry {
                        at: h.at,
                        event: h.event,
                        memory: h.memory.to_public(),
                        other: h.other,
                    })
                    .collect();
                Ok(json!({"entries": entries}))
            }
            "memory_list" => {
                let a: ListArgs = parse(args)?;
                let q = list_query(&a).map_err(|e| format!("invalid input: {e}"))?;
                let listed = self.bank(principal, Right::Read, a.bank.as_deref())?.list(&q).map_err(e)?;
                serde_json::to_value(ListPage {
                    items: public(listed.items),
                    next_cursor: listed.next_cursor,
                    total: listed.total,
                })
            }
            "memory_get" => {
                let a: HistoryArgs = parse(args)?;
                serde_json::to_value(
                    self.bank(principal, Right::Read, a.bank.as_deref())?.get(&a.id).map_err(e)?.to_public(),
                )
            }
            "memory_correct" => {
                let a: CorrectArgs = parse(args)?;
                let c = self
                    .bank(principal, Right::Write, a.bank.as_deref())?
                    .correct(&a.id, &a.text, now)
                    .map_err(e)?;
                serde_json::to_value(Correction {
                    memory: c.memory.to_public(),
                    superseded: c.superseded,
                    cascade: c.cascade,
                })
            }
            "memory_stats" => {
                let a: BankArgs = parse(args)?;
                serde_json::to_value(
                    self.bank(principal, Right::Read, a.bank.as_deref())?.stats().map_err(e)?,
                )
            }
            "memory_restore" => {
                let a: HistoryArgs = parse(args)?;
                let m =
                    self.bank(principal, Right::Write, a.bank.as_deref())?.restore(&a.id, now).map_err(e)?;
                serde_json::to_value(m.to_public())
            }
            "memory_unsupersede" => {
                let a: HistoryArgs = parse(args)?;
                let m = self
                    .bank(principal, Right::Write, a.bank.as_deref())?
                    .unsupersede(&a.id, now)
                    .map_err(e)?;
                serde_json::to_value(m.to_public())
            }
            other => return Err(format!("no tool {other:?}")),
        };
        value.map_err(|e| format!("the result did not serialise: {e}"))
    }

    /// One recall over several banks, ranked together; banks the principal may not read are
    /// skipped and named, as the library does.
    fn recall_across(
        &mut self,
        principal: &Principal,
        ids: &[String],
        query: Query,
    ) -> Result<(hindsight_engine::RecallResult, Vec<String>), String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut readable = Vec::new();
        let mut skipped = Vec::new();
        for id in ids {
            if !seen.insert(id.clone()) {
                return Err(format!("invalid input: banks: {id:?} is listed twice"));
            }
            if principal.may(Right::Read, id) {
                self.bank(principal, Right::Read, Some(id))?;
                readable.push(id.clone());
            } else {
                skipped.push(id.clone());
            }
        }
        if readable.is_empty() {
            return Err(format!("denied: principal {:?} may read none of the banks", principal.name()));
        }
        let mut taken: Vec<Bank> =
            readable.iter().map(|id| self.banks.remove(id).expect("opened above")).collect();
        let result = {
            let mut refs: Vec<&mut Bank> = taken.iter_mut().collect();
            recall_across(&mut refs, recall_query(query))
        };
        for (id, bank) in readable.into_iter().zip(taken) {
            self.banks.insert(id, bank);
        }
        Ok((result.map_err(engine_error)?, skipped))
    }
}

fn recall_query(q: Query) -> RecallQuery {
    RecallQuery {
        query: q.query,
        k: q.k,
        now: q.now.unwrap_or_else(hindsight_types::time::now),
        task_type: q.task_type,
        kinds: q.kinds,
        tags: q.tags,
        scope: q.scope,
        min_score: q.min_score,
        prompt_tokens: q.prompt_tokens,
        vector: q.vector,
        include_superseded: q.include_superseded,
        agent_id: q.agent_id,
        task_id: q.task_id,
    }
}

fn recall_result(r: hindsight_engine::RecallResult, skipped_banks: Vec<String>) -> RecallResult {
    RecallResult {
        items: r
            .items
            .into_iter()
            .map(|i| Recalled {
                memory: i.memory.to_public(),
                score: i.score,
                conflicting: i.conflicting,
                possibly_stale: i.possibly_stale,
                in_prompt: i.in_prompt,
                bank: i.bank,
                handle: i.handle,
            })
            .collect(),
        prompt: r.prompt,
        skipped_banks,
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
    fn tools_list_names_only_tools_the_shared_contract_describes() {
        let (mut edge, _dir) = edge_with_auth();
        let reply = post(
            &mut edge,
            Some(&format!("Bearer {TOKEN}")),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        );
        let v: Value = serde_json::from_slice(&reply.body).unwrap();
        let tools = v["result"]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), tool_schemas().len());
        for tool in tools {
            assert!(!tool["description"].as_str().unwrap().is_empty(), "{tool}");
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        }
    }
}
