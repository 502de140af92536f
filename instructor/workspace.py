"""The student's and the instructor's seats in JupyterLab.

* ``python -m instructor lab`` (``make lab``): the student seat. The released notebooks are
  copied into ``workspace/`` (git-ignored) the first time; later runs only add chapters
  released since, never touching a notebook that is already there. Lab opens in that folder,
  so ``release/`` stays exactly what nbgrader generated and ``git pull`` never conflicts with
  a student's answers.
* ``python -m instructor lab --edition vi`` (``make lab LANG=vi``): the same seat for a language
  edition (docs/TRANSLATING.md): its released notebooks, ``editions/vi/release/``, copied into
  ``workspace-vi/``, and its nbgrader configuration (its own course id); Lab's kernels and
  Validate get the edition's language (``COURSE_LANGUAGE=vi``), so the visible tests a student
  runs fail in Vietnamese (:mod:`course.language`).
* ``python -m instructor formgrader`` (``make formgrader``): the instructor seat. Lab opens at
  the course root, where nbgrader's formgrader finds ``source/``, ``release/`` and the
  gradebook.

Both seats run Lab with plots shown inline (no ``MPLBACKEND=Agg``, which only suits the
headless tools), the course's nbgrader configuration (Validate runs with the grading
settings; the Assignments panel uses the local exchange ``.exchange/``), and Lab settings
shipped in ``instructor/lab_settings/`` (no news pop-up) copied into a git-ignored folder
where Lab may write the user's own changes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from nboracle.classroom import pipeline as P
from nboracle.classroom.course_root import CourseRoot

from course.language import ENV as LANGUAGE_ENV
from instructor.repository import REPO

WORKSPACE = "workspace"
EXCHANGE = ".exchange"
LAB_SETTINGS = Path(__file__).resolve().parent / "lab_settings"


def workspace_dir(repo: Path = REPO, edition: str | None = None) -> Path:
    """``workspace/``, or ``workspace-<edition>/`` for a language edition's notebooks."""
    return repo / (f"{WORKSPACE}-{edition}" if edition else WORKSPACE)


def edition_folder(repo: Path = REPO, edition: str | None = None) -> Path:
    """The course root whose ``release/`` a seat copies: the repository, or ``editions/<edition>/``."""
    return repo / "editions" / edition if edition else repo


def prepare(repo: Path = REPO, dest: Path | None = None) -> list[Path]:
    """Copy every released file that is not yet in the workspace; return what was added.

    A file already there is the student's and is never overwritten, even if ``release/``
    changed since.
    """
    dest = dest or workspace_dir(repo)
    added = []
    release = repo / "release"
    for assignment in sorted(p for p in release.iterdir() if p.is_dir()) if release.is_dir() else []:
        for src in sorted(assignment.rglob("*")):
            if not src.is_file() or ".ipynb_checkpoints" in src.parts:
                continue
            target = dest / src.relative_to(release)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
            added.append(target)
    _trust([p for p in added if p.suffix == ".ipynb"])
    return added


def _trust(notebooks: list[Path]) -> None:
    """Mark the course's own notebooks trusted (as ``jupyter trust`` does): no warning on open."""
    if not notebooks:
        return
    import nbformat
    from nbformat.sign import NotebookNotary

    notary = NotebookNotary()
    for path in notebooks:
        try:
            notary.sign(nbformat.read(str(path), as_version=4))
        except Exception:  # an untrusted notebook only means a log line; never fail the copy
            continue


def started(repo: Path = REPO, dest: Path | None = None, edition: str | None = None) -> list[tuple[str, Path]]:
    """``(assignment, notebook)`` for every workspace notebook that differs from its release."""
    dest = dest or workspace_dir(repo, edition)
    out = []
    for assignment, released in _released(repo, edition):
        mine = dest / assignment / released.name
        if mine.is_file() and (not released.is_file() or _answers(mine) != _answers(released)):
            out.append((assignment, mine))
    return out


def _released(repo: Path, edition: str | None) -> list[tuple[str, Path]]:
    """``(assignment, released notebook)`` of the course's chapters (the notebook may not be released yet).

    The course's chapters are those of ``source/``; an edition's, those of its ``release/`` (its
    ``source/`` is generated on demand, git-ignored)."""
    root = CourseRoot(edition_folder(repo, edition))
    if edition:
        return [(p.parent.name, p) for p in sorted((root.path / "release").glob("*/*.ipynb"))]
    out = []
    for assignment in root.assignments():
        try:
            out.append((assignment, root.notebook("release", assignment)))
        except P.PipelineError:
            continue
    return out


