//! The in-memory image of a bank: its records by slot, and the vector and keyword indexes over them.

use rustc_hash::FxHashMap;

use crate::embed::SentenceKeys;
use crate::fingerprint::fingerprint;
use crate::index::{TopK, VectorIndex};
use crate::lexical::LexicalIndex;
use crate::record::Record;
use crate::segment::Segment;
use crate::settings::LexicalSettings;

/// The in-memory image of the bank's store keys, at sequence `applied`.
pub(super) struct State {
    pub(super) applied: u64,
    pub(super) has_meta: bool,
    /// The stored format as read (`FORMAT_VERSION` for a bank not yet written).
    pub(super) format_version: u32,
    /// Segments stored in format 1's JSON form, rewritten by the migration.
    pub(super) legacy_segments: Vec<String>,
    pub(super) slots: Vec<Option<Record>>,
    pub(super) by_id: FxHashMap<String, u32>,
    pub(super) free: Vec<u32>,
    /// The exact-scan buffer: the vectors of slots not sealed into a segment.
    pub(super) vectors: VectorIndex,
    /// Sealed HNSW segments, with their store keys; `sealed[slot]` when a segment holds it.
    pub(super) segments: Vec<(String, Segment)>,
    pub(super) sealed: Vec<bool>,
    pub(super) lexical: LexicalIndex,
    /// How many memories each speaker (a turn's `Name:` prefix or `speaker` metadata) has said:
    /// the names a query may mention.
    pub(super) speakers: FxHashMap<String, u32>,
    /// The sentence keys of the memories that have them (several sentences, embedded by the bank).
    pub(super) sentences: FxHashMap<u32, SentenceKeys>,
}

impl State {
    pub(super) fn empty(dim: usize) -> State {
        State {
            applied: 0,
            has_meta: false,
            format_version: super::FORMAT_VERSION,
            legacy_segments: Vec::new(),
            slots: Vec::new(),
            by_id: FxHashMap::default(),
            free: Vec::new(),
            vectors: VectorIndex::new(dim),
            segments: Vec::new(),
            sealed: Vec::new(),
            lexical: LexicalIndex::new(),
            speakers: FxHashMap::default(),
            sentences: FxHashMap::default(),
        }
    }

    pub(super) fn memory(&self, id: &str) -> Option<&Record> {
        self.by_id.get(id).and_then(|&s| self.slots[s as usize].as_ref())
    }

    /// Places a memory and its vector; its keyword document is built by `index_lexical` once
    /// the memories it may draw context from are in place too.
    pub(super) fn insert(&mut self, memory: Record, vector: &[f32]) -> u32 {
        let slot = self.insert_record(memory);
        self.vectors.insert(slot, vector);
        self.sentences.remove(&slot);
        slot
    }

    /// A memory's sentence keys, replacing any it had.
    pub(super) fn set_sentences(&mut self, slot: u32, keys: Option<SentenceKeys>) {
        match keys {
            Some(k) => self.sentences.insert(slot, k),
            None => self.sentences.remove(&slot),
        };
    }

    /// How close `query` is to a memory: its vector's cosine, or, for a memory with sentence
    /// keys, that blended with its best sentence's (`sentence_weight` of the best sentence).
    pub(super) fn similarity(&self, slot: u32, query: &[f32], whole: f32, sentence_weight: f32) -> f32 {
        match self.sentences.get(&slot) {
            Some(keys) if sentence_weight > 0.0 => {
                (1.0 - sentence_weight) * whole + sentence_weight * keys.best(query)
            }
            _ => whole,
        }
    }

