//! Tasks as working memory, and at a task's end a look back that keeps what
//! will help next time — through the LLM when the host lends one, by rules otherwise — written
//! through the normal write path. Also consolidation of episodes into semantic memories.

use serde::Deserialize;

use hindsight_types::time::{date, Timestamp, DAY_MS};
use hindsight_types::{
    DistillMethod, Distilled, EndTask, FailureType, Kind, LlmOperation, Memory, Named, NewTask,
    RetainOutcome, Source, StepKind, TaskEnd, TaskState, TaskUpdate, Trajectory,
};

use super::Bank;
use crate::defence::screen_text;
use crate::filter::{asks_to_remember, is_transient_failure, repeat_key};
use crate::llm::{parse_json, LlmError, LlmRequest};
use crate::record::{Record, TAG_CONSTRAINT, TAG_PREFERENCE, TAG_TRANSIENT};
use crate::store::StoreError;
use crate::store::{scan_all, Op};
use crate::task::Task;
use crate::usage::OVER_BUDGET;
use crate::{Error, Result};

/// What the LLM is asked to return.
#[derive(Debug, Deserialize)]
struct Lessons {
    memories: Vec<Lesson>,
}

#[derive(Debug, Deserialize)]
struct Lesson {
    kind: String,
    content: String,
    #[serde(default)]
    task_type: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    confidence: f32,
    #[serde(default)]
    failure: Option<String>,
    /// Consolidation: the numbers of the episodes it came from.
    #[serde(default)]
    sources: Vec<usize>,
    /// General knowledge other agents need too: written to `spaces.shared_bank`.
    #[serde(default)]
    share: bool,
}

impl Bank {
    pub(super) fn task_key(&self, id: &str) -> String {
        self.key(&format!("t/{id}"))
    }

