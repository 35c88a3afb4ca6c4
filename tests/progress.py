"""`--progress-files`: a line per test file as it finishes, instead of a dot per test (make test).

With pytest-xdist (`-n 2 --dist loadfile`) each file runs whole on one worker, so a file is done
when its last test is reported; the line says how many passed, failed or were skipped in it, how
long its tests took, and how far the run is. Without the option pytest reports as it always does.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--progress-files",
        action="store_true",
        help="a line per test file as it finishes (its counts and time), instead of a dot per test",
    )


class FileProgress:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.expected: collections.Counter[str] = collections.Counter()
        self.done: collections.Counter[str] = collections.Counter()
        self.outcomes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.total = 0
        self.finished = 0
        self.started = time.monotonic()
        self.collected = False

    def _expect(self, nodeids: list[str]) -> None:
        if self.collected:  # every xdist worker reports the same collection
            return
        self.collected = True
        self.expected.update(nodeid.split("::", 1)[0] for nodeid in nodeids)
        self.total = len(nodeids)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput"):
            self._expect([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._expect(ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
        # No dot per test; failures and errors still print in full in the summary.
        if report.when == "call" or (report.when == "setup" and not report.passed):
            category = "passed" if report.passed else "skipped" if report.skipped else "failed"
            if report.when == "setup" and report.failed:
                category = "error"
            return category, "", category.upper()
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] += report.duration
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = "passed" if report.passed else "skipped" if report.skipped else "failed"
            if report.when == "setup" and report.failed:
                outcome = "error"
            self.outcomes[path][outcome] += 1
        if report.when != "teardown":
            return
        self.done[path] += 1
        self.finished += 1
        if self.done[path] == self.expected[path]:
            counts = ", ".join(f"{n} {what}" for what, n in sorted(self.outcomes[path].items()))
            elapsed = time.monotonic() - self.started
            reporter = self.config.pluginmanager.getplugin("terminalreporter")
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_line(
                    f"{path:<44} {counts:<22} {self.seconds[path]:6.1f} s"
                    f"   [{self.finished:>4}/{self.total} tests, {int(elapsed) // 60}:{int(elapsed) % 60:02d}]",
                    red="failed" in self.outcomes[path] or "error" in self.outcomes[path],
                )


def configure(config: pytest.Config) -> None:
    """tests/conftest.py's pytest_configure calls this."""
    if config.getoption("--progress-files", default=False) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileProgress(config), "fairwins-file-progress")
