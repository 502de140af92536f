"""Handed-in notebooks with duplicated, deleted, reordered or foreign graded cells (issue 22).

Each case is mended the way nbgrader intends (restored from the gradebook, duplicates dropped
with a note), checked first on the notebook itself (fast), then graded end to end: no student
crashes the grader, each gets what their work earns, every repair is a review reason, and the
handed-in file is never changed.
"""

from __future__ import annotations

import copy

import nbformat
import pytest
from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from nboracle.grader import repair as R
from support import CLASS_ASSIGNMENT as A
from support import CLASS_NOTEBOOK as NB
from support import CLASS_POINTS

from instructor.repository import REPOSITORY


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = REPOSITORY.scratch_copy(tmp_path_factory.mktemp("repair"), [A])
    release, answers = root.release_and_answers(A)
    expected = R.expected_from_gradebook(root.sqlite_url, NB, A)
    return root, release, answers, expected


def ids(nb):
    return [P.grade_id(c) for c in nb.cells]


def graded(nb):
    return [g for g in ids(nb) if g]


def at(nb, gid):
    return ids(nb).index(gid)


# ---------------------------------------------------------------- the cases, as students make them


def duplicated_solution_edited_copy(release, answers):
    """Lab's copy of the softmax cell, below it; the student wrote the answer in the copy."""
    nb = P.fill(release, {g: a for g, a in answers.items() if g != "softmax"})
    i = at(nb, "softmax")
    twin = copy.deepcopy(nb.cells[i])
    twin.id, twin.source = "twin-cell", answers["softmax"]
    nb.cells.insert(i + 1, twin)
    return nb


def duplicated_solution_copy_above(release, answers):
    """The student's answer first, an untouched copy of the stub below it (it would undo the answer)."""
    nb = P.fill(release, answers)
    i = at(nb, "softmax")
    stub = copy.deepcopy(release.cells[at(release, "softmax")])
    stub.id = "stub-copy"
    nb.cells.insert(i + 1, stub)
    return nb


def duplicated_test(release, answers):
    nb = P.fill(release, answers)
    i = at(nb, "test_softmax_rows")
    twin = copy.deepcopy(nb.cells[i])
    twin.id = "twin-test"
    nb.cells.insert(i + 3, twin)
    return nb


def deleted_test_and_solution(release, answers):
    """softmax written in a new cell of its own; the solution cell and a test deleted."""
    nb = P.fill(release, answers)
    own = nbformat.v4.new_code_cell(answers["softmax"])
    nb.cells[at(nb, "softmax")] = own
    del nb.cells[at(nb, "test_softmax_rows")]
    return nb


def reordered(release, answers):
    """A test dragged above the solution cell it tests."""
    nb = P.fill(release, answers)
    cell = nb.cells.pop(at(nb, "test_softmax_values"))
    nb.cells.insert(at(nb, "softmax"), cell)
    return nb


def metadata_lost(release, answers):
    nb = P.fill(release, answers)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    return nb


CASES = {
    "dup-solution": duplicated_solution_edited_copy,
    "dup-solution-stub-below": duplicated_solution_copy_above,
    "dup-test": duplicated_test,
    "deleted": deleted_test_and_solution,
    "reordered": reordered,
    "no-metadata": metadata_lost,
}


def test_a_duplicated_solution_keeps_the_copy_the_student_edited(course):
    _, release, answers, expected = course
    mended, notes = R.repair(duplicated_solution_edited_copy(release, answers), expected)
    assert ids(mended).count("softmax") == 1
    assert mended.cells[at(mended, "softmax")].source == answers["softmax"]
    assert "solution cell softmax was handed in 2 times" in notes[0] and "stub were dropped" in notes[0]


def test_an_unedited_stub_copy_below_the_answer_is_dropped(course):
    _, release, answers, expected = course
    nb = duplicated_solution_copy_above(release, answers)
    mended, notes = R.repair(nb, expected)
    assert len(mended.cells) == len(nb.cells) - 1
    assert "raise NotImplementedError" not in "".join(c.source for c in mended.cells if "def softmax" in c.source)
    assert notes and "softmax" in notes[0]


def test_two_edited_copies_both_run_in_the_students_order(course):
    _, release, answers, expected = course
    nb = duplicated_solution_edited_copy(release, answers)
    nb.cells[at(nb, "softmax")].source = "def softmax(scores, axis=-1):\n    return scores  # first try"
    mended, notes = R.repair(nb, expected)
    assert len(mended.cells) == len(nb.cells), "no edited copy is dropped"
    sources = [c.source for c in mended.cells]
    assert sources.index(answers["softmax"]) > [i for i, s in enumerate(sources) if "first try" in s][0]
    assert mended.cells[at(mended, "softmax")].source.endswith("# first try")
    assert "1 other edited copies run as ordinary cells" in notes[0]


def test_a_duplicated_test_is_dropped(course):
    _, release, answers, expected = course
    mended, notes = R.repair(duplicated_test(release, answers), expected)
    assert graded(mended) == graded(release)
    assert notes == ["test cell test_softmax_rows was handed in 2 times: the copies were dropped"]


