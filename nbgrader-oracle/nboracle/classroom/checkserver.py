"""A warm process for a learner's self-check: ``make check`` without paying the grader's start each time.

A check in a new process spends most of a small chapter's time before its first cell: Python,
nbgrader and torch for the grader's own side, the kernels' zygote (torch again, inside the sandbox),
nbgrader's first application (7.4 s for a check of chapter 01 on the 2-core machine, of which the
grading itself takes 2 s in a process that has checked before: SPEED.md). The check server is one
process of the learner's own that has started all of that once and waits on a Unix socket in the
course (``.build/checkserver/``, mode 0700). A check it is asked for runs in it as the asking command
would run it: in the command's folder, with its environment and arguments, the random generators as a
new process has them, and its terminal (the command hands over its standard input, output and error:
progress lines work as before). The command waits for the exit code and exits with it; Ctrl-C in the
command interrupts the check as it would interrupt a check of its own, and the server then ends (a
check cut short may leave it half-way). One check at a time; what one check leaves (nbgrader's and the
grader's modules, the kernels' zygote) is what the next one reuses, as ``make check`` of a whole
workspace already does chapter after chapter in one process. Every kernel is still a new, sandboxed
process per check.

* The first ``make check`` finds no server: it checks in its own process, as before, then starts
  one in the background for the next checks.
* The server answers only its own user (the socket's peer credentials).
* It ends after ``COURSE_CHECK_SERVER_IDLE`` seconds without a check (default 15 minutes), on
  ``make check-stop``, and as soon as a file of a module it imported changed on disk (an update of
  the course's code or of the environment): the check that finds it so runs in its own process and
  starts a fresh server.
* ``COURSE_CHECK_SERVER=off`` never asks nor starts one (the test suite's default).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from ..kernel.wire import read_frame, write_frame

SWITCH = "COURSE_CHECK_SERVER"  # "off": never ask nor start a server
IDLE = "COURSE_CHECK_SERVER_IDLE"  # seconds without a check before the server ends
FOLDER = "COURSE_CHECK_SERVER_DIR"  # where the socket lives (default: <course>/.build/checkserver)
IDLE_SECONDS = 15 * 60
# what the server imports before its first check: what a check's own process spends its first seconds on
PRELOAD = ("torch", "numpy", "nbformat", "nbclient", "nbgrader.apps.autogradeapp", "nbgrader.apps.generatefeedbackapp",
           "nbgrader.api", "nboracle.classroom.selfcheck", "nboracle.grader.oracle", "nboracle.grader.sandbox")
# a request: one byte (a check's carries the command's standard input, output and error), then a frame
# (nboracle.kernel.wire) of JSON
_CHECK, _STOP = b"c", b"s"
_MAX_REQUEST = 1 << 20


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get(IDLE) or IDLE_SECONDS))
    except ValueError:
        return float(IDLE_SECONDS)


def idle_minutes() -> int:
    return max(1, round(idle_seconds() / 60))


def enabled() -> bool:
    """Unless ``COURSE_CHECK_SERVER`` is off; Linux only (the socket's peer credentials, SO_PEERCRED)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_PEERCRED") and \
        os.environ.get(SWITCH, "").strip().lower() not in ("off", "0", "no", "false")


def socket_path(root: Path) -> Path:
    """The socket of ``root``'s server: in ``root/.build/checkserver`` unless that path is too long for a Unix
    socket, then in a private folder of the user's under the system's temporary folder."""
    chosen = os.environ.get(FOLDER)
    folder = Path(chosen) if chosen else Path(root) / ".build" / "checkserver"
    path = folder / "check.sock"
    if len(os.fsencode(path)) > 100:  # sun_path holds 108 bytes
        digest = hashlib.sha256(os.fsencode(Path(root).resolve())).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"course-check-{os.getuid()}-{digest}" / "check.sock"
    return path


def _private_folder(folder: Path) -> bool:
    """``folder`` exists, is a real folder of this user's, readable by no one else (made so if new)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return False
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return True


def _peer_uid(conn: socket.socket) -> int:
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


# ---------------------------------------------------------------- the command's side


def ask(root: Path, argv: list[str]) -> int | None:
    """Run ``argv`` (the course command's arguments) in ``root``'s server; its exit code, or None when no
    server answers or the one that does is stale (then the caller runs the check itself)."""
    if not enabled():
        return None
    path = socket_path(root)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.fspath(path))
        if _peer_uid(conn) != os.getuid():
            return None
        body = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        socket.send_fds(conn, [_CHECK], [0, 1, 2])  # our standard input, output and error: the check's terminal
        write_frame(conn, body)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                return None  # the server went away before answering: check here
            reply += chunk
        answer = json.loads(reply)
    except KeyboardInterrupt:  # closing the connection (below) interrupts the check the server runs for us
        return 130
    except (OSError, ValueError):
        return None
    finally:
        conn.close()
    code = answer.get("exit") if type(answer) is dict else None
    return code if type(code) is int else None


def stop(root: Path) -> bool:
    """Ask ``root``'s server to end; True if one was running."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.fspath(socket_path(root)))
        conn.sendall(_STOP)
        write_frame(conn, b"{}")
        return conn.recv(4096).startswith(b"{")
    except OSError:
        return False
    finally:
        conn.close()


def start(root: Path, entry: str) -> bool:
    """Start ``root``'s server in the background (it outlives this process, in a session of its own); True if
    started. ``entry`` is the command's ``module:function`` that runs a check's arguments."""
    if not enabled():
        return False
    path = socket_path(root)
    if not _private_folder(path.parent):
        return False
    with open(path.parent / "server.log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", __name__, "serve", os.fspath(root), entry], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, cwd=os.fspath(root), start_new_session=True, close_fds=True)
    return True


# ---------------------------------------------------------------- the server's side


def module_files() -> dict[str, tuple[int, int]]:
    """``{file: (mtime_ns, size)}`` of every module this process imported from a file."""
    stamp = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if type(file) is str and file not in stamp:
            with contextlib.suppress(OSError):
                info = os.stat(file)
                stamp[file] = (info.st_mtime_ns, info.st_size)
    return stamp


def changed_since(stamp: dict[str, tuple[int, int]]) -> list[str]:
    """The files of ``stamp`` that changed (or went away) since."""
    changed = []
    for file, seen in stamp.items():
        try:
            info = os.stat(file)
        except OSError:
            changed.append(file)
            continue
        if (info.st_mtime_ns, info.st_size) != seen:
            changed.append(file)
    return changed


def _entry(spec: str) -> Callable[[list[str]], int]:
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def _warm_up() -> None:
    """Start the grader's kernel zygote now (torch imported inside the sandbox), as a check would."""
    with contextlib.suppress(Exception):
        from nboracle.classroom import pipeline as P
        from nboracle.grader import sandbox

        os.environ.setdefault(sandbox.ENV, "auto")  # as `python -m instructor check` does
        with P.environment(P.tool_env()):  # the environment a check grades in (selfcheck._inside): its zygote
            sandbox.warm_up()


def _bind(path: Path) -> socket.socket | None:
    """The listening socket at ``path``, or None when another server already answers there."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(os.fspath(path))
        return None  # a live server: this one is not needed
    except OSError:
        pass
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket left by a server that died
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        listener.bind(os.fspath(path))
    except OSError:
        listener.close()
        return None  # another server bound it first
    finally:
        os.umask(old)
    listener.listen(8)
    return listener


class _Fresh:
    """What a check in a new process starts from, restored before each check here: the random generators'
    states as this process had them before its first check (torch's is the same in every new process)."""

    def __init__(self) -> None:
        import random

        self.random = random.getstate()
        self.numpy = self.torch = None
        if "numpy" in sys.modules:
            self.numpy = sys.modules["numpy"].random.get_state()
        if "torch" in sys.modules:
            self.torch = sys.modules["torch"].get_rng_state()

    def restore(self) -> None:
        import random

        random.setstate(self.random)
        if self.numpy is not None:
            sys.modules["numpy"].random.set_state(self.numpy)
        if self.torch is not None:
            sys.modules["torch"].set_rng_state(self.torch)


def _watch(conn: socket.socket, finished: threading.Event, interrupted: threading.Event) -> None:
    """While a check runs: if the asking command goes away (Ctrl-C), interrupt the check as Ctrl-C would."""
    while not finished.is_set():
        readable, _, _ = select.select([conn], [], [], 0.2)
        if not readable or finished.is_set():
            continue
        try:
            gone = conn.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            gone = True
        if gone:
            interrupted.set()
            os.kill(os.getpid(), signal.SIGINT)
            return


class _Terminal:
    """This process's ``sys.stdin``, ``sys.stdout`` and ``sys.stderr``, each on a descriptor of its own that a
    check points at the asking command's (``dup2``) and that nothing started here inherits. The processes a
    check starts (the kernels' zygote, which outlives it) keep the server's own 0, 1 and 2 (its log): nothing
    of a check holds the command's terminal once the check has ended."""

    def __init__(self) -> None:
        import io

        self.own = [os.dup(number) for number in (0, 1, 2)]  # what the streams show between checks
        self.fds = []
        for number, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
            fd = os.dup(number)  # not inheritable (PEP 446)
            self.fds.append(fd)
            setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "r" if number == 0 else "w", closefd=False),
                                                encoding="utf-8", errors="replace", line_buffering=number != 0,
                                                write_through=number == 2))

    def point_at(self, fds: list[int]) -> None:
        _flush()
        for fd, target in zip(fds, self.fds, strict=True):
            os.dup2(fd, target, inheritable=False)
        with contextlib.suppress(Exception):
            sys.stdout.reconfigure(line_buffering=True)

    def back(self) -> None:
        self.point_at(self.own)


