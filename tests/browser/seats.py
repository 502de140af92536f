"""Helpers of the real-browser tests: headless Chromium (Debian's package) drives JupyterLab as a person would.

The servers are the course's own seats, started the way ``make lab`` and ``make formgrader``
start them (``python -m instructor lab|formgrader``), on a free localhost port with a token,
in scratch folders. Screenshots of every step go to ``.artifacts/browser/<time>/`` (git-ignored);
the folder is printed at the end of the run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("COURSE_CHROMEDRIVER", "/usr/bin/chromedriver"))
ARTIFACTS = REPO / ".artifacts" / "browser" / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")


def _missing() -> str | None:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return (f"no browser: {CHROMIUM} and {CHROMEDRIVER} are needed (Debian: apt-get install "
                "chromium chromium-driver, or bash .ci/install-browser)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (make setup installs requirements.txt)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, url: str, token: str, root: Path, log: Path, proc: subprocess.Popen):
        self.url, self.token, self.root, self.log, self.proc = url, token, root, log, proc

    def api(self, path: str) -> bytes:
        request = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()


@contextmanager
def seat(command: str, *args: str, log_name: str):
    """``python -m instructor <command> ARGS`` on a free port; yields a :class:`Server`."""
    argv = [sys.executable, "-m", "instructor", command, *args, "--no-browser"]
    with server(argv, log_name) as running:
        yield running


@contextmanager
def server(argv: list[str], log_name: str, cwd: Path = REPO, env: dict | None = None):
    """A Jupyter server from ``argv`` (port, token and test options added); yields a :class:`Server`."""
    port, token = free_port(), secrets.token_hex(16)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / f"{log_name}.log"
    if env is None:  # as a student's shell: a seat must show plots without help
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env = dict(env, JUPYTER_TOKEN=token)
    argv = [*argv, f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1", "--LabApp.expose_app_in_browser=True"]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    running = Server(f"http://127.0.0.1:{port}", token, cwd, log, proc)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[:4]} exited: {log.read_text()[-3000:]}")
            try:
                running.api("/api/status")
                break
            except OSError as err:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[:4]} did not answer in 90 s: {log.read_text()[-3000:]}") from err
                time.sleep(0.3)
        yield running
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def driver_session():
    """Headless Chromium through Debian's chromedriver, in a fresh profile, quiet on the network."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    browser.set_script_timeout(180)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def driver():
    with driver_session() as browser:
        yield browser


@pytest.fixture
def scratch(tmp_path):
    return tmp_path
