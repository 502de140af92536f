"""nbgrader's file exchange as the server sees it: who handed a submission in, and when, from the filesystem.

``nbgrader submit`` runs in the student's own server, as the student: the name of the folder it
writes to ``inbound/`` (``<student>+<assignment>+<timestamp>+<random>``) and its
``timestamp.txt`` are whatever that process says (``--student=<classmate>``,
``--Exchange.timezone=Etc/GMT+12``, a patched nbgrader). Two things it cannot write:

* the **owner** of the files it made (the kernel records the account that made them; nobody but
  root gives a file away), so a submission belongs to the account that owns its folder and every
  file in it, and a folder in another student's name is refused;
* the **change time** of each file (``st_ctime``: the kernel stamps it with the server's clock
  on every write, ``utime`` sets it to *now*, never back), so a submission arrived at the latest
  change of anything in it. After a restore every file's change time is the restore's: the backup
  keeps each submission's arrival time in :data:`ARRIVALS` at the exchange's root (root's file),
  which counts for a submission that has not changed since.

:class:`TrustedExchangeCollect` (``c.ExchangeFactory.collect``) collects by these, writes the
arrival time into the collected ``timestamp.txt`` (what autograde measures lateness by), refuses
loudly what another account handed in, and never replaces a graded submission with a later one
silently: the later one is kept beside it and the lecturer told how to take it.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import shutil
import stat
from collections import defaultdict

from nbgrader.exchange.default.collect import ExchangeCollect
from traitlets import Bool

ARRIVALS = "arrivals.json"  # {"restored_at": epoch seconds, "arrivals": {key: epoch seconds}}
STAMP = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's own timestamp format (parse_utc reads it)
REFUSED = "refused"  # in the course root: a copy of each refused submission, for the lecturer
RESUBMITTED = "resubmitted"  # in the course root: later submissions kept beside graded ones


def inbound_parts(name: str) -> tuple[str, str] | None:
    """(student, assignment) an inbound folder's name ``<student>+<assignment>+<time>+<random>`` says;
    None for another name. nbgrader refuses a '+' in an id; the time may hold one (a time zone)."""
    parts = name.split("+", 2)
    return (parts[0], parts[1]) if len(parts) == 3 else None


def account_of(uid: int) -> str | None:
    """The login of the account ``uid`` (the hub's user name for the hub's system accounts)."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def changed_at(folder: str) -> float:
    """The latest change time (``st_ctime``, the server's clock) of ``folder`` or anything in it."""
    latest = os.lstat(folder).st_ctime
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            latest = max(latest, os.lstat(os.path.join(parent, name)).st_ctime)
    return latest


def inbound_key(course_id: str, name: str) -> str:
    return f"{course_id}/inbound/{name}"


def cache_key(account: str, course_id: str, name: str) -> str:
    return f"cache/{account}/{course_id}/{name}"


def arrival_record(root: str) -> dict:
    """The exchange's arrival record, when root wrote it and nobody else can change it; else empty."""
    path = os.path.join(root, ARRIVALS)
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
            return {}
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def arrived_at(folder: str, key: str, record: dict) -> float:
    """When the submission in ``folder`` arrived (epoch seconds): its latest change, or the time the
    arrival record keeps for ``key`` when nothing in it changed since the restore that wrote it."""
    changed = changed_at(folder)
    kept = (record.get("arrivals") or {}).get(key)
    restored = record.get("restored_at")
    if isinstance(kept, (int, float)) and isinstance(restored, (int, float)) and changed <= restored:
        return float(kept)
    return changed


