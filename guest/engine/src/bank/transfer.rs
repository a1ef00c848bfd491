//! Moving a bank: export as JSON lines (a header, then every record with its vector when asked,
//! every task, the recall log), import into an empty bank, a page or a batch per call; and
//! changing its embedding model: vectors from the new model are staged beside the old ones
//! (`rv/<id>`, outside the bank's sequence, so the bank keeps answering), then switched in one
//! commit.

use hindsight_types::time::Timestamp;
use hindsight_types::{ExportPage, ImportReport, RecallLogEntry, Status};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{decode_vector, encode_vector, Bank};
use crate::embed::SentenceKeys;
use crate::record::Record;
use crate::store::{scan_all, Op};
use crate::task::Task;
use crate::{Error, Result};

/// The export format's version (the header's `hindsight_export`).
pub const EXPORT_VERSION: u32 = 1;
const REEMBED_KEY: &str = "reembed";

/// An export's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportHeader {
    pub hindsight_export: u32,
    pub bank: String,
    pub format_version: u32,
    pub embedding_model: String,
    pub dimension: usize,
    pub vectors: bool,
    pub memories: u32,
    pub exported_at: Timestamp,
}

/// An import under way on this instance: what its header said, and what it read so far.
#[derive(Debug, Clone)]
pub(super) struct Importing {
    /// The file's vectors are this engine's model's: used as they are.
    use_vectors: bool,
    /// The memories read so far (an id twice in one file is an error), each with the memory
    /// that replaced it, if any: a chain of those must end.
    ids: std::collections::HashMap<String, Option<String>>,
    /// The tasks read so far.
    tasks: std::collections::HashSet<String>,
}

/// One line of an export: exactly one of a memory (with its vector), a task or a recall.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    memory: Option<Value>,
    #[serde(default)]
    vector: Option<String>,
    #[serde(default)]
    task: Option<Value>,
    #[serde(default)]
    recall: Option<Value>,
}

/// The most hits one imported recall log entry may list.
const MAX_LOG_HITS: usize = 1000;

/// A model switch under way: staged vectors cover every record up to `through` (in id order).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Reembedding {
    model: String,
    dimension: usize,
    through: Option<String>,
    /// Memories written behind `through` while the run went on: embedded next.
    #[serde(default)]
    missing: Vec<String>,
}

/// The export's phases, in order: (cursor tag, key prefix under the bank).
const PHASES: [(&str, &str); 3] = [("m", "m/"), ("t", "t/"), ("r", "r/")];

impl Bank {
    /// One page of the bank's export: at most `limit` lines after `cursor` (none: from the
    /// header). With `vectors`, each memory's line carries its vector (base64 of little-endian
    /// f32).
    pub fn export_page(
        &mut self,
        cursor: Option<&str>,
        limit: u32,
        vectors: bool,
        now: Timestamp,
    ) -> Result<ExportPage> {
        self.sync()?;
        if !self.state.has_meta {
            return Err(self.not_found_bank());
        }
        let limit = limit.clamp(1, 10_000);
        let mut lines = Vec::new();
        let (mut phase, mut after) = match cursor {
            None => {
                let header = ExportHeader {
                    hindsight_export: EXPORT_VERSION,
                    bank: self.id.clone(),
                    format_version: self.state.format_version,
                    embedding_model: self.embedder.model_id().to_string(),
                    dimension: self.embedder.dimension(),
                    vectors,
                    memories: self.state.by_id.len() as u32,
                    exported_at: now,
                };
                lines.push(serde_json::to_string(&header).expect("header serialises"));
                (0, None)
            }
            Some(c) => {
                let (tag, key) =
                    c.split_once(':').ok_or_else(|| Error::invalid("cursor", "not an export cursor"))?;
                let phase = PHASES
                    .iter()
                    .position(|(t, _)| *t == tag)
                    .ok_or_else(|| Error::invalid("cursor", "not an export cursor"))?;
                (phase, Some(self.key(&format!("{}{key}", PHASES[phase].1))))
            }
        };
        while phase < PHASES.len() {
            let (tag, rest) = PHASES[phase];
            let prefix = self.key(rest);
            let room = limit as usize - lines.len().min(limit as usize);
            let page = if room == 0 {
                Vec::new()
            } else {
                self.store.scan(&prefix, after.as_deref(), room as u32)?
            };
            let full = page.len() == room;
            for (key, bytes) in page {
                lines.push(self.export_line(tag, &key[prefix.len()..], &bytes, vectors)?);
                after = Some(key);
            }
            if full {
                let key = after.as_deref().map_or("", |k| &k[prefix.len()..]);
                return Ok(ExportPage { lines, next: Some(format!("{tag}:{key}")) });
            }
            phase += 1;
            after = None;
        }
        Ok(ExportPage { lines, next: None })
    }

