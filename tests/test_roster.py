"""The hub term's roster and the export an LMS imports (instructor/roster.py), without a hub:
a roster read and checked, nbgrader's export of a gradebook with a late, an on-time and a missing
submission, the late policy."""

from __future__ import annotations

import csv
import shutil
import subprocess
from datetime import datetime, timedelta

import pytest
from nboracle.classroom import pipeline as P
from nboracle.grader.nbgrader_ext import PerDayPenalty

from instructor import roster as R
from instructor.repository import REPO

ROSTER = """id,first_name,last_name,email,section,role
prof-ines,Ines,Duarte,ines@uni.example,,instructor
ta-jonas,Jonas,Berg,jonas@uni.example,,ta
amara,Amara,Okeke,amara@uni.example,A,student
bruno,Bruno,Lindqvist,bruno@uni.example,B,
chidi,Chidi,Eze,chidi@uni.example,B,student
"""


def test_a_roster_is_read_and_its_mistakes_named_by_line(tmp_path):
    path = tmp_path / "class.csv"
    path.write_text(ROSTER)
    people = R.read(path)
    assert [p.id for p in R.students(people)] == ["amara", "bruno", "chidi"]  # an empty role: student
    assert {p.role for p in people} == {"instructor", "ta", "student"}
    bad = tmp_path / "bad.csv"
    bad.write_text("id,first_name,role\nAmara Okeke,Amara,student\nbruno,Bruno,professor\nbruno,B,student\n")
    with pytest.raises(R.RosterError) as err:
        R.read(bad)
    text = str(err.value)
    assert "line 2" in text and "not a login name" in text
    assert "line 3" in text and "professor" in text
    assert "line 4" in text and "twice" in text
    merged = R.merge(people, [R.Person("dara", "Dara", "Quinn"), R.Person("amara", "Amara", "Okeke-Ross")])
    assert [p.id for p in merged][-1] == "dara" and merged[2].last_name == "Okeke-Ross" and len(merged) == 6


