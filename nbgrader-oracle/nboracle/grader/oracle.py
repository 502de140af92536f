"""The grader-side oracle: graded test cells run in the grader's process, never in the kernel.

:class:`OracleExecute` is the Execute step of ``nbgrader autograde`` (see
``nbgrader_config.py``). For a chapter graded under the oracle it walks the notebook as
nbgrader's Execute does, but

* a **graded test cell** is not sent to the kernel: its source, read from the gradebook
  (never from the submission), is executed here, in a namespace of the grader's own;
* a **locked provided cell** (the imports, instructor helpers) runs in the kernel as
  always and, again from the gradebook's source, here too, so the tests' ``np``, ``torch``,
  checks and helpers are the grader's own objects. A locked cell whose first line is
  ``# kernel only`` (training, heavy work) stays in the kernel;
* every other cell (the student's, the unlocked demo cells) runs in the sandboxed kernel.

A name a test reads that the grader's namespace does not define (``softmax``,
``MultiHeadSelfAttention``, ``HAND_WEIGHTS``) is looked up in the kernel: data comes back
as data, anything else as a :class:`Proxy`, whose calls, attribute and item reads are
requests to the kernel (``nboracle.kernel.server.serve``): on a Unix socket the kernel answers in a
loop while a grader cell runs (:class:`_Channel`), else as messages on the kernel's shell
channel. Arguments travel by value; answers are decoded strictly by ``nboracle.kernel.wire.decode``.

A test cell's printed text and its error (``ename: evalue``, no source lines) are written
into the cell as nbformat outputs, so nbgrader scores it, and builds feedback, as before.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dis
import inspect
import io
import json
import os
import secrets
import select
import shutil
import socket
import sys
import tempfile
from queue import Empty
from time import monotonic
from typing import Any

from nbclient.util import run_hook, run_sync
from traitlets import Integer, List, Unicode

from ..kernel import fresh as fresh_module
from ..kernel import probes, server, wire
from . import memory
from .kernel_client import KernelError, rejected
from .nbgrader_ext import DEMO_ONLY, GuardedExecute

ORACLE_KEY = "course-oracle"
KERNEL_ONLY = "# kernel only"
_SERVE = "__import__('nboracle.kernel.server', fromlist=['serve']).serve({!r})"
_LISTEN = "__import__('nboracle.kernel.server', fromlist=['listen']).listen()"
# exceptions of the student's code keep their name and, for these, their built-in class
_BUILTIN_ERRORS = {name: getattr(builtins, name) for name in (
    "ValueError", "TypeError", "IndexError", "KeyError", "RuntimeError", "NotImplementedError",
    "AttributeError", "ZeroDivisionError", "AssertionError", "ArithmeticError", "LookupError",
    "OverflowError", "NameError", "UnboundLocalError", "RecursionError", "FloatingPointError")}
_TRUSTED_CLASS_MODULES = ("torch", "numpy")

RAISED_AT = "{evalue} (raised at {line})"  # a kernel error with the line of the student's code that raised it
# ... and what to do about it, for an error the test did not catch and explain itself (a library's words alone)
RAISED_ADVICE = ("your code raised this error on the test's own inputs: call it above on inputs of other shapes "
                 "and sizes until that line fails, and fix it there")


class OracleTimeout(KernelError):
    """The kernel did not answer before the test cell's time ran out."""


_error_classes: dict[str, type] = {}


def kernel_error(name: str, text: str, line: str = "") -> KernelError:
    """The student's exception as the grader raises it; ``line`` (``student_line``): where in a notebook cell it
    was raised, as the kernel reports it (``Cell In[5], line 7: ...``), or ``""``."""
    if not (type(name) is str and name.isidentifier() and len(name) < 80):
        name = "KernelError"
    if name not in _error_classes:
        bases = (KernelError, _BUILTIN_ERRORS[name]) if name in _BUILTIN_ERRORS else (KernelError,)
        _error_classes[name] = type(name, bases, {"__module__": "kernel"})
    error = _error_classes[name](text)
    error.student_line = " ".join(line.split())[:300] if type(line) is str else ""
    return error


# ---------------------------------------------------------------- talking to the kernel


