"""The grader's kernel client (instructor.kernel_client) against a real kernel.

Every message an honest kernel sends is read as before; a message that does not verify, or
that the grader could not act on, is dropped and counted, and the next one is read as usual.
"""

from __future__ import annotations

import asyncio

import pytest

from instructor import pipeline as P
from instructor.kernel_client import CheckedKernelClient, unreadable
from instructor.sandbox import SandboxedKernelManager

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
