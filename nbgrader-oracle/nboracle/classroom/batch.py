"""Grade a whole class: one pipeline, any runner; and let a learner grade their own notebook.

``python -m instructor grade-class ASSIGNMENT --from FOLDER_OR_ZIP [--jobs N | --cluster ADDRESS]``
runs :func:`grade_class`, which is written once:

1. **plan** (:func:`plan`): *collect* the submissions into ``submitted/<student>/<assignment>/``
   (:func:`collect`, ``nboracle.classroom.collect``: any folder name is accepted, mapped to a safe,
   stable id shown with its name, or refused by name), *inspect* each student folder (:func:`inspect`: a missing, renamed or broken
   notebook, or another assignment's notebook, is reported and skipped; duplicated, deleted and
   reordered cells are mended while grading by ``nboracle.grader.repair``), *fingerprint* it and
   skip the unchanged ones already in the gradebook (``autograded/.batch-state.json``).
2. **grade** each remaining student with a *runner*. A runner only supplies "grade this
   student's submission and return its result" (:mod:`nboracle.classroom.grader`: autograded notebooks,
   feedback HTML, scores, review flags, where it ran, whether it was sandboxed):
   :class:`InProcess` (tests, small jobs), :class:`LocalPool` (``--jobs N``: long-lived worker
   processes) and ``nboracle.classroom.cluster.Dask`` (``--cluster ADDRESS|local:N``). Each worker
   builds one private course root and loads nbgrader once, then grades student after student.
3. **record** (:class:`Recorder`): results are written in batches, one gradebook transaction
   per batch (sqlite or PostgreSQL, ``CourseDirectory.db_url``), with the autograded and
   feedback folders placed beside them and the state file saved atomically. The instructor
   side does a few row writes and file copies per student; everything that grows with the
   class (kernels, feedback rendering) runs where the students run. Manual grades are never
   touched; a student's second result (a re-run task of a killed worker) is ignored.
4. **report**: :func:`format_table`, :func:`write_report` and the CSV (``CourseRoot.export``);
   the Recorder also classifies each student's test cells (passed, the known mistakes their
   messages name, failed otherwise, not attempted: :mod:`nboracle.classroom.mistakes`) into
   ``mistakes/<assignment>.json``, which :mod:`nboracle.classroom.class_report` turns into
   the instructor's pages (:func:`write_class_report`).

Faults: a student whose autograde fails (a kernel killed by ``os._exit``, ...) is reported and
the batch goes on. A *grader* fault (a kernel that cannot import the course, a worker that
cannot sandbox while the instructor asked for the sandbox, a broken worker environment) stops
the batch with :class:`BatchStopped`; so does a runner that goes away (a lost Dask scheduler).
Everything recorded before stays recorded, :attr:`BatchStopped.reports` covers it (the CLI
still writes the table, report and CSV), and running the same command again grades the rest.

**Review**: a submission that tampered with the grading kernel, or whose code touches the
kernel's machinery, the gradebook, other processes, the network or paths outside its folder
(``nboracle.grader.scan``), or that the OS sandbox refused something, is graded as usual and marked
*for review* (``nboracle.grader.nbgrader_ext.ReviewFlags``): the ``review`` column of the summary,
``review:`` lines in the report, ``needs_review``/``review_reasons`` in ``grades.csv`` and
nbgrader's "needs manual grade" in the formgrader. When a student's kernels ran without the OS
sandbox (``nboracle.grader.sandbox``), the summary and the report start with a warning saying where.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from nboracle.grader.nbgrader_ext import review_reasons

from . import grader as G
from . import pipeline as P
from .collect import Collected, collect_class, folder_names, last_collection
from .course_root import STATE_FILE, CourseRoot  # noqa: F401 (STATE_FILE: where the state lives)
from .grader import GraderError  # noqa: F401 (part of this module's interface)
from .mistakes import MistakeLog


@dataclass
class StudentReport:
    student: str
    status: str = "pending"  # graded | unchanged | skipped | failed | pending (batch stopped first)
    score: float = 0.0
    max_score: float = 0.0
    problems: list[str] = field(default_factory=list)
    failed_cells: dict[str, str] = field(default_factory=dict)
    review: list[str] = field(default_factory=list)  # why a person should look at it (empty: nothing)
    where: str = ""  # the machine and process that graded it (this run)
    sandbox: str = ""  # "" (not graded in this run), else what the grading kernels ran in
    sandboxed: bool | None = None
    folder: str = ""  # issue 22: the folder name as handed in, when the student id differs from it


class RunnerLost(P.PipelineError):
    """The runner went away (a lost Dask scheduler, a dead process pool): the batch cannot go on."""


class BatchStopped(P.PipelineError):
    """The batch stopped before every student was graded; :attr:`reports` covers everyone so far."""

    def __init__(self, message: str, reports: dict[str, StudentReport]):
        super().__init__(message)
        self.reports = reports


@dataclass
class BatchStats:
    """What happened during a batch (for the report, the tests and the benchmark)."""

    per_worker: Counter = field(default_factory=Counter)
    written: Counter = field(default_factory=Counter)  # student -> results recorded (must be 1)
    duplicates: int = 0
    task_seconds: dict[str, float] = field(default_factory=dict)  # student -> seconds on its grader
    record_seconds: float = 0.0  # instructor side: placing files, writing the gradebook and state
    batches: int = 0  # gradebook transactions
    wall_seconds: float = 0.0  # from the first task sent to the last student recorded


# ---------------------------------------------------------------- plan: collect


def collect(root: CourseRoot, assignment: str, source: Path) -> list[str]:
    """Bring a folder or zip of ``<student>/<notebook>.ipynb`` into ``submitted/``: the student ids."""
    return sorted(collect_class(root, assignment, source).students)


# ---------------------------------------------------------------- plan: inspect


def release_roots(root: CourseRoot) -> list[Path]:
    """The other course roots whose release/ tells one assignment's notebook from another
    (``c.RepairSubmission.release_roots``)."""
    return [Path(p) for p in root._setting("RepairSubmission", "release_roots") or []]


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
        from nboracle.grader.repair import (
            wrong_chapter,  # issue 22: another assignment's notebook, by its grade ids
        )

        wrong = next(filter(None, (wrong_chapter(nb, assignment, where)
                                   for where in [root.path, *release_roots(root)])), None)
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


@dataclass
class Plan:
    """Who is graded this run, who is skipped or unchanged, and the state to update."""

    assignment: str
    reports: dict[str, StudentReport]
    todo: list[str]
    fingerprints: dict[str, str]
    state: dict


def plan(root: CourseRoot, assignment: str, regrade: bool = False) -> Plan:
    """Inspect and fingerprint every student folder; choose who needs grading."""
    root.check_assignment(assignment)
    if not root.folder("release", assignment).is_dir():
        raise P.PipelineError(f"release/{assignment} is missing: run "
                              f"`{root.release_command.format(assignment=assignment)}` first")
    state = root.read_state()
    done = state.setdefault(assignment, {})
    graded_before = None
    reports, todo, fingerprints = {}, [], {}
    for student in root.students(assignment):
        report = reports[student] = StudentReport(student)
        report.problems = inspect(root, assignment, student)
        if report.problems:
            report.status = "skipped"
            continue
        fingerprints[student] = fingerprint(root, assignment, student)
        if not regrade and done.get(student) == fingerprints[student]:
            if graded_before is None:
                graded_before = set(root.results(assignment))  # sqlite or a server
            if student in graded_before:
                report.status = "unchanged"
                continue
        todo.append(student)
    return Plan(assignment, reports, todo, fingerprints, state)


# ---------------------------------------------------------------- grade: runners


class InProcess:
    """Grade in this process, one student after another (tests, the benchmark, small jobs)."""

    name = "this process"

    def run(self, job: dict, tasks: Iterable[tuple[str, dict]]) -> Iterator[dict]:
        grader = G.Grader(job)
        try:
            for student, files in tasks:
                yield grader.grade(student, files)
        finally:
            grader.close()


class LocalPool:
    """``--jobs N``: N long-lived worker processes on this machine."""

    def __init__(self, jobs: int = 2):
        self.jobs = max(1, int(jobs))
        self.name = f"{self.jobs} local worker process(es)"

    def run(self, job: dict, tasks: Iterable[tuple[str, dict]]) -> Iterator[dict]:
        tasks = list(tasks)
        if not tasks:
            return
        workers = min(self.jobs, len(tasks))
        pool = ProcessPoolExecutor(max_workers=workers, initializer=G.pool_start,
                                   initargs=({**job, "workers_here": workers},),
                                   mp_context=multiprocessing.get_context("spawn"))
        try:
            futures = {pool.submit(G.pool_grade, student, files): student for student, files in tasks}
            for future in as_completed(futures):
                try:
                    yield future.result()
                except BrokenProcessPool as err:
                    raise RunnerLost(f"a local worker process died ({err})") from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- record


@contextlib.contextmanager
def _one_transaction(gb):
    """nbgrader's Gradebook commits after each call: within this block, once, at the end."""
    commit = gb.db.commit
    gb.db.commit = gb.db.flush
    try:
        yield
    except BaseException:
        del gb.db.commit
        gb.db.rollback()
        raise
    del gb.db.commit
    commit()


