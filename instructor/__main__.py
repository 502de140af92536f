"""``python -m instructor COMMAND``: the course's one-command workflows.

Every command works on this repository's course root, or on the one ``--course-root`` (or
``COURSE_ROOT``: the hub's formgrader terminal sets it) names; ``COMMAND --help`` says more.
"""

from __future__ import annotations

import argparse
import builtins
import os
import sys
from pathlib import Path

from nboracle.classroom import pipeline as P

from instructor.repository import REPOSITORY as ROOT


def _names(requested: list[str] | None) -> list[str]:
    return [ROOT.check_assignment(a) for a in requested] if requested else ROOT.assignments()


def cmd_build(args) -> int:
    """Sync every jupytext pair under source/ (.py <-> .ipynb)."""
    for name in _names(args.assignments):
        for nb in ROOT.sync(name):
            print(f"synced  {nb.relative_to(ROOT.path)}")
    return 0


def cmd_release(args) -> int:
    """Build, then nbgrader generate_assignment into release/."""
    cmd_build(args)
    for name in _names(args.assignments):
        out = ROOT.release(name)
        print(f"released {out.relative_to(ROOT.path)}/")
    return 0


def _submitted(requested: list[str] | None) -> list[str]:
    return [ROOT.check_assignment(a) for a in requested] if requested else ROOT.submitted_assignments()


def cmd_autograde(args) -> int:
    """Autograde every submission under submitted/."""
    names = _submitted(args.assignments)
    if not names:
        print("nothing to autograde: put submissions in submitted/<student>/<assignment>/", file=sys.stderr)
        return 1
    for name in names:
        print(f"autograding {name} ...")
        ROOT.autograde(name)
    return 0


def cmd_feedback(args) -> int:
    """Feedback HTML for every autograded submission (hidden tests removed)."""
    for name in _submitted(args.assignments):
        ROOT.feedback(name)
        print(f"feedback for {name} in feedback/<student>/{name}/")
    return 0


def cmd_export(args) -> int:
    """Grades of the whole gradebook to a CSV file."""
    from nboracle.classroom.collect import add_folder_column

    out = add_folder_column(ROOT.export(Path(args.to).resolve()), ROOT)  # folder names as handed in
    print(f"grades written to {out}")
    return 0


def cmd_demo(args) -> int:
    """The whole instructor loop on sample submissions, then the grade table."""
    from .demo import run_demo

    return run_demo(ROOT, _names(args.assignments))


def cmd_lab(args) -> int:
    """Open your workspace (your copies of the released notebooks) in JupyterLab."""
    from . import workspace as W

    argv, env, cwd = W.student_seat(ROOT.path, Path(args.folder).resolve() if args.folder else None,
                                    edition=args.edition)
    print(f"your workspace: {cwd} (your copies; release/ is never changed)")
    return W.launch(argv, env, cwd, (["--no-browser"] if args.no_browser else []) + args.jupyter_args)


def cmd_formgrader(args) -> int:
    """Open the course root in JupyterLab with nbgrader's formgrader (Nbgrader > Formgrader)."""
    from . import workspace as W

    argv, env, cwd = W.instructor_seat(Path(args.root).resolve() if args.root else ROOT.path)
    return W.launch(argv, env, cwd, (["--no-browser"] if args.no_browser else []) + args.jupyter_args)


def cmd_check(args) -> int:
    """Grade your own copy of a released notebook with the hidden tests (default: your workspace)."""
    from nboracle.classroom import checkserver
    from nboracle.grader.messages import translator

    if args.stop_server:
        stopped = checkserver.stop(ROOT.path)
        translate = translator(_graded_by(args.edition).settings())
        print(translate("the check server has ended" if stopped else "no check server was running"))
        return 0
    code, root = _check(args)
    if checkserver.start(ROOT.path, CHECK_ENTRY):  # the next check asks it (main), without the grader's imports
        # in the language of the check's own lines (the course root it graded with, built once)
        translate = translator((root or _graded_by(args.edition)).settings())
        print(translate(f"note: a check server stays ready in the background for {checkserver.idle_minutes()} "
                        "minutes, so the next check starts faster (make check-stop ends it now)"), file=sys.stderr)
    return code


