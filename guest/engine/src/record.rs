//! The stored memory record, how a retained item becomes one, and the invariants between them.

use hindsight_types::settings::{FeedbackSettings, Limits, Settings};
use hindsight_types::time::Timestamp;
use hindsight_types::{
    FailureType, FeedbackOutcome, Kind, Memory, MemoryRecord, Scope, ScopeLevel, Source, Status, UseRecord,
};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A memory as the bank stores it (JSON under `m/<id>`): what the API shows, plus the state the
/// engine keeps for decay and keyword context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub kind: Kind,
    pub content: String,
    pub task_type: Option<String>,
    pub task_description: Option<String>,
    pub context: Option<String>,
    pub tags: Vec<String>,
    pub scope: Scope,
    pub agent_id: Option<String>,
    pub importance: f32,
    pub confidence: f32,
    pub source: Source,
    pub failure_type: Option<FailureType>,
    pub occurred_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub last_accessed_at: Option<Timestamp>,
    pub access_count: u32,
    pub status: Status,
    pub supersedes: Vec<String>,
    pub superseded_by: Option<String>,
    pub valid_until: Option<Timestamp>,
    pub metadata: Vec<(String, String)>,
    pub embedding_model: String,
    /// Active memories that say something different and are kept beside this one, each valid
    /// under its own conditions.
    #[serde(default)]
    pub conflicts_with: Vec<String>,
    /// When `status` last changed (superseded, merged, archived, restored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_changed_at: Option<Timestamp>,
    /// Times the memory was confirmed: retained again as a duplicate, or a success in feedback.
    /// Each lengthens its recency half-life.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reinforcements: u32,
    /// Decay periods already applied by `maintain` since the memory was last used.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decay_periods: u32,
    /// `maintain` has already lowered this never-recalled episode's importance.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub weakened: bool,
    /// The memory retained just before this one in the same call and scope: its sequence
    /// predecessor (a conversation's previous turn). Internal: lends keyword context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// While archived: what it was before (status, and what ageing had done to it), which
    /// `restore` gives back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_from: Option<ArchivedFrom>,
    /// Times cited in a task's answer or reported used.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cited: u32,
    /// Successes fed back on it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub helpful: u32,
    /// Failures and corrections fed back on it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unhelpful: u32,
    /// Times the re-extraction guard caught the agent feeding this memory back as new.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reextracted: u32,
    /// What happened to it after it was written (feedback, citations, corrections), the last
    /// [`MAX_EVENTS`] of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<UseRecord>,
}

/// Use events kept on a record; older ones are dropped (the counters keep counting).
pub const MAX_EVENTS: usize = 50;

/// What an archived memory was before it was archived: everything `maintain` changes on the
/// way, so that a `maintain` at a wrong `now` is undone whole by `restore`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchivedFrom {
    pub status: Status,
    pub confidence: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<f32>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decay_periods: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub weakened: bool,
}

impl ArchivedFrom {
    fn of(before: &Record) -> ArchivedFrom {
        ArchivedFrom {
            status: before.status,
            confidence: before.confidence,
            importance: Some(before.importance),
            decay_periods: before.decay_periods,
            weakened: before.weakened,
        }
    }

