//! A bank (one agent's or tenant's memories) and a task (its working memory while it works):
//! handles that route every call to the instance serving the bank.

use hindsight_types::{
    Audit, Correction, Distilled, EndTask, Erasure, Explanation, FeedbackOutcome, HealthReport, HistoryEntry,
    ImportReport, ListPage, ListQuery, MaintainReport, Memory, MemoryRecord, NewTask, Query, RecallResult,
    RetainOutcome, Stats, Step, TaskEnd, TaskState, TaskUpdate, Timestamp, Trajectory, Usage,
};

use crate::hindsight::Hindsight;
use crate::runtime::{UsageSlot, Worker};
use crate::wit::{self, WitInto};
use crate::Result;
use hindsight_types::Right;

/// One bank of memories. A cheap handle: clone it, or ask [`Hindsight::bank`] again.
///
/// Time defaults to the wall clock; [`Bank::at`] gives a handle whose calls happen at a fixed
/// time (tests, replaying a conversation).
#[derive(Clone, Debug)]
pub struct Bank {
    hs: Hindsight,
    id: String,
    now: Option<Timestamp>,
    /// What the last metered call through this handle (or a clone) cost.
    usage: UsageSlot,
}

// Here rather than in hindsight.rs: the engine handle knows nothing of the bank handle.
impl Hindsight {
    /// A handle on bank `id` (created on first write). Ids are 1 to 128 characters of
    /// `A-Z a-z 0-9 - _ . :`.
    pub fn bank(&self, id: &str) -> Result<Bank> {
        hindsight_types::validate_bank_id(id)?;
        Ok(Bank::new(self.clone(), id.to_string()))
    }
}

impl Bank {
    fn new(hs: Hindsight, id: String) -> Bank {
        Bank { hs, id, now: None, usage: UsageSlot::default() }
    }

    /// The bank's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The same bank, with every call made at `now` (milliseconds since the epoch) instead of
    /// the wall clock.
    pub fn at(&self, now: Timestamp) -> Bank {
        Bank { now: Some(now), ..self.clone() }
    }

    fn at_maybe(&self, now: Option<Timestamp>) -> Bank {
        Bank { now, ..self.clone() }
    }

