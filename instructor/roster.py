"""The class list (roster CSV) and the grade export an LMS imports, for the hub's term (docs/JUPYTERHUB.md).

A roster is a CSV file with a header row::

    id,first_name,last_name,email,section,role
    ada.l,Ada,Lovelace,ada@example.org,,instructor
    s1234,Grace,Hopper,grace@example.org,A,student

``id`` is the login (a system account on the hub, nbgrader's student id); ``role`` is
``student`` (the default), ``ta`` or ``instructor``; ``section`` and ``email`` may be empty.
The file may come as a spreadsheet saves it: UTF-8 with or without a byte-order mark, UTF-16
('Unicode Text'), or Excel's Vietnamese code page (Windows-1258); commas, semicolons or tabs.
Every mistake (a bad id or e-mail, an id twice, an unknown role or column) is named by its line,
all at once, and nothing of such a roster is used.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import sys
import unicodedata
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

ROLES = ("student", "ta", "instructor")
COLUMNS = ("id", "first_name", "last_name", "email", "section", "role")
# the names registrars' and spreadsheets' exports give the same columns (compared lower-case, with
# spaces and hyphens read as '_')
ALIASES = {
    "id": ("username", "login", "user", "user_id", "student_id", "account"),
    "first_name": ("first", "given_name", "firstname", "forename"),
    "last_name": ("last", "surname", "family_name", "lastname"),
    "email": ("e_mail", "email_address", "mail"),
    "section": ("group", "class"),
    "role": ("kind",),
}
# a login every Linux tool accepts (useradd's default NAME_REGEX, lower case)
LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
# an address a mail server would take: one @, a dot in the domain, no spaces
EMAIL = re.compile(r"[^@\s,;<>]+@[^@\s,;<>]+\.[^@\s,;<>.]+")
RESERVED = {"root", "nobody", "grader-attention"}
SAVE_AS = ("save it from the spreadsheet as 'CSV UTF-8 (Comma delimited)' (Excel: File, Save As; "
           "LibreOffice: Text CSV, character set Unicode (UTF-8))")


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


def _text(path: Path) -> tuple[str, str]:
    """The roster's text and the encoding it was read in: UTF-8 with or without a byte-order mark,
    UTF-16 (Excel's 'Unicode Text'), else Windows-1258, the code page Excel writes Vietnamese CSV
    in (names come out in NFC: Windows-1258 writes a tone mark as a separate character)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise RosterError(f"{path}: cannot be read ({err.strerror})") from None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        candidates = ["utf-16"]
    elif raw[:2000].count(0) > len(raw[:2000]) // 4:  # UTF-16 without its mark
        candidates = ["utf-16-le" if raw[1:2] == b"\0" else "utf-16-be"]
    else:
        candidates = ["utf-8-sig", "cp1258"]
    for encoding in candidates:
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        if "\0" not in text:
            return unicodedata.normalize("NFC", text.lstrip("\ufeff")), encoding
    raise RosterError(f"{path}: its characters are in no encoding a spreadsheet writes: {SAVE_AS}")


def _column(name: str) -> str:
    key = re.sub(r"[\s-]+", "_", (name or "").strip().lower())
    return next((column for column, others in ALIASES.items() if key == column or key in others), key)


def read(path: Path) -> list[Person]:
    """The people of a roster CSV, in its order; :class:`RosterError` names every bad line at once
    (nothing of a roster with a mistake is used)."""
    text, encoding = _text(path)
    lines = text.splitlines()
    first = lines[0] if lines else ""
    # Excel writes ';' where the decimal mark is a comma, and tabs in 'Unicode Text'
    delimiter = max(",;\t", key=first.count) if any(d in first for d in ",;\t") else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [_column(h) for h in reader.fieldnames or []]
    if "id" not in header:
        raise RosterError(f"{path}: the first line must name the columns, with at least 'id' "
                          f"(found {', '.join(h for h in header if h) or 'nothing'}): {', '.join(COLUMNS)}")
    # a spreadsheet's empty columns have no name: they are left out
    unknown = [name for name, column in zip(reader.fieldnames, header, strict=True) if column and column not in COLUMNS]
    doubled = sorted({column for column in header if column and header.count(column) > 1})
    if unknown or doubled:
        raise RosterError(f"{path}: line 1: " + "; ".join(
            ([f"unknown column(s) {', '.join(map(repr, unknown))}"] if unknown else [])
            + ([f"column(s) {', '.join(doubled)} named twice"] if doubled else []))
            + f" (the columns are {', '.join(COLUMNS)}; only 'id' is required)")
    reader.fieldnames = header
    people, problems, seen = [], [], set()
    for line, row in enumerate(reader, start=2):
        if None in row:
            problems.append(f"line {line}: more values than the first line names columns "
                            f"(a {delimiter!r} inside a name? put the name in double quotes)")
        row = {k: (v or "").strip() for k, v in row.items() if k}
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
        if person.email and not EMAIL.fullmatch(person.email):
            problems.append(f"line {line}: e-mail {person.email!r} is not an address (name@domain)")
        seen.add(person.id)
        people.append(person)
    if problems:
        raise RosterError(f"{path}:\n  " + "\n  ".join(problems))
    if encoding == "cp1258":
        print(f"{path}: read as Windows-1258 (Excel's Vietnamese code page); to be sure of every name, "
              f"{SAVE_AS}", file=sys.stderr)
    return people


def require_grader(people: list[Person], path: Path) -> None:
    """A course's roster has someone who can grade: an instructor."""
    if not any(p.role == "instructor" for p in people):
        raise RosterError(f"{path}: nobody has the role 'instructor': a course without one has nobody who can "
                          "open its formgrader; give the lecturer's line the role instructor")


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
               "submitted", "timestamp", "late", "seconds_late", "extension_hours", "raw_score", "late_penalty", "score",
               "max_score", "needs_review", "review_reasons")
