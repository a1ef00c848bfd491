"""Several hosts, one memory: two `hindsight serve --http` processes on one PostgreSQL database.
A write through one is recalled through the other, the load test's 16 clients x 200 mixed
calls spread over both servers lose nothing, and a server SIGKILLed while it is being written to
loses no write it acknowledged."""

import threading

import anyio
from mcp import Client

from conftest import HttpServer
from test_load import report_text, run_load


def start_two(db: str) -> list:
    return [HttpServer(db, "default", 2, ["--db-pool", "4"]) for _ in range(2)]


async def write_then_search(a: str, b: str):
    async with Client(b) as reader:
        # The second server has the bank loaded before the first one writes.
        before = await reader.call_tool("memory_search", {"query": "CSV encoding", "bank": "team"})
        assert not before.is_error, before.content[0].text
        async with Client(a) as writer:
            written = await writer.call_tool("memory_write", {
                "content": "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV", "bank": "team"})
            assert not written.is_error, written.content[0].text
        hits = await reader.call_tool("memory_search", {"query": "garbled headers when reading a CSV", "k": 1,
                                                        "bank": "team"})
        assert not hits.is_error, hits.content[0].text
        items = hits.structured_content["items"]
        assert items and items[0]["id"] == written.structured_content["id"], items


def test_a_write_through_one_server_is_recalled_through_the_other(postgres_database):
    servers = start_two(postgres_database)
    try:
        anyio.run(write_then_search, servers[0].url, servers[1].url)
    finally:
        for s in servers:
            s.stop()


def test_load_spread_over_two_servers_on_one_database_loses_nothing(postgres_database, capsys):
    servers = start_two(postgres_database)
    try:
        report = anyio.run(run_load, [s.url for s in servers], 16, 200, 4)
    finally:
        codes = [s.stop() for s in servers]
    with capsys.disabled():
        print("\ntwo servers on PostgreSQL: " + report_text(report))
    assert report["errors"] == [], report["errors"][:10]
    assert report["missing"] == [], report["missing"][:10]
    assert report["calls"] == 16 * 200
    assert codes == [0, 0]


async def write_until_killed(victim: HttpServer, survivor: str) -> tuple:
    acknowledged = []
    try:
        async with Client(victim.url, read_timeout_seconds=60) as client:
            for i in range(200):
                if i == 40:  # SIGKILL lands a little later, while a write is in flight
                    threading.Timer(0.05, victim.process.kill).start()
                result = await client.call_tool("memory_write", {
                    "content": f"Deploy {i} of the billing service needed a cache flush first", "bank": "kill",
                    "force": True})
                if result.is_error:
                    break
                acknowledged.append(result.structured_content["id"])
    except Exception:  # the connection died with the server
        pass
    missing = []
    async with Client(survivor, read_timeout_seconds=60) as client:
        for memory_id in acknowledged:
            history = await client.call_tool("memory_history", {"id": memory_id, "bank": "kill"})
            if history.is_error or not history.structured_content["entries"]:
                missing.append(memory_id)
    return acknowledged, missing


def test_a_server_killed_mid_write_loses_no_acknowledged_write(postgres_database):
    servers = start_two(postgres_database)
    try:
        acknowledged, missing = anyio.run(write_until_killed, servers[0], servers[1].url)
    finally:
        servers[0].process.wait(timeout=30)
        servers[1].stop()
    assert len(acknowledged) >= 40, acknowledged
    assert missing == []
