"""The instructor tooling: clear errors on bad input, and no solution in the student package."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_chapters import ASSIGNMENTS, solution_lines, source_nb

from instructor import pipeline as P


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "instructor", *args], cwd=P.REPO,
                          capture_output=True, text=True, env=P.tool_env())


def test_cli_rejects_an_unknown_assignment():
    proc = run_cli("build", "99_nope")
    assert proc.returncode == 2
    assert "no assignment '99_nope'" in proc.stderr and "01_two_keys" in proc.stderr


def test_fill_rejects_unknown_cells():
    nb = P.read_nb(P.REPO / "release" / "01_two_keys" / "two_keys.ipynb")
    with pytest.raises(P.PipelineError, match="no cells with grade_id"):
        P.fill(nb, {"not_a_cell": "x = 1"})


def test_solution_answers_drop_the_markers():
    answers = P.solution_answers(source_nb("01_two_keys"))
    assert set(answers) >= {"softmax", "attention", "hand_answers"}
    assert not any("BEGIN SOLUTION" in a or "END SOLUTION" in a for a in answers.values())


def test_a_broken_config_is_an_error_not_a_warning(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text("raise RuntimeError('broken on purpose')\n")
    with pytest.raises(P.PipelineError, match="failed to load"):
        P.nbgrader("db", "assignment", "list", cwd=tmp_path)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_course_package_contains_no_solution(assignment):
    """course/ ships to students: no line of any solution may appear in it."""
    package = "\n".join(p.read_text() for p in (P.REPO / "course").rglob("*.py"))
    shipped = {line.strip() for line in package.splitlines()}
    leaked = [line for line in solution_lines(source_nb(assignment)) if line in shipped]
    assert not leaked, f"course/ contains solution lines of {assignment}: {leaked[:3]}"
