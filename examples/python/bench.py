"""The cross-host bench (examples/parity/scenario.json, "bench"), measured as the Rust host's
`cargo run -p hindsight --example host_bench` measures it."""

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from conftest import PARITY, memories  # noqa: E402
from hindsight import Hindsight  # noqa: E402

scenario = json.loads((PARITY / "scenario.json").read_text())
bench = scenario["bench"]
with tempfile.TemporaryDirectory() as tmp:
    t = time.perf_counter()
    hs = Hindsight(Path(tmp) / "bench.db", llm=None)  # the compiled component, from the cache when it can
    load_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    hs.model_id  # instantiate and engine.create: the model loads inside the guest
    instantiate_ms = (time.perf_counter() - t) * 1000

    bank = hs.bank(scenario["bank"])
    t = time.perf_counter()
    for i in range(bench["copies"]):
        bank.retain([{**m, "content": f"{m['content']} (case {i})", "force": True} for m in memories(scenario)],
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
        "host": f"python {sys.version.split()[0]} (wasmtime-py)",
        "component_load_ms": load_ms,
        "instantiate_ms": instantiate_ms,
        "memories": bench["copies"] * len(scenario["memories"]),
        "retain_s": retain_s,
        "recall_p50_ms": ms[round((len(ms) - 1) * 0.5)],
        "recall_p95_ms": ms[round((len(ms) - 1) * 0.95)],
    }, indent=2))
    hs.close()
