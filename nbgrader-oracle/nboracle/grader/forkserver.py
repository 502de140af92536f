"""Unsandboxed grading kernels forked from a process that has already imported torch.

Every grading kernel pays for ``import torch`` (about 2.5 s here) before the notebook's first
cell runs. When nbgrader runs *without* the OS sandbox (``COURSE_SANDBOX=off``) and
``COURSE_KERNEL_FORK=1`` is set, :class:`SandboxedKernelManager` launches each kernel by asking
a *zygote* for it: one process per grader, started at the first kernel, that imports numpy,
torch and ipykernel once and then only forks. The child is an ordinary ipykernel (the same
command line, working folder and environment jupyter_client chose) in a new session, with
fresh random seeds; it dies with the zygote, which dies with the grader.

A forked kernel shares nothing writable with its siblings (copy-on-write memory) but it is
*not* isolated from the grader: it exists for grading trusted code fast (the course's own bug
zoo in the test suite, a demo) and is never used with the sandbox on, where each kernel starts
inside bubblewrap. Any kernel command that is not ``<python> -m ipykernel_launcher ...`` of this
interpreter starts the usual way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from jupyter_client.provisioning import LocalProvisioner

ENV = "COURSE_KERNEL_FORK"
# what every kernel imports before its first cell: torch (seconds), ipykernel's debugger (debugpy,
# pdb: about 0.25 s) and the IPython history's sqlite3
PRELOAD = ("numpy", "torch", "matplotlib.pyplot", "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.debugger",
           "psutil", "sqlite3")
# what many kernels import later, once the first kernel is on its way (so it delays no kernel): torch's first
# optimizer imports torch._dynamo, about 1.8 s here, in every notebook that trains a model
LATER = ("torch._dynamo",)

# Both zygotes' imports (this one and nboracle.grader.warm's): their command line ends with the modules to import
# now, "--", and the modules to import once the first kernel is on its way.
ZYGOTE_IMPORTS = r"""
def preload(names):
    split = names.index("--")
    for name in names[:split]:
        __import__(name)
    return names[split + 1:]


def import_later():
    # while the first kernel starts: the kernels forked after it have these already
    global later
    for name in later:
        try:
            __import__(name)
        except Exception:  # the kernel that needs it imports it itself
            pass
    later = []
"""

# The zygote: import the heavy modules once, then fork one kernel per request line
# ({"argv", "cwd", "env"}) and answer with its pid. Children are reaped by the kernel
# (SIGCHLD ignored); each child dies with the zygote (PR_SET_PDEATHSIG), the zygote with the
# grader (its stdin closes, or PR_SET_PDEATHSIG).
_ZYGOTE = ZYGOTE_IMPORTS + r"""
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger: no warning at import
later = preload(sys.argv[1:])
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
requests, answers = sys.stdin.buffer, sys.stdout.buffer
devnull = os.open(os.devnull, os.O_RDWR)
print(json.dumps({"ready": os.getpid()}), file=sys.stdout, flush=True)
for line in requests:
    job = json.loads(line)
    pid = os.fork()
    if pid:
        answers.write((json.dumps({"pid": pid}) + "\n").encode())
        answers.flush()
        import_later()
        continue
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.dup2(devnull, 0)
        os.dup2(2, 1)  # the zygote's stdout carries its answers: a kernel writes to the grader's stderr
        os.environ.clear()
        os.environ.update(job["env"])
        os.environ["JPY_PARENT_PID"] = str(os.getppid())  # ipykernel ends if the zygote does
        os.chdir(job["cwd"])
        import random
        random.seed()
        import numpy
        numpy.random.seed()
        sys.argv = job["argv"]
        from ipykernel import kernelapp
        kernelapp.launch_new_instance()
    except SystemExit as stop:
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        os._exit(1)
    os._exit(0)
"""


def wanted() -> bool:
    """``COURSE_KERNEL_FORK`` is set to a true value, on Linux (``prctl``, ``/proc``)."""
    return sys.platform == "linux" and os.environ.get(ENV, "").strip().lower() in ("1", "on", "yes", "true")


class ForkedKernel:
    """What jupyter_client's provisioner needs of a ``Popen``, for a kernel forked by the zygote."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat") as stat:
                return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
        except OSError:
            return False

    def poll(self) -> int | None:
        if self.returncode is None and not self._alive():
            self.returncode = 0  # reaped by the zygote: its status is not known here
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired("forked kernel", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """One zygote process, for kernels of one interpreter, ``PYTHONPATH`` and matplotlib setting."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [python, "-c", _ZYGOTE, *PRELOAD, "--", *LATER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, cwd="/", start_new_session=True)
        ready = json.loads(self.process.stdout.readline() or "{}")
        if "ready" not in ready:
            raise RuntimeError("the kernel zygote did not start")

    def fork(self, argv: list[str], cwd: str, env: dict[str, str]) -> ForkedKernel:
        with self._lock:
            self.process.stdin.write((json.dumps({"argv": argv, "cwd": cwd, "env": env}) + "\n").encode())
            self.process.stdin.flush()
            answer = json.loads(self.process.stdout.readline() or "{}")
        if "pid" not in answer:
            raise RuntimeError("the kernel zygote did not fork a kernel")
        return ForkedKernel(answer["pid"])

    def alive(self) -> bool:
        return self.process.poll() is None


_zygotes: dict[tuple[str, ...], Zygote] = {}


def forkable(cmd: list[str]) -> bool:
    """``cmd`` starts ipykernel with this interpreter (what a zygote can stand in for)."""
    return len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1:3] == ["-m", "ipykernel_launcher"]


def launch(cmd: list[str], cwd: str | None, env: dict[str, str]) -> ForkedKernel:
    """A kernel for ``cmd`` (see :func:`forkable`), forked from this grader's zygote."""
    # what the preloaded modules read at import: where packages come from, matplotlib's backend,
    # the thread counts of torch, MKL and OpenBLAS
    key = (cmd[0], *(env.get(name, "") for name in ("PYTHONPATH", "MPLBACKEND", "MPLCONFIGDIR", "OMP_NUM_THREADS",
                                                     "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")))
    zygote = _zygotes.get(key)
    if zygote is None or not zygote.alive():
        zygote = _zygotes[key] = Zygote(cmd[0], env)
    return zygote.fork(["ipykernel_launcher", *cmd[3:]], cwd or os.getcwd(), env)


class ForkingProvisioner(LocalProvisioner):
    """A ``LocalProvisioner`` whose kernel process is forked by the zygote."""

    async def launch_kernel(self, cmd, **kwargs):
        if not forkable(cmd):
            return await super().launch_kernel(cmd, **kwargs)
        self.process = launch(cmd, kwargs.get("cwd"), dict(kwargs.get("env") or os.environ))
        self.pid = self.pgid = self.process.pid  # the child leads its own session
        self.cwd = kwargs.get("cwd") or os.getcwd()
        return self.connection_info


def use_zygote(provisioner) -> None:
    """Make a prepared ``LocalProvisioner`` launch its kernel through :func:`launch`.

    jupyter_client chose and prepared the provisioner (connection file, ports, command);
    only how the process starts changes, so the class is swapped in place.
    """
    if type(provisioner) is LocalProvisioner:
        provisioner.__class__ = ForkingProvisioner
