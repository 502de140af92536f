"""A JupyterHub for the course on this machine (``make hub``, ``make hub-stop``, docs/JUPYTERHUB.md).

Everything the hub writes lives in a state folder (default ``.hub/`` in the clone, git-ignored)::

    .hub/home/<account>/            each account's home (mode 700, owned by it): hub/accounts.sh
    .hub/home/grader-attention/course/   the course root (config, source/, gradebook), the
                                         formgrader service's own folder: no other account enters
    .hub/exchange/                  nbgrader's exchange (mode 777; nbgrader makes the course's
                                    inbound 733 and outbound 755 itself)
    .hub/etc/common/                nbgrader_config.py for everyone: course id, exchange
    .hub/etc/student/               students' Jupyter config: no formgrader, no create-assignment
    .hub/hub/                       JupyterHub's database, cookie secret, proxy token, log, pid

The hub runs as root (LocalProcessSpawner: each user's server runs as that system user), logs
in through PAM, and starts the formgrader as a managed service run by ``grader-attention``,
reachable by the group ``formgrade-attention-transformers`` (instructor and assistant).

    python -m instructor.hub start [--state DIR] [--port 8000] [--background]
    python -m instructor.hub stop  [--state DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from nboracle.classroom import pipeline as P

from instructor.repository import REPO

COURSE_ID = "attention-transformers"
SERVICE = "formgrader"  # the hub service's name: /services/formgrader/
GRADER = "grader-attention"
INSTRUCTORS = ("prof-ada",)
ASSISTANTS = ("ta-ben",)
STUDENTS = ("alice", "bob", "carol")
GRADERS_GROUP = f"formgrade-{COURSE_ID}"
STUDENTS_GROUP = f"nbgrader-{COURSE_ID}"
HUB_DIR = REPO / "hub"
DEFAULT_STATE = REPO / ".hub"
TRAVERSE_RECORD = "granted-traverse.json"


def password(name: str) -> str:
    """The TEST password hub/accounts.sh gives ``name`` (a test machine only)."""
    return f"{name}-attention-2026"


def accounts() -> dict[str, str]:
    return {**{n: "instructor (hub admin)" for n in INSTRUCTORS},
            **{n: "teaching assistant" for n in ASSISTANTS},
            **{n: "student" for n in STUDENTS}}


class Layout:
    def __init__(self, state: Path):
        self.state = Path(state).resolve()
        self.home = self.state / "home"
        self.exchange = self.state / "exchange"
        self.common = self.state / "etc" / "common"
        self.student_etc = self.state / "etc" / "student"
        self.hub = self.state / "hub"
        self.course = self.home / GRADER / "course"
        self.pid = self.hub / "jupyterhub.pid"
        self.log = self.hub / "jupyterhub.log"
        self.url_file = self.hub / "url"

    def user_home(self, name: str) -> Path:
        return self.home / name


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


def _hide_source() -> None:
    """The clone every account runs the course from must not show ``source/`` (solutions and
    hidden tests) to students: o-rwx on it (git keeps no folder modes)."""
    source = REPO / "source"
    if source.is_dir():
        os.chmod(source, source.stat().st_mode & ~0o007)


def prepare(layout: Layout) -> None:
    """Accounts, folders, configs and the course root: idempotent; a course root already there
    (a term under way) is kept."""
    if os.geteuid() != 0:
        sys.exit("make hub: the hub runs as root (it starts each user's server as that user)")
    layout.hub.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.hub, 0o700)
    subprocess.run(["bash", str(HUB_DIR / "accounts.sh"), str(layout.state)], check=True,
                   stdout=subprocess.DEVNULL)
    _grant_traverse(layout)
    _hide_source()
    layout.exchange.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.exchange, 0o777)
    for folder in (layout.common, layout.student_etc / "labconfig"):
        folder.mkdir(parents=True, exist_ok=True)
    for folder in (layout.state / "etc", layout.common, layout.student_etc, layout.student_etc / "labconfig"):
        os.chmod(folder, 0o755)
    (layout.common / "nbgrader_config.py").write_text(
        "# Every account's nbgrader (instructor/hub.py): one course, one shared exchange.\n"
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(layout.exchange)!r}\n")
    # Students: the Assignments panel and Validate, no formgrader or create-assignment toolbar.
    (layout.student_etc / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "jpserver_extensions": {"nbgrader.server_extensions.formgrader": False,
                                "nbgrader.server_extensions.course_list": False}}}, indent=1))
    (layout.student_etc / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": {
        "@jupyter/nbgrader:formgrader": True, "@jupyter/nbgrader:create-assignment": True,
        "@jupyter/nbgrader:course-list": True}}, indent=1))
    for path in [*layout.common.iterdir(), *layout.student_etc.rglob("*")]:
        if path.is_file():
            os.chmod(path, 0o644)
    if not (layout.course / "nbgrader_config.py").exists():
        layout.course.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "nbgrader_config.py", layout.course / "nbgrader_config.py")
        shutil.copytree(REPO / "source", layout.course / "source", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        _chown(layout.course, GRADER)
    for name in (*INSTRUCTORS, *ASSISTANTS, *STUDENTS):
        settings = layout.user_home(name) / ".jupyter" / "lab" / "user-settings"
        if not settings.exists():
            from .workspace import _seed_settings

            _seed_settings(settings)
            _chown(layout.user_home(name) / ".jupyter", name)


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
                tail = layout.log.read_text()[-3000:] if background else ""
                sys.exit(f"jupyterhub exited ({proc.returncode}) {tail}")
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
    lines = [f"JupyterHub for the course: {url}/hub/login", "accounts (TEST passwords):"]
    for name, role in accounts().items():
        lines.append(f"  {name:10s} {password(name):28s} {role}")
    lines += [f"formgrader (instructor and assistant): {url}/services/{SERVICE}/",
              # issue 40: the class batch writes what the class got wrong into the course root's mistakes/
              f"what the class got wrong (after grade-class): {url}/services/{SERVICE}/files/mistakes/term.html",
              f"course root: {layout.course}   exchange: {layout.exchange}",
              f"hub log: {layout.log}   stop: make hub-stop (or Ctrl-C on make hub)"]
    return "\n".join(lines)


def _account_pids() -> list[int]:
    """Processes of the hub's own accounts (single-user servers, the service, their kernels)."""
    uids = set()
    for name in (*INSTRUCTORS, *ASSISTANTS, *STUDENTS, GRADER):
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
        pids = _account_pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while _account_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
    _revoke_traverse(layout)
    _lock_accounts()


def _lock_accounts() -> None:
    """The TEST passwords work only while the hub runs: stopping it locks the accounts
    (hub/accounts.sh sets the passwords again at the next start)."""
    for name in (*INSTRUCTORS, *ASSISTANTS, *STUDENTS):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instructor.hub", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["start", "stop", "prepare"])
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("HUB_STATE", DEFAULT_STATE)))
    parser.add_argument("--port", type=int, default=int(os.environ.get("HUB_PORT", 8000)))
    parser.add_argument("--ip", default=os.environ.get("HUB_IP", "127.0.0.1"))
    parser.add_argument("--background", action="store_true")
    args = parser.parse_args(argv)
    layout = Layout(args.state)
    if args.command == "start":
        return start(layout, args.port, args.background, args.ip)
    if args.command == "prepare":
        prepare(layout)
        return 0
    return stop(layout)


if __name__ == "__main__":
    sys.exit(main())
