"""Grade a whole class, and let a learner grade their own notebook.

Class batch (``python -m instructor grade-class ASSIGNMENT --from FOLDER_OR_ZIP --jobs N``):

1. **collect**: the submissions are copied to ``downloaded/<assignment>/archive/`` and
   ``nbgrader zip_collect`` extracts them into ``submitted/<student>/<assignment>/``. The
   file-name convention is one folder per student: ``<student_id>/<notebook>.ipynb``,
   either as folders or inside a zip (``class.zip: alice/two_keys.ipynb, bob/two_keys.ipynb``).
2. **inspect** every student folder: a missing or renamed notebook, or one that is not valid
   JSON, is reported and skipped.
3. **grade** the rest with ``--jobs`` worker processes, one student per ``nbgrader autograde``
   process at a time, all writing to the one sqlite gradebook (retrying when it is busy);
   a student whose autograde fails (a kernel that died from ``os._exit``, ...) is reported and
   the batch goes on. Unchanged submissions that are already graded are skipped, so re-running
   is idempotent; manual grades are never touched (nbgrader keeps them on re-autograde too).
4. **feedback** HTML per graded student, a summary table, ``grades.csv`` and a report.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import pipeline as P

STUDENT_FOLDER_REGEXP = r".*/(?P<student_id>[A-Za-z0-9][A-Za-z0-9_.@+\-]*)/(?P<file_id>[^/]+\.ipynb)$"
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


# ---------------------------------------------------------------- collect


def collect(root: Path, assignment: str, source: Path) -> list[str]:
    """Bring a folder or zip of ``<student>/<notebook>.ipynb`` into ``submitted/``."""
    source = source.resolve()
    if not source.exists():
        raise P.PipelineError(f"no submissions at {source}")
    if source.is_file() and not zipfile.is_zipfile(source):
        raise P.PipelineError(f"{source} is neither a folder nor a zip file")
    archive = root / "downloaded" / assignment / "archive"
    if archive.exists():
        shutil.rmtree(archive)
    archive.mkdir(parents=True)
    if source.is_dir():
        shutil.copytree(source, archive / source.name, dirs_exist_ok=True)
    else:
        shutil.copy2(source, archive / source.name)
    P.nbgrader("zip_collect", assignment, "--force",
               f"--FileNameCollectorPlugin.named_regexp={STUDENT_FOLDER_REGEXP}", cwd=root)
    return students(root, assignment)


def students(root: Path, assignment: str) -> list[str]:
    return sorted(p.parent.name for p in (root / "submitted").glob(f"*/{assignment}") if p.is_dir())


# ---------------------------------------------------------------- inspect


def inspect(root: Path, assignment: str, student: str) -> list[str]:
    """Problems that make a submission ungradable: missing, renamed or broken notebooks."""
    folder = root / "submitted" / student / assignment
    expected = sorted(p.name for p in (root / "release" / assignment).glob("*.ipynb"))
    found = sorted(p.name for p in folder.glob("*.ipynb"))
    problems = []
    for name in expected:
        if name not in found:
            others = [f for f in found if f not in expected]
            problems.append(f"{name} is missing" + (f" (found {', '.join(others)}: renamed?)" if others else ""))
            continue
        try:
            nbformat.read(str(folder / name), as_version=4)
        except Exception as err:  # nbformat raises several types for broken files
            problems.append(f"{name} is not a readable notebook ({type(err).__name__}: {str(err)[:120]})")
    return problems


def fingerprint(root: Path, assignment: str, student: str) -> str:
    digest = hashlib.sha256()
    for path in sorted((root / "submitted" / student / assignment).rglob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


# ---------------------------------------------------------------- grade


def _nbgrader_retrying(args: list[str], root: Path, attempts: int = 5) -> subprocess.CompletedProcess:
    """Run nbgrader; retry while the shared sqlite gradebook is locked by another worker."""
    for attempt in range(attempts):
        proc = P.nbgrader(*args, cwd=root, check=False)
        if "database is locked" not in proc.stderr:
            return proc
        time.sleep(0.5 * (attempt + 1))
    return proc


def _failure_reason(stderr: str) -> str:
    if "DeadKernelError" in stderr or "Kernel died" in stderr:
        return "the kernel died while running the notebook (os._exit or a crash)"
    if "CellTimeoutError" in stderr:
        return "a cell ran past the time limit"
    lines = [line for line in stderr.splitlines() if "Error" in line and "AutogradeApp" not in line]
    return lines[-1].strip()[:200] if lines else "nbgrader autograde failed (see nbgrader.log)"


def grade_student(root: Path, assignment: str, student: str) -> StudentReport:
    report = StudentReport(student)
    proc = _nbgrader_retrying(["autograde", assignment, "--force", "--create", f"--student={student}"], root)
    graded_nb = P.notebook_path(root, "autograded", assignment, student)
    if proc.returncode != 0 or not graded_nb.exists():
        report.status = "failed"
        report.problems.append(_failure_reason(proc.stderr))
        return report
    _nbgrader_retrying(["generate_feedback", assignment, "--force", f"--student={student}"], root)
    report.status = "graded"
    if TAMPER_MARK in graded_nb.read_text(errors="replace"):
        report.problems.append("replaced the grader's check functions (restored before the tests ran)")
    return report


def _fill_scores(root: Path, assignment: str, reports: dict[str, StudentReport]) -> None:
    results = P.results(root, assignment)
    for student, report in reports.items():
        if student in results and report.status in ("graded", "unchanged"):
            result = results[student]
            report.score, report.max_score = result.auto_score, result.auto_max
            report.failed_cells = {g: result.cells[g].error for g in result.failed()}


def grade_class(root: Path, assignment: str, jobs: int = 1, regrade: bool = False,
                progress: bool = True) -> dict[str, StudentReport]:
    """Inspect, autograde and give feedback to every student of an assignment."""
    P.check_assignment(assignment, root)
    if not (root / "release" / assignment).is_dir():
        raise P.PipelineError(f"release/{assignment} is missing: run `python -m instructor release {assignment}` first")
    state_path = root / "autograded" / STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    done = state.setdefault(assignment, {})
    graded_before = set(P.results(root, assignment)) if (root / "gradebook.db").exists() else set()

    reports, todo = {}, []
    for student in students(root, assignment):
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
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(grade_student, root, assignment, s): s for s in todo}
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


def format_table(assignment: str, reports: dict[str, StudentReport]) -> str:
    lines = [f"{'student':<24}{'status':<11}{'score':>9}  notes"]
    for student in sorted(reports):
        r = reports[student]
        score = f"{r.score:g}/{r.max_score:g}" if r.status in ("graded", "unchanged") else "-"
        lines.append(f"{student:<24}{r.status:<11}{score:>9}  {'; '.join(r.problems)}")
    counts = {s: sum(r.status == s for r in reports.values()) for s in ("graded", "unchanged", "skipped", "failed")}
    lines.append(f"{assignment}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


def write_report(path: Path, assignment: str, reports: dict[str, StudentReport]) -> Path:
    """A plain-text report: the table, then each broken submission and each failed cell."""
    out = [format_table(assignment, reports), ""]
    for student in sorted(reports):
        r = reports[student]
        if r.problems or r.failed_cells:
            out.append(f"## {student} ({r.status})")
            out += [f"  problem: {p}" for p in r.problems]
            out += [f"  {g}: {msg}" for g, msg in r.failed_cells.items()]
    path.write_text("\n".join(out) + "\n")
    return path
