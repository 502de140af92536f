"""Sandboxed grading kernels forked from a warm process, inside the sandbox.

A grading kernel started the usual way (:class:`~nboracle.grader.sandbox.SandboxedKernelManager`)
is a fresh Python inside bubblewrap that imports torch before the notebook's first cell: about
2 s of every grading. Here a *zygote* pays for that once per grader process. It is a Python
started inside bubblewrap with the same view as a grading kernel (system and Python environment
read-only, the course and grader packages at their fixed place, no network), that imports numpy,
torch, matplotlib and ipykernel and then only forks. For each kernel:

1. the grader prepares the kernel's folder as for a usual start (a scratch copy of the notebook's
   folder, the ZeroMQ socket folder, matplotlib's settings) inside the zygote's *pool*, a folder
   only that zygote sees, and describes the kernel's filesystem with the same bubblewrap
   arguments a usual start would use (``sandbox._warm_layout``);
2. the zygote forks a child, which waits until the grader has put it in the kernel's own control
   groups (memory, processes);
3. the child enters new mount, PID, IPC, UTS and network namespaces and forks the kernel's *init*
   (PID 1 there). Init builds a new root from the layout (a fresh tmpfs: ``/tmp``, ``/dev/shm``,
   ``/proc`` of its own, the binds read-only where bubblewrap's would be), pivots into it, then
   drops every capability (bounding, ambient, inheritable, permitted, effective), sets
   ``no_new_privs`` and the kernel's resource limits. Only then does it fork the kernel, which
   runs ipykernel with the environment, argument list and folder jupyter_client chose.

What one kernel leaves (files in ``/tmp``, ``/dev/shm``, processes, System V objects, abstract
sockets) lives in namespaces and file systems that end with it: the next kernel sees none of it,
nor the zygote, nor the pool. The zygote's user namespace may hold no further user namespace
(``user.max_user_namespaces`` is 0 there), so a kernel cannot regain capabilities. Each zygote
dies with its grader (``--die-with-parent``), each kernel with its zygote.

``COURSE_KERNEL_WARM`` chooses: ``on`` (default; Linux) or ``off`` (every kernel starts as
usual). A zygote that cannot start, or a kernel whose set-up fails, falls back to the usual start
for that kernel with a line in the log; nothing is graded outside the sandbox because of it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from jupyter_client.provisioning import LocalProvisioner

from .forkserver import LATER, ZYGOTE_IMPORTS, ForkedKernel

ENV = "COURSE_KERNEL_WARM"
# inside the zygote's sandbox: the pool (every kernel's folders) and where a kernel's root is built
POOL = "/.kernel-pool"
NEW_ROOT = "/.kernel-root"
# numpy, torch, matplotlib and ipykernel with what it imports before the first cell
PRELOAD = ("numpy", "torch", "matplotlib", "matplotlib.pyplot", "ipykernel.kernelapp", "ipykernel.ipkernel",
           "ipykernel.debugger", "psutil", "sqlite3")
# the zygote's capabilities in its own user namespace: mount a kernel's root, lower the user
# namespace limit, drop the bounding set, bring up a kernel's loopback. A kernel holds none of them.
CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_SETPCAP", "CAP_NET_ADMIN")


def wanted() -> bool:
    """Warm kernels unless ``COURSE_KERNEL_WARM`` is off (Linux only: namespaces, ``prctl``)."""
    value = os.environ.get(ENV, "on").strip().lower()
    return sys.platform.startswith("linux") and value not in ("0", "off", "no", "false", "none")


# The zygote (run inside bubblewrap). It reads one JSON request a line:
#   {"fork": job}  -> forks a child, answers {"pid": child's pid in the zygote's namespace}
#   {"go": pid}    -> lets that child go on (it is now in its control groups) and answers
#                     {"ok": true} once the kernel's sandbox is built, or {"error": why}.
# A job: {"argv", "cwd", "env", "layout" (bubblewrap arguments), "limits" {name: value},
#         "nproc", "tmpfs_bytes"}
_ZYGOTE = ZYGOTE_IMPORTS + r"""
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT = 1, 38, 24, 47
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MNT_DETACH = 1024, 2048, 1 << 21, 2
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x04000000, 0x08000000, 0x20000000, 0x40000000
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {source} on {target}")


