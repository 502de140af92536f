"""The tools and notebooks of the pipeline: jupytext and nbgrader runs, notebooks read and filled, results.

Running jupytext and nbgrader with a clear error, reading and filling notebooks, and the shape
of a grading result.

The steps themselves run in a course root: :class:`nboracle.classroom.course_root.CourseRoot` owns
every path and nbgrader step.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from nboracle.grader.messages import original_error

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


@contextlib.contextmanager
def environment(values: dict[str, str]):
    """Environment variables set for a block, then put back as they were."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(args: list[str], cwd: Path, check: bool = True, quiet: bool = True,
        shown: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run a command with :func:`tool_env`; raise :class:`PipelineError` with its output if it fails (naming the
    command as ``shown``, where given)."""
    proc = subprocess.run(args, cwd=cwd, env=tool_env(), text=True, capture_output=True)
    if not quiet:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
    if check and proc.returncode != 0:
        raise PipelineError(f"{' '.join(shown or args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def nbgrader(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in the course root ``cwd``; refuse a config that did not load.

    It runs as :mod:`nboracle.classroom.nbgrader_command`: nbgrader's own command, without the second of module
    teardown after its work."""
    proc = run([sys.executable, "-m", "nboracle.classroom.nbgrader_command", *args], cwd=cwd, check=check,
               shown=["nbgrader", *args])
    if "Exception while loading config file" in proc.stderr:
        raise PipelineError(f"nbgrader_config.py failed to load:\n{proc.stderr}")
    return proc


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
    """``ename: evalue`` of a code cell's error output as the tests raised it, or ``""``.

    In English even where the student reads it translated (``nboracle.grader.messages``): the
    instructor's tools (reports, the class's mistakes) match and show the course's own words."""
    return original_error(cell)
