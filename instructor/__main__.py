"""``python -m instructor COMMAND``: the course's one-command workflows.

    build       sync every jupytext pair under source/ (.py <-> .ipynb)
    release     build, then nbgrader generate_assignment every assignment into release/
    autograde   autograde every submission under submitted/
    feedback    feedback HTML for every autograded submission (hidden tests removed)
    export      grades of the whole gradebook to a CSV file
    demo        the whole instructor loop on sample submissions, then the grade table
    lab         open the course in JupyterLab
    check       grade your own copy of a notebook with the hidden tests (self-learners)
    grade-class collect a folder or zip of submissions and grade them all (--jobs N)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import pipeline as P


def _names(requested: list[str] | None, root: Path) -> list[str]:
    return [P.check_assignment(a, root) for a in requested] if requested else P.assignments(root)


def cmd_build(args) -> int:
    for name in _names(args.assignments, P.REPO):
        for nb in P.sync(name):
            print(f"synced  {nb.relative_to(P.REPO)}")
    return 0


def cmd_release(args) -> int:
    cmd_build(args)
    for name in _names(args.assignments, P.REPO):
        out = P.release(name)
        print(f"released {out.relative_to(P.REPO)}/")
    return 0


def _submitted(root: Path, requested: list[str] | None) -> list[str]:
    names = set()
    for student in (root / "submitted").glob("*"):
        names.update(p.name for p in student.glob("*") if p.is_dir())
    if requested:
        return [P.check_assignment(a, root) for a in requested]
    return sorted(names)


def cmd_autograde(args) -> int:
    names = _submitted(P.REPO, args.assignments)
    if not names:
        print("nothing to autograde: put submissions in submitted/<student>/<assignment>/", file=sys.stderr)
        return 1
    for name in names:
        print(f"autograding {name} ...")
        P.autograde(P.REPO, name)
    return 0


def cmd_feedback(args) -> int:
    for name in _submitted(P.REPO, args.assignments):
        P.generate_feedback(P.REPO, name)
        print(f"feedback for {name} in feedback/<student>/{name}/")
    return 0


def cmd_export(args) -> int:
    out = P.export_grades(P.REPO, Path(args.to).resolve())
    print(f"grades written to {out}")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(P.REPO, _names(args.assignments, P.REPO))


def cmd_lab(args) -> int:
    folder = P.REPO / args.folder
    argv = [str(P.BIN / "jupyter"), "lab", f"--notebook-dir={folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    if args.no_browser:
        argv.append("--no-browser")
    print(" ".join(argv))
    os.execve(argv[0], argv, P.tool_env())
    return 0  # not reached


def cmd_check(args) -> int:
    from .selfcheck import self_check

    return self_check(Path(args.notebook), args.assignment)


def cmd_grade_class(args) -> int:
    from . import batch

    root = P.REPO
    name = P.check_assignment(args.assignment, root)
    if args.source:
        found = batch.collect(root, name, Path(args.source))
        print(f"collected {len(found)} student folder(s) into submitted/")
    reports = batch.grade_class(root, name, jobs=args.jobs, regrade=args.regrade)
    print(batch.format_table(name, reports))
    csv = P.export_grades(root, Path(args.to).resolve())
    report = batch.write_report(root / f"report-{name}.txt", name, reports)
    print(f"grades: {csv}\nreport: {report}\nfeedback: {root / 'feedback'}/<student>/{name}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instructor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in [("build", cmd_build), ("release", cmd_release), ("autograde", cmd_autograde),
                       ("feedback", cmd_feedback), ("demo", cmd_demo)]:
        p = sub.add_parser(name, help=func.__doc__)
        p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
        p.set_defaults(func=func)
    p = sub.add_parser("export")
    p.add_argument("--to", default="grades.csv", help="CSV file to write (default grades.csv)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("lab")
    p.add_argument("--folder", default="release", help="folder to open (release or source)")
    p.add_argument("--no-browser", action="store_true")
    p.set_defaults(func=cmd_lab)
    p = sub.add_parser("check", help="grade your own copy of a released notebook")
    p.add_argument("notebook", help="path to your .ipynb (it is copied, never changed)")
    p.add_argument("--assignment", help="assignment id, if the file name does not tell")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("grade-class", help="collect and autograde a whole class")
    p.add_argument("assignment")
    p.add_argument("--from", dest="source", help="folder or zip of <student>/<notebook>.ipynb "
                   "(default: what is already in submitted/)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--regrade", action="store_true", help="regrade unchanged submissions too")
    p.add_argument("--to", default="grades.csv", help="CSV file to write (default grades.csv)")
    p.set_defaults(func=cmd_grade_class)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except P.PipelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
