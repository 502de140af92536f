"""The Dask runner of the class pipeline: ``grade-class A --cluster ADDRESS|local:N``.

One machine grades with ``--jobs N`` (:class:`nboracle.classroom.batch.LocalPool`); a class of
thousands grades on an existing Dask distributed cluster (``--cluster tcp://scheduler:8786``,
``tls://...``), or on a LocalCluster of N worker processes (``--cluster local:N``).
docs/CLUSTER.md says how to start one. Planning, recording and reporting are the one pipeline
of :func:`nboracle.classroom.batch.grade_class`; this module only runs tasks.

* **The job** (:func:`nboracle.classroom.grader.make_job`) is scattered to every worker once: the
  gradebook's records of the assignment (with the hidden tests), the non-notebook files of
  ``source/<assignment>/``, the course's ``nbgrader_config.py`` text, the ``course`` package
  the instructor chose, and the instructor's sandbox policy. A worker shares no file system
  with the instructor.
* **A task** carries one student's submitted folder. The worker's first task builds its
  :class:`nboracle.classroom.grader.Grader` (a private course root, nbgrader loaded once); every task
  then autogrades and renders feedback there and returns plain data. Workers never see the
  instructor's gradebook or its credentials.
* **Faults.** A worker that dies mid-task: the scheduler re-runs its tasks on other workers
  (the pipeline records a student once; a second result is ignored). A task that killed three
  workers is reported as failed for that student. The scheduler going away raises
  :class:`nboracle.classroom.batch.RunnerLost`: the pipeline records what it has, stops with a clear
  message, and running the same command again grades the rest.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import time
from collections.abc import Iterable, Iterator

from . import grader as G
from .batch import BatchStats, RunnerLost

ClusterStats = BatchStats  # what the tests and the benchmark read


class ClusterError(RunnerLost):
    """The cluster could not be reached, or went away during the batch."""


def connect(address: str):
    """A dask Client: ``local:N`` starts a LocalCluster of N worker processes on this machine."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError("dask distributed is not installed: `make setup` installs requirements.txt") from None
    if address.startswith("local:"):
        try:
            n = int(address.split(":", 1)[1])
        except ValueError:
            raise ClusterError(f"--cluster {address}: expected local:N with N worker processes") from None
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        return Client(cluster)
    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as err:
        raise ClusterError(f"no Dask scheduler answers at {address} ({err}); start one (docs/CLUSTER.md) "
                           "or use --cluster local:N") from None


class Dask:
    """Grade each student as one task on a Dask cluster (an address, ``local:N`` or a Client)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.client = None if isinstance(cluster, str) else cluster
        self.name = f"Dask {cluster}" if isinstance(cluster, str) else "Dask"

    @property
    def address(self) -> str:
        if isinstance(self.cluster, str):
            return self.cluster
        scheduler = getattr(self.client, "scheduler", None)
        return getattr(scheduler, "address", "?")

    def run(self, job: dict, tasks: Iterable[tuple[str, dict]]) -> Iterator[dict]:
        _quiet_reconnects()
        yield from self._run(job, tasks)

    def _run(self, job: dict, tasks: Iterable[tuple[str, dict]]) -> Iterator[dict]:
        from distributed import as_completed

        own = self.client is None
        if own:
            self.client = connect(self.cluster)
        client, futures = self.client, {}
        try:
            try:
                [shared] = client.scatter([{**job, "workers_here": _workers_per_host(client)}],
                                          broadcast=True, hash=False)
                for student, files in tasks:
                    future = client.submit(G.grade_task, shared, student, files, pure=False,
                                           key=f"autograde-{job['assignment']}-{student}-{time.time_ns()}")
                    futures[future] = student
            except (OSError, concurrent.futures.CancelledError) as err:
                raise self._gone(err) from None
            for future in as_completed(futures):
                student = futures[future]
                try:
                    yield future.result()
                except (concurrent.futures.CancelledError, OSError) as err:
                    raise self._gone(err) from None
                except Exception as err:
                    if "KilledWorker" in type(err).__name__:  # this submission took down workers
                        yield {"student": student, "status": G.FAILED, "where": "", "seconds": 0.0,
                               "problem": "its autograde killed the Dask workers that ran it (3 times): "
                                          "a crash or memory exhaustion"}
                    elif client.status not in ("running", "connecting"):
                        raise self._gone(err) from None
                    else:
                        raise
        finally:
            if own:
                _close(client)
                self.client = None
            else:  # a batch stopped early (a grader error): nothing more to grade on a cluster we keep
                pending = [f for f in futures if not f.done()]
                if pending and client.status == "running":
                    try:
                        client.cancel(pending)
                    except Exception:  # the tasks are lost with the scheduler anyway
                        pass

    def _gone(self, err: BaseException) -> ClusterError:
        return ClusterError(f"the Dask scheduler at {self.address} went away ({type(err).__name__}); "
                            "its workers stop with it (a worker whose scheduler is gone exits)")


def _workers_per_host(client) -> int | None:
    """The most Dask workers on one host: they share its cores (nboracle.classroom.grader.kernel_threads)."""
    try:
        workers = client.scheduler_info().get("workers", {})
    except Exception:  # an old scheduler, or one going away: the kernels keep their defaults
        return None
    hosts: dict[str, int] = {}
    for address in workers:
        host = address.rsplit(":", 1)[0]
        hosts[host] = hosts.get(host, 0) + 1
    return max(hosts.values(), default=None)


class _LostConnection(logging.Filter):
    """Drop dask's own log records of a connection it lost (a 30-line traceback per attempt to
    reconnect): the pipeline says in one message that the scheduler went away, and what to do."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, (OSError, asyncio.CancelledError, concurrent.futures.CancelledError))


def _quiet_reconnects() -> None:
    """From the first batch on, for the life of this process (a client keeps trying to reconnect
    until it is closed, which may be after the batch)."""
    for name in ("distributed.client", "distributed.utils", "distributed.core"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _LostConnection) for f in logger.filters):
            logger.addFilter(_LostConnection())


def _close(client) -> None:
    cluster = getattr(client, "cluster", None)
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    except Exception as err:  # closing after a lost scheduler may fail: nothing is left to save
        print(f"note: closing the Dask client: {type(err).__name__}: {err}", file=sys.stderr)
