"""Chapter 11's references (the grader's side only): PyTorch's `F.rms_norm` and `F.scaled_dot_product_attention`
(with `enable_gqa`), `torch.logsumexp`, rotary positions written with complex numbers, ALiBi's bias and SwiGLU
from their formulas, and the hidden tests' comparisons with them.

The property checks come first, from `course/modern_decoder_checks.py` (the visible tests' own), so code that
breaks a property fails with that property's message; then every output is compared with the references, and
a module also on the weights it was built with (read, never written).

One mistake, one loss: the attention is judged around the student's own `apply_rope` (whatever it computes:
Part B's tests judge it) and with the grader's own rotary tables loaded into its buffers as well as with its
own; the tiled attention against full attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from nboracle import load_tensors, read_parameters, read_tensors

from course.checks import attempt, check_close, check_true
from course.modern_decoder_checks import (
    MODEL_HINT,
    RMS_HINT,
    ROPE_HINT,
    TABLES_HINT,
    TILED_HINT,
    check_alibi,
    check_apply_rope,
    check_gqa_outputs,
    check_modern_block,
    check_modern_gpt,
    check_rms_norm,
    check_rmsnorm_module,
    check_rope_relative,
    check_rope_tables,
    check_swiglu,
    check_tiled,
    check_tiled_memory,
    check_tiled_skips,
    gqa_state,
    modern_gpt_state,
    swiglu_state,
    tiled_inputs,
    tiled_pair,
)
from instructor.references.tiny_gpt import judge_pre_norm

# ---------------------------------------------------------------- Part A: RMSNorm


def _rms_mistakes(x, weight, eps):
    x, weight = x.double(), weight.double()
    mean_sq = x.pow(2).mean(dim=-1, keepdim=True)
    causes = {
        "the mean is subtracted first (that is LayerNorm without its bias; RMSNorm only rescales)":
            F.layer_norm(x, x.shape[-1:], weight, None, eps),
        "eps is added after the square root instead of under it": x / (mean_sq.sqrt() + eps) * weight,
        "the weight is not applied": x / (mean_sq + eps).sqrt(),
        "the mean of the squares is taken over every entry instead of over the last axis":
            x / (x.pow(2).mean() + eps).sqrt() * weight,
        "the squares are averaged over the first axis instead of the last (the features)":
            x / (x.pow(2).mean(dim=0, keepdim=True) + eps).sqrt() * weight,
        "the root mean square is taken without eps": x / mean_sq.sqrt() * weight,
        "each row is divided by its mean square, not its root mean square: the square root is missing":
            x / (mean_sq + eps) * weight,
    }
    if x.dim() > 2:
        causes["the squares are averaged over the positions (axis -2) instead of the features (axis -1)"] = (
            x / (x.pow(2).mean(dim=-2, keepdim=True) + eps).sqrt() * weight)
    return causes


def _judge_rms(what, out, x, weight, eps, module=False):
    expected = F.rms_norm(x.double(), x.shape[-1:], weight.double(), eps)
    causes = _rms_mistakes(x, weight, eps)
    if module:  # first: the module's own eps not handed on
        causes = {"the module's eps is not passed on to rms_norm (the default 1e-6 is used whatever eps is)":
                  F.rms_norm(x.double(), x.shape[-1:], weight.double(), 1e-6), **causes}
    check_close(what, out, expected, atol=1e-5, likely_causes=causes, hint=RMS_HINT)


def compare_rms_norm(rms_norm, shape, seed, eps=1e-6, scale=2.0):
    """check_rms_norm, then rms_norm(x, weight, eps) compared with F.rms_norm."""
    x, weight, out = check_rms_norm(rms_norm, shape, seed, eps, scale)
    _judge_rms(f"rms_norm(x {tuple(shape)}, weight, eps={eps})", out, x, weight, eps)


def compare_rmsnorm_module(RMSNorm, width, eps, seed, scale=0.5):  # noqa: N803 (the class under test)
    """check_rmsnorm_module, then the module compared with F.rms_norm on the test's weight and eps; then a module
    as built, on the weight it was built with."""
    x, weight, out = check_rmsnorm_module(RMSNorm, width, eps, seed, scale)
    _judge_rms(f"RMSNorm({width}, eps={eps})(x)", out, x, weight, eps, module=True)
    norm = attempt(f"RMSNorm({width}, eps={eps})", RMSNorm, width, eps)
    weight = read_parameters(norm)["weight"]
    out = attempt(f"RMSNorm({width}, eps={eps})(x), as built", norm, x, hint="forward: rms_norm(x, self.weight, self.eps)")
    _judge_rms(f"RMSNorm({width}, eps={eps})(x), as built", out, x, weight, eps, module=True)


# ---------------------------------------------------------------- Part B: rotary positions and ALiBi


def reference_tables(length, d_head, base=10000.0, first=0, exponent=2.0):
    """cos and sin (length, d_head), float64: angle p * base^(-exponent i / d_head), halves repeated."""
    freqs = base ** (-exponent * torch.arange(d_head // 2, dtype=torch.float64) / d_head)  # (d/2,)
    angles = torch.outer(torch.arange(first, first + length, dtype=torch.float64), freqs)  # (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d)
    return angles.cos(), angles.sin()


def reference_rotation(x, cos, sin):
    """x (..., T, d) with each pair (i, i + d/2) read as the complex number x_i + j x_{i+d/2} and multiplied by
    e^{j angle_i}, the angle read from the tables' first half: the rotation, written with complex numbers."""
    half = x.shape[-1] // 2
    angles = torch.atan2(sin[..., :half].double(), cos[..., :half].double())  # (T, d/2)
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * torch.polar(torch.ones_like(angles), angles)
    return torch.cat([z.real, z.imag], dim=-1)


