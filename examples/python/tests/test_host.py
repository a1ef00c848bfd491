import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import memories, recall_all
from hindsight import Hindsight, HindsightError, LlmConfig
from hindsight.store import Conflict, SqliteStore


def assert_same_as_rust(actual: list, expected: dict) -> None:
    assert len(actual) == len(expected["queries"])
    for got, want in zip(actual, expected["queries"]):
        assert [t["content"] for t in got["top"]] == [t["content"] for t in want["top"]], want["query"]
        for g, w in zip(got["top"], want["top"]):
            assert abs(g["total"] - w["total"]) <= 1e-4, (g, w)


def test_recalls_what_the_rust_host_recalls_and_a_second_process_reads_the_file(tmp_path, scenario, expected):
    db = tmp_path / "parity.db"
    with Hindsight(db, llm=None) as hs:
        bank = hs.bank(scenario["bank"])
        outcomes = bank.retain(memories(scenario), now=scenario["now"])
        assert all(o.id for o in outcomes), outcomes
        assert_same_as_rust(recall_all(bank, scenario), expected)

    child = Path(__file__).with_name("recall_child.py")
    out = json.loads(subprocess.run([sys.executable, str(child), str(db)], check=True,
                                    capture_output=True, text=True).stdout)
    assert out["active"] == len(scenario["memories"])
    # Recalls count as accesses, so scores move; the items and their order must not.
    assert [[t["content"] for t in q["top"]] for q in out["queries"]] == \
        [[t["content"] for t in q["top"]] for q in expected["queries"]]


def test_engine_errors_are_exceptions_with_the_wit_variant_and_nothing_is_lost(tmp_path, scenario):
    with Hindsight(tmp_path / "errors.db", llm=None) as hs:
        bank = hs.bank("errors")
        [kept] = bank.retain(["Run the integration tests with TZ=UTC"], now=scenario["now"])
        with pytest.raises(HindsightError) as e:
            bank.get("no-such-id")
        assert e.value.kind == "not-found"
        with pytest.raises(HindsightError) as e:
            bank.retain([{"content": "   "}], now=scenario["now"])
        assert e.value.kind == "invalid-input" and "content" in e.value.message
        with pytest.raises(HindsightError, match="unknown recall option"):
            bank.recall("x", k=3, colour="red")
        assert bank.get(kept.id).content == "Run the integration tests with TZ=UTC"


class Scripted(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server answering from `answers`, recording `requests`."""
    answers: list = []
    requests: list = []

    def do_POST(self) -> None:  # noqa: N802
        Scripted.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        status, content = Scripted.answers.pop(0) if Scripted.answers else (500, "no scripted answer")
        body = {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10}} if status == 200 else {"error": content}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_the_llm_import_reaches_an_openai_compatible_server(tmp_path, scenario):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = LlmConfig(url=f"http://127.0.0.1:{server.server_port}/v1", model="scripted", timeout=5, retries=0)
        with Hindsight(tmp_path / "llm.db", llm=config) as hs:
            bank = hs.bank("llm")
            plain = "The office plant on the third floor was watered today"
            Scripted.answers = [(200, json.dumps({"scores": [{"item": 0, "importance": 2}]}))]
            [dropped] = bank.retain([plain], now=scenario["now"])
            assert dropped.action == "filtered", dropped
            assert "importance 2/10" in dropped.reason
            asked = Scripted.requests[-1]
            assert asked["model"] == "scripted" and asked["response_format"]["type"] == "json_schema"
            assert any("office plant" in m["content"] for m in asked["messages"])

            Scripted.answers = [(503, "overloaded")]
            [kept] = bank.retain([plain], now=scenario["now"])
            assert kept.action == "created", kept
            assert "HTTP 503" in kept.reason
    finally:
        server.shutdown()


def test_a_call_past_the_deadline_traps_and_the_next_call_recovers_from_the_store(tmp_path, scenario):
    with Hindsight(tmp_path / "trap.db", llm=None) as hs:
        bank = hs.bank("trap")
        [kept] = bank.retain(["Never send customer emails from the staging environment"], now=scenario["now"])
        hs.set_call_deadline(0.02)
        with pytest.raises(HindsightError) as e:
            bank.retain([{"content": f"filler memory number {i} about nothing", "force": True} for i in range(64)],
                        now=scenario["now"])
        assert e.value.kind == "trap", e.value
        hs.set_call_deadline(120)
        assert bank.get(kept.id).content == "Never send customer emails from the staging environment"
        assert bank.stats().active == 1


def test_the_store_applies_a_commit_only_while_its_expectations_hold(tmp_path):
    store = SqliteStore(str(tmp_path / "expect.db"))
    store.commit([("expect", ("b/x/seq", None)), ("put", ("b/x/seq", b"1"))])
    with pytest.raises(Conflict):
        store.commit([("expect", ("b/x/seq", None)), ("put", ("b/x/m/a", b"lost"))])
    assert store.get("b/x/m/a") is None, "a refused commit applies nothing"
    store.commit([("expect", ("b/x/seq", b"1")), ("delete", "b/x/seq")])
    assert store.get("b/x/seq") is None
    store.close()