def kept_flags(path):
    # a remount must repeat the flags the mount was locked with (it came from a more privileged namespace)
    f = os.statvfs(path).f_flag
    flags = 0
    for bit, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                    (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if f & bit:
            flags |= ms
    return flags


def read_only(path):
    mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept_flags(path))


def place(source, target):
    # the mount point: a folder for a folder, an empty file for anything else
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            open(target, "w").close()


def build_root(layout, tmpfs_bytes):
    # the kernel's root from the bubblewrap arguments a usual start would pass (a subset of bwrap's)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    inside = lambda path: NEW_ROOT + path
    size, i = tmpfs_bytes, 0
    while i < len(layout):
        op = layout[i]
        if op in ("--ro-bind", "--bind"):
            source, target = layout[i + 1], inside(layout[i + 2])
            place(source, target)
            mount(source, target, None, MS_BIND | MS_REC)
            if op == "--ro-bind":
                read_only(target)
            i += 3
        elif op == "--symlink":
            os.makedirs(os.path.dirname(inside(layout[i + 2])), exist_ok=True)
            os.symlink(layout[i + 1], inside(layout[i + 2]))
            i += 3
        elif op == "--dir":
            os.makedirs(inside(layout[i + 1]), exist_ok=True)
            i += 2
        elif op == "--size":
            size = int(layout[i + 1])
            i += 2
        elif op == "--tmpfs":
            os.makedirs(inside(layout[i + 1]), exist_ok=True)
            mount("tmpfs", inside(layout[i + 1]), "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
            size = tmpfs_bytes
            i += 2
        elif op == "--dev":
            # the zygote's minimal /dev (bubblewrap's), with a pseudo-terminal instance of its own
            os.makedirs(inside("/dev"), exist_ok=True)
            mount("/dev", inside("/dev"), None, MS_BIND | MS_REC)
            try:
                mount("devpts", inside("/dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
            except OSError:
                pass
            i += 2
        elif op == "--proc":
            # a /proc of the kernel's own PID namespace, its system knobs read-only (as bubblewrap's)
            target = inside(layout[i + 1])
            os.makedirs(target, exist_ok=True)
            mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            for name in ("sys", "sysrq-trigger", "irq", "bus"):
                path = f"{target}/{name}"
                if os.path.lexists(path):
                    mount(path, path, None, MS_BIND | MS_REC)
                    read_only(path)
            i += 2
        elif op == "--remount-ro":
            if layout[i + 1] != "/":
                read_only(inside(layout[i + 1]))
            i += 2
        elif op == "--setenv":
            i += 3
        elif op == "--chdir":
            i += 2
        else:
            raise ValueError(f"unknown layout argument {op!r}")
    os.makedirs(inside("/.old-root"), exist_ok=True)
    check(libc.syscall(155 if os.uname().machine == "x86_64" else 41, NEW_ROOT.encode(), inside("/.old-root").encode()),
          "pivot_root")
    os.chdir("/")
    check(libc.umount2(b"/.old-root", MNT_DETACH), "umount the zygote's root")
    os.rmdir("/.old-root")
    read_only("/")


def loopback_up():
    # the kernel's network namespace: its own loopback, up (as bubblewrap's), and nothing else
    import fcntl, socket, struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS: UP, LOOPBACK, RUNNING


def drop_privileges(limits, nproc):
    import resource
    check(libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0), "clear ambient capabilities")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            check(-1, "drop the bounding set")
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]
    check(libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()), "capset")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    status = open("/proc/self/status").read().splitlines()
    held = [line for line in status if line.startswith("Cap") and int(line.split()[1], 16) != 0]
    if held:
        raise OSError(1, f"capabilities still held: {held}")
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if os.getuid() != 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
# nobody in this sandbox may make a user namespace (its creator holds every capability there)
for name in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
    libc.umount2(name.encode(), MNT_DETACH)  # bubblewrap's read-only covers: a kernel's /proc needs a whole one
