"""Start and stop: the accounts, configs and course roots a start prepares, the hub process, stop and purge."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from nboracle.classroom import pipeline as P

from instructor import roster as R

from .accounts import _accounts, _grant_traverse, _hide_from_students, _revoke_traverse, _save_roster
from .layout import (
    COURSE_ID,
    CREATED_RECORD,
    DEFAULT_ROSTER,
    ENGLISH,
    GRADER,
    HUB_DIR,
    ROLE_NAMES,
    SERVICE,
    Course,
    Layout,
    _chown,
    _exists,
    _state_folders,
    as_grader,
)


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
    lines = ["# Every account's nbgrader (instructor/hub/): the shared exchange.",
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
            "# More than one course on this hub (instructor/hub/): nbgrader asks the hub who is in which.",
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
    from ..workspace import _seed_settings

    for name in names:
        settings = layout.user_home(name) / ".jupyter" / "lab" / "user-settings"
        if not settings.exists():
            _seed_settings(settings)
            _chown(layout.user_home(name) / ".jupyter", name)


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
        language = "" if course.language == ENGLISH else f", language {course.language}"
        lines += [f"course {course.id}: roster {course.roster} ({len(R.students(others))} student(s){language}), "
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
