"""Serving hindsight-edge.wasm with the stock wasmtime CLI (`wasmtime serve`) for the edge tests."""

import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EDGE = REPO / "guest" / "component" / "hindsight-edge.wasm"
MODELS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hindsight" / "models"
TOKEN = "edge-writer-token-5e1c7a9b3d"
READER = "edge-reader-token-8f2d6b0a4c"


def wasmtime_bin() -> str:
    path = os.environ.get("HINDSIGHT_TEST_WASMTIME") or shutil.which("wasmtime")
    if not path or not Path(path).exists():
        pytest.skip("no wasmtime CLI: ./dev test installs wasmtime-cli 48.0.8 (HINDSIGHT_TEST_WASMTIME)")
    return path


def principals() -> dict:
    return {"principals": [
        {"name": "writer", "token": TOKEN, "read": ["*"], "write": ["*"]},
        {"name": "reader", "token": READER, "read": ["shared"]},
    ]}


def make_data_dir(path: Path, auth: dict | None) -> Path:
    """A data directory as the edge component reads it: the model, the tokenizer, auth.json."""
    import json

    if not EDGE.exists():
        raise RuntimeError(f"{EDGE} is missing: ./dev component builds it")
    path.mkdir(parents=True, exist_ok=True)
    for name in ("model.onnx", "tokenizer.json"):
        target = path / name
        if not target.exists():
            os.link(MODELS / name, target) if os.stat(MODELS).st_dev == os.stat(path).st_dev else shutil.copy(MODELS / name, target)
    if auth is not None:
        (path / "auth.json").write_text(json.dumps(auth))
    return path


class EdgeServer:
    """`wasmtime serve` of hindsight-edge.wasm on a free port, with DATA mounted at /data; each
    instance serves up to 1000 requests (the warm engine), as the README's recipe does."""

    def __init__(self, data: Path, reuse: bool = True):
        args = [wasmtime_bin(), "serve", "-C", "cache=y", "-S", "cli=y", "--addr", "127.0.0.1:0",
                "--dir", f"{data}::/data"]
        if reuse:
            args += ["--max-instance-reuse-count", "1000", "--idle-instance-timeout", "300s"]
        self.process = subprocess.Popen(args + [str(EDGE)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        deadline = time.time() + 300  # the first compilation of the component takes a while
        url = None
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = re.search(r"Serving HTTP on (http://\S+?)/?$", line.strip())
            if match:
                url = match.group(1)
                break
        if url is None:
            self.process.kill()
            raise RuntimeError(f"wasmtime serve did not start: {''.join(self.output)}")
        self.base = url
        self.url = url + "/mcp"
        threading.Thread(target=lambda: self.output.extend(self.process.stdout), daemon=True).start()

    def health(self) -> int:
        with urllib.request.urlopen(self.base + "/health", timeout=30) as r:
            return r.status

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def edge(tmp_path):
    servers = []

    def start(data: Path | None = None, auth: dict | None = principals(), reuse: bool = True) -> EdgeServer:
        server = EdgeServer(make_data_dir(data or tmp_path / "data", auth), reuse=reuse)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.stop()
