//! Looking at a bank and fixing it by hand: `list` (filters, two orders, a keyset cursor) and
//! `correct` (the user's replacement supersedes the memory; similar memories lose confidence).

use std::collections::BTreeMap;

use hindsight_types::time::Timestamp;
use hindsight_types::{
    Cascaded, Correction, ListOrder, ListPage, ListQuery, Memory, Source, Status, UseEvent, UseRecord,
};

use super::Bank;
use crate::record::Record;
use crate::store::Op;
use crate::{Error, Result};

/// The most memories one `list` page holds.
pub const MAX_LIST: u32 = 1000;
const DEFAULT_LIST: u32 = 50;

/// A memory's place in a list order: compared descending, the id last so that no two tie. A
/// cursor is the key of the last memory of a page; the next page starts strictly after it, so a
/// memory written meanwhile never shifts a newest-first page (it sorts before the cursor). In
/// most-recalled order a memory recalled between pages moves, as its key does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey(u32, Timestamp, String);

impl SortKey {
    fn of(m: &Record, order: ListOrder) -> SortKey {
        let recalled = if order == ListOrder::MostRecalled { m.recalled() } else { 0 };
        SortKey(recalled, m.created_at, m.id.clone())
    }

    fn cursor(&self, order: ListOrder) -> String {
        match order {
            ListOrder::Newest => format!("n.{}.{}", self.1, self.2),
            ListOrder::MostRecalled => format!("r.{}.{}.{}", self.0, self.1, self.2),
        }
    }

    fn parse(cursor: &str, order: ListOrder) -> Result<SortKey> {
        let bad = || Error::invalid("cursor", format!("{cursor:?} is not a cursor this list returned"));
        let parts: Vec<&str> = cursor.splitn(4, '.').collect();
        match (order, parts.as_slice()) {
            (ListOrder::Newest, ["n", at, id]) => {
                Ok(SortKey(0, at.parse().map_err(|_| bad())?, id.to_string()))
            }
            (ListOrder::MostRecalled, ["r", n, at, id]) => {
                Ok(SortKey(n.parse().map_err(|_| bad())?, at.parse().map_err(|_| bad())?, id.to_string()))
            }
            _ => Err(bad()),
        }
    }
}