    /// Places a record whose vector the caller adds (to the buffer) itself.
    pub(super) fn insert_record(&mut self, memory: Record) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.by_id.insert(memory.id.clone(), slot);
        self.count_speaker(&memory, true);
        self.slots[slot as usize] = Some(memory);
        slot
    }

    /// The ids of the memories a memory follows in its sequence, nearest first, at most `n`.
    pub(super) fn predecessors(&self, memory: &Record, n: u32) -> Vec<&Record> {
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
    /// when dates are indexed, and the content of the memories just before it in its sequence
    /// when both are short.
    fn lexical_doc(&self, slot: u32, settings: &LexicalSettings, doc: &mut String) -> bool {
        let Some(memory) = self.slots[slot as usize].as_ref() else { return false };
        doc.clear();
        doc.push_str(&memory.content);
        if settings.index_dates {
            doc.push(' ');
            doc.push_str(&hindsight_types::time::month_year(memory.occurred_at));
        }
        // Context passes only between short memories: a long one says enough by itself, and its
        // words would drown a short reply's.
        let short = |m: &Record| m.content.split_whitespace().count() <= settings.context_max_words as usize;
        if short(memory) {
            for prev in self.predecessors(memory, settings.context_previous).into_iter().filter(|p| short(p))
            {
                doc.push(' ');
                doc.push_str(&prev.content);
            }
        }
        true
    }

    pub(super) fn index_lexical(&mut self, slot: u32, settings: &LexicalSettings) {
        let mut doc = String::new();
        if self.lexical_doc(slot, settings, &mut doc) {
            self.lexical.insert(slot, &doc);
        }
    }

    /// Builds the keyword index of a freshly loaded bank: from the saved snapshot for every memory
    /// whose document is unchanged since it was saved, by tokenizing the rest. The snapshot is a
    /// cache: an unreadable one is as if there were none.
    pub(super) fn build_lexical(&mut self, snapshot: Option<&[u8]>, settings: &LexicalSettings) {
        let mut restored = vec![false; self.slots.len()];
        if let Some(snapshot) = snapshot {
            let mut doc = String::new();
            let fingerprints: Vec<Option<u64>> = (0..self.slots.len() as u32)
                .map(|slot| self.lexical_doc(slot, settings, &mut doc).then(|| fingerprint(doc.as_bytes())))
                .collect();
            let by_id = &self.by_id;
            let slot_of =
                |id: &str, fp: u64| by_id.get(id).copied().filter(|&s| fingerprints[s as usize] == Some(fp));
            for slot in self.lexical.restore(snapshot, slot_of).unwrap_or_default() {
                restored[slot as usize] = true;
            }
        }
        for slot in 0..self.slots.len() as u32 {
            if !restored[slot as usize] {
                self.index_lexical(slot, settings);
            }
        }
    }

    /// The keyword index as a snapshot for the store (see `LexicalIndex::encode`).
    pub(super) fn lexical_snapshot(&mut self) -> Vec<u8> {
        let slots = &self.slots;
        self.lexical.encode(|slot| slots[slot as usize].as_ref().map(|m| m.id.as_str()))
    }

    /// Replaces a record whose indexed content is unchanged.
    pub(super) fn update(&mut self, memory: Record) {
        if let Some(&slot) = self.by_id.get(&memory.id) {
            if let Some(old) = self.slots[slot as usize].take() {
                self.count_speaker(&old, false);
            }
            self.count_speaker(&memory, true);
            self.slots[slot as usize] = Some(memory);
        }
    }

    fn count_speaker(&mut self, memory: &Record, added: bool) {
        let Some(speaker) = crate::question::speaker(&memory.content, &memory.metadata) else { return };
        if added {
            *self.speakers.entry(speaker.to_string()).or_default() += 1;
        } else if let Some(n) = self.speakers.get_mut(speaker) {
            *n -= 1;
            if *n == 0 {
                self.speakers.remove(speaker);
            }
        }
    }

    /// Removes a memory from every index and its words from the documents that drew on it;
    /// `relinked` are its successors' records, already pointing past it.
    pub(super) fn remove(&mut self, id: &str, relinked: Vec<Record>, settings: &LexicalSettings) {
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
        self.sentences.remove(&slot);
        if self.is_sealed(slot) {
            for (_, segment) in &mut self.segments {
                segment.remove(slot);
            }
            self.sealed[slot as usize] = false;
        }
        self.lexical.remove(slot);
        if let Some(old) = self.slots[slot as usize].take() {
            self.count_speaker(&old, false);
        }
        self.free.push(slot);
        for s in dependents {
            self.index_lexical(s, settings);
        }
    }

    pub(super) fn is_sealed(&self, slot: u32) -> bool {
        self.sealed.get(slot as usize).copied().unwrap_or(false)
    }

    /// A live memory's vector, from the buffer or its segment.
    pub(super) fn vector(&self, slot: u32) -> Option<&[f32]> {
        if self.is_sealed(slot) {
            self.segments.iter().find_map(|(_, s)| s.vector(slot))
        } else {
            self.vectors.get(slot)
        }
    }

    /// Vectors waiting in the exact-scan buffer.
    pub(super) fn buffer_len(&self) -> usize {
        self.vectors.len()
    }

    fn mark_sealed(&mut self, slot: u32) {
        if self.sealed.len() <= slot as usize {
            self.sealed.resize(slot as usize + 1, false);
        }
        self.sealed[slot as usize] = true;
    }

    /// The `limit` eligible slots nearest `query`: an exact scan of the buffer, the graph of
    /// each sealed segment, merged.
    pub(super) fn search_vectors(
        &self,
        query: &[f32],
        limit: usize,
        eligible: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let mut hits = self.vectors.search(query, limit, &eligible);
        if self.segments.is_empty() {
            return hits;
        }
        for (_, segment) in &self.segments {
            hits.extend(segment.search(query, limit, &eligible));
        }
        let mut top = TopK::new(limit);
        for (slot, score) in hits {
            top.push(slot, score);
        }
        top.into_sorted()
    }

    /// What sealing would do now: whether the buffer goes into a new graph (when it holds at
    /// least `min` vectors), and which segments are merged into that graph (indices), smallest
    /// first while it stays within `merge_max` rows, buffer counted (0: none). A merge takes the
    /// buffer however small: a graph rebuilt anyway leaves no exact scan beside it.
    pub(super) fn seal_plan(&self, min: usize, merge_max: usize) -> (bool, Vec<usize>) {
        let full = !self.vectors.is_empty() && self.vectors.len() >= min.max(1);
        let mut merged: Vec<usize> = Vec::new();
        let mut rows_after = self.vectors.len();
        let mut by_size: Vec<usize> = (0..self.segments.len()).collect();
        by_size.sort_by_key(|&i| self.segments[i].1.len());
        for i in by_size {
            let len = self.segments[i].1.len();
            if rows_after + len > merge_max {
                break;
            }
            rows_after += len;
            merged.push(i);
        }
        if merged.len() + usize::from(full) < 2 {
            merged.clear();
        }
        (full || (!merged.is_empty() && !self.vectors.is_empty()), merged)
    }

    /// Seals as `seal_plan` says: one graph searched per query instead of one per segment,
    /// tombstoned rows dropped. Returns the store key suffixes of the segments replaced, and
    /// the new segment's key suffix and bytes, for the caller to commit; none when there is
    /// nothing to seal or merge.
    pub(super) fn seal(
        &mut self,
        min: usize,
        merge_max: usize,
        ef_construction: usize,
        ef_search: usize,
    ) -> Option<Sealed> {
        let (seal_buffer, mut merged) = self.seal_plan(min, merge_max);
        if !seal_buffer && merged.is_empty() {
            return None;
        }
        let rows_after = if seal_buffer { self.vectors.len() } else { 0 }
            + merged.iter().map(|&i| self.segments[i].1.len()).sum::<usize>();
        let dim = self.vectors.dim();
        let segment = {
            let mut rows: Vec<(u32, &[f32])> = Vec::with_capacity(rows_after);
            if seal_buffer {
                rows.extend(self.vectors.rows());
            }
            for &i in &merged {
                rows.extend(self.segments[i].1.members());
            }
            rows.sort_unstable_by_key(|(s, _)| *s);
            Segment::build(&rows, dim, ef_construction, ef_search)
        };
        if seal_buffer {
            let members: Vec<u32> = self.vectors.rows().map(|(s, _)| s).collect();
            for &s in &members {
                self.vectors.remove(s);
                self.mark_sealed(s);
            }
        }
        merged.sort_unstable_by(|a, b| b.cmp(a));
        let replaced: Vec<String> = merged.into_iter().map(|i| self.segments.remove(i).0).collect();
        self.legacy_segments.retain(|name| !replaced.contains(name));
        let bytes = segment.to_bytes(|slot| self.slots[slot as usize].as_ref().map(|m| m.id.clone()));
        // Numbered past every key used so far: a replaced segment's key is deleted in the same
        // commit that writes this one, so it must not be reused.
        let number = self
            .segments
            .iter()
            .map(|(k, _)| k)
            .chain(&replaced)
            .filter_map(|k| k.parse::<u64>().ok())
            .max()
            .map_or(1, |n| n + 1);
        let key = format!("{number:010}");
        self.segments.push((key.clone(), segment));
        Some(Sealed { replaced, key, bytes })
    }

    /// Adds a segment read from the store: its rows matched to this state's slots by id, their
    /// vectors moved out of the buffer.
    pub(super) fn load_segment(&mut self, key: String, bytes: &[u8]) -> Result<(), String> {
        let dim = self.vectors.dim();
        let (by_id, vectors) = (&self.by_id, &mut self.vectors);
        let segment = Segment::from_bytes(bytes, dim, |id| {
            let slot = *by_id.get(id)?;
            Some((slot, vectors.remove(slot)?))
        })?;
        let members: Vec<u32> = self.by_id.values().copied().filter(|&s| segment.contains(s)).collect();
        for slot in members {
            self.mark_sealed(slot);
        }
        self.segments.push((key, segment));
        Ok(())
    }
}

/// What sealing changed in the vector index, for the caller to commit: the segments it replaced
/// and the one it built.
pub(super) struct Sealed {
    pub replaced: Vec<String>,
    pub key: String,
    pub bytes: Vec<u8>,
}
