"""The MCP server image (docker/): built from the binary the test run built, driven over stdio
with the official Python MCP client; what it keeps survives a second container on the volume."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parents[2]
IMAGE = "hindsight-memory:test"


def docker_ready() -> str:
    """'' when a daemon answers (started here when absent), else why not."""
    if not shutil.which("docker"):
        return "no docker client (apt-get install docker.io)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        return ""
    if not shutil.which("dockerd"):
        return "no dockerd (apt-get install docker.io)"
    log = open(Path(tempfile.gettempdir()) / "hindsight-dockerd.log", "w")
    subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(60):
        if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
            return ""
        time.sleep(0.5)
    return f"dockerd did not start (see {log.name})"


@pytest.fixture(scope="module")
def image():
    why = docker_ready()
    if why:
        print(f"skipped: {why}")
        pytest.skip(why)
    with tempfile.TemporaryDirectory() as ctx:
        subprocess.run([str(REPO / "docker" / "context.sh"), ctx], check=True)
        env = {**os.environ, "DOCKER_BUILDKIT": "0"}
        subprocess.run(["docker", "build", "-q", "-t", IMAGE, ctx], check=True, env=env, stdout=subprocess.DEVNULL)
    yield IMAGE


@pytest.fixture
def volume():
    name = f"hindsight-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True)


async def call(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool} failed: {result.content}"
    return result.structured_content


def test_the_image_serves_mcp_over_stdio_and_keeps_memories_on_its_volume(image, volume):
    params = StdioServerParameters(command="docker", args=["run", "-i", "--rm", "-v", f"{volume}:/data", image])

    async def first():
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"memory_write", "memory_search", "memory_summarize"} <= tools
            written = await call(client, "memory_write", {"content": "The user wants metric units in every report", "kind": "semantic"})
            assert written["action"] == "created", written
            return written["id"]

    async def second(memory_id: str):
        async with Client(params) as client:
            found = await call(client, "memory_search", {"query": "which units do reports use", "k": 3})
            assert found["items"][0]["id"] == memory_id, json.dumps(found)[:500]

    memory_id = anyio.run(first)
    anyio.run(second, memory_id)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_image_serves_mcp_over_http_with_tokens_on_a_loopback_port(image, volume, tmp_path):
    # Inside the container the server listens on 0.0.0.0, which it does only with --auth.
    token = "docker-test-token-5b1e9d"
    auth = tmp_path / "auth"
    auth.mkdir()
    (auth / "auth.json").write_text(json.dumps(
        {"principals": [{"name": "agent", "token": token, "read": ["*"], "write": ["*"]}]}))
    os.chmod(auth, 0o755)
    os.chmod(auth / "auth.json", 0o644)
    refused = subprocess.run(["docker", "run", "--rm", image, "serve", "--http", "0.0.0.0:8765"],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "without --auth" in refused.stderr, refused.stderr
    port = free_port()
    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8765", "-v", f"{volume}:/data",
         "-v", f"{auth}:/auth:ro", image, "serve", "--http", "0.0.0.0:8765", "--auth", "/auth/auth.json"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(300):  # /health answers without a token once the server listens
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)

        anonymous = urllib.request.Request(url, b"{}", {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused_request:
            urllib.request.urlopen(anonymous, timeout=30)
        assert refused_request.value.code == 401

        async def main():
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(url, http_client=http)) as client:
                written = await call(client, "memory_write", {"content": "Deploys go out on Tuesdays after review", "kind": "semantic"})
                found = await call(client, "memory_search", {"query": "when do deploys go out", "k": 1})
                assert found["items"][0]["id"] == written["id"]

        anyio.run(main)
    finally:
        subprocess.run(["docker", "stop", "-t", "5", container], capture_output=True)
