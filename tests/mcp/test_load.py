"""Load over streamable HTTP on loopback: concurrent MCP clients doing mixed operations on a few
banks. No call may fail, every acknowledged write must be there afterwards, and the whole run is
bounded in time. Prints p50/p99 latency per tool.

Run alone for the figures: `python3 tests/mcp/test_load.py [--clients 16 --ops 200 --banks 4]`.
"""

import argparse
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import anyio
from mcp import Client

SUBJECTS = [
    "the nightly ETL job", "pip install on the CI runner", "the staging deploy", "pandas.read_csv on the vendor export",
    "the billing API client", "docker build for the web image", "the Postgres schema migration", "npm ci in the monorepo",
    "the S3 upload of the reports", "pytest on the Windows runner", "the Kafka consumer", "terraform apply for the VPC",
    "the PDF invoice parser", "git rebase of the release branch", "the Redis cache warm-up", "cargo build of the agent",
]
EVENTS = [
    "failed with a timeout after {n} seconds until the retry limit was raised",
    "needed the --no-cache flag to pick up the new base image",
    "worked once the proxy variables were exported first",
    "broke because the lock file pinned version 1.{n}",
    "must run with at most {n} workers or it runs out of memory",
    "returned HTTP 429 until requests were spaced {n} ms apart",
    "silently dropped rows with an empty id column",
    "is only reliable when run after the nightly backup finishes",
    "was fixed by setting the timezone to UTC explicitly",
    "needs the service account token refreshed every {n} minutes",
]
QUERIES = [
    "why does the deploy keep failing", "how to avoid out of memory in the build", "rate limits on the API",
    "encoding problems when reading the export", "what to do about timeouts in the job", "dependency version pins",
    "proxy settings for installs", "when to schedule the import", "cache warm-up problems", "timezone bugs",
]
# The mix of operations (weights).
MIX = {"memory_write": 40, "memory_search": 35, "memory_feedback": 8, "memory_history": 8, "memory_forget": 4,
       "memory_summarize": 5}


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


async def run_load(url, clients: int, ops: int, banks: int, seed: int = 7) -> dict:
    """`url`: one server's MCP endpoint, or a list of servers the clients are spread over."""
    urls = [url] if isinstance(url, str) else list(url)
    banks_names = [f"tenant-{b}" for b in range(banks)]
    latencies = defaultdict(list)
    errors = []
    acknowledged = defaultdict(set)  # bank -> ids that a write or summarize returned

    async def one_client(c: int):
        rng = random.Random(seed * 1000 + c)
        mine = defaultdict(list)
        async with Client(urls[c % len(urls)], read_timeout_seconds=120) as client:
            for i in range(ops):
                bank = banks_names[rng.randrange(banks)]
                tool = rng.choices(list(MIX), weights=list(MIX.values()))[0]
                if tool in ("memory_feedback", "memory_history", "memory_forget") and not mine[bank]:
                    tool = "memory_write"
                if tool == "memory_write":
                    event = rng.choice(EVENTS).format(n=rng.randrange(2, 90))
                    args = {"content": f"{rng.choice(SUBJECTS).capitalize()} {event}",
                            "kind": rng.choice(["episodic", "procedural", "semantic"]),
                            "tags": [f"client-{c}"], "importance": 0.7}
                elif tool == "memory_search":
                    args = {"query": rng.choice(QUERIES), "k": 5}
                elif tool == "memory_feedback":
                    args = {"ids": [rng.choice(mine[bank])], "outcome": rng.choice(["success", "failure"])}
                elif tool == "memory_history":
                    args = {"id": rng.choice(mine[bank])}
                elif tool == "memory_forget":
                    # Soft: archived, still there (history shows it), restorable.
                    args = {"id": rng.choice(mine[bank])}
                else:
                    subject = rng.choice(SUBJECTS)
                    args = {"goal": f"Fix {subject}", "outcome": "failure", "force": True, "steps": [
                        {"type": "tool-call", "tool": "shell", "text": f"run {subject}"},
                        {"type": "tool-result", "tool": "shell", "error": True,
                         "text": f"error: {rng.choice(EVENTS).format(n=rng.randrange(2, 90))}"},
                    ]}
                args["bank"] = bank
                start = time.perf_counter()
                try:
                    result = await client.call_tool(tool, args)
                except Exception as e:  # a protocol or transport failure
                    errors.append(f"client {c} op {i} {tool}: {e!r}")
                    continue
                latencies[tool].append((time.perf_counter() - start) * 1000)
                if result.is_error:
                    errors.append(f"client {c} op {i} {tool}: {result.content[0].text}")
                    continue
                out = result.structured_content
                if tool == "memory_write" and out.get("id"):
                    mine[bank].append(out["id"])
                    acknowledged[bank].add(out["id"])
                elif tool == "memory_summarize":
                    acknowledged[bank].update(item["id"] for item in out["items"] if item.get("id"))

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(one_client, c)
    seconds = time.perf_counter() - start

    # Every acknowledged write is still there: its history (any status) resolves.
    missing = []
    async with Client(urls[-1], read_timeout_seconds=120) as client:
        for bank, ids in acknowledged.items():
            for memory_id in sorted(ids):
                result = await client.call_tool("memory_history", {"id": memory_id, "bank": bank})
                if result.is_error or not result.structured_content["entries"]:
                    missing.append((bank, memory_id, result.content[0].text[:200]))

    return {
        "clients": clients, "ops_per_client": ops, "banks": banks, "seconds": round(seconds, 1),
        "calls": sum(len(v) for v in latencies.values()), "errors": errors, "missing": missing,
        "acknowledged_writes": sum(len(v) for v in acknowledged.values()),
        "per_tool": {tool: {"calls": len(v), "p50_ms": round(percentile(v, 50), 1), "p99_ms": round(percentile(v, 99), 1)}
                     for tool, v in sorted(latencies.items())},
    }


def report_text(r: dict) -> str:
    lines = [f"{r['clients']} clients x {r['ops_per_client']} ops on {r['banks']} banks: {r['calls']} calls in "
             f"{r['seconds']} s, {len(r['errors'])} errors, {r['acknowledged_writes']} acknowledged writes, "
             f"{len(r['missing'])} missing"]
    lines += [f"  {tool:<17} {v['calls']:>5} calls  p50 {v['p50_ms']:>7.1f} ms  p99 {v['p99_ms']:>7.1f} ms"
              for tool, v in r["per_tool"].items()]
    return "\n".join(lines)


TIME_BOUND_S = 900


def test_load_over_http(http_server, capsys):
    server = http_server(workers=2)
    report = anyio.run(run_load, server.url, 16, 200, 4)
    with capsys.disabled():
        print("\n" + report_text(report))
    assert report["errors"] == [], report["errors"][:10]
    assert report["missing"] == [], report["missing"][:10]
    assert report["calls"] == 16 * 200
    assert report["acknowledged_writes"] > 500
    assert report["seconds"] < TIME_BOUND_S
    assert server.stop() == 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import HttpServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--banks", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = HttpServer(Path(tmp) / "load.db", "default", args.workers)
        try:
            print(report_text(anyio.run(run_load, server.url, args.clients, args.ops, args.banks)))
        finally:
            server.stop()