class KernelLink:
    """Requests to ``nboracle.kernel.server.serve`` in the kernel of an Execute preprocessor."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.deadline = monotonic() + 3600
        self.round_trips = 0
        self.waited = 0.0  # seconds spent waiting for the kernel's answers
        # after a first execute request that calls nboracle.kernel.server.listen(), requests are messages
        # of their own on the shell channel (no cell machinery: about half the latency)
        self.listening: bool | None = None
        # the socket channel (nboracle.kernel.server.SERVE): a Unix socket the kernel connects to, on which
        # it answers a test cell's requests in a loop; a round trip costs a tenth of a shell message
        self._channel = _Channel(executor)
        # the tests' objects handed to the student's code (nboracle.fresh), by the id of
        # their stand-in in the kernel, until the test cell ends
        self.instructor: dict[int, Any] = {}
        self._instructor_ids = _opaque_ids()
        # what the probes that evaluate the student's code at points of the grader's choosing (the
        # finite-difference points of a gradient check) got back during the test cell, for the test to
        # judge as well (nboracle.probed_points)
        self.probed: list = []
        self.memory = memory.MemoryCap(0)  # the grader's memory while a test runs (OracleExecute sets it)

    def request(self, message: dict, generators: list = ()) -> Any:
        """The kernel's answer to ``message``; ``generators`` (sent by state) take the states it reports."""
        from jupyter_core.utils import run_sync

        started = monotonic()
        request_id = secrets.token_hex(8)  # the reply must echo it: a stale or forged frame is not this answer
        message = {**message, "id": request_id}
        mode = server.grad_mode()  # the test's autograd mode (torch.no_grad(), inference_mode()): the kernel's call's too
        request = json.dumps(message if mode is None else {**message, "mode": mode}, separators=(",", ":"))
        on_socket = False
        try:
            if self._channel.serve(self.deadline):
                self.round_trips += 1
                on_socket = True
                text = self._channel.ask(request, self)
            else:
                text = run_sync(self._request)(request)
        finally:
            self.waited += monotonic() - started
        self.memory.spend(len(text))  # the answers to one test cell, counted before they are parsed
        reply = wire.loads(text)  # bounded before it is parsed: length, then the number of values
        keys = set(reply) - {"out", "id"} if type(reply) is dict else None
        if keys is None or not (keys == {"error"} or keys in ({"ok"}, {"ok", "rng"})):
            raise wire.WireError("the kernel's answer is not in the oracle's format")
        if reply.get("id") != request_id:
            if on_socket:  # the frames are out of step with the requests: shell messages from now on
                self._channel._give_up("an answer to another request")
            raise wire.WireError("the kernel's answer is not the answer to this request (its id is not the one sent)")
        printed = reply.pop("out", "")
        if type(printed) is not str:
            raise wire.WireError("the kernel's printed text is not text")
        if printed:  # what the student's code printed: into the test cell's output, as in the kernel
            sys.stdout.write(printed[:wire.MAX_PRINTED + 100])
        if "error" in reply:
            error = reply["error"]
            if type(error) is not list or len(error) not in (2, 3) or not all(type(e) is str for e in error):
                raise wire.WireError("the kernel's error report is not in the oracle's format")
            raise kernel_error(error[0], error[1][:4000], error[2] if len(error) == 3 else "")
        if "ok" not in reply:
            raise wire.WireError("the kernel's answer is not in the oracle's format")
        value = wire.decode_tree(reply["ok"], self.proxy)
        if generators or "rng" in reply:
            _load_states(generators, reply.get("rng"))
        return value

    async def _request(self, request: str) -> Any:
        if self.listening is None:
            # GuardedExecute started the kernel's handler (install(): listen()) before any student code ran;
            # asking the kernel to listen() now would run whatever the student made of listen()
            self.listening = True
        return await self._ask(request, None)

    async def _listen_again(self) -> None:
        """The handler did not answer (a kernel started without it): start it once, else execute requests."""
        self.listening = False
        if getattr(self, "_listened_again", False):
            return
        self._listened_again = True
        try:
            self.listening = await self._ask(None, _LISTEN) == server.LISTENING
        except (KernelError, wire.WireError):  # nboracle.kernel.server.listen is gone: execute requests it is
            self.listening = False

    async def _ask(self, request: str | None, expression: str | None) -> Any:
        """One round trip: ``request`` to serve(), or ``expression`` evaluated; the answer's text."""
        from nbclient.util import ensure_async

        ex = self.executor
        self.round_trips += 1
        fast = request is not None and self.listening
        if fast:
            message = ex.kc.session.msg(server.REQUEST, {"request": request})
            ex.kc.shell_channel.send(message)
            msg_id = message["header"]["msg_id"]
        else:
            expression = expression or _SERVE.format(request)
            msg_id = ex.kc.execute("", silent=True, store_history=False, stop_on_error=False,
                                   user_expressions={ORACLE_KEY: expression})
        patience = _Patience(self)
        while True:
            remaining = patience.remaining()
            if remaining is None:
                await ensure_async(ex.km.interrupt_kernel())
                continue
            try:
                msg = await ensure_async(ex.kc.shell_channel.get_msg(timeout=min(remaining, 1.0)))
            except Empty:
                if not await ensure_async(ex.km.is_alive()):
                    raise KernelError("the kernel died while running the student's code") from None
                if fast and await self._ignored(msg_id):  # the kernel's handler is gone
                    await self._listen_again()
                    return await self._ask(request, None)
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            patience.answered()
            oversized = msg.get("content", {}).get("oversized")
            if oversized is not None:  # nboracle.grader.kernel_client did not parse it: over MAX_SHELL_BYTES
                raise wire.WireError(f"the kernel's answer ({oversized} bytes) is over the grader's limit of "
                                     f"{wire.MAX_TEXT // 2 ** 20} MiB")
            if fast:
                text = msg.get("content", {}).get("answer") if msg.get("msg_type") == server.REPLY else None
                if type(text) is not str or len(text) > wire.MAX_TEXT:
                    raise wire.WireError("the kernel's answer is not text")
                return text
            try:
                value = msg["content"]["user_expressions"][ORACLE_KEY]
            except (KeyError, TypeError):
                raise wire.WireError("the kernel's reply carries no answer") from None
            if type(value) is not dict or value.get("status") != "ok":
                name = value.get("ename", "KernelError") if type(value) is dict else "KernelError"
                text = value.get("evalue", "") if type(value) is dict else ""
                raise kernel_error(str(name), str(text))
            try:
                literal = value["data"]["text/plain"]
                text = ast.literal_eval(literal) if type(literal) is str and len(literal) <= wire.MAX_TEXT else None
            except (KeyError, TypeError, ValueError, SyntaxError, MemoryError, RecursionError):
                text = None
            if type(text) is not str:
                raise wire.WireError("the kernel's answer is not text")
            return text

    async def _ignored(self, msg_id: str) -> bool:
        return await _went_idle(self.executor, msg_id)

    def proxy(self, entry: dict) -> Proxy:
        return make_proxy(self, entry)

    def offer(self, obj: Any, only: Any = None) -> dict:
        """The wire entry of an instructor object ``obj`` that stays here: the kernel's stand-in
        asks for it (:meth:`answer_instructor`) until the test cell ends. The entry is an id drawn
        at random and whether the object is callable: no name, no type, nothing of the object.
        ``only`` limits what the stand-in may do (:func:`nboracle.fresh`): a function's stand-in
        may only be called."""
        key = next(self._instructor_ids)
        while key in self.instructor:
            key = next(self._instructor_ids)
        if only is None and inspect.isroutine(obj):
            only = {"__call__": None}
        self.instructor[key] = (obj, only)
        return {"t": "cb", "id": key, "callable": callable(obj)}

    def _offer_part(self, value: Any, only: Any = None) -> dict:
        """What a stand-in's answer may hand over besides data: a module (a part of the tests'
        object, or the object itself) or a method of one; never a Python module, a class, a
        function of the grader's or anything else that would open more of the grader."""
        torch = sys.modules.get("torch")
        owner = getattr(value, "__self__", None) if inspect.ismethod(value) else value
        if torch is None or not isinstance(owner, torch.nn.Module):
            raise wire.WireError(f"a {type(value).__name__} of the tests' object cannot be handed to the "
                                 "student's code (only data, its submodules and their methods)")
        return self.offer(value, only)

    def answer_instructor(self, frame: bytes) -> str:
        """The answer to a stand-in's request (``{"cb": id, "op": ..., "name", "args", "kwargs", "mode"}``):
        the grader's copy of the object does the work on data; the answer is data, or a stand-in
        for a part of the object (a submodule, a method)."""
        try:
            self.memory.spend(len(frame))  # a stand-in's arguments count with the cell's answers
            request = wire.loads(frame.decode("utf-8"))
            if type(request) is not dict or not set(request) <= {"cb", "op", "name", "args", "kwargs", "mode"}:
                raise wire.WireError("a malformed request for an instructor object")
            target, only = self.instructor.get(request["cb"], (None, None)) if type(request["cb"]) is int else (None, None)
            if target is None:
                raise LookupError("this object of the tests belongs to a test cell that has ended")
            args = wire.decode_tree({"t": "list", "v": request.get("args", [])})
            kwargs = wire.decode_tree({"t": "dict", "v": [[k, v] for k, v in request.get("kwargs", {}).items()]})
            op, name = request.get("op"), request.get("name")
            if op == "getattr" and not (type(name) is str and name.isidentifier() and not name.startswith("_")
                                        and name not in _CLOSED_METHODS):
                raise AttributeError(f"{name!r}: only public attributes of the tests' objects can be read")
            operations = {"call": lambda: target(*args, **kwargs), "getattr": lambda: getattr(target, name),
                          "getitem": lambda: target[args[0]], "len": lambda: len(target),
                          "list": lambda: list(target)}
            if op not in operations:
                raise wire.WireError(f"unknown request {op!r} for an instructor object")
            part = None  # what a part handed over may do: the test's limit for it, if the object has one
            if only is not None:
                allowed = "__call__" if op == "call" else name if op == "getattr" else None
                if allowed not in only:
                    what = {"call": "called", "getattr": f"asked for {name!r}"}.get(op, "used that way")
                    refusal = AttributeError if op == "getattr" else TypeError  # (hasattr() reads it as absent)
                    raise refusal(f"this object of the tests cannot be {what} here: the test hands your code "
                                  f"only {_allowed_uses(only)}")
                part = only[allowed] if op == "getattr" else only
            value = server._in_mode(request.get("mode"), operations[op])
            offer = self._offer_part if part is None else lambda v: self._offer_part(v, part)
            if inspect.isgenerator(value):  # block.parameters(), named_children(): listed, in one answer
                reply = {"ok": {"t": "iter", "v": [wire.encode(item, offer, 1) for item in value]}}
            else:
                reply = {"ok": wire.encode(value, offer)}
        except Exception as error:  # the instructor's code refused the student's arguments, say: reported
            reply = {"error": [type(error).__name__, str(error)[:2000]]}
        return '{"cbr":' + json.dumps(reply, separators=(",", ":")) + "}"

    def pause(self) -> None:
        """The grader's cell is done: the kernel leaves its socket loop, free for the next cell."""
        self.instructor.clear()
        self.probed.clear()
        self._channel.pause(self.deadline)

    def close(self) -> None:
        self._channel.close()

    def name(self, name: str) -> Any:
        return self.request({"op": "name", "name": name})


