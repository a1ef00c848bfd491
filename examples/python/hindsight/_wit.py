"""Between Python values and wasmtime-py's component values.

wasmtime-py lowers WIT records from objects with the WIT (kebab-case) field names as attributes
and lifts them into `Record` objects of the same shape; this module speaks snake_case dicts and
attribute objects to the user instead. It also lowers and lifts `list<u8>` in one copy: stock
wasmtime-py converts byte by byte, which takes ~50 s for the 23 MB embedding model.
"""

import ctypes
from types import SimpleNamespace
from typing import Any

from wasmtime import _ffi as ffi
from wasmtime.component import ListType, Record, Variant

_VAL_SIZE = ctypes.sizeof(ffi.wasmtime_component_val_t)
_VAL_OFFSET = ffi.wasmtime_component_val_t.of.offset
_U8 = ffi.WASMTIME_COMPONENT_U8.value
_CHUNK = 1 << 20

_stock_to_c = ListType.convert_to_c
_stock_from_c = ListType.convert_from_c


def _bytes_to_c(self: ListType, store: Any, val: Any, ptr: Any) -> None:
    if not isinstance(val, (bytes, bytearray, memoryview)) or not self._is_bytes():
        return _stock_to_c(self, store, val, ptr)
    data = bytes(val)
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, len(data))
    base = ctypes.cast(raw.data, ctypes.c_void_p).value or 0
    # Each element is a tagged union: the u8 tag at offset 0, the byte at the union's offset.
    for start in range(0, len(data), _CHUNK):
        chunk = data[start:start + _CHUNK]
        buf = bytearray(len(chunk) * _VAL_SIZE)
        buf[0::_VAL_SIZE] = bytes([_U8]) * len(chunk)
        buf[_VAL_OFFSET::_VAL_SIZE] = chunk
        ctypes.memmove(base + start * _VAL_SIZE, bytes(buf), len(buf))
    ptr.contents.kind = ffi.WASMTIME_COMPONENT_LIST
    ptr.contents.of.list = raw


def _bytes_from_c(self: ListType, c: Any) -> Any:
    if c.kind != ffi.WASMTIME_COMPONENT_LIST.value or not self._is_bytes():
        return _stock_from_c(self, c)
    raw = c.of.list
    try:
        if raw.size == 0:
            return b""
        return ctypes.string_at(raw.data, raw.size * _VAL_SIZE)[_VAL_OFFSET::_VAL_SIZE]
    finally:
        ffi.wasmtime_component_vallist_delete(ctypes.byref(raw))


ListType.convert_to_c = _bytes_to_c  # type: ignore[method-assign]
ListType.convert_from_c = _bytes_from_c  # type: ignore[method-assign]


class Obj(SimpleNamespace):
    """A lifted WIT record: snake_case attributes."""

    def to_dict(self) -> dict:
        return {k: _plain(v) for k, v in vars(self).items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Obj):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def lift(value: Any) -> Any:
    """A component value as Python: records become `Obj`s with snake_case attributes."""
    if isinstance(value, Record):
        return Obj(**{k.replace("-", "_"): lift(v) for k, v in vars(value).items()})
    if isinstance(value, list):
        return [lift(v) for v in value]
    if isinstance(value, tuple):
        return tuple(lift(v) for v in value)
    if isinstance(value, Variant):
        return Obj(tag=value.tag, value=lift(value.payload))
    return value


def record(fields: dict) -> Record:
    """A WIT record from snake_case keys; nested dicts become records too."""
    out = Record()
    for key, value in fields.items():
        setattr(out, key.replace("_", "-"), lower(value))
    return out


def lower(value: Any) -> Any:
    if isinstance(value, dict):
        return record(value)
    if isinstance(value, list):
        return [lower(v) for v in value]
    return value
