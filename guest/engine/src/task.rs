//! Working memory: one task's structured state and step log, updated idempotently and by
//! version, kept in the store so it survives the host.

use hindsight_types::settings::TaskSettings;
use hindsight_types::time::{format_iso, Timestamp};
use hindsight_types::{DistillMethod, NewTask, Outcome, StepKind, TaskState, TaskUpdate, ToolCall};
use serde::{Deserialize, Serialize};

use crate::filter::asks_to_remember;
use crate::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The caller's id: the same id twice (a retried request) is one step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub at: Timestamp,
    pub kind: StepKind,
    pub text: String,
    /// The tool, for tool calls and results.
    #[serde(default)]
    pub tool: Option<String>,
    /// A tool result that is an error.
    #[serde(default)]
    pub error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub goal: String,
    pub task_type: Option<String>,
    /// Bumped by every change; an update made against another version is refused.
    pub version: u32,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
    pub confirmed_facts: Vec<String>,
    pub assumptions: Vec<String>,
    pub open_questions: Vec<String>,
    pub notes: Vec<String>,
    pub current_step: Option<String>,
    pub steps: Vec<Step>,
    pub ended_at: Option<Timestamp>,
    pub outcome: Option<Outcome>,
    pub detail: Option<String>,
    /// When the task was distilled into memories, and how; none while it may still be (its
    /// distillation was skipped, or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distilled: Option<(Timestamp, DistillMethod)>,
    /// The memories recalled for the task, by citation handle: `[m3]` in a prompt block made for
    /// it is `handles[2]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handles: Vec<String>,
    /// Who works on it: the memories distilled from it carry this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// The start of a long id, for an error message.
fn truncate(id: &str) -> String {
    id.chars().take(40).collect()
}

/// The longest goal and task type (updates are bounded by `tasks.max_text_bytes`).
const MAX_GOAL: usize = 32 * 1024;

fn text(field: &str, value: &str, max_bytes: usize) -> Result<String> {
    let value = value.trim();
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > max_bytes {
        return Err(Error::invalid(field, format!("is longer than {max_bytes} bytes")));
    }
    Ok(value.to_string())
}

impl Task {
    pub fn new(id: String, new: &NewTask, now: Timestamp) -> Result<Task> {
        let goal = text("goal", &new.goal, MAX_GOAL)?;
        let task_type = new.task_type.as_deref().map(|t| text("task_type", t, MAX_GOAL)).transpose()?;
        let agent_id = new.agent_id.as_deref().map(|a| text("agent_id", a, 1024)).transpose()?;
        Ok(Task {
            id,
            goal,
            task_type,
            version: 1,
            started_at: now,
            updated_at: now,
            confirmed_facts: Vec::new(),
            assumptions: Vec::new(),
            open_questions: Vec::new(),
            notes: Vec::new(),
            current_step: None,
            steps: Vec::new(),
            ended_at: None,
            outcome: None,
            detail: None,
            distilled: None,
            handles: Vec::new(),
            agent_id,
        })
    }

    pub fn is_ended(&self) -> bool {
        self.ended_at.is_some()
    }

