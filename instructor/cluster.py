"""Grade a class on a Dask cluster: ``python -m instructor grade-class A --cluster ADDRESS``.

One machine grades with ``--jobs N`` (:mod:`instructor.batch`); a class of thousands grades on
an existing Dask distributed cluster (``--cluster tcp://scheduler:8786``, ``tls://...``), or
on a LocalCluster of N worker processes (``--cluster local:N``). docs/CLUSTER.md says how to
start one.

* **The task.** Each student's autograde is one Dask task. A worker shares no file system with
  the instructor: the task carries the student's submitted folder, and what grading needs of
  the assignment, as nbgrader keeps it: the gradebook's assignment, notebook and cell records
  (grade cells with their points, locked and test cells with their source: the hidden tests),
  the non-notebook files of ``source/<assignment>/`` that autograde copies, and the text of the
  course's ``nbgrader_config.py`` (so the worker runs the same kernel, sandbox, timeouts and
  output limits as a local autograde). The worker builds a private temporary course root with
  a sqlite gradebook holding only those records, runs ``nbgrader autograde`` there, and returns
  the autograded folder and the scores it read from that gradebook. The temporary root is
  deleted when the task ends (also when it fails).
* **The gradebook is written once, on the instructor side**, in one place (the loop over
  finished tasks): the submission (with its timestamp) and each cell's automatic score go into
  the course's gradebook (``CourseDirectory.db_url``: sqlite or a PostgreSQL server) through
  nbgrader's own ``SaveAutoGrades`` and ``AssignLatePenalties`` preprocessors, keyed by student,
  so writing a student again only overwrites the same rows; manual grades are never touched.
  The scores the worker computed must equal the ones written, else the student is reported.
* **Faults.** A worker that dies mid-task: the scheduler re-runs its tasks on other workers
  (a result reaches the instructor once per student; a second one would be ignored). A task
  that killed three workers is reported as failed. A submission whose kernel dies is reported
  and skipped, as in the one-machine batch. The scheduler going away stops the batch with a
  clear message; every student written so far is in the gradebook and in the batch state
  file, so running the same command again grades only the rest.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import batch
from . import pipeline as P
from .course_root import CourseRoot

DEFAULT_COURSE_ID = "attention-transformers"


class ClusterError(P.PipelineError):
    """The cluster could not be reached, or went away during the batch."""


@dataclass
class ClusterStats:
    """What happened during a cluster batch (for the report, the tests and the benchmark)."""

    per_worker: Counter = field(default_factory=Counter)
    written: Counter = field(default_factory=Counter)  # student -> gradebook writes (must be 1)
    duplicates: int = 0
    task_seconds: dict[str, float] = field(default_factory=dict)  # student -> seconds on the worker
    write_seconds: float = 0.0  # instructor side: placing notebooks and writing the gradebook
    feedback_seconds: float = 0.0
    wall_seconds: float = 0.0  # from the first task submitted to the last student written


# ---------------------------------------------------------------- what a task carries


def course_config(root: Path) -> tuple[str, str]:
    """(text of ``<root>/nbgrader_config.py``, course id)."""
    text = (root / "nbgrader_config.py").read_text()
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    course_id = config.get("CourseDirectory", {}).get("course_id") or DEFAULT_COURSE_ID
    return text, str(course_id)


def assignment_records(db_url: str, course_id: str, assignment: str) -> dict:
    """The gradebook's records of an assignment, as plain data (what ``generate_assignment`` saved)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            raise P.PipelineError(f"{assignment} is not in the gradebook {db_url.split('@')[-1]}: "
                                  f"run `python -m instructor release {assignment}` first") from None
        notebooks = []
        for nb in found.notebooks:
            notebooks.append({
                "name": nb.name,
                "kernelspec": nb.kernelspec,
                "grade_cells": [{"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type}
                                for c in nb.grade_cells],
                "solution_cells": [{"name": c.name} for c in nb.solution_cells],
                "task_cells": [{"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type}
                               for c in nb.task_cells],
                "source_cells": [{"name": c.name, "cell_type": c.cell_type, "locked": c.locked,
                                  "source": c.source, "checksum": c.checksum} for c in nb.source_cells],
            })
        return {"name": found.name, "duedate": found.duedate.isoformat() if found.duedate else None,
                "notebooks": notebooks}


def _read_folder(folder: Path, ignore: list[str] | None = None) -> dict[str, str]:
    """{relative path: base64 content} of every file under ``folder``."""
    import fnmatch

    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in (ignore or [])):
            continue
        files[rel.as_posix()] = base64.b64encode(path.read_bytes()).decode()
    return files


def _write_folder(folder: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = folder / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise P.PipelineError(f"refusing to write {rel!r} outside {folder}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(content))


def shared_payload(root: Path, assignment: str, db_url: str) -> dict:
    """What every task of an assignment needs besides the student's folder."""
    config_text, course_id = course_config(root)
    source = root / "source" / assignment
    # autograde copies the non-notebook files of source/<a>/ (never *.py: see the config's ignore)
    extras = {rel: data for rel, data in _read_folder(source, [".ipynb_checkpoints", "__pycache__"]).items()
              if not rel.endswith((".ipynb", ".py", ".pyc", ".md"))} if source.is_dir() else {}
    return {"assignment": assignment, "course_id": course_id, "config": config_text,
            "records": assignment_records(db_url, course_id, assignment), "source_files": extras}


# ---------------------------------------------------------------- the worker side


def _sqlite_url(folder: Path) -> str:
    """A gradebook of the worker's private course root (never the instructor's, whatever the config says)."""
    return f"sqlite:///{Path(folder).resolve() / 'gradebook.db'}"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the autograde process ends when the worker that started it is killed."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _build_gradebook(db_url: str, course_id: str, records: dict) -> None:
    from datetime import datetime

    from nbgrader.api import Gradebook

    a = records["name"]
    with Gradebook(db_url, course_id) as gb:
        duedate = datetime.fromisoformat(records["duedate"]) if records["duedate"] else None
        gb.update_or_create_assignment(a, duedate=duedate)
        for nb in records["notebooks"]:
            gb.add_notebook(nb["name"], a, kernelspec=nb["kernelspec"])
            for cell in nb["grade_cells"]:
                gb.update_or_create_grade_cell(cell["name"], nb["name"], a, max_score=cell["max_score"],
                                               cell_type=cell["cell_type"])
            for cell in nb["solution_cells"]:
                gb.update_or_create_solution_cell(cell["name"], nb["name"], a)
            for cell in nb["task_cells"]:
                gb.update_or_create_task_cell(cell["name"], nb["name"], a, max_score=cell["max_score"],
                                              cell_type=cell["cell_type"])
            for cell in nb["source_cells"]:
                gb.update_or_create_source_cell(cell["name"], nb["name"], a, cell_type=cell["cell_type"],
                                                locked=cell["locked"], source=cell["source"],
                                                checksum=cell["checksum"])


_GRADEBOOKS: dict[str, bytes] = {}  # per worker process: the assignment's empty gradebook, by content


def _place_gradebook(path: Path, course_id: str, records: dict) -> None:
    """Write the assignment's gradebook (sqlite) at ``path``; built once per worker process."""
    import hashlib

    key = hashlib.sha256(json.dumps([course_id, records], sort_keys=True).encode()).hexdigest()
    if key not in _GRADEBOOKS:
        with tempfile.TemporaryDirectory() as tmp:
            built = Path(tmp) / "gradebook.db"
            _build_gradebook(_sqlite_url(Path(tmp)), course_id, records)  # (nbgrader runs alembic once)
            _GRADEBOOKS[key] = built.read_bytes()
    path.write_bytes(_GRADEBOOKS[key])


def read_scores(db_url: str, course_id: str, assignment: str, student: str) -> dict[str, dict[str, float | None]]:
    """{notebook: {grade id: auto score}} of one student, from a gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url, course_id) as gb:
        submission = gb.find_submission(assignment, student)
        return {nb.name: {g.name: g.auto_score for g in nb.grades} for nb in submission.notebooks}


def _flagged(db_url: str, course_id: str, assignment: str, student: str) -> dict[str, list[str]]:
    """{notebook: [grade ids nbgrader marked as needing a manual grade]} (review flags, manual cells)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url, course_id) as gb:
        submission = gb.find_submission(assignment, student)
        return {nb.name: sorted(g.name for g in nb.grades if g.needs_manual_grade) for nb in submission.notebooks}


def grade_on_worker(shared: dict, student: str, submitted: dict[str, str]) -> dict:
    """The Dask task: autograde one student in a private course root; never raises."""
    start = time.perf_counter()
    assignment, course_id = shared["assignment"], shared["course_id"]
    out = {"student": student, "ok": False, "problem": "", "files": {}, "scores": {},
           "host": socket.gethostname(), "pid": os.getpid(), "worker": ""}
    try:
        from distributed import get_worker

        out["worker"] = get_worker().address
    except (ImportError, ValueError):
        pass
    os.environ["PATH"] = P.tool_env()["PATH"]  # nbgrader's Gradebook runs `alembic`
    tmp = Path(tempfile.mkdtemp(prefix=f"grade-{student}-"))
    try:
        (tmp / "nbgrader_config.py").write_text(shared["config"])
        _write_folder(tmp / "source" / assignment, shared["source_files"])
        _write_folder(tmp / "submitted" / student / assignment, submitted)
        url = _sqlite_url(tmp)
        _place_gradebook(tmp / "gradebook.db", course_id, shared["records"])
        env = {**P.tool_env(), "COURSE_DB_URL": url}
        proc = subprocess.run(
            [str(P.BIN / "nbgrader"), "autograde", assignment, "--force", "--create", f"--student={student}",
             f"--CourseDirectory.root={tmp}", f"--CourseDirectory.db_url={url}"],
            cwd=tmp, env=env, text=True, capture_output=True, preexec_fn=_die_with_parent)
        if "Exception while loading config file" in proc.stderr:
            out["problem"] = "nbgrader_config.py failed to load on the worker: " + proc.stderr[-500:]
            return out
        graded = tmp / "autograded" / student / assignment
        if proc.returncode != 0 or not any(graded.glob("*.ipynb")):
            out["problem"] = batch._failure_reason(proc.stderr, fallback="nbgrader autograde failed")
            return out
        out["files"] = _read_folder(graded)
        out["scores"] = read_scores(url, course_id, assignment, student)
        out["needs_manual_grade"] = _flagged(url, course_id, assignment, student)
        out["ok"] = True
        return out
    except Exception as err:  # a broken worker environment: report it, keep the batch going
        out["problem"] = f"the worker could not grade: {type(err).__name__}: {str(err)[:300]}"
        return out
    finally:
        out["seconds"] = time.perf_counter() - start
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- the instructor side


def write_result(root: Path, db_url: str, course_id: str, assignment: str, result: dict) -> list[str]:
    """Place one student's autograded folder and write its scores into the gradebook.

    Returns problems to report (empty when all went well). Idempotent: keyed by student.
    """
    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

    student = result["student"]
    dest = root / "autograded" / student / assignment
    if dest.exists():
        shutil.rmtree(dest)  # what `nbgrader autograde --force` does before grading again
    submitted = root / "submitted" / student / assignment
    timestamp = CourseDirectory(root=str(root)).get_existing_timestamp(str(submitted))
    with Gradebook(db_url, course_id) as gb, warnings.catch_warnings():
        # nbgrader's update_or_create_submission makes SQLAlchemy warn about autoflush (harmless)
        warnings.simplefilter("ignore")
        gb.update_or_create_student(student)
        if timestamp:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(assignment, student)
    if not result["ok"]:
        return [result["problem"]]
    _write_folder(dest, result["files"])
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    for nb_path in sorted(dest.glob("*.ipynb")):
        nb = P.read_nb(nb_path)
        resources = {"nbgrader": {"db_url": db_url, "assignment": assignment, "notebook": nb_path.stem,
                                  "student": student}}
        SaveAutoGrades(config=config).preprocess(nb, resources)
        AssignLatePenalties(config=config).preprocess(nb, resources)
    # what the worker's grader flagged (instructor.nbgrader_ext.ReviewFlags runs after SaveAutoGrades)
    with Gradebook(db_url, course_id) as gb:
        for notebook, grade_ids in result.get("needs_manual_grade", {}).items():
            for grade_id in grade_ids:
                gb.find_grade(grade_id, notebook, assignment, student).needs_manual_grade = True
        gb.db.commit()
    written = read_scores(db_url, course_id, assignment, student)
    if written != result["scores"]:
        return [f"the scores written ({written}) differ from the worker's ({result['scores']})"]
    return []


def connect(address: str):
    """A dask Client: ``local:N`` starts a LocalCluster of N worker processes on this machine."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError("dask distributed is not installed: `make setup` installs requirements.txt") from None
    if address.startswith("local:"):
        try:
            n = int(address.split(":", 1)[1])
        except ValueError:
            raise ClusterError(f"--cluster {address}: expected local:N with N worker processes") from None
        import logging

        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        return Client(cluster)
    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as err:
        raise ClusterError(f"no Dask scheduler answers at {address} ({err}); start one (docs/CLUSTER.md) "
                           "or use --cluster local:N") from None


def _save_state(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, path)


def grade_class_on_cluster(course: CourseRoot, assignment: str, cluster, regrade: bool = False,
                           progress: bool = True, stats: ClusterStats | None = None,
                           on_result=None, feedback: bool = True) -> dict[str, batch.StudentReport]:
    """Inspect, autograde (one Dask task per student) and give feedback to every student.

    ``cluster`` is an address (``local:N``, ``tcp://host:8786``, ``tls://...``) or a dask Client.
    ``on_result(client, student, n_done)`` is called after each student is written (tests kill
    workers and schedulers there).
    """
    course = course if isinstance(course, CourseRoot) else CourseRoot(course)
    root = course.path
    course.check_assignment(assignment)
    if not course.folder("release", assignment).is_dir():
        raise P.PipelineError(f"release/{assignment} is missing: run `python -m instructor release {assignment}` first")
    stats = stats if stats is not None else ClusterStats()
    url = course.gradebook_url
    shared = shared_payload(root, assignment, url)
    course_id = shared["course_id"]

    state_path = root / "autograded" / batch.STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    done = state.setdefault(assignment, {})
    graded_before = set(course.results(assignment))
    reports, todo = {}, []
    for student in course.students(assignment):
        report = reports[student] = batch.StudentReport(student)
        report.problems = batch.inspect(course, assignment, student)
        if report.problems:
            report.status = "skipped"
        elif not regrade and done.get(student) == batch.fingerprint(course, assignment, student) \
                and student in graded_before:
            report.status = "unchanged"
        else:
            todo.append(student)

    own_client = isinstance(cluster, str)
    client = connect(cluster) if own_client else cluster
    start = time.perf_counter()
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="student", desc=f"autograde {assignment} on the cluster")
    try:
        from distributed import as_completed

        futures, sent = {}, {}
        for student in todo:
            folder = root / "submitted" / student / assignment
            sent[student] = batch.fingerprint(course, assignment, student)  # what this task grades
            future = client.submit(grade_on_worker, shared, student, _read_folder(folder),
                                   key=f"autograde-{assignment}-{student}-{time.time_ns()}", pure=False)
            futures[future] = student
        n_done = 0
        for future in as_completed(futures):
            student = futures[future]
            try:
                result = future.result()
            except (concurrent.futures.CancelledError, OSError) as err:
                raise _gone(cluster, client, n_done, len(todo), err) from None
            except Exception as err:  # KilledWorker: this submission took down workers
                if "KilledWorker" in type(err).__name__:
                    result = {"student": student, "ok": False, "worker": "", "seconds": 0.0,
                              "problem": "its autograde killed the Dask workers that ran it (3 times): "
                                         "a crash or memory exhaustion"}
                elif client.status not in ("running", "connecting"):
                    raise _gone(cluster, client, n_done, len(todo), err) from None
                else:
                    raise
            if stats.written[student]:
                stats.duplicates += 1  # never written twice
                continue
            written_at = time.perf_counter()
            problems = write_result(root, url, course_id, assignment, result)
            stats.write_seconds += time.perf_counter() - written_at
            stats.written[student] += 1
            stats.per_worker[result.get("worker") or result.get("host", "?")] += 1
            stats.task_seconds[student] = result.get("seconds", 0.0)
            report = reports[student]
            report.problems += problems
            if result["ok"] and not problems:
                report.status = "graded"
                done[student] = sent[student]
                text = "".join(p.read_text(errors="replace") for p in
                               (root / "autograded" / student / assignment).glob("*.ipynb"))
                if getattr(batch, "TAMPER_MARK", None) and batch.TAMPER_MARK in text:
                    report.problems.append("replaced the grader's check functions (restored before the tests ran)")
                try:  # review flags the worker's grader wrote into the autograded notebook
                    from .nbgrader_ext import review_reasons

                    report.review = [r for p in sorted((root / "autograded" / student / assignment).glob("*.ipynb"))
                                     for r in review_reasons(P.read_nb(p))]
                except ImportError:
                    pass
            else:
                report.status = "failed"
                done.pop(student, None)
            _save_state(state_path, state)
            n_done += 1
            if bar:
                bar.update(1)
                bar.set_postfix_str(" ".join(f"{w.split('//')[-1]}:{n}" for w, n in sorted(stats.per_worker.items())))
            if on_result:
                on_result(client, student, n_done)
    finally:
        if bar:
            bar.close()
        _save_state(state_path, state)
        if own_client:
            _close(client)
    stats.wall_seconds = time.perf_counter() - start
    if feedback and any(r.status == "graded" for r in reports.values()):
        start = time.perf_counter()
        course.feedback(assignment)
        stats.feedback_seconds = time.perf_counter() - start
    batch._fill_scores(course, assignment, reports)
    return reports


def _gone(cluster, client, n_done: int, total: int, err: BaseException) -> ClusterError:
    address = cluster if isinstance(cluster, str) else getattr(client, "scheduler", None) and client.scheduler.address
    return ClusterError(
        f"the Dask scheduler at {address} went away after {n_done} of {total} students "
        f"({type(err).__name__}). The {n_done} graded are saved in the gradebook: run the same "
        "command again (with a scheduler running) to grade the rest.")


def _close(client) -> None:
    cluster = getattr(client, "cluster", None)
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    except Exception as err:  # closing after a lost scheduler may fail: nothing is left to save
        print(f"note: closing the Dask client: {type(err).__name__}: {err}", file=sys.stderr)
