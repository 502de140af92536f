"""Grade the solution, the stub and every bug-zoo variant of an assignment in one nbgrader run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from instructor import pipeline as P
from instructor.zoo import Variant, variants_for

SOLUTION, STUB = "solution", "stub"


@dataclass
class GradedChapter:
    root: Path
    assignment: str
    variants: dict[str, Variant]
    results: dict[str, P.Result]

    def variant_result(self, variant: Variant) -> P.Result:
        return self.results[variant.student_id()]


def grade_chapter(root: Path, assignment: str) -> GradedChapter:
    release_nb, answers = P.release_and_answers(root, assignment)
    P.submit(root, assignment, SOLUTION, P.fill(release_nb, answers))
    P.submit(root, assignment, STUB, release_nb)
    variants = {v.name: v for v in variants_for(assignment)}
    for variant in variants.values():
        P.submit(root, assignment, variant.student_id(), P.fill(release_nb, variant.answers(answers)))
    P.autograde(root, assignment)
    expected = {SOLUTION, STUB} | {v.student_id() for v in variants.values()}
    for student in sorted(s for s in expected if not P.notebook_path(root, "autograded", assignment, s).exists()):
        # nbgrader gives up on a notebook whose kernel did not start (a loaded machine):
        # try that student once more on its own before judging anything
        P.nbgrader("autograde", assignment, "--force", "--create", f"--student={student}", cwd=root, check=False)
    P.generate_feedback(root, assignment)
    return GradedChapter(root, assignment, variants, P.results(root, assignment))
