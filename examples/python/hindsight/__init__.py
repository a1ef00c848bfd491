"""hindsight in Python: the component the Rust host builds, run by wasmtime-py.

    from hindsight import Hindsight
    with Hindsight("memory.db") as hs:
        bank = hs.bank("agent")
        bank.retain(["Large JSON logs parse with ijson streaming"])
        for item in bank.recall("parse a huge JSON log", k=3).items:
            print(item.score.total, item.memory.content)
"""

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Union

from wasmtime import Config, Engine as WasmEngine, Store as WasmStore, WasiConfig, WasmtimeError
from wasmtime.component import Component, Linker, Variant

from . import _wit
from ._wit import Obj, lift, record
from .llm import LlmConfig, LlmFailed, LlmUnavailable, OpenAiLlm
from .store import Conflict, SqliteStore

__all__ = ["Hindsight", "Bank", "HindsightError", "LlmConfig", "Obj"]

WIT_VERSION = "0.2.0"
ENGINE_INTERFACE = f"hindsight:memory/api@{WIT_VERSION}"
ERROR_TAGS = {"invalid-input", "not-found", "store", "model", "limit", "corrupt", "llm", "conflict", "unsupported"}
REPO = Path(__file__).resolve().parents[3]
EPOCH_TICK_S = 0.01


class HindsightError(Exception):
    """An error the engine returned (`kind` is the WIT variant: invalid-input, not-found, …), or
    `trap` when the component trapped (the next call starts a fresh instance from the store). For
    invalid-input, `field` names the field and `item` the batch index (when there was a batch)."""

    def __init__(self, kind: str, message: str, item: Optional[int] = None, field: Optional[str] = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.item = item
        self.field = field

    @classmethod
    def from_wit(cls, tag: str, payload: Any) -> "HindsightError":
        if tag == "invalid-input" and not isinstance(payload, str):
            item = getattr(payload, "item", None)
            field = getattr(payload, "field")
            where = "" if item is None else f"items[{item}]."
            return cls(tag, f"{where}{field}: {getattr(payload, 'message')}", item=item, field=field)
        return cls(tag, payload)


def default_wasm() -> Path:
    env = os.environ.get("HINDSIGHT_WASM")
    if env:
        return Path(env)
    return REPO / "guest" / "component" / "hindsight.wasm"


def default_models() -> Path:
    env = os.environ.get("HINDSIGHT_MODELS")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hindsight" / "models"


def _compiled(engine: WasmEngine, wasm: Path) -> Component:
    """The component, compiled once per (file, wasmtime version) and cached like the Rust host."""
    data = wasm.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:32]
    # deserialize_file checks that the artifact suits this engine (wasmtime version, settings).
    cache = default_models().parent / "python" / f"{digest}-epoch.cwasm"
    if cache.exists():
        try:
            return Component.deserialize_file(engine, str(cache))
        except WasmtimeError:
            cache.unlink()  # made by another wasmtime build: compile again
    component = Component(engine, data)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_bytes(bytes(component.serialize()))
    tmp.replace(cache)
    return component


