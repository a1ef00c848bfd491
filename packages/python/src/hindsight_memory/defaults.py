"""One table of defaults, the same in every host (tests/conformance/defaults.json pins them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional

MODELS_ENV = "HINDSIGHT_MODELS"
CACHE_ENV = "XDG_CACHE_HOME"
DB_ENV = "HINDSIGHT_DB"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"

ENV_LLM_URL = "HINDSIGHT_LLM_URL"
ENV_LLM_MODEL = "HINDSIGHT_LLM_MODEL"
ENV_LLM_API_KEY = "HINDSIGHT_LLM_API_KEY"
ENV_LLM_MODEL_PREFIX = "HINDSIGHT_LLM_MODEL_"
ENV_LLM_TIMEOUT_MS = "HINDSIGHT_LLM_TIMEOUT_MS"
ENV_LLM_RETRIES = "HINDSIGHT_LLM_RETRIES"
ENV_LLM_JSON_MODE = "HINDSIGHT_LLM_JSON_MODE"

LLM_MODEL = "default"
LLM_TIMEOUT_MS = 30_000
LLM_RETRIES = 2
LLM_BACKOFF_MS = 500
LLM_MAX_BACKOFF_MS = 8_000
JSON_MODE = "json_schema"
JSON_MODES = ("json_schema", "json_object", "none")
OPERATIONS = ("extract", "importance", "consolidate", "judge")

CALL_DEADLINE_MS = 120_000
MEMORY_LIMIT_BYTES = 1 << 30


def _env(env: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if env is None else env


def cache_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """`$XDG_CACHE_HOME/hindsight`, else `~/.cache/hindsight` (the temp dir without a home)."""
    e = _env(env)
    base = e.get(CACHE_ENV) or ""
    if not base:
        home = e.get("HOME") or e.get("USERPROFILE") or ""
        base = os.path.join(home, ".cache") if home else tempfile.gettempdir()
    return Path(base) / "hindsight"


def models_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """The directory every host looks in: `HINDSIGHT_MODELS`, else
    `$XDG_CACHE_HOME/hindsight/models`, else `~/.cache/hindsight/models`."""
    e = _env(env)
    if e.get(MODELS_ENV):
        return Path(e[MODELS_ENV])
    return cache_dir(e) / "models"
