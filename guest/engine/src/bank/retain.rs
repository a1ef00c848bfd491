//! The write path: filter, embed, then for each item in order create, reinforce, merge or
//! supersede against what the bank (and the same call) already holds; one commit at the end.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::judging::{Candidate, LlmVerdicts, Relation};
use super::{checked_keyed_vector, Bank, RetainAction, RetainOutcome};
use crate::embed::SentenceKeys;
use crate::filter::{self, KeepReason, Verdict};
use crate::llm::{parse_json, LlmError, LlmOperation, LlmRequest};
use crate::record::{Record, TAG_CONSTRAINT, TAG_PREFERENCE};
use crate::store::Op;
use crate::{Error, Result};
use hindsight_types::time::Timestamp;
use hindsight_types::{Memory, Source, Status};

/// One item on its way through the write path.
struct Pending {
    memory: Record,
    vector: Option<Vec<f32>>,
    /// Its sentence keys, if it has any.
    sentences: Option<SentenceKeys>,
    force: bool,
    parallel: bool,
    /// Follows the item before it in the call, as the next turn of a conversation does.
    sequence: bool,
    importance_given: bool,
    kept_because: Option<KeepReason>,
    /// What the write-time defence did to it (redacted, marked untrusted).
    defence: Vec<String>,
    /// Something the caller should know about how the item was handled.
    note: Option<String>,
    /// Set once the item's fate is known.
    outcome: Option<RetainOutcome>,
}

/// What the write path decided for one item, before it is applied; each with why.
enum Decision {
    Create,
    Reinforce { existing: String, why: String, reextracted: bool },
    Merge { survivor: String, why: String },
    Supersede { old: Vec<(String, String)> },
    Parallel { others: Vec<String>, why: String },
}

impl Bank {
    pub fn retain(&mut self, items: Vec<Memory>, now: Timestamp) -> Result<Vec<RetainOutcome>> {
        self.retain_with(items, now, true, Vec::new())
    }

    /// `ask_importance`: false for items an LLM has already judged (distilled, consolidated),
    /// which then meet only the rules, dedup and conflict checks. `also` goes into the same
    /// commit (a task marked distilled with its memories).
    pub(super) fn retain_with(
        &mut self,
        items: Vec<Memory>,
        now: Timestamp,
        ask_importance: bool,
        also: Vec<Op>,
    ) -> Result<Vec<RetainOutcome>> {
        self.transact(|bank| bank.retain_once(items.clone(), now, ask_importance, also.clone()))
    }

