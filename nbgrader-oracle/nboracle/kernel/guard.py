"""Started in every grading kernel before any student code: the oracle's kernel side, and the builtins kept.

The grader (``nboracle.grader.nbgrader_ext.GuardedExecute``) calls :func:`install` with a silent
request before the first cell: it starts the oracle's handlers (``nboracle.kernel.server.listen``)
and, before and after every cell, puts back the builtins that cell replaced, added or removed,
saying so in the cell's output.

This is what is left of a larger in-kernel guard (it also put back patched test helpers and
IPython's machinery, and sent signed reports). Graded with and without it, the one attack whose
grade changed replaced builtins (``builtins.isinstance = lambda *a: True``, ``bool``, ``max``,
``all``, ``abs``, ``AssertionError``): without them put back the kernel's own machinery breaks (a
cell then runs past the time limit) and the submission fails to grade instead of earning what its
wrong code earns. Nothing here decides a score or a review flag: under the oracle the tests run in
the grader, and the static scan (``nboracle.grader.scan``) flags the patching itself.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

TAMPER_MARK = "grader: this notebook had replaced"
# IPython puts these into builtins only while a cell runs; ipykernel swaps input() per request
_TRAP_BUILTINS = {"exit", "quit", "get_ipython", "input", "raw_input"}

_installed: list[Any] = []  # the restore function, once installed


def _builtins_guard(shell: Any):
    """A function that puts back the builtins as they are now; it uses only what it captured."""
    _module, _dict, _modules = builtins, builtins.__dict__, sys.modules
    _list, _sorted, _print, _exception = list, sorted, print, Exception
    _namespace, _stdout = shell.user_ns, sys.stdout
    genuine = {k: v for k, v in _dict.items() if k not in _TRAP_BUILTINS}
    missing = object()

    def restore(*_args: Any) -> None:
        found = []
        if _modules.get("builtins") is not _module:
            _modules["builtins"] = _module
            found.append("the builtins module")
        if _namespace.get("__builtins__", _module) is not _module:
            _namespace["__builtins__"] = _module
            found.append("the notebook's __builtins__")
        for name, value in genuine.items():
            if _dict.get(name, missing) is not value:
                _dict[name] = value
                found.append("builtins." + name)
        for name in _list(_dict):
            if name not in genuine and name not in _TRAP_BUILTINS:
                del _dict[name]
                found.append("builtins." + name + " (added)")
        if found:
            try:
                _print(TAMPER_MARK, ", ".join(_sorted(found)) + "; the originals were put back.",
                       file=_stdout, flush=True)
            except _exception:
                pass

    return restore


def install(*imports: str, shell: Any = None) -> str:
    """Import ``imports`` (the course's packages: an ImportError here is the grader's to report,
    before any student code), start the oracle's kernel side and guard the builtins of every
    following cell; the answer of :func:`nboracle.kernel.server.listen` (the grader checks it).

    Then the package's modules leave ``sys.modules`` (:func:`_forget_package`): the
    server answers from what :func:`~nboracle.kernel.server.listen` sealed, and a grading kernel's modules
    are those of the student's own kernel, where nothing imports ``nboracle`` before the notebook does."""
    import importlib

    from . import server

    for name in imports:
        importlib.import_module(name)
    answer = server.listen()
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is not None and not _installed:
        restore = _builtins_guard(shell)
        shell.events.register("pre_run_cell", restore)
        shell.events.register("post_run_cell", restore)
        _installed.append(restore)
    if shell is not None and answer == server.LISTENING:
        _forget_package()
    return answer


def _forget_package() -> None:
    """Take ``nboracle`` and its modules out of ``sys.modules``: what listens keeps its own copies (its
    sealed namespace, the handlers' closures), and an ``import nboracle`` of the notebook loads the
    package afresh, as in the student's own kernel. ``sys.modules`` then tells a grading kernel from
    another by nothing of this package (docs/GRADING.md)."""
    for name in [name for name in sys.modules if name == "nboracle" or name.startswith("nboracle.")]:
        del sys.modules[name]