def _answers(path: Path) -> list[str]:
    """The sources of a notebook's cells (what a student changes; metadata and outputs aside)."""
    try:
        return [cell.source for cell in P.read_nb(path).cells]
    except Exception:
        return ["<unreadable>"]


def _seed_settings(settings_dir: Path) -> Path:
    """Copy the shipped Lab settings into ``settings_dir`` unless the user has their own there."""
    for src in LAB_SETTINGS.rglob("*.jupyterlab-settings"):
        target = settings_dir / src.relative_to(LAB_SETTINGS)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return settings_dir


def lab_env(state: Path, repo: Path = REPO) -> dict[str, str]:
    """Environment for a Lab seat: plots inline, the course's nbgrader config, quiet settings."""
    env = P.tool_env()
    env.pop("MPLBACKEND", None)  # kernels inherit it: Agg would hide every plot
    env["JUPYTERLAB_SETTINGS_DIR"] = str(_seed_settings(state / "user-settings"))
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(state / "workspaces")
    # nbgrader's Validate button and Assignments panel read nbgrader_config.py from the
    # Jupyter config path: put the course's there so a student's Lab validates like the grader.
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        p for p in (str(repo), env.get("JUPYTER_CONFIG_PATH", "")) if p)
    # the visible tests a student runs, and Validate, speak the course root's language (its
    # c.MessageCatalog.language, as the grader's feedback does): the kernels inherit it from Lab
    env.pop(LANGUAGE_ENV, None)
    language = course_language(repo)
    if language:
        env[LANGUAGE_ENV] = language
    return env


def course_language(root: Path) -> str | None:
    """The language of a course root's feedback (``c.MessageCatalog.language``), None for English."""
    return CourseRoot(root).settings().get("MessageCatalog", {}).get("language") or None


def lab_argv(root: Path, port: int | None = None, token: str | None = None,
             no_browser: bool = False, open_path: str | None = None,
             kernel_sockets: Path | None = None) -> list[str]:
    argv = [str(P.BIN / "jupyter"), "lab", f"--ServerApp.root_dir={root}",
            # no "update available" request to the network
            "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate"]
    if kernel_sockets:  # local sockets for the notebook kernels: no "TCP without encryption"
        argv += ["--KernelManager.transport=ipc", f"--KernelManager.ip={kernel_sockets}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    if port:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        argv.append(f"--IdentityProvider.token={token}")
    if no_browser:
        argv.append("--no-browser")
    if open_path:
        argv.append(f"--LabApp.default_url=/lab/tree/{open_path}")
    return argv


def _sockets(state: Path) -> Path:
    """Prefix of the kernels' ipc socket files, kept out of the folders Lab shows.

    A Unix socket path holds at most 107 bytes: deep folders get a short private temp folder.
    """
    folder = state / "kernels"
    if len(str(folder)) > 80:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="lab-kernels-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "kernel"


def ensure_exchange(repo: Path = REPO) -> Path:
    """The local exchange folder named by ``nbgrader_config.py`` (one machine, git-ignored)."""
    exchange = repo / EXCHANGE
    exchange.mkdir(exist_ok=True)
    return exchange


def student_seat(repo: Path = REPO, dest: Path | None = None,
                 edition: str | None = None) -> tuple[list[str], dict[str, str], Path]:
    """Prepare the workspace; return the Lab command line, its environment and its folder."""
    dest = dest or workspace_dir(repo, edition)
    dest.mkdir(parents=True, exist_ok=True)
    added = prepare(edition_folder(repo, edition), dest)
    for path in added:
        print(f"new in your workspace: {path.relative_to(dest.parent)}")
    ensure_exchange(repo)  # an edition's config is the course's: the same local exchange, its own course id
    state = dest / ".lab"
    return lab_argv(dest, kernel_sockets=_sockets(state)), lab_env(state, edition_folder(repo, edition)), dest


def instructor_seat(root: Path = REPO) -> tuple[list[str], dict[str, str], Path]:
    ensure_exchange(root)
    state = root / ".build" / "lab"
    return lab_argv(root, kernel_sockets=_sockets(state)), lab_env(state, root), root


def launch(argv: list[str], env: dict[str, str], cwd: Path, extra: list[str]) -> int:
    """Replace this process with Lab (so Ctrl-C stops it as usual)."""
    argv = argv + extra
    print(" ".join(argv), flush=True)
    os.chdir(cwd)
    sys.stdout.flush()
    os.execve(argv[0], argv, env)
    return 0  # not reached
