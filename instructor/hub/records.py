"""The term's records: grades out for the university (export) and students' extensions (extend)."""

from __future__ import annotations

import sys
from pathlib import Path

from nboracle.classroom import pipeline as P
from nboracle.grader.exchange import inbound_parts

from instructor import roster as R

from .layout import Course, Layout, as_grader


def export(layout: Layout, to: Path, layout_name: str = "long", course: Course | None = None) -> Path:
    """A course's grades for the university's gradebook: nbgrader's export of its gradebook on
    the hub (as its service account), one row per student of its roster and assignment."""
    course = course or layout.main_course()
    scratch = layout.user_home(course.grader) / ".export-grades.csv"
    # the export's columns (submitted, late, review flags) whatever the course's own config exports
    as_grader(layout, str(P.BIN / "nbgrader"), "export", "--to", str(scratch),
              "--ExportApp.plugin_class=nboracle.grader.nbgrader_ext.ReviewCsvExport", course=course)
    try:
        rows = R.lms_rows(scratch, layout.people(course), _uncollected(layout, course))
    finally:
        scratch.unlink(missing_ok=True)
    to = R.write_lms(rows, Path(to), layout_name)
    print(f"{course.id}: {len(rows)} row(s) ({len(R.students(layout.people(course)))} students on the roster): {to}")
    return to


def _uncollected(layout: Layout, course: Course) -> frozenset[tuple[str, str]]:
    """(student, assignment) of every submission in the course's exchange inbound, collected or not
    (nbgrader names each ``<student>+<assignment>+<time>+<random>``): a student of these without a
    graded submission has handed in and waits for Collect."""
    inbound = layout.exchange / course.id / "inbound"
    try:
        names = [entry.name for entry in inbound.iterdir()]
    except OSError:
        return frozenset()
    return frozenset(parts for parts in map(inbound_parts, names) if parts is not None)


def extend(layout: Layout, assignment: str, student: str, hours: float, course: Course | None = None) -> int:
    """A student's extension on an assignment, kept in the hub's gradebook (nboracle.grader.extensions):
    at any time, before or after the due date, before or after a submission; 0 hours takes it back.
    With a graded submission its late penalty is computed again with the course's late policy."""
    from nboracle.grader.extensions import check_hours

    try:
        check_hours(hours)
    except ValueError as err:
        sys.exit(str(err))
    course = course or layout.main_course()
    if student not in {p.id for p in R.students(layout.people(course))}:
        sys.exit(f"{student} is no student on the roster of {course.id}: python -m instructor.hub roster list")
    proc = as_grader(layout, str(P.BIN / "python"), "-c", EXTEND, assignment, student, repr(float(hours)),
                     check=False, course=course)
    print(proc.stdout.strip() or proc.stderr.strip()[-1500:])
    return proc.returncode


# run as the course's service account in its course root: python -c EXTEND ASSIGNMENT STUDENT HOURS
EXTEND = """
import sys
from datetime import timedelta
from nbgrader.api import Gradebook
from nbgrader.apps import NbGrader
from nbgrader.preprocessors import AssignLatePenalties
from nboracle.grader.coursetime import course_zone, shown
from nboracle.grader.extensions import grant
assignment, student, hours = sys.argv[1], sys.argv[2], float(sys.argv[3])
app = NbGrader(); app.initialize([])
zone = course_zone(app.config)  # c.NbGraderAPI.timezone
late = AssignLatePenalties(parent=app)
plugin = late.plugin_class(parent=late)
with Gradebook(app.coursedir.db_url) as gb:
    try:
        submission = grant(gb, assignment, student, hours)
    except ValueError as err:
        sys.exit(f"nothing changed: {err}")
    due = gb.find_assignment(assignment).duedate
    said = (f"{student} {assignment}: due {shown(due, zone)}; "
            + (f"extended by {hours:g} h to {shown(due + timedelta(hours=hours), zone)}" if hours else "no extension"))
    if submission is None:
        print(said + "; no submission graded yet (the extension applies when it is autograded)")
        sys.exit(0)
    seconds = submission.total_seconds_late
    for nb in submission.notebooks:
        penalty = plugin.late_submission_penalty(student, nb.score, seconds) if seconds > 0 else None
        nb.late_submission_penalty = None if penalty is None else late._check_late_penalty(nb, penalty)
    gb.db.commit()
    print(said + "; the graded submission is " + (f"{seconds:g} s late" if seconds > 0 else "on time")
          + f", penalty {sum(nb.late_submission_penalty or 0 for nb in submission.notebooks):g}")
"""
