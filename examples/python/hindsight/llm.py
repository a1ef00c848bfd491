"""The `hindsight:memory/llm` import: an OpenAI-compatible chat-completions client on urllib.

Configured like the Rust host: HINDSIGHT_LLM_URL (none: the engine uses its rule-based paths),
HINDSIGHT_LLM_MODEL, HINDSIGHT_LLM_API_KEY, HINDSIGHT_LLM_TIMEOUT_MS, HINDSIGHT_LLM_RETRIES.
"""

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Optional, Tuple


class LlmUnavailable(Exception):
    """No model is configured."""


class LlmFailed(Exception):
    """The call failed or the answer is unusable; the message says why."""


@dataclass
class LlmConfig:
    url: str
    model: str = "default"
    api_key: Optional[str] = None
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0

    @classmethod
    def from_env(cls) -> Optional["LlmConfig"]:
        def var(name: str) -> Optional[str]:
            value = os.environ.get(name, "").strip()
            return value or None

        url = var("HINDSIGHT_LLM_URL")
        if url is None:
            return None
        config = cls(url=url, model=var("HINDSIGHT_LLM_MODEL") or "default", api_key=var("HINDSIGHT_LLM_API_KEY"))
        if var("HINDSIGHT_LLM_TIMEOUT_MS"):
            config.timeout = int(var("HINDSIGHT_LLM_TIMEOUT_MS")) / 1000  # type: ignore[arg-type]
        if var("HINDSIGHT_LLM_RETRIES"):
            config.retries = int(var("HINDSIGHT_LLM_RETRIES"))  # type: ignore[arg-type]
        return config

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"


class OpenAiLlm:
    def __init__(self, config: Optional[LlmConfig]):
        self.config = config

    def complete(self, operation: str, system: str, prompt: str, json_schema: Optional[str],
                 max_tokens: int, temperature: float) -> Tuple[str, int, int]:
        """The answer's text and the prompt and completion tokens spent on it."""
        if self.config is None:
            raise LlmUnavailable("no language model configured (set HINDSIGHT_LLM_URL)")
        body = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": operation, "schema": json.loads(json_schema), "strict": False},
            }
        attempt = 0
        while True:
            try:
                return self._answer(self._post(body), max_tokens, json_schema is not None)
            except urllib.error.HTTPError as e:
                text = e.read().decode("utf-8", "replace")
                if e.code == 400 and "response_format" in body and ("response_format" in text or "json_schema" in text):
                    del body["response_format"]  # a server that does not take it: ask again without
                    continue
                message = f"HTTP {e.code} from {self.config.endpoint}: {text[:200]!r}"
                if e.code != 429 and e.code < 500:
                    raise LlmFailed(message) from None
                retry_after = e.headers.get("Retry-After")
                wait = float(retry_after) if retry_after and retry_after.strip().replace(".", "", 1).isdigit() else None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                message, wait = f"{self.config.endpoint}: {e}", None
            if attempt >= self.config.retries:
                raise LlmFailed(f"{message} (after {attempt + 1} tries)")
            time.sleep(min(wait if wait is not None else self.config.backoff * 2**attempt, self.config.max_backoff))
            attempt += 1

    def _post(self, body: dict) -> dict:
        assert self.config is not None
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = "Bearer " + self.config.api_key
        request = urllib.request.Request(self.config.endpoint, json.dumps(body).encode(), headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
            text = response.read().decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError as e:
            raise LlmFailed(f"the answer is not a chat completion ({e}): {text[:200]!r}") from None

    @staticmethod
    def _answer(completion: dict, max_tokens: int, wants_json: bool) -> Tuple[str, int, int]:
        choices = completion.get("choices") or []
        if not choices:
            raise LlmFailed("the answer has no choices")
        message = choices[0].get("message") or {}
        content = message.get("content") or ""
        if not content.strip():
            content = message.get("reasoning_content") or ""
        if choices[0].get("finish_reason") == "length" and wants_json:
            raise LlmFailed(f'the model\'s answer was cut off at max_tokens={max_tokens} (finish_reason "length"): {content[:200]!r}')
        if not content.strip():
            raise LlmFailed("the model's answer is empty")
        usage = completion.get("usage") or {}
        return content, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
