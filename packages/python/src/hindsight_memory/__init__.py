"""hindsight-memory: agent memory as a sandboxed WebAssembly component, for Python.

    from hindsight_memory import Hindsight

    with Hindsight.open(db="memory.db") as hs:
        bank = hs.bank("agent")
        bank.retain(["pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV"])
        for item in bank.recall("garbled headers when reading a CSV", k=3).items:
            print(round(item.score.total, 3), item.memory.content)

The engine (embeddings included) is the component this package carries, run by wasmtime; the
package lends it a SQLite store and, optionally, an OpenAI-compatible language model.
"""

from . import defaults
from ._runtime import Timings
from .client import Bank, Hindsight, Task
from .errors import HindsightError
from .llm import LlmConfig
from .store import SqliteStore
from .types import (Audit, AuditItem, Cascaded, Correction, DayCount, Distilled, Erasure, Explanation, HealthFinding,
                    HealthReport, HistoryEntry, ListPage, LlmUsage,
                    MaintainReport, MaintainStep, Memory, NewMemory, RecallHit, RecallLogEntry, RecallResult,
                    Recalled, RetainOutcome, Scope, Score, Stats, Step, TaskEnd, TaskState, ToolCall, Usage, OperationUsage,
                    UseRecord)

__version__ = "0.2.0"

__all__ = [
    "Hindsight", "Bank", "Task", "HindsightError", "LlmConfig", "SqliteStore", "Timings", "defaults",
    "Memory", "NewMemory", "Scope", "Score", "Recalled", "RecallResult", "RetainOutcome", "Stats",
    "HistoryEntry", "MaintainReport", "MaintainStep", "TaskState", "Step", "ToolCall", "Distilled",
    "TaskEnd", "Erasure", "LlmUsage", "ListPage", "Correction", "Cascaded", "Explanation", "UseRecord", "RecallLogEntry",
    "RecallHit", "Audit", "AuditItem", "HealthFinding", "DayCount", "HealthReport", "Usage", "OperationUsage",
    "__version__",
]
