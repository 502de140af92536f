"""Shared fixtures: one scratch course per assignment, graded once and reused by its tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from instructor import pipeline as P

os.environ.setdefault("MPLBACKEND", "Agg")

_SCRATCH: dict[str, Path] = {}


@pytest.fixture(scope="session")
def scratch_root():
    path = Path(tempfile.mkdtemp(prefix="course-tests-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def scratch_course(scratch_root: Path, assignment: str) -> Path:
    """A released scratch copy of one assignment (made once per test process)."""
    if assignment not in _SCRATCH:
        _SCRATCH[assignment] = P.make_scratch_course(scratch_root / assignment, [assignment])
    return _SCRATCH[assignment]