class Recorder:
    """The instructor side: results in, files placed and gradebook rows written in batches."""

    def __init__(self, root: CourseRoot, p: Plan, stats: BatchStats, batch_size: int = 50,
                 flush_seconds: float = 2.0):
        from nbgrader.coursedir import CourseDirectory

        self.root, self.plan, self.stats = root, p, stats
        self.url, self.course_id = root.gradebook_url, root.course_id
        self.batch_size, self.flush_seconds = batch_size, flush_seconds
        self.buffer: list[dict] = []
        self.last_flush = time.perf_counter()
        self._coursedir = CourseDirectory(root=str(root.path))
        self.mistakes = MistakeLog(root, p.assignment)  # mistakes/<assignment>.json

    def add(self, result: dict) -> list[str]:
        """Take one result; return the students recorded by it (a batch, or nothing yet)."""
        student = result["student"]
        if self.stats.written[student] or any(r["student"] == student for r in self.buffer):
            self.stats.duplicates += 1  # a task re-run after a worker died: recorded once
            return []
        self.buffer.append(result)
        if len(self.buffer) >= self.batch_size or time.perf_counter() - self.last_flush >= self.flush_seconds:
            return self.flush()
        return []

    def flush(self) -> list[str]:
        if not self.buffer:
            return []
        start = time.perf_counter()
        results, self.buffer = self.buffer, []
        self._place_files(results)
        self._write_gradebook(results)
        done = self.plan.state.setdefault(self.plan.assignment, {})
        for result in results:
            student = result["student"]
            if result["status"] == G.GRADED:
                done[student] = self.plan.fingerprints[student]
            else:
                done.pop(student, None)
            self._report(result)
            self.mistakes.add(result)
        self.root.save_state(self.plan.state)
        self.mistakes.save()
        self.stats.batches += 1
        self.stats.record_seconds += time.perf_counter() - start
        self.last_flush = time.perf_counter()
        return [r["student"] for r in results]

    def _place_files(self, results: list[dict]) -> None:
        a = self.plan.assignment
        for result in results:
            for folder, key in (("autograded", "files"), ("feedback", "feedback")):
                dest = self.root.folder(folder, a, result["student"])
                if dest.exists():
                    shutil.rmtree(dest)  # what `nbgrader autograde --force` does before grading again
                if result["status"] == G.GRADED:
                    G.write_folder(dest, result[key])

    def _write_gradebook(self, results: list[dict]) -> None:
        import warnings

        from nbgrader.api import Gradebook

        a = self.plan.assignment
        with Gradebook(self.url, self.course_id) as gb, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQLAlchemy's autoflush warning in update_or_create_submission
            with _one_transaction(gb):
                for result in results:
                    student = result["student"]
                    submitted = self.root.folder("submitted", a, student)
                    timestamp = self._coursedir.get_existing_timestamp(str(submitted))
                    gb.update_or_create_student(student)
                    gb.update_or_create_submission(a, student, **({"timestamp": timestamp} if timestamp else {}))
                    if result["status"] == G.GRADED:
                        self._write_scores(gb, a, result)

    @staticmethod
    def _write_scores(gb, assignment: str, result: dict) -> None:
        """The grader's scores, as nbgrader's SaveAutoGrades would write them here."""
        for notebook, grades in result["grades"].items():
            submitted_nb = gb.find_submission_notebook(notebook, assignment, result["student"])
            for grade in submitted_nb.grades:
                if grade.name in grades:
                    grade.auto_score, flagged = grades[grade.name]
                    # as SaveAutoGrades: a manual grade given earlier, or no automatic score, needs a look
                    grade.needs_manual_grade = bool(flagged or grade.manual_score is not None
                                                    or grade.auto_score is None)
            comments = result["comments"].get(notebook, {})
            for comment in submitted_nb.comments:
                if comment.name in comments:
                    comment.auto_comment = comments[comment.name]
            submitted_nb.late_submission_penalty = result["penalties"].get(notebook)

    def _report(self, result: dict) -> None:
        student = result["student"]
        report = self.plan.reports[student]
        report.status = G.GRADED if result["status"] == G.GRADED else "failed"
        report.where, report.sandbox = result.get("where", ""), result.get("sandbox", "")
        report.sandboxed = result.get("sandboxed")
        if result["status"] == G.GRADED:
            report.score, report.max_score = result["score"], result["max_score"]
            report.failed_cells, report.review = result["failed_cells"], result["review"]
        else:
            report.problems.append(result["problem"])
        self.stats.written[student] += 1
        self.stats.per_worker[result.get("where", "?")] += 1
        self.stats.task_seconds[student] = result.get("seconds", 0.0)


