"""The whole API: memories through their lifecycle, tasks, consolidation with a scripted LLM."""

import json

import pytest

from hindsight_memory import (Audit, Correction, Distilled, Explanation, Hindsight, HindsightError, HistoryEntry,
                              ListPage, LlmConfig, MaintainReport, Memory, NewMemory, Scope, Stats, Step, TaskEnd,
                              TaskState)
from scripted_llm import ScriptedServer, completion, operation

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000


def test_retain_takes_text_dicts_and_new_memories_and_get_returns_the_record(hs):
    bank = hs.bank("api-retain")
    out = bank.retain([
        "Deploys to production happen on Tuesdays",
        {"content": "处理中文CSV时需指定encoding='utf-8-sig'", "kind": "procedural", "tags": ["csv"],
         "scope": {"level": "project", "id": "etl"}, "metadata": {"turn": "D1:3"}, "importance": 0.9,
         "source": "user_explicit", "force": True},
        NewMemory("The nightly job writes to s3://exports", kind="semantic", scope=Scope("session", "s1"),
                  occurred_at=NOW - DAY, force=True),
    ], now=NOW)
    assert [o.action for o in out] == ["created"] * 3, out
    m = bank.get(out[1].id)
    assert isinstance(m, Memory)
    assert (m.kind, m.scope, m.tags, m.source, m.importance) == ("procedural", Scope("project", "etl"), ["csv"],
                                                                 "user-explicit", pytest.approx(0.9))
    assert m.meta("turn") == "D1:3" and m.metadata == [("turn", "D1:3")]
    assert m.embedding_model == hs.model_id and m.status == "active"
    assert bank.get(out[2].id).occurred_at == NOW - DAY
    assert m.to_dict()["scope"] == {"level": "project", "id": "etl"}

    hits = bank.recall("which encoding for a Chinese CSV", k=2, now=NOW, kinds=["procedural"], tags=["csv"],
                       scope=Scope("project", "etl"))
    assert [i.memory.id for i in hits.items] == [out[1].id]
    assert hits.items[0].score.total > 0 and hits.items[0].in_prompt
    vector = hs.embed(["which encoding for a Chinese CSV"])[0]
    assert len(vector) == bank.stats().dimension
    again = bank.recall("which encoding for a Chinese CSV", k=1, now=NOW, vector=vector, min_score=0.0)
    assert again.items[0].memory.id == out[1].id
    [only] = bank.retain("A single text works too", now=NOW)
    assert only.id
    assert "api-retain" in hs.banks()


def test_stats_feedback_history_and_maintain(hs):
    bank = hs.bank("api-stats")
    [a] = bank.retain([{"content": "The build cache lives in /var/cache/ci", "force": True}], now=NOW)
    stats = bank.stats()
    assert isinstance(stats, Stats) and stats.active == 1 and stats.bank == "api-stats"
    assert ("episodic", 1) in stats.active_by_kind
    [m] = bank.feedback([a.id], "success", now=NOW + 1000)
    assert m.confidence > bank.at(NOW).get(a.id).confidence - 1  # returned the updated record
    with pytest.raises(HindsightError) as e:
        bank.feedback([a.id, "no-such-id"], "failure")
    assert e.value.kind == "not-found"
    [entry] = bank.history(a.id)
    assert isinstance(entry, HistoryEntry) and entry.event == "created" and entry.memory.id == a.id
    report = bank.maintain(now=NOW + 400 * DAY, dry_run=True)
    assert isinstance(report, MaintainReport) and report.active_before == 1
    assert bank.stats().active == 1, "a dry run changes nothing"