CHECK_ENTRY = "instructor.__main__:main"  # what the check server runs for a check's arguments


def _check(args):
    """cmd_check's grading, in this process: (exit code, the course root it graded with, or None)."""
    from nboracle.classroom.selfcheck import self_check

    if args.notebook:
        notebook = Path(args.notebook)
        root = _graded_by(args.edition or _edition_of(notebook))
        return self_check(notebook, args.assignment, root), root
    from . import workspace as W

    mine = W.started(ROOT.path, edition=args.edition)
    if not mine:
        print(f"no chapter started in {W.workspace_dir(ROOT.path, args.edition)} yet: `make lab` opens it; "
              "or check a file: make check NB=path/to/notebook.ipynb")
        return 1, None
    root = _graded_by(args.edition)
    return check_workspace(mine, root), root


def _edition_of(notebook: Path) -> str | None:
    """The edition a notebook says it is of (its metadata), else None (English); unreadable: None."""
    from .translate import edition_of

    try:
        return edition_of(P.read_nb(notebook))
    except Exception:  # the self-check says what is wrong with the file
        return None


def _graded_by(edition: str | None):
    """The course root whose hidden tests grade a notebook of ``edition``: the English one, or the
    edition's (its source generated now from the English source and the catalogs: the same code)."""
    if not edition:
        return ROOT
    from . import translate

    return translate.build_sources(edition)


def check_workspace(mine, root=None) -> int:
    """Grade every started chapter of the workspace: one line per chapter (``root``: an edition's course root)."""
    from nboracle.classroom.selfcheck import grade_copy
    from nboracle.grader.messages import translator

    from . import workspace as W

    translate = translator((root or ROOT).settings())  # an edition's summary in its language

    def print(line: str, **kwargs) -> None:
        builtins.print(translate(line), **kwargs)

    for assignment, notebook in mine:
        # on a terminal, a line naming the running cell (rewritten in place, then cleared)
        _, _, report, result = grade_copy(notebook, assignment, root or ROOT, say=lambda *a, **k: None,
                                          progress=sys.stdout.isatty())
        if result is None:
            line = f"could not grade it: {'; '.join(report.problems)}"
        else:
            failed = result.failed()
            line = f"{result.auto_score:g}/{result.auto_max:g} points" + (
                f", failing: {', '.join(failed)}" if failed else ", every test passes")
        builtins.print(f"{assignment:<26}{translate(line)}", flush=True)
    edition = root is not None and root.path != ROOT.path
    print(f"details of one chapter: make check NB={W.workspace_dir(Path(), root.path.name if edition else None)}"
          "/<assignment>/<notebook>.ipynb")
    print("written answers (the parts 'In your own words') are graded by a person; studying on your own, "
          "write yours first, then compare with the model answer and rubric under the question in "
          + (f"{root.path.relative_to(ROOT.path)}/source/<assignment>/<notebook>.ipynb" if edition
             else "source/<assignment>/<notebook>.py"))
    return 0


