"""The hub's system accounts: first passwords, homes, who may read the course's clone."""

from __future__ import annotations

import csv
import grp
import json
import os
import pwd
import secrets
import stat
import subprocess
import sys
from pathlib import Path

from nboracle.classroom import pipeline as P

from instructor import roster as R
from instructor.repository import REPO

from .layout import CREATED_RECORD, TRAVERSE_RECORD, Course, Layout, _exists, _passwords

PASSWORD_COLUMNS = ("id", "first_name", "last_name", "email", "role", "password")


def _save_passwords(layout: Layout, passwords: dict[str, str]) -> None:
    """hub/passwords.csv, root only: each account's first password beside the person's name, e-mail
    and role (from the rosters; a mail merge can send each their own), UTF-8 with a byte-order mark
    so that a spreadsheet shows the names as written."""
    layout.hub.mkdir(parents=True, exist_ok=True)
    known = {p.id: p for p in layout.everyone()}
    fd = os.open(layout.passwords, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.writer(handle)
        writer.writerow(PASSWORD_COLUMNS)
        for name, password in sorted(passwords.items()):
            person = known.get(name, R.Person(name))
            writer.writerow([name, person.first_name, person.last_name, person.email, person.role, password])
    os.chmod(layout.passwords, 0o600)


def _save_roster(layout: Layout, people: list[R.Person], course: Course | None = None) -> None:
    """A course's roster in the state folder, root only (names and emails of the whole class)."""
    path = course.roster if course is not None else layout.roster
    if path.parent != layout.state:
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in (path.parent.parent, path.parent):
            os.chmod(folder, 0o700)
    R.write(people, path)
    os.chmod(path, 0o600)


def _record_created(layout: Layout, name: str) -> None:
    record = layout.hub / CREATED_RECORD
    before = json.loads(record.read_text()) if record.exists() else []
    record.write_text(json.dumps(sorted(set(before) | {name})))


def _account(layout: Layout, name: str, password: str | None) -> None:
    """The system account ``name`` with its home under the state folder; ``password`` None: locked
    (the service account). An account that exists gets its home, shell and password set again."""
    home = layout.user_home(name)
    try:
        entry = pwd.getpwnam(name)
        if (entry.pw_dir, entry.pw_shell) != (str(home), "/bin/bash"):
            moved = subprocess.run(["usermod", "--home", str(home), "--shell", "/bin/bash", name],
                                   capture_output=True, text=True)
            # 8: the account runs processes (another hub on this machine uses it): the service
            # account is always started with HOME set, a person's account must move
            if moved.returncode and not (moved.returncode == 8 and password is None):
                sys.exit(f"usermod {name} (its home to {home}) failed: {moved.stderr.strip()}")
    except KeyError:
        subprocess.run(["useradd", "--home-dir", str(home), "--no-create-home", "--shell", "/bin/bash",
                        "--user-group", name], check=True, capture_output=True)
        _record_created(layout, name)
    home.mkdir(parents=True, exist_ok=True)
    profile = home / ".bash_profile"
    if not profile.exists():  # Lab's terminal is a login shell: /etc/profile resets PATH
        profile.write_text("# the course's Python, nbgrader and jupyter first (instructor/hub/)\n"
                           f'export PATH="{P.BIN}:$PATH"\n[ -f ~/.bashrc ] && . ~/.bashrc\n')
    entry = pwd.getpwnam(name)
    for path in (home, profile):
        os.lchown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(home, 0o700)
    if password is None:
        subprocess.run(["usermod", "--lock", name], check=True, capture_output=True)
    else:
        subprocess.run(["chpasswd"], input=f"{name}:{password}", text=True, check=True, capture_output=True)


def _accounts(layout: Layout, people: list[R.Person]) -> list[str]:
    """Every roster account (a random first password for each new one, kept in
    hub/passwords.csv, root only) and the courses' service accounts; the names given a password now."""
    passwords = _passwords(layout)
    new = [p.id for p in people if p.id not in passwords]
    passwords.update({name: secrets.token_urlsafe(9) for name in new})
    _save_passwords(layout, passwords)
    for person in people:
        _account(layout, person.id, passwords[person.id])
    for grader in layout.graders():
        _account(layout, grader, None)
    return new


def _grant_traverse(layout: Layout) -> list[str]:
    """Let every account reach the course's Python: each folder above the interpreter and the
    venv needs o+x (a pyenv under /root has none). Only the execute bit (enter, not list) is
    added, recorded, and taken back by :func:`stop`."""
    granted = []
    targets = [Path(sys.executable).resolve(), Path(sys.prefix).resolve(), REPO]
    for target in targets:
        for folder in [*reversed(target.parents), target]:
            if not folder.is_dir():
                continue
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(folder, mode | stat.S_IXOTH)
                granted.append(str(folder))
    if granted:
        record = layout.hub / TRAVERSE_RECORD
        before = json.loads(record.read_text()) if record.exists() else []
        record.write_text(json.dumps(sorted(set(before) | set(granted))))
        print(f"granted traverse (o+x, not read) on {', '.join(granted)}: the course's Python "
              "lives there and every account runs it; `make hub-stop` takes it back")
    return granted


def _revoke_traverse(layout: Layout) -> None:
    record = layout.hub / TRAVERSE_RECORD
    if not record.exists():
        return
    for folder in json.loads(record.read_text()):
        path = Path(folder)
        if path.is_dir():
            os.chmod(path, path.stat().st_mode & ~stat.S_IXOTH)
    record.unlink()


# What the clone every account runs the course from must not show students: solutions and hidden
# tests (source/, and a language edition's generated editions/<lang>/source/), what the hidden tests
# compare with (instructor/references/), and every exercise's wrong and correct versions (instructor/zoo/). The courses' service accounts read them (a formgrader
# imports the references), through this group.
GRADERS_ONLY = ("source", "instructor/references", "instructor/zoo", "editions/*/source")


GRADERS_GROUP = "course-graders"


def _hide_from_students(layout: Layout, repo: Path = REPO) -> None:
    """``GRADERS_ONLY`` of ``repo``: group :data:`GRADERS_GROUP`, which every course's service account
    joins, and nothing for others (git keeps no folder modes, so each start sets them again)."""
    subprocess.run(["groupadd", "--force", "--system", GRADERS_GROUP], check=True, capture_output=True)
    for grader in layout.graders():
        if _exists(grader):
            subprocess.run(["usermod", "--append", "--groups", GRADERS_GROUP, grader], check=True, capture_output=True)
    gid = grp.getgrnam(GRADERS_GROUP).gr_gid
    for folder in (found for part in GRADERS_ONLY for found in repo.glob(part)):
        if folder.is_dir():
            os.chown(folder, -1, gid)
            os.chmod(folder, (folder.stat().st_mode & ~0o077) | 0o050)


def _busy(name: str) -> bool:
    """``name`` is an account that runs processes now (``pgrep -u``)."""
    return _exists(name) and subprocess.run(["pgrep", "-u", name], capture_output=True).returncode == 0


def _accounts_in_use(people: list[R.Person]) -> list[str]:
    """The roster's existing accounts that run processes now."""
    return [person.id for person in people if _busy(person.id)]
