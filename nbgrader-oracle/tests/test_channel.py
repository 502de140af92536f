"""The oracle's socket channel (nboracle.kernel.server.SERVE) against a real kernel.

A grader cell's requests travel on a Unix socket that the kernel connects to; the kernel
answers them in a loop until the cell ends, then is free for the next cell. Whatever the
student's code does to that socket (closes it, sends a huge frame, removes the handler) costs
at most the request it spoils: the grader goes on with shell messages, as before the channel.
"""

from __future__ import annotations

from time import monotonic

import numpy as np
import pytest
import torch
from jupyter_client.manager import start_new_kernel
from nboracle.grader import oracle

SETUP = """
import nboracle.kernel.server, nboracle.kernel.wire, numpy as np
nboracle.kernel.server.listen()
def double(x):
    return 2 * x
def endless():
    while True:
        pass
import torch
layer = torch.nn.Linear(3, 2)
def grad_mode():
    return [torch.is_grad_enabled(), torch.is_inference_mode_enabled()]
def through_numpy(x):  # honest code that reads a layer's output through NumPy
    return torch.from_numpy(layer(x).numpy())
def turns_gradients_off():
    torch.set_grad_enabled(False)
    return torch.is_grad_enabled()
"""
# the student's code reaching the kernel's end of the channel (its handler's closure)
CONNECTION = "get_ipython().kernel.shell_handlers['course_oracle_serve'].__closure__[0].cell_contents"


class Executor:
    """What KernelLink needs of nbgrader's Execute step: the kernel's manager and client, a timeout."""

    def __init__(self, km, kc, timeout: float = 30) -> None:
        self.km, self.kc, self.timeout = km, kc, timeout


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        run(kc, SETUP)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture
def shell_only(kernel):
    """The kernel with its socket handler removed (as a student's code may): requests go on the shell."""
    run(kernel[1], "handler = get_ipython().kernel.shell_handlers.pop('course_oracle_serve')")
    yield kernel
    run(kernel[1], "get_ipython().kernel.shell_handlers['course_oracle_serve'] = handler")


def run(kc, code: str) -> None:
    reply = kc.execute_interactive(code, timeout=30)
    assert reply["content"]["status"] == "ok", reply["content"]


def link_to(kernel, timeout: float = 30) -> oracle.KernelLink:
    return oracle.KernelLink(Executor(*kernel, timeout))


def call(link: oracle.KernelLink, name: str, *args):
    """The kernel's ``name(*args)``, called as a test cell calls it (proxies answer test code only)."""
    code = compile(f"link.name({name!r})(*args)", "<test channel>", "eval")
    return eval(code, {"link": link, "args": args})


def test_requests_go_over_the_socket_and_the_kernel_is_free_between_cells(kernel):
    link = link_to(kernel)
    try:
        x = np.arange(6.0).reshape(2, 3)
        assert np.array_equal(call(link, "double", x), 2 * x)
        assert link._channel.sock is not None and not link._channel.off  # it went over the socket
        link.pause()
        run(kernel[1], "y = double(21)")  # a kernel cell between two grader cells
        assert link.name("y") == 42 and link._channel.sock is not None  # the same connection again
    finally:
        link.pause()
        link.close()


def test_a_closed_socket_spoils_one_request_then_shell_messages_take_over(kernel):
    link = link_to(kernel)
    try:
        assert call(link, "double", 4) == 8
        link.pause()
        run(kernel[1], f"{CONNECTION}[0].close()")  # the student's cell closes the kernel's end
        with pytest.raises((oracle.KernelError, oracle.wire.WireError)):
            call(link, "double", 5)
        assert link._channel.off
        assert call(link, "double", 6) == 12  # shell requests from now on
    finally:
        link.pause()
        link.close()


def test_a_huge_frame_is_refused_before_it_is_read(kernel):
    link = link_to(kernel)
    try:
        assert call(link, "double", 1) == 2
        link.pause()
        # the student's code answers the next request itself with a frame "of a terabyte"
        run(kernel[1], f"import socket\nsock = {CONNECTION}[0]\n"
                       "def double(x):\n    sock.sendall((2**40).to_bytes(8, 'big'))\n    return 0\n")
        with pytest.raises(oracle.wire.WireError, match="over the limit"):
            call(link, "double", 3)
        assert link._channel.off
    finally:
        link.pause()
        link.close()
        run(kernel[1], "def double(x):\n    return 2 * x\n")


