//! A bank: one tenant's memories, their indexes, and every operation on them over the store.
//!
//! Keys (all under `b/<bank>/`): `seq` the commit sequence, `meta` the bank's model and stored
//! format, `m/<id>` a record (JSON), `v/<id>` its vector (little-endian f32, then its sentence
//! keys if any), `s/<n>` a sealed index segment, `lexical` the keyword index snapshot, `t/<id>` a
//! task. Indexes live in memory and are rebuilt (or restored) from these on open.

mod audit;
mod browse;
mod co_mention;
mod distill;
mod health;
mod judging;
mod lifecycle;
mod recall;
mod retain;
mod state;
#[cfg(test)]
mod test_support;
mod transfer;

use std::rc::Rc;

use hindsight_types::settings::Settings;
use hindsight_types::time::Timestamp;
use hindsight_types::{Erasure, Kind, MemoryRecord, Named, OperationUsage, Status, Usage};
pub use hindsight_types::{RetainAction, RetainOutcome, Stats};
use serde::{Deserialize, Serialize};

use crate::embed::{SentenceKeys, TextEmbedder, MAX_KEYS};
use crate::llm::Llm;
use crate::record::Record;
use crate::segment::Segment;
use crate::store::{scan_all, Op, Store, StoreError};
use crate::usage::{Meter, MeteredEmbedder, MeteredLlm};
use crate::{Error, Result};
pub use recall::recall_across;
use state::State;

/// The store key (under the bank's prefix) of the keyword index snapshot.
const LEXICAL_KEY: &str = "lexical";
/// The store key (under the bank's prefix) of the running usage totals per operation.
const USAGE_KEY: &str = "usage";

pub use hindsight_types::FORMAT_VERSION;

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    embedding_model: String,
    dimension: usize,
    created_at: Timestamp,
    /// Absent in banks written before the format was versioned.
    #[serde(default = "first_format")]
    format_version: u32,
}

fn first_format() -> u32 {
    1
}

pub struct Bank {
    id: String,
    prefix: String,
    /// Shared with banks this one opens on the same store (a distilled lesson's shared bank).
    store: Rc<dyn Store>,
    embedder: Rc<dyn TextEmbedder>,
    llm: Rc<MeteredLlm>,
    settings: Rc<Settings>,
    state: State,
    ids_made: u64,
    /// Whether lessons marked for sharing may go to `spaces.shared_bank` (the caller may write
    /// there); set by the host per call.
    /// An import this instance has begun (its header was read).
    importing: Option<transfer::Importing>,
    /// Counts what the call in progress spends (shared with the model and embedder wrappers).
    meter: Rc<Meter>,
}

/// The store key of a bank's [`Turn`].
const TURN_KEY: &str = "turn";

/// A writer's claim to commit next, taken after it lost a commit to another writer. It is
/// written outside the bank's sequence (taking it makes no one else's commit fail) and lapses
/// by the wall clock, so a writer that died holding it delays the others by at most
/// [`Turn::LASTS_MS`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct Turn {
    holder: u64,
    /// Wall-clock ms after which the turn is free.
    until: Timestamp,
}

impl Turn {
    const LASTS_MS: i64 = 5_000;

    fn to_bytes(self) -> Vec<u8> {
        [self.holder.to_le_bytes(), self.until.to_le_bytes()].concat()
    }

    fn from_bytes(bytes: &[u8]) -> Option<Turn> {
        let holder = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        let until = i64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
        Some(Turn { holder, until })
    }

    /// The same holder, lapsed: what a finished writer leaves.
    fn released(self) -> Vec<u8> {
        Turn { until: 0, ..self }.to_bytes()
    }
}

