"""A JupyterHub for the course on this machine: the term from the roster to the export (docs/JUPYTERHUB.md).

Everything the term writes lives in a state folder (default ``/var/lib/attention-hub``, outside
the clone; ``--state`` or ``HUB_STATE`` elsewhere)::

    roster.csv                      the class list in use (instructor/roster.py): accounts, gradebook
    home/<account>/                 each account's home (mode 700, owned by it)
    home/grader-attention/course/   the course root (config, source/, gradebook), the formgrader
                                    service's own folder: no other account enters
    exchange/                       nbgrader's exchange (mode 1777; nbgrader makes the course's
                                    inbound 733 and outbound 755 itself)
    etc/common/                     nbgrader_config.py for everyone: course id, exchange
    etc/student/                    students' Jupyter config: no formgrader, no create-assignment
    etc/grader/                     the formgrader service's: its log at INFO (no DEBUG in dialogs)
    hub/                            root only: JupyterHub's database, cookie secret, log, pid,
                                    passwords.csv (first passwords), the roster service's token
    backups/                        ``backup``'s archives

The hub runs as root (LocalProcessSpawner: each user's server runs as that system user), logs
in through PAM, and starts the formgrader as a managed service run by ``grader-attention``,
reachable by the group ``formgrade-attention-transformers`` (instructors and assistants).

    python -m instructor.hub start [--state DIR] [--port 8000] [--background] [--roster FILE]
    python -m instructor.hub stop  [--state DIR] [--purge]
    python -m instructor.hub roster [--course ID] import FILE | drop ID... | list
    python -m instructor.hub export [--course ID] [--to FILE] [--layout long|canvas|moodle]
    python -m instructor.hub extend [--course ID] ASSIGNMENT STUDENT --hours N   (0: none; any time)
    python -m instructor.hub course add ID --roster FILE [--source DIR] [--config FILE] | list
    python -m instructor.hub admin add ID... | drop ID... | list    (the hub's administrators)
    python -m instructor.hub backup [--to FILE] | restore FILE

Where each command is handled (:mod:`.cli` parses them and calls these)::

    start, prepare, stop, stop --purge      server.py    start, prepare, stop, purge
    roster import | drop | list             rosters.py   roster_import, roster_drop, roster_list
    course add | list, admin                courses.py   course_add, course_list, admin
    export, extend                          records.py   export, extend (the term's records)
    backup, restore                         backup.py    backup, restore
    (beneath them)                          layout.py    the state folder and its courses (Layout,
                                                         Course), running a command as a course's
                                                         service account (as_grader)
                                            accounts.py  system accounts, first passwords, who may
                                                         read the course's clone

A second course on the same hub (``course add``): its own roster, service account
``grader-<id>``, course root, formgrader service ``/services/formgrader-<id>/`` and groups;
people on both rosters keep one account. Its formgrader starts with the next ``start``.

Every name of the modules is importable from here (``from instructor import hub as H; H.Layout``),
as when this was one module.
"""

from __future__ import annotations

from . import accounts, backup, cli, courses, layout, records, rosters, server

for _module in (layout, accounts, server, rosters, courses, records, backup, cli):
    globals().update({name: value for name, value in vars(_module).items() if not name.startswith("__")})
del _module
