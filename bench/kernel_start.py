"""A grading kernel's start-up: from starting the kernel to its first cell finishing.

    python bench/kernel_start.py                  # 10 kernels per setting, interleaved
    python bench/kernel_start.py --repeat 20 --also "listen=import nboracle.kernel.server as s; s.listen()"

Each kernel is started as autograde starts it (the OS sandbox when this machine has one, the
``c.Execute.extra_arguments`` of ``nbgrader_config.py``) and runs the first code cell of
chapter 01's released notebook (its imports). Settings differ only in the kernel's
``--InteractiveShellApp.exec_lines``: ``bare`` none at all, ``install`` what GuardedExecute has
every grading kernel run before its first cell (``nboracle.kernel.guard.install()``), ``config``
what ``nbgrader_config.py`` adds (none since issue 31), and each ``--also NAME=CODE`` another line
to compare (``nboracle.kernel.server.listen()`` alone, say). Prints the median of each and its
ratio over ``bare``. The figures, and those of the larger in-kernel guard it replaced:
docs/SPEED.md, "Kernel start".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nboracle.grader import sandbox  # noqa: E402
from traitlets.config.loader import PyFileConfigLoader  # noqa: E402

from instructor.repository import REPOSITORY  # noqa: E402

EXEC_LINES = "--InteractiveShellApp.exec_lines="


def configured_arguments() -> list[str]:
    return list(PyFileConfigLoader("nbgrader_config.py", str(REPO)).load_config().Execute.extra_arguments)


def first_cell() -> str:
    nb = nbformat.read(str(REPOSITORY.notebook("release", "01_two_keys")), as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code")


def start_to_first_cell(arguments: list[str], source: str, manager: type) -> float:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    done: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(nb, timeout=600, startup_timeout=300, kernel_name="python3",
                                kernel_manager_class=manager, extra_arguments=arguments,
                                on_cell_executed=lambda **_: done.append(time.perf_counter()),
                                resources={"metadata": {"path": tmp}})
        start = time.perf_counter()
        client.execute()
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    if errors:
        raise RuntimeError(f"the first cell failed: {errors[0].ename}: {errors[0].evalue}")
    return done[0] - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="kernels per setting")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=CODE", help="another exec_lines to time")
    args = parser.parse_args()
    configured = configured_arguments()
    others = [a for a in configured if not a.startswith(EXEC_LINES)]
    settings = {"bare": others, "install": [*others, EXEC_LINES + "import nboracle.kernel.guard as _g; _g.install()"]}
    if configured != others:
        settings["config"] = configured
    for item in args.also:
        name, _, code = item.partition("=")
        settings[name] = [*others, EXEC_LINES + code]
    ok, reason = sandbox.sandbox_status()
    manager = sandbox.SandboxedKernelManager if ok else None
    if manager is None:
        from jupyter_client.manager import AsyncKernelManager as manager
    print(f"# kernel start to the first cell finishing ({'sandboxed' if ok else 'no sandbox: ' + reason})")
    for name, arguments in settings.items():
        lines = [a[len(EXEC_LINES):] for a in arguments if a.startswith(EXEC_LINES)]
        print(f"{name:>8}: exec_lines {lines or 'none'}")
    source = first_cell()
    times: dict[str, list[float]] = {name: [] for name in settings}
    for r in range(args.repeat):
        order = list(settings) if r % 2 == 0 else list(reversed(settings))
        for name in order:
            times[name].append(start_to_first_cell(settings[name], source, manager))
    bare = statistics.median(times["bare"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:>8}: median {median:5.2f} s (min {min(values):5.2f}, max {max(values):5.2f}, n={len(values)}) | "
              f"ratio over bare {median / bare:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