def test_forget_soft_restores_and_forget_hard_erases(hs):
    bank = hs.bank("api-forget")
    soft, hard = bank.retain([{"content": "The VPN needs the split-tunnel profile", "force": True},
                              {"content": "The user's home address is 12 Elm Street", "force": True}], now=NOW)
    bank.forget(soft.id, now=NOW + 1)
    assert bank.get(soft.id).status == "archived"
    assert soft.id not in [i.memory.id for i in bank.recall("VPN profile", now=NOW + 2).items]
    assert bank.restore(soft.id, now=NOW + 3).status == "active"

    receipt = bank.forget(hard.id, hard=True, now=NOW + 4)
    assert receipt.memories == [f"api-forget/{hard.id}"] and receipt.vectors >= 1, receipt
    with pytest.raises(HindsightError) as e:
        bank.get(hard.id)
    assert e.value.kind == "not-found"
    with pytest.raises(HindsightError) as e:
        bank.restore(hard.id)
    assert e.value.kind == "not-found"
    assert bank.stats().total == 1
    assert "Elm Street" not in json.dumps([i.memory.content for i in bank.recall("home address", now=NOW + 5).items])


def test_a_trajectory_told_whole_is_distilled_and_a_refused_one_leaves_no_task(hs):
    bank = hs.bank("api-trajectory")
    steps = [
        {"type": "tool-call", "text": "pip install pandas==1.5", "tool": "shell"},
        {"type": "tool-result", "text": "ERROR: no matching distribution for python 3.13", "tool": "shell",
         "error": True},
        {"type": "answer", "text": "Installed pandas 2.2 instead, which supports python 3.13"},
    ]
    end = bank.distill_trajectory("install pandas on python 3.13", "success", steps, ["python is 3.13"],
                                  agent_id="coder", force=True, now=NOW)
    assert end.method == "rules", end
    stored = [d.outcome.id for d in end.items if d.outcome.id]
    assert stored, end.reason
    assert all(bank.get(i).agent_id == "coder" for i in stored)
    with pytest.raises(HindsightError) as e:
        bank.distill_trajectory("x", "success", [{"type": "dance", "text": "y"}])
    assert e.value.field == "step.kind"
    with pytest.raises(HindsightError) as e:
        bank.distill_trajectory("x", "won")
    assert e.value.field == "outcome"
    assert len(bank.tasks(all=True)) == 1, "a refused trajectory leaves no task"
    assert bank.delete_bank() > 0
    assert "api-trajectory" not in hs.banks()


def test_unsupersede_brings_a_replaced_memory_back_beside_its_replacement(hs):
    bank = hs.bank("api-unsupersede")
    [old] = bank.retain(["The staging database lives on port 5432"], now=NOW)
    [new] = bank.retain(["The staging database moved to port 6543"], now=NOW + DAY)
    assert new.action == "superseded" and new.related == old.id, new
    assert bank.get(old.id).status == "superseded"
    hits = bank.recall("staging database port", now=NOW + DAY, include_superseded=True)
    assert old.id in [i.memory.id for i in hits.items]
    events = [(h.event, h.memory.id) for h in bank.history(old.id)]
    assert ("created", old.id) in events and ("superseded", old.id) in events, events

    back = bank.unsupersede(old.id, now=NOW + 2 * DAY)
    assert back.status == "active" and back.id == old.id
    assert new.id in back.conflicts_with or old.id in bank.get(new.id).conflicts_with
    assert bank.stats().active == 2
    with pytest.raises(HindsightError):
        bank.unsupersede(new.id)  # never superseded