def cmd_grade_class(args) -> int:
    """Collect a folder or zip of submissions and grade them all (here, or on a Dask cluster)."""
    from nboracle.classroom import batch
    from nboracle.classroom import collect as C

    name = ROOT.check_assignment(args.assignment)
    found = None
    if args.source:
        found = C.collect_class(ROOT, name, Path(args.source))
        print(f"collected {len(found.students)} student folder(s) into submitted/"
              + (f"; refused {len(found.refused)}" if found.refused else "")
              + (f"; ignored {', '.join(found.ignored)}" if found.ignored else ""))
    if args.cluster:  # one Dask task per student (docs/CLUSTER.md)
        from nboracle.classroom.cluster import Dask

        runner = Dask(args.cluster)
    else:
        runner = batch.LocalPool(args.jobs)
    stopped = None
    try:
        reports = batch.grade_class(ROOT, name, runner=runner, regrade=args.regrade)
    except batch.BatchStopped as err:  # still: the table, report and CSV of those recorded
        stopped, reports = err, err.reports
    batch.account(ROOT, name, reports, found)  # folder names, collection notes, refusals
    print(batch.format_table(name, reports))
    csv = C.add_folder_column(ROOT.export(Path(args.to).resolve()), ROOT)
    report = batch.write_report(ROOT.path / f"report-{name}.txt", name, reports)
    pages = batch.write_class_report(ROOT, name)  # what the class got wrong (instructor only)
    print(f"grades: {csv}\nreport: {report}\nmistakes: {pages['html']} (and .csv; the term: {pages['term-html']})"
          f"\nfeedback: {ROOT.path / 'feedback'}/<student>/{name}/")
    if stopped:
        print(f"error: {stopped}", file=sys.stderr)
        return 3
    status, line = C.exit_status(name, reports)
    if line:
        print(line, file=sys.stderr)
    return status


def cmd_translate(args) -> int:
    """Update the translation catalogs (i18n/<lang>/*.po), generate and release the edition, report what is left."""
    from . import translate

    return translate.run(args.lang, args.check, args.assignments, untranslated=args.untranslated)


def _help(func) -> str:
    """The first line of a command's docstring, for ``--help``."""
    return func.__doc__.strip().splitlines()[0].rstrip(".")


GRADING = {"autograde", "grade-class", "check", "demo"}
# A learner's self-check and the demo run the user's own or the course's code: sandboxed where
# possible, else with a note. Grading students' work requires the sandbox unless --no-sandbox.
OWN_CODE = {"check", "demo"}


