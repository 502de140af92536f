"""``python -m instructor check MY_NOTEBOOK.ipynb``: grade your own copy with the hidden tests.

The hidden tests are rebuilt from ``source/`` on your machine, in a private course root
(``.build/selfcheck/<assignment>/``). Your notebook is copied, never modified.
"""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import nbformat

from . import batch
from . import pipeline as P
from .course_root import REPOSITORY, CourseRoot

LEARNER = "me"


def explain(error: str) -> str:
    """The failure message, with the untouched-stub case said plainly."""
    if error.startswith("NotImplementedError"):
        return "not done yet: a solution cell this test uses still raises NotImplementedError"
    if error.startswith("NameError"):
        return f"{error} (did you run every cell above, and keep the names the exercise asks for?)"
    return error or "the test failed without an error message"


def infer_assignment(root: CourseRoot, notebook: Path) -> str:
    """The assignment a notebook belongs to, from its folder or its file name."""
    known = root.assignments()
    if notebook.parent.name in known:
        return notebook.parent.name
    by_stem = [a for a in known if root.notebook_name(a) == notebook.stem]
    if len(by_stem) == 1:
        return by_stem[0]
    raise P.PipelineError(
        f"cannot tell which assignment {notebook.name} belongs to; pass --assignment, one of: {', '.join(known)}")


def private_root(root: CourseRoot, assignment: str) -> CourseRoot:
    """A released private copy of ``root`` for one assignment, rebuilt only when its source changed."""
    private = CourseRoot(root.path / ".build" / "selfcheck" / assignment)
    current = root.notebook("source", assignment)
    copied = private.path / "source" / assignment / current.name
    fresh = copied.exists() and filecmp.cmp(current, copied, shallow=False) \
        and private.notebook("release", assignment).exists() \
        and filecmp.cmp(root.config, private.config, shallow=False)
    if not fresh:
        if private.path.exists():
            shutil.rmtree(private.path)
        root.scratch_copy(private.path, [assignment])
    for folder in ("submitted", "autograded", "feedback"):
        shutil.rmtree(private.folder(folder, assignment, LEARNER).parent, ignore_errors=True)
    return private


def grade_copy(notebook: Path, assignment: str | None = None, root: CourseRoot = REPOSITORY, say=print):
    """Grade a copy of ``notebook``: ``(assignment, private root, batch report, result or None)``."""
    notebook = notebook.expanduser().resolve()
    if not notebook.is_file():
        raise P.PipelineError(f"no notebook at {notebook}")
    try:
        nb = nbformat.read(str(notebook), as_version=4)
    except Exception as err:
        raise P.PipelineError(f"{notebook} is not a readable notebook: {err}") from err
    assignment = root.check_assignment(assignment) if assignment else infer_assignment(root, notebook)
    say(f"checking {notebook} as {assignment} (hidden tests built from source/) ...", flush=True)
    private = private_root(root, assignment)
    private.submit(assignment, LEARNER, nb)
    report = batch.grade_student(private, assignment, LEARNER)
    result = private.results(assignment)[LEARNER] if report.status == "graded" else None
    return assignment, private, report, result


def self_check(notebook: Path, assignment: str | None = None, root: CourseRoot = REPOSITORY) -> int:
    """Grade a copy of ``notebook`` with the hidden tests of ``root``; print the scores."""
    assignment, private, report, result = grade_copy(notebook, assignment, root)
    if result is None:
        print(f"could not grade it: {'; '.join(report.problems)}")
        return 3
    print(f"\n{'test cell':<34}{'points':>8}")
    for gid, cell in result.cells.items():
        mark = "ok " if cell.score >= cell.max_score else "FAIL"
        print(f"{mark} {gid:<30}{cell.score:>4g}/{cell.max_score:<3g}")
        if cell.score < cell.max_score:
            print(f"      {explain(cell.error)}")
    print(f"\nautomatic points: {result.auto_score:g} of {result.auto_max:g}")
    for problem in report.problems:
        print(f"note: {problem}")
    for reason in report.review:  # what an instructor's grader would flag for a person to look at
        print(f"would be flagged for review: {reason}")
    feedback = private.notebook("feedback", assignment, LEARNER)
    print(f"feedback: {feedback}")
    return 0
