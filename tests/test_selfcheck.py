"""The learner's self-check: hidden tests on a copy of their notebook, never the notebook itself."""

from __future__ import annotations

import pytest

from instructor import pipeline as P
from instructor.course_root import REPOSITORY
from instructor.selfcheck import self_check
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
    assert "FAIL test_attention_scaling" in out and "too peaked, were the scores divided by sqrt(d_k)?" in out
    assert "automatic points: 8 of 11" in out and "feedback: " in out
    assert buggy.read_bytes() == before, "the learner's notebook must never be modified"

    solved = tmp_path / "two_keys.ipynb"
    P.write_nb(P.fill(release_nb, answers), solved)
    assert self_check(solved) == 0  # the assignment is inferred from the file name
    assert "automatic points: 11 of 11" in capsys.readouterr().out


def test_self_check_rejects_what_it_cannot_grade(tmp_path):
    broken = tmp_path / "two_keys.ipynb"
    broken.write_text("{ not json")
    with pytest.raises(P.PipelineError, match="not a readable notebook"):
        self_check(broken)
    with pytest.raises(P.PipelineError, match="cannot tell which assignment"):
        P.write_nb(P.read_nb(REPOSITORY.notebook("release", A)), tmp_path / "mystery.ipynb")
        self_check(tmp_path / "mystery.ipynb")
