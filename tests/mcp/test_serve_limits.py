"""Regression tests for the `serve --http` findings of the 0.2 hard-edges report
(`finding_0_2_NN` in each name): who may reach the server by which name, how many sessions a
principal may hold and whose they are, and how long a slow client may keep a connection."""

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

from conftest import HttpServer, hindsight_bin

CODER = "coder-token-5e1d7a3f9b"
DROPBOX = "dropbox-token-0c4b8e2a6d"
INIT = json.dumps({
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}).encode()


def auth_file(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"principals": [
        {"name": "coder", "token": CODER, "read": ["agent:coder"], "write": ["agent:coder"]},
        {"name": "dropbox", "token": DROPBOX, "read": [], "write": ["shared"]},
    ]}))
    return path


def request(port: int, method: str = "POST", body: bytes | None = INIT, headers: dict | None = None):
    """A request to 127.0.0.1:`port`/mcp; `headers` may name another Host. (status, headers, body)."""
    all_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "Host": f"127.0.0.1:{port}", **(headers or {})}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, lower(response.headers), response.read(4096)
    except urllib.error.HTTPError as e:
        return e.code, lower(e.headers), e.read()


def lower(headers) -> dict:
    return {k.lower(): v for k, v in headers.items()}


def bearer(token: str, **more) -> dict:
    return {"Authorization": f"Bearer {token}", **more}


def test_finding_0_2_06_a_server_beyond_loopback_answers_its_public_names(tmp_path):
    server = HttpServer(tmp_path / "s.db", "agent:coder", 1,
                        ["--auth", str(auth_file(tmp_path)), "--public-host", "Memory.Example.com"],
                        address="0.0.0.0:0")
    try:
        port = server.port
        status, headers, _ = request(port, headers=bearer(CODER, Host=f"memory.example.com:{port}"))
        assert status == 200 and headers.get("mcp-session-id"), status
        # The panel opened from another machine sends its own origin.
        status, _, _ = request(port, headers=bearer(CODER, Host=f"memory.example.com:{port}",
                                                     Origin=f"https://memory.example.com:{port}"))
        assert status == 200
        # Names it was not told stay refused (DNS rebinding), token or not.
        status, _, body = request(port, headers=bearer(CODER, Host=f"evil.example.com:{port}"))
        assert status == 403, body
        status, _, _ = request(port, headers=bearer(CODER, Host=f"memory.example.com:{port}",
                                                     Origin="https://evil.example.com"))
        assert status == 403
        # Still no way in without a token.
        status, _, _ = request(port, headers={"Host": f"memory.example.com:{port}"})
        assert status == 401
    finally:
        assert server.stop() == 0


def test_finding_0_2_06_the_address_listened_on_is_accepted_by_its_own_name(tmp_path):
    server = HttpServer(tmp_path / "s.db", "agent", 1, address="127.0.0.2:0")
    try:
        req = urllib.request.Request(f"http://127.0.0.2:{server.port}/mcp", data=INIT, method="POST", headers={
            "Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as response:
            assert response.status == 200
    finally:
        assert server.stop() == 0


def test_finding_0_2_06_a_bad_public_host_names_the_flag(tmp_path):
    out = subprocess.run([hindsight_bin(), "serve", "--http", "0.0.0.0:0", "--auth", str(auth_file(tmp_path)),
                          "--public-host", "https://memory.example.com/mcp", "--db", str(tmp_path / "x.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "public-host[0]" in out.stderr, out.stderr
    assert not (tmp_path / "x.db").exists()


def test_finding_0_2_09_sessions_have_a_quota_per_principal_and_belong_to_the_one_that_opened_them(tmp_path):
    server = HttpServer(tmp_path / "s.db", "shared", 1, ["--auth", str(auth_file(tmp_path))])
    try:
        port = server.port
        opened = []
        for _ in range(16):
            status, headers, _ = request(port, headers=bearer(DROPBOX))
            assert status == 200, status
            opened.append(headers["mcp-session-id"])
        status, headers, body = request(port, headers=bearer(DROPBOX))
        assert status == 503 and headers.get("retry-after"), status
        assert 'principal "dropbox"' in json.loads(body)["error"]["message"]

        # Another principal still gets a session.
        status, headers, _ = request(port, headers=bearer(CODER))
        assert status == 200
        coders = headers["mcp-session-id"]

        # The coder cannot use or close the dropbox's session: to it, the session does not exist.
        theirs = opened[0]
        status, _, _ = request(port, method="DELETE", body=None, headers=bearer(CODER, **{"mcp-session-id": theirs}))
        assert status == 404
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        status, _, _ = request(port, body=ping, headers=bearer(CODER, **{"mcp-session-id": theirs}))
        assert status == 404
        # Its owner closes it, which frees one of its sixteen.
        status, _, _ = request(port, method="DELETE", body=None, headers=bearer(DROPBOX, **{"mcp-session-id": theirs}))
        assert status in (200, 202, 204), status
        status, _, _ = request(port, headers=bearer(DROPBOX))
        assert status == 200
        # The coder's own session is its own.
        status, _, _ = request(port, method="DELETE", body=None, headers=bearer(CODER, **{"mcp-session-id": coders}))
        assert status in (200, 202, 204), status
    finally:
        assert server.stop() == 0


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closes `sock` within `seconds`; what it sent before."""
    sock.settimeout(seconds)
    received = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(4096)
            if not chunk:
                return True, received
            received += chunk
    except (socket.timeout, TimeoutError):
        return False, received
    except ConnectionResetError:
        return True, received
    return False, received


def test_finding_0_2_10_slow_clients_are_timed_out(tmp_path):
    server = HttpServer(tmp_path / "s.db", "agent", 1, ["--read-timeout", "1"])
    try:
        port = server.port
        # Headers that never end: the connection is closed.
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        for sock in slow:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        for sock in slow:
            closed, _ = closed_within(sock, 10)
            assert closed, "a connection with half-sent headers was kept open"
        assert time.monotonic() - started < 8

        # A body announced and trickled: answered 408 with a JSON-RPC error, then closed.
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{\"jsonrpc\"".encode())
        closed, received = closed_within(sock, 10)
        assert received.startswith(b"HTTP/1.1 408"), received[:200]
        assert b"not received within 1 s" in received

        # The server goes on answering.
        status, _, _ = request(port)
        assert status == 200
    finally:
        assert server.stop() == 0
