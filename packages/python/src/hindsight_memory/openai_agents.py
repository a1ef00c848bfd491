"""hindsight in the OpenAI Agents SDK: a ``Session``, memory tools, and a run's lesson kept.

    from agents import Agent, Runner
    from hindsight_memory import Hindsight
    from hindsight_memory.openai_agents import HindsightSession, memory_tools, remember_run

    hs = Hindsight.open(db="memory.db")
    agent = Agent(name="helper", instructions="Recall before you answer.", tools=memory_tools(hs, bank="agent"))
    result = Runner.run_sync(agent, "Which CSV encoding did the vendor need?",
                             session=HindsightSession("chat-1", hs))
    remember_run(hs.bank("agent"), result, goal="answer about the vendor CSV")

* :class:`HindsightSession` keeps a conversation's items (one memory each, in the bank
  ``session:<id>`` unless told another), so a session survives a restart of the process;
* :func:`memory_tools` gives the agent ``remember``, ``recall`` and ``forget`` over one bank;
* :func:`remember_run` ends a hindsight task with the run's steps, so its trajectory is distilled
  into what worked and what failed (with an LLM lent to hindsight, or by rules without one).
"""

import json
from typing import Any, Dict, List, Optional

from agents import FunctionTool, RunResult, function_tool
from agents.exceptions import UserError
from agents.items import ItemHelpers, MessageOutputItem, ToolCallItem, ToolCallOutputItem

from .client import BANK_ID, Bank, Hindsight
from .errors import HindsightError

__all__ = ["HindsightSession", "memory_tools", "remember_run"]

SESSION_TAG = "agents-session"
ITEM = "agents.item"
SEQ = "agents.seq"
MAX_PAGE = 1000


def _bank(hs: Hindsight, bank: Optional[str], field: str = "bank") -> Bank:
    if not isinstance(hs, Hindsight):
        raise UserError(f"hs: must be an open hindsight_memory.Hindsight, got {type(hs).__name__}")
    if not isinstance(bank, str) or not BANK_ID.match(bank):
        raise UserError(f"{field}: {bank!r} must be 1 to 128 characters of A-Z a-z 0-9 - _ . :")
    return hs.bank(bank)


def _item_text(item: Dict[str, Any]) -> str:
    """What an item says, for the memory's text (its JSON when it has no words)."""
    content = item.get("content")
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if any(p.strip() for p in parts):
            return "\n".join(parts)
    output = item.get("output")
    if isinstance(output, str) and output.strip():
        return output
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


