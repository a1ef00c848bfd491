"""The memory panel served at `/` by `hindsight serve --http`, driven in headless Chromium:
browsing, search with score bars, a memory's page, correcting, forgetting (with the in-page
confirmation), restoring, feedback, the audit, export, addresses per view, the token prompt,
and no JavaScript error on any view. What the panel did is then checked through the CLI."""

import json
import urllib.parse

import pytest

pytest.importorskip("selenium", reason="selenium is not installed (./dev test installs it from tests/requirements.txt)")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from conftest import ARCHIVED, BANK, SEEDS, cli, cli_json, wait_until  # noqa: E402

Q_BANK = "bank=" + urllib.parse.quote(BANK, safe="")
FACTORS = ["semantic", "lexical", "recency", "confidence", "importance", "task_match", "source"]
CORRECTED = "pandas.read_csv needs encoding='utf-8-sig' and sep=';' for the vendor's CSV export"


def query_of(panel) -> dict:
    parsed = urllib.parse.urlparse(panel.driver.current_url)
    return dict(urllib.parse.parse_qsl(parsed.query))


def rows(panel) -> list:
    return panel.css("#memory-list > li[data-testid=memory-row]")


def row_ids(panel) -> list[str]:
    return [r.get_attribute("data-id") for r in rows(panel)]


def click(panel, element_id: str):
    panel.by_id(element_id).click()


def memory_id_shown(panel) -> str:
    return panel.by_id("memory-id").text


