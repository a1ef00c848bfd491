"""hindsight-edge.wasm under the stock wasmtime CLI (`wasmtime serve`, no code of ours in the
host), and hindsight-edge-spin.wasm under the Spin stand-in (tests/spin-host), driven by the
official MCP client: what is written is found, survives a restart on the same data and concurrent
writers (instances sharing the store), a hard-forgotten text leaves the store's files, requests
without a valid token are refused, the answers match `hindsight serve --http` on the same
memories, the model built into the component serves unless the data directory brings another,
and a configured LLM is called over outgoing wasi:http."""

import importlib.util
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import MODELS, READER, TOKEN, principals

# tests/mcp's `hindsight serve --http` starter, for the parity test (its conftest, by path: the
# module name is taken by this directory's).
def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_REPO = Path(__file__).resolve().parents[2]
HttpServer = _load("mcp_conftest", _REPO / "tests" / "mcp" / "conftest.py").HttpServer
# The Python package's scripted OpenAI-compatible server, for the LLM test.
_scripted_llm = _load("scripted_llm", _REPO / "packages" / "python" / "tests" / "scripted_llm.py")

NOW = "2026-06-01T12:00:00Z"
MEMORIES = [
    {"content": "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV export (headers were garbled otherwise)",
     "kind": "procedural", "tags": ["csv"]},
    {"content": "The user wants every report as a PDF, never as a Word document", "kind": "semantic",
     "source": "user-explicit"},
    {"content": "Deploying to staging failed because the VPN was down; retry once it is up", "failure_type": "transient"},
    {"content": "The billing API rate-limits at 100 requests per minute per key", "kind": "semantic"},
    {"content": "Unit tests must run with TZ=UTC or the date parsing tests fail", "kind": "procedural"},
    {"content": "The user prefers short answers with the command first", "kind": "semantic", "source": "user-explicit"},
]
QUERIES = ["how do I read the vendor csv file", "what format should the report be in",
           "why did the staging deploy fail", "rate limit of the billing api", "running the unit tests"]


def client(url: str, token: str = TOKEN) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120)


def post_status(url: str, token: str | None) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=120) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def write_all(c: Client, memories, bank: str = "default") -> list[dict]:
    outcomes = []
    for m in memories:
        result = await c.call_tool("memory_write", {**m, "occurred_at": NOW, "bank": bank})
        assert not result.is_error, result.content[0].text
        outcomes.append(result.structured_content)
    return outcomes


async def search(c: Client, query: str, bank: str = "default", k: int = 3) -> dict:
    result = await c.call_tool("memory_search", {"query": query, "k": k, "now": NOW, "bank": bank})
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_written_memories_are_found_and_survive_a_restart(edge, tmp_path):
    server = edge()
    assert server.health() == 200

    async def before():
        async with client(server.url) as c:
            outcomes = await write_all(c, MEMORIES)
            assert [o["action"] for o in outcomes] == ["created"] * len(MEMORIES)
            found = await search(c, "how do I read the vendor csv file")
            assert found["items"][0]["content"].startswith("pandas.read_csv"), found["items"]
            assert found["items"][0]["agent_id"] == "writer"
            assert "[m1]" in found["prompt"] or "utf-8-sig" in found["prompt"]
            return outcomes[0]["id"]

    first = anyio.run(before)
    server.stop()

    again = edge(tmp_path / "data")

    async def after():
        async with client(again.url) as c:
            found = await search(c, "what format should the report be in")
            assert "PDF" in found["items"][0]["content"], found["items"]
            got = await c.call_tool("memory_get", {"id": first})
            assert got.structured_content["content"].startswith("pandas.read_csv")
            stats = await c.call_tool("memory_stats", {})
            assert stats.structured_content["active"] == len(MEMORIES), stats.structured_content
            forgotten = await c.call_tool("memory_forget", {"id": first, "hard": True})
            assert not forgotten.is_error, forgotten.content[0].text

    anyio.run(after)
    again.stop()
    # The hard-forgotten text is in no file of the store (the file store's log is folded into a
    # new snapshot, Spin's SQLite overwrites deleted pages), and a restart answers without it.
    stored = [p for p in tmp_path.rglob("*") if p.is_file() and p.name not in ("model.onnx", "tokenizer.json")]
    assert stored, "the store wrote files"
    for path in stored:
        assert b"encoding='utf-8-sig'" not in path.read_bytes(), path
    third = edge(tmp_path / "data")

    async def gone():
        async with client(third.url) as c:
            found = await search(c, "how do I read the vendor csv file", k=10)
            assert all(not i["content"].startswith("pandas.read_csv") for i in found["items"])

    anyio.run(gone)


def test_requests_without_a_valid_token_are_refused(edge, tmp_path):
    server = edge()
    assert post_status(server.url, None) == 401
    assert post_status(server.url, "not-a-token-of-anyone-at-all") == 401
    assert post_status(server.url, TOKEN) == 200
    assert server.health() == 200

    async def reader():
        async with client(server.url, READER) as c:
            result = await c.call_tool("memory_write", {"content": "planted by the reader"})
            assert result.is_error
            assert 'no write right on bank "default"' in result.content[0].text, result.content[0].text

    anyio.run(reader)
    # Without auth.json every request but /health is refused, token or not.
    bare = edge(tmp_path / "bare", auth=None)
    assert bare.health() == 200
    assert post_status(bare.url, TOKEN) == 401


