//! A bank: one tenant's memories, their indexes, and every operation on them over the store.
//!
//! Keys (all under `b/<bank>/`): `seq` the commit sequence, `meta` the bank's model, `m/<id>` a
//! record (JSON), `v/<id>` its vector (little-endian f32). Indexes live in memory and are rebuilt
//! from these on open, so nothing derived from content is stored twice.

use std::collections::HashMap;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::embed_api::TextEmbedder;
use crate::error::{Error, Result};
use crate::index::VectorIndex;
use crate::lexical::LexicalIndex;
use crate::prompt;
use crate::record::{Kind, Memory, NewMemory, Scope, ScopeLevel, Status, Timestamp};
use crate::score::{self, Bounds, Evidence, Score};
use crate::settings::{LexicalSettings, Settings};
use crate::store::{scan_all, Op, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainAction {
    Created,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetainOutcome {
    pub id: String,
    pub action: RetainAction,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecallQuery {
    pub query: String,
    pub k: Option<u32>,
    pub now: Timestamp,
    pub task_type: Option<String>,
    pub kinds: Vec<Kind>,
    pub tags: Vec<String>,
    pub scope: Option<Scope>,
    pub min_score: Option<f32>,
    pub prompt_tokens: Option<u32>,
    /// The query's vector, when the caller has it; skips embedding.
    pub vector: Option<Vec<f32>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    pub memory: Memory,
    pub score: Score,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecallResult {
    pub items: Vec<Recalled>,
    pub prompt: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub bank: String,
    pub total: u32,
    pub active: u32,
    pub archived: u32,
    pub superseded: u32,
    pub merged: u32,
    pub active_by_kind: Vec<(Kind, u32)>,
    pub embedding_model: String,
    pub dimension: u32,
    pub sequence: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    embedding_model: String,
    dimension: usize,
    created_at: Timestamp,
}

/// The in-memory image of the bank's store keys, at sequence `applied`.
struct State {
    applied: u64,
    has_meta: bool,
    slots: Vec<Option<Memory>>,
    by_id: HashMap<String, u32>,
    free: Vec<u32>,
    vectors: VectorIndex,
    lexical: LexicalIndex,
}

impl State {
    fn empty(dim: usize) -> State {
        State {
            applied: 0,
            has_meta: false,
            slots: Vec::new(),
            by_id: HashMap::new(),
            free: Vec::new(),
            vectors: VectorIndex::new(dim),
            lexical: LexicalIndex::new(),
        }
    }

    fn memory(&self, id: &str) -> Option<&Memory> {
        self.by_id.get(id).and_then(|&s| self.slots[s as usize].as_ref())
    }

    /// Places a memory and its vector; its keyword document is built by `index_lexical` once
    /// the memories it may draw context from are in place too.
    fn insert(&mut self, memory: Memory, vector: &[f32]) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.vectors.insert(slot, vector);
        self.by_id.insert(memory.id.clone(), slot);
        self.slots[slot as usize] = Some(memory);
        slot
    }

    /// The ids of the memories a memory follows in its sequence, nearest first, at most `n`.
    fn predecessors(&self, memory: &Memory, n: u32) -> Vec<&Memory> {
        let mut out = Vec::new();
        let mut next = memory.follows.as_deref();
        while let Some(id) = next {
            if out.len() as u32 >= n {
                break;
            }
            let Some(prev) = self.memory(id) else { break };
            out.push(prev);
            next = prev.follows.as_deref();
        }
        out
    }

    /// The keyword document of a memory: its content, the words of its date (month and year)
    /// when dates are indexed, and the content of the memories just before it in its sequence.
    fn index_lexical(&mut self, slot: u32, settings: &LexicalSettings) {
        let Some(memory) = self.slots[slot as usize].as_ref() else { return };
        let mut doc = memory.content.clone();
        if settings.index_dates {
            doc.push(' ');
            doc.push_str(&prompt::month_year(memory.occurred_at));
        }
        for prev in self.predecessors(memory, settings.context_previous) {
            doc.push(' ');
            doc.push_str(&prev.content);
        }
        self.lexical.insert(slot, &doc);
    }

    /// Replaces a record whose indexed content is unchanged.
    fn update(&mut self, memory: Memory) {
        if let Some(&slot) = self.by_id.get(&memory.id) {
            self.slots[slot as usize] = Some(memory);
        }
    }

    /// Removes a memory from every index and its words from the documents that drew on it;
    /// `relinked` are its successors' records, already pointing past it.
    fn remove(&mut self, id: &str, relinked: Vec<Memory>, settings: &LexicalSettings) {
        let Some(slot) = self.by_id.get(id).copied() else { return };
        // Found through the old links, before `relinked` replaces them.
        let dependents: Vec<u32> = self
            .by_id
            .values()
            .copied()
            .filter(|&s| {
                self.slots[s as usize].as_ref().is_some_and(|m| {
                    self.predecessors(m, settings.context_previous).iter().any(|p| p.id == id)
                })
            })
            .collect();
        for m in relinked {
            self.update(m);
        }
        self.by_id.remove(id);
        self.vectors.remove(slot);
        self.lexical.remove(slot);
        self.slots[slot as usize] = None;
        self.free.push(slot);
        for s in dependents {
            self.index_lexical(s, settings);
        }
    }
}

pub struct Bank {
    id: String,
    prefix: String,
    store: Box<dyn Store>,
    embedder: Rc<dyn TextEmbedder>,
    settings: Rc<Settings>,
    state: State,
    ids_made: u64,
}

/// Bank ids become key prefixes: keep them to a safe alphabet.
pub fn validate_bank_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("bank", format!("{id:?} must be 1 to 128 characters of A-Z a-z 0-9 - _ .")))
    }
}