class Hindsight:
    """One component instance over one SQLite file; banks share it."""

    def __init__(self, db_path: Union[str, Path], *, models_dir: Optional[Path] = None,
                 wasm_path: Optional[Path] = None, llm: Union[LlmConfig, None, str] = "env",
                 settings: str = "", call_deadline_s: float = 120.0,
                 memory_limit_bytes: int = 4 << 30):
        self.store = SqliteStore(str(db_path))
        self.llm = OpenAiLlm(LlmConfig.from_env() if llm == "env" else llm)  # type: ignore[arg-type]
        models = Path(models_dir) if models_dir else default_models()
        self._model = (models / "model.onnx").read_bytes()
        self._tokenizer = (models / "tokenizer.json").read_bytes()
        self._settings = settings
        self.set_call_deadline(call_deadline_s)
        self._memory_limit = memory_limit_bytes
        config = Config()
        config.epoch_interruption = True  # the per-call deadline, as in the Rust host
        self._wasm_engine = WasmEngine(config)
        self._ticking = True
        threading.Thread(target=self._tick, name="hindsight-epoch", daemon=True).start()
        self._component = _compiled(self._wasm_engine, Path(wasm_path) if wasm_path else default_wasm())
        self._linker = self._make_linker()
        self._instance: Any = None
        self._banks: Dict[str, Any] = {}

    def __enter__(self) -> "Hindsight":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._ticking = False
        self.store.close()

    def set_call_deadline(self, seconds: float) -> None:
        """How long one call may run before it traps."""
        self._deadline_ticks = max(1, int(seconds / EPOCH_TICK_S))

    def _tick(self) -> None:
        while self._ticking:
            time.sleep(EPOCH_TICK_S)
            self._wasm_engine.increment_epoch()

    # -- the imports ---------------------------------------------------------------------------

    def _make_linker(self) -> Linker:
        linker = Linker(self._wasm_engine)
        linker.add_wasip2()
        store = self.store

        def get(_: Any, key: str) -> Any:
            try:
                return store.get(key)
            except Exception as e:  # noqa: BLE001 - the guest gets the message as its error
                return Variant("failed", f"get {key!r}: {e}")

        def scan(_: Any, prefix: str, start_after: Optional[str], limit: int) -> Any:
            try:
                return store.scan(prefix, start_after, limit)
            except Exception as e:  # noqa: BLE001 - the guest gets the message as its error
                return Variant("failed", f"scan {prefix!r}: {e}")

        def commit(_: Any, ops: List[Variant]) -> Optional[Variant]:
            try:
                store.commit([(op.tag, op.payload) for op in ops])
                return None
            except Conflict as e:
                return Variant("conflict", str(e))
            except Exception as e:  # noqa: BLE001 - the guest gets the message as its error
                return Variant("failed", f"commit: {e}")

        def complete(_: Any, request: Any) -> Any:
            try:
                text, prompt_tokens, completion_tokens = self.llm.complete(
                    request.operation, request.system, request.prompt, getattr(request, "json-schema"),
                    getattr(request, "max-tokens"), request.temperature)
            except LlmUnavailable as e:
                return Variant("unavailable", str(e))
            except LlmFailed as e:
                return Variant("failed", str(e))
            return record({"text": text, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})

        with linker.root() as root:
            with root.add_instance(f"hindsight:memory/store@{WIT_VERSION}") as s:
                s.add_func("get", get)
                s.add_func("scan", scan)
                s.add_func("commit", commit)
            with root.add_instance(f"hindsight:memory/llm@{WIT_VERSION}") as i:
                i.add_func("complete", complete)
        return linker

    # -- calling the component -----------------------------------------------------------------

    def _instantiate(self) -> None:
        self._wasm_store = WasmStore(self._wasm_engine)
        self._wasm_store.set_wasi(WasiConfig())  # no preopened directories, no environment
        self._wasm_store.set_limits(memory_size=self._memory_limit)
        self._wasm_store.set_epoch_deadline(self._deadline_ticks)
        instance = self._linker.instantiate(self._wasm_store, self._component)
        interface = instance.get_export_index(self._wasm_store, ENGINE_INTERFACE)
        self._funcs: Dict[str, Any] = {}

        def func(name: str) -> Any:
            if name not in self._funcs:
                index = instance.get_export_index(self._wasm_store, name, interface)
                if index is None:
                    raise HindsightError("invalid-input", f"the component has no function {name}")
                self._funcs[name] = instance.get_func(self._wasm_store, index)
            return self._funcs[name]

        self._func = func
        self._instance = instance
        self._banks = {}
        self._engine = self._checked(func("[static]engine.create"), self._model, self._tokenizer, self._settings)

    def _checked(self, f: Any, *args: Any) -> Any:
        self._wasm_store.set_epoch_deadline(self._deadline_ticks)
        try:
            result = f(self._wasm_store, *args)
        except WasmtimeError as e:
            self._instance = None  # a trapped instance cannot be entered again
            raise HindsightError("trap", str(e)) from None
        if isinstance(result, Variant) and result.tag in ERROR_TAGS:
            raise HindsightError.from_wit(result.tag, result.payload)
        return result

    def call(self, name: str, *args: Any) -> Any:
        """Any engine function by its component name, e.g. `[method]bank.maintain`."""
        if self._instance is None:
            self._instantiate()
        return self._checked(self._func(name), *args)

    def _bank_handle(self, bank_id: str) -> Any:
        if self._instance is None:
            self._instantiate()
        if bank_id not in self._banks:
            self._banks[bank_id] = self.call("[method]engine.open-bank", self._engine, bank_id)
        return self._banks[bank_id]

    # -- the API -------------------------------------------------------------------------------

    def bank(self, bank_id: str) -> "Bank":
        return Bank(self, bank_id)

    @property
    def model_id(self) -> str:
        if self._instance is None:
            self._instantiate()
        return self.call("[method]engine.model-id", self._engine)

    def embed(self, texts: Iterable[str]) -> List[List[float]]:
        if self._instance is None:
            self._instantiate()
        return self.call("[method]engine.embed", self._engine, list(texts))