class HindsightSession:
    """An Agents SDK ``Session`` kept in a hindsight bank: each conversation item one memory
    (stored as given, tagged with the session), ordered by a sequence number, so the history is
    read back in order after a restart. ``bank`` defaults to ``session:<session_id>``: a
    conversation's raw items stay out of the banks the agent recalls lessons from."""

    session_settings = None

    def __init__(self, session_id: str, hs: Hindsight, bank: Optional[str] = None):
        if not isinstance(session_id, str) or not session_id:
            raise UserError("session_id: must be a non-empty string")
        self.session_id = session_id
        self._bank = _bank(hs, bank if bank is not None else f"session:{session_id}",
                           "bank" if bank is not None else "session_id")
        self._tag = f"{SESSION_TAG}:{session_id}"

    def _stored(self) -> List[Any]:
        items, cursor = [], None
        while True:
            page = self._bank.list(tag=self._tag, limit=MAX_PAGE, cursor=cursor)
            items.extend(m for m in page.items if m.meta(SEQ) is not None)
            cursor = page.next_cursor
            if not cursor:
                break
        return sorted(items, key=lambda m: int(m.meta(SEQ)))

    async def get_items(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        stored = self._stored()
        if limit is not None:
            stored = stored[-limit:] if limit > 0 else []
        return [json.loads(m.meta(ITEM)) for m in stored]

    async def add_items(self, items: List[Dict[str, Any]]) -> None:
        if not items:
            return
        encoded = []
        for i, item in enumerate(items):
            try:
                encoded.append(json.dumps(item, ensure_ascii=False, allow_nan=False))
            except (TypeError, ValueError) as e:
                raise UserError(f"items[{i}]: not JSON-serialisable: {e}") from None
        stored = self._stored()
        first = int(stored[-1].meta(SEQ)) + 1 if stored else 0
        # One retain call: all the items or none.
        self._bank.retain([
            {"content": _item_text(item), "kind": "episodic", "force": True, "tags": [self._tag],
             "metadata": [(SEQ, str(first + i)), (ITEM, text)]}
            for i, (item, text) in enumerate(zip(items, encoded))
        ])

    async def pop_item(self) -> Optional[Dict[str, Any]]:
        stored = self._stored()
        if not stored:
            return None
        last = stored[-1]
        self._bank.erase(last.id)
        return json.loads(last.meta(ITEM))

    async def clear_session(self) -> None:
        for m in self._stored():
            self._bank.erase(m.id)


def _tool_error(_context: Any, error: Exception) -> str:
    """hindsight's own message goes back to the model (`not-found: no memory m-…`), so it can
    correct its call; the SDK's default says only that the tool failed."""
    return f"error: {error}"


def memory_tools(hs: Hindsight, bank: Optional[str] = None, k: int = 5) -> List[FunctionTool]:
    """``remember``, ``recall`` and ``forget`` over ``bank``, as Agents SDK function tools. A
    tool's bad input (an unknown id, an empty text) comes back to the model as the tool's error
    message (hindsight's, naming the field or the id)."""
    b = _bank(hs, bank)

    @function_tool(failure_error_function=_tool_error)
    def remember(content: str, tags: Optional[List[str]] = None) -> str:
        """Keep a lesson, fact or preference for later tasks.

        Args:
            content: What to remember, in one or two sentences.
            tags: Optional labels to find it by.
        """
        outcome = b.retain({"content": content, "tags": list(tags or []), "source": "agent-inference"})[0]
        return json.dumps({"id": outcome.id, "action": outcome.action, "reason": outcome.reason})

    @function_tool(failure_error_function=_tool_error)
    def recall(query: str) -> str:
        """Recall what is known that matters for a question or task.

        Args:
            query: The question or the task at hand.
        """
        result = b.recall(query, k=k)
        return json.dumps([{"id": r.memory.id, "content": r.memory.content, "score": round(r.score.total, 3)}
                           for r in result.items], ensure_ascii=False)

    @function_tool(failure_error_function=_tool_error)
    def forget(id: str) -> str:  # noqa: A002 - the tool's argument, as the model sees it
        """Forget a memory that is wrong or no longer true (it can be restored).

        Args:
            id: The memory's id, as recall returned it.
        """
        b.forget(id)
        return json.dumps({"forgotten": id})

    return [remember, recall, forget]


def remember_run(bank: Bank, result: RunResult, goal: Optional[str] = None, outcome: str = "success",
                 detail: Optional[str] = None, force: bool = False):
    """Ends a hindsight task made of a finished run: the input as the user's message, each tool
    call and result, the final answer. Returns the task's end (what was distilled). A short run
    is distilled only with ``force`` (hindsight's thresholds: more than 5 steps or 3 tool calls)."""
    if not isinstance(bank, Bank):
        raise UserError(f"bank: must be a hindsight_memory.Bank, got {type(bank).__name__}")
    asked = result.input if isinstance(result.input, str) else "\n".join(
        _item_text(i) for i in result.input if isinstance(i, dict))
    steps: List[Dict[str, Any]] = []
    if asked.strip():
        steps.append({"kind": "user-message", "text": asked})
    for item in result.new_items:
        if isinstance(item, ToolCallItem):
            raw = item.raw_item
            name = getattr(raw, "name", None) or (raw.get("name") if isinstance(raw, dict) else None) or "tool"
            args = getattr(raw, "arguments", None) or (raw.get("arguments") if isinstance(raw, dict) else "") or ""
            steps.append({"kind": "tool-call", "tool": name, "text": str(args) or name})
        elif isinstance(item, ToolCallOutputItem):
            steps.append({"kind": "tool-result", "text": str(item.output) or "(empty)"})
        elif isinstance(item, MessageOutputItem):
            text = ItemHelpers.text_message_output(item)
            if text.strip():
                steps.append({"kind": "answer", "text": text})
    try:
        return bank.distill_trajectory(goal or asked or "agent run", outcome, steps, detail=detail, force=force)
    except HindsightError as e:
        raise UserError(str(e)) from e
