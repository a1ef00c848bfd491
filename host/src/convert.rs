//! Text and JSON forms of the WIT types, for the CLI and other text-speaking callers.

use anyhow::{anyhow, bail};
use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::types::{
    DistillMethod, Distilled, FailureType, FeedbackOutcome, HistoryEntry, HistoryEvent, MaintainAction,
    MaintainReport, Memory, MemoryKind, NewMemory, RecallQuery, RecallResult, Recalled, RetainAction,
    RetainOutcome, Scope, ScopeLevel, Score, Source, Status, StepKind, TaskEnd, TaskOutcome, TaskState,
};

/// Names of a WIT enum's cases, as the CLI and JSON spell them.
macro_rules! names {
    ($parse:ident, $name:ident, $all:ident, $ty:ty, $field:literal, [$($variant:ident = $text:literal),+]) => {
        pub const $all: &[&str] = &[$($text),+];
        pub fn $parse(text: &str) -> anyhow::Result<$ty> {
            match text.trim() {
                $($text => Ok(<$ty>::$variant),)+
                other => bail!(
                    "{}: unknown value {:?}; expected one of {}",
                    $field,
                    other,
                    $all.join(", ")
                ),
            }
        }
        pub fn $name(value: $ty) -> &'static str {
            match value { $(<$ty>::$variant => $text),+ }
        }
    };
}

names!(
    parse_kind,
    kind_name,
    KIND_NAMES,
    MemoryKind,
    "kind",
    [Episodic = "episodic", Semantic = "semantic", Procedural = "procedural"]
);
names!(
    parse_scope_level,
    scope_level_name,
    SCOPE_LEVEL_NAMES,
    ScopeLevel,
    "scope",
    [Global = "global", Project = "project", Session = "session"]
);
names!(
    parse_source,
    source_name,
    SOURCE_NAMES,
    Source,
    "source",
    [
        UserExplicit = "user-explicit",
        UserFeedback = "user-feedback",
        AgentInference = "agent-inference",
        ToolResult = "tool-result",
        Imported = "imported"
    ]
);
names!(
    parse_failure_type,
    failure_type_name,
    FAILURE_TYPE_NAMES,
    FailureType,
    "failure-type",
    [Transient = "transient", Permanent = "permanent"]
);
names!(
    parse_action,
    action_name,
    ACTION_NAMES,
    RetainAction,
    "action",
    [
        Created = "created",
        Reinforced = "reinforced",
        Merged = "merged",
        Superseded = "superseded",
        Filtered = "filtered"
    ]
);
names!(
    parse_feedback,
    feedback_name,
    FEEDBACK_NAMES,
    FeedbackOutcome,
    "outcome",
    [Success = "success", Failure = "failure", Correction = "correction"]
);
names!(
    parse_history_event,
    history_event_name,
    HISTORY_EVENT_NAMES,
    HistoryEvent,
    "event",
    [Created = "created", Superseded = "superseded", Merged = "merged", Archived = "archived"]
);
names!(
    parse_step_kind,
    step_kind_name,
    STEP_KIND_NAMES,
    StepKind,
    "type",
    [
        Thought = "thought",
        ToolCall = "tool-call",
        ToolResult = "tool-result",
        UserMessage = "user-message",
        Answer = "answer"
    ]
);
names!(
    parse_task_outcome,
    task_outcome_name,
    TASK_OUTCOME_NAMES,
    TaskOutcome,
    "outcome",
    [Success = "success", Failure = "failure", Interrupted = "interrupted"]
);
names!(
    parse_distill_method,
    distill_method_name,
    DISTILL_METHOD_NAMES,
    DistillMethod,
    "method",
    [Llm = "llm", Rules = "rules", None = "none"]
);
names!(
    parse_maintain_action,
    maintain_action_name,
    MAINTAIN_ACTION_NAMES,
    MaintainAction,
    "action",
    [Archived = "archived", Merged = "merged"]
);
names!(
    parse_status,
    status_name,
    STATUS_NAMES,
    Status,
    "status",
    [Active = "active", Superseded = "superseded", Merged = "merged", Archived = "archived"]
);

/// ISO 8601: `2026-11-29T10:00:00Z`, with an offset, without one (read as UTC), or a bare date.
pub fn parse_time(field: &str, text: &str) -> anyhow::Result<i64> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc().timestamp_millis());
    }
    bail!("{field}: {text:?} is not an ISO 8601 time (e.g. 2026-11-29T10:00:00Z or 2026-11-29)")
}

