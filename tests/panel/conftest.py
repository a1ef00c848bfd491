"""The memory panel's browser tests: a seeded store, `hindsight serve --http` on it, and headless
Chromium driven by Selenium (Debian's chromium and chromedriver; ./dev test installs
them). Skipped, saying why, when the browser or its driver cannot be found."""

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "target" / "panel-artifacts"
BANK = "agent:panel"

# Collects what the page's scripts throw, from before the panel's own script runs.
ERROR_COLLECTOR = """
window.__panelErrors = [];
window.addEventListener('error', function (e) {
  var where = e.filename ? ' (' + e.filename + ':' + e.lineno + ')' : '';
  var what = e.message || (e.target && e.target.outerHTML ? 'failed to load ' + e.target.outerHTML.slice(0, 120) : e.type);
  window.__panelErrors.push('error: ' + what + where);
}, true);
window.addEventListener('unhandledrejection', function (e) {
  var r = e.reason;
  window.__panelErrors.push('unhandledrejection: ' + (r && (r.stack || r.message) || String(r)));
});
"""

SEEDS = {
    # name: (kind, text, extra flags)
    "pandas": ("semantic", "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV export "
               "(the headers were garbled otherwise)", ["--tags", "csv,pandas", "--task-type", "data-cleaning"]),
    "deploy": ("procedural", "To deploy the staging site, run `make deploy-staging` after the tests pass",
               ["--source", "user-explicit"]),
    "sftp": ("episodic", "The nightly import failed because the SFTP server rotated its host key",
             ["--source", "tool-result"]),
    "chinese": ("semantic", "用户偏好简体中文的回答，日期格式使用 YYYY-MM-DD（例如 2024-03-05）", ["--importance", "0.8"]),
    "markup": ("episodic", "The report title was <b>Q3 & Q4</b> <script>window.__pwned = 1</script>", []),
    "timezone": ("semantic", "The user's timezone is Europe/Berlin", ["--source", "user-explicit"]),
}
ARCHIVED = "timezone"


def hindsight_bin() -> str:
    path = os.environ.get("HINDSIGHT_BIN", str(REPO / "target" / "debug" / "hindsight"))
    if not Path(path).exists():
        raise RuntimeError(f"{path} is missing: build the workspace first (./dev test does)")
    return path


def cli(db: Path, *args: str, check: bool = True, bank: str = BANK) -> subprocess.CompletedProcess:
    """`hindsight --db DB --bank BANK ARGS --json`."""
    done = subprocess.run([hindsight_bin(), "--db", str(db), "--bank", bank, *args, "--json"],
                          capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"hindsight {' '.join(args)} failed ({done.returncode}): {done.stdout} {done.stderr}")
    return done


def cli_json(db: Path, *args: str):
    return json.loads(cli(db, *args).stdout)


def seed(db: Path) -> dict:
    """Retains SEEDS (one at a time, so each is newer than the one before) and archives ARCHIVED;
    returns their ids by name."""
    ids = {}
    for name, (kind, text, extra) in SEEDS.items():
        out = cli_json(db, "retain", "--text", text, "--kind", kind, "--force", *extra)
        assert out.get("id"), out
        ids[name] = out["id"]
    cli(db, "forget", ids[ARCHIVED])
    return ids


