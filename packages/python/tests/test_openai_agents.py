"""The OpenAI Agents SDK adapters over the installed package and the real `openai-agents` (the
`[openai-agents]` extra), the model being the scripted OpenAI-compatible server."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.exceptions import UserError
from openai import AsyncOpenAI
from scripted_llm import ScriptedServer, completion, tool_call

from hindsight_memory import Hindsight
from hindsight_memory.openai_agents import HindsightSession, memory_tools, remember_run

set_tracing_disabled(True)


def model(server):
    return OpenAIChatCompletionsModel(model="scripted", openai_client=AsyncOpenAI(base_url=server.url, api_key="t"))


def test_the_model_calls_recall_and_gets_the_stored_memory(hs):
    bank = hs.bank("oa-tools")
    stored = bank.retain("The vendor's CSV export needs encoding='utf-8-sig'")[0]
    answers = [tool_call("recall", {"query": "vendor CSV encoding"}), completion("Read it with utf-8-sig.")]
    with ScriptedServer(answers) as server:
        agent = Agent(name="helper", instructions="Recall before answering.", model=model(server),
                      tools=memory_tools(hs, bank="oa-tools"))
        result = Runner.run_sync(agent, "Which encoding does the vendor CSV need?")
        tool_message = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"][0]
    assert result.final_output == "Read it with utf-8-sig."
    recalled = json.loads(tool_message["content"])
    assert recalled[0]["id"] == stored.id and "utf-8-sig" in recalled[0]["content"]

    # The run's trajectory ends as a task of the bank.
    end = remember_run(bank, result, goal="answer the CSV question", force=True)
    assert end.task.outcome == "success"
    assert [s.kind for s in end.task.steps] == ["user-message", "tool-call", "tool-result", "answer"]
    assert any(t.tool == "recall" for t in end.task.tool_calls)
    bank.delete_bank()


def test_remember_and_forget_tools(hs):
    bank = hs.bank("oa-write")
    answers = [tool_call("remember", {"content": "The user prefers metric units", "tags": ["pref"]}),
               completion("Noted.")]
    with ScriptedServer(answers) as server:
        agent = Agent(name="helper", model=model(server), tools=memory_tools(hs, bank="oa-write"))
        Runner.run_sync(agent, "Remember that I prefer metric units.")
    [memory] = bank.list().items
    assert memory.content == "The user prefers metric units" and "pref" in memory.tags

    # An unknown id comes back to the model as the tool's error; the stored memory stays.
    answers = [tool_call("forget", {"id": "m-no-such"}), tool_call("forget", {"id": memory.id}, "call_2"),
               completion("Done.")]
    with ScriptedServer(answers) as server:
        agent = Agent(name="helper", model=model(server), tools=memory_tools(hs, bank="oa-write"))
        Runner.run_sync(agent, "Forget it.")
        first = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"][0]
    assert "not-found" in first["content"] or "not found" in first["content"].lower()
    assert bank.list().items == [] and bank.get(memory.id).status == "archived"
    bank.delete_bank()


SESSION_PROGRAM = """
import asyncio, json, sys
from hindsight_memory import Hindsight
from hindsight_memory.openai_agents import HindsightSession
with Hindsight.open(db=sys.argv[1], llm=None) as hs:
    s = HindsightSession("chat-7", hs)
    if sys.argv[2] == "write":
        asyncio.run(s.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
        asyncio.run(s.add_items([{"role": "user", "content": "my name is Ada"}]))
    else:
        print(json.dumps(asyncio.run(s.get_items())))
"""


def test_a_session_survives_a_process_restart(tmp_path):
    db = str(tmp_path / "session.db")
    subprocess.run([sys.executable, "-c", SESSION_PROGRAM, db, "write"], check=True)
    out = subprocess.run([sys.executable, "-c", SESSION_PROGRAM, db, "read"], check=True, capture_output=True,
                         text=True)
    assert json.loads(out.stdout) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                      {"role": "user", "content": "my name is Ada"}]


def test_session_items_pop_clear_and_a_run_with_history(hs):
    session = HindsightSession("oa-s1", hs)
    assert asyncio.run(session.get_items()) == []
    with ScriptedServer([completion("Hello Ada."), completion("Your name is Ada.")]) as server:
        agent = Agent(name="helper", model=model(server))
        Runner.run_sync(agent, "My name is Ada.", session=session)
        Runner.run_sync(agent, "What is my name?", session=session)
        second = server.requests[1]["body"]["messages"]
    # The second turn's request carried the first turn, read back from the bank.
    assert [m.get("content") for m in second if m["role"] == "user"] == ["My name is Ada.", "What is my name?"]
    items = asyncio.run(session.get_items())
    assert len(items) == 4 and asyncio.run(session.get_items(limit=1)) == items[-1:]
    assert asyncio.run(session.pop_item()) == items[-1]
    assert asyncio.run(session.get_items()) == items[:-1]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None


def test_bad_input_is_a_user_error_and_loses_nothing(hs):
    with pytest.raises(UserError, match="bank"):
        memory_tools(hs, bank=None)
    with pytest.raises(UserError, match="bank"):
        memory_tools(hs, bank="no spaces allowed")
    with pytest.raises(UserError, match="session_id"):
        HindsightSession("bad id!", hs)
    session = HindsightSession("oa-s2", hs)
    asyncio.run(session.add_items([{"role": "user", "content": "kept"}]))
    with pytest.raises(UserError, match=r"items\[1\]: not JSON-serialisable"):
        asyncio.run(session.add_items([{"role": "user", "content": "fine"}, {"role": "user", "content": {1, 2}}]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "kept"}]
    with pytest.raises(UserError, match="bank"):
        remember_run("oa-s2", None)
    asyncio.run(session.clear_session())
