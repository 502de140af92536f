"""The learner's self-check: hidden tests on a copy of their notebook, never the notebook itself."""

from __future__ import annotations

import nbformat
import pytest
from nboracle.classroom import pipeline as P
from nboracle.classroom.selfcheck import explain, manual_points, private_root, self_check, timed_out

from instructor.repository import REPOSITORY
from instructor.zoo import variants_for

pytestmark = pytest.mark.pipeline
A = "01_two_keys"


def test_self_check_reports_bugs_and_full_marks(tmp_path, capsys):
    release_nb, answers = REPOSITORY.release_and_answers(A)
    bug = next(v for v in variants_for(A) if v.name == "attention_no_scale")
    buggy = tmp_path / "my_attempt.ipynb"
    P.write_nb(P.fill(release_nb, bug.answers(answers)), buggy)
    before = buggy.read_bytes()

    assert self_check(buggy, A) == 0
    out = capsys.readouterr().out
    assert "running test_attention_scaling" in out, "no progress while the cells run"
    assert "FAIL test_attention_scaling" in out and "too peaked, divide the scores by sqrt(d_k)" in out
    assert "automatic points: 9 of 12" in out and "feedback: " in out
    assert "graded by hand: 2 more points (equal_keys_answer: 2)" in out and "feedback shows 9/14" in out
    assert "the model answers and rubrics are the cells equal_keys_answer of " in out and "two_keys.ipynb" in out
    assert buggy.read_bytes() == before, "the learner's notebook must never be modified"

    private = private_root(REPOSITORY, A)
    built = (private.path / ".selfcheck-stamp").stat().st_mtime_ns, private.notebook("release", A).stat().st_mtime_ns
    renamed = tmp_path / "elsewhere" / "my_two_keys (copy).ipynb"  # neither its folder nor its name says 01
    renamed.parent.mkdir()
    P.write_nb(P.fill(release_nb, answers), renamed)
    assert self_check(renamed) == 0  # the assignment is recognised by the cells' grade ids
    out = capsys.readouterr().out
    assert f"as {A}" in out and "automatic points: 12 of 12" in out
    after = (private.path / ".selfcheck-stamp").stat().st_mtime_ns, private.notebook("release", A).stat().st_mtime_ns
    assert after == built, "the self-check course was rebuilt although source/ did not change"


def test_self_check_rejects_what_it_cannot_grade(tmp_path):
    broken = tmp_path / "two_keys.ipynb"
    broken.write_text("{ not json")
    with pytest.raises(P.PipelineError, match="not a readable notebook"):
        self_check(broken)
    mystery = nbformat.v4.new_notebook()
    mystery.cells = [nbformat.v4.new_code_cell("print('my own notes')")]
    P.write_nb(mystery, tmp_path / "mystery.ipynb")
    with pytest.raises(P.PipelineError, match="cannot tell which assignment"):
        self_check(tmp_path / "mystery.ipynb")


def test_manual_points_and_timeouts_are_named():
    assert manual_points(P.read_nb(REPOSITORY.notebook("release", A))) == {"equal_keys_answer": 2.0}
    nb = nbformat.v4.new_notebook()
    looping = nbformat.v4.new_code_cell("while True: pass")
    looping.metadata["nbgrader"] = {"grade_id": "attention", "solution": True, "grade": False}
    looping.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[])]
    honest = nbformat.v4.new_code_cell("x = 1")
    nb.cells = [honest, looping]
    assert timed_out(nb) == ["attention"]
    assert "time limit" in explain("KeyboardInterrupt: ")


def test_self_check_names_a_cell_stopped_at_the_time_limit(tmp_path, capsys):
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    with open(root.config, "a") as config:
        config.write("\nc.Execute.timeout = 6  # a short limit for this test\n")
    release_nb, answers = REPOSITORY.release_and_answers(A)
    looping = dict(answers, hand_answers="while True:  # an infinite loop at the top of a cell\n    pass\n")
    notebook = tmp_path / "two_keys.ipynb"
    P.write_nb(P.fill(release_nb, looping), notebook)
    assert self_check(notebook, A, root=root) == 0
    out = capsys.readouterr().out
    assert "interrupted: hand_answers ran past the time limit (6 s per cell)" in out, out
    assert "FAIL test_hand_answers" in out and "automatic points: 10 of 12" in out


@pytest.mark.parametrize("long_name", ["test_masked_attention_pad_invariance", "test_gradients_reach_every_parameter_x"])
def test_score_table_keeps_its_columns_for_long_names(long_name):
    """The points column starts at one place on every line, however long a test cell's name."""
    from nboracle.classroom.selfcheck import score_lines

    cells = {gid: P.CellResult(gid, score, 1.0, "" if score else "AssertionError: wrong")
             for gid, score in (("test_a", 1.0), (long_name, 0.0), ("test_quiz_q1", 1.0))}
    lines = [line for line in score_lines(cells) if not line.startswith("      ")]  # messages are indented
    assert len({line.index("/") for line in lines[1:]}) == 1, "\n".join(lines)  # the scores, one under another
    assert {len(line) for line in lines} == {len(lines[0])}, "\n".join(lines)  # "points" ends where they end
    assert lines[2].startswith(f"FAIL {long_name} ") and lines[1].startswith("ok   test_a ")
