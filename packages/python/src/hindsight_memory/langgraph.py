"""hindsight as a LangGraph store: ``compile(store=HindsightStore(hs))``.

    from hindsight_memory import Hindsight
    from hindsight_memory.langgraph import HindsightStore

    store = HindsightStore(Hindsight.open(db="memory.db"))
    store.put(("user-1", "memories"), "diet", {"text": "The user is vegetarian"})
    store.search(("user-1",), query="what does the user eat?", limit=3)

A namespace is a bank: its labels joined with ``:`` (``("user-1", "memories")`` is the bank
``user-1:memories``), so the bank-id rules apply to it. Each item is one memory, stored as given
(``force``: a store keeps what it is told, without judging it against its neighbours), tagged
``langgraph`` and ``key:<key>``, with its JSON value in the memory's metadata so ``get`` returns
it unchanged. The memory's text, which recall embeds and indexes, is the value's ``index`` fields
(or the whole value as JSON). ``search`` with a query is hindsight's recall (meaning, keywords,
recency, confidence) over the items; ``filter`` is applied to the values as LangGraph's own
stores do (equality, nested objects, ``$eq $ne $gt $gte $lt $lte``).
"""

import json
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from langgraph.store.base import (BaseStore, GetOp, InvalidNamespaceError, Item, ListNamespacesOp, MatchCondition,
                                  Op, PutOp, Result, SearchItem, SearchOp)

from .client import BANK_ID, Bank, Hindsight
from .types import Memory

TAG = "langgraph"
VALUE = "langgraph.value"
KEY = "langgraph.key"
CREATED = "langgraph.created_at"
# Recall's and list's largest page.
MAX_PAGE = 1000

__all__ = ["HindsightStore"]


def _bank_id(namespace: Tuple[str, ...]) -> str:
    if not namespace:
        raise InvalidNamespaceError("namespace: must have at least one label")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"namespace: label {label!r} in {namespace!r} must be a non-empty string")
        if ":" in label:
            raise InvalidNamespaceError(f"namespace: label {label!r} in {namespace!r} must not contain ':' "
                                        "(the labels are joined with ':' into a bank id)")
    bank = ":".join(namespace)
    if not BANK_ID.match(bank):
        raise InvalidNamespaceError(f"namespace: {namespace!r} makes the bank id {bank!r}, which must be 1 to 128 "
                                    "characters of A-Z a-z 0-9 - _ . :")
    return bank


def _json(value: Any, field: str = "value") -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{field}: not JSON-serialisable: {e}") from None


def _field(value: Any, path: str) -> List[Any]:
    """The values at a LangGraph field path (`a.b`, `a[0]`, `a[-1]`, `a[*].b`)."""
    found = [value]
    for part in path.split("."):
        name, _, rest = part.partition("[")
        nxt: List[Any] = []
        for v in found:
            if name:
                if not isinstance(v, dict) or name not in v:
                    continue
                v = v[name]
            if rest:
                index = rest.rstrip("]")
                if not isinstance(v, list):
                    continue
                if index == "*":
                    nxt.extend(v)
                    continue
                try:
                    nxt.append(v[int(index)])
                except (ValueError, IndexError):
                    continue
            else:
                nxt.append(v)
        found = nxt
    return found


def _text(value: Dict[str, Any], index: Optional[Sequence[str]]) -> str:
    if index:
        parts = [v if isinstance(v, str) else _json(v) for path in index for v in _field(value, path)]
        text = "\n".join(p for p in parts if p)
        if text.strip():
            return text
    return _json(value)