def test_an_endless_call_is_interrupted_and_the_next_request_is_answered(kernel):
    link = link_to(kernel, timeout=2)
    try:
        link.deadline = monotonic() + 2
        with pytest.raises(oracle.OracleTimeout):
            call(link, "endless")
        link.deadline = monotonic() + 30
        assert call(link, "double", 7) == 14 and not link._channel.off
    finally:
        link.pause()
        link.close()


def test_an_endless_call_on_the_shell_is_interrupted_too(shell_only):
    link = link_to(shell_only, timeout=2)
    try:
        link.deadline = monotonic() + 2
        with pytest.raises(oracle.OracleTimeout, match="longer than 2 s|did not answer within 2 s"):
            call(link, "endless")
        assert link._channel.off
        link.deadline = monotonic() + 30
        assert call(link, "double", 8) == 16
    finally:
        link.pause()
        link.close()


def test_a_kernel_without_the_socket_handler_is_asked_on_the_shell(shell_only):
    link = link_to(shell_only)
    try:
        assert call(link, "double", 10) == 20
        assert link._channel.off and link._channel.sock is None
    finally:
        link.pause()
        link.close()


@pytest.mark.parametrize("channel", ["socket", "shell"])
def test_the_kernel_runs_each_call_in_the_tests_autograd_mode_and_keeps_its_own(channel, request):
    """``with torch.no_grad(): out = f(x)`` in a test is f without gradients in the kernel too
    (issue 29, item 8), on either channel. Kills the mutants that do not send the mode, that
    ignore it in the kernel, that leave the kernel in the mode a call set, and that run the
    gradient probes in the caller's no_grad() (no gradients)."""
    import torch

    kernel = request.getfixturevalue("kernel" if channel == "socket" else "shell_only")
    link = link_to(kernel)
    x = torch.ones(4, 3)
    try:
        assert call(link, "grad_mode") == [True, False]
        with pytest.raises(oracle.KernelError, match="requires grad"):
            call(link, "through_numpy", x)  # as in JupyterLab outside no_grad()
        with torch.no_grad():
            assert call(link, "grad_mode") == [False, False]
            out = call(link, "through_numpy", x)
            assert out.shape == (4, 2) and not out.requires_grad
            probe = compile("parameter_gradients(link.name('layer'), x, torch.ones(4, 2))", "<test mode>", "eval")
            grads = eval(probe, {"link": link, "x": x, "torch": torch,
                                 "parameter_gradients": oracle.probes.parameter_gradients})
            assert torch.equal(grads["bias"], torch.full((2,), 4.0)) and torch.equal(grads["weight"], torch.full((2, 3), 4.0))
            some = oracle.probes.parameter_gradients_of(link.name("layer"), ("bias",), x, torch.ones(4, 2))
            assert list(some) == ["bias"] and torch.equal(some["bias"], torch.full((2,), 4.0))  # computed in the kernel
        with torch.inference_mode():
            assert call(link, "grad_mode") == [False, True]
        assert call(link, "turns_gradients_off") is False
        assert call(link, "grad_mode") == [True, False]  # the kernel's own mode is back after every call
        assert (link._channel.sock is not None) == (channel == "socket")
        link.pause()
        run(kernel[1], "assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()")
    finally:
        link.pause()
        link.close()


def test_an_answer_to_another_request_fails_that_test_and_the_channel_goes_on_on_the_shell(kernel):
    """Issue 29, item 6: every request carries an id its reply must echo. A student call that
    writes a frame of its own on the socket (an answer with another id, then one without)
    fails its test with a WireError; the socket channel is left (its frames are out of step)
    and the next request is answered on the shell. Kills the mutant without the id check
    (the forged 99 would be the answer) and the one that keeps the socket (the genuine reply,
    still queued, would answer the next request)."""
    for forged in ({"ok": 99, "id": "not-the-one"}, {"ok": 99}):
        link = link_to(kernel)
        try:
            assert call(link, "double", 1) == 2
            link.pause()
            run(kernel[1], f"import json\nsock = {CONNECTION}[0]\n"
                           "def forge(x, answer):\n"
                           "    nboracle.kernel.wire.write_frame(sock, json.dumps(answer).encode())\n    return 2 * x\n")
            with pytest.raises(oracle.wire.WireError, match="not the answer to this request"):
                call(link, "forge", 3, forged)
            assert link._channel.off
            assert call(link, "double", 4) == 8 and call(link, "double", 5) == 10
        finally:
            link.pause()
            link.close()


