"""The `hindsight:memory/llm` import: an OpenAI-compatible chat-completions client on urllib.

It behaves as the Rust library's `OpenAi` (tests/conformance/llm.json pins it): a timeout per
request; 429, 5xx and transport errors retried with backoff doubling from 500 ms (or what
`Retry-After` says), at most 8 s; the optional importance question asked once; a server that
rejects `response_format` asked again without it; an answer cut off at `max_tokens` when JSON was
asked for, or an empty one, is an error; a reasoning model's `reasoning_content` is read when
`content` is empty; credentials in the URL never reach a message.
"""

from __future__ import annotations

import base64
import json
import math
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from . import defaults as D
from .errors import HindsightError


class LlmUnavailable(Exception):
    """No model is configured: the engine uses its rule-based paths."""


class LlmFailed(Exception):
    """The call failed or the answer is unusable; the message says why."""


def redact(url: str) -> str:
    """`http://user:secret@host/…` → `http://host/…`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "@" in authority:
        authority = authority.rsplit("@", 1)[1]
    return f"{scheme}://{authority}{path}"


def parse_json_mode(text: str, name: str = "json_mode") -> str:
    """`json_schema` (or `schema`), `json_object` (or `object`) or `none`."""
    mode = {"json_schema": "json_schema", "schema": "json_schema", "json_object": "json_object",
            "object": "json_object", "none": "none"}.get(str(text).strip())
    if mode is None:
        raise HindsightError.invalid(name, f"{text!r}: expected json_schema, json_object or none")
    return mode


@dataclass
class LlmConfig:
    """An OpenAI-compatible endpoint: the API base (`http://127.0.0.1:8080/v1`) or the full
    `…/chat/completions` URL, the model asked (and one per operation: extract, importance,
    consolidate, judge), the bearer key, the timeout of one request, retries after the first
    attempt, the first retry's backoff, and how to ask for JSON."""

    url: str
    model: str = D.LLM_MODEL
    api_key: Optional[str] = None
    models: Dict[str, str] = field(default_factory=dict)
    timeout_ms: int = D.LLM_TIMEOUT_MS
    retries: int = D.LLM_RETRIES
    backoff_ms: int = D.LLM_BACKOFF_MS
    max_backoff_ms: int = D.LLM_MAX_BACKOFF_MS
    json_mode: str = D.JSON_MODE

    def __post_init__(self) -> None:
        self.json_mode = parse_json_mode(self.json_mode)
        for op in self.models:
            if op not in D.OPERATIONS:
                raise HindsightError.invalid("models", f"unknown operation {op!r}; expected one of {', '.join(D.OPERATIONS)}")
        for name in ("timeout_ms", "retries", "backoff_ms", "max_backoff_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise HindsightError.invalid(name, f"{value!r} is not a whole number of at least 0")
        self.check()

    def __repr__(self) -> str:  # never the key, never credentials in the URL
        return (f"LlmConfig(url={redact(self.url)!r}, model={self.model!r}, models={self.models!r}, "
                f"timeout_ms={self.timeout_ms}, retries={self.retries}, json_mode={self.json_mode!r})")

    def check(self) -> None:
        """Whether the URL can be an endpoint at all (checked before any call)."""
        url = self.url.strip()
        for scheme in ("http://", "https://"):
            if url.startswith(scheme):
                host = url[len(scheme):]
                if host and not host.startswith("/"):
                    return
        raise HindsightError.invalid("llm url", f"{redact(url)!r} is not an http(s) URL, e.g. http://127.0.0.1:8080/v1")

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> Optional["LlmConfig"]:
        """From `HINDSIGHT_LLM_URL`, `_MODEL`, `_API_KEY`, `_MODEL_<OPERATION>`, `_TIMEOUT_MS`,
        `_RETRIES` and `_JSON_MODE`; None without a URL. A malformed value is an error naming it."""
        e = os.environ if env is None else env

        def var(name: str) -> Optional[str]:
            value = e.get(name)
            return value if value is not None and value.strip() else None

        url = var(D.ENV_LLM_URL)
        if url is None:
            return None
        kwargs: Dict[str, Any] = {"url": url, "model": var(D.ENV_LLM_MODEL) or D.LLM_MODEL,
                                  "api_key": var(D.ENV_LLM_API_KEY)}
        models = {op: var(D.ENV_LLM_MODEL_PREFIX + op.upper()) for op in D.OPERATIONS}
        kwargs["models"] = {op: m for op, m in models.items() if m is not None}
        for env_name, key in ((D.ENV_LLM_TIMEOUT_MS, "timeout_ms"), (D.ENV_LLM_RETRIES, "retries")):
            raw = var(env_name)
            if raw is not None:
                try:
                    kwargs[key] = int(raw.strip())
                    if kwargs[key] < 0:
                        raise ValueError
                except ValueError:
                    raise HindsightError.invalid(env_name, f"{raw!r} is not a number") from None
        raw = var(D.ENV_LLM_JSON_MODE)
        if raw is not None:
            kwargs["json_mode"] = parse_json_mode(raw, D.ENV_LLM_JSON_MODE)
        return cls(**kwargs)

    def endpoint_url(self) -> str:
        base = self.url.strip().rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    @property
    def endpoint(self) -> str:
        """The endpoint without credentials (for messages)."""
        return redact(self.endpoint_url())


def _excerpt(text: str) -> str:
    return repr(text[:200])


class OpenAiLlm:
    """The client: `complete(request)` → (text, prompt tokens, completion tokens)."""

    def __init__(self, config: Optional[LlmConfig]):
        self.config = config

    def complete(self, request: Mapping[str, Any]) -> Tuple[str, int, int]:
        """`request`: operation, system, prompt, json_schema (or None), max_tokens, temperature."""
        c = self.config
        if c is None:
            raise LlmUnavailable("no language model is configured (set HINDSIGHT_LLM_URL, or pass one to the host)")
        shown = c.endpoint
        mode = c.json_mode
        attempt = 0
        # The importance score is optional (the rules decide without it): one try, so a hanging
        # server costs a retain one timeout, not several.
        retries = 0 if request["operation"] == "importance" else c.retries
        while True:
            body = self._body(request, mode)
            started = time.monotonic()
            retry_after: Optional[float] = None
            try:
                text = self._post(body)
                return self._answer(text, int(request["max_tokens"]), request.get("json_schema") is not None)
            except urllib.error.HTTPError as e:
                text = _read(e)
                code = e.code
                if code == 400 and "response_format" in body and ("response_format" in text or "json_schema" in text):
                    mode = "none"  # a server that does not take response_format: ask again without it
                    continue
                message = f"HTTP {code} from {shown}: {_excerpt(text)}"
                if code != 429 and code < 500:
                    raise LlmFailed(message) from None
                retry_after = _retry_after(e.headers.get("Retry-After") if e.headers else None)
            except LlmFailed:
                raise
            except (urllib.error.URLError, OSError, ValueError, http_client_errors()) as e:
                reason = getattr(e, "reason", e)
                timed_out = isinstance(reason, (socket.timeout, TimeoutError)) or \
                    time.monotonic() - started >= c.timeout_ms / 1000
                detail = (f"no answer within the timeout of {c.timeout_ms} ms ({D.ENV_LLM_TIMEOUT_MS})"
                          if timed_out else (str(reason) or type(reason).__name__))
                message = f"{shown}: {detail}"
            if attempt >= retries:
                tries = "1 try" if attempt == 0 else f"{attempt + 1} tries"
                raise LlmFailed(f"{message} (after {tries})")
            backoff_s = c.backoff_ms / 1000 * 2 ** attempt if retry_after is None else retry_after
            time.sleep(min(backoff_s, c.max_backoff_ms / 1000))
            attempt += 1

    def _body(self, r: Mapping[str, Any], mode: str) -> Dict[str, Any]:
        assert self.config is not None
        op = r["operation"]
        body: Dict[str, Any] = {
            "model": self.config.models.get(op, self.config.model),
            "messages": [{"role": "system", "content": r["system"]}, {"role": "user", "content": r["prompt"]}],
            "max_tokens": r["max_tokens"],
            "temperature": r["temperature"],
        }
        schema = r.get("json_schema")
        if schema is not None and mode == "json_schema":
            try:
                parsed = json.loads(schema)
            except ValueError:
                parsed = None
            if parsed is not None:
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": op, "schema": parsed, "strict": False}}
        elif schema is not None and mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _post(self, body: Dict[str, Any]) -> str:
        c = self.config
        assert c is not None
        url = c.endpoint_url()
        parts = urllib.parse.urlsplit(url)
        headers = {"Content-Type": "application/json"}
        if parts.username is not None or parts.password is not None:
            # Credentials in the URL go in a header, never in the request line (or a message).
            netloc = parts.hostname or ""
            if ":" in netloc:
                netloc = f"[{netloc}]"
            if parts.port is not None:
                netloc += f":{parts.port}"
            url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
            user = urllib.parse.unquote(parts.username or "")
            password = urllib.parse.unquote(parts.password or "")
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        if c.api_key:
            headers["Authorization"] = "Bearer " + c.api_key
        req = urllib.request.Request(url, json.dumps(body).encode("utf-8"), headers, method="POST")
        with urllib.request.urlopen(req, timeout=c.timeout_ms / 1000) as response:  # noqa: S310 - http(s) checked
            return response.read().decode("utf-8", "replace")

    @staticmethod
    def _answer(text: str, max_tokens: int, wants_json: bool) -> Tuple[str, int, int]:
        try:
            completion = json.loads(text)
            if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
                raise ValueError("no choices list")
        except ValueError as e:
            raise LlmFailed(f"the answer is not a chat completion ({e}): {_excerpt(text)}") from None
        choices = completion["choices"]
        if not choices:
            raise LlmFailed("the answer has no choices")
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        content = message.get("content") or ""
        if not isinstance(content, str) or not content.strip():
            content = message.get("reasoning_content") or ""
        if choice.get("finish_reason") == "length" and wants_json:
            raise LlmFailed(f"the model's answer was cut off at max_tokens={max_tokens} "
                            f"(finish_reason \"length\"): {_excerpt(content)}")
        if not isinstance(content, str) or not content.strip():
            raise LlmFailed("the model's answer is empty")
        usage = completion.get("usage") or {}
        return content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


def http_client_errors() -> type:
    import http.client
    return http.client.HTTPException


def _read(e: urllib.error.HTTPError) -> str:
    try:
        return e.read().decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the status alone still says enough
        return ""


def _retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
