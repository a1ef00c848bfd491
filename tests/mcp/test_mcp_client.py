"""hindsight's MCP server driven by the official Python MCP client, over stdio and over HTTP."""

import json

import anyio
import jsonschema
from mcp import Client

from conftest import stdio_server

TOOLS = {
    "memory_write", "memory_search", "memory_summarize", "memory_forget", "memory_feedback", "memory_history",
    "memory_task_delete", "memory_unsupersede", "memory_share", "memory_list", "memory_get", "memory_correct",
    "memory_explain", "memory_audit", "memory_health", "memory_stats", "memory_restore", "memory_banks",
}

MEMORIES = [
    {
        "content": "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV export: "
        "without it the first header comes out garbled",
        "kind": "procedural",
        "task_type": "data-cleaning",
        "tags": ["csv", "encoding"],
        "importance": 0.8,
    },
    {
        "content": "The user wants every report in metric units, never imperial",
        "kind": "semantic",
        "source": "user-explicit",
        "importance": 0.9,
    },
    {
        "content": "Deploying to the staging cluster failed twice because the kubectl context pointed at "
        "production; switching the context first fixed it",
        "kind": "episodic",
        "task_type": "deployment",
        "metadata": {"ticket": "OPS-112"},
    },
]


async def call(client: Client, tool: str, args: dict) -> dict:
    """A tool call that must succeed: its structured result."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool} failed: {result.content}"
    # The text content carries the same JSON, for clients that ignore structured content.
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def call_error(client: Client, tool: str, args: dict) -> str:
    """A tool call that must fail as a tool error (not a protocol error): its message."""
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    return result.content[0].text


async def scenario(client: Client) -> None:
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        schema = tool.input_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert len(tool.description) > 40, tool.name
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    write = tools["memory_write"].input_schema
    assert write["required"] == ["content"]
    assert write["properties"]["kind"]["enum"] == ["episodic", "semantic", "procedural"]
    jsonschema.validate(MEMORIES[0], write)

    ids = []
    for memory in MEMORIES:
        outcome = await call(client, "memory_write", memory)
        assert outcome["action"] == "created", outcome
        ids.append(outcome["id"])

    found = await call(client, "memory_search", {"query": "the CSV file's headers are garbled", "k": 3})
    assert found["items"][0]["id"] == ids[0]
    assert "encoding='utf-8-sig'" in found["prompt"]
    deploy = await call(client, "memory_search", {"query": "kubectl deploy to staging", "k": 3})
    assert deploy["items"][0]["id"] == ids[2]
    assert deploy["items"][0]["metadata"] == {"ticket": "OPS-112"}

    history = await call(client, "memory_history", {"id": ids[1]})
    assert [e["event"] for e in history["entries"]] == ["created"]
    feedback = await call(client, "memory_feedback", {"ids": [ids[1]], "outcome": "success"})
    assert feedback["memories"][0]["id"] == ids[1]

    forgotten = await call(client, "memory_forget", {"id": ids[0], "hard": True})
    assert {k: forgotten[k] for k in ("id", "forgotten")} == {"id": ids[0], "forgotten": "hard"}
    # The receipt: what was erased, and nothing left behind.
    assert forgotten["erased"]["memories"] == [f"agent/{ids[0]}"] and forgotten["erased"]["remaining"] == []
    after = await call(client, "memory_search", {"query": "the CSV file's headers are garbled", "k": 3})
    assert ids[0] not in [item["id"] for item in after["items"]]
    assert "utf-8-sig" not in after["prompt"]
    assert "not found" in await call_error(client, "memory_history", {"id": ids[0]})

    # No LLM is configured: the trajectory (6 steps: more than the engine's 5) is distilled by rules.
    summary = await call(
        client,
        "memory_summarize",
        {
            "goal": "Convert the sales export to parquet",
            "task_type": "data-cleaning",
            "outcome": "success",
            "steps": [
                {"type": "thought", "text": "Load the CSV with pandas, then write parquet"},
                {"type": "tool-call", "tool": "python", "text": "pd.read_csv('sales.csv')"},
                {
                    "type": "tool-result",
                    "tool": "python",
                    "error": True,
                    "text": "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0",
                },
                {"type": "tool-call", "tool": "python", "text": "pd.read_csv('sales.csv', encoding='utf-16')"},
                {"type": "tool-result", "tool": "python", "text": "12000 rows"},
                {"type": "answer", "text": "Wrote sales.parquet; the export is UTF-16 encoded"},
            ],
            "facts": ["The sales export is UTF-16 encoded"],
        },
    )
    assert summary["method"] == "rules", summary
    kept = [item for item in summary["items"] if item["action"] == "created"]
    assert any("UTF-16" in item["content"] for item in kept), summary
    assert any("UnicodeDecodeError" in item["content"] for item in kept), summary
    recalled = await call(client, "memory_search", {"query": "which encoding does the sales export use", "k": 5})
    assert any("UTF-16" in item["content"] for item in recalled["items"])

    # Errors are tool errors naming the problem; nothing already stored is lost.
    assert "kind: unknown value" in await call_error(client, "memory_write", {"content": "x y z", "kind": "thought"})
    assert "content" in await call_error(client, "memory_write", {"kind": "semantic"})
    assert "colour" in await call_error(client, "memory_write", {"content": "a b c", "colour": "red"})
    assert "not found" in await call_error(client, "memory_forget", {"id": "m-does-not-exist"})
    assert "k: must be from 1" in await call_error(client, "memory_search", {"query": "x", "k": 0})
    assert "importance: must be a number from 0 to 1" in await call_error(
        client, "memory_write", {"content": "Reports go out on Mondays", "importance": 7}
    )
    assert "task_id" in await call_error(
        client, "memory_summarize", {"task_id": "t1", "goal": "g", "outcome": "success"}
    )
    still = await call(client, "memory_search", {"query": "metric units for reports", "k": 1})
    assert still["items"][0]["id"] == ids[1]

    # Banks are separate tenants: the same server, another bank, sees none of it.
    other = await call(client, "memory_search", {"query": "metric units for reports", "k": 5, "bank": "other"})
    assert other["items"] == []
    assert "not found" in await call_error(client, "memory_history", {"id": ids[1], "bank": "other"})

    # See and correct: list, correct (the old memory leaves recall), explain, audit, restore.
    listed = await call(client, "memory_list", {"limit": 2})
    assert len(listed["items"]) == 2 and listed["next_cursor"] and listed["total"] >= 3
    rest = await call(client, "memory_list", {"limit": 50, "cursor": listed["next_cursor"]})
    assert not {m["id"] for m in rest["items"]} & {m["id"] for m in listed["items"]}
    fixed = await call(client, "memory_correct", {"id": ids[1], "text": "The user wants every report in imperial units"})
    assert fixed["superseded"] == ids[1] and fixed["memory"]["source"] == "user-feedback"
    units = await call(client, "memory_search", {"query": "which units for reports", "k": 3})
    assert ids[1] not in [item["id"] for item in units["items"]]
    assert units["items"][0]["id"] == fixed["memory"]["id"] and units["items"][0]["handle"] == "m1"
    assert (await call(client, "memory_get", {"id": ids[1]}))["status"] == "superseded"
    explained = await call(client, "memory_explain", {"id": fixed["memory"]["id"]})
    assert explained["provenance"]["supersedes"] == [ids[1]] and explained["counts"]["recalled"] == 1
    audit = await call(client, "memory_audit", {})
    assert audit["log_entries"] >= 1
    await call(client, "memory_forget", {"id": ids[2]})
    assert (await call(client, "memory_restore", {"id": ids[2]}))["status"] == "active"
    assert (await call(client, "memory_stats", {}))["active"] >= 3
    assert "agent" in (await call(client, "memory_banks", {}))["banks"]
    used = await call(client, "memory_feedback", {"ids": [ids[2]], "outcome": "used"})
    assert used["memories"][0]["id"] == ids[2]
    assert "status" in await call_error(client, "memory_list", {"status": "lost"})


def test_over_stdio(tmp_path):
    params = stdio_server("mcp", "--db", str(tmp_path / "stdio.db"), "--bank", "agent")

    async def main():
        async with Client(params) as client:
            await scenario(client)

    anyio.run(main)


def test_over_http(http_server):
    server = http_server(bank="agent")

    async def main():
        async with Client(server.url) as client:
            await scenario(client)

    anyio.run(main)
    assert server.stop() == 0