def compare_rope_tables(rope_tables, length, d_head, base=10000.0):
    """check_rope_tables, then the tables compared with the formula."""
    cos, sin = check_rope_tables(rope_tables, length, d_head, base)
    what = f"rope_tables({length}, {d_head}, base={base})"
    wrong = {
        "positions start at 1 instead of 0": reference_tables(length, d_head, base, first=1),
        "the frequencies are base ** (-i / d_head) instead of base ** (-2 i / d_head)":
            reference_tables(length, d_head, base, exponent=1.0),
        "the base given is ignored (10000 used whatever base is)": reference_tables(length, d_head, 10000.0),
    }
    expected = reference_tables(length, d_head, base)
    wrong["the angles have the wrong sign (sin negated)"] = (expected[0], -expected[1])
    for name, index in (("cos", 0), ("sin", 1)):
        check_close(f"the {name} of {what}", (cos, sin)[index], expected[index], atol=1e-5,
                    likely_causes={cause: tables[index] for cause, tables in wrong.items()}, hint=TABLES_HINT)


def _interleaved(x, cos, sin):
    """The rotation with neighbours paired ((0, 1), (2, 3), ...), on half-split tables: a likely mistake."""
    x = x.double()
    rotated = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)
    return x * cos.double() + rotated * sin.double()


def compare_apply_rope(apply_rope, shape, seed, dtype=torch.float32):
    """check_apply_rope, then the rotation compared with complex numbers."""
    x, (cos, sin), out = check_apply_rope(apply_rope, shape, seed, dtype)
    half = shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1).double()
    causes = {
        "every pair is turned the other way (the sign of rotate_half or of sin is flipped)":
            reference_rotation(x, cos, -sin),
        "neighbours (i, i + 1) are paired instead of i with i + d/2": _interleaved(x, cos, sin),
        "cos and sin are swapped": x.double() * sin.double() + rotated * cos.double(),
    }
    check_close(f"apply_rope(x {tuple(shape)}, cos, sin)", out, reference_rotation(x, cos, sin),
                atol=1e-5 if dtype == torch.float32 else 1e-10, likely_causes=causes, hint=ROPE_HINT)