def utc(seconds: float) -> datetime.datetime:
    """Epoch seconds as naive UTC, the way nbgrader's ``parse_utc`` gives timestamps."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).replace(tzinfo=None)


def owner_problem(folder: str, student: str) -> str | None:
    """Why ``folder`` is not ``student``'s own submission, or None: it must be a real folder owned by
    the account ``student``, holding only folders and files of that account (no links)."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    owner = account_of(info.st_uid) or f"uid {info.st_uid}"
    if owner != student:
        return f"the account {owner} handed it in, in the name of {student}"
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            entry = os.lstat(os.path.join(parent, name))
            if stat.S_ISLNK(entry.st_mode):
                return f"it holds a link ({os.path.relpath(os.path.join(parent, name), folder)})"
            if entry.st_uid != info.st_uid:
                other = account_of(entry.st_uid) or f"uid {entry.st_uid}"
                return f"it holds a file of the account {other} ({os.path.relpath(os.path.join(parent, name), folder)})"
    return None


def _secret(folder: str) -> str | None:
    try:
        with open(os.path.join(folder, "submission_secret.txt"), encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


class TrustedExchangeCollect(ExchangeCollect):
    """``nbgrader collect`` believing only what the server recorded (see the module's docstring).

    Each student's latest submission by arrival time is collected; its ``timestamp.txt`` in
    ``submitted/`` is the arrival time (the student's own is kept as ``timestamp-claimed.txt``).
    A submission another account handed in is not collected: the student's own latest one is, a
    copy goes to ``refused/<account>/<assignment>/`` in the course root, and the collect fails
    with a report the first time it sees it (the formgrader's Collect shows the error), then
    warns. A submission that arrived after the collected one was graded goes to
    ``resubmitted/<student>/<assignment>/<time>/`` and the graded one stays; the report says the
    command that takes it (``replace_graded``).
    """

    replace_graded = Bool(False, help=(
        "Let a later submission replace one already graded (the graded one is then kept in "
        "resubmitted/<student>/<assignment>/); the default keeps the graded one and stores the later "
        "one there.")).tag(config=True)

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        student_id = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student_id}+{self.coursedir.assignment_id}+*")
        record = arrival_record(self.root)
        self.refused: list[tuple[str, str, str, str]] = []  # (folder name, student named, why, copy kept)
        self.kept_aside: list[str] = []
        by_student = defaultdict(list)
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            student, _ = inbound_parts(name)  # the glob's pattern: never None
            problem = owner_problem(path, student)
            if problem:
                self.refused.append((name, student, problem, self._keep_refused(path, name)))
                continue
            arrived = utc(arrived_at(path, inbound_key(self.coursedir.course_id, name), record))
            by_student[student].append({"username": student, "filename": name, "timestamp": arrived})
        self.duedate = self._duedate()
        self.src_records = []
        for records in by_student.values():
            records = self._sort_by_timestamp(records)
            if self.before_duedate and self.duedate is not None:
                records = [r for r in records if r["timestamp"] <= self.duedate] or records
            self.src_records.append(records[0])

    def _duedate(self):
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                return gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None

    def _course_folder(self, *parts: str) -> str:
        return os.path.join(self.coursedir.root, *parts)

    def _keep_refused(self, path: str, name: str) -> str:
        """A copy of a refused submission for the lecturer: its folder, "" when it was made before."""
        owner = account_of(os.lstat(path).st_uid) or str(os.lstat(path).st_uid)
        copy = os.path.abspath(self._course_folder(REFUSED, owner, self.coursedir.assignment_id, name))
        if os.path.exists(copy):
            return ""
        try:
            shutil.copytree(path, copy, symlinks=True)
        except OSError as err:
            self.log.warning("could not keep a copy of %s: %s", path, err)
        return copy

    def _graded(self, student: str) -> bool:
        from nbgrader.api import Gradebook, MissingEntry

        autograded = self.coursedir.format_path(self.coursedir.autograded_directory, student,
                                                self.coursedir.assignment_id)
        if os.path.isdir(autograded):
            return True
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                gb.find_submission(self.coursedir.assignment_id, student)
                return True
            except MissingEntry:
                return False

    def _place(self, src: str, dest: str, arrived: datetime.datetime) -> None:
        self.do_copy(src, dest)
        claimed = os.path.join(dest, "timestamp.txt")
        if os.path.exists(claimed):
            os.replace(claimed, os.path.join(dest, "timestamp-claimed.txt"))
        with open(claimed, "w") as handle:
            handle.write(arrived.strftime(STAMP))

    def copy_files(self):
        assignment = self.coursedir.assignment_id
        if not self.src_records:
            self.log.warning(f"No submissions of '{assignment}' for course '{self.coursedir.course_id}' to collect")
        for rec in self.src_records:
            student, arrived = rec["username"], rec["timestamp"]
            src = os.path.join(self.inbound_path, rec["filename"])
            dest = self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if not os.path.isdir(dest):
                self.log.info(f"Collecting submission: {student} {assignment} (arrived {arrived:%Y-%m-%d %H:%M:%S} UTC)")
                self._place(src, dest, arrived)
                continue
            existing = self.coursedir.get_existing_timestamp(dest)
            if _secret(dest) is not None and _secret(dest) == _secret(src) or (existing and arrived <= existing):
                self.log.info(f"No newer submission to collect: {student} {assignment}")
                continue
            graded = self._graded(student)
            if graded and not self.replace_graded:
                aside = os.path.abspath(self._course_folder(RESUBMITTED, student, assignment,
                                                            arrived.strftime("%Y%m%dT%H%M%SZ")))
                if not os.path.isdir(aside):
                    self._place(src, aside, arrived)
                    self.kept_aside.append(self._aside_message(student, arrived, existing, aside))
                continue
            if not graded and not self.update:
                self.log.info(f"Submission already exists, use --update to update: {student} {assignment}")
                continue
            if graded:  # replace_graded: the graded one is kept where later ones wait
                old = self._course_folder(RESUBMITTED, student, assignment,
                                          f"{existing:%Y%m%dT%H%M%SZ}-graded" if existing else "graded")
                if not os.path.exists(old):
                    shutil.copytree(dest, old)
                self.log.warning(f"{student} {assignment}: the graded submission replaced by the one that arrived "
                                 f"{arrived:%Y-%m-%d %H:%M:%S} UTC (the graded one kept in {old}); autograde it again")
            else:
                self.log.info(f"Updating submission: {student} {assignment} (arrived {arrived:%Y-%m-%d %H:%M:%S} UTC)")
            shutil.rmtree(dest)
            self._place(src, dest, arrived)
        self._report()

    def _aside_message(self, student, arrived, existing, aside) -> str:
        assignment = self.coursedir.assignment_id
        graded = f"the one that arrived {existing:%Y-%m-%d %H:%M:%S} UTC" if existing else "the collected one"
        return "\n".join([
            f"{student} handed {assignment} in again, arriving {arrived:%Y-%m-%d %H:%M:%S} UTC,",
            f"  after {graded} was graded. The graded one stays in submitted/;",
            f"  the new one is kept in {os.path.relpath(aside, self.coursedir.root)}/ (in the course root)",
            "  To grade the new one instead:",
            f"    nbgrader collect {assignment} --student={student} --TrustedExchangeCollect.replace_graded=True",
            f"  then autograde {student} again."])

    def _report(self) -> None:
        assignment = self.coursedir.assignment_id
        for message in self.kept_aside:
            self.log.warning("NOT REPLACED: " + message)
        if not self.refused:
            return
        lines = [f"REFUSED {len(self.refused)} submission(s) of {assignment} handed in under another student's name",
                 "(the account that wrote a submission's files is believed, not the name its nbgrader wrote):"]
        for name, student, why, copy in self.refused:
            lines += [f"  inbound/{name}:", f"    {why}.",
                      f"    Not collected; {student}'s own latest submission, if any, is the one collected.",
                      f"    A copy for you in the course root: {os.path.relpath(copy, self.coursedir.root)}/" if copy
                      else f"    (reported before; a copy is in the course root's {REFUSED}/)"]
        if any(copy for *_, copy in self.refused):
            self.fail("\n".join(lines))
        self.log.warning("\n".join(lines))
