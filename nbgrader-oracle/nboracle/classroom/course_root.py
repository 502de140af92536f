"""A course root: the folders nbgrader works in, and every step that runs on them.

A course root is a folder holding ``nbgrader_config.py`` and nbgrader's layout::

    source/<assignment>/<notebook>.py         the percent script people edit (jupytext pair)
    source/<assignment>/<notebook>.ipynb      its twin, with solutions and hidden tests
    source/budgets.txt                        seconds each source notebook may take to run
    release/<assignment>/<notebook>.ipynb     what students get
    downloaded/<assignment>/archive/          a class's folders or zips, for nbgrader zip_collect
    submitted/<student>/<assignment>/<notebook>.ipynb
    autograded/<student>/<assignment>/<notebook>.ipynb
    feedback/<student>/<assignment>/<notebook>.html
    gradebook.db                              scores, and every hidden test: never shipped

This repository is one (:data:`REPOSITORY`); the demo, the self-check and the tests work in
scratch copies made by :meth:`CourseRoot.scratch_copy`. Every method that needs them takes
the assignment first, then the student.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import pipeline as P

STUDENT_FOLDERS = ("submitted", "autograded", "feedback")
FOLDERS = ("source", "release", *STUDENT_FOLDERS)
BUDGETS = "budgets.txt"
STATE_FILE = ".batch-state.json"


@dataclass(frozen=True)
class CourseRoot:
    """The course root at ``path``: its paths and nbgrader steps."""

    path: Path
    # how an error message tells the user to release an assignment (a course's own command)
    release_command: str = field(default="nbgrader generate_assignment {assignment}", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def __str__(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------ layout

    @property
    def config(self) -> Path:
        return self.path / "nbgrader_config.py"

    @property
    def gradebook(self) -> Path:
        return self.path / "gradebook.db"

    def settings(self):
        """The nbgrader configuration of this root, as nbgrader reads it (the one config reader).

        The ``nbgrader_config.py`` files of the Jupyter config directories, then this root's
        (which takes the gradebook from ``COURSE_DB_URL``: a PostgreSQL server for a class,
        docs/CLUSTER.md). A config file that fails to load raises :class:`PipelineError`.
        """
        from jupyter_core.paths import jupyter_config_path
        from traitlets.config import Config
        from traitlets.config.loader import PyFileConfigLoader

        config = Config()
        for folder in [*reversed(jupyter_config_path()), str(self.path)]:
            if (Path(folder) / "nbgrader_config.py").is_file():
                try:
                    config.merge(PyFileConfigLoader("nbgrader_config.py", path=folder).load_config())
                except Exception as err:
                    raise P.PipelineError(f"{folder}/nbgrader_config.py failed to load: "
                                          f"{type(err).__name__}: {err}") from None
        return config

    def _setting(self, section: str, name: str):
        return self.settings().get(section, {}).get(name)

    @property
    def gradebook_url(self) -> str:
        """The gradebook every nbgrader command of this root uses (``CourseDirectory.db_url``),
        else the sqlite file :attr:`gradebook`."""
        url = self._setting("CourseDirectory", "db_url")
        return str(url) if url else self.sqlite_url

    @property
    def course_id(self) -> str:
        """``CourseDirectory.course_id`` (nbgrader's default ``default_course`` when unset)."""
        return str(self._setting("CourseDirectory", "course_id") or "default_course")

    @property
    def course_package(self) -> Path | None:
        """The ``course`` package grading kernels of this root import: the root's own ``course/``
        (a copied repository keeps its semester's version), else this environment's."""
        own = self.path / "course"
        if (own / "__init__.py").is_file():
            return own.resolve()
        from nboracle.grader.sandbox import _course_package

        return _course_package()

    @property
    def state_file(self) -> Path:
        """``autograded/.batch-state.json``: the fingerprint of each graded submission."""
        return self.path / "autograded" / STATE_FILE

    def read_state(self) -> dict:
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {}

    def save_state(self, state: dict) -> None:
        """Write the batch state atomically (a killed grader leaves the old file or the new one)."""
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(f"{STATE_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)

    @property
    def sqlite_url(self) -> str:
        """nbgrader's default gradebook, ``sqlite:///<root>/gradebook.db``."""
        return f"sqlite:///{self.gradebook.resolve()}"

    def folder(self, folder: str, assignment: str, student: str | None = None) -> Path:
        """``<folder>/[<student>/]<assignment>``: a student's folder needs the student."""
        if folder not in FOLDERS:
            raise P.PipelineError(f"no course folder {folder!r}; one of {', '.join(FOLDERS)}")
        if folder in STUDENT_FOLDERS and student is None:
            raise P.PipelineError(f"{folder}/ has one folder per student: name the student")
        if folder not in STUDENT_FOLDERS and student is not None:
            raise P.PipelineError(f"{folder}/ is shared by all students: name no student")
        parts = [folder, student, assignment] if student else [folder, assignment]
        return self.path.joinpath(*parts)

    def notebook(self, folder: str, assignment: str, student: str | None = None) -> Path:
        """The assignment's notebook in ``folder`` (``.html`` in ``feedback``)."""
        suffix = ".html" if folder == "feedback" else ".ipynb"
        return self.folder(folder, assignment, student) / (self.notebook_name(assignment) + suffix)

    def archive(self, assignment: str) -> Path:
        """``downloaded/<assignment>/archive``: where ``nbgrader zip_collect`` looks for submissions."""
        return self.path / "downloaded" / assignment / "archive"

    def script(self, assignment: str) -> Path:
        """The percent-format ``.py`` of the assignment's source notebook."""
        return self.folder("source", assignment) / (self.notebook_name(assignment) + ".py")

    def scripts(self, assignment: str) -> list[Path]:
        """Every percent-format ``.py`` under ``source/<assignment>/`` (the files people edit)."""
        return sorted(self.folder("source", assignment).glob("*.py"))

    def notebook_name(self, assignment: str) -> str:
        """The (single) notebook stem of an assignment, e.g. ``two_keys``: from ``source/``, else (a root
        whose source is generated on demand, such as a language edition's) from ``release/``."""
        folder = self.path / "source" / assignment
        names = sorted({p.stem for p in [*folder.glob("*.py"), *folder.glob("*.ipynb")]})
        if not names:
            names = sorted(p.stem for p in (self.path / "release" / assignment).glob("*.ipynb"))
        if len(names) != 1:
            raise P.PipelineError(f"{assignment}: expected one notebook, found {names}")
        return names[0]

    # ------------------------------------------------------------ what is in it

    def assignments(self) -> list[str]:
        """Assignment ids: folders of ``source/`` holding at least one notebook or percent script."""
        source = self.path / "source"
        return sorted(
            p.name for p in source.iterdir()
            if p.is_dir() and (any(p.glob("*.ipynb")) or any(p.glob("*.py")))
        ) if source.is_dir() else []

    def check_assignment(self, name: str) -> str:
        """Return ``name`` if it is an assignment, else raise a clear error listing the real ones."""
        known = self.assignments()
        if name not in known:
            raise P.PipelineError(
                f"no assignment {name!r} under {self.path / 'source'}; known: {', '.join(known) or 'none'}")
        return name

    def submitted_assignments(self) -> list[str]:
        """Assignments with at least one folder under ``submitted/<student>/``."""
        return sorted({p.name for p in (self.path / "submitted").glob("*/*") if p.is_dir()})

    def students(self, assignment: str) -> list[str]:
        """Students with a folder ``submitted/<student>/<assignment>``."""
        return sorted(p.parent.name for p in (self.path / "submitted").glob(f"*/{assignment}") if p.is_dir())

    def budgets(self) -> dict[str, float]:
        """Seconds each source notebook may take top to bottom, from ``source/budgets.txt``.

        One ``<assignment> <seconds>`` per line; ``#`` starts a comment.
        """
        table = self.path / "source" / BUDGETS
        budgets = {}
        for number, line in enumerate(table.read_text().splitlines() if table.exists() else [], 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            try:
                name, seconds = fields
                budgets[name] = float(seconds)
            except ValueError:
                raise P.PipelineError(f"source/{BUDGETS}:{number}: expected '<assignment> <seconds>', "
                                      f"got {line.strip()!r}") from None
        return budgets

    def budget(self, assignment: str) -> float:
        """The execution budget of one assignment's source notebook, in seconds."""
        budgets = self.budgets()
        if assignment not in budgets:
            raise P.PipelineError(f"{assignment} has no budget in source/{BUDGETS}")
        return budgets[assignment]

    # ------------------------------------------------------------ nbgrader steps

    def nbgrader(self, *args: str, check: bool = True):
        """Run ``nbgrader ARGS`` in this course root (see :func:`pipeline.nbgrader`)."""
        return P.nbgrader(*args, cwd=self.path, check=check)

    def sync(self, assignment: str) -> list[Path]:
        """Bring every pair of ``source/<assignment>`` in sync with ``jupytext --sync``.

        The newer file of each pair wins (jupytext's rule); cell ids and outputs of the
        existing ``.ipynb`` are kept.
        """
        done = []
        for script in self.scripts(assignment):
            P.run([str(P.BIN / "jupytext"), "--sync", "--quiet", script.name], cwd=script.parent)
            done.append(script.with_suffix(".ipynb"))
        return done

    def release(self, assignment: str) -> Path:
        """``nbgrader generate_assignment`` into ``release/<assignment>``; returns that folder."""
        proc = self.nbgrader("generate_assignment", assignment, "--force", check=False)
        if "because there are submissions associated with it" in proc.stderr:
            raise P.PipelineError(
                f"{assignment} already has graded submissions in {self.gradebook}, and its graded "
                "cells changed since: nbgrader refuses to add or remove cells under existing grades. "
                "Keep the cells as released, or export the grades and move gradebook.db aside first.")
        if proc.returncode != 0:
            raise P.PipelineError(f"nbgrader generate_assignment {assignment} failed:\n{proc.stderr[-3000:]}")
        out = self.folder("release", assignment)
        if not out.is_dir():
            raise P.PipelineError(f"nbgrader produced no {out}")
        return out

    def release_and_answers(self, assignment: str) -> tuple[nbformat.NotebookNode, dict[str, str]]:
        """The released notebook and the solution answers: what every simulated student starts from."""
        release_nb = P.read_nb(self.notebook("release", assignment))
        return release_nb, P.solution_answers(P.read_nb(self.notebook("source", assignment)))

    def submit(self, assignment: str, student: str, nb: nbformat.NotebookNode, name: str | None = None) -> Path:
        """Place a notebook as ``submitted/<student>/<assignment>/<name>.ipynb`` (default: its own name)."""
        path = (self.folder("submitted", assignment, student) / f"{name}.ipynb" if name
                else self.notebook("submitted", assignment, student))
        P.write_nb(nb, path)
        return path

    def autograde(self, assignment: str, student: str | None = None) -> None:
        """``nbgrader autograde`` every submission of an assignment (or one student's) in one run."""
        args = ["autograde", assignment, "--force", "--create"]
        if student:
            args.append(f"--student={student}")
        self.nbgrader(*args)

    def feedback(self, assignment: str, student: str | None = None) -> None:
        """Feedback HTML for every autograded submission of an assignment (or one student's)."""
        args = ["generate_feedback", assignment, "--force"]
        if student:
            args.append(f"--student={student}")
        self.nbgrader(*args)

    def export(self, to: Path) -> Path:
        """Every grade of the gradebook to the CSV file ``to``."""
        self.nbgrader("export", "--to", str(to))
        return to

    def results(self, assignment: str) -> dict[str, P.Result]:
        """Automatic scores and error messages per student and test cell, from the gradebook."""
        from nbgrader.api import Gradebook

        name = self.notebook_name(assignment)
        out: dict[str, P.Result] = {}
        with Gradebook(self.gradebook_url) as gb:
            for submission in gb.assignment_submissions(assignment):
                student = submission.student.id
                graded_nb = self.notebook("autograded", assignment, student)
                errors = {}
                if graded_nb.exists():
                    errors = {P.grade_id(c): P.cell_error(c) for c in P.read_nb(graded_nb).cells if P.grade_id(c)}
                cells = {}
                for grade in gb.find_submission_notebook(name, assignment, student).grades:
                    if grade.cell.cell_type != "code" or grade.auto_score is None:
                        continue
                    cells[grade.name] = P.CellResult(grade.name, float(grade.auto_score or 0.0),
                                                     float(grade.max_score), errors.get(grade.name, ""))
                out[student] = P.Result(student, cells)
        return out

    # ------------------------------------------------------------ scratch copies

    def scratch_copy(self, dest: Path, assignments: list[str]) -> CourseRoot:
        """A fresh course root at ``dest`` with this config and the sources of ``assignments``, released.

        Its gradebook is its own sqlite file, even where ``COURSE_DB_URL`` names a class's server.
        """
        copy = CourseRoot(dest, self.release_command)
        copy.path.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.config, copy.config)
        with open(copy.config, "a") as config:  # whatever COURSE_DB_URL says
            config.write(f"\n# a scratch course never writes into a class's gradebook\n"
                         f"c.CourseDirectory.db_url = {copy.sqlite_url!r}\n")
        for name in assignments:
            shutil.copytree(self.folder("source", name), copy.folder("source", name),
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
            copy.release(name)
        return copy