class _Patience:
    """Waiting for one answer of the kernel: past the test's deadline the kernel is interrupted
    once and given 10 s more to answer; an answer that comes after the interrupt does not count."""

    def __init__(self, link: KernelLink) -> None:
        self.link, self.interrupted = link, False

    def remaining(self) -> float | None:
        """Seconds left to wait, or ``None``: interrupt the kernel now (it then has 10 s more)."""
        left = self.link.deadline - monotonic()
        if left > 0:
            return left
        if self.interrupted:
            raise OracleTimeout(f"the kernel did not answer within {self.link.executor.timeout} s of this test "
                                "(an infinite loop?) and was interrupted")
        self.interrupted = True
        self.link.deadline = monotonic() + 10
        return None

    def answered(self) -> None:
        """The answer arrived: an error if it came only after the interrupt."""
        if self.interrupted:
            raise OracleTimeout(f"the student's code ran longer than {self.link.executor.timeout} s in this test "
                                "(an infinite loop?) and was interrupted")


def _now(value: Any) -> Any:
    """The result of a kernel manager's call: awaited for nbclient's async manager, as is for a blocking one."""
    if inspect.isawaitable(value):
        async def wait() -> Any:
            return await value

        return run_sync(wait)()
    return value


async def _went_idle(executor: Any, msg_id: str) -> bool:
    """True when the kernel went idle after request ``msg_id`` (so far unanswered: it has no handler)."""
    from nbclient.util import ensure_async

    while True:
        try:
            msg = await ensure_async(executor.kc.iopub_channel.get_msg(timeout=0))
        except Empty:
            return False
        if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "status"
                and msg.get("content", {}).get("execution_state") == "idle"):
            return True


