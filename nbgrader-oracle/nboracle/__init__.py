"""nboracle: graded notebook tests that run in the grader while the student's kernel answers with data.

A test cell imports what it needs from here; the kernel side (:mod:`nboracle.kernel`) also runs
in the student's kernel, the grader side (:mod:`nboracle.grader`) in nbgrader's process, the
class pipeline (:mod:`nboracle.classroom`) around both.
"""

# the kernel side's server and guard are loaded wherever nboracle is: a grading kernel forgets the package
# once it listens (nboracle.kernel.guard.install), and a notebook that imports nboracle then loads the same
# modules as in the student's own kernel, so that sys.modules does not tell the two apart (docs/GRADING.md)
from .kernel import guard as _guard  # noqa: F401
from .kernel import server as _server  # noqa: F401
from .kernel.fresh import Fresh, fresh, generator_entry
from .kernel.judged import probed_points
from .kernel.probes import (
    CheckFailed,
    Largest,
    call_keeping_arguments,
    draw_parameters,
    input_gradients,
    is_remote,
    largest_tensor,
    load_tensors,
    module_tensors,
    parameter_and_input_gradients,
    parameter_gradients,
    parameter_gradients_of,
    read_parameters,
    read_state,
    read_tensors,
    set_training,
)
from .kernel.wire import WireError

__version__ = "0.1.0"

__all__ = ["CheckFailed", "Fresh", "Largest", "WireError", "call_keeping_arguments", "draw_parameters", "fresh",
           "generator_entry", "input_gradients", "is_remote", "largest_tensor", "load_tensors", "module_tensors",
           "parameter_and_input_gradients", "parameter_gradients", "parameter_gradients_of", "probed_points", "read_parameters", "read_state",
           "read_tensors", "set_training"]
