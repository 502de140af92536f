"""The grader's kernel client (nboracle.grader.kernel_client) against a real kernel.

Every message an honest kernel sends is read as before; a message that does not verify, or
that the grader could not act on, is dropped and counted, and the next one is read as usual.
"""

from __future__ import annotations

import asyncio

import pytest
from nboracle.classroom import pipeline as P
from nboracle.grader.kernel_client import CheckedKernelClient, unreadable
from nboracle.grader.sandbox import SandboxedKernelManager

HONEST = [
    "print('out'); import sys; print('err', file=sys.stderr)",
    "from IPython.display import display, HTML, clear_output\nh = display(HTML('<b>x</b>'), display_id=True)",
    "h.update(HTML('<i>y</i>')); clear_output(wait=True); 6 * 7",
    "1 / 0",
]
FORGED = """
import json
kernel = get_ipython().kernel
parts = [json.dumps(p).encode() for p in ({"msg_id": "f", "msg_type": "stream"}, {}, {}, {"name": "stdout", "text": "f"})]
kernel.iopub_socket.send_multipart([b"stream.stdout", b"<IDS|MSG>", b"0" * 64, *parts])
garbled = [b"not json", *parts[1:]]
kernel.iopub_socket.send_multipart([b"stream.stdout", b"<IDS|MSG>", kernel.session.sign(garbled), *garbled])
kernel.session.send(kernel.iopub_socket, "stream", {"name": "stdout"}, parent=kernel.get_parent())
kernel.session.send(kernel.iopub_socket, "error", {"ename": "E", "evalue": "", "traceback": [1]}, parent=kernel.get_parent())
print("after")
"""


async def execute(kc, code: str, seen: list[dict]) -> dict:
    """``code``'s execute reply, once the kernel went idle; its IOPub messages go to ``seen``."""
    msg_id = kc.execute(code)
    while True:  # the way nbclient reads IOPub: a blocking get_msg
        msg = await kc.iopub_channel.get_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        if msg["msg_type"] != "status":
            seen.append(msg)
    while True:
        reply = await kc.shell_channel.get_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply


def run_cells(cells: list[str]) -> tuple[list[dict], list[dict], int]:
    """Run ``cells`` in a fresh kernel: (replies, IOPub messages seen, messages dropped)."""
    async def session():
        km = SandboxedKernelManager(kernel_name="python3")
        await km.start_kernel()
        kc = km.client()
        assert isinstance(kc, CheckedKernelClient)
        kc.start_channels()
        seen: list[dict] = []
        try:
            await kc.wait_for_ready(timeout=60)
            replies = [await execute(kc, code, seen) for code in cells]
            return replies, seen, kc.rejected
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    with P.environment({"COURSE_SANDBOX": "off"}):
        return asyncio.run(session())


@pytest.fixture(scope="module")
def honest():
    return run_cells(HONEST)


def test_an_honest_kernel_loses_no_message(honest):
    replies, seen, dropped = honest
    assert dropped == 0
    assert [r["content"]["status"] for r in replies] == ["ok", "ok", "ok", "error"]
    kinds = {m["msg_type"] for m in seen}
    assert {"stream", "display_data", "update_display_data", "clear_output", "execute_result", "error"} <= kinds
    assert all(unreadable(m) is None for m in seen)


def test_forged_messages_are_dropped_and_the_next_one_is_read():
    replies, seen, dropped = run_cells([FORGED, "print('next')"])
    assert dropped == 4, "a wrong signature, a signed header that is not JSON, two signed messages nbclient cannot read"
    assert [r["content"]["status"] for r in replies] == ["ok", "ok"]
    printed = "".join(m["content"]["text"] for m in seen if m["msg_type"] == "stream")
    assert printed == "after\nnext\n"


@pytest.mark.parametrize("msg,reason", [
    ({"header": {}, "parent_header": {}, "metadata": {}, "content": [], "msg_type": "stream", "msg_id": "1"},
     "four JSON objects"),
    ({"header": {}, "parent_header": {}, "metadata": {}, "content": {}, "msg_type": 3, "msg_id": "1"}, "msg_type"),
    ({"header": {}, "parent_header": {}, "metadata": {}, "content": {"name": "stdout", "text": 1},
      "msg_type": "stream", "msg_id": "1"}, "'text'"),
    ({"header": {}, "parent_header": {}, "metadata": {}, "content": {"data": {1: "x"}, "metadata": {}},
      "msg_type": "display_data", "msg_id": "1"}, "keys"),
])
def test_unreadable_says_why(msg, reason):
    assert reason in unreadable(msg)


class _Socket:
    """Stands in for a channel's zmq socket: hands out ``messages`` (lists of frames) in order."""

    def __init__(self, messages):
        self.messages = list(messages)

    async def poll(self, timeout=None):
        return bool(self.messages)

    async def recv_multipart(self):
        return self.messages.pop(0)


def test_an_oversized_shell_message_is_verified_but_never_parsed():
    """Issue 29, item 7: a shell message over the limit is not parsed (its content stays bytes); an
    oracle answer arrives as {"oversized": n}, so the test that asked fails saying so, anything
    else is dropped, and a forged one is still refused. Kills the mutant without the size check
    (the 5,000-character answer would be parsed and handed on), the one that skips verifying
    what it does not parse (the forged reply would arrive), and a client whose shell channel
    has no limit."""
    from jupyter_client.session import Session
    from nboracle.grader.kernel_client import MAX_SHELL_BYTES, CheckedChannel

    session = Session(key=b"secret")
    forger = Session(key=b"guessed")

    def frames(kind, content, signer=session):
        return signer.serialize(signer.msg(kind, content))

    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    real = context.socket(zmq.DEALER)
    channel = CheckedChannel(real, session)
    channel.max_bytes = 1000
    channel.socket = _Socket([frames("course_oracle_reply", {"answer": "x" * 5000}),
                              frames("execute_reply", {"status": "ok", "user_expressions": {"k": "x" * 5000}}),
                              frames("stream", {"name": "stdout", "text": "x" * 5000}),
                              frames("course_oracle_reply", {"answer": "x" * 5000}, forger),
                              frames("course_oracle_reply", {"answer": "small"})])

    async def read(n):
        return [await channel.get_msg(timeout=1) for _ in range(n)]

    try:
        answer, reply, small = asyncio.run(read(3))
    finally:
        real.close(0)
        context.term()
    assert answer["content"]["answer"] is None and answer["content"]["oversized"] > 5000
    assert reply["content"]["status"] == "error" and reply["content"]["user_expressions"] == {}
    assert small["content"] == {"answer": "small"}
    assert channel.rejected == 2 and "stream message" in channel.reasons[0]
    client = CheckedKernelClient()
    try:
        assert client.shell_channel.max_bytes == MAX_SHELL_BYTES
    finally:
        client.shell_channel.socket.close(linger=0)
