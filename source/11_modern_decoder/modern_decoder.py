# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 11 · Today's decoder block
#
# Chapter 10's GPT is the GPT-2 recipe of 2019: LayerNorm, learned positions, a ReLU feed-forward
# layer, one key and one value per head. The open models of today (Llama, Mistral, Qwen, Gemma)
# keep the decoder-only plan but change almost every part of the block, each for a reason you
# can measure. In this chapter you will write those parts yourself:
#
# * `rms_norm` and `RMSNorm`: a norm that only rescales (Part A);
# * `rope_tables` and `apply_rope`: **rotary positions**, which turn queries and keys by an angle
#   that grows with the position, so that a score depends on how far apart two tokens are, not
#   where they are; and `alibi_bias`, the other answer, a penalty on distance (Part B);
# * `SwiGLU`: a gated feed-forward layer (Part C);
# * `GroupedQueryAttention`: several query heads sharing one key and one value head, which
#   shrinks the KV cache of chapter 08 (Part D);
# * `tiled_attention`: attention computed block by block, the algorithm of FlashAttention, which
#   never holds the whole $T \times T$ matrix of scores (Part E);
# * `ModernBlock` and `ModernGPT`: the block and the model, from your own parts (Part F).
#
# Every part is checked against PyTorch's own computation where one exists
# (`F.rms_norm`, `F.scaled_dot_product_attention`, `torch.logsumexp`). The exercises and their
# checks run in seconds; at the end of Part F your model trains on chapter 10's poem beside
# chapter 10's design of the same size (about three minutes of one CPU thread for the two), and
# is read in windows longer than it was trained on.
#
# **Time:** about 3 hours for a capable student, an estimate from the length of the text and
# the work of each of its 27 points.
# **Assumes:** chapters 01 to 10: scaled dot-product attention and its masks, chapter 05's
# positions, chapter 06's heads, chapter 08's KV cache, and chapter 10's pre-norm block.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math
import time

import torch
import torch.nn.functional as F
from nboracle import largest_tensor
from torch import nn

from course import check_choice, check_true, kieu_lines, short_demos

torch.set_printoptions(precision=4, sci_mode=False)
torch.set_num_threads(1)  # small tensors: one thread is faster than two that wait for each other

# %% [markdown]
# ## Part A · RMSNorm (3 points)
#
# LayerNorm (chapter 04) does two things to each row of features: it subtracts the row's mean and
# divides by its standard deviation, then applies a learned scale and shift. **RMSNorm** (Zhang
# and Sennrich, 2019) keeps only the division, by the row's **root mean square**, and only the
# scale:
#
# $$\mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\frac{1}{D}\sum_{i=1}^{D} x_i^2 + \varepsilon}} \odot w .$$
#
# There is no mean to subtract and no bias: fewer operations on every row of every layer, and in
# practice models train as well. The $\varepsilon$ sits **under** the square root; it keeps a row
# of zeros from dividing by zero.
#
# Write `rms_norm(x, weight, eps=1e-6)` for `x` of any shape `(..., D)` and `weight` `(D,)`:
# the mean of the squares over the **last** axis only. Then `RMSNorm(width, eps=1e-6)`, a module
# with one parameter, `weight`, an `nn.Parameter` of shape `(width,)` that starts at ones, whose
# `forward(x)` is your `rms_norm(x, self.weight, eps)`.

# %% nbgrader={"grade": false, "grade_id": "rms_norm", "locked": false, "schema_version": 3, "solution": true}
def rms_norm(x, weight, eps=1e-6):
    """x (..., D) divided by its root mean square over the last axis, times weight (D,)."""
    ### BEGIN SOLUTION
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    return x / torch.sqrt(mean_square + eps) * weight  # (..., D)
    ### END SOLUTION


class RMSNorm(nn.Module):
    """RMSNorm over the last axis, with a learned scale `weight` (width,) starting at ones."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return rms_norm(x, self.weight, self.eps)
        ### END SOLUTION


# %% [markdown]
# Check it: a row's root mean square before and after, and the mean, which RMSNorm leaves alone
# (LayerNorm would set it to 0).

# %%
x = torch.tensor([[1.0, 2.0, 3.0, 6.0], [-1.0, 0.5, 0.5, 4.0]])  # (2, 4)
y = RMSNorm(4)(x)
print("rms before:", x.pow(2).mean(-1).sqrt())
print("rms after: ", y.pow(2).mean(-1).sqrt())
print("mean after:", y.mean(-1), "(not 0: nothing is subtracted)")

# %% nbgrader={"grade": true, "grade_id": "test_rms_norm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""rms_norm divides each row by its root mean square over the last axis (eps under the root), times the weight."""
from course.modern_decoder_checks import check_rms_norm  # the checks of this chapter: course/modern_decoder_checks.py

