"""Grade a whole class, and let a learner grade their own notebook.

Class batch (``python -m instructor grade-class ASSIGNMENT --from FOLDER_OR_ZIP --jobs N``):

1. **collect** (``instructor.collect``): one folder per student, ``<student>/<notebook>.ipynb``,
   either as folders or inside a zip (``class.zip: alice/two_keys.ipynb, bob/two_keys.ipynb``),
   into ``submitted/<student>/<assignment>/``. Any folder name is accepted (mapped to a safe,
   stable id; the name is shown in the summary), or refused by name.
2. **inspect** every student folder: a missing or renamed notebook, one that is not valid
   JSON, or another assignment's notebook, is reported and skipped. (Duplicated, deleted and
   reordered cells are mended while grading: ``instructor.repair``.)
3. **grade** the rest with ``--jobs`` long-lived worker processes: each loads nbgrader and the
   course configuration once (``nbgrader.apps.NbGraderAPI``) and then autogrades and writes
   feedback for one student after another (one grading kernel per student, as always), all
   writing to the one sqlite gradebook (retrying when it is busy). Starting nbgrader once per
   worker instead of twice per student is what keeps autograde close to plain execution.
   A student whose autograde fails (a kernel that died from ``os._exit``, ...) is reported and
   the batch goes on. Unchanged submissions that are already graded are skipped, so re-running
   is idempotent; manual grades are never touched (nbgrader keeps them on re-autograde too).
4. **feedback** HTML per graded student, a summary table, ``grades.csv`` and a report.

**Review**: a submission that tampered with the grading kernel, or whose code touches the
kernel's machinery, the gradebook, other processes, the network or paths outside its folder
(``instructor.scan``), or that the OS sandbox refused something, is graded as usual and marked
*for review* (``instructor.nbgrader_ext.ReviewFlags``): the ``review`` column of the summary,
``review:`` lines in the report, ``needs_review``/``review_reasons`` in ``grades.csv`` and
nbgrader's "needs manual grade" in the formgrader. When the grading kernels run without the
OS sandbox (``instructor.sandbox``), the summary and the report start with a warning.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import pipeline as P
from .course_root import CourseRoot
from .nbgrader_ext import review_reasons

TAMPER_MARK = "grader: this notebook had replaced"
STATE_FILE = ".batch-state.json"


@dataclass
class StudentReport:
    student: str
    status: str = "pending"  # graded | unchanged | skipped | failed
    score: float = 0.0
    max_score: float = 0.0
    problems: list[str] = field(default_factory=list)
    failed_cells: dict[str, str] = field(default_factory=dict)
    review: list[str] = field(default_factory=list)  # why a person should look at it (empty: nothing)
    folder: str = ""  # issue 22: the folder name as handed in, when the student id differs from it


# ---------------------------------------------------------------- collect


def collect(root: CourseRoot, assignment: str, source: Path) -> list[str]:
    """Bring a folder or zip of ``<student>/<notebook>.ipynb`` into ``submitted/``: the student ids."""
    from .collect import collect_class  # issue 22: collection drops nothing silently

    return sorted(collect_class(root, assignment, source).students)


# ---------------------------------------------------------------- inspect


def inspect(root: CourseRoot, assignment: str, student: str) -> list[str]:
    """Problems that make a submission ungradable: missing, renamed or broken notebooks."""
    folder = root.folder("submitted", assignment, student)
    expected = sorted(p.name for p in root.folder("release", assignment).glob("*.ipynb"))
    found = sorted(p.name for p in folder.glob("*.ipynb"))
    problems = []
    for name in expected:
        if name not in found:
            others = [f for f in found if f not in expected]
            problems.append(f"{name} is missing" + (f" (found {', '.join(others)}: renamed?)" if others else ""))
            continue
        try:
            nb = nbformat.read(str(folder / name), as_version=4)
        except Exception as err:  # nbformat raises several types for broken files
            problems.append(f"{name} is not a readable notebook ({type(err).__name__}: {str(err)[:120]})")
            continue
        from .repair import wrong_chapter  # issue 22: another assignment's notebook, by its grade ids

        wrong = wrong_chapter(nb, assignment, root.path) or wrong_chapter(nb, assignment, P.REPO)
        if wrong:
            problems.append(f"{name}: {wrong}")
    return problems


def fingerprint(root: CourseRoot, assignment: str, student: str) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.folder("submitted", assignment, student).rglob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


# ---------------------------------------------------------------- grade


def _nbgrader_retrying(root: CourseRoot, args: list[str], attempts: int = 5) -> subprocess.CompletedProcess:
    """Run nbgrader; retry while the shared sqlite gradebook is locked by another worker."""
    for attempt in range(attempts):
        proc = root.nbgrader(*args, check=False)
        if "database is locked" not in proc.stderr:
            return proc
        time.sleep(0.5 * (attempt + 1))
    return proc


def _failure_reason(stderr: str, fallback: str = "nbgrader autograde failed (see nbgrader.log)") -> str:
    """Why an ``nbgrader autograde`` run failed, in one line, from its stderr."""
    if "DeadKernelError" in stderr or "Kernel died" in stderr:
        return "the kernel died while running the notebook (os._exit or a crash)"
    if "CellTimeoutError" in stderr:
        return "a cell ran past the time limit"
    lines = [line for line in stderr.splitlines() if "Error" in line and "AutogradeApp" not in line]
    return lines[-1].strip()[:200] if lines else fallback


def grade_student(root: CourseRoot, assignment: str, student: str) -> StudentReport:
    """Autograde and give feedback to one student with the nbgrader command line."""
    report = StudentReport(student)
    proc = _nbgrader_retrying(root, ["autograde", assignment, "--force", "--create", f"--student={student}"])
    graded_nb = root.notebook("autograded", assignment, student)
    if proc.returncode != 0 or not graded_nb.exists():
        report.status = "failed"
        report.problems.append(_failure_reason(proc.stderr))
        return report
    _nbgrader_retrying(root, ["generate_feedback", assignment, "--force", f"--student={student}"])
    report.status = "graded"
    _read_review(graded_nb, report)
    return report


# ---------------------------------------------------------------- worker processes

_WORKER: dict = {}


def _worker_start(root: str) -> None:
    """Run once per worker process: nbgrader and the course root's configuration, loaded once."""
    import warnings

    os.environ.update(P.tool_env())
    os.chdir(root)
    # nbgrader's own session warnings on re-autograde (the command line hides them in its log)
    warnings.filterwarnings("ignore", message=".*not in session.*")
    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.baseapp import NbGrader
    from nbgrader.coursedir import CourseDirectory

    app = NbGrader()  # loads nbgrader_config.py from the course root and Jupyter's config dirs
    app.load_config_file(suppress_errors=False)  # a broken config stops the batch, loudly
    config = app.config
    config.CourseDirectory.root = root
    _WORKER["api"] = NbGraderAPI(CourseDirectory(config=config), config=config)
    _WORKER["root"] = CourseRoot(root)


