"""What the hidden tests of several chapters ask of a module they load weights into (the grader's side only)."""

from __future__ import annotations

import torch
from nboracle import load_tensors, read_parameters

from course.checks import check_true


def unchanged_by_a_load(what, module, call):
    """``call()`` (the module's output, a tensor or a tuple that starts with one) on the weights ``module`` was built
    with, then again once those same values are loaded into it, as a load writes them: the two must agree. The
    property tests that load weights of their own choosing (zeros, unit scales) ask it of a module as built, so a
    module whose forward depends on whether its weights were written, not only on their values (it reads their
    ``_version``), loses those tests as its wrong code does. Returns nothing (a test cell that ends with it shows
    no value)."""
    with torch.no_grad():
        built = call()
        load_tensors(module, read_parameters(module))
        loaded = call()
    built, loaded = (out[0] if isinstance(out, tuple) and out else out for out in (built, loaded))
    same = (isinstance(built, torch.Tensor) and isinstance(loaded, torch.Tensor)
            and built.shape == loaded.shape and torch.allclose(built, loaded, atol=1e-6))  # precondition: same weights, same output
    check_true(same, f"{what} gives another output once the weights it was built with are loaded into it again: "
               "its forward must depend on the values of its parameters only, not on whether they were written")
