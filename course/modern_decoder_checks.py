"""The checks of chapter 11 (today's decoder block), which its graded test cells call.

Each check is handed the student's function or class and the test's inputs, and checks what the exercise
promises of the result: shapes, an RMS of one, rotations that keep every pair's length, the layout of the
tables, the bias of ALiBi being zero on the diagonal, the parameters a module holds by the names the text
gives, a tiled attention that never holds a T x T tensor. The graded tests also compare every output with
the grader's own computations (PyTorch's `F.rms_norm`, `F.scaled_dot_product_attention`, `torch.logsumexp`,
rotations written with complex numbers), on the grader's side. Nothing here computes a norm's, a rotation's,
a bias's, an attention's or a feed-forward layer's answer.
"""

from __future__ import annotations

import torch
from nboracle import largest_tensor, module_tensors, read_parameters

from .checks import attempt, check_close, check_shape, check_true
from .module_state import load_state


def _draw(seed, *shape, scale=1.0, dtype=torch.float32):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _held(module):
    """{name: (kind, shape)} of every tensor a module holds, read by the grader's accessor."""
    return {row["name"]: (row["kind"], tuple(row["shape"])) for row in module_tensors(module)}


def check_exact_tensors(what, module, expected, hint, judged_elsewhere=()):
    """The module holds exactly the tensors of `expected` ({name: (kind, shape)}), no bias, nothing else (inside the
    submodules of `judged_elsewhere`, whose own tests judge them, only what is expected is asked)."""
    held = _held(module)
    for name, (kind, shape) in expected.items():
        check_true(name in held, f"{what} holds no {kind} {name}: {hint}")
        check_true(held[name][0] == kind, f"{what}.{name} is a {held[name][0]}, expected a {kind}: {hint}")
        check_true(held[name][1] == shape, f"{what}.{name} has shape {held[name][1]}, expected {shape}: {hint}")
    extra = sorted(name for name in set(held) - set(expected) if not name.startswith(tuple(judged_elsewhere)))
    check_true(not extra, f"{what} holds {extra[0] if extra else ''} besides what the text names: {hint}")


# ---------------------------------------------------------------- Part A: RMSNorm

RMS_HINT = "x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, with no mean subtracted"
# why rms_norm raises, nearly always: the mean loses its axis, and (..., D) meets (...,)
RMS_RAISES = ("x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, with no mean subtracted; keepdim=True on the "
              "mean keeps the averaged axis, so that (..., D) is divided by (..., 1)")


def check_rms_norm(rms_norm, shape, seed, eps=1e-6, scale=2.0):
    """rms_norm(x, weight, eps) keeps the shape; with unit weights and a small eps every row has a root mean square
    of about 1. Returns the test's x and weight (x drawn at `scale`) and the output with them and `eps`."""
    x = _draw(seed, *shape, scale=2.0)
    ones = torch.ones(shape[-1])
    out = attempt(f"rms_norm(x {tuple(shape)}, weight, eps=1e-06)", rms_norm, x, ones, 1e-6, hint=RMS_RAISES)
    check_shape(f"rms_norm(x {tuple(shape)}, ...)", out, shape, hint="the norm keeps the shape of x")
    rms = out.double().pow(2).mean(dim=-1).sqrt()
    mean_square = x.double().pow(2).mean(dim=-1)
    check_close("the root mean square of each row of rms_norm(x, ones)", rms, torch.ones(shape[:-1], dtype=torch.float64),
                atol=1e-3, rtol=0, hint="divide every row by its own root mean square, over the last axis (the features)",
                likely_causes={"each row is divided by its mean square, not its root mean square: the square root is "
                               "missing": mean_square.sqrt() / (mean_square + 1e-6)})
    x, weight = _draw(seed + 2, *shape, scale=scale), 1 + _draw(seed + 1, shape[-1], scale=0.5)
    out = attempt(f"rms_norm(x {tuple(shape)}, weight, eps={eps})", rms_norm, x, weight, eps, hint=RMS_RAISES)
    check_shape(f"rms_norm(x {tuple(shape)}, weight)", out, shape, hint="the norm keeps the shape of x")
    return x, weight, out


