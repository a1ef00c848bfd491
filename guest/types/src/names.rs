//! Every closed set of names the engine speaks (kinds, sources, statuses, …), each with its one
//! spelling: the serde form, the CLI's and the MCP tools' values, and what `parse` accepts.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// A closed set of names, each spelled once.
pub trait Named: Sized + Copy + 'static {
    /// Every value, in declaration order.
    const ALL: &'static [Self];
    /// The value's kebab-case name.
    fn as_str(self) -> &'static str;

    /// The value named `text` (surrounding whitespace ignored); the error names `field` and lists
    /// the accepted names.
    fn parse(field: &str, text: &str) -> Result<Self, FieldError> {
        let text = text.trim();
        Self::ALL.iter().copied().find(|v| v.as_str() == text).ok_or_else(|| {
            FieldError::new(field, format!("unknown value {text:?}; expected one of {}", Self::names()))
        })
    }

    /// The accepted names, comma-separated.
    fn names() -> String {
        Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
    }
}

macro_rules! named {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl Named for $name {
            const ALL: &'static [$name] = &[$($name::$variant),+];

            fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named!(
    /// What kind of memory it is.
    Kind {
        /// Something that happened: a task run, an observation, a turn of a conversation.
        Episodic = "episodic",
        /// A fact or a preference that holds beyond one episode.
        Semantic = "semantic",
        /// How to do something: steps, parameters, a fix that worked.
        Procedural = "procedural",
    }
);

named!(
    /// How widely a memory applies.
    ScopeLevel {
        /// Everywhere.
        Global = "global",
        /// One project (the scope's id).
        Project = "project",
        /// One session (the scope's id).
        Session = "session",
    }
);

named!(
    /// Who said it: the user's word outranks the agent's inference.
    Source {
        /// The user stated it.
        UserExplicit = "user-explicit",
        /// The user's feedback or correction.
        UserFeedback = "user-feedback",
        /// The agent concluded it.
        AgentInference = "agent-inference",
        /// A tool returned it.
        ToolResult = "tool-result",
        /// Brought in from elsewhere.
        Imported = "imported",
    }
);

named!(
    /// Whether a recorded failure may pass.
    FailureType {
        /// Timeouts, rate limits, network: may work next time.
        Transient = "transient",
        /// Removed API, wrong approach: will not work next time.
        Permanent = "permanent",
    }
);

named!(
    /// Where a memory stands.
    Status {
        /// Recalled.
        Active = "active",
        /// Replaced by a newer memory (`superseded_by`).
        Superseded = "superseded",
        /// Absorbed into another memory (`superseded_by`).
        Merged = "merged",
        /// Forgotten softly or aged out: kept, restorable, never recalled.
        Archived = "archived",
    }
);

named!(
    /// What a retained item became.
    #[non_exhaustive]
    RetainAction {
        /// A new memory (`related`: one it conflicts with and stands beside, if any).
        Created = "created",
        /// A duplicate: the existing memory `id` was reinforced; nothing new stored.
        Reinforced = "reinforced",
        /// Close to the existing memory `id`, which absorbed it; `related` is the item's own
        /// record, kept with status merged.
        Merged = "merged",
        /// A new memory `id` that replaced `related` (the reason lists every one replaced).
        Superseded = "superseded",
        /// Dropped by the write filter; the reason says why (`force` stores it anyway).
        Filtered = "filtered",
    }
);

named!(
    /// A caller's verdict on recalled memories.
    FeedbackOutcome {
        /// It helped: used now, confidence up, slower to fade.
        Success = "success",
        /// Following it failed: confidence down.
        Failure = "failure",
        /// The user corrected it: confidence halved.
        Correction = "correction",
    }
);

named!(
    /// An event in a memory's history.
    #[non_exhaustive]
    HistoryEvent {
        /// It was written.
        Created = "created",
        /// Replaced by `other`.
        Superseded = "superseded",
        /// Absorbed into `other`.
        Merged = "merged",
        /// Forgotten softly or aged out.
        Archived = "archived",
    }
);

named!(
    /// What `maintain` did to a memory.
    #[non_exhaustive]
    MaintainAction {
        /// Archived (stale, low confidence, expired or over capacity).
        Archived = "archived",
        /// Merged into a near-duplicate.
        Merged = "merged",
    }
);

named!(
    /// What the health report found about a bank's active memories.
    #[non_exhaustive]
    HealthKind {
        /// Two memories that say the same thing.
        Duplicate = "duplicate",
        /// Two memories that say different things about the same matter, both still believed.
        Contradiction = "contradiction",
        /// Memories `maintain` would archive: expired, low confidence, never recalled or used.
        Stale = "stale",
    }
);

named!(
    /// One entry of a task's step log.
    StepKind {
        /// The agent's reasoning.
        Thought = "thought",
        /// A tool was called.
        ToolCall = "tool-call",
        /// What a tool returned.
        ToolResult = "tool-result",
        /// What the user said.
        UserMessage = "user-message",
        /// The agent's final answer.
        Answer = "answer",
    }
);

named!(
    /// How a task ended.
    Outcome {
        /// It did what it set out to do.
        Success = "success",
        /// It did not.
        Failure = "failure",
        /// It stopped before the end.
        Interrupted = "interrupted",
    }
);

named!(
    /// How a task's memories were made.
    #[non_exhaustive]
    DistillMethod {
        /// One LLM call with a JSON schema, then verification.
        Llm = "llm",
        /// No LLM: from the task's facts, failing tool calls and final answer.
        Rules = "rules",
        /// Not worth distilling: the reason says why.
        Skipped = "skipped",
    }
);

named!(
    /// What kind of failure an error is: one name for the engine, every host, the CLI's
    /// `--json` errors and the MCP tools.
    #[non_exhaustive]
    ErrorKind {
        /// A field of the input is wrong.
        InvalidInput = "invalid-input",
        /// No such memory, task, bank or file.
        NotFound = "not-found",
        /// The principal acting has no right to do this to the bank.
        Denied = "denied",
        /// The store failed.
        Store = "store",
        /// The embedding model is missing, unreadable or failed.
        Model = "model",
        /// A configured size limit was exceeded.
        Limit = "limit",
        /// Stored data could not be read back.
        Corrupt = "corrupt",
        /// The language model was needed and is unavailable, failed, or answered unusably.
        Llm = "llm",
        /// Another writer changed it first; nothing was changed.
        Conflict = "conflict",
        /// The stored data was written by a newer version.
        Unsupported = "unsupported",
        /// The component stopped (deadline, memory cap, a bug); the next call starts afresh.
        Trap = "trap",
        /// The host is configured wrongly.
        Config = "config",
    }
);

impl ErrorKind {
    /// How a message of this kind starts, in words (`invalid input: …`).
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::NotFound => "not found",
            ErrorKind::Denied => "denied",
            ErrorKind::Store => "store error",
            ErrorKind::Model => "model error",
            ErrorKind::Limit => "limit exceeded",
            ErrorKind::Corrupt => "corrupt data",
            ErrorKind::Llm => "language model error",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Trap => "the component stopped",
            ErrorKind::Config => "configuration error",
        }
    }
}

