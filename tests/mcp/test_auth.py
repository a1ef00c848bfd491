"""Identities and rights over MCP HTTP (`serve --http --auth FILE`): a request without a valid
bearer token gets 401; principal A can neither read, search, get by a guessed id, forget, give
feedback on nor see the history of what is in B's private bank, and is told which bank and
right; a shared bank is read by both and written only by those allowed; the file is re-read
on SIGHUP; listening beyond loopback without --auth is refused."""

import hashlib
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import HttpServer, hindsight_bin

CODER = "coder-token-7f3a9c1e5b"
ANALYST = "analyst-token-2d8e4b6a0c"


def principals(coder_token: str = CODER) -> dict:
    return {"principals": [
        {"name": "coder", "token": coder_token, "read": ["agent:coder", "shared"], "write": ["agent:coder"]},
        {"name": "analyst", "token_sha256": hashlib.sha256(ANALYST.encode()).hexdigest(),
         "read": ["agent:analyst", "shared", "user:*"], "write": ["agent:analyst", "shared"]},
    ]}


def as_principal(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


def post_status(url: str, token: str | None) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def denied(client: Client, tool: str, args: dict, right: str, bank: str):
    result = await client.call_tool(tool, {**args, "bank": bank})
    assert result.is_error, f"{tool} on {bank} was allowed: {result.structured_content}"
    text = result.content[0].text
    assert f'no {right} right on bank "{bank}"' in text, text


async def scenario(url: str):
    async with as_principal(url, CODER) as coder, as_principal(url, ANALYST) as analyst:
        written = await coder.call_tool("memory_write", {
            "content": "The staging database password rotates every Monday", "bank": "agent:coder"})
        assert not written.is_error, written.content[0].text
        secret = written.structured_content["id"]

        await denied(analyst, "memory_search", {"query": "staging database password"}, "read", "agent:coder")
        await denied(analyst, "memory_history", {"id": secret}, "read", "agent:coder")
        await denied(analyst, "memory_forget", {"id": secret, "hard": True}, "write", "agent:coder")
        await denied(analyst, "memory_feedback", {"ids": [secret], "outcome": "failure"}, "write", "agent:coder")
        await denied(analyst, "memory_write", {"content": "planted"}, "write", "agent:coder")
        await denied(analyst, "memory_unsupersede", {"id": secret}, "write", "agent:coder")

        # Still there, untouched, for its owner.
        history = await coder.call_tool("memory_history", {"id": secret, "bank": "agent:coder"})
        assert [e["event"] for e in history.structured_content["entries"]] == ["created"]
        mine = await coder.call_tool("memory_search", {"query": "staging database password", "bank": "agent:coder"})
        assert mine.structured_content["items"][0]["id"] == secret
        assert mine.structured_content["items"][0]["agent_id"] == "coder"

        # Shared: the analyst writes, both read, the coder may not write.
        shared = await analyst.call_tool("memory_write", {
            "content": "Vendor model X-200 fails its firmware update over Wi-Fi", "bank": "shared"})
        assert not shared.is_error, shared.content[0].text
        seen = await coder.call_tool("memory_search", {"query": "firmware update failures", "k": 1, "bank": "shared"})
        assert "X-200" in seen.structured_content["items"][0]["content"]
        await denied(coder, "memory_write", {"content": "overwrite"}, "write", "shared")
        await denied(coder, "memory_forget", {"id": shared.structured_content["id"]}, "write", "shared")


def test_principals_reach_only_their_banks_and_a_bad_token_gets_401(tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps(principals()))
    server = HttpServer(tmp_path / "auth.db", "default", 2, ["--auth", str(auth)])
    try:
        assert post_status(server.url, None) == 401
        assert post_status(server.url, "not-a-token-at-all-0000") == 401
        assert post_status(server.url, CODER) == 200
        anyio.run(scenario, server.url)

        # SIGHUP re-reads the file: the coder's old token stops working, the new one works.
        auth.write_text(json.dumps(principals("coder-token-rotated-99887766")))
        server.process.send_signal(signal.SIGHUP)
        for _ in range(100):
            if post_status(server.url, CODER) == 401:
                break
            time.sleep(0.05)
        assert post_status(server.url, CODER) == 401
        assert post_status(server.url, "coder-token-rotated-99887766") == 200
    finally:
        assert server.stop() == 0


def test_listening_beyond_loopback_needs_auth(tmp_path):
    out = subprocess.run([hindsight_bin(), "serve", "--http", "0.0.0.0:0", "--db", str(tmp_path / "x.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "refusing to listen on 0.0.0.0:0 without --auth" in out.stderr, out.stderr
    assert not (tmp_path / "x.db").exists()


def test_a_bad_auth_file_names_the_field(tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": [{"name": "coder", "token": "short"}]}))
    out = subprocess.run([hindsight_bin(), "serve", "--http", "127.0.0.1:0", "--auth", str(auth),
                          "--db", str(tmp_path / "x.db")], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "principals[0].token" in out.stderr and "at least 16 characters" in out.stderr, out.stderr