def check_rmsnorm_module(RMSNorm, width, eps, seed, scale=0.5):  # noqa: N803 (the class under test)
    """RMSNorm(width, eps) holds one parameter, weight (width,), which starts at ones; with the test's weight it
    keeps the shape. Returns x, the test's weight and the output."""
    what = f"RMSNorm({width}, eps={eps})"
    norm = attempt(what, RMSNorm, width, eps)
    check_exact_tensors(what, norm, {"weight": ("parameter", (width,))},
                        "one nn.Parameter named weight of shape (width,), and no bias")
    start = read_parameters(norm)["weight"]
    check_true(torch.equal(start.float(), torch.ones(width)), f"{what}.weight does not start at ones: "
               "torch.ones(width), so a new norm only rescales the rows")
    weight = 1 + _draw(seed, width, scale=0.5)
    load_state(what, norm, {"weight": weight})
    x = _draw(seed + 1, 2, 3, width, scale=scale)
    out = attempt(f"{what}(x)", norm, x, hint="forward: rms_norm(x, self.weight, self.eps)")
    check_shape(f"{what}(x)", out, (2, 3, width), hint="the norm keeps the shape of x")
    return x, weight, out


# ---------------------------------------------------------------- Part B: rotary positions and ALiBi

TABLES_HINT = ("angle[p, i] = p * base ** (-2 i / d_head) for p = 0..length-1 and i = 0..d_head/2-1; "
               "cos and sin of the angles, each half repeated: torch.cat([angles, angles], dim=-1)")
ROPE_HINT = ("x * cos + rotate_half(x) * sin, where rotate_half(x) = torch.cat([-x2, x1], dim=-1) for the halves "
             "x1 = x[..., :d/2] and x2 = x[..., d/2:]")


def check_rope_tables(rope_tables, length, d_head, base=10000.0):
    """rope_tables(length, d_head, base) gives (cos, sin), each (length, d_head); position 0 is not turned;
    cos^2 + sin^2 = 1; the two halves of every row are the same angles (half-split pairing). Returns them."""
    what = f"rope_tables({length}, {d_head}, base={base})"
    result = attempt(what, rope_tables, length, d_head, base, hint=TABLES_HINT)
    check_true(isinstance(result, (tuple, list)) and len(result) == 2, f"{what} must return the pair (cos, sin)")
    cos, sin = result
    check_shape(f"the cos of {what}", cos, (length, d_head), hint="one row per position, one column per dimension")
    check_shape(f"the sin of {what}", sin, (length, d_head), hint="one row per position, one column per dimension")
    cos, sin = cos.double(), sin.double()
    check_close(f"cos^2 + sin^2 of {what}", cos ** 2 + sin ** 2, torch.ones(length, d_head, dtype=torch.float64),
                atol=1e-5, hint="cos and sin are of the same angles")
    check_close(f"the cos of {what} at position 0", cos[0], torch.ones(d_head, dtype=torch.float64), atol=1e-6,
                hint="the angle is the position times the frequency: position 0 is not turned (positions start at 0)")
    half = d_head // 2
    check_true(torch.allclose(cos[:, :half], cos[:, half:]) and torch.allclose(sin[:, :half], sin[:, half:]),
               f"the two halves of each row of {what} hold different angles: dimension i is paired with i + "
               "d_head/2, so both get the angle of frequency i (torch.cat([angles, angles], dim=-1), not "
               "repeat_interleave, which pairs neighbours)")
    return cos, sin


