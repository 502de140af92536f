"""The hub's state folder and its courses: names, paths, the service accounts' environment."""

from __future__ import annotations

import csv
import json
import os
import pwd
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from nboracle.classroom import pipeline as P

from instructor import roster as R
from instructor.repository import REPO

COURSE_ID = "attention-transformers"


SERVICE = "formgrader"  # the hub service's name: /services/formgrader/


ROSTER_SERVICE = "roster"  # a token-only service: the roster command's hub API access


GRADER = "grader-attention"


HUB_DIR = REPO / "hub"


DEFAULT_ROSTER = HUB_DIR / "roster.csv"  # the sample class: prof-ada, ta-ben, alice, bob, carol


DEFAULT_STATE = Path("/var/lib/attention-hub")


TRAVERSE_RECORD = "granted-traverse.json"


CREATED_RECORD = "created-accounts.json"


ROLE_NAMES = {"instructor": "instructor", "ta": "teaching assistant", "student": "student"}


ADMINS_RECORD = "admins.json"  # STATE/hub/admins.json: the hub's administrators (``admin add``), no lecturer by role


COURSES_RECORD = "courses.json"  # the state folder's other courses: [{"id": ..., "source": ..., "language": ...}]


ENGLISH = "en"  # a course's language when its config sets none: the course's own, nothing translated


COURSE_ID_RULE = "2 to 24 characters: lower-case letters, digits and '-', starting with a letter"


@dataclass(frozen=True)
class Course:
    """One nbgrader course on the hub: who grades it, where its files are, who may open it."""

    id: str
    grader: str  # the service account that owns the course root and runs its formgrader
    service: str  # the hub service: /services/<service>/
    roster: Path  # its class list (instructors, assistants, students)
    root: Path  # its course root: nbgrader_config.py, source/, gradebook.db, submitted/ ...
    source: Path  # the source/ folder it was made from
    config: Path = REPO / "nbgrader_config.py"  # the nbgrader_config.py its course root started with
    language: str = ENGLISH  # its config's c.MessageCatalog.language (``course add`` records it)

    @property
    def graders_group(self) -> str:  # nbgrader's JupyterHub names: formgrade-<course>, nbgrader-<course>
        return f"formgrade-{self.id}"

    @property
    def students_group(self) -> str:
        return f"nbgrader-{self.id}"


def valid_course_id(course_id: str) -> bool:
    return re.fullmatch(r"[a-z][a-z0-9-]{1,23}", course_id) is not None and not course_id.endswith("-")


class Layout:
    def __init__(self, state: Path):
        self.state = Path(state).resolve()
        self.home = self.state / "home"
        self.exchange = self.state / "exchange"
        self.common = self.state / "etc" / "common"
        self.student_etc = self.state / "etc" / "student"
        self.grader_etc = self.state / "etc" / "grader"
        self.hub = self.state / "hub"
        self.course = self.home / GRADER / "course"
        self.pid = self.hub / "jupyterhub.pid"
        self.log = self.hub / "jupyterhub.log"
        self.url_file = self.hub / "url"
        self.roster = self.state / "roster.csv"
        self.passwords = self.hub / "passwords.csv"
        self.roster_token = self.hub / "roster-service-token"
        self.backups = self.state / "backups"
        self.courses_record = self.state / COURSES_RECORD
        self.admins_record = self.hub / ADMINS_RECORD

    def user_home(self, name: str) -> Path:
        return self.home / name

    def people(self, course: Course | None = None) -> list[R.Person]:
        """A course's roster in use (the first course's: the term's copy, else the sample class)."""
        if course is None or course.roster == self.roster:
            return R.read(self.roster if self.roster.exists() else DEFAULT_ROSTER)
        return R.read(course.roster) if course.roster.exists() else []

    def main_course(self) -> Course:
        return Course(COURSE_ID, GRADER, SERVICE, self.roster, self.course, REPO / "source")

    def courses(self) -> list[Course]:
        """The hub's courses: this course first, then those ``course add`` recorded."""
        extra = json.loads(self.courses_record.read_text()) if self.courses_record.exists() else []
        return [self.main_course(), *(Course(
            c["id"], f"grader-{c['id']}", f"formgrader-{c['id']}", self.state / "courses" / c["id"] / "roster.csv",
            self.home / f"grader-{c['id']}" / "course", Path(c["source"]),
            Path(c.get("config") or REPO / "nbgrader_config.py"),
            # a course recorded before languages were: its config's, read again
            c.get("language") or config_language(Path(c.get("config") or REPO / "nbgrader_config.py"), strict=False))
            for c in extra)]

    def course_named(self, course_id: str | None) -> Course:
        courses = self.courses()
        if course_id is None:
            return courses[0]
        for course in courses:
            if course.id == course_id:
                return course
        sys.exit(f"no course {course_id!r} on this hub ({self.state}); its courses: "
                 + ", ".join(c.id for c in courses))

    def admins(self) -> list[str]:
        """The hub's administrators: a role of their own (``admin add``), not a course's instructors."""
        return json.loads(self.admins_record.read_text()) if self.admins_record.exists() else []

    def everyone(self) -> list[R.Person]:
        """Every person on any course's roster, once (the first roster's line of them), and the hub's admins."""
        seen: dict[str, R.Person] = {}
        for course in self.courses():
            for person in self.people(course):
                seen.setdefault(person.id, person)
        for name in self.admins():
            seen.setdefault(name, R.Person(name, role="admin"))
        return list(seen.values())

    def graders(self) -> list[str]:
        return [course.grader for course in self.courses()]

    def with_role(self, *roles: str) -> list[str]:
        return [p.id for p in self.people() if p.role in roles]

    def password(self, name: str) -> str:
        """The first password ``start`` gave ``name`` (root only: hub/passwords.csv)."""
        return _passwords(self).get(name, "")