def test_deleted_cells_come_back_in_place_and_an_empty_solution_keeps_the_students_code(course):
    _, release, answers, expected = course
    mended, notes = R.repair(deleted_test_and_solution(release, answers), expected)
    assert graded(mended) == graded(release)
    solution = mended.cells[at(mended, "softmax")]
    assert "raise" not in solution.source and solution.source.startswith("#")
    restored = mended.cells[at(mended, "test_softmax_rows")]
    assert restored.source == expected.cells["test_softmax_rows"]["source"]
    assert any("test_softmax_rows" in n and "put back as released" in n for n in notes)
    assert any("softmax" in n and "put back empty" in n for n in notes)


def test_a_test_moved_above_its_solution_is_moved_back(course):
    _, release, answers, expected = course
    mended, notes = R.repair(reordered(release, answers), expected)
    assert graded(mended) == graded(release)
    assert notes == ["test cell test_softmax_values was above test_softmax_stable: moved below it, as released"]


def test_a_test_cell_turned_into_an_ungraded_cell_is_graded_again(course):
    _, release, answers, expected = course
    nb = P.fill(release, answers)
    nb.cells[at(nb, "test_softmax_rows")].metadata.nbgrader.update(grade=False, locked=False, solution=True)
    nb.cells[at(nb, "imports")].metadata["nbgrader"] = "not a dict"
    mended, notes = R.repair(nb, expected)
    meta = mended.cells[at(mended, "test_softmax_rows")].metadata.nbgrader
    assert (meta["grade"], meta["solution"], meta["locked"], meta["points"]) == (True, False, True, 1.0)
    assert "test_softmax_rows had been changed" in " ".join(notes) and "imports" in " ".join(notes)


def test_a_clean_submission_is_left_alone(course):
    _, release, answers, expected = course
    nb = P.fill(release, answers)
    mended, notes = R.repair(nb, expected)
    assert notes == [] and mended == nb


def test_another_chapters_notebook_is_named(course):
    root, release, _, _ = course
    other = P.read_nb(REPOSITORY.notebook("release", "02_scaling"))
    assert R.wrong_chapter(other, A, REPOSITORY.path).startswith("this is 02_scaling's notebook (scaling.ipynb)")
    assert R.wrong_chapter(release, A, REPOSITORY.path) is None
    assert R.wrong_chapter(metadata_lost(release, {}), A, REPOSITORY.path) is None


# ---------------------------------------------------------------- graded end to end


@pytest.mark.pipeline
def test_every_case_is_graded_never_a_crash(course):
    root, release, answers, _ = course
    handed_in = {}
    for student, make in CASES.items():
        handed_in[student] = root.submit(A, student, make(release, answers)).read_bytes()
    root.submit(A, "wrong-chapter", P.read_nb(REPOSITORY.notebook("release", "02_scaling")), name=NB)
    root.submit(A, "copy1", release)
    root.submit(A, "copy1", P.fill(release, answers), name=f"{NB}-Copy1")
    reports = batch.grade_class(root, A, jobs=2, progress=False)

    assert reports["wrong-chapter"].status == "skipped"
    assert "this is 02_scaling's notebook (scaling.ipynb)" in reports["wrong-chapter"].problems[0]
    for student in CASES:
        assert reports[student].status == "graded", (student, reports[student].problems)
        assert reports[student].review, f"{student}: a repaired notebook is flagged for review"
        assert root.notebook("submitted", A, student).read_bytes() == handed_in[student], "handed-in file changed"
    for student in ("dup-solution", "dup-solution-stub-below", "dup-test", "reordered", "no-metadata"):
        assert reports[student].score == reports[student].max_score == CLASS_POINTS, (student, reports[student].failed_cells)
    # softmax written in a cell of its own keeps its points; the deleted test is put back and passes
    assert reports["deleted"].score == CLASS_POINTS, reports["deleted"].failed_cells
    # the released name is graded (the empty one), the copy holding the work is named with its answers
    assert reports["copy1"].score == 0 and reports["copy1"].max_score == CLASS_POINTS
    reason = " ".join(reports["copy1"].review)
    assert f"{NB}.ipynb (0 of 5 answers filled in) was graded" in reason and f"{NB}-Copy1.ipynb (4 of 5" in reason
    # plain nbgrader (no batch inspection) refuses the other chapter's notebook by name too
    proc = root.nbgrader("autograde", A, "--force", "--create", "--student=wrong-chapter", check=False)
    assert proc.returncode != 0 and "this is 02_scaling's notebook" in proc.stderr
    assert "KeyError" not in proc.stderr
    rows = {r["student_id"]: r for r in __import__("csv").DictReader(root.export(root.path / "g.csv").open())}
    assert rows["copy1"]["needs_review"] == "yes" and f"{NB}-Copy1.ipynb" in rows["copy1"]["review_reasons"]
