"""Several hosts, one memory: two `hindsight serve --http` processes on one PostgreSQL database.
A write through one is recalled through the other, and the load test's 16 clients x 200 mixed
calls spread over both servers lose nothing."""

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
