"""nbgrader's exchange, round trip on one machine: release, two students fetch and submit
from their own folders, the instructor collects and autogrades (docs/JUPYTERHUB.md)."""

from __future__ import annotations

import os
import subprocess

import pytest
from nboracle.classroom import pipeline as P

from instructor.repository import REPOSITORY

A, COURSE = "01_two_keys", "attention-transformers"
pytestmark = pytest.mark.pipeline


def as_student(home, *args):
    """Run nbgrader as a student working in their own home folder."""
    env = {**P.tool_env(), "HOME": str(home), "JUPYTER_DATA_DIR": str(home / ".local/share/jupyter")}
    proc = subprocess.run([str(P.BIN / "nbgrader"), *args], cwd=home, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_release_fetch_submit_collect_autograde(tmp_path):
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    os.chmod(exchange, 0o777)  # nbgrader wants an exchange every user can write to
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    with open(root.config, "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n"
                     "c.CollectApp.check_owner = False  # both 'users' are this one OS account here\n")
    root.nbgrader("release_assignment", A)

    _, answers = root.release_and_answers(A)
    flags = [f"--course={COURSE}", f"--Exchange.root={exchange}"]
    for student, solve in (("alice", True), ("bob", False)):
        home = tmp_path / "home" / student
        home.mkdir(parents=True)
        listing = as_student(home, "list", *flags)
        assert A in listing.stdout + listing.stderr
        as_student(home, "fetch_assignment", A, *flags)
        fetched = home / A / root.notebook("release", A).name
        assert fetched.exists()
        if solve:
            P.write_nb(P.fill(P.read_nb(fetched), answers), fetched)
        as_student(home, "submit", A, f"--student={student}", *flags)

    root.nbgrader("collect", A)
    assert root.students(A) == ["alice", "bob"]
    root.autograde(A)
    scores = {s: r.auto_score for s, r in root.results(A).items()}
    assert scores == {"alice": 12.0, "bob": 0.0}


def test_the_released_notebook_says_the_due_date_the_gradebook_holds(tmp_path):
    """nbgrader's Assignment List never shows a due date: the notebook does, once the instructor set one."""
    from datetime import datetime

    from nbgrader.api import Gradebook

    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    without = P.read_nb(root.notebook("release", A))
    assert not any("Due:" in cell.source for cell in without.cells)  # no due date: the notebook as committed
    with Gradebook(root.gradebook_url) as gradebook:
        gradebook.update_or_create_assignment(A, duedate=datetime(2027, 3, 5, 17, 0))
    root.release(A)
    released = P.read_nb(root.notebook("release", A))
    due = [cell for cell in released.cells if "Due:" in cell.source]
    assert len(due) == 1 and due[0].cell_type == "markdown" and "nbgrader" not in due[0].metadata
    assert "Friday 05 March 2027, 17:00 UTC" in due[0].source
    assert released.cells.index(due[0]) == 1  # right after the title
    root.release(A)  # generated again (a due date moved): still one cell
    assert sum("Due:" in cell.source for cell in P.read_nb(root.notebook("release", A)).cells) == 1
    _, answers = root.release_and_answers(A)
    root.submit(A, "alice", P.fill(released, answers))
    root.autograde(A)
    assert root.results(A)["alice"].auto_score == root.results(A)["alice"].auto_max


PANEL_LISTING = """
import json, os, sys
from nbgrader.server_extensions.assignment_list.handlers import AssignmentList
panel = AssignmentList()
panel.root_dir = os.getcwd()
print(json.dumps(panel.list_assignments(course_id=sys.argv[1])))
"""


def test_the_assignment_list_says_the_due_date_and_which_submission_came_after_it(tmp_path):
    """What the Assignment List panel asks the student's server for (nbgrader's own handler, with
    the course's config on JUPYTER_CONFIG_PATH as on the hub): each assignment's due date, read
    from the released notebooks, and ``after_due`` for each submission."""
    import json
    from datetime import datetime, timedelta

    from nbgrader.api import Gradebook

    exchange = tmp_path / "exchange"
    exchange.mkdir()
    os.chmod(exchange, 0o777)
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    with open(root.config, "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    home = tmp_path / "home" / "alice"
    home.mkdir(parents=True)
    env = {**P.tool_env(), "HOME": str(home), "JUPYTER_DATA_DIR": str(home / ".local/share/jupyter"),
           "JUPYTER_CONFIG_PATH": str(root.path)}

    def panel() -> dict[tuple[str, str], dict]:
        proc = subprocess.run([str(P.BIN / "python"), "-c", PANEL_LISTING, COURSE], cwd=home, env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        reply = json.loads(proc.stdout.strip().splitlines()[-1])
        assert reply["success"], reply
        return {(info["status"], info["assignment_id"]): info for info in reply["value"]}

    def student(*args):
        proc = subprocess.run([str(P.BIN / "nbgrader"), *args], cwd=home, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]

    root.nbgrader("release_assignment", A)  # no due date yet
    assert panel()[("released", A)]["due_utc"] is None
    soon = (datetime.utcnow() + timedelta(days=3)).replace(microsecond=0)
    with Gradebook(root.gradebook_url) as gradebook:
        gradebook.update_or_create_assignment(A, duedate=soon)
    root.release(A)
    root.nbgrader("release_assignment", A, "--force")
    assert panel()[("released", A)]["due_utc"] == f"{soon:%Y-%m-%dT%H:%M:%S}Z"
    student("fetch_assignment", A)
    student("submit", A)  # on time
    assert [s["after_due"] for s in panel()[("submitted", A)]["submissions"]] == [False]
    with Gradebook(root.gradebook_url) as gradebook:  # the deadline moved into the past
        gradebook.update_or_create_assignment(A, duedate=datetime(2020, 1, 6, 9, 0))
    root.release(A)
    root.nbgrader("release_assignment", A, "--force")
    student("submit", A)  # after it (and so is the first, measured against the due date now set)
    listing = panel()
    assert listing[("fetched", A)]["due_utc"] == "2020-01-06T09:00:00Z"
    assert [s["after_due"] for s in listing[("submitted", A)]["submissions"]] == [True, True]
    with Gradebook(root.gradebook_url) as gradebook:  # the due date removed: none listed, none "after"
        gradebook.update_or_create_assignment(A, duedate=None)
    root.release(A)
    root.nbgrader("release_assignment", A, "--force")
    listing = panel()
    assert listing[("fetched", A)]["due_utc"] is None
    assert [s["after_due"] for s in listing[("submitted", A)]["submissions"]] == [None, None]
