"""The hub term's roster and the export an LMS imports (instructor/roster.py), without a hub:
a roster read and checked, nbgrader's export of a gradebook with a late, an on-time and a missing
submission, the late policy."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path

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
        gb.grant_extension("01_two_keys", "amara", hours=2.5)  # the export says who has an extension
        gb.add_student("dropped")  # in the gradebook, not on the roster
    proc = subprocess.run([str(P.BIN / "nbgrader"), "export", "--to", "grades.csv"], cwd=root,
                          capture_output=True, text=True, env={**P.tool_env(), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(root / "grades.csv", newline="") as handle:
        graded = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert graded["bruno"]["late"] == "yes" and float(graded["bruno"]["seconds_late"]) == 30 * 3600
    assert graded["amara"]["late"] == "" and graded["amara"]["submitted"] == "yes"
    assert graded["amara"]["extension_hours"] == "2.5" and graded["bruno"]["extension_hours"] == ""
    assert graded["chidi"]["submitted"] == "no" and graded["chidi"]["email"] == "chidi@uni.example"

    rows = R.lms_rows(root / "grades.csv", people)
    assert [r["student_id"] for r in rows] == ["amara", "bruno", "chidi"]  # the roster's students, in its order
    by_id = {r["student_id"]: r for r in rows}
    assert by_id["bruno"]["late"] == "yes" and by_id["bruno"]["section"] == "B"
    assert by_id["amara"]["extension_hours"] == "2.5"
    assert by_id["chidi"]["submitted"] == "no" and by_id["chidi"]["score"] == "0.0"
    long = R.write_lms(rows, tmp_path / "lms.csv")
    with open(long, newline="", encoding="utf-8-sig") as handle:
        assert tuple(csv.DictReader(handle).fieldnames) == R.LMS_COLUMNS
    canvas = R.write_lms(rows, tmp_path / "canvas.csv", "canvas")
    assert canvas.read_bytes().startswith(b"\xef\xbb\xbf")  # Excel reads UTF-8 only after its byte-order mark
    lines = list(csv.reader(open(canvas, newline="", encoding="utf-8-sig")))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_two_keys"]
    assert lines[1][0] == "Points Possible" and lines[2][:5] == ["Okeke, Amara", "", "amara", "amara@uni.example", "A"]
    # the due date has passed: chidi handed in nothing (0), amara's and bruno's scores as graded
    assert [line[5] for line in lines[2:]] == [by_id["amara"]["score"], by_id["bruno"]["score"], "0"]


def _lms_row(student, assignment, submitted, score="", duedate="2026-03-02 12:00:00"):
    return {**dict.fromkeys(R.LMS_COLUMNS, ""), "student_id": student, "first_name": student.title(),
            "last_name": "Nguyễn", "email": f"{student}@uni.vn", "assignment": assignment,
            "submitted": submitted, "score": score, "max_score": "14", "duedate": duedate}


def test_lms_files_tell_not_submitted_from_not_yet_collected_and_open_in_excel(tmp_path):
    """A student with a submission in the exchange that nobody collected yet gets no grade (an
    empty cell, which Canvas and Moodle leave alone), not the 0 of one who handed in nothing; before
    the due date nobody gets a 0; Moodle's file has a row per student and a column per assignment."""
    grades = tmp_path / "grades.csv"
    with open(grades, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["assignment", "duedate", "timestamp", "student_id", "raw_score", "score", "max_score"])
        writer.writerow(["01_two_keys", "2026-03-02 12:00:00", "", "an", "0.0", "0.0", "14.0"])
        writer.writerow(["01_two_keys", "2026-03-02 12:00:00", "", "binh", "0.0", "0.0", "14.0"])
        writer.writerow(["01_two_keys", "2026-03-02 12:00:00", "2026-03-01 09:00:00", "chi", "12.0", "12.0", "14.0"])
    people = [R.Person("an", "An", "Nguyễn"), R.Person("binh", "Bình", "Trần"), R.Person("chi", "Chi", "Lê")]
    rows = R.lms_rows(grades, people, uncollected=frozenset({("binh", "01_two_keys")}))
    assert [r["submitted"] for r in rows] == ["no", R.NOT_COLLECTED, "yes"]
    after, before = datetime(2026, 3, 3, tzinfo=R.timezone.utc), datetime(2026, 3, 1, tzinfo=R.timezone.utc)
    assert [R.gradebook_score(r, after) for r in rows] == ["0", "", "12.0"]
    assert [R.gradebook_score(r, before) for r in rows] == ["", "", "12.0"]

    two = [_lms_row("an", "01_two_keys", "yes", "11.0"), _lms_row("an", "02_scaling", "no"),
           _lms_row("binh", "01_two_keys", R.NOT_COLLECTED), _lms_row("binh", "02_scaling", "yes", "9.5")]
    moodle = R.write_lms(two, tmp_path / "moodle.csv", "moodle", now=after)
    lines = list(csv.reader(open(moodle, newline="", encoding="utf-8-sig")))
    assert lines == [["First name", "Last name", "Username", "Email address", "01_two_keys", "02_scaling"],
                     ["An", "Nguyễn", "an", "an@uni.vn", "11.0", "0"],
                     ["Binh", "Nguyễn", "binh", "binh@uni.vn", "", "9.5"]]
    with pytest.raises(ValueError, match="one of long, canvas, moodle"):
        R.write_lms(two, tmp_path / "x.csv", "blackboard")