x, weight, out = check_rms_norm(rms_norm, shape=(2, 3, 8), seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_rms_norm  # the grader's side only

compare_rms_norm(rms_norm, shape=(2, 3, 8), seed=0)
compare_rms_norm(rms_norm, shape=(5, 6), seed=1, eps=0.25, scale=0.5)
compare_rms_norm(rms_norm, shape=(2, 2, 3, 16), seed=2, eps=1e-3, scale=0.05)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_rmsnorm_module", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""RMSNorm holds one parameter, weight, starting at ones, and applies rms_norm with its own eps."""
from course.modern_decoder_checks import check_rmsnorm_module

x, weight, out = check_rmsnorm_module(RMSNorm, width=6, eps=0.1, seed=3)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_rmsnorm_module  # the grader's side only

compare_rmsnorm_module(RMSNorm, width=6, eps=0.1, seed=3)
compare_rmsnorm_module(RMSNorm, width=12, eps=1e-6, seed=4, scale=2.0)
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · Rotary positions (5 points)
#
# Chapter 05 added a position's vector to each token's embedding, once, at the bottom of the
# model. **Rotary positions** (RoPE; Su et al., 2021) put the position into the attention itself.
# Split each head's $d$ dimensions into $d/2$ pairs; pair $i$ of the query at position $m$ is
# turned, as a point of the plane, by the angle $m\,\theta_i$, with a frequency per pair
#
# $$\theta_i = \mathrm{base}^{-2i/d}, \qquad i = 0, \dots, d/2 - 1, \qquad \mathrm{base} = 10000,$$
#
# and the keys the same way at their own positions. Pair 0 turns by one radian per position;
# the last pairs turn very slowly. The values are not turned.
#
# Why turn? A rotation by $a$ followed by the transpose of a rotation by $b$ is a rotation by
# $a - b$. So for one pair, with $R(\cdot)$ the $2 \times 2$ rotation,
#
# $$\big(R(m\theta) q\big)^\top \big(R(n\theta) k\big) = q^\top R\big((n - m)\theta\big)\, k :$$
#
# the score of the query at $m$ and the key at $n$ depends on $m - n$ only. Moving a whole
# sentence ten places to the right leaves every score as it was.
#
# **Which dimensions form a pair.** Llama and Hugging Face's models pair dimension $i$ with
# $i + d/2$ (the first half with the second half), not neighbours $2i$ and $2i+1$. Both are
# rotations, but a checkpoint only works with the pairing it was trained with; we use the
# half-split one. With `x1 = x[..., :d/2]` and `x2 = x[..., d/2:]`,
#
# $$\mathrm{rope}(x) = x \odot \cos + \mathrm{rotate\_half}(x) \odot \sin, \qquad
# \mathrm{rotate\_half}(x) = [-x_2,\ x_1],$$
#
# where row $p$ of the tables holds $\cos(p\,\theta_i)$ and $\sin(p\,\theta_i)$ in **both**
# column $i$ and column $i + d/2$.
#
# Write `rope_tables(length, d_head, base=10000.0)`, returning `(cos, sin)`, each
# `(length, d_head)`, for positions $0$ to `length - 1`; and `apply_rope(x, cos, sin)` for `x` of
# shape `(B, H, T, d_head)` and tables of shape `(T, d_head)`, one row per position of `x`.

# %% nbgrader={"grade": false, "grade_id": "rope", "locked": false, "schema_version": 3, "solution": true}
def rope_tables(length, d_head, base=10000.0):
    """cos and sin (length, d_head) of the angles p * base^(-2i/d_head), each half of a row the same angles."""
    ### BEGIN SOLUTION
    freqs = base ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)  # (d/2,)
    angles = torch.outer(torch.arange(length, dtype=torch.float32), freqs)  # (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d)
    return angles.cos(), angles.sin()
    ### END SOLUTION


def apply_rope(x, cos, sin):
    """x (B, H, T, d) with each pair (i, i + d/2) turned by the angle of its row of the tables (T, d)."""
    ### BEGIN SOLUTION
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half(x), (B, H, T, d)
    return x * cos + rotated * sin
    ### END SOLUTION


# %% [markdown]
# Check it: the **relative** property, measured. Draw one query and one key vector, put them
# at positions $(m, n)$ and at $(m + s, n + s)$ for a few shifts $s$: the scores must not move.
# Learned or sinusoidal positions added to the embeddings (chapter 05) give no such guarantee.

# %%
gen = torch.Generator().manual_seed(0)
q, k = torch.randn(2, 1, 1, 1, 16, generator=gen)  # each (1, 1, 1, 16): one head, one vector
cos, sin = rope_tables(64, 16)
for shift in (0, 5, 40):
    m, n = 7 + shift, 3 + shift
    score = (apply_rope(q, cos[m:m + 1], sin[m:m + 1]) * apply_rope(k, cos[n:n + 1], sin[n:n + 1])).sum()
    print(f"query at {m:2d}, key at {n:2d}: score {score.item():+.5f}")
turned = apply_rope(q.expand(1, 1, 64, 16), cos, sin)  # (1, 1, 64, 16): the query at every position
lengths = turned[..., :8] ** 2 + turned[..., 8:] ** 2  # each pair's squared length, at every position
check_true(torch.allclose(lengths, lengths[..., :1, :], atol=1e-4), "a rotation keeps each pair's length")

# %% nbgrader={"grade": true, "grade_id": "test_rope_tables", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""rope_tables gives cos and sin of p * base^(-2i/d_head) for positions from 0, each half of a row the same angles."""
from course.modern_decoder_checks import check_rope_tables

cos, sin = check_rope_tables(rope_tables, length=6, d_head=8)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_rope_tables  # the grader's side only

compare_rope_tables(rope_tables, length=6, d_head=8)
compare_rope_tables(rope_tables, length=20, d_head=16)
compare_rope_tables(rope_tables, length=9, d_head=4, base=50.0)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_apply_rope", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""apply_rope turns each pair (i, i + d/2) of x by the angle its row of the tables gives: x * cos + rotate_half(x) * sin."""
from course.modern_decoder_checks import check_apply_rope