    /// The task and its stored bytes (what a save expects to replace).
    pub(super) fn load_task(&self, id: &str) -> Result<(Task, Vec<u8>)> {
        let bytes = self
            .store
            .get(&self.task_key(id))?
            .ok_or_else(|| Error::not_found("task", id, format!("no task {id:?} in bank {}", self.id)))?;
        let task = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt(format!("task {id}: {e}")))?;
        Ok((task, bytes))
    }

    /// Saves a task if its record still holds `previous` (none: it must not exist yet), so two
    /// writers never overwrite each other's update; `StoreError::Conflict` otherwise. Tasks are not
    /// part of the recall index: no sequence bump, no reload elsewhere.
    fn save_task(&self, task: &Task, previous: Option<Vec<u8>>) -> Result<()> {
        let key = self.task_key(&task.id);
        let bytes = serde_json::to_vec(task).expect("task serialises");
        Ok(self.store.commit(vec![Op::Expect(key.clone(), previous), Op::Put(key, bytes)])?)
    }

    /// Reads task `id`, changes it with `change` (which says whether it changed anything) and
    /// saves it; when another writer saved it in between, does it again on the fresh record.
    fn change_task(&self, id: &str, mut change: impl FnMut(&mut Task) -> Result<bool>) -> Result<Task> {
        const TRIES: usize = 8;
        for _ in 0..TRIES {
            let (mut task, bytes) = self.load_task(id)?;
            if !change(&mut task)? {
                return Ok(task);
            }
            match self.save_task(&task, Some(bytes)) {
                Ok(()) => return Ok(task),
                Err(Error::Store(StoreError::Conflict(_))) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Conflict(format!("task {id}: other writers kept changing it first ({TRIES} tries)")))
    }

    pub fn begin_task(&mut self, new: &NewTask, now: Timestamp) -> Result<TaskState> {
        let id = format!("t{}", &self.new_id(now)[1..]);
        let mut new = new.clone();
        new.goal = screen_text("goal", &new.goal, &self.settings.defence)?;
        let task = Task::new(id, &new, now)?;
        self.save_task(&task, None)?;
        Ok(task.to_state())
    }

    pub fn task(&self, id: &str) -> Result<TaskState> {
        Ok(self.stored_task(id)?.to_state())
    }

    /// The task as stored, bookkeeping included.
    pub(crate) fn stored_task(&self, id: &str) -> Result<Task> {
        Ok(self.load_task(id)?.0)
    }

    /// Every task of the bank, newest first; ended ones only when asked.
    pub fn tasks(&self, include_ended: bool) -> Result<Vec<TaskState>> {
        Ok(self.stored_tasks(include_ended)?.iter().map(Task::to_state).collect())
    }

    /// The tasks as stored, newest first; ended ones only when asked.
    pub(super) fn stored_tasks(&self, include_ended: bool) -> Result<Vec<Task>> {
        let mut out: Vec<Task> = Vec::new();
        scan_all(&*self.store, &self.key("t/"), |key, bytes| {
            let task: Task =
                serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt(format!("{key}: {e}")))?;
            if include_ended || !task.is_ended() {
                out.push(task);
            }
            Ok(())
        })?;
        out.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    pub fn update_task(
        &mut self,
        id: &str,
        update: TaskUpdate,
        expected_version: Option<u32>,
        now: Timestamp,
    ) -> Result<TaskState> {
        let limits = self.settings.tasks.clone();
        let update = self.screened(update)?;
        Ok(self
            .change_task(id, |task| task.apply(update.clone(), expected_version, now, &limits))?
            .to_state())
    }

    /// A task update with the write-time defence applied to its text: a secret is redacted (or
    /// the update refused) before the task record keeps it, as a memory's would be.
    fn screened(&self, update: TaskUpdate) -> Result<TaskUpdate> {
        let s = &self.settings.defence;
        let text = |t: String| screen_text("text", &t, s);
        Ok(match update {
            TaskUpdate::Step(mut step) => {
                step.text = text(step.text)?;
                TaskUpdate::Step(step)
            }
            TaskUpdate::Fact(t) => TaskUpdate::Fact(text(t)?),
            TaskUpdate::Assumption(t) => TaskUpdate::Assumption(text(t)?),
            TaskUpdate::Question(t) => TaskUpdate::Question(text(t)?),
            TaskUpdate::Note(t) => TaskUpdate::Note(text(t)?),
            TaskUpdate::CurrentStep(t) => TaskUpdate::CurrentStep(text(t)?),
        })
    }

    /// A task told whole: begun, its steps and facts recorded, then ended and distilled as
    /// [`Bank::end_task`] does. A step or fact the task refuses erases the task again, so a
    /// trajectory is kept whole or not at all.
    pub fn distill_trajectory(&mut self, t: Trajectory, may_share: bool, now: Timestamp) -> Result<TaskEnd> {
        let new = NewTask { goal: t.goal, task_type: t.task_type, agent_id: t.agent_id };
        let task = self.begin_task(&new, now)?;
        let updates = t
            .steps
            .into_iter()
            .enumerate()
            .map(|(i, step)| (format!("steps[{i}]"), TaskUpdate::Step(step)))
            .chain(
                t.facts.into_iter().enumerate().map(|(i, f)| (format!("facts[{i}]"), TaskUpdate::Fact(f))),
            );
        for (field, update) in updates {
            if let Err(e) = self.update_task(&task.id, update, None, now) {
                self.delete_task(&task.id)?;
                return Err(match e {
                    Error::InvalidInput(f) => Error::InvalidInput(f.within(&field)),
                    other => other,
                });
            }
        }
        self.end_task(&task.id, t.end, may_share, now)
    }

    /// Erases a task's record for good.
    pub fn delete_task(&mut self, id: &str) -> Result<()> {
        let key = self.task_key(id);
        for _ in 0..8 {
            let (_, bytes) = self.load_task(id)?;
            match self.store.commit(vec![Op::Expect(key.clone(), Some(bytes)), Op::Delete(key.clone())]) {
                Err(StoreError::Conflict(_)) => continue,
                other => return Ok(other?),
            }
        }
        Err(Error::Conflict(format!("task {id}: other writers kept changing it first")))
    }

    /// The ops that replace, in every task of the bank, each text holding one of `erased`'s
    /// texts with an erasure marker and clear citation handles naming them (for the commit that
    /// erases them), and the tasks changed.
    pub(super) fn scrub_tasks(&self, erased: &[Record], now: Timestamp) -> Result<(Vec<String>, Vec<Op>)> {
        let mut changed = Vec::new();
        let mut ops = Vec::new();
        scan_all(&*self.store, &self.key("t/"), |key, bytes| {
            let mut task: Task =
                serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt(format!("{key}: {e}")))?;
            let mut touched = false;
            for m in erased {
                touched |= task.scrub(&m.content, now);
                for h in task.handles.iter_mut().filter(|h| **h == m.id) {
                    h.clear();
                    touched = true;
                }
            }
            if touched {
                let saved = serde_json::to_vec(&task).expect("task serialises");
                ops.push(Op::Expect(key.clone(), Some(bytes)));
                ops.push(Op::Put(key, saved));
                changed.push(task.id.clone());
            }
            Ok(())
        })?;
        Ok((changed, ops))
    }

    /// The task marked distilled (`method`, now), and the ops that store it if nobody changed
    /// it since it was read: they go into the commit that retains its memories.
    fn mark_distilled(&self, id: &str, method: DistillMethod, now: Timestamp) -> Result<(Task, Vec<Op>)> {
        let (mut task, bytes) = self.load_task(id)?;
        task.distilled = Some((now, method));
        task.version += 1;
        task.updated_at = now;
        let key = self.task_key(id);
        let marked = serde_json::to_vec(&task).expect("task serialises");
        Ok((task, vec![Op::Expect(key.clone(), Some(bytes)), Op::Put(key, marked)]))
    }

    /// Distils an ended task that has not been (its distillation was skipped, or failed): with the
    /// LLM when there is one, by rules when there is none or `rules_only`.
    /// `may_share`: lessons marked for sharing may also go to `spaces.shared_bank` (the caller may
    /// write there).
    pub fn distill_task(
        &mut self,
        id: &str,
        rules_only: bool,
        may_share: bool,
        now: Timestamp,
    ) -> Result<TaskEnd> {
        let task = self.load_task(id)?.0;
        if !task.is_ended() {
            return Err(Error::invalid("task", format!("{id} has not ended: end it first")));
        }
        if let Some((at, method)) = task.distilled {
            return Err(Error::invalid(
                "task",
                format!("{id} was already distilled ({method}, {})", hindsight_types::time::format_iso(at)),
            ));
        }
        self.distill(task, "distillation asked for".into(), rules_only, may_share, now)
    }

    /// Ends the task (stored first, so it is ended whatever distillation does), then distils it
    /// when it is worth it. With an LLM, an unusable answer is an error — never a guessed
    /// memory; the task stays ended.
    pub fn end_task(&mut self, id: &str, end: EndTask, may_share: bool, now: Timestamp) -> Result<TaskEnd> {
        let EndTask { outcome, detail, force } = end;
        let detail = detail.map(|d| d.trim().to_string()).filter(|d| !d.is_empty());
        let detail = detail.map(|d| screen_text("detail", &d, &self.settings.defence)).transpose()?;
        // Of two callers ending the task at once, one ends it; the other finds it ended.
        let task = self.change_task(id, |task| {
            if task.is_ended() {
                return Err(Error::invalid("task", format!("{id} has already ended")));
            }
            task.ended_at = Some(now);
            task.outcome = Some(outcome);
            task.detail = detail.clone();
            task.version += 1;
            task.updated_at = now;
            Ok(true)
        })?;

        let citations = self.apply_citations(&task, now)?;
        let Some(reason) = self.worth_distilling(&task, force) else {
            let s = &self.settings.distill;
            let steps = task.steps.len();
            let tool_calls = task.steps.iter().filter(|st| st.kind == StepKind::ToolCall).count();
            return Ok(TaskEnd {
                reason: format!(
                    "not distilled: {steps} steps, {tool_calls} tool calls and no request to remember (thresholds: more than {} steps or {} tool calls; `task distill` distils it anyway)",
                    s.min_steps, s.min_tool_calls
                ),
                task: task.to_state(),
                method: DistillMethod::Skipped,
                items: Vec::new(),
                cited: citations.cited,
                unused: citations.unused,
            });
        };
        let end = self.distill(task, reason, false, may_share, now)?;
        Ok(TaskEnd { cited: citations.cited, unused: citations.unused, ..end })
    }

    /// Why the task is worth distilling, if it is.
    fn worth_distilling(&self, task: &Task, force: bool) -> Option<String> {
        let s = &self.settings.distill;
        let steps = task.steps.len() as u32;
        let tool_calls = task.steps.iter().filter(|st| st.kind == StepKind::ToolCall).count() as u32;
        if force {
            Some("distillation forced by the caller".to_string())
        } else if task.user_asked_to_remember() {
            Some("the user asked to remember".to_string())
        } else if steps > s.min_steps {
            Some(format!("{steps} steps (more than {})", s.min_steps))
        } else if tool_calls > s.min_tool_calls {
            Some(format!("{tool_calls} tool calls (more than {})", s.min_tool_calls))
        } else {
            None
        }
    }

    /// Distils an ended task: its memories and the mark that it is distilled in one commit. With
    /// an LLM, an unusable answer is an error — never a guessed memory — and the task can be
    /// distilled again (`distill_task`).
    fn distill(
        &mut self,
        task: Task,
        reason: String,
        rules_only: bool,
        may_share: bool,
        now: Timestamp,
    ) -> Result<TaskEnd> {
        let id = task.id.clone();
        let unretained = "the task is ended and stored, nothing was retained; `task distill` tries again \
                          (`--rules` without the LLM)";
        let answer = if rules_only {
            Err(LlmError::Unavailable("the rules were asked for".into()))
        } else {
            self.llm.complete(&distill_request(&task, &self.settings.distill))
        };
        match answer {
            Err(LlmError::Unavailable(why)) => {
                let candidates = rule_lessons(&task);
                let (task, items) = self.retain_lessons(&task, candidates, now)?;
                let how = if rules_only {
                    "distilled by rules".to_string()
                } else if why.starts_with(OVER_BUDGET) {
                    format!("{why}: distilled by rules")
                } else {
                    "no LLM: distilled by rules".to_string()
                };
                Ok(TaskEnd {
                    task: task.to_state(),
                    method: DistillMethod::Rules,
                    reason: format!("{reason}; {how}"),
                    items,
                    cited: Vec::new(),
                    unused: Vec::new(),
                })
            }
            Err(LlmError::Failed(e)) => {
                Err(Error::Llm(format!("distilling task {id}: the LLM call failed: {e}; {unretained}")))
            }
            Ok(response) => {
                let lessons = parse_json::<Lessons>(&response.text)
                    .map_err(|e| Error::Llm(format!("distilling task {id}: {e}; {unretained}")))?;
                let (task, items) = self.verify_and_retain(&task, lessons.memories, may_share, now)?;
                Ok(TaskEnd {
                    task: task.to_state(),
                    method: DistillMethod::Llm,
                    reason,
                    items,
                    cited: Vec::new(),
                    unused: Vec::new(),
                })
            }
        }
    }

    /// Drops low-confidence and surplus items, folds repeats together, keeps transient failures
    /// as expiring episodes, then retains the rest through the write path.
    fn verify_and_retain(
        &mut self,
        task: &Task,
        lessons: Vec<Lesson>,
        may_share: bool,
        now: Timestamp,
    ) -> Result<(Task, Vec<Distilled>)> {
        let s = self.settings.distill.clone();
        let mut dropped: Vec<Distilled> = Vec::new();
        let mut kept: Vec<Memory> = Vec::new();
        let mut shared: Vec<bool> = Vec::new();
        for lesson in lessons {
            let kind = Kind::parse("kind", lesson.kind.trim()).unwrap_or(Kind::Semantic);
            let content = lesson.content.trim().to_string();
            let drop = |reason: String| Distilled {
                content: content.clone(),
                kind,
                outcome: RetainOutcome::filtered(reason),
                bank: self.id.clone(),
            };
            if content.is_empty() {
                continue;
            }
            if !(lesson.confidence.is_finite() && lesson.confidence >= s.min_confidence) {
                dropped.push(drop(format!("confidence {} below {}", lesson.confidence, s.min_confidence)));
                continue;
            }
            // Related items: one that repeats or contains another is folded into it (only one
            // going to the same bank: a private lesson's text must not reach the shared bank).
            let key = repeat_key(&content);
            if let Some(existing) = kept.iter_mut().zip(&shared).find_map(|(k, &share)| {
                let other = repeat_key(&k.content);
                (share == lesson.share && (other.contains(&key) || key.contains(&other))).then_some(k)
            }) {
                if content.len() > existing.content.len() {
                    existing.content = content.clone();
                }
                dropped.push(drop("folded into a related item of the same distillation".into()));
                continue;
            }
            if kept.len() >= s.max_memories as usize {
                dropped.push(drop(format!("more than {} items", s.max_memories)));
                continue;
            }
            let task_type = lesson
                .task_type
                .filter(|t| s.task_types.iter().any(|k| k == t))
                .or_else(|| task.task_type.clone());
            let failure = match lesson.failure.as_deref().map(str::trim) {
                Some("transient") => Some(FailureType::Transient),
                Some("permanent") => Some(FailureType::Permanent),
                _ => None,
            };
            let mut item = Memory {
                kind: Some(kind),
                task_type,
                tags: lesson.tags.into_iter().filter(|t| !t.trim().is_empty()).take(8).collect(),
                confidence: Some(lesson.confidence.min(1.0)),
                failure_type: failure,
                ..Memory::new(content)
            };
            shape_transient(&mut item, &s, now);
            kept.push(item);
            shared.push(lesson.share);
        }
        let shared = if may_share { shared } else { Vec::new() };
        let (task, mut items) = self.retain_for_task(task, kept, shared, DistillMethod::Llm, now)?;
        items.extend(dropped);
        Ok((task, items))
    }

    fn retain_lessons(
        &mut self,
        task: &Task,
        mut lessons: Vec<Memory>,
        now: Timestamp,
    ) -> Result<(Task, Vec<Distilled>)> {
        let s = self.settings.distill.clone();
        for item in &mut lessons {
            shape_transient(item, &s, now);
        }
        lessons.truncate(s.max_memories as usize);
        let own = vec![false; lessons.len()];
        self.retain_for_task(task, lessons, own, DistillMethod::Rules, now)
    }

    /// Retains a task's memories, each marked with the task it came from, and marks the task
    /// distilled, in one commit. The ones marked `share` go to `spaces.shared_bank` instead,
    /// through its own write path, in a second commit (of that bank) after the first.
    fn retain_for_task(
        &mut self,
        task: &Task,
        mut items: Vec<Memory>,
        share: Vec<bool>,
        method: DistillMethod,
        now: Timestamp,
    ) -> Result<(Task, Vec<Distilled>)> {
        for item in &mut items {
            item.occurred_at = Some(task.ended_at.unwrap_or(now));
            item.task_description.get_or_insert_with(|| truncate(&task.goal, 1000));
            if item.agent_id.is_none() {
                item.agent_id = task.agent_id.clone();
            }
            if item.task_type.is_none() {
                item.task_type = task.task_type.clone();
            }
            item.metadata.push(("task".into(), task.id.clone()));
            if let Some(outcome) = task.outcome {
                item.metadata.push(("task_outcome".into(), outcome.as_str().into()));
            }
        }
        let shared_bank = self.settings.spaces.shared_bank.clone();
        // Every lesson stays in the task's own bank; one marked for sharing is also copied to the
        // shared bank when the bank's settings opt in and the lesson passes `shareable` (the
        // LLM's mark alone is not trusted: a planted instruction could ask for it).
        let share_lessons = self.settings.spaces.share_lessons && shared_bank != self.id;
        let shared: Vec<Memory> = items
            .iter()
            .zip(share.into_iter().chain(std::iter::repeat(false)))
            .filter(|(item, share)| *share && share_lessons && shareable(item))
            .map(|(item, _)| {
                let mut copy = item.clone();
                copy.metadata.retain(|(k, _)| k != "task" && k != "task_outcome");
                copy.task_description = None;
                copy.context = None;
                copy.metadata.push(("shared_from".into(), format!("{}/{}", self.id, task.id)));
                copy
            })
            .collect();
        let own = items;
        let summary = |items: &[Memory]| -> Vec<(String, Kind)> {
            items.iter().map(|i| (i.content.clone(), i.kind.unwrap_or(self.settings.defaults.kind))).collect()
        };
        let (own_summary, shared_summary) = (summary(&own), summary(&shared));
        let (marked, outcomes) = if own.is_empty() {
            let marked = self.change_task(&task.id, |t| {
                t.distilled = Some((now, method));
                t.version += 1;
                t.updated_at = now;
                Ok(true)
            })?;
            (marked, Vec::new())
        } else {
            let (marked, ops) = self.mark_distilled(&task.id, method, now)?;
            (marked, self.retain_with(own, now, false, ops)?)
        };
        let mut out: Vec<Distilled> = own_summary
            .into_iter()
            .zip(outcomes)
            .map(|((content, kind), outcome)| Distilled { content, kind, outcome, bank: self.id.clone() })
            .collect();
        if !shared.is_empty() {
            // The task is distilled and its own memories are stored: a failure here is reported
            // on the shared items, not as the call's error (which would lose the rest).
            let written = self
                .open_sibling(&shared_bank)
                .and_then(|mut target| target.retain_with(shared, now, false, Vec::new()));
            let outcomes: Vec<RetainOutcome> = match written {
                Ok(outcomes) => outcomes,
                Err(e) => shared_summary
                    .iter()
                    .map(|_| RetainOutcome::filtered(format!("not written to {shared_bank}: {e}")))
                    .collect(),
            };
            out.extend(shared_summary.into_iter().zip(outcomes).map(|((content, kind), outcome)| {
                Distilled { content, kind, outcome, bank: shared_bank.clone() }
            }));
        }
        Ok((marked, out))
    }

    /// Induces semantic memories from the bank's recent episodes (since `since`) with the LLM,
    /// each linked to the episodes it came from (metadata `derived_from`).
    pub fn consolidate(&mut self, since: Option<Timestamp>, now: Timestamp) -> Result<Vec<Distilled>> {
        self.sync()?;
        let max = self.settings.distill.consolidate_max_episodes as usize;
        let mut episodes: Vec<(String, String, Timestamp)> = self
            .state
            .slots
            .iter()
            .flatten()
            .filter(|m| m.is_active() && m.kind == Kind::Episodic && since.is_none_or(|s| m.occurred_at >= s))
            .map(|m| (m.id.clone(), m.content.clone(), m.occurred_at))
            .collect();
        episodes.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        episodes.truncate(max);
        if episodes.is_empty() {
            return Ok(Vec::new());
        }
        let mut prompt = String::from(
            "Below are an agent's recent experiences, numbered. Induce the stable facts, user preferences \
             and recurring patterns they show (e.g. \"the last five data-cleaning tasks all had to handle \
             missing values\"). Only what several experiences support or the user clearly stated; each with \
             the numbers of the experiences it comes from in `sources`. An empty list if nothing holds.\n",
        );
        for (n, (_, content, at)) in episodes.iter().enumerate() {
            prompt.push_str(&format!("\n{n}. [{}] {}", date(*at), truncate(content, 400)));
        }
        let request = LlmRequest {
            operation: LlmOperation::Consolidate,
            system: SYSTEM.into(),
            prompt,
            json_schema: Some(LESSONS_SCHEMA.into()),
            max_tokens: self.settings.distill.max_tokens,
            temperature: 0.0,
        };
        let response = match self.llm.complete(&request) {
            Ok(r) => r,
            Err(LlmError::Unavailable(m)) if m.starts_with(OVER_BUDGET) => {
                return Err(Error::Llm(format!("consolidate: {m}; it has no rules to fall back on")))
            }
            Err(LlmError::Unavailable(m)) => {
                return Err(Error::Llm(format!(
                    "consolidate needs a language model and the host has none ({m})"
                )))
            }
            Err(LlmError::Failed(m)) => {
                return Err(Error::Llm(format!("consolidate: the LLM call failed: {m}")))
            }
        };
        let lessons =
            parse_json::<Lessons>(&response.text).map_err(|e| Error::Llm(format!("consolidate: {e}")))?;
        let min = self.settings.distill.min_confidence;
        let mut items = Vec::new();
        let mut dropped = Vec::new();
        for lesson in lessons.memories {
            let content = lesson.content.trim().to_string();
            let sources: Vec<&str> =
                lesson.sources.iter().filter_map(|&n| episodes.get(n).map(|e| e.0.as_str())).collect();
            let reason = if content.is_empty() {
                continue;
            } else if !(lesson.confidence.is_finite() && lesson.confidence >= min) {
                Some(format!("confidence {} below {min}", lesson.confidence))
            } else if sources.is_empty() {
                Some("names no experience it came from".to_string())
            } else {
                None
            };
            if let Some(reason) = reason {
                dropped.push(Distilled {
                    content,
                    kind: Kind::Semantic,
                    outcome: RetainOutcome::filtered(reason),
                    bank: self.id.clone(),
                });
                continue;
            }
            items.push(Memory {
                kind: Some(Kind::Semantic),
                tags: lesson.tags.into_iter().filter(|t| !t.trim().is_empty()).take(8).collect(),
                confidence: Some(lesson.confidence.min(1.0)),
                task_type: lesson.task_type.filter(|t| self.settings.distill.task_types.contains(t)),
                metadata: vec![("derived_from".into(), sources.join(","))],
                ..Memory::new(content)
            });
        }
        let summary: Vec<String> = items.iter().map(|i| i.content.clone()).collect();
        let mut out = Vec::new();
        if !items.is_empty() {
            let outcomes = self.retain_with(items, now, false, Vec::new())?;
            let bank = self.id.clone();
            out.extend(summary.into_iter().zip(outcomes).map(|(content, outcome)| Distilled {
                content,
                kind: Kind::Semantic,
                outcome,
                bank: bank.clone(),
            }));
        }
        out.extend(dropped);
        Ok(out)
    }
}