def test_concurrent_writers_lose_nothing(edge, tmp_path):
    server = edge()
    writers, each = 4, 4

    async def one(w: int):
        async with client(server.url) as c:
            for i in range(each):
                result = await c.call_tool("memory_write", {
                    "content": f"Writer {w} learned fact number {i}: the service on port {8000 + 10 * w + i} needs a warm-up call",
                    "force": True})
                assert not result.is_error, result.content[0].text
                assert result.structured_content["action"] == "created"

    async def all_writers():
        async with anyio.create_task_group() as group:
            for w in range(writers):
                group.start_soon(one, w)

    started = time.time()
    anyio.run(all_writers)
    print(f"{writers * each} concurrent writes in {time.time() - started:.1f} s")
    server.stop()

    again = edge(tmp_path / "data")

    async def check():
        async with client(again.url) as c:
            stats = await c.call_tool("memory_stats", {})
            assert stats.structured_content["active"] == writers * each, stats.structured_content
            listed = await c.call_tool("memory_list", {"limit": 100})
            assert len(listed.structured_content["items"]) == writers * each

    anyio.run(check)


def test_answers_match_hindsight_serve_http(edge, tmp_path):
    server = edge()
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps(principals()))
    native = HttpServer(tmp_path / "native.db", "default", 1, extra=("--auth", str(auth)))
    try:
        async def both():
            async with client(server.url) as e, client(native.url) as n:
                e_tools = {t.name: t for t in (await e.list_tools()).tools}
                n_tools = {t.name: t for t in (await n.list_tools()).tools}
                assert set(e_tools) <= set(n_tools), set(e_tools) - set(n_tools)
                for name, tool in e_tools.items():
                    assert tool.description == n_tools[name].description, name
                    assert tool.input_schema == n_tools[name].input_schema, name
                e_written = await write_all(e, MEMORIES + MEMORIES[:1])
                n_written = await write_all(n, MEMORIES + MEMORIES[:1])
                assert [w["action"] for w in e_written] == [w["action"] for w in n_written]
                for query in QUERIES:
                    a, b = await search(e, query), await search(n, query)
                    assert [i["content"] for i in a["items"]] == [i["content"] for i in b["items"]], query
                    for x, y in zip(a["items"], b["items"]):
                        assert abs(x["score"]["total"] - y["score"]["total"]) < 1e-3, (query, x["score"], y["score"])
                e_stats = (await e.call_tool("memory_stats", {})).structured_content
                n_stats = (await n.call_tool("memory_stats", {})).structured_content
                # The same calls counted alike; only the time each took differs.
                for stats in (e_stats, n_stats):
                    for totals in stats["usage"].values():
                        assert totals.pop("elapsed_ms") >= 0
                assert e_stats == n_stats
                assert e_stats["usage"]["retain"]["calls"] == len(MEMORIES) + 1, e_stats["usage"]

        anyio.run(both)
    finally:
        native.stop()


def test_a_fresh_instance_per_request_serves_the_built_in_model(edge, tmp_path):
    # The host's default: no instance reuse, so every request starts from the component's
    # snapshot, whose model was loaded when the component was built.
    server = edge(reuse=False)

    async def run():
        async with client(server.url) as c:
            await write_all(c, MEMORIES)
            found = await search(c, "why did the staging deploy fail")
            assert "VPN" in found["items"][0]["content"], found["items"]
            return (await c.call_tool("memory_stats", {})).structured_content

    built_in = anyio.run(run)
    assert built_in["active"] == len(MEMORIES) and built_in["dimension"] == 384, built_in
    server.stop()
    # The same files in the data directory are the same model (checked, not loaded again).
    same = edge(tmp_path / "copied", models=MODELS, reuse=False)

    async def stats():
        async with client(same.url) as c:
            await write_all(c, MEMORIES[:1])
            return (await c.call_tool("memory_stats", {})).structured_content

    assert anyio.run(stats)["embedding_model"] == built_in["embedding_model"]


def test_the_data_directorys_own_model_replaces_the_built_in_one(edge, tmp_path):
    other = os.environ.get("HINDSIGHT_TEST_MODELS_L3")
    if not other:
        import pytest
        pytest.skip("HINDSIGHT_TEST_MODELS_L3 is not set: ./dev test fetches the second model")
    built_in = edge(tmp_path / "built-in")
    swapped = edge(tmp_path / "swapped", models=Path(other))

    async def model_of(url):
        async with client(url) as c:
            await write_all(c, MEMORIES[:2])
            found = await search(c, "what format should the report be in")
            assert "PDF" in found["items"][0]["content"], found["items"]
            return (await c.call_tool("memory_stats", {})).structured_content["embedding_model"]

    assert anyio.run(model_of, built_in.url) != anyio.run(model_of, swapped.url)


def test_a_configured_llm_is_called_over_outgoing_http(edge, tmp_path):
    # The LLM scores an item no write rule keeps: 2/10 is below the threshold, so it is filtered.
    llm = _scripted_llm.ScriptedServer(
        route=lambda body: _scripted_llm.completion(json.dumps({"scores": [{"item": 0, "importance": 2}]})))
    try:
        server = edge(env={"HINDSIGHT_LLM_URL": llm.url, "HINDSIGHT_LLM_MODEL": "scripted"})

        async def run():
            async with client(server.url) as c:
                result = await c.call_tool("memory_write", {"content": "The weather in the office was mild on Tuesday"})
                assert not result.is_error, result.content[0].text
                return result.structured_content

        outcome = anyio.run(run)
        assert outcome["action"] == "filtered", outcome
        assert "importance 2/10 from the LLM" in outcome["reason"], outcome
        assert llm.requests and llm.requests[0]["path"] == "/v1/chat/completions", llm.requests
        assert llm.requests[0]["body"]["model"] == "scripted"
    finally:
        llm.close()