x, tables, out = check_apply_rope(apply_rope, shape=(2, 3, 5, 8), seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_apply_rope  # the grader's side only

compare_apply_rope(apply_rope, shape=(2, 3, 5, 8), seed=0)
compare_apply_rope(apply_rope, shape=(1, 2, 7, 16), seed=1)
compare_apply_rope(apply_rope, shape=(3, 1, 4, 2), seed=2, dtype=torch.float64)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_rope_relative", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With your rope_tables and apply_rope, the score of a query at m and a key at n depends on m - n only."""
from course.modern_decoder_checks import check_rope_relative

q, k, pairs, scores = check_rope_relative(rope_tables, apply_rope, d_head=8, pairs=[(7, 3), (2, 2), (0, 5)], shift=10,
                                          seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_rope_relative  # the grader's side only

compare_rope_relative(rope_tables, apply_rope, d_head=8, pairs=[(7, 3), (2, 2), (0, 5)], shift=10, seed=0)
compare_rope_relative(rope_tables, apply_rope, d_head=16, pairs=[(40, 1), (3, 30), (12, 11), (0, 0)], shift=57, seed=1)
### END HIDDEN TESTS

# %% [markdown]
# ### ALiBi, the other answer
#
# ALiBi (Press et al., 2021) adds no vector and turns nothing: it adds to every score a penalty
# proportional to the distance between query $i$ and key $j$,
#
# $$\mathrm{scores}_{h,i,j} \mathrel{+}= -\,s_h\,(i - j), \qquad s_h = 2^{-8(h+1)/H}, \quad h = 0, \dots, H-1,$$
#
# a geometric series of slopes, one per head: head 0 forgets quickly, the last head barely. It too
# depends on $i - j$ only. Above the diagonal $i - j$ is negative and the bias positive, but the
# causal mask removes those pairs anyway.
#
# Write `alibi_bias(heads, length)` returning the bias `(heads, length, length)`, by that
# formula at every $(i, j)$.

# %% nbgrader={"grade": false, "grade_id": "alibi", "locked": false, "schema_version": 3, "solution": true}
def alibi_bias(heads, length):
    """(heads, length, length): -slope_h * (i - j), slope_h = 2^(-8 (h + 1) / heads)."""
    ### BEGIN SOLUTION
    slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads)  # (H,)
    behind = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (T, T): j - i, negative in the past
    return slopes[:, None, None] * behind  # (H, T, T): -slope * (i - j)
    ### END SOLUTION


# %%
print(alibi_bias(heads=2, length=4))

# %% nbgrader={"grade": true, "grade_id": "test_alibi", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""alibi_bias gives -slope_h * (i - j) with the slopes 2^(-8 (h + 1) / heads)."""
from course.modern_decoder_checks import check_alibi

bias = check_alibi(alibi_bias, heads=4, length=5)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_alibi  # the grader's side only

compare_alibi(alibi_bias, heads=4, length=5)
compare_alibi(alibi_bias, heads=8, length=3)
compare_alibi(alibi_bias, heads=3, length=7)
### END HIDDEN TESTS

# %% [markdown]
# ## Part C · SwiGLU (3 points)
#
# Chapter 10's feed-forward layer is $W_2\,\mathrm{ReLU}(W_1 x)$ with a hidden width of
# $4D$. Llama's is **SwiGLU** (Shazeer, 2020): a second projection $W_3$ of the same input
# **gates** the first, entry by entry,
#
# $$\mathrm{SwiGLU}(x) = W_2\big(\mathrm{SiLU}(W_1 x) \odot W_3 x\big), \qquad
# \mathrm{SiLU}(a) = a\,\sigma(a),$$
#
# with $W_1, W_3: D \to$ hidden and $W_2:$ hidden $\to D$, and no biases. SiLU is smooth where
# ReLU has a kink, and the gate lets each hidden unit be switched on or off by what the input
# holds, not only by its own pre-activation.
#
# Write `SwiGLU(width, hidden)` with exactly three `nn.Linear` layers without bias, `w1`, `w2` and
# `w3`, and `forward(x)` for `x` of shape `(..., width)`.

# %% nbgrader={"grade": false, "grade_id": "swiglu", "locked": false, "schema_version": 3, "solution": true}
class SwiGLU(nn.Module):
    """w2(silu(w1(x)) * w3(x)): (..., width) -> (..., width), no biases."""

    def __init__(self, width, hidden):
        super().__init__()
        ### BEGIN SOLUTION
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., D)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_swiglu", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""SwiGLU holds w1, w2 and w3 without biases and computes w2(silu(w1(x)) * w3(x))."""
from course.modern_decoder_checks import check_swiglu