NEW_MEMORY_DEFAULTS: Dict[str, Any] = {
    "kind": None, "task_type": None, "task_description": None, "context": None, "tags": [],
    "scope": None, "agent_id": None, "importance": None, "confidence": None, "source": None,
    "failure_type": None, "occurred_at": None, "valid_until": None, "metadata": [],
    "force": False, "parallel": False, "sequence": False, "vector": None,
}

RECALL_DEFAULTS: Dict[str, Any] = {
    "now": None, "task_type": None, "kinds": [], "tags": [], "scope": None, "min_score": None,
    "prompt_tokens": None, "vector": None, "include_superseded": False,
}


def _new_memory(item: Union[str, Dict[str, Any]]) -> Any:
    fields = {"content": item} if isinstance(item, str) else dict(item)
    unknown = set(fields) - set(NEW_MEMORY_DEFAULTS) - {"content"}
    if unknown:
        raise HindsightError("invalid-input", f"unknown memory field(s): {', '.join(sorted(unknown))}")
    if "content" not in fields:
        raise HindsightError("invalid-input", "content: missing")
    for key in ("importance", "confidence"):
        if fields.get(key) is not None:
            fields[key] = float(fields[key])
    if fields.get("metadata"):
        fields["metadata"] = [tuple(p) for p in (fields["metadata"].items() if isinstance(fields["metadata"], dict) else fields["metadata"])]
    return record({**NEW_MEMORY_DEFAULTS, **fields})


class Bank:
    """One memory bank: `retain`, `recall` and the rest of the WIT `bank` resource."""

    def __init__(self, hindsight: Hindsight, bank_id: str):
        self._hs = hindsight
        self.id = bank_id

    def _call(self, method: str, *args: Any) -> Any:
        handle = self._hs._bank_handle(self.id)
        return lift(self._hs.call(f"[method]bank.{method}", handle, *args))

    def retain(self, items: Iterable[Union[str, Dict[str, Any]]], now: Optional[int] = None) -> List[Obj]:
        """Stores memories (text, or dicts with the WIT `new-memory` fields in snake_case)."""
        return self._call("retain", [_new_memory(i) for i in items], now)

    def recall(self, query: str, k: Optional[int] = None, **options: Any) -> Obj:
        """The memories that matter for `query`, best first, and a prompt block."""
        unknown = set(options) - set(RECALL_DEFAULTS)
        if unknown:
            raise HindsightError("invalid-input", f"unknown recall option(s): {', '.join(sorted(unknown))}")
        if options.get("min_score") is not None:
            options["min_score"] = float(options["min_score"])
        return self._call("recall", record({"query": query, "k": k, **RECALL_DEFAULTS, **options}))

    def get(self, memory_id: str) -> Obj:
        return self._call("get", memory_id)

    def forget(self, memory_id: str, hard: bool = False, now: Optional[int] = None) -> None:
        self._call("forget", memory_id, hard, now)

    def restore(self, memory_id: str, now: Optional[int] = None) -> Obj:
        return self._call("restore", memory_id, now)

    def unsupersede(self, memory_id: str, now: Optional[int] = None) -> Obj:
        """Undoes a wrong supersede: active again, kept beside the memory that replaced it."""
        return self._call("unsupersede", memory_id, now)

    def stats(self) -> Obj:
        return self._call("stats")

    def feedback(self, ids: List[str], outcome: str, now: Optional[int] = None) -> List[Obj]:
        """`outcome`: success, failure or correction."""
        return self._call("feedback", list(ids), outcome, now)

    def history(self, memory_id: str) -> List[Obj]:
        return self._call("history", memory_id)

    def maintain(self, now: Optional[int] = None, dry_run: bool = False) -> Obj:
        """Decay, archive, expire, merge; with `dry_run` the report of what it would do."""
        return self._call("maintain", now, dry_run)
