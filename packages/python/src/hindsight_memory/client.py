"""The API: `Hindsight` (the engine over a store), `Bank` (one agent's memories) and `Task`
(working memory while the agent works)."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import defaults as D
from ._runtime import USAGE_PREFIX, Runtime, Timings
from .errors import HindsightError
from .llm import LlmConfig, OpenAiLlm
from .store import SqliteStore
from .types import (FAILURE_TYPES, FEEDBACK_OUTCOMES, LIST_ORDERS, MEMORY_KINDS, SCOPE_LEVELS, SOURCES, STATUSES,
                    STEP_KINDS, TASK_OUTCOMES, Audit, Correction, Distilled, Erasure, Explanation, HealthReport,
                    HistoryEntry, ListPage, LlmUsage, MaintainReport, Memory, NewMemory, RecallResult, RetainOutcome,
                    Scope, Stats, Step, TaskEnd, TaskState, Usage)

Time = Union[int, float, datetime]
Item = Union[str, Mapping[str, Any], NewMemory]
PathLike = Union[str, Path]

BANK_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def packaged_wasm() -> Path:
    """The component this package carries."""
    return Path(str(resources.files(__package__).joinpath("hindsight.wasm")))


def _ms(value: Optional[Time], field: str) -> Optional[int]:
    """Milliseconds since the epoch, from an int (ms), a float (ms) or a datetime (naive: local)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(round(value.timestamp() * 1000))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise HindsightError.invalid(field, f"{value!r} is not a time (milliseconds since the epoch, or a datetime)")
    return int(value)


def _enum(value: Any, allowed: Sequence[str], field: str, item: Optional[int] = None) -> str:
    text = value.replace("_", "-") if isinstance(value, str) else value
    if text not in allowed:
        raise HindsightError.invalid(field, f"unknown value {value!r}; expected {', '.join(allowed)}", item)
    return text


def _opt_enum(value: Any, allowed: Sequence[str], field: str, item: Optional[int] = None) -> Optional[str]:
    return None if value is None else _enum(value, allowed, field, item)


