"""A second process: opens the SQLite file another process wrote and prints what it recalls."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import PARITY, recall_all  # noqa: E402
from hindsight_memory import Hindsight  # noqa: E402

scenario = json.loads((PARITY / "scenario.json").read_text())
with Hindsight.open(db=sys.argv[1], llm=None) as hs:
    bank = hs.bank(scenario["bank"])
    print(json.dumps({"active": bank.stats().active, "queries": recall_all(bank, scenario)}))
