"""A JupyterHub for the course on this machine: the term from the roster to the export (docs/JUPYTERHUB.md).

Everything the term writes lives in a state folder (default ``/var/lib/attention-hub``, outside
the clone; ``--state`` or ``HUB_STATE`` elsewhere)::

    roster.csv                      the class list in use (instructor/roster.py): accounts, gradebook
    home/<account>/                 each account's home (mode 700, owned by it)
    home/grader-attention/course/   the course root (config, source/, gradebook), the formgrader
                                    service's own folder: no other account enters
    exchange/                       nbgrader's exchange (mode 1777; nbgrader makes the course's
                                    inbound 733 and outbound 755 itself)
    etc/common/                     nbgrader_config.py for everyone: course id, exchange
    etc/student/                    students' Jupyter config: no formgrader, no create-assignment
    etc/grader/                     the formgrader service's: its log at INFO (no DEBUG in dialogs)
    hub/                            root only: JupyterHub's database, cookie secret, log, pid,
                                    passwords.csv (first passwords), the roster service's token
    backups/                        ``backup``'s archives

The hub runs as root (LocalProcessSpawner: each user's server runs as that system user), logs
in through PAM, and starts the formgrader as a managed service run by ``grader-attention``,
reachable by the group ``formgrade-attention-transformers`` (instructors and assistants).

    python -m instructor.hub start [--state DIR] [--port 8000] [--background] [--roster FILE]
    python -m instructor.hub stop  [--state DIR] [--purge]
    python -m instructor.hub roster [--course ID] import FILE | drop ID... | list
    python -m instructor.hub export [--course ID] [--to FILE] [--layout long|canvas]
    python -m instructor.hub extend [--course ID] ASSIGNMENT STUDENT --hours N   (0: none; any time)
    python -m instructor.hub course add ID --roster FILE [--source DIR] [--config FILE] | list
    python -m instructor.hub admin add ID... | drop ID... | list    (the hub's administrators)
    python -m instructor.hub backup [--to FILE] | restore FILE

A second course on the same hub (``course add``): its own roster, service account
``grader-<id>``, course root, formgrader service ``/services/formgrader-<id>/`` and groups;
people on both rosters keep one account. Its formgrader starts with the next ``start``.
"""

from __future__ import annotations

import argparse
import csv
import grp
import io
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from nboracle.classroom import pipeline as P
from nboracle.grader.exchange import inbound_parts

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


COURSES_RECORD = "courses.json"  # the state folder's other courses: [{"id": ..., "source": ...}]
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

    @property
    def graders_group(self) -> str:  # nbgrader's JupyterHub names: formgrade-<course>, nbgrader-<course>
        return f"formgrade-{self.id}"

    @property
    def students_group(self) -> str:
        return f"nbgrader-{self.id}"


def valid_course_id(course_id: str) -> bool:
    import re

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
            Path(c.get("config") or REPO / "nbgrader_config.py")) for c in extra)]

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


def _passwords(layout: Layout) -> dict[str, str]:
    if not layout.passwords.exists():
        return {}
    with open(layout.passwords, newline="", encoding="utf-8-sig") as handle:
        return {row["id"]: row["password"] for row in csv.DictReader(handle)}


PASSWORD_COLUMNS = ("id", "first_name", "last_name", "email", "role", "password")


