"""The checks of chapter 08 (the cost of attention), which its graded test cells call.

Each check is handed what it tests (your `attention_cost`, `phi`, `cached_attention_step`,
`sliding_window_pairs`) with the test's inputs. The linear attentions are judged around the
feature map you wrote (`own_phi`), so a mistake in `phi` costs the test of `phi` only. A failed
check names the call and says where to look. Nothing here is a solution to an exercise.
"""

from __future__ import annotations

import torch

from .checks import attempt, check_shape, check_true

STEP_HINT = ("S grows by the outer product phi(k_t) v_t^T, of shape (..., d, d_v): phi(k_t) as a column, "
             "unsqueeze(-1), times v_t as a row, unsqueeze(-2); z grows by phi(k_t)")


def growth(attention_cost, costs, key, before, after):
    """How many times `key` of attention_cost grows from the shape `before` to `after` (B, L, d, H); `costs`
    keeps each shape's answer, so that each shape is asked once."""
    for shape in (before, after):
        if shape not in costs:
            costs[shape] = attention_cost(*shape)
    return costs[after][key] / costs[before][key]


def own_phi(phi, x):
    """Your phi on the test's input: the tests judge the attention around the feature map you wrote (the test
    of phi judges phi itself)."""
    features = attempt("phi(x)", phi, x, hint="phi fails on its own: make the test of phi pass first")
    check_shape(f"phi(x) for x of shape {tuple(x.shape)}", features, tuple(x.shape),
                hint="make the test of phi pass first")
    rows = features.reshape(-1, x.shape[-1])  # the test's rows all differ: a feature map must tell them apart
    check_true(bool(torch.isfinite(rows).all()) and (len(rows) < 2 or not bool((rows == rows[:1]).all())),
               "phi(x) gives every row of x the same features (or non-finite ones), so no attention built on it "
               "can be judged: make the test of phi pass first")
    return features


def positive_inputs(phi, *tensors):
    """The test's queries and keys as they are when your phi is positive on all of them; else (a ReLU gives 0 for
    x <= 0, and a query whose features are all 0 has no weights at all, so its output is 0 / 0) the same tensors
    moved to positive values, |x| + 0.5, where the attention around your phi can still be judged (the test of phi
    judges phi itself)."""
    if all(bool((own_phi(phi, t) > 0).all()) for t in tensors):
        return tensors
    return tuple(t.abs() + 0.5 for t in tensors)


CACHE_HINT = "the cache holds K and V of shape (B, H, tokens so far, d_head): append the new key and value along dim 2"


def cached_step(cached_attention_step, block, x_new, cache, t):
    """cached_attention_step at token t; an error reads as one sentence with the cache's layout."""
    return attempt(f"cached_attention_step at token {t}", cached_attention_step, block, x_new, cache, hint=CACHE_HINT)


def first_difference(a, b):
    """The first position (column) where two batches of token sequences differ, or None."""
    columns = (a != b).any(dim=0).nonzero()
    return int(columns[0]) if len(columns) else None


def count_a_million(sliding_window_pairs, window, causal=False):
    """sliding_window_pairs(1_000_000, window, causal); running out of memory reads as the mistake it is."""
    try:
        return sliding_window_pairs(1_000_000, window, causal)
    except NotImplementedError:
        raise
    except (RuntimeError, MemoryError) as error:
        raised = type(error).__name__
    check_true(False, f"sliding_window_pairs(1_000_000, {window}) raised {raised}: a (L, L) mask of a million tokens "
                      "does not fit in memory; count row by row (or use the closed form) instead of building the mask")