/// An error that says what kind it is: the engine's and every host's, so a server (the MCP
/// tools, the CLI's `--json`) reports them alike.
pub trait Failure: std::fmt::Display {
    /// Its kind.
    fn kind(&self) -> ErrorKind;
    /// The message without its kind; for an invalid input, `field: problem`.
    fn message(&self) -> String;
}

named!(
    /// What an LLM call is for; hosts may route each to its own model.
    #[non_exhaustive]
    LlmOperation {
        /// Distilling a finished task into memories.
        Extract = "extract",
        /// Scoring whether an item is worth keeping.
        Importance = "importance",
        /// Inducing facts from recent episodes.
        Consolidate = "consolidate",
        /// Judging new memories against the nearest ones the bank holds: update, duplicate,
        /// compatible, or a conflict where both hold.
        Judge = "judge",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse("kind", k.as_str()).unwrap(), *k);
            assert_eq!(serde_json::to_string(k).unwrap(), format!("\"{}\"", k.as_str()));
        }
        assert_eq!(Source::parse("source", " tool-result ").unwrap(), Source::ToolResult);
        let err = Kind::parse("kind", "thought").unwrap_err();
        assert_eq!(err.field, "kind");
        assert!(err.message.contains("episodic, semantic, procedural"), "{err}");
    }
}

named!(
    /// The order `list` returns memories in.
    #[derive(Default)]
    ListOrder {
        /// Newest first (by creation time).
        #[default]
        Newest = "newest",
        /// Most recalled first.
        MostRecalled = "most-recalled",
    }
);

named!(
    /// Something that happened to a memory after it was written, as `explain` lists it.
    #[non_exhaustive]
    UseEvent {
        /// A verdict from the caller (`feedback`).
        Feedback = "feedback",
        /// Cited in a task's final answer (the task's outcome applied to it).
        Cited = "cited",
        /// Recalled for a task that ended without citing it.
        RecalledNotUsed = "recalled-not-used",
        /// Reported as used by the host or agent (`feedback --used`).
        Used = "used",
        /// Lowered because the user corrected a memory close to it.
        Cascade = "cascade",
        /// Replaced by the user's correction.
        Corrected = "corrected",
    }
);