def relative_scores(q, k, pairs, base=10000.0, exponent=2.0, turn=1.0):
    """q^T R((n - m) theta) k for each (m, n): each pair (i, i + d/2) read as a complex number, the key's turned
    against the query's by the difference of the angles (`turn` -1: the other way)."""
    half = q.shape[-1] // 2
    theta = base ** (-exponent * torch.arange(half, dtype=torch.float64) / q.shape[-1])  # (d/2,)
    zq = torch.complex(q[:half].double(), q[half:].double())
    zk = torch.complex(k[:half].double(), k[half:].double())
    gap = torch.tensor([n - m for m, n in pairs], dtype=torch.float64)[:, None] * theta * turn  # (P, d/2)
    return (zq.conj() * zk * torch.polar(torch.ones_like(gap), gap)).real.sum(dim=-1)


def compare_rope_relative(rope_tables, apply_rope, d_head, pairs, shift, seed):
    """check_rope_relative, then every score compared with q^T R((n - m) theta) k written with complex numbers."""
    q, k, asked, scores = check_rope_relative(rope_tables, apply_rope, d_head, pairs, shift, seed)
    causes = {
        "every pair is turned the other way (the sign of rotate_half or of sin is flipped)":
            relative_scores(q, k, asked, turn=-1.0),
        "the frequencies are base ** (-i / d_head) instead of base ** (-2 i / d_head)":
            relative_scores(q, k, asked, exponent=1.0),
    }
    check_close(f"the scores of a query and a key turned by rope_tables and apply_rope at {len(asked)} pairs of "
                "positions", scores, relative_scores(q, k, asked), atol=1e-4, likely_causes=causes,
                hint="the score of the query at m and the key at n is q^T R((n - m) theta) k: each pair (i, i + d/2) "
                "turned by p * base ** (-2 i / d_head)")


def reference_alibi(heads, length, slopes=None, distance=lambda i, j: i - j):
    """ALiBi's bias (heads, length, length), float64: -slope_h * distance(i, j), slope_h = 2^(-8 (h + 1) / heads)."""
    if slopes is None:
        slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1, dtype=torch.float64) / heads)  # (H,)
    i = torch.arange(length, dtype=torch.float64)[:, None]
    j = torch.arange(length, dtype=torch.float64)[None, :]
    return -slopes[:, None, None] * distance(i, j)  # (H, T, T)


def compare_alibi(alibi_bias, heads, length):
    """check_alibi, then the bias compared with its formula."""
    bias = check_alibi(alibi_bias, heads, length)
    h = torch.arange(heads, dtype=torch.float64)
    causes = {
        "the slopes start at h = 0 (2 ** 0 = 1 for the first head) instead of h = 1":
            reference_alibi(heads, length, slopes=2.0 ** (-8.0 * h / heads)),
        "the bias is -slope * |i - j|; it is -slope * (i - j), positive above the diagonal (the causal mask removes "
        "those pairs)": reference_alibi(heads, length, distance=lambda i, j: (i - j).abs()),
        "the slopes are 2 ** -(h + 1), not spread over 8 by the number of heads":
            reference_alibi(heads, length, slopes=2.0 ** -(h + 1)),
    }
    check_close(f"alibi_bias({heads}, {length})", bias, reference_alibi(heads, length), atol=1e-6,
                likely_causes=causes, hint="bias[h, i, j] = -slope_h * (i - j), slope_h = 2 ** (-8 (h + 1) / heads) "
                "for h = 0..heads-1")


# ---------------------------------------------------------------- Part C: SwiGLU


def reference_swiglu(state, x, gate=F.silu, gated="w1"):
    x = x.double()
    a, b = x @ state["w1.weight"].double().T, x @ state["w3.weight"].double().T
    hidden = gate(a) * b if gated == "w1" else a * gate(b)
    return hidden @ state["w2.weight"].double().T


