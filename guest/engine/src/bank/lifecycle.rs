//! What happens to memories after they are written: feedback on them, their history of
//! supersedes and merges, and `maintain` (decay, archiving, expiry, capacity, late merging).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use super::Bank;
use crate::index::near_duplicate_pairs;
use crate::{Error, Result};
use hindsight_types::time::{Timestamp, DAY_MS};
use hindsight_types::{
    FeedbackOutcome, HistoryEntry, HistoryEvent, Kind, MaintainAction, MaintainReport, MaintainStep,
    MemoryRecord, Status, UseEvent, UseRecord,
};

use crate::record::{Class, Record};
use crate::score;

impl Bank {
    /// Applies a caller's verdict to memories, all in one commit; an unknown id changes nothing.
    pub fn feedback(
        &mut self,
        ids: &[String],
        outcome: FeedbackOutcome,
        now: Timestamp,
    ) -> Result<Vec<MemoryRecord>> {
        Ok(self
            .transact(|bank| bank.feedback_once(ids, outcome, now))?
            .iter()
            .map(Record::to_public)
            .collect())
    }

    fn feedback_once(
        &mut self,
        ids: &[String],
        outcome: FeedbackOutcome,
        now: Timestamp,
    ) -> Result<Vec<Record>> {
        let f = self.settings.feedback.clone();
        self.change_each(ids, now, |m| {
            m.apply_feedback(outcome, &f, now);
            m.note(UseRecord {
                at: now,
                event: UseEvent::Feedback,
                outcome: Some(outcome),
                task_id: None,
                other: None,
            });
        })
    }

    /// Applies `change` to each memory `ids` names (once each) and stores them in one commit;
    /// an unknown id changes nothing.
    pub(super) fn change_each(
        &mut self,
        ids: &[String],
        now: Timestamp,
        mut change: impl FnMut(&mut Record),
    ) -> Result<Vec<Record>> {
        if ids.is_empty() {
            return Err(Error::invalid("ids", "must name at least one memory"));
        }
        if ids.len() > self.settings.limits.max_k as usize {
            return Err(Error::Limit(format!(
                "ids: {} in one call; the limit is {}",
                ids.len(),
                self.settings.limits.max_k
            )));
        }
        let mut changed: Vec<Record> = Vec::new();
        for id in ids {
            if changed.iter().any(|m| &m.id == id) {
                continue;
            }
            let mut m = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
            change(&mut m);
            m.updated_at = now;
            changed.push(m);
        }
        let ops = changed.iter().map(|m| self.put_memory(m)).collect();
        self.commit(ops, now)?;
        for m in &changed {
            self.state.update(m.clone());
        }
        Ok(changed)
    }