# ---------------------------------------------------------------- the pipeline


def grade_class(root: CourseRoot, assignment: str, runner=None, jobs: int = 2, regrade: bool = False,
                progress: bool = True, stats: BatchStats | None = None, on_result=None,
                batch_size: int = 50, sandbox_mode: str | None = None,
                flush_seconds: float = 2.0) -> dict[str, StudentReport]:
    """Plan, grade (with ``runner``, default ``LocalPool(jobs)``) and record every student.

    ``on_result(runner, student, n_done)`` is called after each student is recorded (tests kill
    workers and schedulers there). Raises :class:`BatchStopped` (with the reports so far) when
    a grader fault or a lost runner stops the batch.
    """
    root = root if isinstance(root, CourseRoot) else CourseRoot(root)
    runner = runner if runner is not None else LocalPool(jobs)
    stats = stats if stats is not None else BatchStats()
    p = plan(root, assignment, regrade)
    job = G.make_job(root, assignment, sandbox_mode) if p.todo else None
    recorder = Recorder(root, p, stats, batch_size=batch_size, flush_seconds=flush_seconds)
    bar = None
    if progress and p.todo:
        from tqdm import tqdm

        bar = tqdm(total=len(p.todo), unit="student", desc=f"autograde {assignment} ({runner.name})")
    tasks = ((s, G.read_folder(root.folder("submitted", assignment, s))) for s in p.todo)
    start, n_done, stop = time.perf_counter(), 0, None

    def recorded(students: list[str]) -> None:
        nonlocal n_done
        for student in students:
            n_done += 1
            if bar:
                bar.update(1)
                bar.set_postfix_str(student)
            if on_result:
                on_result(runner, student, n_done)

    results = runner.run(job, tasks) if p.todo else iter(())
    try:
        for result in results:
            if result["status"] == G.GRADER_ERROR:
                stop = (f"grader error, nothing recorded for {result['student']}: {result['problem']}", None)
                break
            recorded(recorder.add(result))
    except RunnerLost as err:
        stop = (str(err), err)
    finally:
        with contextlib.suppress(Exception):
            results.close()
        recorded(recorder.flush())
        if bar:
            bar.close()
    stats.wall_seconds = time.perf_counter() - start
    unchanged = [s for s, r in p.reports.items() if r.status == "unchanged"]
    _fill_from_gradebook(root, assignment, p.reports, unchanged)
    _record_missing_mistakes(root, assignment, recorder.mistakes, unchanged)
    if stop:
        kept = {0: "none is recorded", 1: "that one is recorded"}.get(n_done, f"those {n_done} are recorded")
        message = (f"{stop[0]}\nThe batch stopped after {n_done} of {len(p.todo)} students; {kept} "
                   f"(gradebook, {STATE_FILE}). Run the same command again to grade the rest.")
        raise BatchStopped(message, p.reports) from stop[1]
    return p.reports