ffn, x, out = check_swiglu(SwiGLU, width=6, hidden=10, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_swiglu  # the grader's side only

compare_swiglu(SwiGLU, width=6, hidden=10, seed=1)
compare_swiglu(SwiGLU, width=9, hidden=4, seed=2)
compare_swiglu(SwiGLU, width=16, hidden=40, seed=3)
### END HIDDEN TESTS

# %% [markdown]
# ### Predict, then run (1 point)
#
# A third matrix costs parameters. To compare the two layers fairly, a model with SwiGLU
# chooses its hidden width so that the layer holds as many weights as the ReLU layer it
# replaces. Take a ReLU feed-forward layer of width $D = 96$ with hidden width $4D$ and no
# biases. Which hidden width must `SwiGLU(96, hidden)` have to hold the same number of weights?
# Assign it to `PREDICTED_SWIGLU_HIDDEN`; the cell after the test counts both.

# %% nbgrader={"grade": false, "grade_id": "predict_swiglu_hidden", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_SWIGLU_HIDDEN = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_SWIGLU_HIDDEN = 256  # 3 * 96 * h = 2 * 96 * 384, so h = 2 * 384 / 3 = 8/3 * 96
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_swiglu_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_SWIGLU_HIDDEN: the hidden width of a SwiGLU with the weights of a 96 -> 384 -> 96 ReLU layer."""
from course import check_number

prediction = check_number("PREDICTED_SWIGLU_HIDDEN", PREDICTED_SWIGLU_HIDDEN)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

# the ReLU layer holds 2 * 96 * 384 weights, SwiGLU 3 * 96 * hidden: hidden = 256 exactly; 2 % lets 251 .. 261 pass
prediction = check_prediction("PREDICTED_SWIGLU_HIDDEN", PREDICTED_SWIGLU_HIDDEN, 256, rel=0.02, known=(
    (384, "that is the ReLU layer's own hidden width: SwiGLU has three matrices of width x hidden, not two, so the "
          "same weights allow a narrower hidden layer"),
    (192, "that halves the hidden width, as if the two matrices of the ReLU layer became four; SwiGLU has three"),
    (128, "that is a third of the ReLU layer's hidden width: the ReLU layer has two matrices, so three matrices of "
          "equal total size are each two thirds of one of its matrices, not a third"),
    (288, "that is 3 * 96: count the ReLU layer's weights (two matrices of 96 x 384) and divide by SwiGLU's three "
          "matrices of 96 x hidden"),
), hint="count the weights: the ReLU layer has two matrices of 96 x 384, SwiGLU three of 96 x hidden")
### END HIDDEN TESTS

# %%
relu_weights = sum(p.numel() for p in (nn.Linear(96, 384, bias=False).weight, nn.Linear(384, 96, bias=False).weight))
for hidden in (384, 256, 192):
    swiglu_weights = sum(p.numel() for p in SwiGLU(96, hidden).parameters())
    print(f"SwiGLU(96, {hidden}): {swiglu_weights:7,} weights; the ReLU layer 96 -> 384 -> 96: {relu_weights:,}")

# %% [markdown]
# Two matrices of $D \times 4D$ against three of $D \times h$: $3Dh = 8D^2$ gives
# $h = \tfrac{8}{3} D$. That is where Llama's odd-looking hidden widths come from (rounded up to a
# multiple of 256 for the hardware: 11,008 for a width of 4,096). At equal weights the gated layer
# usually gives a lower loss, the reason it replaced ReLU.

# %% [markdown]
# ## Part D · Grouped-query attention (3 points)
#
# While a model writes, its KV cache (chapter 08) keeps a key and a value for every layer, head
# and earlier token. For long texts that cache, not the weights, fills the memory, and reading it
# back at every step is what makes each new token slow. **Grouped-query attention** (GQA;
# Ainslie et al., 2023) keeps all $H$ query heads but only `kv_heads` key and value heads, each
# shared by a **group** of $H / \text{kv\_heads}$ consecutive query heads: query heads
# $0 \dots g-1$ read key/value head 0, heads $g \dots 2g-1$ head 1, and so on. With
# `kv_heads = heads` it is chapter 06's multi-head attention, with `kv_heads = 1` **multi-query**
# attention; the cache shrinks by the factor `heads / kv_heads`.
#
# Write `GroupedQueryAttention(width, heads, kv_heads, max_len)`, always causal, with
# $d = $ `width // heads`:
#
# * `q_proj`: `nn.Linear(width, width, bias=False)`, the queries, viewed as `(B, heads, T, d)`;
# * `kv_proj`: `nn.Linear(width, 2 * kv_heads * d, bias=False)`: its first half the keys, its
#   second half the values, each viewed as `(B, kv_heads, T, d)`;
# * `proj`: `nn.Linear(width, width, bias=False)`, after the heads are merged;
# * buffers `cos` and `sin`, `rope_tables(max_len, d)` (`register_buffer`): `forward` turns the
#   queries and the keys with your `apply_rope(., self.cos[:T], self.sin[:T])` before the scores;
# * each key and value head repeated for its group (`repeat_interleave(group, dim=1)`), then the
#   causal attention of chapter 10, scores divided by $\sqrt{d}$.
#
# The tests compare your output with `F.scaled_dot_product_attention(..., enable_gqa=True)` on the
# same projections, turned by your own `apply_rope`: a mistake in Part B costs Part B's points.

# %% nbgrader={"grade": false, "grade_id": "gqa", "locked": false, "schema_version": 3, "solution": true}
class GroupedQueryAttention(nn.Module):
    """Causal attention with rotary positions, heads query heads sharing kv_heads key/value heads: (B, T, D) -> (B, T, D)."""

    def __init__(self, width, heads, kv_heads, max_len):
        super().__init__()
        ### BEGIN SOLUTION
        if width % heads or heads % kv_heads:
            raise ValueError(f"width={width}, heads={heads}, kv_heads={kv_heads}: need heads | width and kv_heads | heads")
        self.n_heads, self.n_kv_heads, self.d_head = heads, kv_heads, width // heads
        self.q_proj = nn.Linear(width, width, bias=False)
        self.kv_proj = nn.Linear(width, 2 * kv_heads * self.d_head, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        cos, sin = rope_tables(max_len, self.d_head)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, d)
        k, v = (t.view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, G, T, d)
                for t in self.kv_proj(x).split(self.n_kv_heads * self.d_head, dim=-1))
        q, k = apply_rope(q, self.cos[:T], self.sin[:T]), apply_rope(k, self.cos[:T], self.sin[:T])
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, T, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = scores.softmax(dim=-1) @ v  # (B, H, T, d)
        return self.proj(out.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        ### END SOLUTION


# %% [markdown]
# Check it: the KV cache's size, measured from your `kv_proj`. Per token and per layer the cache
# keeps what `kv_proj` returns for that token; at the sizes below (width 512, 8 query heads of
# 64 dimensions, float32) that is:

# %%
cache_bytes = {}
for kv_heads, name in ((8, "MHA"), (2, "GQA"), (1, "MQA")):
    attention = GroupedQueryAttention(width=512, heads=8, kv_heads=kv_heads, max_len=16)
    with torch.no_grad():
        kv = attention.kv_proj(torch.randn(1, 1, 512))  # (1, 1, 2 * kv_heads * d): one token's keys and values
    cache_bytes[name] = kv.numel() * kv.element_size()
    print(f"{name} (kv_heads={kv_heads}): {cache_bytes[name]:5,} bytes per token per layer, "
          f"output {tuple(attention(torch.randn(2, 5, 512)).shape)}")
check_true(cache_bytes["MHA"] == 4 * cache_bytes["GQA"] == 8 * cache_bytes["MQA"], "the cache shrinks by heads / kv_heads")

# %% nbgrader={"grade": true, "grade_id": "test_gqa_parts", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""GroupedQueryAttention holds q_proj, kv_proj and proj without biases and the buffers cos and sin, and keeps the shape."""
from course.modern_decoder_checks import check_gqa_parts

check_gqa_parts(GroupedQueryAttention, width=16, heads=4, kv_heads=2, max_len=6, T=4)
### BEGIN HIDDEN TESTS
check_gqa_parts(GroupedQueryAttention, width=16, heads=4, kv_heads=1, max_len=5, T=5)
check_gqa_parts(GroupedQueryAttention, width=12, heads=3, kv_heads=3, max_len=9, T=1)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_gqa_matches_sdpa", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""The attention computes what F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) computes on the same turned projections."""
from course.modern_decoder_checks import check_gqa_outputs

attention, x, out = check_gqa_outputs(GroupedQueryAttention, batch=2, length=5, width=16, heads=4, kv_heads=2, seed=3)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_gqa  # the grader's side only

compare_gqa(GroupedQueryAttention, apply_rope, batch=2, length=5, width=16, heads=4, kv_heads=2, seed=3)
compare_gqa(GroupedQueryAttention, apply_rope, batch=1, length=7, width=24, heads=6, kv_heads=2, seed=4)
compare_gqa(GroupedQueryAttention, apply_rope, batch=3, length=4, width=8, heads=2, kv_heads=1, seed=5)
compare_gqa(GroupedQueryAttention, apply_rope, batch=2, length=3, width=12, heads=3, kv_heads=3, seed=6)
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · Attention in tiles (4 points)
#
# Full attention builds all $T \times T$ scores of a head before its softmax. FlashAttention
# (Dao et al., 2022) never does: it visits the keys and values **block by block** and keeps, for
# each query, three running quantities, the largest score seen so far $m$, the sum of
# exponentials $\ell$ and the unnormalised output $O$. For a new block of scores $S$ (scaled by
# $1/\sqrt{d}$) and values $V_b$:
#
# $$m' = \max(m, \max_j S_j), \quad
# \ell' = e^{m - m'}\,\ell + \sum_j e^{S_j - m'}, \quad
# O' = e^{m - m'}\,O + \sum_j e^{S_j - m'}\, V_{b,j}.$$
#
# The factor $e^{m - m'}$ is the whole trick: the old sums were taken against the old maximum,
# and when the maximum grows they are rescaled, so that at the end every term is $e^{S_j - m}$
# for the final $m$. Then $O / \ell$ is exactly softmax$(S)\,V$, to rounding. On the way,
# $m + \log \ell$ is the **log-sum-exp** of the row, the log of the softmax's denominator
# (FlashAttention keeps it for the backward pass).
#
# Tile the queries too, in blocks of the same size: for causal attention a key block that starts
# after a query block's last row lies entirely above the diagonal, and is **skipped**, never
# computed: half the work. Only the diagonal block needs the mask inside.
#
# Write `tiled_attention(q, k, v, block_size, causal=False)` for `q, k, v` of shape
# `(B, H, T, d)` (the same `T`), returning `(out, lse)`, `out` `(B, H, T, d)` and `lse`
# `(B, H, T)`. `T` need not be a multiple of `block_size`. Never hold more than a block of
# scores at once: the test measures the largest tensor your function builds.

# %% nbgrader={"grade": false, "grade_id": "tiled_attention", "locked": false, "schema_version": 3, "solution": true}
def tiled_attention(q, k, v, block_size, causal=False):
    """Attention of q, k, v (B, H, T, d), keys visited block by block: (out (B, H, T, d), lse (B, H, T))."""
    ### BEGIN SOLUTION
    T = q.shape[-2]
    outs, lses = [], []
    for start in range(0, T, block_size):
        qb = q[..., start:start + block_size, :] / math.sqrt(q.shape[-1])  # (B, H, b, d)
        rows = torch.arange(start, min(start + block_size, T))  # the block's query positions
        m = torch.full(qb.shape[:-1], float("-inf"), dtype=q.dtype)  # (B, H, b): running maximum
        total = torch.zeros_like(m)  # (B, H, b): running sum of exponentials
        o = torch.zeros(*qb.shape[:-1], v.shape[-1], dtype=q.dtype)  # (B, H, b, d): running output
        for key_start in range(0, T, block_size):
            if causal and key_start > rows[-1]:
                break  # this key block and every later one lie above the diagonal
            s = qb @ k[..., key_start:key_start + block_size, :].transpose(-2, -1)  # (B, H, b, b)
            if causal and key_start + block_size > start:  # the diagonal block: mask inside it
                cols = torch.arange(key_start, min(key_start + block_size, T))
                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            new_m = torch.maximum(m, s.amax(dim=-1))  # (B, H, b)
            p = torch.exp(s - new_m[..., None])  # (B, H, b, b)
            rescale = torch.exp(m - new_m)  # (B, H, b)
            total = rescale * total + p.sum(dim=-1)
            o = rescale[..., None] * o + p @ v[..., key_start:key_start + block_size, :]
            m = new_m
        outs.append(o / total[..., None])
        lses.append(m + torch.log(total))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
    ### END SOLUTION


# %% [markdown]
# Check it: against full attention, and the largest tensor each builds as $T$ grows
# (`largest_tensor`, from the course's grading package, watches every tensor a call creates).

# %%
gen = torch.Generator().manual_seed(1)
for T in (256, 512, 1024):
    q, k, v = (torch.randn(1, 1, T, 16, generator=gen) for _ in range(3))
    (out, lse), tiled = largest_tensor(tiled_attention, q, k, v, 64, causal=True)
    full, naive = largest_tensor(lambda q, k, v: (q @ k.transpose(-2, -1) / 4).softmax(-1) @ v, q, k, v)
    gap = (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max().item()
    print(f"T = {T:4d}: largest tensor tiled {tiled.entries:7,} entries, written out in full {naive.entries:9,}; "
          f"largest difference from SDPA {gap:.1e}")
    check_true(gap < 1e-4 and tiled.entries <= 64 * T, "the tiled attention agrees with SDPA in O(block * T) memory")

# %% [markdown]
# And the skipped blocks, on the clock: with `causal=True` only the key blocks on and below the
# diagonal are visited, $\frac{n(n+1)}{2}$ of the $n^2$ pairs of blocks, so the causal run should
# take a little more than half the time of the other (the machine's load moves the numbers).

# %%
q, k, v = (torch.randn(1, 1, 2048, 64, generator=gen) for _ in range(3))
for causal in (False, True):
    start = time.perf_counter()
    tiled_attention(q, k, v, 128, causal=causal)
    print(f"causal={causal}: {time.perf_counter() - start:.3f} s for T = 2048 in blocks of 128")

# %% nbgrader={"grade": true, "grade_id": "test_tiled_matches_sdpa", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""tiled_attention gives the output of full attention and the log-sum-exp of each row's scaled scores, causal or not."""
from course.modern_decoder_checks import check_tiled

q, k, v, out, lse = check_tiled(tiled_attention, shape=(1, 2, 7, 4), block_size=3, causal=False, seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_tiled, compare_tiled_far_below  # the grader's side only

compare_tiled(tiled_attention, shape=(1, 2, 7, 4), block_size=3, causal=False, seed=0)
compare_tiled(tiled_attention, shape=(2, 2, 10, 8), block_size=4, causal=True, seed=1)
compare_tiled(tiled_attention, shape=(1, 3, 9, 5), block_size=3, causal=True, seed=2, dtype=torch.float64)
compare_tiled(tiled_attention, shape=(2, 1, 6, 4), block_size=1, causal=True, seed=3)
compare_tiled(tiled_attention, shape=(1, 1, 5, 3), block_size=8, causal=False, seed=4)
compare_tiled_far_below(tiled_attention, shape=(1, 2, 7, 4), block_size=3, causal=True, seed=5)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_memory", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""tiled_attention never builds a tensor larger than B * H * block_size * T entries (checked at T = 1024)."""
from course.modern_decoder_checks import check_tiled_memory

q, k, v, out = check_tiled_memory(tiled_attention, shape=(1, 1, 1024, 8), block_size=32, causal=True, seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_tiled_memory  # the grader's side only

compare_tiled_memory(tiled_attention, shape=(1, 1, 1024, 8), block_size=32, causal=True, seed=0)
compare_tiled_memory(tiled_attention, shape=(2, 2, 600, 8), block_size=40, causal=False, seed=1)
### END HIDDEN TESTS

# %% [markdown]
# The clock above is a hint, not a proof: the machine's load moves it. The proof is a key block
# that cannot be read without spoiling the answer. Put NaN in every key and value from position
# $2b$ on (for blocks of size $b$): the first two query blocks must never read those keys, so
# their rows come out finite if, and only if, their key blocks above the diagonal were skipped.
# Masking those blocks to $-\infty$ is not skipping: $0 \times \text{NaN}$ is NaN.

# %% nbgrader={"grade": true, "grade_id": "test_tiled_skips", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With causal=True, tiled_attention never reads a key block that lies entirely above the diagonal."""
from course.modern_decoder_checks import check_tiled_skips

q, k, v, cut, out, lse = check_tiled_skips(tiled_attention, shape=(1, 2, 11, 4), block_size=3, seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_tiled_skips  # the grader's side only

compare_tiled_skips(tiled_attention, shape=(1, 2, 11, 4), block_size=3, seed=0)
compare_tiled_skips(tiled_attention, shape=(2, 1, 13, 8), block_size=4, seed=1)
### END HIDDEN TESTS

# %% [markdown]
# On a GPU this is what makes long contexts fit: the scores never leave the fast on-chip
# memory, and the slow main memory sees only $q, k, v$ and the output. On a CPU, in Python, the
# loops cost more than they save; what carries over is the memory, $O(\text{block} \cdot T)$
# instead of $O(T^2)$, and the exact same numbers.

# %% [markdown]
# ## Part F · The block and the model (4 points)
#
# The parts assemble as chapter 10's did, in the same pre-norm placement, with RMSNorm for
# LayerNorm, grouped-query attention with rotary positions for chapter 06's attention, and
# SwiGLU for the ReLU layer:
#
# $$h = x + \mathrm{attention}(\mathrm{norm1}(x)), \qquad \mathrm{out} = h + \mathrm{ffn}(\mathrm{norm2}(h)).$$
#
# Write `ModernBlock(width, heads, kv_heads, hidden, max_len)` with exactly the submodules
# `norm1` and `norm2` (your `RMSNorm(width)`), `attention` (your
# `GroupedQueryAttention(width, heads, kv_heads, max_len)`) and `ffn` (your `SwiGLU(width, hidden)`).
#
# Then `ModernGPT(vocab, width, heads, kv_heads, layers, max_len)`, with chapter 10's contract,
# `forward(idx, targets=None) -> (logits, loss)`, and the submodules `token_embedding`
# (`nn.Embedding(vocab, width)`), `blocks` (an `nn.ModuleList` of `layers` blocks
# `ModernBlock(width, heads, kv_heads, 8 * width // 3, max_len)`, the hidden width of Part C),
# `norm` (`RMSNorm(width)`) and `head` (`nn.Linear(width, vocab, bias=False)`). There is **no
# position embedding**: the positions enter every attention, where the queries and keys are
# turned.
#
# The tests judge the block around its own norms, attention and FFN, and the model around its
# own blocks and final norm: a mistake in an earlier part costs that part's points only.

# %% nbgrader={"grade": false, "grade_id": "modern_model", "locked": false, "schema_version": 3, "solution": true}
class ModernBlock(nn.Module):
    """Pre-norm block: x + attention(norm1(x)), then + ffn(norm2(.)), with RMSNorm, GQA and SwiGLU."""

    def __init__(self, width, heads, kv_heads, hidden, max_len):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm1 = RMSNorm(width)
        self.attention = GroupedQueryAttention(width, heads, kv_heads, max_len)
        self.norm2 = RMSNorm(width)
        self.ffn = SwiGLU(width, hidden)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        x = x + self.attention(self.norm1(x))  # (B, T, D)
        return x + self.ffn(self.norm2(x))  # (B, T, D)
        ### END SOLUTION


class ModernGPT(nn.Module):
    """Decoder-only model of ModernBlocks: (B, T) ids -> (B, T, vocab) logits, and the loss when targets are given."""

    def __init__(self, vocab, width, heads, kv_heads, layers, max_len):
        super().__init__()
        ### BEGIN SOLUTION
        self.token_embedding = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(ModernBlock(width, heads, kv_heads, 8 * width // 3, max_len) for _ in range(layers))
        self.norm = RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        ### END SOLUTION

    def forward(self, idx, targets=None):
        ### BEGIN SOLUTION
        x = self.token_embedding(idx)  # (B, T, D): no positions here
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))  # (B, T, vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        ### END SOLUTION


# %% [markdown]
# Check it: a model of chapter 10's size, and its parameters against chapter 10's GPT of the same
# width and depth (attention $4D^2 + 4D$, FFN $8D^2 + 5D$, two norms $4D$ per block, plus
# embeddings, positions and head).

# %%
model = ModernGPT(vocab=96, width=128, heads=4, kv_heads=2, layers=3, max_len=128)
logits, loss = model(torch.randint(96, (2, 16)), torch.randint(96, (2, 16)))
modern = sum(p.numel() for p in model.parameters())
gpt2_style = 3 * (12 * 128**2 + 13 * 128) + 96 * 128 + 128 * 128 + 2 * 128 + 128 * 96 + 96
print(f"logits {tuple(logits.shape)}, loss {loss.item():.3f}")
print(f"parameters: ModernGPT {modern:,}; chapter 10's GPT of the same sizes {gpt2_style:,}")

# %% nbgrader={"grade": true, "grade_id": "test_modern_block", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""ModernBlock holds norm1, attention, norm2 and ffn and wires them as x + attention(norm1(x)), then + ffn(norm2(.))."""
from course.modern_decoder_checks import check_modern_block

block, x, out = check_modern_block(ModernBlock, batch=2, length=5, width=16, heads=4, kv_heads=2, hidden=24, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_modern_block  # the grader's side only

compare_modern_block(ModernBlock, batch=2, length=5, width=16, heads=4, kv_heads=2, hidden=24, seed=1)
compare_modern_block(ModernBlock, batch=1, length=6, width=24, heads=6, kv_heads=3, hidden=40, seed=2)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_modern_gpt", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""ModernGPT's logits: the token embeddings, your blocks in order, the final norm, the head; and the loss of those logits."""
from course.modern_decoder_checks import check_modern_gpt

model, idx, targets, logits, loss = check_modern_gpt(ModernGPT, vocab=11, width=16, heads=4, kv_heads=2, layers=2,
                                                     max_len=8, batch=2, length=6, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.modern_decoder import compare_modern_gpt  # the grader's side only

compare_modern_gpt(ModernGPT, vocab=11, width=16, heads=4, kv_heads=2, layers=2, max_len=8, batch=2, length=6, seed=1)
compare_modern_gpt(ModernGPT, vocab=7, width=12, heads=3, kv_heads=1, layers=1, max_len=5, batch=3, length=5, seed=2)
### END HIDDEN TESTS

# %% [markdown]
# ### Trained on *Truyện Kiều*, against chapter 10's design
#
# Your model on chapter 10's text: the poem, lowercased, the first 3,000 lines to train and the
# last 254 to validate, characters as tokens. 3 blocks of width 128, 4 query heads sharing 2
# key/value heads, a context of 128 characters; AdamW with a one-cycle schedule, batches of 16
# windows.
#
# Beside it, chapter 10's design, built here from PyTorch's own layers
# (`nn.TransformerEncoderLayer` in pre-norm placement, with a causal mask): learned positions,
# LayerNorm, a ReLU FFN, every head with its own keys and values. Its position table and its
# full keys and values cost parameters that your model spends in its FFN, so its FFN is made
# narrower until both models hold the same number of parameters. Both train on the same
# batches, in the same number of steps, with the same schedule: whatever differs in validation
# bits per character comes from the design. The two runs need about three minutes of one CPU
# thread.

# %%
# demo only: the text, one training run and the validation score, the same for both models
poem = [line.lower() for line in kieu_lines()]
chars = sorted(set("\n".join(poem)))
to_ids = {c: i for i, c in enumerate(chars)}
train_text = torch.tensor([to_ids[c] for c in "\n".join(poem[:3000]) + "\n"])
valid_text = torch.tensor([to_ids[c] for c in "\n".join(poem[3000:]) + "\n"])
steps = 30 if short_demos() else 600


def train(lm, name):
    """AdamW with a one-cycle schedule on batches of 16 windows of 128 characters, the same batches for every model."""
    optimizer = torch.optim.AdamW(lm.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    batches, start = torch.Generator().manual_seed(0), time.time()
    for step in range(steps):
        starts = torch.randint(len(train_text) - 128, (16,), generator=batches)
        windows = torch.stack([train_text[s:s + 129] for s in starts.tolist()])  # (16, 129)
        _, loss = lm(windows[:, :-1], windows[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    print(f"{name}: {steps} steps in {time.time() - start:.0f} s, last training loss {loss.item():.3f}")
    return lm.eval()


def bits_per_character(lm, length):
    """The validation text cut into windows of `length` characters: bits per character at every position, (windows, length)."""
    count = (len(valid_text) - 1) // length
    windows = valid_text[: count * length + 1]
    inputs, targets = windows[:-1].view(count, length), windows[1:].view(count, length)
    with torch.no_grad():
        logits, _ = lm(inputs)
        nats = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    return nats.view(count, length) / math.log(2)


# %%
# demo only: chapter 10's design, from PyTorch's own layers
class LearnedPositionsGPT(nn.Module):
    """Chapter 10's GPT: learned positions, LayerNorm, a ReLU FFN, every head with its own keys and values."""

    def __init__(self, vocab, width, heads, layers, max_len, hidden):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(max_len, width)
        block = nn.TransformerEncoderLayer(width, heads, hidden, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T))  # (B, T, D)
        future = nn.Transformer.generate_square_subsequent_mask(T)  # (T, T): -inf above the diagonal
        logits = self.head(self.norm(self.blocks(x, mask=future, is_causal=True)))  # (B, T, vocab)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def parameter_count(lm):
    return sum(p.numel() for p in lm.parameters())


def learned_count(hidden):
    """The parameters of chapter 10's design at this chapter's sizes, with an FFN `hidden` wide."""
    return parameter_count(LearnedPositionsGPT(len(chars), 128, 4, 3, 128, hidden))


# %%
# demo only: the two models at the same size, trained alike
torch.manual_seed(0)
modern_lm = ModernGPT(len(chars), width=128, heads=4, kv_heads=2, layers=3, max_len=128)
per_unit = learned_count(2) - learned_count(1)  # one hidden unit of every FFN: its weights in and out, its bias
hidden = 1 + round((parameter_count(modern_lm) - learned_count(1)) / per_unit)  # the width that evens the counts
torch.manual_seed(0)
learned_lm = LearnedPositionsGPT(len(chars), width=128, heads=4, layers=3, max_len=128, hidden=hidden)
print(f"parameters: your ModernGPT {parameter_count(modern_lm):,}; chapter 10's design "
      f"{parameter_count(learned_lm):,} (its FFN {hidden} wide, yours {8 * 128 // 3})")
scores = {name: bits_per_character(train(lm, name), 128).mean().item()
          for name, lm in (("chapter 10's design", learned_lm), ("your ModernGPT", modern_lm))}
for name, bits in scores.items():
    print(f"{name:>20}: {bits:.3f} validation bits per character")

# %% [markdown]
# Read the two scores against each other. Same parameters, same batches, same steps: your
# model ends lower, in training loss and in validation bits per character, and the cell below
# holds it to that (one seed: read the margin as a rough one). Its steps took longer on the
# clock: the rotary turn and SwiGLU's third matrix are extra work, and PyTorch's own layer is
# a fused one. What it saves is elsewhere: the cache it needs when it writes is half as large
# (2 key/value heads instead of 4), and it has no table of positions, so it can read windows
# longer than any it trained on. Chapter 10's design cannot even try: its position table stops
# at 128.

# %%
# demo only: the comparison, checked
if not short_demos():  # a few steps of training (the course's own tests) say nothing yet
    check_true(scores["your ModernGPT"] < scores["chapter 10's design"],
               "at the same size and budget, the modern block scores fewer bits per character")

# %% [markdown]
# The cell below scores your trained model in windows of 128, 256 and 512 characters; a model
# with longer rotary tables holds the same weights. The positions past 128, which the model
# never saw in training, are scored separately.

# %%
# demo only: the same weights read in longer windows
long_scores = {}
for length in (128, 256, 512):
    longer = ModernGPT(len(chars), width=128, heads=4, kv_heads=2, layers=3, max_len=length)
    weights = {k: v for k, v in modern_lm.state_dict().items() if not k.endswith(("cos", "sin"))}
    longer.load_state_dict(weights, strict=False)
    bits = bits_per_character(longer.eval(), length)
    long_scores[length] = (bits[:, :128].mean().item(), bits[:, 128:].mean().item() if length > 128 else None)
    past = f", positions 128 and on {long_scores[length][1]:.3f}" if length > 128 else ""
    print(f"windows of {length}: {bits.mean().item():.3f} bits per character, positions before 128 "
          f"{long_scores[length][0]:.3f}{past}")
try:
    bits_per_character(learned_lm, 256)
except IndexError:  # nn.Embedding has no row for position 128
    print("chapter 10's design, windows of 256: it cannot read them, its position table ends at 128")

# %% [markdown]
# Read the last lines against each other. Inside the training window the longer windows score
# about as well as before: the first 128 positions of a long window are what the model trained
# on. Past it the bits per character climb, the further the worse. The formula of rotary
# positions is defined at position 300, but the model never saw the angles of such distances,
# least of all in the slow pairs, which had not yet turned far within 128 positions. Models
# that read long texts extend their window on purpose: they rescale the angles so that a longer
# context maps onto the range seen in training, then train a little more.

# %%
# demo only: what the last paragraph says, checked on your run
if not short_demos():
    within = long_scores[128][0]
    check_true(all(abs(long_scores[n][0] - within) < 0.15 for n in (256, 512)),
               "the first 128 positions of a longer window score about as well as a window of 128")
    check_true(within < long_scores[256][1] < long_scores[512][1],
               "past position 128 the bits per character climb, the further the worse")

# %% [markdown]
# ## Part G · Quiz (3 points)
#
# Answer each question with one letter, `"a"` to `"d"`, in the cell below.
#
# **Q1.** A model has 32 layers, 32 query heads and 8 key/value heads of 128 dimensions, and
# stores its cache in 16-bit numbers (2 bytes each). How much cache does one more token add?
#
# * a) 512 KiB: keys and values of all 32 query heads, in each of the layers
# * b) 64 KiB: keys and values of the 8 shared heads, one byte per number
# * c) 128 KiB: keys and values of the 8 shared heads, in every layer
# * d) 16 KiB: keys and values of one head per layer, shared by all 32
#
# **Q2.** With rotary positions, a query at position 7 and a key at position 3 give the score
# $s$. The same two vectors are placed at positions 107 and 103 instead. What is their score?
#
# * a) another value, since each vector is turned by an angle growing with its place
# * b) $s$ again, since the two rotations differ by the angle of 7 − 3 = 4 only
# * c) $s$ only in the slow pairs, where 100 θ_i is close to a whole turn of 2π
# * d) $s \cos(100\,\theta_i)$ in each pair, the turn that both vectors share
#
# **Q3.** In a tiled attention, after the first block a row holds $m = 2$ and $\ell = 3$. The
# next block's largest score is 4. By what is $\ell$ multiplied before the block's
# exponentials are added?
#
# * a) $e^{2}$, since the new maximum is larger than the old one by 2
# * b) 1, since a sum of exponentials only grows as more terms come in
# * c) 1/2, the ratio of the old maximum to the new one, 2 over 4
# * d) $e^{-2}$, since the old terms were taken against 2 and now need 4

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
Q1 = Q2 = Q3 = None  # replace each None with "a", "b", "c" or "d"
### BEGIN SOLUTION
Q1, Q2, Q3 = "c", "b", "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: the cache of grouped-query attention."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "only the key/value heads are cached: the 32 query heads share the 8 key/value heads, four each",
    "b": "a 16-bit number takes 2 bytes, not 1: count the numbers, then double them",
    "d": "a single key/value head for all queries is multi-query attention; here 8 heads are shared, 4 queries each"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: moving a query and a key together."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "each vector is turned further, but by the same extra angle: the score sees only the difference of the "
         "two turns, which depends on 7 - 3 alone",
    "c": "the property is exact in every pair, not an approximation: turning by one angle and back by another is "
         "a turn by their difference",
    "d": "a turn both vectors share cancels in the dot product: R(c)^T R(c) is the identity, no cos factor stays"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: rescaling the running sum."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "the old terms e^(s - 2) must become e^(s - 4), smaller: multiply by e^(2 - 4), the old maximum minus the new",
    "b": "the old terms were computed against the old maximum; without rescaling they are too large by e^2 compared "
         "with the new block's terms",
    "c": "the maxima enter as exponents, not as factors: e^(s - 2) becomes e^(s - 4) by the factor e^(2 - 4)"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part H · In your own words (2 points, graded by your instructor)
#
# In three or four sentences: why does the score of a rotated query and a rotated key depend
# only on how far apart they are, and why does the tiled attention give exactly full attention's
# output although it never sees a whole row of scores at once?

# %% [markdown] nbgrader={"grade": true, "grade_id": "modern_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** Each pair of dimensions is turned by an angle proportional to its position,
# and the dot product of two turned vectors only sees the difference of the two turns
# ($R(a)^\top R(b) = R(b - a)$), so the score depends on $m - n$ and not on $m$ and $n$ apart.
# The tiled attention keeps, per query, the largest score so far, the sum of exponentials and the
# weighted sum of values; whenever the maximum grows it multiplies the old sums by
# $e^{m_{old} - m_{new}}$, so at the end every term is an exponential against the final maximum,
# exactly the terms of the softmax; dividing by the sum is then the softmax, and the order in
# which blocks arrive does not matter.
#
# **Rubric (2 points).**
# * 1 point: rotations compose, the dot product of turned vectors depends on the difference of
#   the angles, hence on $m - n$ only. Not earned by "RoPE encodes relative positions" without
#   why.
# * 1 point: rescaling the running sum and output by $e^{m_{old} - m_{new}}$ when the maximum
#   grows makes the final sums exactly the softmax's numerator and denominator. Not earned by
#   "it computes the same thing in blocks" without the rescaling.
# * A false claim beside a right answer (say, that RoPE turns the values too) costs the point of
#   the idea it contradicts.

# %% [markdown]
# ## Summary
#
# * RMSNorm divides by the root mean square of a row and scales it; no mean, no bias.
# * Rotary positions turn each pair $(i, i + d/2)$ of queries and keys by $p\,\theta_i$; the
#   scores then depend on relative positions only. ALiBi adds $-s_h (i - j)$ to the scores instead.
# * SwiGLU gates a SiLU branch with a linear one; a hidden width of $\tfrac{8}{3} D$ keeps the
#   weights of a $4D$ ReLU layer.
# * Grouped-query attention shares each key/value head among a group of query heads: the cache
#   shrinks by `heads / kv_heads`.
# * Tiled attention visits keys block by block with a running maximum, sum and output, rescaled
#   by $e^{m_{old} - m_{new}}$; the same output in $O(\text{block} \cdot T)$ memory, the
#   log-sum-exp for free, and causal blocks above the diagonal skipped.
# * The block keeps chapter 10's pre-norm wiring; the model has no position embedding, since every
#   attention turns its queries and keys by their positions.
