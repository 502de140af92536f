"""The hub suite (make test-hub): a real JupyterHub started by instructor/hub/ as `make hub`
does, in a scratch state folder, and headless Chromium (tests/browser's driver and Lab helper).

Collected only with COURSE_HUB_TESTS=1 (make test-hub sets it; make test and make test-slow
also --ignore this folder); skipped with the reason where root, PAM, the proxy or the browser
is missing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
sys.path.insert(0, str(HERE))
ROSTER = HERE / "roster.csv"  # the term's class: names of our own, not the sample roster's
ADMIN = "it-olga"  # the hub's administrator (python -m instructor.hub admin add)
ARTIFACTS = REPO / ".artifacts" / "hub" / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")


def pytest_ignore_collect(collection_path, config):
    if os.environ.get("COURSE_HUB_TESTS") != "1":
        return True
    return None


def _missing() -> str | None:
    from seats import _missing as browser_missing

    from instructor import hub as H

    if os.geteuid() != 0:
        return "the hub suite runs as root (the hub starts each user's server as that user)"
    if not H.proxy_bin().exists():
        return f"no {H.proxy_bin()}: npm ci --prefix hub (make test-hub does it)"
    if not Path("/etc/pam.d/login").exists():
        return "no PAM service 'login' (/etc/pam.d/login)"
    return browser_missing()


def pytest_collection_modifyitems(config, items):
    reason = _missing()
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


PORTS = 6  # the proxy, its API, the hub, the formgrader services of three courses


def _free_base() -> int:
    """A port p with p..p+5 free (proxy, proxy API, hub, three courses' formgrader services)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base > 60000:
            continue
        try:
            for p in range(base, base + PORTS):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {PORTS} free ports in a row")


class Hub:
    def __init__(self, url: str, state: Path, port: int, env: dict):
        from instructor import hub as H

        self.url, self.state, self.layout, self.port, self.env = url, state, H.Layout(state), port, env

    def password(self, name: str) -> str:
        """The first password the hub gave ``name`` (its passwords file, root only)."""
        return self.layout.password(name)

    def restart(self) -> str:
        """``make hub-stop`` then ``make hub`` on the same state folder and port; what start printed."""
        argv = [sys.executable, "-m", "instructor.hub"]
        subprocess.run([*argv, "stop", f"--state={self.state}"], cwd=REPO, env=self.env, timeout=180, check=True,
                       capture_output=True)
        started = subprocess.run([*argv, "start", "--background", f"--state={self.state}", f"--port={self.port}"],
                                 cwd=REPO, env=self.env, capture_output=True, text=True, timeout=300)
        assert started.returncode == 0, started.stdout + started.stderr
        return started.stdout


@pytest.fixture(scope="session")
def hub():
    """A fresh term from tests/hub/roster.csv: new state (homes, exchange, course root), the hub
    on free ports, stopped at the end (servers, service and proxy with it), its accounts locked."""
    if _missing():
        pytest.skip(_missing())
    state = Path(tempfile.mkdtemp(prefix="attention-hub-", dir="/var/tmp"))
    os.chmod(state, 0o755)
    port = _free_base()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "COURSE_HUB_EXPOSE_APP": "1", "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "instructor.hub"]
    # the hub's administrator, a role of its own (no lecturer is one): from the hub's start
    subprocess.run([*argv, "admin", "add", ADMIN, f"--state={state}"], cwd=REPO, env=env, check=True,
                   capture_output=True, timeout=120)
    started = subprocess.run([*argv, "start", "--background", f"--state={state}", f"--port={port}",
                              f"--roster={ROSTER}"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    print(started.stdout, started.stderr)
    if started.returncode != 0:
        subprocess.run([*argv, "stop", f"--state={state}"], cwd=REPO, env=env)
        raise RuntimeError(f"make hub failed: {started.stdout}\n{started.stderr}")
    try:
        yield Hub(f"http://127.0.0.1:{port}", state, port, env)
    finally:
        subprocess.run([*argv, "stop", f"--state={state}"], cwd=REPO, env=env, timeout=180)
        log = state / "hub" / "jupyterhub.log"
        if log.exists():
            shutil.copy2(log, ARTIFACTS / "jupyterhub.log")
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="session")
def driver():
    from seats import driver_session

    with driver_session() as browser:
        yield browser


def pytest_terminal_summary(terminalreporter):
    if ARTIFACTS.exists():
        terminalreporter.write_line(f"hub screenshots and the hub's log: {ARTIFACTS}")
