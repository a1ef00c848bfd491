"""The API's data: what the engine returns, as dataclasses with the WIT's fields in snake_case.

Enums are their WIT names as text (`"procedural"`, `"tool-call"`, `"user-explicit"`); times are
milliseconds since the Unix epoch, UTC.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "Scope", "Memory", "NewMemory", "Score", "Recalled", "RecallResult", "RetainOutcome", "Stats",
    "Usage", "OperationUsage",
    "HistoryEntry", "MaintainStep", "MaintainReport", "Step", "ToolCall", "TaskState", "Distilled",
    "TaskEnd", "LlmUsage", "ListPage", "Cascaded", "Correction", "UseRecord", "RecallHit", "RecallLogEntry",
    "Explanation", "AuditItem", "Audit", "HealthFinding", "DayCount", "HealthReport",
    "MEMORY_KINDS", "SCOPE_LEVELS", "SOURCES", "FAILURE_TYPES", "STATUSES", "FEEDBACK_OUTCOMES",
    "STEP_KINDS", "TASK_OUTCOMES", "LIST_ORDERS",
]

MEMORY_KINDS = ("episodic", "semantic", "procedural")
SCOPE_LEVELS = ("global", "project", "session")
SOURCES = ("user-explicit", "user-feedback", "agent-inference", "tool-result", "imported")
FAILURE_TYPES = ("transient", "permanent")
STATUSES = ("active", "superseded", "merged", "archived")
FEEDBACK_OUTCOMES = ("success", "failure", "correction")
STEP_KINDS = ("thought", "tool-call", "tool-result", "user-message", "answer")
TASK_OUTCOMES = ("success", "failure", "interrupted")
LIST_ORDERS = ("newest", "most-recalled")


class _Data:
    def to_dict(self) -> Dict[str, Any]:
        """Plain data (dicts, lists, text, numbers), e.g. for JSON."""
        return asdict(self)  # type: ignore[call-overload]


@dataclass
class Scope(_Data):
    """Where a memory holds: `global`, or a `project` / `session` with its id."""
    level: str = "global"
    id: Optional[str] = None

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Scope":
        return cls(d["level"], d["id"])


@dataclass
class Memory(_Data):
    """A stored memory and everything the engine says about it."""
    id: str
    kind: str
    content: str
    task_type: Optional[str]
    task_description: Optional[str]
    context: Optional[str]
    tags: List[str]
    scope: Scope
    agent_id: Optional[str]
    importance: float
    confidence: float
    source: str
    failure_type: Optional[str]
    occurred_at: int
    created_at: int
    updated_at: int
    last_accessed_at: Optional[int]
    access_count: int
    status: str
    supersedes: List[str]
    superseded_by: Optional[str]
    valid_until: Optional[int]
    metadata: List[Tuple[str, str]]
    embedding_model: str
    conflicts_with: List[str]
    reinforcements: int

    def meta(self, key: str) -> Optional[str]:
        """The metadata value under `key`."""
        return next((v for k, v in self.metadata if k == key), None)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Memory":
        d = dict(d)
        d["scope"] = Scope._from(d["scope"])
        d["metadata"] = [tuple(p) for p in d["metadata"]]
        return cls(**d)


@dataclass
class NewMemory(_Data):
    """One item to retain (a dict with these keys, or plain text, works too). Unset fields take
    the engine's defaults."""
    content: str
    kind: Optional[str] = None
    task_type: Optional[str] = None
    task_description: Optional[str] = None
    context: Optional[str] = None
    tags: List[str] = field(default_factory=list)
    scope: Optional[Scope] = None
    agent_id: Optional[str] = None
    importance: Optional[float] = None
    confidence: Optional[float] = None
    source: Optional[str] = None
    failure_type: Optional[str] = None
    occurred_at: Optional[int] = None
    valid_until: Optional[int] = None
    metadata: List[Tuple[str, str]] = field(default_factory=list)
    #: Store as given: skip the write filter, dedup, merge and conflict checks.
    force: bool = False
    #: Valid beside any memory it contradicts: both kept, flagged as conflicting.
    parallel: bool = False
    #: The next of a sequence (a conversation's turn), following the item before it.
    sequence: bool = False
    #: A vector made by the bank's embedding model (skips embedding).
    vector: Optional[List[float]] = None