def _save_passwords(layout: Layout, passwords: dict[str, str]) -> None:
    """hub/passwords.csv, root only: each account's first password beside the person's name, e-mail
    and role (from the rosters; a mail merge can send each their own), UTF-8 with a byte-order mark
    so that a spreadsheet shows the names as written."""
    layout.hub.mkdir(parents=True, exist_ok=True)
    known = {p.id: p for p in layout.everyone()}
    fd = os.open(layout.passwords, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.writer(handle)
        writer.writerow(PASSWORD_COLUMNS)
        for name, password in sorted(passwords.items()):
            person = known.get(name, R.Person(name))
            writer.writerow([name, person.first_name, person.last_name, person.email, person.role, password])
    os.chmod(layout.passwords, 0o600)


def _save_roster(layout: Layout, people: list[R.Person], course: Course | None = None) -> None:
    """A course's roster in the state folder, root only (names and emails of the whole class)."""
    path = course.roster if course is not None else layout.roster
    if path.parent != layout.state:
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in (path.parent.parent, path.parent):
            os.chmod(folder, 0o700)
    R.write(people, path)
    os.chmod(path, 0o600)


def _record_created(layout: Layout, name: str) -> None:
    record = layout.hub / CREATED_RECORD
    before = json.loads(record.read_text()) if record.exists() else []
    record.write_text(json.dumps(sorted(set(before) | {name})))


def _account(layout: Layout, name: str, password: str | None) -> None:
    """The system account ``name`` with its home under the state folder; ``password`` None: locked
    (the service account). An account that exists gets its home, shell and password set again."""
    home = layout.user_home(name)
    try:
        entry = pwd.getpwnam(name)
        if (entry.pw_dir, entry.pw_shell) != (str(home), "/bin/bash"):
            moved = subprocess.run(["usermod", "--home", str(home), "--shell", "/bin/bash", name],
                                   capture_output=True, text=True)
            # 8: the account runs processes (another hub on this machine uses it): the service
            # account is always started with HOME set, a person's account must move
            if moved.returncode and not (moved.returncode == 8 and password is None):
                sys.exit(f"usermod {name} (its home to {home}) failed: {moved.stderr.strip()}")
    except KeyError:
        subprocess.run(["useradd", "--home-dir", str(home), "--no-create-home", "--shell", "/bin/bash",
                        "--user-group", name], check=True, capture_output=True)
        _record_created(layout, name)
    home.mkdir(parents=True, exist_ok=True)
    profile = home / ".bash_profile"
    if not profile.exists():  # Lab's terminal is a login shell: /etc/profile resets PATH
        profile.write_text("# the course's Python, nbgrader and jupyter first (instructor/hub.py)\n"
                           f'export PATH="{P.BIN}:$PATH"\n[ -f ~/.bashrc ] && . ~/.bashrc\n')
    entry = pwd.getpwnam(name)
    for path in (home, profile):
        os.lchown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(home, 0o700)
    if password is None:
        subprocess.run(["usermod", "--lock", name], check=True, capture_output=True)
    else:
        subprocess.run(["chpasswd"], input=f"{name}:{password}", text=True, check=True, capture_output=True)


def _accounts(layout: Layout, people: list[R.Person]) -> list[str]:
    """Every roster account (a random first password for each new one, kept in
    hub/passwords.csv, root only) and the courses' service accounts; the names given a password now."""
    passwords = _passwords(layout)
    new = [p.id for p in people if p.id not in passwords]
    passwords.update({name: secrets.token_urlsafe(9) for name in new})
    _save_passwords(layout, passwords)
    for person in people:
        _account(layout, person.id, passwords[person.id])
    for grader in layout.graders():
        _account(layout, grader, None)
    return new


def _chown(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.lchown(path, entry.pw_uid, entry.pw_gid)


def _grant_traverse(layout: Layout) -> list[str]:
    """Let every account reach the course's Python: each folder above the interpreter and the
    venv needs o+x (a pyenv under /root has none). Only the execute bit (enter, not list) is
    added, recorded, and taken back by :func:`stop`."""
    granted = []
    targets = [Path(sys.executable).resolve(), Path(sys.prefix).resolve(), REPO]
    for target in targets:
        for folder in [*reversed(target.parents), target]:
            if not folder.is_dir():
                continue
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(folder, mode | stat.S_IXOTH)
                granted.append(str(folder))
    if granted:
        record = layout.hub / TRAVERSE_RECORD
        before = json.loads(record.read_text()) if record.exists() else []
        record.write_text(json.dumps(sorted(set(before) | set(granted))))
        print(f"granted traverse (o+x, not read) on {', '.join(granted)}: the course's Python "
              "lives there and every account runs it; `make hub-stop` takes it back")
    return granted


def _revoke_traverse(layout: Layout) -> None:
    record = layout.hub / TRAVERSE_RECORD
    if not record.exists():
        return
    for folder in json.loads(record.read_text()):
        path = Path(folder)
        if path.is_dir():
            os.chmod(path, path.stat().st_mode & ~stat.S_IXOTH)
    record.unlink()


# What the clone every account runs the course from must not show students: solutions and hidden
# tests (source/, and a language edition's generated editions/<lang>/source/), what the hidden tests
# compare with (instructor/references/), and every exercise's wrong and correct versions (instructor/zoo/). The courses' service accounts read them (a formgrader
# imports the references), through this group.
GRADERS_ONLY = ("source", "instructor/references", "instructor/zoo", "editions/*/source")
GRADERS_GROUP = "course-graders"


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _hide_from_students(layout: Layout, repo: Path = REPO) -> None:
    """``GRADERS_ONLY`` of ``repo``: group :data:`GRADERS_GROUP`, which every course's service account
    joins, and nothing for others (git keeps no folder modes, so each start sets them again)."""
    subprocess.run(["groupadd", "--force", "--system", GRADERS_GROUP], check=True, capture_output=True)
    for grader in layout.graders():
        if _exists(grader):
            subprocess.run(["usermod", "--append", "--groups", GRADERS_GROUP, grader], check=True, capture_output=True)
    gid = grp.getgrnam(GRADERS_GROUP).gr_gid
    for folder in (found for part in GRADERS_ONLY for found in repo.glob(part)):
        if folder.is_dir():
            os.chown(folder, -1, gid)
            os.chmod(folder, (folder.stat().st_mode & ~0o077) | 0o050)


def _state_folders(layout: Layout) -> None:
    if os.geteuid() != 0:
        sys.exit("the hub runs as root (it starts each user's server as that user, and makes the accounts)")
    layout.home.mkdir(parents=True, exist_ok=True)
    for folder in (layout.state, layout.home):
        os.chmod(folder, 0o755)
    layout.hub.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.hub, 0o700)


def prepare(layout: Layout, roster: Path | None = None) -> None:
    """Accounts from the roster, folders, configs and the course root: idempotent; a course root
    and a roster already there (a term under way) are kept (``roster import`` changes the roster)."""
    _state_folders(layout)
    if not layout.roster.exists():
        people = R.read(roster or DEFAULT_ROSTER)
        R.require_grader(people, roster or DEFAULT_ROSTER)
        _save_roster(layout, people)
    elif roster is not None:
        print(f"the term's roster {layout.roster} is kept: `python -m instructor.hub roster import "
              f"{roster}` adds or updates its people")
    people = layout.everyone()
    new = _accounts(layout, people)
    if new:
        print(f"{len(new)} new account(s) with a random first password each: {layout.passwords} (root only)")
    _grant_traverse(layout)
    _hide_from_students(layout)
    layout.exchange.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.exchange, 0o1777)  # everyone writes; nobody removes what another made (the arrival record)
    for folder in (layout.common, layout.student_etc / "labconfig"):
        folder.mkdir(parents=True, exist_ok=True)
    for folder in (layout.state / "etc", layout.common, layout.student_etc, layout.student_etc / "labconfig"):
        os.chmod(folder, 0o755)
    _nbgrader_configs(layout)
    # Students: the Assignments panel and Validate, no formgrader or create-assignment toolbar.
    (layout.student_etc / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "jpserver_extensions": {"nbgrader.server_extensions.formgrader": False,
                                "nbgrader.server_extensions.course_list": False}}}, indent=1))
    (layout.student_etc / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": {
        "@jupyter/nbgrader:formgrader": True, "@jupyter/nbgrader:create-assignment": True,
        "@jupyter/nbgrader:course-list": True}}, indent=1))
    # The formgrader's dialogs show its log from the server's log level: the server's logger at
    # INFO, not traitlets' DEBUG (hundreds of DEBUG lines in the autograde "Success" dialog).
    layout.grader_etc.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.grader_etc, 0o755)
    # nboracle.grader.formgrader: due dates typed and shown in the course's time zone
    # (c.NbGraderAPI.timezone), a refused save said, Unrelease asks first.
    (layout.grader_etc / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "logging_config": {"loggers": {"ServerApp": {"level": "INFO"}}},
        "jpserver_extensions": {"nboracle.grader.formgrader": True}}}, indent=1))
    for path in [*layout.common.iterdir(), *layout.student_etc.rglob("*"), *layout.grader_etc.iterdir()]:
        if path.is_file():
            os.chmod(path, 0o644)
    for course in layout.courses():
        _course_root(course)
    _seed_lab(layout, [p.id for p in people])
    for course in layout.courses():
        _import_students(layout, R.students(layout.people(course)), course)


