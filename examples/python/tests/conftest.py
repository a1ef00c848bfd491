import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PARITY = Path(__file__).resolve().parents[2] / "parity"


@pytest.fixture(scope="session")
def scenario() -> dict:
    return json.loads((PARITY / "scenario.json").read_text())


@pytest.fixture(scope="session")
def expected() -> dict:
    return json.loads((PARITY / "expected.json").read_text())


def memories(scenario: dict) -> list:
    return [{"content": m["content"], "kind": m["kind"], "tags": m["tags"], "occurred_at": m["occurred_at"]}
            for m in scenario["memories"]]


def recall_all(bank, scenario: dict) -> list:
    """Each query's top items as {content, total}, recalled in the scenario's order."""
    return [{"query": q["query"],
             "top": [{"content": i.memory.content, "total": i.score.total}
                     for i in bank.recall(q["query"], k=q["k"], now=scenario["now"]).items]}
            for q in scenario["queries"]]