impl Bank {
    pub fn open(
        id: &str,
        store: Box<dyn Store>,
        embedder: Rc<dyn TextEmbedder>,
        settings: Rc<Settings>,
    ) -> Result<Bank> {
        validate_bank_id(id)?;
        let dim = embedder.dimension();
        let mut bank = Bank {
            id: id.to_string(),
            prefix: format!("b/{id}/"),
            store,
            embedder,
            settings,
            state: State::empty(dim),
            ids_made: 0,
        };
        bank.reload()?;
        Ok(bank)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    fn stored_sequence(&self) -> Result<u64> {
        match self.store.get(&self.key("seq"))? {
            None => Ok(0),
            Some(bytes) => {
                let raw: [u8; 8] = bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| Error::Corrupt(format!("bank {}: sequence is not 8 bytes", self.id)))?;
                Ok(u64::from_le_bytes(raw))
            }
        }
    }

    /// Catches up with commits made by other instances sharing the store.
    fn sync(&mut self) -> Result<()> {
        if self.stored_sequence()? != self.state.applied {
            self.reload()?;
        }
        Ok(())
    }

    fn reload(&mut self) -> Result<()> {
        let applied = self.stored_sequence()?;
        let mut state = State::empty(self.embedder.dimension());
        state.applied = applied;
        if let Some(bytes) = self.store.get(&self.key("meta"))? {
            let meta: Meta = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: meta: {e}", self.id)))?;
            if meta.embedding_model != self.embedder.model_id() || meta.dimension != self.embedder.dimension()
            {
                return Err(Error::Model(format!(
                    "bank {} was built with embedding model {} ({} dimensions); this engine has {} ({} dimensions)",
                    self.id,
                    meta.embedding_model,
                    meta.dimension,
                    self.embedder.model_id(),
                    self.embedder.dimension()
                )));
            }
            state.has_meta = true;
        }
        let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
        let vprefix = self.key("v/");
        scan_all(&*self.store, &vprefix, |key, bytes| {
            vectors.insert(key[vprefix.len()..].to_string(), decode_vector(&bytes));
            Ok(())
        })?;
        let mprefix = self.key("m/");
        let mut missing: Vec<Memory> = Vec::new();
        let dim = self.embedder.dimension();
        scan_all(&*self.store, &mprefix, |key, bytes| {
            let memory: Memory = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: record {key}: {e}", self.id)))?;
            match vectors.remove(&memory.id) {
                Some(v) if v.len() == dim => {
                    state.insert(memory, &v);
                }
                _ => missing.push(memory),
            }
            Ok(())
        })?;
        // A record whose vector is lost is embedded again rather than dropped from recall.
        for chunk in missing.chunks(32) {
            let texts: Vec<&str> = chunk.iter().map(|m| m.content.as_str()).collect();
            let vectors = self.embedder.embed_batch(&texts)?;
            for (m, v) in chunk.iter().zip(vectors) {
                state.insert(m.clone(), &v);
            }
        }
        for slot in 0..state.slots.len() as u32 {
            state.index_lexical(slot, &self.settings.lexical);
        }
        self.state = state;
        Ok(())
    }