class _Channel:
    """The grader's end of the socket channel to one kernel (see ``nboracle.kernel.server.SERVE``).

    At a grader cell's first request the kernel is sent SERVE on its shell channel and answers
    frames on the socket until the cell ends (:meth:`pause`). The socket lives in the sandbox's
    private ipc folder (bound into the sandbox at the same path), or in a private temporary
    folder for a kernel without the sandbox. Anything unexpected (no handler, a connection
    that closes, a kernel that cannot connect) turns the channel off for good: requests then
    go as shell messages, as before. What arrives is checked exactly as a shell answer is.
    """

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.sock: socket.socket | None = None
        self.listener: socket.socket | None = None
        self.folder: str | None = None  # a temporary folder of ours, removed at close()
        # COURSE_ORACLE_CHANNEL=shell: shell messages only (to compare, or where sockets misbehave)
        self.off = (os.environ.get("COURSE_ORACLE_CHANNEL", "socket").strip().lower() == "shell"
                    or not hasattr(socket, "AF_UNIX"))
        self.serving: str | None = None  # msg_id of the SERVE message being answered

    def serve(self, deadline: float) -> bool:
        """True when the kernel is answering on the socket (starting its loop if needed)."""
        if self.off:
            return False
        if self.serving:
            return True
        try:
            return run_sync(self._start)(deadline)
        except (OSError, KernelError, wire.WireError, ValueError) as error:
            self._give_up(error)
            return False

    async def _start(self, deadline: float) -> bool:
        from nbclient.util import ensure_async

        ex = self.executor
        if self.sock is None and self.listener is None:
            self.listener, path = self._listen()
        else:
            path = ""
        message = ex.kc.session.msg(server.SERVE, {"path": path})
        ex.kc.shell_channel.send(message)
        self.serving = message["header"]["msg_id"]
        while self.sock is None:
            ready, _, _ = select.select([self.listener], [], [], 0.02)
            if ready:
                self.sock, _ = self.listener.accept()
                self.listener.close()
                self.listener = None
                break
            try:
                msg = await ensure_async(ex.kc.shell_channel.get_msg(timeout=0))
            except Empty:
                msg = None
            if msg is not None and msg.get("parent_header", {}).get("msg_id") == self.serving:
                raise KernelError("the kernel did not connect to the oracle's socket")
            if monotonic() > deadline or not await ensure_async(ex.km.is_alive()):
                raise KernelError("the kernel did not connect to the oracle's socket in time")
            if await _went_idle(ex, self.serving):  # no handler for SERVE in this kernel
                raise KernelError("the kernel has no socket handler")
        return True

    def _listen(self) -> tuple[socket.socket, str]:
        km = self.executor.km
        if getattr(km, "transport", "") == "ipc" and getattr(km, "sandboxed", False):
            folder = os.path.dirname(km.ip)  # the sandbox's ipc folder, the same path inside
        else:
            folder = self.folder = tempfile.mkdtemp(prefix="course-oracle-")
        path = os.path.join(folder, "oracle")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        return listener, path

    def ask(self, request: str, link: KernelLink) -> str:
        """One round trip on the socket: the answer's text (timeouts and interrupts as for shell requests).

        While the student's call runs, the kernel's stand-ins for the tests' objects ask for
        them here (frames that start with ``{"cb":``): each is answered by ``link`` before the
        wait for the answer goes on."""
        ex, sock = self.executor, self.sock
        try:
            wire.write_frame(sock, request.encode())
            patience = _Patience(link)
            while True:
                remaining = patience.remaining()
                if remaining is None:
                    _now(ex.km.interrupt_kernel())
                    continue
                ready, _, _ = select.select([sock], [], [], min(remaining, 1.0))
                if not ready:
                    if not _now(ex.km.is_alive()):
                        raise KernelError("the kernel died while running the student's code")
                    continue
                sock.settimeout(max(link.deadline - monotonic(), 1.0))  # a frame that stops half-way
                try:
                    frame = wire.read_frame(sock, wire.MAX_TEXT)
                finally:
                    sock.settimeout(None)
                if frame is None or not frame.startswith(_INSTRUCTOR_REQUEST):
                    break
                wire.write_frame(sock, link.answer_instructor(frame).encode())
        except (OSError, wire.WireError) as error:
            self._give_up(error)
            if isinstance(error, wire.WireError):
                raise
            raise KernelError(f"the kernel's oracle channel failed ({type(error).__name__})") from None
        except BaseException as error:
            self._give_up(error)
            raise
        if frame is None:
            self._give_up("the kernel closed the socket")
            if not _now(ex.km.is_alive()):
                raise KernelError("the kernel died while running the student's code")
            raise wire.WireError("the kernel closed the oracle's socket")
        patience.answered()
        try:
            return frame.decode("utf-8")
        except UnicodeDecodeError:
            raise wire.WireError("the kernel's answer is not text") from None

    def pause(self, deadline: float) -> None:
        """End the kernel's loop for this cell and wait (briefly) until it says so."""
        if not self.serving:
            return
        serving, self.serving = self.serving, None
        try:
            wire.write_frame(self.sock, server.END)
            run_sync(self._served)(serving, max(deadline - monotonic(), 2.0))
        except (OSError, KernelError, ValueError) as error:
            self._give_up(error)

    async def _served(self, msg_id: str, seconds: float) -> None:
        from nbclient.util import ensure_async

        ex, end = self.executor, monotonic() + seconds
        while True:
            remaining = end - monotonic()
            if remaining <= 0:
                raise KernelError("the kernel did not leave the oracle's socket loop")
            try:
                msg = await ensure_async(ex.kc.shell_channel.get_msg(timeout=min(remaining, 1.0)))
            except Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                if msg.get("content", {}).get("status") != "done":
                    raise KernelError("the kernel's socket loop failed")
                return

    def _give_up(self, reason: Any) -> None:
        """From now on requests go as shell messages (the kernel's loop, if any, sees the socket close)."""
        log = getattr(self.executor, "log", None)
        if log is not None and not self.off:
            log.debug("oracle: the socket channel is off (%s); requests go as shell messages", reason)
        self.off = True
        self.serving = None
        self.close()

    def close(self) -> None:
        for sock in (self.sock, self.listener):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        self.sock = self.listener = None
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


# numpy's PCG64 (np.random.default_rng): a 128-bit LCG, state -> state * MULTIPLIER + inc
_PCG64_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645
_MASK_128 = (1 << 128) - 1
# every state of a stream is some number of steps ahead of any other: a call is believed to have
# drawn at most this many numbers (at a nanosecond a draw, 18 minutes: more than any test's time),
# so whatever the grader accepts is a state the student's code could have reached by drawing
_MAX_STEPS = 1 << 40
_KEPT_SEARCH = 4096  # draws back the grader looks for the 32 bits a 32-bit draw kept (then refuses)


