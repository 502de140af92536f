"""nboracle.classroom.nbgrader_command: nbgrader's command, ended without the module teardown, says and exits as it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from nboracle.classroom.nbgrader_command import exit_status


def command(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nboracle.classroom.nbgrader_command", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120)


def test_a_command_prints_what_nbgrader_prints_and_exits_0(tmp_path):
    done = command("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "nbgrader version" in done.stdout


def test_a_failing_command_keeps_nbgrader_s_exit_status_and_its_whole_log(tmp_path):
    """The log is flushed before the process ends: the error a lecturer must read is there."""
    done = command("autograde", "no_such_assignment", "--force", cwd=tmp_path)
    plain = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "no_such_assignment", "--force"],
                           cwd=tmp_path, text=True, capture_output=True, timeout=120)
    assert done.returncode == plain.returncode != 0
    assert "ERROR" in done.stderr and done.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1]


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (1, 1), (2, 2), (True, 1), (256 + 3, 3)])
def test_exit_status_as_python_gives_it(code, status):
    assert exit_status(code) == status


def test_a_message_is_printed_and_exits_1(capsys):
    assert exit_status("stopped: no course here") == 1
    assert capsys.readouterr().err == "stopped: no course here\n"