    fn export_line(&self, tag: &str, name: &str, bytes: &[u8], vectors: bool) -> Result<String> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| Error::Corrupt(format!("bank {}: {tag}/{name}: {e}", self.id)))?;
        let line = match tag {
            "m" => {
                // The vector, then its sentence keys: imported again, it scores as it did here.
                let vector =
                    vectors.then(|| self.state.by_id.get(name).copied()).flatten().and_then(|slot| {
                        let mut bytes = encode_vector(self.state.vector(slot)?);
                        if let Some(keys) = self.state.sentences.get(&slot) {
                            keys.dequantized().iter().for_each(|k| bytes.extend(encode_vector(k)));
                        }
                        Some(base64_encode(&bytes))
                    });
                match vector {
                    Some(v) => json!({"memory": value, "vector": v}),
                    None => json!({"memory": value}),
                }
            }
            "t" => json!({"task": value}),
            _ => json!({"recall": value}),
        };
        Ok(line.to_string())
    }

    /// Imports export lines (`first_line`: the number of the first in its file, for errors). The
    /// first call's first line is the header, and the bank must be empty; vectors made by another
    /// model are refused unless `reembed`, and then embedded here like a file without vectors.
    /// One commit per call. With `check_only` nothing is stored: the lines are read and checked
    /// as an import would, so a host checks a whole file before its first commit and a bad line
    /// never leaves a bank half imported.
    pub fn import_lines(
        &mut self,
        lines: &[String],
        first_line: u32,
        reembed: bool,
        check_only: bool,
        now: Timestamp,
    ) -> Result<ImportReport> {
        self.sync()?;
        let field = |i: usize| format!("line {}", first_line as usize + i);
        // A field error in a line's content, named by the line.
        let at = |i: usize, what: &'static str| {
            move |e: Error| match e {
                Error::InvalidInput(f) => {
                    Error::invalid(field(i), format!("{what}{}: {}", f.field, f.message))
                }
                other => other,
            }
        };
        let mut start = 0;
        if let Some(first) = lines.first() {
            let value: Option<Value> = serde_json::from_str(first).ok();
            if let Some(header) = value.filter(|v| v.get("hindsight_export").is_some()) {
                let header: ExportHeader = serde_json::from_value(header)
                    .map_err(|e| Error::invalid(field(0), format!("export header: {e}")))?;
                self.begin_import(&header, reembed)?;
                start = 1;
            }
        }
        let Some(use_vectors) = self.importing.as_ref().map(|imp| imp.use_vectors) else {
            return Err(Error::invalid(
                field(0),
                "the first line must be the export header (hindsight_export)",
            ));
        };
        let mut report = ImportReport::default();
        let mut ops = Vec::new();
        #[allow(clippy::type_complexity)]
        let mut records: Vec<(Record, Option<(Vec<f32>, Option<SentenceKeys>)>)> = Vec::new();
        let mut log: Vec<RecallLogEntry> = Vec::new();
        for (i, line) in lines.iter().enumerate().skip(start) {
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Line = serde_json::from_str(line)
                .map_err(|e| Error::invalid(field(i), format!("not an export line: {e}")))?;
            match parsed {
                Line { memory: Some(m), task: None, recall: None, vector } => {
                    let record: Record = serde_json::from_value(m)
                        .map_err(|e| Error::invalid(field(i), format!("memory: {e}")))?;
                    crate::record::check_imported(&record, &self.settings, now).map_err(at(i, "memory."))?;
                    self.note_imported(&record).map_err(|e| Error::invalid(field(i), e))?;
                    let vector = match vector {
                        Some(b64) if use_vectors => {
                            let bytes = base64_decode(&b64)
                                .ok_or_else(|| Error::invalid(field(i), "vector: not base64"))?;
                            Some(
                                super::checked_keyed_vector(decode_vector(&bytes), self.embedder.dimension())
                                    .map_err(at(i, ""))?,
                            )
                        }
                        _ => None,
                    };
                    records.push((record, vector));
                }
                Line { task: Some(t), memory: None, recall: None, vector: None } => {
                    let task: Task = serde_json::from_value(t)
                        .map_err(|e| Error::invalid(field(i), format!("task: {e}")))?;
                    task.check_imported(&self.settings.tasks, now).map_err(at(i, "task."))?;
                    let first_time =
                        self.importing.as_mut().is_some_and(|imp| imp.tasks.insert(task.id.clone()));
                    if !first_time {
                        return Err(Error::invalid(field(i), format!("task {} appears twice", task.id)));
                    }
                    ops.push(Op::Put(
                        self.task_key(&task.id),
                        serde_json::to_vec(&task).expect("task serialises"),
                    ));
                    report.tasks += 1;
                }
                Line { recall: Some(r), memory: None, task: None, vector: None } => {
                    let entry: RecallLogEntry = serde_json::from_value(r)
                        .map_err(|e| Error::invalid(field(i), format!("recall: {e}")))?;
                    if entry.hits.len() > MAX_LOG_HITS {
                        return Err(Error::invalid(
                            field(i),
                            format!("recall: {} hits; the most is {MAX_LOG_HITS}", entry.hits.len()),
                        ));
                    }
                    if entry.query.as_ref().is_some_and(|q| q.len() > self.settings.limits.max_query_bytes) {
                        return Err(Error::invalid(
                            field(i),
                            "recall: the query is longer than a query may be",
                        ));
                    }
                    if entry.at > now.saturating_add(hindsight_types::time::DAY_MS) {
                        return Err(Error::invalid(field(i), "recall: its time is after now"));
                    }
                    log.push(entry);
                }
                _ => {
                    return Err(Error::invalid(
                        field(i),
                        "expected one of a memory (with its vector), a task or a recall",
                    ))
                }
            }
        }
        report.log_entries = log.len() as u32;
        if check_only {
            report.memories = records.len() as u32;
            return Ok(report);
        }
        let missing: Vec<usize> = (0..records.len()).filter(|&i| records[i].1.is_none()).collect();
        for chunk in missing.chunks(32) {
            let texts: Vec<&str> = chunk.iter().map(|&i| records[i].0.content.as_str()).collect();
            for (&i, embedded) in chunk.iter().zip(self.embed_stored(&texts)?) {
                records[i].1 = Some(embedded);
            }
        }
        report.embedded = missing.len() as u32;
        let model = self.embedder.model_id().to_string();
        for (mut record, vector) in records {
            let (vector, keys) = vector.expect("embedded above");
            let keys = keys.filter(|_| self.settings.recall.sentence_keys);
            record.embedding_model = model.clone();
            ops.push(self.put_memory(&record));
            ops.push(self.put_vector(&record.id, &vector, keys.as_ref()));
            let slot = self.state.insert(record, &vector);
            self.state.set_sentences(slot, keys);
            self.state.index_lexical(slot, &self.settings.lexical);
            report.memories += 1;
        }
        if !log.is_empty() {
            // Numbered afresh after what this bank's log holds: a file's numbers are not trusted
            // (one far ahead would make the log's pruning walk every number in between), and the
            // oldest beyond `audit.max_entries` are not kept.
            let mut bounds = self.log_bounds()?;
            let max = u64::from(self.settings.audit.max_entries);
            for mut entry in log {
                entry.seq = bounds.next;
                ops.push(Op::Put(
                    self.log_key(entry.seq),
                    serde_json::to_vec(&entry).expect("entry serialises"),
                ));
                bounds.next += 1;
            }
            while bounds.next - bounds.first > max {
                ops.push(Op::Delete(self.log_key(bounds.first)));
                bounds.first += 1;
            }
            ops.push(self.log_bounds_op(&bounds));
        }
        // As a retain does: a buffer past its size is sealed, and the keyword index saved with
        // it (saving it every batch would rewrite a growing snapshot each time); `reindex` at
        // the end saves the rest.
        if self.state.buffer_len() > self.settings.index.buffer_max as usize {
            ops.extend(self.seal_buffer(0, false).0);
            ops.push(self.save_lexical());
        }
        if !ops.is_empty() {
            self.commit_or_reload(ops, now)?;
        }
        Ok(report)
    }

    /// Notes an imported memory: refused when the file holds it twice, or when the memories that
    /// replaced one another loop back to it.
    fn note_imported(&mut self, record: &Record) -> std::result::Result<(), String> {
        let Some(imp) = self.importing.as_mut() else { return Ok(()) };
        if imp.ids.contains_key(&record.id) || self.state.by_id.contains_key(&record.id) {
            return Err(format!("memory {} appears twice", record.id));
        }
        imp.ids.insert(record.id.clone(), record.superseded_by.clone());
        let mut next = record.superseded_by.clone();
        for _ in 0..=imp.ids.len() {
            match next {
                Some(by) if by == record.id => {
                    return Err(format!(
                        "memory {}: the memories that replaced it loop back to it",
                        record.id
                    ))
                }
                Some(by) => next = imp.ids.get(&by).cloned().flatten(),
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// After an import's last line: links to memories the file did not hold are dropped (a memory
    /// whose replacement is missing is active again), so nothing points nowhere.
    pub(super) fn finish_import(&mut self, now: Timestamp) -> Result<Vec<Op>> {
        let Some(imp) = self.importing.take() else { return Ok(Vec::new()) };
        let known = |id: &String| imp.ids.contains_key(id);
        let mut ops = Vec::new();
        for id in imp.ids.keys() {
            let Some(mut m) = self.state.memory(id).cloned() else { continue };
            let before = m.clone();
            m.supersedes.retain(&known);
            m.conflicts_with.retain(&known);
            if m.superseded_by.as_ref().is_some_and(|by| !known(by)) {
                m.superseded_by = None;
                m.set_status(Status::Active, now);
            }
            if m != before {
                ops.push(self.put_memory(&m));
                self.state.update(m);
            }
        }
        Ok(ops)
    }

    fn begin_import(&mut self, header: &ExportHeader, reembed: bool) -> Result<()> {
        if header.hindsight_export > EXPORT_VERSION {
            return Err(Error::Unsupported(format!(
                "export format {} is newer than this engine's ({EXPORT_VERSION}): import it with a newer hindsight",
                header.hindsight_export
            )));
        }
        let (held, tasks) = (self.state.by_id.len(), self.tasks(true)?.len());
        let bounds = self.log_bounds()?;
        if held > 0 || tasks > 0 || bounds.next > bounds.first {
            return Err(Error::invalid(
                "bank",
                format!(
                    "{} holds {held} memories, {tasks} tasks and {} recall log entries: import into an empty bank \
                     (`hindsight bank delete {} --yes` empties this one)",
                    self.id,
                    bounds.next - bounds.first,
                    self.id
                ),
            ));
        }
        let same_model = header.embedding_model == self.embedder.model_id()
            && header.dimension == self.embedder.dimension();
        if header.vectors && !same_model && !reembed {
            return Err(Error::invalid(
                "embedding_model",
                format!(
                    "the file's vectors were made by {} ({} dimensions); this engine has {} ({} dimensions): \
                     import with --reembed to embed every memory again with this one",
                    header.embedding_model,
                    header.dimension,
                    self.embedder.model_id(),
                    self.embedder.dimension()
                ),
            ));
        }
        self.importing = Some(Importing {
            use_vectors: header.vectors && same_model,
            ids: Default::default(),
            tasks: Default::default(),
        });
        Ok(())
    }

    /// Up to `limit` memories (id, content) still to embed with `model` for a switch to it, in
    /// id order; empty when every one has a staged vector.
    pub fn reembed_pending(
        &mut self,
        model: &str,
        dimension: usize,
        limit: u32,
    ) -> Result<Vec<(String, String)>> {
        self.sync()?;
        let run =
            self.reembedding()?.filter(|r| r.model == model && r.dimension == dimension).unwrap_or_default();
        let mut out: Vec<(String, String)> = run
            .missing
            .iter()
            .filter_map(|id| self.state.memory(id))
            .take(limit as usize)
            .map(|m| (m.id.clone(), m.content.clone()))
            .collect();
        let mut next: Vec<&Record> = self
            .state
            .slots
            .iter()
            .flatten()
            .filter(|m| run.through.as_deref().is_none_or(|t| m.id.as_str() > t))
            .collect();
        next.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let room = limit as usize - out.len();
        out.extend(next.into_iter().take(room).map(|m| (m.id.clone(), m.content.clone())));
        Ok(out)
    }

    /// Stores vectors made by `model` for a later switch, beside the bank's own (the bank's
    /// sequence is not bumped: nothing it answers changes).
    pub fn stage_vectors(
        &mut self,
        model: &str,
        dimension: usize,
        vectors: Vec<(String, Vec<f32>)>,
    ) -> Result<()> {
        if model.trim().is_empty() {
            return Err(Error::invalid("model_id", "must not be empty"));
        }
        let mut state = self
            .reembedding()?
            .filter(|r| r.model == model && r.dimension == dimension)
            .unwrap_or(Reembedding { model: model.to_string(), dimension, ..Default::default() });
        let mut ops = Vec::new();
        for (i, (id, v)) in vectors.into_iter().enumerate() {
            let (v, keys) = super::checked_keyed_vector(v, dimension)
                .map_err(|e| Error::invalid(format!("vectors[{i}]"), e.to_string()))?;
            if state.through.as_deref().is_none_or(|t| id.as_str() > t) {
                state.through = Some(id.clone());
            }
            state.missing.retain(|m| *m != id);
            // Staged as `v/` will hold it: the switch copies it over.
            ops.push(Op::Put(self.key(&format!("rv/{id}")), super::encode_stored_vector(&v, keys.as_ref())));
        }
        ops.push(Op::Put(self.key(REEMBED_KEY), serde_json::to_vec(&state).expect("serialises")));
        Ok(self.store.commit(ops)?)
    }

    fn reembedding(&self) -> Result<Option<Reembedding>> {
        match self.store.get(&self.key(REEMBED_KEY))? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("bank {}: reembed state: {e}", self.id))),
        }
    }

    /// Switches the bank to `model` in one commit: every vector replaced by its staged one, the
    /// records and `meta` naming the new model, the old index segments dropped (the new model's
    /// engine rebuilds them: `reindex`). This instance's model no longer opens the bank after.
    /// Returns how many memories were switched.
    pub fn switch_model(&mut self, model: &str, dimension: usize, now: Timestamp) -> Result<u32> {
        self.transact(|bank| {
            if bank.reembedding()?.is_none_or(|r| r.model != model || r.dimension != dimension) {
                return Err(Error::invalid("model_id", format!("no vectors from {model} are staged: run reembed first")));
            }
            let mut staged = std::collections::HashMap::new();
            let prefix = bank.key("rv/");
            scan_all(&*bank.store, &prefix, |key, bytes| {
                staged.insert(key[prefix.len()..].to_string(), bytes);
                Ok(())
            })?;
            let mut ops = Vec::new();
            let mut missing = Vec::new();
            for m in bank.state.slots.iter().flatten() {
                let Some(v) = staged.remove(&m.id) else {
                    missing.push(m.id.clone());
                    continue;
                };
                let mut record = m.clone();
                record.embedding_model = model.to_string();
                ops.push(bank.put_memory(&record));
                ops.push(Op::Put(bank.key(&format!("v/{}", m.id)), v));
                ops.push(Op::Delete(bank.key(&format!("rv/{}", m.id))));
            }
            if !missing.is_empty() {
                // Written behind the run's position: the next run embeds just these.
                let n = missing.len();
                let mut run = bank.reembedding()?.unwrap_or_default();
                run.missing = missing;
                bank.store.commit(vec![Op::Put(bank.key(REEMBED_KEY), serde_json::to_vec(&run).expect("serialises"))])?;
                return Err(Error::Conflict(format!(
                    "{n} memories were written during the reembed and have no vector from {model} yet: run reembed again"
                )));
            }
            for id in staged.keys() {
                ops.push(Op::Delete(bank.key(&format!("rv/{id}"))));
            }
            for (name, _) in &bank.state.segments {
                ops.push(Op::Delete(bank.key(&format!("s/{name}"))));
            }
            let mut meta = bank.stored_meta()?.ok_or_else(|| bank.not_found_bank())?;
            meta.embedding_model = model.to_string();
            meta.dimension = dimension;
            ops.push(bank.put_meta(&meta));
            ops.push(Op::Delete(bank.key(REEMBED_KEY)));
            let switched = bank.state.by_id.len() as u32;
            bank.commit(ops, now)?;
            Ok(switched)
        })
    }

    fn not_found_bank(&self) -> Error {
        Error::not_found("bank", &self.id, format!("bank {} holds nothing", self.id))
    }

    /// Ends an import on this instance, if one was under way: seals every buffered vector into
    /// an index segment and saves the keyword index; returns how many vectors were sealed.
    pub fn reindex(&mut self, now: Timestamp) -> Result<u32> {
        let repaired = self.finish_import(now)?;
        self.transact(|bank| {
            let buffered = bank.state.buffer_len() as u32;
            let mut ops: Vec<Op> = repaired.clone();
            ops.extend(bank.seal_buffer(1, false).0);
            ops.push(bank.save_lexical());
            bank.commit_or_reload(ops, now)?;
            Ok(buffered)
        })
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const INVALID: u8 = 0xff;
    const VALUES: [u8; 256] = {
        let mut table = [INVALID; 256];
        let mut i = 0;
        while i < 64 {
            table[B64[i] as usize] = i as u8;
            i += 1;
        }
        table
    };
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = VALUES[c as usize];
        if v == INVALID {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for n in 0..20u8 {
            let bytes: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(base64_decode(&base64_encode(&bytes)), Some(bytes));
        }
        assert_eq!(base64_encode(b"hi!"), "aGkh");
        assert_eq!(base64_decode("not base64!"), None);
    }
}