    /// Runs `f` on the worker serving this bank, with the bank's id, once the handle's
    /// principal (if any) is found to have `right` on the bank.
    fn call<T: Send + 'static>(
        &self,
        right: Right,
        f: impl FnOnce(&mut Worker, &str) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if let Some(principal) = &self.hs.principal {
            principal.check(right, &self.id)?;
        }
        let id = self.id.clone();
        self.hs.pool.call(&self.id, move |worker| f(worker, &id))
    }

    /// Retains memories (text, or [`Memory`] builders), in one commit; says what became of each:
    /// created, reinforced (a duplicate), merged, superseded (it replaced an older memory it
    /// contradicts) or filtered (not worth keeping).
    pub fn retain<I>(&self, items: I) -> Result<Vec<RetainOutcome>>
    where
        I: IntoIterator,
        I::Item: Into<Memory>,
    {
        // What a principal writes carries its name unless the caller named an agent.
        let agent = self.hs.principal.as_ref().map(|p| p.name().to_string());
        let mut items: Vec<Memory> = items
            .into_iter()
            .map(|m| {
                let mut m: Memory = m.into();
                if m.agent_id.is_none() {
                    m.agent_id = agent.clone();
                }
                m
            })
            .collect();
        self.embed_missing(&mut items)?;
        let items: Vec<wit::types::NewMemory> = items.wit_into();
        let now = self.now;
        let slot = self.usage.clone();
        let outcomes = self.call(Right::Write, move |w, bank| {
            w.with_bank_metered(bank, &slot, |b, s, h| b.call_retain(s, h, &items, now))
        })?;
        Ok(outcomes.wit_into())
    }

    /// Embeds, across the workers, the items that bring no vector, when there are enough to
    /// share out (16 or more) — what [`Bank::retain`] does itself. A caller that may retry a
    /// batch (dropping an item the engine refused) calls it first so the retry does not embed
    /// the batch again. Items the engine would refuse (empty or too long content, more items
    /// than one call takes) are left to it, so it names them as before.
    pub fn embed_missing(&self, items: &mut [Memory]) -> Result<()> {
        let limits = &self.hs.limits;
        if items.len() > limits.max_items_per_retain {
            return Ok(());
        }
        let missing: Vec<usize> = (0..items.len())
            .filter(|&i| {
                let content = items[i].content.trim();
                items[i].vector.is_none() && !content.is_empty() && content.len() <= limits.max_content_bytes
            })
            .collect();
        if missing.len() < crate::hindsight::SPREAD_MIN || self.hs.spread_workers() == 1 {
            return Ok(());
        }
        // Not a principal's embedding work on a bank it may not write.
        if let Some(principal) = &self.hs.principal {
            principal.check(Right::Write, &self.id)?;
        }
        // The engine embeds the trimmed content: so does this.
        let texts: Vec<&str> = missing.iter().map(|&i| items[i].content.trim()).collect();
        let vectors = self.hs.embed_keyed(&texts)?;
        for (i, v) in missing.into_iter().zip(vectors) {
            items[i].vector = Some(v);
        }
        Ok(())
    }

    /// The memories that matter for a query (text, or a [`Query`] with filters), best first,
    /// with each score's breakdown and a prompt block. Recall counts as use.
    pub fn recall(&self, query: impl Into<Query>) -> Result<RecallResult> {
        let mut query: Query = query.into();
        query.now = query.now.or(self.now);
        if query.agent_id.is_none() {
            query.agent_id = self.hs.principal.as_ref().map(|p| p.name().to_string());
        }
        let query: wit::types::RecallQuery = query.wit_into();
        let slot = self.usage.clone();
        Ok(self
            .call(Right::Read, move |w, bank| {
                w.with_bank_metered(bank, &slot, |b, s, h| b.call_recall(s, h, &query))
            })?
            .wit_into())
    }

    /// One memory, whatever its status.
    pub fn get(&self, id: &str) -> Result<MemoryRecord> {
        let id = id.to_string();
        Ok(self
            .call(Right::Read, move |w, bank| w.with_bank(bank, |b, s, h| b.call_get(s, h, &id)))?
            .wit_into())
    }

    /// Forgets a memory softly: archived, never recalled, restorable.
    pub fn forget(&self, id: &str) -> Result<()> {
        let (id, now) = (id.to_string(), self.now);
        self.call(Right::Write, move |w, bank| w.with_bank(bank, |b, s, h| b.call_forget(s, h, &id, now)))
    }

    /// Erases a memory for good, with every copy of its text: the records merged into it, its
    /// text in every task that holds it, its recall-log entries, the copies shared from it into
    /// other banks. The receipt lists what was erased, and what remains and where.
    pub fn forget_hard(&self, id: &str) -> Result<Erasure> {
        let (id, now) = (id.to_string(), self.now);
        let erased = self
            .call(Right::Write, move |w, bank| w.with_bank(bank, |b, s, h| b.call_erase(s, h, &id, now)))?;
        let mut receipt: Erasure = erased.wit_into();
        receipt.remaining.extend(self.hs.pool.runtime().store.erasure_remains());
        Ok(receipt)
    }

    /// Erases every memory `which` lists (of every status, unless it names one), each as
    /// [`Bank::forget_hard`] does, and returns one receipt for them all: a subject's memories
    /// erased by a phrase or a tag. `dry_run` erases nothing: the receipt's `memories` are what
    /// would go (their copies and merged records are found only when erasing).
    pub fn forget_hard_where(&self, which: ListQuery, dry_run: bool) -> Result<Erasure> {
        let mut ids = Vec::new();
        let mut page = ListQuery { any_status: which.status.is_none(), limit: Some(500), ..which };
        loop {
            let listed = self.list(page.clone())?;
            ids.extend(listed.items.into_iter().map(|m| m.id));
            match listed.next_cursor {
                Some(cursor) => page.cursor = Some(cursor),
                None => break,
            }
        }
        let mut receipt = Erasure::default();
        for id in ids {
            let key = format!("{}/{id}", self.id);
            if receipt.memories.contains(&key) {
                continue; // merged into one erased before
            }
            if dry_run {
                receipt.memories.push(key);
                continue;
            }
            let one = self.forget_hard(&id)?;
            for m in one.memories {
                if !receipt.memories.contains(&m) {
                    receipt.memories.push(m);
                }
            }
            receipt.vectors += one.vectors;
            receipt.recall_log_entries += one.recall_log_entries;
            for (all, new) in [(&mut receipt.tasks, one.tasks), (&mut receipt.remaining, one.remaining)] {
                for t in new {
                    if !all.contains(&t) {
                        all.push(t);
                    }
                }
            }
        }
        Ok(receipt)
    }

    /// Deletes the bank whole (every memory, task and recall-log entry) in one commit; returns
    /// how many stored keys went. Acting as a principal, it needs the write right on the bank.
    pub fn delete(&self) -> Result<u32> {
        self.call(Right::Write, move |w, bank| w.with_bank(bank, |b, s, h| b.call_delete_bank(s, h)))
    }

    /// Brings an archived memory back.
    pub fn restore(&self, id: &str) -> Result<MemoryRecord> {
        let (id, now) = (id.to_string(), self.now);
        Ok(self
            .call(Right::Write, move |w, bank| w.with_bank(bank, |b, s, h| b.call_restore(s, h, &id, now)))?
            .wit_into())
    }

    /// Undoes a wrong supersede: the memory is active again, and it and the memory that replaced
    /// it are kept side by side as both holding (so the same pair is not superseded again).
    pub fn unsupersede(&self, id: &str) -> Result<MemoryRecord> {
        let (id, now) = (id.to_string(), self.now);
        Ok(self
            .call(Right::Write, move |w, bank| {
                w.with_bank(bank, |b, s, h| b.call_unsupersede(s, h, &id, now))
            })?
            .wit_into())
    }

    /// Copies memory `id` into bank `to` (a shared space, say) through that bank's write path,
    /// so its duplicate, update and conflict checks apply there; the copy records where it came
    /// from in `metadata.shared_from` (`bank/id`). Needs read on this bank and write on `to`.
    pub fn share(&self, id: &str, to: &str) -> Result<RetainOutcome> {
        hindsight_types::validate_bank_id(to)?;
        if to == self.id {
            return Err(crate::Error::invalid(
                "to",
                format!("{id} is in {to} already: share it into another bank"),
            ));
        }
        let m = self.get(id)?;
        if m.status != hindsight_types::Status::Active {
            return Err(crate::Error::invalid(
                "id",
                format!("{id} is {}: only an active memory is shared", m.status),
            ));
        }
        let target = Bank { id: to.to_string(), ..self.clone() };
        Ok(target.retain([m.shared_copy(&self.id)])?.remove(0))
    }

    /// Counts of the bank's memories.
    pub fn stats(&self) -> Result<Stats> {
        Ok(self.call(Right::Read, |w, bank| w.with_bank(bank, |b, s, h| b.call_stats(s, h)))?.wit_into())
    }

    /// Says how recalled memories worked out; all or none (an unknown id changes nothing).
    pub fn feedback<I, S>(&self, ids: I, outcome: FeedbackOutcome) -> Result<Vec<MemoryRecord>>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let ids: Vec<String> = ids.into_iter().map(Into::into).collect();
        let now = self.now;
        let outcome = outcome.wit_into();
        let memories = self.call(Right::Write, move |w, bank| {
            w.with_bank(bank, |b, s, h| b.call_feedback(s, h, &ids, outcome, now))
        })?;
        Ok(memories.wit_into())
    }

    /// The chain of memories linked to `id` by supersedes and merges, oldest event first.
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEntry>> {
        let id = id.to_string();
        let entries =
            self.call(Right::Read, move |w, bank| w.with_bank(bank, |b, s, h| b.call_history(s, h, &id)))?;
        Ok(entries.wit_into())
    }

    /// Decay, archiving, expiry, late merging and the capacity cap, in one commit.
    pub fn maintain(&self) -> Result<MaintainReport> {
        self.maintain_with(false)
    }

    /// What [`Bank::maintain`] would do now, changing nothing.
    pub fn maintain_dry_run(&self) -> Result<MaintainReport> {
        self.maintain_with(true)
    }

    fn maintain_with(&self, dry_run: bool) -> Result<MaintainReport> {
        let now = self.now;
        let slot = self.usage.clone();
        Ok(self
            .call(Right::Write, move |w, bank| {
                w.with_bank_metered(bank, &slot, |b, s, h| b.call_maintain(s, h, now, dry_run))
            })?
            .wit_into())
    }

    /// Starts a task (a goal, or a [`NewTask`] with its type): its working memory lives in the
    /// store until it ends, and after.
    pub fn begin_task(&self, task: impl Into<NewTask>) -> Result<Task> {
        let mut task: NewTask = task.into();
        // The memories distilled from a principal's task carry its name (unless it named an agent).
        if task.agent_id.is_none() {
            task.agent_id = self.hs.principal.as_ref().map(|p| p.name().to_string());
        }
        let task: wit::types::NewTask = task.wit_into();
        let now = self.now;
        let state: TaskState = self
            .call(Right::Write, move |w, bank| {
                w.with_bank(bank, |b, s, h| b.call_begin_task(s, h, &task, now))
            })?
            .wit_into();
        Ok(Task { bank: self.clone(), id: state.id })
    }

    /// A task by id, to continue it (after a restart too); an error if the bank has no such task.
    pub fn resume_task(&self, id: &str) -> Result<Task> {
        let task = Task { bank: self.clone(), id: id.to_string() };
        task.state()?;
        Ok(task)
    }

    /// Erases task `id`'s record for good.
    pub fn delete_task(&self, id: &str) -> Result<()> {
        let id = id.to_string();
        self.call(Right::Write, move |w, bank| w.with_bank(bank, |b, s, h| b.call_delete_task(s, h, &id)))
    }

    /// The bank's tasks, newest first: the open ones, or all of them.
    pub fn tasks(&self, which: TaskFilter) -> Result<Vec<TaskState>> {
        let include_ended = which == TaskFilter::All;
        let tasks = self.call(Right::Read, move |w, bank| {
            w.with_bank(bank, |b, s, h| b.call_tasks(s, h, include_ended))
        })?;
        Ok(tasks.wit_into())
    }

    /// A page of the bank's memories: by kind, status, tag, task type, source and text, newest
    /// or most recalled first; pass the page's `next_cursor` back for the next.
    pub fn list(&self, query: ListQuery) -> Result<ListPage> {
        let query: wit::types::ListQuery = query.wit_into();
        Ok(self
            .call(Right::Read, move |w, bank| w.with_bank(bank, |b, s, h| b.call_list(s, h, &query)))?
            .wit_into())
    }

    /// The user's correction of memory `id`: a new memory holding `content` (source
    /// user-feedback) supersedes it, and active memories close to its old content lose
    /// confidence (`feedback.correction_cascade_*`). One commit; says every memory it touched.
    /// Acting as a principal, the new memory carries its name.
    pub fn correct(&self, id: &str, content: &str) -> Result<Correction> {
        let (id, content, now) = (id.to_string(), content.to_string(), self.now);
        let agent = self.hs.principal.as_ref().map(|p| p.name().to_string());
        Ok(self
            .call(Right::Write, move |w, bank| {
                w.with_bank(bank, |b, s, h| b.call_correct(s, h, &id, &content, agent.as_deref(), now))
            })?
            .wit_into())
    }

    /// Reports that these memories were used (in task `task_id`, if given): each counts as
    /// cited in the audit. All or none.
    pub fn used<I, S>(&self, ids: I, task_id: Option<&str>) -> Result<Vec<MemoryRecord>>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let ids: Vec<String> = ids.into_iter().map(Into::into).collect();
        let (task, now) = (task_id.map(str::to_string), self.now);
        let memories = self.call(Right::Write, move |w, bank| {
            w.with_bank(bank, |b, s, h| b.call_used(s, h, &ids, task.as_deref(), now))
        })?;
        Ok(memories.wit_into())
    }

    /// Where memory `id` came from (source, the task it was distilled from, the episodes it was
    /// consolidated from, its history), every feedback event, and every recall that returned it.
    pub fn explain(&self, id: &str) -> Result<Explanation> {
        let id = id.to_string();
        Ok(self
            .call(Right::Read, move |w, bank| w.with_bank(bank, |b, s, h| b.call_explain(s, h, &id)))?
            .wit_into())
    }

    /// What the last retain, recall, maintain, consolidate, task end or distillation made
    /// through this handle (or a clone of it) cost: LLM calls and tokens, texts embedded, time
    /// in the engine, and whether `limits.llm_token_budget` stopped an LLM call. None before the
    /// first.
    ///
    /// ```no_run
    /// # fn main() -> hindsight::Result<()> {
    /// let hs = hindsight::Hindsight::builder().memory().no_llm().open()?;
    /// let bank = hs.bank("agent")?;
    /// bank.retain(["The deploy script is blue-green"])?;
    /// let usage = bank.last_usage().expect("a retain was made");
    /// assert_eq!(usage.embed_texts, 1);
    /// # Ok(()) }
    /// ```
    pub fn last_usage(&self) -> Option<Usage> {
        *self.usage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Memories recalled often and never useful, never recalled, and the most useful.
    pub fn audit(&self) -> Result<Audit> {
        Ok(self.call(Right::Read, |w, bank| w.with_bank(bank, |b, s, h| b.call_audit(s, h)))?.wit_into())
    }

    /// What the bank keeps that it should not: duplicates and contradictions left active, stale
    /// memories, the shares never recalled and never used, what the write-time defence caught,
    /// growth per day. Each finding names the memories and the command that fixes it. Changes
    /// nothing.
    pub fn health(&self) -> Result<HealthReport> {
        let now = self.now;
        Ok(self
            .call(Right::Read, move |w, bank| w.with_bank(bank, |b, s, h| b.call_health(s, h, now)))?
            .wit_into())
    }

    /// Writes the bank as JSON lines to `out`, a page at a time (a header naming the format and
    /// the embedding model, then every memory — with its vector when `vectors` says so — task
    /// and recall log entry). Returns the lines written.
    pub fn export(&self, vectors: Vectors, mut out: impl FnMut(&str) -> Result<()>) -> Result<u64> {
        let vectors = vectors == Vectors::Include;
        const PAGE: u32 = 1000;
        let mut cursor: Option<String> = None;
        let mut written = 0u64;
        loop {
            let after = cursor.take();
            let page = self.call(Right::Read, move |w, bank| {
                w.with_bank(bank, |b, s, h| b.call_export_page(s, h, after.as_deref(), PAGE, vectors))
            })?;
            for line in &page.lines {
                out(line)?;
                written += 1;
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(written),
            }
        }
    }

    /// Imports an export (JSON lines) into this bank, which must be empty. The file is read
    /// twice: first every line is checked (nothing stored), so a bad line leaves the bank as it
    /// was; then it goes in a batch per commit. `progress` hears the lines stored so far.
    /// Vectors made by another model are refused unless `reembed` (then every memory is
    /// embedded again here).
    pub fn import<R: std::io::BufRead + std::io::Seek>(
        &self,
        mut lines: R,
        reembed: bool,
        mut progress: impl FnMut(u64),
    ) -> Result<ImportReport> {
        let checked = self.import_pass(&mut lines, reembed, true, |_| {})?;
        lines
            .seek(std::io::SeekFrom::Start(0))
            .map_err(|e| crate::Error::invalid("file", format!("reading it again: {e}")))?;
        // All or nothing: the bank was empty, so a failure part-way (a deadline, the store)
        // deletes what went in, and the import can be run again.
        let mut report = match self.import_pass(&mut lines, reembed, false, &mut progress).and_then(|r| {
            self.reindex()?;
            Ok(r)
        }) {
            Ok(report) => report,
            Err(e) => {
                let rolled_back = self.delete().is_ok();
                return Err(match (rolled_back, e) {
                    (true, crate::Error::InvalidInput(mut f)) => {
                        f.message.push_str(" (nothing was imported: the bank is empty again)");
                        crate::Error::InvalidInput(f)
                    }
                    (_, e) => e,
                });
            }
        };
        report.log_entries = checked.log_entries;
        Ok(report)
    }

    fn import_pass(
        &self,
        lines: impl std::io::BufRead,
        reembed: bool,
        check_only: bool,
        mut progress: impl FnMut(u64),
    ) -> Result<ImportReport> {
        const BATCH: usize = 500;
        let mut report = ImportReport::default();
        let mut batch: Vec<String> = Vec::with_capacity(BATCH);
        let (mut first_line, mut read) = (1u32, 0u64);
        let mut send = |batch: Vec<String>, first_line: u32| -> Result<()> {
            let now = self.now;
            let r: ImportReport = self
                .call(Right::Write, move |w, bank| {
                    w.with_bank(bank, |b, s, h| {
                        b.call_import_lines(s, h, &batch, first_line, reembed, check_only, now)
                    })
                })?
                .wit_into();
            report.memories += r.memories;
            report.embedded += r.embedded;
            report.tasks += r.tasks;
            report.log_entries += r.log_entries;
            Ok(())
        };
        for line in lines.lines() {
            let line =
                line.map_err(|e| crate::Error::invalid(format!("line {}", read + 1), e.to_string()))?;
            batch.push(line);
            read += 1;
            if batch.len() == BATCH {
                send(std::mem::take(&mut batch), first_line)?;
                first_line = read as u32 + 1;
                progress(read);
            }
        }
        if read == 0 {
            return Err(crate::Error::invalid("file", "is empty: expected an export's header line"));
        }
        if !batch.is_empty() {
            send(batch, first_line)?;
            progress(read);
        }
        Ok(report)
    }

    /// Seals the vectors waiting in the exact-scan buffer into an index segment and saves the
    /// keyword index; returns how many were sealed.
    pub fn reindex(&self) -> Result<u32> {
        let now = self.now;
        self.call(Right::Write, move |w, bank| w.with_bank(bank, |b, s, h| b.call_reindex(s, h, now)))
    }

    /// Re-embeds every memory with `to`'s model (another [`Hindsight`] on the same store), in
    /// batches staged beside the bank's vectors — the bank answers with its old model meanwhile,
    /// and a run stopped halfway resumes where it stopped — then switches in one commit and
    /// rebuilds the index with the new model. `progress` hears the memories embedded so far.
    pub fn reembed(&self, to: &Hindsight, mut progress: impl FnMut(u64)) -> Result<u32> {
        const BATCH: u32 = 64;
        let model = to.model_id()?;
        let dimension = to.embed(&["dimension"])?.remove(0).len() as u32;
        let mut done = 0u64;
        loop {
            let m = model.clone();
            let pending = self.call(Right::Write, move |w, bank| {
                w.with_bank(bank, |b, s, h| b.call_reembed_pending(s, h, &m, dimension, BATCH))
            })?;
            if pending.is_empty() {
                break;
            }
            let texts: Vec<&str> = pending.iter().map(|(_, text)| text.as_str()).collect();
            let vectors = to.embed_keyed(&texts)?;
            let staged: Vec<(String, Vec<f32>)> =
                pending.into_iter().map(|(id, _)| id).zip(vectors).collect();
            done += staged.len() as u64;
            let m = model.clone();
            self.call(Right::Write, move |w, bank| {
                w.with_bank(bank, |b, s, h| b.call_stage_vectors(s, h, &m, dimension, &staged))
            })?;
            progress(done);
        }
        let (m, now) = (model.clone(), self.now);
        let switched = self.call(Right::Write, move |w, bank| {
            w.with_bank(bank, |b, s, h| b.call_switch_model(s, h, &m, dimension, now))
        })?;
        // The instance serving the bank holds it with the old model: a fresh one opens it anew
        // (and, with this handle's models, refuses it).
        self.call(Right::Write, |w, _| {
            w.discard();
            Ok(())
        })?;
        let rebuilt =
            Bank { hs: to.clone(), id: self.id.clone(), now: self.now, usage: UsageSlot::default() };
        rebuilt.reindex()?;
        Ok(switched)
    }

    /// Induces semantic memories from the episodes since `since` (all when `None`) with the
    /// language model; an `Llm` error without one.
    pub fn consolidate(&self, since: Option<Timestamp>) -> Result<Vec<Distilled>> {
        let now = self.now;
        let slot = self.usage.clone();
        let items = self.call(Right::Write, move |w, bank| {
            w.with_bank_metered(bank, &slot, |b, s, h| b.call_consolidate(s, h, since, now))
        })?;
        Ok(items.wit_into())
    }
}