    /// Commits `ops` plus the bumped sequence number; the in-memory state is only touched by the
    /// caller after this succeeds, so a failed commit changes nothing.
    fn commit(&mut self, mut ops: Vec<Op>, now: Timestamp) -> Result<()> {
        if !self.state.has_meta {
            let meta = Meta {
                embedding_model: self.embedder.model_id().to_string(),
                dimension: self.embedder.dimension(),
                created_at: now,
            };
            ops.push(Op::Put(self.key("meta"), serde_json::to_vec(&meta).expect("meta serialises")));
        }
        let next = self.state.applied + 1;
        ops.push(Op::Put(self.key("seq"), next.to_le_bytes().to_vec()));
        self.store.commit(ops)?;
        self.state.applied = next;
        self.state.has_meta = true;
        Ok(())
    }

    fn put_memory(&self, memory: &Memory) -> Op {
        Op::Put(self.key(&format!("m/{}", memory.id)), serde_json::to_vec(memory).expect("memory serialises"))
    }

    fn new_id(&mut self, now: Timestamp) -> String {
        use std::hash::{BuildHasher, Hasher};
        self.ids_made += 1;
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(self.ids_made);
        hasher.write_i64(now);
        let random = hasher.finish() as u32;
        format!("m{:011x}{:08x}", (now.max(0) as u64) & 0xfff_ffff_ffff, random)
    }

    pub fn retain(&mut self, items: Vec<NewMemory>, now: Timestamp) -> Result<Vec<RetainOutcome>> {
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
        self.sync()?;
        let dim = self.embedder.dimension();
        let mut memories = Vec::with_capacity(items.len());
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(items.len());
        for (i, mut item) in items.into_iter().enumerate() {
            let given = item
                .vector
                .take()
                .map(|v| checked_vector(v, dim))
                .transpose()
                .map_err(|e| e.within(format!("items[{i}]")))?;
            let id = self.new_id(now);
            let mut memory = item
                .into_memory(id, now, &self.settings, self.embedder.model_id())
                .map_err(|e| e.within(format!("items[{i}]")))?;
            // Items retained together in one scope are a sequence, e.g. turns of a conversation.
            if let Some(prev) = memories.last().filter(|p: &&Memory| p.scope == memory.scope) {
                memory.follows = Some(prev.id.clone());
            }
            memories.push(memory);
            vectors.push(given);
        }
        // One batched model run for every item that brought no vector.
        let missing: Vec<usize> = (0..memories.len()).filter(|&i| vectors[i].is_none()).collect();
        let texts: Vec<&str> = missing.iter().map(|&i| memories[i].content.as_str()).collect();
        if !texts.is_empty() {
            for (i, v) in missing.iter().zip(self.embedder.embed_batch(&texts)?) {
                vectors[*i] = Some(v);
            }
        }
        let vectors: Vec<Vec<f32>> =
            vectors.into_iter().map(|v| v.expect("every item has a vector")).collect();
        let mut ops = Vec::with_capacity(memories.len() * 2 + 2);
        for (m, v) in memories.iter().zip(&vectors) {
            ops.push(self.put_memory(m));
            ops.push(Op::Put(self.key(&format!("v/{}", m.id)), encode_vector(v)));
        }
        self.commit(ops, now)?;
        let mut outcomes = Vec::with_capacity(memories.len());
        let mut slots = Vec::with_capacity(memories.len());
        for (m, v) in memories.into_iter().zip(vectors) {
            outcomes.push(RetainOutcome {
                id: m.id.clone(),
                action: RetainAction::Created,
                reason: "new memory".into(),
            });
            slots.push(self.state.insert(m, &v));
        }
        for slot in slots {
            self.state.index_lexical(slot, &self.settings.lexical);
        }
        Ok(outcomes)
    }