def _cp1258(text: str) -> bytes:
    """``text`` as Excel saves CSV on a Vietnamese Windows: Windows-1258, a tone mark after its letter."""
    out = b""
    for char in text:
        try:
            out += char.encode("cp1258")
        except UnicodeEncodeError:
            letter, mark = unicodedata.normalize("NFD", char)[:-1], unicodedata.normalize("NFD", char)[-1]
            out += unicodedata.normalize("NFC", letter).encode("cp1258") + mark.encode("cp1258")
    return out


def test_a_roster_is_read_as_registrars_and_spreadsheets_save_it(tmp_path):
    """UTF-8 with a byte-order mark, UTF-16 with tabs (Excel's 'Unicode Text'), Windows-1258 with
    semicolons (Excel's CSV on a Vietnamese Windows): the same people, names in NFC; the columns
    as registrars name them."""
    text = ("Username;Last Name;First name;E-mail;Role\n"
            "nguyen.an;Nguyễn;Ân;an@uni.vn;student\nprof-ha;Trần;Hà;ha@uni.vn;instructor\n")
    expected = [R.Person("nguyen.an", "Ân", "Nguyễn", "an@uni.vn"), R.Person("prof-ha", "Hà", "Trần", "ha@uni.vn",
                                                                               role="instructor")]
    files = {"bom.csv": b"\xef\xbb\xbf" + text.replace(";", ",").encode(),
             "unicode.txt": text.replace(";", "\t").encode("utf-16"),
             "excel-vn.csv": _cp1258(text)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        assert R.read(tmp_path / name) == expected, name
    assert _cp1258("Nguyễn") != "Nguyễn".encode("utf-8")
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"id,first_name\nan,\x81\x8d\n")  # bytes no code page of Excel's writes
    with pytest.raises(R.RosterError, match="CSV UTF-8"):
        R.read(broken)


