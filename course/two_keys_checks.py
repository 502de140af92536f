"""The checks of chapter 01 (two keys), which its graded test cells call.

The tests of attention call your softmax of Part A. Where that softmax does not make each row sum
to 1 (its own tests say so), they judge the attention weights as that softmax makes them, so that
one mistake costs one part. Nothing here computes a graded answer.
"""

from __future__ import annotations

import numpy as np

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
