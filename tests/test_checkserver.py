"""The warm check server (nboracle.classroom.checkserver) as a learner meets it: `python -m instructor check`
after a first check answers the same, faster, from a server of the learner's own; it ends when idle, when
asked, when its code changed, and when the learner interrupts a check, leaving no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from nboracle.classroom import checkserver
from nboracle.classroom import pipeline as P

from instructor.repository import REPO, REPOSITORY

ASSIGNMENT = "01_two_keys"
TIMING = re.compile(r"^\s*\[\s*\d+/\d+\]\s+[\d.]+ s\s+running .*$", re.M)  # the progress lines name their second


def _env(folder: Path, **extra: str) -> dict[str, str]:
    env = {**P.tool_env(), checkserver.FOLDER: str(folder), checkserver.SWITCH: "on", **extra}
    return env


def _check(notebook: Path, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instructor", "check", str(notebook)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _answers(path: Path) -> bool:
    """A server listens on ``path`` (not only a socket file left there)."""
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _server_pids(folder: Path) -> list[int]:
    found = subprocess.run(["pgrep", "-f", f"nboracle.classroom.checkserver serve {REPO}"], capture_output=True,
                           text=True).stdout.split()
    mine = []
    for pid in found:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if f"{checkserver.FOLDER}={folder}".encode() in environ.split(b"\0"):
            mine.append(int(pid))
    return mine


@pytest.fixture
def notebooks(tmp_path):
    release, answers = REPOSITORY.release_and_answers(ASSIGNMENT)
    solved, stub = tmp_path / "solved" / "two_keys.ipynb", tmp_path / "stub" / "two_keys.ipynb"
    for path, nb in ((solved, P.fill(release, answers)), (stub, release)):
        path.parent.mkdir()
        P.write_nb(nb, path)
    return solved, stub


@pytest.fixture
def folder(tmp_path):
    """The servers' socket folder of one test; every server of it is stopped at the end."""
    path = tmp_path / "server"
    yield path
    subprocess.run([sys.executable, "-m", "instructor", "check", "--stop-server"], cwd=REPO, env=_env(path),
                   capture_output=True, timeout=60)
    for pid in _server_pids(path):
        os.kill(pid, signal.SIGKILL)


def test_a_check_through_the_server_says_and_exits_as_a_check_of_its_own(notebooks, folder):
    solved, stub = notebooks
    alone = {nb: _check(nb, _env(folder, **{checkserver.SWITCH: "off"})) for nb in (solved, stub)}
    assert not folder.exists() or not _answers(folder / "check.sock"), "COURSE_CHECK_SERVER=off started a server"
    first = _check(solved, _env(folder))  # no server yet: checked here, then one starts for the next checks
    assert "a check server stays ready in the background" in first.stderr
    assert _wait_for(lambda: _answers(folder / "check.sock"), 120), (folder / "server.log").read_text()
    for nb in (solved, stub, solved):
        served = _check(nb, _env(folder))
        assert served.returncode == alone[nb].returncode
        assert TIMING.sub("", served.stdout) == TIMING.sub("", alone[nb].stdout)
        assert "a check server stays ready" not in served.stderr  # nothing new started
    log = (folder / "server.log").read_text()
    assert len(re.findall(r"served \[.*\] in [\d.]+ s, exit 0", log)) == 3, log
    assert folder.stat().st_mode & 0o077 == 0, "the socket's folder is open to other users"


def test_the_server_ends_when_idle_or_asked_and_leaves_nothing(folder):
    env = _env(folder, **{checkserver.IDLE: "4"})
    server = subprocess.Popen([sys.executable, "-m", "nboracle.classroom.checkserver", "serve", str(REPO),
                               "instructor.__main__:main"], env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _wait_for(lambda: _answers(folder / "check.sock"), 120)
    assert server.wait(timeout=60) == 0  # four idle seconds later
    assert not (folder / "check.sock").exists()
    server = subprocess.Popen([sys.executable, "-m", "nboracle.classroom.checkserver", "serve", str(REPO),
                               "instructor.__main__:main"], env=_env(folder), cwd=REPO, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _wait_for(lambda: _answers(folder / "check.sock"), 120)
    stopped = subprocess.run([sys.executable, "-m", "instructor", "check", "--stop-server"], cwd=REPO, env=_env(folder),
                             capture_output=True, text=True, timeout=60)
    assert "the check server has ended" in stopped.stdout
    assert server.wait(timeout=30) == 0 and not (folder / "check.sock").exists()


def test_an_interrupted_check_ends_the_server_and_its_kernels(notebooks, folder, tmp_path):
    """Ctrl-C in the command interrupts the check the server runs for it; the server, its kernels and their
    zygote end (nothing of a check cut short is reused)."""
    solved, _ = notebooks
    nb = P.read_nb(solved)
    slow = next(cell for cell in nb.cells if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"))
    slow.source = "import time\ntime.sleep(120)\n" + slow.source
    endless = tmp_path / "slow" / "two_keys.ipynb"
    endless.parent.mkdir()
    P.write_nb(nb, endless)
    server = subprocess.Popen([sys.executable, "-m", "nboracle.classroom.checkserver", "serve", str(REPO),
                               "instructor.__main__:main"], env=_env(folder), cwd=REPO, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _wait_for(lambda: _answers(folder / "check.sock"), 120)
    command = subprocess.Popen([sys.executable, "-m", "instructor", "check", str(endless)], cwd=REPO, env=_env(folder),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(command.stdout), daemon=True)
    reader.start()
    assert _wait_for(lambda: any("starting the grading kernel" in line for line in said), 120), said
    time.sleep(6)  # the kernel starts, then runs the imports and the sleeping solution cell
    assert not any("automatic points" in line for line in said), "the check ended before it was interrupted"
    command.send_signal(signal.SIGINT)
    assert command.wait(timeout=30) == 130
    assert server.wait(timeout=60) == 0, "the server went on after a check cut short"
    assert _wait_for(lambda: not _kernels_of(server.pid), 30), "the kernels' zygote outlived its server"


def _kernels_of(pid: int) -> list[str]:
    """The processes whose command line names the pool of the sandbox's zygote that ``pid`` started."""
    found = subprocess.run(["pgrep", "-f", f"course-sandbox-{pid}-"], capture_output=True, text=True).stdout.split()
    return found


def test_a_changed_module_makes_the_server_stale(tmp_path):
    module = tmp_path / "probe_module.py"
    module.write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import probe_module  # noqa: F401

        stamp = checkserver.module_files()
        assert str(module) in stamp and not checkserver.changed_since(stamp)
        module.write_text("VALUE = 22\n")
        assert checkserver.changed_since(stamp) == [str(module)]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("probe_module", None)