def _api_retrying(call, *args, attempts: int = 5, **kwargs) -> dict:
    for attempt in range(attempts):
        result = call(*args, **kwargs)
        result["text"] = result.get("log", "") + "\n" + result.get("error", "")
        if "database is locked" not in result["text"]:
            return result
        time.sleep(0.5 * (attempt + 1))
    return result


def _worker_grade(assignment: str, student: str) -> StudentReport:
    """In a worker: autograde and give feedback to one student, as :func:`grade_student` does."""
    api, root = _WORKER["api"], _WORKER["root"]
    report = StudentReport(student)
    result = _api_retrying(api.autograde, assignment, student, force=True, create=True)
    graded_nb = root.notebook("autograded", assignment, student)
    if not result.get("success") or not graded_nb.exists():
        report.status = "failed"
        report.problems.append(_failure_reason(result["text"]))
        return report
    _api_retrying(api.generate_feedback, assignment, student, force=True)
    report.status = "graded"
    _read_review(graded_nb, report)
    return report


def _read_review(graded_nb: Path, report: StudentReport) -> None:
    text = graded_nb.read_text(errors="replace")
    if TAMPER_MARK in text:
        report.problems.append("replaced the grader's check functions (restored before the tests ran)")
    try:
        report.review = review_reasons(nbformat.reads(text, as_version=4))
    except Exception as err:  # an autograded notebook we cannot read is itself worth a look
        report.review = [f"the autograded notebook could not be read ({type(err).__name__})"]


def sandbox_warning() -> str | None:
    """A loud line when grading kernels run without the OS sandbox, else None."""
    try:
        from . import sandbox
    except ImportError:
        ok, reason = False, "instructor.sandbox is not installed"
    else:
        try:
            ok, reason = sandbox.sandbox_status()
        except Exception as err:  # a broken probe is no sandbox
            ok, reason = False, f"the sandbox check failed ({type(err).__name__}: {err})"
    if ok:
        return None
    return ("WARNING: the grading kernels ran WITHOUT the OS sandbox (" + reason + "): student code could "
            "read and write everything this account can, including gradebook.db. In-kernel guards and "
            "review flags still ran; see README \"Students cannot buy points\".")