def _record_missing_mistakes(root: CourseRoot, assignment: str, log: MistakeLog, students: list[str]) -> None:
    """Classify unchanged students the record lacks (graded before it existed, or it was deleted)
    from the gradebook and their autograded notebooks, as if their results came in now."""
    missing = [s for s in students if s not in log.record["students"]]
    if not missing:
        return
    results, name = root.results(assignment), root.notebook_name(assignment)
    for student in [s for s in missing if s in results]:
        result = results[student]
        log.add({"student": student, "status": G.GRADED, "score": result.auto_score, "max_score": result.auto_max,
                 "files": G.read_folder(root.folder("autograded", assignment, student)),
                 "grades": {name: {g: [c.score, False] for g, c in result.cells.items()}},
                 "failed_cells": {g: result.cells[g].error for g in result.failed()}})
    log.save()


def _fill_from_gradebook(root: CourseRoot, assignment: str, reports: dict[str, StudentReport],
                         students: list[str]) -> None:
    """Scores and review flags of ``students`` (unchanged ones), from the gradebook and their files."""
    if not students:
        return
    results = root.results(assignment)
    for student in students:
        report, result = reports[student], results.get(student)
        if result is not None:
            report.score, report.max_score = result.auto_score, result.auto_max
            report.failed_cells = {g: result.cells[g].error for g in result.failed()}
        for graded_nb in sorted(root.folder("autograded", assignment, student).glob("*.ipynb")):
            text = graded_nb.read_text(errors="replace")
            try:
                report.review += review_reasons(nbformat.reads(text, as_version=4))
            except Exception as err:  # an autograded notebook we cannot read is itself worth a look
                report.review.append(f"the autograded notebook could not be read ({type(err).__name__})")


