"""The grader's kernel client: a message from the kernel that does not verify is dropped, and counted.

jupyter_client's channels raise out of ``get_msg`` when a message does not verify
(``ValueError: Invalid Signature``, a duplicate signature, a header that is not JSON). In
nbclient that error ends the whole notebook run, so a student's code that breaks the kernel's
own messaging (patched builtins garble what ipykernel sends) or signs what it likes with the
kernel's key would make a submission fail instead of being graded. The grader's kernels use
:class:`CheckedKernelClient` (:class:`instructor.sandbox.SandboxedKernelManager` makes it):
such a message is dropped, never read, and recorded in ``client.rejected``.
:class:`instructor.nbgrader_ext.GuardedExecute` turns a message dropped during a cell into a
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

MAX_RECORDED = 20  # reasons kept per channel (the count goes on)


class CheckedChannel(AsyncZMQSocketChannel):
    """An async channel whose ``get_msg`` skips (and records) messages that do not verify."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rejected = 0
        self.reasons: list[str] = []

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
                return self.session.deserialize(message)
            except Exception as error:  # noqa: BLE001 - whatever the kernel sent, it is not read
                self.rejected += 1
                if len(self.reasons) < MAX_RECORDED:
                    self.reasons.append(f"{type(error).__name__}: {str(error)[:120]}")


class CheckedKernelClient(AsyncKernelClient):
    """An async kernel client whose four message channels are :class:`CheckedChannel`."""

    shell_channel_class = Type(CheckedChannel)
    iopub_channel_class = Type(CheckedChannel)
    stdin_channel_class = Type(CheckedChannel)
    control_channel_class = Type(CheckedChannel)

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
    return int(getattr(client, "rejected", 0) or 0) if isinstance(client, CheckedKernelClient) else 0
