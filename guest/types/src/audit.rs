//! Looking at what a bank remembers and how it was used: the `list` query and page, a user's
//! correction, `explain`, the recall log and the audit, and the export/import reports.

use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::names::{FeedbackOutcome, HealthKind, Kind, ListOrder, Named, Source, Status, UseEvent};
use crate::records::{HistoryEntry, MemoryRecord, TaskState};
use crate::time::{format_iso, Timestamp};

fn iso<S: Serializer>(at: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_iso(*at))
}

/// Which memories `list` returns, in what order, from where.
///
/// ```
/// use hindsight_types::{Kind, ListQuery};
/// let q = ListQuery::default().kind(Kind::Semantic).text("csv").limit(20);
/// assert_eq!(q.limit, Some(20));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    /// Only this kind.
    pub kind: Option<Kind>,
    /// Only this status; none: active ones. `any_status` lists every status.
    pub status: Option<Status>,
    /// Every status (ignores `status`).
    pub any_status: bool,
    /// Only memories carrying this tag.
    pub tag: Option<String>,
    /// Only this task type.
    pub task_type: Option<String>,
    /// Only this source.
    pub source: Option<Source>,
    /// Only memories whose content contains this text (case-insensitive).
    pub text: Option<String>,
    /// Newest first (the default) or most recalled first.
    pub order: ListOrder,
    /// At most this many (default 50, at most `limits.max_list`).
    pub limit: Option<u32>,
    /// Where the previous page ended (its `next_cursor`).
    pub cursor: Option<String>,
}

impl ListQuery {
    /// Only this kind.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kind = Some(kind);
        self
    }
    /// Only this status.
    pub fn status(mut self, status: Status) -> Self {
        self.status = Some(status);
        self
    }
    /// The status filter a user named: a status, or `any` for every status.
    pub fn status_named(mut self, text: &str) -> Result<Self, FieldError> {
        match text.trim() {
            "any" => self.any_status = true,
            name => {
                let status = Status::parse("status", name)
                    .map_err(|e| FieldError::new("status", format!("{}; or any", e.message)))?;
                self.status = Some(status);
            }
        }
        Ok(self)
    }

    /// Every status.
    pub fn any_status(mut self) -> Self {
        self.any_status = true;
        self
    }
    /// Only memories carrying this tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }
    /// Only memories whose content contains this text.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }
    /// The order.
    pub fn order(mut self, order: ListOrder) -> Self {
        self.order = order;
        self
    }
    /// At most this many.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    /// Continue after the page that returned this cursor.
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

/// One page of `list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListPage {
    /// The memories, in the query's order.
    pub items: Vec<MemoryRecord>,
    /// Pass it as the next query's cursor for the next page; none after the last.
    pub next_cursor: Option<String>,
    /// How many memories match the filters (every page).
    pub total: u32,
}

/// A memory whose confidence a correction lowered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cascaded {
    /// The memory.
    pub id: String,
    /// Its confidence before.
    pub before: f32,
    /// And after.
    pub after: f32,
}

/// What `correct` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Correction {
    /// The user's replacement (source user-feedback).
    pub memory: MemoryRecord,
    /// The memory it replaced, now superseded.
    pub superseded: String,
    /// Active memories close to the old content whose confidence was lowered.
    pub cascade: Vec<Cascaded>,
}

/// One thing that happened to a memory after it was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UseRecord {
    /// When.
    pub at: Timestamp,
    /// What.
    pub event: UseEvent,
    /// The verdict applied, if one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<FeedbackOutcome>,
    /// The task it happened in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The other memory involved (the correction that caused a cascade, the replacement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
}

/// One memory a recall returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallHit {
    /// The memory.
    pub id: String,
    /// Its total score.
    pub score: f32,
    /// Its citation handle in the prompt block (`m3`), when it was in the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

/// One recall, as the bank's recall log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallLogEntry {
    /// Its place in the log (ascending).
    pub seq: u64,
    /// When.
    pub at: Timestamp,
    /// Who recalled: the principal or agent, when the host said.
    pub agent_id: Option<String>,
    /// The task the recall was made for.
    pub task_id: Option<String>,
    /// The query text (none when `audit.store_queries` is false).
    pub query: Option<String>,
    /// A hash of the query text (FNV-1a 64, hex).
    pub query_hash: String,
    /// What it returned, best first.
    pub hits: Vec<RecallHit>,
}

/// Where a memory came from and how it has been used.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The memory now.
    pub memory: MemoryRecord,
    /// The task it was distilled from, with its steps, when that task is still kept.
    pub task: Option<TaskState>,
    /// The episodes it was consolidated from.
    pub consolidated_from: Vec<String>,
    /// What it replaced or absorbed, and what replaced it, oldest first.
    pub history: Vec<HistoryEntry>,
    /// Every feedback, citation and correction event, oldest first.
    pub events: Vec<UseRecord>,
    /// The recall log's entries that returned it, oldest first.
    pub recalls: Vec<RecallLogEntry>,
    /// Times recalled.
    pub recalled: u32,
    /// Times cited in a task's answer or reported used.
    pub cited: u32,
    /// Successes.
    pub helpful: u32,
    /// Failures and corrections.
    pub unhelpful: u32,
}

