"""``python -m instructor check MY_NOTEBOOK.ipynb``: grade your own copy with the hidden tests.

The hidden tests are built from ``source/`` on your machine, in a private course root
(``.build/selfcheck/<assignment>/``), rebuilt only when the assignment's source or the course's
``nbgrader_config.py`` changed (a stamp file records what it was built from). Your notebook is
copied, never modified, and graded in this process with nbgrader's Python API (one nbgrader
start, no ``nbgrader`` subprocesses), printing each cell as it runs. The notebook is recognised
by its folder, its file name, or the grade ids of its cells (a renamed copy is still yours).
At the end: the points of every graded cell with its failure message, the points an instructor
grades by hand (and where their model answers are), the cells interrupted at the time limit, and the path of the feedback HTML.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat

from nboracle.grader.messages import Translate, translator, untranslated

from . import batch
from . import grader as G
from . import pipeline as P
from .course_root import CourseRoot

LEARNER = "me"
STAMP = ".selfcheck-stamp"  # in the private root: what its release was built from
TIMEOUT_ERRORS = ("KeyboardInterrupt", "CellTimeoutError")


def explain(error: str) -> str:
    """The failure message, with the untouched-stub case said plainly."""
    if error.startswith("NotImplementedError"):
        return "not done yet: a solution cell this test uses still raises NotImplementedError"
    if error.startswith("NameError"):
        return f"{error} (did you run every cell above, and keep the names the exercise asks for?)"
    if error.startswith(TIMEOUT_ERRORS):
        return "interrupted at the time limit: an infinite loop, or far too much work, in this cell or one it calls"
    return error or "the test failed without an error message"


# ---------------------------------------------------------------- which assignment


def grade_ids(nb) -> set[str]:
    return {P.grade_id(cell) for cell in nb.cells if P.grade_id(cell)}


def infer_assignment(root: CourseRoot, notebook: Path, nb=None) -> str:
    """The assignment a notebook belongs to: from its folder, its file name, or its cells' grade ids."""
    known = root.assignments()
    if notebook.parent.name in known:
        return notebook.parent.name
    by_stem = [a for a in known if root.notebook_name(a) == notebook.stem]
    if len(by_stem) == 1:
        return by_stem[0]
    mine = grade_ids(nb) if nb is not None else set()
    if mine:
        shared = {}
        for assignment in known:
            released = root.notebook("release", assignment)
            if released.exists():
                shared[assignment] = len(mine & grade_ids(P.read_nb(released)))
        best = max(shared.values(), default=0)
        winners = [a for a, n in shared.items() if n == best]
        if best and len(winners) == 1:
            return winners[0]
    raise P.PipelineError(
        f"cannot tell which assignment {notebook.name} belongs to: its folder, its name and its cells' grade ids "
        f"match none of the chapters (was it made from a released notebook?); "
        f"pass --assignment, one of: {', '.join(known)}")


# ---------------------------------------------------------------- the private course root


