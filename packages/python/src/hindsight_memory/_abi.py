"""Values across the component boundary, by this package's own converters.

wasmtime-py's generic conversion (``wasmtime.component``) works one value at a time through its
type objects, re-reading the types from the C API at every element, and lowers a ``list<u8>``
one byte per Python call (~50 s for the 23 MB embedding model). This module keeps the C API
(``wasmtime._ffi``) but converts with codecs built once per function:

* records become ``dict``s with snake_case keys, variants and results ``(tag, payload)`` tuples,
  enums ``str``, options ``None`` or the value, ``list<u8>`` ``bytes`` (both ways in bulk);
* a large ``list<u8>`` argument of an exported function (the model given to ``engine.create``)
  is laid out in a buffer this module owns and lent to the call (wasmtime copies from it and never
  frees it), so no per-byte work is done in Python at all.

Nothing here patches wasmtime-py: it only calls the C API, for this package's calls.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
from ctypes import byref
from typing import Any, Callable, Dict, List, Optional, Tuple

from wasmtime import WasmtimeError, _ffi as ffi
from wasmtime.component import _types as T
from wasmtime.component._enter import enter_wasm

VAL = ffi.wasmtime_component_val_t
VAL_SIZE = ctypes.sizeof(VAL)
PAYLOAD_OFFSET = VAL.of.offset

K_BOOL = ffi.WASMTIME_COMPONENT_BOOL.value
K_U8 = ffi.WASMTIME_COMPONENT_U8.value
K_LIST = ffi.WASMTIME_COMPONENT_LIST.value
K_STRING = ffi.WASMTIME_COMPONENT_STRING.value
K_RECORD = ffi.WASMTIME_COMPONENT_RECORD.value
K_TUPLE = ffi.WASMTIME_COMPONENT_TUPLE.value
K_VARIANT = ffi.WASMTIME_COMPONENT_VARIANT.value
K_ENUM = ffi.WASMTIME_COMPONENT_ENUM.value
K_OPTION = ffi.WASMTIME_COMPONENT_OPTION.value
K_RESULT = ffi.WASMTIME_COMPONENT_RESULT.value
K_RESOURCE = ffi.WASMTIME_COMPONENT_RESOURCE.value

# Lists of bytes at least this long are lent from a buffer of our own (exported calls only).
LEND_BYTES_FROM = 1 << 16


def _name(vec: Any) -> str:
    return ctypes.string_at(vec.data, vec.size).decode("utf-8") if vec.size else ""


def _snake(name: str) -> str:
    return name.replace("-", "_")


class Codec:
    """Lowers a Python value into a C value in place, and lifts one without freeing it (whoever
    owns the C value frees the whole tree)."""

    def lower(self, store: Any, val: Any, c: Any) -> None:
        raise NotImplementedError

    def lift(self, c: Any) -> Any:
        raise NotImplementedError


class Scalar(Codec):
    def __init__(self, kind: int, field: str, py: type):
        self.kind, self.field, self.py = kind, field, py

    def lower(self, store: Any, val: Any, c: Any) -> None:
        if self.py is float:
            if isinstance(val, bool) or not isinstance(val, (int, float)):
                raise TypeError(f"expected a number, got {type(val).__name__}")
            val = float(val)
        elif self.py is int:
            if isinstance(val, bool) or not isinstance(val, int):
                raise TypeError(f"expected an integer, got {type(val).__name__}")
        elif not isinstance(val, bool):
            raise TypeError(f"expected a bool, got {type(val).__name__}")
        c.kind = self.kind
        setattr(c.of, self.field, val)

    def lift(self, c: Any) -> Any:
        return self.py(getattr(c.of, self.field))


class String(Codec):
    def lower(self, store: Any, val: Any, c: Any) -> None:
        if not isinstance(val, str):
            raise TypeError(f"expected a string, got {type(val).__name__}")
        c.of.string = ffi.str_to_capi(val)
        c.kind = K_STRING

    def lift(self, c: Any) -> Any:
        return _name(c.of.string)


class Enum(Codec):
    def __init__(self, names: List[str]):
        self.names = set(names)

    def lower(self, store: Any, val: Any, c: Any) -> None:
        if val not in self.names:
            raise ValueError(f"{val!r} is not one of {sorted(self.names)}")
        c.of.enumeration = ffi.str_to_capi(val)
        c.kind = K_ENUM

    def lift(self, c: Any) -> Any:
        return _name(c.of.enumeration)


def _new_list(n: int) -> Any:
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, n)  # every element starts as bool false
    return raw


def _fill_bytes(address: int, data: bytes) -> None:
    """Writes `data` as consecutive u8 values at `address`: tag, then the byte in the payload."""
    n = len(data)
    view = memoryview((ctypes.c_char * (n * VAL_SIZE)).from_address(address)).cast("B")
    view[0::VAL_SIZE] = bytes([K_U8]) * n
    view[PAYLOAD_OFFSET::VAL_SIZE] = data
    view.release()


def _zeroed(size: int) -> "mmap.mmap":
    """Zeroed anonymous memory, given back to the system on close; on Linux its pages are made
    up front in one go (MAP_POPULATE), which is faster than taking a fault on each one."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate:
        try:
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError):
            pass
    return mmap.mmap(-1, size)