impl Serialize for Explanation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Counts {
            recalled: u32,
            cited: u32,
            helpful: u32,
            unhelpful: u32,
        }
        #[derive(Serialize)]
        struct Provenance<'a> {
            source: Source,
            agent_id: &'a Option<String>,
            task: &'a Option<TaskState>,
            consolidated_from: &'a [String],
            supersedes: &'a [String],
            superseded_by: &'a Option<String>,
        }
        #[derive(Serialize)]
        struct Recall<'a> {
            #[serde(serialize_with = "iso")]
            at: Timestamp,
            agent_id: &'a Option<String>,
            task_id: &'a Option<String>,
            query: &'a Option<String>,
            rank: usize,
            score: f32,
            handle: &'a Option<String>,
        }
        #[derive(Serialize)]
        struct Event<'a> {
            #[serde(serialize_with = "iso")]
            at: Timestamp,
            event: UseEvent,
            outcome: Option<FeedbackOutcome>,
            task_id: &'a Option<String>,
            other: &'a Option<String>,
        }
        #[derive(Serialize)]
        struct Wire<'a> {
            memory: &'a MemoryRecord,
            provenance: Provenance<'a>,
            history: &'a [HistoryEntry],
            feedback: Vec<Event<'a>>,
            recalls: Vec<Recall<'a>>,
            counts: Counts,
        }
        let m = &self.memory;
        let recalls = self
            .recalls
            .iter()
            .filter_map(|e| {
                let rank = e.hits.iter().position(|h| h.id == m.id)?;
                let hit = &e.hits[rank];
                Some(Recall {
                    at: e.at,
                    agent_id: &e.agent_id,
                    task_id: &e.task_id,
                    query: &e.query,
                    rank: rank + 1,
                    score: hit.score,
                    handle: &hit.handle,
                })
            })
            .collect();
        Wire {
            memory: m,
            provenance: Provenance {
                source: m.source,
                agent_id: &m.agent_id,
                task: &self.task,
                consolidated_from: &self.consolidated_from,
                supersedes: &m.supersedes,
                superseded_by: &m.superseded_by,
            },
            history: &self.history,
            feedback: self
                .events
                .iter()
                .map(|e| Event {
                    at: e.at,
                    event: e.event,
                    outcome: e.outcome,
                    task_id: &e.task_id,
                    other: &e.other,
                })
                .collect(),
            recalls,
            counts: Counts {
                recalled: self.recalled,
                cited: self.cited,
                helpful: self.helpful,
                unhelpful: self.unhelpful,
            },
        }
        .serialize(s)
    }
}

/// A memory as the audit lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditItem {
    /// The memory.
    pub id: String,
    /// Its content.
    pub content: String,
    /// Times recalled.
    pub recalled: u32,
    /// Times cited or reported used.
    pub cited: u32,
    /// Successes.
    pub helpful: u32,
}

/// What a bank's recall log says about its memories.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Audit {
    /// The bank.
    pub bank: String,
    /// Active memories recalled at least `audit.unused_after` times, never cited nor helpful.
    pub never_useful: Vec<AuditItem>,
    /// Active memories never recalled.
    pub never_recalled: Vec<AuditItem>,
    /// The most cited and helpful ones, best first (at most 20).
    pub most_useful: Vec<AuditItem>,
    /// Entries in the recall log.
    pub log_entries: u32,
}

/// One finding of a bank's health report: the memories it concerns, and the command that fixes
/// it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthFinding {
    /// What was found.
    pub kind: HealthKind,
    /// The memories concerned (for a pair, the one the fix acts on first).
    pub ids: Vec<String>,
    /// What is wrong, in words.
    pub detail: String,
    /// The command that fixes it.
    pub fix: String,
}

/// Memories created on one day (UTC).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayCount {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// Memories created that day (any status now).
    pub created: u32,
}

/// What a bank keeps that it should not: duplicates and contradictions left active, stale
/// memories, memories nobody uses, and what the write-time defence caught.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthReport {
    /// The bank.
    pub bank: String,
    /// Active memories.
    pub active: u32,
    /// Active memories compared with their neighbours for duplicates and contradictions (the
    /// newest 20,000).
    pub checked: u32,
    /// Duplicates, contradictions and stale memories, each with its fix.
    pub findings: Vec<HealthFinding>,
    /// Active memories never recalled.
    pub never_recalled: u32,
    /// `never_recalled` over `active` (0 for an empty bank).
    pub never_recalled_share: f32,
    /// Active memories recalled but never cited, reported used or marked helpful.
    pub recalled_unused: u32,
    /// `recalled_unused` over `active`.
    pub recalled_unused_share: f32,
    /// Active memories marked untrusted (instruction-like text from a tool, an import, inference).
    pub untrusted: u32,
    /// Active memories holding a `[redacted:…]` secret.
    pub redacted: u32,
    /// Times the re-extraction guard caught recalled text fed back as new.
    pub reextractions: u32,
    /// Memories created per day, over the last 30 days that created any, oldest first.
    pub growth: Vec<DayCount>,
}

/// One page of a bank's export: JSON lines.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportPage {
    /// The lines (the first page's first line is the header).
    pub lines: Vec<String>,
    /// Pass it back for the next page; none after the last.
    pub next: Option<String>,
}

/// What one `import` call stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    /// Memories.
    pub memories: u32,
    /// Of them, embedded here (the file had no vectors, or they came from another model).
    pub embedded: u32,
    /// Tasks.
    pub tasks: u32,
    /// Recall log entries.
    pub log_entries: u32,
}