STUDENT_USES_OF_INSTRUCTOR_OBJECTS = '''
def apply_twice(f, x):
    return f(f(x))
def through_parts(block, x):  # a submodule, a number, a weight, the object itself
    return block.linear(x), block.factor, block.linear.weight, block(x)
def looks_inside(f):
    found = []
    for name in ("__globals__", "__closure__", "__code__", "_parameters"):
        try:
            getattr(f, name)
            found.append(name)
        except AttributeError:
            pass
    try:
        f.patched = True
        found.append("setattr")
    except AttributeError:
        pass
    return found
def zero_it(block):
    block.load_state_dict({"linear.weight": torch.zeros(2, 3), "linear.bias": torch.zeros(2)})
    return block(torch.ones(1, 3))
def calls_many(f, n):
    return sum(f(i) for i in range(n))
def first_dtype(block):  # as an honest student may read a module's dtype
    return next(block.parameters()).dtype, [type(child).__name__ for child in block.children()]
def opens_more(block):
    refused = []
    for reach in (lambda: block.type("torch.DoubleTensor"), lambda: block.forward.__globals__):
        try:
            reach()
        except Exception as error:
            refused.append(type(error).__name__)
    return refused
'''


class Scaled(torch.nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.factor * self.linear(x)


def test_instructor_objects_run_in_the_grader_and_the_kernel_gets_stand_ins(kernel, monkeypatch):
    """A fresh() object handed to the student's code stays here: each use in the kernel is a
    frame back to the grader, answered with data while the student's call runs; its code and
    closure cannot be read there, and what the student's code does to it stays in its copy."""
    monkeypatch.setattr(oracle.fresh_module, "_GRADER_SIDE", True)
    run(kernel[1], STUDENT_USES_OF_INSTRUCTOR_OBJECTS)
    link = link_to(kernel)
    try:
        seen = []

        def plus_one(x):  # the grader records every call: it runs here
            seen.append(x)
            return x + 1

        assert call(link, "apply_twice", oracle.fresh_module.fresh(plus_one), 5) == 7 and seen == [5, 6]
        block = oracle.fresh_module.fresh(Scaled, 2.0)
        x = torch.randn(4, 3)
        out, factor, weight, whole = call(link, "through_parts", block, x)
        assert torch.equal(out, block.linear(x)) and factor == 2.0 and torch.equal(whole, block(x))
        assert torch.equal(weight, block.linear.weight)
        assert call(link, "looks_inside", oracle.fresh_module.fresh(plus_one)) == []
        before = block.linear.weight.detach().clone()
        assert torch.equal(call(link, "zero_it", block), torch.zeros(1, 2))
        assert torch.equal(block.linear.weight, before)  # the test's own object is untouched
        assert call(link, "calls_many", oracle.fresh_module.fresh(plus_one), 200) == sum(range(1, 201))
        assert call(link, "first_dtype", block) == (torch.float32, ["Instructor"])
        assert call(link, "opens_more", block) == ["AttributeError", "AttributeError"]
    finally:
        link.pause()
        link.close()


def test_an_instructor_object_may_call_the_students_code_back(kernel, monkeypatch):
    """Nested requests: while the kernel waits for the grader's answer to a stand-in, the
    grader's object calls a kernel function (a test's wrapper around the student's code)."""
    monkeypatch.setattr(oracle.fresh_module, "_GRADER_SIDE", True)
    run(kernel[1], STUDENT_USES_OF_INSTRUCTOR_OBJECTS)
    link = link_to(kernel)
    try:
        wrapped = oracle.fresh_module.fresh(lambda x: call(link, "double", x))
        assert call(link, "apply_twice", wrapped, 5) == 20
    finally:
        link.pause()
        link.close()


def test_on_the_shell_an_instructor_object_fails_with_a_clear_message(shell_only, monkeypatch):
    monkeypatch.setattr(oracle.fresh_module, "_GRADER_SIDE", True)
    run(shell_only[1], STUDENT_USES_OF_INSTRUCTOR_OBJECTS)
    link = link_to(shell_only)
    try:
        with pytest.raises(oracle.KernelError, match="run in the grader"):
            call(link, "apply_twice", oracle.fresh_module.fresh(lambda x: x + 1), 5)
    finally:
        link.close()


def test_a_kernel_class_that_takes_a_library_name_is_not_taken_for_it(kernel):
    """Handles name the library's classes by identity, captured when the kernel started: a
    student class calling itself nn.LayerNorm is not one; a genuine subclass of nn.Linear is."""
    run(kernel[1], '''
class Impostor(torch.nn.Module):
    def forward(self, x):
        return x
Impostor.__qualname__, Impostor.__module__ = "LayerNorm", "torch.nn.modules.normalization"
class MyLinear(torch.nn.Linear):
    pass
impostor, genuine, subclass = Impostor(), torch.nn.LayerNorm(4), MyLinear(2, 3)
''')
    link = link_to(kernel)
    try:
        impostor, genuine, subclass = (link.name(n) for n in ("impostor", "genuine", "subclass"))
        assert not isinstance(impostor, torch.nn.LayerNorm) and isinstance(impostor, torch.nn.Module)
        assert isinstance(genuine, torch.nn.LayerNorm)
        assert isinstance(subclass, torch.nn.Linear) and not isinstance(subclass, torch.nn.LayerNorm)
    finally:
        link.pause()
        link.close()


def test_what_the_kernel_reads_of_a_module_is_what_it_holds_whatever_numpy_and_torch_say(kernel):
    """A call that rebinds torch.Tensor.numpy, torch.Tensor.detach and np.asarray does not
    change what a probe reports of a module's tensors: encode uses the functions captured at start."""
    run(kernel[1], '''
def rebind_the_readers():
    zeros = lambda *args, **kwargs: np.zeros((2, 3))
    torch.Tensor.numpy = lambda self, *args, **kwargs: np.zeros(tuple(self.shape))
    torch.Tensor.detach = lambda self: torch.zeros_like(self)
    nboracle.kernel.wire.np_asarray, np.asarray = np.asarray, zeros
    return True
def undo_the_rebinding():
    del torch.Tensor.numpy, torch.Tensor.detach
    np.asarray = nboracle.kernel.wire.np_asarray
''')
    link = link_to(kernel)
    weight = torch.arange(6.0).reshape(2, 3) + 1
    try:
        layer = link.name("layer")
        code = compile("wire.load_tensors(layer, {'weight': weight}); rebind()", "<test channel>", "exec")
        eval(code, {"wire": oracle.probes, "layer": layer, "weight": weight, "rebind": link.name("rebind_the_readers")})
        read = eval(compile("wire.read_tensors(layer, ['weight'])", "<test channel>", "eval"),
                    {"wire": oracle.probes, "layer": layer})
        assert torch.equal(read["weight"], weight)
    finally:
        eval(compile("undo()", "<test channel>", "eval"), {"undo": link.name("undo_the_rebinding")})
        link.pause()
        link.close()


SERVER_STATE = """
import sys

def server_state():  # what a module can read of the server: the same in a cell and in a graded call
    server = sys.modules["nboracle.kernel.server"]
    tables = {name: len(getattr(server, name)) for name in ("_LINE", "_handles", "_handle_ids", "_generators")}
    tables.update({"sealed" + name: len(server._SEALED[name]) for name in ("_LINE", "_handles", "_generators")})
    return tables, sorted(name for name in sys.modules if name.startswith("nboracle"))

in_a_cell = server_state()
"""


def test_a_graded_call_leaves_the_server_modules_globals_as_a_cell_sees_them(kernel):
    """Issue 43 item 3: the request state of a listening kernel (handles, generators, the socket
    line) is in no module's globals, so a module cannot tell a graded call by reading them."""
    run(kernel[1], SERVER_STATE)
    link = link_to(kernel)
    try:
        call(link, "double", np.ones(2))  # handles and a socket line exist now, in the listener's namespace
        graded = call(link, "server_state")
        in_a_cell = link.name("in_a_cell")
        assert graded == in_a_cell
        assert set(graded[0].values()) == {0}, graded
    finally:
        link.pause()
        link.close()