impl Bank {
    /// Distils a task told whole (its goal, steps, facts and end) in one call: begun, filled and
    /// ended as [`Task::end`] does; a step or fact that is refused leaves no task behind.
    pub fn distill(&self, trajectory: Trajectory) -> Result<TaskEnd> {
        let (now, may_share) = (self.now, self.hs.may_share());
        let agent_now = now.unwrap_or_else(hindsight_types::time::now);
        let mut trajectory = trajectory;
        if trajectory.agent_id.is_none() {
            trajectory.agent_id = self.hs.principal.as_ref().map(|p| p.name().to_string());
        }
        for step in &mut trajectory.steps {
            step.at.get_or_insert(agent_now);
        }
        let trajectory: wit::types::Trajectory = trajectory.wit_into();
        let slot = self.usage.clone();
        let ended = self.call(Right::Write, move |w, bank| {
            w.with_bank_metered(bank, &slot, |b, s, h| {
                b.call_distill_trajectory(s, h, &trajectory, may_share, now)
            })
        })?;
        Ok(ended.wit_into())
    }
}

/// A task's working memory: a step log, facts, assumptions, open questions and notes, updated as
/// the agent works; [`Task::end`] looks back and keeps what will help next time.
#[derive(Clone, Debug)]
pub struct Task {
    bank: Bank,
    id: String,
}