def test_a_task_from_begin_to_distillation(hs):
    bank = hs.bank("api-tasks")
    task = bank.begin_task("clean the vendor CSV export", task_type="data-cleaning", now=NOW)
    assert task.id and task.state().goal == "clean the vendor CSV export"
    task.step("tool-call", "pd.read_csv('v.csv')", tool="python")
    task.step("tool-result", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff", tool="python", error=True)
    task.step("thought", "retry with the BOM-aware codec", step_id="s-3")
    task.step("thought", "retry with the BOM-aware codec", step_id="s-3")  # a retried request: one step
    task.update(step=Step("tool-call", "pd.read_csv('v.csv', encoding='utf-8-sig')", tool="python"))
    task.fact("the vendor CSV starts with a BOM")
    task.fact("the vendor CSV starts with a BOM")  # the same update twice changes nothing
    task.assume("every export has the same columns")
    task.question("does the vendor ever send UTF-16?")
    task.note("ask the vendor to drop the BOM")
    state = task.current_step("writing the cleaned file")
    assert isinstance(state, TaskState)
    assert state.task_type == "data-cleaning"
    assert state.confirmed_facts == ["the vendor CSV starts with a BOM"]
    assert state.assumptions == ["every export has the same columns"]
    assert state.open_questions == ["does the vendor ever send UTF-16?"]
    assert state.notes == ["ask the vendor to drop the BOM"]
    assert state.current_step == "writing the cleaned file"
    assert [s.kind for s in state.steps] == ["tool-call", "tool-result", "thought", "tool-call"]
    assert state.tool_calls[0].tool == "python" and state.tool_calls[0].error
    assert "UnicodeDecodeError" in (state.tool_calls[0].result or "")

    with pytest.raises(HindsightError) as e:
        task.note("a change made against an old version", expected_version=state.version - 1)
    assert e.value.kind == "conflict"
    assert task.note("made against the current one", expected_version=state.version).version == state.version + 1

    resumed = bank.resume_task(task.id)
    assert resumed.state().version == state.version + 1
    assert [t.id for t in bank.tasks()] == [task.id]

    end = task.end("success", detail="cleaned 1,204 rows", force=True, now=NOW + 60_000)
    assert isinstance(end, TaskEnd) and end.task.outcome == "success" and end.task.detail == "cleaned 1,204 rows"
    assert end.method == "rules", end  # no LLM: the rules over the structured fields
    assert all(isinstance(d, Distilled) for d in end.items)
    assert any("BOM" in d.content for d in end.items), end.items
    assert bank.tasks() == [] and [t.id for t in bank.tasks(all=True)] == [task.id]
    with pytest.raises(HindsightError) as e:
        task.distill(rules_only=True)
    assert e.value.kind == "invalid-input" and "already distilled" in e.value.message

    tiny = bank.begin_task("look up the retention period", now=NOW)
    tiny.fact("logs are kept for 30 days")
    skipped = tiny.end("success", now=NOW + 1000)
    assert skipped.method == "skipped" and skipped.items == [] and "distil" in skipped.reason, skipped
    again = tiny.distill(rules_only=True, now=NOW + 2000)  # distils it anyway
    assert again.method == "rules" and any("30 days" in d.content for d in again.items), again

    bank.delete_task(task.id)
    with pytest.raises(HindsightError) as e:
        bank.resume_task(task.id)
    assert e.value.kind == "not-found" and e.value.what == "task" and e.value.id == task.id, e.value
    with pytest.raises(HindsightError) as e:
        task.step("dance", "x")
    assert e.value.kind == "invalid-input" and e.value.field == "step.kind"


def test_consolidate_needs_an_llm(hs):
    bank = hs.bank("api-consolidate-no-llm")
    bank.retain([{"content": "Ran the weekly report", "kind": "episodic", "force": True}], now=NOW)
    with pytest.raises(HindsightError) as e:
        bank.consolidate()
    assert e.value.kind == "llm" and "language model" in e.value.message


def test_consolidate_with_a_scripted_llm(tmp_path):
    lessons = {"memories": [
        {"kind": "semantic", "content": "The vendor's CSV exports always start with a UTF-8 BOM",
         "tags": ["csv", "vendor"], "confidence": 0.9, "sources": [0, 1, 2]},
        {"kind": "semantic", "content": "A guess nothing supports", "confidence": 0.9, "sources": []},
        {"kind": "semantic", "content": "A shaky pattern", "confidence": 0.2, "sources": [0]},
    ]}

    def route(body):
        if operation(body) == "consolidate":
            return completion(json.dumps(lessons), prompt_tokens=300, completion_tokens=80)
        return {"status": 503, "body_text": "only consolidation is scripted"}

    with ScriptedServer(route=route) as server:
        config = LlmConfig(url=server.url, model="scripted", retries=0, timeout_ms=5000)
        with Hindsight.open(db=tmp_path / "consolidate.db", llm=config) as hs:
            bank = hs.bank("consolidate")
            episodes = ["Cleaned the vendor CSV from March: it started with a BOM",
                        "Cleaned the vendor CSV from April: it started with a BOM again",
                        "The May vendor export also had a byte-order mark at the start"]
            bank.retain([{"content": e, "kind": "episodic", "force": True} for e in episodes], now=NOW)
            items = bank.consolidate(since=NOW - DAY, now=NOW + DAY)
            asked = [r["body"] for r in server.requests if operation(r["body"]) == "consolidate"]
            assert len(asked) == 1 and "BOM" in asked[0]["messages"][1]["content"]
            by_content = {d.content: d for d in items}
            kept = by_content["The vendor's CSV exports always start with a UTF-8 BOM"]
            assert kept.kind == "semantic" and kept.outcome.action == "created", kept
            memory = bank.get(kept.outcome.id)
            assert len(memory.meta("derived_from").split(",")) == 3
            assert by_content["A guess nothing supports"].outcome.action == "filtered"
            assert by_content["A shaky pattern"].outcome.action == "filtered"
            usage = hs.llm_usage()["consolidate"]
            assert (usage.calls, usage.failures, usage.prompt_tokens) == (1, 0, 300)


def test_recall_across_banks_ranks_them_together_and_names_each_items_bank(hs):
    hs.bank("agent:coder").retain("Lunch orders go through the office chat")
    hs.bank("shared").retain("Vendor model X-200 fails its firmware update over Wi-Fi; use the USB cable")
    hits = hs.recall(["agent:coder", "shared"], "firmware update fails", k=2)
    assert [item.bank for item in hits.items] == ["shared", "agent:coder"]
    assert "X-200" in hits.items[0].memory.content
    assert "shared, from shared]" in hits.prompt
    with pytest.raises(HindsightError) as e:
        hs.recall(["shared", "shared"], "x")
    assert e.value.field == "banks"


def test_a_correction_supersedes_the_memory_and_lowers_a_near_duplicates_confidence(hs):
    bank = hs.bank("api-correct")
    wrong, similar, other = bank.retain([{"content": "The staging database port is 5433", "force": True},
                                         {"content": "The staging database port is 5433 today", "force": True},
                                         {"content": "Lunch is served at noon in the cafeteria", "force": True}],
                                        now=NOW)
    before, other_before = bank.get(similar.id).confidence, bank.get(other.id).confidence
    fix = bank.correct(wrong.id, "The staging database port is 6543", now=NOW + 1)
    assert isinstance(fix, Correction) and fix.superseded == wrong.id
    assert fix.memory.source == "user-feedback" and fix.memory.supersedes == [wrong.id]
    assert bank.get(wrong.id).status == "superseded"
    assert [c.id for c in fix.cascade] == [similar.id], "only the near-duplicate loses confidence"
    lowered = fix.cascade[0]
    assert lowered.before == pytest.approx(before) and lowered.after < lowered.before
    assert bank.get(similar.id).confidence == pytest.approx(lowered.after)
    assert bank.get(other.id).confidence == other_before, "an unrelated memory keeps its confidence"
    hits = [i.memory.id for i in bank.recall("staging database port", now=NOW + 2).items]
    assert wrong.id not in hits, "the corrected memory is gone from recall"
    assert hits[0] == fix.memory.id
    with pytest.raises(HindsightError):
        bank.correct(wrong.id, "port 7000")  # superseded: corrected already
    with pytest.raises(HindsightError) as e:
        bank.correct(similar.id, None)
    assert e.value.field == "text"


def test_list_filters_and_pages_with_a_cursor_every_memory_once(hs):
    bank = hs.bank("api-list")
    facts = [{"content": f"Fact number {i} about the vendor CSV files", "tags": ["even" if i % 2 == 0 else "odd"],
              "occurred_at": NOW + i, "force": True} for i in range(7)]
    ids = [o.id for o in bank.retain(facts + [{"content": "Restart the worker with systemctl", "kind": "procedural",
                                               "force": True}], now=NOW)]
    everything = bank.list()
    assert isinstance(everything, ListPage) and everything.total == 8 and everything.next_cursor is None
    assert [m.id for m in bank.list(kind="procedural").items] == [ids[7]]
    assert bank.list(tag="even").total == 4
    assert [m.id for m in bank.list(text="NUMBER 3").items] == [ids[3]]
    assert bank.list(order="most_recalled").total == 8

    seen, cursor = [], None
    while True:
        page = bank.list(limit=3, cursor=cursor)
        assert len(page.items) <= 3 and page.total == 8, "every page counts every match"
        seen += [m.id for m in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)

    bank.forget(ids[0], now=NOW + 10)
    assert bank.list().total == 7, "active ones by default"
    assert [m.id for m in bank.list(status="archived").items] == [ids[0]]
    assert bank.list(status="any").total == 8
    with pytest.raises(HindsightError) as e:
        bank.list(order="oldest")
    assert e.value.field == "order"
    with pytest.raises(HindsightError) as e:
        bank.list(cursor="bogus")
    assert e.value.kind != "trap"


def test_a_tasks_answer_cites_what_it_recalled_and_explain_and_the_audit_tell_what_was_useful(hs):
    bank = hs.bank("api-audit")
    encoding, columns = [o.id for o in bank.retain([
        {"content": "Read the vendor CSV with encoding utf-8-sig", "force": True},
        {"content": "The vendor CSV has twelve columns", "force": True}], now=NOW)]
    task = bank.begin_task("clean the vendor CSV", now=NOW)
    recalled = task.recall("vendor CSV", agent_id="coder", now=NOW)
    handle = next(i.handle for i in recalled.items if i.memory.id == encoding)
    assert handle and handle.startswith("m") and f"[{handle}]" in recalled.prompt
    task.step("answer", f"Read it with utf-8-sig, as [{handle}] says.")
    end = task.end("success", now=NOW + 1)
    assert (end.cited, end.unused) == ([encoding], [columns])

    why = bank.explain(encoding)
    assert isinstance(why, Explanation) and why.memory.id == encoding
    assert len(why.recalls) == 1 and (why.cited, why.helpful) == (1, 1)
    assert (why.recalls[0].agent_id, why.recalls[0].task_id) == ("coder", task.id)
    assert any(e.event == "cited" and e.task_id == task.id for e in why.events), why.events

    # The office plant memories are recalled five times (audit.unused_after); one is reported used.
    noisy, useful, quiet = [o.id for o in bank.retain([
        {"content": "The office plant needs water on Mondays", "force": True},
        {"content": "The plant food is in the left drawer of the office", "force": True},
        {"content": "Quarterly taxes are due in April", "force": True}], now=NOW)]
    for i in range(5):
        bank.recall("office plant", k=2, now=NOW + 2 + i)
    [reported] = bank.used(useful, now=NOW + 10)
    assert reported.id == useful
    audit = bank.audit()
    assert isinstance(audit, Audit) and audit.bank == "api-audit" and audit.log_entries == 6
    assert [i.id for i in audit.never_useful] == [noisy]
    assert [i.id for i in audit.never_recalled] == [quiet]
    assert any(i.id == useful and i.cited == 1 for i in audit.most_useful), audit.most_useful
    with pytest.raises(HindsightError) as e:
        bank.explain("no-such-id")
    assert e.value.kind == "not-found"


def test_health_finds_a_forced_duplicate_with_its_fix_and_every_call_reports_its_usage(hs):
    bank = hs.bank("api-health")
    first, copy = [o.id for o in bank.retain([
        {"content": "The staging cluster runs Kubernetes 1.29", "force": True},
        {"content": "The staging cluster runs Kubernetes 1.29", "force": True}], now=NOW)]
    assert (bank.last_usage().embed_texts, bank.last_usage().llm_calls) == (2, 0)
    report = bank.health(now=NOW + 1)
    assert report.active == 2
    [duplicate] = [f for f in report.findings if f.kind == "duplicate"]
    assert sorted(duplicate.ids) == sorted([first, copy])
    assert duplicate.fix == "hindsight maintain --bank api-health"
    bank.maintain(now=NOW + 1)
    assert bank.health(now=NOW + 1).findings == []
    bank.recall("staging cluster", now=NOW + 2)
    assert bank.last_usage().embed_texts == 1
    assert any(u.operation == "retain" and u.calls == 1 for u in bank.stats().usage)
