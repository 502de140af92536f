"""Instructor objects a student function receives: they stay in the grader (``fresh``, ``Fresh``).

A function is not a value the wire carries. ``fresh(factory, ...)`` in a test is the object
itself in JupyterLab and, under the oracle, a :class:`Fresh` marker: sent to a student
function it becomes a stand-in in the kernel (:class:`nboracle.kernel.server.Instructor`)
whose uses are requests back to the grader. ``generator_entry`` sends a ``torch.Generator``
by value.
"""

from __future__ import annotations

import sys
from typing import Any

from .probes import _name_of
from .wire import WireError, encode

__all__ = ["Fresh", "fresh", "generator_entry"]

_GRADER_SIDE = False  # set by the grader's oracle (nboracle.grader.oracle) while it grades a notebook


class Fresh:
    """An instructor function or object that a student function receives, under the oracle.

    Arguments travel by value only, and a function is not a value: the instructor's object
    **stays in the grader**. Sent to a student function, the marker becomes a stand-in in
    the kernel (:class:`Instructor`) whose every use is a request back to the grader, which
    answers from a copy of the object made for that call (so what the student's code does to
    it reaches neither the test's copy nor another call). In the grader the marker behaves
    as the grader's own object (``marker(...)``, ``marker.attr``), which the tests' references
    use: nothing the student's side computes is read back.
    """

    __slots__ = ("local", "_factory", "only")

    def __init__(self, factory: Any, args: tuple = (), kwargs: dict | None = None, instance: bool = False,
                 only: Any = None) -> None:
        self._factory = factory
        self.local = factory(*args, **dict(kwargs or {})) if instance else factory
        self.only = _uses(only)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.local(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.local, name)
        if self.local is self._factory:  # a function or class: its attributes as they are
            return value
        if _is_module(value):  # a part of the object (``lm.block``): a marker too, with the test's limit for it
            part = None if self.only is None else self.only.get(name, {})  # a part the test does not name: nothing
            return Fresh(value, only=part)
        if callable(value) and getattr(value, "__self__", None) is self.local:
            return _KeepMarker(self, value)  # ``.double()``, ``.eval()`` return the marker, not the grader's copy
        return value

    def __repr__(self) -> str:
        return f"<the tests' {_name_of(self.local)} (it runs in the grader)>"

    def copy_to_send(self) -> Any:
        """The object a student's call gets (through its stand-in): a copy of the grader's, made now."""
        import copy

        try:
            return copy.deepcopy(self.local)
        except Exception as error:
            raise WireError(f"the tests' {_name_of(self.local)} cannot be handed to the student's code "
                            f"({type(error).__name__}: a deep copy of it failed)") from None


class _KeepMarker:
    """A method of a marker's object: a result that is the object itself is the marker again."""

    __slots__ = ("_marker", "_method")

    def __init__(self, marker: Fresh, method: Any) -> None:
        self._marker, self._method = marker, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self._method(*args, **kwargs)
        return self._marker if result is self._marker.local else result


def _uses(only: Any) -> dict | None:
    """``only`` as the grader reads it: ``{name: what that part may do (None: anything)}``, ``"__call__"``
    for a call; ``("qkv", "proj")`` reads as ``{"qkv": None, "proj": None}``."""
    if only is None:
        return None
    if type(only) is dict:
        return {str(name): _uses(part) for name, part in only.items()}
    return {str(name): None for name in only}


def _is_module(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def fresh(factory: Any, *args: Any, only: Any = None, **kwargs: Any) -> Any:
    """An instructor function (``fresh(toy_next_probs)``) or object (``fresh(TableModel, table)``,
    built as ``TableModel(table)``) for a student function to receive.

    ``only`` limits what the student's code may do with it under the grader, to what the exercise
    needs: names of attributes (``only=("qkv", "proj")``: not even a call of the object itself),
    ``"__call__"`` for a call, a dict for what each part may do in turn (``{"block": ("qkv",),
    "__call__": None}``; None: anything). Without it a function may only be called, and an object
    may be called and its public attributes read.

    In JupyterLab, or wherever tests run in the kernel, this is simply the function or the new
    object. In the grader (under the oracle) it is a :class:`Fresh` marker: sent to a student
    function it stays in the grader, and the kernel gets a stand-in whose uses are requests
    back to it; used by the test itself it is the grader's own object.
    """
    instance = bool(args or kwargs) or isinstance(factory, type)
    if not _GRADER_SIDE:
        return factory(*args, **kwargs) if instance else factory
    return Fresh(factory, args, kwargs, instance, only)


def generator_entry(generator: Any) -> dict:
    """``{"t": "generator", "state": ...}``: a ``torch.Generator`` sent by value (its state), so a
    student function called with ``generator=`` draws what the test's generator would draw."""
    import torch

    if type(generator) is not torch.Generator or generator.device.type != "cpu":
        raise WireError("only a CPU torch.Generator can be sent to the kernel")
    return {"t": "generator", "state": encode(generator.get_state())}


