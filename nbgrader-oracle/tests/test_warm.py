"""Sandboxed kernels forked from a warm zygote (nboracle.grader.warm), the default way a grading
kernel starts: each is a kernel of its own folder, with its own namespaces, no capability, the
sandbox's limits and control groups, interruptible, gone with its grader; when the zygote cannot
start a kernel, the kernel starts the usual way, still in the sandbox. The attacks through the real
nbgrader CLI are in tests/test_sandbox.py (every one of them runs on warm kernels)."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest
from nboracle.grader import sandbox, warm
from nboracle.grader.sandbox import SandboxedKernelManager
from test_forkserver import interrupted, run

pytestmark = pytest.mark.skipif(not sandbox.sandbox_status()[0], reason="no working bubblewrap here")

LOOK = textwrap.dedent("""
    import os, sys, resource
    status = open("/proc/self/status").read().splitlines()
    caps = [line for line in status if line.startswith("Cap") and int(line.split()[1], 16)]
    print(os.getcwd(), sorted(os.listdir(".")), "torch" in sys.modules, caps,
          resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20, sorted(os.listdir("/tmp/home")), sep="|")
    open("mine.txt", "w").write("scratch")
""")


@pytest.fixture
def sandboxed(monkeypatch):
    monkeypatch.setenv("COURSE_SANDBOX", "on")
    monkeypatch.delenv(warm.ENV, raising=False)
    monkeypatch.setattr(warm, "_failed", {})


async def start(folder: Path) -> SandboxedKernelManager:
    km = SandboxedKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(folder))
    return km


async def look_in(folders: list[Path]) -> list[tuple[list[str], bool, list[str]]]:
    """Two kernels at once, one per folder: what each saw, whether it was forked, its cgroup files."""
    kms = [await start(folder) for folder in folders]
    seen = []
    try:
        for km in kms:
            procs = km._cgroups.procs_files() if km._cgroups else []
            members = [Path(f).read_text().split() for f in procs]
            pid = str(km.provisioner.process.pid)
            seen.append(((await run(km, LOOK)).strip().split("|"), km.provisioner.warm,
                         [pid in m for m in members]))
        reply = await interrupted(kms[0])
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert await kms[0].is_alive(), "an interrupted warm kernel died"
    finally:
        for km in kms:
            await km.shutdown_kernel(now=True)
    for km in kms:
        assert not await km.is_alive()
    return seen


def test_warm_kernels_are_sandboxed_kernels_of_their_own_folder(sandboxed, tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
        (folder / f"{folder.name}.txt").write_text(folder.name)
    seen = asyncio.run(look_in(folders))
    for (said, forked, in_cgroups), folder in zip(seen, folders, strict=True):
        cwd, listing, preloaded, caps, memory_mb, home = said
        assert forked, "the kernel was not forked from the zygote"
        assert cwd == str(folder) and listing == repr([f"{folder.name}.txt"]), "its own folder, a copy"
        assert preloaded == "True", "torch came from the zygote"
        assert caps == "[]", "a kernel holds no capability"
        assert int(memory_mb) == SandboxedKernelManager().memory_limit_mb
        assert home == "['.config', '.ipython']", "a fresh home in a private /tmp"
        assert all(in_cgroups), "the kernel is in its own control groups"
    for folder in folders:
        assert not (folder / "mine.txt").exists(), "what a kernel writes stays in its scratch copy"


def test_a_kernel_the_zygote_cannot_build_starts_the_usual_way(sandboxed, monkeypatch, tmp_path):
    broken = sandbox._warm_layout
    monkeypatch.setattr(sandbox, "_warm_layout", lambda args, pool: ["--no-such-argument", *broken(args, pool)])

    async def twice():
        out = []
        for _ in range(2):
            km = await start(tmp_path)
            try:
                out.append((km.provisioner.__class__.__name__, getattr(km.provisioner, "warm", False),
                            km.sandboxed, (await run(km, "import os; print(os.environ['COURSE_SANDBOXED'])")).strip()))
            finally:
                await km.shutdown_kernel(now=True)
        return out

    first, second = asyncio.run(twice())
    assert first == ("WarmProvisioner", False, True, "1"), "the failed fork fell back to a sandboxed start"
    assert second == ("LocalProvisioner", False, True, "1"), "this grader no longer asks the broken zygote"
    assert list(warm._failed.values()) and "no-such-argument" in list(warm._failed.values())[0]


def test_warm_off_starts_every_kernel_the_usual_way(sandboxed, monkeypatch, tmp_path):
    monkeypatch.setenv(warm.ENV, "off")

    async def once():
        km = await start(tmp_path)
        try:
            return type(km.provisioner).__name__, km.sandboxed, (await run(km, "import sys; print('torch' in sys.modules)"))
        finally:
            await km.shutdown_kernel(now=True)

    assert asyncio.run(once()) == ("LocalProvisioner", True, "False\n")
    assert not warm.wanted()
    assert os.environ[warm.ENV] == "off"