def _sandbox_gate(args) -> int | None:
    """Refuse (exit 2) or warn before grading when the OS sandbox cannot run (docs/GRADING.md, "The grading sandbox")."""
    from nboracle.grader import sandbox

    if getattr(args, "no_sandbox", False):
        os.environ[sandbox.ENV] = "off"
    elif args.command in OWN_CODE:
        os.environ.setdefault(sandbox.ENV, "auto")
    try:
        warning = sandbox.require_or_warn()
    except sandbox.SandboxUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if warning and args.command in OWN_CODE and sandbox.mode() == "auto":
        print(f"note: {sandbox.sandbox_status()[1]}: notebooks run unsandboxed, with your own "
              "permissions, as they do in Jupyter.", file=sys.stderr)
    elif warning:
        print("\n".join(["!" * 78, warning, "!" * 78]), file=sys.stderr)
    return None


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per workflow, each with its help."""
    parser = argparse.ArgumentParser(prog="python -m instructor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in [("build", cmd_build), ("release", cmd_release), ("autograde", cmd_autograde),
                       ("feedback", cmd_feedback), ("demo", cmd_demo)]:
        p = sub.add_parser(name, help=_help(func), description=func.__doc__)
        p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
        p.set_defaults(func=func)
    p = sub.add_parser("export", help=_help(cmd_export), description=cmd_export.__doc__)
    p.add_argument("--to", default="grades.csv", help="CSV file to write (default grades.csv)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("lab", help=_help(cmd_lab), description=cmd_lab.__doc__ + JUPYTER_ARGS)
    p.add_argument("--folder", help="workspace folder (default: workspace/ in the course)")
    p.add_argument("--no-browser", action="store_true", help="print the URL instead of opening a browser")
    p.add_argument("--edition", choices=EDITION_CHOICES, help="a language edition's notebooks (vi: Vietnamese), "
                   "in workspace-<edition>/")
    p.set_defaults(func=cmd_lab)
    p = sub.add_parser("formgrader", help=_help(cmd_formgrader), description=cmd_formgrader.__doc__ + JUPYTER_ARGS)
    p.add_argument("--root", help="course root (default: this repository)")
    p.add_argument("--no-browser", action="store_true", help="print the URL instead of opening a browser")
    p.set_defaults(func=cmd_formgrader)
    p = sub.add_parser("check", help=_help(cmd_check), description=cmd_check.__doc__)
    p.add_argument("notebook", nargs="?", help="path to your .ipynb (it is copied, never changed); "
                   "default: every chapter you started in workspace/, one line each")
    p.add_argument("--assignment", help="assignment id, if the file name does not tell")
    p.add_argument("--edition", choices=EDITION_CHOICES, help="a language edition (vi): its workspace, its "
                   "hidden tests (default: the one the notebook's metadata names, else English)")
    p.add_argument("--stop-server", action="store_true", help="end the warm check server that `make check` "
                   "leaves running for the next checks (it also ends by itself when idle)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("translate", help=_help(cmd_translate), description=cmd_translate.__doc__)
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.add_argument("--lang", default="vi", choices=EDITION_CHOICES, help="the edition (default vi)")
    p.add_argument("--check", action="store_true", help="change nothing; fail if a catalog is out of date, a "
                   "published chapter is not fully translated, or the edition's release is not current")
    p.add_argument("--untranslated", action="store_true", help="list every feedback message (i18n/<lang>/messages.po) "
                   "left to translate, with the file and line it comes from (of the chapters named, default all)")
    p.set_defaults(func=cmd_translate)
    p = sub.add_parser("grade-class", help=_help(cmd_grade_class), description=cmd_grade_class.__doc__)
    p.add_argument("assignment", help="assignment id, e.g. 01_two_keys")
    p.add_argument("--from", dest="source", help="folder or zip of <student>/<notebook>.ipynb "
                   "(default: what is already in submitted/)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--cluster", metavar="ADDRESS", help="grade on a Dask cluster: tcp://scheduler:8786, "
                   "tls://..., or local:N for N worker processes here (docs/CLUSTER.md); --jobs is then unused")
    p.add_argument("--regrade", action="store_true", help="regrade unchanged submissions too")
    p.add_argument("--to", default="grades.csv", help="CSV file to write (default grades.csv)")
    p.set_defaults(func=cmd_grade_class)
    for name, command in sub.choices.items():
        if name not in ("lab", "check", "translate"):
            command.add_argument("--course-root", default=os.environ.get("COURSE_ROOT") or None,
                                 help="the course root to work on (default: $COURSE_ROOT, else this repository)")
        else:
            command.set_defaults(course_root=None)
    for name in GRADING:
        sub.choices[name].add_argument(
            "--no-sandbox", action="store_true",
            help="grade without the OS sandbox around the kernels (student code gets your files and "
                 "network); only where it cannot run, e.g. macOS")
    return parser


EDITION_CHOICES = ["vi"]  # instructor.translate.EDITIONS (not imported here: the CLI starts fast)
JUPYTER_ARGS = "\n\nOptions of `jupyter lab` (e.g. --ServerApp.port=8899) are passed on."


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.course_root:  # another course root (the hub's): every command below works there
        global ROOT
        from nboracle.classroom.course_root import CourseRoot

        ROOT = CourseRoot(Path(args.course_root).resolve(), release_command=ROOT.release_command)
        if not ROOT.config.is_file():
            parser.error(f"--course-root {ROOT.path}: no nbgrader_config.py there")
    if extra and args.command not in ("lab", "formgrader"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.jupyter_args = extra  # lab, formgrader: passed on to `jupyter lab`
    if args.command == "check" and not args.stop_server:  # a warm check server does it, if one is ready
        from nboracle.classroom import checkserver

        code = checkserver.ask(ROOT.path, list(sys.argv[1:] if argv is None else argv))
        if code is not None:
            return code
    if args.command in GRADING:
        refused = _sandbox_gate(args)
        if refused is not None:
            return refused
    try:
        return args.func(args)
    except P.PipelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