    pub fn recall(&mut self, q: RecallQuery) -> Result<RecallResult> {
        let limits = &self.settings.limits;
        let query = q.query.trim();
        if query.is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        if query.len() > limits.max_query_bytes {
            return Err(Error::invalid("query", format!("is longer than {} bytes", limits.max_query_bytes)));
        }
        let k = q.k.unwrap_or(self.settings.recall.default_k);
        if k == 0 || k > limits.max_k {
            return Err(Error::invalid("k", format!("must be from 1 to {}, got {k}", limits.max_k)));
        }
        if let Some(min) = q.min_score {
            if !min.is_finite() {
                return Err(Error::invalid("min-score", "must be a finite number"));
            }
        }
        self.sync()?;
        let query_vector = match q.vector.clone() {
            Some(v) => checked_vector(v, self.embedder.dimension())?,
            None => self.embedder.embed_batch(&[query])?.remove(0),
        };
        let settings = &self.settings;
        let state = &self.state;
        let now = q.now;
        let eligible = |slot: u32| -> bool {
            let Some(m) = state.slots[slot as usize].as_ref() else {
                return false;
            };
            m.status == Status::Active
                && m.valid_until.is_none_or(|until| until > now)
                && (q.kinds.is_empty() || q.kinds.contains(&m.kind))
                && (q.tags.is_empty() || q.tags.iter().any(|t| m.tags.contains(t)))
                && q.scope.as_ref().is_none_or(|s| m.scope == *s || m.scope.level == ScopeLevel::Global)
        };
        let pool = (k * settings.recall.candidate_factor).max(50) as usize;
        let dense = state.vectors.search(&query_vector, pool, eligible);
        let lexical = state.lexical.search(query, &settings.lexical, pool, eligible);
        let mut evidence: HashMap<u32, Evidence> = HashMap::new();
        for &(slot, similarity) in &dense {
            evidence.insert(slot, Evidence { similarity, bm25: 0.0 });
        }
        for &(slot, bm25) in &lexical {
            evidence.entry(slot).and_modify(|e| e.bm25 = bm25).or_insert_with(|| Evidence {
                similarity: crate::index::dot(&query_vector, state.vectors.get(slot).unwrap_or(&[])),
                bm25,
            });
        }
        let bounds = Bounds::over(evidence.values().copied());
        let mut ranked: Vec<(u32, Score)> = evidence
            .iter()
            .map(|(&slot, &e)| {
                let m = state.slots[slot as usize].as_ref().expect("candidates are live");
                (slot, score::fuse(m, e, &bounds, now, q.task_type.as_deref(), &settings.recall))
            })
            .filter(|(_, s)| q.min_score.is_none_or(|min| s.total >= min))
            .collect();
        ranked.sort_by(|a, b| {
            b.1.total.total_cmp(&a.1.total).then_with(|| {
                let (ma, mb) = (&state.slots[a.0 as usize], &state.slots[b.0 as usize]);
                ma.as_ref().map(|m| &m.id).cmp(&mb.as_ref().map(|m| &m.id))
            })
        });
        ranked.truncate(k as usize);

        // Being recalled is use: record it, in one commit.
        let mut items = Vec::with_capacity(ranked.len());
        for (slot, score) in ranked {
            let mut m = state.slots[slot as usize].clone().expect("ranked slots are live");
            m.access_count = m.access_count.saturating_add(1);
            m.last_accessed_at = Some(now);
            items.push(Recalled { memory: m, score });
        }
        if !items.is_empty() {
            let ops = items.iter().map(|r| self.put_memory(&r.memory)).collect();
            self.commit(ops, now)?;
            for r in &items {
                self.state.update(r.memory.clone());
            }
        }
        let budget = q.prompt_tokens.unwrap_or(self.settings.recall.prompt_tokens) as usize;
        let refs: Vec<&Memory> = items.iter().map(|r| &r.memory).collect();
        let prompt = prompt::block(&refs, budget);
        Ok(RecallResult { items, prompt })
    }