def _judge_swiglu(what, out, x, state):
    causes = {
        "SiLU is applied to the w3 branch instead of the w1 branch": reference_swiglu(state, x, gated="w3"),
        "GELU is used instead of SiLU": reference_swiglu(state, x, gate=F.gelu),
        "ReLU is used instead of SiLU": reference_swiglu(state, x, gate=torch.relu),
        "the gate is missing: w2(silu(w1(x))) without the product with w3(x)":
            F.silu(x.double() @ state["w1.weight"].double().T) @ state["w2.weight"].double().T,
        "the two branches are added, silu(w1(x)) + w3(x), where the gate multiplies them":
            (F.silu(x.double() @ state["w1.weight"].double().T) + x.double() @ state["w3.weight"].double().T)
            @ state["w2.weight"].double().T,
        "SiLU is applied after the product (silu(w1(x) * w3(x)))":
            F.silu((x.double() @ state["w1.weight"].double().T) * (x.double() @ state["w3.weight"].double().T))
            @ state["w2.weight"].double().T,
    }
    check_close(what, out, reference_swiglu(state, x), atol=1e-4, likely_causes=causes,
                hint="w2(silu(w1(x)) * w3(x)): SiLU on the w1 branch, multiplied entry by entry with the w3 branch")


def compare_swiglu(SwiGLU, width, hidden, seed):  # noqa: N803 (the class under test)
    """check_swiglu, then the output compared with the formula on the test's weights; then a module as built."""
    _, x, out = check_swiglu(SwiGLU, width, hidden, seed)
    _judge_swiglu(f"SwiGLU({width}, {hidden})(x)", out, x, swiglu_state(width, hidden, seed))
    torch.manual_seed(seed)
    ffn = attempt(f"SwiGLU({width}, {hidden})", SwiGLU, width, hidden)
    state = read_parameters(ffn)
    out = attempt(f"SwiGLU({width}, {hidden})(x), as built", ffn, x, hint="w2(silu(w1(x)) * w3(x))")
    _judge_swiglu(f"SwiGLU({width}, {hidden})(x), with the weights it was built with", out, x, state)


# ---------------------------------------------------------------- Part D: grouped-query attention


def own_rope(apply_rope, d_head):
    """The student's apply_rope as a function of (x, cos, sin) (whatever it computes: Part B's tests judge it),
    refused when it gives two different inputs the same answer: the attention is judged around it."""
    def rope(x, cos, sin):
        return attempt("apply_rope(q, cos, sin) inside the attention", apply_rope, x, cos, sin,
                       hint="make the test of apply_rope pass first")

    gen = torch.Generator().manual_seed(d_head)
    cos, sin = reference_tables(3, d_head)
    probes = [torch.randn(1, 1, 3, d_head, generator=gen) for _ in range(2)]
    first, second = (rope(p, cos.float(), sin.float()) for p in probes)
    check_true(not torch.allclose(first, second), "apply_rope gives two different inputs the same answer, so no "
               "attention built on it can be judged: make the test of apply_rope pass first")
    return rope


def reference_gqa(state, x, heads, kv_heads, cos, sin, rope, causal=True, scale=None, repeat="interleave",
                  rotary=True, swap_kv=False):
    """Grouped-query attention on F.scaled_dot_product_attention(enable_gqa=True): the test's weights, its
    tables, `rope` (the student's apply_rope) on q and k."""
    batch, length, width = x.shape
    d_head = width // heads
    with torch.no_grad():
        q = (x @ state["q_proj.weight"].T).view(batch, length, heads, d_head).transpose(1, 2)  # (B, H, T, d)
        k, v = (t.view(batch, length, kv_heads, d_head).transpose(1, 2)  # (B, G, T, d)
                for t in (x @ state["kv_proj.weight"].T).split(kv_heads * d_head, dim=-1))
        if swap_kv:
            k, v = v, k
        if rotary in (True, "q"):
            q = rope(q, cos[:length], sin[:length])
        if rotary in (True, "k"):
            k = rope(k, cos[:length], sin[:length])
        if repeat == "tile":  # the mistake: head h reads key/value head h % kv_heads
            group = heads // kv_heads
            k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        y = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, scale=scale,
                                           enable_gqa=repeat == "interleave")  # (B, H, T, d)
        return y.transpose(1, 2).reshape(batch, length, width) @ state["proj.weight"].T


