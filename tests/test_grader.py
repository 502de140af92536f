"""The grading side of the pipeline (nbgrader-oracle/nboracle/classroom/grader.py): private course roots are swept,
and the instructor's sandbox policy holds on every grader, whatever its machine offers."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from nboracle.classroom import batch
from nboracle.classroom import grader as G
from nboracle.classroom import pipeline as P
from nboracle.grader import sandbox
from support import CLASS_ASSIGNMENT as A
from support import CLASS_POINTS

from instructor.repository import REPOSITORY

pytestmark = pytest.mark.pipeline


def test_a_killed_graders_private_root_is_swept_when_the_next_grader_starts():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = Path(tempfile.gettempdir()) / f"{G.ROOT_PREFIX}{dead}-test"
    (stale / "submitted").mkdir(parents=True, exist_ok=True)
    (stale / "gradebook.db").write_text("hidden tests")
    alive = Path(tempfile.mkdtemp(prefix=f"{G.ROOT_PREFIX}{os.getpid()}-"))
    try:
        assert stale in G.sweep_stale_roots()
        assert not stale.exists() and alive.exists(), "only roots of processes that are gone"
    finally:
        alive.rmdir()


@pytest.fixture
def no_bwrap(monkeypatch):
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    yield
    monkeypatch.undo()
    sandbox.sandbox_status(refresh=True)  # the real status again for the rest of this process


def test_a_grader_that_cannot_sandbox_refuses_unless_the_instructor_said_no_sandbox(tmp_path, no_bwrap):
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    release, answers = root.release_and_answers(A)
    root.submit(A, "solution", P.fill(release, answers))
    with pytest.raises(batch.BatchStopped, match=r"cannot be sandboxed.*--no-sandbox") as stopped:
        batch.grade_class(root, A, runner=batch.InProcess(), progress=False, sandbox_mode="on")
    assert stopped.value.reports["solution"].status == "pending"
    assert not root.folder("autograded", A, "solution").exists()

    reports = batch.grade_class(root, A, runner=batch.InProcess(), progress=False, sandbox_mode="off")
    solution = reports["solution"]
    assert (solution.status, solution.score, solution.sandboxed) == ("graded", CLASS_POINTS, False)
    warning = batch.sandbox_warning(reports)
    assert warning and "1 student(s)" in warning and solution.where in warning and "switched off" in warning
    text = batch.write_report(tmp_path / "report.txt", A, reports).read_text()
    assert text.startswith("WARNING") and f"solution: {solution.where}, NOT SANDBOXED" in text


def test_the_report_says_what_each_kernel_ran_in_not_what_the_machine_offers(tmp_path):
    """A course config whose Execute step is not the sandboxed one: the machine could sandbox,
    but this kernel was not; a stamp forged in the submission changes nothing."""
    if not sandbox.sandbox_status()[0]:
        pytest.skip("no sandbox on this machine: " + sandbox.sandbox_status()[1])
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    with open(root.config, "a") as config:
        config.write("\nc.Autograde.autograde_preprocessors = [step.__bases__[0] if step.__dict__.get('_sandboxed') "
                     "else step for step in c.Autograde.autograde_preprocessors]\n")
    release, answers = root.release_and_answers(A)
    forged = P.fill(release, answers)
    forged.metadata[sandbox.KERNEL_METADATA] = {"sandboxed": True}
    root.submit(A, "solution", forged)
    reports = batch.grade_class(root, A, runner=batch.InProcess(), progress=False, sandbox_mode="on")
    solution = reports["solution"]
    assert (solution.status, solution.score, solution.sandboxed) == ("graded", CLASS_POINTS, False)
    assert "not started by the course's sandboxed Execute step" in solution.sandbox
    warning = batch.sandbox_warning(reports)
    assert warning and "1 student(s)" in warning and solution.where in warning


def test_graders_sharing_a_machine_share_its_cores_out_to_their_kernels(monkeypatch):
    for name in G.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert G.kernel_threads(2) == {name: "4" for name in G.THREAD_VARIABLES}
    assert G.kernel_threads(16) == {name: "1" for name in G.THREAD_VARIABLES}
    assert G.kernel_threads(None) == {}, "one grader alone: torch's own choice"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert G.kernel_threads(2) == {}, "the instructor's setting wins"
