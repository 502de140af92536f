"""The course's time zone (issue 51): due dates typed in it, shown in it, and the formgrader's and
the Assignment List's changes that carry it. Unit-sized: a sqlite gradebook at most; the Lab
extension's countdown in node when node is there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from nboracle.grader import formgrader as F
from nboracle.grader.coursetime import course_zone, parse_due, shown
from traitlets.config import Config

HCM = "Asia/Ho_Chi_Minh"
LAB_JS = Path(F.__file__).resolve().parents[1] / "jupyter" / "labextensions" / "nboracle-due-dates" / "static" / "remoteEntry.js"


def test_a_due_date_is_read_in_the_zone_typed_or_the_courses():
    five_pm = "2026-12-17T17:00"
    assert parse_due(five_pm, HCM) == datetime(2026, 12, 17, 10, 0)  # what nbgrader's parse_utc cannot read
    assert parse_due(five_pm, "+0700") == parse_due(five_pm, "+07:00") == parse_due(five_pm, "UTC+7")
    assert parse_due(five_pm, "", HCM) == datetime(2026, 12, 17, 10, 0)  # empty: the course's zone
    assert parse_due(five_pm, None) == datetime(2026, 12, 17, 17, 0)  # a course on UTC
    assert parse_due("2026-07-01 09:30", "Europe/Berlin") == datetime(2026, 7, 1, 7, 30)  # summer time
    assert parse_due("", HCM) is None and parse_due(None, None) is None  # no due date
    for when, zone, says in ((five_pm, "ICT", "no time zone: type a name like Asia/Ho_Chi_Minh"),  # parse_utc: UTC, silently
                             (five_pm, "Asia/Hanoi", "no time zone"), (five_pm, "+25", "at most 14 hours"),
                             ("17/12/2026 17:00", HCM, "no date and time: type it as 2026-12-17T17:00"),
                             ("0026-12-17T17:00", HCM, "no term's"),
                             ("2026-12-17T17:00+07:00", "UTC", "carries its own offset")):
        with pytest.raises(ValueError, match=says):
            parse_due(when, zone)


def test_a_time_is_shown_in_the_courses_zone():
    assert shown(datetime(2026, 12, 17, 10, 0), HCM) == "Thursday 17 December 2026, 17:00 (Asia/Ho_Chi_Minh, UTC+07:00)"
    assert shown(datetime(2026, 12, 17, 10, 0)) == "Thursday 17 December 2026, 10:00 UTC"
    config = Config()
    assert course_zone(config) == "UTC"
    config.NbGraderAPI.timezone = HCM
    assert course_zone(config) == HCM
    config.NbGraderAPI.timezone = "Asia/Hanoi"
    with pytest.raises(ValueError, match="no time zone"):
        course_zone(config)


def test_the_released_notebook_says_the_due_date_in_the_courses_zone(tmp_path, monkeypatch):
    from nbformat.v4 import new_markdown_cell, new_notebook
    from nbgrader.api import Gradebook
    from nboracle.grader.nbgrader_ext import DueDateCell, released_due_date

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ps1", duedate=datetime(2027, 3, 5, 17, 0))
    config = Config()
    config.NbGraderAPI.timezone = HCM
    nb, _ = DueDateCell(config=config).preprocess(new_notebook(cells=[new_markdown_cell("# ps1")]),
                                                  {"nbgrader": {"db_url": url, "assignment": "ps1"}})
    assert "**Due: Saturday 06 March 2027, 00:00 (Asia/Ho_Chi_Minh, UTC+07:00).**" in nb.cells[1].source
    assert nb.metadata.nbgrader_oracle == {"due_utc": "2027-03-05T17:00:00Z", "due_zone": HCM}
    (tmp_path / "ps1.ipynb").write_text(json.dumps(nb))
    assert released_due_date(str(tmp_path)) == ("2027-03-05T17:00:00Z", HCM)  # what the Assignment List gets
    nb.metadata.nbgrader_oracle.due_zone = "Not/AZone"  # a student's fetched copy says nonsense: no zone
    (tmp_path / "ps1.ipynb").write_text(json.dumps(nb))
    assert released_due_date(str(tmp_path)) == ("2027-03-05T17:00:00Z", None)


class FakeApi:
    timezone = HCM

    def __init__(self, gradebook):
        self.gradebook = gradebook

    def get_assignment(self, name):
        found = self.gradebook.find_assignment(name)
        return {"name": name, "duedate": found.duedate.isoformat() if found.duedate else None}


class FakeCoursedir:
    source_directory = "source"

    def __init__(self, root):
        self.root = root

    def format_path(self, *parts):
        return os.path.join(self.root, *parts)


class FakeHandler:
    """What nbgrader's AssignmentHandler.put uses of the handler."""

    def __init__(self, gradebook, root, body):
        self.gradebook, self.api, self.coursedir, self.body = gradebook, FakeApi(gradebook), FakeCoursedir(str(root)), body
        self.status, self.out = 200, []

    def get_json_body(self):
        return self.body

    def set_status(self, status):
        self.status = status

    def write(self, text):
        self.out.append(text)

    finish = write