    fn retain_once(
        &mut self,
        items: Vec<Memory>,
        now: Timestamp,
        ask_importance: bool,
        also: Vec<Op>,
    ) -> Result<Vec<RetainOutcome>> {
        let limits = &self.settings.limits;
        if items.is_empty() {
            return Err(Error::invalid("items", "must hold at least one item"));
        }
        if items.len() > limits.max_items_per_retain {
            return Err(Error::Limit(format!(
                "items: {} in one call; the limit is {}",
                items.len(),
                limits.max_items_per_retain
            )));
        }
        let mut pending = self.validate(items, now)?;
        self.apply_rules(&mut pending);
        if ask_importance {
            self.score_importance(&mut pending);
        }
        self.embed_pending(&mut pending)?;
        // The LLM judges every item that has candidates in one call, before any is placed.
        let verdicts = {
            let items: Vec<(usize, &Record, Vec<Candidate>)> = pending
                .iter()
                .enumerate()
                .filter(|(_, p)| p.outcome.is_none() && !p.force)
                .map(|(i, p)| {
                    (i, &p.memory, self.candidates(&p.memory, p.vector.as_deref().expect("embedded")))
                })
                .collect();
            self.judge_by_llm(&items)
        };

        let served = self.recently_served(self.settings.defence.reextraction_window)?;
        let mut touched: BTreeMap<String, Record> = BTreeMap::new();
        let mut new_vectors: Vec<(String, Vec<f32>, Option<SentenceKeys>)> = Vec::new();
        let mut last_created: Option<Record> = None;
        for (index, p) in pending.iter_mut().enumerate().filter(|(_, p)| p.outcome.is_none()) {
            let vector = p.vector.take().expect("embedded");
            let decision = if p.force {
                Decision::Create
            } else if let Some(existing) = self.restates_served(&p.memory, &served) {
                let why = "it restates a memory a recent recall served (re-extraction guard)".to_string();
                Decision::Reinforce { existing, why, reextracted: true }
            } else {
                self.decide(p, index, &vector, &verdicts)
            };
            // An item marked as a sequence's next (a conversation's turn) follows the one created
            // before it in the call, in the same scope.
            if let Some(prev) =
                last_created.as_ref().filter(|prev| p.sequence && prev.scope == p.memory.scope)
            {
                p.memory.follows = Some(prev.id.clone());
            }
            let outcome = self.apply(decision, p, &vector, now, &mut touched);
            if matches!(
                outcome.action,
                RetainAction::Created | RetainAction::Superseded | RetainAction::Merged
            ) {
                let keys = p.sentences.take().filter(|_| self.settings.recall.sentence_keys);
                if let Some(&slot) = self.state.by_id.get(&p.memory.id) {
                    self.state.set_sentences(slot, keys.clone());
                }
                new_vectors.push((p.memory.id.clone(), vector, keys));
            }
            if matches!(outcome.action, RetainAction::Created | RetainAction::Superseded) {
                last_created = Some(p.memory.clone());
            }
            p.outcome = Some(outcome);
        }

        let mut ops: Vec<Op> = touched.values().map(|m| self.put_memory(m)).collect();
        ops.extend(new_vectors.iter().map(|(id, v, keys)| self.put_vector(id, v, keys.as_ref())));
        // A buffer past its size is sealed now rather than waiting for maintain, and the keyword
        // index saved with it: a large bank built by retains alone opens fast too.
        if self.state.buffer_len() > self.settings.index.buffer_max as usize {
            ops.extend(self.seal_buffer(0, false).0);
            ops.push(self.save_lexical());
        }
        ops.extend(also);
        if !ops.is_empty() {
            self.commit_or_reload(ops, now)?;
        }
        Ok(pending.into_iter().map(|p| p.outcome.expect("every item decided")).collect())
    }

    /// The memory among `served` (recently recalled into a prompt) that `m` restates word for
    /// word, bare or wrapped in the prompt block's handle and labels (`[m1] [fact, …] text`): the
    /// agent feeding recalled text back as new. Same scope, still active. A rewording is left to
    /// the judgement, which tells a restatement from an update.
    fn restates_served(&self, m: &Record, served: &[String]) -> Option<String> {
        let new_words = plain_words(&without_brackets(&m.content));
        if new_words.is_empty() {
            return None;
        }
        served.iter().find_map(|id| {
            let old = self.state.memory(id).filter(|o| o.is_active() && o.scope == m.scope)?;
            (plain_words(&without_brackets(&old.content)) == new_words).then(|| old.id.clone())
        })
    }

    /// Every item is checked before anything is decided: one bad item rejects the call.
    fn validate(&mut self, items: Vec<Memory>, now: Timestamp) -> Result<Vec<Pending>> {
        let dim = self.embedder.dimension();
        let mut pending = Vec::with_capacity(items.len());
        for (i, mut item) in items.into_iter().enumerate() {
            let at = |e: Error| e.in_item(i);
            let (vector, sentences) = match item.vector.take() {
                Some(v) => checked_keyed_vector(v, dim).map(|(v, keys)| (Some(v), keys)).map_err(at)?,
                None => (None, None),
            };
            let (force, parallel, sequence, importance_given) =
                (item.force, item.parallel, item.sequence, item.importance.is_some());
            let id = self.new_id(now);
            let mut memory =
                crate::record::build(item, id, now, &self.settings, self.embedder.model_id()).map_err(at)?;
            let defence = crate::defence::screen(&mut memory, &self.settings.defence).map_err(at)?;
            pending.push(Pending {
                memory,
                vector,
                sentences,
                force,
                parallel,
                sequence,
                importance_given,
                kept_because: None,
                defence,
                note: None,
                outcome: None,
            });
        }
        Ok(pending)
    }