    /// Applies `update` if it changes anything; returns whether it did. `expected_version`,
    /// when given, must be the task's version.
    pub fn apply(
        &mut self,
        update: TaskUpdate,
        expected_version: Option<u32>,
        now: Timestamp,
        limits: &TaskSettings,
    ) -> Result<bool> {
        let max_text = limits.max_text_bytes as usize;
        if self.is_ended() {
            return Err(Error::invalid("task", format!("{} has ended; it takes no more updates", self.id)));
        }
        if let Some(v) = expected_version.filter(|&v| v != self.version) {
            return Err(Error::Conflict(format!(
                "task {} is at version {}, the update was made against {v}; reload and retry",
                self.id, self.version
            )));
        }
        let held = self.text_bytes();
        let room = |added: usize| -> Result<()> {
            if held + added > limits.max_total_bytes as usize {
                return Err(Error::Limit(format!(
                    "task {} would hold {} bytes of text; the limit is {} (tasks.max_total_bytes)",
                    self.id,
                    held + added,
                    limits.max_total_bytes
                )));
            }
            Ok(())
        };
        let add = |list: &mut Vec<String>, field: &str, value: &str| -> Result<bool> {
            let value = text(field, value, max_text)?;
            if list.contains(&value) {
                return Ok(false);
            }
            room(value.len())?;
            list.push(value);
            Ok(true)
        };
        let changed = match update {
            TaskUpdate::Step(step) => {
                let step = Step {
                    id: step.id.map(|id| text("id", &id, 256)).transpose()?,
                    at: step.at.unwrap_or(now),
                    kind: step.kind,
                    text: text("text", &step.text, max_text)?,
                    tool: step.tool.map(|t| text("tool", &t, 1024)).transpose()?,
                    error: step.error,
                };
                // A step sent again under its id (a retried request) is recorded once; without
                // an id, a repeat is a real repeat (a retried tool call) and is recorded.
                if step.id.is_some() && self.steps.iter().any(|s| s.id == step.id) {
                    false
                } else if self.steps.len() >= limits.max_steps as usize {
                    return Err(Error::Limit(format!(
                        "steps: task {} already has {} (tasks.max_steps)",
                        self.id, limits.max_steps
                    )));
                } else {
                    room(step.text.len())?;
                    self.steps.push(step);
                    true
                }
            }
            TaskUpdate::Fact(f) => add(&mut self.confirmed_facts, "fact", &f)?,
            TaskUpdate::Assumption(a) => add(&mut self.assumptions, "assumption", &a)?,
            TaskUpdate::Question(q) => add(&mut self.open_questions, "question", &q)?,
            TaskUpdate::Note(n) => add(&mut self.notes, "note", &n)?,
            TaskUpdate::CurrentStep(c) => {
                let c = text("current_step", &c, max_text)?;
                if self.current_step.as_ref() == Some(&c) {
                    false
                } else {
                    room(c.len().saturating_sub(self.current_step.as_ref().map_or(0, String::len)))?;
                    self.current_step = Some(c);
                    true
                }
            }
        };
        if changed {
            self.version += 1;
            self.updated_at = now;
        }
        Ok(changed)
    }

    /// Checks a task read from an export before it is stored as it is: its id, its text within
    /// the limits a task grows to, its times not in the future.
    pub fn check_imported(&self, limits: &TaskSettings, now: Timestamp) -> Result<()> {
        if !crate::record::is_memory_id(&self.id) {
            return Err(Error::invalid(
                "id",
                format!("{:?} is not a task id (1 to 64 of A-Z a-z 0-9 - _)", truncate(&self.id)),
            ));
        }
        text("goal", &self.goal, MAX_GOAL)?;
        if let Some(t) = &self.task_type {
            text("task_type", t, 1024)?;
        }
        if self.steps.len() > limits.max_steps as usize {
            return Err(Error::invalid(
                "steps",
                format!("{} steps; the limit is {}", self.steps.len(), limits.max_steps),
            ));
        }
        if self.text_bytes() > limits.max_total_bytes as usize {
            return Err(Error::invalid(
                "task",
                format!("holds more than {} bytes of text", limits.max_total_bytes),
            ));
        }
        let day = hindsight_types::time::DAY_MS;
        let times = [self.started_at, self.updated_at]
            .into_iter()
            .chain(self.ended_at)
            .chain(self.steps.iter().map(|s| s.at));
        if let Some(t) = times.into_iter().find(|&t| t > now.saturating_add(day)) {
            return Err(Error::invalid("task", format!("a time ({}) after now", format_iso(t))));
        }
        Ok(())
    }

    /// Bytes of text the task holds.
    pub fn text_bytes(&self) -> usize {
        let lists = [&self.confirmed_facts, &self.assumptions, &self.open_questions, &self.notes];
        self.goal.len()
            + lists.iter().flat_map(|l| l.iter()).map(String::len).sum::<usize>()
            + self.current_step.as_ref().map_or(0, String::len)
            + self.detail.as_ref().map_or(0, String::len)
            + self.steps.iter().map(|s| s.text.len()).sum::<usize>()
    }

