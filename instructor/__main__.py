"""``python -m instructor COMMAND``: the course's one-command workflows.

Every command works on this repository's course root; ``COMMAND --help`` says more.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import pipeline as P
from .course_root import REPOSITORY as ROOT


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
    out = ROOT.export(Path(args.to).resolve())
    print(f"grades written to {out}")
    return 0


def cmd_demo(args) -> int:
    """The whole instructor loop on sample submissions, then the grade table."""
    from .demo import run_demo

    return run_demo(ROOT, _names(args.assignments))


def cmd_lab(args) -> int:
    """Open the course in JupyterLab."""
    folder = ROOT.path / args.folder
    argv = [str(P.BIN / "jupyter"), "lab", f"--notebook-dir={folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    if args.no_browser:
        argv.append("--no-browser")
    print(" ".join(argv))
    os.execve(argv[0], argv, P.tool_env())
    return 0  # not reached


def cmd_check(args) -> int:
    """Grade your own copy of a released notebook with the hidden tests."""
    from .selfcheck import self_check

    return self_check(Path(args.notebook), args.assignment)


def cmd_grade_class(args) -> int:
    """Collect a folder or zip of submissions and grade them all."""
    from . import batch

    name = ROOT.check_assignment(args.assignment)
    if args.source:
        found = batch.collect(ROOT.path, name, Path(args.source))
        print(f"collected {len(found)} student folder(s) into submitted/")
    reports = batch.grade_class(ROOT.path, name, jobs=args.jobs, regrade=args.regrade)
    print(batch.format_table(name, reports))
    csv = ROOT.export(Path(args.to).resolve())
    report = batch.write_report(ROOT.path / f"report-{name}.txt", name, reports)
    print(f"grades: {csv}\nreport: {report}\nfeedback: {ROOT.path / 'feedback'}/<student>/{name}/")
    return 0


def _help(func) -> str:
    """The first line of a command's docstring, for ``--help``."""
    return func.__doc__.strip().splitlines()[0].rstrip(".")


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
    p = sub.add_parser("lab", help=_help(cmd_lab), description=cmd_lab.__doc__)
    p.add_argument("--folder", default="release", help="folder to open (release or source)")
    p.add_argument("--no-browser", action="store_true", help="print the URL instead of opening a browser")
    p.set_defaults(func=cmd_lab)
    p = sub.add_parser("check", help=_help(cmd_check), description=cmd_check.__doc__)
    p.add_argument("notebook", help="path to your .ipynb (it is copied, never changed)")
    p.add_argument("--assignment", help="assignment id, if the file name does not tell")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("grade-class", help=_help(cmd_grade_class), description=cmd_grade_class.__doc__)
    p.add_argument("assignment", help="assignment id, e.g. 01_two_keys")
    p.add_argument("--from", dest="source", help="folder or zip of <student>/<notebook>.ipynb "
                   "(default: what is already in submitted/)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--regrade", action="store_true", help="regrade unchanged submissions too")
    p.add_argument("--to", default="grades.csv", help="CSV file to write (default grades.csv)")
    p.set_defaults(func=cmd_grade_class)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except P.PipelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
