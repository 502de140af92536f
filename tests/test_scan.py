"""The static scan of student code: silent on every honest notebook, loud on attacks (fast, no nbgrader)."""

from __future__ import annotations

import nbformat
import pytest

from instructor import pipeline as P
from instructor.course_root import REPOSITORY
from instructor.scan import refusals, scan_notebook, scan_source, student_cells


@pytest.mark.parametrize("assignment", REPOSITORY.assignments())
def test_solutions_and_released_notebooks_are_never_flagged(assignment):
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    assert scan_notebook(release_nb) == [], "the released notebook itself would be flagged"
    filled = P.fill(release_nb, answers)
    assert student_cells(filled), "no student cells found"
    assert scan_notebook(filled) == [], "the instructor's solution would be flagged"


@pytest.mark.parametrize("code, fragment", [
    ("get_ipython().input_transformers_post.append(f)", "get_ipython"),
    ("ip.ast_transformers.append(T())", ".ast_transformers"),
    ("ip.set_custom_exc((Exception,), h)", ".set_custom_exc"),
    ("type(ip).showtraceback = None", ".showtraceback"),
    ("ip.events.callbacks.clear()", ".events"),
    ("import sys\nsys.settrace(f)", ".settrace"),
    ("sys.excepthook = f", ".excepthook"),
    ("import builtins\nbuiltins.abs = f", "imports builtins"),
    ("import gc\ngc.get_referrers(x)", "imports gc"),
    ("import ctypes", "imports ctypes"),
    ("np.allclose = lambda *a, **k: True", "replaces np.allclose"),
    ("setattr(course, 'check_close', f)", "calls setattr(course"),
    ("globals()['check_close'] = f", "writes globals()"),
    ("import sqlite3\nsqlite3.connect('../../gradebook.db')", "the gradebook"),
    ("import subprocess", "other processes"),
    ("import os\nos.fork()", ".fork"),
    ("import socket", "the network"),
    ("open('/etc/passwd')", "outside the notebook's folder"),
    ("open('../other/x.txt', 'w')", "outside the notebook's folder"),
    ("!cat /etc/passwd", "shell command"),
    ("exec(code)", "exec/eval/compile"),
])
def test_attacks_are_found(code, fragment):
    found = " ".join(scan_source(code))
    assert fragment in found, found


@pytest.mark.parametrize("code", [
    "weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d), axis=-1)\nreturn weights @ V",
    "%time out = attention(Q, K, V)",
    "model = torch.compile(model)\npattern = re.compile('a/b')",
    "events = [1, 2]\nplt.title('1/sqrt(d_k)')",
    "def f(x):\n    return x / 2  # see ../README",
])
def test_ordinary_code_is_not_flagged(code):
    assert scan_source(code) == []


def test_sandbox_refusals_in_error_outputs():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("error", ename="OSError", evalue="[Errno 30] Read-only file system: 'x'",
                                           traceback=[])]
    other = nbformat.v4.new_code_cell("y")
    other.outputs = [nbformat.v4.new_output("error", ename="FileNotFoundError",
                                            evalue="[Errno 2] No such file or directory: '/course/gradebook.db'",
                                            traceback=[])]
    honest = nbformat.v4.new_code_cell("z")
    honest.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="weights is off", traceback=[])]
    nb.cells = [cell, other, honest]
    found = refusals(nb)
    assert [index for index, _ in found] == [0, 1]
    assert "read-only" in found[0][1] and "outside" in found[1][1]