def test_every_roster_mistake_is_one_line_naming_its_row_and_nothing_is_imported(tmp_path, capsys):
    bad = tmp_path / "class.csv"
    bad.write_text("id,first_name,email,role\nan,An,an@uni,student\nbinh,Bình,binh@uni.vn,student\n"
                   "binh,Bình,binh2@uni.vn,student\n")
    with pytest.raises(R.RosterError) as err:
        R.read(bad)
    assert "line 2: e-mail 'an@uni'" in str(err.value) and "line 4: id 'binh' appears twice" in str(err.value)
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("id,first_name,student number\nan,An,1234\n")
    with pytest.raises(R.RosterError, match="line 1: unknown column.s. 'student number'"):
        R.read(unknown)
    nobody = tmp_path / "nobody.csv"
    nobody.write_text("id,first_name\nan,An\n")
    with pytest.raises(R.RosterError, match="nobody has the role 'instructor'"):
        R.require_grader(R.read(nobody), nobody)

    from instructor import hub as H

    state = tmp_path / "state"
    for argv in (["prepare", "--roster", str(bad)], ["prepare", "--roster", str(nobody)],
                 ["course", "add", "evening", "--roster", str(nobody)]):
        with pytest.raises(SystemExit) as stopped:
            H.main(["--state", str(state), *argv])
        message = str(stopped.value.code)
        assert message.startswith("nothing changed: ") and "Traceback" not in message, argv
    assert not (state / "roster.csv").exists() and not (state / "courses.json").exists()


