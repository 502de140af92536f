"""What the hidden tests of several chapters ask of a module they load weights into (the grader's side only)."""

from __future__ import annotations

import torch
from nboracle import load_tensors, read_parameters

from course.checks import check_true


def permuted_hidden_units(state: dict, seed: int) -> dict:
    """``state`` with the hidden units of every feed-forward layer it holds (``<prefix>linear1.weight`` and
    ``.bias``, ``<prefix>linear2.weight``) in another order: the same function for any activation applied unit by
    unit, with weights no constructor made."""
    gen = torch.Generator().manual_seed(seed)
    out = dict(state)
    for key in state:
        if not key.endswith("linear1.weight"):
            continue
        prefix = key[: -len("linear1.weight")]
        names = (f"{prefix}linear1.weight", f"{prefix}linear1.bias", f"{prefix}linear2.weight")
        if not all(name in state for name in names) or state[names[0]].shape[0] < 2:
            continue
        order = torch.randperm(state[names[0]].shape[0], generator=gen)
        if torch.equal(order, torch.arange(len(order))):
            order = order.roll(1)
        out[names[0]], out[names[1]] = state[names[0]][order], state[names[1]][order]
        out[names[2]] = state[names[2]][:, order]
    return out


def _first(out):
    return out[0] if isinstance(out, tuple) and out else out


def _agree(a, b):
    a, b = _first(a), _first(b)
    both = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape  # precondition: twins
    return both and torch.allclose(a.double(), b.double(), atol=1e-5)  # precondition: same weights, same output


def same_as_a_twin(what, build, call):
    """``call(module)`` (the output, a tensor or a tuple that starts with one) on a module as ``build()`` makes it,
    then on a second one built the same way holding the first one's weights: the two must agree. A module whose
    forward depends on whether its weights were written, not only on their values (it reads their ``_version``,
    or compares them with a copy of the ones it was built with), is told apart from its twin, and loses the tests
    that ask it, as its wrong code does. Two more twins hold the same weights with the hidden
    units of each feed-forward layer in another order (the same function, values no constructor made): when those
    two agree with each other but not with the module as built, the module answers differently for weights it made
    itself. An honest module agrees everywhere; one whose mistake breaks the symmetry of the hidden units makes
    the two permuted twins disagree, and is left to the other tests. Returns nothing (a test cell that ends with it
    shows no value)."""
    def twin_holding(state):  # call() on a module built as the student's is, holding ``state`` (loaded)
        twin = build()
        with torch.no_grad():
            load_tensors(twin, state)
            return call(twin)

    module = build()
    weights = read_parameters(module)  # the weights it was built with, read, nothing written
    with torch.no_grad():
        built = call(module)
    check_true(_agree(built, twin_holding(weights)), f"{what} gives another output than a second {what} holding the "
               "same weights (loaded into it, as a load writes them): its forward must depend on the values of its "
               "parameters only, not on whether, when or how they were written")
    shuffled = [permuted_hidden_units(weights, seed) for seed in (1, 2)]
    if all(torch.equal(s[k], weights[k]) for s in shuffled for k in weights):
        return  # no feed-forward layer to reorder
    outputs = [twin_holding(state) for state in shuffled]
    check_true(not _agree(outputs[0], outputs[1]) or _agree(built, outputs[0]),
               f"{what} as built gives another output than a second {what} holding the same weights with the hidden "
               "units of its feed-forward layer in another order (the same function): its forward must depend on the "
               "values of its parameters only, not on whether it made them itself")
