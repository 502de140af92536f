"""A grading kernel that dies before its first reply (its port taken by another grader's kernel) is started again."""

from __future__ import annotations

import asyncio

import pytest
from nbclient import NotebookClient
from nboracle.grader.nbgrader_ext import KERNEL_START_TRIES, GuardedExecute


class FlakyStart(GuardedExecute):
    """GuardedExecute whose first ``dead`` kernels die before replying, as one that lost its port does."""

    def __init__(self, dead: int, **kwargs):
        super().__init__(**kwargs)
        self.dead, self.started, self.clients = dead, 0, 0

    def create_kernel_manager(self):
        return object()

    async def async_start_new_kernel(self, **kwargs):
        self.started += 1


def _client_step(self):
    self.clients += 1
    if self.clients <= self.dead:
        self.km = None  # what nbclient's cleanup leaves after the kernel died
        raise RuntimeError("Kernel died before replying to kernel_info")
    return "client"


@pytest.fixture
def flaky(monkeypatch):
    async def start_client(self):
        return _client_step(self)

    monkeypatch.setattr(NotebookClient, "async_start_new_kernel_client", start_client)
    return FlakyStart


def test_a_kernel_that_dies_at_start_is_started_again(flaky):
    step = flaky(dead=KERNEL_START_TRIES - 1)
    assert asyncio.run(step.async_start_new_kernel_client()) == "client"
    assert step.clients == KERNEL_START_TRIES and step.started == KERNEL_START_TRIES - 1


def test_a_kernel_that_keeps_dying_is_an_error_after_the_last_try(flaky):
    step = flaky(dead=KERNEL_START_TRIES)
    with pytest.raises(RuntimeError, match="before replying"):
        asyncio.run(step.async_start_new_kernel_client())
    assert step.clients == KERNEL_START_TRIES


def test_other_errors_are_not_retried(flaky, monkeypatch):
    async def start_client(self):
        self.clients += 1
        raise RuntimeError("No kernel is running!")

    monkeypatch.setattr(NotebookClient, "async_start_new_kernel_client", start_client)
    step = flaky(dead=0)
    with pytest.raises(RuntimeError, match="No kernel"):
        asyncio.run(step.async_start_new_kernel_client())
    assert step.clients == 1 and step.started == 0
