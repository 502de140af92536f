"""A JupyterHub for the course on this machine: the term from the roster to the export (docs/JUPYTERHUB.md).

The argument parser of ``python -m instructor.hub`` and which module handles each command
(instructor/hub/__init__.py lists them).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from instructor import roster as R

from .backup import backup, restore
from .courses import admin, course_add, course_list
from .layout import COURSE_ID, DEFAULT_ROSTER, DEFAULT_STATE, Layout
from .records import export, extend
from .rosters import roster_drop, roster_import, roster_list
from .server import prepare, purge, start, stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instructor.hub", description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("HUB_STATE", DEFAULT_STATE)))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("start", help="start the hub (accounts from the roster, the course root)")
    p.add_argument("--port", type=int, default=int(os.environ.get("HUB_PORT", 8000)))
    p.add_argument("--ip", default=os.environ.get("HUB_IP", "127.0.0.1"))
    p.add_argument("--background", action="store_true")
    p.add_argument("--roster", type=Path, help=f"the class list of a new term (default {DEFAULT_ROSTER})")
    p = sub.add_parser("prepare", help="accounts, folders and the course root, without starting")
    p.add_argument("--roster", type=Path)
    p = sub.add_parser("stop", help="stop the hub, every server and the service")
    p.add_argument("--purge", action="store_true", help="then remove the accounts it created and the state folder")
    p = sub.add_parser("roster", help="the class list: import FILE (add or update), drop ID..., list")
    p.add_argument("action", choices=["import", "drop", "list"])
    p.add_argument("items", nargs="*", help="import: one CSV file; drop: ids")
    p.add_argument("--course", help=f"another course's roster (default {COURSE_ID})")
    p = sub.add_parser("export", help="grades of the roster's students for an LMS")
    p.add_argument("--to", type=Path, default=Path("grades-lms.csv"))
    p.add_argument("--layout", choices=R.LAYOUTS, default="long",
                   help="long: a row per student and assignment; canvas, moodle: a row per student")
    p.add_argument("--course", help=f"another course's grades (default {COURSE_ID})")
    p = sub.add_parser("extend", help="a student's extension for an assignment: before or after the due date "
                       "and any submission; --hours 0 takes it back")
    p.add_argument("--course", help=f"another course's assignment (default {COURSE_ID})")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("--hours", type=_hours, required=True, help="hours after the due date; 0 removes the extension")
    p = sub.add_parser("course", help="another course on this hub: add ID --roster FILE [--source DIR], list")
    p.add_argument("action", choices=["add", "list"])
    p.add_argument("id", nargs="?", help="add: the course id (nbgrader's, and the hub's groups and service)")
    p.add_argument("--roster", type=Path, help="add: its class list (the roster's CSV layout)")
    p.add_argument("--source", type=Path, help="add: its source/ folder (default: this course's)")
    p.add_argument("--config", type=Path,
                   help="add: its nbgrader_config.py (default: the one beside --source, else this course's); "
                   "its c.MessageCatalog.language is the course's language (its students' servers get it)")
    p = sub.add_parser("admin", help="the hub's administrators: add ID..., drop ID..., list (no lecturer by role)")
    p.add_argument("action", choices=["add", "drop", "list"])
    p.add_argument("names", nargs="*")
    p = sub.add_parser("backup", help="one archive of the term (roster, gradebook, submissions, exchange)")
    p.add_argument("--to", type=Path)
    p = sub.add_parser("restore", help="a term from backup's archive, into an empty state folder")
    p.add_argument("archive", type=Path)
    # the old spelling: start/stop/prepare after the options
    args = parser.parse_args(_options_first(argv if argv is not None else sys.argv[1:]))
    try:
        return _run(args)
    except R.RosterError as err:  # on every path that reads a roster (start --roster, import, course add)
        sys.exit(f"nothing changed: {err}")


def _run(args: argparse.Namespace) -> int:
    layout = Layout(args.state)
    if args.command == "start":
        if args.roster and not layout.roster.exists():
            prepare(layout, args.roster)
        return start(layout, args.port, args.background, args.ip)
    if args.command == "prepare":
        prepare(layout, args.roster)
        return 0
    if args.command == "stop":
        stop(layout)
        return purge(layout) if args.purge else 0
    if os.geteuid() != 0:
        sys.exit("python -m instructor.hub runs as root (the accounts, the state folder)")
    if args.command == "roster":
        course = layout.course_named(args.course)
        if args.action == "import":
            if len(args.items) != 1:
                sys.exit("roster import FILE: one CSV file")
            return roster_import(layout, Path(args.items[0]), course)
        return roster_drop(layout, args.items, course) if args.action == "drop" else roster_list(layout, course)
    if args.command == "course":
        if args.action == "list":
            return course_list(layout)
        if not args.id or not args.roster:
            sys.exit("course add ID --roster FILE [--source DIR]")
        return course_add(layout, args.id, args.roster, args.source, args.config)
    if args.command == "export":
        export(layout, args.to, args.layout, layout.course_named(args.course))
        return 0
    if args.command == "extend":
        return extend(layout, args.assignment, args.student, args.hours, layout.course_named(args.course))
    if args.command == "admin":
        return admin(layout, args.action, args.names)
    if args.command == "backup":
        backup(layout, args.to)
        return 0
    return restore(layout, args.archive)


def _hours(text: str) -> float:
    """``--hours``: a number of hours (argparse says so in one line when it is none)."""
    try:
        return float(text.strip().lower().removesuffix("h"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is no number of hours (e.g. 48, or 0 to take an extension back)") from None


def _options_first(argv: list[str]) -> list[str]:
    """``start --state X`` as well as ``--state X start``: --state moves before the command."""
    out, rest, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--state" and i + 1 < len(argv):
            out += argv[i:i + 2]
            i += 2
        elif argv[i].startswith("--state="):
            out.append(argv[i])
            i += 1
        else:
            rest.append(argv[i])
            i += 1
    return out + rest
