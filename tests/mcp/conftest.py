"""Starting `hindsight mcp` (stdio) and `hindsight serve --http` for the MCP client tests."""

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def hindsight_bin() -> str:
    path = os.environ.get("HINDSIGHT_BIN", str(REPO / "target" / "debug" / "hindsight"))
    if not Path(path).exists():
        raise RuntimeError(f"{path} is missing: build the workspace first (./dev test does)")
    return path


def stdio_server(*args: str):
    """`hindsight ARGS…` as an MCP stdio server. The SDK passes a child only HOME, PATH and a few
    more unless told otherwise: the server gets this environment whole (HINDSIGHT_MODELS,
    XDG_CACHE_HOME: where the models are)."""
    from mcp import StdioServerParameters

    return StdioServerParameters(command=hindsight_bin(), args=list(args), env=dict(os.environ))


class HttpServer:
    """`hindsight serve --http 127.0.0.1:0` (or `address`) in a child process; `url` is its MCP
    endpoint, `port` its port."""

    def __init__(self, db, bank: str, workers: int, extra=(), address: str = "127.0.0.1:0"):
        self.process = subprocess.Popen(
            [hindsight_bin(), "serve", "--http", address, "--db", str(db), "--bank", bank,
             "--workers", str(workers), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        line = self.process.stderr.readline()
        match = re.search(r"(http://\S+/mcp)", line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"the server did not say where it listens: {line!r} {self.process.stderr.read()}")
        self.url = match.group(1)
        self.port = int(re.search(r":(\d+)/mcp", self.url).group(1))
        # Keep draining stderr so the server never blocks on a full pipe.
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(timeout=30)


@pytest.fixture
def http_server(tmp_path):
    servers = []

    def start(bank: str = "default", workers: int = 2) -> HttpServer:
        server = HttpServer(tmp_path / "http.db", bank, workers)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.stop()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    """A PostgreSQL server's URL: HINDSIGHT_TEST_POSTGRES, else a throwaway cluster
    (tests/postgres/cluster.sh); skipped, saying why, when neither is possible."""
    url = os.environ.get("HINDSIGHT_TEST_POSTGRES")
    if url:
        yield url
        return
    script = REPO / "tests" / "postgres" / "cluster.sh"
    directory = tmp_path_factory.mktemp("postgres")
    started = subprocess.run(["bash", str(script), "start", str(directory)], capture_output=True, text=True)
    if started.returncode != 0:
        pytest.skip(f"HINDSIGHT_TEST_POSTGRES is unset and no server could be started: {started.stderr.strip()}")
    yield started.stdout.strip()
    subprocess.run(["bash", str(script), "stop", str(directory)], capture_output=True)


@pytest.fixture
def postgres_database(postgres_server, request):
    """A new, empty database on the server, as a URL."""
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + f"_{os.getpid()}"
    for sql in (f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"):
        subprocess.run(["psql", postgres_server, "-qc", sql], check=True, capture_output=True)
    return postgres_server.rsplit("/", 1)[0] + "/" + name
