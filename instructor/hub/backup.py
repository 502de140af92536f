"""Backup and restore of a whole term: rosters, homes, course roots, exchange, arrival times."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from .accounts import _accounts, _accounts_in_use, _busy
from .layout import ADMINS_RECORD, COURSES_RECORD, Layout, _state_folders
from .server import _hub_running, prepare

BACKED_UP = ("roster.csv", "hub/passwords.csv", "home", "exchange")  # every account's home: course roots too


# the other courses: their list, rosters and course roots
ROSTERS = ("roster.csv", "hub/passwords.csv", f"hub/{ADMINS_RECORD}", COURSES_RECORD, "courses")


NOT_BACKED_UP = (".cache", ".local/share/jupyter/runtime")  # a home's scratch (pip, Jupyter): made again


def _backed_up(layout: Layout) -> list[str]:
    return [*BACKED_UP, f"hub/{ADMINS_RECORD}", COURSES_RECORD, "courses"]


def _arrivals(layout: Layout) -> dict[str, float]:
    """When each submission in the exchange and in each student's nbgrader cache arrived, as the
    server saw it (nboracle.grader.exchange): a restore stamps every file with its own time."""
    from nboracle.grader import exchange as X

    record, found = X.arrival_record(str(layout.exchange)), {}
    for folder in layout.exchange.glob("*/inbound/*+*"):
        key = X.inbound_key(folder.parent.parent.name, folder.name)
        found[key] = X.arrived_at(str(folder), key, record)
    for folder in layout.home.glob("*/.local/share/jupyter/nbgrader_cache/*/*+*"):
        key = X.cache_key(folder.relative_to(layout.home).parts[0], folder.parent.name, folder.name)
        found[key] = X.arrived_at(str(folder), key, record)
    return found


def backup(layout: Layout, to: Path | None = None) -> Path:
    """One archive of the term: rosters, first passwords, every account's home (the students'
    notebooks, unsubmitted work, submissions' cache and fetched feedback; the course roots with
    gradebook, source, submitted, autograded, feedback) and the exchange, owners kept by name,
    with each submission's arrival time."""
    from nboracle.grader.exchange import ARRIVALS

    layout.backups.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.backups, 0o700)  # it holds the gradebook and the passwords
    to = Path(to or layout.backups / f"term-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz")
    record = f"exchange/{ARRIVALS}"

    def kept(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = member.name.split("/")
        if member.name == record or (parts[0] == "home" and "/".join(parts[2:]) in NOT_BACKED_UP):
            return None
        return member

    arrivals = json.dumps({"arrivals": _arrivals(layout)}).encode()
    with tarfile.open(to, "w:gz") as archive:
        for part in _backed_up(layout):
            if (layout.state / part).exists():
                archive.add(layout.state / part, arcname=part, filter=kept)
        info = tarfile.TarInfo(record)
        info.size, info.mode, info.mtime, info.uname, info.gname = len(arrivals), 0o644, time.time(), "root", "root"
        archive.addfile(info, io.BytesIO(arrivals))
    os.chmod(to, 0o600)
    print(f"backup of {layout.state}: {to}")
    return to


def restore(layout: Layout, archive_path: Path) -> int:
    """A term from ``backup``'s archive into this state folder: the accounts first (from its
    rosters), then the files with their owners; the hub must not run there."""
    if _hub_running(layout):
        sys.exit("the hub runs on this state folder: make hub-stop first")
    if (layout.course / "gradebook.db").exists():
        sys.exit(f"{layout.course} already holds a gradebook: restore into an empty state folder "
                 "(--state), or move that one away first")
    with tarfile.open(archive_path) as archive, tempfile.TemporaryDirectory() as scratch:
        members = archive.getmembers()
        first = [m for m in members if m.name in ROSTERS or m.name.startswith("courses/")]
        if not any(m.name == "roster.csv" and m.isfile() for m in first):
            sys.exit(f"{archive_path} holds no roster.csv: it is not an archive of make hub-backup")
        archive.extractall(scratch, members=[m for m in first if m.name != "hub/passwords.csv"], filter="data")
        listed = Layout(Path(scratch))
        busy = _accounts_in_use(listed.everyone()) + [g for g in listed.graders()[1:] if _busy(g)]
        if busy:  # moving their homes would pull them from under the hub that runs them: nothing is touched
            sys.exit(f"the term's accounts {', '.join(busy)} run processes on this machine (a hub from another "
                     "state folder?): stop that hub first (make hub-stop), then restore")
        _state_folders(layout)
        archive.extractall(layout.state, members=first, filter="fully_trusted")
        _accounts(layout, layout.everyone())
        archive.extractall(layout.state, members=[m for m in members if m not in first],
                           filter="fully_trusted")
    _record_restored(layout)
    os.chmod(layout.passwords, 0o600)
    prepare(layout)
    print(f"restored {archive_path} into {layout.state}: make hub HUB_STATE={layout.state}")
    return 0


def _record_restored(layout: Layout) -> None:
    """The arrival times the backup kept, for the submissions nobody changed since this restore
    (root's file at the exchange's root: what students' servers and collect read)."""
    from nboracle.grader.exchange import ARRIVALS

    path = layout.exchange / ARRIVALS
    kept = json.loads(path.read_text()).get("arrivals", {}) if path.exists() else {}
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump({"restored_at": time.time(), "arrivals": kept}, handle)
    os.chown(path, 0, 0)
    os.chmod(path, 0o644)
