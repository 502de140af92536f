"""Watch what a PyTorch function allocates, without reading its code.

``largest_tensor(fn, *args)`` calls ``fn`` and reports the largest tensor produced by any
ATen operation inside it, including the intermediates of composite calls such as
``torch.einsum`` (measured by the storage behind each tensor, so a broadcast view of a small
tensor counts as small). Chapter 08 uses it to tell an attention that builds the ``L x L``
matrix from one that never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["Largest", "largest_tensor"]


@dataclass
class Largest:
    """The biggest tensor seen: its number of entries (storage) and its shape."""

    entries: int = 0
    shape: tuple[int, ...] = ()


class _Watch(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # By default torch wraps __torch_dispatch__ in torch._disable_dynamo, which imports
        # torch._dynamo: seconds on first use, for a mode that is never compiled.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.largest = Largest()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor) and value.element_size() > 0:
                entries = value.untyped_storage().nbytes() // value.element_size()
                if entries > self.largest.entries:
                    self.largest = Largest(int(entries), tuple(value.shape))
        return out


def largest_tensor(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Largest]:
    """Call ``fn(*args, **kwargs)``; return its result and the largest tensor built inside it.

    Under the grader's oracle ``fn`` may be a proxy of the student's function: the call is then
    watched where it runs, in the kernel (``course.oracle`` probe ``largest_tensor``), and only
    the result and the two numbers come back, as data. What the kernel reports is the student's
    to fake, so a graded test never rests on it alone (chapter 08 also runs the function on a
    sequence whose L x L matrix no machine can hold).
    """
    from . import oracle

    if oracle.is_remote(fn):
        result, entries, shape = oracle._probe("largest_tensor", fn, *args, **kwargs)
        if type(entries) is not int or type(shape) is not tuple or not all(type(n) is int for n in shape):
            raise oracle.WireError("the kernel's largest_tensor report is not two numbers")
        return result, Largest(entries, shape)
    watch = _Watch()
    with watch:
        result = fn(*args, **kwargs)
    return result, watch.largest
