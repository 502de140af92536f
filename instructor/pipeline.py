"""The nbgrader pipeline as small functions: sync pairs, release, fill, autograde, read scores.

Everything runs the real tools (jupytext and the nbgrader command line) in a course root,
either this repository or a scratch copy made by :func:`make_scratch_course` for tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SOLUTION_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


class PipelineError(RuntimeError):
    """A step of the pipeline failed; the message says which and why."""


def tool_env() -> dict[str, str]:
    """Environment for the tools: this Python's bin dir first (nbgrader calls `alembic`)."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONHASHSEED", "0")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run(args: list[str], cwd: Path, check: bool = True, quiet: bool = True) -> subprocess.CompletedProcess:
    """Run a command with :func:`tool_env`; raise :class:`PipelineError` with its output if it fails."""
    proc = subprocess.run(args, cwd=cwd, env=tool_env(), text=True, capture_output=True)
    if not quiet:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
    if check and proc.returncode != 0:
        raise PipelineError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def nbgrader(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in the course root ``cwd``; refuse a config that did not load."""
    proc = run([str(BIN / "nbgrader"), *args], cwd=cwd, check=check)
    if "Exception while loading config file" in proc.stderr:
        raise PipelineError(f"nbgrader_config.py failed to load:\n{proc.stderr}")
    return proc


# ---------------------------------------------------------------- assignments and pairs


def assignments(root: Path = REPO) -> list[str]:
    """Assignment ids: folders of ``source/`` holding at least one notebook or percent script."""
    source = root / "source"
    return sorted(
        p.name for p in source.iterdir()
        if p.is_dir() and (any(p.glob("*.ipynb")) or any(p.glob("*.py")))
    ) if source.is_dir() else []


def check_assignment(name: str, root: Path = REPO) -> str:
    """Return ``name`` if it is an assignment, else raise a clear error listing the real ones."""
    known = assignments(root)
    if name not in known:
        raise PipelineError(f"no assignment {name!r} under {root / 'source'}; known: {', '.join(known) or 'none'}")
    return name


def paired_scripts(assignment: str, root: Path = REPO) -> list[Path]:
    """The percent-format ``.py`` files of an assignment (the files people edit)."""
    return sorted((root / "source" / assignment).glob("*.py"))


def notebook_name(assignment: str, root: Path = REPO) -> str:
    """The (single) notebook stem of an assignment, e.g. ``two_keys``."""
    scripts = paired_scripts(assignment, root)
    notebooks = sorted((root / "source" / assignment).glob("*.ipynb"))
    names = sorted({p.stem for p in scripts + notebooks})
    if len(names) != 1:
        raise PipelineError(f"{assignment}: expected one notebook, found {names}")
    return names[0]


def notebook_path(root: Path, folder: str, assignment: str, student: str | None = None,
                  suffix: str = ".ipynb") -> Path:
    """``<root>/<folder>/[<student>/]<assignment>/<notebook><suffix>``.

    ``folder`` is ``source`` or ``release`` (no student), or ``submitted``, ``autograded`` or
    ``feedback`` (with one; feedback takes ``suffix=".html"``).
    """
    parts = [folder, student, assignment] if student else [folder, assignment]
    return root.joinpath(*parts, notebook_name(assignment, root) + suffix)


def sync(assignment: str, root: Path = REPO) -> list[Path]:
    """Bring every pair of ``source/<assignment>`` in sync with ``jupytext --sync``.

    The newer file of each pair wins (jupytext's rule); cell ids and outputs of the
    existing ``.ipynb`` are kept.
    """
    done = []
    for script in paired_scripts(assignment, root):
        run([str(BIN / "jupytext"), "--sync", "--quiet", script.name], cwd=script.parent)
        done.append(script.with_suffix(".ipynb"))
    return done


# ---------------------------------------------------------------- notebooks and answers


def read_nb(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def write_nb(nb: nbformat.NotebookNode, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def solution_answers(source_nb: nbformat.NotebookNode) -> dict[str, str]:
    """What a perfect student would type: each solution cell of the source, markers removed."""
    answers = {}
    for cell in source_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            lines = [line for line in cell.source.splitlines() if not SOLUTION_MARKERS.match(line)]
            answers[meta["grade_id"]] = "\n".join(lines)
    return answers


def release_and_answers(root: Path, assignment: str) -> tuple[nbformat.NotebookNode, dict[str, str]]:
    """The released notebook and the solution answers: what every simulated student starts from."""
    release_nb = read_nb(notebook_path(root, "release", assignment))
    return release_nb, solution_answers(read_nb(notebook_path(root, "source", assignment)))


def fill(release_nb: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of a released notebook with the given solution cells replaced, as a student would."""
    nb = nbformat.from_dict(json.loads(json.dumps(release_nb)))
    seen = set()
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in answers:
            cell.source = answers[gid]
            seen.add(gid)
    missing = set(answers) - seen
    if missing:
        raise PipelineError(f"no cells with grade_id {sorted(missing)} in the released notebook")
    return nb


# ---------------------------------------------------------------- course roots


def make_scratch_course(dest: Path, names: list[str], root: Path = REPO) -> Path:
    """A fresh course root at ``dest`` with the config and the sources of ``names``, released."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "nbgrader_config.py", dest / "nbgrader_config.py")
    for name in names:
        shutil.copytree(root / "source" / name, dest / "source" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        release(name, dest)
    return dest


def release(assignment: str, root: Path = REPO) -> Path:
    """``nbgrader generate_assignment`` into ``release/<assignment>``; returns that folder."""
    proc = nbgrader("generate_assignment", assignment, "--force", cwd=root, check=False)
    if "because there are submissions associated with it" in proc.stderr:
        raise PipelineError(
            f"{assignment} already has graded submissions in {root / 'gradebook.db'}, and its graded "
            "cells changed since: nbgrader refuses to add or remove cells under existing grades. "
            "Keep the cells as released, or export the grades and move gradebook.db aside first.")
    if proc.returncode != 0:
        raise PipelineError(f"nbgrader generate_assignment {assignment} failed:\n{proc.stderr[-3000:]}")
    out = root / "release" / assignment
    if not out.is_dir():
        raise PipelineError(f"nbgrader produced no {out}")
    return out


def submit(root: Path, assignment: str, student: str, nb: nbformat.NotebookNode, name: str | None = None) -> Path:
    """Place a notebook as ``submitted/<student>/<assignment>/<name>.ipynb``."""
    path = (root / "submitted" / student / assignment / f"{name}.ipynb" if name
            else notebook_path(root, "submitted", assignment, student))
    write_nb(nb, path)
    return path


def autograde(root: Path, assignment: str, student: str | None = None) -> None:
    """``nbgrader autograde`` every submission of an assignment (or one student's) in one run."""
    args = ["autograde", assignment, "--force", "--create"]
    if student:
        args += ["--student", student]
    nbgrader(*args, cwd=root)


def generate_feedback(root: Path, assignment: str, student: str | None = None) -> None:
    args = ["generate_feedback", assignment, "--force"]
    if student:
        args += ["--student", student]
    nbgrader(*args, cwd=root)


def export_grades(root: Path, to: Path) -> Path:
    nbgrader("export", "--to", str(to), cwd=root)
    return to


# ---------------------------------------------------------------- results


@dataclass
class CellResult:
    grade_id: str
    score: float
    max_score: float
    error: str  # ename: evalue of the cell's error output, "" if it ran cleanly


@dataclass
class Result:
    student: str
    cells: dict[str, CellResult]

    @property
    def auto_score(self) -> float:
        return sum(c.score for c in self.cells.values())

    @property
    def auto_max(self) -> float:
        return sum(c.max_score for c in self.cells.values())

    def failed(self) -> list[str]:
        return [g for g, c in self.cells.items() if c.score < c.max_score]


def cell_error(cell) -> str:
    """``ename: evalue`` of a code cell's error output, or ``""``."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename', '')}: {out.get('evalue', '')}"
    return ""


def results(root: Path, assignment: str) -> dict[str, Result]:
    """Automatic scores and error messages per student and test cell, from the gradebook."""
    from nbgrader.api import Gradebook

    name = notebook_name(assignment, root)
    out: dict[str, Result] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for submission in gb.assignment_submissions(assignment):
            student = submission.student.id
            nb_path = notebook_path(root, "autograded", assignment, student)
            errors = {}
            if nb_path.exists():
                errors = {grade_id(c): cell_error(c) for c in read_nb(nb_path).cells if grade_id(c)}
            cells = {}
            for grade in gb.find_submission_notebook(name, assignment, student).grades:
                if grade.cell.cell_type != "code" or grade.auto_score is None:
                    continue
                cells[grade.name] = CellResult(grade.name, float(grade.auto_score or 0.0),
                                               float(grade.max_score), errors.get(grade.name, ""))
            out[student] = Result(student, cells)
    return out
