"""The issue's program, run by test.sh from a fresh directory against the installed wheel."""
import sys
from hindsight_memory import Hindsight
with Hindsight.open(db=sys.argv[1]) as hs:
    bank = hs.bank("agent")
    bank.retain([{"content": "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV", "kind": "procedural"},
                 {"content": "The user wants PostgreSQL for every new service"}])
    hits = bank.recall("garbled headers when reading a CSV", k=1)
    assert "utf-8-sig" in hits.items[0].memory.content
    task = bank.begin_task("clean the vendor CSV")
    task.step("tool-call", "pd.read_csv('v.csv')", tool="python")
    task.fact("the vendor CSV starts with a BOM")
    end = task.end("success", force=True)
    print(bank.stats().active, end.method)
