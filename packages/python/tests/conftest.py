"""Shared fixtures. The tests run against the INSTALLED package (test.sh installs the wheel in a
fresh virtual environment): importing it from the source tree is refused."""

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
REPO = PACKAGE_ROOT.parents[1]
PARITY = REPO / "examples" / "parity"
CONFORMANCE = REPO / "tests" / "conformance"

sys.path.insert(0, str(HERE))  # the helpers beside the tests (scripted_llm), never the package

import hindsight_memory  # noqa: E402

if Path(hindsight_memory.__file__).resolve().is_relative_to(PACKAGE_ROOT / "src"):
    raise RuntimeError(f"hindsight_memory was imported from the source tree ({hindsight_memory.__file__}); "
                       "install the wheel (packages/python/test.sh) and run the tests with that interpreter")


@pytest.fixture(scope="session")
def scenario() -> dict:
    return json.loads((PARITY / "scenario.json").read_text())


@pytest.fixture(scope="session")
def expected() -> dict:
    return json.loads((PARITY / "expected.json").read_text())


@pytest.fixture(scope="session")
def hs(tmp_path_factory):
    """One engine without a language model, shared by the tests that only need rules (each uses
    its own bank)."""
    with hindsight_memory.Hindsight.open(db=tmp_path_factory.mktemp("shared") / "shared.db", llm=None) as h:
        yield h


def memories(scenario: dict) -> list:
    return [{"content": m["content"], "kind": m["kind"], "tags": m["tags"], "occurred_at": m["occurred_at"]}
            for m in scenario["memories"]]


def recall_all(bank, scenario: dict) -> list:
    """Each query's top items as {content, total}, recalled in the scenario's order."""
    return [{"query": q["query"],
             "top": [{"content": i.memory.content, "total": i.score.total}
                     for i in bank.recall(q["query"], k=q["k"], now=scenario["now"]).items]}
            for q in scenario["queries"]]
