"""The public gradient functions refuse a grading kernel's own objects while it serves a request of the grader,
and only then: the request on the stack decides (``nboracle.kernel.probes.refused_here``), no mark a cell sets."""

from __future__ import annotations

import os
import threading

import pytest
import torch
from nboracle import input_gradients
from nboracle.kernel import probes

# a stand-in for the server's _serve (nboracle/kernel/server.py), which runs every request of the grader
_SERVE = compile("def _serve(call):\n    return call()\n", os.path.join("somewhere", "nboracle", "kernel", "server.py"),
                 "exec")


def _serving():
    namespace: dict = {}
    exec(_SERVE, namespace)
    return namespace["_serve"]


def _square(t):
    return t * t


def test_gradients_work_where_no_request_is_served():
    x = torch.tensor([1.0, 2.0])
    assert not probes.refused_here()
    assert torch.equal(input_gradients(_square, (x,))[0], 2 * x)


def test_gradients_are_refused_inside_a_request_and_in_a_thread_it_waits_for():
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(probes.CheckFailed, match="computes gradients for the tests"):
        _serving()(lambda: input_gradients(_square, (x,)))
    caught = []

    def worker():
        try:
            input_gradients(_square, (x,))
        except probes.CheckFailed as error:
            caught.append(error)

    def graded_call():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()

    _serving()(graded_call)
    assert caught, "a worker thread computed gradients while a request was served"


def test_a_function_of_another_file_named_serve_changes_nothing():
    namespace: dict = {}
    exec(compile("def _serve(call):\n    return call()\n", "mine.py", "exec"), namespace)
    assert namespace["_serve"](probes.refused_here) is False