def _nbgrader_configs(layout: Layout) -> None:
    """Everyone's nbgrader: the shared exchange; with one course its id for everyone. With more,
    students' servers name none: nbgrader's JupyterHubAuthPlugin asks the hub for the user's
    ``nbgrader-<id>`` and ``formgrade-<id>`` groups, so the Assignment List offers those courses
    and fetch and submit refuse the others; each formgrader reads its id from its course root."""
    courses = layout.courses()
    lines = ["# Every account's nbgrader (instructor/hub.py): the shared exchange.",
             "c = get_config()  # noqa: F821"]
    if len(courses) == 1:
        lines.append(f"c.CourseDirectory.course_id = {COURSE_ID!r}")
    lines.append(f"c.Exchange.root = {str(layout.exchange)!r}")
    # collect believes the server, not the student's nbgrader: who owns a submission, when it arrived
    lines.append('c.ExchangeFactory.collect = "nboracle.grader.exchange.TrustedExchangeCollect"')
    (layout.common / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    config = layout.student_etc / "nbgrader_config.py"
    if len(courses) > 1:
        config.write_text("\n".join([
            "# More than one course on this hub (instructor/hub.py): nbgrader asks the hub who is in which.",
            "c = get_config()  # noqa: F821",
            'c.Authenticator.plugin_class = "nbgrader.auth.JupyterHubAuthPlugin"',
            'c.CourseDirectory.course_id = ""  # each of the panel\'s requests names its course']) + "\n")
    else:
        config.unlink(missing_ok=True)


def _course_root(course: Course) -> None:
    """A course root the first time: the course's nbgrader_config.py (another course's names its
    own id) and a copy of its source/, owned by its service account."""
    if (course.root / "nbgrader_config.py").exists():
        return
    course.root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(course.config, course.root / "nbgrader_config.py")
    if course.id != COURSE_ID:
        with open(course.root / "nbgrader_config.py", "a") as config:
            config.write(f"\n# this course on the hub (python -m instructor.hub course add)\n"
                         f"c.CourseDirectory.course_id = {course.id!r}\n")
    shutil.copytree(course.source, course.root / "source", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    _chown(course.root, course.grader)


def _seed_lab(layout: Layout, names: list[str]) -> None:
    from .workspace import _seed_settings

    for name in names:
        settings = layout.user_home(name) / ".jupyter" / "lab" / "user-settings"
        if not settings.exists():
            _seed_settings(settings)
            _chown(layout.user_home(name) / ".jupyter", name)


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


def _import_students(layout: Layout, students: list[R.Person], course: Course | None = None) -> None:
    """The roster's students into the course's gradebook (``nbgrader db student import``): names
    and emails in the formgrader, a row for each in the export even without a submission."""
    if not students:
        return
    course = course or layout.main_course()
    listing = layout.user_home(course.grader) / "students-import.csv"
    R.write(students, listing)
    _chown(listing, course.grader)
    try:
        as_grader(layout, str(P.BIN / "nbgrader"), "db", "student", "import", str(listing), course=course)
    finally:
        listing.unlink(missing_ok=True)


def _answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/hub/api/", timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


def proxy_bin() -> Path:
    return HUB_DIR / "node_modules" / ".bin" / "configurable-http-proxy"


def start(layout: Layout, port: int, background: bool, ip: str = "127.0.0.1") -> int:
    if not proxy_bin().exists():
        sys.exit(f"no {proxy_bin()}: run `npm ci --prefix hub` (make hub does it)")
    prepare(layout)
    if layout.pid.exists():
        if _is_our_hub(int(layout.pid.read_text() or 0), layout):
            sys.exit(f"a hub already runs (pid {layout.pid.read_text().strip()}): make hub-stop")
        layout.pid.unlink()
    url = f"http://{ip}:{port}"
    env = {**os.environ, "COURSE_HUB_STATE": str(layout.state), "COURSE_HUB_IP": ip,
           "COURSE_HUB_PORT": str(port), "PATH": f"{HUB_DIR / 'node_modules' / '.bin'}:{P.BIN}:{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "jupyterhub", "-f", str(HUB_DIR / "jupyterhub_config.py")]
    layout.url_file.write_text(url)
    log = open(layout.log, "a")
    since = log.tell()  # this start's lines only
    proc = subprocess.Popen(argv, cwd=layout.hub, env=env, stdout=log if background else None,
                            stderr=subprocess.STDOUT if background else None,
                            start_new_session=background)
    layout.pid.write_text(str(proc.pid))
    if not background:  # `make hub` stopped by a TERM (not only Ctrl-C) also cleans up
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    running = False
    try:
        deadline = time.monotonic() + 120
        while not _answering(url):
            if proc.poll() is not None:
                said = layout.log.read_text()[since:] if background else ""
                sys.exit(f"jupyterhub exited ({proc.returncode}) {said[-3000:]}")
            if time.monotonic() > deadline:
                sys.exit("jupyterhub did not answer in 120 s")
            time.sleep(0.5)
        print(banner(url, layout), flush=True)
        if background:
            running = True
            return 0
        return proc.wait()
    except KeyboardInterrupt:  # Ctrl-C: the hub got it too and stops the servers and the proxy
        return 0
    finally:
        if not running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            layout.pid.unlink(missing_ok=True)
            _cleanup(layout)


def banner(url: str, layout: Layout) -> str:
    people = layout.people()
    lines = [f"JupyterHub for the course: {url}/hub/login",
             f"roster {layout.roster}: " + ", ".join(
                 f"{sum(p.role == role for p in people)} {ROLE_NAMES[role]}(s)" for role in R.ROLES),
             f"first passwords (root only): {layout.passwords}",
             f"hub administrators (python -m instructor.hub admin add|list): {', '.join(layout.admins()) or 'none'}"]
    for person in people[:8]:
        lines.append(f"  {person.id:14s} {ROLE_NAMES[person.role]}")
    if len(people) > 8:
        lines.append(f"  ... {len(people) - 8} more: python -m instructor.hub roster list")
    lines += [f"formgrader (instructor and assistant): {url}/services/{SERVICE}/",
              # issue 40: the class batch writes what the class got wrong into the course root's mistakes/
              f"what the class got wrong (after grade-class): {url}/services/{SERVICE}/files/mistakes/term.html",
              f"course root: {layout.course}   exchange: {layout.exchange}"]
    for course in layout.courses()[1:]:
        others = layout.people(course)
        lines += [f"course {course.id}: roster {course.roster} ({len(R.students(others))} student(s)), "
                  f"formgrader {url}/services/{course.service}/, course root {course.root}"]
    lines.append(f"hub log: {layout.log}   stop: make hub-stop (or Ctrl-C on make hub)")
    return "\n".join(lines)


def _names(layout: Layout) -> list[str]:
    try:
        return [p.id for p in layout.everyone()]
    except (OSError, ValueError, R.RosterError):
        return []


def _graders(layout: Layout) -> list[str]:
    try:
        return layout.graders()
    except (OSError, ValueError):
        return [GRADER]


def _account_pids(layout: Layout) -> list[int]:
    """Processes of the hub's own accounts (single-user servers, the service, their kernels)."""
    uids = set()
    for name in (*_names(layout), *_graders(layout)):
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in uids:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _cleanup(layout: Layout) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _account_pids(layout)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while _account_pids(layout) and time.monotonic() < deadline:
            time.sleep(0.2)
    _revoke_traverse(layout)
    _lock_accounts(layout)


def _lock_accounts(layout: Layout) -> None:
    """The passwords work only while the hub runs: stopping it locks the accounts (the next
    start sets them again from hub/passwords.csv)."""
    for name in filter(_exists, _names(layout)):
        subprocess.run(["usermod", "--lock", name], check=False, capture_output=True)


def _is_our_hub(pid: int, layout: Layout) -> bool:
    """``pid`` is the jupyterhub this module started for ``layout`` (a pid file can outlive it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return (str(HUB_DIR / "jupyterhub_config.py").encode() in cmdline
            and f"COURSE_HUB_STATE={layout.state}".encode() in environ)


def _signal(pid: int, sig: int) -> None:
    """Send ``sig`` to the hub's process group, or to the process alone if it leads none; gone is fine."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop(layout: Layout) -> int:
    """Stop the hub (it stops the proxy, the servers and the service), then anything left of
    the hub's accounts, and take back the traverse bits."""
    pid = int(layout.pid.read_text()) if layout.pid.exists() else None
    if pid is not None and not _is_our_hub(pid, layout):
        print(f"pid {pid} of {layout.pid} is not this hub any more: nothing to stop there")
        layout.pid.unlink()
        pid = None
    if pid is not None:
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.3)
        else:
            _signal(pid, signal.SIGKILL)
        layout.pid.unlink(missing_ok=True)
        print(f"stopped the hub (pid {pid})")
    else:
        print("no hub running from", layout.state)
    _cleanup(layout)
    return 0


def purge(layout: Layout) -> int:
    """After ``stop``: remove the system accounts this hub created (hub/created-accounts.json;
    accounts that were there before stay) and the state folder, the term with it."""
    if not (layout.hub / CREATED_RECORD).exists() and not layout.roster.exists():
        sys.exit(f"{layout.state} is no hub state folder (no roster.csv, no {CREATED_RECORD}): nothing removed")
    record = layout.hub / CREATED_RECORD
    created = json.loads(record.read_text()) if record.exists() else []
    for name in created:
        subprocess.run(["userdel", name], check=False, capture_output=True)
    shutil.rmtree(layout.state, ignore_errors=True)
    print(f"removed {len(created)} account(s) ({', '.join(created) or 'none'}) and {layout.state}")
    return 0


# ---------------------------------------------------------------- the roster during the term


def roster_token(layout: Layout) -> str:
    """The roster service's hub API token (hub/, root only), made once."""
    if not layout.roster_token.exists():
        layout.hub.mkdir(parents=True, exist_ok=True)
        fd = os.open(layout.roster_token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    return layout.roster_token.read_text().strip()


def _hub_running(layout: Layout) -> str | None:
    """The running hub's URL, or None."""
    if not layout.pid.exists() or not layout.url_file.exists():
        return None
    if not _is_our_hub(int(layout.pid.read_text() or 0), layout):
        return None
    url = layout.url_file.read_text().strip()
    return url if _answering(url) else None


def hub_api(layout: Layout, url: str, method: str, path: str, body=None) -> int:
    """One call of the hub's REST API with the roster service's token; its HTTP status."""
    request = urllib.request.Request(f"{url}/hub/api{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {roster_token(layout)}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as err:
        if err.code in (404, 409):  # already gone, already there
            return err.code
        raise SystemExit(f"hub API {method} {path}: {err.code} {err.read()[:300]!r}") from None


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


def course_add(layout: Layout, course_id: str, roster: Path, source: Path | None = None,
               config: Path | None = None) -> int:
    """A second (third ...) course on this hub: its roster, service account ``grader-<id>``,
    course root from ``source`` (default: this course's source/) and ``config`` (default: the
    nbgrader_config.py beside that source/, else this course's), gradebook students; its
    formgrader service and groups come with the hub's next start."""
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
    people = R.read(roster)
    R.require_grader(people, roster)
    grader = f"grader-{course_id}"
    if grader in {p.id for p in [*layout.everyone(), *people]}:
        sys.exit(f"{grader} is a person's id on a roster: it names the course's service account")
    course = Course(course_id, grader, f"formgrader-{course_id}", layout.state / "courses" / course_id / "roster.csv",
                    layout.home / grader / "course", source, config)
    shared = shared_folders(layout, course, people)
    if shared:
        sys.exit("not added: " + "; ".join(shared) + ". " + SHARED_FOLDERS_HELP)
    if not layout.roster.exists():
        _save_roster(layout, layout.people())  # the first course's roster is the term's from now on
    record = json.loads(layout.courses_record.read_text()) if layout.courses_record.exists() else []
    _save_roster(layout, people, course)
    layout.courses_record.write_text(json.dumps(
        [*record, {"id": course_id, "source": str(source), "config": str(config)}], indent=1))
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
              f"root {course.root}  source {course.source}")
    return 0


# ---------------------------------------------------------------- grades out, deadlines


def export(layout: Layout, to: Path, layout_name: str = "long", course: Course | None = None) -> Path:
    """A course's grades for the university's gradebook: nbgrader's export of its gradebook on
    the hub (as its service account), one row per student of its roster and assignment."""
    course = course or layout.main_course()
    scratch = layout.user_home(course.grader) / ".export-grades.csv"
    # the export's columns (submitted, late, review flags) whatever the course's own config exports
    as_grader(layout, str(P.BIN / "nbgrader"), "export", "--to", str(scratch),
              "--ExportApp.plugin_class=nboracle.grader.nbgrader_ext.ReviewCsvExport", course=course)
    try:
        rows = R.lms_rows(scratch, layout.people(course), _uncollected(layout, course))
    finally:
        scratch.unlink(missing_ok=True)
    to = R.write_lms(rows, Path(to), layout_name)
    print(f"{course.id}: {len(rows)} row(s) ({len(R.students(layout.people(course)))} students on the roster): {to}")
    return to


def _uncollected(layout: Layout, course: Course) -> frozenset[tuple[str, str]]:
    """(student, assignment) of every submission in the course's exchange inbound, collected or not
    (nbgrader names each ``<student>+<assignment>+<time>+<random>``): a student of these without a
    graded submission has handed in and waits for Collect."""
    inbound = layout.exchange / course.id / "inbound"
    try:
        names = [entry.name for entry in inbound.iterdir()]
    except OSError:
        return frozenset()
    return frozenset(parts for parts in map(inbound_parts, names) if parts is not None)


def extend(layout: Layout, assignment: str, student: str, hours: float, course: Course | None = None) -> int:
    """A student's extension on an assignment, kept in the hub's gradebook (nboracle.grader.extensions):
    at any time, before or after the due date, before or after a submission; 0 hours takes it back.
    With a graded submission its late penalty is computed again with the course's late policy."""
    from nboracle.grader.extensions import check_hours

    try:
        check_hours(hours)
    except ValueError as err:
        sys.exit(str(err))
    course = course or layout.main_course()
    if student not in {p.id for p in R.students(layout.people(course))}:
        sys.exit(f"{student} is no student on the roster of {course.id}: python -m instructor.hub roster list")
    proc = as_grader(layout, str(P.BIN / "python"), "-c", EXTEND, assignment, student, repr(float(hours)),
                     check=False, course=course)
    print(proc.stdout.strip() or proc.stderr.strip()[-1500:])
    return proc.returncode


# run as the course's service account in its course root: python -c EXTEND ASSIGNMENT STUDENT HOURS
EXTEND = """
import sys
from datetime import timedelta
from nbgrader.api import Gradebook
from nbgrader.apps import NbGrader
from nbgrader.preprocessors import AssignLatePenalties
from nboracle.grader.coursetime import course_zone, shown
from nboracle.grader.extensions import grant
assignment, student, hours = sys.argv[1], sys.argv[2], float(sys.argv[3])
app = NbGrader(); app.initialize([])
zone = course_zone(app.config)  # c.NbGraderAPI.timezone
late = AssignLatePenalties(parent=app)
plugin = late.plugin_class(parent=late)
with Gradebook(app.coursedir.db_url) as gb:
    try:
        submission = grant(gb, assignment, student, hours)
    except ValueError as err:
        sys.exit(f"nothing changed: {err}")
    due = gb.find_assignment(assignment).duedate
    said = (f"{student} {assignment}: due {shown(due, zone)}; "
            + (f"extended by {hours:g} h to {shown(due + timedelta(hours=hours), zone)}" if hours else "no extension"))
    if submission is None:
        print(said + "; no submission graded yet (the extension applies when it is autograded)")
        sys.exit(0)
    seconds = submission.total_seconds_late
    for nb in submission.notebooks:
        penalty = plugin.late_submission_penalty(student, nb.score, seconds) if seconds > 0 else None
        nb.late_submission_penalty = None if penalty is None else late._check_late_penalty(nb, penalty)
    gb.db.commit()
    print(said + "; the graded submission is " + (f"{seconds:g} s late" if seconds > 0 else "on time")
          + f", penalty {sum(nb.late_submission_penalty or 0 for nb in submission.notebooks):g}")
"""


# ---------------------------------------------------------------- backup and restore

BACKED_UP = ("roster.csv", "hub/passwords.csv", "home", "exchange")  # every account's home: course roots too
# the other courses: their list, rosters and course roots
ROSTERS = ("roster.csv", "hub/passwords.csv", f"hub/{ADMINS_RECORD}", COURSES_RECORD, "courses")
NOT_BACKED_UP = (".cache", ".local/share/jupyter/runtime")  # a home's scratch (pip, Jupyter): made again


def _backed_up(layout: Layout) -> list[str]:
    return [*BACKED_UP, f"hub/{ADMINS_RECORD}", COURSES_RECORD, "courses"]


def _arrivals(layout: Layout) -> dict[str, float]:
    """When each submission in the exchange and in each student's nbgrader cache arrived, as the
    server saw it (nboracle.grader.exchange): a restore stamps every file with its own time."""
    from nboracle.grader import exchange as X

    record, found = X.arrival_record(str(layout.exchange)), {}
    for folder in layout.exchange.glob("*/inbound/*+*"):
        key = X.inbound_key(folder.parent.parent.name, folder.name)
        found[key] = X.arrived_at(str(folder), key, record)
    for folder in layout.home.glob("*/.local/share/jupyter/nbgrader_cache/*/*+*"):
        key = X.cache_key(folder.relative_to(layout.home).parts[0], folder.parent.name, folder.name)
        found[key] = X.arrived_at(str(folder), key, record)
    return found


def backup(layout: Layout, to: Path | None = None) -> Path:
    """One archive of the term: rosters, first passwords, every account's home (the students'
    notebooks, unsubmitted work, submissions' cache and fetched feedback; the course roots with
    gradebook, source, submitted, autograded, feedback) and the exchange, owners kept by name,
    with each submission's arrival time."""
    from nboracle.grader.exchange import ARRIVALS

    layout.backups.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.backups, 0o700)  # it holds the gradebook and the passwords
    to = Path(to or layout.backups / f"term-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz")
    record = f"exchange/{ARRIVALS}"

    def kept(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = member.name.split("/")
        if member.name == record or (parts[0] == "home" and "/".join(parts[2:]) in NOT_BACKED_UP):
            return None
        return member

    arrivals = json.dumps({"arrivals": _arrivals(layout)}).encode()
    with tarfile.open(to, "w:gz") as archive:
        for part in _backed_up(layout):
            if (layout.state / part).exists():
                archive.add(layout.state / part, arcname=part, filter=kept)
        info = tarfile.TarInfo(record)
        info.size, info.mode, info.mtime, info.uname, info.gname = len(arrivals), 0o644, time.time(), "root", "root"
        archive.addfile(info, io.BytesIO(arrivals))
    os.chmod(to, 0o600)
    print(f"backup of {layout.state}: {to}")
    return to


def _busy(name: str) -> bool:
    """``name`` is an account that runs processes now (``pgrep -u``)."""
    return _exists(name) and subprocess.run(["pgrep", "-u", name], capture_output=True).returncode == 0


def _accounts_in_use(people: list[R.Person]) -> list[str]:
    """The roster's existing accounts that run processes now."""
    return [person.id for person in people if _busy(person.id)]


def restore(layout: Layout, archive_path: Path) -> int:
    """A term from ``backup``'s archive into this state folder: the accounts first (from its
    rosters), then the files with their owners; the hub must not run there."""
    if _hub_running(layout):
        sys.exit("the hub runs on this state folder: make hub-stop first")
    if (layout.course / "gradebook.db").exists():
        sys.exit(f"{layout.course} already holds a gradebook: restore into an empty state folder "
                 "(--state), or move that one away first")
    with tarfile.open(archive_path) as archive, tempfile.TemporaryDirectory() as scratch:
        members = archive.getmembers()
        first = [m for m in members if m.name in ROSTERS or m.name.startswith("courses/")]
        if not any(m.name == "roster.csv" and m.isfile() for m in first):
            sys.exit(f"{archive_path} holds no roster.csv: it is not an archive of make hub-backup")
        archive.extractall(scratch, members=[m for m in first if m.name != "hub/passwords.csv"], filter="data")
        listed = Layout(Path(scratch))
        busy = _accounts_in_use(listed.everyone()) + [g for g in listed.graders()[1:] if _busy(g)]
        if busy:  # moving their homes would pull them from under the hub that runs them: nothing is touched
            sys.exit(f"the term's accounts {', '.join(busy)} run processes on this machine (a hub from another "
                     "state folder?): stop that hub first (make hub-stop), then restore")
        _state_folders(layout)
        archive.extractall(layout.state, members=first, filter="fully_trusted")
        _accounts(layout, layout.everyone())
        archive.extractall(layout.state, members=[m for m in members if m not in first],
                           filter="fully_trusted")
    _record_restored(layout)
    os.chmod(layout.passwords, 0o600)
    prepare(layout)
    print(f"restored {archive_path} into {layout.state}: make hub HUB_STATE={layout.state}")
    return 0


def _record_restored(layout: Layout) -> None:
    """The arrival times the backup kept, for the submissions nobody changed since this restore
    (root's file at the exchange's root: what students' servers and collect read)."""
    from nboracle.grader.exchange import ARRIVALS

    path = layout.exchange / ARRIVALS
    kept = json.loads(path.read_text()).get("arrivals", {}) if path.exists() else {}
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump({"restored_at": time.time(), "arrivals": kept}, handle)
    os.chown(path, 0, 0)
    os.chmod(path, 0o644)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instructor.hub", description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("HUB_STATE", DEFAULT_STATE)))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("start", help="start the hub (accounts from the roster, the course root)")
    p.add_argument("--port", type=int, default=int(os.environ.get("HUB_PORT", 8000)))
    p.add_argument("--ip", default=os.environ.get("HUB_IP", "127.0.0.1"))
    p.add_argument("--background", action="store_true")
    p.add_argument("--roster", type=Path, help=f"the class list of a new term (default {DEFAULT_ROSTER})")
    p = sub.add_parser("prepare", help="accounts, folders and the course root, without starting")
    p.add_argument("--roster", type=Path)
    p = sub.add_parser("stop", help="stop the hub, every server and the service")
    p.add_argument("--purge", action="store_true", help="then remove the accounts it created and the state folder")
    p = sub.add_parser("roster", help="the class list: import FILE (add or update), drop ID..., list")
    p.add_argument("action", choices=["import", "drop", "list"])
    p.add_argument("items", nargs="*", help="import: one CSV file; drop: ids")
    p.add_argument("--course", help=f"another course's roster (default {COURSE_ID})")
    p = sub.add_parser("export", help="grades of the roster's students for an LMS")
    p.add_argument("--to", type=Path, default=Path("grades-lms.csv"))
    p.add_argument("--layout", choices=R.LAYOUTS, default="long",
                   help="long: a row per student and assignment; canvas, moodle: a row per student")
    p.add_argument("--course", help=f"another course's grades (default {COURSE_ID})")
    p = sub.add_parser("extend", help="a student's extension for an assignment: before or after the due date "
                       "and any submission; --hours 0 takes it back")
    p.add_argument("--course", help=f"another course's assignment (default {COURSE_ID})")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("--hours", type=_hours, required=True, help="hours after the due date; 0 removes the extension")
    p = sub.add_parser("course", help="another course on this hub: add ID --roster FILE [--source DIR], list")
    p.add_argument("action", choices=["add", "list"])
    p.add_argument("id", nargs="?", help="add: the course id (nbgrader's, and the hub's groups and service)")
    p.add_argument("--roster", type=Path, help="add: its class list (the roster's CSV layout)")
    p.add_argument("--source", type=Path, help="add: its source/ folder (default: this course's)")
    p.add_argument("--config", type=Path,
                   help="add: its nbgrader_config.py (default: the one beside --source, else this course's)")
    p = sub.add_parser("admin", help="the hub's administrators: add ID..., drop ID..., list (no lecturer by role)")
    p.add_argument("action", choices=["add", "drop", "list"])
    p.add_argument("names", nargs="*")
    p = sub.add_parser("backup", help="one archive of the term (roster, gradebook, submissions, exchange)")
    p.add_argument("--to", type=Path)
    p = sub.add_parser("restore", help="a term from backup's archive, into an empty state folder")
    p.add_argument("archive", type=Path)
    # the old spelling: start/stop/prepare after the options
    args = parser.parse_args(_options_first(argv if argv is not None else sys.argv[1:]))
    try:
        return _run(args)
    except R.RosterError as err:  # on every path that reads a roster (start --roster, import, course add)
        sys.exit(f"nothing changed: {err}")


def _run(args: argparse.Namespace) -> int:
    layout = Layout(args.state)
    if args.command == "start":
        if args.roster and not layout.roster.exists():
            prepare(layout, args.roster)
        return start(layout, args.port, args.background, args.ip)
    if args.command == "prepare":
        prepare(layout, args.roster)
        return 0
    if args.command == "stop":
        stop(layout)
        return purge(layout) if args.purge else 0
    if os.geteuid() != 0:
        sys.exit("python -m instructor.hub runs as root (the accounts, the state folder)")
    if args.command == "roster":
        course = layout.course_named(args.course)
        if args.action == "import":
            if len(args.items) != 1:
                sys.exit("roster import FILE: one CSV file")
            return roster_import(layout, Path(args.items[0]), course)
        return roster_drop(layout, args.items, course) if args.action == "drop" else roster_list(layout, course)
    if args.command == "course":
        if args.action == "list":
            return course_list(layout)
        if not args.id or not args.roster:
            sys.exit("course add ID --roster FILE [--source DIR]")
        return course_add(layout, args.id, args.roster, args.source, args.config)
    if args.command == "export":
        export(layout, args.to, args.layout, layout.course_named(args.course))
        return 0
    if args.command == "extend":
        return extend(layout, args.assignment, args.student, args.hours, layout.course_named(args.course))
    if args.command == "admin":
        return admin(layout, args.action, args.names)
    if args.command == "backup":
        backup(layout, args.to)
        return 0
    return restore(layout, args.archive)


def _hours(text: str) -> float:
    """``--hours``: a number of hours (argparse says so in one line when it is none)."""
    try:
        return float(text.strip().lower().removesuffix("h"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is no number of hours (e.g. 48, or 0 to take an extension back)") from None


def _options_first(argv: list[str]) -> list[str]:
    """``start --state X`` as well as ``--state X start``: --state moves before the command."""
    out, rest, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--state" and i + 1 < len(argv):
            out += argv[i:i + 2]
            i += 2
        elif argv[i].startswith("--state="):
            out.append(argv[i])
            i += 1
        else:
            rest.append(argv[i])
            i += 1
    return out + rest


if __name__ == "__main__":
    sys.exit(main())
