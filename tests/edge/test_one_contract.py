"""One table of tools, one dispatcher: `hindsight serve --http --auth` and the edge component
(under each host) list the same tools with the same descriptions and schemas, and every tool's
right is enforced alike on both, including what a principal that may write a bank but not read
it learns from the answer (hard edge 0.2 #1)."""

import json

import anyio
import pytest

from test_edge import HttpServer, client

WRITER = "contract-writer-token-0123456789"
READER = "contract-reader-token-0123456789"
DROPBOX = "contract-dropbox-token-0123456789"
AUTH = {"principals": [
    {"name": "writer", "token": WRITER, "read": ["*"], "write": ["*"]},
    {"name": "reader", "token": READER, "read": ["*"], "write": []},
    {"name": "dropbox", "token": DROPBOX, "read": [], "write": ["shared"]},
]}

# Each tool, what it needs (as the table says), and arguments on bank "shared".
CALLS = {
    "memory_write": ("write", {"content": "A planted note about the X-200"}),
    "memory_search": ("read", {"query": "X-200 firmware"}),
    "memory_summarize": ("write", {"goal": "update the X-200", "outcome": "success",
                                   "steps": [{"type": "thought", "text": "check the battery"}]}),
    "memory_forget": ("write", {"id": "m-not-there-000000"}),
    "memory_feedback": ("write", {"ids": ["ID"], "outcome": "success"}),
    "memory_task_delete": ("write", {"task_id": "t-not-there-000000"}),
    "memory_history": ("read", {"id": "ID"}),
    "memory_share": ("read", {"id": "ID", "to": "agent:elsewhere"}),
    "memory_list": ("read", {}),
    "memory_get": ("read", {"id": "ID"}),
    "memory_correct": ("write", {"id": "ID", "text": "The X-200 update needs the battery above 60%"}),
    "memory_explain": ("read", {"id": "ID"}),
    "memory_audit": ("read", {}),
    "memory_stats": ("read", {}),
    "memory_restore": ("write", {"id": "ID"}),
    "memory_unsupersede": ("write", {"id": "ID"}),
}
SECRET = "The X-200 firmware update fails unless the battery is above 50% (code PURPLE-OCTOPUS-77)"


async def tools_of(url: str) -> list[tuple]:
    async with client(url, WRITER) as c:
        listed = await c.list_tools()
        return sorted((t.name, t.description, json.dumps(t.input_schema, sort_keys=True)) for t in listed.tools)


async def rights(url: str):
    async with client(url, WRITER) as w, client(url, READER) as r, client(url, DROPBOX) as d:
        written = await w.call_tool("memory_write", {"content": SECRET, "bank": "shared"})
        assert not written.is_error, written.content[0].text
        secret = written.structured_content["id"]
        for tool, (right, args) in CALLS.items():
            args = {k: (secret if v == "ID" else v) for k, v in args.items()}
            args = {**args, "bank": "shared"}
            if right == "read":
                denied = await d.call_tool(tool, args)
                assert denied.is_error, f"{tool}: a principal without read was allowed"
                assert 'no read right on bank "shared"' in denied.content[0].text, (tool, denied.content[0].text)
            else:
                denied = await r.call_tool(tool, args)
                assert denied.is_error, f"{tool}: a principal without write was allowed"
                assert 'no write right on bank "shared"' in denied.content[0].text, (tool, denied.content[0].text)
                # Allowed for the write-only principal; its answer names nothing stored.
                answer = await d.call_tool(tool, args)
                text = answer.content[0].text
                assert "PURPLE-OCTOPUS" not in text and "battery is above 50" not in text, (tool, text)
        # A duplicate written by the write-only principal is not reported as one (no oracle).
        again = await d.call_tool("memory_write", {"content": SECRET, "bank": "shared"})
        assert not again.is_error and again.structured_content["action"] == "accepted", again.content[0].text
        # The owner still finds it, untouched by what the others tried.
        found = await w.call_tool("memory_search", {"query": "X-200 firmware battery", "bank": "shared"})
        assert found.structured_content["items"][0]["id"] == secret


@pytest.fixture
def cli_server(tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps(AUTH))
    server = HttpServer(tmp_path / "cli.db", "default", 1, ["--auth", str(auth)])
    yield server
    server.stop()


def test_both_servers_list_the_same_tools(edge, cli_server, tmp_path):
    served = edge(tmp_path / "edge", auth=AUTH)
    assert anyio.run(tools_of, served.url) == anyio.run(tools_of, cli_server.url)


def test_finding_0_2_01_every_tools_right_holds_on_the_edge(edge, tmp_path):
    served = edge(tmp_path / "edge", auth=AUTH)
    anyio.run(rights, served.url)


def test_finding_0_2_01_every_tools_right_holds_on_the_cli_server(cli_server):
    anyio.run(rights, cli_server.url)