    /// Puts `m` back as it was (all but the status, which the caller sets).
    pub fn restore_into(self, m: &mut Record) {
        m.confidence = self.confidence;
        if let Some(importance) = self.importance {
            m.importance = importance;
        }
        m.decay_periods = self.decay_periods;
        m.weakened = self.weakened;
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How a memory ages, from its tags (and a transient failure): constraints hold until replaced,
/// preferences fade slowly, transient facts fast, the rest by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Constraint,
    Preference,
    Transient,
    Plain,
}

pub const TAG_CONSTRAINT: &str = "constraint";
pub const TAG_PREFERENCE: &str = "preference";
pub const TAG_TRANSIENT: &str = "transient";
/// Instruction-like text that did not come from the user (see `defence`): quoted as data in the
/// prompt block, left out by a `trusted_only` recall.
pub const TAG_UNTRUSTED: &str = "untrusted";

impl Record {
    pub fn is_active(&self) -> bool {
        self.status == Status::Active
    }

    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t.eq_ignore_ascii_case(tag))
    }

    pub fn class(&self) -> Class {
        if self.has_tag(TAG_CONSTRAINT) {
            Class::Constraint
        } else if self.has_tag(TAG_TRANSIENT) || self.failure_type == Some(FailureType::Transient) {
            Class::Transient
        } else if self.has_tag(TAG_PREFERENCE) {
            Class::Preference
        } else {
            Class::Plain
        }
    }

    /// When the memory was last used: recalled, confirmed, or else created.
    pub fn last_used(&self) -> Timestamp {
        self.last_accessed_at.unwrap_or(self.created_at).max(self.created_at)
    }

    pub fn set_status(&mut self, status: Status, now: Timestamp) {
        self.status = status;
        self.status_changed_at = Some(now);
        self.updated_at = now;
    }

    /// Archives it, remembering what it was `before` the change that archives it (this run of
    /// `maintain`, or itself), so `restore` can give that back.
    pub fn archive(&mut self, before: &Record, now: Timestamp) {
        if self.status != Status::Archived {
            self.archived_from = Some(ArchivedFrom::of(before));
            self.set_status(Status::Archived, now);
        }
    }

    /// When it was last used, clamped to what can be true: not before it was created, not after
    /// the wall clock (a caller's `now` far in the future must not make it "used" forever).
    /// Times a recall returned it: its uses but for the confirmations (a duplicate retained
    /// again, a success), which count in `access_count` too. Derived, so banks written before
    /// the recall log have it.
    pub fn recalled(&self) -> u32 {
        self.access_count.saturating_sub(self.reinforcements)
    }

    /// Notes an event, dropping the oldest beyond [`MAX_EVENTS`].
    pub fn note(&mut self, event: UseRecord) {
        if self.events.len() >= MAX_EVENTS {
            self.events.remove(0);
        }
        self.events.push(event);
    }

    pub fn touch(&mut self, now: Timestamp) {
        let wall = hindsight_types::time::now().max(self.created_at);
        self.last_accessed_at = Some(now.clamp(self.created_at, wall));
    }

    /// Confirmed once more (retained again, or a success): used now, one more reinforcement
    /// (a longer recency half-life), confidence up by `step` to at most `cap`.
    pub fn reinforce(&mut self, now: Timestamp, step: f32, cap: f32) {
        self.access_count = self.access_count.saturating_add(1);
        self.touch(now);
        self.reinforcements = self.reinforcements.saturating_add(1);
        self.decay_periods = 0;
        if self.confidence < cap {
            self.confidence = (self.confidence + step).min(cap);
        }
        self.updated_at = now;
    }

    /// A verdict's effect: its confidence, and the helpful / unhelpful counts.
    pub fn apply_feedback(&mut self, outcome: FeedbackOutcome, f: &FeedbackSettings, now: Timestamp) {
        match outcome {
            FeedbackOutcome::Success => {
                self.reinforce(now, f.success_step, f.success_cap);
                self.helpful = self.helpful.saturating_add(1);
            }
            FeedbackOutcome::Failure => {
                if self.confidence > f.failure_floor {
                    self.confidence = (self.confidence - f.failure_step).max(f.failure_floor);
                }
                self.unhelpful = self.unhelpful.saturating_add(1);
            }
            FeedbackOutcome::Correction => {
                self.confidence *= f.correction_factor;
                self.unhelpful = self.unhelpful.saturating_add(1);
            }
        }
    }

    /// Recalled `unused_after` times or more, and never cited nor marked helpful.
    pub fn never_useful(&self, unused_after: u32) -> bool {
        self.recalled() >= unused_after && self.cited == 0 && self.helpful == 0
    }

    /// The record as the API shows it (without the engine's own bookkeeping).
    pub fn to_public(&self) -> MemoryRecord {
        MemoryRecord {
            id: self.id.clone(),
            kind: self.kind,
            content: self.content.clone(),
            task_type: self.task_type.clone(),
            task_description: self.task_description.clone(),
            context: self.context.clone(),
            tags: self.tags.clone(),
            scope: self.scope.clone(),
            agent_id: self.agent_id.clone(),
            importance: self.importance,
            confidence: self.confidence,
            source: self.source,
            failure_type: self.failure_type,
            occurred_at: self.occurred_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            last_accessed_at: self.last_accessed_at,
            access_count: self.access_count,
            status: self.status,
            supersedes: self.supersedes.clone(),
            superseded_by: self.superseded_by.clone(),
            valid_until: self.valid_until,
            metadata: self.metadata.clone(),
            embedding_model: self.embedding_model.clone(),
            conflicts_with: self.conflicts_with.clone(),
            reinforcements: self.reinforcements,
        }
    }
}

