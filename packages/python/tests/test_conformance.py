"""tests/conformance: the data every host must pass — the store, the OpenAI-compatible client and
the defaults — run against this package's own SqliteStore, LLM client and defaults."""

import inspect
import json

import pytest

from conftest import CONFORMANCE
from hindsight_memory import Hindsight, HindsightError, LlmConfig, defaults as D
from hindsight_memory.llm import LlmFailed, OpenAiLlm
from hindsight_memory.store import SqliteStore, StoreConflict
from scripted_llm import ScriptedServer

STORE = json.loads((CONFORMANCE / "store.json").read_text())
LLM = json.loads((CONFORMANCE / "llm.json").read_text())
DEFAULTS = json.loads((CONFORMANCE / "defaults.json").read_text())


def value(v):
    if v is None:
        return None
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    return v.encode("utf-8")


def op(o):
    if o[0] == "put":
        return ("put", (o[1], value(o[2])))
    if o[0] == "delete":
        return ("delete", o[1])
    if o[0] == "expect":
        return ("expect", (o[1], value(o[2])))
    raise AssertionError(f"unknown op {o}")


@pytest.mark.parametrize("case", STORE["cases"], ids=[c["name"] for c in STORE["cases"]])
def test_store(case, tmp_path):
    store = SqliteStore(tmp_path / "conformance.db")
    try:
        for n, step in enumerate(case["steps"]):
            where = f"step {n}: {step}"
            if "commit" in step:
                try:
                    store.commit([op(o) for o in step["commit"]])
                    got = "ok"
                except StoreConflict:
                    got = "conflict"
                assert got == step["expect"], where
            elif "get" in step:
                assert store.get(step["get"]) == value(step["expect"]), where
            elif "scan" in step:
                rows = store.scan(step["scan"], step["start_after"], step["limit"])
                assert rows == [(k, value(v)) for k, v in step["expect"]], where
            else:
                raise AssertionError(f"unknown step {step}")
    finally:
        store.close()


def dig(body, path):
    for p in path:
        if isinstance(p, int):
            if not isinstance(body, list) or p >= len(body):
                return KeyError
            body = body[p]
        else:
            if not isinstance(body, dict) or p not in body:
                return KeyError
            body = body[p]
    return body


@pytest.mark.parametrize("t", LLM["transcripts"], ids=[t["name"] for t in LLM["transcripts"]])
def test_llm_transcript(t):
    request = {**LLM["default_request"], **t.get("request", {})}
    with ScriptedServer(t["server"]) as server:
        client = OpenAiLlm(LlmConfig(url=server.url, **t["config"]))
        expect = t["expect"]
        if "failed" in expect:
            with pytest.raises(LlmFailed) as e:
                client.complete(request)
            for part in expect["failed"]:
                assert part in str(e.value), (part, str(e.value))
        else:
            text, prompt_tokens, completion_tokens = client.complete(request)
            assert text == expect["text"]
            assert prompt_tokens == expect.get("prompt_tokens", 0)
            assert completion_tokens == expect.get("completion_tokens", 0)
        want = t["requests"]
        assert len(server.requests) == want["count"], server.requests
        for check in want.get("checks", []):
            got = server.requests[check["index"]]
            if "header" in check:
                assert got["headers"].get(check["header"].lower()) == check["equals"], check
            elif check.get("absent"):
                assert dig(got["body"], check["path"]) is KeyError, check
            else:
                assert dig(got["body"], check["path"]) == check["equals"], check


def test_credentials_in_the_url_are_never_echoed():
    with ScriptedServer([{"status": 500, "body_text": "boom"}]) as server:
        url = server.url.replace("http://", "http://user:s3cret@")
        config = LlmConfig(url=url, retries=0)
        assert "s3cret" not in repr(config) and "s3cret" not in config.endpoint
        with pytest.raises(LlmFailed) as e:
            OpenAiLlm(config).complete(LLM["default_request"])
        assert "HTTP 500" in str(e.value) and "s3cret" not in str(e.value)
        assert server.requests[0]["headers"]["authorization"].startswith("Basic ")
    with pytest.raises(HindsightError) as e:
        LlmConfig(url="ftp://user:s3cret@host/v1")
    assert e.value.kind == "invalid-input" and "s3cret" not in str(e.value)


