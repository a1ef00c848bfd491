"""Latency of the edge component under its host, printed as a table and one JSON line:

    python3 tests/edge/bench.py [--host wasmtime|spin] [--runs 20] [--fill 100000]

* cold: the host's default, a fresh instance per request (each starts from the component's
  snapshot, model loaded at build time): a recall, a write, and /health (instantiation alone);
* warm: `wasmtime serve --max-instance-reuse-count 1000 --idle-instance-timeout 300s` after a
  few requests: a recall (a new query each time, so it is embedded) and a write;
* open: a bank of FILL memories in the file store (filled natively by the fill_store example,
  given vectors), then the first request of a fresh instance on it and the next one;
* the component's size.

Each figure is the median of RUNS requests timed from the client (one HTTP/1.1 request, JSON-RPC
`tools/call`, no MCP session: the front needs none)."""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import EDGE, MODELS, REPO, SPIN_EDGE, TOKEN, EdgeServer, make_data_dir, principals  # noqa: E402

QUERIES = [
    "how do I read the vendor csv file", "what format should the report be in", "why did the staging deploy fail",
    "rate limit of the billing api", "running the unit tests", "what does the user prefer in answers",
    "which timezone do the tests need", "what failed when deploying", "how fast may I call the billing api",
    "which encoding does the csv export use", "how should reports be delivered", "what to do when the VPN is down",
]


def call(url: str, tool: str, arguments: dict, n: int = 1) -> float:
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json", "Accept": "application/json",
                                                 "Authorization": f"Bearer {TOKEN}"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as r:
        reply = json.loads(r.read())
    elapsed = (time.perf_counter() - started) * 1000
    result = reply.get("result", {})
    if "error" in reply or result.get("isError"):
        raise RuntimeError(f"{tool}: {reply}")
    return elapsed


def health(base: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(base + "/health", timeout=60) as r:
        r.read()
    return (time.perf_counter() - started) * 1000


def median(xs):
    return round(statistics.median(xs), 1)


def memory(i: int) -> dict:
    return {"content": f"Deployment note {i}: the service on port {9000 + i} needs a warm-up call before traffic",
            "force": True}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", choices=["wasmtime", "spin"], default="wasmtime")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--fill", type=int, default=0,
                        help="memories for the open-time figure, in the file store (wasmtime only; 0: skip it)")
    args = parser.parse_args()
    figures = {"host": args.host}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = make_data_dir(tmp / "data", principals())
        server = EdgeServer(data, reuse=False, host=args.host)
        try:
            for i, q in enumerate(QUERIES[:6]):
                call(server.url, "memory_write", {"content": f"{q}: noted answer number {i}", "force": True})
            figures["cold_health_ms"] = median([health(server.base) for _ in range(args.runs)])
            figures["cold_recall_ms"] = median(
                [call(server.url, "memory_search", {"query": QUERIES[i % len(QUERIES)], "k": 5}) for i in range(args.runs)])
            figures["cold_write_ms"] = median(
                [call(server.url, "memory_write", memory(i)) for i in range(args.runs)])
        finally:
            server.stop()
        if args.host == "wasmtime":
            server = EdgeServer(data, reuse=True)
            try:
                for q in QUERIES[:3]:
                    call(server.url, "memory_search", {"query": q + " (warm-up)", "k": 5})
                figures["warm_recall_ms"] = median(
                    [call(server.url, "memory_search", {"query": f"{QUERIES[i % len(QUERIES)]} #{i}", "k": 5})
                     for i in range(args.runs)])
                figures["warm_write_ms"] = median(
                    [call(server.url, "memory_write", memory(1000 + i)) for i in range(args.runs)])
            finally:
                server.stop()
        if args.fill and args.host == "wasmtime":
            # fill_store reads the model from the data directory; the edge then serves its own.
            big = make_data_dir(tmp / "big", principals(), MODELS)
            subprocess.run(["cargo", "run", "-q", "-p", "hindsight-edge", "--example", "fill_store", "--",
                            str(big), str(args.fill)], cwd=REPO, check=True)
            for name in ("model.onnx", "tokenizer.json"):
                (big / name).unlink()
            store_bytes = sum(p.stat().st_size for p in (big / "store").iterdir())
            figures[f"store_bytes_{args.fill}"] = store_bytes
            server = EdgeServer(big, reuse=True)
            try:
                figures[f"open_{args.fill}_first_request_ms"] = round(call(server.url, "memory_stats", {}), 1)
                figures[f"open_{args.fill}_next_request_ms"] = round(call(server.url, "memory_stats", {}), 1)
                figures[f"recall_{args.fill}_warm_ms"] = median(
                    [call(server.url, "memory_search", {"query": f"{QUERIES[i % len(QUERIES)]} #{i}", "k": 5})
                     for i in range(args.runs)])
            finally:
                server.stop()
    component = EDGE if args.host == "wasmtime" else SPIN_EDGE
    figures["component_bytes"] = component.stat().st_size
    width = max(len(k) for k in figures)
    for k, v in figures.items():
        print(f"{k:<{width}}  {v}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