impl Bank {
    /// The bank's memories matching `q`, a page at a time.
    pub fn list(&mut self, q: &ListQuery) -> Result<ListPage> {
        self.sync()?;
        let limit = q.limit.unwrap_or(DEFAULT_LIST);
        if limit == 0 || limit > MAX_LIST {
            return Err(Error::invalid("limit", format!("must be from 1 to {MAX_LIST}, got {limit}")));
        }
        let after = q.cursor.as_deref().map(|c| SortKey::parse(c, q.order)).transpose()?;
        let text = q.text.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_lowercase);
        let status = if q.any_status { None } else { Some(q.status.unwrap_or(Status::Active)) };
        let matches = |m: &Record| {
            status.is_none_or(|s| m.status == s)
                && q.kind.is_none_or(|k| m.kind == k)
                && q.tag.as_deref().is_none_or(|t| m.has_tag(t))
                && q.task_type.as_deref().is_none_or(|t| m.task_type.as_deref() == Some(t))
                && q.source.is_none_or(|s| m.source == s)
                && text.as_deref().is_none_or(|t| m.content.to_lowercase().contains(t))
        };
        let mut total = 0u32;
        // Descending order: the greatest keys below the cursor, one more than the page holds to
        // learn whether another page follows.
        let mut page: BTreeMap<std::cmp::Reverse<SortKey>, &Record> = BTreeMap::new();
        for m in self.state.slots.iter().flatten().filter(|m| matches(m)) {
            total += 1;
            let key = SortKey::of(m, q.order);
            if after.as_ref().is_some_and(|a| key >= *a) {
                continue;
            }
            page.insert(std::cmp::Reverse(key), m);
            if page.len() > limit as usize + 1 {
                page.pop_last();
            }
        }
        let more = page.len() > limit as usize;
        if more {
            page.pop_last();
        }
        let next_cursor = if more { page.keys().next_back().map(|k| k.0.cursor(q.order)) } else { None };
        Ok(ListPage { items: page.into_values().map(Record::to_public).collect(), next_cursor, total })
    }

    /// The user's correction of memory `id`: a new memory holding `content` (source
    /// user-feedback, confidence `feedback.correction_confidence`) supersedes it, and active
    /// memories closer than `feedback.correction_cascade_cosine` to the old content have their
    /// confidence multiplied by `feedback.correction_cascade_factor`. One commit.
    /// `agent`: who corrects, the new memory's agent (none keeps the old memory's).
    pub fn correct(
        &mut self,
        id: &str,
        content: &str,
        agent: Option<&str>,
        now: Timestamp,
    ) -> Result<Correction> {
        self.transact(|bank| bank.correct_once(id, content, agent, now))
    }

    fn correct_once(
        &mut self,
        id: &str,
        content: &str,
        agent: Option<&str>,
        now: Timestamp,
    ) -> Result<Correction> {
        let old = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        if old.status != Status::Active {
            let hint = match &old.superseded_by {
                Some(by) => format!("; correct {by}, which replaced it"),
                None => String::new(),
            };
            return Err(Error::invalid("id", format!("{id} is {}, not active{hint}", old.status)));
        }
        if content.trim() == old.content.trim() {
            return Err(Error::invalid("content", "is the memory's current content: nothing to correct"));
        }
        let f = self.settings.feedback.clone();
        let mut metadata = old.metadata.clone();
        metadata.retain(|(k, _)| k != "corrects");
        metadata.push(("corrects".into(), old.id.clone()));
        let item = Memory {
            kind: Some(old.kind),
            task_type: old.task_type.clone(),
            task_description: old.task_description.clone(),
            context: old.context.clone(),
            tags: old.tags.clone(),
            scope: Some(old.scope.clone()),
            agent_id: agent.map(str::to_string).or_else(|| old.agent_id.clone()),
            importance: Some(old.importance),
            confidence: Some(f.correction_confidence),
            source: Some(Source::UserFeedback),
            failure_type: old.failure_type,
            metadata,
            ..Memory::new(content)
        };
        let new_id = self.new_id(now);
        let mut new = crate::record::build(item, new_id, now, &self.settings, self.embedder.model_id())?;
        crate::defence::screen(&mut new, &self.settings.defence)?;
        let (vector, keys) = self.embed_stored(&[new.content.as_str()])?.remove(0);
        new.supersedes.push(old.id.clone());

        let mut touched: BTreeMap<String, Record> = BTreeMap::new();
        let mut cascade = Vec::new();
        if let Some(old_vector) = self.state.by_id.get(id).and_then(|&slot| self.state.vector(slot)) {
            let state = &self.state;
            let others = |slot: u32| {
                state.slots[slot as usize].as_ref().is_some_and(|m| m.is_active() && m.id != old.id)
            };
            let pool = (self.settings.limits.max_k as usize).max(100);
            for (slot, cosine) in state.search_vectors(old_vector, pool, others) {
                if cosine < f.correction_cascade_cosine {
                    continue;
                }
                let Some(mut m) = state.slots[slot as usize].clone() else { continue };
                let before = m.confidence;
                m.confidence *= f.correction_cascade_factor;
                m.updated_at = now;
                m.note(UseRecord {
                    at: now,
                    event: UseEvent::Cascade,
                    outcome: None,
                    task_id: None,
                    other: Some(new.id.clone()),
                });
                cascade.push(Cascaded { id: m.id.clone(), before, after: m.confidence });
                touched.insert(m.id.clone(), m);
            }
        }
        let mut o = old.clone();
        o.set_status(Status::Superseded, now);
        o.superseded_by = Some(new.id.clone());
        o.unhelpful = o.unhelpful.saturating_add(1);
        o.note(UseRecord {
            at: now,
            event: UseEvent::Corrected,
            outcome: None,
            task_id: None,
            other: Some(new.id.clone()),
        });
        touched.insert(o.id.clone(), o);

        let mut ops: Vec<Op> = touched.values().map(|m| self.put_memory(m)).collect();
        ops.push(self.put_memory(&new));
        ops.push(self.put_vector(&new.id, &vector, keys.as_ref()));
        for m in touched.into_values() {
            self.state.update(m);
        }
        let slot = self.state.insert(new.clone(), &vector);
        self.state.set_sentences(slot, keys);
        self.state.index_lexical(slot, &self.settings.lexical);
        self.commit_or_reload(ops, now)?;
        Ok(Correction { memory: new.to_public(), superseded: old.id, cascade })
    }
}