def _judge_gqa(what, out, x, state, heads, kv_heads, tables, rope):
    width = x.shape[-1]
    cos, sin = tables
    causes = {
        "each key/value head is repeated with .repeat (head h reads key head h % kv_heads); query heads "
        "h * group .. (h + 1) * group - 1 share key/value head h: repeat_interleave(group, dim=1)":
            reference_gqa(state, x, heads, kv_heads, cos, sin, rope, repeat="tile"),
        "the causal mask is not applied (every position reads the future)":
            reference_gqa(state, x, heads, kv_heads, cos, sin, rope, causal=False),
        "the scores are divided by sqrt(width) instead of sqrt(d_head)":
            reference_gqa(state, x, heads, kv_heads, cos, sin, rope, scale=1 / math.sqrt(width)),
        "the scores are not divided by sqrt(d_head)": reference_gqa(state, x, heads, kv_heads, cos, sin, rope, scale=1.0),
        "no rotary positions are applied to q and k": reference_gqa(state, x, heads, kv_heads, cos, sin, rope,
                                                                    rotary=False),
        "k and v are taken from kv_proj's halves the other way round (keys first, then values)":
            reference_gqa(state, x, heads, kv_heads, cos, sin, rope, swap_kv=True),
        "the keys are not rotated: apply_rope to k as well as to q": reference_gqa(state, x, heads, kv_heads, cos,
                                                                                    sin, rope, rotary="q"),
        "the queries are not rotated: apply_rope to q as well as to k": reference_gqa(state, x, heads, kv_heads, cos,
                                                                                       sin, rope, rotary="k"),
    }
    check_close(what, out, reference_gqa(state, x, heads, kv_heads, cos, sin, rope), atol=1e-4,
                likely_causes=causes, hint="q = q_proj(x), k and v the first and second half of kv_proj(x), heads "
                "split as (B, heads, T, d) and (B, kv_heads, T, d); apply_rope(q and k, cos[:T], sin[:T]); "
                "repeat_interleave the key/value heads; causal softmax(q k^T / sqrt(d)) v; merge; proj")


def compare_gqa(GroupedQueryAttention, apply_rope, batch, length, width, heads, kv_heads, seed):  # noqa: N803
    """check_gqa_outputs, then the attention compared with F.scaled_dot_product_attention(enable_gqa=True) around
    the student's own apply_rope: with its own tables, with the grader's tables loaded, and as built."""
    d_head = width // heads
    rope = own_rope(apply_rope, d_head)
    attention, x, out = check_gqa_outputs(GroupedQueryAttention, batch, length, width, heads, kv_heads, seed)
    what = f"GroupedQueryAttention({width}, {heads}, {kv_heads}, {length + 2})"
    state = gqa_state(width, heads, kv_heads, seed)
    own = read_tensors(attention, ["cos", "sin"])
    _judge_gqa(f"{what}(x)", out, x, state, heads, kv_heads, (own["cos"], own["sin"]), rope)
    tables = tuple(t.float() for t in reference_tables(length + 2, d_head))
    load_tensors(attention, {"cos": tables[0], "sin": tables[1]})
    out = attempt(f"{what}(x)", attention, x, hint="read the rotary tables from the buffers cos and sin")
    _judge_gqa(f"{what}(x), with rotary tables the test loaded", out, x, state, heads, kv_heads, tables, rope)
    torch.manual_seed(seed)
    attention = attempt(what, GroupedQueryAttention, width, heads, kv_heads, length + 2)
    state = read_parameters(attention)
    own = read_tensors(attention, ["cos", "sin"])
    out = attempt(f"{what}(x), as built", attention, x, hint="read the rotary tables from the buffers cos and sin")
    _judge_gqa(f"{what}(x), with the weights it was built with", out, x, state, heads, kv_heads,
               (own["cos"], own["sin"]), rope)