def config_language(config: Path, strict: bool = True) -> str:
    """The language an nbgrader config sets for its course (``c.MessageCatalog.language``), ``en`` for none.

    A language the hub can give students' servers has the kernel's catalog
    (``course/data/messages-<lang>.json``, :mod:`course.language`) and, with this course's catalog hook,
    the feedback's (``i18n/<lang>/messages.po``), both written by ``python -m instructor translate``
    (docs/TRANSLATING.md). ``strict``: a config that fails to load, or a language without them, ends
    the command with what is missing; else it counts as English."""
    from traitlets.config.loader import PyFileConfigLoader

    from course.language import DATA, catalog_file

    def refuse(why: str) -> str:
        if strict:
            sys.exit(f"not added: {config} {why}")
        return ENGLISH

    try:
        settings = PyFileConfigLoader(config.name, path=str(config.parent)).load_config()
    except Exception as err:  # noqa: BLE001 (any error of the file: said, nothing recorded)
        return refuse(f"fails to load: {type(err).__name__}: {err}")
    catalog = settings.get("MessageCatalog", {})
    language = str(catalog.get("language") or "").strip()
    if language in ("", ENGLISH):
        return ENGLISH
    known = sorted(p.stem.removeprefix("messages-") for p in DATA.glob("messages-*.json"))
    if not re.fullmatch(r"[a-z]{2,3}", language):
        return refuse(f"sets c.MessageCatalog.language = {language!r}: no language code such as 'vi' "
                      f"(the languages with a catalog: {', '.join(known) or 'none'})")
    missing = [] if catalog_file(language).is_file() else [f"course/data/{catalog_file(language).name} (the "
                                                           "students' kernels: visible tests, Validate)"]
    hook = str(catalog.get("catalog") or "")
    if not hook:
        missing.append("c.MessageCatalog.catalog (the feedback's)")
    elif hook == "instructor.messages:translator" and not (REPO / "i18n" / language / "messages.po").is_file():
        missing.append(f"i18n/{language}/messages.po (the feedback)")
    if missing:
        return refuse(f"sets c.MessageCatalog.language = {language!r}, a language with no catalog here: no "
                      f"{' and no '.join(missing)}. The languages with one: {', '.join(known) or 'none'}; "
                      f"another is made with python -m instructor translate (docs/TRANSLATING.md)")
    return language


def server_language(courses: list[Course], groups: set[str]) -> str:
    """``COURSE_LANGUAGE`` for a person's server, from the hub groups they are in (``nbgrader-<id>``,
    ``formgrade-<id>``): the language of their courses when all of them have the same one (a student
    of the Vietnamese edition only: ``vi``); else ``""``, English, the language every message is
    written in (in no course, or in courses of different languages: one server has one environment;
    each course's feedback is still in its own course's language, the grader's)."""
    languages = {c.language for c in courses if groups & {c.students_group, c.graders_group}}
    return languages.pop() if len(languages) == 1 and ENGLISH not in languages else ""


def _passwords(layout: Layout) -> dict[str, str]:
    if not layout.passwords.exists():
        return {}
    with open(layout.passwords, newline="", encoding="utf-8-sig") as handle:
        return {row["id"]: row["password"] for row in csv.DictReader(handle)}


def _chown(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.lchown(path, entry.pw_uid, entry.pw_gid)


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _state_folders(layout: Layout) -> None:
    if os.geteuid() != 0:
        sys.exit("the hub runs as root (it starts each user's server as that user, and makes the accounts)")
    layout.home.mkdir(parents=True, exist_ok=True)
    for folder in (layout.state, layout.home):
        os.chmod(folder, 0o755)
    layout.hub.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.hub, 0o700)


def grader_env(layout: Layout, course: Course | None = None) -> dict[str, str]:
    """A formgrader service's environment (the hub's config and the grader's commands share it)."""
    course = course or layout.main_course()
    return {"PATH": f"{P.BIN}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(REPO), "LANG": "C.UTF-8",
            "HOME": str(layout.user_home(course.grader)), "USER": course.grader, "LOGNAME": course.grader,
            "JUPYTER_CONFIG_PATH": os.pathsep.join(map(str, (layout.grader_etc, layout.common))),
            "COURSE_ROOT": str(course.root)}


def as_grader(layout: Layout, *argv: str, check: bool = True, course: Course | None = None) -> subprocess.CompletedProcess:
    """``argv`` as a course's service account in its course root, with its service's environment."""
    course = course or layout.main_course()
    proc = subprocess.run(["/usr/sbin/runuser", "-u", course.grader, "--", *argv], cwd=course.root,
                          env=grader_env(layout, course), capture_output=True, text=True)
    if check and proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} (as {course.grader}) failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return proc
