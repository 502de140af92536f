"""Chapter 06's references (the grader's side only): nn.MultiheadAttention holding the weights the test loaded
into a block, its heads split and merged by the student's own split_heads and merge_heads where those differ
from Part A's, and the hidden tests' comparisons of the block with it (after the visible property checks)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from nboracle import read_parameters

from course.checks import check_close, check_true
from course.multihead_attention_checks import (
    PART_A_FIRST,
    as_gather,
    check_causal_outputs,
    check_params,
    check_runs_outputs,
    last_changed,
    run_block,
    standard_layout,
)


class HeadsAsYouSplitThem(nn.MultiheadAttention):
    """nn.MultiheadAttention whose heads are split and merged by your split_heads and merge_heads: where those
    differ from Part A's, the block is judged around them (Part A's tests judge them)."""

    def __init__(self, D, H, heads, mistake=None, **kwargs):  # noqa: N803 (the text's names)
        super().__init__(D, H, **kwargs)
        self.heads = heads  # your (split_heads, merge_heads)
        self.mistake = mistake  # None, or one of MISTAKES: what a typical wrong block computes

    def forward(self, query, key, value, attn_mask=None, need_weights=True, average_attn_weights=True):
        B, T, D = query.shape
        split_heads, merge_heads = self.heads
        if self.mistake is None and standard_layout(split_heads, merge_heads, B, T, D, self.num_heads):
            return super().forward(query, key, value, attn_mask=attn_mask, need_weights=need_weights,
                                   average_attn_weights=average_attn_weights)
        split = as_gather("split_heads", split_heads, (B, T, D), self.num_heads)
        try:
            q, k, v = (t.flatten()[split] for t in F.linear(query, self.in_proj_weight, self.in_proj_bias).split(D, -1))
            scores = q @ k.transpose(-2, -1)  # (B, H, T, T) as your split makes them
            if self.mistake != UNSCALED:
                scores = scores / math.sqrt(q.shape[-1])
            if attn_mask is not None:
                scores = scores.masked_fill(attn_mask, 0.0 if self.mistake == MASKED_TO_ZERO else float("-inf"))
            weights = scores.softmax(dim=-1)
            mixed = weights @ v
        except RuntimeError:
            mixed = None
        check_true(mixed is not None, PART_A_FIRST)
        out = self.out_proj(mixed.flatten()[as_gather("merge_heads", merge_heads, tuple(mixed.shape))])
        return out, (None if not need_weights else weights.mean(dim=1) if average_attn_weights else weights)


UNSCALED = "the scores q k^T are not divided by sqrt(d_head)"
MASKED_TO_ZERO = ("the future scores are set to 0 instead of -inf, so a later key keeps the weight e^0: "
                  "masked_fill(..., float('-inf'))")
MISTAKES = (UNSCALED, MASKED_TO_ZERO)


def multihead_reference(params, D, H, heads, dtype=None, mistake=None):  # noqa: N803 (the text's names)
    """nn.MultiheadAttention holding the weights the test loaded into a block (qkv -> in_proj, proj -> out_proj);
    with `mistake` (one of MISTAKES), what a block making that mistake computes from them."""
    check_params(params)
    has_bias = "qkv.bias" in params
    reference = HeadsAsYouSplitThem(D, H, heads, mistake=mistake, batch_first=True, bias=has_bias, dtype=dtype)
    with torch.no_grad():
        reference.in_proj_weight.copy_(params["qkv.weight"])
        reference.out_proj.weight.copy_(params["proj.weight"])
        if has_bias:
            reference.in_proj_bias.copy_(params["qkv.bias"])
            reference.out_proj.bias.copy_(params["proj.bias"])
    return reference


QK_SWAPPED = ("q and k are in each other's places: the scores are k q^T (rows are keys) instead of q k^T, "
              "or the fused projection is unpacked as k, q, v")


def qk_swapped(params, D):  # noqa: N803 (the text's names)
    """The parameters with the query and key blocks of qkv swapped: what a block that unpacks k, q, v computes."""
    def swap(t):
        return torch.cat([t[D:2 * D], t[:D], t[2 * D:]])
    return {**params, **{name: swap(params[name]) for name in ("qkv.weight", "qkv.bias") if name in params}}


def built_run(MultiHeadSelfAttention, heads, B, T, H, d_head, seed, dtype=torch.float32):  # noqa: N803
    """A block built as a user builds it (`.double()` for float64), nothing written into it: the weights it was built
    with (read from its tensors), x, its output and per-head weights. The hidden tests judge a block on these beside
    the weights they load, so a block right only once its weights are written loses what its wrong code loses."""
    D = H * d_head
    block = MultiHeadSelfAttention(D, H, max_len=T + 1)
    block = block.double() if dtype == torch.float64 else block
    params = read_parameters(block)
    x = torch.randn(B, T, D, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    out, weights = run_block(f"block(x, return_weights=True) for B={B}, T={T}, D={D}, H={H}", block, x, H, heads,
                             return_weights=True)
    return params, x, out, weights


def causal_agrees(MultiHeadSelfAttention, heads, B, T, D, H, as_built=False):  # noqa: N803 (the class under test)
    """check_causal_outputs (as_built: built_run, on the weights the block was built with), then the outputs compared
    with the reference holding the same weights, causal mask on."""
    if as_built:
        params, x, out, _ = built_run(MultiHeadSelfAttention, heads, B, T, H, D // H, seed=B * 100 + T * 10 + H)
    else:
        params, x, out, out_changed = check_causal_outputs(MultiHeadSelfAttention, heads, B, T, D, H)
    reference = multihead_reference(params, D, H, heads)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    with torch.no_grad():  # attn_mask=future: True = may NOT attend
        expected, expected_changed = (reference(t, t, t, attn_mask=future)[0] for t in (x, last_changed(x)))
    hint = "scores / sqrt(d_head), causal mask, softmax over keys, weights @ v, then self.proj"
    with torch.no_grad():
        causes = {QK_SWAPPED: multihead_reference(qk_swapped(params, D), D, H, heads)(x, x, x, attn_mask=future)[0],
                  **{mistake: multihead_reference(params, D, H, heads, mistake=mistake)(x, x, x, attn_mask=future)[0]
                     for mistake in MISTAKES}}
    check_close("block(x) with causal=True" + (", on the weights it was built with" if as_built else ""), out, expected,
                atol=1e-5, hint=hint, likely_causes=causes)
    if not as_built:
        check_close("block(x) after changing the last token", out_changed, expected_changed, atol=1e-5, hint=hint)


def compare_with_multihead(MultiHeadSelfAttention, heads, B, T, H, d_head, seed, as_built=False):  # noqa: N803
    """check_runs_outputs (as_built: built_run, on the weights the block was built with), then the outputs and
    per-head weights compared with nn.MultiheadAttention holding the weights."""
    run = built_run if as_built else check_runs_outputs
    params, x, out, weights = run(MultiHeadSelfAttention, heads, B, T, H, d_head, seed)
    D = H * d_head
    where = f"B={B}, T={T}, D={D}, H={H}" + (", on the weights the block was built with" if as_built else "")
    reference = multihead_reference(params, D, H, heads)
    forbidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = may NOT attend
    expected_out, expected_weights = reference(x, x, x, attn_mask=forbidden, average_attn_weights=False)
    causes = {QK_SWAPPED: multihead_reference(qk_swapped(params, D), D, H, heads)(
        x, x, x, attn_mask=forbidden, average_attn_weights=False)[1],
              **{mistake: multihead_reference(params, D, H, heads, mistake=mistake)(
                  x, x, x, attn_mask=forbidden, average_attn_weights=False)[1] for mistake in MISTAKES}}
    check_close(f"the per-head weights for {where}", weights, expected_weights, atol=1e-5,
                hint="softmax(q k^T / sqrt(d_head)) over the keys with the causal mask, one matrix per head",
                likely_causes=causes)
    check_close(f"block(x) for {where}", out, expected_out, atol=1e-5,
                hint="the weights agree, so look after the softmax: weights @ v, merge_heads, then self.proj")


def mistake_gradients(params, D, H, heads, x, direction, dtype=None):  # noqa: N803 (the text's names)
    """{mistake: the gradient of qkv.weight of (block(x) * direction).sum() for a block making it}."""
    T = x.shape[1]
    forbidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    gradients = {}
    for mistake in MISTAKES:
        wrong = multihead_reference(params, D, H, heads, dtype=dtype, mistake=mistake)
        (wrong(x, x, x, attn_mask=forbidden, need_weights=False)[0] * direction).sum().backward()
        gradients[mistake] = wrong.in_proj_weight.grad
    return gradients