# ---------------------------------------------------------------- Part E: attention in tiles


def _scores(q, k, causal, scale=True):
    s = q.double() @ k.double().transpose(-2, -1)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    if causal:
        T = q.shape[-2]  # noqa: N806
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return s


def _tiled_mistake(q, k, v, block, causal, rescale=True, mask_diagonal=True, divide=True):
    """The tiled algorithm with one thing missing (for naming a mistake): no rescaling, no mask inside the
    diagonal block, or no division by the running sum at the end."""
    q, k, v = q.double(), k.double(), v.double()
    T, d = q.shape[-2], q.shape[-1]  # noqa: N806
    outs, lses = [], []
    for qs in range(0, T, block):
        qb = q[..., qs:qs + block, :] / math.sqrt(d)
        rows = torch.arange(qs, min(qs + block, T))
        m = torch.full(qb.shape[:-1], float("-inf"), dtype=torch.float64)
        total = torch.zeros_like(m)
        o = torch.zeros(*qb.shape[:-1], v.shape[-1], dtype=torch.float64)
        for ks in range(0, T, block):
            if causal and ks > rows[-1]:
                break
            s = qb @ k[..., ks:ks + block, :].transpose(-2, -1)
            cols = torch.arange(ks, min(ks + block, T))
            if causal and (mask_diagonal or ks + block <= qs):
                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - new[..., None])
            alpha = torch.exp(m - new) if rescale else torch.ones_like(m)
            total, o, m = total * alpha + p.sum(-1), o * alpha[..., None] + p @ v[..., ks:ks + block, :], new
        outs.append(o / total[..., None] if divide else o)
        lses.append(m + total.log())
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def _judge_tiled(what, out, lse, q, k, v, block, causal):
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    no_rescale = _tiled_mistake(q, k, v, block, causal, rescale=False)
    causes = {
        "the running sum and output are not rescaled by exp(m_old - m_new) when the maximum grows": no_rescale[0],
        "the output is the accumulated O, not divided by the running sum l at the end (out = O / l)":
            _tiled_mistake(q, k, v, block, causal, divide=False)[0],
        "the scores are not divided by sqrt(d)": F.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), is_causal=causal, scale=1.0),
    }
    if causal:
        causes["the diagonal block is not masked: inside it, key j > query i must be -inf"] = _tiled_mistake(
            q, k, v, block, causal, mask_diagonal=False)[0]
        causes["the causal mask is not applied"] = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    check_close(f"the output of {what}", out, expected, atol=1e-4, likely_causes=causes, hint=TILED_HINT)
    scores = _scores(q, k, causal)
    m = scores.amax(-1)
    lse_causes = {
        "lse is the running maximum m alone; add log(l)": m,
        "lse is log(l) alone; add the running maximum m back": torch.logsumexp(scores, -1) - m,
        "lse is taken of the scores before the division by sqrt(d)": torch.logsumexp(_scores(q, k, causal, False), -1),
        "the running sum is not rescaled by exp(m_old - m_new) when the maximum grows": no_rescale[1],
    }
    check_close(f"the lse of {what}", lse, torch.logsumexp(scores, -1), atol=1e-4, likely_causes=lse_causes,
                hint="lse = m + log(l), the log of the softmax's denominator of the scaled scores, per query")


def compare_tiled(tiled_attention, shape, block_size, causal, seed, dtype=torch.float32):
    """check_tiled, then the output compared with F.scaled_dot_product_attention and lse with torch.logsumexp."""
    q, k, v, out, lse = check_tiled(tiled_attention, shape, block_size, causal, seed, dtype)
    what = f"tiled_attention(q {tuple(shape)}, k, v, block_size={block_size}, causal={causal})"
    _judge_tiled(what, out, lse, q, k, v, block_size, causal)