# ---------------------------------------------------------------- a learner's own notebook


def grade_student(root: CourseRoot, assignment: str, student: str) -> StudentReport:
    """Autograde and give feedback to one student in ``root`` with the nbgrader command line
    (a learner's self-check: their own course root, their own gradebook)."""
    report = StudentReport(student)
    proc = root.nbgrader("autograde", assignment, "--force", "--create", f"--student={student}", check=False)
    graded_nb = root.notebook("autograded", assignment, student)
    if proc.returncode != 0 or not graded_nb.exists():
        report.status = "failed"
        report.problems.append(G.failure_reason(proc.stderr))
        return report
    root.nbgrader("generate_feedback", assignment, "--force", f"--student={student}", check=False)
    report.status = "graded"
    _fill_from_gradebook(root, assignment, {student: report}, [student])
    return report


# ---------------------------------------------------------------- report


REVIEW_MARK = "REVIEW"  # the summary table's review column for a flagged submission


def sandbox_warning(reports: dict[str, StudentReport] | None = None) -> str | None:
    """A loud line when grading kernels of this run ran without the OS sandbox, else None.

    From the students' results (where each ran); with no reports, this machine's status.
    """
    if reports is None:
        from nboracle.grader import sandbox

        try:
            ok, reason = sandbox.sandbox_status()
        except Exception as err:  # a broken probe is no sandbox
            ok, reason = False, f"the sandbox check failed ({type(err).__name__}: {err})"
        unsandboxed = {} if ok else {"this machine": reason}
    else:
        unsandboxed = {r.where: r.sandbox for r in reports.values() if r.sandboxed is False}
    if not unsandboxed:
        return None
    count = "" if reports is None else f"{sum(r.sandboxed is False for r in reports.values())} student(s): "
    places = "; ".join(f"{where}: {why}" for where, why in sorted(unsandboxed.items()))
    return ("WARNING: " + count + "the grading kernels ran WITHOUT the OS sandbox (" + places + "): student "
            "code could read and write everything that account can, including gradebook.db. The oracle "
            "and the review flags still ran; see docs/GRADING.md, \"Students cannot buy points\".")


