"""The oracle's socket channel (course.oracle.SERVE) against a real kernel.

A grader cell's requests travel on a Unix socket that the kernel connects to; the kernel
answers them in a loop until the cell ends, then is free for the next cell. Whatever the
student's code does to that socket (closes it, sends a huge frame, removes the handler) costs
at most the request it spoils: the grader goes on with shell messages, as before the channel.
"""

from __future__ import annotations

from time import monotonic

import numpy as np
import pytest
from jupyter_client.manager import start_new_kernel

from instructor import oracle

SETUP = """
import course.oracle, numpy as np
course.oracle.listen()
def double(x):
    return 2 * x
def endless():
    while True:
        pass
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