def test_the_export_has_every_student_of_the_roster_with_late_flags(tmp_path):
    from nbgrader.api import Gradebook

    root = tmp_path / "course"
    root.mkdir()
    shutil.copy2(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    roster = tmp_path / "class.csv"
    roster.write_text(ROSTER)
    people = R.read(roster)
    due = datetime(2026, 3, 2, 12, 0)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_assignment("01_two_keys", duedate=due)
        for p in R.students(people):
            gb.add_student(p.id, first_name=p.first_name, last_name=p.last_name, email=p.email)
        gb.add_submission("01_two_keys", "amara", timestamp=due - timedelta(hours=1))
        gb.add_submission("01_two_keys", "bruno", timestamp=due + timedelta(hours=30))
        gb.add_student("dropped")  # in the gradebook, not on the roster
    proc = subprocess.run([str(P.BIN / "nbgrader"), "export", "--to", "grades.csv"], cwd=root,
                          capture_output=True, text=True, env={**P.tool_env(), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(root / "grades.csv", newline="") as handle:
        graded = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert graded["bruno"]["late"] == "yes" and float(graded["bruno"]["seconds_late"]) == 30 * 3600
    assert graded["amara"]["late"] == "" and graded["amara"]["submitted"] == "yes"
    assert graded["chidi"]["submitted"] == "no" and graded["chidi"]["email"] == "chidi@uni.example"

    rows = R.lms_rows(root / "grades.csv", people)
    assert [r["student_id"] for r in rows] == ["amara", "bruno", "chidi"]  # the roster's students, in its order
    by_id = {r["student_id"]: r for r in rows}
    assert by_id["bruno"]["late"] == "yes" and by_id["bruno"]["section"] == "B"
    assert by_id["chidi"]["submitted"] == "no" and by_id["chidi"]["score"] == "0.0"
    long = R.write_lms(rows, tmp_path / "lms.csv")
    with open(long, newline="") as handle:
        assert tuple(csv.DictReader(handle).fieldnames) == R.LMS_COLUMNS
    canvas = R.write_lms(rows, tmp_path / "canvas.csv", "canvas")
    lines = list(csv.reader(open(canvas, newline="")))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_two_keys"]
    assert lines[1][0] == "Points Possible" and lines[2][:5] == ["Okeke, Amara", "", "amara", "amara@uni.example", "A"]


def test_the_per_day_late_policy():
    policy = PerDayPenalty(percent_per_day=10, max_percent=25)
    assert policy.late_submission_penalty("s", 10.0, 0) is None
    assert policy.late_submission_penalty("s", 10.0, 60) == 1.0  # a started day counts
    assert policy.late_submission_penalty("s", 10.0, 86400 + 1) == 2.0
    assert policy.late_submission_penalty("s", 10.0, 30 * 86400) == 2.5  # at most max_percent
    assert PerDayPenalty().late_submission_penalty("s", 10.0, 86400) is None  # the default: marked late only


EVENING = """id,first_name,last_name,email,section,role
prof-mina,Mina,Haddad,mina@uni.example,,instructor
amara,Amara,Okeke,amara@uni.example,E,student
fola,Fola,Adeyemi,fola@uni.example,E,student
"""


def test_a_second_course_has_its_own_roster_service_and_groups(tmp_path):
    """The hub's courses (instructor/hub.py, no hub started): this course first, then those
    `course add` recorded, each with its service account, formgrader service, nbgrader's group
    names and roster; one account per person across rosters; everyone's nbgrader config names
    the course only while there is one."""
    import dataclasses
    import json

    from instructor import hub as H

    layout = H.Layout(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    assert [c.id for c in layout.courses()] == [H.COURSE_ID]
    (tmp_path / "courses" / "attention-evening").mkdir(parents=True)
    (tmp_path / "courses" / "attention-evening" / "roster.csv").write_text(EVENING)
    (tmp_path / "courses.json").write_text(json.dumps([{"id": "attention-evening", "source": str(REPO / "source")}]))
    first, evening = layout.courses()
    assert (first.id, first.grader, first.service, first.root) == (H.COURSE_ID, H.GRADER, H.SERVICE, layout.course)
    assert (evening.grader, evening.service) == ("grader-attention-evening", "formgrader-attention-evening")
    assert (evening.graders_group, evening.students_group) == ("formgrade-attention-evening", "nbgrader-attention-evening")
    assert evening.root == tmp_path / "home" / "grader-attention-evening" / "course"
    assert [p.id for p in layout.people(evening)] == ["prof-mina", "amara", "fola"]
    assert [p.id for p in layout.everyone()] == ["prof-ines", "ta-jonas", "amara", "bruno", "chidi", "prof-mina", "fola"]
    assert layout.graders() == [H.GRADER, "grader-attention-evening"]
    assert layout.course_named("attention-evening") == evening and layout.course_named(None) == first
    with pytest.raises(SystemExit) as err:
        layout.course_named("attention-morning")
    assert "attention-evening" in str(err.value)
    assert H.valid_course_id("attention-evening") and H.valid_course_id("ml2")
    assert not any(map(H.valid_course_id, ["Attention", "a", "x" * 25, "evening-", "2nd-course", "a_b"]))

    # amara a student of both, and both have this course's chapters: named, with the chapters in common
    (shared,) = H.shared_folders(layout, evening, layout.people(evening))
    assert shared.startswith("amara: a student of attention-evening and of attention-transformers") and "01_two_keys" in shared
    example = REPO / "examples" / "sorting_course" / "source"
    other_subject = dataclasses.replace(evening, source=example)
    assert H.shared_folders(layout, other_subject, layout.people(evening)) == []

    # a course whose own config exports nbgrader's plain CSV (no "submitted" column): a timestamp is a submission
    plain = tmp_path / "plain-grades.csv"
    plain.write_text("assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,"
                     "late_submission_penalty,score,max_score\n"
                     "01_numpy_warmup,,2026-12-04 10:00:00.000000 UTC,fola,,,,4.0,0.0,4.0,4.0\n"
                     "01_numpy_warmup,,,amara,,,,0.0,0.0,0.0,4.0\n")
    rows = {r["student_id"]: r for r in R.lms_rows(plain, layout.people(evening))}
    assert (rows["fola"]["submitted"], rows["fola"]["score"]) == ("yes", "4.0") and rows["amara"]["submitted"] == "no"

    layout.common.mkdir(parents=True)
    layout.student_etc.mkdir(parents=True)
    H._nbgrader_configs(layout)  # two courses: students name none, nbgrader asks the hub for their groups
    assert "course_id" not in (layout.common / "nbgrader_config.py").read_text()
    students = (layout.student_etc / "nbgrader_config.py").read_text()
    assert "JupyterHubAuthPlugin" in students and 'course_id = ""' in students
    (tmp_path / "courses.json").write_text("[]")
    H._nbgrader_configs(layout)  # one course: its id for everyone, as before
    assert repr(H.COURSE_ID) in (layout.common / "nbgrader_config.py").read_text()
    assert not (layout.student_etc / "nbgrader_config.py").exists()