def _pcg64_distance(start: int, end: int, inc: int) -> int | None:
    """How many steps of the LCG lead from ``start`` to ``end`` (at most 128 rounds), None if none do.

    Bit by bit from the lowest: the low ``k`` bits of the state after ``n`` steps depend on the
    low ``k`` bits of ``n`` only, so each bit of the distance is decided in turn (PCG's
    ``distance``); with an odd increment and this multiplier every state is reachable.
    """
    multiplier, plus, bit, distance, state = _PCG64_MULTIPLIER, inc, 1, 0, start
    while state != end:
        if bit > _MASK_128:
            return None
        if (state & bit) != (end & bit):
            state = (state * multiplier + plus) & _MASK_128
            distance |= bit
        if (state & bit) != (end & bit):
            return None
        bit <<= 1
        plus = ((multiplier + 1) * plus) & _MASK_128
        multiplier = (multiplier * multiplier) & _MASK_128
    return distance


def _moved_on(generator: Any, reported: Any) -> dict:
    """The state ``generator`` is in after the draws the kernel reports, **computed by the grader**.

    The kernel's report is never loaded: it only says how far the generator moved. The grader
    finds the number of steps from its own state to the reported one (``_pcg64_distance``),
    advances a copy of its own bit generator that far itself and accepts only if that copy's
    state is exactly the one reported (the 32 bits a 32-bit draw keeps for the next one
    included: they must be the high half of one of the grader's own last draws, or the ones it kept).
    """
    import numpy as np

    own = generator.bit_generator.state
    if type(reported) is not dict or set(reported) != {"bit_generator", "state", "has_uint32", "uinteger"} \
            or reported["bit_generator"] != own["bit_generator"] or type(reported["state"]) is not dict \
            or set(reported["state"]) != {"state", "inc"} \
            or any(type(v) is not int for v in (*reported["state"].values(), reported["has_uint32"], reported["uinteger"])):
        raise wire.WireError("a generator's state from the kernel is not valid: not the state of the generator sent")
    if reported["state"]["inc"] != own["state"]["inc"]:
        raise wire.WireError("a generator's state from the kernel is not valid: another generator's stream")
    steps = _pcg64_distance(own["state"]["state"], reported["state"]["state"], own["state"]["inc"])
    if steps is None or steps > _MAX_STEPS:  # every state of the stream is *some* distance ahead: only near ones count
        raise wire.WireError("a generator's state from the kernel is not valid: the grader's generator does not reach it "
                             f"within {_MAX_STEPS:.1e} draws")
    copy = np.random.PCG64()
    copy.state = own
    copy.advance(steps)
    computed = {**copy.state, "has_uint32": 0, "uinteger": own["uinteger"]}
    if reported["has_uint32"] == 1:  # 32 bits kept for the next 32-bit draw: a half of one of the grader's own draws
        kept = [own["uinteger"]] if own["has_uint32"] else []
        for back in range(1, min(steps, _KEPT_SEARCH) + 1):  # the high half of one of the last draws
            copy.state = own
            copy.advance(steps - back)
            kept.append(int(copy.random_raw()) >> 32)
            if kept[-1] == reported["uinteger"]:
                break
        if reported["uinteger"] in kept:
            computed.update(has_uint32=1, uinteger=kept[kept.index(reported["uinteger"])])
    if computed["state"] != reported["state"] or computed["has_uint32"] != reported["has_uint32"]:
        raise wire.WireError("a generator's state from the kernel is not valid: the grader's own draws do not reproduce it")
    return computed


def _load_states(generators: list, states: Any) -> None:
    """Move the grader's generators on as far as the kernel's call moved its copies (see :func:`_moved_on`)."""
    if type(states) is not list or len(states) != len(generators):
        raise wire.WireError("the kernel's answer does not report where the generators it was given stand")
    computed = [_moved_on(g, wire.decode(json.dumps(state))) for g, state in zip(generators, states, strict=True)]
    for generator, state in zip(generators, computed, strict=True):  # all checked before any is moved
        generator.bit_generator.state = state


def _send(value: Any, generators: list | None = None, link: KernelLink | None = None) -> Any:
    """An argument for the kernel: by value, or a handle to one of the kernel's own objects.

    A NumPy generator travels by its state and is appended to ``generators``, to take the
    state the call leaves it in. An instructor object (:func:`nboracle.fresh`) stays
    here: ``link`` serves a copy of it, and the kernel gets a stand-in.
    """
    if isinstance(value, Proxy):
        return {"t": "h", "id": object.__getattribute__(value, "_oracle_id")}
    if isinstance(value, fresh_module.Fresh):
        if link is None:
            raise wire.WireError("an instructor object can only be an argument of a call")
        return link.offer(value.copy_to_send(), value.only)
    if type(value).__name__ == "Generator" and type(value).__module__.startswith("torch"):
        return fresh_module.generator_entry(value)  # by value: its state
    if type(value) in (tuple, list):
        return {"t": "tuple" if type(value) is tuple else "list", "v": [_send(v, generators, link) for v in value]}
    if type(value) is dict:
        return {"t": "dict", "v": [[_send(k, generators, link), _send(v, generators, link)] for k, v in value.items()]}
    entry = wire.encode(value)
    if type(entry) is dict and entry.get("t") == "rng":
        if generators is None:
            raise wire.WireError("a generator can only be an argument of a call")
        if type(value.bit_generator).__name__ != "PCG64" or type(value.bit_generator).__module__.split(".")[0] != "numpy":
            raise wire.WireError(f"a generator on {type(value.bit_generator).__name__} cannot be sent to the kernel: "
                                 "use np.random.default_rng(seed) (PCG64), whose moves the grader can check")
        generators.append(value)
    return entry


def _opaque_ids():
    """Ids of instructor objects: drawn at random, so an id says nothing of the object or the test."""
    import secrets

    while True:
        yield secrets.randbelow(2 ** 53) + 1


def _allowed_uses(only: dict) -> str:
    """``only`` in words: 'a call and its attributes qkv, proj'."""
    names = sorted(n for n in only if n != "__call__")
    words = (["a call"] if "__call__" in only else []) + ([f"the attributes {', '.join(names)}"] if names else [])
    return " and ".join(words) or "nothing"