    /// The rule-based filter: filler and in-call repeats are dropped; constraints and
    /// preferences are tagged so they age as such.
    fn apply_rules(&self, pending: &mut [Pending]) {
        if !self.settings.write.filter {
            return;
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, p) in pending.iter_mut().enumerate() {
            if p.force {
                continue;
            }
            let key = filter::repeat_key(&p.memory.content);
            if let Some(first) = seen.get(&key) {
                p.outcome = Some(RetainOutcome::filtered(format!(
                    "an exact repeat of items[{first}] in the same call"
                )));
                continue;
            }
            seen.insert(key, i);
            match filter::classify(&p.memory.content) {
                Verdict::Filler => {
                    p.outcome =
                        Some(RetainOutcome::filtered("filler: an acknowledgement with nothing to remember"));
                }
                Verdict::Keep(reason) => {
                    // A tool's output saying "forbidden" or "must" is an error message, not the
                    // user's constraint: only what people say gets the tags that stop ageing,
                    // and for a tool the rules keep nothing on those grounds.
                    let said_by_a_tool = p.memory.source == Source::ToolResult;
                    if said_by_a_tool && matches!(reason, KeepReason::Constraint | KeepReason::Preference) {
                        continue;
                    }
                    let tag = match reason {
                        KeepReason::Constraint => Some(TAG_CONSTRAINT),
                        KeepReason::Preference => Some(TAG_PREFERENCE),
                        _ => None,
                    };
                    if let Some(tag) = tag.filter(|t| !p.memory.has_tag(t)) {
                        if p.memory.tags.len() < self.settings.limits.max_tags {
                            p.memory.tags.push(tag.to_string());
                        }
                    }
                    p.kept_because = Some(reason);
                }
                Verdict::Neutral => {}
            }
        }
    }

    /// When the host has an LLM, items no rule kept are scored 1–10 in one call and those
    /// under the threshold dropped. No LLM, or a failed call: the rules decide alone.
    fn score_importance(&self, pending: &mut [Pending]) {
        let asked: Vec<usize> = (0..pending.len())
            .filter(|&i| {
                let p = &pending[i];
                self.settings.write.filter && !p.force && p.outcome.is_none() && p.kept_because.is_none()
            })
            .collect();
        if asked.is_empty() {
            return;
        }
        let mut prompt = String::from(
            "Rate how useful each item would be to an AI agent doing similar tasks later, from 1 \
             (worthless: chit-chat, filler, one-off details) to 10 (essential: constraints, \
             preferences, lessons with concrete parameters).\n",
        );
        for (n, &i) in asked.iter().enumerate() {
            prompt.push_str(&format!("\n{n}: {}", pending[i].memory.content));
        }
        let request = LlmRequest {
            operation: LlmOperation::Importance,
            system: "You rate memories for an agent. Answer with JSON only.".into(),
            prompt,
            json_schema: Some(IMPORTANCE_SCHEMA.into()),
            max_tokens: 48 + 32 * asked.len() as u32,
            temperature: 0.0,
        };
        let threshold = self.settings.write.importance_threshold;
        let scores: std::result::Result<Vec<Option<u8>>, String> = match self.llm.complete(&request) {
            Err(LlmError::Unavailable(_)) => return,
            Err(LlmError::Failed(e)) => Err(e),
            Ok(response) => parse_json::<ImportanceAnswer>(&response.text).map(|a| {
                let mut by_item = vec![None; asked.len()];
                for s in a.scores {
                    if let Some(slot) = by_item.get_mut(s.item) {
                        *slot = Some(s.importance.clamp(1, 10));
                    }
                }
                by_item
            }),
        };
        match scores {
            Err(e) => {
                // Keeping is the safe side: a broken model must not lose what the user said.
                for &i in &asked {
                    pending[i].note = Some(format!("importance not scored ({e}); kept by the rules"));
                }
            }
            Ok(by_item) => {
                for (n, &i) in asked.iter().enumerate() {
                    let Some(score) = by_item[n] else { continue };
                    let p = &mut pending[i];
                    if score < threshold {
                        p.outcome = Some(RetainOutcome::filtered(format!(
                            "importance {score}/10 from the LLM, below the threshold {threshold}"
                        )));
                    } else if !p.importance_given {
                        p.memory.importance = f32::from(score) / 10.0;
                    }
                }
            }
        }
    }

