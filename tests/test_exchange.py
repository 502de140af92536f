"""nbgrader's exchange, round trip on one machine: release, two students fetch and submit
from their own folders, the instructor collects and autogrades (docs/JUPYTERHUB.md)."""

from __future__ import annotations

import os
import subprocess

import pytest
from nboracle.classroom import pipeline as P

from instructor.repository import REPO, REPOSITORY

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
    # after it (and so is the first, measured against the due date now set), whatever time its nbgrader is told to write
    student("submit", A, "--Exchange.timestamp_format=2019-12-31 08:00:00.000000 UTC")
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


# ---------------------------------------------------------------- the exchange believes the server, not the student

TRUSTED = "nboracle.grader.exchange.TrustedExchangeCollect"
ACCOUNTS = {"amara": 20001, "bruno": 20002}  # the hub's accounts: a uid each (made here by chown, as root)
COLLECT_AS_ON_THE_HUB = """
import json, sys
from nboracle.grader import exchange
names = {str(uid): name for name, uid in json.loads(sys.argv[1]).items()}
exchange.account_of = lambda uid: names.get(str(uid))  # the hub's /etc/passwd, for these uids
from nbgrader.apps.nbgraderapp import main
sys.argv = ["nbgrader", "collect", *sys.argv[2:]]
main()
"""
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="files of two accounts: root makes them (chown)")


