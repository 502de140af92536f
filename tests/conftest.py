"""Fixtures and the xdist scheduler; the helpers the test modules share are in support.py."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# `python -m instructor check` leaves a warm check server behind for the learner's next check; the suite's
# checks run without one (tests/test_checkserver.py starts its own, in folders of its own, and stops them)
os.environ.setdefault("COURSE_CHECK_SERVER", "off")
# Two test workers keep both cores busy: a kernel's second OpenMP thread then spins for a core
# it does not get (a small training loop took 36 s with 2 threads, 1.6 s with 1, on this machine
# under load). The class pipeline does the same for its workers (grader.kernel_threads).
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")


@pytest.fixture(scope="session")
def scratch_root():
    """A temporary folder for the scratch course roots of one test process."""
    path = Path(tempfile.mkdtemp(prefix="course-tests-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def scope_of(nodeid: str) -> str:
    """The scope of a test: the assignment id in its parameters, else its file."""
    match = re.search(r"\[(\d\d_[a-z0-9_]+)", nodeid)
    return match.group(1) if match else nodeid.split("::", 1)[0]


# Rough seconds a scope takes on the 2-core machine, for the order only: the longest scopes
# start first, so that no worker is left alone with a long one at the end. A chapter costs one
# autograde per zoo entry (NOTEBOOK_SECONDS each, its slowest cells included); a file what its
# graded students cost. Measured in a fresh clone's `make test` (2026-12-06, third session, --durations,
# 51 min in all; 07 and 10 again on 2026-12-07, after their check-it cells became demos): a file missing here is
# taken for a few seconds and scheduled last, so a heavy one must be listed.
NOTEBOOK_SECONDS = {"01_two_keys": 3.3, "02_scaling": 4.5, "03_masks": 3.5, "04_encoder_block": 5.8,
                    "05_positional_encoding": 3.2, "06_multihead_attention": 4.7, "07_seq2seq_beam_search": 10.6,
                    "08_attention_cost": 6.7, "09_decoder": 12.9, "10_tiny_gpt": 6.3, "11_modern_decoder": 6.0}
FILE_SECONDS = {"tests/test_oracle_attacks.py": 840, "tests/test_attacks_ordinary_use.py": 435,
                "tests/test_class_batch.py": 110, "tests/test_sandbox.py": 95, "tests/test_attacks_references.py": 270,
                "tests/test_exchange.py": 205, "tests/test_collect.py": 50, "tests/test_repair.py": 50,
                "tests/test_course_root_copy.py": 40, "tests/test_example_course.py": 60, "tests/test_selfcheck.py": 30,
                "tests/test_vietnamese_edition.py": 255, "tests/test_checkserver.py": 100, "tests/test_vietnamese_feedback.py": 105,
                "tests/test_class_report.py": 60, "tests/test_grader.py": 30, "tests/test_grader_memory.py": 25,
                "tests/test_scan.py": 15, "tests/test_docs.py": 15, "tests/test_quizzes.py": 20,
                "nbgrader-oracle/tests/test_forkserver.py": 10, "nbgrader-oracle/tests/test_channel.py": 10}


def scope_seconds(scope: str, tests: int) -> float:
    if re.fullmatch(r"\d\d_[a-z0-9_]+", scope):
        from instructor.zoo import alternatives_for, library_for, variants_for

        entries = len(variants_for(scope)) + len(alternatives_for(scope)) + len(library_for(scope)) + 2
        return entries * NOTEBOOK_SECONDS.get(scope, 6)
    return FILE_SECONDS.get(scope, 0.5 * tests)


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the order below, not xdist's (by number of tests)


def pytest_collection_modifyitems(config, items):
    """Longest scopes first (every worker collects the same order, as xdist requires)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[scope_of(item.nodeid)] = counts.get(scope_of(item.nodeid), 0) + 1
    cost = {scope: scope_seconds(scope, n) for scope, n in counts.items()}
    items.sort(key=lambda item: -cost[scope_of(item.nodeid)])


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown when it is not loaded
def pytest_xdist_make_scheduler(config, log):
    """Send every test of one chapter to the same worker, so a chapter is graded once.

    (xdist's ``--dist loadgroup`` marks are not honoured with this pytest version: the group
    suffix it writes into node ids is ignored, so tests of one group land on both workers.)
    The scope of a test is the assignment id in its parameters, else its file.
    """
    from xdist.scheduler import LoadScopeScheduling

    class ByChapter(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return scope_of(nodeid)

    return ByChapter(config, log)