def test_panel_flow(seeded, server_factory, panel_factory, tmp_path):
    db, ids = seeded
    server = server_factory(db)
    panel = panel_factory(server.base)
    active = [name for name in SEEDS if name != ARCHIVED]

    # --- /?bank=B opens straight on the bank's list, newest first.
    panel.open(Q_BANK, "list")
    assert query_of(panel)["bank"] == BANK
    assert panel.by_id("bank-select").get_attribute("value") == BANK
    assert not panel.by_id("export-link").is_displayed() and not panel.by_id("token-clear").is_displayed()
    shown = row_ids(panel)
    assert sorted(shown) == sorted(ids[n] for n in active), shown
    created = [r.find_element(By.TAG_NAME, "time").get_attribute("datetime") for r in rows(panel)]
    assert created == sorted(created, reverse=True), f"not newest first: {created}"
    assert panel.by_id("list-total").get_attribute("data-total") == str(len(active))
    assert panel.css("#status-archived .count")[0].text == "1"
    assert panel.css("#status-active .count")[0].text == str(len(active))
    semantic = sum(1 for n in active if SEEDS[n][0] == "semantic")
    assert panel.css("#kind-semantic .count")[0].text == str(semantic)
    # Chinese text and markup-like text are shown as they are, never interpreted.
    link_text = {r.get_attribute("data-id"): r.find_element(By.CSS_SELECTOR, "a.memory-link").text for r in rows(panel)}
    assert link_text[ids["chinese"]] == SEEDS["chinese"][1]
    assert link_text[ids["markup"]] == SEEDS["markup"][1]
    assert not panel.css("#memory-list b, #memory-list script")
    assert panel.driver.execute_script("return window.__pwned === undefined")
    panel.screenshot("list")

    # --- Filter by kind: its own address; then back.
    before = panel.rendered()
    click(panel, "kind-semantic")
    panel.wait_view("list", after=before)
    assert query_of(panel).get("kind") == "semantic"
    assert {r.get_attribute("data-kind") for r in rows(panel)} == {"semantic"}
    assert len(rows(panel)) == semantic
    panel.screenshot("list-semantic")
    before = panel.rendered()
    panel.driver.back()
    panel.wait_view("list", after=before)
    assert "kind" not in query_of(panel)
    assert len(rows(panel)) == len(active)

    # --- Search (keyboard: type, Enter), with one bar per score factor.
    before = panel.rendered()
    click(panel, "nav-search")
    panel.wait_view("search", after=before)
    box = panel.by_id("search-input")
    assert panel.driver.switch_to.active_element == box
    before = panel.rendered()
    box.send_keys("vendor CSV export encoding for pandas", Keys.ENTER)
    panel.wait_view("search", after=before)
    q = query_of(panel)
    assert q["view"] == "search" and q["q"] == "vendor CSV export encoding for pandas", q
    results = panel.css("#search-results > li")
    assert results, "the search returned nothing"
    found = [r.get_attribute("data-id") for r in results]
    assert ids["pandas"] in found, found
    for result in results:
        bars = result.find_elements(By.CSS_SELECTOR, "[data-testid=score-bar]")
        assert [b.get_attribute("data-factor") for b in bars] == FACTORS
    top = results[0].find_elements(By.CSS_SELECTOR, "[data-testid=score-bar]")
    widths = [b.size["width"] for b in top]
    assert any(w > 0 for w in widths), widths
    assert sum(float(b.get_attribute("data-value")) for b in top) > 0
    panel.screenshot("search")

    # --- Open the memory from the results: fields, history, provenance, recall log.
    target = next(r for r in results if r.get_attribute("data-id") == ids["pandas"])
    before = panel.rendered()
    target.find_element(By.CSS_SELECTOR, "a.memory-link").click()
    panel.wait_view("memory", after=before)
    assert query_of(panel) == {"bank": BANK, "view": "memory", "id": ids["pandas"]}
    assert memory_id_shown(panel) == ids["pandas"]
    assert panel.by_id("memory-content").text == SEEDS["pandas"][1]
    assert panel.by_id("memory-status").get_attribute("data-status") == "active"
    fields = panel.by_id("memory-fields").text
    assert "data-cleaning" in fields and "csv, pandas" in fields
    assert [e.get_attribute("data-event") for e in panel.css("#history-list > li")][:1] == ["created"]
    assert panel.css("#provenance") and panel.css("#recalls") and panel.css("#usage-counts")
    assert not panel.error_banner(), panel.error_banner()
    panel.screenshot("memory")

    # --- Correct it: textarea, Enter saves; the new memory is shown.
    click(panel, "correct-open")
    area = panel.by_id("correct-text")
    assert panel.driver.switch_to.active_element == area
    area.send_keys(Keys.ESCAPE)  # Escape closes the box...
    assert not panel.by_id("correct-form").is_displayed()
    click(panel, "correct-open")  # ...and it opens again
    area = panel.by_id("correct-text")
    area.clear()
    before = panel.rendered()
    area.send_keys(CORRECTED, Keys.ENTER)
    panel.wait_view("memory", after=before)
    new_id = memory_id_shown(panel)
    assert new_id and new_id != ids["pandas"]
    assert query_of(panel)["id"] == new_id
    assert panel.by_id("memory-content").text == CORRECTED
    assert panel.by_id("memory-status").get_attribute("data-status") == "active"
    result = panel.by_id("correct-result")
    assert result.find_element(By.ID, "corrected-old-link").get_attribute("href").endswith(
        "id=" + urllib.parse.quote(ids["pandas"]))
    assert "user-feedback" in panel.by_id("memory-fields").text
    panel.screenshot("correct")

    # --- Mark the Chinese one helpful (its own address, opened directly).
    panel.open(f"{Q_BANK}&view=memory&id={ids['chinese']}", "memory")
    assert panel.by_id("memory-content").text == SEEDS["chinese"][1]
    before = panel.rendered()
    click(panel, "feedback-helpful")
    panel.wait_view("memory", after=before)
    assert "helpful" in panel.by_id("notice").text.lower()

    # --- Hard-forget another: the in-page confirmation says it cannot be undone; Escape cancels.
    panel.open(f"{Q_BANK}&view=memory&id={ids['sftp']}", "memory")
    click(panel, "forget-hard")
    dialog = panel.by_id("confirm-dialog")
    panel.wait(lambda d: dialog.get_attribute("open") is not None, message="the confirmation did not open")
    assert "cannot be undone" in dialog.text
    panel.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    panel.wait(lambda d: dialog.get_attribute("open") is None, message="Escape did not close the confirmation")
    assert memory_id_shown(panel) == ids["sftp"]
    click(panel, "forget-hard")
    panel.wait(lambda d: dialog.get_attribute("open") is not None, message="the confirmation did not open")
    before = panel.rendered()
    click(panel, "confirm-ok")
    panel.wait_view("list", after=before)
    assert ids["sftp"] not in row_ids(panel)
    assert "permanently" in panel.by_id("notice").text

    # --- The archived one: listed under archived; open it and restore it.
    before = panel.rendered()
    click(panel, "status-archived")
    panel.wait_view("list", after=before)
    assert query_of(panel).get("status") == "archived"
    assert row_ids(panel) == [ids[ARCHIVED]]
    before = panel.rendered()
    rows(panel)[0].find_element(By.CSS_SELECTOR, "a.memory-link").click()
    panel.wait_view("memory", after=before)
    assert panel.by_id("memory-status").get_attribute("data-status") == "archived"
    assert not panel.css("#forget-soft")
    before = panel.rendered()
    click(panel, "restore")
    panel.wait_view("memory", after=before)
    assert panel.by_id("memory-status").get_attribute("data-status") == "active"
    assert panel.css("#forget-soft") and not panel.css("#restore")

    # --- The audit.
    before = panel.rendered()
    click(panel, "nav-audit")
    panel.wait_view("audit", after=before)
    assert query_of(panel) == {"bank": BANK, "view": "audit"}
    for section in ("audit-never-useful", "audit-never-recalled", "audit-most-useful"):
        assert panel.css("#" + section), section
    panel.screenshot("audit")

    # --- Export: the bank as JSONL, offered as a download.
    downloads = tmp_path / "downloads"
    downloads.mkdir(exist_ok=True)
    panel.driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    click(panel, "export-button")
    link = panel.by_id("export-link")
    panel.wait(lambda d: (link.get_attribute("href") or "").startswith("blob:"), message="no export link")
    assert link.is_displayed() and link.get_attribute("download").endswith(".jsonl")
    assert "Exported" in panel.by_id("notice").text
    saved = wait_until(lambda: [p for p in downloads.glob("*.jsonl")], what="the exported file")[0]
    text = wait_until(lambda: saved.read_text(encoding="utf-8"), what="the exported file's text")
    assert int(link.get_attribute("data-bytes")) == len(text.encode("utf-8"))
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines, "the export is empty"
    exported = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines)
    assert CORRECTED in exported and SEEDS["chinese"][1] in exported

    # --- Back goes to the previous view's address.
    before = panel.rendered()
    panel.driver.back()
    panel.wait_view("memory", after=before)
    assert query_of(panel)["id"] == ids[ARCHIVED]

    # --- The health report: every finding names its memories and the command that fixes it.
    before = panel.rendered()
    click(panel, "nav-health")
    panel.wait_view("health", after=before)
    assert query_of(panel) == {"bank": BANK, "view": "health"}
    assert panel.css("#health-findings") and panel.css("#health-counts")
    for finding in panel.css("[data-testid=health-finding]"):
        assert finding.find_element(By.CSS_SELECTOR, "[data-testid=health-fix]").text.startswith("hindsight "), finding.text
    panel.screenshot("health")

    assert panel.js_errors() == []
    assert not panel.error_banner(), panel.error_banner()

    # --- What the panel did, as the store has it (read through the CLI once the server is gone).
    server.stop()
    listed = cli_json(db, "list", "--status", "any")
    assert {"items", "next_cursor", "total"} <= set(listed), listed.keys()
    by_id = {m["id"]: m for m in listed["items"]}
    old = cli_json(db, "get", ids["pandas"])
    assert old["status"] == "superseded", old
    assert old["superseded_by"] == new_id
    new = cli_json(db, "get", new_id)
    assert new["status"] == "active" and new["source"] == "user-feedback" and new["content"] == CORRECTED, new
    assert ids["pandas"] in new["supersedes"]
    assert by_id[new_id]["status"] == "active" and by_id[ids["pandas"]]["status"] == "superseded"
    gone = cli(db, "get", ids["sftp"], check=False)
    assert gone.returncode != 0, gone.stdout
    assert ids["sftp"] not in by_id
    assert cli_json(db, "get", ids[ARCHIVED])["status"] == "active"
    assert by_id[ids[ARCHIVED]]["status"] == "active"


