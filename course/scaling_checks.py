"""The checks of chapter 02 (scaling), which its graded test cells call.

Each check is handed what it tests (your `score_statistics` results, your `softmax_jacobian`)
and compares it with the grader's own computation: torch's autograd Jacobian of `torch.softmax`,
one row at a time. A failed check names the call and says where to look. Nothing here is a
solution to an exercise.
"""

from __future__ import annotations

import numpy as np
import torch

from .checks import attempt, check_close, check_shape, matches


def same_statistics(first, second):
    """Whether two results of score_statistics hold the same keys and exactly the same numbers."""
    if first.keys() != second.keys():  # message only: names the mistake
        return False
    return all(np.array_equal(first[key], second[key]) for key in first)  # message only: names the mistake


def softmax_last(scores):
    """torch.softmax over the last axis: the function whose Jacobian the exercise builds."""
    return torch.softmax(scores, dim=-1)


BATCH_HINT = ("np.diag and np.outer handle one vector only: build diag(p) and p p^T with broadcasting over the "
              "leading axes")
ROW_FIRST = ("each row gets the Jacobian your function gives that row alone, and that Jacobian is wrong: make the "
             "test of one vector pass first")


def check_batched(softmax_jacobian, scores):
    """Your softmax_jacobian on p = softmax(scores) of any shape (..., n), against autograd's Jacobian per row."""
    *batch, n = scores.shape
    p = softmax_last(scores).numpy()
    what = f"softmax_jacobian(p) for p of shape {tuple(p.shape)}"
    J = attempt(what, softmax_jacobian, p, hint=BATCH_HINT)
    check_shape(what, J, (*batch, n, n),
                hint="one (n, n) Jacobian per row of p: build both terms with broadcasting over the leading axes")
    rows = scores.reshape(-1, n)
    reference = torch.stack([torch.autograd.functional.jacobian(softmax_last, row) for row in rows])
    reference = reference.reshape(*batch, n, n).numpy()
    if not matches(J, reference, atol=1e-9):
        alone = np.stack([attempt(f"softmax_jacobian of one row of length {n}", softmax_jacobian, row,
                                  hint="make the test of one vector pass first") for row in p.reshape(-1, n)])
        right_batching = matches(J, alone.reshape(*batch, n, n), atol=1e-9)  # message only: which part to mend
        check_close(what, J, reference, atol=1e-9, hint=ROW_FIRST if right_batching else
                    "one Jacobian diag(p) - p p^T per row of p; the outer product is p[..., :, None] times "
                    "p[..., None, :]")