def random_tables(length, d_head, seed):
    """cos and sin of random angles (not rotary positions), laid out half-split: to test a rotation alone."""
    angles = _draw(seed, length, d_head // 2, scale=3.0, dtype=torch.float64)
    both = torch.cat([angles, angles], dim=-1)  # (T, d): the halves turned alike
    return torch.cos(both), torch.sin(both)


def check_apply_rope(apply_rope, shape, seed, dtype=torch.float32):
    """apply_rope(x, cos, sin) keeps the shape, leaves x as it is at angle 0, and keeps the length of every pair
    (i, i + d/2). Returns x, the tables used and the output."""
    B, H, T, d = shape  # noqa: N806 (the shapes' usual names)
    x = _draw(seed, *shape, dtype=dtype)
    what = f"apply_rope(x {tuple(shape)}, cos, sin)"
    zero = torch.ones(T, d, dtype=dtype), torch.zeros(T, d, dtype=dtype)
    out = attempt(what, apply_rope, x, *zero, hint=ROPE_HINT)
    check_shape(what, out, shape, hint="a rotation keeps the shape of x")
    check_close(f"{what} with every angle 0", out, x, atol=1e-6, hint="at angle 0 (cos 1, sin 0) nothing turns")
    cos, sin = (t.to(dtype) for t in random_tables(T, d, seed + 1))
    out = attempt(what, apply_rope, x, cos, sin, hint=ROPE_HINT)
    check_shape(what, out, shape, hint="a rotation keeps the shape of x")
    def pair_lengths(t):  # the squared length of each pair (i, i + d/2)
        return t.double()[..., : d // 2] ** 2 + t.double()[..., d // 2:] ** 2

    first, second = x.double()[..., : d // 2], x.double()[..., d // 2:]
    unsigned = x.double() * cos.double() + torch.cat([second, first], dim=-1) * sin.double()  # rotate_half without its -
    check_close(f"the squared length of each pair (i, i + d/2) of {what}", pair_lengths(out), pair_lengths(x), atol=1e-4,
                likely_causes={"rotate_half lost its minus sign: it must be [-x2, x1] (x1 the first half of x, x2 the "
                               "second), or the pairs stretch instead of turning": pair_lengths(unsigned)},
                hint="a rotation turns dimension i together with i + d/2 (not with i + 1) and keeps their length")
    return x, (cos, sin), out


def rope_scores(rope_tables, apply_rope, d_head, pairs, seed):
    """One drawn query and one drawn key, turned by your rope_tables and apply_rope, the query at m and the key at n
    for each (m, n) of `pairs`: returns q, k (each (d_head,)) and the scores (len(pairs),)."""
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d_head, generator=gen, dtype=torch.float64)
    length = 1 + max(max(pair) for pair in pairs)
    tables = attempt(f"rope_tables({length}, {d_head})", rope_tables, length, d_head, hint=TABLES_HINT)
    check_true(isinstance(tables, (tuple, list)) and len(tables) == 2, f"rope_tables({length}, {d_head}) must return "
               "the pair (cos, sin)")
    check_shape(f"the cos of rope_tables({length}, {d_head})", tables[0], (length, d_head), hint=TABLES_HINT)
    check_shape(f"the sin of rope_tables({length}, {d_head})", tables[1], (length, d_head), hint=TABLES_HINT)
    cos, sin = (t.double() for t in tables)
    m, n = torch.tensor([pair[0] for pair in pairs]), torch.tensor([pair[1] for pair in pairs])
    rows = len(pairs)
    turned_q = attempt("apply_rope(the query at the positions m, cos[m], sin[m])", apply_rope,
                       q.expand(1, 1, rows, d_head), cos[m], sin[m], hint=ROPE_HINT)
    turned_k = attempt("apply_rope(the key at the positions n, cos[n], sin[n])", apply_rope,
                       k.expand(1, 1, rows, d_head), cos[n], sin[n], hint=ROPE_HINT)
    check_shape("apply_rope(the query at the positions m, ...)", turned_q, (1, 1, rows, d_head), hint=ROPE_HINT)
    check_shape("apply_rope(the key at the positions n, ...)", turned_k, (1, 1, rows, d_head), hint=ROPE_HINT)
    return q, k, (turned_q.double() * turned_k.double()).sum(dim=-1).reshape(rows)


def check_rope_relative(rope_tables, apply_rope, d_head, pairs, shift, seed):
    """The score of a query at m and a key at n, turned by your rope_tables and apply_rope, is the same at
    (m + shift, n + shift). Returns q, k, every pair asked (the given ones, then the shifted ones) and the scores."""
    asked = [*pairs, *[(m + shift, n + shift) for m, n in pairs]]
    q, k, scores = rope_scores(rope_tables, apply_rope, d_head, asked, seed)
    moved = not torch.allclose(scores[: len(pairs)], scores[len(pairs):], atol=1e-4)  # message only: names the property
    check_true(not moved, f"moving both the query and the key {shift} positions further changed their score: the "
               "score must depend on m - n only (each pair turned by p * theta_i, i with i + d/2, q and k alike)")
    return q, k, asked, scores


ALIBI_HINT = "bias[h, i, j] = -slope_h * (i - j), slope_h = 2 ** (-8 (h + 1) / heads) for h = 0..heads-1"


def check_alibi(alibi_bias, heads, length):
    """alibi_bias(heads, length) is (heads, length, length), zero on the diagonal, falling by the same step
    for each key further back. Returns it."""
    what = f"alibi_bias({heads}, {length})"
    bias = attempt(what, alibi_bias, heads, length, hint=ALIBI_HINT)
    check_shape(what, bias, (heads, length, length), hint="one (length, length) bias per head")
    bias = bias.double()
    check_close(f"the diagonal of {what}", torch.diagonal(bias, dim1=-2, dim2=-1),
                torch.zeros(heads, length, dtype=torch.float64), atol=1e-6,
                hint="a query is at distance 0 from itself: no bias there")
    if length > 1:
        below = bias[:, 1:, 0] - bias[:, 1:, 1]  # (H, T-1): the step one key further back
        check_true(bool((below < 0).all()), f"{what} does not fall for keys further in the past: the bias is "
                   "-slope * (i - j), more negative the further key j lies behind query i")
    return bias


# ---------------------------------------------------------------- Part C: SwiGLU

SWIGLU_HINT = "w2(silu(w1(x)) * w3(x)), three nn.Linear without bias"


def swiglu_state(width, hidden, seed, scale=0.4):
    return {"w1.weight": _draw(seed, hidden, width, scale=scale), "w2.weight": _draw(seed + 1, width, hidden, scale=scale),
            "w3.weight": _draw(seed + 2, hidden, width, scale=scale)}


def check_swiglu(SwiGLU, width, hidden, seed):  # noqa: N803 (the class under test)
    """SwiGLU(width, hidden) holds exactly w1, w2 and w3 (no biases) and keeps the shape with the test's weights.
    Returns the module, x and its output."""
    what = f"SwiGLU({width}, {hidden})"
    ffn = attempt(what, SwiGLU, width, hidden)
    check_exact_tensors(what, ffn, {"w1.weight": ("parameter", (hidden, width)), "w2.weight": ("parameter", (width, hidden)),
                                    "w3.weight": ("parameter", (hidden, width))},
                        "w1 and w3 are nn.Linear(width, hidden, bias=False), w2 is nn.Linear(hidden, width, bias=False)")
    load_state(what, ffn, swiglu_state(width, hidden, seed))
    x = _draw(seed + 3, 2, 5, width)
    out = attempt(f"{what}(x)", ffn, x, hint=SWIGLU_HINT)
    check_shape(f"{what}(x)", out, (2, 5, width), hint="the feed-forward layer keeps the shape of its input")
    return ffn, x, out


# ---------------------------------------------------------------- Part D: grouped-query attention

GQA_HINT = ("q from q_proj as (B, H, T, d), k and v from the two halves of kv_proj as (B, kv_heads, T, d); rotary "
            "positions on q and k; each key/value head repeated for its heads // kv_heads query heads; causal "
            "softmax(q k^T / sqrt(d)) v; heads merged; proj")


def gqa_state(width, heads, kv_heads, seed, scale=0.4):
    d_head = width // heads
    return {"q_proj.weight": _draw(seed, width, width, scale=scale),
            "kv_proj.weight": _draw(seed + 1, 2 * kv_heads * d_head, width, scale=scale),
            "proj.weight": _draw(seed + 2, width, width, scale=scale)}


def _gqa_tensors(what, attention, width, heads, kv_heads, max_len):
    d_head = width // heads
    check_exact_tensors(what, attention, {
        "q_proj.weight": ("parameter", (width, width)), "kv_proj.weight": ("parameter", (2 * kv_heads * d_head, width)),
        "proj.weight": ("parameter", (width, width)), "cos": ("buffer", (max_len, d_head)),
        "sin": ("buffer", (max_len, d_head))},
        "q_proj (width -> width), kv_proj (width -> 2 * kv_heads * d_head) and proj (width -> width), nn.Linear "
        "without bias, and the buffers cos and sin from rope_tables(max_len, d_head)")


def check_gqa_parts(GroupedQueryAttention, width, heads, kv_heads, max_len, T):  # noqa: N803 (the class under test)
    """The attention holds q_proj, kv_proj and proj (no biases) and the buffers cos and sin of its rotary
    positions, and keeps the shape (2, T, width)."""
    what = f"GroupedQueryAttention({width}, {heads}, {kv_heads}, {max_len})"
    attention = attempt(what, GroupedQueryAttention, width, heads, kv_heads, max_len)
    _gqa_tensors(what, attention, width, heads, kv_heads, max_len)
    load_state(what, attention, gqa_state(width, heads, kv_heads, seed=width))
    out = attempt(f"{what} on (2, {T}, {width})", attention, _draw(T, 2, T, width), hint=GQA_HINT)
    check_shape(f"{what}(x)", out, (2, T, width), hint="the attention keeps the shape of its input")


def check_gqa_outputs(GroupedQueryAttention, batch, length, width, heads, kv_heads, seed):  # noqa: N803
    """The attention holding the test's weights keeps the shape; returns it, x and its output."""
    what = f"GroupedQueryAttention({width}, {heads}, {kv_heads}, {length + 2})"
    attention = attempt(what, GroupedQueryAttention, width, heads, kv_heads, length + 2)
    _gqa_tensors(what, attention, width, heads, kv_heads, length + 2)
    load_state(what, attention, gqa_state(width, heads, kv_heads, seed))
    x = _draw(seed + 5, batch, length, width)
    out = attempt(f"{what}(x)", attention, x, hint=GQA_HINT)
    check_shape(f"{what}(x)", out, (batch, length, width), hint="the attention keeps the shape of its input")
    return attention, x, out


# ---------------------------------------------------------------- Part E: attention in tiles

TILED_HINT = ("for each block of keys: scores of the block, new maximum m_new = max(m, block max), rescale the "
              "running sum and output by exp(m - m_new), add the block's exp(scores - m_new) and its weighted values; "
              "at the end out = O / l and lse = m + log(l)")


def tiled_inputs(shape, seed, dtype=torch.float32):
    """q, k, v of `shape` (B, H, T, d), drawn from seed."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=gen, dtype=dtype) for _ in range(3))


def tiled_pair(tiled_attention, q, k, v, block_size, causal):
    """tiled_attention(q, k, v, block_size, causal) called, and checked to return (out, lse) of the shapes of q and
    of its rows. Returns the call's description, out and lse."""
    shape = tuple(q.shape)
    what = f"tiled_attention(q {shape}, k, v, block_size={block_size}, causal={causal})"
    result = attempt(what, tiled_attention, q, k, v, block_size, causal=causal, hint=TILED_HINT)
    check_true(isinstance(result, (tuple, list)) and len(result) == 2, f"{what} must return the pair (out, lse)")
    out, lse = result
    check_shape(f"the output of {what}", out, shape, hint="one output row per query, like full attention")
    check_shape(f"the lse of {what}", lse, shape[:-1], hint="one log-sum-exp per query: (B, H, T)")
    return what, out, lse


def check_tiled(tiled_attention, shape, block_size, causal, seed, dtype=torch.float32):
    """tiled_attention(q, k, v, block_size, causal) returns (out (B, H, T, d), lse (B, H, T)), finite.
    Returns q, k, v, out and lse."""
    q, k, v = tiled_inputs(shape, seed, dtype)
    what, out, lse = tiled_pair(tiled_attention, q, k, v, block_size, causal)
    check_true(bool(torch.isfinite(out).all() and torch.isfinite(lse).all()), f"{what} gives NaN or infinite values: "
               "start the running maximum at -inf and the sum at 0, rescale by exp(m_old - m_new), and in causal attention "
               "skip only the key blocks that start after the query block's last row (its diagonal block holds the "
               "first rows' only keys)")
    return q, k, v, out, lse


def future_poisoned_inputs(shape, block_size, seed):
    """q, k, v of `shape` (B, H, T, d) whose keys and values are NaN from position 2 * block_size on: the key blocks
    the first two query blocks must skip. Returns q, k, v and that position."""
    q, k, v = tiled_inputs(shape, seed)
    cut = 2 * block_size
    k[..., cut:, :] = float("nan")
    v[..., cut:, :] = float("nan")
    return q, k, v, cut


def check_tiled_skips(tiled_attention, shape, block_size, seed):
    """With causal=True, the key blocks above the diagonal are never read: NaN in every key and value from position
    2 * block_size on leaves the rows of out and lse before that position finite. Returns q, k, v, the position, out
    and lse."""
    q, k, v, cut = future_poisoned_inputs(shape, block_size, seed)
    what, out, lse = tiled_pair(tiled_attention, q, k, v, block_size, causal=True)
    check_true(bool(torch.isfinite(out[..., :cut, :]).all() and torch.isfinite(lse[..., :cut]).all()),
               f"with NaN in every key and value from position {cut} on, {what} gave NaN in the rows before "
               f"position {cut}, so it read a key block that lies entirely above the diagonal. Masking such a block "
               "to -inf is not enough (0 times NaN is NaN, and the work is done anyway): skip it, stop at the first "
               "key block that starts after the query block's last row")
    return q, k, v, cut, out, lse


def check_tiled_memory(tiled_attention, shape, block_size, causal, seed):
    """The largest tensor tiled_attention builds holds at most block_size * T entries per head and batch row
    (full attention's T x T scores are far more). Returns q, k, v and the output."""
    B, H, T, d = shape  # noqa: N806 (the shapes' usual names)
    q, k, v = tiled_inputs(shape, seed)
    what = f"tiled_attention at T = {T}, block_size={block_size}, causal={causal}"
    result, largest = attempt(what, largest_tensor, tiled_attention, q, k, v, block_size, causal=causal,
                              hint=TILED_HINT)
    check_true(isinstance(result, (tuple, list)) and len(result) == 2, f"{what} must return the pair (out, lse)")
    check_true(largest.entries <= B * H * block_size * T,
               f"{what} built a tensor of shape {largest.shape} ({largest.entries:,} entries), more than "
               f"B * H * block_size * T = {B * H * block_size * T:,}: compute the scores block by block, never "
               "all T x T of them at once")
    return q, k, v, result[0]


# ---------------------------------------------------------------- Part F: the block and the model

BLOCK_HINT = "h = x + attention(norm1(x)), then out = h + ffn(norm2(h))"


def part_first(module, parts, x, hint):
    """`hint`, unless a part of `module` (`parts`: its path, "norm1" or "blocks.0", -> the test that judges it) raises
    on x by itself: then that part's test is the one to fix first (a message only: the tests decide)."""
    for path, test in parts.items():
        try:
            part = module
            for step in path.split("."):
                part = part[int(step)] if step.isdigit() else getattr(part, step)
            part(x)
        except Exception:  # noqa: BLE001 (only whether it raises: the part's own test reports the error)
            return (f"its {path} raises on an input of this shape by itself, and it is called here: make the test of "
                    f"{test} pass first")
    return hint
MODEL_HINT = "token_embedding(idx), every block in order, norm, head; the loss F.cross_entropy over all B * T positions"


def check_modern_block(ModernBlock, batch, length, width, heads, kv_heads, hidden, seed):  # noqa: N803
    """ModernBlock holds norm1, attention, norm2 and ffn with the sizes of Part F, and keeps the shape with the
    test's norm weights. Returns the block, x and its output."""
    what = f"ModernBlock({width}, {heads}, {kv_heads}, {hidden}, {length + 2})"
    block = attempt(what, ModernBlock, width, heads, kv_heads, hidden, length + 2)
    d_head = width // heads
    check_exact_tensors(what, block, {
        "norm1.weight": ("parameter", (width,)), "norm2.weight": ("parameter", (width,)),
        "attention.q_proj.weight": ("parameter", (width, width)),
        "attention.kv_proj.weight": ("parameter", (2 * kv_heads * d_head, width)),
        "attention.proj.weight": ("parameter", (width, width)),
        "attention.cos": ("buffer", (length + 2, d_head)), "attention.sin": ("buffer", (length + 2, d_head)),
        "ffn.w1.weight": ("parameter", (hidden, width)), "ffn.w2.weight": ("parameter", (width, hidden)),
        "ffn.w3.weight": ("parameter", (hidden, width))},
        "norm1 and norm2 are RMSNorm(width), attention GroupedQueryAttention(width, heads, kv_heads, max_len), "
        "ffn SwiGLU(width, hidden)", judged_elsewhere=("norm1.", "norm2.", "attention.", "ffn."))
    load_state(what, block, {"norm1.weight": 1 + _draw(seed, width, scale=0.3),
                             "norm2.weight": 1 + _draw(seed + 1, width, scale=0.3)})
    x = _draw(seed + 2, batch, length, width)
    parts = {"norm1": "RMSNorm", "norm2": "RMSNorm", "attention": "GroupedQueryAttention", "ffn": "SwiGLU"}
    out = attempt(f"{what}(x)", block, x, hint=part_first(block, parts, x, BLOCK_HINT))
    check_shape(f"{what}(x)", out, (batch, length, width), hint="a block keeps the shape of its input")
    return block, x, out


def modern_gpt_state(vocab, width, seed):
    """The parameters of ModernGPT outside its blocks, by the names of Part F, drawn from seed."""
    return {"token_embedding.weight": _draw(seed, vocab, width), "norm.weight": 1 + _draw(seed + 1, width, scale=0.3),
            "head.weight": _draw(seed + 2, vocab, width, scale=0.5)}


def check_modern_gpt(ModernGPT, vocab, width, heads, kv_heads, layers, max_len, batch, length, seed):  # noqa: N803
    """ModernGPT holds token_embedding, blocks, norm and head (no positions, no bias) and, with the test's
    embedding, norm and head, returns (logits, None) without targets and (logits, a loss) with them. Returns the
    model, idx, targets, the logits and the loss."""
    what = f"ModernGPT({vocab}, {width}, {heads}, {kv_heads}, {layers}, {max_len})"
    model = attempt(what, ModernGPT, vocab, width, heads, kv_heads, layers, max_len)
    held = _held(model)
    hint = ("token_embedding nn.Embedding(vocab, width), blocks an nn.ModuleList of ModernBlock, norm RMSNorm(width), "
            "head nn.Linear(width, vocab, bias=False), and no position embedding")
    for name, shape in (("token_embedding.weight", (vocab, width)), ("norm.weight", (width,)),
                        ("head.weight", (vocab, width))):
        check_true(name in held and held[name][1] == shape, f"{what} holds no parameter {name} of shape {shape}: {hint}")
    extra = sorted(name for name in held if not name.startswith("blocks.")
                   and name not in ("token_embedding.weight", "norm.weight", "head.weight"))
    check_true(not extra, f"{what} holds {extra[0] if extra else ''} besides what the text names: {hint}")
    check_true(f"blocks.{layers - 1}.norm1.weight" in held and f"blocks.{layers}.norm1.weight" not in held,
               f"{what} does not hold {layers} blocks blocks.0 .. blocks.{layers - 1}: {hint}")
    if kv_heads != heads:  # kv_heads must reach the blocks: their key/value projections differ from kv_heads=heads
        plain = _held(attempt(f"ModernGPT({vocab}, {width}, {heads}, {heads}, {layers}, {max_len})", ModernGPT, vocab,
                              width, heads, heads, layers, max_len))
        kv = {name: shape for name, (_, shape) in held.items() if name.startswith("blocks.") and "kv" in name}
        check_true(not kv or any(plain.get(name, (None, None))[1] != shape for name, shape in kv.items()),
                   f"{what} builds the same key/value projections as with kv_heads={heads}: pass kv_heads on to "
                   "every ModernBlock")
    load_state(what, model, modern_gpt_state(vocab, width, seed))
    gen = torch.Generator().manual_seed(seed)
    idx, targets = torch.randint(vocab, (batch, length), generator=gen), torch.randint(vocab, (batch, length), generator=gen)
    stream = _draw(seed + 3, batch, length, width)  # what the norm and the blocks read inside the model
    parts = {"norm": "RMSNorm", **{f"blocks.{i}": "ModernBlock" for i in range(layers)}}
    out = attempt(f"{what}(idx)", model, idx, hint=part_first(model, parts, stream, MODEL_HINT))
    check_true(isinstance(out, (tuple, list)) and len(out) == 2 and out[1] is None,
               f"{what}(idx) must return the pair (logits, None) without targets")
    check_shape(f"the logits of {what}", out[0], (batch, length, vocab), hint="one row of vocab logits per position")
    out = attempt(f"{what}(idx, targets)", model, idx, targets, hint=MODEL_HINT)
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx, targets) must return (logits, loss)")
    check_shape(f"the logits of {what}", out[0], (batch, length, vocab), hint="one row of vocab logits per position")
    check_true(isinstance(out[1], torch.Tensor) and out[1].numel() == 1, f"the loss of {what} is not one number: "
               "the mean cross-entropy over all B * T positions")
    return model, idx, targets, out[0], out[1]
