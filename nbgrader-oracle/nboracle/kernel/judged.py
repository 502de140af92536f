"""Every output the student's code returned during a test, judged: the points a gradient check probed.

A gradient check (``parameter_gradients``, ``input_gradients``) evaluates the student's forward
at points a hair away from the graded one, to see that the reported gradient belongs to the
output. Those outputs are the student's answers too: :func:`probed_points` hands them to the test,
which compares each with its reference, so a forward that answers the points near a graded call
otherwise than it would answer them in use earns nothing.
"""

from __future__ import annotations

from typing import Any

from .probes import is_remote

__all__ = ["probed_points"]


def probed_points(target: Any) -> list:
    """``[(point, output), ...]``: where the probes of this test cell evaluated ``target`` (a module's
    ``{parameter name: tensor}`` setting, or a function's tuple of inputs) and what it returned there.

    Under the grader these are the finite-difference points of the gradient checks of the test
    cell so far; where the test runs beside the code (JupyterLab), the check runs on the object
    itself and there is nothing to add: an empty list.
    """
    if not is_remote(target):
        return []
    return type(target)._oracle_probed(target)
