"""The course's changes to nbgrader's formgrader: due dates in the course's zone, errors said, Unrelease asked.

A Jupyter server extension for the formgrader's server (the hub's formgrader services enable it
in their ``jupyter_server_config.json``; ``jpserver_extensions: {"nboracle.grader.formgrader": true}``).
nbgrader 0.9.6's Manage Assignments page

* sends the due date with whatever was typed as its zone to ``nbgrader.utils.parse_utc``, which
  cannot read an IANA name (``Asia/Ho_Chi_Minh``: a server error) and takes an abbreviation it
  does not know (``ICT``) as UTC without a word: here the date is read by
  :func:`nboracle.grader.coursetime.parse_due` (IANA names, offsets, empty: the course's zone,
  ``c.NbGraderAPI.timezone``), and anything else is refused with a 400 and one sentence;
* leaves its Edit dialog on "Saving..." for ever when the save fails, and unreleases an assignment
  at the second click of the Release column, without a question: ``manage_assignments.js``
  (beside this package's Lab extension) is added to the page after nbgrader's own script, and
  gives the save an error path shown in the dialog, the zone field the course's zone, and
  Unrelease a question first.

Both are patched on nbgrader's handler classes (not on its routes), so the order in which the
server loads nbgrader's extension and this one does not matter.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .coursetime import parse_due, zone_name

SCRIPT = Path(__file__).resolve().parents[1] / "jupyter" / "formgrader" / "manage_assignments.js"
MARK = "nboracle-formgrader"  # the injected script's id: injected once


def _jupyter_server_extension_points():
    return [{"module": "nboracle.grader.formgrader"}]


def _put(self, assignment_id):
    """nbgrader's AssignmentHandler.put, the due date read in the course's zone, a bad one refused."""
    data = self.get_json_body() or {}
    course_zone = self.api.timezone
    try:
        due = parse_due(data.get("duedate_notimezone"), data.get("duedate_timezone"), course_zone)
    except ValueError as err:
        self.set_status(400)
        self.finish(json.dumps({"message": f"not saved: {err}"}))
        return
    assignment_id = assignment_id.strip()
    self.gradebook.update_or_create_assignment(assignment_id, duedate=due)
    source = os.path.abspath(self.coursedir.format_path(self.coursedir.source_directory, ".", assignment_id))
    os.makedirs(source, exist_ok=True)
    self.write(json.dumps(self.api.get_assignment(assignment_id)))


def page_script(course_zone: str) -> str:
    """The ``<script>`` the Manage Assignments page gets after nbgrader's own."""
    try:
        name = zone_name(course_zone)
    except ValueError:  # a typo in the course's config: the page says so (nbgrader itself shows UTC then)
        name = ""
    return (f'<script id="{MARK}">\nvar nboracle_course_zone = {json.dumps(name)};\n'
            f'{SCRIPT.read_text(encoding="utf-8")}\n</script>\n')


def inject(html: str, course_zone: str) -> str:
    """The page with :func:`page_script` after nbgrader's ``manage_assignments.js``."""
    anchor = "/formgrader/static/js/manage_assignments.js\"></script>"
    if MARK in html or anchor not in html:
        return html
    at = html.index(anchor) + len(anchor)
    return html[:at] + "\n" + page_script(course_zone) + html[at:]


def _render(self, name, **ns):
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    html = BaseHandler.render(self, name, **ns)
    return inject(html, self.api.timezone) if name == "manage_assignments.tpl" else html


def patch() -> None:
    """nbgrader's formgrader handlers with the course's changes (idempotent)."""
    from nbgrader.server_extensions.formgrader import apihandlers, base, handlers
    from tornado import web

    if getattr(apihandlers.AssignmentHandler.put, "nboracle", False):
        return
    put = web.authenticated(base.check_xsrf(base.check_notebook_dir(_put)))
    put.nboracle = True
    apihandlers.AssignmentHandler.put = put
    handlers.ManageAssignmentsHandler.render = _render


def _load_jupyter_server_extension(serverapp) -> None:
    patch()
    serverapp.log.info("nboracle.grader.formgrader: due dates in the course's time zone, Unrelease asks first")


load_jupyter_server_extension = _load_jupyter_server_extension  # the older name some servers call