def _fill_scores(root: CourseRoot, assignment: str, reports: dict[str, StudentReport]) -> None:
    results = root.results(assignment)
    for student, report in reports.items():
        if student in results and report.status in ("graded", "unchanged"):
            result = results[student]
            report.score, report.max_score = result.auto_score, result.auto_max
            report.failed_cells = {g: result.cells[g].error for g in result.failed()}
            graded_nb = root.notebook("autograded", assignment, student)
            if report.status == "unchanged" and graded_nb.exists():
                _read_review(graded_nb, report)


def grade_class(root: CourseRoot, assignment: str, jobs: int = 1, regrade: bool = False,
                progress: bool = True) -> dict[str, StudentReport]:
    """Inspect, autograde and give feedback to every student of an assignment."""
    root.check_assignment(assignment)
    if not root.folder("release", assignment).is_dir():
        raise P.PipelineError(f"release/{assignment} is missing: run `python -m instructor release {assignment}` first")
    state_path = root.path / "autograded" / STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    done = state.setdefault(assignment, {})
    graded_before = set(root.results(assignment))  # sqlite or a server (CourseRoot.gradebook_url)

    reports, todo = {}, []
    for student in root.students(assignment):
        report = reports[student] = StudentReport(student)
        report.problems = inspect(root, assignment, student)
        if report.problems:
            report.status = "skipped"
        elif not regrade and done.get(student) == fingerprint(root, assignment, student) \
                and student in graded_before:
            report.status = "unchanged"
        else:
            todo.append(student)

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="student", desc=f"autograde {assignment}")
    workers = max(1, min(jobs, len(todo)))
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_start, initargs=(str(root.path.resolve()),)) as pool:
        futures = {pool.submit(_worker_grade, assignment, s): s for s in todo}
        for future in as_completed(futures):
            student = futures[future]
            reports[student] = future.result()
            if reports[student].status == "graded":
                done[student] = fingerprint(root, assignment, student)
            else:
                done.pop(student, None)
            if bar:
                bar.update(1)
                bar.set_postfix_str(student)
    if bar:
        bar.close()
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps(state, indent=1, sort_keys=True))
    _fill_scores(root, assignment, reports)
    return reports


REVIEW_MARK = "REVIEW"  # the summary table's review column for a flagged submission


def format_table(assignment: str, reports: dict[str, StudentReport]) -> str:
    warning = sandbox_warning()
    lines = [warning, ""] if warning else []
    lines.append(f"{'student':<24}{'status':<11}{'score':>9}  {'review':<7}notes")
    for student in sorted(reports):
        r = reports[student]
        score = f"{r.score:g}/{r.max_score:g}" if r.status in ("graded", "unchanged") else "-"
        review = REVIEW_MARK if r.review else ""
        notes = ([f"folder {r.folder!r}"] if r.folder else []) + r.problems  # issue 22: the name as handed in
        lines.append(f"{student:<24}{r.status:<11}{score:>9}  {review:<7}{'; '.join(notes)}")
    statuses = ("graded", "unchanged", "skipped", "failed", "refused")  # refused: by collection (issue 22)
    counts = {s: sum(r.status == s for r in reports.values()) for s in statuses}
    flagged = sum(bool(r.review) for r in reports.values())
    lines.append(f"{assignment}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                 + f"; {flagged} for review")
    return "\n".join(lines)


def write_report(path: Path, assignment: str, reports: dict[str, StudentReport]) -> Path:
    """A plain-text report: the table, then each broken submission and each failed cell."""
    out = [format_table(assignment, reports), ""]
    for student in sorted(reports):
        r = reports[student]
        if r.problems or r.failed_cells or r.review or r.folder:
            out.append(f"## {student} ({r.status})" + (" FOR REVIEW" if r.review else "")
                       + (f" folder {r.folder!r}" if r.folder else ""))
            out += [f"  review: {p}" for p in r.review]
            out += [f"  problem: {p}" for p in r.problems]
            out += [f"  {g}: {msg}" for g, msg in r.failed_cells.items()]
    path.write_text("\n".join(out) + "\n")
    return path