impl Task {
    /// The task's id in its bank.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Recalls for this task: the prompt block's citation handles are the task's, and when the
    /// task ends, the memories its answer (or the end's detail) cites get its outcome as feedback.
    pub fn recall(&self, query: impl Into<Query>) -> Result<RecallResult> {
        let mut query: Query = query.into();
        query.task_id = Some(self.id.clone());
        self.bank.recall(query)
    }

    /// Its working memory now.
    pub fn state(&self) -> Result<TaskState> {
        let id = self.id.clone();
        Ok(self
            .bank
            .call(Right::Read, move |w, bank| w.with_bank(bank, |b, s, h| b.call_task(s, h, &id)))?
            .wit_into())
    }

    /// Applies an update; with `expected_version`, only if the task is still at that version
    /// (else a `Conflict` error and nothing changes). The same update twice changes nothing.
    pub fn update(&self, update: TaskUpdate, expected_version: Option<u32>) -> Result<TaskState> {
        let id = self.id.clone();
        let now = self.bank.now;
        let update = wit::task_update(update, now.unwrap_or_else(hindsight_types::time::now));
        let state = self.bank.call(Right::Write, move |w, bank| {
            w.with_bank(bank, |b, s, h| b.call_update_task(s, h, &id, &update, expected_version, now))
        })?;
        Ok(state.wit_into())
    }

