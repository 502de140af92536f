"""`make test-nbgrader`: nbgrader 0.9.6's own app tests with the grader switched on, in both modes.

nbgrader ships its test suite (``nbgrader/tests/apps``, about 294 tests, written for the habits
of any nbgrader course). This runs it with ``tests/conformance/etc/nbgrader_config.py`` on
JUPYTER_CONFIG_PATH, the way a system-wide configuration is loaded (each test's own
nbgrader_config.py still takes priority):

1. the default mode: every app test (test cells run in the student's kernel, in the sandbox);
2. the oracle mode (``COURSE_ORACLE=on``): nbgrader's autograde and feedback tests, the ones whose
   test cells the oracle runs in the grader (the others never execute a test cell).

Only the intended differences in ``tests/conformance/differences.py`` may fail (as strict expected
failures); any other failure, an error, a listed test that passes, or a run that collects nothing
fails the stage. Exit status: 0 when both modes pass, else 1 (2 for a usage error of this script).

    python tests/conformance/run.py [--mode default|oracle|both] [--workers 2] [pytest arguments...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pwd
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from differences import expected

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "etc"  # its nbgrader_config.py: the system-wide configuration
ALL_APP_TESTS = ["nbgrader.tests.apps"]
ORACLE_APP_TESTS = ["nbgrader.tests.apps.test_nbgrader_autograde", "nbgrader.tests.apps.test_nbgrader_generate_feedback"]
# pytest's exit codes (pytest.ExitCode), as this stage reports them
EXIT_CODES = {0: "passed", 1: "tests failed", 2: "interrupted", 3: "pytest's internal error",
              4: "pytest usage error", 5: "no tests collected"}


def environment(oracle: bool) -> dict[str, str]:
    """The environment of one mode: the config on Jupyter's path, nothing of another course's run."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("COURSE_", "JUPYTER_", "PYTEST_")) and name != "PYTHONPATH"}
    env.update(
        JUPYTER_CONFIG_PATH=str(CONFIG_DIR),
        # nbgrader's tests read $USER as the student's name (fetch_feedback): the login name
        USER=pwd.getpwuid(os.getuid()).pw_name,
        # nbgrader creates gradebooks with its environment's `alembic` command
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(HERE),  # -p differences
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg",
    )
    if oracle:
        env["COURSE_ORACLE"] = "on"
    return env


def other_configs() -> list[str]:
    """nbgrader_config.py files elsewhere on Jupyter's config path (system-wide ones of this machine)."""
    from jupyter_core.paths import jupyter_config_path

    env = os.environ.copy()
    try:
        os.environ["JUPYTER_CONFIG_PATH"] = str(CONFIG_DIR)
        os.environ.pop("JUPYTER_CONFIG_DIR", None)
        paths = [Path(folder) / "nbgrader_config.py" for folder in jupyter_config_path()]
    finally:
        os.environ.clear()
        os.environ.update(env)
    return [str(path) for path in paths if path.is_file() and path.parent.resolve() != CONFIG_DIR]


def run_mode(name: str, modules: list[str], workers: int, extra: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix=f"nbgrader-conformance-{name}-") as scratch:
        ini = Path(scratch) / "pytest.ini"  # not this repository's pytest settings
        ini.write_text("[pytest]\n")
        # test ids from site-packages: nbgrader/tests/apps/test_nbgrader_autograde.py::...
        site = Path(importlib.util.find_spec("nbgrader").origin).parents[1]
        command = [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(site), "-p", "differences",
                   "-p", "no:cacheprovider", "-q", "-rfEX", "--disable-warnings",
                   *(["-n", str(workers)] if workers else []), "--pyargs", *modules, *extra]
        print(f"== nbgrader conformance, {name} mode: {' '.join(modules)}", flush=True)
        for test, (what, _) in expected(name).items():
            print(f"   intended difference: {test}: {what}")
        start = time.monotonic()
        code = subprocess.call(command, cwd=scratch, env=environment(name == "oracle"))
        took = time.monotonic() - start
    print(f"== {name} mode: {EXIT_CODES.get(code, f'exit status {code}')} in {took // 60:.0f} min {took % 60:.0f} s",
          flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["default", "oracle", "both"], default="both")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: none)")
    args, extra = parser.parse_known_args(argv)
    others = other_configs()
    if others:
        print(f"test-nbgrader: another nbgrader_config.py is on Jupyter's config path ({', '.join(others)}): "
              "its settings would be tested too; run where only the grader's is", file=sys.stderr)
        return 2
    plan = [("default", ALL_APP_TESTS), ("oracle", ORACLE_APP_TESTS)]
    codes = {name: run_mode(name, modules, args.workers, extra)
             for name, modules in plan if args.mode in (name, "both")}
    failed = {name: code for name, code in codes.items() if code != 0}
    for name, code in failed.items():
        print(f"test-nbgrader: the {name} mode failed ({EXIT_CODES.get(code, f'exit status {code}')}; pytest's "
              "summary above names each test: one not listed in tests/conformance/differences.py, or a listed "
              "one that passed, XPASS(strict))", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