/// The free-text fields of an item or a record, checked alike for retain and import.
struct Fields<'a> {
    task_type: Option<&'a str>,
    task_description: Option<&'a str>,
    agent_id: Option<&'a str>,
    context: Option<&'a str>,
    tags: &'a [String],
    metadata: &'a [(String, String)],
}

fn check_fields(f: &Fields, limits: &Limits) -> Result<()> {
    for (field, value) in
        [("task_type", f.task_type), ("task_description", f.task_description), ("agent_id", f.agent_id)]
    {
        if let Some(v) = value {
            check_text(field, v, limits.max_field_bytes)?;
        }
    }
    if let Some(context) = f.context {
        if context.len() > limits.max_content_bytes {
            return Err(Error::invalid("context", "is longer than the content limit"));
        }
        serde_json::from_str::<serde_json::Value>(context)
            .map_err(|e| Error::invalid("context", format!("must be JSON text: {e}")))?;
    }
    if f.tags.len() > limits.max_tags {
        return Err(Error::invalid(
            "tags",
            format!("{} tags; the limit is {}", f.tags.len(), limits.max_tags),
        ));
    }
    for (i, tag) in f.tags.iter().enumerate() {
        check_text(&format!("tags[{i}]"), tag.trim(), limits.max_field_bytes)?;
    }
    if f.metadata.len() > limits.max_metadata_pairs {
        return Err(Error::invalid(
            "metadata",
            format!("{} pairs; the limit is {}", f.metadata.len(), limits.max_metadata_pairs),
        ));
    }
    for (key, value) in f.metadata {
        check_text("metadata key", key, limits.max_field_bytes)?;
        if value.len() > limits.max_field_bytes {
            return Err(Error::invalid(
                format!("metadata[{key}]"),
                format!("value is longer than {} bytes", limits.max_field_bytes),
            ));
        }
    }
    Ok(())
}

/// A time after `now` (by more than a day's clock skew) is a typo of the year or a forgery: it
/// would never age.
fn check_not_future(field: &str, at: Timestamp, now: Timestamp) -> Result<()> {
    if at > now.saturating_add(hindsight_types::time::DAY_MS) {
        return Err(Error::invalid(
            field,
            format!(
                "{} is after now ({})",
                hindsight_types::time::format_iso(at),
                hindsight_types::time::format_iso(now)
            ),
        ));
    }
    Ok(())
}