    /// Replaces every text of the task that holds `content` (or that `content` quotes) with a
    /// marker saying it was erased, and when; whether anything was.
    pub fn scrub(&mut self, content: &str, now: Timestamp) -> bool {
        let needle = content.trim().to_lowercase();
        if needle.is_empty() {
            return false;
        }
        let marker = format!("[erased {}]", format_iso(now));
        // A short text inside the memory (an "ok") is not what the memory quotes.
        let holds = |text: &str| {
            let t = text.trim().to_lowercase();
            t.contains(&needle) || (t.chars().count() >= 12 && needle.contains(&t))
        };
        let mut changed = false;
        let mut scrub = |text: &mut String| {
            if holds(text) {
                *text = marker.clone();
                changed = true;
            }
        };
        for list in
            [&mut self.confirmed_facts, &mut self.assumptions, &mut self.open_questions, &mut self.notes]
        {
            list.iter_mut().for_each(&mut scrub);
        }
        self.current_step.iter_mut().for_each(&mut scrub);
        self.detail.iter_mut().for_each(&mut scrub);
        self.steps.iter_mut().for_each(|s| scrub(&mut s.text));
        if changed {
            self.version += 1;
            self.updated_at = now;
        }
        changed
    }

    /// Tool calls, each with the first result of the same tool after it.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        let mut calls: Vec<ToolCall> = Vec::new();
        for step in &self.steps {
            match step.kind {
                StepKind::ToolCall => calls.push(ToolCall {
                    tool: step.tool.clone().unwrap_or_default(),
                    input: step.text.clone(),
                    result: None,
                    error: false,
                    at: step.at,
                }),
                StepKind::ToolResult => {
                    let open = calls.iter_mut().rev().find(|c| {
                        c.result.is_none()
                            && (step.tool.is_none() || step.tool.as_deref() == Some(c.tool.as_str()))
                    });
                    match open {
                        Some(c) => {
                            c.result = Some(step.text.clone());
                            c.error = step.error;
                        }
                        None => calls.push(ToolCall {
                            tool: step.tool.clone().unwrap_or_default(),
                            input: String::new(),
                            result: Some(step.text.clone()),
                            error: step.error,
                            at: step.at,
                        }),
                    }
                }
                _ => {}
            }
        }
        calls
    }

    /// The task as the API shows it: its working memory, steps and paired tool calls (without
    /// the engine's own bookkeeping: citation handles, distillation).
    pub fn to_state(&self) -> TaskState {
        TaskState {
            id: self.id.clone(),
            goal: self.goal.clone(),
            task_type: self.task_type.clone(),
            version: self.version,
            started_at: self.started_at,
            updated_at: self.updated_at,
            confirmed_facts: self.confirmed_facts.clone(),
            assumptions: self.assumptions.clone(),
            open_questions: self.open_questions.clone(),
            notes: self.notes.clone(),
            current_step: self.current_step.clone(),
            tool_calls: self.tool_calls(),
            steps: self
                .steps
                .iter()
                .map(|s| hindsight_types::Step {
                    id: s.id.clone(),
                    kind: s.kind,
                    text: s.text.clone(),
                    tool: s.tool.clone(),
                    error: s.error,
                    at: Some(s.at),
                })
                .collect(),
            ended_at: self.ended_at,
            outcome: self.outcome,
            detail: self.detail.clone(),
        }
    }

    /// The user asked for this to be remembered ("remember this", 记住).
    pub fn user_asked_to_remember(&self) -> bool {
        self.steps.iter().filter(|s| s.kind == StepKind::UserMessage).any(|s| asks_to_remember(&s.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: StepKind, text: &str) -> TaskUpdate {
        TaskUpdate::Step(hindsight_types::Step::new(kind, text).at(5))
    }

    fn limits() -> TaskSettings {
        TaskSettings::default()
    }

    #[test]
    fn the_same_update_twice_changes_nothing() {
        let mut t = Task::new("t1".into(), &NewTask::new("clean the sales CSV"), 0).unwrap();
        let with_id =
            |id: &str| TaskUpdate::Step(hindsight_types::Step::thought("look at the header").id(id));
        assert!(t.apply(with_id("s1"), None, 1, &limits()).unwrap());
        assert!(!t.apply(with_id("s1"), None, 2, &limits()).unwrap(), "a retried request");
        assert!(t
            .apply(TaskUpdate::Fact("the file is UTF-8 with a BOM".into()), None, 3, &limits())
            .unwrap());
        assert!(!t
            .apply(TaskUpdate::Fact("the file is UTF-8 with a BOM".into()), None, 4, &limits())
            .unwrap());
        assert_eq!((t.steps.len(), t.confirmed_facts.len(), t.version), (1, 1, 3));
    }

    #[test]
    fn step_idempotency_merges_retries_only_under_an_id() {
        // Finding 13: call → 503 → the same call → 503 → the same call → 200 is six steps.
        let mut t = Task::new("t1".into(), &NewTask::new("export"), 0).unwrap();
        let call = || TaskUpdate::Step(hindsight_types::Step::tool_call("http", "GET /export"));
        let failed = || {
            TaskUpdate::Step(hindsight_types::Step::tool_result("http", "503 Service Unavailable").error())
        };
        for update in [call(), failed(), call(), failed(), call()] {
            assert!(t.apply(update, None, 1, &limits()).unwrap());
        }
        t.apply(TaskUpdate::Step(hindsight_types::Step::tool_result("http", "200 OK")), None, 1, &limits())
            .unwrap();
        assert_eq!(t.steps.len(), 6);
        assert_eq!(t.tool_calls().len(), 3);
    }

    #[test]
    fn a_task_past_its_step_or_size_cap_is_refused_and_unchanged() {
        let tight = TaskSettings { max_steps: 2, max_text_bytes: 100, max_total_bytes: 150 };
        let mut t = Task::new("t1".into(), &NewTask::new("goal"), 0).unwrap();
        t.apply(step(StepKind::Thought, "one"), None, 1, &tight).unwrap();
        t.apply(step(StepKind::Thought, "two"), None, 1, &tight).unwrap();
        let err = t.apply(step(StepKind::Thought, "three"), None, 1, &tight).unwrap_err();
        assert!(matches!(&err, Error::Limit(m) if m.contains("tasks.max_steps")), "{err}");
        let err = t.apply(TaskUpdate::Note("x".repeat(101)), None, 1, &tight).unwrap_err();
        assert!(err.message().starts_with("note: is longer than 100 bytes"), "{err}");
        t.apply(TaskUpdate::Note("y".repeat(90)), None, 1, &tight).unwrap();
        let before = t.clone();
        let err = t.apply(TaskUpdate::Note("z".repeat(90)), None, 1, &tight).unwrap_err();
        assert!(matches!(&err, Error::Limit(m) if m.contains("tasks.max_total_bytes")), "{err}");
        assert_eq!(t, before, "a refused update changes nothing");
    }

    #[test]
    fn a_stale_version_is_refused_and_changes_nothing() {
        let mut t = Task::new("t1".into(), &NewTask::new("goal"), 0).unwrap();
        t.apply(TaskUpdate::Note("a".into()), Some(1), 1, &limits()).unwrap();
        let err = t.apply(TaskUpdate::Note("b".into()), Some(1), 2, &limits()).unwrap_err();
        assert!(matches!(&err, Error::Conflict(m) if m.contains("at version 2")), "{err}");
        assert_eq!(t.notes, vec!["a"]);
    }

    #[test]
    fn tool_results_pair_with_their_calls() {
        let mut t = Task::new("t1".into(), &NewTask::new("goal"), 0).unwrap();
        let call = |kind, text: &str, error| {
            let step = hindsight_types::Step {
                tool: Some("http".into()),
                error,
                ..hindsight_types::Step::new(kind, text)
            };
            TaskUpdate::Step(step.at(1))
        };
        t.apply(call(StepKind::ToolCall, "GET /a", false), None, 1, &limits()).unwrap();
        t.apply(call(StepKind::ToolResult, "timeout after 30 s", true), None, 1, &limits()).unwrap();
        let calls = t.tool_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].result.as_deref(), calls[0].error), (Some("timeout after 30 s"), true));
    }
}