class Bytes(Codec):
    """`list<u8>` as `bytes`, in bulk both ways."""

    def lower(self, store: Any, val: Any, c: Any) -> None:
        if not isinstance(val, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(val).__name__}")
        data = bytes(val)
        raw = _new_list(len(data))
        if data:
            _fill_bytes(ctypes.cast(raw.data, ctypes.c_void_p).value or 0, data)
        c.of.list = raw
        c.kind = K_LIST

    def lend(self, val: Any, c: Any) -> "mmap.mmap":
        """Lays `val` out in a buffer of our own and points `c` at it; the caller keeps the buffer
        alive through the call, must not free `c` through wasmtime, and closes the buffer after."""
        data = bytes(val)
        buf = _zeroed(max(1, len(data) * VAL_SIZE))
        holder = ctypes.c_char.from_buffer(buf)
        address = ctypes.addressof(holder)
        del holder  # the exported buffer must not outlive the mmap
        _fill_bytes(address, data)
        c.of.list.size = len(data)
        c.of.list.data = ctypes.cast(address, ctypes.POINTER(VAL))
        c.kind = K_LIST
        return buf

    def lift(self, c: Any) -> Any:
        raw = c.of.list
        n = raw.size
        if n == 0:
            return b""
        address = ctypes.cast(raw.data, ctypes.c_void_p).value or 0
        view = memoryview((ctypes.c_char * (n * VAL_SIZE)).from_address(address)).cast("B")
        try:
            return bytes(view[PAYLOAD_OFFSET::VAL_SIZE])
        finally:
            view.release()


class ListOf(Codec):
    def __init__(self, element: Codec):
        self.element = element

    def lower(self, store: Any, val: Any, c: Any) -> None:
        if not isinstance(val, (list, tuple)):
            raise TypeError(f"expected a list, got {type(val).__name__}")
        raw = _new_list(len(val))
        c.of.list = raw  # attached first: freeing `c` frees whatever was lowered so far
        c.kind = K_LIST
        element = self.element
        data = raw.data
        for i, v in enumerate(val):
            element.lower(store, v, data[i])

    def lift(self, c: Any) -> Any:
        raw = c.of.list
        data, element = raw.data, self.element
        return [element.lift(data[i]) for i in range(raw.size)]


class Record(Codec):
    def __init__(self, fields: List[Tuple[str, Codec]]):
        self.fields = [(name, _snake(name), codec) for name, codec in fields]

    def lower(self, store: Any, val: Any, c: Any) -> None:
        if not isinstance(val, dict):
            raise TypeError(f"expected a dict, got {type(val).__name__}")
        raw = ffi.wasmtime_component_valrecord_t()
        ffi.wasmtime_component_valrecord_new_uninit(raw, len(self.fields))
        c.of.record = raw
        c.kind = K_RECORD
        for i, (name, key, codec) in enumerate(self.fields):
            entry = raw.data[i]
            entry.name = ffi.str_to_capi(name)
            if key not in val:
                raise KeyError(key)
            codec.lower(store, val[key], entry.val)

    def lift(self, c: Any) -> Any:
        raw = c.of.record
        data = raw.data
        return {key: codec.lift(data[i].val) for i, (_, key, codec) in enumerate(self.fields)}


class Tuple_(Codec):
    def __init__(self, elements: List[Codec]):
        self.elements = elements

    def lower(self, store: Any, val: Any, c: Any) -> None:
        if not isinstance(val, (tuple, list)) or len(val) != len(self.elements):
            raise TypeError(f"expected a tuple of {len(self.elements)}")
        raw = ffi.wasmtime_component_valtuple_t()
        ffi.wasmtime_component_valtuple_new_uninit(raw, len(self.elements))
        c.of.tuple = raw
        c.kind = K_TUPLE
        for i, (codec, v) in enumerate(zip(self.elements, val)):
            codec.lower(store, v, raw.data[i])

    def lift(self, c: Any) -> Any:
        data = c.of.tuple.data
        return tuple(codec.lift(data[i]) for i, codec in enumerate(self.elements))


