//! Recall: candidates from the vector index and BM25, fused and ranked, use recorded.

use std::collections::HashMap;

use hindsight_types::settings::RecallSettings;
use hindsight_types::time::{Timestamp, DAY_MS};
use hindsight_types::{Query, RecallHit, RecallLogEntry, RecallResult, Recalled, ScopeLevel, Status};

use super::{checked_vector, co_mention, Bank};
use crate::prompt;
use crate::question;
use crate::record::{Record, TAG_UNTRUSTED};
use crate::score::{self, Bounds, Evidence, Score};
use crate::store::{Op, StoreError};
use crate::{Error, Result};

/// How many of the first pass's best hits lend their names to co-mention expansion.
const CO_MENTION_SEEDS: usize = 3;

impl Bank {
    /// The memories that matter for `q`, at `q.now` (the wall clock when unset).
    pub fn recall(&mut self, q: Query) -> Result<RecallResult> {
        recall_across(&mut [self], q)
    }

    /// The query checked against the limits: its trimmed text and k.
    fn checked_query<'q>(&self, q: &'q Query) -> Result<(&'q str, u32)> {
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
        Ok((query, k))
    }

    /// The bank's candidates for a query: the `pool` nearest by vector and the `pool` best by
    /// keywords, each with both kinds of evidence (similarity with the memory's best sentence
    /// counted in: the keys rescore candidates, they do not find them).
    fn recall_candidates(
        &self,
        q: &Query,
        now: Timestamp,
        query: &str,
        query_vector: &[f32],
        pool: usize,
    ) -> HashMap<u32, Evidence> {
        let state = &self.state;
        let eligible = |slot: u32| self.recallable(slot, q, now);
        let dense = state.search_vectors(query_vector, pool, eligible);
        let lexical = state.lexical.search(query, &self.settings.lexical, pool, eligible);
        let mut evidence: HashMap<u32, Evidence> = HashMap::new();
        for &(slot, whole) in &dense {
            evidence.insert(slot, Evidence::new(self.similarity(slot, query_vector, Some(whole)), 0.0));
        }
        for &(slot, bm25) in &lexical {
            evidence
                .entry(slot)
                .and_modify(|e| e.bm25 = bm25)
                .or_insert_with(|| Evidence::new(self.similarity(slot, query_vector, None), bm25));
        }
        evidence
    }

    /// Whether the memory in `slot` may answer `q` at `now`: held then, and of the trust, kinds,
    /// tags and scope the query asks for.
    fn recallable(&self, slot: u32, q: &Query, now: Timestamp) -> bool {
        let Some(m) = self.state.slots.get(slot as usize).and_then(Option::as_ref) else {
            return false;
        };
        held(m, q, now)
            && !(q.trusted_only && m.has_tag(TAG_UNTRUSTED))
            && (q.kinds.is_empty() || q.kinds.contains(&m.kind))
            && (q.tags.is_empty() || q.tags.iter().any(|t| m.tags.contains(t)))
            && q.scope.as_ref().is_none_or(|s| m.scope == *s || m.scope.level == ScopeLevel::Global)
    }

    /// The memory's similarity to the query, its best sentence counted in (`whole`: its vector's
    /// cosine when the search already has it).
    fn similarity(&self, slot: u32, query_vector: &[f32], whole: Option<f32>) -> f32 {
        let state = &self.state;
        let weight =
            if self.settings.recall.sentence_keys { self.settings.recall.sentence_weight } else { 0.0 };
        let whole =
            whole.unwrap_or_else(|| crate::index::dot(query_vector, state.vector(slot).unwrap_or(&[])));
        state.similarity(slot, query_vector, whole, weight)
    }

    /// A ranked memory as recall returns it.
    fn recalled(&self, slot: u32, score: Score, now: Timestamp) -> Recalled {
        let state = &self.state;
        let m = state.slots[slot as usize].as_ref().expect("ranked slots are live");
        let conflicting = m
            .conflicts_with
            .iter()
            .filter(|id| state.memory(id).is_some_and(Record::is_active))
            .cloned()
            .collect();
        let stale_ms = (self.settings.recall.stale_after_days as f64 * DAY_MS as f64) as i64;
        let possibly_stale = now.saturating_sub(m.occurred_at) > stale_ms;
        Recalled {
            memory: m.to_public(),
            score,
            conflicting,
            possibly_stale,
            in_prompt: false,
            bank: self.id.clone(),
            handle: None,
        }
    }

    /// Being recalled is use: counted on each memory, logged in the recall log, and (for a task)
    /// the task's citation handles stored, in one commit against the bank as the store holds it
    /// now. Returns the memories as stored after it.
    fn record_use(
        &mut self,
        ids: &[String],
        log: RecallLogEntry,
        task: Option<(&str, &[String])>,
        now: i64,
    ) -> Result<Vec<Option<Record>>> {
        // A bank that holds nothing stays unwritten: recalling from a mistyped bank name must not
        // create it. One holding the task (its first, before any memory) keeps the task's handles.
        if !self.state.has_meta && task.is_none() {
            return Ok(vec![None; ids.len()]);
        }
        self.transact(|bank| {
            let used: Vec<Option<Record>> = ids
                .iter()
                .map(|id| {
                    bank.state.memory(id).cloned().map(|mut m| {
                        m.access_count = m.access_count.saturating_add(1);
                        m.touch(now);
                        m.decay_periods = 0;
                        m
                    })
                })
                .collect();
            let mut ops: Vec<Op> = used.iter().flatten().map(|m| bank.put_memory(m)).collect();
            ops.extend(bank.log_ops(log.clone())?);
            if let Some((task_id, handles)) = task {
                ops.extend(bank.task_handles(task_id, handles)?.1);
            }
            match bank.commit_to_store(ops, now) {
                Ok(()) => {
                    for m in used.iter().flatten() {
                        bank.state.update(m.clone());
                    }
                }
                // A database this host may only read still answers; the use goes unrecorded.
                Err(StoreError::ReadOnly(_)) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(used)
        })
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

/// Lowers the prior of candidates that are unlikely to answer whatever their words share with
/// the question: for a question that gathers what named people did (or asks what they would
/// do), another speaker's memories (`person_prior`); for any question, a memory that is itself a
/// question (`question_penalty`), and a conversation turn about the person it is addressed to
/// (`addressee_penalty`).
fn weigh_by_speaker_and_form(
    banks: &[&mut Bank],
    evidence: &mut [(usize, u32, Evidence)],
    named: &[String],
    settings: &RecallSettings,
) {
    if named.is_empty() && settings.question_penalty <= 0.0 && settings.addressee_penalty <= 0.0 {
        return;
    }
    for (b, slot, e) in evidence.iter_mut() {
        let Some(m) = banks[*b].state.slots.get(*slot as usize).and_then(Option::as_ref) else { continue };
        let speaker = question::speaker(&m.content, &m.metadata);
        if !named.is_empty() && speaker.is_some_and(|s| !named.iter().any(|n| n == s)) {
            e.prior *= 1.0 - settings.person_prior;
        }
        if settings.addressee_penalty > 0.0
            && is_turn(m, speaker)
            && question::addresses_the_other(&m.content, speaker)
        {
            e.prior *= 1.0 - settings.addressee_penalty;
        }
        if settings.question_penalty > 0.0 && question::asks(&m.content, speaker) {
            e.prior *= 1.0 - settings.question_penalty;
        }
    }
}

/// The speakers whose memories the speaker prior favours: for a question that gathers what named
/// people did (or asks what they would do), the speakers of `evidence` (the first pass's
/// candidates) it names; none otherwise.
fn named_speakers(
    banks: &[&mut Bank],
    evidence: &[(usize, u32, Evidence)],
    query: &str,
    gathers: bool,
    settings: &RecallSettings,
) -> Vec<String> {
    if settings.person_prior <= 0.0 || !(gathers || question::speculates(query)) {
        return Vec::new();
    }
    let mut named: Vec<&str> = evidence
        .iter()
        .filter_map(|&(b, slot, _)| {
            let m = banks[b].state.slots.get(slot as usize).and_then(Option::as_ref)?;
            question::speaker(&m.content, &m.metadata)
        })
        .collect();
    named.sort_unstable();
    named.dedup();
    named.into_iter().filter(|s| question::names(query, s)).map(str::to_string).collect()
}

/// Whether `m` is a turn of a conversation: it has a speaker, and follows another turn (it was
/// retained after one in a `sequence`) or names its speaker in metadata. A note such as "Tip: run
/// the tests before you commit" is neither; nor is a session's first turn retained without
/// `speaker` metadata, which the penalty then misses.
fn is_turn(m: &Record, speaker: Option<&str>) -> bool {
    speaker.is_some() && (m.follows.is_some() || m.metadata.iter().any(|(k, _)| k == "speaker"))
}

/// Whether recall may return `m` for `q` at `now`: active and valid now; or, for a recall
/// `as_of` a time, what the bank held and believed then (created by then, superseded or merged
/// only after it, valid then).
fn held(m: &Record, q: &Query, now: Timestamp) -> bool {
    let replaced = matches!(m.status, Status::Superseded | Status::Merged);
    match q.as_of {
        None => {
            (m.status == Status::Active || (q.include_superseded && replaced))
                && m.valid_until.is_none_or(|until| until > now)
        }
        Some(t) => {
            let believed = m.status == Status::Active
                || (replaced && (q.include_superseded || m.status_changed_at.unwrap_or(m.updated_at) > t));
            m.created_at <= t && believed && m.valid_until.is_none_or(|until| until > t)
        }
    }
}

/// Recall over several banks as one: every bank's candidates in one pool, normalised together
/// and ranked by one score, so a strong memory in a shared bank outranks a weak private one.
/// On equal scores the bank listed first wins (private before shared). Each item names its
/// bank; the prompt block marks the ones from a bank other than the first.
pub fn recall_across(banks: &mut [&mut Bank], q: Query) -> Result<RecallResult> {
    let now = q.now.unwrap_or_else(hindsight_types::time::now);
    // Scores and staleness are reckoned at the time the recall asks about; the use is recorded now.
    let at = q.as_of.unwrap_or(now);
    let first = banks.first().ok_or_else(|| Error::invalid("banks", "must name at least one bank"))?;
    let (query, k) = first.checked_query(&q)?;
    let settings = first.settings.clone();
    for bank in banks.iter_mut() {
        bank.sync()?;
    }
    let first = &banks[0];
    let query_vector = match q.vector.clone() {
        Some(v) => checked_vector(v, first.embedder.dimension())?,
        None => {
            let unnamed = settings
                .recall
                .embed_without_names
                .then(|| {
                    let speakers = banks.iter().flat_map(|b| b.state.speakers.keys().map(String::as_str));
                    question::without_speakers(query, speakers)
                })
                .flatten();
            first.embedder.embed_query(&first.id, unnamed.as_deref().unwrap_or(query))?
        }
    };
    let pool = (k * settings.recall.candidate_factor).max(50) as usize;
    let mut evidence: Vec<(usize, u32, Evidence)> = Vec::new();
    for (b, bank) in banks.iter().enumerate() {
        evidence.extend(
            bank.recall_candidates(&q, now, query, &query_vector, pool)
                .into_iter()
                .map(|(slot, e)| (b, slot, e)),
        );
    }
    let gathers = question::gathers(query);
    let named = named_speakers(banks, &evidence, query, gathers, &settings.recall);
    weigh_by_speaker_and_form(banks, &mut evidence, &named, &settings.recall);
    let bounds = Bounds::over(evidence.iter().map(|(_, _, e)| *e));
    let mut fusion = settings.recall.clone();
    if gathers {
        fusion.weights.lexical *= fusion.gathering_lexical_scale;
    }
    let fuse = |b: usize, slot: u32, e: Evidence| {
        let m = banks[b].state.slots[slot as usize].as_ref().expect("candidates are live");
        score::fuse(m, e, &bounds, at, q.task_type.as_deref(), &fusion)
    };
    let mut ranked: Vec<(usize, u32, Score, f32)> =
        evidence.into_iter().map(|(b, slot, e)| (b, slot, fuse(b, slot, e), e.prior)).collect();
    let id = |b: usize, slot: u32| banks[b].state.slots[slot as usize].as_ref().map(|m| m.id.clone());
    let by_score = |x: &(usize, u32, Score, f32), y: &(usize, u32, Score, f32)| {
        y.2.total.total_cmp(&x.2.total).then(x.0.cmp(&y.0)).then_with(|| id(x.0, x.1).cmp(&id(y.0, y.1)))
    };
    ranked.sort_by(by_score);
    // A memory shared into another bank listed here is one memory, known by where it came from.
    let origin = |b: usize, slot: u32| {
        let m = banks[b].state.slots[slot as usize].as_ref().expect("candidates are live");
        m.metadata
            .iter()
            .find(|(k, _)| k == "shared_from")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| format!("{}/{}", banks[b].id, m.id))
    };
    if fusion.entity_expansion > 0.0 && !ranked.is_empty() {
        // The second hop: what the best hits name lends keyword score to the memories that name
        // it too, through the speaker and form priors like any relevance.
        let best = ranked[0].2.total.max(f32::EPSILON);
        let mut seen = std::collections::HashSet::new();
        let seeds: Vec<(usize, u32, f32)> = ranked
            .iter()
            .filter(|r| seen.insert(origin(r.0, r.1)))
            .take(CO_MENTION_SEEDS)
            .map(|r| (r.0, r.1, (r.2.total / best).max(0.0)))
            .collect();
        let speakers = banks
            .iter()
            .flat_map(|b| b.state.speakers.keys())
            .flat_map(|s| crate::lexical::tokenize(s))
            .collect();
        let may_answer = |b: usize, slot: u32| banks[b].recallable(slot, &q, now);
        let lent =
            co_mention::lent(banks, &seeds, query, &speakers, fusion.entity_fanout as usize, may_answer);
        let mut at_rank: HashMap<(usize, u32), usize> =
            ranked.iter().enumerate().map(|(i, r)| ((r.0, r.1), i)).collect();
        let mut newcomers: Vec<(usize, u32, Evidence)> = lent
            .keys()
            .filter(|key| !at_rank.contains_key(key))
            .map(|&(b, slot)| (b, slot, Evidence::new(banks[b].similarity(slot, &query_vector, None), 0.0)))
            .collect();
        newcomers.sort_by_key(|n| (n.0, n.1));
        weigh_by_speaker_and_form(banks, &mut newcomers, &named, &settings.recall);
        for (b, slot, e) in newcomers {
            at_rank.insert((b, slot), ranked.len());
            ranked.push((b, slot, fuse(b, slot, e), e.prior));
        }
        for (key, share) in &lent {
            if let Some(&i) = at_rank.get(key) {
                let (_, _, score, prior) = &mut ranked[i];
                let add = fusion.entity_expansion * *prior * share;
                score.lexical += add;
                score.total += add;
            }
        }
        ranked.sort_by(by_score);
    }
    let mut ranked: Vec<(usize, u32, Score)> = ranked
        .into_iter()
        .map(|(b, slot, score, _)| (b, slot, score))
        .filter(|(_, _, s)| q.min_score.is_none_or(|min| s.total >= min))
        .collect();
    if banks.len() > 1 {
        // Of one memory shared into several banks listed here, the copy in the bank listed first
        // is kept (the others would spend k and the prompt's budget twice).
        let mut first_bank: HashMap<String, usize> = HashMap::new();
        for &(b, slot, _) in &ranked {
            let o = origin(b, slot);
            let e = first_bank.entry(o).or_insert(b);
            *e = (*e).min(b);
        }
        let mut kept: std::collections::HashSet<String> = std::collections::HashSet::new();
        ranked.retain(|&(b, slot, _)| {
            let o = origin(b, slot);
            first_bank[&o] == b && kept.insert(o)
        });
    }
    ranked.truncate(k as usize);

    let mut items: Vec<Recalled> =
        ranked.iter().map(|&(b, slot, score)| banks[b].recalled(slot, score, at)).collect();
    let home = banks[0].id.clone();
    // Citation handles: a task's run on across its recalls (a memory keeps its handle); without
    // a task they are the ranks. Memories of another bank are `bank/id` in a task's list.
    let handle_ids: Vec<String> = items
        .iter()
        .map(|i| if i.bank == home { i.memory.id.clone() } else { format!("{}/{}", i.bank, i.memory.id) })
        .collect();
    let handles: Vec<String> = match q.task_id.as_deref() {
        Some(task_id) => banks[0].task_handles(task_id, &handle_ids)?.0,
        None => handle_ids.clone(),
    };
    for (item, key) in items.iter_mut().zip(&handle_ids) {
        let n = handles.iter().position(|h| h == key).map_or(0, |p| p + 1);
        item.handle = Some(format!("m{n}"));
    }
    let budget = q.prompt_tokens.unwrap_or(settings.recall.prompt_tokens) as usize;
    let prompt = prompt::block(&mut items, budget, settings.recall.prompt_min_relevance, &home);
    for (b, bank) in banks.iter_mut().enumerate() {
        let mine: Vec<usize> = (0..items.len()).filter(|&i| ranked[i].0 == b).collect();
        if mine.is_empty() && b > 0 {
            continue;
        }
        let ids: Vec<String> = mine.iter().map(|&i| items[i].memory.id.clone()).collect();
        let hits = mine
            .iter()
            .map(|&i| RecallHit {
                id: items[i].memory.id.clone(),
                score: items[i].score.total,
                handle: items[i].in_prompt.then(|| items[i].handle.clone()).flatten(),
            })
            .collect();
        let mut log = bank.log_entry(query, q.agent_id.clone(), q.task_id.clone(), hits, now);
        if b > 0 {
            // The other banks' readers would see the caller's query: they get its hash only.
            log.query = None;
        }
        let task = q.task_id.as_deref().filter(|_| b == 0).map(|t| (t, handle_ids.as_slice()));
        for (i, used) in mine.into_iter().zip(bank.record_use(&ids, log, task, now)?) {
            if let Some(m) = used {
                items[i].memory = m.to_public();
            }
        }
    }
    Ok(RecallResult { items, prompt, skipped_banks: Vec::new() })
}