def test_the_passwords_file_names_each_person(tmp_path):
    from instructor import hub as H

    layout = H.Layout(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    H._save_passwords(layout, {"amara": "pw-a", "prof-ines": "pw-i"})
    assert layout.passwords.read_bytes().startswith(b"\xef\xbb\xbf")
    with open(layout.passwords, newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0] == {"id": "amara", "first_name": "Amara", "last_name": "Okeke", "email": "amara@uni.example",
                       "role": "student", "password": "pw-a"}
    assert H._passwords(layout) == {"amara": "pw-a", "prof-ines": "pw-i"}


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
    """The hub's courses (instructor/hub/, no hub started): this course first, then those
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


def test_a_course_in_another_language_gives_its_students_servers_that_language(tmp_path, monkeypatch):
    """`course add` records the language its config sets (c.MessageCatalog.language: the Vietnamese
    edition's `vi`), and the hub's config gives a person's server COURSE_LANGUAGE by their groups: the
    language of all their courses, else English (""); a language with no catalog is refused, said."""
    import json
    from types import SimpleNamespace

    from traitlets.config.loader import PyFileConfigLoader

    from course.language import ENV
    from instructor import hub as H

    vi_config = REPO / "editions" / "vi" / "nbgrader_config.py"
    example = REPO / "examples" / "sorting_course"
    assert H.config_language(vi_config) == "vi"
    assert H.config_language(REPO / "nbgrader_config.py") == H.config_language(example / "nbgrader_config.py") == "en"
    unknown = tmp_path / "xx" / "nbgrader_config.py"
    unknown.parent.mkdir()
    unknown.write_text(f"c = get_config()\nload_subconfig({str(vi_config)!r})\nc.MessageCatalog.language = 'xx'\n")
    with pytest.raises(SystemExit) as refused:
        H.config_language(unknown)
    said = str(refused.value.code)
    assert "'xx', a language with no catalog here" in said and "course/data/messages-xx.json" in said, said
    assert "i18n/xx/messages.po" in said and "The languages with one: vi" in said, said
    assert H.config_language(unknown, strict=False) == "en"
    (unknown.parent / "nbgrader_config.py").write_text("c = get_config()\nc.MessageCatalog.language = 'Tiếng Việt'\n")
    with pytest.raises(SystemExit, match="no language code such as 'vi'"):
        H.config_language(unknown)

    layout = H.Layout(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    for course_id in ("attention-vi", "sorting-example"):
        (tmp_path / "courses" / course_id).mkdir(parents=True)
        (tmp_path / "courses" / course_id / "roster.csv").write_text(EVENING)
    (tmp_path / "courses.json").write_text(json.dumps([
        {"id": "attention-vi", "source": str(REPO / "source"), "config": str(vi_config), "language": "vi"},
        # a course recorded before languages were: its config's, read again
        {"id": "sorting-example", "source": str(example / "source"), "config": str(example / "nbgrader_config.py")}]))
    courses = layout.courses()
    assert [(c.id, c.language) for c in courses] == [(H.COURSE_ID, "en"), ("attention-vi", "vi"), ("sorting-example", "en")]
    for groups, language in [({"nbgrader-attention-vi"}, "vi"), ({"formgrade-attention-vi"}, "vi"),
                             ({"nbgrader-attention-vi", "nbgrader-sorting-example"}, ""),
                             ({"nbgrader-attention-vi", "formgrade-attention-transformers"}, ""),
                             ({"nbgrader-attention-transformers"}, ""), (set(), "")]:
        assert H.server_language(courses, groups) == language, groups

    # the hub's config, as JupyterHub loads it: the spawner's environment asks the person's groups
    monkeypatch.setenv("COURSE_HUB_STATE", str(tmp_path))
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(REPO / "hub")).load_config()
    environment = config.Spawner.environment
    for groups, language in [(["nbgrader-attention-vi"], "vi"), (["nbgrader-attention-vi", "nbgrader-sorting-example"], "")]:
        spawner = SimpleNamespace(user=SimpleNamespace(groups=[SimpleNamespace(name=g) for g in groups]))
        assert environment[ENV](spawner) == language, groups
    (tmp_path / "courses.json").write_text(json.dumps([json.loads((tmp_path / "courses.json").read_text())[1]]))
    english = PyFileConfigLoader("jupyterhub_config.py", path=str(REPO / "hub")).load_config()
    assert ENV not in english.Spawner.environment, "a hub of English courses sets no language"


def test_an_extension_must_be_one(tmp_path):
    """Negative, not a number or over a year: refused before the gradebook is touched; only a
    student of the course's roster gets one."""
    from instructor import hub as H

    layout = H.Layout(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    for hours, says in ((-5, "never made later"), (float("nan"), "is 0 .none"), (24 * 400, "hours after the due date")):
        with pytest.raises(SystemExit, match=says):
            H.extend(layout, "01_two_keys", "amara", hours)
    with pytest.raises(SystemExit, match="no student on the roster"):
        H.extend(layout, "01_two_keys", "prof-ines", 2)


@pytest.mark.skipif(os.geteuid() != 0, reason="folder owners and groups: root sets them")
def test_on_the_hub_only_graders_read_the_references_and_the_zoo(tmp_path):
    """The clone every hub account runs the course from: a student's process can import nothing of
    source/, instructor/references/ or instructor/zoo/ (what grades, and every exercise's correct
    versions); a process of the graders' group (each course's formgrader) reads them."""
    import grp
    import tempfile

    from instructor import hub as H

    repo = Path(tempfile.mkdtemp(dir="/tmp", prefix="clone-"))
    try:
        os.chmod(repo, 0o755)
        for part in H.GRADERS_ONLY:
            (repo / part.replace("*", "vi")).mkdir(parents=True)
            (repo / part.replace("*", "vi") / "answer.py").write_text("ANSWER = 42\n")
        (repo / "instructor" / "__init__.py").write_text("")
        (repo / "instructor" / "roster.py").write_text("OPEN = 1\n")
        (tmp_path / "roster.csv").write_text(ROSTER)
        H._hide_from_students(H.Layout(tmp_path), repo)
        gid = grp.getgrnam(H.GRADERS_GROUP).gr_gid

        def read_as(groups: str, module: str) -> subprocess.CompletedProcess:
            return subprocess.run(["setpriv", "--reuid=64123", "--regid=64123", groups, sys.executable, "-c",
                                   f"import {module}"], cwd="/", capture_output=True, text=True,
                                  env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"})

        assert read_as("--clear-groups", "instructor.roster").returncode == 0  # the rest of the clone stays open
        assert not os.stat(repo / "editions" / "vi" / "source").st_mode & 0o007  # the edition's solutions
        for module in ("instructor.references.answer", "instructor.zoo.answer"):
            student = read_as("--clear-groups", module)
            assert student.returncode != 0 and ("PermissionError" in student.stderr
                                                or "ModuleNotFoundError" in student.stderr), (module, student.stderr)
            assert read_as(f"--groups={gid}", module).returncode == 0, module
    finally:
        shutil.rmtree(repo)
