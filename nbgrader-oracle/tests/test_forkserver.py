"""Kernels forked from a zygote (COURSE_KERNEL_FORK=1, sandbox off): the fast way the suite
grades the course's own code. Each must be an ordinary, independent kernel: the working folder
and environment jupyter_client chose, its own random state, interruptible, and gone with its
grader."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from nboracle.grader import forkserver
from nboracle.grader.sandbox import SandboxedKernelManager


@pytest.fixture
def forking(monkeypatch):
    monkeypatch.setenv("COURSE_SANDBOX", "off")
    monkeypatch.setenv(forkserver.ENV, "1")


async def run(km, code: str, timeout: float = 60) -> str:
    client = km.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=timeout)
        printed = []
        await client.execute_interactive(code, timeout=timeout, output_hook=lambda msg: printed.append(
            msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None)
        return "".join(printed)
    finally:
        client.stop_channels()


async def interrupted(km) -> dict:
    """Interrupt a cell stuck in a loop; the reply to it."""
    client = km.client()
    client.start_channels()
    try:
        client.execute("import time\nwhile True: time.sleep(0.05)")
        await asyncio.sleep(1.0)
        await km.interrupt_kernel()
        return (await client.get_shell_msg(timeout=30))["content"]
    finally:
        client.stop_channels()


async def two_kernels(folders) -> list:
    seen = []
    for folder in folders:
        km = SandboxedKernelManager(kernel_name="python3")
        await km.start_kernel(cwd=str(folder), env={**os.environ, "COURSE_TEST_MARK": folder.name})
        try:
            assert isinstance(km.provisioner.process, forkserver.ForkedKernel), "the kernel was not forked"
            seen.append((await run(km, textwrap.dedent("""
                import os, numpy, torch
                print(os.getcwd(), os.environ['COURSE_TEST_MARK'], numpy.random.randint(1 << 30), sep='|')
            """))).strip().split("|"))
            reply = await interrupted(km)
            assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
            assert await km.is_alive(), "an interrupted forked kernel died"
        finally:
            await km.shutdown_kernel(now=True)
        assert not await km.is_alive()
    return seen


def test_forked_kernels_are_independent_kernels_of_their_own_folder(forking, tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    seen = asyncio.run(two_kernels(folders))
    assert [s[0] for s in seen] == [str(f) for f in folders]
    assert [s[1] for s in seen] == ["a", "b"]
    assert seen[0][2] != seen[1][2], "two forked kernels drew the same numpy random numbers"


def test_the_zygote_and_its_kernels_die_with_the_grader(tmp_path):
    grader = textwrap.dedent(f"""
        import asyncio, os
        os.environ.update(COURSE_SANDBOX="off", {forkserver.ENV}="1")
        from nboracle.grader.sandbox import SandboxedKernelManager
        km = SandboxedKernelManager(kernel_name="python3")
        asyncio.run(km.start_kernel(cwd={str(tmp_path)!r}))
        print(km.provisioner.process.pid, flush=True)
        os.kill(os.getpid(), 9)
    """)
    proc = subprocess.run([sys.executable, "-c", grader], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    kernel = forkserver.ForkedKernel(int(proc.stdout.split()[0]))
    for _ in range(100):
        if not kernel._alive():
            break
        time.sleep(0.1)
    assert not kernel._alive(), "a forked kernel outlived its killed grader"


def test_only_this_pythons_ipykernel_is_forked():
    assert forkserver.forkable([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not forkserver.forkable(["/usr/bin/python3-other", "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not forkserver.forkable([sys.executable, "-m", "some_other_kernel"])


def test_without_the_setting_kernels_start_as_usual(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_SANDBOX", "off")
    monkeypatch.delenv(forkserver.ENV, raising=False)
    async def started():
        km = SandboxedKernelManager(kernel_name="python3")
        await km.start_kernel(cwd=str(tmp_path))
        try:
            return type(km.provisioner.process)
        finally:
            await km.shutdown_kernel(now=True)

    assert asyncio.run(started()) is subprocess.Popen