# probes that evaluate a student's module or function at points of the grader's choosing (the second
# argument: parameter settings, or input sets), whose outputs the test may judge (nboracle.probed_points)
_POINT_PROBES = ("outputs_at", "function_at")
# a stand-in's request (nboracle.kernel.server.Instructor), as the kernel writes it
_INSTRUCTOR_REQUEST = b'{"cb":'
# methods of a tests' module a stand-in may not call: Module.type("a.dotted.Name") imports by name
_CLOSED_METHODS = {"type"}


# ---------------------------------------------------------------- proxies


# the kernel side's own code (the probes, fresh objects) may use a proxy as a test does
_KERNEL_FILES = tuple(os.path.abspath(m.__file__) for m in (wire, probes, fresh_module, server))
# the code of helpers that only call the function a test hands them (c.OracleExecute.calling_helpers,
# e.g. a course's ``attempt(what, function, ...)``): such a call is the test's own
_CALLING_CODES: set = set()
# the files of modules that hold a course's test code (c.OracleExecute.test_modules): their functions,
# called by a test cell with the student's objects, may use a proxy as the test cell's own lines do
_TEST_FILES: set = set()


def _helper_code(spec: str) -> Any:
    """The code object of ``"package.module:function"``."""
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name).__code__


def _test_module_files(name: str) -> set[str]:
    """The file of the test module ``name`` (as its code names it, and absolute), imported now, before any
    student's test cell runs."""
    import importlib

    module = importlib.import_module(name)
    return {code.co_filename for code in _module_codes(module)} | {os.path.abspath(module.__file__)}


def _module_codes(module: Any) -> list:
    """The code objects of ``module``'s functions and of its classes' methods."""
    codes = []
    for value in vars(module).values():
        for item in [value, *(vars(value).values() if isinstance(value, type) else ())]:
            if inspect.isfunction(item) and item.__module__ == module.__name__:
                codes.append(item.__code__)
    return codes


def _asked_by_a_test() -> bool:
    """True when the code using a proxy is a test cell's (or a provided cell's, or a probe's).

    The grader's libraries (numpy, torch, the course checks) must never read a kernel object
    through its methods: ``np.argsort(obj)`` would ask the student's object for its own
    ``argsort``, and a duck type could answer each check with what that check wants. To them
    a proxy is an opaque object with no attributes; only the source of the test itself may
    call it or read its attributes.
    """
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is not None and frame.f_code in _CALLING_CODES:  # attempt(what, function, ...) calls what the test gave it
        frame = frame.f_back
    filename = frame.f_code.co_filename if frame is not None else ""
    return filename.startswith(("<test ", "<provided ")) or filename in _KERNEL_FILES or filename in _TEST_FILES


