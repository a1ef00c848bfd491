//! The memory record, the item a caller retains, and the invariants between them.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::settings::Settings;

/// Milliseconds since the Unix epoch, UTC.
pub type Timestamp = i64;

pub const DAY_MS: i64 = 86_400_000;

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the kebab-case name; the error lists the accepted names.
            pub fn parse(field: &str, text: &str) -> Result<Self> {
                match text {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::invalid(
                        field,
                        format!(
                            "unknown value {other:?}; expected one of {}",
                            [$($text),+].join(", ")
                        ),
                    )),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

// Tasks name their enums the same way.
pub(crate) use named_enum;

named_enum!(Kind { Episodic = "episodic", Semantic = "semantic", Procedural = "procedural" });
named_enum!(ScopeLevel { Global = "global", Project = "project", Session = "session" });
named_enum!(Source {
    UserExplicit = "user-explicit",
    UserFeedback = "user-feedback",
    AgentInference = "agent-inference",
    ToolResult = "tool-result",
    Imported = "imported",
});
named_enum!(FailureType { Transient = "transient", Permanent = "permanent" });
named_enum!(Status { Active = "active", Superseded = "superseded", Merged = "merged", Archived = "archived" });

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    pub level: ScopeLevel,
    pub id: Option<String>,
}

impl Scope {
    pub const GLOBAL: Scope = Scope { level: ScopeLevel::Global, id: None };