/// Checks a record read from an export before it is stored as it is: its id (the engine's
/// alphabet, so no key or handle syntax), its content and its scores.
pub fn check_imported(m: &Record, settings: &Settings, now: Timestamp) -> Result<()> {
    if !is_memory_id(&m.id) {
        return Err(Error::invalid(
            "id",
            format!("{:?} is not a memory id (1 to 64 of A-Z a-z 0-9 - _)", m.id),
        ));
    }
    let content = m.content.trim();
    if content.is_empty() || content.len() > settings.limits.max_content_bytes {
        return Err(Error::invalid(
            "content",
            format!("must hold 1 to {} bytes", settings.limits.max_content_bytes),
        ));
    }
    unit_interval("importance", Some(m.importance))?;
    unit_interval("confidence", Some(m.confidence))?;
    validate_scope(&m.scope, &settings.limits)?;
    check_fields(
        &Fields {
            task_type: m.task_type.as_deref(),
            task_description: m.task_description.as_deref(),
            agent_id: m.agent_id.as_deref(),
            context: m.context.as_deref(),
            tags: &m.tags,
            metadata: &m.metadata,
        },
        &settings.limits,
    )?;
    for (field, at) in [("occurred_at", Some(m.occurred_at)), ("created_at", Some(m.created_at))]
        .into_iter()
        .chain([("updated_at", Some(m.updated_at)), ("last_accessed_at", m.last_accessed_at)])
        .chain([("status_changed_at", m.status_changed_at)])
    {
        if let Some(at) = at {
            check_not_future(field, at, now)?;
        }
    }
    if let Some(until) = m.valid_until {
        if until <= m.occurred_at {
            return Err(Error::invalid("valid_until", "must be later than the memory's occurred_at time"));
        }
    }
    for (field, ids) in [("supersedes", &m.supersedes), ("conflicts_with", &m.conflicts_with)] {
        if ids.len() > settings.limits.max_tags * 4 {
            return Err(Error::invalid(
                field,
                format!("{} ids; the most is {}", ids.len(), settings.limits.max_tags * 4),
            ));
        }
        if let Some(bad) = ids.iter().find(|id| !is_memory_id(id) || **id == m.id) {
            return Err(Error::invalid(field, format!("{bad:?} is not another memory's id")));
        }
    }
    if let Some(by) = &m.superseded_by {
        if !is_memory_id(by) || *by == m.id {
            return Err(Error::invalid("superseded_by", format!("{by:?} is not another memory's id")));
        }
    }
    let replaced = matches!(m.status, Status::Superseded | Status::Merged);
    if replaced != m.superseded_by.is_some() {
        return Err(Error::invalid(
            "superseded_by",
            format!("a memory {} {} superseded_by", m.status, if replaced { "needs" } else { "has no" }),
        ));
    }
    if m.events.len() > MAX_EVENTS {
        return Err(Error::invalid(
            "events",
            format!("{} events; the most kept is {MAX_EVENTS}", m.events.len()),
        ));
    }
    Ok(())
}

/// The engine's memory ids: 1 to 64 of `A-Z a-z 0-9 - _` (no key or handle syntax).
pub fn is_memory_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks every field of a retained item, then builds its record with the settings' defaults
/// filled in.
pub fn build(
    item: Memory,
    id: String,
    now: Timestamp,
    settings: &Settings,
    model_id: &str,
) -> Result<Record> {
    let limits = &settings.limits;
    let content = item.content.trim().to_string();
    if content.is_empty() {
        return Err(Error::invalid("content", "must not be empty"));
    }
    if content.len() > limits.max_content_bytes {
        return Err(Error::invalid(
            "content",
            format!("is {} bytes; the limit is {} bytes", content.len(), limits.max_content_bytes),
        ));
    }
    check_fields(
        &Fields {
            task_type: item.task_type.as_deref(),
            task_description: item.task_description.as_deref(),
            agent_id: item.agent_id.as_deref(),
            context: item.context.as_deref(),
            tags: &item.tags,
            metadata: &item.metadata,
        },
        limits,
    )?;
    let mut tags = Vec::with_capacity(item.tags.len());
    for tag in &item.tags {
        let tag = tag.trim();
        if !tags.iter().any(|t: &String| t == tag) {
            tags.push(tag.to_string());
        }
    }
    let scope = item.scope.unwrap_or(Scope::GLOBAL);
    validate_scope(&scope, limits)?;
    let source = item.source.unwrap_or(Source::AgentInference);
    let importance = unit_interval("importance", item.importance)?.unwrap_or(settings.defaults.importance);
    let confidence = unit_interval("confidence", item.confidence)?
        .unwrap_or_else(|| settings.defaults.confidence_for(source));
    let occurred_at = item.occurred_at.unwrap_or(now);
    // An event dated after "now" would never age or go stale: a typo of the year, most likely.
    check_not_future("occurred_at", occurred_at, now).map_err(|e| {
        Error::invalid("occurred_at", format!("{}: a memory records what already happened", e.message()))
    })?;
    if let Some(until) = item.valid_until {
        if until <= occurred_at {
            return Err(Error::invalid("valid_until", "must be later than the memory's occurred_at time"));
        }
    }
    Ok(Record {
        id,
        kind: item.kind.unwrap_or(settings.defaults.kind),
        content,
        task_type: item.task_type,
        task_description: item.task_description,
        context: item.context,
        tags,
        scope,
        agent_id: item.agent_id,
        importance,
        confidence,
        source,
        failure_type: item.failure_type,
        occurred_at,
        created_at: now,
        updated_at: now,
        last_accessed_at: None,
        access_count: 0,
        status: Status::Active,
        supersedes: Vec::new(),
        superseded_by: None,
        valid_until: item.valid_until,
        metadata: item.metadata,
        embedding_model: model_id.to_string(),
        conflicts_with: Vec::new(),
        status_changed_at: None,
        reinforcements: 0,
        decay_periods: 0,
        weakened: false,
        follows: None,
        archived_from: None,
        cited: 0,
        helpful: 0,
        unhelpful: 0,
        reextracted: 0,
        events: Vec::new(),
    })
}