class Proxy:
    """A kernel object seen from the grader: every use is a request, every answer data."""

    __slots__ = ("_oracle_link", "_oracle_id", "_oracle_types", "_oracle_callable")
    _oracle_proxy = True

    def _oracle(self, op: str, *args: Any, **fields: Any) -> Any:
        if not _asked_by_a_test():
            raise AttributeError(f"a {type(self).__name__} from the kernel is not an array or tensor "
                                 "(the grader's checks only read data)")
        link = object.__getattribute__(self, "_oracle_link")
        message = {"op": op, "h": object.__getattribute__(self, "_oracle_id"), **fields}
        if args:
            message["args"] = [_send(a, None, link) for a in args]
        return link.request(message)

    def __getattr__(self, name: str) -> Any:
        if name in ("__name__", "__qualname__"):  # a kernel class's or function's name, for messages
            link = object.__getattribute__(self, "_oracle_link")
            value = link.request({"op": "getattr", "h": object.__getattribute__(self, "_oracle_id"), "name": name})
            if type(value) is not str:
                raise AttributeError(name)
            return value
        if name.startswith("__") or name.startswith("_oracle"):
            raise AttributeError(name)
        if _method_call(sys._getframe(1)) and _asked_by_a_test():
            return _MethodCall(self, name)  # obj.name(...): getattr and call in one request
        return Proxy._oracle(self, "getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in Proxy.__slots__:
            object.__setattr__(self, name, value)
        else:
            Proxy._oracle(self, "setattr", value, name=name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _asked_by_a_test():
            raise TypeError(f"a {type(self).__name__} from the kernel is not an array or tensor "
                            "(the grader's checks only read data)")
        link = object.__getattribute__(self, "_oracle_link")
        generators: list = []
        return link.request({"op": "call", "h": object.__getattribute__(self, "_oracle_id"),
                             "args": [_send(a, generators, link) for a in args],
                             "kwargs": {str(k): _send(v, generators, link) for k, v in kwargs.items()}}, generators)

    def __getitem__(self, key: Any) -> Any:
        return Proxy._oracle(self, "getitem", key)

    def __iter__(self):
        return iter(Proxy._oracle(self, "list"))

    def __len__(self) -> int:
        value = Proxy._oracle(self, "len")
        if type(value) is not int or value < 0:
            raise TypeError("the kernel's len() is not a non-negative integer")
        return value

    def __bool__(self) -> bool:
        return True

    def __instancecheck__(self, instance: Any) -> bool:
        """``isinstance(obj, FeedForward)`` with a class of the student's: the kernel's answer, a bool.

        An object of the grader's is never an instance of a kernel class; a kernel object is
        one when the kernel says so (the student's own classes decide that anyway).
        """
        if not issubclass(type(instance), Proxy):
            return False
        answer = Proxy._oracle_probe(instance, "isinstance", instance, self)
        if type(answer) is not bool:
            raise wire.WireError("the kernel's isinstance() is not a bool")
        return answer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} in the kernel>"

    __str__ = __repr__

    @property
    def __class__(self):
        """The genuine torch/numpy class the kernel object derives from (for ``isinstance``), or the
        grader's copy of a class that the chapter's provided cells define (``FeedForward``)."""
        provided = getattr(object.__getattribute__(self, "_oracle_link"), "provided_classes", {})
        for qualified in object.__getattribute__(self, "_oracle_types"):
            module_name, _, name = qualified.rpartition(".")
            found = provided.get(name) if module_name == "__main__" else _trusted_class(qualified)
            if found is not None:
                return found
        return type(self)

    @staticmethod
    def _oracle_probe(target: Proxy, name: str, *args: Any, **kwargs: Any) -> Any:
        link = object.__getattribute__(target, "_oracle_link")
        value = link.request({"op": "probe", "name": name, "args": [_send(a, None, link) for a in args],
                              "kwargs": {str(k): _send(v, None, link) for k, v in kwargs.items()}})
        if name in _POINT_PROBES and type(value) in (list, tuple) and len(args) > 1 and type(args[1]) in (list, tuple):
            record = getattr(link, "probed", None)
            if record is not None:  # (a link without the record: a test of this package's)
                record.append((object.__getattribute__(target, "_oracle_id"), list(zip(args[1], value, strict=False))))
        return value

    @staticmethod
    def _oracle_probed(target: Proxy) -> list:
        """``(point, output)`` for every point at which a probe evaluated ``target`` in this test cell."""
        key = object.__getattribute__(target, "_oracle_id")
        probed = getattr(object.__getattribute__(target, "_oracle_link"), "probed", [])
        return [pair for owner, pairs in probed if owner == key for pair in pairs]


def _method_call(frame) -> bool:
    """True when ``frame`` is reading an attribute only to call it at once: ``obj.name(...)``.

    The compiler marks that pattern (``LOAD_METHOD``; from Python 3.12 ``LOAD_ATTR`` with its
    low bit set): nothing can see the attribute but the call that follows.
    """
    code, at = frame.f_code.co_code, frame.f_lasti
    if not 0 <= at < len(code) - 1:
        return False
    name = dis.opname[code[at]]
    if name == "LOAD_METHOD":
        return True
    if name == "LOAD_ATTR" and sys.version_info >= (3, 12):
        return (at < 2 or dis.opname[code[at - 2]] != "EXTENDED_ARG") and bool(code[at + 1] & 1)
    return False


class _MethodCall:
    """``proxy.name`` about to be called: the call asks for the attribute and calls it, in one request."""

    __slots__ = ("_target", "_name")

    def __init__(self, target: Proxy, name: str) -> None:
        self._target, self._name = target, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _asked_by_a_test():
            raise TypeError("a method of an object from the kernel is not an array or tensor "
                            "(the grader's checks only read data)")
        target = self._target
        link = object.__getattribute__(target, "_oracle_link")
        return link.request({"op": "call", "h": object.__getattribute__(target, "_oracle_id"), "name": self._name,
                             "args": [_send(a, None, link) for a in args],
                             "kwargs": {str(k): _send(v, None, link) for k, v in kwargs.items()}})


_proxy_classes: dict[str, type] = {}


def make_proxy(link: KernelLink, entry: dict) -> Proxy:
    name = entry["type"][0].rsplit(".", 1)[-1] if entry["type"] else "object"
    if not name.isidentifier():
        name = "KernelObject"
    if name not in _proxy_classes:
        _proxy_classes[name] = type(name, (Proxy,), {"__slots__": (), "__module__": "kernel"})
    proxy = object.__new__(_proxy_classes[name])
    object.__setattr__(proxy, "_oracle_link", link)
    object.__setattr__(proxy, "_oracle_id", entry["id"])
    object.__setattr__(proxy, "_oracle_types", tuple(entry["type"]))
    object.__setattr__(proxy, "_oracle_callable", entry["callable"])
    return proxy


def _trusted_class(qualified: str) -> type | None:
    """``torch.nn.modules.linear.Linear`` -> the grader's class, if torch/numpy is loaded here."""
    module_name, _, qualname = qualified.rpartition(".")
    if not module_name or module_name.split(".")[0] not in _TRUSTED_CLASS_MODULES:
        return None
    module = sys.modules.get(module_name)
    if module is None or "." in qualname:
        return None
    found = vars(module).get(qualname)
    if not isinstance(found, type):
        return None
    import numpy
    import torch

    # a genuine array or tensor always arrives as data: a handle claiming to be one is not
    if issubclass(found, (numpy.ndarray, numpy.generic, torch.Tensor)):
        return None
    return found


# ---------------------------------------------------------------- the grader's namespace


class GraderNamespace(dict):
    """The test cells' globals: the grader's own names, else (and only then) the kernel's."""

    def __init__(self, link: KernelLink) -> None:
        super().__init__(__builtins__=builtins, __name__="__grader__")
        self.link = link
        self.from_kernel: dict[str, Any] = {}

    def __missing__(self, name: str) -> Any:
        if name in builtins.__dict__ or name.startswith("__") or self.link is None:
            raise KeyError(name)
        if name not in self.from_kernel:
            try:
                self.from_kernel[name] = self.link.name(name)
            except NameError:
                raise KeyError(name) from None
        return self.from_kernel[name]


def _remember_source(code: str, filename: str) -> None:
    """Keep a cell's source where ``linecache`` finds it (``inspect.getsource`` on a test's function)."""
    import linecache

    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)


def _run(code: str, filename: str, namespace: dict) -> tuple[str, BaseException | None]:
    _remember_source(code, filename)
    out = io.StringIO()
    error = None
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, filename, "exec"), namespace)
        except Exception as err:  # the test failed: its message is the cell's error
            error = err
    return out.getvalue(), error


def _prefetch(sources) -> None:
    """Import the provided cells' modules (torch: seconds) in a thread while the kernel starts."""
    import importlib
    import threading

    names = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
    missing = [n for n in dict.fromkeys(names) if n not in sys.modules]

    def load() -> None:
        for name in missing:
            try:
                importlib.import_module(name)
            except Exception:  # the provided cell will say so when it runs here
                pass

    if missing:
        threading.Thread(target=load, name="oracle-prefetch", daemon=True).start()


# ---------------------------------------------------------------- the Execute step