def _boxed() -> Any:
    """A heap value owned by wasmtime (freed with its parent), starting as bool false."""
    return ffi.wasmtime_component_val_new(byref(VAL()))


class Option(Codec):
    def __init__(self, payload: Codec):
        self.payload = payload

    def lower(self, store: Any, val: Any, c: Any) -> None:
        c.kind = K_OPTION
        if val is None:
            c.of.option = None
            return
        box = _boxed()
        c.of.option = box
        self.payload.lower(store, val, box.contents)

    def lift(self, c: Any) -> Any:
        return self.payload.lift(c.of.option.contents) if c.of.option else None


class Variant(Codec):
    """`(tag, payload)`; payload None for a case without one."""

    def __init__(self, cases: List[Tuple[str, Optional[Codec]]]):
        self.cases = dict(cases)

    def lower(self, store: Any, val: Any, c: Any) -> None:
        tag, payload = val
        if tag not in self.cases:
            raise ValueError(f"{tag!r} is not one of {sorted(self.cases)}")
        codec = self.cases[tag]
        c.of.variant.discriminant = ffi.str_to_capi(tag)
        c.of.variant.val = None
        c.kind = K_VARIANT
        if codec is not None:
            box = _boxed()
            c.of.variant.val = box
            codec.lower(store, payload, box.contents)

    def lift(self, c: Any) -> Any:
        tag = _name(c.of.variant.discriminant)
        codec = self.cases[tag]
        return (tag, codec.lift(c.of.variant.val.contents) if codec is not None and c.of.variant.val else None)


class Result(Codec):
    """`("ok", value)` or `("err", error)`."""

    def __init__(self, ok: Optional[Codec], err: Optional[Codec]):
        self.ok, self.err = ok, err

    def lower(self, store: Any, val: Any, c: Any) -> None:
        tag, payload = val
        codec = self.ok if tag == "ok" else self.err
        c.of.result.is_ok = tag == "ok"
        c.of.result.val = None
        c.kind = K_RESULT
        if codec is not None:
            box = _boxed()
            c.of.result.val = box
            codec.lower(store, payload, box.contents)

    def lift(self, c: Any) -> Any:
        ok = bool(c.of.result.is_ok)
        codec = self.ok if ok else self.err
        payload = codec.lift(c.of.result.val.contents) if codec is not None and c.of.result.val else None
        return ("ok" if ok else "err", payload)


class Resource(Codec):
    """Handles (own and borrow) by wasmtime-py's own conversion; lifting takes the handle out so
    freeing the tree afterwards leaves it alone."""

    def __init__(self, ty: Any):
        self.ty = ty

    def lower(self, store: Any, val: Any, c: Any) -> None:
        self.ty.convert_to_c(store, val, ctypes.pointer(c))

    def lift(self, c: Any) -> Any:
        handle = self.ty.convert_from_c(c)
        c.kind = K_BOOL
        c.of.boolean = False
        return handle


SCALARS: Dict[type, Tuple[int, str, type]] = {
    T.Bool: (K_BOOL, "boolean", bool),
    T.S8: (ffi.WASMTIME_COMPONENT_S8.value, "s8", int),
    T.U8: (K_U8, "u8", int),
    T.S16: (ffi.WASMTIME_COMPONENT_S16.value, "s16", int),
    T.U16: (ffi.WASMTIME_COMPONENT_U16.value, "u16", int),
    T.S32: (ffi.WASMTIME_COMPONENT_S32.value, "s32", int),
    T.U32: (ffi.WASMTIME_COMPONENT_U32.value, "u32", int),
    T.S64: (ffi.WASMTIME_COMPONENT_S64.value, "s64", int),
    T.U64: (ffi.WASMTIME_COMPONENT_U64.value, "u64", int),
    T.F32: (ffi.WASMTIME_COMPONENT_F32.value, "f32", float),
    T.F64: (ffi.WASMTIME_COMPONENT_F64.value, "f64", float),
}