    /// One batched model run for every surviving item that brought no vector.
    fn embed_pending(&self, pending: &mut [Pending]) -> Result<()> {
        let missing: Vec<usize> = (0..pending.len())
            .filter(|&i| pending[i].outcome.is_none() && pending[i].vector.is_none())
            .collect();
        let texts: Vec<&str> = missing.iter().map(|&i| pending[i].memory.content.as_str()).collect();
        if texts.is_empty() {
            return Ok(());
        }
        for (&i, (vector, keys)) in missing.iter().zip(self.embed_stored(&texts)?) {
            pending[i].vector = Some(vector);
            pending[i].sentences = keys;
        }
        Ok(())
    }

    /// Against the item's candidates: an update supersedes what it replaces (or, marked
    /// `parallel`, stands beside it); a conflict where both hold stands beside; a duplicate
    /// reinforces (or, less close, is merged into) what it repeats; otherwise the item is new.
    fn decide(&self, p: &mut Pending, index: usize, vector: &[f32], llm: &LlmVerdicts) -> Decision {
        let w = &self.settings.write;
        let mut updates: Vec<(String, String)> = Vec::new();
        let mut duplicates: Vec<(String, f32, String)> = Vec::new();
        let mut both: Vec<(String, String)> = Vec::new();
        let candidates = self.candidates(&p.memory, vector);
        if let (Some(fallback), false) = (&llm.fallback, candidates.is_empty()) {
            p.note = Some(format!("judged by the rules: {fallback}"));
        }
        for c in candidates {
            let old = self.state.memory(&c.id).expect("candidates are live");
            let (judged, by) = match llm.get(index, &c.id) {
                Some(j) => (j.clone(), "the LLM"),
                None => (Self::judge_without_llm(old, &p.memory, c.cosine, p.sequence), "the rules"),
            };
            let why = format!("{}, by {by}", judged.why);
            match judged.relation {
                Relation::Update => updates.push((c.id, why)),
                Relation::Duplicate => duplicates.push((c.id, c.cosine, why)),
                Relation::BothHold => both.push((c.id, why)),
                Relation::Compatible => {}
            }
        }
        // An old memory said to hold beside the one this item repeats is not updated by it.
        if let Some((repeated, ..)) = duplicates.first() {
            updates.retain(|(old, _)| !self.holds_beside(old, repeated));
        }
        if !updates.is_empty() {
            if p.parallel {
                let why = "marked parallel: both hold".to_string();
                return Decision::Parallel { others: updates.into_iter().map(|(id, _)| id).collect(), why };
            }
            return Decision::Supersede { old: updates };
        }
        if !both.is_empty() {
            let why = both.iter().map(|(_, why)| why.as_str()).collect::<Vec<_>>().join("; ");
            return Decision::Parallel { others: both.into_iter().map(|(id, _)| id).collect(), why };
        }
        if let Some((id, cosine, why)) = duplicates.into_iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            let same_kind = self.state.memory(&id).is_some_and(|o| o.kind == p.memory.kind);
            let why = format!("{why}, cosine {cosine:.3}");
            return if cosine > w.dedup_cosine || !same_kind {
                Decision::Reinforce { existing: id, why, reextracted: false }
            } else {
                Decision::Merge { survivor: id, why }
            };
        }
        Decision::Create
    }

    /// Carries out a decision on the in-memory state and records every changed record in
    /// `touched` (committed together by the caller).
    fn apply(
        &mut self,
        decision: Decision,
        p: &mut Pending,
        vector: &[f32],
        now: Timestamp,
        touched: &mut BTreeMap<String, Record>,
    ) -> RetainOutcome {
        let w = self.settings.write.clone();
        let kept = p.kept_because.map(|r| format!(" (kept: {})", r.describe())).unwrap_or_default();
        let note: String = p.defence.iter().cloned().chain(p.note.take()).map(|n| format!("; {n}")).collect();
        match decision {
            Decision::Create => {
                let reason =
                    if p.force { "stored as given (force)".to_string() } else { format!("new memory{kept}") };
                self.place(p.memory.clone(), vector, touched);
                outcome(Some(&p.memory.id), RetainAction::Created, None, format!("{reason}{note}"))
            }
            Decision::Reinforce { existing, why, reextracted } => {
                let mut m = self.state.memory(&existing).cloned().expect("decided on a live memory");
                m.reinforce(now, w.reinforce_confidence_step, w.confidence_cap);
                m.reextracted += u32::from(reextracted);
                self.keep(m, touched);
                outcome(
                    Some(&existing),
                    RetainAction::Reinforced,
                    None,
                    format!("a duplicate of {existing} ({why}), which was reinforced{note}"),
                )
            }
            Decision::Merge { survivor, why } => {
                let mut s = self.state.memory(&survivor).cloned().expect("decided on a live memory");
                let mut absorbed = p.memory.clone();
                s.importance = s.importance.max(absorbed.importance);
                s.confidence = s.confidence.max(absorbed.confidence);
                s.access_count = s.access_count.saturating_add(absorbed.access_count);
                s.supersedes.push(absorbed.id.clone());
                s.updated_at = now;
                absorbed.set_status(Status::Merged, now);
                absorbed.superseded_by = Some(survivor.clone());
                self.keep(s, touched);
                self.place(absorbed.clone(), vector, touched);
                outcome(
                    Some(&survivor),
                    RetainAction::Merged,
                    Some(&absorbed.id),
                    format!(
                        "a duplicate of {survivor} ({why}): merged into it; stored as {} (merged){note}",
                        absorbed.id
                    ),
                )
            }
            Decision::Supersede { old } => {
                let mut reasons = Vec::new();
                for (id, why) in &old {
                    let mut o = self.state.memory(id).cloned().expect("decided on a live memory");
                    o.set_status(Status::Superseded, now);
                    o.superseded_by = Some(p.memory.id.clone());
                    o.confidence *= w.supersede_confidence_factor;
                    p.memory.supersedes.push(id.clone());
                    reasons.push(format!("{id} ({why})"));
                    self.keep(o, touched);
                }
                self.place(p.memory.clone(), vector, touched);
                outcome(
                    Some(&p.memory.id),
                    RetainAction::Superseded,
                    old.first().map(|(id, _)| id.as_str()),
                    format!("supersedes {}{note}", reasons.join(", ")),
                )
            }
            Decision::Parallel { others, why } => {
                for id in &others {
                    let mut o = self.state.memory(id).cloned().expect("decided on a live memory");
                    o.conflicts_with.push(p.memory.id.clone());
                    o.updated_at = now;
                    self.keep(o, touched);
                }
                p.memory.conflicts_with = others.clone();
                self.place(p.memory.clone(), vector, touched);
                outcome(
                    Some(&p.memory.id),
                    RetainAction::Created,
                    others.first().map(String::as_str),
                    format!(
                        "conflicts with {} ({why}); both kept, valid under different conditions{note}",
                        others.join(", ")
                    ),
                )
            }
        }
    }

    /// A new record into the state and its indexes.
    fn place(&mut self, memory: Record, vector: &[f32], touched: &mut BTreeMap<String, Record>) {
        touched.insert(memory.id.clone(), memory.clone());
        let slot = self.state.insert(memory, vector);
        self.state.index_lexical(slot, &self.settings.lexical);
    }

    /// A changed record (same content) into the state.
    fn keep(&mut self, memory: Record, touched: &mut BTreeMap<String, Record>) {
        touched.insert(memory.id.clone(), memory.clone());
        self.state.update(memory);
    }
}

/// A confirmation: used now, a little more certain, its decay and half-life reset and lengthened.
fn outcome(id: Option<&str>, action: RetainAction, related: Option<&str>, reason: String) -> RetainOutcome {
    RetainOutcome { id: id.map(str::to_string), action, related: related.map(str::to_string), reason }
}

const IMPORTANCE_SCHEMA: &str = r#"{"type":"object","properties":{"scores":{"type":"array","items":{"type":"object","properties":{"item":{"type":"integer","minimum":0},"importance":{"type":"integer","minimum":1,"maximum":10}},"required":["item","importance"]}}},"required":["scores"]}"#;

#[derive(Deserialize)]
struct ImportanceAnswer {
    scores: Vec<ItemScore>,
}

#[derive(Deserialize)]
struct ItemScore {
    item: usize,
    importance: u8,
}

/// `text` with every `[…]` group taken out (a prompt block's handles and labels).
fn without_brackets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Lower-cased words, punctuation and spacing ignored.
fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}