/// The ids of the banks `store` holds, in byte order: the one place outside a bank that knows
/// its keys are `b/<id>/…`.
pub fn banks(store: &dyn Store) -> Result<Vec<String>> {
    let mut banks = Vec::new();
    let mut after: Option<String> = None;
    // One scan per bank: after a bank's keys `b/<id>/…` comes `b/<id>0…` ('0' follows '/').
    while let Some((key, _)) = store.scan("b/", after.as_deref(), 1)?.into_iter().next() {
        let Some(id) = key["b/".len()..].split('/').next().filter(|id| !id.is_empty()) else { break };
        banks.push(id.to_string());
        after = Some(format!("b/{id}0"));
    }
    Ok(banks)
}

impl Bank {
    pub fn open(
        id: &str,
        store: Box<dyn Store>,
        embedder: Rc<dyn TextEmbedder>,
        llm: Rc<dyn Llm>,
        settings: Rc<Settings>,
    ) -> Result<Bank> {
        let meter = Rc::new(Meter::default());
        let embedder = Rc::new(MeteredEmbedder { inner: embedder, meter: meter.clone() });
        let llm = Rc::new(MeteredLlm { inner: llm, meter: meter.clone() });
        Bank::load(id, Rc::from(store), embedder, llm, settings, meter)
    }

    /// Another bank on the same store, with the same model, LLM and settings; what it spends
    /// counts toward this bank's call.
    fn open_sibling(&self, id: &str) -> Result<Bank> {
        Bank::load(
            id,
            self.store.clone(),
            self.embedder.clone(),
            self.llm.clone(),
            self.settings.clone(),
            self.meter.clone(),
        )
    }

    /// Runs `operation` (`retain`, `recall`, `task_end`, …) metered: its LLM calls, tokens and
    /// embedded texts counted and capped by `limits.llm_token_budget`, added to the bank's
    /// running totals with its commits, and kept as [`Bank::last_usage`].
    pub fn metered<T>(
        &mut self,
        operation: &'static str,
        f: impl FnOnce(&mut Bank) -> Result<T>,
    ) -> Result<T> {
        self.begin_metered(operation);
        let result = f(self);
        self.end_metered(result.is_ok());
        result
    }

    /// Starts metering `operation` for a call that spans other banks too (`recall_across`);
    /// [`Bank::end_metered`] ends it.
    pub fn begin_metered(&self, operation: &'static str) {
        self.meter.begin(operation, &self.id, self.settings.limits.llm_token_budget);
    }

    /// Ends what [`Bank::begin_metered`] started (`ok`: the call succeeded), storing what the
    /// call's commits did not (a call that committed nothing, or spent after its last commit) in
    /// a commit of its own.
    pub fn end_metered(&self, ok: bool) {
        // A bank that holds nothing is not made by a call that stored nothing in it: a recall
        // from a mistyped bank name, a maintain of an empty one, a retain that failed. A task end
        // that only kept its task (the budget stopped its distillation) is counted.
        let kept_something = ok && self.meter.operation() != Some("recall") && self.meter.spent();
        if self.meter.has_unstored() && (self.state.has_meta || kept_something) {
            // Totals are bookkeeping, outside the bank's sequence: a lost race or a read-only
            // store loses a count, never the call's result.
            for _ in 0..4 {
                let before = self.store.get(&self.key(USAGE_KEY)).ok().flatten();
                let mut totals: Vec<OperationUsage> =
                    before.as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
                let Some(usage) = self.meter.unstored(&mut totals) else { break };
                let bytes = serde_json::to_vec(&totals).expect("totals serialise");
                let ops = vec![Op::Expect(self.key(USAGE_KEY), before), Op::Put(self.key(USAGE_KEY), bytes)];
                match self.store.commit(ops) {
                    Ok(()) => {
                        self.meter.stored(usage);
                        break;
                    }
                    Err(StoreError::Conflict(_)) => continue,
                    Err(_) => break,
                }
            }
        }
        self.meter.finish();
    }

    /// What the last [`Bank::metered`] call cost.
    pub fn last_usage(&self) -> Usage {
        self.meter.last()
    }

    /// The bank's running totals per operation, as stored.
    fn usage_totals(&self) -> Result<Vec<OperationUsage>> {
        match self.store.get(&self.key(USAGE_KEY))? {
            None => Ok(Vec::new()),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: usage totals: {e}", self.id))),
        }
    }