def source_stamp(root: CourseRoot, assignment: str) -> str:
    """A digest of what the private root's release is built from: the assignment's source and the config."""
    digest = hashlib.sha256()
    files = [root.config, *sorted(root.folder("source", assignment).rglob("*"))]
    for path in files:
        if path.is_file() and not {".ipynb_checkpoints", "__pycache__"} & set(path.parts):
            digest.update(str(path.relative_to(root.path)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def private_root(root: CourseRoot, assignment: str) -> CourseRoot:
    """A released private copy of ``root`` for one assignment, rebuilt only when its source changed."""
    private = CourseRoot(root.path / ".build" / "selfcheck" / assignment)
    stamp = source_stamp(root, assignment)
    stamp_file = private.path / STAMP
    fresh = stamp_file.exists() and stamp_file.read_text() == stamp \
        and private.notebook("release", assignment).exists() and private.gradebook.exists()
    if not fresh:
        if private.path.exists():
            shutil.rmtree(private.path)
        root.scratch_copy(private.path, [assignment])
        stamp_file.write_text(stamp)
    for folder in ("submitted", "autograded", "feedback"):
        shutil.rmtree(private.folder(folder, assignment, LEARNER).parent, ignore_errors=True)
    return private


# ---------------------------------------------------------------- grading, cell by cell


class Progress:
    """Says which cell runs now: a line that rewrites itself on a terminal, else a line per graded test cell.

    nbclient calls ``start`` before each cell (its ``on_cell_start`` hook), so a cell that hangs is
    the last one named.
    """

    def __init__(self, nb, say=print, stream=None):
        self.say, self.stream = say, stream or sys.stdout
        self.tty = self.stream.isatty()
        self.code_cells = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        self.begun = time.perf_counter()

    def start(self, cell, cell_index: int, **_):
        if cell.get("cell_type") != "code" or cell_index not in self.code_cells:
            return
        number, total = self.code_cells.index(cell_index) + 1, len(self.code_cells)
        label = P.grade_id(cell) or f"cell {cell_index}"
        meta = cell.get("metadata", {}).get("nbgrader", {})
        elapsed = time.perf_counter() - self.begun
        if self.tty:
            self.stream.write(f"\r\033[K  [{number:>2}/{total}] {elapsed:5.1f} s  running {label}")
            self.stream.flush()
        elif meta.get("grade") and not meta.get("solution"):
            self.say(f"  [{number:>2}/{total}] {elapsed:5.1f} s  running {label}", flush=True)

    def done(self):
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


@contextmanager
def _inside(folder: Path):
    """Work in ``folder`` with the tools' environment, and come back."""
    before_dir, before_env = os.getcwd(), dict(os.environ)
    os.environ.update(P.tool_env())
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before_dir)
        os.environ.clear()
        os.environ.update(before_env)


def grade_here(private: CourseRoot, assignment: str, progress: Progress | None) -> batch.StudentReport:
    """Autograde and give feedback to the learner's copy with nbgrader's API, in this process."""
    import warnings

    report = batch.StudentReport(LEARNER)
    with _inside(private.path), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in session.*")
        from nboracle.grader import sandbox

        sandbox.warm_up()  # the kernel's zygote imports torch while this process imports nbgrader and the tests
        from nbgrader.apps import NbGraderAPI
        from nbgrader.apps.baseapp import NbGrader
        from nbgrader.coursedir import CourseDirectory

        app = NbGrader()
        app.load_config_file(suppress_errors=False)
        config = app.config
        config.CourseDirectory.root = str(private.path.resolve())
        if progress is not None:  # plain functions: nbgrader deep-copies its config, bound methods and all
            def on_start(**kwargs):
                progress.start(**kwargs)

            config.Execute.on_cell_start = on_start
        api = NbGraderAPI(CourseDirectory(config=config), config=config)
        try:
            result = api.autograde(assignment, LEARNER, force=True, create=True)
        finally:
            if progress is not None:
                progress.done()
        graded_nb = private.notebook("autograded", assignment, LEARNER)
        if not result.get("success") or not graded_nb.exists():
            report.status = "failed"
            report.problems.append(G.failure_reason(result.get("log", "") + "\n" + result.get("error", "")))
            return report
        api.generate_feedback(assignment, LEARNER, force=True)
    report.status = "graded"
    report.review, _ = G.read_review(graded_nb)
    return report


def grade_copy(notebook: Path, assignment: str | None = None, root: CourseRoot | None = None, say=print,
               progress: bool = False):
    """Grade a copy of ``notebook``: ``(assignment, private root, batch report, result or None)``.

    ``root`` is the course root whose ``source/`` holds the hidden tests (default: the current folder)."""
    root = root if root is not None else CourseRoot(Path.cwd())
    notebook = notebook.expanduser().resolve()
    if not notebook.is_file():
        raise P.PipelineError(f"no notebook at {notebook}")
    try:
        nb = nbformat.read(str(notebook), as_version=4)
    except Exception as err:
        raise P.PipelineError(f"{notebook} is not a readable notebook: {err}") from err
    assignment = root.check_assignment(assignment) if assignment else infer_assignment(root, notebook, nb)
    say(f"checking {notebook} as {assignment} (hidden tests built from source/) ...", flush=True)
    private = private_root(root, assignment)
    private.submit(assignment, LEARNER, nb)
    if progress:
        say("starting the grading kernel ...", flush=True)
    report = grade_here(private, assignment, Progress(nb, say) if progress else None)
    result = private.results(assignment)[LEARNER] if report.status == "graded" else None
    return assignment, private, report, result


# ---------------------------------------------------------------- what the learner reads


def manual_points(nb) -> dict[str, float]:
    """Points an instructor grades by hand, per grade id: written answers and tasks."""
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        by_hand = meta.get("task") or (meta.get("grade") and (meta.get("solution") or cell.cell_type == "markdown"))
        if by_hand and meta.get("points"):
            out[meta.get("grade_id", "a written answer")] = float(meta["points"])
    return out


def timed_out(nb) -> list[str]:
    """The cells of an autograded notebook that were interrupted at the time limit."""
    out = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if any(o.get("output_type") == "error" and o.get("ename") in TIMEOUT_ERRORS for o in cell.get("outputs", [])):
            out.append(P.grade_id(cell) or f"cell {index}")
    return out


def score_lines(cells, translate: Translate = untranslated) -> list[str]:
    """The table of test cells and points (one column however long a name), each failure's message under it."""
    heading, points = translate("test cell"), translate("points")
    width = max([len(gid) for gid in cells] + [len(heading)]) + 2
    lines = [f"{'':5}{heading:<{width}}{points:>8}"]
    for gid, cell in cells.items():
        mark = "ok" if cell.score >= cell.max_score else "FAIL"
        lines.append(f"{mark:<5}{gid:<{width}}{cell.score:>4g}/{cell.max_score:<3g}")
        if cell.score < cell.max_score:
            lines.append(f"      {translate(explain(cell.error))}")
    return lines


def self_check(notebook: Path, assignment: str | None = None, root: CourseRoot | None = None) -> int:
    """Grade a copy of ``notebook`` with the hidden tests of ``root``; print the scores."""
    assignment, private, report, result = grade_copy(notebook, assignment, root, progress=True)
    # in the course root's language (its MessageCatalog: an edition's), as the feedback is
    translate = translator(private.settings())

    def say(line: str = "") -> None:
        print(translate(line))

    if result is None:
        say(f"could not grade it: {'; '.join(report.problems)}")
        return 3
    say()
    for line in score_lines(result.cells, translate):
        print(line)
    say(f"\nautomatic points: {result.auto_score:g} of {result.auto_max:g}")
    by_hand = manual_points(P.read_nb(private.notebook("release", assignment)))
    if by_hand:
        total = sum(by_hand.values())
        cells = ", ".join(f"{gid}: {points:g}" for gid, points in by_hand.items())
        say(f"graded by hand: {total:g} more point{'s' if total != 1 else ''} ({cells}), which an instructor "
            f"scores; until then the feedback shows {result.auto_score:g}/{result.auto_max + total:g}")
        source = (root if root is not None else CourseRoot(Path.cwd())).notebook("source", assignment)
        say(f"studying on your own: the model answers and rubrics are the cells {', '.join(by_hand)} "
            f"of {source}; write yours first, then compare")
    graded_nb = private.notebook("autograded", assignment, LEARNER)
    limit = _timeout_seconds(private)
    for label in timed_out(P.read_nb(graded_nb)) if graded_nb.exists() else []:
        say(f"interrupted: {label} ran past the time limit ({limit}) and was stopped; "
            "the cells after it ran as usual")
    for problem in report.problems:
        say(f"note: {problem}")
    for reason in report.review:  # what an instructor's grader would flag for a person to look at
        say(f"would be flagged for review: {reason}")
    feedback = private.notebook("feedback", assignment, LEARNER)
    say(f"feedback: {feedback}")
    return 0


def _timeout_seconds(root: CourseRoot) -> str:
    """The cell time limit of ``root``'s configuration, as words."""
    said = "nbgrader's Execute.timeout"
    for line in root.config.read_text().splitlines():  # the last assignment wins, as in the config itself
        if line.replace(" ", "").startswith("c.Execute.timeout="):
            said = f"{line.split('=', 1)[1].split('#', 1)[0].strip()} s per cell"
    return said
