//! Which memories were used and whether they helped: the recall log (`r/<seq>`, bounded by
//! `audit.max_entries`, its bounds under `rlog`), citation handles and what a task's end does
//! with the ones its answer cites, explicit use reports, `explain` and the audit.

use std::collections::BTreeMap;

use hindsight_types::time::Timestamp;
use hindsight_types::{
    Audit, AuditItem, Explanation, FeedbackOutcome, MemoryRecord, Outcome, RecallHit, RecallLogEntry,
    StepKind, UseEvent, UseRecord,
};
use serde::{Deserialize, Serialize};

use super::Bank;
use crate::record::Record;
use crate::store::{scan_all, Op};
use crate::task::Task;
use crate::{Error, Result};

const LOG_BOUNDS_KEY: &str = "rlog";

/// The recall log holds entries `first..next`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct LogBounds {
    pub(super) first: u64,
    pub(super) next: u64,
}

/// What a task's end did with the memories recalled for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Citations {
    /// Cited in the answer or the detail: the outcome was applied to them.
    pub cited: Vec<String>,
    /// Recalled for the task and not cited.
    pub unused: Vec<String>,
}

/// FNV-1a, 64 bits, as hex: the query's hash when its text is not kept.
fn query_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The citation handles (`[m3]` → 3) in a text.
pub(super) fn cited_handles(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("[m") {
        rest = &rest[at + 2..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && rest[digits.len()..].starts_with(']') {
            if let Ok(n) = digits.parse::<usize>() {
                if n > 0 && !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out
}

impl Bank {
    pub(super) fn log_key(&self, seq: u64) -> String {
        self.key(&format!("r/{seq:016x}"))
    }

    pub(super) fn log_bounds_op(&self, bounds: &LogBounds) -> Op {
        Op::Put(self.key(LOG_BOUNDS_KEY), serde_json::to_vec(bounds).expect("bounds serialise"))
    }

    pub(super) fn log_bounds(&self) -> Result<LogBounds> {
        match self.store.get(&self.key(LOG_BOUNDS_KEY))? {
            None => Ok(LogBounds::default()),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: recall log bounds: {e}", self.id))),
        }
    }

    /// The memories the newest `window` recall-log entries put in a prompt block (or returned,
    /// when the recall made no block), newest first, each once.
    pub(super) fn recently_served(&self, window: u32) -> Result<Vec<String>> {
        if window == 0 {
            return Ok(Vec::new());
        }
        let bounds = self.log_bounds()?;
        let mut out: Vec<String> = Vec::new();
        for seq in (bounds.first.max(bounds.next.saturating_sub(u64::from(window)))..bounds.next).rev() {
            let Some(bytes) = self.store.get(&self.log_key(seq))? else { continue };
            let entry: RecallLogEntry = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: recall log entry {seq}: {e}", self.id)))?;
            let any_in_prompt = entry.hits.iter().any(|h| h.handle.is_some());
            for hit in entry.hits.into_iter().filter(|h| h.handle.is_some() || !any_in_prompt) {
                if !out.contains(&hit.id) {
                    out.push(hit.id);
                }
            }
        }
        Ok(out)
    }

    /// A log entry for a recall that returned `hits`.
    pub(super) fn log_entry(
        &self,
        query: &str,
        agent_id: Option<String>,
        task_id: Option<String>,
        hits: Vec<RecallHit>,
        now: Timestamp,
    ) -> RecallLogEntry {
        RecallLogEntry {
            seq: 0,
            at: now,
            agent_id,
            task_id,
            query: self.settings.audit.store_queries.then(|| query.to_string()),
            query_hash: query_hash(query),
            hits,
        }
    }

    /// The ops that append `entry` to the recall log and drop what falls beyond
    /// `audit.max_entries`, for the recall's own commit.
    pub(super) fn log_ops(&self, mut entry: RecallLogEntry) -> Result<Vec<Op>> {
        let max = u64::from(self.settings.audit.max_entries);
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut bounds = self.log_bounds()?;
        entry.seq = bounds.next;
        let mut ops = vec![Op::Put(
            self.log_key(bounds.next),
            serde_json::to_vec(&entry).expect("log entry serialises"),
        )];
        bounds.next += 1;
        let excess = bounds.next.saturating_sub(bounds.first).saturating_sub(max);
        if excess <= 16 {
            for _ in 0..excess {
                ops.push(Op::Delete(self.log_key(bounds.first)));
                bounds.first += 1;
            }
        } else {
            // Bounds far apart (a log from before imports were renumbered, or a damaged one):
            // delete the entries that are there, not every number in between.
            let keep_from = bounds.next - max;
            let prefix = self.key("r/");
            scan_all(&*self.store, &prefix, |key, _| {
                let seq = u64::from_str_radix(&key[prefix.len()..], 16).unwrap_or(0);
                if seq < keep_from {
                    ops.push(Op::Delete(key));
                }
                Ok(())
            })?;
            bounds.first = keep_from;
        }
        ops.push(self.log_bounds_op(&bounds));
        Ok(ops)
    }

    /// The ops that take `id` out of the recall log's entries (for a hard forget's commit), and
    /// how many entries named it.
    pub(super) fn unlog(&self, id: &str) -> Result<(u32, Vec<Op>)> {
        let mut ops = Vec::new();
        for mut entry in self.recall_log(|e| e.hits.iter().any(|h| h.id == id))? {
            entry.hits.retain(|h| h.id != id);
            ops.push(Op::Put(
                self.log_key(entry.seq),
                serde_json::to_vec(&entry).expect("log entry serialises"),
            ));
        }
        Ok((ops.len() as u32, ops))
    }

    /// The recall log, oldest first, the entries `keep` accepts.
    pub fn recall_log(&self, mut keep: impl FnMut(&RecallLogEntry) -> bool) -> Result<Vec<RecallLogEntry>> {
        let mut out = Vec::new();
        scan_all(&*self.store, &self.key("r/"), |key, bytes| {
            let entry: RecallLogEntry = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: recall log {key}: {e}", self.id)))?;
            if keep(&entry) {
                out.push(entry);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The task's handles with `ids` added (each id keeps the handle it got first), and the ops
    /// that store them if the task is unchanged since it was read.
    pub(super) fn task_handles(&self, task_id: &str, ids: &[String]) -> Result<(Vec<String>, Vec<Op>)> {
        let (mut task, bytes) = self.load_task(task_id)?;
        if task.is_ended() {
            return Err(Error::invalid("task_id", format!("task {task_id} has ended")));
        }
        let before = task.handles.len();
        for id in ids {
            if !task.handles.contains(id) {
                task.handles.push(id.clone());
            }
        }
        if task.handles.len() == before {
            return Ok((task.handles, Vec::new()));
        }
        let key = self.task_key(task_id);
        let saved = serde_json::to_vec(&task).expect("task serialises");
        Ok((task.handles, vec![Op::Expect(key.clone(), Some(bytes)), Op::Put(key, saved)]))
    }

    /// At a task's end: the memories its answer (or the end's detail) cites get the task's outcome
    /// as feedback; the others recalled for it are noted as recalled and not used. One commit.
    pub(super) fn apply_citations(&mut self, task: &Task, now: Timestamp) -> Result<Citations> {
        if task.handles.is_empty() {
            return Ok(Citations::default());
        }
        let mut text = task.detail.clone().unwrap_or_default();
        for step in task.steps.iter().filter(|s| s.kind == StepKind::Answer) {
            text.push('\n');
            text.push_str(&step.text);
        }
        let numbers = cited_handles(&text);
        // Handles of memories from other banks hold `bank/id`: they are listed as cited or unused
        // (the host applies their feedback in their bank, where it may write), updated here only
        // when they are this bank's.
        let live = |id: &&String| !id.is_empty();
        let cited_all: Vec<String> =
            numbers.iter().filter_map(|&n| task.handles.get(n - 1)).filter(live).cloned().collect();
        let unused_all: Vec<String> =
            task.handles.iter().filter(live).filter(|id| !cited_all.contains(id)).cloned().collect();
        let mine = |id: &&String| !id.contains('/');
        let cited: Vec<String> = cited_all.iter().filter(mine).cloned().collect();
        let unused: Vec<String> = unused_all.iter().filter(mine).cloned().collect();
        let outcome = match task.outcome {
            Some(Outcome::Success) => Some(FeedbackOutcome::Success),
            Some(Outcome::Failure) => Some(FeedbackOutcome::Failure),
            _ => None,
        };
        let task_id = task.id.clone();
        self.transact(|bank| {
            let f = bank.settings.feedback.clone();
            let mut changed = Vec::new();
            for (id, was_cited) in
                cited.iter().map(|id| (id, true)).chain(unused.iter().map(|id| (id, false)))
            {
                // A memory erased since it was recalled has nothing left to update.
                let Some(mut m) = bank.state.memory(id).cloned() else { continue };
                let event = if was_cited {
                    m.cited = m.cited.saturating_add(1);
                    if let Some(o) = outcome {
                        m.apply_feedback(o, &f, now);
                    }
                    UseEvent::Cited
                } else {
                    UseEvent::RecalledNotUsed
                };
                m.note(UseRecord {
                    at: now,
                    event,
                    outcome: outcome.filter(|_| was_cited),
                    task_id: Some(task_id.clone()),
                    other: None,
                });
                m.updated_at = now;
                changed.push(m);
            }
            let ops = changed.iter().map(|m| bank.put_memory(m)).collect();
            bank.commit(ops, now)?;
            for m in changed {
                bank.state.update(m);
            }
            Ok(())
        })?;
        Ok(Citations { cited: cited_all, unused: unused_all })
    }

    /// The host or agent says it used these memories (for a task, if given): each is counted as
    /// cited. All or none: an unknown id changes nothing.
    pub fn report_used(
        &mut self,
        ids: &[String],
        task_id: Option<String>,
        now: Timestamp,
    ) -> Result<Vec<MemoryRecord>> {
        let used = self.transact(|bank| {
            bank.change_each(ids, now, |m| {
                m.cited = m.cited.saturating_add(1);
                m.note(UseRecord {
                    at: now,
                    event: UseEvent::Used,
                    outcome: None,
                    task_id: task_id.clone(),
                    other: None,
                });
            })
        })?;
        Ok(used.iter().map(Record::to_public).collect())
    }

    /// Where memory `id` came from (its source, the task it was distilled from with that task's
    /// steps, the episodes it was consolidated from, its history) and every recall that returned it.
    pub fn explain(&mut self, id: &str) -> Result<Explanation> {
        let history = self.history(id)?;
        let memory = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        let meta = |key: &str| memory.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let task = match meta("task") {
            Some(task_id) => match self.task(&task_id) {
                Ok(task) => Some(task),
                Err(Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let consolidated_from = meta("derived_from")
            .map(|list| list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
            .unwrap_or_default();
        let recalls = self.recall_log(|e| e.hits.iter().any(|h| h.id == id))?;
        Ok(Explanation {
            recalled: memory.recalled(),
            cited: memory.cited,
            helpful: memory.helpful,
            unhelpful: memory.unhelpful,
            events: memory.events.clone(),
            memory: memory.to_public(),
            task,
            consolidated_from,
            history,
            recalls,
        })
    }

    /// The bank's active memories that were recalled often and never helped, never recalled,
    /// and the most useful.
    pub fn audit(&mut self) -> Result<Audit> {
        self.sync()?;
        let unused_after = self.settings.audit.unused_after;
        let item = |m: &Record| AuditItem {
            id: m.id.clone(),
            content: m.content.clone(),
            recalled: m.recalled(),
            cited: m.cited,
            helpful: m.helpful,
        };
        let active: Vec<&Record> = self.state.slots.iter().flatten().filter(|m| m.is_active()).collect();
        let mut never_useful: Vec<&Record> =
            active.iter().copied().filter(|m| m.never_useful(unused_after)).collect();
        never_useful.sort_by(|a, b| b.recalled().cmp(&a.recalled()).then(a.id.cmp(&b.id)));
        let mut never_recalled: Vec<&Record> = active.iter().copied().filter(|m| m.recalled() == 0).collect();
        never_recalled.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        // Useful: helped more often than not; helping counts twice, a citation once.
        let merit = |m: &Record| i64::from(m.helpful) * 2 + i64::from(m.cited) - i64::from(m.unhelpful) * 2;
        let mut useful: BTreeMap<(std::cmp::Reverse<i64>, String), &Record> = BTreeMap::new();
        for m in active.iter().filter(|m| merit(m) > 0) {
            useful.insert((std::cmp::Reverse(merit(m)), m.id.clone()), m);
        }
        let bounds = self.log_bounds()?;
        Ok(Audit {
            bank: self.id.clone(),
            never_useful: never_useful.into_iter().map(item).collect(),
            never_recalled: never_recalled.into_iter().map(item).collect(),
            most_useful: useful.into_values().take(20).map(item).collect(),
            log_entries: (bounds.next - bounds.first) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::cited_handles;

    #[test]
    fn handles_are_read_from_brackets_only() {
        assert_eq!(cited_handles("per [m2] and [m10], not m3 or [m] or [mx] or [m4"), vec![2, 10]);
        assert_eq!(cited_handles("[m1][m1] [m0]"), vec![1]);
        assert!(cited_handles("nothing").is_empty());
    }
}
