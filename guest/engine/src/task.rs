//! Working memory: one task's structured state and step log, updated idempotently and by
//! version, kept in the store so it survives the host.

use hindsight_types::time::Timestamp;
use hindsight_types::{Outcome, StepKind, TaskUpdate};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::asks_to_remember;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
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
}

/// A tool call paired with the result that followed it, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    pub input: String,
    pub result: Option<String>,
    pub error: bool,
    pub at: Timestamp,
}

const MAX_TEXT: usize = 32 * 1024;
const MAX_STEPS: usize = 10_000;

fn text(field: &str, value: &str) -> Result<String> {
    let value = value.trim();
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_TEXT {
        return Err(Error::invalid(field, format!("is longer than {MAX_TEXT} bytes")));
    }
    Ok(value.to_string())
}

impl Task {
    pub fn new(id: String, goal: &str, task_type: Option<String>, now: Timestamp) -> Result<Task> {
        let goal = text("goal", goal)?;
        let task_type = task_type.map(|t| text("task-type", &t)).transpose()?;
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
    ) -> Result<bool> {
        if self.is_ended() {
            return Err(Error::invalid("task", format!("{} has ended; it takes no more updates", self.id)));
        }
        if let Some(v) = expected_version.filter(|&v| v != self.version) {
            return Err(Error::Stale(format!(
                "task {} is at version {}, the update was made against {v}; reload and retry",
                self.id, self.version
            )));
        }
        let add = |list: &mut Vec<String>, field: &str, value: &str| -> Result<bool> {
            let value = text(field, value)?;
            if list.contains(&value) {
                return Ok(false);
            }
            list.push(value);
            Ok(true)
        };
        let changed = match update {
            TaskUpdate::Step(step) => {
                let step = Step {
                    at: step.at.unwrap_or(now),
                    kind: step.kind,
                    text: text("text", &step.text)?,
                    tool: step.tool.map(|t| text("tool", &t)).transpose()?,
                    error: step.error,
                };
                // The same step sent twice (a retried request) is recorded once.
                let seen = self.steps.iter().any(|s| {
                    s.kind == step.kind && s.text == step.text && s.tool == step.tool && s.error == step.error
                });
                if seen {
                    false
                } else if self.steps.len() >= MAX_STEPS {
                    return Err(Error::Limit(format!("steps: task {} already has {MAX_STEPS}", self.id)));
                } else {
                    self.steps.push(step);
                    true
                }
            }
            TaskUpdate::Fact(f) => add(&mut self.confirmed_facts, "fact", &f)?,
            TaskUpdate::Assumption(a) => add(&mut self.assumptions, "assumption", &a)?,
            TaskUpdate::Question(q) => add(&mut self.open_questions, "question", &q)?,
            TaskUpdate::Note(n) => add(&mut self.notes, "note", &n)?,
            TaskUpdate::CurrentStep(c) => {
                let c = text("current-step", &c)?;
                if self.current_step.as_ref() == Some(&c) {
                    false
                } else {
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

    #[test]
    fn the_same_update_twice_changes_nothing() {
        let mut t = Task::new("t1".into(), "clean the sales CSV", None, 0).unwrap();
        assert!(t.apply(step(StepKind::Thought, "look at the header"), None, 1).unwrap());
        assert!(!t.apply(step(StepKind::Thought, "look at the header"), None, 2).unwrap());
        assert!(t.apply(TaskUpdate::Fact("the file is UTF-8 with a BOM".into()), None, 3).unwrap());
        assert!(!t.apply(TaskUpdate::Fact("the file is UTF-8 with a BOM".into()), None, 4).unwrap());
        assert_eq!((t.steps.len(), t.confirmed_facts.len(), t.version), (1, 1, 3));
    }

    #[test]
    fn a_stale_version_is_refused_and_changes_nothing() {
        let mut t = Task::new("t1".into(), "goal", None, 0).unwrap();
        t.apply(TaskUpdate::Note("a".into()), Some(1), 1).unwrap();
        let err = t.apply(TaskUpdate::Note("b".into()), Some(1), 2).unwrap_err();
        assert!(matches!(&err, Error::Stale(m) if m.contains("at version 2")), "{err}");
        assert_eq!(t.notes, vec!["a"]);
    }

    #[test]
    fn tool_results_pair_with_their_calls() {
        let mut t = Task::new("t1".into(), "goal", None, 0).unwrap();
        let call = |kind, text: &str, error| {
            let step = hindsight_types::Step {
                tool: Some("http".into()),
                error,
                ..hindsight_types::Step::new(kind, text)
            };
            TaskUpdate::Step(step.at(1))
        };
        t.apply(call(StepKind::ToolCall, "GET /a", false), None, 1).unwrap();
        t.apply(call(StepKind::ToolResult, "timeout after 30 s", true), None, 1).unwrap();
        let calls = t.tool_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].result.as_deref(), calls[0].error), (Some("timeout after 30 s"), true));
    }
}
