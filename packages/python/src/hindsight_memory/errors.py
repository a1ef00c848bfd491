"""One error type for every call: the WIT error variant as `kind`, with the field and item when
an input was at fault."""

from __future__ import annotations

from typing import Any, Optional

# The WIT `error` variants, then what only a host meets: a trapped instance, a bad configuration.
KINDS = ("invalid-input", "not-found", "store", "model", "limit", "corrupt", "llm", "conflict",
         "unsupported", "trap", "config")


class HindsightError(Exception):
    """What went wrong.

    ``kind`` is the WIT error variant (``invalid-input``, ``not-found``, ``store``, ``model``,
    ``limit``, ``corrupt``, ``llm``, ``conflict``, ``unsupported``), ``trap`` when the component
    stopped (a call past its deadline or memory cap; the next call starts a fresh instance from
    the store), or ``config`` for a host misconfiguration. For ``invalid-input``, ``field`` names
    the field and ``item`` the index of the item in its batch (when it came in one); for
    ``not-found``, ``what`` names what was missing (``memory``, ``task``, ``bank``) and ``id`` which.
    """

    def __init__(self, kind: str, message: str, *, item: Optional[int] = None, field: Optional[str] = None,
                 what: Optional[str] = None, id: Optional[str] = None):
        self.kind = kind
        self.item = item
        self.field = field
        self.what = what
        self.id = id
        self.message = message
        super().__init__(f"{kind}: {message}")

    @classmethod
    def invalid(cls, field: str, problem: str, item: Optional[int] = None) -> "HindsightError":
        """An invalid `field` (the message reads `items[i].field: problem`, as the Rust host's)."""
        where = "" if item is None else f"items[{item}]."
        return cls("invalid-input", f"{where}{field}: {problem}", item=item, field=field)

    @classmethod
    def _from_wit(cls, tag: str, payload: Any) -> "HindsightError":
        if tag == "invalid-input" and isinstance(payload, dict):
            return cls.invalid(payload["field"], payload["message"], payload.get("item"))
        if tag == "not-found" and isinstance(payload, dict):
            return cls(tag, payload["message"], what=payload["what"], id=payload["id"])
        return cls(tag, str(payload))