def test_the_formgraders_due_date_dialog_takes_the_courses_zone_and_refuses_nonsense(tmp_path, monkeypatch):
    """The dialog sends "Asia/Ho_Chi_Minh" (nbgrader: a server error, "Saving..." for ever) or
    nothing (the course's zone, not UTC); a date or zone it cannot read is a 400 with one sentence,
    and the gradebook keeps what it had."""
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        for zone in (HCM, "", "+0700"):
            handler = FakeHandler(gradebook, tmp_path, {"duedate_notimezone": "2026-12-17T17:00", "duedate_timezone": zone})
            F._put(handler, "02_dot")
            assert handler.status == 200 and json.loads(handler.out[0])["duedate"] == "2026-12-17T10:00:00"
        assert (tmp_path / "source" / "02_dot").is_dir()
        for body, says in (({"duedate_notimezone": "2026-12-17T17:00", "duedate_timezone": "ICT"}, "no time zone"),
                           ({"duedate_notimezone": "17.12.2026", "duedate_timezone": HCM}, "no date and time")):
            handler = FakeHandler(gradebook, tmp_path, body)
            F._put(handler, "02_dot")
            assert handler.status == 400 and json.loads(handler.out[0])["message"].startswith("not saved: ")
            assert says in json.loads(handler.out[0])["message"]
            assert gradebook.find_assignment("02_dot").duedate == datetime(2026, 12, 17, 10, 0)
        handler = FakeHandler(gradebook, tmp_path, {"duedate_notimezone": None, "duedate_timezone": None})
        F._put(handler, "02_dot")  # the due date removed
        assert gradebook.find_assignment("02_dot").duedate is None


def test_the_manage_assignments_page_gets_the_courses_script_once():
    from nbgrader.server_extensions.formgrader import apihandlers, handlers

    page = '<script src="/x/formgrader/static/js/manage_assignments.js"></script>\n<body></body>'
    once = F.inject(page, HCM)
    assert once.index("manage_assignments.js") < once.index(F.MARK) and F.inject(once, HCM) == once
    assert 'var nboracle_course_zone = "Asia/Ho_Chi_Minh";' in once and "window.confirm(" in once
    assert 'var nboracle_course_zone = "";' in F.inject(page, "Asia/Hanoi")  # a typo: no zone claimed
    F.patch()
    F.patch()
    assert apihandlers.AssignmentHandler.put.nboracle and handlers.ManageAssignmentsHandler.render is F._render