@dataclass
class Score(_Data):
    """Each factor's weighted contribution; `total` is their sum; `similarity` the raw cosine."""
    semantic: float
    lexical: float
    recency: float
    confidence: float
    importance: float
    task_match: float
    source: float
    total: float
    similarity: float


@dataclass
class Recalled(_Data):
    memory: Memory
    score: Score
    #: Active memories that say otherwise.
    conflicting: List[str]
    possibly_stale: bool
    in_prompt: bool
    #: The bank it was recalled from.
    bank: str
    #: Its citation handle in the prompt block (`m1`, `m2`, …): the agent cites `[m1]`.
    handle: Optional[str]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Recalled":
        return cls(Memory._from(d["memory"]), Score(**d["score"]), d["conflicting"], d["possibly_stale"], d["in_prompt"],
                   d["bank"], d["handle"])


@dataclass
class RecallResult(_Data):
    items: List[Recalled]
    #: Ready to put in a prompt; empty when nothing was recalled.
    prompt: str

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "RecallResult":
        return cls([Recalled._from(i) for i in d["items"]], d["prompt"])


@dataclass
class RetainOutcome(_Data):
    """What became of one item: `action` is created, reinforced, merged, superseded or filtered."""
    id: Optional[str]
    action: str
    related: Optional[str]
    reason: str


@dataclass
class Usage(_Data):
    """What one call cost: LLM calls and tokens, texts embedded, time in the engine, and
    whether `limits.llm_token_budget` stopped an LLM call (the rules decided instead)."""
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embed_texts: int = 0
    elapsed_ms: int = 0
    over_budget: bool = False


@dataclass
class OperationUsage(_Data):
    """Running totals of one operation (retain, recall, task_end, distill, consolidate,
    maintain) on a bank."""
    operation: str
    calls: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embed_texts: int = 0
    elapsed_ms: int = 0
    over_budget: int = 0


@dataclass
class Stats(_Data):
    bank: str
    total: int
    active: int
    archived: int
    superseded: int
    merged: int
    active_by_kind: List[Tuple[str, int]]
    embedding_model: str
    dimension: int
    #: Which code computes the model's vectors: "encoder" or "tract".
    inference: str
    sequence: int
    format_version: int
    #: Running totals per operation.
    usage: List[OperationUsage] = field(default_factory=list)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Stats":
        d = dict(d)
        d["active_by_kind"] = [(k["kind"], k["count"]) for k in d["active_by_kind"]]
        d["usage"] = [OperationUsage(**u) for u in d.get("usage", [])]
        return cls(**d)


@dataclass
class HistoryEntry(_Data):
    at: int
    #: created, superseded, merged or archived.
    event: str
    memory: Memory
    #: For superseded and merged: the memory that replaced or absorbed it.
    other: Optional[str]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "HistoryEntry":
        return cls(d["at"], d["event"], Memory._from(d["memory"]), d["other"])


@dataclass
class MaintainStep(_Data):
    id: str
    #: archived or merged.
    action: str
    into: Optional[str]
    reason: str


@dataclass
class MaintainReport(_Data):
    active_before: int
    active_after: int
    decayed: int
    weakened: int
    steps: List[MaintainStep]
    sealed: int

    def count(self, action: str) -> int:
        """How many steps took `action` (archived, merged)."""
        return sum(1 for s in self.steps if s.action == action)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "MaintainReport":
        d = dict(d)
        d["steps"] = [MaintainStep(**s) for s in d["steps"]]
        return cls(**d)


