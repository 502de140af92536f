"""The checks of chapter 03 (masks), which its graded test cells call.

Each check is handed what it tests (your `masked_attention`) and compares it with PyTorch's
`F.scaled_dot_product_attention` on the same queries, keys, values and mask. A failed check names
the call and says where to look. Nothing here is a solution to an exercise.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .checks import check_close, check_shape, check_true, matches

PAD_HINT = "a PAD key must get weight exactly 0 (score -inf before softmax), whatever its vector holds"
TUPLE_HINT = "when block(x) returns a tuple, like nn.MultiheadAttention's (output, weights), its first item is the output"
BLOCKED_ROW_HINT = ("a row with no allowed key gets zeros: take the rows to zero as a mask that keeps the key axis "
                    "with size 1, allowed.any(dim=-1, keepdim=True), so that it broadcasts along the keys")
# future_leak_check raising: a tuple used as a tensor (TypeError), else most often the wrong axis changed
LEAK_CHECK_HINT = {"TypeError": TUPLE_HINT, "AttributeError": TUPLE_HINT,
                   None: "x is (batch, T, features): change the last token of every sequence, x[:, -1] (x[-1] is the "
                         "whole last sequence), and compare the outputs of the tokens before it, [:, :-1]"}


def check_pad_invariance(masked_attention, q, k, v, rule, n_pad, generator, scale):
    """masked_attention with and without n_pad PAD keys appended (drawn at `scale` from `generator`), each
    against F.scaled_dot_product_attention on the real keys alone."""
    batch, length, d = k.shape
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=rule)  # the real keys only
    alone, _ = masked_attention(q, k, v, rule)
    k_padded = torch.cat([k, scale * torch.randn(batch, n_pad, d, generator=generator)], dim=1)
    v_padded = torch.cat([v, scale * torch.randn(batch, n_pad, v.shape[-1], generator=generator)], dim=1)
    allowed = torch.cat([rule.expand(q.shape[1], length), torch.zeros(q.shape[1], n_pad, dtype=torch.bool)], dim=1)
    padded, _ = masked_attention(q, k_padded, v_padded, allowed)
    where = f"T={length}, after appending {n_pad} PAD key(s)"
    by_length = F.scaled_dot_product_attention(q, k, v, attn_mask=rule, scale=1 / math.sqrt(length))
    check_close(f"real tokens' outputs without PAD (T={length})", alone, expected, atol=1e-5, likely_causes={
        "the scores are divided by the square root of the number of keys T_k (k.shape[-2]) instead of sqrt(d_k)":
            by_length} if length != d else None, hint="scores q k^T / sqrt(d_k), masked softmax, then weights @ v")
    check_shape(f"real tokens' outputs ({where})", padded, tuple(expected.shape), hint=PAD_HINT)
    if not matches(padded, alone):  # message only: the comparisons with the fused kernel decide
        check_true(False, f"the real tokens' outputs changed ({where}): {PAD_HINT}")
    check_close(f"real tokens' outputs ({where})", padded, expected, atol=1e-5, hint=PAD_HINT)
