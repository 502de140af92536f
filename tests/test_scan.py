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
    # the machinery of gc, inspect and traceback stays a finding (their plain functions are not: below)
    ("import gc\ngc.get_objects()", "imports gc"),
    ("import inspect\ninspect.stack()", "uses inspect.stack"),
    ("import inspect as ins\nframes = ins.getouterframes(f)", "uses inspect.getouterframes"),
    ("from inspect import stack", "imports inspect"),
    ("import traceback\ntraceback.print_stack()", "uses traceback.print_stack"),
    ("import gc\ngetattr(gc, 'get_objects')()", "uses the module gc itself"),
    ("import gc\ncollector = gc", "imports gc"),
    ("open('/tmp/../etc/passwd')", "outside the notebook's folder"),
    ("open('/tmpfs/x')", "outside the notebook's folder"),
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
    # honest habits (issue 29, item 8): each was a review flag before
    "import gc\ndel big\ngc.collect()",
    "import traceback\ntry:\n    attention(Q, K, V)\nexcept Exception:\n    traceback.print_exc()",
    "import inspect\nprint(inspect.signature(attention))\nfrom inspect import signature",
    "plt.savefig('/tmp/x.png')",
    "inspect = [1, 2]\nprint(inspect)",  # a variable of that name, not the module
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


# Honest habits a student brings from other notebooks: rich display, reloading edited modules,
# timing, inline plots, capturing output. Each is added as its own cell to the instructor's
# solution of chapter 01; none may be flagged.
HONEST_CELLS = {
    "display_math": 'from IPython.display import display, Math\ndisplay(Math(r"\\frac{QK^\\top}{\\sqrt{d_k}}"))',
    "display_markdown": "from IPython.display import Markdown, HTML\nMarkdown('**weights** sum to 1')",
    "display_module": "import IPython.display as ipd\nfrom IPython import display\nipd.display(1)\ndisplay.display(2)",
    "autoreload": "%load_ext autoreload\n%autoreload 2\nimport course",
    "inline_plots": "%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\nimport matplotlib.pyplot as plt",
    "timing": "%%time\nout = softmax(np.zeros((3, 4)))\n%timeit softmax(np.zeros((3, 4)))",
    "capture": "%%capture printed\nprint('a lot of output')",
    "listing": "%who\n%whos\n%precision 3\n%pprint",
}


@pytest.mark.parametrize("habit", sorted(HONEST_CELLS))
def test_honest_notebook_habits_are_never_flagged(habit):
    release_nb, answers = REPOSITORY.release_and_answers("01_two_keys")
    filled = P.fill(release_nb, answers)
    filled.cells.insert(1, nbformat.v4.new_code_cell(HONEST_CELLS[habit]))
    filled.cells.append(nbformat.v4.new_code_cell(HONEST_CELLS[habit]))
    assert scan_notebook(filled) == []


@pytest.mark.parametrize("code, fragment", [
    ("from IPython import get_ipython", "get_ipython"),
    ("import IPython\nIPython.get_ipython()", "imports IPython"),
    ("from IPython.display import display\nimport IPython.core.interactiveshell", "imports IPython.core.interactiveshell"),
    ("%load_ext my_extension", "%load_ext"),
    ("%load_ext autoreload my_extension", "%load_ext"),
    ("%xmode Verbose", "%xmode"),
    ("%debug", "%debug"),
])
def test_machinery_next_to_the_honest_habits_is_still_found(code, fragment):
    found = " ".join(scan_source(code))
    assert fragment in found, found


def test_a_module_alias_from_another_cell_is_followed():
    """``import inspect as ins`` in one cell, ``ins.stack()`` in the next: still a finding (kills
    the mutant that only knows the aliases of the cell being scanned)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import inspect as ins"),
                                         nbformat.v4.new_code_cell("frames = ins.stack()")])
    found = [reason for _, reason in scan_notebook(nb)]
    assert any("uses inspect.stack" in r for r in found), found
