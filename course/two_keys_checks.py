"""The checks of chapter 01 (two keys), which its graded test cells call.

The tests of attention call your softmax of Part A. Where that softmax does not make each row sum
to 1 (its own tests say so), they judge the attention weights as that softmax makes them, so that
one mistake costs one part. Nothing here computes a graded answer.
"""

from __future__ import annotations

import numpy as np

from course.checks import attempt

# scores on which the tests ask your softmax whether it normalises each row (two rows), and whether it gives rows of
# different scores different weights (three rows); the hidden test of softmax judges it on both
TWO_ROWS = [[1.0, 2.0, 0.5], [3.0, 5.0, 4.0]]
THREE_ROWS = [*TWO_ROWS, [0.0, 0.0, 2.0]]


def softmax_normalises_rows(softmax) -> bool:
    """Whether your softmax makes each row of TWO_ROWS sum to 1 (False when it raises)."""
    try:
        rows = np.asarray(softmax(np.array(TWO_ROWS), axis=-1), dtype=float)
    except Exception:  # noqa: BLE001 (the tests of softmax report the error itself)
        return False
    return bool(rows.shape == (2, 3) and np.allclose(rows.sum(axis=-1), 1.0))


# why softmax raises, nearly always: the row sums (or maxima) lose their axis, and (rows, keys) meets (rows,)
SOFTMAX_HINT = ("divide each row by its own sum: keepdims=True on the maximum and on the sum keeps the reduced axis, "
                "so that (rows, keys) meets (rows, 1) and broadcasts")
ATTENTION_HINT = ("the scores are Q K^T, queries first: Q @ np.swapaxes(K, -1, -2) meets (Lq, d_k) with (d_k, Lk) and "
                  "gives one row per query, (Lq, Lk), where K Q^T would give (Lk, Lq); the output is weights @ V")
SOFTMAX_FIRST = ("your softmax raises on scores of two rows (the tests of softmax say why), and attention calls it: "
                 "make the tests of softmax pass first")


def run_softmax(softmax, scores, **kwargs):
    """softmax(scores, **kwargs); an error reads as one sentence naming its likely cause."""
    shape = tuple(np.shape(scores))
    return attempt(f"softmax of scores of shape {shape}", softmax, scores, hint=SOFTMAX_HINT, **kwargs)


def attention_hint(softmax) -> str:
    """What to fix when attention raises: your softmax first when it raises on rows of scores itself."""
    try:
        softmax(np.array(TWO_ROWS), axis=-1)
    except Exception:  # noqa: BLE001 (the tests of softmax report the error itself)
        return SOFTMAX_FIRST
    return ATTENTION_HINT