def _matches(value: Any, condition: Any) -> bool:
    if isinstance(condition, dict):
        if any(k.startswith("$") for k in condition):
            return all(_operator(value, op, arg) for op, arg in condition.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in condition.items())
    if isinstance(condition, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(condition)
                and all(_matches(a, b) for a, b in zip(value, condition)))
    return value == condition


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"filter: unsupported operator {op!r} (use $eq $ne $gt $gte $lt $lte)")


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class HindsightStore(BaseStore):
    """A LangGraph ``BaseStore`` over a hindsight engine (its banks are the namespaces).

    ``hs`` is an open :class:`~hindsight_memory.Hindsight`; the store does not close it. Calls run
    on the caller's thread (the async ones too: the engine is one sandboxed instance, used by one
    call at a time)."""

    def __init__(self, hs: Hindsight):
        if not isinstance(hs, Hindsight):
            raise TypeError(f"hs: must be an open hindsight_memory.Hindsight, got {type(hs).__name__}")
        self.hs = hs

    # What LangGraph calls: everything else of BaseStore is built on these two.

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        return self.batch(ops)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"op: unknown operation {type(op).__name__}")

    # Items

    def _memories(self, bank: Bank, key: str) -> List[Memory]:
        """The active memories holding `key` (one, unless a put was cut short), newest first."""
        if bank.id not in self.hs.banks():
            return []
        page = bank.list(tag=f"key:{key}", limit=MAX_PAGE)
        return [m for m in page.items if TAG in m.tags and m.meta(KEY) == key]

    def _item(self, namespace: Tuple[str, ...], m: Memory, score: Optional[float] = None, search: bool = False):
        value = json.loads(m.meta(VALUE) or "{}")
        created = int(m.meta(CREATED) or m.created_at)
        fields = dict(namespace=tuple(namespace), key=m.meta(KEY) or "", value=value,
                      created_at=_when(created), updated_at=_when(m.created_at))
        return SearchItem(score=score, **fields) if search else Item(**fields)

    def _get(self, namespace: Tuple[str, ...], key: str) -> Optional[Item]:
        found = self._memories(self.hs.bank(_bank_id(tuple(namespace))), str(key))
        return self._item(namespace, found[0]) if found else None

    def _put(self, op: PutOp) -> None:
        namespace, key = tuple(op.namespace), str(op.key)
        bank_id = _bank_id(namespace)
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError(f"namespace: the root label cannot be 'langgraph', got {namespace!r}")
        bank = self.hs.bank(bank_id)
        if op.value is None:
            for m in self._memories(bank, key):
                bank.erase(m.id)
            return None
        if not isinstance(op.value, dict):
            raise TypeError(f"value: must be a dict, got {type(op.value).__name__}")
        encoded = _json(op.value)  # before anything is written
        index = None if op.index is None or op.index is False else list(op.index)
        previous = self._memories(bank, key)
        metadata = [(KEY, key), (VALUE, encoded)]
        if previous:
            metadata.append((CREATED, previous[0].meta(CREATED) or str(previous[0].created_at)))
        # The new item first, then the old one erased: a failure in between leaves two, and the
        # newest is the one read.
        bank.retain({"content": _text(op.value, index), "tags": [TAG, f"key:{key}"], "metadata": metadata,
                     "force": True, "kind": "semantic"})
        for m in previous:
            bank.erase(m.id)
        return None

    def _banks(self, prefix: Tuple[str, ...]) -> List[Tuple[str, Tuple[str, ...]]]:
        out = []
        for bank in self.hs.banks():
            namespace = tuple(bank.split(":"))
            if namespace[:len(prefix)] == tuple(prefix):
                out.append((bank, namespace))
        return out

    def _search(self, op: SearchOp) -> List[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit, offset: must not be negative")
        banks = self._banks(tuple(op.namespace_prefix))
        if not banks:
            return []
        wanted = op.offset + op.limit
        namespaces = dict(banks)
        scored: List[Tuple[Optional[float], str, Memory]] = []
        if op.query:
            depth = MAX_PAGE if op.filter else min(MAX_PAGE, max(wanted, 1))
            result = self.hs.recall([b for b, _ in banks], op.query, k=depth, tags=[TAG])
            scored = [(r.score.total, r.bank, r.memory) for r in result.items]
        else:
            for bank, _ in banks:
                page = self.hs.bank(bank).list(tag=TAG, limit=MAX_PAGE)
                scored.extend((None, bank, m) for m in page.items)
            scored.sort(key=lambda s: -s[2].created_at)
        items = []
        for score, bank, m in scored:
            if TAG not in m.tags or m.meta(KEY) is None:
                continue
            item = self._item(namespaces[bank], m, score=score, search=True)
            if op.filter and not all(_matches(item.value.get(k), v) for k, v in op.filter.items()):
                continue
            items.append(item)
        return items[op.offset:wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> List[Tuple[str, ...]]:
        def matches(ns: Tuple[str, ...], c: MatchCondition) -> bool:
            path = tuple(c.path)
            if len(ns) < len(path):
                return False
            pairs = zip(ns, path) if c.match_type == "prefix" else zip(reversed(ns), reversed(path))
            return all(p == "*" or n == p for n, p in pairs)

        found = set()
        for _, ns in self._banks(()):
            if all(matches(ns, c) for c in op.match_conditions or ()):
                found.add(ns[:op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset:op.offset + op.limit]

