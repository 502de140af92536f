"""The grader's kernel client: a kernel message that does not verify, or cannot be acted on, is dropped.

Such a message is dropped and counted, never acted on.

jupyter_client's channels raise out of ``get_msg`` when a message does not verify
(``ValueError: Invalid Signature``, a duplicate signature, a header that is not JSON), and
nbclient raises a KeyError on a message that verifies but lacks what it reads (a ``stream``
without ``text``). Either ends the whole notebook run, so a student's code that breaks the
kernel's own messaging (patched builtins garble what ipykernel sends) or signs what it likes
with the kernel's key would make a submission fail instead of being graded. The grader's
kernels use :class:`CheckedKernelClient` (:class:`nboracle.grader.sandbox.SandboxedKernelManager`
makes it): such a message is dropped, never acted on, and counted in ``client.rejected``.
:class:`nboracle.grader.nbgrader_ext.GuardedExecute` turns a message dropped during a cell into a
reason for review (and, where the kernel's outputs decide scores, a failed test cell).

Dropping can only lose what the kernel said: a lost execute reply runs into the cell's
timeout, a lost output is missing from the notebook. No message is ever made up.
"""

from __future__ import annotations

from queue import Empty
from time import monotonic
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import Type

from ..kernel.wire import MAX_TEXT as _MAX_TEXT


class KernelError(Exception):
    """An exception raised by the student's code in the kernel (its name and message only)."""


MAX_RECORDED = 20  # reasons kept per channel (the count goes on)

# What nbclient and nbformat read from each kind of message they act on (jupyter messaging
# spec 5.x); a message without it, signed or not, would stop the notebook run with a KeyError.
_TEXT, _DICT, _FLAG = (str,), (dict,), (bool,)
CONTENT_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "status": {"execution_state": _TEXT},
    "stream": {"name": _TEXT, "text": _TEXT},
    "display_data": {"data": _DICT, "metadata": _DICT},
    "update_display_data": {"data": _DICT, "metadata": _DICT},
    "execute_result": {"data": _DICT, "metadata": _DICT, "execution_count": (int, type(None))},
    "error": {"ename": _TEXT, "evalue": _TEXT, "traceback": (list,)},
    "clear_output": {"wait": _FLAG},
    "execute_input": {"code": _TEXT},
    "execute_reply": {"status": _TEXT},
    "input_request": {"prompt": _TEXT, "password": _FLAG},
}


def unreadable(msg: Any) -> str | None:
    """Why the grader cannot act on a decoded message (None: it can)."""
    if type(msg) is not dict or any(type(msg.get(k)) is not dict
                                    for k in ("header", "parent_header", "metadata", "content")):
        return "a message that is not four JSON objects"
    msg_type = msg.get("msg_type")
    if type(msg_type) is not str or type(msg.get("msg_id")) is not str:
        return "a header without msg_type or msg_id"
    content = msg["content"]
    for key, kinds in CONTENT_FIELDS.get(msg_type, {}).items():
        value = content.get(key)
        if type(value) not in kinds:
            return f"a {msg_type} message without a valid {key!r}"
    if msg_type == "error" and not all(type(line) is str for line in content["traceback"]):
        return "an error message whose traceback is not text"
    if "data" in content and not all(type(k) is str for k in content["data"]):
        return f"a {msg_type} message whose data has keys that are not text"
    return None


# bytes of one shell message, checked before its content is parsed: the oracle's answers (at most
# nboracle.kernel.wire.MAX_TEXT characters, escaped once more as JSON or as a repr) and room for the rest
MAX_SHELL_BYTES = 2 * _MAX_TEXT + 2 ** 20
# the replies that carry an oracle's answer: over the limit, they arrive with their content
# replaced by {"oversized": bytes} (the test that asked fails, saying so); anything else is dropped
_ANSWERS = {"course_oracle_reply": {"answer": None}, "execute_reply": {"status": "error", "user_expressions": {}}}


class CheckedChannel(AsyncZMQSocketChannel):
    """An async channel whose ``get_msg`` skips (and counts) messages that do not verify or cannot be read.

    On the shell channel a message longer than ``max_bytes`` is not parsed: it is verified (its
    signature covers every part) and, for a reply that carries an oracle's answer, handed on with
    its content replaced by ``{"oversized": size}``; any other one is dropped.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rejected = 0
        self.reasons: list[str] = []
        self.max_bytes: int | None = None  # set on the shell channel by CheckedKernelClient

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        assert self.socket is not None
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - monotonic())
            if not await self.socket.poll(None if remaining is None else int(remaining * 1000)):
                raise Empty
            parts = await self.socket.recv_multipart()
            try:
                _, message = self.session.feed_identities(parts)
                size = sum(len(part) for part in message)
                if self.max_bytes is not None and size > self.max_bytes:
                    msg = self.session.deserialize(message, content=False)  # verified, content not parsed
                    stub = _ANSWERS.get(msg.get("msg_type"))
                    if stub is None:
                        raise ValueError(f"a {msg.get('msg_type')} message of {size} bytes, over {self.max_bytes}")
                    msg["content"] = {**stub, "oversized": size}
                else:
                    msg = self.session.deserialize(message)
                reason = unreadable(msg)
            except Exception as error:  # noqa: BLE001 - whatever the kernel sent, it is not read
                reason = f"{type(error).__name__}: {str(error)[:120]}"
            if reason is None:
                return msg
            self.rejected += 1
            if len(self.reasons) < MAX_RECORDED:
                self.reasons.append(reason)


class CheckedKernelClient(AsyncKernelClient):
    """An async kernel client whose four message channels are :class:`CheckedChannel`."""

    shell_channel_class = Type(CheckedChannel)
    iopub_channel_class = Type(CheckedChannel)
    stdin_channel_class = Type(CheckedChannel)
    control_channel_class = Type(CheckedChannel)

    @property
    def shell_channel(self) -> Any:
        channel = super().shell_channel
        if isinstance(channel, CheckedChannel) and channel.max_bytes is None:
            channel.max_bytes = MAX_SHELL_BYTES
        return channel

    def _channels(self) -> list[CheckedChannel]:
        found = (self._shell_channel, self._iopub_channel, self._stdin_channel, self._control_channel)
        return [c for c in found if isinstance(c, CheckedChannel)]

    @property
    def rejected(self) -> int:
        """How many messages from the kernel were dropped so far."""
        return sum(c.rejected for c in self._channels())

    def rejection_reasons(self) -> list[str]:
        return [r for c in self._channels() for r in c.reasons]


def rejected(client: Any) -> int:
    """Messages ``client`` dropped so far (0 for a client that checks nothing)."""
    return client.rejected if isinstance(client, CheckedKernelClient) else 0


def rejection_reasons(client: Any) -> list[str]:
    """Why ``client`` dropped them (the first few per channel; empty for a client that checks nothing)."""
    return client.rejection_reasons() if isinstance(client, CheckedKernelClient) else []