def test_no_javascript_errors(seeded, server_factory, panel_factory):
    db, ids = seeded
    server = server_factory(db)
    panel = panel_factory(server.base)
    pages = [
        ("", "list"),  # no bank: the server's default bank
        (Q_BANK, "list"),
        (f"{Q_BANK}&view=list&kind=semantic&status=active", "list"),
        (f"{Q_BANK}&view=list&status=any&order=most_recalled", "list"),
        (f"{Q_BANK}&view=list&text=CSV&tag=pandas", "list"),
        (f"{Q_BANK}&view=search", "search"),
        (f"{Q_BANK}&view=search&q=" + urllib.parse.quote("日期格式"), "search"),
        (f"{Q_BANK}&view=search&q=deploy&kind=procedural&k=5&superseded=1", "search"),
        (f"{Q_BANK}&view=memory&id={ids['chinese']}", "memory"),
        (f"{Q_BANK}&view=memory&id={ids[ARCHIVED]}", "memory"),
        (f"{Q_BANK}&view=audit", "audit"),
    ]
    for query, view in pages:
        panel.open(query, view)
        assert query_of(panel).get("bank") == BANK, (query, panel.driver.current_url)
        assert not panel.error_banner(), (query, panel.error_banner())
        assert panel.js_errors() == [], query
    # Keyboard: Tab walks real controls, each with a visible focus ring; Enter follows a link.
    panel.open(Q_BANK, "list")
    body = panel.driver.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    seen = []
    for _ in range(8):
        el = panel.driver.switch_to.active_element
        seen.append(el.get_attribute("id") or el.tag_name)
        assert el.tag_name in ("a", "button", "select", "input", "textarea"), seen
        ring = panel.driver.execute_script(
            "const s = getComputedStyle(arguments[0]); return s.outlineStyle + ' ' + s.outlineWidth", el)
        assert not ring.startswith("none") and not ring.endswith(" 0px"), (seen, ring)
        if el.get_attribute("id") == "nav-audit":
            break
        el.send_keys(Keys.TAB)
    assert "bank-select" in seen and "nav-audit" in seen, seen
    before = panel.rendered()
    panel.driver.switch_to.active_element.send_keys(Keys.ENTER)
    panel.wait_view("audit", after=before)
    assert query_of(panel)["view"] == "audit"

    # A memory that does not exist: an error shown in the page, not a script error.
    panel.open(f"{Q_BANK}&view=memory&id=m0000000000000000000", "error")
    assert panel.error_banner()
    assert panel.js_errors() == []


