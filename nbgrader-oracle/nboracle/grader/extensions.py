"""Per-student extensions kept in the gradebook from the moment they are given, before any submission.

nbgrader 0.9.6 keeps an extension on the student's ``SubmittedAssignment``, which exists only once
a submission was autograded: an extension given to a student who asks before the deadline had
nowhere to go. Here every extension is a row of a table of our own in the same gradebook
(``nboracle_extension``: assignment, student, minutes; backed up and restored with it), and is
copied onto nbgrader's submission whenever there is one: at once when given, and when autograde
creates the submission (:class:`nboracle.grader.nbgrader_ext.GrantedExtension`, before nbgrader's
late penalty is computed). nbgrader's own field stays the one everything reads (``duedate``,
``total_seconds_late``, the late penalty, the export).
"""

from __future__ import annotations

import math
from datetime import timedelta

from sqlalchemy import inspect, text

TABLE = "nboracle_extension"
MAX_HOURS = 24 * 366  # a year: longer is a typo, not an extension


def _table(gradebook) -> None:
    gradebook.db.execute(text(f"CREATE TABLE IF NOT EXISTS {TABLE} (assignment VARCHAR(128) NOT NULL, "
                              "student VARCHAR(128) NOT NULL, minutes FLOAT NOT NULL, "
                              "PRIMARY KEY (assignment, student))"))


def _kept(gradebook) -> bool:
    """The gradebook has the table (an extension was ever given here): reading never creates it."""
    return inspect(gradebook.db.get_bind()).has_table(TABLE)


def check_hours(hours: float) -> None:
    """ValueError in words unless ``hours`` is an extension (0 takes one back)."""
    if not isinstance(hours, (int, float)) or not math.isfinite(hours) or not 0 <= hours <= MAX_HOURS:
        raise ValueError(f"--hours {hours:g}: an extension is 0 (none: takes one back) to {MAX_HOURS} hours "
                         "after the due date; a student is never made later than the due date")


def granted(gradebook) -> dict[tuple[str, str], float]:
    """{(assignment, student): hours} of every extension: the table's, and any nbgrader's
    submissions carry that the table does not know (given through nbgrader's own API)."""
    from nbgrader.api import SubmittedAssignment

    found = {} if not _kept(gradebook) else {
        (a, s): m / 60 for a, s, m in gradebook.db.execute(text(f"SELECT assignment, student, minutes FROM {TABLE}"))}
    for submission in gradebook.db.query(SubmittedAssignment).filter(SubmittedAssignment.extension.isnot(None)):
        key = (submission.assignment.name, submission.student.id)
        found.setdefault(key, submission.extension.total_seconds() / 3600)
    return found


def grant(gradebook, assignment: str, student: str, hours: float):
    """The extension of ``student`` on ``assignment`` is ``hours`` from now on (0: none), before
    or after the due date, with or without a submission; ValueError in words for an unknown
    assignment or student, an assignment without a due date, or hours that are no extension.
    Returns nbgrader's submission when there is one (its late penalty is then the caller's to redo)."""
    from nbgrader.api import MissingEntry

    check_hours(hours)
    try:
        found = gradebook.find_assignment(assignment)
    except MissingEntry:
        names = ", ".join(a.name for a in gradebook.assignments) or "none yet"
        raise ValueError(f"{assignment} is no assignment of this course's gradebook (it has: {names})") from None
    if found.duedate is None:
        raise ValueError(f"{assignment} has no due date: set one in the formgrader (Manage Assignments, Edit) first")
    try:
        gradebook.find_student(student)
    except MissingEntry:
        raise ValueError(f"{student} is no student of this course's gradebook") from None
    _table(gradebook)
    gradebook.db.execute(text(f"DELETE FROM {TABLE} WHERE assignment = :a AND student = :s"),
                         {"a": assignment, "s": student})
    if hours:
        gradebook.db.execute(text(f"INSERT INTO {TABLE} (assignment, student, minutes) VALUES (:a, :s, :m)"),
                             {"a": assignment, "s": student, "m": hours * 60})
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        submission = None
    else:
        submission.extension = timedelta(hours=hours) if hours else None
    gradebook.db.commit()
    return submission


def apply(gradebook, assignment: str, student: str) -> None:
    """The extension given for (``assignment``, ``student``) onto nbgrader's submission (autograde,
    once the submission exists); nothing when none was given here."""
    from nbgrader.api import MissingEntry

    if not _kept(gradebook):
        return
    row = gradebook.db.execute(text(f"SELECT minutes FROM {TABLE} WHERE assignment = :a AND student = :s"),
                               {"a": assignment, "s": student}).first()
    if row is None:
        return
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return
    submission.extension = timedelta(minutes=row[0])
    gradebook.db.commit()