LAYOUTS = ("long", "canvas", "moodle")
# what `submitted` says of a student with no graded submission: handed in to the exchange and not yet
# collected and autograded, or nothing handed in
NOT_COLLECTED, NOT_SUBMITTED = "not collected", "no"


def lms_rows(grades_csv: Path, people: list[Person], uncollected: frozenset[tuple[str, str]] = frozenset()
             ) -> list[dict[str, str]]:
    """One row per student of the roster and assignment, from the course's grades.csv
    (``nbgrader export``: every gradebook student, submitters or not), in roster order.
    ``uncollected``: (student, assignment) pairs handed in but not yet in the gradebook."""
    with open(grades_csv, newline="", encoding="utf-8") as handle:
        graded = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
    assignments = list(dict.fromkeys(a for _, a in graded))
    rows = []
    for assignment in assignments:
        for person in students(people):
            found = graded.get((person.id, assignment), {})
            # nbgrader's own CSV has no "submitted": a timestamp is a submission
            submitted = found.get("submitted") or ("yes" if found.get("timestamp") else NOT_SUBMITTED)
            if submitted != "yes" and (person.id, assignment) in uncollected:
                submitted = NOT_COLLECTED
            rows.append({
                "student_id": person.id, "first_name": person.first_name, "last_name": person.last_name,
                "email": person.email, "section": person.section, "assignment": assignment,
                "duedate": found.get("duedate", ""), "submitted": submitted,
                "timestamp": found.get("timestamp", ""), "late": found.get("late", ""),
                "seconds_late": found.get("seconds_late", ""), "extension_hours": found.get("extension_hours", ""),
                "raw_score": found.get("raw_score", "0.0"),
                "late_penalty": found.get("late_submission_penalty", "0.0"), "score": found.get("score", "0.0"),
                "max_score": found.get("max_score") or _max_of(graded, assignment),
                "needs_review": found.get("needs_review", ""), "review_reasons": found.get("review_reasons", "")})
    return rows


def _max_of(graded: dict, assignment: str) -> str:
    return next((r["max_score"] for (_, a), r in graded.items() if a == assignment and r["max_score"]), "")


def _due_passed(duedate: str, now: datetime) -> bool:
    """nbgrader's CSV writes the due date in UTC ('2026-03-02 12:00:00' or with ' UTC'); none: never passed."""
    text = duedate.replace(" UTC", "").strip()
    if not text:
        return False
    try:
        due = datetime.fromisoformat(text)
    except ValueError:
        return False
    return (due if due.tzinfo else due.replace(tzinfo=timezone.utc)) <= now


def gradebook_score(row: dict[str, str], now: datetime | None = None) -> str:
    """The cell an LMS gradebook gets: the score after any late penalty for a graded submission; 0
    when nothing was handed in and the due date has passed; empty (no grade yet, which an LMS
    import leaves alone) while a submission waits to be collected or the due date is still ahead."""
    if row["submitted"] == "yes":
        return row["score"]
    if row["submitted"] == NOT_SUBMITTED and _due_passed(row["duedate"], now or datetime.now(timezone.utc)):
        return "0"
    return ""


def write_lms(rows: list[dict[str, str]], to: Path, layout: str = "long", now: datetime | None = None) -> Path:
    """The file in UTF-8 with a byte-order mark (Excel then reads "Nguyễn" as written; Canvas and
    Moodle read it too). ``long``: :data:`LMS_COLUMNS`, one row per student and assignment.
    ``canvas``: one row per student, a column per assignment (Canvas's gradebook import: Student,
    ID, SIS User ID, SIS Login ID, Section, then each assignment, and a first row "Points
    Possible"). ``moodle``: one row per student (Moodle's grade import maps users by 'Email
    address' or 'Username' and each further column to a grade item). Both pivots hold
    :func:`gradebook_score`: not submitted after the due date is 0, not yet collected is empty."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    with open(to, "w", newline="", encoding="utf-8-sig") as handle:
        if layout == "long":
            writer = csv.DictWriter(handle, fieldnames=LMS_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
            return to
        assignments = list(dict.fromkeys(r["assignment"] for r in rows))
        by_student: dict[str, dict[str, dict]] = {}
        for row in rows:
            by_student.setdefault(row["student_id"], {})[row["assignment"]] = row
        writer = csv.writer(handle)
        if layout == "canvas":
            writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments])
            maxima = {r["assignment"]: r["max_score"] for r in rows}
            writer.writerow(["Points Possible", "", "", "", "", *(maxima[a] for a in assignments)])
        else:
            writer.writerow(["First name", "Last name", "Username", "Email address", *assignments])
        for student, mine in by_student.items():
            first = next(iter(mine.values()))
            scores = [gradebook_score(mine[a], now) if a in mine else "" for a in assignments]
            if layout == "canvas":
                writer.writerow([f"{first['last_name']}, {first['first_name']}".strip(", "), "", student,
                                 first["email"], first["section"], *scores])
            else:
                writer.writerow([first["first_name"], first["last_name"], student, first["email"], *scores])
    return to