def compare_tiled_far_below(tiled_attention, shape, block_size, causal, seed):
    """Every score of every row far below 0 (about -225 / sqrt(d), past float32's exp, which gives 0 below -104):
    exp(score - m) underflows to 0 for every key unless the running maximum m follows the scores down from -inf.
    The output and lse as in compare_tiled."""
    q, k, v = tiled_inputs(shape, seed)
    q[..., 0], k[..., 0] = 15.0, -15.0  # q_i . k_j = -225 + a small rest, for every pair
    what, out, lse = tiled_pair(tiled_attention, q, k, v, block_size, causal)
    check_true(bool(torch.isfinite(out).all() and torch.isfinite(lse).all()),
               f"{what} gives NaN or infinite values when every score lies far below 0: start the running maximum "
               "at -inf, not at 0 (from 0, exp(score - m) underflows to 0 for every key and l stays 0)")
    _judge_tiled(what, out, lse, q, k, v, block_size, causal)


def compare_tiled_skips(tiled_attention, shape, block_size, seed):
    """check_tiled_skips, then the output rows before the NaN compared with causal attention over the positions
    before it: skipping is only worth something when the answer is right (the lse's values are the values test's,
    here only its finite rows are asked for)."""
    q, k, v, cut, out, _ = check_tiled_skips(tiled_attention, shape, block_size, seed)
    what = f"tiled_attention(block_size={block_size}, causal=True)"
    first = (q[..., :cut, :], k[..., :cut, :], v[..., :cut, :])  # the positions before the NaN
    expected = F.scaled_dot_product_attention(*(t.double() for t in first), is_causal=True)
    check_close(f"the output rows before position {cut} of {what}", out[..., :cut, :], expected, atol=1e-4,
                hint="make the test of the tiled attention's values pass first")


def compare_tiled_memory(tiled_attention, shape, block_size, causal, seed):
    """check_tiled_memory, then the output compared with F.scaled_dot_product_attention: a small tensor is only
    worth something when the answer is right."""
    q, k, v, out = check_tiled_memory(tiled_attention, shape, block_size, causal, seed)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    check_close(f"the output of tiled_attention at T = {shape[-2]}, block_size={block_size}, causal={causal}", out,
                expected, atol=1e-4, hint="make the test of the tiled attention's values pass first")


# ---------------------------------------------------------------- Part F: the block and the model


def _refuse_constant(what, part, probes, test):
    first, second = (part(h) for h in probes)
    check_true(not torch.allclose(first, second), f"{what} gives two different inputs the same answer, so nothing "
               f"built on it can be judged: make the test of {test} pass first")


def own_block_parts(what, block, width):
    """The block's own norms, attention and FFN as functions (whatever they compute: Parts A, C and D judge them),
    refused when one gives two different inputs the same answer: the block is judged around the parts it holds."""
    def part(name, test):
        return lambda h: attempt(f"{what}.{name}", getattr(block, name), h, hint=f"make the test of {test} pass first")

    tests = {"norm1": "RMSNorm", "norm2": "RMSNorm", "attention": "GroupedQueryAttention", "ffn": "SwiGLU"}
    parts = {name: part(name, test) for name, test in tests.items()}
    gen = torch.Generator().manual_seed(width)
    probes = [torch.randn(1, 3, width, generator=gen) for _ in range(2)]
    for name, test in tests.items():
        _refuse_constant(f"{what}.{name}", parts[name], probes, test)
    return parts


def _judge_modern_block(what, name, block, out, x):
    """The block's output wired as chapter 10's, around its own norms, attention and FFN."""
    parts = own_block_parts(name, block, x.shape[-1])
    judge_pre_norm(what, out, x, parts["attention"], parts["ffn"], parts["norm1"], parts["norm2"])