def _run_here(request: dict, fds: list[int], conn: socket.socket, run: Callable[[list[str]], int],
              fresh: _Fresh, terminal: _Terminal) -> tuple[int, bool]:
    """Run one check in this process as the asking command would (its terminal, folder, environment and
    arguments, the random generators as a new process has them); (exit code, whether to serve on)."""
    env, cwd, argv = dict(os.environ), os.getcwd(), sys.argv
    finished, interrupted = threading.Event(), threading.Event()
    watcher = threading.Thread(target=_watch, args=(conn, finished, interrupted), daemon=True)
    code, serve_on = 1, True
    try:
        terminal.point_at(fds)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[SWITCH] = "off"  # the check asks no server (this one is busy with it) and starts none
        sys.argv = [argv[0], *request["argv"]]
        fresh.restore()
        watcher.start()
        code = run(list(request["argv"]))
    except SystemExit as done:
        code = done.code if type(done.code) is int else (0 if done.code is None else 1)
    except KeyboardInterrupt:
        code, serve_on = 130, False  # a check cut short may leave this process half-way: a fresh one next time
    except BaseException:  # noqa: BLE001 (shown to the learner, as the command itself would show it)
        import traceback

        traceback.print_exc()
        code, serve_on = 1, False
    finally:
        finished.set()
        terminal.back()
        os.environ.clear()
        os.environ.update(env)
        sys.argv = argv
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    if interrupted.is_set():
        serve_on = False
    return (code if type(code) is int and 0 <= code < 256 else 1), serve_on


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _reply(conn: socket.socket, answer: dict) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(answer).encode() + b"\n")