fn validate_scope(scope: &Scope, limits: &Limits) -> Result<()> {
    match (&scope.level, &scope.id) {
        (ScopeLevel::Global, Some(_)) => Err(Error::invalid("scope_id", "a global scope takes no id")),
        (ScopeLevel::Project | ScopeLevel::Session, None) => {
            Err(Error::invalid("scope_id", format!("a {} scope needs an id", scope.level)))
        }
        (_, Some(id)) => check_text("scope_id", id, limits.max_field_bytes),
        (ScopeLevel::Global, None) => Ok(()),
    }
}

fn check_text(field: &str, value: &str, max_bytes: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > max_bytes {
        return Err(Error::invalid(field, format!("is longer than {max_bytes} bytes")));
    }
    Ok(())
}

/// A number that must lie in 0..=1 (NaN and infinities rejected).
pub fn unit_interval(field: &str, value: Option<f32>) -> Result<Option<f32>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Ok(Some(v)),
        Some(v) => Err(Error::invalid(field, format!("must be a number from 0 to 1, got {v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(item: Memory) -> Result<Record> {
        super::build(item, "m1".into(), 1_000, &Settings::default(), "model")
    }

    #[test]
    fn defaults_fill_unset_fields() {
        let m = build(Memory::new("  use utf-8-sig  ")).unwrap();
        assert_eq!(m.content, "use utf-8-sig");
        assert_eq!(m.occurred_at, 1_000);
        assert_eq!(m.status, Status::Active);
        assert_eq!(m.scope, Scope::GLOBAL);
        assert_eq!(m.embedding_model, "model");
    }

    #[test]
    fn bad_fields_are_named() {
        let err = build(Memory::new("")).unwrap_err();
        assert_eq!(err, Error::invalid("content", "must not be empty"));
        let err = build(Memory { importance: Some(7.0), ..Memory::new("x") }).unwrap_err();
        assert!(err.message().starts_with("importance:"), "{err}");
        let err = build(Memory { confidence: Some(f32::NAN), ..Memory::new("x") }).unwrap_err();
        assert!(err.message().starts_with("confidence:"), "{err}");
        let err = build(Memory { context: Some("{".into()), ..Memory::new("x") }).unwrap_err();
        assert!(err.message().starts_with("context:"), "{err}");
        let err =
            build(Memory { scope: Some(Scope { level: ScopeLevel::Project, id: None }), ..Memory::new("x") })
                .unwrap_err();
        assert!(err.message().starts_with("scope_id:"), "{err}");
    }
}
