"""A throw-away PostgreSQL server for tests and the benchmark (Debian's postgresql package).

``.ci/install-postgres`` installs the package; :func:`start` runs ``initdb`` and ``pg_ctl`` in a
temporary folder on a free loopback port (as the ``postgres`` user when we are root: postgres
refuses to run as root) and returns a :class:`Server` whose ``url`` nbgrader takes as
``CourseDirectory.db_url``. :func:`start` raises :class:`Unavailable` with the reason when no
server can start here, so tests can skip with that message.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class Unavailable(RuntimeError):
    """No PostgreSQL server can be started on this machine (the message says why)."""


def _bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise Unavailable(f"PostgreSQL's {name} is not installed (run .ci/install-postgres, or apt-get install postgresql)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    folder: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://course@127.0.0.1:{self.port}/gradebook"

    def stop(self) -> None:
        subprocess.run([*self.as_user, _bin("pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "stop"],
                       capture_output=True, text=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> Server:
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    if os.geteuid() == 0:
        try:
            import pwd

            user = pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable("running as root and there is no `postgres` user to run the server as") from None
        os.chown(folder, user.pw_uid, user.pw_gid)
        runuser = shutil.which("runuser") or shutil.which("su")
        if not runuser:
            raise Unavailable("running as root and neither runuser nor su is available")
        as_user = [runuser, "-u", "postgres", "--"] if runuser.endswith("runuser") else None
        if as_user is None:
            raise Unavailable("running as root and only `su` is available: install util-linux's runuser")
    port = _free_port()
    data = folder / "data"

    def run(*args: str) -> None:
        proc = subprocess.run([*as_user, *args], capture_output=True, text=True, cwd=folder)
        if proc.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise Unavailable(f"{' '.join(args[:2])} failed: {(proc.stderr or proc.stdout)[-800:]}")

    run(initdb, "-D", str(data), "-U", "course", "--auth=trust", "--encoding=UTF8", "--no-sync")
    run(pg_ctl, "-D", str(data), "-w", "-t", "60", "-l", str(folder / "server.log"), "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", "start")
    server = Server(folder, port, as_user)
    try:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=port, user="course", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE gradebook")
        conn.close()
    except Exception as err:
        server.stop()
        raise Unavailable(f"the server started but refused a connection: {err}") from None
    return server
