"""The host against the Rust host: same recalls from the same scenario, errors as exceptions, the
LLM import, the call deadline."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import memories, recall_all
from hindsight_memory import Hindsight, HindsightError, LlmConfig, RecallResult, RetainOutcome
from scripted_llm import ScriptedServer, completion


def assert_same_as_rust(actual: list, expected: dict) -> None:
    assert len(actual) == len(expected["queries"])
    for got, want in zip(actual, expected["queries"]):
        assert [t["content"] for t in got["top"]] == [t["content"] for t in want["top"]], want["query"]
        for g, w in zip(got["top"], want["top"]):
            assert abs(g["total"] - w["total"]) <= 1e-4, (g, w)


def test_recalls_what_the_rust_host_recalls_and_a_second_process_reads_the_file(tmp_path, scenario, expected):
    db = tmp_path / "parity.db"
    with Hindsight.open(db=db, llm=None) as hs:
        bank = hs.bank(scenario["bank"])
        outcomes = bank.retain(memories(scenario), now=scenario["now"])
        assert all(isinstance(o, RetainOutcome) and o.id for o in outcomes), outcomes
        assert_same_as_rust(recall_all(bank, scenario), expected)
        result = bank.recall(scenario["queries"][0]["query"], k=3, now=scenario["now"])
        assert isinstance(result, RecallResult) and result.prompt

    child = Path(__file__).with_name("recall_child.py")
    out = json.loads(subprocess.run([sys.executable, str(child), str(db)], check=True,
                                    capture_output=True, text=True).stdout)
    assert out["active"] == len(scenario["memories"])
    # Recalls count as accesses, so scores move; the items and their order must not.
    assert [[t["content"] for t in q["top"]] for q in out["queries"]] == \
        [[t["content"] for t in q["top"]] for q in expected["queries"]]


def test_engine_errors_are_exceptions_with_the_wit_variant_and_nothing_is_lost(hs, scenario):
    bank = hs.bank("errors")
    [kept] = bank.retain(["Run the integration tests with TZ=UTC"], now=scenario["now"])
    with pytest.raises(HindsightError) as e:
        bank.get("no-such-id")
    assert e.value.kind == "not-found"
    with pytest.raises(HindsightError) as e:
        bank.retain(["fine", {"content": "   "}], now=scenario["now"])
    assert e.value.kind == "invalid-input" and e.value.field == "content" and e.value.item == 1, e.value
    assert "items[1].content" in str(e.value)
    with pytest.raises(HindsightError) as e:
        bank.retain([{"content": "x", "importance": 3}], now=scenario["now"])
    assert e.value.kind == "invalid-input" and e.value.field == "importance" and e.value.item == 0
    with pytest.raises(HindsightError, match="unknown recall option"):
        bank.recall("x", k=3, colour="red")
    with pytest.raises(HindsightError) as e:
        bank.retain([{"content": "x", "colour": "red"}])
    assert e.value.kind == "invalid-input" and e.value.field == "colour" and e.value.item == 0
    with pytest.raises(HindsightError) as e:
        bank.retain([{"content": "x", "kind": "dream"}])
    assert e.value.field == "kind" and "procedural" in e.value.message
    with pytest.raises(HindsightError) as e:
        hs.bank("no spaces allowed")
    assert e.value.kind == "invalid-input" and e.value.field == "bank"
    with pytest.raises(HindsightError) as e:
        Hindsight.open(db=":memory:", models_dir="/nonexistent/models", llm=None)
    assert e.value.kind == "model" and "hindsight model fetch" in e.value.message
    with pytest.raises(HindsightError) as e:
        Hindsight.open(db=":memory:", llm=None, settings={"recall": {"no_such_key": 1}}).warm_up()
    assert e.value.kind == "invalid-input" and "no_such_key" in str(e.value)
    assert bank.get(kept.id).content == "Run the integration tests with TZ=UTC"


def test_the_llm_import_reaches_an_openai_compatible_server(tmp_path, scenario):
    with ScriptedServer() as server:
        config = LlmConfig(url=server.url, model="scripted", timeout_ms=5000, retries=0)
        with Hindsight.open(db=tmp_path / "llm.db", llm=config) as hs:
            bank = hs.bank("llm")
            plain = "The office plant on the third floor was watered today"
            server.answers = [completion(json.dumps({"scores": [{"item": 0, "importance": 2}]}))]
            [dropped] = bank.retain([plain], now=scenario["now"])
            assert dropped.action == "filtered", dropped
            assert "importance 2/10" in dropped.reason
            asked = server.requests[-1]["body"]
            assert asked["model"] == "scripted" and asked["response_format"]["type"] == "json_schema"
            assert asked["response_format"]["json_schema"]["name"] == "importance"
            assert any("office plant" in m["content"] for m in asked["messages"])

            server.answers = [{"status": 503, "body_text": "overloaded"}]
            [kept] = bank.retain([plain], now=scenario["now"])
            assert kept.action == "created", kept
            assert "HTTP 503" in kept.reason

            usage = hs.llm_usage()["importance"]
            assert (usage.calls, usage.failures, usage.prompt_tokens, usage.completion_tokens) == (2, 1, 50, 10)


def test_a_hanging_llm_ends_at_the_call_deadline(tmp_path, scenario):
    with ScriptedServer([{**completion("{}"), "delay_ms": 4000}]) as server:
        config = LlmConfig(url=server.url, timeout_ms=10_000, retries=0)
        with Hindsight.open(db=tmp_path / "slow.db", llm=config, deadline_s=1.5) as hs:
            hs.warm_up()
            task = hs.bank("slow").begin_task("a task", now=scenario["now"])
            task.fact("the export is in UTF-16")
            started = time.monotonic()
            with pytest.raises(HindsightError) as e:
                task.end("success", force=True)
            assert time.monotonic() - started < 3.5
            assert e.value.kind == "llm" and "deadline" in e.value.message, e.value
            assert task.state().outcome == "success", "the task stays ended"
            assert task.distill(rules_only=True).method == "rules"


def test_a_call_past_the_deadline_traps_and_the_next_call_recovers_from_the_store(tmp_path, scenario):
    with Hindsight.open(db=tmp_path / "trap.db", llm=None) as hs:
        bank = hs.bank("trap")
        [kept] = bank.retain(["Never send customer emails from the staging environment"], now=scenario["now"])
        hs.set_deadline(0.02)
        with pytest.raises(HindsightError) as e:
            bank.retain([{"content": f"filler memory number {i} about nothing", "force": True} for i in range(64)],
                        now=scenario["now"])
        assert e.value.kind == "trap" and "deadline of 20 ms" in e.value.message, e.value
        hs.set_deadline(120)
        assert bank.get(kept.id).content == "Never send customer emails from the staging environment"
        assert bank.stats().active == 1


def test_instantiating_hands_the_model_over_quickly(hs):
    hs.reset()
    hs.warm_up()
    # The 23 MB model crosses into the guest in bulk: seconds, not the ~20 s of a per-byte copy.
    assert hs.timings.instantiate_ms < 10_000, hs.timings
    assert hs.timings.component_load_ms > 0
