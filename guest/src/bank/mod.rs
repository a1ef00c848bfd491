//! A bank: one tenant's memories, their indexes, and every operation on them over the store.
//!
//! Keys (all under `b/<bank>/`): `seq` the commit sequence, `meta` the bank's model, `m/<id>` a
//! record (JSON), `v/<id>` its vector (little-endian f32). Indexes live in memory and are rebuilt
//! from these on open, so nothing derived from content is stored twice.

mod hindsight;
mod lifecycle;
mod retain;
mod state;

use std::collections::HashMap;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::embed_api::TextEmbedder;
use crate::error::{Error, Result};
use crate::llm::Llm;
use crate::prompt;
use crate::record::{Kind, Memory, Scope, ScopeLevel, Status, Timestamp, DAY_MS};
use crate::score::{self, Bounds, Evidence, Score};
use crate::settings::Settings;
use crate::store::{scan_all, Op, Store};
pub use hindsight::{DistillMethod, Distilled, TaskEnd};
pub use lifecycle::{
    FeedbackOutcome, HistoryEntry, HistoryEvent, MaintainAction, MaintainReport, MaintainStep,
};
use state::State;

/// The store key (under the bank's prefix) of the keyword index snapshot.
const LEXICAL_KEY: &str = "lexical";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainAction {
    /// A new memory (possibly standing beside ones it conflicts with: see `related`).
    Created,
    /// A duplicate: the existing memory `id` was reinforced, nothing new stored.
    Reinforced,
    /// Close to the existing memory `id`, which absorbed it; `related` is the item's own
    /// record, kept with status merged.
    Merged,
    /// A new memory `id` that replaced `related` (and any others its reason lists).
    Superseded,
    /// Dropped by the write filter; the reason says why. `force` stores it anyway.
    Filtered,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetainOutcome {
    /// The memory the item ended up in; none when it was filtered out.
    pub id: Option<String>,
    pub action: RetainAction,
    /// The other memory involved: superseded, merged record, or conflicting one.
    pub related: Option<String>,
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
    /// Also recall memories that were superseded or merged (never archived ones).
    pub include_superseded: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    pub memory: Memory,
    pub score: Score,
    /// Active memories that say otherwise and are kept beside this one.
    pub conflicting: Vec<String>,
    /// Old (by `recall.stale_after_days`) yet recalled: the prompt block says so.
    pub possibly_stale: bool,
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

pub struct Bank {
    id: String,
    prefix: String,
    store: Box<dyn Store>,
    embedder: Rc<dyn TextEmbedder>,
    llm: Rc<dyn Llm>,
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
        llm: Rc<dyn Llm>,
        settings: Rc<Settings>,
    ) -> Result<Bank> {
        validate_bank_id(id)?;
        let dim = embedder.dimension();
        let mut bank = Bank {
            id: id.to_string(),
            prefix: format!("b/{id}/"),
            store,
            embedder,
            llm,
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
        // Records first, then each vector straight into the buffer by its record's slot: no
        // second copy of every vector while opening.
        let mprefix = self.key("m/");
        scan_all(&*self.store, &mprefix, |key, bytes| {
            let memory: Memory = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: record {key}: {e}", self.id)))?;
            state.insert_record(memory);
            Ok(())
        })?;
        let vprefix = self.key("v/");
        let dim = self.embedder.dimension();
        state.vectors.reserve(state.by_id.len());
        scan_all(&*self.store, &vprefix, |key, bytes| {
            let v = decode_vector(&bytes);
            if let Some(&slot) = state.by_id.get(&key[vprefix.len()..]) {
                if v.len() == dim {
                    state.vectors.insert(slot, &v);
                }
            }
            Ok(())
        })?;
        // A record whose vector is lost is embedded again rather than dropped from recall.
        let missing: Vec<(u32, String)> = state
            .by_id
            .values()
            .filter(|&&slot| state.vectors.get(slot).is_none())
            .filter_map(|&slot| state.slots[slot as usize].as_ref().map(|m| (slot, m.content.clone())))
            .collect();
        for chunk in missing.chunks(32) {
            let texts: Vec<&str> = chunk.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = self.embedder.embed_batch(&texts)?;
            for ((slot, _), v) in chunk.iter().zip(vectors) {
                state.vectors.insert(*slot, &v);
            }
        }
        let snapshot = self.store.get(&self.key(LEXICAL_KEY))?;
        state.build_lexical(snapshot.as_deref(), &self.settings.lexical);
        let sprefix = self.key("s/");
        let mut stored_segments = Vec::new();
        scan_all(&*self.store, &sprefix, |key, bytes| {
            stored_segments.push((key[sprefix.len()..].to_string(), bytes));
            Ok(())
        })?;
        for (name, bytes) in stored_segments {
            state
                .load_segment(name.clone(), &bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: index segment {name}: {e}", self.id)))?;
        }
        self.state = state;
        Ok(())
    }

    /// Runs a mutating operation on the bank as the store holds it now. Every commit expects the
    /// sequence number this instance last saw; when another instance (another process on the
    /// same file) committed in between, the store refuses the commit, and the operation runs
    /// again on the reloaded bank, so neither instance's acknowledged write is overwritten.
    fn transact<T>(&mut self, mut op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        const TRIES: usize = 8;
        for _ in 1..TRIES {
            self.sync()?;
            match op(self) {
                Err(Error::Conflict(_)) => continue,
                other => return other,
            }
        }
        self.sync()?;
        op(self).map_err(|e| match e {
            Error::Conflict(m) => {
                Error::Store(format!("{m}: other writers kept committing first ({TRIES} tries)"))
            }
            e => e,
        })
    }

    /// Commits `ops` plus the bumped sequence number, if the stored sequence is still the one
    /// this instance applied; the in-memory state is only touched by the caller after this
    /// succeeds, so a failed commit changes nothing.
    fn commit(&mut self, mut ops: Vec<Op>, now: Timestamp) -> Result<()> {
        if !self.state.has_meta {
            let meta = Meta {
                embedding_model: self.embedder.model_id().to_string(),
                dimension: self.embedder.dimension(),
                created_at: now,
            };
            ops.push(Op::Put(self.key("meta"), serde_json::to_vec(&meta).expect("meta serialises")));
        }
        let applied = self.state.applied;
        ops.insert(0, Op::Expect(self.key("seq"), (applied > 0).then(|| applied.to_le_bytes().to_vec())));
        let next = applied + 1;
        ops.push(Op::Put(self.key("seq"), next.to_le_bytes().to_vec()));
        self.store.commit(ops)?;
        self.state.applied = next;
        self.state.has_meta = true;
        Ok(())
    }

    /// Commits, or on failure puts the in-memory state back to what the store holds (callers
    /// that changed the state ahead of the commit use this).
    fn commit_or_reload(&mut self, ops: Vec<Op>, now: Timestamp) -> Result<()> {
        let result = self.commit(ops, now);
        if result.is_err() {
            self.reload()?;
        }
        result
    }

    /// Seals the vector buffer into an HNSW segment when it holds at least `min` vectors;
    /// the op that stores the segment, for the caller's commit.
    fn seal_buffer(&mut self, min: usize) -> Option<Op> {
        let ix = &self.settings.index;
        let (name, bytes) = self.state.seal(min, ix.ef_construction as usize, ix.ef_search as usize)?;
        Some(Op::Put(self.key(&format!("s/{name}")), bytes))
    }

    /// Saves the keyword index so that opening the bank restores rather than rebuilds it.
    fn save_lexical(&mut self) -> Op {
        Op::Put(self.key(LEXICAL_KEY), self.state.lexical_snapshot())
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

    pub fn recall(&mut self, q: RecallQuery) -> Result<RecallResult> {
        self.transact(|bank| bank.recall_once(q.clone()))
    }

    fn recall_once(&mut self, q: RecallQuery) -> Result<RecallResult> {
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
            (m.status == Status::Active
                || (q.include_superseded && matches!(m.status, Status::Superseded | Status::Merged)))
                && m.valid_until.is_none_or(|until| until > now)
                && (q.kinds.is_empty() || q.kinds.contains(&m.kind))
                && (q.tags.is_empty() || q.tags.iter().any(|t| m.tags.contains(t)))
                && q.scope.as_ref().is_none_or(|s| m.scope == *s || m.scope.level == ScopeLevel::Global)
        };
        let pool = (k * settings.recall.candidate_factor).max(50) as usize;
        let dense = state.search_vectors(&query_vector, pool, eligible);
        let lexical = state.lexical.search(query, &settings.lexical, pool, eligible);
        let mut evidence: HashMap<u32, Evidence> = HashMap::new();
        for &(slot, similarity) in &dense {
            evidence.insert(slot, Evidence { similarity, bm25: 0.0 });
        }
        for &(slot, bm25) in &lexical {
            evidence.entry(slot).and_modify(|e| e.bm25 = bm25).or_insert_with(|| Evidence {
                similarity: crate::index::dot(&query_vector, state.vector(slot).unwrap_or(&[])),
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
        let stale_ms = (settings.recall.stale_after_days as f64 * DAY_MS as f64) as i64;
        let mut items = Vec::with_capacity(ranked.len());
        for (slot, score) in ranked {
            let mut m = state.slots[slot as usize].clone().expect("ranked slots are live");
            m.access_count = m.access_count.saturating_add(1);
            m.last_accessed_at = Some(now);
            m.decay_periods = 0;
            let conflicting = m
                .conflicts_with
                .iter()
                .filter(|id| state.memory(id).is_some_and(Memory::is_active))
                .cloned()
                .collect();
            let possibly_stale = now.saturating_sub(m.occurred_at) > stale_ms;
            items.push(Recalled { memory: m, score, conflicting, possibly_stale });
        }
        if !items.is_empty() {
            let ops = items.iter().map(|r| self.put_memory(&r.memory)).collect();
            self.commit(ops, now)?;
            for r in &items {
                self.state.update(r.memory.clone());
            }
        }
        let budget = q.prompt_tokens.unwrap_or(self.settings.recall.prompt_tokens) as usize;
        let prompt = prompt::block(&items, budget);
        Ok(RecallResult { items, prompt })
    }

    /// The `k` active memories nearest `vector` by the vector index alone (no fusion, no use
    /// recorded): for measuring the index.
    pub fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<(String, f32)>> {
        self.sync()?;
        let v = checked_vector(vector.to_vec(), self.embedder.dimension())?;
        let state = &self.state;
        let active = |slot: u32| state.slots[slot as usize].as_ref().is_some_and(Memory::is_active);
        Ok(state
            .search_vectors(&v, k, active)
            .into_iter()
            .filter_map(|(slot, sim)| state.slots[slot as usize].as_ref().map(|m| (m.id.clone(), sim)))
            .collect())
    }

    /// Sealed HNSW segments in the bank's vector index.
    pub fn index_segments(&self) -> usize {
        self.state.segments.len()
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
        self.transact(|bank| bank.forget_once(id, hard, now))
    }

    fn forget_once(&mut self, id: &str, hard: bool, now: Timestamp) -> Result<()> {
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
            // The keyword snapshot holds the memory's words: saved again without them, in the same
            // commit (rather than dropped, which would make the next open tokenize everything).
            self.state.remove(id, successors, &self.settings.lexical);
            ops.push(self.save_lexical());
            self.commit_or_reload(ops, now)?;
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
        self.transact(|bank| bank.restore_once(id, now))
    }

    fn restore_once(&mut self, id: &str, now: Timestamp) -> Result<Memory> {
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
mod hindsight_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod tests;
