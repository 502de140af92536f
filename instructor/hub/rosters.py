"""The roster during the term: roster import, drop and list (accounts, gradebook, running hub)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from instructor import roster as R

from .accounts import _accounts, _save_roster
from .layout import Course, Layout, _state_folders
from .server import _hub_running, _import_students, _seed_lab, hub_api, prepare


def roster_import(layout: Layout, path: Path, course: Course | None = None) -> int:
    """Add or update every person of ``path`` on a course's roster (no one is dropped): accounts,
    first passwords, gradebook students; on a running hub, its users and groups through the REST
    API (no restart)."""
    course = course or layout.main_course()
    _state_folders(layout)
    new_people = R.read(path)
    shared = shared_folders(layout, course, new_people)
    if shared:
        sys.exit("nobody imported: " + "; ".join(shared) + ". " + SHARED_FOLDERS_HELP)
    before = {p.id: p for p in layout.people(course)}
    people = R.merge(list(before.values()), new_people)
    _save_roster(layout, people, course)
    if not (course.root / "nbgrader_config.py").exists():
        prepare(layout)
    else:
        fresh = _accounts(layout, new_people)
        _seed_lab(layout, [p.id for p in new_people])
        _import_students(layout, R.students(new_people), course)
        if fresh:
            print(f"{len(fresh)} new account(s): {', '.join(fresh)}; first passwords in {layout.passwords} (root only)")
    url = _hub_running(layout)
    if url:
        admins = set(layout.admins())  # the hub's administrators only: no course's instructor
        for person in new_people:
            hub_api(layout, url, "POST", f"/users/{person.id}")
            hub_api(layout, url, "PATCH", f"/users/{person.id}", {"admin": person.id in admins})
            group, other = ((course.graders_group, course.students_group) if person.role != "student"
                            else (course.students_group, course.graders_group))
            hub_api(layout, url, "POST", f"/groups/{group}/users", {"users": [person.id]})
            hub_api(layout, url, "DELETE", f"/groups/{other}/users", {"users": [person.id]})
        print(f"the running hub knows them now ({url}); no server was restarted")
    added = [p.id for p in new_people if p.id not in before]
    print(f"roster {course.roster}: {len(people)} people; added {len(added)}, updated {len(new_people) - len(added)}")
    return 0


def roster_drop(layout: Layout, ids: list[str], course: Course | None = None) -> int:
    """Take ``ids`` off a course's roster. Someone on no other course's roster loses their hub
    user (their server stops) and their account is locked; someone still in another course only
    leaves this course's groups. Homes, submissions and grades stay (the export lists the
    roster's students only)."""
    course = course or layout.main_course()
    people = layout.people(course)
    unknown = sorted(set(ids) - {p.id for p in people})
    if unknown:
        sys.exit(f"not on the roster {course.roster}: {', '.join(unknown)}")
    _save_roster(layout, [p for p in people if p.id not in ids], course)
    elsewhere = {p.id for p in layout.everyone()}
    url = _hub_running(layout)
    for name in ids:
        if name in elsewhere:
            if url:
                for group in (course.graders_group, course.students_group):
                    hub_api(layout, url, "DELETE", f"/groups/{group}/users", {"users": [name]})
            continue
        if url:
            hub_api(layout, url, "DELETE", f"/users/{name}")
        subprocess.run(["usermod", "--lock", name], check=False, capture_output=True)
    kept = sorted(set(ids) & elsewhere)
    print(f"dropped {', '.join(ids)} from {course.roster}" + (" and the running hub" if url else "")
          + (f"; {', '.join(kept)} stay(s) on the hub for another course" if kept else ""))
    return 0


def roster_list(layout: Layout, course: Course | None = None) -> int:
    for p in layout.people(course):
        print(f"{p.id:16s} {p.role:10s} {p.section:6s} {p.last_name}, {p.first_name} <{p.email}>")
    return 0


def assignment_names(course: Course) -> set[str]:
    """The assignments a course can release: its course root's source/ folders (its source's before)."""
    folder = course.root / "source" if (course.root / "source").is_dir() else course.source
    try:
        return {child.name for child in folder.iterdir() if child.is_dir() and not child.name.startswith(".")}
    except OSError:
        return set()


def shared_folders(layout: Layout, course: Course, people: list[R.Person]) -> list[str]:
    """Students of ``people`` who are also students of another course that has an assignment of
    the same name, one line per other course. nbgrader fetches every course's assignment into
    the student's ``~/<assignment>/``: the Assignment List would show one course's copy as the
    other's, and its Submit would hand it in to the wrong course."""
    mine, students = assignment_names(course), {p.id for p in R.students(people)}
    lines = []
    for other in layout.courses():
        if other.id == course.id:
            continue
        common = sorted(mine & assignment_names(other))
        both = sorted(students & {p.id for p in R.students(layout.people(other))})
        if common and both:
            lines.append(f"{', '.join(both)}: a student of {course.id} and of {other.id}, which both have "
                         + ", ".join(common[:3]) + (f" and {len(common) - 3} more" if len(common) > 3 else ""))
    return lines


SHARED_FOLDERS_HELP = ("nbgrader fetches each course's assignment into the student's ~/<assignment>/, so the "
                       "Assignment List would hand one course's work in to the other: keep each student on one of "
                       "these rosters, or give the second course assignments of other names (--source)")