def account(root, assignment: str, reports: dict, found: Collected | None = None) -> dict:
    """Add to a batch's reports what collection knows: folder names, its notes, refused entries."""
    found = found if found is not None else last_collection(root, assignment)
    names = {**folder_names(root), **found.students}
    for sid, report in reports.items():
        if names.get(sid, sid) != sid:
            report.folder = names[sid]
        for note in found.notes.get(sid, []):
            if note not in report.problems:
                report.problems.append(note)
    for entry, why in sorted(found.refused.items()):
        reports[f"refused: {entry}"] = StudentReport(entry, status="refused", problems=[why])
    return reports



def format_table(assignment: str, reports: dict[str, StudentReport]) -> str:
    warning = sandbox_warning(reports)
    lines = [warning, ""] if warning else []
    lines.append(f"{'student':<24}{'status':<11}{'score':>9}  {'review':<7}notes")
    for student in sorted(reports):
        r = reports[student]
        score = f"{r.score:g}/{r.max_score:g}" if r.status in ("graded", "unchanged") else "-"
        review = REVIEW_MARK if r.review else ""
        notes = ([f"folder {r.folder!r}"] if r.folder else []) + r.problems  # issue 22: the name as handed in
        lines.append(f"{student:<24}{r.status:<11}{score:>9}  {review:<7}{'; '.join(notes)}")
    statuses = ("graded", "unchanged", "skipped", "failed", "refused", "pending")  # refused: by collection; pending: the batch stopped first
    counts = {s: sum(r.status == s for r in reports.values()) for s in statuses}
    flagged = sum(bool(r.review) for r in reports.values())
    lines.append(f"{assignment}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n or s != "pending")
                 + f"; {flagged} for review")
    return "\n".join(lines)


def write_class_report(root: CourseRoot, assignment: str) -> dict[str, Path]:
    """What the class got wrong: ``mistakes/<assignment>.html``, its CSVs and the term's pages."""
    from .class_report import write_all

    return write_all(root, assignment)


def write_report(path: Path, assignment: str, reports: dict[str, StudentReport]) -> Path:
    """A plain-text report: the table, each broken submission and failed cell, where each ran."""
    out = [format_table(assignment, reports), ""]
    for student in sorted(reports):
        r = reports[student]
        if r.problems or r.failed_cells or r.review or r.folder:
            out.append(f"## {student} ({r.status})" + (" FOR REVIEW" if r.review else "")
                       + (f" folder {r.folder!r}" if r.folder else ""))
            out += [f"  review: {p}" for p in r.review]
            out += [f"  problem: {p}" for p in r.problems]
            out += [f"  {g}: {msg}" for g, msg in r.failed_cells.items()]
    ran = [r for r in reports.values() if r.where]
    if ran:
        out += ["", "## where each student was graded (this run)"]
        out += [f"  {r.student}: {r.where}, " + ("sandboxed" if r.sandboxed else f"NOT SANDBOXED ({r.sandbox})")
                for r in sorted(ran, key=lambda r: r.student)]
    path.write_text("\n".join(out) + "\n")
    return path
