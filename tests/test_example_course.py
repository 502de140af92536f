"""The example course (examples/sorting_course) graded by plain nbgrader commands.

It proves that the grading machinery is generic: another subject (NumPy, sorting), its own
nbgrader_config.py and notebooks, no import of this course's helpers. The course is copied
to a temporary folder (once per assignment); `nbgrader
generate_assignment`, `autograde` and `generate_feedback` run there, as its instructor would
run them. Every student is the released notebook with
its solution cells filled in: the solution, the untouched stub, and each file of
examples/sorting_course/wrong/<assignment>/ (a wrong version says which tests it loses and
what they say; an attack says which wrong version it must score exactly as).

This test imports nothing of the course or of the machinery itself.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.pipeline

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "sorting_course"
ASSIGNMENTS = {"01_numpy_warmup": "numpy_warmup", "02_sorting": "sorting"}
SOLUTION, STUB = "solution", "stub"

# The example may import the grader's package, never this course's own packages.
_THIS_COURSE = re.compile(r"\b(import|from)\s+(course|instructor)\b|import(_module)?\(\s*['\"](course|instructor)\b")
_PACKAGE = re.compile(r"\b(import|from)\s+nboracle\b")


# ---------------------------------------------------------------- the wrong versions and attacks


@dataclass
class Entry:
    """One file of wrong/<assignment>/: the solution cells it replaces and what it must score."""

    assignment: str
    name: str
    cells: dict[str, str]
    loses: list[str] = field(default_factory=list)
    says: list[tuple[str, str]] = field(default_factory=list)
    scores_as: str | None = None
    never_shows: list[str] = field(default_factory=list)


def read_entry(path: Path) -> Entry:
    entry = Entry(path.parent.name, path.stem, {})
    current = None
    for line in path.read_text().splitlines():
        marker = re.fullmatch(r"# %% (\w+)", line)
        if marker:
            current = marker.group(1)
            entry.cells[current] = ""
        elif current is not None:
            entry.cells[current] += line + "\n"
        elif line.startswith("# loses: "):
            entry.loses += line.split(": ", 1)[1].split()
        elif line.startswith("# says: "):
            gid, fragment = line.split(": ", 1)[1].split(": ", 1)
            entry.says.append((gid, fragment))
        elif line.startswith("# scores as: "):
            entry.scores_as = line.split(": ", 1)[1].strip()
        elif line.startswith("# never shows: "):
            entry.never_shows.append(line.split(": ", 1)[1])
    entry.cells = {gid: source.strip("\n") for gid, source in entry.cells.items()}
    assert entry.cells, f"{path} replaces no solution cell (no '# %% <grade_id>' line)"
    assert bool(entry.loses) != bool(entry.scores_as), f"{path}: say either '# loses:' or '# scores as:'"
    return entry


ENTRIES = [read_entry(path) for a in ASSIGNMENTS for path in sorted((EXAMPLE / "wrong" / a).glob("*.py"))]
WRONG = [e for e in ENTRIES if e.loses]
ATTACKS = [e for e in ENTRIES if e.scores_as]


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def solution_answers(source_nb) -> dict[str, str]:
    """The solution cells of the instructor's notebook without nbgrader's markers."""
    answers = {}
    for cell in source_nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            answers[grade_id(cell)] = "\n".join(line for line in cell.source.splitlines()
                                                if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return answers


# ---------------------------------------------------------------- grading the example


def nbgrader(root: Path, *args: str) -> None:
    venv_bin = Path(sys.executable).parent
    # the environment as installed (nboracle with it), nothing of this repository put on the path
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("COURSE_SANDBOX", "COURSE_ORACLE", "COURSE_KERNEL_FORK", "COURSE_ORACLE_CHANNEL"):
        env.pop(name, None)  # graded as the example's config says: sandbox on, oracle on
    done = subprocess.run([str(venv_bin / "nbgrader"), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


@dataclass
class Graded:
    roots: dict[str, Path]  # assignment -> the course copy it was graded in
    scores: dict[tuple[str, str], dict[str, float]]  # (assignment, student) -> {test grade id: score}
    maxima: dict[str, dict[str, float]]  # assignment -> {test grade id: points}

    def file(self, folder: str, assignment: str, student: str, suffix: str = ".ipynb") -> Path:
        return self.roots[assignment] / folder / student / assignment / f"{ASSIGNMENTS[assignment]}{suffix}"

    def notebook(self, assignment: str, student: str) -> nbformat.NotebookNode:
        return nbformat.read(self.file("autograded", assignment, student), as_version=4)

    def said(self, assignment: str, student: str, gid: str | None = None) -> str:
        """What the cells (or the cell ``gid``) of the autograded notebook printed and raised."""
        texts = []
        for cell in self.notebook(assignment, student).cells:
            if cell.cell_type != "code" or (gid is not None and grade_id(cell) != gid):
                continue
            for output in cell.get("outputs", []):
                texts += [output.get("text", ""), output.get("evalue", ""), json.dumps(output.get("data", {}))]
        return "\n".join(texts)


def grade(root: Path, assignment: str) -> tuple[dict, dict]:
    """Release, submit every student, autograde, feedback: the scores by student and the points."""
    from nbgrader.api import Gradebook

    name = ASSIGNMENTS[assignment]
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("wrong", "__pycache__", ".ipynb_checkpoints"))
    nbgrader(root, "generate_assignment", assignment, "--force")
    release = nbformat.read(root / "release" / assignment / f"{name}.ipynb", as_version=4)
    answers = solution_answers(nbformat.read(root / "source" / assignment / f"{name}.ipynb", as_version=4))
    students = {SOLUTION: answers, STUB: {}}
    students.update({e.name: {**answers, **e.cells} for e in ENTRIES if e.assignment == assignment})
    for student, cells in students.items():
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        for cell in nb.cells:
            if grade_id(cell) in cells:
                cell.source = cells[grade_id(cell)]
        assert {grade_id(c) for c in nb.cells} >= set(cells), f"{student}: a cell it fills is not in {name}"
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{name}.ipynb")
    nbgrader(root, "autograde", assignment, "--force", "--create")
    nbgrader(root, "generate_feedback", assignment, "--force")
    scores, points = {}, {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for submission in gb.assignment_submissions(assignment):
            notebook = gb.find_submission_notebook(name, assignment, submission.student_id)
            scores[assignment, submission.student_id] = {g.name: g.score for g in notebook.grades}
            points = {g.name: g.max_score for g in notebook.grades}
    return scores, points


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Graded:
    """Each assignment in a copy of its own, one after the other."""
    roots = {a: tmp_path_factory.mktemp(a.split("_", 1)[1]) / "sorting_course" for a in ASSIGNMENTS}
    results = {assignment: grade(root, assignment) for assignment, root in roots.items()}
    scores = {key: value for assignment_scores, _ in results.values() for key, value in assignment_scores.items()}
    return Graded(roots, scores, {a: points for a, (_, points) in results.items()})


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("assignment", list(ASSIGNMENTS), ids=lambda a: a.split("_", 1)[1])
def test_solution_scores_full_marks_and_stub_zero(graded, assignment):
    assert graded.scores[assignment, SOLUTION] == graded.maxima[assignment], graded.said(assignment, SOLUTION)
    assert set(graded.scores[assignment, STUB].values()) == {0.0}
    for student in (SOLUTION, STUB):  # the example's sandbox line took effect, with warm kernels by default
        assert graded.notebook(assignment, student).metadata["grading_kernel"] == {"sandboxed": True, "warm": True}


@pytest.mark.parametrize("entry", WRONG, ids=lambda e: e.name)
def test_a_wrong_version_loses_the_points_it_should_with_its_message(graded, entry):
    scores, maxima = graded.scores[entry.assignment, entry.name], graded.maxima[entry.assignment]
    assert set(entry.loses) <= set(maxima), f"{entry.name} names a test that does not exist"
    for gid, points in maxima.items():
        expected = 0.0 if gid in entry.loses else points
        assert scores[gid] == expected, (f"{entry.name}: {gid} scored {scores[gid]}, expected {expected}\n"
                                         + graded.said(entry.assignment, entry.name, gid))
    for gid, fragment in entry.says:
        assert fragment in graded.said(entry.assignment, entry.name, gid), \
            f"{entry.name}: {gid} does not say {fragment!r}:\n{graded.said(entry.assignment, entry.name, gid)}"


@pytest.mark.parametrize("entry", ATTACKS, ids=lambda e: e.name)
def test_an_attack_scores_exactly_as_the_wrong_code_it_hides(graded, entry):
    scores = graded.scores[entry.assignment, entry.name]
    assert scores == graded.scores[entry.assignment, entry.scores_as], graded.said(entry.assignment, entry.name)
    assert scores != graded.maxima[entry.assignment]
    for text in entry.never_shows:
        assert text not in graded.said(entry.assignment, entry.name)


@pytest.mark.parametrize("student", [SOLUTION, STUB])
def test_feedback_shows_no_hidden_test(graded, student):
    for assignment, name in ASSIGNMENTS.items():
        page = graded.file("feedback", assignment, student, ".html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert "BEGIN HIDDEN TESTS" not in text
        source = (EXAMPLE / "source" / assignment / f"{name}.py").read_text()
        pattern = r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS"
        shown = {line.strip() for line in re.sub(pattern, "", source, flags=re.S).splitlines()}
        hidden = {line.strip() for block in re.findall(pattern, source, re.S) for line in block.splitlines()}
        for line in hidden - shown:
            if len(line) > 25:
                assert line not in text, f"{student}'s feedback on {assignment} shows {line!r}"


def test_the_example_imports_the_grader_package_and_nothing_of_this_course():
    """The example course is another course: it imports nboracle, as any course would, and no
    module of this one (course, instructor)."""
    ours: dict[str, list[str]] = {}
    package: set[str] = set()
    for path in sorted(EXAMPLE.rglob("*")):
        if path.suffix not in (".py", ".ipynb") or ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(EXAMPLE).as_posix()
        if path.suffix == ".ipynb":
            lines = [line for cell in nbformat.read(path, as_version=4).cells for line in cell.source.splitlines()]
        else:
            lines = path.read_text().splitlines()
        for line in (line.strip() for line in lines):
            if _THIS_COURSE.search(line):
                ours.setdefault(relative, []).append(line)
            if _PACKAGE.search(line):
                package.add(relative)
    assert not ours, f"the example imports this course's modules: {ours}"
    assert {"nbgrader_config.py", "source/02_sorting/sorting.py", "source/02_sorting/sorting.ipynb"} <= package, package
