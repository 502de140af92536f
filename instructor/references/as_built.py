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


class moved_to:
    """``with moved_to(module, values):`` ``module`` (a reference the grader built) holding ``values`` (name ->
    tensor) in place of those entries of its state, and what it held before once the block ends. The same as
    ``module.load_state_dict({**state, **values}, strict=False)`` with ``module`` holding ``state`` (its shape
    check included), without copying every other entry again: a test that judges the outputs at many points a
    gradient check moved one parameter to pays for one parameter per point."""

    def __init__(self, module: torch.nn.Module, values: dict) -> None:
        self.module, self.values = module, values
        self.entries = module.state_dict(keep_vars=True)

    def __enter__(self) -> torch.nn.Module:
        unknown = [name for name in self.values if name not in self.entries]
        wrong = [name for name, value in self.values.items()
                 if name in self.entries and tuple(value.shape) != tuple(self.entries[name].shape)]
        if unknown or wrong:  # what load_state_dict would do with them: its own error, or ignoring an unknown name
            self.saved = {k: v.detach().clone() for k, v in self.entries.items()}
            self.module.load_state_dict(self.values, strict=False)
            return self.module
        self.saved = {name: self.entries[name].detach().clone() for name in self.values}
        with torch.no_grad():
            for name, value in self.values.items():
                self.entries[name].copy_(value)
        return self.module

    def __exit__(self, *exc) -> None:
        with torch.no_grad():
            for name, value in self.saved.items():
                self.entries[name].copy_(value)
