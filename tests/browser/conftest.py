"""Real-browser tests: skipped with a clear message where Chromium or its driver is missing."""

from __future__ import annotations

import pytest
from seats import ARTIFACTS, _missing, driver, scratch  # noqa: F401 (fixtures)


def pytest_collection_modifyitems(config, items):
    reason = _missing()
    if reason:
        for item in items:
            if "browser" in str(item.fspath):
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter):
    if ARTIFACTS.exists():
        terminalreporter.write_line(f"browser screenshots and server logs: {ARTIFACTS}")