    /// Logs a step: a thought, a tool call or its result, a user message, the answer.
    pub fn step(&self, step: Step) -> Result<TaskState> {
        self.update(TaskUpdate::Step(step), None)
    }

    /// Records a confirmed fact.
    pub fn fact(&self, text: impl Into<String>) -> Result<TaskState> {
        self.update(TaskUpdate::Fact(text.into()), None)
    }

    /// Records an assumption not yet checked.
    pub fn assume(&self, text: impl Into<String>) -> Result<TaskState> {
        self.update(TaskUpdate::Assumption(text.into()), None)
    }

    /// Records an open question.
    pub fn question(&self, text: impl Into<String>) -> Result<TaskState> {
        self.update(TaskUpdate::Question(text.into()), None)
    }

    /// Records a note.
    pub fn note(&self, text: impl Into<String>) -> Result<TaskState> {
        self.update(TaskUpdate::Note(text.into()), None)
    }

    /// Records what the agent is doing now.
    pub fn current_step(&self, text: impl Into<String>) -> Result<TaskState> {
        self.update(TaskUpdate::CurrentStep(text.into()), None)
    }

    /// Distils the ended task when its distillation was skipped or failed: with the language model
    /// when there is one, by rules when there is none or `how` is [`Distiller::Rules`].
    pub fn distill(&self, how: Distiller) -> Result<TaskEnd> {
        let rules_only = how == Distiller::Rules;
        let (id, now, may_share) = (self.id.clone(), self.bank.now, self.bank.hs.may_share());
        let slot = self.bank.usage.clone();
        let ended = self.bank.call(Right::Write, move |w, bank| {
            w.with_bank_metered(bank, &slot, |b, s, h| {
                b.call_distill_task(s, h, &id, rules_only, may_share, now)
            })
        })?;
        Ok(ended.wit_into())
    }