@dataclass
class Step(_Data):
    """One step of a task's log: `kind` is thought, tool-call, tool-result, user-message or
    answer. The same `id` sent twice is one step."""
    kind: str
    text: str
    tool: Optional[str] = None
    error: bool = False
    id: Optional[str] = None
    at: Optional[int] = None


@dataclass
class ToolCall(_Data):
    """A tool call paired with its result."""
    tool: str
    input: str
    result: Optional[str]
    error: bool
    at: int


@dataclass
class TaskState(_Data):
    """A task's working memory."""
    id: str
    goal: str
    task_type: Optional[str]
    #: Bumped by every change; an update made against another version is refused.
    version: int
    started_at: int
    updated_at: int
    confirmed_facts: List[str]
    assumptions: List[str]
    open_questions: List[str]
    notes: List[str]
    current_step: Optional[str]
    tool_calls: List[ToolCall]
    steps: List[Step]
    ended_at: Optional[int]
    outcome: Optional[str]
    detail: Optional[str]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "TaskState":
        d = dict(d)
        d["tool_calls"] = [ToolCall(**t) for t in d["tool_calls"]]
        d["steps"] = [Step(**s) for s in d["steps"]]
        return cls(**d)


@dataclass
class Distilled(_Data):
    """A candidate memory and what became of it (`filtered` when verification dropped it)."""
    content: str
    kind: str
    outcome: RetainOutcome
    #: The bank it was written to: the task's own, or `spaces.shared_bank` for a shared lesson.
    bank: str

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Distilled":
        return cls(d["content"], d["kind"], RetainOutcome(**d["outcome"]), d["bank"])


@dataclass
class TaskEnd(_Data):
    """The ended task and its distillation: `method` is llm, rules or skipped."""
    task: TaskState
    method: str
    reason: str
    items: List[Distilled]
    #: Memories recalled for the task and cited in its answer or detail: they got its outcome as feedback.
    cited: List[str]
    #: Memories recalled for the task and not cited.
    unused: List[str]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "TaskEnd":
        return cls(TaskState._from(d["task"]), d["method"], d["reason"], [Distilled._from(i) for i in d["items"]],
                   d["cited"], d["unused"])


@dataclass
class ListPage(_Data):
    """One page of `list`: pass `next_cursor` back as `cursor` for the next (None after the last)."""
    items: List[Memory]
    next_cursor: Optional[str]
    #: Memories matching the filters (on every page).
    total: int

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "ListPage":
        return cls([Memory._from(m) for m in d["items"]], d["next_cursor"], d["total"])


@dataclass
class Cascaded(_Data):
    """A memory whose confidence a correction lowered."""
    id: str
    before: float
    after: float


@dataclass
class Correction(_Data):
    """What `correct` did."""
    #: The user's replacement (source user-feedback).
    memory: Memory
    #: The memory it replaced, now superseded.
    superseded: str
    #: Active memories close to the old content whose confidence was lowered.
    cascade: List[Cascaded]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Correction":
        return cls(Memory._from(d["memory"]), d["superseded"], [Cascaded(**c) for c in d["cascade"]])


@dataclass
class Erasure(_Data):
    """What a hard forget erased, and what it could not: a receipt."""
    #: Every record erased, as `bank/id`: the one asked for, those merged into it, shared copies.
    memories: List[str]
    #: Their vectors and keyword-index entries.
    vectors: int
    #: Recall-log entries the erased ids were taken out of.
    recall_log_entries: int
    #: Tasks (`bank/task`) whose texts held the memory's text, or whose citations named it.
    tasks: List[str]
    #: Where a trace remains that the engine cannot remove.
    remaining: List[str]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Erasure":
        return cls(list(d["memories"]), int(d["vectors"]), int(d["recall_log_entries"]), list(d["tasks"]),
                   list(d["remaining"]))