pub fn format_time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_else(|| ms.to_string())
}

pub fn parse_kinds(text: &str) -> anyhow::Result<Vec<MemoryKind>> {
    split_list(text).iter().map(|k| parse_kind(k)).collect()
}

pub fn split_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

pub fn scope(level: Option<&str>, id: Option<String>) -> anyhow::Result<Option<Scope>> {
    match (level, id) {
        (None, None) => Ok(None),
        (None, Some(_)) => bail!("scope-id: given without --scope"),
        (Some(level), id) => Ok(Some(Scope { level: parse_scope_level(level)?, id })),
    }
}

/// An item to retain with nothing but its text set.
pub fn new_memory(text: &str) -> NewMemory {
    NewMemory {
        content: text.to_string(),
        kind: None,
        task_type: None,
        task_description: None,
        context: None,
        tags: Vec::new(),
        scope: None,
        agent_id: None,
        importance: None,
        confidence: None,
        source: None,
        failure_type: None,
        occurred_at: None,
        valid_until: None,
        metadata: Vec::new(),
        force: false,
        parallel: false,
        vector: None,
    }
}

/// A query for the top `k` with no filters, "now" from the wall clock.
pub fn recall_query(text: &str, k: u32) -> RecallQuery {
    RecallQuery {
        query: text.to_string(),
        k,
        now: None,
        task_type: None,
        kinds: Vec::new(),
        tags: Vec::new(),
        scope: None,
        min_score: None,
        prompt_tokens: None,
        vector: None,
        include_superseded: false,
    }
}

/// One line of a `retain --file` JSONL file: the `retain` flags' names as keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetainLine {
    #[serde(alias = "content")]
    pub text: Option<String>,
    pub kind: Option<String>,
    pub importance: Option<f64>,
    pub confidence: Option<f64>,
    pub source: Option<String>,
    #[serde(alias = "task-type")]
    pub task_type: Option<String>,
    #[serde(alias = "task-description")]
    pub task_description: Option<String>,
    /// JSON: an object, or text holding JSON.
    pub context: Option<Value>,
    pub tags: Option<Value>,
    pub scope: Option<String>,
    #[serde(alias = "scope-id")]
    pub scope_id: Option<String>,
    #[serde(alias = "agent-id")]
    pub agent_id: Option<String>,
    #[serde(alias = "failure-type")]
    pub failure_type: Option<String>,
    #[serde(alias = "occurred_at", alias = "occurred-at")]
    pub at: Option<String>,
    #[serde(alias = "valid-until")]
    pub valid_until: Option<String>,
    #[serde(alias = "metadata")]
    pub meta: Option<Map<String, Value>>,
    /// Store as given: no write filter, dedup, merge or conflict check.
    #[serde(default)]
    pub force: bool,
    /// Valid beside anything it contradicts.
    #[serde(default)]
    pub parallel: bool,
    /// A vector made by the bank's embedding model: skips embedding the text.
    pub vector: Option<Vec<f64>>,
}

impl RetainLine {
    pub fn parse(line: &str) -> anyhow::Result<NewMemory> {
        let parsed: RetainLine = serde_json::from_str(line).map_err(|e| anyhow!("{e}"))?;
        parsed.into_new_memory()
    }

    pub fn into_new_memory(self) -> anyhow::Result<NewMemory> {
        let text = self.text.ok_or_else(|| anyhow!("text: missing"))?;
        let tags = match self.tags {
            None => Vec::new(),
            Some(Value::String(s)) => split_list(&s),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => Err(anyhow!("tags: {other} is not a string")),
                })
                .collect::<anyhow::Result<_>>()?,
            Some(other) => bail!("tags: expected a list of strings or \"a,b\", got {other}"),
        };
        let context = match self.context {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(v) => Some(v.to_string()),
        };
        let metadata = self
            .meta
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect();
        Ok(NewMemory {
            content: text,
            kind: self.kind.as_deref().map(parse_kind).transpose()?,
            task_type: self.task_type,
            task_description: self.task_description,
            context,
            tags,
            scope: scope(self.scope.as_deref(), self.scope_id)?,
            agent_id: self.agent_id,
            importance: self.importance.map(|x| number("importance", x)).transpose()?,
            confidence: self.confidence.map(|x| number("confidence", x)).transpose()?,
            source: self.source.as_deref().map(parse_source).transpose()?,
            failure_type: self.failure_type.as_deref().map(parse_failure_type).transpose()?,
            occurred_at: self.at.as_deref().map(|t| parse_time("at", t)).transpose()?,
            valid_until: self.valid_until.as_deref().map(|t| parse_time("valid_until", t)).transpose()?,
            metadata,
            force: self.force,
            parallel: self.parallel,
            vector: self
                .vector
                .map(|v| v.into_iter().map(|x| number("vector", x)).collect::<anyhow::Result<Vec<f32>>>())
                .transpose()?,
        })
    }
}

