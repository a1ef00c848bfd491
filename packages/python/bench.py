"""The cross-host bench (examples/parity/scenario.json, "bench"), measured as the Rust host's
`cargo run -p hindsight-dev --example host_bench` measures it. Run it with the package installed:
`python bench.py`."""

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from hindsight_memory import Hindsight

PARITY = Path(__file__).resolve().parents[2] / "examples" / "parity"
scenario = json.loads((PARITY / "scenario.json").read_text())
bench = scenario["bench"]
memories = [{"content": m["content"], "kind": m["kind"], "tags": m["tags"], "occurred_at": m["occurred_at"]}
            for m in scenario["memories"]]

with tempfile.TemporaryDirectory() as tmp:
    t = time.perf_counter()
    hs = Hindsight.open(db=Path(tmp) / "bench.db", llm=None)  # the compiled component, from the cache when it can
    load_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    hs.warm_up()  # instantiate and engine.create: the model is handed over and loads inside the guest
    instantiate_ms = (time.perf_counter() - t) * 1000

    bank = hs.bank(scenario["bank"])
    t = time.perf_counter()
    for i in range(bench["copies"]):
        bank.retain([{**m, "content": f"{m['content']} (case {i})", "force": True} for m in memories],
                    now=scenario["now"])
    retain_s = time.perf_counter() - t

    queries = [q["query"] for q in scenario["queries"]]
    bank.recall(queries[0], k=bench["k"], now=scenario["now"])
    ms = []
    for i in range(bench["runs"]):
        t = time.perf_counter()
        bank.recall(queries[i % len(queries)], k=bench["k"], now=scenario["now"])
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    print(json.dumps({
        "host": f"python {sys.version.split()[0]} (hindsight-memory, wasmtime-py)",
        "component_load_ms": round(load_ms, 1),
        "component_from_cache": hs.timings.component_from_cache,
        "instantiate_ms": round(instantiate_ms, 1),
        "memories": bench["copies"] * len(memories),
        "retain_s": round(retain_s, 2),
        "recall_p50_ms": round(ms[round((len(ms) - 1) * 0.5)], 1),
        "recall_p95_ms": round(ms[round((len(ms) - 1) * 0.95)], 1),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }, indent=2))
    hs.close()