@dataclass
class UseRecord(_Data):
    """One thing that happened to a memory after it was written: `event` is feedback, cited,
    recalled-not-used, used, cascade or corrected."""
    at: int
    event: str
    outcome: Optional[str]
    task_id: Optional[str]
    #: The other memory involved (the correction that caused a cascade, the replacement).
    other: Optional[str]


@dataclass
class RecallHit(_Data):
    id: str
    score: float
    #: Its handle, when it was in the prompt block.
    handle: Optional[str]


@dataclass
class RecallLogEntry(_Data):
    """One recall, as the bank's recall log keeps it."""
    seq: int
    at: int
    agent_id: Optional[str]
    task_id: Optional[str]
    #: None when `audit.store_queries` is false.
    query: Optional[str]
    query_hash: str
    hits: List[RecallHit]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "RecallLogEntry":
        return cls(**{**d, "hits": [RecallHit(**h) for h in d["hits"]]})


@dataclass
class Explanation(_Data):
    """Where a memory came from and how it was used."""
    memory: Memory
    #: The task it was distilled from, with its steps, while that task is kept.
    task: Optional[TaskState]
    #: The episodes it was consolidated from.
    consolidated_from: List[str]
    history: List[HistoryEntry]
    #: Feedback, citations, corrections: the last 50.
    events: List[UseRecord]
    #: The recall log's entries that returned it.
    recalls: List[RecallLogEntry]
    recalled: int
    cited: int
    helpful: int
    unhelpful: int

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Explanation":
        return cls(**{**d, "memory": Memory._from(d["memory"]),
                      "task": None if d["task"] is None else TaskState._from(d["task"]),
                      "history": [HistoryEntry._from(h) for h in d["history"]],
                      "events": [UseRecord(**e) for e in d["events"]],
                      "recalls": [RecallLogEntry._from(r) for r in d["recalls"]]})


@dataclass
class AuditItem(_Data):
    id: str
    content: str
    recalled: int
    cited: int
    helpful: int


@dataclass
class Audit(_Data):
    """Memories never useful, never recalled, and the most useful."""
    bank: str
    #: Recalled `audit.unused_after` times or more, never cited nor marked helpful.
    never_useful: List[AuditItem]
    never_recalled: List[AuditItem]
    most_useful: List[AuditItem]
    log_entries: int

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Audit":
        items = {k: [AuditItem(**i) for i in d[k]] for k in ("never_useful", "never_recalled", "most_useful")}
        return cls(**{**d, **items})


@dataclass
class HealthFinding(_Data):
    """One thing the health report found: `kind` duplicate, contradiction or stale; the memories
    it concerns (for a pair, the one the fix acts on first) and the command that fixes it."""
    kind: str
    ids: List[str]
    detail: str
    fix: str


@dataclass
class DayCount(_Data):
    """Memories created on one day (UTC, `YYYY-MM-DD`)."""
    day: str
    created: int


@dataclass
class HealthReport(_Data):
    """What a bank keeps that it should not: duplicates and contradictions left active, stale
    memories, unused shares, untrusted and redacted counts, re-extractions caught, growth."""
    bank: str
    active: int
    #: Active memories compared with their neighbours (the newest 20,000).
    checked: int
    findings: List[HealthFinding]
    never_recalled: int
    never_recalled_share: float
    #: Recalled, but never cited, reported used or marked helpful.
    recalled_unused: int
    recalled_unused_share: float
    untrusted: int
    redacted: int
    #: Recalled text fed back as new, caught by the re-extraction guard.
    reextractions: int
    growth: List[DayCount]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "HealthReport":
        return cls(**{**d, "findings": [HealthFinding(**f) for f in d["findings"]],
                      "growth": [DayCount(**g) for g in d["growth"]]})


@dataclass
class LlmUsage(_Data):
    """Calls, failures and tokens of one LLM operation, summed over the store's life."""
    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