class Hub:
    """A course root and an exchange with the hub's collect; each student submits from their own
    home, and the submission is owned by their account (as the hub's servers run as them)."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.exchange = tmp_path / "exchange"
        self.exchange.mkdir()
        os.chmod(self.exchange, 0o777)
        self.root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
        with open(self.root.config, "a") as config:
            config.write(f"\nc.Exchange.root = {str(self.exchange)!r}\nc.ExchangeFactory.collect = {TRUSTED!r}\n")
        self.root.nbgrader("release_assignment", A)
        self.inbound = self.exchange / COURSE / "inbound"
        _, self.answers = self.root.release_and_answers(A)

    def submit(self, account: str, *options: str, solve: bool = True):
        """``account`` fetches (once), answers (or not) and submits with ``options`` (what the
        student's own nbgrader may be told); returns the inbound folder it made, owned by ``account``."""
        home = self.tmp / "home" / account
        flags = [f"--course={COURSE}", f"--Exchange.root={self.exchange}"]
        if not home.exists():
            home.mkdir(parents=True)
            as_student(home, "fetch_assignment", A, *flags)
        fetched = home / A / self.root.notebook("release", A).name
        nb = P.read_nb(self.root.notebook("release", A))
        P.write_nb(P.fill(nb, self.answers) if solve else nb, fetched)
        before = set(self.inbound.iterdir())
        named = [] if any(o.startswith("--student=") for o in options) else [f"--student={account}"]  # root here
        as_student(home, "submit", A, *flags, *named, *options)
        (made,) = set(self.inbound.iterdir()) - before
        for path in [made, *made.rglob("*")]:
            os.chown(path, ACCOUNTS[account], ACCOUNTS[account])
        return made

    def collect(self, *args: str) -> subprocess.CompletedProcess:
        import json

        return subprocess.run([str(P.BIN / "python"), "-c", COLLECT_AS_ON_THE_HUB, json.dumps(ACCOUNTS), A, *args],
                              cwd=self.root.path, env=P.tool_env(), capture_output=True, text=True)

    def submitted(self, student: str):
        return self.root.path / "submitted" / student / A


def secret(folder) -> str:
    return (folder / "submission_secret.txt").read_text().strip()


@root_only
def test_a_forged_submission_time_is_recorded_as_the_server_saw_it(tmp_path):
    """amara hands in after the due date with her nbgrader told to write another time
    (``--Exchange.timestamp_format`` names a fixed one; ``--Exchange.timezone=Etc/GMT+12`` too):
    collect records when the files arrived, and autograde marks her late."""
    import time
    from datetime import datetime, timedelta

    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    hub = Hub(tmp_path)
    with Gradebook(hub.root.gradebook_url) as gradebook:
        gradebook.update_or_create_assignment(A, duedate=datetime.utcnow() - timedelta(hours=1))
    hub.submit("amara", "--Exchange.timestamp_format=2020-01-06 08:00:00.000000 UTC", "--Exchange.timezone=Etc/GMT+12")
    odd = hub.submit("bruno", "--Exchange.timezone=Etc/GMT-12", solve=False)  # '+12' in the folder's name
    assert odd.name.count("+") == 4, odd.name
    collected = hub.collect()
    assert collected.returncode == 0, collected.stderr[-2000:]
    for student in ("amara", "bruno"):
        recorded = parse_utc((hub.submitted(student) / "timestamp.txt").read_text())
        assert abs((recorded - datetime.utcnow()).total_seconds()) < 120, (student, recorded)
    assert (hub.submitted("amara") / "timestamp-claimed.txt").read_text().startswith("2020-01-06 08:00:00")
    hub.root.autograde(A)
    with Gradebook(hub.root.gradebook_url) as gradebook:
        late = gradebook.find_submission(A, "amara").total_seconds_late
    assert 3000 < late < 3600 + 120 + time.process_time(), late  # an hour late, as the server saw it


@root_only
def test_a_submission_in_a_classmates_name_is_refused_and_hers_stays(tmp_path):
    """bruno submits with ``--student=amara``: collect refuses it, fails with a report naming his
    account (the formgrader's Collect shows an error, not one log line), keeps a copy for the
    lecturer, and collects amara's own submission; bruno gets nothing in her name or his."""
    hub = Hub(tmp_path)
    hers = hub.submit("amara")
    forged = hub.submit("bruno", "--student=amara", solve=False)
    assert forged.name.startswith("amara+")
    collected = hub.collect()
    assert collected.returncode != 0, collected.stderr[-2000:]
    report = collected.stderr
    assert "REFUSED 1 submission" in report and "the account bruno handed it in, in the name of amara" in report, report
    assert secret(hub.submitted("amara")) == secret(hers), "amara's own work is the one collected"
    assert not hub.submitted("bruno").exists()
    assert (hub.root.path / "refused" / "bruno" / A / forged.name).is_dir(), "a copy for the lecturer"
    again = hub.collect()  # reported once as an error; after that a warning, and the class is collected
    assert again.returncode == 0 and "REFUSED" in again.stderr and "reported before" in again.stderr, again.stderr
    hub.root.autograde(A)
    assert hub.root.results(A)["amara"].auto_score == 12.0


@root_only
def test_a_resubmission_after_grading_is_kept_beside_the_graded_one(tmp_path):
    """amara's graded submission is not replaced by a later one: both are kept, collect says so
    and names the command that takes the new one, which then keeps the graded one in turn."""
    hub = Hub(tmp_path)
    first = hub.submit("amara")
    assert hub.collect().returncode == 0
    hub.root.autograde(A)
    later = hub.submit("amara", solve=False)
    collected = hub.collect()
    assert collected.returncode == 0, collected.stderr[-2000:]
    assert "NOT REPLACED: amara handed 01_two_keys in again" in collected.stderr, collected.stderr
    command = "--student=amara --TrustedExchangeCollect.replace_graded=True"
    assert command in collected.stderr
    assert secret(hub.submitted("amara")) == secret(first), "the graded one stays"
    (aside,) = (hub.root.path / "resubmitted" / "amara" / A).iterdir()
    assert secret(aside) == secret(later)
    assert hub.root.results(A)["amara"].auto_score == 12.0
    again = hub.collect()  # told once: the next collect keeps it aside quietly
    assert again.returncode == 0 and "NOT REPLACED" not in again.stderr
    taken = hub.collect(*command.split())
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert secret(hub.submitted("amara")) == secret(later)
    kept = {secret(f) for f in (hub.root.path / "resubmitted" / "amara" / A).iterdir()}
    assert kept == {secret(first), secret(later)}, "the graded one is kept where the later one waited"


def test_an_extension_given_before_any_submission_reaches_the_graded_one_and_the_export(tmp_path):
    """nbgrader keeps an extension on the graded submission only: one given to a student who asks
    before handing in (nboracle.grader.extensions) is kept in the gradebook, applied when autograde
    creates the submission (not late, no penalty), said by the export for a student who has not
    submitted, and taken back with 0 hours; nonsense is refused with a sentence and changes nothing."""
    import csv
    from datetime import datetime

    from nbgrader.api import Gradebook
    from nboracle.grader import extensions as X

    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    due = datetime(2026, 3, 2, 12, 0)  # UTC, as the gradebook keeps it
    with Gradebook(root.gradebook_url) as gb:
        gb.update_or_create_assignment(A, duedate=due)
        for student in ("alice", "bob"):
            gb.update_or_create_student(student)
        for args, says in (((A, "alice", -5), "never made later"), ((A, "alice", float("nan")), "is 0"),
                           (("02_nope", "alice", 2), "no assignment of this course"),
                           ((A, "zed", 2), "no student of this course")):
            with pytest.raises(ValueError, match=says):
                X.grant(gb, *args)
        assert X.granted(gb) == {}
        assert X.grant(gb, A, "alice", 3) is None  # before she handed anything in

    def extend(*args):  # what `python -m instructor.hub extend` runs as the course's service account
        from instructor.hub import EXTEND

        return subprocess.run([str(P.BIN / "python"), "-c", EXTEND, *args], cwd=root.path, capture_output=True,
                              text=True, env={**P.tool_env(), "PYTHONPATH": str(REPO)})

    told = extend(A, "bob", "24.0")
    assert told.returncode == 0 and "extended by 24 h to Tuesday 03 March 2026, 12:00 UTC" in told.stdout, told.stderr
    assert "no submission graded yet" in told.stdout
    refused = extend("02_nope", "bob", "5.0")
    assert refused.returncode != 0 and "nothing changed: 02_nope is no assignment" in refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr
    _, answers = root.release_and_answers(A)
    released = P.read_nb(root.notebook("release", A))
    path = root.submit(A, "alice", P.fill(released, answers))
    (path.parent / "timestamp.txt").write_text("2026-03-02 14:00:00.000000 UTC")  # 2 h after the due date
    root.autograde(A)
    with Gradebook(root.gradebook_url) as gb:
        submission = gb.find_submission(A, "alice")
        assert submission.extension.total_seconds() == 3 * 3600 and submission.total_seconds_late == 0
        assert all(not nb.late_submission_penalty for nb in submission.notebooks)
    grades = root.export(tmp_path / "grades.csv")
    with open(grades, newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle) if r["assignment"] == A}
    assert rows["alice"]["extension_hours"] == "3" and rows["alice"]["late"] == ""
    assert rows["bob"]["extension_hours"] == "24" and rows["bob"]["submitted"] == "no"
    with Gradebook(root.gradebook_url) as gb:
        X.grant(gb, A, "bob", 0)  # taken back
        X.grant(gb, A, "alice", 0)
        assert X.granted(gb) == {} and gb.find_submission(A, "alice").extension is None
        assert gb.find_submission(A, "alice").total_seconds_late == 2 * 3600