def test_a_transport_error_is_retried_and_says_how_many_tries():
    config = LlmConfig(url="http://127.0.0.1:9/v1", retries=1, backoff_ms=1, timeout_ms=2000)
    with pytest.raises(LlmFailed) as e:
        OpenAiLlm(config).complete(LLM["default_request"])
    assert "(after 2 tries)" in str(e.value) and "127.0.0.1:9" in str(e.value)


def test_the_models_dir_rule():
    rule = DEFAULTS["models_dir"]
    assert (rule["env"], rule["cache_env"]) == (D.MODELS_ENV, D.CACHE_ENV)
    assert rule["files"] == [D.MODEL_FILE, D.TOKENIZER_FILE]
    assert D.models_dir({rule["env"]: "/m", rule["cache_env"]: "/c", "HOME": "/h"}) == D.Path("/m")
    assert D.models_dir({rule["cache_env"]: "/c", "HOME": "/h"}) == D.Path("/c", *rule["subdir"])
    assert D.models_dir({"HOME": "/h"}) == D.Path("/h", rule["home_cache"], *rule["subdir"])
    assert D.models_dir({rule["env"]: "", "HOME": "/h"}) == D.Path("/h", rule["home_cache"], *rule["subdir"])


def test_the_llm_defaults_and_environment():
    env = DEFAULTS["llm_env"]
    assert (env["url"], env["model"], env["api_key"], env["model_per_operation_prefix"], env["timeout_ms"],
            env["retries"], env["json_mode"]) == (D.ENV_LLM_URL, D.ENV_LLM_MODEL, D.ENV_LLM_API_KEY,
                                                  D.ENV_LLM_MODEL_PREFIX, D.ENV_LLM_TIMEOUT_MS, D.ENV_LLM_RETRIES,
                                                  D.ENV_LLM_JSON_MODE)
    llm = DEFAULTS["llm"]
    config = LlmConfig(url="http://127.0.0.1:8080/v1")
    assert (config.model, config.timeout_ms, config.retries, config.backoff_ms, config.max_backoff_ms,
            config.json_mode) == (llm["model"], llm["timeout_ms"], llm["retries"], llm["backoff_first_ms"],
                                  llm["backoff_max_ms"], llm["json_mode"])
    assert list(D.JSON_MODES) == llm["json_modes"]
    assert list(D.OPERATIONS) == llm["operations"]

    assert LlmConfig.from_env({}) is None
    assert LlmConfig.from_env({env["url"]: "  "}) is None
    config = LlmConfig.from_env({
        env["url"]: "http://127.0.0.1:8080/v1", env["model"]: "small", env["api_key"]: "sk-x",
        env["model_per_operation_prefix"] + "JUDGE": "judge-model",
        env["model_per_operation_prefix"] + "EXTRACT": "big-model",
        env["timeout_ms"]: "1500", env["retries"]: "0", env["json_mode"]: "json_object",
    })
    assert config is not None
    assert (config.model, config.api_key, config.timeout_ms, config.retries, config.json_mode) == \
        ("small", "sk-x", 1500, 0, "json_object")
    assert config.models == {"judge": "judge-model", "extract": "big-model"}
    for name, bad in ((env["timeout_ms"], "soon"), (env["retries"], "-1"), (env["json_mode"], "yaml")):
        with pytest.raises(HindsightError) as e:
            LlmConfig.from_env({env["url"]: "http://127.0.0.1:8080/v1", name: bad})
        assert e.value.kind == "invalid-input" and e.value.field == name and name in str(e.value)


def test_the_engine_defaults():
    engine = DEFAULTS["engine"]
    for fn in (Hindsight.open, Hindsight.__init__):
        params = inspect.signature(fn).parameters
        assert params["deadline_s"].default * 1000 == engine["call_deadline_ms"]
        assert params["memory_limit_bytes"].default == engine["memory_limit_mib"] << 20
    assert D.CALL_DEADLINE_MS == engine["call_deadline_ms"]
    assert D.MEMORY_LIMIT_BYTES == engine["memory_limit_mib"] << 20
    assert D.DB_ENV == DEFAULTS["db_env"]
