"""Loading, sandboxing and calling the component: one wasmtime engine and compiled component per
`Hindsight`, at most one live instance. A trap (deadline, memory cap, engine bug) throws the
instance away; the next call builds a fresh one, whose banks reopen from the store."""

from __future__ import annotations

import hashlib
import json
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from wasmtime import Config, Engine as WasmEngine, Store as WasmStore, WasiConfig, WasmtimeError
from wasmtime.component import Component, Linker

from . import _abi
from .defaults import CALL_DEADLINE_MS
from .errors import HindsightError
from .llm import LlmFailed, LlmUnavailable, OpenAiLlm
from .store import SqliteStore, StoreConflict

WIT_VERSION = "0.3.0"
API = f"hindsight:memory/api@{WIT_VERSION}"
EPOCH_TICK_S = 0.01
USAGE_PREFIX = "host/llm-usage/"
AFTER_TRAP = "the instance was discarded and the next call starts a fresh one from the store"


@dataclass
class Timings:
    """How long the expensive start-up steps took, in milliseconds."""
    #: Compiling the component, or loading it precompiled from the cache.
    component_load_ms: float = 0.0
    component_from_cache: bool = False
    #: The last instantiation, `engine.create` (the model handed over and loaded) included.
    instantiate_ms: float = 0.0


def _wasmtime_version() -> str:
    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        return "unknown"


def load_component(engine: WasmEngine, wasm: bytes, cache_dir: Optional[Path]) -> Tuple[Component, bool]:
    """The component, compiled once per (wasm, wasmtime version) and cached; a cached file made by
    another build is refused by wasmtime and compiled again."""
    if cache_dir is None:
        return Component(engine, wasm), False
    sha = hashlib.sha256(wasm).hexdigest()[:32]
    path = cache_dir / f"hindsight-wasmtime{_wasmtime_version()}-{sha}.cwasm"
    if path.exists():
        try:
            return Component.deserialize_file(engine, str(path)), True
        except WasmtimeError:
            path.unlink(missing_ok=True)
    component = Component(engine, wasm)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{threading.get_ident()}")
        tmp.write_bytes(bytes(component.serialize()))
        tmp.replace(path)  # a concurrent reader never sees half a file
        _prune(cache_dir, path)
    except OSError:
        pass  # no cache: compiled again next time
    return component, False


