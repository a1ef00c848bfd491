"""Regression tests for the MCP findings of the 0.1 hard-edges report (`finding_NN` in each name)."""

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import anyio
from mcp import Client

from conftest import hindsight_bin, stdio_server

SECRET = "PLATYPUS-9981"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [hindsight_bin(), "--db", str(db), "--bank", "agent", *args], capture_output=True, text=True, timeout=300
    )


def files_holding(db: Path, needle: str) -> list[str]:
    """Which of the database file, its -wal and its -shm hold `needle`."""
    found = []
    for path in [db, Path(f"{db}-wal"), Path(f"{db}-shm")]:
        if path.exists() and needle.encode() in path.read_bytes():
            found.append(path.name)
    return found


async def call(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool} failed: {result.content}"
    return result.structured_content


def test_finding_03_04_hard_forget_leaves_no_byte_while_the_server_holds_the_database(http_server, tmp_path):
    server = http_server(bank="agent")
    db = tmp_path / "http.db"

    async def remember() -> tuple[str, str]:
        async with Client(server.url) as client:
            summary = await call(
                client,
                "memory_summarize",
                {
                    "goal": "Set up the office guest network",
                    "outcome": "success",
                    "steps": [
                        {"type": "thought", "text": "Log in to the router admin page"},
                        {"type": "answer", "text": "The guest network is up"},
                    ],
                    "facts": [f"The guest wifi network name is {SECRET}"],
                    "force": True,
                },
            )
            # The result names the task but never echoes its steps (finding 20).
            assert SECRET not in json.dumps(summary["task"])
            kept = [i for i in summary["items"] if SECRET in i["content"]]
            assert kept, summary
            return kept[0]["id"], summary["task"]["id"]

    memory_id, task_id = anyio.run(remember)
    assert files_holding(db, SECRET), "the test needs the secret on disk before the forget"

    # Another process erases it while the server keeps the database open.
    forgot = cli(db, "forget", memory_id, "--hard")
    assert forgot.returncode == 0, forgot.stderr
    shown = cli(db, "task", "show", task_id)
    assert shown.returncode == 0, shown.stderr
    assert SECRET not in shown.stdout and "[erased" in shown.stdout, shown.stdout
    assert files_holding(db, SECRET) == []

    async def search_after() -> None:
        async with Client(server.url) as client:
            found = await call(client, "memory_search", {"query": "guest wifi password", "k": 5})
            assert SECRET not in json.dumps(found)
            # The server's own hard erase checkpoints too.
            written = await call(client, "memory_write", {"content": f"The backup door code is {SECRET}-B"})
            await call(client, "memory_forget", {"id": written["id"], "hard": True})

    anyio.run(search_after)
    assert files_holding(db, SECRET) == []
    assert server.stop() == 0
    assert files_holding(db, SECRET) == []


def test_finding_04_task_delete_erases_the_task_record(tmp_path):
    db = tmp_path / "task.db"
    params_db = str(db)

    async def main() -> str:
        params = stdio_server("mcp", "--db", params_db, "--bank", "agent")
        async with Client(params) as client:
            summary = await call(
                client,
                "memory_summarize",
                {"goal": f"Rotate the key {SECRET}", "outcome": "failure", "steps": [{"type": "thought", "text": "x y"}]},
            )
            task_id = summary["task"]["id"]
            deleted = await call(client, "memory_task_delete", {"task_id": task_id})
            assert deleted == {"task_id": task_id, "deleted": "hard"}
            missing = await client.call_tool("memory_task_delete", {"task_id": task_id})
            assert missing.is_error and "not found" in missing.content[0].text
            return task_id

    task_id = anyio.run(main)
    assert cli(db, "task", "show", task_id).returncode != 0
    assert SECRET not in Path(db).read_bytes().decode("latin-1")


def raw_stdio(db: Path, lines: list[str]) -> list[dict]:
    done = subprocess.run(
        [hindsight_bin(), "mcp", "--db", str(db)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_finding_27_stdio_answers_garbage_and_bad_arguments_with_json_rpc_errors(tmp_path):
    replies = raw_stdio(
        tmp_path / "stdio.db",
        [
            "this is not json",
            json.dumps(INIT),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "memory_search", "arguments": "notanobject"},
                }
            ),
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        ],
    )
    by_id = {json.dumps(r.get("id")): r for r in replies}
    assert by_id["null"]["error"]["code"] == -32700
    assert by_id["2"]["error"]["code"] == -32602
    assert "arguments" in by_id["2"]["error"]["message"]
    # The server goes on answering after both.
    assert "memory_search" in json.dumps(by_id["3"]["result"])


def post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read(2048)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_finding_22_http_checks_origin_parses_json_and_caps_sessions(http_server):
    server = http_server(bank="agent")
    init = json.dumps(INIT).encode()

    status, _, _ = post(server.url, init, {"Origin": "http://evil.example.com"})
    assert status == 403
    status, headers, _ = post(server.url, init, {"Origin": "http://localhost:5173"})
    assert status == 200 and headers.get("mcp-session-id")

    status, _, body = post(server.url, b"{bad json")
    assert status == 400
    assert json.loads(body)["error"]["code"] == -32700

    # 64 live sessions at most (one is open already); the next is refused, not queued.
    statuses = [post(server.url, init)[0] for _ in range(64)]
    assert statuses.count(200) == 63 and statuses[-1] == 503, statuses
    assert server.stop() == 0


def test_finding_20_task_caps_and_no_echo(tmp_path):
    big = "x" * 30_000

    async def main():
        params = stdio_server("mcp", "--db", str(tmp_path / "big.db"))
        async with Client(params) as client:
            too_many = await client.call_tool(
                "memory_summarize",
                {"goal": "g", "outcome": "success", "steps": [{"type": "thought", "text": f"s {i}"} for i in range(1001)]},
            )
            assert too_many.is_error and "steps" in too_many.content[0].text, too_many.content
            too_big = await client.call_tool(
                "memory_summarize",
                {"goal": "g", "outcome": "success", "steps": [{"type": "thought", "text": big} for _ in range(40)]},
            )
            assert too_big.is_error and "bytes" in too_big.content[0].text, too_big.content
            fine = await call(
                client,
                "memory_summarize",
                {"goal": "g", "outcome": "success", "steps": [{"type": "thought", "text": big[:3000]} for _ in range(20)]},
            )
            assert fine["task"]["steps"] == 20
            assert len(json.dumps(fine)) < 20_000, "the result echoes the task's steps"

    anyio.run(main)
    # A refused trajectory leaves no half-filled task behind: only the accepted one is there.
    listed = subprocess.run(
        [hindsight_bin(), "--db", str(tmp_path / "big.db"), "task", "list", "--all", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["tasks"]) == 1, listed.stdout
