"""The grading side of the class pipeline: one student's submission in, its result out.

Every runner (in this process, a local process pool, Dask workers on other machines) does
the same thing with this module: it builds a :class:`Grader` once from a :class:`Job` (plain
data, made on the instructor side by :func:`make_job`), then calls :meth:`Grader.grade` for one
student after another. A Grader owns a *private course root* in the temporary folder:

* ``nbgrader_config.py``: the instructor's text (same kernel, sandbox, timeouts, caps);
* ``gradebook.db`` (sqlite): only the assignment's records, as ``generate_assignment`` saved
  them (grade cells with their points, locked and test cells with their source);
* ``package/course``: the ``course`` package the instructor chose (the course root's own), which
  every grading kernel imports (``COURSE_PACKAGE``, :mod:`nboracle.grader.sandbox`);
* ``submitted/<student>/<assignment>/``: the student being graded, removed after grading.

:meth:`Grader.grade` runs nbgrader's autograde and feedback there (nbgrader loaded once per
Grader) and returns plain data (:data:`RESULT_KEYS`): the autograded folder, the feedback
HTML, the automatic scores, comments and late penalty as the private gradebook holds them,
review flags, failed cells, where it ran and whether its kernels were sandboxed. The
instructor side then only places files and writes rows (:mod:`nboracle.classroom.batch`).

A private root is deleted when its Grader closes or its process exits; one left by a killed
worker (its pid is gone) is swept when the next Grader on that machine starts.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import warnings
import weakref
from pathlib import Path

# KERNEL_NOT_STARTED: GuardedExecute's review reason when the kernel could not run
# nboracle.kernel.guard.install() before any student code: it could not import nboracle or the
# course's packages (a grader fault, never the student's)
from nboracle.grader.nbgrader_ext import KERNEL_NOT_STARTED, review_reasons
from nboracle.grader.sandbox import KERNEL_METADATA

from . import pipeline as P

ROOT_PREFIX = "course-grader-"
GRADED, FAILED, GRADER_ERROR = "graded", "failed", "grader-error"
RESULT_KEYS = ("student", "status", "problem", "files", "feedback", "grades", "comments", "penalties",
               "score", "max_score", "failed_cells", "review", "where", "sandboxed",
               "sandbox", "seconds")


class GraderError(P.PipelineError):
    """The grader, not the student, failed: the batch stops (no student gets a 0 for it)."""


# ---------------------------------------------------------------- files as plain data


def read_folder(folder: Path, ignore: tuple[str, ...] = (".ipynb_checkpoints", "__pycache__")) -> dict[str, str]:
    """{relative path: base64 content} of every file under ``folder``."""
    files = {}
    for path in sorted(Path(folder).rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in ignore):
            files[rel.as_posix()] = base64.b64encode(path.read_bytes()).decode()
    return files


def write_folder(folder: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise P.PipelineError(f"refusing to write {rel!r} outside {folder}")
        path = Path(folder) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(content))


# ---------------------------------------------------------------- the job (instructor side)


def assignment_records(db_url: str, course_id: str, assignment: str,
                       release_command: str = "nbgrader generate_assignment {assignment}") -> dict:
    """The gradebook's records of an assignment, as plain data (what ``generate_assignment`` saved)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            raise P.PipelineError(f"{assignment} is not in the gradebook {db_url.split('@')[-1]}: "
                                  f"run `{release_command.format(assignment=assignment)}` first") from None
        notebooks = [{
            "name": nb.name, "kernelspec": nb.kernelspec,
            "grade_cells": [{"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type}
                            for c in nb.grade_cells],
            "solution_cells": [{"name": c.name} for c in nb.solution_cells],
            "task_cells": [{"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type}
                           for c in nb.task_cells],
            "source_cells": [{"name": c.name, "cell_type": c.cell_type, "locked": c.locked,
                              "source": c.source, "checksum": c.checksum} for c in nb.source_cells],
        } for nb in found.notebooks]
        return {"name": found.name, "duedate": found.duedate.isoformat() if found.duedate else None,
                "notebooks": notebooks}


def make_job(root, assignment: str, sandbox_mode: str | None = None) -> dict:
    """Everything a Grader needs besides the students: plain data, the same for every worker.

    ``sandbox_mode`` is the instructor's policy (``on``; ``off`` after ``--no-sandbox``): every
    worker grades under it, whatever its own environment says.
    """
    from nboracle.grader import sandbox

    source = root.folder("source", assignment)
    # autograde copies the non-notebook files of source/<a>/ (never *.py: see the config's ignore)
    extras = {rel: data for rel, data in read_folder(source).items()
              if not rel.endswith((".ipynb", ".py", ".pyc", ".md"))} if source.is_dir() else {}
    package = root.course_package
    job = {"assignment": assignment, "course_id": root.course_id, "config": root.config.read_text(),
           "records": assignment_records(root.gradebook_url, root.course_id, assignment, root.release_command),
           "source_files": extras, "course_package": read_folder(package) if package else {},
           "sandbox_mode": sandbox_mode or sandbox.mode()}
    job["key"] = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]
    return job


# ---------------------------------------------------------------- the grader (worker side)


def sweep_stale_roots() -> list[Path]:
    """Delete private course roots whose grader process is gone (a killed worker's); return them."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*-*"):
        try:
            pid = int(path.name[len(ROOT_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


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


@contextlib.contextmanager
def _environment(values: dict[str, str], cwd: Path):
    """Set environment variables and the working folder for one grading, then put them back."""
    old_cwd = os.getcwd()
    with P.environment(values):
        os.chdir(cwd)
        try:
            yield
        finally:
            os.chdir(old_cwd)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def kernel_threads(workers_here: int | None) -> dict[str, str]:
    """Thread counts for the kernels of one of ``workers_here`` graders sharing this machine.

    Each kernel's torch would start one OpenMP thread per core; with a grader per core those
    threads spin for cores they do not get (a small training loop: 36 s instead of 1.6 s).
    The cores are shared out instead; a setting the instructor made in the environment wins.
    """
    if not workers_here or any(os.environ.get(name) for name in THREAD_VARIABLES):
        return {}
    threads = str(max(1, (os.cpu_count() or 1) // workers_here))
    return {name: threads for name in THREAD_VARIABLES}


class Grader:
    """A private course root and nbgrader loaded once; grades one student after another."""

    def __init__(self, job: dict):
        from nboracle.grader import sandbox

        sweep_stale_roots()
        self.job, self.assignment, self.course_id = job, job["assignment"], job["course_id"]
        from .course_root import CourseRoot

        self.path = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-"))
        self.root = CourseRoot(self.path)
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)
        (self.path / "nbgrader_config.py").write_text(job["config"])
        write_folder(self.root.folder("source", self.assignment), job["source_files"])
        package = self.path / "package" / "course"
        write_folder(package, job["course_package"])
        self.url = self.root.sqlite_url
        self.env = {**P.tool_env(), sandbox.ENV: job["sandbox_mode"]}
        self.env.update(kernel_threads(job.get("workers_here")))
        if job["course_package"]:
            self.env[sandbox.PACKAGE_ENV] = str(package)
        self.where = f"{socket.gethostname()} pid {os.getpid()}"
        with _environment(self.env, self.path):
            _build_gradebook(self.url, self.course_id, job["records"])
            self.sandboxed, self.sandbox = sandbox.sandbox_status(refresh=True)
            self.api = self._api()

    def _api(self):
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory

        config = self.root.settings()  # the one config reader; a broken config raises
        config.CourseDirectory.root = str(self.path)
        config.CourseDirectory.db_url = self.url  # never the instructor's, whatever COURSE_DB_URL says
        return NbGraderAPI(CourseDirectory(config=config), config=config)

    def close(self) -> None:
        self._finalizer()

    def refusal(self) -> str | None:
        """Why this grader must not grade at all (a grader error), or None."""
        if not self.sandboxed and self.job["sandbox_mode"] == "on":
            return (f"the grading kernels on {self.where} cannot be sandboxed ({self.sandbox}); "
                    "refusing to run student code there. Fix the sandbox on that machine, or "
                    "grade without it on purpose: --no-sandbox")
        return None

    def grade(self, student: str, submitted: dict[str, str]) -> dict:
        """Autograde and render feedback for one student; never raises (problems are in the result)."""
        start = time.perf_counter()
        out = {"student": student, "status": FAILED, "problem": "", "files": {}, "feedback": {},
               "grades": {}, "comments": {}, "penalties": {}, "score": 0.0, "max_score": 0.0,
               "failed_cells": {}, "review": [], "where": self.where,
               "sandboxed": self.sandboxed, "sandbox": self.sandbox}
        refused = self.refusal()
        if refused:
            out.update(status=GRADER_ERROR, problem=refused, seconds=0.0)
            return out
        folders = [self.root.folder(f, self.assignment, student).parent for f in ("submitted", "autograded", "feedback")]
        try:
            with _environment(self.env, self.path), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*not in session.*")
                write_folder(self.root.folder("submitted", self.assignment, student), submitted)
                self._grade(student, out)
        except Exception as err:  # a broken grader environment is the grader's fault
            out.update(status=GRADER_ERROR, problem=f"the grader on {self.where} failed: "
                                                   f"{type(err).__name__}: {str(err)[:300]}")
        finally:
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
            out["seconds"] = time.perf_counter() - start
        return out

    def _grade(self, student: str, out: dict) -> None:
        result = self.api.autograde(self.assignment, student, force=True, create=True)
        graded = self.root.folder("autograded", self.assignment, student)
        if not result.get("success") or not any(graded.glob("*.ipynb")):
            text = result.get("log", "") + "\n" + result.get("error", "")
            if "Exception while loading config file" in text:
                out.update(status=GRADER_ERROR, problem="nbgrader_config.py failed to load on the grader")
            else:
                out["problem"] = failure_reason(text)
            return
        self._read_autograded(graded, out)
        broken = [r for r in out["review"] if KERNEL_NOT_STARTED in r]
        if broken:  # before any student code ran: the kernel could not start the course
            out.update(status=GRADER_ERROR, problem=f"the grading kernel on {self.where} could not start "
                       f"the course ({broken[0]}): the grader's environment is broken, not the student's work")
            return
        self._read_gradebook(student, out)
        feedback = self.api.generate_feedback(self.assignment, student, force=True)
        html = self.root.folder("feedback", self.assignment, student)
        if not feedback.get("success") or not any(html.glob("*.html")):
            out.update(status=GRADER_ERROR, problem="feedback failed on the grader: "
                       + failure_reason(feedback.get("log", "") + feedback.get("error", ""), "no HTML written"))
            return
        out["feedback"] = read_folder(html)
        out["status"] = GRADED

    def _read_autograded(self, graded: Path, out: dict) -> None:
        out["files"] = read_folder(graded)
        for path in sorted(graded.glob("*.ipynb")):
            reasons, nb = read_review(path)
            out["review"] += [r for r in reasons if r not in out["review"]]
            if nb is not None:
                out["failed_cells"].update({P.grade_id(c): P.cell_error(c) for c in nb.cells if P.grade_id(c)})
                said = nb.metadata.get(KERNEL_METADATA, {}).get("sandboxed")  # this kernel's, not the probe's
                if said is not True and out["sandboxed"]:
                    out["sandboxed"] = False
                    out["sandbox"] = ("its grading kernel started without the OS sandbox" if said is False else
                                      "its kernel was not started by the course's sandboxed Execute step "
                                      "(see nbgrader_config.py)")

    def _read_gradebook(self, student: str, out: dict) -> None:
        from nbgrader.api import Gradebook

        errors, out["failed_cells"] = out["failed_cells"], {}
        with Gradebook(self.url, self.course_id) as gb:
            for nb in gb.find_submission(self.assignment, student).notebooks:
                out["grades"][nb.name] = {g.name: [g.auto_score, bool(g.needs_manual_grade)] for g in nb.grades}
                out["comments"][nb.name] = {c.name: c.auto_comment for c in nb.comments}
                out["penalties"][nb.name] = nb.late_submission_penalty
                for g in nb.grades:
                    if g.cell.cell_type != "code" or g.auto_score is None:
                        continue
                    out["score"] += float(g.auto_score)
                    out["max_score"] += float(g.max_score)
                    if g.auto_score < g.max_score:
                        out["failed_cells"][g.name] = errors.get(g.name, "")


def read_review(path: Path):
    """An autograded notebook's ``(review reasons, notebook or None if unreadable)``."""
    try:
        nb = P.read_nb(path)
    except Exception as err:  # an autograded notebook we cannot read is itself worth a look
        return [f"{path.name}: the autograded notebook could not be read ({type(err).__name__})"], None
    return review_reasons(nb), nb


def failure_reason(text: str, fallback: str = "nbgrader autograde failed (see nbgrader.log)") -> str:
    """Why an autograde failed, in one line, from its log."""
    if "DeadKernelError" in text or "Kernel died" in text:
        return "the kernel died while running the notebook (os._exit or a crash)"
    if "CellTimeoutError" in text:
        return "a cell ran past the time limit"
    lines = [line for line in text.splitlines() if "Error" in line and "AutogradeApp" not in line]
    return lines[-1].strip()[:200] if lines else fallback


# ---------------------------------------------------------------- one Grader per process

_GRADERS: dict[str, Grader] = {}


def grader_for(job: dict) -> Grader:
    """This process's Grader for ``job`` (built on first use: a worker sets up once)."""
    if job["key"] not in _GRADERS:
        for old in _GRADERS.values():  # another assignment: one private root at a time
            old.close()
        _GRADERS.clear()
        _GRADERS[job["key"]] = Grader(job)
    return _GRADERS[job["key"]]


def grade_task(job: dict, student: str, submitted: dict[str, str]) -> dict:
    """The task every out-of-process runner sends: grade one student with this process's Grader."""
    try:
        grader = grader_for(job)
    except Exception as err:  # the worker cannot set up: the grader's fault
        return {"student": student, "status": GRADER_ERROR, "seconds": 0.0,
                "where": f"{socket.gethostname()} pid {os.getpid()}",
                "problem": f"the grader could not start: {type(err).__name__}: {str(err)[:300]}"}
    return grader.grade(student, submitted)


_POOL_JOB: dict = {}


def pool_start(job: dict) -> None:
    """A local pool's worker initializer: the private course root and nbgrader, set up once."""
    _POOL_JOB.update(job)
    grader_for(job)


def pool_grade(student: str, submitted: dict[str, str]) -> dict:
    return grade_task(_POOL_JOB, student, submitted)