    pub fn get(&mut self, id: &str) -> Result<Memory> {
        self.sync()?;
        self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))
    }

    fn not_found(&self, id: &str) -> Error {
        Error::NotFound(format!("no memory {id:?} in bank {}", self.id))
    }

    /// Soft: the memory is archived (kept, restorable, never recalled). Hard: the record and its
    /// vector are deleted from the store and every index.
    pub fn forget(&mut self, id: &str, hard: bool, now: Timestamp) -> Result<()> {
        self.sync()?;
        let memory = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        if hard {
            let mut ops =
                vec![Op::Delete(self.key(&format!("m/{id}"))), Op::Delete(self.key(&format!("v/{id}")))];
            // Nothing may keep the erased id: its sequence successors skip over it.
            let successors: Vec<Memory> = self
                .state
                .slots
                .iter()
                .flatten()
                .filter(|m| m.follows.as_deref() == Some(id))
                .map(|m| Memory { follows: memory.follows.clone(), ..m.clone() })
                .collect();
            ops.extend(successors.iter().map(|m| self.put_memory(m)));
            self.commit(ops, now)?;
            self.state.remove(id, successors, &self.settings.lexical);
        } else if memory.status != Status::Archived {
            let mut m = memory;
            m.status = Status::Archived;
            m.updated_at = now;
            self.commit(vec![self.put_memory(&m)], now)?;
            self.state.update(m);
        }
        Ok(())
    }

    pub fn restore(&mut self, id: &str, now: Timestamp) -> Result<Memory> {
        self.sync()?;
        let mut m = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        match m.status {
            Status::Active => return Ok(m),
            Status::Archived => {}
            other => {
                return Err(Error::invalid(
                    "id",
                    format!("memory {id} is {other}; only archived memories can be restored"),
                ))
            }
        }
        m.status = Status::Active;
        m.updated_at = now;
        self.commit(vec![self.put_memory(&m)], now)?;
        self.state.update(m.clone());
        Ok(m)
    }

    pub fn stats(&mut self) -> Result<Stats> {
        self.sync()?;
        let mut stats = Stats {
            bank: self.id.clone(),
            total: 0,
            active: 0,
            archived: 0,
            superseded: 0,
            merged: 0,
            active_by_kind: Kind::ALL.iter().map(|k| (*k, 0)).collect(),
            embedding_model: self.embedder.model_id().to_string(),
            dimension: self.embedder.dimension() as u32,
            sequence: self.state.applied,
        };
        for m in self.state.slots.iter().flatten() {
            stats.total += 1;
            match m.status {
                Status::Active => {
                    stats.active += 1;
                    if let Some(entry) = stats.active_by_kind.iter_mut().find(|(k, _)| *k == m.kind) {
                        entry.1 += 1;
                    }
                }
                Status::Archived => stats.archived += 1,
                Status::Superseded => stats.superseded += 1,
                Status::Merged => stats.merged += 1,
            }
        }
        Ok(stats)
    }
}

/// A caller's vector: the bank's dimension, finite, not all zero; stored at unit length.
fn checked_vector(mut v: Vec<f32>, dim: usize) -> Result<Vec<f32>> {
    if v.len() != dim {
        return Err(Error::invalid(
            "vector",
            format!("has {} dimensions; the bank's model has {dim}", v.len()),
        ));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid("vector", "holds a NaN or infinite number"));
    }
    if v.iter().all(|x| *x == 0.0) {
        return Err(Error::invalid("vector", "is all zeros"));
    }
    crate::embed::normalize(&mut v);
    Ok(v)
}

fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[cfg(test)]
#[path = "bank_tests.rs"]
mod tests;