    fn validate(&self, limits: &crate::settings::Limits) -> Result<()> {
        match (&self.level, &self.id) {
            (ScopeLevel::Global, Some(_)) => Err(Error::invalid("scope-id", "a global scope takes no id")),
            (ScopeLevel::Project | ScopeLevel::Session, None) => {
                Err(Error::invalid("scope-id", format!("a {} scope needs an id", self.level)))
            }
            (_, Some(id)) => check_text("scope-id", id, limits.max_field_bytes),
            (ScopeLevel::Global, None) => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
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

impl Memory {
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
}

/// What a caller hands to `retain`: the content and any fields it wants to set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewMemory {
    pub content: String,
    pub kind: Option<Kind>,
    pub task_type: Option<String>,
    pub task_description: Option<String>,
    pub context: Option<String>,
    pub tags: Vec<String>,
    pub scope: Option<Scope>,
    pub agent_id: Option<String>,
    pub importance: Option<f32>,
    pub confidence: Option<f32>,
    pub source: Option<Source>,
    pub failure_type: Option<FailureType>,
    pub occurred_at: Option<Timestamp>,
    pub valid_until: Option<Timestamp>,
    pub metadata: Vec<(String, String)>,
    /// Store as given: no write filter, dedup, merge or conflict check.
    pub force: bool,
    /// Valid beside any memory it conflicts with: both are kept and flagged, none superseded.
    pub parallel: bool,
    /// A precomputed vector from the bank's model; skips embedding.
    #[serde(skip)]
    pub vector: Option<Vec<f32>>,
}

impl NewMemory {
    pub fn text(content: impl Into<String>) -> Self {
        NewMemory { content: content.into(), ..Default::default() }
    }

    /// Checks every field, then builds the record with the settings' defaults filled in.
    pub fn into_memory(
        self,
        id: String,
        now: Timestamp,
        settings: &Settings,
        model_id: &str,
    ) -> Result<Memory> {
        let limits = &settings.limits;
        let content = self.content.trim().to_string();
        if content.is_empty() {
            return Err(Error::invalid("content", "must not be empty"));
        }
        if content.len() > limits.max_content_bytes {
            return Err(Error::invalid(
                "content",
                format!("is {} bytes; the limit is {} bytes", content.len(), limits.max_content_bytes),
            ));
        }
        for (field, value) in [
            ("task-type", &self.task_type),
            ("task-description", &self.task_description),
            ("agent-id", &self.agent_id),
        ] {
            if let Some(v) = value {
                check_text(field, v, limits.max_field_bytes)?;
            }
        }
        if let Some(context) = &self.context {
            if context.len() > limits.max_content_bytes {
                return Err(Error::invalid("context", "is longer than the content limit"));
            }
            serde_json::from_str::<serde_json::Value>(context)
                .map_err(|e| Error::invalid("context", format!("must be JSON text: {e}")))?;
        }
        if self.tags.len() > limits.max_tags {
            return Err(Error::invalid(
                "tags",
                format!("{} tags; the limit is {}", self.tags.len(), limits.max_tags),
            ));
        }
        let mut tags = Vec::with_capacity(self.tags.len());
        for (i, tag) in self.tags.iter().enumerate() {
            let tag = tag.trim();
            check_text(&format!("tags[{i}]"), tag, limits.max_field_bytes)?;
            if !tags.iter().any(|t: &String| t == tag) {
                tags.push(tag.to_string());
            }
        }
        if self.metadata.len() > limits.max_metadata_pairs {
            return Err(Error::invalid(
                "metadata",
                format!("{} pairs; the limit is {}", self.metadata.len(), limits.max_metadata_pairs),
            ));
        }
        for (key, value) in &self.metadata {
            check_text("metadata key", key, limits.max_field_bytes)?;
            if value.len() > limits.max_field_bytes {
                return Err(Error::invalid(
                    format!("metadata[{key}]"),
                    format!("value is longer than {} bytes", limits.max_field_bytes),
                ));
            }
        }
        let scope = self.scope.unwrap_or(Scope::GLOBAL);
        scope.validate(limits)?;
        let source = self.source.unwrap_or(Source::AgentInference);
        let importance =
            unit_interval("importance", self.importance)?.unwrap_or(settings.defaults.importance);
        let confidence = unit_interval("confidence", self.confidence)?
            .unwrap_or_else(|| settings.defaults.confidence_for(source));
        let occurred_at = self.occurred_at.unwrap_or(now);
        if let Some(until) = self.valid_until {
            if until <= occurred_at {
                return Err(Error::invalid(
                    "valid-until",
                    "must be later than the memory's occurred-at time",
                ));
            }
        }
        Ok(Memory {
            id,
            kind: self.kind.unwrap_or(settings.defaults.kind),
            content,
            task_type: self.task_type,
            task_description: self.task_description,
            context: self.context,
            tags,
            scope,
            agent_id: self.agent_id,
            importance,
            confidence,
            source,
            failure_type: self.failure_type,
            occurred_at,
            created_at: now,
            updated_at: now,
            last_accessed_at: None,
            access_count: 0,
            status: Status::Active,
            supersedes: Vec::new(),
            superseded_by: None,
            valid_until: self.valid_until,
            metadata: self.metadata,
            embedding_model: model_id.to_string(),
            conflicts_with: Vec::new(),
            status_changed_at: None,
            reinforcements: 0,
            decay_periods: 0,
            weakened: false,
            follows: None,
        })
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

    fn build(item: NewMemory) -> Result<Memory> {
        item.into_memory("m1".into(), 1_000, &Settings::default(), "model")
    }

    #[test]
    fn defaults_fill_unset_fields() {
        let m = build(NewMemory::text("  use utf-8-sig  ")).unwrap();
        assert_eq!(m.content, "use utf-8-sig");
        assert_eq!(m.occurred_at, 1_000);
        assert_eq!(m.status, Status::Active);
        assert_eq!(m.scope, Scope::GLOBAL);
        assert_eq!(m.embedding_model, "model");
    }

    #[test]
    fn bad_fields_are_named() {
        let err = build(NewMemory::text("")).unwrap_err();
        assert_eq!(err, Error::InvalidInput("content: must not be empty".into()));
        let err = build(NewMemory { importance: Some(7.0), ..NewMemory::text("x") }).unwrap_err();
        assert!(err.message().starts_with("importance:"), "{err}");
        let err = build(NewMemory { confidence: Some(f32::NAN), ..NewMemory::text("x") }).unwrap_err();
        assert!(err.message().starts_with("confidence:"), "{err}");
        let err = build(NewMemory { context: Some("{".into()), ..NewMemory::text("x") }).unwrap_err();
        assert!(err.message().starts_with("context:"), "{err}");
        let err = build(NewMemory {
            scope: Some(Scope { level: ScopeLevel::Project, id: None }),
            ..NewMemory::text("x")
        })
        .unwrap_err();
        assert!(err.message().starts_with("scope-id:"), "{err}");
        let err = Kind::parse("kind", "thought").unwrap_err();
        assert!(err.message().contains("episodic, semantic, procedural"), "{err}");
    }
}
