"""The LangGraph store over the installed package and the real langgraph (the `[langgraph]` extra)."""

import asyncio
import subprocess
import sys
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp

from hindsight_memory import Hindsight
from hindsight_memory.langgraph import HindsightStore


@pytest.fixture
def store(hs):
    s = HindsightStore(hs)
    yield s
    for bank in hs.banks():
        if bank.startswith("lg-"):
            hs.bank(bank).delete_bank()


def test_put_get_replace_search_delete(store):
    ns = ("lg-user", "prefs")
    store.put(ns, "diet", {"text": "The user is vegetarian", "level": 1, "nested": {"a": [1, 2]}})
    store.put(ns, "pet", {"text": "The user has a cat named Miso", "level": 2})
    store.put(("lg-other",), "x", {"text": "Deploys go out on Tuesdays", "level": 3})

    got = store.get(ns, "diet")
    assert got.value == {"text": "The user is vegetarian", "level": 1, "nested": {"a": [1, 2]}}
    assert got.key == "diet" and got.namespace == ns
    first_created = got.created_at

    store.put(ns, "diet", {"text": "The user is vegan now", "level": 5})
    got = store.get(ns, "diet")
    assert got.value == {"text": "The user is vegan now", "level": 5}
    assert got.created_at == first_created and got.updated_at >= first_created
    # One item per key: the replaced value is gone from search too.
    everything = store.search(("lg-user",), limit=50)
    assert sorted(i.key for i in everything) == ["diet", "pet"]

    hits = store.search(("lg-user",), query="what food does the user eat?", limit=1)
    assert [h.key for h in hits] == ["diet"] and hits[0].score is not None
    assert [h.key for h in store.search(("lg-user",), filter={"level": {"$gte": 5}})] == ["diet"]
    assert [h.key for h in store.search(("lg-user",), filter={"level": 2})] == ["pet"]
    assert len(store.search(("lg-user",), limit=1, offset=1)) == 1

    assert ("lg-user", "prefs") in store.list_namespaces(prefix=("lg-user",))
    assert store.list_namespaces(prefix=("lg-user",), max_depth=1) == [("lg-user",)]
    assert ("lg-other",) in store.list_namespaces(suffix=("lg-other",))

    store.delete(ns, "pet")
    assert store.get(ns, "pet") is None
    assert [i.key for i in store.search(ns)] == ["diet"]


def test_index_fields_are_what_recall_reads(store):
    ns = ("lg-index",)
    store.put(ns, "a", {"title": "Retry the payments API with backoff", "blob": "zzz"}, index=["title"])
    store.put(ns, "b", {"title": "The office plant needs water", "blob": "zzz"}, index=["title"])
    assert store.search(ns, query="payments API retries", limit=1)[0].key == "a"


def test_batch_and_abatch(store):
    ns = ("lg-batch",)
    results = store.batch([PutOp(ns, "k1", {"v": 1}), PutOp(ns, "k2", {"v": 2}), GetOp(ns, "k1"),
                           SearchOp(ns, {"v": 2}, 10, 0, None)])
    assert results[0] is None and results[2].value == {"v": 1} and [i.key for i in results[3]] == ["k2"]
    got = asyncio.run(store.aget(ns, "k2"))
    assert got.value == {"v": 2}
    asyncio.run(store.aput(ns, "k3", {"v": 3}))
    assert [i.key for i in asyncio.run(store.asearch(ns, filter={"v": 3}))] == ["k3"]


def test_bad_input_is_the_frameworks_error_and_loses_nothing(store):
    ns = ("lg-bad",)
    store.put(ns, "kept", {"text": "Keep me"})
    with pytest.raises(InvalidNamespaceError, match="namespace"):
        store.put(("lg-bad", "a:b"), "k", {"x": 1})
    with pytest.raises(InvalidNamespaceError, match="namespace"):
        store.put(("lg bad",), "k", {"x": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"x": 1})
    with pytest.raises(TypeError, match="value: not JSON-serialisable"):
        store.put(ns, "kept", {"x": {1, 2}})
    with pytest.raises(TypeError, match="value: not JSON-serialisable"):
        store.put(ns, "kept", {"x": float("nan")})
    # A namespace no one wrote is empty, as in LangGraph's own stores.
    assert store.get(("lg-missing",), "k") is None
    assert store.search(("lg-missing",)) == []
    assert store.get(ns, "kept").value == {"text": "Keep me"}
    with pytest.raises(TypeError, match="hs"):
        HindsightStore("memory.db")


class State(TypedDict):
    text: str
    found: list


def write(state: State, *, store: BaseStore):
    store.put(("lg-graph", "facts"), "f1", {"text": state["text"]})
    return {"found": []}


def read(state: State, *, store: BaseStore):
    return {"found": [i.value["text"] for i in store.search(("lg-graph",), query=state["text"], limit=1)]}


def graph(node, store):
    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(store=store)


def test_a_graph_writes_in_one_run_and_finds_it_in_the_next(tmp_path):
    db = tmp_path / "graph.db"
    with Hindsight.open(db=db, llm=None) as hs:
        graph(write, HindsightStore(hs)).invoke({"text": "The user's cat is called Miso", "found": []})
    # The next run is another process over the same file.
    program = (
        "import sys, json\n"
        "from test_langgraph import graph, read\n"
        "from hindsight_memory import Hindsight\n"
        "from hindsight_memory.langgraph import HindsightStore\n"
        "with Hindsight.open(db=sys.argv[1], llm=None) as hs:\n"
        "    out = graph(read, HindsightStore(hs)).invoke({'text': 'what is the cat called?', 'found': []})\n"
        "    print(json.dumps(out['found']))\n"
    )
    here = str(__import__("pathlib").Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", program, str(db)], capture_output=True, text=True, cwd=here,
                         check=True)
    assert out.stdout.strip() == '["The user\'s cat is called Miso"]'