def codec(ty: Any) -> Codec:
    """The codec of a wasmtime-py value type (read once)."""
    if type(ty) in SCALARS:
        return Scalar(*SCALARS[type(ty)])
    if isinstance(ty, T.String):
        return String()
    if isinstance(ty, T.ListType):
        element = ty.element
        return Bytes() if isinstance(element, T.U8) else ListOf(codec(element))
    if isinstance(ty, T.RecordType):
        return Record([(name, codec(t)) for name, t in ty.fields])
    if isinstance(ty, T.TupleType):
        return Tuple_([codec(t) for t in ty.elements])
    if isinstance(ty, T.VariantType):
        return Variant([(name, None if t is None else codec(t)) for name, t in ty.cases])
    if isinstance(ty, T.EnumType):
        return Enum(ty.names)
    if isinstance(ty, T.OptionType):
        return Option(codec(ty.payload))
    if isinstance(ty, T.ResultType):
        ok, err = ty.ok, ty.err
        return Result(None if ok is None else codec(ok), None if err is None else codec(err))
    if isinstance(ty, (T.OwnType, T.BorrowType)):
        return Resource(ty)
    raise TypeError(f"hindsight-memory does not convert {type(ty).__name__} values")


class GuestFunc:
    """An exported function, called through the C API with this module's codecs."""

    def __init__(self, store: Any, func: Any):
        fty = func.type(store)
        self.params = [codec(ty) for _, ty in fty.params]
        result = fty.result
        self.result = None if result is None else codec(result)
        self._func = func._func

    def __call__(self, store: Any, *args: Any) -> Any:
        n = len(args)
        if n != len(self.params):
            raise TypeError(f"expected {len(self.params)} arguments, got {n}")
        params = (VAL * n)()  # zeroed: bool false, safe to free
        lent: List[Tuple[int, mmap.mmap]] = []
        try:
            for i, (c, arg) in enumerate(zip(self.params, args)):
                if isinstance(c, Bytes) and isinstance(arg, (bytes, bytearray)) and len(arg) >= LEND_BYTES_FROM:
                    lent.append((i, c.lend(arg, params[i])))
                else:
                    c.lower(store, arg, params[i])
            result = VAL()

            def run() -> Any:
                return ffi.wasmtime_component_func_call(byref(self._func), store._context(), params, n,
                                                        byref(result), 0 if self.result is None else 1)

            enter_wasm(run)
            if self.result is None:
                return None
            try:
                return self.result.lift(result)
            finally:
                ffi.wasmtime_component_val_delete(byref(result))
        finally:
            for i, _ in lent:  # ours, not wasmtime's: never freed through it
                params[i].kind = K_BOOL
                params[i].of.boolean = False
            for i in range(n):
                ffi.wasmtime_component_val_delete(byref(params[i]))
            for _, buf in lent:
                buf.close()


# -- host functions --------------------------------------------------------------------------

HostFunc = Callable[..., Any]
_HOST: Dict[int, Tuple[HostFunc, List[Any]]] = {}
_HOST_LOCK = threading.Lock()
_next_host_id = [1]


def _raise_in_guest(message: str) -> int:
    error = WasmtimeError(message)
    return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0  # type: ignore[attr-defined]


@ffi.wasmtime_component_func_callback_t
def _host_trampoline(data, context, ty_raw, args, nargs, results, nresults):  # type: ignore[no-untyped-def]
    try:
        func, cache = _HOST[data or 0]
        if not cache:
            fty = T.FuncType._from_ptr(ty_raw, owner=True)
            cache.append(([codec(ty) for _, ty in fty.params], None if fty.result is None else codec(fty.result)))
        params, result = cache[0]
        # The arguments belong to wasmtime (it frees them after we return): read, never free.
        value = func(*[c.lift(args[i]) for i, c in enumerate(params)])
        if result is not None:
            result.lower(None, value, results[0])  # wasmtime frees the results it reads
        return 0
    except BaseException as e:  # noqa: BLE001 - a host failure becomes a trap, not a crash
        return _raise_in_guest(f"hindsight-memory host function failed: {type(e).__name__}: {e}")


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _host_finalize(data):  # type: ignore[no-untyped-def]
    try:
        with _HOST_LOCK:
            _HOST.pop(data or 0, None)
    except Exception:  # noqa: BLE001 - at interpreter exit the module may be gone already
        pass


def add_host_func(linker_instance: Any, name: str, func: HostFunc) -> None:
    """Defines `name` in a linker instance as `func(*args) -> result`, converted by our codecs
    (records as dicts, `list<u8>` as bytes). `func` must not raise: a raise traps the guest."""
    with _HOST_LOCK:
        key = _next_host_id[0]
        _next_host_id[0] += 1
        _HOST[key] = (func, [])
    encoded = name.encode("utf-8")
    err = ffi.wasmtime_component_linker_instance_add_func(linker_instance.ptr(), ctypes.create_string_buffer(encoded),
                                                          len(encoded), _host_trampoline, key, _host_finalize)
    if err:
        raise WasmtimeError._from_ptr(err)
