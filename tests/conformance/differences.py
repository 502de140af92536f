"""What changes for nbgrader's own app tests with the grader switched on: the intended differences.

The one list `make test-nbgrader` (tests/conformance/run.py) allows. Each entry is a test of
nbgrader 0.9.6's ``nbgrader/tests/apps`` that the grader makes fail on purpose: what changes, and
why. Loaded as a pytest plugin (``-p differences``) into nbgrader's test run, it marks each listed
test of the current mode as an expected failure, *strict*: a listed test that passes fails the
stage too (the difference is gone, so the list must say so), and so does a listed test that no
longer exists. Any other failure fails the stage.

Modes: ``both`` (the default mode and ``COURSE_ORACLE=on``), ``oracle`` (``COURSE_ORACLE=on`` only).
nbgrader-oracle/README.md ("What a course adopting it gets") says the same in a course's terms.
"""

from __future__ import annotations

import os

import pytest

# "module::Class::test": (mode, what changes, why)
DIFFERENCES: dict[str, tuple[str, str, str]] = {
    "test_nbgrader_autograde::TestNbGraderAutograde::test_side_effects": (
        "both",
        "a file the notebook writes while it is graded (side-effect.txt) is not in autograded/<student>/",
        "every grading kernel runs in the OS sandbox with a throwaway copy of the submission's folder "
        "(docs/GRADING.md, 'The grading sandbox'): a student's code cannot leave files in the grader's folders",
    ),
    "test_nbgrader_autograde::TestNbGraderAutograde::test_handle_failure": (
        "both",
        "a notebook whose graded cells the gradebook does not know (another notebook's) is graded, "
        "not failed: `nbgrader autograde` exits 0 and the student's autograded folder exists",
        "the repair (nboracle.grader.repair) keeps such cells as ordinary cells and flags the submission "
        "for review, so that a student's work is graded instead of lost; nbgrader fails the whole student",
    ),
    "test_nbgrader_autograde::TestNbGraderAutograde::test_handle_failure_single_notebook": (
        "both",
        "the same with `--notebook 'p*'`: autograde exits 0 and writes p1.ipynb and p2.ipynb, where nbgrader "
        "fails the student and writes neither",
        "as test_handle_failure: the repair grades the foreign cells as ordinary cells and flags the submission "
        "for review instead of failing the student",
    ),
    "test_nbgrader_autograde::TestNbGraderAutograde::test_hidden_tests_single_notebook": (
        "oracle",
        "nbgrader's sum_of_squares_uses_squares test (`del squares`, then call sum_of_squares, expect "
        "NameError) fails: the notebook scores 1.0, not 1.5",
        "under the oracle a test cell runs in the grader: its assignments and deletions change the grader's "
        "namespace only, never the student's kernel, where sum_of_squares still finds squares. A test that "
        "a function uses another must call it (with a stand-in the test passes), not delete the student's name",
    ),
}

MODES = {"both": ("default", "oracle"), "oracle": ("oracle",)}


def mode() -> str:
    """``oracle`` under ``COURSE_ORACLE=on``, else ``default``."""
    return "oracle" if os.environ.get("COURSE_ORACLE", "").strip().lower() in ("on", "1", "yes", "true", "all") \
        else "default"


def key(item) -> str:
    return "::".join(filter(None, [item.module.__name__.rsplit(".", 1)[-1],
                                   item.cls.__name__ if item.cls else "", item.name]))


def expected(current: str) -> dict[str, tuple[str, str]]:
    """``{test: (what changes, why)}`` of the differences of the mode ``current``."""
    return {test: (what, why) for test, (modes, what, why) in DIFFERENCES.items() if current in MODES[modes]}


@pytest.hookimpl(tryfirst=True)  # before -k/--deselect: a stale entry is told from a deselected test
def pytest_collection_modifyitems(config, items):
    listed = expected(mode())
    found = set()
    for item in items:
        if key(item) in listed:
            found.add(key(item))
            what, why = listed[key(item)]
            item.add_marker(pytest.mark.xfail(reason=f"intended difference: {what} ({why})", strict=True))
    modules = {key(item).split("::")[0] for item in items}
    stale = sorted(test for test in listed if test.split("::")[0] in modules and test not in found)
    if stale:
        raise pytest.UsageError(f"tests/conformance/differences.py lists tests nbgrader no longer has: {stale}")


def pytest_report_header(config):
    return f"grader conformance, {mode()} mode: {len(expected(mode()))} intended difference(s) " \
           "(tests/conformance/differences.py)"