/// A transient failure is an episode that expires, never a standing "X does not work".
/// Whether a lesson may be copied to the shared bank: never what the user said themselves, a
/// preference or a constraint (the user's, not the team's), nor anything holding a secret.
fn shareable(item: &Memory) -> bool {
    let personal = matches!(item.source, Some(Source::UserExplicit | Source::UserFeedback));
    let tagged = item.tags.iter().any(|t| t == TAG_PREFERENCE || t == TAG_CONSTRAINT);
    let secret = crate::defence::secrets::find(&item.content).iter().any(|f| !f.kind.is_personal());
    !personal && !tagged && !secret
}

fn shape_transient(item: &mut Memory, s: &crate::settings::DistillSettings, now: Timestamp) {
    if item.failure_type != Some(FailureType::Transient) {
        return;
    }
    item.kind = Some(Kind::Episodic);
    item.importance = Some(s.transient_importance);
    if !item.tags.iter().any(|t| t == TAG_TRANSIENT) {
        item.tags.push(TAG_TRANSIENT.into());
    }
    item.valid_until = Some(now + (s.transient_ttl_days as f64 * DAY_MS as f64) as i64);
}

/// Offline hindsight from the task's structured fields: its confirmed facts, each failing tool
/// call with its error, what the user asked to remember, and the final answer.
fn rule_lessons(task: &Task) -> Vec<Memory> {
    let mut out = Vec::new();
    for fact in &task.confirmed_facts {
        out.push(Memory { kind: Some(Kind::Semantic), confidence: Some(0.8), ..Memory::new(fact.clone()) });
    }
    for step in task.steps.iter().filter(|s| s.kind == StepKind::UserMessage && asks_to_remember(&s.text)) {
        out.push(Memory {
            kind: Some(Kind::Semantic),
            source: Some(Source::UserExplicit),
            ..Memory::new(step.text.clone())
        });
    }
    for call in task.tool_calls().into_iter().filter(|c| c.error) {
        let error = call.result.clone().unwrap_or_default();
        let transient = is_transient_failure(&error);
        let input =
            if call.input.is_empty() { String::new() } else { format!(" ({})", truncate(&call.input, 200)) };
        out.push(Memory {
            kind: Some(Kind::Episodic),
            failure_type: Some(if transient { FailureType::Transient } else { FailureType::Permanent }),
            source: Some(Source::ToolResult),
            ..Memory::new(format!(
                "In the task \"{}\", the tool {}{input} failed: {}",
                truncate(&task.goal, 200),
                if call.tool.is_empty() { "call" } else { &call.tool },
                truncate(&error, 400)
            ))
        });
    }
    if let Some(answer) = task.steps.iter().rev().find(|s| s.kind == StepKind::Answer) {
        let outcome = task.outcome.map_or("ended", |o| o.as_str());
        let detail = task.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
        out.push(Memory {
            kind: Some(Kind::Episodic),
            ..Memory::new(format!(
                "Task \"{}\" ended in {outcome}{detail}; final answer: {}",
                truncate(&task.goal, 200),
                truncate(&answer.text, 600)
            ))
        });
    }
    out
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut t: String = text.chars().take(max_chars).collect();
    t.push('…');
    t
}

