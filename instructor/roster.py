"""The class list (roster CSV) and the grade export an LMS imports, for the hub's term (docs/JUPYTERHUB.md).

A roster is a CSV file with a header row::

    id,first_name,last_name,email,section,role
    ada.l,Ada,Lovelace,ada@example.org,,instructor
    s1234,Grace,Hopper,grace@example.org,A,student

``id`` is the login (a system account on the hub, nbgrader's student id); ``role`` is
``student`` (the default), ``ta`` or ``instructor``; ``section`` and ``email`` may be empty.
"""

from __future__ import annotations

import csv
import re
from dataclasses import asdict, dataclass
from pathlib import Path

ROLES = ("student", "ta", "instructor")
COLUMNS = ("id", "first_name", "last_name", "email", "section", "role")
# a login every Linux tool accepts (useradd's default NAME_REGEX, lower case)
LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
RESERVED = {"root", "nobody", "grader-attention"}


class RosterError(ValueError):
    """A roster that cannot be used, with the line and what to change."""


@dataclass(frozen=True)
class Person:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    section: str = ""
    role: str = "student"


def read(path: Path) -> list[Person]:
    """The people of a roster CSV, in its order; :class:`RosterError` names each bad line."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [(h or "").strip().lower() for h in reader.fieldnames or []]
        if "id" not in header:
            raise RosterError(f"{path}: the first line must name the columns, with at least 'id' "
                              f"(found {', '.join(header) or 'nothing'}): {', '.join(COLUMNS)}")
        people, problems, seen = [], [], set()
        for line, row in enumerate(reader, start=2):
            row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
            if not any(row.values()):
                continue
            person = Person(**{k: row.get(k, "") for k in COLUMNS if k != "role"},
                            role=(row.get("role") or "student").lower())
            if not LOGIN.fullmatch(person.id) or person.id in RESERVED:
                problems.append(f"line {line}: id {person.id!r} is not a login name (lower-case letters, "
                                "digits, '.', '_' or '-', at most 32, starting with a letter)")
            elif person.id in seen:
                problems.append(f"line {line}: id {person.id!r} appears twice")
            if person.role not in ROLES:
                problems.append(f"line {line}: role {person.role!r} is not one of {', '.join(ROLES)}")
            seen.add(person.id)
            people.append(person)
    if problems:
        raise RosterError(f"{path}:\n  " + "\n  ".join(problems))
    return people


def write(people: list[Person], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(p) for p in people)
    return path


def merge(current: list[Person], new: list[Person]) -> list[Person]:
    """``current`` with every person of ``new`` added or updated (no one is dropped)."""
    by_id = {p.id: p for p in current}
    by_id.update({p.id: p for p in new})
    return list(by_id.values())


def students(people: list[Person]) -> list[Person]:
    return [p for p in people if p.role == "student"]


# ---------------------------------------------------------------- the export an LMS imports

LMS_COLUMNS = ("student_id", "first_name", "last_name", "email", "section", "assignment", "duedate",
               "submitted", "timestamp", "late", "seconds_late", "raw_score", "late_penalty", "score",
               "max_score", "needs_review", "review_reasons")


def lms_rows(grades_csv: Path, people: list[Person]) -> list[dict[str, str]]:
    """One row per student of the roster and assignment, from the course's grades.csv
    (``nbgrader export``: every gradebook student, submitters or not), in roster order."""
    with open(grades_csv, newline="") as handle:
        graded = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
    assignments = list(dict.fromkeys(a for _, a in graded))
    rows = []
    for assignment in assignments:
        for person in students(people):
            found = graded.get((person.id, assignment), {})
            rows.append({
                "student_id": person.id, "first_name": person.first_name, "last_name": person.last_name,
                "email": person.email, "section": person.section, "assignment": assignment,
                "duedate": found.get("duedate", ""),
                # nbgrader's own CSV has no "submitted": a timestamp is a submission
                "submitted": found.get("submitted") or ("yes" if found.get("timestamp") else "no"),
                "timestamp": found.get("timestamp", ""), "late": found.get("late", ""),
                "seconds_late": found.get("seconds_late", ""), "raw_score": found.get("raw_score", "0.0"),
                "late_penalty": found.get("late_submission_penalty", "0.0"), "score": found.get("score", "0.0"),
                "max_score": found.get("max_score") or _max_of(graded, assignment),
                "needs_review": found.get("needs_review", ""), "review_reasons": found.get("review_reasons", "")})
    return rows


def _max_of(graded: dict, assignment: str) -> str:
    return next((r["max_score"] for (_, a), r in graded.items() if a == assignment and r["max_score"]), "")


def write_lms(rows: list[dict[str, str]], to: Path, layout: str = "long") -> Path:
    """``long``: :data:`LMS_COLUMNS`, one row per student and assignment. ``canvas``: one row
    per student, a column per assignment (Canvas's gradebook import: Student, ID, SIS User ID,
    SIS Login ID, Section, then ``<assignment>`` with the score after any late penalty, and a
    first row "Points Possible")."""
    with open(to, "w", newline="", encoding="utf-8") as handle:
        if layout == "long":
            writer = csv.DictWriter(handle, fieldnames=LMS_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
            return to
        assignments = list(dict.fromkeys(r["assignment"] for r in rows))
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments])
        maxima = {r["assignment"]: r["max_score"] for r in rows}
        writer.writerow(["Points Possible", "", "", "", "", *(maxima[a] for a in assignments)])
        by_student: dict[str, dict[str, dict]] = {}
        for row in rows:
            by_student.setdefault(row["student_id"], {})[row["assignment"]] = row
        for student, mine in by_student.items():
            first = next(iter(mine.values()))
            writer.writerow([f"{first['last_name']}, {first['first_name']}".strip(", "), "", student,
                             first["email"], first["section"], *(mine[a]["score"] for a in assignments)])
    return to
