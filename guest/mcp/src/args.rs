//! The tools' arguments. Servers parse them inside the call, so a wrong argument is a tool error
//! naming the field (which the model can correct) rather than a protocol error.

use std::collections::BTreeMap;

use hindsight_types::{FeedbackOutcome, Kind, Named, Outcome, StepKind};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;

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
    one_of::<hindsight_types::Source>()
}
fn scope_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<hindsight_types::ScopeLevel>()
}
fn failure_type_schema(_: &mut SchemaGenerator) -> Schema {
    one_of::<hindsight_types::FailureType>()
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
    /// Leave out memories marked untrusted: instruction-like text that came from a tool, an
    /// import or an inference rather than the user.
    pub trusted_only: Option<bool>,
    /// Answer with what the bank held and believed at this time (ISO 8601): memories created by
    /// then, superseded only after it, valid then. To explain a past decision.
    pub as_of: Option<String>,
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