const SYSTEM: &str =
    "You distil an AI agent's experience into memories for its future tasks. Answer with JSON only.";

const LESSONS_SCHEMA: &str = r#"{"type":"object","properties":{"memories":{"type":"array","maxItems":5,"items":{"type":"object","properties":{"kind":{"type":"string","enum":["episodic","semantic","procedural"]},"content":{"type":"string"},"task_type":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}},"confidence":{"type":"number","minimum":0,"maximum":1},"failure":{"type":"string","enum":["none","transient","permanent"]},"sources":{"type":"array","items":{"type":"integer"}},"share":{"type":"boolean"}},"required":["kind","content","confidence"]}}},"required":["memories"]}"#;

fn distill_request(task: &Task, s: &crate::settings::DistillSettings) -> LlmRequest {
    let mut p = String::new();
    p.push_str(&format!("Task: {}\n", truncate(&task.goal, 1000)));
    if let Some(t) = &task.task_type {
        p.push_str(&format!("Task type: {t}\n"));
    }
    let outcome = task.outcome.map_or("unknown", |o| o.as_str());
    p.push_str(&format!(
        "Outcome: {outcome}{}\n",
        task.detail.as_deref().map(|d| format!(" — {d}")).unwrap_or_default()
    ));
    for (title, list) in [
        ("Confirmed facts", &task.confirmed_facts),
        ("Assumptions", &task.assumptions),
        ("Open questions", &task.open_questions),
        ("Notes", &task.notes),
    ] {
        if !list.is_empty() {
            p.push_str(&format!("{title}:\n"));
            for item in list {
                p.push_str(&format!("- {}\n", truncate(item, 300)));
            }
        }
    }
    p.push_str("Steps:\n");
    for (i, step) in task.steps.iter().enumerate().take(200) {
        let tool = step.tool.as_deref().map(|t| format!(" {t}")).unwrap_or_default();
        let error = if step.error { " (error)" } else { "" };
        p.push_str(&format!(
            "{}. {}{tool}{error}: {}\n",
            i + 1,
            step.kind.as_str(),
            truncate(&step.text, 300)
        ));
    }
    p.push_str(&format!(
        "\nLooking back at this task: what would the agent most want to know before doing a similar task \
         again? Keep only reusable lessons with their concrete parameters and conditions, failures with \
         their cause, and the user's corrections and preferences. For a failure, say whether it was \
         transient (timeout, rate limit, network: may work next time) or permanent (API removed, wrong \
         approach). At most {} memories, each with kind (episodic, semantic or procedural), content, \
         task_type (one of: {}), tags, confidence (0 to 1), failure (none, transient or permanent) and \
         share (true only for general knowledge other agents doing other tasks would need, such as how \
         a product or service behaves; never for this user's or agent's own preferences). \
         Return {{\"memories\": []}} when nothing is worth keeping.",
        s.max_memories,
        s.task_types.join(", ")
    ));
    LlmRequest {
        operation: LlmOperation::Extract,
        system: SYSTEM.into(),
        prompt: p,
        json_schema: Some(LESSONS_SCHEMA.into()),
        max_tokens: s.max_tokens,
        temperature: 0.0,
    }
}
