//! Recall: candidates from the vector index and BM25, fused and ranked, use recorded.

use std::collections::HashMap;

use hindsight_types::time::DAY_MS;
use hindsight_types::{ScopeLevel, Status};

use super::{checked_vector, Bank};
use crate::error::{Error, Result};
use crate::prompt;
use crate::recall::{RecallQuery, RecallResult, Recalled};
use crate::record::Record;
use crate::score::{self, Bounds, Evidence, Score};
use crate::store::StoreError;

impl Bank {
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
                return Err(Error::invalid("min_score", "must be a finite number"));
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
            m.touch(now);
            m.decay_periods = 0;
            let conflicting = m
                .conflicts_with
                .iter()
                .filter(|id| state.memory(id).is_some_and(Record::is_active))
                .cloned()
                .collect();
            let possibly_stale = now.saturating_sub(m.occurred_at) > stale_ms;
            items.push(Recalled { memory: m, score, conflicting, possibly_stale, in_prompt: false });
        }
        if !items.is_empty() {
            let ops = items.iter().map(|r| self.put_memory(&r.memory)).collect();
            match self.commit_to_store(ops, now) {
                Ok(()) => {
                    for r in &items {
                        self.state.update(r.memory.clone());
                    }
                }
                // A database this host may only read still answers; the use goes unrecorded.
                Err(StoreError::ReadOnly(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let budget = q.prompt_tokens.unwrap_or(self.settings.recall.prompt_tokens) as usize;
        let prompt = prompt::block(&mut items, budget, self.settings.recall.prompt_min_relevance);
        Ok(RecallResult { items, prompt })
    }

    /// The `k` active memories nearest `vector` by the vector index alone (no fusion, no use
    /// recorded): for measuring the index.
    pub fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<(String, f32)>> {
        self.sync()?;
        let v = checked_vector(vector.to_vec(), self.embedder.dimension())?;
        let state = &self.state;
        let active = |slot: u32| state.slots[slot as usize].as_ref().is_some_and(Record::is_active);
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
}
