"""A course root copied away from the venv grades with its own ``course`` package.

Two semesters' course folders often share one Python environment, whose editable install
names only the first clone's ``course``. The grading kernel must import exactly the package
the grader chose (the copied root's own), wherever that root lives; and a kernel that cannot
import the course is the grader's fault: the batch stops with a grader error, no student
gets a 0 for it.
"""

from __future__ import annotations

import shutil

import pytest
from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot
from support import CLASS_ASSIGNMENT as A
from support import CLASS_POINTS

from instructor.repository import REPO

pytestmark = pytest.mark.pipeline
MARK = "SEMESTER_OF_THIS_COPY = 'copied'\n"


def copied_repository(dest) -> CourseRoot:
    """What `cp -r` of the repository gives (its own course/ and instructor/), keeping this venv."""
    dest.mkdir()
    for name in ("course", "instructor", "nbgrader_config.py"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    shutil.copytree(REPO / "source" / A, dest / "source" / A,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    with open(dest / "course" / "__init__.py", "a") as init:
        init.write("\n" + MARK)
    root = CourseRoot(dest)
    root.release(A)
    return root


def test_a_copied_course_root_grades_with_its_own_course_package(tmp_path):
    root = copied_repository(tmp_path / "semester-2")
    release, answers = root.release_and_answers(A)
    first = next(iter(answers))
    answers[first] += "\nimport course\nprint('IMPORTED', course.SEMESTER_OF_THIS_COPY)"
    root.submit(A, "solution", P.fill(release, answers))
    root.autograde(A)  # plain `nbgrader autograde` in the copy, as an instructor would run it
    result = root.results(A)["solution"]
    assert result.auto_score == result.auto_max == CLASS_POINTS, result.failed()
    assert "IMPORTED copied" in root.notebook("autograded", A, "solution").read_text()


def test_the_class_pipeline_grades_with_the_copied_package_and_stops_when_the_kernel_cannot_import_it(tmp_path):
    from nbgrader.api import Gradebook

    root = copied_repository(tmp_path / "semester-3")
    release, answers = root.release_and_answers(A)
    first = next(iter(answers))
    answers[first] += "\nimport course\nprint('IMPORTED', course.SEMESTER_OF_THIS_COPY)"
    root.submit(A, "solution", P.fill(release, answers))
    reports = batch.grade_class(root, A, runner=batch.InProcess(), progress=False)
    assert (reports["solution"].status, reports["solution"].score) == ("graded", CLASS_POINTS), reports["solution"]
    assert "IMPORTED copied" in root.notebook("autograded", A, "solution").read_text()

    # the chosen package is broken: every kernel fails to import it, before any student code
    with open(root.path / "course" / "__init__.py", "a") as init:
        init.write("\nraise ImportError('this course package is broken on purpose')\n")
    root.submit(A, "another", P.fill(release, answers))
    with pytest.raises(batch.BatchStopped, match=r"grader error.*could not start the course") as stopped:
        batch.grade_class(root, A, runner=batch.InProcess(), progress=False, regrade=True)
    assert {s: r.status for s, r in stopped.value.reports.items()} == {"another": "pending", "solution": "pending"}
    with Gradebook(root.gradebook_url) as gb:  # nobody got a 0 for the grader's fault
        assert sorted(s.student.id for s in gb.assignment_submissions(A)) == ["solution"]
        assert gb.find_submission(A, "solution").score == CLASS_POINTS
    assert "another" not in root.read_state().get(A, {})