fn number(field: &str, x: f64) -> anyhow::Result<f32> {
    if !x.is_finite() {
        bail!("{field}: must be a finite number");
    }
    Ok(x as f32)
}

pub fn memory_json(m: &Memory) -> Value {
    let metadata: Map<String, Value> =
        m.metadata.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    json!({
        "id": m.id,
        "kind": kind_name(m.kind),
        "content": m.content,
        "task_type": m.task_type,
        "task_description": m.task_description,
        "context": m.context.as_deref().and_then(|c| serde_json::from_str::<Value>(c).ok()),
        "tags": m.tags,
        "scope": scope_level_name(m.scope.level),
        "scope_id": m.scope.id,
        "agent_id": m.agent_id,
        "importance": round(m.importance),
        "confidence": round(m.confidence),
        "source": source_name(m.source),
        "failure_type": m.failure_type.map(failure_type_name),
        "occurred_at": format_time(m.occurred_at),
        "created_at": format_time(m.created_at),
        "updated_at": format_time(m.updated_at),
        "last_accessed_at": m.last_accessed_at.map(format_time),
        "access_count": m.access_count,
        "status": status_name(m.status),
        "supersedes": m.supersedes,
        "superseded_by": m.superseded_by,
        "valid_until": m.valid_until.map(format_time),
        "metadata": metadata,
        "embedding_model": m.embedding_model,
        "conflicts_with": m.conflicts_with,
        "reinforcements": m.reinforcements,
    })
}

pub fn outcome_json(o: &RetainOutcome) -> Value {
    json!({"id": o.id, "action": action_name(o.action), "related": o.related, "reason": o.reason})
}

/// "created m123 (new memory)", "filtered (filler: …)".
pub fn outcome_text(o: &RetainOutcome) -> String {
    let mut text = action_name(o.action).to_string();
    if let Some(id) = &o.id {
        text.push(' ');
        text.push_str(id);
    }
    format!("{text} ({})", o.reason)
}

pub fn task_json(t: &TaskState) -> Value {
    json!({
        "id": t.id,
        "goal": t.goal,
        "task_type": t.task_type,
        "version": t.version,
        "started_at": format_time(t.started_at),
        "updated_at": format_time(t.updated_at),
        "confirmed_facts": t.confirmed_facts,
        "assumptions": t.assumptions,
        "open_questions": t.open_questions,
        "notes": t.notes,
        "current_step": t.current_step,
        "tool_calls": t.tool_calls.iter().map(|c| json!({
            "tool": c.tool, "input": c.input, "result": c.result, "error": c.error, "at": format_time(c.at),
        })).collect::<Vec<_>>(),
        "steps": t.steps.iter().map(|s| json!({
            "at": format_time(s.at), "type": step_kind_name(s.kind), "text": s.text, "tool": s.tool, "error": s.error,
        })).collect::<Vec<_>>(),
        "ended_at": t.ended_at.map(format_time),
        "outcome": t.outcome.map(task_outcome_name),
        "detail": t.detail,
    })
}

pub fn task_text(t: &TaskState) -> String {
    let mut lines = vec![format!("{}  v{}  {}", t.id, t.version, t.goal)];
    for (title, list) in [
        ("fact", &t.confirmed_facts),
        ("assumption", &t.assumptions),
        ("question", &t.open_questions),
        ("note", &t.notes),
    ] {
        lines.extend(list.iter().map(|x| format!("  {title}: {x}")));
    }
    for s in &t.steps {
        let tool = s.tool.as_deref().map(|t| format!(" [{t}]")).unwrap_or_default();
        let error = if s.error { " (error)" } else { "" };
        lines.push(format!("  {} {}{tool}{error}: {}", format_time(s.at), step_kind_name(s.kind), s.text));
    }
    if let Some(outcome) = t.outcome {
        lines.push(format!(
            "  ended: {}{}",
            task_outcome_name(outcome),
            t.detail.as_deref().map(|d| format!(" — {d}")).unwrap_or_default()
        ));
    }
    lines.join("\n")
}