class Server:
    """`hindsight serve --http 127.0.0.1:0` in a child process; `base` is the panel's URL."""

    def __init__(self, db: Path, extra=()):
        self.process = subprocess.Popen(
            [hindsight_bin(), "serve", "--http", "127.0.0.1:0", "--db", str(db), "--bank", BANK,
             "--workers", "1", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        line = self.process.stderr.readline()
        match = re.search(r"(http://\S+)/mcp", line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"the server did not say where it listens: {line!r} {self.process.stderr.read()}")
        self.base = match.group(1) + "/"
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def browser_paths() -> tuple[str, str]:
    """chromium and chromedriver, or a skip saying which is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (./dev test installs it from tests/requirements.txt)")
    chromium = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
    driver = "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else shutil.which("chromedriver")
    if not chromium:
        pytest.skip("chromium is not installed (./dev test installs Debian's chromium)")
    if not driver:
        pytest.skip("chromedriver is not installed (./dev test installs Debian's chromium-driver)")
    return chromium, driver


class Panel:
    """A headless Chromium on the panel, with the page's errors collected."""

    def __init__(self, driver, base: str):
        self.driver = driver
        self.base = base
        self.collected: list[str] = []

    def url(self, query: str = "") -> str:
        return self.base + (("?" + query) if query else "")

    def open(self, query: str = "", view: str | None = None):
        self.harvest()  # the page's collector starts afresh with each document
        self.driver.get(self.url(query))
        return self.wait_view(view)

    def rendered(self) -> int:
        return int(self.driver.execute_script("return Number(document.body.dataset.rendered || 0)"))

    def wait_view(self, view: str | None = None, after: int | None = None, timeout: float = 60):
        """Waits until the panel has rendered `view` (any, if None) and is no longer busy;
        with `after`, a render newer than that count."""
        from selenium.webdriver.support.ui import WebDriverWait

        def ready(d):
            state = d.execute_script(
                "return [document.body.dataset.busy, document.body.dataset.view, Number(document.body.dataset.rendered || 0)]")
            busy, shown, count = state
            if busy != "0" or not shown or count == 0:
                return False
            if after is not None and count <= after:
                return False
            return shown if view is None or shown == view else False

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(ready)
        except Exception as e:
            shown = self.driver.execute_script("return document.body.dataset.view")
            message = self.driver.execute_script(
                "var e = document.getElementById('error'); return e ? e.textContent : ''")
            raise AssertionError(f"the panel did not show {view!r} (it shows {shown!r}; error: {message!r})") from e

    def wait(self, condition, timeout: float = 60, message: str = ""):
        from selenium.webdriver.support.ui import WebDriverWait
        return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(condition, message)

    def by_id(self, element_id: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.ID, element_id)

    def css(self, selector: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))

    def error_banner(self) -> str:
        return self.driver.execute_script("var e = document.getElementById('error'); return e ? e.textContent : ''")

    def harvest(self) -> None:
        """Moves the browser log's SEVERE entries and the page collector's errors into
        `collected`."""
        try:
            for entry in self.driver.get_log("browser"):
                if entry.get("level") == "SEVERE":
                    self.collected.append(f"console: {entry.get('message')}")
            caught = self.driver.execute_script(
                "var e = window.__panelErrors || []; window.__panelErrors = []; return e") or []
            self.collected += [f"page: {e}" for e in caught]
        except Exception as e:  # no document yet
            if "about:blank" not in self.driver.current_url and self.driver.current_url != "data:,":
                self.collected.append(f"could not read the page's errors: {e}")

    def js_errors(self, allow=()) -> list[str]:
        """The SEVERE browser log entries and the errors the page's collector caught since the
        last call; `allow` are regexes of expected entries."""
        self.harvest()
        found, self.collected = self.collected, []
        return [e for e in found if not any(re.search(a, e) for a in allow)]


@pytest.fixture(autouse=True)
def needs_browser():
    """Skips before anything is seeded or started when there is no browser to drive."""
    browser_paths()


@pytest.fixture
def panel_factory(tmp_path):
    chromium, driver_path = browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    drivers = []

    def start(base: str) -> Panel:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1366,900",
                    "--disable-dev-shm-usage", "--lang=en-US", "--no-first-run", "--disable-extensions"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        options.add_experimental_option("prefs", {
            "download.default_directory": str(tmp_path / "downloads"),
            "download.prompt_for_download": False,
        })
        service = Service(driver_path, log_output=str(tmp_path / "chromedriver.log"))
        try:
            driver = webdriver.Chrome(service=service, options=options)
        except Exception as e:  # a browser that cannot start here is a reason to skip, given
            pytest.skip(f"headless chromium could not start: {e}")
        driver.set_page_load_timeout(60)
        driver.set_script_timeout(60)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ERROR_COLLECTOR})
        drivers.append(driver)
        return Panel(driver, base)

    yield start
    for d in drivers:
        try:
            d.quit()
        except Exception:
            pass


@pytest.fixture
def seeded(tmp_path):
    db = tmp_path / "panel.db"
    ids = seed(db)
    return db, ids


@pytest.fixture
def server_factory():
    servers = []

    def start(db: Path, extra=()) -> Server:
        server = Server(db, extra)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


def wait_until(predicate, timeout: float = 30, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