    /// Ends the task (an [`hindsight_types::Outcome`], or an [`EndTask`] with a detail or
    /// `force`) and, when it is worth it, distils it into memories: with the language model
    /// when there is one, by rules otherwise.
    pub fn end(&self, end: impl Into<EndTask>) -> Result<TaskEnd> {
        let end: EndTask = end.into();
        let (id, now, may_share) = (self.id.clone(), self.bank.now, self.bank.hs.may_share());
        let outcome = end.outcome;
        let wit_outcome = end.outcome.wit_into();
        let slot = self.bank.usage.clone();
        let ended = self.bank.call(Right::Write, move |w, bank| {
            w.with_bank_metered(bank, &slot, |b, s, h| {
                b.call_end_task(s, h, &id, wit_outcome, end.detail.as_deref(), end.force, may_share, now)
            })
        })?;
        let ended: TaskEnd = ended.wit_into();
        self.cited_elsewhere(&ended, outcome);
        Ok(ended)
    }

    /// The memories of other banks the task's answer cites (`bank/id`, recalled with several
    /// banks) get its outcome as feedback in their bank, where this handle may write there.
    fn cited_elsewhere(&self, ended: &TaskEnd, outcome: hindsight_types::Outcome) {
        let verdict = match outcome {
            hindsight_types::Outcome::Success => FeedbackOutcome::Success,
            hindsight_types::Outcome::Failure => FeedbackOutcome::Failure,
            hindsight_types::Outcome::Interrupted => return,
        };
        for cited in &ended.cited {
            let Some((bank, id)) = cited.split_once('/') else { continue };
            if self.bank.hs.principal.as_ref().is_some_and(|p| !p.may(Right::Write, bank)) {
                continue;
            }
            // A memory erased since, or a bank gone: nothing to update, and the task has ended.
            if let Ok(other) = self.bank.hs.bank(bank) {
                let _ = other.at_maybe(self.bank.now).feedback([id.to_string()], verdict);
            }
        }
    }
}

/// Which tasks [`Bank::tasks`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskFilter {
    /// The tasks not ended yet.
    #[default]
    Open,
    /// Every task, ended ones too.
    All,
}

/// Whether [`Bank::export`] writes each memory's embedding: a file without them is a fraction
/// of the size, and an import embeds its memories again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vectors {
    /// The memories without their vectors.
    #[default]
    Omit,
    /// Each memory with its vector.
    Include,
}

/// How [`Task::distill`] distils an ended task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Distiller {
    /// With the language model when there is one, else by rules.
    #[default]
    Auto,
    /// By rules, even with a language model configured.
    Rules,
}