pub fn distilled_json(d: &Distilled) -> Value {
    let mut v = outcome_json(&d.outcome);
    v["content"] = json!(d.content);
    v["kind"] = json!(kind_name(d.kind));
    v
}

pub fn distilled_text(d: &Distilled) -> String {
    format!("  {} [{}] {}", outcome_text(&d.outcome), kind_name(d.kind), d.content)
}

pub fn task_end_json(e: &TaskEnd) -> Value {
    json!({
        "task": task_json(&e.task),
        "method": distill_method_name(e.method),
        "reason": e.reason,
        "items": e.items.iter().map(distilled_json).collect::<Vec<_>>(),
    })
}

pub fn history_json(e: &HistoryEntry) -> Value {
    json!({
        "at": format_time(e.at),
        "event": history_event_name(e.event),
        "id": e.memory.id,
        "other": e.other,
        "memory": memory_json(&e.memory),
    })
}

pub fn maintain_json(r: &MaintainReport) -> Value {
    json!({
        "active_before": r.active_before,
        "active_after": r.active_after,
        "decayed": r.decayed,
        "weakened": r.weakened,
        "sealed": r.sealed,
        "archived": r.steps.iter().filter(|s| s.action == MaintainAction::Archived).count(),
        "merged": r.steps.iter().filter(|s| s.action == MaintainAction::Merged).count(),
        "steps": r.steps.iter().map(|s| json!({
            "id": s.id,
            "action": maintain_action_name(s.action),
            "into": s.into,
            "reason": s.reason,
        })).collect::<Vec<_>>(),
    })
}

pub fn score_json(s: &Score) -> Value {
    json!({
        "semantic": round(s.semantic),
        "lexical": round(s.lexical),
        "recency": round(s.recency),
        "confidence": round(s.confidence),
        "importance": round(s.importance),
        "task_match": round(s.task_match),
        "source": round(s.source),
        "similarity": round(s.similarity),
        "total": round(s.total),
    })
}

pub fn recalled_json(r: &Recalled) -> Value {
    let mut v = memory_json(&r.memory);
    v["score"] = score_json(&r.score);
    v["conflicting"] = json!(r.conflicting);
    v["possibly_stale"] = json!(r.possibly_stale);
    v
}

/// `recall --json` and the MCP `memory_search` result: the items and the prompt block.
pub fn recall_json(r: &RecallResult) -> Value {
    json!({"items": r.items.iter().map(recalled_json).collect::<Vec<_>>(), "prompt": r.prompt})
}

/// Six decimals: enough to compare scores across hosts, without f32 noise in the output.
fn round(x: f32) -> f64 {
    (x as f64 * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_the_usual_iso_forms() {
        assert_eq!(parse_time("at", "1970-01-02").unwrap(), 86_400_000);
        assert_eq!(parse_time("at", "1970-01-01T00:00:01Z").unwrap(), 1000);
        assert_eq!(parse_time("at", "1970-01-01T01:00:00+01:00").unwrap(), 0);
        assert_eq!(parse_time("at", "2023-05-08T13:56:00").unwrap(), 1_683_554_160_000);
        assert!(parse_time("at", "yesterday").unwrap_err().to_string().starts_with("at:"));
    }

    #[test]
    fn retain_lines_name_the_bad_field() {
        let err = RetainLine::parse(r#"{"text":"x","kind":"thought"}"#).unwrap_err();
        assert!(err.to_string().starts_with("kind: unknown value"), "{err}");
        let err = RetainLine::parse(r#"{"text":"x","colour":"red"}"#).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let err = RetainLine::parse(r#"{"kind":"semantic"}"#).unwrap_err();
        assert!(err.to_string().starts_with("text: missing"), "{err}");
        let ok = RetainLine::parse(r#"{"text":"x","tags":"a, b","meta":{"turn":"D1:2"},"at":"2023-05-08"}"#)
            .unwrap();
        assert_eq!(ok.tags, vec!["a", "b"]);
        assert_eq!(ok.metadata, vec![("turn".to_string(), "D1:2".to_string())]);
    }
}