class OracleExecute(GuardedExecute):
    """nbgrader's Execute with graded test cells run in the grader (see the module docstring).

    Chapters not graded under the oracle (``oracle_chapters``, ``COURSE_ORACLE``) run as
    with :class:`GuardedExecute`.
    """

    oracle_chapters = List(Unicode(), default_value=[],
                           help="assignments whose test cells run in the grader (with oracle='auto')").tag(config=True)
    oracle = Unicode("on", help="on, off, or auto (oracle_chapters); COURSE_ORACLE overrides").tag(config=True)
    calling_helpers = List(Unicode(), default_value=[],
                           help="'module:function' helpers of the tests that only call the function a test hands "
                                "them (a proxy may be called from there, as from the test)").tag(config=True)
    test_modules = List(Unicode(), default_value=[],
                        help="modules of the course's test code, whose functions a test cell calls with the "
                             "student's objects (their lines may use a proxy, as the test cell's own do); imported "
                             "from the grader's environment before any test runs").tag(config=True)
    grader_memory_mb = Integer(memory.DEFAULT_MB, help="the grading process's memory while a test cell runs in it "
                               "(nboracle.grader.memory; 0: no cap)").tag(config=True)

    def _oracle_wanted(self, assignment: str | None) -> bool:
        setting = os.environ.get("COURSE_ORACLE", self.oracle).strip().lower()
        if setting in ("off", "0", "no", "false"):
            return False
        if setting in ("on", "1", "yes", "true", "all"):
            return True
        return assignment in self.oracle_chapters

    def preprocess(self, nb, resources=None, km=None):
        info = (resources or {}).get("nbgrader", {})
        self._oracle_on = bool(info.get("db_url")) and self._oracle_wanted(info.get("assignment"))
        # the tests run here: a graded cell that, without a gradebook entry, ran in the kernel decides nothing
        self.judge_kernel_test_cells = not self._oracle_on
        if self._oracle_on:
            _CALLING_CODES.update(_helper_code(spec) for spec in self.calling_helpers)
            _TEST_FILES.update(*(_test_module_files(name) for name in self.test_modules))
            self._trusted = self._gradebook_cells(info)
            _prefetch(source for role, source in self._trusted.values() if role == "provided")
            self._link = KernelLink(self)
            self._link.memory = memory.MemoryCap(self.grader_memory_mb, self.log)
            self._namespace = GraderNamespace(self._link)
            self._graded_here = 0.0
        fresh_module._GRADER_SIDE = self._oracle_on  # nboracle.fresh(): instructor callables travel as source
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            fresh_module._GRADER_SIDE = False
            if self._oracle_on:
                self._link.close()
        if self._oracle_on:
            self.log.info("oracle: %d requests to the kernel, %.2f s waiting for them, %.2f s in test cells",
                          self._link.round_trips, self._link.waited, self._graded_here)
        return nb, resources

    @staticmethod
    def _gradebook_cells(info: dict) -> dict[str, tuple[str, str]]:
        """``{grade id: (role, source)}`` of the locked code cells, from the gradebook."""
        from nbgrader.api import Gradebook, MissingEntry

        cells: dict[str, tuple[str, str]] = {}
        with Gradebook(info["db_url"]) as gb:
            try:
                notebook = gb.find_notebook(info["notebook"], info["assignment"])
            except MissingEntry:
                return cells
            graded = {c.name for c in notebook.grade_cells}
            solutions = {c.name for c in notebook.solution_cells}
            for cell in notebook.source_cells:
                if cell.cell_type != "code" or not cell.locked or cell.name in solutions:
                    continue
                cells[cell.name] = ("test" if cell.name in graded else "provided", cell.source or "")
        return cells

    def preprocess_cell(self, cell, resources, index):
        if not self._oracle_on:
            return super().preprocess_cell(cell, resources, index)
        self._ensure_started()  # nboracle.kernel.guard.install() before the first request, whatever cell comes first
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        role, source = self._trusted.get(gid, (None, None)) if cell.cell_type == "code" else (None, None)
        if role == "test":
            # nbclient's cell hooks (the self-check's progress line) see this cell as if the kernel ran it
            run_sync(run_hook)(self.on_cell_start, cell=cell, cell_index=index)
            dropped = rejected(self.kc)
            self._grade_here(cell, gid, source)
            self._note_dropped(cell, index, rejected(self.kc) - dropped)
            run_sync(run_hook)(self.on_cell_complete, cell=cell, cell_index=index)
            return cell, resources
        cell, resources = super().preprocess_cell(cell, resources, index)
        if role == "provided" and not source.lstrip().startswith((KERNEL_ONLY, DEMO_ONLY)):
            self._link.deadline = monotonic() + (self.timeout or 3600)
            self._namespace.from_kernel.clear()
            try:
                printed, error = _run(source, f"<provided {gid}>", self._namespace)
            finally:
                self._link.pause()
            if error is not None:
                self.log.warning("the grader could not run the provided cell %s: %s: %s",
                                 gid, type(error).__name__, error)
            # isinstance(kernel object, FeedForward): the kernel's class of that name is the provided one
            self._link.provided_classes = {name: value for name, value in self._namespace.items()
                                           if isinstance(value, type) and value.__module__ == "__grader__"}
        return cell, resources

    def _grade_here(self, cell, gid: str, source: str) -> None:
        from nbformat.notebooknode import NotebookNode

        started, trips, waited = monotonic(), self._link.round_trips, self._link.waited
        self._link.deadline = started + (self.timeout or 3600)
        self._namespace.from_kernel.clear()
        try:
            with self._link.memory.test_cell(self._namespace):
                printed, error = _run(source, f"<test {gid}>", self._namespace)
        finally:
            self._link.pause()
        error = self._link.memory.explain(error, self._namespace)
        self._graded_here += monotonic() - started
        self.log.debug("oracle: %s took %.2f s, %d requests, %.2f s of them waiting for the kernel", gid,
                       monotonic() - started, self._link.round_trips - trips, self._link.waited - waited)
        outputs = []
        if printed:
            outputs.append(NotebookNode(output_type="stream", name="stdout", text=printed))
        if error is not None:
            ename = type(error).__name__
            evalue = str(error)
            line = getattr(error, "student_line", "") if isinstance(error, KernelError) else ""
            if line and type(line) is str:  # the student's own line that raised (make check's summary shows it)
                evalue = f"{RAISED_AT.format(evalue=evalue, line=line)}: {RAISED_ADVICE}"
            outputs.append(NotebookNode(output_type="error", ename=ename, evalue=evalue,
                                        traceback=[f"{ename}: {evalue}"]))
        cell.outputs = outputs
        cell.execution_count = None
