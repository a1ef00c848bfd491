//! The MCP tools, one home for every server that offers them — `hindsight mcp` and `hindsight
//! serve --http` (rmcp, over the host library) and the edge component (its own JSON-RPC front,
//! over the engine): tool names and descriptions, argument shapes and their JSON Schemas, and the
//! dispatcher ([`call`]) that checks rights and runs each tool on a server's [`Backend`]. The
//! servers differ only in how they reach a bank and move bytes.

mod args;
pub mod describe;
mod dispatch;

pub use args::*;
pub use dispatch::{call, tool, tools_list, Access, Backend, Caller, Tool, ToolError, TOOLS};

use hindsight_types::{FieldError, Kind, ListQuery, Named, Query, Scope};
use serde_json::{json, Value};

/// The server's instructions to the calling model (MCP `initialize`).
pub const INSTRUCTIONS: &str = "Long-term memory across tasks. Before a task, call memory_search with \
what you are about to do and put the returned `prompt` block in your context. While or after \
working, memory_write what is worth keeping: what worked, what failed and why, the user's \
constraints and preferences — one self-contained statement each. memory_summarize ends a task \
(or takes a whole trajectory) and keeps its lessons; memory_feedback says whether recalled \
memories helped; memory_forget removes one; memory_history shows what replaced what, and \
memory_unsupersede undoes a wrong replacement.";

/// A tool's input schema as MCP servers list it: JSON Schema 2020-12 of the argument type, without
/// the type's own title and description (rmcp's `schema_for_input`, so every server lists the same).
pub fn input_schema<T: schemars::JsonSchema>() -> Value {
    let schema =
        schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
        object.remove("description");
    }
    value
}

/// The bank `memory_write` names, and the item (read by `Memory::from_json`, the one home for an
/// item's fields): the arguments are the item's fields plus `bank`.
pub fn write_item(raw: &Value) -> Result<(Option<String>, hindsight_types::Memory), String> {
    let bank = match raw.get("bank") {
        None | Some(Value::Null) => None,
        Some(Value::String(b)) => Some(b.clone()),
        Some(other) => return Err(format!("bank: expected a string, got {other}")),
    };
    let mut fields = raw.clone();
    if let Some(map) = fields.as_object_mut() {
        map.remove("bank");
    }
    let item = hindsight_types::Memory::from_json(&fields).map_err(|e| format!("invalid input: {e}"))?;
    Ok((bank, item))
}

impl SearchArgs {
    /// The recall query these arguments ask for (banks aside).
    pub fn to_query(&self) -> Result<Query, FieldError> {
        let mut query = Query::new(self.query.clone());
        query.k = self.k;
        query.task_type = self.task_type.clone();
        query.tags = self.tags.clone().unwrap_or_default();
        query.include_superseded = self.include_superseded.unwrap_or(false);
        query.trusted_only = self.trusted_only.unwrap_or(false);
        query.as_of =
            self.as_of.as_deref().map(|t| hindsight_types::time::parse_iso("as_of", t)).transpose()?;
        query.task_id = self.task_id.clone();
        for (i, k) in self.kinds.iter().flatten().enumerate() {
            query.kinds.push(Kind::parse(&format!("kinds[{i}]"), k)?);
        }
        query.scope = Scope::parse("scope", self.scope.as_deref(), self.scope_id.clone())?;
        query.now = self.now.as_deref().map(|t| hindsight_types::time::parse_iso("now", t)).transpose()?;
        Ok(query)
    }
}

pub fn list_query(a: &ListArgs) -> Result<ListQuery, FieldError> {
    let mut q = ListQuery {
        tag: a.tag.clone(),
        task_type: a.task_type.clone(),
        text: a.text.clone(),
        limit: a.limit,
        cursor: a.cursor.clone(),
        ..Default::default()
    };
    q.kind = a.kind.as_deref().map(|k| Kind::parse("kind", k)).transpose()?;
    q.source = a.source.as_deref().map(|s| hindsight_types::Source::parse("source", s)).transpose()?;
    if let Some(status) = &a.status {
        q = q.status_named(status)?;
    }
    if let Some(order) = a.order.as_deref() {
        q.order = hindsight_types::ListOrder::parse("order", &order.replace('_', "-"))?;
    }
    Ok(q)
}

/// What `memory_summarize` answers: what became of the task's lessons, and the task in brief —
/// never its whole step log, which can be large and was the caller's to begin with.
pub fn summary(end: hindsight_types::TaskEnd) -> Value {
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
