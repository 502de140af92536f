"""Fast checks of the bug zoo against the current source (no nbgrader): every variant still
applies to today's solutions and names test cells that exist and are graded; every alternative
(a correct answer written differently) applies too and expects nothing to fail; every answer
through a library substitute applies and is found by the static scan with the reason it names."""

from __future__ import annotations

import pytest
from nboracle.classroom import pipeline as P
from nboracle.grader.scan import scan_notebook

from instructor.repository import REPOSITORY
from instructor.substitutes import HELPER_ATTRIBUTES, substitutes_for
from instructor.zoo import (
    ONE_LOSS_PENDING,
    alternatives_for,
    chapter_modules,
    library_for,
    parts_of,
    variants_for,
)


def _params():
    return [pytest.param(a, id=a) for a in sorted(chapter_modules())]


@pytest.mark.parametrize("assignment", _params())
def test_zoo_applies_to_the_current_source(assignment):
    assert assignment in REPOSITORY.assignments(), f"zoo module for {assignment}, which is not under source/"
    nb = P.read_nb(REPOSITORY.notebook("source", assignment))
    solutions = P.solution_answers(nb)
    graded_tests = {P.grade_id(c) for c in nb.cells
                    if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")}
    variants = variants_for(assignment)
    assert variants, f"{assignment} has an empty bug zoo"
    names = [v.name for v in variants]
    assert len(names) == len(set(names)), f"{assignment}: duplicate variant names"
    for variant in variants:
        answers = variant.answers(solutions)  # raises ZooError if an edit or a cell is stale
        assert answers != solutions, f"{variant.name} changes nothing"
        assert variant.expect, f"{variant.name} names no failing test"
        stale = set(variant.expect) - graded_tests
        assert not stale, f"{variant.name} expects failures in cells that are not graded tests: {sorted(stale)}"
        # one mistake, one loss (the graded run checks every lost test; this says at once what the zoo claims)
        parts = parts_of(nb)
        own = variant.own_parts(parts)
        assert own and own <= set(parts.values()), f"{variant.name}: its part {sorted(own)} is not one of the notebook's"
        elsewhere = sorted(g for g in variant.expect if parts[g] not in own)
        assert variant.crosses or not elsewhere or assignment in ONE_LOSS_PENDING, (
            f"{variant.name}, a mistake of Part {'/'.join(sorted(own))}, expects losses in {elsewhere}: another part's "
            "test must not pay for it (judge that test around a reference, or say why not in `crosses`)")


@pytest.mark.parametrize("assignment", _params())
def test_alternatives_apply_to_the_current_source(assignment):
    solutions = P.solution_answers(P.read_nb(REPOSITORY.notebook("source", assignment)))
    alternatives = alternatives_for(assignment)
    assert alternatives, f"{assignment} has no alternatives zoo (correct answers written differently)"
    names = [v.name for v in alternatives] + [v.name for v in variants_for(assignment)]
    assert len(names) == len(set(names)), f"{assignment}: an alternative shares a name with another entry"
    for alternative in alternatives:
        answers = alternative.answers(solutions)  # raises ZooError if an edit or a cell is stale
        assert answers != solutions, f"{alternative.name} changes nothing"
        assert not alternative.expect, f"{alternative.name} is correct: it must not expect failures"


@pytest.mark.parametrize("assignment", _params())
def test_library_answers_apply_and_are_found(assignment):
    release_nb, solutions = REPOSITORY.release_and_answers(assignment)
    others = {v.name for v in variants_for(assignment) + alternatives_for(assignment)}
    for answer in library_for(assignment):
        assert answer.name not in others, f"{answer.name} shares a name with another zoo entry"
        assert answer.flagged and not answer.expect, f"{answer.name}: a flagged reason, no failing test"
        reasons = [r for _, r in scan_notebook(P.fill(release_nb, answer.answers(solutions)), substitutes_for(assignment), HELPER_ATTRIBUTES)]
        assert len(reasons) == 1 and answer.flagged in reasons[0], (answer.name, reasons)
