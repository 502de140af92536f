"""Other courses on the same hub (course add, list) and the hub's administrators (admin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from instructor import roster as R
from instructor.repository import REPO

from .accounts import _accounts, _hide_from_students, _save_roster
from .layout import (
    COURSE_ID_RULE,
    ENGLISH,
    ROLE_NAMES,
    Course,
    Layout,
    _state_folders,
    config_language,
    valid_course_id,
)
from .rosters import SHARED_FOLDERS_HELP, shared_folders
from .server import _course_root, _hub_running, _import_students, _seed_lab


def course_add(layout: Layout, course_id: str, roster: Path, source: Path | None = None,
               config: Path | None = None) -> int:
    """A second (third ...) course on this hub: its roster, service account ``grader-<id>``,
    course root from ``source`` (default: this course's source/) and ``config`` (default: the
    nbgrader_config.py beside that source/, else this course's), gradebook students; its
    formgrader service and groups come with the hub's next start. The config's language
    (``c.MessageCatalog.language``) is recorded: the hub gives the course's students' servers
    ``COURSE_LANGUAGE`` from it (:func:`.layout.server_language`); one without a catalog is refused."""
    _state_folders(layout)
    known = layout.courses()
    if not valid_course_id(course_id):
        sys.exit(f"course id {course_id!r}: {COURSE_ID_RULE}")
    if any(c.id == course_id for c in known):
        sys.exit(f"the hub already has the course {course_id!r}")
    source = Path(source or REPO / "source").resolve()
    if not source.is_dir() or not any(child.is_dir() for child in source.iterdir()):
        sys.exit(f"{source} is no nbgrader source folder (one subfolder per assignment)")
    if config is None:
        beside = source.parent / "nbgrader_config.py"
        config = beside if beside.is_file() else REPO / "nbgrader_config.py"
    config = Path(config).resolve()
    if not config.is_file():
        sys.exit(f"no nbgrader config {config}")
    language = config_language(config)
    people = R.read(roster)
    R.require_grader(people, roster)
    grader = f"grader-{course_id}"
    if grader in {p.id for p in [*layout.everyone(), *people]}:
        sys.exit(f"{grader} is a person's id on a roster: it names the course's service account")
    course = Course(course_id, grader, f"formgrader-{course_id}", layout.state / "courses" / course_id / "roster.csv",
                    layout.home / grader / "course", source, config, language)
    shared = shared_folders(layout, course, people)
    if shared:
        sys.exit("not added: " + "; ".join(shared) + ". " + SHARED_FOLDERS_HELP)
    if not layout.roster.exists():
        _save_roster(layout, layout.people())  # the first course's roster is the term's from now on
    record = json.loads(layout.courses_record.read_text()) if layout.courses_record.exists() else []
    _save_roster(layout, people, course)
    layout.courses_record.write_text(json.dumps(
        [*record, {"id": course_id, "source": str(source), "config": str(config),
                      "language": language}], indent=1))
    os.chmod(layout.courses_record, 0o600)
    # its accounts, course root and gradebook students now; the hub's and everyone's configs with the
    # next start (a running hub's servers keep theirs until then)
    new = _accounts(layout, layout.everyone())
    _hide_from_students(layout)  # its service account reads the references too
    _course_root(course)
    _seed_lab(layout, [p.id for p in people])
    _import_students(layout, R.students(people), course)
    if new:
        print(f"{len(new)} new account(s): {', '.join(new)}; first passwords in {layout.passwords} (root only)")
    counts = ", ".join(f"{sum(p.role == role for p in people)} {ROLE_NAMES[role]}(s)" for role in R.ROLES)
    print(f"course {course_id}: roster {course.roster} ({counts}), course root {course.root} "
          f"(config from {config}), formgrader /services/{course.service}/")
    if language != ENGLISH:
        print(f"its language: {language} (c.MessageCatalog.language): its feedback, and from the hub's next start its "
              f"students' servers (COURSE_LANGUAGE={language}: the visible tests, Validate), unless a student's "
              "other courses are in another language (then English; docs/JUPYTERHUB.md)")
    if _hub_running(layout):
        print("the running hub starts its formgrader and groups when it starts again: make hub-stop, then "
              "make hub (every server stops: do it between classes; nobody's work is lost)")
    return 0


def admin(layout: Layout, action: str, names: list[str]) -> int:
    """The hub's administrators (JupyterHub's admin: every user's server, the admin page): a role
    of its own, given by name, not a course's instructor. ``add`` makes the account (a first
    password in hub/passwords.csv); the role counts from the hub's next start (only an admin may
    make another on a running hub, and the hub's own services are none)."""
    _state_folders(layout)
    admins = layout.admins()
    if action == "list":
        print("\n".join(admins) or "no hub administrator (the root account runs python -m instructor.hub)")
        return 0
    bad = [n for n in names if not R.LOGIN.fullmatch(n) or n in R.RESERVED or n.startswith("grader-")]
    if bad or not names:
        sys.exit(f"admin {action} ID...: a login name each (lower-case letters, digits, '_', '.', '-'); not {bad}")
    admins = sorted(set(admins) | set(names)) if action == "add" else [a for a in admins if a not in names]
    layout.admins_record.write_text(json.dumps(admins))
    os.chmod(layout.admins_record, 0o600)
    if action == "add":
        new = _accounts(layout, [p for p in layout.everyone() if p.id in names])
        if new:
            print(f"{len(new)} new account(s): {', '.join(new)}; first passwords in {layout.passwords} (root only)")
    else:
        on_rosters = {p.id for p in layout.everyone()}
        for name in names:
            if name not in on_rosters:
                subprocess.run(["usermod", "--lock", name], check=False, capture_output=True)
    print(f"hub administrators: {', '.join(admins) or 'none'}"
          + ("; the running hub takes this when it starts again (make hub-stop, then make hub)"
             if _hub_running(layout) else ""))
    return 0


def course_list(layout: Layout) -> int:
    for course in layout.courses():
        people = layout.people(course)
        print(f"{course.id:28s} /services/{course.service}/  {len(R.students(people))} student(s)  "
              f"language {course.language}  root {course.root}  source {course.source}")
    return 0
