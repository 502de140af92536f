"""What the test modules share: scratch courses, grading a chapter's simulated students, and
the secret lines (solutions, hidden tests) that must never reach a student.

Test modules import from here, never from each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from instructor import pipeline as P
from instructor.course_root import REPOSITORY, CourseRoot
from instructor.zoo import Variant, alternatives_for, variants_for

ASSIGNMENTS = REPOSITORY.assignments()
SOLUTION, STUB = "solution", "stub"
ALTERNATIVE = "alt"  # student-id prefix of the alternatives zoo

_SCRATCH: dict[str, CourseRoot] = {}


def scratch_course(scratch_root: Path, assignment: str) -> CourseRoot:
    """A released scratch copy of one assignment (made once per test process)."""
    if assignment not in _SCRATCH:
        _SCRATCH[assignment] = REPOSITORY.scratch_copy(scratch_root / assignment, [assignment])
    return _SCRATCH[assignment]


def source_nb(assignment: str) -> nbformat.NotebookNode:
    return P.read_nb(REPOSITORY.notebook("source", assignment))


# ---------------------------------------------------------------- grading a chapter


@dataclass
class GradedChapter:
    root: CourseRoot
    assignment: str
    variants: dict[str, Variant]
    results: dict[str, P.Result]
    alternatives: dict[str, Variant] = field(default_factory=dict)

    def variant_result(self, variant: Variant) -> P.Result:
        return self.results[variant.student_id()]

    def alternative_result(self, alternative: Variant) -> P.Result:
        return self.results[alternative.student_id(ALTERNATIVE)]


def grade_chapter(root: CourseRoot, assignment: str) -> GradedChapter:
    """Grade the solution, the stub, every bug-zoo variant and every alternative of an assignment
    in one nbgrader run."""
    release_nb, answers = root.release_and_answers(assignment)
    root.submit(assignment, SOLUTION, P.fill(release_nb, answers))
    root.submit(assignment, STUB, release_nb)
    variants = {v.name: v for v in variants_for(assignment)}
    for variant in variants.values():
        root.submit(assignment, variant.student_id(), P.fill(release_nb, variant.answers(answers)))
    alternatives = {v.name: v for v in alternatives_for(assignment)}
    for alternative in alternatives.values():
        root.submit(assignment, alternative.student_id(ALTERNATIVE), P.fill(release_nb, alternative.answers(answers)))
    root.autograde(assignment)
    expected = ({SOLUTION, STUB} | {v.student_id() for v in variants.values()}
                | {v.student_id(ALTERNATIVE) for v in alternatives.values()})
    for student in sorted(s for s in expected if not root.notebook("autograded", assignment, s).exists()):
        # nbgrader gives up on a notebook whose kernel did not start (a loaded machine):
        # try that student once more on its own before judging anything
        root.nbgrader("autograde", assignment, "--force", "--create", f"--student={student}", check=False)
    root.feedback(assignment)
    return GradedChapter(root, assignment, variants, root.results(assignment), alternatives)


# ---------------------------------------------------------------- secret lines


def split_regions(nb, begin, end, skip=lambda cell: False):
    """Stripped lines inside ``begin``..``end`` regions, and the set of all other lines."""
    inside, outside = [], set()
    for cell in nb.cells:
        if skip(cell):
            continue
        within = False
        for line in cell.source.splitlines():
            if begin in line:
                within = True
            elif end in line:
                within = False
            else:
                (inside.append if within else outside.add)(line.strip())
    return inside, outside


def hidden_lines(nb):
    """Distinctive lines of the hidden test regions that appear nowhere else in the notebook."""
    hidden, outside = split_regions(nb, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
    return [line for line in hidden if len(line) >= 30 and line not in outside]


def solution_lines(nb):
    """Distinctive lines of the solutions (code regions and written model answers) found
    nowhere else in the notebook."""
    def written_answer(cell):
        return cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("solution")

    inside, outside = split_regions(nb, "BEGIN SOLUTION", "END SOLUTION", skip=written_answer)
    inside += [line.strip() for cell in nb.cells if written_answer(cell) for line in cell.source.splitlines()]
    return [line for line in inside if len(line) >= 20 and line not in outside]
