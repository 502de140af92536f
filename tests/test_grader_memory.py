"""The grader's own memory (nbgrader-oracle/nboracle/grader/memory.py): a student whose answers make a test need more
than the limit fails that test with a clear message, and grading goes on.

The first tests run :class:`MemoryCap` in this process (milliseconds); the last grades chapter 01
through the class pipeline (one local worker, the real sandbox) with a student whose answer to
one test is a 96 MiB bool array (a check turns it into 768 MiB of float64), then an honest
student graded by the same worker.
"""

from __future__ import annotations

import resource

import numpy as np
import pytest
from nboracle.classroom import batch
from nboracle.classroom import pipeline as P
from nboracle.grader import memory
from nboracle.grader.oracle import kernel_error
from support import CLASS_POINTS

from instructor.repository import REPOSITORY

A = "01_two_keys"


def _over(cap: memory.MemoryCap) -> None:
    """An allocation of a GiB more than the process holds."""
    np.ones(((memory.data_bytes() or 0) + 2 ** 30) // 8)


def _cap_above_now(extra_mb: int = 256) -> memory.MemoryCap:
    return memory.MemoryCap((memory.data_bytes() or 0) // 2 ** 20 + extra_mb)


def test_an_allocation_over_the_limit_fails_the_test_with_the_message_and_frees_what_it_bound():
    cap = _cap_above_now()
    before = resource.getrlimit(resource.RLIMIT_DATA)
    namespace = {"kept": 1, "rebound": "old"}
    with cap.test_cell(namespace):
        assert resource.getrlimit(resource.RLIMIT_DATA)[0] == cap.limit_mb * 2 ** 20
        try:
            namespace["rebound"] = namespace["new"] = np.empty(2 ** 24)  # 128 MiB, under the limit
            _over(cap)
            error = None
        except Exception as err:  # as nboracle.grader.oracle._run catches a test's error
            error = err
    assert resource.getrlimit(resource.RLIMIT_DATA) == before, "the limit holds only while the cell runs"
    explained = cap.explain(error, namespace)
    assert isinstance(explained, memory.GraderMemoryError)
    assert str(explained).startswith(f"the grader's memory limit of {cap.limit_mb} MiB was reached while checking this test")
    assert namespace == {"kept": 1, "rebound": "old"}, "the cell's names are put back as they were"
    np.empty(2 ** 28)  # 2 GiB: nothing is capped after the cell


def test_a_failure_inside_a_check_or_the_wire_is_still_the_memory_limit():
    from nboracle import WireError

    from course.checks import attempt

    cap = _cap_above_now()
    for wrap in (lambda: attempt("attention(Q, K, V)", _over, cap),
                 lambda: _raise_from(WireError("the kernel's answer does not fit in the grader's memory"))):
        with cap.test_cell({}):
            try:
                wrap()
            except Exception as err:
                error = err
        assert isinstance(cap.explain(error, {}), memory.GraderMemoryError)


def _raise_from(error: Exception) -> None:
    try:
        raise MemoryError
    except MemoryError:
        raise error from None


def test_the_students_own_memory_error_and_other_failures_keep_their_message():
    cap = _cap_above_now()
    own = kernel_error("MemoryError", "Unable to allocate 9.0 EiB")  # raised in the kernel by the student's code
    assert cap.explain(own, {}) is own
    other = AssertionError("weights are off")
    assert cap.explain(other, {}) is other
    assert cap.explain(None, {}) is None
    torch_said = RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
    assert isinstance(cap.explain(torch_said, {}), memory.GraderMemoryError)


def test_the_answers_to_one_test_are_counted_before_they_are_parsed():
    cap = memory.MemoryCap(64)  # a quarter, 16 MiB, for the answers of one test
    with cap.test_cell({}):
        cap.spend(15 * 2 ** 20)
        with pytest.raises(memory.GraderMemoryError, match="add up to 17 MiB, more than the 16 MiB"):
            cap.spend(2 * 2 ** 20)
    with cap.test_cell({}):  # the next test starts afresh
        cap.spend(15 * 2 ** 20)
    cap.spend(2 ** 30)  # outside a test cell nothing is refused


def test_no_limit_changes_nothing():
    cap = memory.MemoryCap(0)
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with cap.test_cell({}):
        assert resource.getrlimit(resource.RLIMIT_DATA) == before
        cap.spend(2 ** 40)
    error = MemoryError()
    assert cap.explain(error, {}) is error


HOG = '''
def attention(Q, K, V, _right=attention):
    """Right, except for the first input of test_attention_weights: 96 MiB of bools as its weights."""
    if np.shape(Q) == (3, 4) and np.shape(V) == (5, 2):
        return np.zeros((3, 2)), np.ones((3, 32 * 2 ** 20), dtype=bool)
    return _right(Q, K, V)
'''


@pytest.mark.pipeline
def test_a_student_over_the_limit_loses_that_test_and_the_next_student_is_graded_as_usual(tmp_path):
    root = REPOSITORY.scratch_copy(tmp_path / "course", [A])
    with open(root.config, "a") as config:  # honest grading of 01 peaks at 0.4 GiB; the hog needs more than 1.2
        config.write("\nc.OracleExecute.grader_memory_mb = 1024\n")
    release, answers = root.release_and_answers(A)
    students = {"a-hog": {**answers, "attention": answers["attention"] + HOG}, "b-honest": answers}
    for student, cells in students.items():
        root.submit(A, student, P.fill(release, cells))
    reports = batch.grade_class(root, A, runner=batch.LocalPool(1), progress=False)  # one worker: a, then b
    assert {s: r.status for s, r in reports.items()} == dict.fromkeys(students, "graded")
    assert reports["b-honest"].score == reports["b-honest"].max_score == CLASS_POINTS
    hog = reports["a-hog"]
    assert hog.score == CLASS_POINTS - 1 and set(hog.failed_cells) == {"test_attention_weights"}, hog.failed_cells
    assert hog.failed_cells["test_attention_weights"].startswith(
        "GraderMemoryError: the grader's memory limit of 1024 MiB was reached while checking this test")
    assert not hog.review and not reports["b-honest"].review
