"""`make test-nbgrader`'s configuration is the course's grading configuration, less the course (issue 57).

tests/conformance/etc/nbgrader_config.py switches the grader on for nbgrader's own app tests. It
must grade as the course's nbgrader_config.py does, or the stage would prove nothing about it:
every setting it makes is the course's, and every setting of the course it leaves out is one that
names this course (its id, files, exchange, chapters, checks modules, helper package, tables).
Fast: the two files are loaded, nothing is run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE = REPO / "tests" / "conformance"

# the course's own settings: left at nbgrader's (or nboracle's) defaults for any other course
COURSE_ONLY = {
    ("CourseDirectory", "course_id"), ("CourseDirectory", "ignore"), ("Exchange", "root"),
    ("ClearSolutions", "code_stub"), ("ClearSolutions", "text_stub"),
    ("GuardedExecute", "kernel_imports"), ("OracleExecute", "calling_helpers"), ("OracleExecute", "test_modules"),
    ("ReviewFlags", "substitutes"), ("ReviewFlags", "helper_attributes"), ("ReviewFlags", "allowed_calls"),
    ("RepairSubmission", "release_roots"),
    ("ClassReport", "catalogue"), ("CourseDirectory", "db_url"),
    ("NbGraderAPI", "timezone"),  # the course's time zone (nbgrader's tests assume its default, UTC)
}
DIFFERENT = {("OracleExecute", "oracle_chapters")}  # the course's chapters; none in nbgrader's tests


def settings(folder: Path) -> dict:
    def plain(value):
        if isinstance(value, type):  # sandboxed_steps makes a new class per call: compare by name and base
            return f"{value.__name__}({value.__mro__[1].__qualname__})"
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    config = PyFileConfigLoader("nbgrader_config.py", str(folder)).load_config()
    return {(section, name): plain(value) for section, values in config.items() for name, value in values.items()}


def test_the_conformance_stage_grades_as_the_course_does():
    course, conformance = settings(REPO), settings(CONFORMANCE / "etc")
    assert not (set(conformance) & COURSE_ONLY)  # nbgrader's defaults for the course's own settings
    assert {key: conformance[key] for key in set(conformance) - DIFFERENT} == \
        {key: course.get(key) for key in set(conformance) - DIFFERENT}
    assert set(course) - set(conformance) <= COURSE_ONLY, \
        f"a grading setting of nbgrader_config.py that the conformance stage lacks: {set(course) - set(conformance) - COURSE_ONLY}"
    assert conformance[("OracleExecute", "oracle_chapters")] == []


def test_the_intended_differences_say_what_and_why():
    sys.path.insert(0, str(CONFORMANCE))
    try:
        from differences import DIFFERENCES, MODES, expected
    finally:
        sys.path.remove(str(CONFORMANCE))
    for test, (modes, what, why) in DIFFERENCES.items():
        assert test.count("::") == 2 and test.startswith("test_nbgrader_"), test
        assert modes in MODES and len(what) > 30 and len(why) > 30, test
    assert set(expected("oracle")) >= set(expected("default"))
