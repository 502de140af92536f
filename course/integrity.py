"""Keep the grader's comparison functions honest while a notebook is autograded.

nbgrader starts each grading kernel with ``install()`` (see ``nbgrader_config.py``), before
any student code runs. It remembers the genuine ``numpy.allclose``, ``torch.allclose``,
``torch.testing.assert_close``, the ``course`` checks and the like. Before every cell it puts
back any of them that student code replaced, in the module and under the notebook names
that were bound to them, and says so in that cell's output. Replacing a check therefore
earns nothing, and the feedback shows what happened.

It is a guard against shortcuts, not a sandbox: code in the same process can always do more.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

_MONITORED = {
    "numpy": ["allclose", "isclose", "array_equal", "all", "any", "abs", "max", "isfinite", "isnan"],
    "numpy.testing": ["assert_allclose", "assert_array_equal", "assert_array_almost_equal", "assert_equal"],
    "torch": ["allclose", "isclose", "equal", "all", "any", "abs", "max", "isfinite", "isnan"],
    "torch.testing": ["assert_close"],
    "math": ["isclose"],
    "course.checks": [
        "as_numpy", "check_close", "check_dtype", "check_finite", "check_rows_sum_to_one",
        "check_shape", "check_true", "check_type", "matches", "_fail",
    ],
    "course.tracing": ["largest_tensor"],
    "course": [
        "as_numpy", "check_close", "check_dtype", "check_finite", "check_rows_sum_to_one",
        "check_shape", "check_true", "check_type", "matches",
    ],
}
_MODULE_NAMES = ["numpy", "torch", "torch.nn.functional", "math", "course", "course.checks", "course.tracing"]

_originals: dict[tuple[str, str], Any] = {}
_modules: dict[str, Any] = {}
_bindings: dict[str, Any] = {}  # notebook name -> genuine object it was bound to
_installed = False


def _snapshot() -> None:
    for module_name in _MODULE_NAMES:
        try:
            _modules[module_name] = importlib.import_module(module_name)
        except ImportError:
            continue
    for module_name, attributes in _MONITORED.items():
        module = _modules.get(module_name)
        for attribute in attributes:
            if module is not None and hasattr(module, attribute):
                _originals[(module_name, attribute)] = getattr(module, attribute)


def _genuine_objects() -> dict[int, Any]:
    """Genuine functions and modules by id (kept alive by the dicts, so ids stay unique)."""
    objects = {id(obj): obj for obj in _originals.values()}
    objects.update({id(module): module for module in _modules.values()})
    return objects


def restore(namespace: dict[str, Any]) -> list[str]:
    """Put back every replaced function and notebook binding; return what was replaced."""
    replaced = []
    for (module_name, attribute), original in _originals.items():
        module = sys.modules.get(module_name, _modules.get(module_name))
        if module is not _modules.get(module_name):
            sys.modules[module_name] = module = _modules[module_name]
            replaced.append(f"the module {module_name}")
        if getattr(module, attribute, None) is not original:
            setattr(module, attribute, original)
            replaced.append(f"{module_name}.{attribute}")
    for name, original in _bindings.items():
        if namespace.get(name) is not original:
            namespace[name] = original
            replaced.append(f"the notebook name {name!r}")
    return replaced


# Notebook names guarded once they are bound to a genuine object (by the locked imports cell).
# Only these: a student's own variable that happens to hold, say, np.max is left alone.
_GUARDED_NAMES = set(_MONITORED["course"]) | {"np", "numpy", "torch", "F", "math", "course", "checks"}


def _remember_bindings(namespace: dict[str, Any]) -> None:
    genuine = _genuine_objects()
    for name in _GUARDED_NAMES - set(_bindings):
        value = namespace.get(name)
        if value is not None and genuine.get(id(value)) is value:
            _bindings[name] = value


def install(shell: Any = None) -> None:
    """Snapshot the genuine functions and guard every following cell of this kernel."""
    global _installed
    if _installed:
        return
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return
    _snapshot()

    def before_cell(*_args: Any) -> None:
        replaced = restore(shell.user_ns)
        if replaced:
            print("grader: this notebook had replaced " + ", ".join(sorted(set(replaced)))
                  + "; the originals were put back before this cell ran.")

    def after_cell(*_args: Any) -> None:
        _remember_bindings(shell.user_ns)

    shell.events.register("pre_run_cell", before_cell)
    shell.events.register("post_run_cell", after_cell)
    _installed = True