def test_panel_asks_for_token(seeded, server_factory, panel_factory, tmp_path):
    db, ids = seeded
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": [
        {"name": "alice", "token": "secret-token-123", "read": ["*"], "write": ["*"]}]}))
    server = server_factory(db, ["--auth", str(auth)])
    panel = panel_factory(server.base)
    # The browser logs each 401 the panel is answered before it has the right token.
    expected = [r"status of 401"]

    panel.open(Q_BANK, "token")
    form = panel.by_id("token-form")
    assert form.is_displayed()
    token_input = panel.by_id("token-input")
    assert panel.driver.switch_to.active_element == token_input
    assert not panel.by_id("export-button").is_displayed() and not panel.by_id("bank-select").is_displayed()
    panel.screenshot("token")

    before = panel.rendered()
    token_input.send_keys("not-the-token", Keys.ENTER)
    panel.wait_view("token", after=before)
    assert "did not accept" in panel.by_id("token-form").text

    before = panel.rendered()
    panel.by_id("token-input").send_keys("secret-token-123", Keys.ENTER)
    panel.wait_view("list", after=before)
    assert sorted(row_ids(panel)) == sorted(ids[n] for n in SEEDS if n != ARCHIVED)
    assert panel.driver.execute_script("return sessionStorage.getItem('hindsight-panel-token')") == "secret-token-123"

    # The token stays for the tab: another view's address opens without asking again.
    panel.open(f"{Q_BANK}&view=memory&id={ids['chinese']}", "memory")
    assert panel.by_id("memory-content").text == SEEDS["chinese"][1]
    panel.open(f"{Q_BANK}&view=search&q=timezone", "search")
    assert panel.css("#search-results > li") or panel.css("#search-empty")
    assert panel.js_errors(allow=expected) == []
    assert not panel.error_banner(), panel.error_banner()


def test_bank_choice_and_paging(seeded, server_factory, panel_factory, tmp_path):
    """Another bank is chosen from the bank menu; its list comes 50 at a time, "More" brings the
    rest."""
    from selenium.webdriver.support.ui import Select

    db, ids = seeded
    many = "agent:many"
    lines = tmp_path / "many.jsonl"
    lines.write_text("".join(json.dumps({"text": f"Paging check: memory number {i:02d} of sixty", "kind": "episodic",
                                         "force": True}) + "\n" for i in range(60)))
    cli(db, "retain", "--file", str(lines), bank=many)
    server = server_factory(db)
    panel = panel_factory(server.base)

    panel.open(Q_BANK, "list")
    select = Select(panel.by_id("bank-select"))
    assert {BANK, many} <= {o.get_attribute("value") for o in select.options}
    before = panel.rendered()
    select.select_by_value(many)
    panel.wait_view("list", after=before)
    assert query_of(panel)["bank"] == many
    assert panel.by_id("list-total").get_attribute("data-total") == "60"
    assert len(rows(panel)) == 50
    more = panel.by_id("list-more")
    assert more.is_displayed()
    more.click()
    panel.wait(lambda d: len(rows(panel)) == 60, message="More did not bring the last 10")
    assert len(set(row_ids(panel))) == 60
    panel.wait(lambda d: not panel.by_id("list-more").is_displayed(), message="More is still offered")
    created = [r.find_element(By.TAG_NAME, "time").get_attribute("datetime") for r in rows(panel)]
    assert created == sorted(created, reverse=True)

    # The filter form: Enter submits it, and the filter is in the address.
    before = panel.rendered()
    panel.by_id("filter-text").send_keys("number 07", Keys.ENTER)
    panel.wait_view("list", after=before)
    assert query_of(panel).get("text") == "number 07"
    texts = [r.find_element(By.CSS_SELECTOR, "a.memory-link").text for r in rows(panel)]
    assert "Paging check: memory number 07 of sixty" in texts, texts

    # Back in the first bank, nothing of the other shows.
    before = panel.rendered()
    Select(panel.by_id("bank-select")).select_by_value(BANK)
    panel.wait_view("list", after=before)
    assert sorted(row_ids(panel)) == sorted(ids[n] for n in SEEDS if n != ARCHIVED)
    assert panel.js_errors() == []