with open("/proc/sys/user/max_user_namespaces", "w") as f:
    f.write("0")
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
later = preload(sys.argv[2:])  # sys.argv[1]: the pool's path outside
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
requests, answers = sys.stdin.buffer, sys.stdout.buffer
NEW_ROOT = os.environ.pop("COURSE_WARM_NEW_ROOT")
gates = {}


def answer(value):
    answers.write((json.dumps(value) + "\n").encode())
    answers.flush()


def child(job, gate, report):
    # the zygote's child: wait for the control groups, enter new namespaces, fork the kernel's init
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the zygote's stdout carries its answers: a kernel writes to the grader's stderr
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd > 2 and fd not in (gate, report):
            try:
                os.close(fd)
            except OSError:
                pass
    if os.read(gate, 1) != b"1":
        os._exit(1)
    os.close(gate)
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET), "unshare")
    init = os.fork()
    if init:
        os.close(report)
        _, status = os.waitpid(init, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    try:  # the kernel's init: PID 1 of its namespace
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        build_root(job["layout"], job["tmpfs_bytes"])
        loopback_up()
        drop_privileges(job["limits"], job["nproc"])
    except BaseException as err:
        os.write(report, json.dumps({"error": f"{type(err).__name__}: {err}"}).encode())
        os._exit(1)
    kernel = os.fork()
    if kernel == 0:
        os.close(report)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        os.environ.clear()
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        import random
        random.seed()
        import numpy
        numpy.random.seed()
        sys.argv = job["argv"]
        try:
            from ipykernel import kernelapp
            kernelapp.launch_new_instance()
        except SystemExit as stop:
            os._exit(stop.code if isinstance(stop.code, int) else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    os.write(report, b'{"ok": true}')
    os.close(report)
    while True:  # init reaps every orphan; it ends with the kernel
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


answer({"ready": os.getpid()})
for line in requests:
    request = json.loads(line)
    if "go" in request:
        gate, report = gates.pop(request["go"], (None, None))
        if gate is None:
            answer({"error": "no such kernel"})
            continue
        os.write(gate, b"1")
        os.close(gate)
        with os.fdopen(report, "rb") as f:
            said = f.read()
        answer(json.loads(said) if said else {"error": "the kernel's sandbox ended before it was built"})
        import_later()
        continue
    gate_r, gate_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            child(request["fork"], gate_r, report_w)
        except BaseException as err:
            try:
                os.write(report_w, json.dumps({"error": f"{type(err).__name__}: {err}"}).encode())
            finally:
                os._exit(1)
    os.close(gate_r)
    os.close(report_w)
    gates[pid] = (gate_w, report_r)
    answer({"pid": pid})
"""


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _nspid(pid: int) -> list[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    except OSError:
        pass
    return []


class WarmZygote:
    """One zygote in its sandbox: the pool folder it sees, and its process."""

    def __init__(self, bwrap_args: list[str], python: str, env: dict[str, str], pool: Path) -> None:
        self._lock = threading.Lock()
        self.pool = pool
        # the pool on the command line: every kernel forked from this zygote shows it (findable if left over)
        command = [*bwrap_args, "--", python, "-c", _ZYGOTE, str(pool), *PRELOAD, "--", *LATER]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env={**env, "COURSE_WARM_NEW_ROOT": NEW_ROOT}, cwd="/",
                                        start_new_session=True)
        self.host_pid: int | None = None
        self._ready_pid: int | None = None
        atexit.register(self.close)

    def _ready(self) -> None:
        if self._ready_pid is not None:
            return
        line = self.process.stdout.readline()
        try:
            ready = json.loads(line or b"{}")
        except ValueError:
            ready = {}
        if "ready" not in ready:
            raise RuntimeError("the warm kernel zygote did not start")
        self._ready_pid = int(ready["ready"])
        self.host_pid = self._find(self.process.pid, self._ready_pid)
        if self.host_pid is None:
            raise RuntimeError("the warm kernel zygote's process was not found")

    @staticmethod
    def _find(top: int, nspid: int) -> int | None:
        """The host PID of the descendant of ``top`` whose innermost PID is ``nspid``."""
        todo = [top]
        while todo:
            pid = todo.pop()
            ids = _nspid(pid)
            if pid != top and len(ids) > 1 and ids[-1] == nspid:
                return pid
            todo += _children(pid)
        return None

    def _ask(self, request: dict) -> dict:
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the warm kernel zygote ended")
        return json.loads(line)

    def start(self, job: dict, join) -> ForkedKernel:
        """Fork a kernel for ``job``; ``join(host_pid)`` puts it in its control groups first."""
        with self._lock:
            self._ready()
            forked = self._ask({"fork": job})
            if "pid" not in forked:
                raise RuntimeError(f"the warm kernel zygote did not fork: {forked.get('error')}")
            host = next((p for p in _children(self.host_pid) if (_nspid(p) or [0])[-1] == forked["pid"]), None)
            if host is None:
                raise RuntimeError("the forked kernel's process was not found")
            join(host)
            done = self._ask({"go": forked["pid"]})
        if not done.get("ok"):
            ForkedKernel(host).kill()
            raise RuntimeError(f"the warm kernel's sandbox could not be built: {done.get('error')}")
        return ForkedKernel(host)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """End the zygote, and so every kernel forked from it (the pool stays: kernels started the
        usual way may still use their folders in it)."""
        if self.alive():
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        """End the zygote and remove its pool (when the grader exits)."""
        self.stop()
        shutil.rmtree(self.pool, ignore_errors=True)


_zygotes: dict[tuple, WarmZygote] = {}
MOST_ZYGOTES = 2  # live zygotes per grader process (each holds torch's memory: a few hundred MB)
_failed: dict[tuple, str] = {}


def zygote(key: tuple, make) -> WarmZygote | None:
    """This grader's zygote for ``key`` (made by ``make()`` the first time), or None if it failed."""
    if key in _failed:
        return None
    found = _zygotes.get(key)
    if found is None or not found.alive():
        while len(_zygotes) >= MOST_ZYGOTES:  # another course package or setting: the oldest zygote ends
            _zygotes.pop(next(iter(_zygotes))).close()
        try:
            found = _zygotes[key] = make()
        except Exception as err:  # noqa: BLE001 - any failure means: start kernels the usual way
            _failed[key] = str(err)
            return None
    return found


def forget(broken: WarmZygote, why: str) -> None:
    """Stop using ``broken`` in this process (it failed: kernels start the usual way)."""
    for key, found in list(_zygotes.items()):
        if found is broken:
            _failed[key] = why
            del _zygotes[key]
    broken.stop()


class WarmProvisioner(LocalProvisioner):
    """A ``LocalProvisioner`` whose kernel is forked by a sandboxed zygote (``start_warm`` set)."""

    start_warm = None  # a callable: (cmd, cwd, env) -> ForkedKernel
    warm = False  # True once a kernel was forked (False: it started the usual way)

    async def launch_kernel(self, cmd, **kwargs):
        try:
            self.process = self.start_warm(cmd, kwargs.get("cwd"), dict(kwargs.get("env") or {}))
            self.warm = True
        except Exception as err:  # noqa: BLE001 - the usual start, sandboxed as always
            self.log.warning("warm grading kernel unavailable (%s): starting kernels the usual way", err)
            self.start_warm.failed(str(err))
            return await super().launch_kernel(self.start_warm.usual, **kwargs)
        self.pid = self.pgid = self.process.pid
        self.cwd = kwargs.get("cwd") or os.getcwd()
        return self.connection_info


def use(provisioner, start_warm) -> bool:
    """Make a prepared ``LocalProvisioner`` launch its kernel through ``start_warm``."""
    if type(provisioner) is not LocalProvisioner:
        return False
    provisioner.__class__ = WarmProvisioner
    provisioner.start_warm = start_warm
    return True


def pool_folder(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