def _serve_one(conn: socket.socket, run: Callable, stamp: dict, fresh: _Fresh, terminal: _Terminal) -> bool:
    """Answer one connection; False when the server should end (asked to, stale, or a check cut short)."""
    fds: list[int] = []
    try:
        if _peer_uid(conn) != os.getuid():
            return True
        conn.settimeout(10)
        kind, fds, _, _ = socket.recv_fds(conn, 1, 3)
        body = read_frame(conn, _MAX_REQUEST)
        if body is None:
            return True
        request = json.loads(body)
        conn.settimeout(None)
        if type(request) is not dict:
            return True
        if kind == _STOP:
            _reply(conn, {"stopped": True})
            return False
        if changed_since(stamp):
            _reply(conn, {"stale": True})  # the command checks in its own process and starts a fresh server
            return False
        if len(fds) != 3 or type(request.get("argv")) is not list or type(request.get("cwd")) is not str \
                or type(request.get("env")) is not dict:
            return True
        started = time.monotonic()
        code, serve_on = _run_here(request, fds, conn, run, fresh, terminal)
        print(f"check server {os.getpid()}: served {request['argv']} in {time.monotonic() - started:.1f} s, "
              f"exit {code}", file=sys.stderr, flush=True)
        for file, seen in module_files().items():  # what the check imported counts from now on
            stamp.setdefault(file, seen)
        _reply(conn, {"exit": code})
        return serve_on
    except (OSError, ValueError):  # ValueError: a frame over the limit (WireError), JSON that is not
        return True
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        conn.close()


def serve(root: Path, entry: str) -> int:
    """Import once, then answer checks on ``root``'s socket until idle, stopped or stale."""
    path = socket_path(root)
    if not _private_folder(path.parent):
        print(f"check server: {path.parent} is not a private folder of this user's", file=sys.stderr)
        return 1
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    run = _entry(entry)
    fresh = _Fresh()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    listener = _bind(path)
    if listener is None:
        return 0
    terminal = _Terminal()
    _warm_up()
    stamp = module_files()
    inode = os.stat(path).st_ino
    idle = idle_seconds()
    print(f"check server {os.getpid()}: {len(stamp)} module files loaded, listening on {path}", file=sys.stderr,
          flush=True)
    try:
        while True:
            readable, _, _ = select.select([listener], [], [], idle)
            if not readable:
                break  # idle
            conn, _ = listener.accept()
            if not _serve_one(conn, run, stamp, fresh, terminal):
                break
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:  # still ours
                path.unlink()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 3 and args[0] == "serve":
        return serve(Path(args[1]), args[2])
    print("usage: python -m nboracle.classroom.checkserver serve COURSE_ROOT module:function", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