def _texts(value: Any, field: str, item: Optional[int] = None) -> List[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise HindsightError.invalid(field, "expected a list of text", item)
    out = list(value)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise HindsightError.invalid(f"{field}[{i}]", "expected text", item)
    return out


def _ids(value: Any) -> List[str]:
    """Memory ids: one id, or a list of them."""
    return [value] if isinstance(value, str) else _texts(value, "ids")


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise HindsightError.invalid(field, "expected text")
    return value


def _opt_text(value: Any, field: str, item: Optional[int] = None) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise HindsightError.invalid(field, "expected text", item)
    return value


def _number(value: Any, field: str, item: Optional[int] = None) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HindsightError.invalid(field, f"{value!r} is not a number", item)
    return float(value)


def _count(value: Any, field: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HindsightError.invalid(field, f"{value!r} is not a whole number of at least 0")
    return value


def _vector(value: Any, field: str, item: Optional[int] = None) -> Optional[List[float]]:
    if value is None:
        return None
    try:
        return [float(x) for x in value]
    except (TypeError, ValueError):
        raise HindsightError.invalid(field, "expected a list of numbers", item) from None


def _scope(value: Any, field: str = "scope", item: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """None, "global", a Scope, {"level", "id"} or (level, id)."""
    if value is None:
        return None
    if isinstance(value, Scope):
        level, sid = value.level, value.id
    elif isinstance(value, str):
        level, sid = value, None
    elif isinstance(value, Mapping):
        unknown = set(value) - {"level", "id"}
        if unknown:
            raise HindsightError.invalid(f"{field}.{sorted(unknown)[0]}", "unknown field", item)
        level, sid = value.get("level", "global"), value.get("id")
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        level, sid = value
    else:
        raise HindsightError.invalid(field, "expected a Scope, a level, {'level', 'id'} or (level, id)", item)
    return {"level": _enum(level, SCOPE_LEVELS, f"{field}.level", item), "id": _opt_text(sid, f"{field}.id", item)}


def _metadata(value: Any, item: Optional[int]) -> List[tuple]:
    if value is None:
        return []
    pairs = value.items() if isinstance(value, Mapping) else value
    out = []
    for i, pair in enumerate(pairs):
        try:
            k, v = pair
        except (TypeError, ValueError):
            raise HindsightError.invalid(f"metadata[{i}]", "expected a (key, value) pair", item) from None
        if not isinstance(k, str) or not isinstance(v, str):
            raise HindsightError.invalid(f"metadata[{i}]", "keys and values are text", item)
        out.append((k, v))
    return out


NEW_MEMORY_FIELDS = tuple(NewMemory.__dataclass_fields__)


def _new_memory(item: Item, index: int) -> Dict[str, Any]:
    if isinstance(item, str):
        fields: Dict[str, Any] = {"content": item}
    elif isinstance(item, NewMemory):
        fields = {k: getattr(item, k) for k in NEW_MEMORY_FIELDS}
    elif isinstance(item, Mapping):
        fields = dict(item)
    else:
        raise HindsightError.invalid("item", "expected text, a dict or a NewMemory", index)
    for key in fields:
        if key not in NEW_MEMORY_FIELDS:
            raise HindsightError.invalid(str(key), "unknown field", index)
    if "content" not in fields:
        raise HindsightError.invalid("content", "missing", index)
    g = fields.get
    return {
        "content": _opt_text(g("content"), "content", index) or "",
        "kind": _opt_enum(g("kind"), MEMORY_KINDS, "kind", index),
        "task_type": _opt_text(g("task_type"), "task_type", index),
        "task_description": _opt_text(g("task_description"), "task_description", index),
        "context": g("context") if g("context") is None or isinstance(g("context"), str) else json.dumps(g("context")),
        "tags": _texts(g("tags") or [], "tags", index),
        "scope": _scope(g("scope"), "scope", index),
        "agent_id": _opt_text(g("agent_id"), "agent_id", index),
        "importance": _number(g("importance"), "importance", index),
        "confidence": _number(g("confidence"), "confidence", index),
        "source": _opt_enum(g("source"), SOURCES, "source", index),
        "failure_type": _opt_enum(g("failure_type"), FAILURE_TYPES, "failure_type", index),
        "occurred_at": _ms(g("occurred_at"), "occurred_at"),
        "valid_until": _ms(g("valid_until"), "valid_until"),
        "metadata": _metadata(g("metadata"), index),
        "force": bool(g("force", False)),
        "parallel": bool(g("parallel", False)),
        "sequence": bool(g("sequence", False)),
        "vector": _vector(g("vector"), "vector", index),
    }


RECALL_OPTIONS = ("now", "task_type", "kinds", "tags", "scope", "min_score", "prompt_tokens", "vector",
                  "include_superseded", "agent_id", "task_id", "trusted_only", "as_of")


class Hindsight:
    """The memory engine in its sandbox, over a SQLite file, with an optional language model.

    Open it with :meth:`Hindsight.open` (or the same arguments to the constructor); use it as a
    context manager, or call :meth:`close`. Calls block until the engine answers; one
    `Hindsight` serves one call at a time (threads take turns).
    """

    def __init__(self, db: PathLike, *, models_dir: Optional[PathLike] = None,
                 llm: Union[str, None, LlmConfig] = "env", settings: Optional[Mapping[str, Any]] = None,
                 deadline_s: float = D.CALL_DEADLINE_MS / 1000, memory_limit_bytes: int = D.MEMORY_LIMIT_BYTES,
                 wasm_path: Optional[PathLike] = None, cache_dir: Union[PathLike, None, str] = "default"):
        if memory_limit_bytes < 64 << 20:
            raise HindsightError.invalid("memory_limit_bytes", f"{memory_limit_bytes >> 20} MiB is too small: "
                                         "the engine needs ~160 MiB")
        if llm == "env":
            config: Optional[LlmConfig] = LlmConfig.from_env()
        elif llm is None or isinstance(llm, LlmConfig):
            config = llm
        else:
            raise HindsightError("config", 'llm must be "env", None or an LlmConfig')
        if settings is None:
            settings_json = ""
        elif isinstance(settings, str):
            settings_json = settings
        else:
            settings_json = json.dumps(settings)
        models = Path(models_dir) if models_dir is not None else D.models_dir()
        model_path, tokenizer_path = models / D.MODEL_FILE, models / D.TOKENIZER_FILE
        if not model_path.is_file() or not tokenizer_path.is_file():
            raise HindsightError("model", f"no embedding model in {models}: run `hindsight model fetch` to download it, "
                                 f"or put {D.MODEL_FILE} and {D.TOKENIZER_FILE} there; {D.MODELS_ENV} (or "
                                 "models_dir=) chooses another directory")
        wasm_file = Path(wasm_path) if wasm_path is not None else packaged_wasm()
        try:
            wasm = wasm_file.read_bytes()
        except OSError as e:
            raise HindsightError("config", f"reading the component {wasm_file}: {e}") from None
        if cache_dir == "default":
            cache: Optional[Path] = D.cache_dir() / "python"
        else:
            cache = None if cache_dir is None else Path(cache_dir)
        store = SqliteStore(db)
        try:
            self._rt = Runtime(store=store, llm=OpenAiLlm(config), model=model_path.read_bytes(),
                               tokenizer=tokenizer_path.read_bytes(), settings=settings_json, deadline_s=deadline_s,
                               memory_limit=memory_limit_bytes, wasm=wasm, cache_dir=cache)
        except BaseException:
            store.close()
            raise
        self.db = str(db)
        self.llm = config
        self._closed = False

    @classmethod
    def open(cls, db: PathLike, *, models_dir: Optional[PathLike] = None,
             llm: Union[str, None, LlmConfig] = "env", settings: Optional[Mapping[str, Any]] = None,
             deadline_s: float = D.CALL_DEADLINE_MS / 1000, memory_limit_bytes: int = D.MEMORY_LIMIT_BYTES,
             wasm_path: Optional[PathLike] = None) -> "Hindsight":
        """Opens the SQLite file `db` (created when missing).

        * `models_dir`: the embedding model's directory (default: `HINDSIGHT_MODELS`, else
          `$XDG_CACHE_HOME/hindsight/models`, else `~/.cache/hindsight/models`).
        * `llm`: `"env"` (an OpenAI-compatible endpoint from `HINDSIGHT_LLM_*` when
          `HINDSIGHT_LLM_URL` is set, else none), `None` (rules everywhere) or an `LlmConfig`.
        * `settings`: engine settings as nested dicts, e.g. `{"recall": {"default_k": 3}}`.
        * `deadline_s`: how long one call may run (LLM calls included) before it stops with a
          `trap` error; `memory_limit_bytes`: the instance's memory cap (default 1 GiB).
        * `wasm_path`: another component file than the one this package carries.

        The component is compiled once and cached in `~/.cache/hindsight/python/`; the instance
        starts on the first call (or :meth:`warm_up`).
        """
        return cls(db, models_dir=models_dir, llm=llm, settings=settings, deadline_s=deadline_s,
                   memory_limit_bytes=memory_limit_bytes, wasm_path=wasm_path)

    def __enter__(self) -> "Hindsight":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Hindsight(db={self.db!r}, llm={self.llm!r})"

    def close(self) -> None:
        """Checkpoints the store's write-ahead log (so nothing erased stays beside the file),
        stops the instance and closes the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._rt.lock:
            try:
                self._rt.store.checkpoint()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
            self._rt.close()
            self._rt.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise HindsightError("config", "this Hindsight is closed")

    def _engine(self, method: str, *args: Any) -> Any:
        self._check_open()
        return self._rt.call(lambda inst: inst.engine_call(method, *args))

    def _bank(self, bank: str, method: str, *args: Any) -> Any:
        self._check_open()
        return self._rt.call(lambda inst: inst.bank_call(bank, method, *args))

    def bank(self, bank_id: str) -> "Bank":
        """A handle on bank `bank_id` (created on first write): 1 to 128 characters of
        `A-Z a-z 0-9 - _ . :`."""
        if not isinstance(bank_id, str) or not BANK_ID.match(bank_id):
            raise HindsightError.invalid("bank", f"{bank_id!r}: 1 to 128 characters of A-Z a-z 0-9 - _ . :")
        return Bank(self, bank_id)

    @property
    def model_id(self) -> str:
        """The embedding model's id, as recorded on every memory."""
        return self._engine("model-id")

    def embed(self, texts: Sequence[str]) -> List[List[float]]:
        """Embeds texts with the engine's model (unit-length vectors), inside the sandbox."""
        return self._engine("embed", _texts(texts, "texts"))

    def banks(self) -> List[str]:
        """The ids of the banks in the store, in byte order (the engine lists them)."""
        return list(self._engine("banks"))

    def recall(self, banks: Sequence[str], query: str, k: Optional[int] = None, **options: Any) -> RecallResult:
        """Recalls from several banks as one (private first, then shared ones): ranked together;
        on equal scores the bank listed first wins; each item names its `bank`, and the prompt
        block marks memories from the banks after the first as shared. Options as `Bank.recall`."""
        if isinstance(banks, str) or not banks or not all(isinstance(b, str) and BANK_ID.match(b) for b in banks):
            raise HindsightError.invalid("banks", "must be a non-empty list of bank ids")
        if len(set(banks)) != len(banks):
            raise HindsightError.invalid("banks", "a bank is listed twice")
        q = _recall_query(query, k, options, _ms(options["now"], "now") if options.get("now") is not None else None)
        self._check_open()
        return RecallResult._from(self._rt.call(lambda inst: inst.recall_across(list(banks), q)))

    def llm_usage(self) -> Dict[str, LlmUsage]:
        """LLM calls, failures and tokens by operation, as counted in the store."""
        self._check_open()
        out = {}
        for key, value in self._rt.store.scan(USAGE_PREFIX, None, 1000):
            try:
                d = json.loads(value)
                usage = LlmUsage(**{k: int(d.get(k, 0)) for k in ("calls", "failures", "prompt_tokens", "completion_tokens")})
            except (ValueError, TypeError, AttributeError):
                usage = LlmUsage()
            out[key[len(USAGE_PREFIX):]] = usage
        return out

    def warm_up(self) -> None:
        """Starts the instance now (it loads the model), so the first call does not wait for it."""
        self._check_open()
        self._rt.call(lambda inst: None)

    def reset(self) -> None:
        """Drops the live instance; the next call starts a fresh one from the store."""
        with self._rt.lock:
            self._rt.live = None

    def set_deadline(self, seconds: float) -> None:
        """How long one call may run before it stops with a `trap` error."""
        self._rt.set_deadline(seconds)

    @property
    def timings(self) -> Timings:
        """How long loading the component and the last instantiation took."""
        return self._rt.timings


class Bank:
    """One bank of memories; a cheap handle (ask :meth:`Hindsight.bank` again at will).

    Time is the wall clock unless a call passes `now` (milliseconds since the epoch, or a
    datetime), or the handle comes from :meth:`at`.
    """

    def __init__(self, hs: Hindsight, bank_id: str, now: Optional[int] = None):
        self._hs = hs
        self.id = bank_id
        self._now = now

    def __repr__(self) -> str:
        return f"Bank({self.id!r})"

    def at(self, now: Time) -> "Bank":
        """The same bank, with every call made at `now` instead of the wall clock."""
        return Bank(self._hs, self.id, _ms(now, "now"))

    def _time(self, now: Optional[Time]) -> Optional[int]:
        return self._now if now is None else _ms(now, "now")

    def _call(self, method: str, *args: Any) -> Any:
        return self._hs._bank(self.id, method, *args)

    def retain(self, items: Union[Item, Iterable[Item]], now: Optional[Time] = None) -> List[RetainOutcome]:
        """Retains memories (text, dicts of the WIT `new-memory` fields in snake_case, or
        `NewMemory`s) in one commit; says what became of each: created, reinforced (a duplicate),
        merged, superseded (it replaced an older memory it contradicts) or filtered."""
        if isinstance(items, (str, Mapping, NewMemory)):
            items = [items]
        lowered = [_new_memory(item, i) for i, item in enumerate(items)]
        return [RetainOutcome(**o) for o in self._call("retain", lowered, self._time(now))]

    def recall(self, query: str, k: Optional[int] = None, **options: Any) -> RecallResult:
        """The memories that matter for `query`, best first, with each score's breakdown and a
        prompt block. Options: now, task_type, kinds, tags, scope, min_score, prompt_tokens,
        vector, include_superseded, agent_id (who recalls, for the recall log), task_id (the
        block's citation handles are the task's, and what its answer cites gets its outcome when
        it ends), trusted_only (leave out memories marked untrusted) and as_of (what the bank held
        and believed at that time). Recall counts as use."""
        q = _recall_query(query, k, options, self._time(options.get("now")))
        return RecallResult._from(self._call("recall", q))

    def get(self, memory_id: str) -> Memory:
        """One memory, whatever its status."""
        return Memory._from(self._call("get", memory_id))

    def forget(self, memory_id: str, hard: bool = False, now: Optional[Time] = None) -> Optional[Erasure]:
        """Soft (default): archived, never recalled, restorable. Hard: erased as :meth:`erase`
        does, and the receipt returned."""
        if hard:
            return self.erase(memory_id, now)
        self._call("forget", memory_id, self._time(now))
        return None

    def erase(self, memory_id: str, now: Optional[Time] = None) -> Erasure:
        """Erases a memory for good with every copy of its text: the records merged into it, its
        text in every task that holds it, its recall-log entries and citation handles, and the
        copies shared from it into other banks. The receipt says what was erased and what remains."""
        return Erasure._from(self._call("erase", memory_id, self._time(now)))

    def delete_bank(self) -> int:
        """Deletes the bank whole (memories, vectors, indexes, tasks, recall log) in one commit;
        returns the number of stored keys removed."""
        return int(self._call("delete-bank"))

    def restore(self, memory_id: str, now: Optional[Time] = None) -> Memory:
        """Brings a softly forgotten (archived) memory back, with the status and confidence it had."""
        return Memory._from(self._call("restore", memory_id, self._time(now)))

    def unsupersede(self, memory_id: str, now: Optional[Time] = None) -> Memory:
        """Undoes a wrong supersede: the memory is active again, kept beside the one that replaced
        it as both holding (so the same pair is not superseded again)."""
        return Memory._from(self._call("unsupersede", memory_id, self._time(now)))

    def stats(self) -> Stats:
        """Counts of the bank's memories, and the running usage totals per operation."""
        return Stats._from(self._call("stats"))

    def last_usage(self) -> Usage:
        """What the bank's last retain, recall, task end, distillation, consolidation or
        maintenance cost: LLM calls and tokens, texts embedded, time in the engine, and
        whether the token budget stopped an LLM call."""
        return Usage(**self._call("last-usage"))

    def feedback(self, ids: Union[str, Iterable[str]], outcome: str, now: Optional[Time] = None) -> List[Memory]:
        """Says how recalled memories worked out (`success`, `failure` or `correction`); all or
        none (an unknown id changes nothing). Returns them."""
        result = self._call("feedback", _ids(ids), _enum(outcome, FEEDBACK_OUTCOMES, "outcome"), self._time(now))
        return [Memory._from(m) for m in result]

    def history(self, memory_id: str) -> List[HistoryEntry]:
        """The chain of memories linked to `memory_id` by supersedes and merges, oldest first."""
        return [HistoryEntry._from(e) for e in self._call("history", memory_id)]

    def maintain(self, now: Optional[Time] = None, dry_run: bool = False) -> MaintainReport:
        """Decay, archiving, expiry, late merging and the capacity cap, in one commit; with
        `dry_run`, the report of what it would do, changing nothing."""
        return MaintainReport._from(self._call("maintain", self._time(now), bool(dry_run)))

    def begin_task(self, goal: str, task_type: Optional[str] = None, now: Optional[Time] = None,
                   agent_id: Optional[str] = None) -> "Task":
        """Starts a task: its working memory lives in the store until it ends, and after. The
        memories distilled from it carry `agent_id` (who works on it)."""
        task = {"goal": _text(goal, "goal"), "task_type": _opt_text(task_type, "task_type"),
                "agent_id": _opt_text(agent_id, "agent_id")}
        state = TaskState._from(self._call("begin-task", task, self._time(now)))
        return Task(self, state.id)

    def distill_trajectory(self, goal: str, outcome: str, steps: Iterable[Union[Step, Mapping[str, Any]]] = (),
                           facts: Iterable[str] = (), *, task_type: Optional[str] = None,
                           agent_id: Optional[str] = None, detail: Optional[str] = None, force: bool = False,
                           may_share: bool = True, now: Optional[Time] = None) -> TaskEnd:
        """Distils a task told whole (its goal, steps, facts and outcome) in one call, as
        :meth:`Task.end` does: kept whole or not at all (a refused step leaves no task)."""
        at = self._time(now)
        trajectory = {
            "goal": _text(goal, "goal"),
            "task_type": _opt_text(task_type, "task_type"),
            "agent_id": _opt_text(agent_id, "agent_id"),
            "steps": [_step(s, at) for s in steps],
            "facts": _texts(list(facts), "facts"),
            "outcome": _enum(outcome, TASK_OUTCOMES, "outcome"),
            "detail": _opt_text(detail, "detail"),
            "force": bool(force),
        }
        return TaskEnd._from(self._call("distill-trajectory", trajectory, bool(may_share), at))

    def resume_task(self, task_id: str) -> "Task":
        """A task by id, to continue it (after a restart too); `not-found` if there is none."""
        task = Task(self, task_id)
        task.state()
        return task

    def tasks(self, all: bool = False) -> List[TaskState]:  # noqa: A002 - the issue's name
        """The bank's tasks, newest first; ended ones too with `all=True`."""
        return [TaskState._from(t) for t in self._call("tasks", bool(all))]

    def delete_task(self, task_id: str) -> None:
        """Erases a task's record for good (steps, facts, notes)."""
        self._call("delete-task", task_id)

    def consolidate(self, since: Optional[Time] = None, now: Optional[Time] = None) -> List[Distilled]:
        """Induces semantic memories from the episodes since `since` (all when None) with the
        language model; an `llm` error without one."""
        return [Distilled._from(d) for d in self._call("consolidate", _ms(since, "since"), self._time(now))]

    def list(self, *, kind: Optional[str] = None, status: Optional[str] = None, tag: Optional[str] = None,
             task_type: Optional[str] = None, source: Optional[str] = None, text: Optional[str] = None,
             order: str = "newest", limit: Optional[int] = None, cursor: Optional[str] = None) -> ListPage:
        """A page of memories, newest (or `order="most-recalled"`) first, filtered by kind,
        status (default: active; `"any"`: every status), tag, task type, source and text
        (case-insensitive); `limit` defaults to 50 (at most 1000). Pass the page's `next_cursor`
        as `cursor` for the next page: a write between pages neither shifts nor repeats one."""
        any_status = status == "any"
        return ListPage._from(self._call("list", {
            "kind": _opt_enum(kind, MEMORY_KINDS, "kind"),
            "status": None if any_status else _opt_enum(status, STATUSES, "status"),
            "any_status": any_status,
            "tag": _opt_text(tag, "tag"),
            "task_type": _opt_text(task_type, "task_type"),
            "source": _opt_enum(source, SOURCES, "source"),
            "text": _opt_text(text, "text"),
            "order": _enum(order, LIST_ORDERS, "order"),
            "limit": _count(limit, "limit"),
            "cursor": _opt_text(cursor, "cursor"),
        }))

    def correct(self, memory_id: str, text: str, now: Optional[Time] = None,
                agent_id: Optional[str] = None) -> Correction:
        """The user's correction of a memory, in one commit: a new memory holding `text` (source
        user-feedback) supersedes it, and active memories close to its old content lose
        confidence (`cascade`). `agent_id`: who corrects (none keeps the old memory's agent)."""
        return Correction._from(self._call("correct", memory_id, _text(text, "text"), _opt_text(agent_id, "agent_id"),
                                           self._time(now)))

    def used(self, ids: Union[str, Iterable[str]], task_id: Optional[str] = None,
             now: Optional[Time] = None) -> List[Memory]:
        """Reports that the agent used these memories (in task `task_id`, if given): each counts
        as cited in the audit. All or none. Returns them."""
        result = self._call("used", _ids(ids), _opt_text(task_id, "task_id"), self._time(now))
        return [Memory._from(m) for m in result]

    def explain(self, memory_id: str) -> Explanation:
        """Where a memory came from (the task it was distilled from, the episodes it was
        consolidated from, its history), its feedback and citation events, and every recall
        that returned it."""
        return Explanation._from(self._call("explain", memory_id))

    def audit(self) -> Audit:
        """Memories recalled often and never useful, never recalled, and the most useful."""
        return Audit._from(self._call("audit"))

    def health(self, now: Optional[Time] = None) -> HealthReport:
        """What the bank keeps that it should not: duplicates and contradictions left active,
        stale memories, the shares never recalled and never used, untrusted and redacted counts,
        re-extractions caught, growth per day. Each finding lists the memory ids and the command
        that fixes it. Changes nothing."""
        return HealthReport._from(self._call("health", self._time(now)))


def _step(step: Union[Step, Mapping[str, Any]], now: Optional[int]) -> Dict[str, Any]:
    if isinstance(step, Step):
        d = asdict(step)
    elif isinstance(step, Mapping):
        d = dict(step)
        if "type" in d and "kind" not in d:
            d["kind"] = d.pop("type")
        unknown = set(d) - {"kind", "text", "tool", "error", "id", "at"}
        if unknown:
            raise HindsightError.invalid(f"step.{sorted(unknown)[0]}", "unknown field")
    else:
        raise HindsightError.invalid("step", "expected a Step or a dict")
    if not isinstance(d.get("text"), str):
        raise HindsightError.invalid("step.text", "expected text")
    at = _ms(d.get("at"), "step.at")
    return {
        "id": _opt_text(d.get("id"), "step.id"),
        "at": at if at is not None else (now if now is not None else _wall_ms()),
        "kind": _enum(d.get("kind"), STEP_KINDS, "step.kind"),
        "text": d["text"],
        "tool": _opt_text(d.get("tool"), "step.tool"),
        "error": bool(d.get("error", False)),
    }


def _wall_ms() -> int:
    return int(time.time() * 1000)


UPDATES = {"step": "step", "fact": "fact", "assumption": "assumption", "question": "question", "note": "note",
           "current_step": "current-step"}


class Task:
    """A task's working memory: a step log, facts, assumptions, open questions and notes,
    updated as the agent works; :meth:`end` looks back and keeps what will help next time."""

    def __init__(self, bank: Bank, task_id: str):
        self.bank = bank
        self.id = task_id

    def __repr__(self) -> str:
        return f"Task({self.id!r}, bank={self.bank.id!r})"

    def state(self) -> TaskState:
        """Its working memory now."""
        return TaskState._from(self.bank._call("task", self.id))

    def recall(self, query: str, k: Optional[int] = None, **options: Any) -> RecallResult:
        """Recalls for this task (`Bank.recall` with its `task_id`): the memories its answer cites
        by handle (`[m1]`) get the task's outcome when it ends."""
        return self.bank.recall(query, k, **{**options, "task_id": self.id})

    def update(self, *, step: Union[Step, Mapping[str, Any], None] = None, fact: Optional[str] = None,
               assumption: Optional[str] = None, question: Optional[str] = None, note: Optional[str] = None,
               current_step: Optional[str] = None, expected_version: Optional[int] = None,
               now: Optional[Time] = None) -> TaskState:
        """Applies one update (exactly one of the keywords); with `expected_version`, only if the
        task is still at that version (else a `conflict` error and nothing changes). The same
        update twice changes nothing."""
        given = {k: v for k, v in (("step", step), ("fact", fact), ("assumption", assumption),
                                   ("question", question), ("note", note), ("current_step", current_step))
                 if v is not None}
        if len(given) != 1:
            raise HindsightError.invalid("update", "give exactly one of step, fact, assumption, question, note, current_step")
        (key, value), = given.items()
        at = self.bank._time(now)
        if key == "step":
            payload: Any = _step(value, at)
        elif not isinstance(value, str):
            raise HindsightError.invalid(key, "expected text")
        else:
            payload = value
        version = _count(expected_version, "expected_version")
        return TaskState._from(self.bank._call("update-task", self.id, (UPDATES[key], payload), version, at))

    def step(self, type: str, text: str, tool: Optional[str] = None, error: bool = False,  # noqa: A002
             step_id: Optional[str] = None, *, expected_version: Optional[int] = None) -> TaskState:
        """Logs a step: `type` is thought, tool-call, tool-result, user-message or answer. The same
        `step_id` twice (a retried request) is one step; without one every step is recorded."""
        return self.update(step={"kind": type, "text": text, "tool": tool, "error": error, "id": step_id},
                           expected_version=expected_version)

    def fact(self, text: str, *, expected_version: Optional[int] = None) -> TaskState:
        """Records a confirmed fact."""
        return self.update(fact=text, expected_version=expected_version)

    def assume(self, text: str, *, expected_version: Optional[int] = None) -> TaskState:
        """Records an assumption not yet checked."""
        return self.update(assumption=text, expected_version=expected_version)

    def question(self, text: str, *, expected_version: Optional[int] = None) -> TaskState:
        """Records an open question."""
        return self.update(question=text, expected_version=expected_version)

    def note(self, text: str, *, expected_version: Optional[int] = None) -> TaskState:
        """Records a note."""
        return self.update(note=text, expected_version=expected_version)

    def current_step(self, text: str, *, expected_version: Optional[int] = None) -> TaskState:
        """Records what the agent is doing now."""
        return self.update(current_step=text, expected_version=expected_version)

    def end(self, outcome: str, detail: Optional[str] = None, force: bool = False,
            now: Optional[Time] = None) -> TaskEnd:
        """Ends the task (`success`, `failure` or `interrupted`) and, when it is worth it (or
        `force`), distils it into memories: with the language model when there is one, by rules
        otherwise. The memories recalled for it that its answer or `detail` cites get the outcome
        as feedback (`cited`); the rest are `unused`."""
        return TaskEnd._from(self.bank._call("end-task", self.id, _enum(outcome, TASK_OUTCOMES, "outcome"),
                                             _opt_text(detail, "detail"), bool(force), True, self.bank._time(now)))

    def distill(self, rules_only: bool = False, now: Optional[Time] = None) -> TaskEnd:
        """Distils the ended task when its distillation was skipped or failed: with the language
        model when there is one, by rules when there is none or `rules_only`."""
        return TaskEnd._from(self.bank._call("distill-task", self.id, bool(rules_only), True, self.bank._time(now)))


def _recall_query(query: str, k: Optional[int], options: Mapping[str, Any], now: Optional[int]) -> Dict[str, Any]:
    """The WIT `recall-query`, every option checked and named when wrong."""
    unknown = sorted(set(options) - set(RECALL_OPTIONS))
    if unknown:
        raise HindsightError.invalid(unknown[0], f"unknown recall option (expected one of {', '.join(RECALL_OPTIONS)})")
    kinds = options.get("kinds") or []
    if isinstance(kinds, str):
        kinds = [kinds]
    return {
        "query": _text(query, "query"),
        "k": _count(k, "k"),
        "now": now,
        "task_type": _opt_text(options.get("task_type"), "task_type"),
        "kinds": [_enum(x, MEMORY_KINDS, "kinds") for x in kinds],
        "tags": _texts(options.get("tags") or [], "tags"),
        "scope": _scope(options.get("scope")),
        "min_score": _number(options.get("min_score"), "min_score"),
        "prompt_tokens": _count(options.get("prompt_tokens"), "prompt_tokens"),
        "vector": _vector(options.get("vector"), "vector"),
        "include_superseded": bool(options.get("include_superseded", False)),
        "agent_id": _opt_text(options.get("agent_id"), "agent_id"),
        "task_id": _opt_text(options.get("task_id"), "task_id"),
        "trusted_only": bool(options.get("trusted_only", False)),
        "as_of": _ms(options.get("as_of"), "as_of"),
    }