    /// The bank as the store holds it, migrated once from an older stored format.
    fn load(
        id: &str,
        store: Rc<dyn Store>,
        embedder: Rc<dyn TextEmbedder>,
        llm: Rc<MeteredLlm>,
        settings: Rc<Settings>,
        meter: Rc<Meter>,
    ) -> Result<Bank> {
        hindsight_types::validate_bank_id(id)?;
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
            importing: None,
            meter,
        };
        bank.reload()?;
        if bank.state.has_meta && bank.state.format_version < FORMAT_VERSION {
            bank.transact(Bank::migrate_once)?;
        }
        Ok(bank)
    }

    /// Brings a bank written in an older stored format to this one, in one commit: JSON index
    /// segments are rewritten in binary, and `meta` records the format.
    fn migrate_once(&mut self) -> Result<()> {
        if self.state.format_version >= FORMAT_VERSION {
            return Ok(());
        }
        let mut ops = Vec::new();
        for name in &self.state.legacy_segments {
            if let Some((_, segment)) = self.state.segments.iter().find(|(key, _)| key == name) {
                let slots = &self.state.slots;
                let bytes = segment.to_bytes(|slot| slots[slot as usize].as_ref().map(|m| m.id.clone()));
                ops.push(Op::Put(self.key(&format!("s/{name}")), bytes));
            }
        }
        let mut meta = self
            .stored_meta()?
            .ok_or_else(|| Error::Corrupt(format!("bank {}: meta vanished while migrating", self.id)))?;
        meta.format_version = FORMAT_VERSION;
        ops.push(self.put_meta(&meta));
        let now = meta.created_at.max(0);
        self.commit(ops, now)?;
        self.state.format_version = FORMAT_VERSION;
        self.state.legacy_segments.clear();
        Ok(())
    }

    /// The stored format the bank is in.
    pub fn format_version(&self) -> u32 {
        self.state.format_version
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
        if let Some(meta) = self.stored_meta()? {
            if meta.format_version > FORMAT_VERSION {
                return Err(Error::Unsupported(format!(
                    "bank {} is in stored format {}; this engine reads formats up to {FORMAT_VERSION}: \
                     open it with a newer hindsight",
                    self.id, meta.format_version
                )));
            }
            state.format_version = meta.format_version;
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
            let memory: Record = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("bank {}: record {key}: {e}", self.id)))?;
            state.insert_record(memory);
            Ok(())
        })?;
        let vprefix = self.key("v/");
        let dim = self.embedder.dimension();
        state.vectors.reserve(state.by_id.len());
        scan_all(&*self.store, &vprefix, |key, bytes| {
            if let Some(&slot) = state.by_id.get(&key[vprefix.len()..]) {
                // The vector alone, or with whole keys after it; anything else is embedded again.
                if bytes.len() >= dim * 4 {
                    let (v, keys) = bytes.split_at(dim * 4);
                    let keys = SentenceKeys::decode(dim, keys);
                    if keys.is_some() || bytes.len() == dim * 4 {
                        state.vectors.insert(slot, &decode_vector(v));
                        state.set_sentences(slot, keys);
                    }
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
            if Segment::is_legacy(&bytes) {
                state.legacy_segments.push(name.clone());
            }
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
    ///
    /// Reloading costs more than another writer's whole commit, so a writer that lost once could
    /// lose every time: it then takes the bank's turn (see [`Turn`]), which the others wait for.
    fn transact<T>(&mut self, mut op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        // Each try but a turn holder's can lose to one other writer: enough for a crowd.
        const TRIES: usize = 16;
        let mut turn: Option<Turn> = None;
        let mut result = None;
        for attempt in 1..=TRIES {
            if let Err(e) = self.wait_for_turn(turn.as_ref()) {
                result = Some(Err(e));
                break;
            }
            let outcome = self.sync().and_then(|()| op(self));
            match outcome {
                Err(Error::Store(StoreError::Conflict(key))) if attempt == TRIES => {
                    result = Some(Err(Error::Conflict(format!(
                        "{key} changed since it was read: other writers kept committing first ({TRIES} tries)"
                    ))));
                }
                Err(Error::Store(StoreError::Conflict(_))) => {
                    if turn.is_none() {
                        turn = self.take_turn()?;
                    }
                    continue;
                }
                other => result = Some(other),
            }
            break;
        }
        if let Some(turn) = turn {
            // A turn left behind only delays the others until it lapses.
            let _ = self.store.commit(vec![Op::Put(self.key(TURN_KEY), turn.released())]);
        }
        result.expect("the loop ends with a result")
    }

    /// Waits while another writer holds a live turn on this bank (never longer than a turn
    /// lasts); `ours` is the turn this writer holds, if any.
    fn wait_for_turn(&self, ours: Option<&Turn>) -> Result<()> {
        let started = hindsight_types::time::now();
        loop {
            self.store.refresh()?;
            let held = self.store.get(&self.key(TURN_KEY))?.and_then(|b| Turn::from_bytes(&b));
            let now = hindsight_types::time::now();
            let free = match held {
                None => true,
                Some(t) => ours.is_some_and(|o| o.holder == t.holder) || t.until <= now,
            };
            if free || now - started > Turn::LASTS_MS {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Takes the bank's turn, unless another writer holds a live one or takes it first: then
    /// `None`, and this writer waits for theirs. Two losers overwriting each other's turn would
    /// each think it held one, and race again.
    fn take_turn(&mut self) -> Result<Option<Turn>> {
        let key = self.key(TURN_KEY);
        let held = self.store.get(&key)?;
        let now = hindsight_types::time::now();
        if held.as_deref().and_then(Turn::from_bytes).is_some_and(|t| t.until > now) {
            return Ok(None);
        }
        self.ids_made += 1;
        let turn = Turn { holder: hindsight_types::random_u64(self.ids_made), until: now + Turn::LASTS_MS };
        match self.store.commit(vec![Op::Expect(key.clone(), held), Op::Put(key, turn.to_bytes())]) {
            Ok(()) => Ok(Some(turn)),
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Commits `ops` plus the bumped sequence number, if the stored sequence is still the one
    /// this instance applied; the in-memory state is only touched by the caller after this
    /// succeeds, so a failed commit changes nothing.
    fn commit(&mut self, ops: Vec<Op>, now: Timestamp) -> Result<()> {
        Ok(self.commit_to_store(ops, now)?)
    }

    /// [`Self::commit`] with the store's own error, for callers that treat some apart.
    fn commit_to_store(&mut self, mut ops: Vec<Op>, now: Timestamp) -> std::result::Result<(), StoreError> {
        if !self.state.has_meta {
            let meta = Meta {
                embedding_model: self.embedder.model_id().to_string(),
                dimension: self.embedder.dimension(),
                created_at: now,
                format_version: FORMAT_VERSION,
            };
            ops.push(self.put_meta(&meta));
        }
        let applied = self.state.applied;
        ops.insert(0, Op::Expect(self.key("seq"), (applied > 0).then(|| applied.to_le_bytes().to_vec())));
        // A bank made anew after a delete numbers on from where the deleted one stopped.
        let start = match applied {
            0 => {
                let generation = self.store.get(&self.generation_key())?;
                let last =
                    generation.as_deref().and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
                ops.insert(1, Op::Expect(self.generation_key(), generation));
                last
            }
            n => n,
        };
        let next = start + 1;
        ops.push(Op::Put(self.key("seq"), next.to_le_bytes().to_vec()));
        // A metered call's spending so far rides on its commit: no write of its own.
        let mut counted = None;
        if self.meter.carries(&self.id) {
            // Expected as read: a totals-only commit of another call in between (outside the
            // sequence) makes this one retry rather than overwrite its count.
            let before = self.store.get(&self.key(USAGE_KEY))?;
            let mut totals: Vec<OperationUsage> =
                before.as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
            counted = self.meter.unstored(&mut totals);
            ops.push(Op::Expect(self.key(USAGE_KEY), before));
            ops.push(Op::Put(self.key(USAGE_KEY), serde_json::to_vec(&totals).expect("totals serialise")));
        }
        self.store.commit(ops)?;
        if let Some(usage) = counted {
            self.meter.stored(usage);
        }
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

    /// Seals the vector buffer into an HNSW segment when it holds at least `min` vectors (with
    /// `merge`, sealed segments into the same graph, up to `index.merge_max` rows); the ops that
    /// store the change, for the caller's commit, and how many vectors came from the buffer.
    fn seal_buffer(&mut self, min: usize, merge: bool) -> (Vec<Op>, usize) {
        let ix = &self.settings.index;
        let buffered = self.state.buffer_len();
        let (ef_construction, ef_search) = (ix.ef_construction as usize, ix.ef_search as usize);
        let merge_max = if merge { ix.merge_max as usize } else { 0 };
        let Some(sealed) = self.state.seal(min, merge_max, ef_construction, ef_search) else {
            return (Vec::new(), 0);
        };
        let mut ops: Vec<Op> =
            sealed.replaced.iter().map(|name| Op::Delete(self.key(&format!("s/{name}")))).collect();
        ops.push(Op::Put(self.key(&format!("s/{}", sealed.key)), sealed.bytes));
        (ops, buffered - self.state.buffer_len())
    }

    /// Saves the keyword index so that opening the bank restores rather than rebuilds it.
    fn save_lexical(&mut self) -> Op {
        Op::Put(self.key(LEXICAL_KEY), self.state.lexical_snapshot())
    }

    /// The bank's `meta` as stored (none before its first commit).
    fn stored_meta(&self) -> Result<Option<Meta>> {
        match self.store.get(&self.key("meta"))? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("bank {}: meta: {e}", self.id))),
        }
    }

    fn put_meta(&self, meta: &Meta) -> Op {
        Op::Put(self.key("meta"), serde_json::to_vec(meta).expect("meta serialises"))
    }

    /// Texts embedded as the bank stores them: each one's vector, and its sentence keys when
    /// `recall.sentence_keys` is on and it has several sentences.
    fn embed_stored(&self, texts: &[&str]) -> Result<Vec<(Vec<f32>, Option<SentenceKeys>)>> {
        if !self.settings.recall.sentence_keys {
            return Ok(self.embedder.embed_batch(texts)?.into_iter().map(|v| (v, None)).collect());
        }
        let dim = self.embedder.dimension();
        Ok(self
            .embedder
            .embed_keyed(texts)?
            .into_iter()
            .map(|k| {
                let keys = SentenceKeys::quantize(dim, &k.sentences);
                (k.vector, keys)
            })
            .collect())
    }

    fn put_vector(&self, id: &str, vector: &[f32], sentences: Option<&SentenceKeys>) -> Op {
        Op::Put(self.key(&format!("v/{id}")), encode_stored_vector(vector, sentences))
    }

    fn put_memory(&self, memory: &Record) -> Op {
        Op::Put(self.key(&format!("m/{}", memory.id)), serde_json::to_vec(memory).expect("memory serialises"))
    }

    fn new_id(&mut self, now: Timestamp) -> String {
        self.ids_made += 1;
        let random = hindsight_types::random_u64(self.ids_made) as u32;
        format!("m{:011x}{:08x}", (now.max(0) as u64) & 0xfff_ffff_ffff, random)
    }

    pub fn get(&mut self, id: &str) -> Result<MemoryRecord> {
        Ok(self.record(id)?.to_public())
    }

    /// The stored record, bookkeeping included.
    pub(crate) fn record(&mut self, id: &str) -> Result<Record> {
        self.sync()?;
        self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))
    }

    fn not_found(&self, id: &str) -> Error {
        Error::not_found("memory", id, format!("no memory {id:?} in bank {}", self.id))
    }

    /// Soft: the memory is archived (kept, restorable, never recalled). Hard: the record and its
    /// vector are deleted from the store and every index.
    /// Archives memory `id`: kept, restorable, never recalled ([`Bank::erase`] erases).
    pub fn forget(&mut self, id: &str, now: Timestamp) -> Result<()> {
        self.transact(|bank| {
            let memory = bank.state.memory(id).cloned().ok_or_else(|| bank.not_found(id))?;
            if memory.status != Status::Archived {
                let mut m = memory.clone();
                m.archive(&memory, now);
                bank.commit(vec![bank.put_memory(&m)], now)?;
                bank.state.update(m);
            }
            Ok(())
        })
    }

    /// Erases memory `id` for good, and every copy of its text: the records merged into it, its
    /// text in every task that holds it (the one it was distilled from, ones whose facts
    /// reinforced it), its entries in the recall log and the tasks' citation handles, and the
    /// copies shared from it into other banks (each erased the same way, in that bank's own
    /// commit, after this bank's). Says what it erased and what remains.
    pub fn erase(&mut self, id: &str, now: Timestamp) -> Result<Erasure> {
        let mut receipt = Erasure::default();
        let mut seen = std::collections::BTreeSet::new();
        self.erase_with_copies(id, now, &mut receipt, &mut seen)?;
        // A store that keeps old values beside its data (a log) drops them now. The memory is
        // gone either way; the error says so, since forgetting it again finds nothing.
        self.store.checkpoint().map_err(|e| {
            Error::store(format!(
                "memory {id} is forgotten, but the store kept its old bytes: {e}; they go at its next \
                 compaction (or the next hard forget)"
            ))
        })?;
        Ok(receipt)
    }

    fn erase_with_copies(
        &mut self,
        id: &str,
        now: Timestamp,
        receipt: &mut Erasure,
        seen: &mut std::collections::BTreeSet<String>,
    ) -> Result<()> {
        seen.insert(format!("{}/{id}", self.id));
        self.transact(|bank| bank.erase_once(id, now, receipt))?;
        let origin = format!("{}/{id}", self.id);
        for other in banks(&*self.store)? {
            if other == self.id {
                continue;
            }
            let mut bank = self.open_sibling(&other)?;
            let copies: Vec<String> = bank
                .state
                .slots
                .iter()
                .flatten()
                .filter(|m| m.metadata.iter().any(|(k, v)| k == "shared_from" && *v == origin))
                .map(|m| m.id.clone())
                .collect();
            for copy in copies {
                if !seen.contains(&format!("{other}/{copy}")) {
                    bank.erase_with_copies(&copy, now, receipt, seen)?;
                }
            }
        }
        Ok(())
    }

    /// Deletes the bank: every key under it, in one commit; returns how many. Its sequence
    /// number is kept beside it (`g/<id>`), so a bank made again under the same id never takes a
    /// number an instance that had the old one open would mistake for what it applied.
    pub fn delete_bank(&mut self) -> Result<u32> {
        self.sync()?;
        let mut keys = Vec::new();
        scan_all(&*self.store, &self.prefix, |key, _| {
            keys.push(key);
            Ok(())
        })?;
        let applied = self.state.applied;
        let mut ops =
            vec![Op::Expect(self.key("seq"), (applied > 0).then(|| applied.to_le_bytes().to_vec()))];
        ops.extend(keys.iter().cloned().map(Op::Delete));
        ops.push(Op::Put(self.generation_key(), (applied + 1).to_le_bytes().to_vec()));
        self.store.commit(ops)?;
        self.state = State::empty(self.embedder.dimension());
        Ok(keys.len() as u32)
    }

    /// Where a deleted bank's last sequence number is kept (outside the bank's own keys).
    fn generation_key(&self) -> String {
        format!("g/{}", self.id)
    }

    /// One bank's part of an erasure, in one commit.
    fn erase_once(&mut self, id: &str, now: Timestamp, receipt: &mut Erasure) -> Result<()> {
        let memory = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        // The records merged into it hold what it says, in other words: they go with it.
        let merged: Vec<Record> = self
            .state
            .slots
            .iter()
            .flatten()
            .filter(|m| m.status == Status::Merged && m.superseded_by.as_deref() == Some(id))
            .cloned()
            .collect();
        let mut ops = Vec::new();
        let mut erased = vec![memory.clone()];
        erased.extend(merged);
        for m in &erased {
            ops.push(Op::Delete(self.key(&format!("m/{}", m.id))));
            ops.push(Op::Delete(self.key(&format!("v/{}", m.id))));
        }
        // Nothing may keep the erased ids or their text: neighbours are relinked past them, every
        // task that holds the text loses it, and every citation handle naming them points nowhere
        // (in the same commit).
        let mut relinked: Vec<Record> = Vec::new();
        for m in &erased {
            for r in self.relinked_without(m, now) {
                if erased.iter().any(|e| e.id == r.id) {
                    continue;
                }
                match relinked.iter_mut().find(|x| x.id == r.id) {
                    Some(x) => *x = r,
                    None => relinked.push(r),
                }
            }
        }
        ops.extend(relinked.iter().map(|m| self.put_memory(m)));
        let (scrubbed, task_ops) = self.scrub_tasks(&erased, now)?;
        ops.extend(task_ops);
        let mut logged = 0;
        for m in &erased {
            let (entries, unlog_ops) = self.unlog(&m.id)?;
            logged += entries;
            ops.extend(unlog_ops);
        }
        for m in &erased {
            self.state.remove(&m.id, relinked.clone(), &self.settings.lexical);
        }
        // The keyword snapshot holds the memory's words: saved again without them, in the same
        // commit (rather than dropped, which would make the next open tokenize everything).
        ops.push(self.save_lexical());
        self.commit_or_reload(ops, now)?;
        receipt.memories.extend(erased.iter().map(|m| format!("{}/{}", self.id, m.id)));
        receipt.vectors += erased.len() as u32;
        receipt.recall_log_entries += logged;
        receipt.tasks.extend(scrubbed.iter().map(|t| format!("{}/{t}", self.id)));
        Ok(())
    }

    /// The records that name `erased` (as sequence predecessor, superseder, superseded or
    /// conflicting memory), changed to name what it linked to instead. A memory it replaced or
    /// absorbed is replaced by its own successor, if any; else it is current again.
    fn relinked_without(&self, erased: &Record, now: Timestamp) -> Vec<Record> {
        let id = erased.id.as_str();
        let mut out = Vec::new();
        for m in self.state.slots.iter().flatten().filter(|m| m.id != id) {
            let mut r = m.clone();
            if r.follows.as_deref() == Some(id) {
                r.follows = erased.follows.clone();
            }
            if r.superseded_by.as_deref() == Some(id) {
                r.superseded_by = erased.superseded_by.clone();
                if r.superseded_by.is_none() && matches!(r.status, Status::Superseded | Status::Merged) {
                    r.set_status(Status::Active, now);
                }
            }
            if r.supersedes.iter().any(|s| s == id) {
                r.supersedes.retain(|s| s != id);
                for s in &erased.supersedes {
                    if *s != r.id && !r.supersedes.contains(s) {
                        r.supersedes.push(s.clone());
                    }
                }
            }
            r.conflicts_with.retain(|c| c != id);
            if r != *m {
                out.push(r);
            }
        }
        out
    }

    pub fn restore(&mut self, id: &str, now: Timestamp) -> Result<MemoryRecord> {
        Ok(self.transact(|bank| bank.restore_once(id, now))?.to_public())
    }

    /// Undoes a wrong supersede: the memory is active again, with the confidence it had, and
    /// it and the memory that replaced it are marked as both holding (conflicting, kept side
    /// by side), so the same pair is not superseded again.
    pub fn unsupersede(&mut self, id: &str, now: Timestamp) -> Result<MemoryRecord> {
        Ok(self.transact(|bank| bank.unsupersede_once(id, now))?.to_public())
    }

    fn unsupersede_once(&mut self, id: &str, now: Timestamp) -> Result<Record> {
        let mut m = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        if m.status != Status::Superseded {
            return Err(Error::invalid(
                "id",
                format!("memory {id} is {}; only a superseded memory can be unsuperseded", m.status),
            ));
        }
        let w = &self.settings.write;
        if w.supersede_confidence_factor > 0.0 {
            m.confidence = (m.confidence / w.supersede_confidence_factor).min(1.0);
        }
        m.set_status(Status::Active, now);
        let mut ops = Vec::new();
        let mut changed = Vec::new();
        if let Some(newer_id) = m.superseded_by.take() {
            if let Some(mut newer) = self.state.memory(&newer_id).cloned() {
                newer.supersedes.retain(|s| s != id);
                if !newer.conflicts_with.iter().any(|c| c == id) {
                    newer.conflicts_with.push(id.to_string());
                }
                newer.updated_at = now;
                if !m.conflicts_with.contains(&newer_id) {
                    m.conflicts_with.push(newer_id.clone());
                }
                ops.push(self.put_memory(&newer));
                changed.push(newer);
            }
        }
        ops.push(self.put_memory(&m));
        self.commit(ops, now)?;
        changed.push(m.clone());
        for r in changed {
            self.state.update(r);
        }
        Ok(m)
    }

    fn restore_once(&mut self, id: &str, now: Timestamp) -> Result<Record> {
        let mut m = self.state.memory(id).cloned().ok_or_else(|| self.not_found(id))?;
        if m.status != Status::Archived {
            return Err(Error::invalid(
                "id",
                format!("memory {id} is {}; only archived memories can be restored", m.status),
            ));
        }
        // Back to what it was: a superseded memory stays superseded (no longer recalled as
        // current), and the confidence it had before it was archived returns.
        let before = m.archived_from.take();
        let status = before.as_ref().map_or(Status::Active, |b| b.status);
        if let Some(b) = before {
            b.restore_into(&mut m);
        }
        m.set_status(status, now);
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
            inference: self.embedder.inference().to_string(),
            sequence: self.state.applied,
            format_version: self.state.format_version,
            usage: self.usage_totals()?,
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

/// A vector as a host gives it (to retain, import or stage): the memory's vector, optionally
/// followed by its sentence keys (what `embed_keyed` answers, or an export wrote), checked and
/// normalised; the keys quantised as the bank keeps them. Keys are told apart from a vector of
/// another model's (wider) dimension by their length: every part is a unit vector, where the
/// parts of one wide unit vector share a single unit of length between them.
fn checked_keyed_vector(mut v: Vec<f32>, dim: usize) -> Result<(Vec<f32>, Option<SentenceKeys>)> {
    let unit = |part: &[f32]| (part.iter().map(|x| x * x).sum::<f32>().sqrt() - 1.0).abs() < 1e-3;
    let keyed = dim > 0
        && v.len() > dim
        && v.len().is_multiple_of(dim)
        && v.len() / dim <= MAX_KEYS + 1
        && v.chunks_exact(dim).all(unit);
    let keys: Vec<Vec<f32>> =
        if keyed { v.split_off(dim).chunks_exact(dim).map(<[f32]>::to_vec).collect() } else { Vec::new() };
    Ok((checked_vector(v, dim)?, SentenceKeys::quantize(dim, &keys)))
}

/// A memory's vector as `v/<id>` (and a staged `rv/<id>`) holds it: the vector, then its sentence
/// keys when it has them.
fn encode_stored_vector(vector: &[f32], sentences: Option<&SentenceKeys>) -> Vec<u8> {
    let mut bytes = encode_vector(vector);
    if let Some(keys) = sentences {
        keys.encode(&mut bytes);
    }
    bytes
}

fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[cfg(test)]
mod audit_tests;
#[cfg(test)]
mod defence_tests;
#[cfg(test)]
mod distill_tests;
#[cfg(test)]
mod edges_tests;
#[cfg(test)]
mod hard_edges_tests;
#[cfg(test)]
mod health_tests;
#[cfg(test)]
mod judging_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod usage_tests;
