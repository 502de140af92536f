"""The checks of chapter 02 (scaling), which its graded test cells call.

Each check is handed what it tests (your `score_statistics` results, your `softmax_jacobian`)
and checks what the exercise promises of it (a batch gives one Jacobian per row, each the one your
function gives that row). The graded tests also compare it with torch's autograd Jacobian of the
softmax, on the grader's side. A failed check names the call and says where to look. Nothing here
computes a graded answer.
"""

from __future__ import annotations

import numpy as np

from .checks import attempt, check_close, check_shape


def same_statistics(first, second):
    """Whether two results of score_statistics hold the same keys and exactly the same numbers."""
    if first.keys() != second.keys():  # message only: names the mistake
        return False
    return all(np.array_equal(first[key], second[key]) for key in first)  # message only: names the mistake


BATCH_HINT = ("p may have leading batch axes, (..., n): build diag(p) and p p^T with broadcasting over them, every "
              "size from n = p.shape[-1] (np.eye(n), not p.shape[0]; np.diag and np.outer take one vector only)")


def check_batched_outputs(softmax_jacobian, p):
    """Your softmax_jacobian on distributions p of any shape (..., n): one (n, n) Jacobian per row, each the one
    your function gives that row alone; returns them."""
    *batch, n = p.shape
    what = f"softmax_jacobian(p) for p of shape {tuple(p.shape)}"
    J = attempt(what, softmax_jacobian, p, hint=BATCH_HINT)
    check_shape(what, J, (*batch, n, n),
                hint="one (n, n) Jacobian per row of p: build both terms with broadcasting over the leading axes")
    alone = np.stack([attempt(f"softmax_jacobian of one row of length {n}", softmax_jacobian, row,
                              hint="make the test of one vector pass first") for row in p.reshape(-1, n)])
    check_close(what, J, alone.reshape(*batch, n, n), atol=1e-9,  # message only: the graded test compares each row
                hint="one Jacobian diag(p) - p p^T per row of p; the outer product is p[..., :, None] times "
                     "p[..., None, :]")
    return J


def check_batched(softmax_jacobian, p):
    """check_batched_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_batched_outputs(softmax_jacobian, p)
