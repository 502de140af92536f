"""What any nbgrader course may rely on stays as nbgrader has it with the grader switched on (issue 57).

Each is a case nbgrader's own app tests met (``make test-nbgrader`` runs them all): a test cell
that says ``"locked": false``, an assignment of two notebooks, ``penalty_method = 'zero'``, a
notebook older than nbformat 4.5. Unit-sized: no kernel, a sqlite gradebook at most.
"""

from __future__ import annotations

import copy
import itertools
import os
import sys
from datetime import datetime

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nboracle.grader import repair as R
from nboracle.grader.nbgrader_ext import DueDateCell, PerDayPenalty
from traitlets.config import Config


@pytest.fixture
def gradebook_url(tmp_path, monkeypatch):
    """A new sqlite gradebook's URL (nbgrader creates one with the ``alembic`` command of its environment)."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return f"sqlite:///{tmp_path / 'gradebook.db'}"


def graded_cell(source: str, grade_id: str, **flags) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    cell.metadata.nbgrader = {"grade": False, "solution": False, "locked": False, "grade_id": grade_id,
                              "schema_version": 3, **flags}
    return cell


def released() -> nbformat.NotebookNode:
    """As nbgrader's own example notebooks are: the test cell's flag says "locked": false."""
    return new_notebook(cells=[
        new_markdown_cell("# Problem 1"),
        graded_cell("def squares(n):\n    # YOUR CODE HERE\n    raise NotImplementedError()", "squares",
                    solution=True),
        graded_cell("assert squares(1) == [1]", "correct_squares", grade=True, points=1),
        graded_cell("print('provided')", "provided", locked=True),
    ])


@pytest.mark.parametrize("grade, solution, locked", list(itertools.product([False, True], repeat=3)))
def test_a_cell_is_locked_as_nbgrader_reads_it(grade, solution, locked):
    from nbgrader.utils import is_locked

    cell = graded_cell("", "c", grade=grade, solution=solution, locked=locked)
    assert R.is_locked(cell.metadata.nbgrader) == is_locked(cell)


def test_an_untouched_submission_whose_test_cells_say_unlocked_needs_no_repair():
    release = released()
    expected = R.expected_from_notebook(release, "ps1", "p1")
    assert expected.cells["correct_squares"]["locked"]  # as the gradebook stores it (nbgrader's SaveCells)
    handed_in = copy.deepcopy(release)
    handed_in.cells[1].source = "def squares(n):\n    return [i * i for i in range(1, n + 1)]"
    mended, notes = R.repair(handed_in, expected)
    assert notes == [] and mended == handed_in  # not "changed", not sent to manual grading
    # a student who really turned the test into an answer cell is still put back
    handed_in.cells[2].metadata.nbgrader.update(grade=False, solution=True)
    mended, notes = R.repair(handed_in, expected)
    assert mended.cells[2].metadata.nbgrader["grade"] and not mended.cells[2].metadata.nbgrader["solution"]
    assert notes == ["the grader metadata of cell(s) correct_squares had been changed: put back as released"]


def test_the_scan_reads_a_test_cell_that_says_unlocked_as_locked():
    """A student cell that rebinds a name a test cell imports, read by a later test, is a review reason
    whatever the test cell's own ``locked`` flag says (nbgrader locks every test cell)."""
    from nboracle.grader.scan import locked_rebindings

    nb = released()
    nb.cells[2].source = "from math import isclose\n" + nb.cells[2].source
    nb.cells.insert(3, graded_cell("isclose = lambda *a: True", "", solution=False))
    nb.cells[3].metadata.pop("nbgrader")  # a cell the student added
    nb.cells.append(graded_cell("assert isclose(sum(squares(2)), 5)", "more_squares", grade=True, points=1))
    assert [finding for _, finding in locked_rebindings(nb)] == [
        "rebinds isclose, a name a locked cell binds (the notebook's tests and tools)"]


def test_an_assignments_own_notebooks_are_never_strays(tmp_path, gradebook_url):
    from nbgrader.api import Gradebook

    url = gradebook_url
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ps1")
        for name in ("p1", "p2"):
            gradebook.add_notebook(name, "ps1")
    expected = R.expected_from_gradebook(url, "p1", "ps1")
    assert expected.siblings == ["p2"]
    folder = tmp_path / "submitted" / "alice" / "ps1"
    folder.mkdir(parents=True)
    for name in ("p1", "p2"):
        nbformat.write(released(), folder / f"{name}.ipynb")
    assert R.other_notebooks(folder, "p1.ipynb", expected) == []
    nbformat.write(released(), folder / "p1-Copy1.ipynb")  # a copy still is one
    [note] = R.other_notebooks(folder, "p1.ipynb", expected)
    assert note.startswith("2 notebooks handed in: p1.ipynb (") and "not p1-Copy1.ipynb (" in note
    assert "p2" not in note


def test_nbgraders_late_penalty_method_holds_beside_the_per_day_policy():
    zero = Config({"LateSubmissionPlugin": {"penalty_method": "zero"}})
    assert PerDayPenalty(config=zero).late_submission_penalty("s", 7.0, 3600) == 7.0
    zero.PerDayPenalty.percent_per_day = 10
    assert PerDayPenalty(config=zero).late_submission_penalty("s", 7.0, 3600) == 7.0  # the larger of the two
    per_day = PerDayPenalty(percent_per_day=10)
    assert per_day.late_submission_penalty("s", 10.0, 3600) == 1.0
    assert per_day.late_submission_penalty("s", 10.0, 0) is None
    assert PerDayPenalty().late_submission_penalty("s", 10.0, 3600) is None  # nbgrader's 'none': nothing off


@pytest.mark.parametrize("minor", [0, 4, 5])
def test_the_due_date_cell_leaves_every_nbformat_4_notebook_valid(gradebook_url, minor):
    from nbgrader.api import Gradebook

    url = gradebook_url
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ps1", duedate=datetime(2027, 3, 5, 17, 0))
    nb = released()
    nb.nbformat_minor = minor
    if minor < 5:
        for cell in nb.cells:
            cell.pop("id")
    nbformat.validate(nb)
    resources = {"nbgrader": {"db_url": url, "assignment": "ps1"}}
    nb, _ = DueDateCell().preprocess(nb, resources)
    nb, _ = DueDateCell().preprocess(nb, resources)  # generated again: one cell
    nbformat.validate(nb)
    due = [cell for cell in nb.cells if "Due:" in cell.source]
    assert len(due) == 1 and nb.cells.index(due[0]) == 1
    assert ("id" in due[0]) == (minor >= 5)
    assert nb.metadata.nbgrader_oracle.due_utc == "2027-03-05T17:00:00Z"
