"""Loading the parameters a test drew into a student's module, by the names an exercise gives (chapters 09, 10)."""

from __future__ import annotations

from nboracle import load_tensors, module_tensors

from .checks import check_true


def load_state(what, module, state):
    """Load the test's parameters into `module`; a parameter the exercise names but `module` lacks fails."""
    held = {name: t["shape"] for t in module_tensors(module) for name in (t["name"], *t["aliases"])}  # its own tensors
    missing = [name for name in state if name not in held]
    check_true(not missing, f"{what} has no parameter {missing[0] if missing else ''}: build the submodules "
               "the exercise names")
    wrong = [name for name in state if tuple(state[name].shape) != held[name]]
    check_true(not wrong, f"{what}.{wrong[0] if wrong else ''} has shape {held[wrong[0]] if wrong else ''}, expected "
               f"{tuple(state[wrong[0]].shape) if wrong else ''}: build the submodules with the sizes the exercise gives")
    load_tensors(module, state)
    return module