def compare_modern_block(ModernBlock, batch, length, width, heads, kv_heads, hidden, seed):  # noqa: N803
    """check_modern_block, then the block against its own parts wired as Part F says: with the test's norm weights,
    then as built."""
    block, x, out = check_modern_block(ModernBlock, batch, length, width, heads, kv_heads, hidden, seed)
    what = f"ModernBlock({width}, {heads}, {kv_heads}, {hidden}, {length + 2})"
    _judge_modern_block(f"{what}(x)", what, block, out, x)
    torch.manual_seed(seed)
    built = attempt(what, ModernBlock, width, heads, kv_heads, hidden, length + 2)
    out = attempt(f"{what}(x), as built", built, x, hint="h = x + attention(norm1(x)), then out = h + ffn(norm2(h))")
    _judge_modern_block(f"{what}(x), as built", f"{what} as built", built, out, x)


def own_model_parts(what, model, layers, width):
    """The model's own blocks (in order) and final norm as functions (whatever they compute: the tests of
    ModernBlock and RMSNorm judge them), refused when one gives two different inputs the same answer."""
    held = [attempt(f"{what}.blocks[{i}]", lambda i=i: model.blocks[i], hint="make the test of ModernBlock pass first")
            for i in range(layers)]
    final = attempt(f"{what}.norm", lambda: model.norm, hint="make the test of RMSNorm pass first")

    def run(name, module, test):
        return lambda h: attempt(f"{what}.{name}(x)", module, h, hint=f"make the test of {test} pass first")

    blocks = [run(f"blocks[{i}]", block, "ModernBlock") for i, block in enumerate(held)]
    norm = run("norm", final, "RMSNorm")
    gen = torch.Generator().manual_seed(width)
    probes = [torch.randn(1, 3, width, generator=gen) for _ in range(2)]
    for i, block in enumerate(blocks):
        _refuse_constant(f"{what}.blocks[{i}]", block, probes, "ModernBlock")
    _refuse_constant(f"{what}.norm", norm, probes, "RMSNorm")
    return blocks, norm


def _judge_modern_gpt(what, name, model, logits, loss, idx, targets, state, layers):
    blocks, norm = own_model_parts(name, model, layers, state["token_embedding.weight"].shape[1])
    head = state["head.weight"]

    def stack(x):
        for block in blocks:
            x = block(x)
        return x

    with torch.no_grad():
        x = stack(state["token_embedding.weight"][idx])
        expected = norm(x) @ head.T
        causes = {"the final norm is missing (the head must read norm(x))": x @ head.T,
                  "the blocks are skipped": norm(state["token_embedding.weight"][idx]) @ head.T}
    check_close(f"the logits of {what}", logits, expected, atol=1e-4, likely_causes=causes,
                hint="token_embedding(idx), every block in order, norm, then head; no position embedding (the "
                "attention turns q and k by their positions)")
    with torch.no_grad():
        reference = F.cross_entropy(expected.double().flatten(0, 1), targets.flatten())
    check_close(f"the loss of {what}", loss, reference, atol=1e-4,
                hint="F.cross_entropy(logits.reshape(B * T, vocab), targets.reshape(B * T)), the mean over all positions")


def compare_modern_gpt(ModernGPT, vocab, width, heads, kv_heads, layers, max_len, batch, length, seed):  # noqa: N803
    """check_modern_gpt, then the logits against the model's own blocks and norm with the test's embedding and head,
    and the loss against their cross-entropy; then a model as built."""
    model, idx, targets, logits, loss = check_modern_gpt(ModernGPT, vocab, width, heads, kv_heads, layers, max_len,
                                                         batch, length, seed)
    what = f"ModernGPT({vocab}, {width}, {heads}, {kv_heads}, {layers}, {max_len})"
    _judge_modern_gpt(what, what, model, logits, loss, idx, targets, modern_gpt_state(vocab, width, seed), layers)
    torch.manual_seed(seed)
    built = attempt(what, ModernGPT, vocab, width, heads, kv_heads, layers, max_len)
    state = read_parameters(built)
    out = attempt(f"{what}(idx, targets), as built", built, idx, targets, hint=MODEL_HINT)
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx, targets) must return (logits, loss)")
    _judge_modern_gpt(f"{what}, as built", f"{what} as built", built, out[0], out[1], idx, targets, state, layers)
