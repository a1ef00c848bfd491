"""tests/conformance/llm.json against the edge: each transcript's server answers an edge whose
`HINDSIGHT_LLM_*` variables are the transcript's config, and what the edge sent and made of the
answers is what the native client's conformance test asserts (tests/tests/conformance.rs). The
edge is driven through MCP, so the request is the engine's own: a forced `memory_summarize`
(operation extract) or, for an importance transcript, a `memory_write` no write rule decides.
Checks of the conformance request's own prompt and token budget are left to the client tests."""

import json
from pathlib import Path

import anyio
import pytest

from test_edge import _scripted_llm, client

LLM = json.loads((Path(__file__).resolve().parents[1] / "conformance" / "llm.json").read_text())
TRAJECTORY = {"goal": "update the X-200 firmware", "outcome": "success", "force": True,
              "steps": [{"type": "thought", "text": "check that the battery is above 60%"}]}
UNDECIDED = {"content": "The weather in the office was mild on Tuesday"}


def edge_env(url: str, config: dict) -> dict:
    env = {"HINDSIGHT_LLM_URL": url, "HINDSIGHT_LLM_MODEL": config.get("model", "default")}
    for key, name in [("api_key", "API_KEY"), ("json_mode", "JSON_MODE"), ("retries", "RETRIES"),
                      ("timeout_ms", "TIMEOUT_MS")]:
        if key in config:
            env[f"HINDSIGHT_LLM_{name}"] = str(config[key])
    for operation, model in config.get("models", {}).items():
        env[f"HINDSIGHT_LLM_MODEL_{operation.upper()}"] = model
    return env


def the_engines_own(check: dict) -> bool:
    path = check.get("path") or []
    return path[:1] == ["max_tokens"] or path[:3] == ["messages", 1, "content"]


@pytest.mark.parametrize("transcript", LLM["transcripts"], ids=lambda t: t["name"])
def test_the_edge_follows_the_llm_transcripts(edge, transcript):
    operation = {**LLM["default_request"], **transcript.get("request", {})}["operation"]
    llm = _scripted_llm.ScriptedServer(answers=[dict(a) for a in transcript["server"]])
    try:
        server = edge(env=edge_env(llm.url, transcript["config"]))

        async def call():
            async with client(server.url) as c:
                if operation == "importance":
                    return await c.call_tool("memory_write", UNDECIDED)
                assert operation == "extract", operation
                return await c.call_tool("memory_summarize", TRAJECTORY)

        result = anyio.run(call)
        text = result.content[0].text if result.content else ""
        expect = transcript["expect"]
        if operation == "importance":
            # The score is optional: whatever the LLM did, the write is decided by the rules.
            assert not result.is_error, text
        elif "failed" in expect:
            assert result.is_error, text
            for part in expect["failed"]:
                # The budget named is the engine's own, not the conformance request's.
                part = "max_tokens=" if part.startswith("max_tokens=") else part
                assert part in text, (part, text)
        else:
            # The answer reached the engine: an error now is the engine's reading of the text
            # (e.g. "ok" is no lesson list), never a failed call.
            assert not (result.is_error and "the LLM call failed" in text), text
        requests = llm.requests
        assert len(requests) == transcript["requests"]["count"], requests
        for check in transcript["requests"].get("checks", []):
            if the_engines_own(check):
                continue
            sent = requests[check["index"]]
            if "header" in check:
                value = sent["headers"].get(check["header"])
            else:
                value = sent["body"]
                for key in check["path"]:
                    value = value.get(key) if isinstance(value, dict) else (
                        value[key] if isinstance(value, list) and key < len(value) else None)
            if check.get("absent"):
                assert value is None, (check, value)
            else:
                assert value == check["equals"], (check, value)
        assert all(r["path"] == "/v1/chat/completions" for r in requests), requests
    finally:
        llm.close()