@pytest.mark.skipif(shutil.which("node") is None, reason="the Lab extension's countdown runs in node")
def test_the_assignment_lists_countdown_is_exact_to_the_minute_in_the_courses_zone():
    """The student saw "(in 1 hour)" with 11 minutes left, and the due date in UTC only."""
    script = f"""
globalThis.window = {{}};
require({json.dumps(str(LAB_JS))});
var text = window._JUPYTERLAB["nboracle-due-dates"].dueText, due = Date.parse("2026-12-17T10:00:00Z");
console.log(JSON.stringify([
  text("2026-12-17T10:00:00Z", "{HCM}", due - 11 * 60000),
  text("2026-12-17T10:00:00Z", "{HCM}", due - 71 * 60000 - 30000),
  text("2026-12-17T10:00:00Z", "{HCM}", due - 20000),
  text("2026-12-17T10:00:00Z", "", due - 13 * 86400000),
  text("2026-12-17T10:00:00Z", "Not/AZone", due + 1000)]));
"""
    said = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    assert said == ["Due Thu 17 Dec 2026, 17:00 Asia/Ho_Chi_Minh (UTC+07:00) (in 11 min)",
                    "Due Thu 17 Dec 2026, 17:00 Asia/Ho_Chi_Minh (UTC+07:00) (in 1 h 11 min)",
                    "Due Thu 17 Dec 2026, 17:00 Asia/Ho_Chi_Minh (UTC+07:00) (in less than a minute)",
                    "Due Thu 17 Dec 2026, 10:00 UTC (in 13 days)",
                    "Due Thu 17 Dec 2026, 10:00 UTC (passed)"]


@pytest.mark.skipif(shutil.which("node") is None, reason="the Lab extension runs in node")
def test_the_assignment_list_shows_the_courses_own_words_and_date_format():
    """A course with a catalog released its phrases translated: the label uses them, the date in the language's
    own format with the same zone and offset; a phrase it does not have stays English."""
    words = {"Due {when}": "Hạn nộp {when}", "in {days} days": "còn {days} ngày", "passed": "đã qua"}
    script = f"""
globalThis.window = {{}};
require({json.dumps(str(LAB_JS))});
var text = window._JUPYTERLAB["nboracle-due-dates"].dueText, due = Date.parse("2026-12-17T10:00:00Z");
var words = {json.dumps(words)};
console.log(JSON.stringify([
  text("2026-12-17T10:00:00Z", "{HCM}", due - 13 * 86400000, words, "vi"),
  text("2026-12-17T10:00:00Z", "", due + 1000, words, "vi"),
  text("2026-12-17T10:00:00Z", "", due - 11 * 60000, words, "vi"),
  text("2026-12-17T10:00:00Z", "", due - 11 * 60000, null, "vi")]));
"""
    said = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    assert said[0].startswith("Hạn nộp ") and "17/12/2026" in said[0] and "17:00" in said[0], said
    assert said[0].endswith(f"{HCM} (UTC+07:00) (còn 13 ngày)"), said
    assert said[1].startswith("Hạn nộp ") and "10:00" in said[1] and said[1].endswith("UTC (đã qua)"), said
    assert said[2].endswith("UTC (in 11 min)"), "a phrase the catalog lacks stays English"
    assert said[3] == "Due Thu 17 Dec 2026, 10:00 UTC (in 11 min)", "no words: English, as before"


@pytest.mark.skipif(shutil.which("node") is None, reason="the Lab extension runs in node")
def test_nbgraders_own_words_are_shown_in_the_courses_language_with_their_spaces():
    """The panel's headings and buttons: a text that is, trimmed, one of the phrases the course translated
    reads in the course's words, its spaces kept; any other text (an assignment's name, a phrase of another
    length, a name an object has by inheritance) is left as nbgrader wrote it."""
    words = {"Released assignments": "Bài tập đã phát", "(view feedback)": "(xem feedback)", "Fetch": "Lấy về"}
    script = f"""
globalThis.window = {{}};
require({json.dumps(str(LAB_JS))});
var t = window._JUPYTERLAB["nboracle-due-dates"].translated, words = {json.dumps(words)};
console.log(JSON.stringify([t("\\n   Released assignments\\n  ", words), t(" (view feedback)", words), t("Fetch", words),
  t("Fetch Feedback", words), t("01_two_keys", words), t("toString", words), t("constructor", {{}}), t("Fetch", null)]));
"""
    said = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    assert said == ["\n   Bài tập đã phát\n  ", " (xem feedback)", "Lấy về", None, None, None, None, None], said
