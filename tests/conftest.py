"""Shared by every Python suite under tests/: under HINDSIGHT_REQUIRE_SERVICES=1 (CI, where
./dev test installs every service) a test that would skip fails instead, saying why, so a broken
install cannot pass as a green run."""

import os

import pytest

REQUIRED = os.environ.get("HINDSIGHT_REQUIRE_SERVICES") == "1"


def _fail_skip(report):
    if REQUIRED and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"this test would skip, and HINDSIGHT_REQUIRE_SERVICES=1: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip(outcome.get_result())