def _prune(cache_dir: Path, keep: Path) -> None:
    """Each build leaves a compiled component behind: keep the four newest."""
    files = sorted(cache_dir.glob("hindsight-*.cwasm"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[4:]:
        if old != keep:
            old.unlink(missing_ok=True)


class _Ticker(threading.Thread):
    """Advances the engine's epoch every tick so call deadlines fire."""

    def __init__(self, engine: WasmEngine):
        super().__init__(name="hindsight-epoch", daemon=True)
        self.engine = engine
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(EPOCH_TICK_S):
            self.engine.increment_epoch()


class Runtime:
    def __init__(self, *, store: SqliteStore, llm: OpenAiLlm, model: bytes, tokenizer: bytes, settings: str,
                 deadline_s: float, memory_limit: int, wasm: bytes, cache_dir: Optional[Path]):
        self.store = store
        self.llm = llm
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.memory_limit = memory_limit
        self.set_deadline(deadline_s)
        self.lock = threading.RLock()
        self.timings = Timings()
        config = Config()
        config.epoch_interruption = True  # the per-call deadline
        self.engine = WasmEngine(config)
        started = time.perf_counter()
        try:
            self.component, from_cache = load_component(self.engine, wasm, cache_dir)
        except WasmtimeError as e:
            raise HindsightError("config", f"the component could not be compiled (is it a hindsight component?): {e}") from None
        self.timings.component_load_ms = (time.perf_counter() - started) * 1000
        self.timings.component_from_cache = from_cache
        self.linker = self._linker()
        self.ticker = _Ticker(self.engine)
        self.ticker.start()
        self.live: Optional[_Instance] = None
        self.deadline_at = 0.0

    def set_deadline(self, seconds: float) -> None:
        if not seconds > 0:
            raise HindsightError.invalid("deadline", "must be longer than zero")
        self.deadline_s = float(seconds)
        self.deadline_ticks = max(1, round(seconds / EPOCH_TICK_S))

    def close(self) -> None:
        self.ticker.stopped.set()
        self.live = None

    # -- the imports ---------------------------------------------------------------------------

    def _linker(self) -> Linker:
        linker = Linker(self.engine)
        linker.add_wasip2()
        with linker.root() as root:
            with root.add_instance(f"hindsight:memory/store@{WIT_VERSION}") as s:
                _abi.add_host_func(s, "get", self._get)
                _abi.add_host_func(s, "scan", self._scan)
                _abi.add_host_func(s, "commit", self._commit)
            with root.add_instance(f"hindsight:memory/llm@{WIT_VERSION}") as i:
                _abi.add_host_func(i, "complete", self._complete)
        return linker

    @staticmethod
    def _store_error(what: str, e: BaseException) -> Tuple[str, Tuple[str, str]]:
        text = f"{what}: {e}"
        if isinstance(e, sqlite3.OperationalError) and "readonly" in str(e).replace("-", "").replace(" ", ""):
            return ("err", ("read-only", f"{text}: nothing was written"))
        return ("err", ("failed", text))

    def _get(self, key: str) -> Any:
        try:
            return ("ok", self.store.get(key))
        except Exception as e:  # noqa: BLE001 - the guest gets the message as its error
            return self._store_error(f"get {key!r}", e)

    def _scan(self, prefix: str, start_after: Optional[str], limit: int) -> Any:
        try:
            return ("ok", self.store.scan(prefix, start_after, limit))
        except Exception as e:  # noqa: BLE001
            return self._store_error(f"scan {prefix!r}", e)

    def _commit(self, ops: Any) -> Any:
        try:
            self.store.commit(ops)
            return ("ok", None)
        except StoreConflict as e:
            return ("err", ("conflict", str(e)))
        except Exception as e:  # noqa: BLE001
            return self._store_error("commit", e)

    def _complete(self, request: Dict[str, Any]) -> Any:
        """Asks the model within the time the current call has left: a model that hangs cannot
        hold the call past its deadline."""
        if self.llm.config is None:
            return ("err", ("unavailable", "no language model is configured (set HINDSIGHT_LLM_URL, or pass one to the host)"))
        left = self.deadline_at - time.monotonic()
        passed = ("err", ("failed", "the LLM call did not answer before the call's deadline (deadline_s)"))
        if left <= 0:
            return passed
        answers: "queue.Queue[Any]" = queue.Queue(1)

        def ask() -> None:
            try:
                answers.put(("ok", self.llm.complete(request)))
            except LlmUnavailable as e:
                answers.put(("unavailable", str(e)))
            except LlmFailed as e:
                answers.put(("failed", str(e)))
            except Exception as e:  # noqa: BLE001 - any other failure is a failed call
                answers.put(("failed", f"{type(e).__name__}: {e}"))

        threading.Thread(target=ask, name="hindsight-llm", daemon=True).start()
        try:
            tag, value = answers.get(timeout=left)
        except queue.Empty:
            self._meter(request, False, 0, 0)
            return passed
        if tag == "unavailable":
            return ("err", ("unavailable", value))
        if tag == "failed":
            self._meter(request, False, 0, 0)
            return ("err", ("failed", value))
        text, prompt_tokens, completion_tokens = value
        usable = request.get("json_schema") is None or _has_json(text)
        self._meter(request, usable, prompt_tokens, completion_tokens)
        return ("ok", {"text": text, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})

    def _meter(self, request: Dict[str, Any], ok: bool, prompt: int, completion: int) -> None:
        """Adds the call to the store's counts (as the Rust host does); never fails the call."""
        key = USAGE_PREFIX + request["operation"]
        for _ in range(4):
            try:
                before = self.store.get(key)
                usage = json.loads(before) if before else {}
                bytes_ = json.dumps({
                    "calls": int(usage.get("calls", 0)) + 1,
                    "failures": int(usage.get("failures", 0)) + (0 if ok else 1),
                    "prompt_tokens": int(usage.get("prompt_tokens", 0)) + prompt,
                    "completion_tokens": int(usage.get("completion_tokens", 0)) + completion,
                }, separators=(",", ":")).encode()
                self.store.commit([("expect", (key, before)), ("put", (key, bytes_))])
                return
            except StoreConflict:
                continue
            except Exception:  # noqa: BLE001 - accounting must never fail the call itself
                return

    # -- calling the component -----------------------------------------------------------------

    def instance(self) -> "_Instance":
        if self.live is None:
            started = time.perf_counter()
            self.live = _Instance(self)
            self.timings.instantiate_ms = (time.perf_counter() - started) * 1000
        return self.live

    def describe_trap(self, e: WasmtimeError) -> HindsightError:
        text = str(e)
        lower = text.lower()
        if "interrupt" in lower:
            why = f"the call passed its deadline of {round(self.deadline_s * 1000)} ms"
        elif "memory" in lower and ("limit" in lower or "grow" in lower or "alloc" in lower):
            why = f"the call needed more memory than the cap of {self.memory_limit >> 20} MiB"
        else:
            first = next((line.strip() for line in text.splitlines() if line.strip()), "trap")
            why = f"trap: {first}"
        return HindsightError("trap", f"{why}; {AFTER_TRAP}")

    def call(self, run: Callable[["_Instance"], Any]) -> Any:
        """Runs `run` against the live instance (made on demand) under the call deadline; a trap
        discards the instance. An engine error (`("err", …)`) is raised as a HindsightError."""
        with self.lock:
            instance = self.instance()
            instance.wasm_store.set_epoch_deadline(self.deadline_ticks)
            self.deadline_at = time.monotonic() + self.deadline_ticks * EPOCH_TICK_S
            try:
                result = run(instance)
            except WasmtimeError as e:
                self.live = None
                raise self.describe_trap(e) from None
            return unwrap(result)


def unwrap(result: Any) -> Any:
    if isinstance(result, tuple) and len(result) == 2 and result[0] in ("ok", "err"):
        tag, value = result
        if tag == "err":
            etag, payload = value
            raise HindsightError._from_wit(etag, payload)
        return value
    return result


class _Instance:
    """A live instance: its wasm store, the engine resource and the banks it has opened."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        store = WasmStore(rt.engine)
        store.set_wasi(WasiConfig())  # no preopened directory, no environment, no arguments
        store.set_limits(memory_size=rt.memory_limit)
        # Starting takes its own time (the model handed over and loaded, ~2 s): never less than
        # the default deadline, so a short call deadline cannot stop every instance from starting.
        ticks = max(rt.deadline_ticks, round(CALL_DEADLINE_MS / 1000 / EPOCH_TICK_S))
        store.set_epoch_deadline(ticks)
        rt.deadline_at = time.monotonic() + ticks * EPOCH_TICK_S
        self.wasm_store = store
        try:
            self.instance = rt.linker.instantiate(store, rt.component)
            self.api = self.instance.get_export_index(store, API)
            if self.api is None:
                raise HindsightError("config", f"the component does not export {API}: is it a hindsight component?")
            self.funcs: Dict[str, _abi.GuestFunc] = {}
            self.banks: Dict[str, Any] = {}
            self.engine = unwrap(self.func("[static]engine.create")(store, rt.model, rt.tokenizer, rt.settings))
        except WasmtimeError as e:
            raise rt.describe_trap(e) from None

    def func(self, name: str) -> _abi.GuestFunc:
        f = self.funcs.get(name)
        if f is None:
            index = self.instance.get_export_index(self.wasm_store, name, self.api)
            if index is None:
                raise HindsightError("config", f"the component has no function {name}")
            f = _abi.GuestFunc(self.wasm_store, self.instance.get_func(self.wasm_store, index))
            self.funcs[name] = f
        return f

    def engine_call(self, method: str, *args: Any) -> Any:
        return self.func(f"[method]engine.{method}")(self.wasm_store, self.engine, *args)

    def bank_handle(self, bank: str) -> Any:
        handle = self.banks.get(bank)
        if handle is None:
            handle = unwrap(self.engine_call("open-bank", bank))
            self.banks[bank] = handle
        return handle

    def bank_call(self, bank: str, method: str, *args: Any) -> Any:
        return self.func(f"[method]bank.{method}")(self.wasm_store, self.bank_handle(bank), *args)

    def recall_across(self, banks: List[str], query: Any) -> Any:
        handles = [self.bank_handle(b) for b in banks]
        return self.func("[method]bank.recall-with")(self.wasm_store, handles[0], handles[1:], query)


def _has_json(text: str) -> bool:
    """Whether an answer holds JSON the engine can read (code fences, <think> blocks and prose
    around it allowed), as the Rust host's usage count judges it."""
    t = text
    while "<think>" in t and "</think>" in t:
        t = t[:t.index("<think>")] + t[t.index("</think>") + len("</think>"):]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = t.find(opener), t.rfind(closer)
        if 0 <= start < end:
            try:
                json.loads(t[start:end + 1])
                return True
            except ValueError:
                continue
    return False
