"""The grader's own memory, capped while a test cell runs in it (``nboracle.grader.oracle``).

Under the oracle every graded test cell runs in the grading process, on data the student's
kernel sends: replies are bounded one by one (``nboracle.kernel.wire.MAX_TEXT``, ``MAX_BYTES``), but a
test that keeps several of them, or a student whose values make the test's own code allocate
(a 120 MiB bool array turned into float64 by a check is 1 GiB), would grow the grader without
bound; with ``--jobs N`` a few such students could take the machine down. :class:`MemoryCap`
caps it, in two layers, only while a test cell runs in the grader:

* **the answers**: the kernel's answers to one test cell may add up to at most a quarter of the
  limit (counted on their text, before it is parsed: :meth:`MemoryCap.spend`);
* **the process**: the grading process's data (``VmData``: heap and private mappings, numpy's
  and torch's arrays included) is capped at the limit with a *soft* ``RLIMIT_DATA``, set when
  the cell starts and put back when it ends. An allocation over it fails in the test (numpy:
  ``MemoryError``; torch: "can't allocate memory").

Either way the test fails with one message (:data:`MESSAGE`), the names the cell bound are put
back as they were before it (what it allocated is freed), and grading goes on with the next
cell and the next student. Nothing else runs under the limit: the kernel is started before the
first cell (and a sandboxed kernel sets its own limits, ``nboracle.grader.sandbox``), nbclient's
machinery between cells is never capped. The limit is ``c.OracleExecute.grader_memory_mb``
(``nbgrader_config.py``; 0: no cap); ``RLIMIT_DATA`` counts mappings on Linux 4.7 and later.
"""

from __future__ import annotations

import contextlib
import gc
import os
import traceback
from typing import Any

DEFAULT_MB = 3072
MESSAGE = ("the grader's memory limit of {limit} MiB was reached while checking this test ({what}): "
           "your code's answers (or what the test computes from them) need far more memory than this "
           "exercise does; return arrays of the shapes the exercise asks for")


class GraderMemoryError(MemoryError):
    """The test needed more of the grader's memory than the limit allows (the student's answers did)."""


def data_bytes() -> int | None:
    """This process's ``VmData`` (what ``RLIMIT_DATA`` counts), None where /proc does not say."""
    try:
        with open(f"/proc/{os.getpid()}/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _resource():
    try:
        import resource

        return resource if hasattr(resource, "RLIMIT_DATA") else None
    except ImportError:  # pragma: no cover (not a Unix)
        return None


class MemoryCap:
    """The limits of one notebook's grader-side test cells (see the module docstring)."""

    def __init__(self, limit_mb: int, log: Any = None) -> None:
        self.limit_mb = max(int(limit_mb or 0), 0)
        self.log = log
        self.answers_limit = self.limit_mb * 2 ** 20 // 4  # bytes of answers' text in one test cell
        self.received = 0  # bytes of answers' text in the current cell
        self.armed = False
        self.tripped: str | None = None  # why the current cell hit the limit, if it did

    def spend(self, size: int) -> None:
        """Count one answer of ``size`` characters; over the cell's share, refuse it before it is parsed."""
        self.received += size
        if self.armed and self.limit_mb and self.received > self.answers_limit:
            self.tripped = (f"the kernel's answers to it add up to {self.received / 2 ** 20:.0f} MiB, "
                            f"more than the {self.answers_limit // 2 ** 20} MiB one test may receive")
            raise GraderMemoryError(self.message())

    def message(self) -> str:
        return MESSAGE.format(limit=self.limit_mb, what=self.tripped or "its data")

    @contextlib.contextmanager
    def test_cell(self, namespace: dict):
        """Run one grader-side test cell under the limits."""
        self.received, self.tripped = 0, None
        self._before = dict(namespace)
        resource = _resource() if self.limit_mb else None
        old = None
        if resource is not None:
            old = resource.getrlimit(resource.RLIMIT_DATA)
            hard = old[1]
            soft = self.limit_mb * 2 ** 20
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            try:
                resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
            except (ValueError, OSError):
                old = None
        self.armed = True
        try:
            yield self
        finally:
            self.armed = False
            if old is not None:
                resource.setrlimit(resource.RLIMIT_DATA, old)

    def explain(self, error: BaseException | None, namespace: dict) -> BaseException | None:
        """``error`` as the test's result: one over the limit becomes :class:`GraderMemoryError`.

        After such a failure the names the cell bound are put back as they were before it (the
        arrays it held are freed), so the next cells and the next student start as usual.
        """
        before, self._before = getattr(self, "_before", None), None
        if self.log is not None and self.limit_mb:
            data = data_bytes()
            self.log.debug("oracle: memory: %.1f MiB of answers in this test, the grader's data %s MiB (limit %d)",
                           self.received / 2 ** 20, "?" if data is None else f"{data / 2 ** 20:.0f}", self.limit_mb)
        if error is None or not self.limit_mb:
            return error
        cause = self.tripped or _memory_failure(error)
        if cause is None:
            return error
        self.tripped = self.tripped or cause
        chain = _chain(error)
        for link in chain:
            if link.__traceback__ is not None:
                traceback.clear_frames(link.__traceback__)
                link.__traceback__ = None
        del chain, error
        if before is not None:
            for name in [n for n in namespace if n not in before]:
                del namespace[name]
            for name, value in before.items():
                if name not in namespace or dict.get(namespace, name) is not value:
                    namespace[name] = value
        gc.collect()
        message = self.message()
        if self.log is not None:
            self.log.warning("oracle: %s", message)
        return GraderMemoryError(message)


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while error is not None and not any(error is e for e in seen) and len(seen) < 50:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _memory_failure(error: BaseException) -> str | None:
    """Why ``error`` (or one it arose from) is the grader running out of memory, else None.

    An error of the student's code in the kernel (``nboracle.grader.oracle.KernelError``, whatever
    its name) is never one: it is the kernel's own memory, and keeps its message.
    """
    from .kernel_client import KernelError

    for link in _chain(error):
        if isinstance(link, KernelError):
            continue
        if isinstance(link, MemoryError):
            return "an allocation of its data failed"
        if isinstance(link, RuntimeError) and "can't allocate memory" in str(link)[:2000]:
            return "an allocation of a tensor failed"
    return None