    /// Every memory linked to `id` by supersedes and merges, oldest event first.
    pub fn history(&mut self, id: &str) -> Result<Vec<HistoryEntry>> {
        self.sync()?;
        if self.state.memory(id).is_none() {
            return Err(self.not_found(id));
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut queue = VecDeque::from([id.to_string()]);
        let mut chain = Vec::new();
        while let Some(next) = queue.pop_front() {
            if !seen.insert(next.clone()) {
                continue;
            }
            // A link to a hard-deleted memory ends the chain there.
            let Some(m) = self.state.memory(&next) else { continue };
            queue.extend(m.supersedes.iter().cloned());
            queue.extend(m.superseded_by.iter().cloned());
            chain.push(m.clone());
        }
        let mut entries = Vec::new();
        for m in chain {
            let changed = m.status_changed_at.unwrap_or(m.updated_at);
            match m.status {
                Status::Superseded => {
                    entries.push(entry(changed, HistoryEvent::Superseded, &m, m.superseded_by.clone()))
                }
                Status::Merged => {
                    entries.push(entry(changed, HistoryEvent::Merged, &m, m.superseded_by.clone()))
                }
                Status::Archived => entries.push(entry(changed, HistoryEvent::Archived, &m, None)),
                Status::Active => {}
            }
            entries.push(entry(m.created_at, HistoryEvent::Created, &m, None));
        }
        entries.sort_by(|a, b| {
            a.at.cmp(&b.at).then((a.event as u8).cmp(&(b.event as u8))).then(a.memory.id.cmp(&b.memory.id))
        });
        Ok(entries)
    }

    /// Decay, archiving, expiry, late merging and the capacity cap, in one commit; the report
    /// lists every memory archived or merged and why. Nothing is erased.
    pub fn maintain(&mut self, now: Timestamp) -> Result<MaintainReport> {
        self.transact(|bank| bank.maintain_once(now, false))
    }

    /// What `maintain` would do at `now`, changing nothing.
    pub fn maintain_dry_run(&mut self, now: Timestamp) -> Result<MaintainReport> {
        self.sync()?;
        self.maintain_once(now, true)
    }

    fn maintain_once(&mut self, now: Timestamp, dry_run: bool) -> Result<MaintainReport> {
        let ms = self.settings.maintain.clone();
        let days = |d: f32| (d as f64 * DAY_MS as f64) as i64;
        let mut report = MaintainReport::default();
        let mut active: BTreeMap<String, Record> = self
            .state
            .slots
            .iter()
            .flatten()
            .filter(|m| m.is_active())
            .map(|m| (m.id.clone(), m.clone()))
            .collect();
        report.active_before = active.len() as u32;
        let mut changed: BTreeMap<String, Record> = BTreeMap::new();
        // `before` is the memory as this run found it: what a restore gives back.
        let archive = |m: Record,
                       before: &Record,
                       reason: String,
                       report: &mut MaintainReport,
                       changed: &mut BTreeMap<String, Record>| {
            let mut m = m;
            m.archive(before, now);
            report.steps.push(MaintainStep {
                id: m.id.clone(),
                action: MaintainAction::Archived,
                into: None,
                reason,
            });
            changed.insert(m.id.clone(), m);
        };

        for (_, mut m) in std::mem::take(&mut active) {
            if let Some(until) = m.valid_until.filter(|&u| u <= now) {
                let before = m.clone();
                archive(
                    m,
                    &before,
                    format!("expired on {}", hindsight_types::time::date(until)),
                    &mut report,
                    &mut changed,
                );
                continue;
            }
            let before = m.clone();
            let idle = now.saturating_sub(m.last_used()).max(0);
            if m.class() != Class::Constraint {
                let periods = (idle / days(ms.decay_period_days).max(1)) as u32;
                if periods > m.decay_periods {
                    m.confidence *= ms.decay_factor.powi((periods - m.decay_periods) as i32);
                    m.decay_periods = periods;
                    report.decayed += 1;
                }
                if m.confidence < ms.archive_below_confidence && idle >= days(ms.archive_idle_days) {
                    let reason = format!(
                        "confidence {:.2} below {} and unused for {} days",
                        m.confidence,
                        ms.archive_below_confidence,
                        idle / DAY_MS
                    );
                    archive(m, &before, reason, &mut report, &mut changed);
                    continue;
                }
                let age = now.saturating_sub(m.created_at);
                if m.kind == Kind::Episodic && m.access_count == 0 {
                    if age >= days(ms.episodic_archive_days) {
                        let reason = format!("an episode never recalled in {} days", age / DAY_MS);
                        archive(m, &before, reason, &mut report, &mut changed);
                        continue;
                    }
                    if age >= days(ms.episodic_weaken_days) && !m.weakened {
                        m.importance *= ms.weaken_factor;
                        m.weakened = true;
                        report.weakened += 1;
                    }
                }
            }
            if ms.archive_unused && m.never_useful(self.settings.audit.unused_after) {
                let reason = format!(
                    "never useful: recalled {} times, never cited or marked helpful (maintain.archive_unused)",
                    m.recalled()
                );
                archive(m, &before, reason, &mut report, &mut changed);
                continue;
            }
            if m != before {
                m.updated_at = now;
                changed.insert(m.id.clone(), m.clone());
            }
            active.insert(m.id.clone(), m);
        }

        self.merge_near_duplicates(&mut active, &mut changed, &mut report, now);

        let cap = ms.capacity as usize;
        if active.len() > cap {
            let recall = &self.settings.recall;
            let mut ranked: Vec<(f32, String)> = active
                .values()
                .map(|m| {
                    (
                        0.4 * m.confidence + 0.4 * m.importance + 0.2 * score::recency(m, now, recall),
                        m.id.clone(),
                    )
                })
                .collect();
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            let over = active.len() - cap;
            let total = active.len();
            for (composite, id) in ranked.into_iter().take(over) {
                let m = active.remove(&id).expect("ranked from active");
                let reason =
                    format!("over capacity ({total} active, cap {cap}): composite score {composite:.3}");
                let before = self.state.memory(&id).cloned().unwrap_or_else(|| m.clone());
                archive(m, &before, reason, &mut report, &mut changed);
            }
        }
        report.active_after = active.len() as u32;
        if dry_run {
            let ix = &self.settings.index;
            if self.state.seal_plan(ix.seal_min as usize, ix.merge_max as usize).0 {
                report.sealed = self.state.buffer_len() as u32;
            }
            return Ok(report);
        }

        let mut ops: Vec<crate::store::Op> = changed.values().map(|m| self.put_memory(m)).collect();
        for m in changed.into_values() {
            self.state.update(m);
        }
        let (sealing, sealed) = self.seal_buffer(self.settings.index.seal_min as usize, true);
        report.sealed = sealed as u32;
        ops.extend(sealing);
        if self.state.lexical.unsaved() > 0 {
            ops.push(self.save_lexical());
        }
        if !ops.is_empty() {
            self.commit_or_reload(ops, now)?;
        }
        Ok(report)
    }

    /// Pairs above `maintain.merge_cosine` of the same kind and scope that do not contradict
    /// each other: the more confident absorbs the other.
    fn merge_near_duplicates(
        &self,
        active: &mut BTreeMap<String, Record>,
        changed: &mut BTreeMap<String, Record>,
        report: &mut MaintainReport,
        now: Timestamp,
    ) {
        let threshold = self.settings.maintain.merge_cosine;
        let slots: Vec<u32> = active.keys().filter_map(|id| self.state.by_id.get(id).copied()).collect();
        let vectors: Vec<(u32, &[f32])> =
            slots.iter().filter_map(|&s| self.state.vector(s).map(|v| (s, v))).collect();
        let mut pairs = near_duplicate_pairs(&vectors, threshold);
        pairs.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
        let mut gone: HashSet<String> = HashSet::new();
        for (a, b, cosine) in pairs {
            let id_of = |slot: u32| self.state.slots[slot as usize].as_ref().map(|m| m.id.clone());
            let (Some(a), Some(b)) = (id_of(a), id_of(b)) else { continue };
            if gone.contains(&a) || gone.contains(&b) {
                continue;
            }
            let (Some(ma), Some(mb)) = (active.get(&a), active.get(&b)) else { continue };
            if ma.kind != mb.kind || ma.scope != mb.scope || ma.conflicts_with.contains(&b) {
                continue;
            }
            // Close wording with another value ("port 5433" / "port 5432") is not a duplicate.
            if Self::judge_without_llm(ma, mb, cosine, false).relation != super::judging::Relation::Duplicate
            {
                continue;
            }
            let a_survives = (ma.confidence, -ma.created_at, std::cmp::Reverse(&ma.id))
                >= (mb.confidence, -mb.created_at, std::cmp::Reverse(&mb.id));
            let (keep, drop) = if a_survives { (a, b) } else { (b, a) };
            let mut survivor = active.get(&keep).cloned().expect("checked");
            let mut absorbed = active.remove(&drop).expect("checked");
            survivor.importance = survivor.importance.max(absorbed.importance);
            survivor.confidence = survivor.confidence.max(absorbed.confidence);
            survivor.access_count = survivor.access_count.saturating_add(absorbed.access_count);
            survivor.supersedes.push(drop.clone());
            survivor.updated_at = now;
            absorbed.set_status(Status::Merged, now);
            absorbed.superseded_by = Some(keep.clone());
            report.steps.push(MaintainStep {
                id: drop.clone(),
                action: MaintainAction::Merged,
                into: Some(keep.clone()),
                reason: format!("a near-duplicate (cosine {cosine:.3}) of {keep}"),
            });
            gone.insert(drop.clone());
            changed.insert(drop, absorbed);
            changed.insert(keep.clone(), survivor.clone());
            active.insert(keep, survivor);
        }
    }
}

fn entry(at: Timestamp, event: HistoryEvent, m: &Record, other: Option<String>) -> HistoryEntry {
    HistoryEntry { at, event, memory: m.to_public(), other }
}
