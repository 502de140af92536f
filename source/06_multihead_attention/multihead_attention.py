# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 06 · Multi-head self-attention with a fused QKV projection
#
# One linear projection, three views of its output, $H$ heads side by side, one mask: this is
# the attention block the way a language model actually runs it. Many write-ups use three
# separate `nn.Linear` layers for queries, keys and values and loop over heads; production
# code makes **one** projection from $D$ to $3D$ features, cuts it into Q, K and V, and
# reshapes each into $H$ heads so that every head is computed in the same batched matrix
# multiplication.
#
# By the end of this notebook you will have written
#
# * `split_heads` and `merge_heads`, the two reshapes between `(B, T, D)` and `(B, H, T, d_head)`,
# * `fuse_qkv`, which stacks three projection matrices into one,
# * `MultiHeadSelfAttention`, a causal attention block with a fused QKV projection, a causal
#   mask stored as a buffer and an optional look at its per-head weights,
#
# and checked the block against `nn.MultiheadAttention` and `F.scaled_dot_product_attention`.
# Then you train it on a toy task, look at what its heads learned, and *measure* whether the
# fused projection is faster on this machine.
#
# **Shapes used throughout.** `B` sequences per batch, `T` tokens per sequence, `D` features
# per token (`d_model`), `H` heads, `d_head = D // H` features per head.
#
# | tensor | shape |
# |---|---|
# | input `x`, output | `(B, T, D)` |
# | `qkv(x)`: queries, keys and values side by side | `(B, T, 3D)` |
# | `q`, `k`, `v` after the head split | `(B, H, T, d_head)` |
# | scores and weights, one `(T, T)` matrix per head | `(B, H, T, T)` |
# | causal mask (a buffer) | `(max_len, max_len)`, sliced to `(T, T)` |
#
# **Time:** about 3 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 to 04 (attention, the $\sqrt{d_k}$ scaling, causal masks, chapter 04's parameter count).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import matplotlib.pyplot as plt

from course import attempt, check_choice, check_close, check_dtype, check_finite, check_shape, check_true, error_raised
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import draw_parameters, parameter_gradients
from course.plots import plot_attention

torch.set_num_threads(1)  # small tensors gain nothing from threads; timings and losses stay reproducible
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## Part A · Heads are slices of the feature axis (2 points)
#
# A head is not a separate network: it is a **group of consecutive features**. With $D = 12$
# and $H = 3$, head 0 owns features 0–3 of every token, head 1 features 4–7, head 2 features
# 8–11. Splitting into heads is therefore two steps:
#
# 1. `x.view(B, T, H, d_head)` cuts the last axis of each token into `H` groups of `d_head`.
#    Only the last axis is split, so every token keeps its own features.
# 2. `.transpose(1, 2)` moves the head axis next to the batch axis: `(B, H, T, d_head)`.
#    PyTorch's matrix multiplication treats all leading axes as a batch, so the attention of
#    every head in every sequence becomes one batched operation over `B * H` independent
#    problems, with `T` and `d_head` left in the last two places where `q @ k.transpose(-2, -1)`
#    needs them.
#
# **The trap.** `x.view(B, H, T, d_head)` has the right number of elements, and on a tensor
# made in one piece it raises no error. Inside the block, where `q`, `k` and `v` are slices of
# one projection `self.qkv(x)`, the same line raises a `RuntimeError` that ends "Use
# .reshape(...) instead." Take that advice and the block runs, silently wrong: `view` and
# `reshape` read the numbers in their order, token after token, so "head 0" receives all the
# features of the first `T / H` tokens: heads mixing tokens instead of slicing features. The
# cell after the check below runs both. Always split the axis you mean to split, then transpose.
#
# `merge_heads` is the inverse: transpose back to `(B, T, H, d_head)`, then glue the heads
# into `(B, T, D)`. After a transpose the memory is no longer in order, so use `reshape`
# (which copies when it must) rather than `view`.

# %% nbgrader={"grade": false, "grade_id": "split_merge", "locked": false, "schema_version": 3, "solution": true}
def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, d_head): head h holds features h*d_head:(h+1)*d_head of every token."""
    ### BEGIN SOLUTION
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_head)
    ### END SOLUTION


def merge_heads(x):
    """(B, H, T, d_head) -> (B, T, H * d_head), the inverse of split_heads."""
    ### BEGIN SOLUTION
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_head)  # (B, T, D)
    ### END SOLUTION


# %% [markdown]
# Check it: one sequence of three tokens with $D = 4$ features numbered so that you can read
# them (token $t$, feature $i$ holds $10t + i$), split into two heads. Head 0 should hold
# features 0 and 1 of every token (`0 1`, `10 11`, `20 21`), head 1 features 2 and 3; merging
# gives back the original.

# %%
x_small = (10 * torch.arange(3.0)[:, None] + torch.arange(4.0)).unsqueeze(0)  # (1, 3, 4)
heads_small = split_heads(x_small, n_heads=2)                               # (1, 2, 3, 2)
print("x:\n", x_small[0])
print("head 0:\n", heads_small[0, 0])
print("head 1:\n", heads_small[0, 1])
assert heads_small.shape == (1, 2, 3, 2)
assert torch.equal(heads_small[0, 1, 2], torch.tensor([22.0, 23.0]))  # head 1 of token 2
assert torch.equal(merge_heads(heads_small), x_small)

# %% [markdown]
# The trap, run: `q` as the block gets it, a slice of one fused projection (here three copies
# of `x_small` side by side stand in for `self.qkv(x)`).

# %%
fused = torch.cat([x_small, x_small, x_small], dim=-1)  # (1, 3, 12), like self.qkv(x)
q_slice = fused.split(4, dim=-1)[0]                      # (1, 3, 4): a slice, not one piece of memory
try:
    q_slice.view(1, 2, 3, 2)                             # the straight view, (B, H, T, d_head)
    view_raised = False
except RuntimeError as error:
    view_raised = True
    print("view raises RuntimeError:", str(error)[-30:])
wrong = q_slice.reshape(1, 2, 3, 2)                      # PyTorch's advice: runs
print("reshape runs; its head 0 holds\n", wrong[0, 0])
assert view_raised and not torch.equal(wrong, q_slice.view(1, 3, 2, 2).transpose(1, 2))

# %% nbgrader={"grade": true, "grade_id": "test_split_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""split_heads gives (B, H, T, d_head) where head h of token t is that token's h-th block of features."""
SPLIT_HINT = ("view to (B, T, H, d_head) with whole sizes (d_head = D // n_heads: D / n_heads is a float, which view "
              "refuses), then transpose(1, 2)")
x = torch.arange(2 * 5 * 12.0).view(2, 5, 12)  # 2 sequences, 5 tokens, D = 12
heads = attempt("split_heads(x of shape (2, 5, 12), 3)", split_heads, x, 3, hint=SPLIT_HINT)
check_shape("split_heads(x of shape (2, 5, 12), 3)", heads, (2, 3, 5, 4),
            hint="view to (B, T, H, d_head), then transpose(1, 2) so the heads sit next to the batch axis")
### BEGIN HIDDEN TESTS
straight = x.view(2, 3, 5, 4)
check_close("split_heads(x, 3)", heads, torch.stack(x.chunk(3, dim=-1), dim=1), atol=0,
            hint="head h of token t must be x[b, t, h*d_head:(h+1)*d_head]",
            likely_causes={"(B, T, D) is viewed straight as (B, H, T, d_head), so each head gets whole "
                           "tokens instead of a slice of every token's features: view to (B, T, H, d_head) "
                           "first, then transpose(1, 2)": straight,
                           "each head takes every H-th feature (a view to (B, T, d_head, H)): view to "
                           "(B, T, H, d_head), heads before d_head, so that a head is one contiguous slice":
                               x.view(2, 5, 4, 3).permute(0, 3, 1, 2)})
### END HIDDEN TESTS
for b, h, t in [(0, 0, 0), (0, 1, 3), (1, 2, 4)]:
    check_close(f"split_heads(x, 3)[{b}, {h}, {t}] (head {h} of token {t})", heads[b, h, t],
                x[b, t, 4 * h:4 * (h + 1)], atol=0,
                hint="head h of token t must be x[b, t, h*d_head:(h+1)*d_head]: did the heads mix tokens?")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(11)
for trial in range(6):
    B, T, H, d_head = (int(n) for n in torch.randint(1, 6, (4,), generator=gen))
    x = torch.randn(B, T, H * d_head, generator=gen, dtype=torch.float64)
    heads = attempt(f"split_heads for B={B}, T={T}, D={H * d_head}, H={H}", split_heads, x, H, hint=SPLIT_HINT)
    check_shape(f"split_heads for B={B}, T={T}, D={H * d_head}, H={H}", heads, (B, H, T, d_head))
    check_dtype("split_heads(x)", heads, x.dtype, hint="a reshape must not change the dtype")
    check_close(f"split_heads for B={B}, T={T}, D={H * d_head}, H={H}", heads,
                torch.stack(x.chunk(H, dim=-1), dim=1), atol=0,
                hint="head h of token t must be x[b, t, h*d_head:(h+1)*d_head]")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_merge_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""merge_heads puts head 0's features first, then head 1's, ..., for each token: (B, T, D)."""
heads = torch.zeros(1, 2, 3, 2)  # B = 1, H = 2, T = 3, d_head = 2
for h in range(2):
    for t in range(3):
        heads[0, h, t] = torch.tensor([100.0 * t + 10 * h, 100.0 * t + 10 * h + 1])
MERGE_HINT = "transpose back to (B, T, H, d_head), then reshape (not view: the transpose leaves memory out of order)"
merged = attempt("merge_heads(heads of shape (1, 2, 3, 2))", merge_heads, heads, hint=MERGE_HINT)
check_shape("merge_heads(heads of shape (1, 2, 3, 2))", merged, (1, 3, 4))
### BEGIN HIDDEN TESTS
check_close("merge_heads(heads)", merged, torch.cat(heads.unbind(1), dim=-1), atol=0,
            hint="token t's row must be head 0's features of token t, then head 1's",
            likely_causes={"(B, H, T, d_head) is reshaped to (B, T, D) without transposing back to "
                           "(B, T, H, d_head) first, which mixes tokens": heads.reshape(1, 3, 4)})
### END HIDDEN TESTS
check_close("merge_heads(heads)[0, 2] (token 2)", merged[0, 2], torch.tensor([200.0, 201, 210, 211]), atol=0,
            hint="token t's row must be head 0's features of token t, then head 1's: "
                 "transpose back to (B, T, H, d_head) before reshaping")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(12)
for trial in range(6):
    B, H, T, d_head = (int(n) for n in torch.randint(1, 6, (4,), generator=gen))
    heads = torch.randn(B, H, T, d_head, generator=gen, dtype=torch.float64)
    merged = attempt(f"merge_heads for B={B}, H={H}, T={T}, d_head={d_head}", merge_heads, heads, hint=MERGE_HINT)
    check_shape(f"merge_heads for B={B}, H={H}, T={T}, d_head={d_head}", merged, (B, T, H * d_head))
    check_close(f"merge_heads for B={B}, H={H}, T={T}, d_head={d_head}", merged,
                torch.cat(heads.unbind(1), dim=-1), atol=0,
                hint="transpose back to (B, T, H, d_head) before reshaping to (B, T, D)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · One projection instead of three (2 points)
#
# In self-attention the queries, keys and values all come from the same input:
# $Q = X W_Q^\top$, $K = X W_K^\top$, $V = X W_V^\top$, each $W$ of shape $(D, D)$. (An
# `nn.Linear(D, D)` stores its weight as `(out_features, in_features)` and computes
# $x W^\top + b$.) Stack the three weights along the **output** axis and you get one
# $(3D, D)$ matrix whose product with $x$ is the three results side by side:
#
# $$x \begin{bmatrix} W_Q \\ W_K \\ W_V \end{bmatrix}^{\!\top} = \big[\, x W_Q^\top \;\big|\; x W_K^\top \;\big|\; x W_V^\top \,\big].$$
#
# So `nn.Linear(D, 3 * D)` followed by `.split(D, dim=-1)` is mathematically the same as three
# `nn.Linear(D, D)`. The fused version makes one call and one matrix multiplication instead of
# three, and its three blocks live in one parameter tensor that is initialised and saved
# together. `nn.MultiheadAttention` stores exactly this stack as `in_proj_weight`, in the
# order Q, K, V.
#
# Write `fuse_qkv(w_q, w_k, w_v)`: three `(D, D)` weights in, one `(3D, D)` weight out.

# %% nbgrader={"grade": false, "grade_id": "fuse_qkv", "locked": false, "schema_version": 3, "solution": true}
def fuse_qkv(w_q, w_k, w_v):
    """Stack three (D, D) projection weights into the (3D, D) weight of one fused Linear (order Q, K, V)."""
    ### BEGIN SOLUTION
    return torch.cat([w_q, w_k, w_v], dim=0)  # (3D, D)
    ### END SOLUTION


# %% [markdown]
# Check it: three separate projections against one fused projection with the stacked weights
# (the biases stack the same way), and against the `in_proj_weight` of `nn.MultiheadAttention`.

# %%
torch.manual_seed(0)
D = 8
to_q, to_k, to_v = (nn.Linear(D, D) for _ in range(3))
fused = nn.Linear(D, 3 * D)
with torch.no_grad():
    fused.weight.copy_(fuse_qkv(to_q.weight, to_k.weight, to_v.weight))  # (3D, D)
    fused.bias.copy_(torch.cat([to_q.bias, to_k.bias, to_v.bias]))         # (3D,)
x = torch.randn(2, 5, D)
q, k, v = fused(x).split(D, dim=-1)  # three (B, T, D) views of one (B, T, 3D) result
print("fused = separate:", [torch.allclose(a, lin(x), atol=1e-6) for a, lin in zip((q, k, v), (to_q, to_k, to_v))])
assert torch.allclose(q, to_q(x), atol=1e-6) and torch.allclose(v, to_v(x), atol=1e-6)
mha = nn.MultiheadAttention(D, num_heads=2, batch_first=True)
print("in_proj_weight is a Q, K, V stack:", torch.equal(fuse_qkv(*mha.in_proj_weight.chunk(3)), mha.in_proj_weight))

# %% nbgrader={"grade": true, "grade_id": "test_fuse_qkv_shape", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""fuse_qkv returns a (3D, D) weight: the fused Linear maps D features to 3D."""
w_q, w_k, w_v = torch.randn(3, 6, 6).unbind(0)
fused_weight = fuse_qkv(w_q, w_k, w_v)
check_true(tuple(getattr(fused_weight, "shape", ())) != (3, 6, 6),
           "fuse_qkv of three (6, 6) weights has shape (3, 6, 6): torch.stack puts the three on a new axis; "
           "concatenate them along dim 0 with torch.cat, to one (3D, D) weight")
check_true(tuple(getattr(fused_weight, "shape", ())) != (6, 18),
           "fuse_qkv of three (6, 6) weights has shape (6, 18), (D, 3D): a Linear weight is "
           "(out_features, in_features), so stack along dim 0, the output axis")
check_shape("fuse_qkv of three (6, 6) weights", fused_weight, (18, 6),
            hint="a Linear weight is (out_features, in_features): stack along dim 0, the output axis")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(21)
for D in (1, 3, 16):
    w_q, w_k, w_v = torch.randn(3, D, D, generator=gen).unbind(0)
    check_shape(f"fuse_qkv of three ({D}, {D}) weights", fuse_qkv(w_q, w_k, w_v), (3 * D, D),
                hint="a Linear weight is (out_features, in_features): stack along dim 0, the output axis")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fuse_qkv_matches_separate", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""One Linear with the fused weight gives [q | k | v], the three separate projections side by side."""
torch.manual_seed(1)
w_q, w_k, w_v = torch.randn(3, 6, 6).unbind(0)
x = torch.randn(2, 4, 6)
fused_weight = fuse_qkv(w_q, w_k, w_v)
check_true(tuple(getattr(fused_weight, "shape", ())) != (3, 6, 6),
           "fuse_qkv of three (6, 6) weights has shape (3, 6, 6): torch.stack puts the three on a new axis; "
           "concatenate them along dim 0 with torch.cat, to one (3D, D) weight")
check_shape("fuse_qkv of three (6, 6) weights", fused_weight, (18, 6),
            hint="a Linear weight is (out_features, in_features): stack along dim 0, the output axis")
q, k, v = F.linear(x, fuse_qkv(w_q, w_k, w_v)).split(6, dim=-1)
for name, got, w in (("queries", q, w_q), ("keys", k, w_k), ("values", v, w_v)):
    check_close(f"{name} from the fused projection", got, F.linear(x, w), atol=1e-5,
                hint="the fused weight must hold W_Q, then W_K, then W_V, stacked along the output axis",
                likely_causes={"each weight is transposed before stacking (a Linear's weight is (out, in))":
                               F.linear(x, w.T)})
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(22)
for trial in range(4):
    D, H = int(torch.randint(1, 5, (1,), generator=gen)) * 2, 2
    reference = nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64)
    fused_weight = fuse_qkv(*reference.in_proj_weight.detach().chunk(3))
    check_close(f"fuse_qkv of the three blocks of nn.MultiheadAttention.in_proj_weight (D={D})",
                fused_weight, reference.in_proj_weight.detach(), atol=0,
                hint="stack W_Q, W_K, W_V in that order along dim 0")
### END HIDDEN TESTS

# %% [markdown]
# ### Is one matrix multiplication faster than three? Measure it
#
# "One call instead of three" sounds faster, but the arithmetic is identical: three $(D, D)$
# products cost exactly what one $(3D, D)$ product costs. What the fused version saves is
# **per-call overhead** (Python, dispatch, allocating three outputs, on a GPU one kernel launch
# each) and reading `x` three times. Whether that matters depends on the sizes. The cell below
# times both versions (median of several repeats, one CPU thread) at the tiny size of this
# chapter's demo and at a realistic size, `(B, T, D) = (32, 256, 512)`, and prints the ratio
# *separate time / fused time* (above 1 means fused is faster).

# %%
def median_seconds(fn, number, repeats=5):
    """Median over `repeats` of the mean time of `number` calls of fn()."""
    fn()  # warm-up: first calls allocate
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times))


def fused_vs_separate(B, T, D, number, repeats=5):
    """(separate seconds, fused seconds) for projecting a (B, T, D) batch to Q, K and V."""
    torch.manual_seed(0)
    separate, fused = [nn.Linear(D, D) for _ in range(3)], nn.Linear(D, 3 * D)
    x = torch.randn(B, T, D)
    with torch.no_grad():
        t_separate = median_seconds(lambda: [lin(x) for lin in separate], number, repeats)
        t_fused = median_seconds(lambda: fused(x).split(D, dim=-1), number, repeats)
    return t_separate, t_fused


# %%
# demo only: nobody grades timings
sizes = [((32, 12, 32), 300, 5), ((32, 256, 512), 1, 3)]  # many tiny calls; one large call
ratios = {}
for (B, T, D), number, repeats in sizes:
    t_separate, t_fused = fused_vs_separate(B, T, D, number, repeats)
    ratios[(B, T, D)] = t_separate / t_fused
    print(f"(B, T, D) = {(B, T, D)}: three Linears {1e6 * t_separate:9.1f} us, "
          f"one fused {1e6 * t_fused:9.1f} us, ratio {ratios[(B, T, D)]:.2f}")
assert all(np.isfinite(r) and r > 0 for r in ratios.values())  # a measurement, not a claim

# %% [markdown]
# **What the measurement says.** On the machine this course was written on (PyTorch 2.13,
# CPU, one thread), the tiny size gave a ratio between 1.1 and 1.5 from run to run. There each
# projection is $B \cdot T \cdot D \cdot D = 32 \cdot 12 \cdot 32 \cdot 32 = 393\,216$
# multiply-adds, one call took about 20 µs, and the fixed cost of a call (a `Linear` applied
# to a single token) was about 10 µs: half of each call is overhead, so one call beats three.
# At `(32, 256, 512)` each projection is $32 \cdot 256 \cdot 512 \cdot 512 \approx 2.1$ billion
# multiply-adds and the ratio landed
# between 0.9 and 1.1 from run to run, that is no consistent speed-up (fused was slightly
# slower in some runs, slightly faster in others): once the arithmetic dominates, one big
# product does the same work as three smaller ones. Your numbers will differ with the machine
# and its load; read yours above, and expect several percent of noise.
#
# **Why accelerators differ.** On a GPU every operation is a kernel launch of several
# microseconds, and a single $(D, D)$ product at moderate sizes is too small to keep all its
# thousands of cores busy; one fused launch reads `x` once, fills the device better and pays
# the launch cost once. That is why the fused layout is the standard one. The honest lesson
# is about **call count and memory traffic, not arithmetic**: the two layouts do the same
# floating-point work, and how much fusing buys depends on how expensive a call is compared
# to the work inside it.

# %% [markdown]
# ### Predict, then run (1 point)
#
# Part A's `split_heads` moves no data: it gives the same memory new axes. Take
# `x = torch.arange(960).view(2, 10, 48)` (2 sequences of 10 tokens, $D = 48$), in which each
# number is its own position in memory, and split it into 6 heads. Predict the number at
# `split_heads(x, 6)[0, 2, 3, 1]` (sequence 0, head 2, token 3, feature 1 of that head) and
# assign it to `PREDICTED_ELEMENT`. Only the exact number counts. The cell after the test looks
# it up.

# %% nbgrader={"grade": false, "grade_id": "predict_element", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_ELEMENT = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_ELEMENT = 3 * 48 + 2 * 8 + 1  # token 3 starts at 3 D; head 2 is features 16 to 23 of it
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_element", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_ELEMENT: the number at split_heads(arange(960).view(2, 10, 48), 6)[0, 2, 3, 1]."""
from course import check_number

prediction = check_number("PREDICTED_ELEMENT", PREDICTED_ELEMENT)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_ELEMENT", PREDICTED_ELEMENT, 161, rel=0, known=(
    (185, "that reads the (B, H, T, d_head) shape as the order of memory: the transpose moves no data, and "
          "the features of token 3 are still side by side"),
    (152, "that takes head 2 as every 6th feature (feature 6 j + 2); a head is one contiguous slice of "
          "d_head = 8 features of each token"),
    (17, "that is in token 0; the element belongs to token 3, three rows of D = 48 numbers further on"),
),
                              hint="token t of sequence 0 starts at t * D, and head h holds its features h * d_head "
                                   "to (h + 1) * d_head - 1")
### END HIDDEN TESTS

# %%
x = torch.arange(960).view(2, 10, 48)
print("split_heads(x, 6)[0, 2, 3, 1] =", x.view(2, 10, 6, 8).transpose(1, 2)[0, 2, 3, 1].item())

# %% [markdown]
# A head is a slice of each token's features, not a copy of the sequence: the view and the
# transpose only change how the same numbers are indexed (`x.view(...).transpose(1, 2)` shares
# `x`'s memory), which is why splitting into heads costs nothing.

# %% [markdown]
# ## Part C · The block (10 points)
#
# Now assemble `MultiHeadSelfAttention(d_model, n_heads, max_len, causal=True)`. The forward
# pass, for `x` of shape `(B, T, D)`:
#
# 1. **Project and split.** `self.qkv(x)` is `(B, T, 3D)`; `.split(D, dim=-1)` gives `q`, `k`,
#    `v`, each `(B, T, D)`; `split_heads` makes each `(B, H, T, d_head)`.
# 2. **Scores.** `q @ k.transpose(-2, -1)` contracts `d_head` and gives `(B, H, T, T)`, one
#    score matrix per head. Divide by $\sqrt{d_\text{head}}$, the width of the vectors each
#    score actually sums over, not by $\sqrt{D}$: a score is a sum of `d_head` products, so its
#    spread grows like $\sqrt{d_\text{head}}$ (chapter 02). With $D = 768$ and 12 heads,
#    $d_\text{head} = 64$ and the divisor is 8, not $\sqrt{768} \approx 27.7$.
# 3. **Causal mask.** A decoder predicting the next token may only look at the past: position
#    $i$ sees keys $j \le i$. Set every score above the diagonal to $-\infty$ *before*
#    softmax, so that those weights come out exactly 0.
# 4. **Softmax over the keys** (the last axis), then `weights @ v`: `(B, H, T, d_head)`.
# 5. **Merge and project.** `merge_heads` gives `(B, T, D)` and `self.proj`, a `(D, D)` Linear,
#    mixes the heads. Without it the heads could only be combined by later layers.
#
# **The mask is a buffer.** Build it once in `__init__`, covering the longest context the block
# will see (`max_len`), and register it with `self.register_buffer("mask", ...)`. A buffer
# travels with the module (`.to(device)`, `.double()`, `state_dict()`) but is not a parameter:
# the optimiser never touches it. In `forward`, slice its top-left `(T, T)` corner. The two
# Linears `qkv` and `proj` are the block's only parameters.
#
# **Requirements.** Raise `ValueError` when `d_model % n_heads != 0` (the features cannot be
# cut into equal heads) and when `T > max_len` (the mask does not cover it). With
# `causal=False` skip the mask. `forward(x, return_weights=True)` returns `(output, weights)`
# with the per-head weights `(B, H, T, T)`. Keep the input's dtype: a `float64` block on
# `float64` input must compute in `float64` throughout (no `.float()`, no
# `softmax(..., dtype=torch.float32)`).

# %% nbgrader={"grade": false, "grade_id": "mhsa", "locked": false, "schema_version": 3, "solution": true}
class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention (B, T, D) -> (B, T, D) with a fused QKV projection.

    Attributes: `qkv` (Linear D -> 3D), `proj` (Linear D -> D) and a causal mask buffer
    covering (max_len, max_len).
    """

    def __init__(self, d_model, n_heads, max_len, causal=True):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.max_len, self.causal = n_heads, max_len, causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))
        ### END SOLUTION

    def forward(self, x, return_weights=False):
        ### BEGIN SOLUTION
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError(f"sequence of {T} tokens is longer than max_len={self.max_len}")
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).split(D, dim=-1))  # (B, H, T, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        if self.causal:
            scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        weights = scores.softmax(dim=-1)  # (B, H, T, T)
        out = self.proj(merge_heads(weights @ v))  # (B, T, D)
        return (out, weights) if return_weights else out
        ### END SOLUTION


# %% [markdown]
# Check it: shapes, the parameters, the buffer, and a picture of one head's weights on a short
# random input. The causal triangle should be plain to see: nothing above the diagonal.

# %%
torch.manual_seed(0)
block = MultiHeadSelfAttention(d_model=32, n_heads=4, max_len=12)
x = torch.randn(2, 6, 32)                           # T = 6 < max_len
out, weights = block(x, return_weights=True)
print("output", tuple(out.shape), " weights", tuple(weights.shape))
print("parameters:", [(name, tuple(p.shape)) for name, p in block.named_parameters()])
print("buffers:   ", [(name, tuple(b.shape)) for name, b in block.named_buffers()])
print("parameter count:", sum(p.numel() for p in block.parameters()), "= 4 D^2 + 4 D =", 4 * 32**2 + 4 * 32)
assert out.shape == (2, 6, 32) and weights.shape == (2, 4, 6, 6)
assert torch.all(weights[..., torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)] == 0)
plot_attention(weights[0, 0].detach(), title="head 0 of an untrained block, random input")
plt.show()

# %% [markdown]
# The parameter count $4D^2 + 4D$ does not depend on $H$: more heads means narrower heads, not
# more weights. With $D = 512$ that is $1\,050\,624$ parameters for 8 heads and for 16.
#
# ### Check it against PyTorch
#
# `nn.MultiheadAttention` keeps the same fused layout: `in_proj_weight` is `(3D, D)` with Q, K,
# V stacked, `out_proj` is the `(D, D)` output Linear. Copy your block's weights into it and
# both must agree, outputs *and* per-head weights. Mind the mask convention: its `attn_mask`
# uses True for a **forbidden** pair, so the causal mask is the strict upper triangle.
# `F.scaled_dot_product_attention(q, k, v, is_causal=True)` is the fused kernel for the middle
# of the block (steps 2–4), with the heads as batch axes.

# %%
T = 6
reference = nn.MultiheadAttention(32, 4, batch_first=True)
with torch.no_grad():
    reference.in_proj_weight.copy_(block.qkv.weight)
    reference.in_proj_bias.copy_(block.qkv.bias)
    reference.out_proj.weight.copy_(block.proj.weight)
    reference.out_proj.bias.copy_(block.proj.bias)
    forbidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    ref_out, ref_weights = reference(x, x, x, attn_mask=forbidden, average_attn_weights=False)
    q, k, v = (split_heads(t, 4) for t in block.qkv(x).split(32, dim=-1))
    sdpa_out = block.proj(merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
print("matches nn.MultiheadAttention:", torch.allclose(out, ref_out, atol=1e-6),
      torch.allclose(weights, ref_weights, atol=1e-6))
print("matches F.scaled_dot_product_attention:", torch.allclose(out, sdpa_out, atol=1e-6))
assert torch.allclose(out, ref_out, atol=1e-6) and torch.allclose(out, sdpa_out, atol=1e-6)

# %% [markdown]
# ### The dtype trap
#
# `softmax(..., dtype=torch.float32)` is a common way to "stabilise" mixed-precision code; on
# `float64` input it silently drops to single precision. The cast back to `float64` afterwards
# hides it: the dtype looks right, but only about 7 digits are.

# %%
scores64 = torch.randn(4, 6, dtype=torch.float64) * 3
exact = scores64.softmax(dim=-1)
downcast = scores64.softmax(dim=-1, dtype=torch.float32)
print("dtype with dtype=torch.float32:", downcast.dtype)
print(f"error after casting back to float64: {(downcast.double() - exact).abs().max().item():.1e}")
assert downcast.dtype == torch.float32

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_structure", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The block's only parameters are qkv (D -> 3D) and proj (D -> D); the causal mask is a (max_len, max_len) buffer."""
from course.multihead_attention_checks import check_structure  # this chapter's checks: course/multihead_attention_checks.py

check_structure(MultiHeadSelfAttention, d_model=12, n_heads=3, max_len=10)
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(31)
for trial in range(4):
    n_heads, d_head, max_len = (int(n) for n in torch.randint(1, 9, (3,), generator=gen))
    check_structure(MultiHeadSelfAttention, n_heads * d_head, n_heads, max_len)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""forward maps (B, T, D) to (B, T, D) for any T <= max_len; return_weights=True adds weights (B, H, T, T)."""
from course.multihead_attention_checks import check_shapes

heads = (split_heads, merge_heads)  # your Part A, which the block runs
torch.manual_seed(32)
check_shapes(MultiHeadSelfAttention, heads, B=3, T=5, D=8, H=2, max_len=16)
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(32)
for trial in range(5):
    B, H, d_head, max_len = (int(n) for n in torch.randint(1, 7, (4,), generator=gen))
    T = int(torch.randint(1, max_len + 1, (1,), generator=gen))
    check_shapes(MultiHeadSelfAttention, heads, B, T, H * d_head, H, max_len + 3)
    check_shapes(MultiHeadSelfAttention, heads, B, max_len, H * d_head, H, max_len)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_value_errors", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""ValueError when d_model is not divisible by n_heads, and when a sequence is longer than max_len (not when it is as long)."""
error = error_raised(lambda: MultiHeadSelfAttention(10, 3, max_len=8))
check_true(isinstance(error, ValueError), "MultiHeadSelfAttention(d_model=10, n_heads=3, max_len=8) raised "
           f"{type(error).__name__ if error else 'nothing'}: 10 features cannot be cut into 3 equal heads, "
           "raise ValueError in __init__")
error = error_raised(lambda: MultiHeadSelfAttention(8, 2, max_len=4)(torch.randn(1, 5, 8)))
check_true(isinstance(error, ValueError), f"5 tokens through a block with max_len=4 raised "
           f"{type(error).__name__ if error else 'nothing'}: the mask covers only max_len positions, "
           "raise ValueError in forward when T > max_len")
error = error_raised(lambda: MultiHeadSelfAttention(8, 2, max_len=4)(torch.randn(1, 4, 8)))
check_true(error is None or not isinstance(error, ValueError), "4 tokens through a block with max_len=4 raised "
           "ValueError: a sequence of exactly max_len tokens fits (positions 0 to max_len - 1), so raise only when "
           "T > max_len")
check_true(error is None, f"4 tokens through a block with max_len=4 raised {type(error).__name__} "
           f"({' '.join(str(error).split())[:120]}): the forward must run on any T up to max_len; the tests of Part C "
           "above name the step that fails")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(33)
for trial in range(4):
    n_heads = int(torch.randint(2, 6, (1,), generator=gen))
    d_model = n_heads * int(torch.randint(1, 5, (1,), generator=gen)) + int(torch.randint(1, n_heads, (1,), generator=gen))
    error = error_raised(lambda: MultiHeadSelfAttention(d_model, n_heads, max_len=6))
    check_true(isinstance(error, ValueError), f"MultiHeadSelfAttention(d_model={d_model}, n_heads={n_heads}) raised "
               f"{type(error).__name__ if error else 'nothing'}: raise ValueError when d_model % n_heads != 0")
    max_len = int(torch.randint(1, 6, (1,), generator=gen))
    error = error_raised(lambda: MultiHeadSelfAttention(2 * n_heads, n_heads, max_len)(torch.randn(2, max_len + 2, 2 * n_heads)))
    check_true(isinstance(error, ValueError), f"{max_len + 2} tokens through a block with max_len={max_len} raised "
               f"{type(error).__name__ if error else 'nothing'}: raise ValueError in forward when T > max_len")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_causal", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With causal=True no query looks at a later key, each row of weights sums to 1, and the past ignores the future."""
from course.multihead_attention_checks import check_causal

heads = (split_heads, merge_heads)  # your Part A, which the block runs
torch.manual_seed(34)
check_causal(MultiHeadSelfAttention, heads, B=2, T=6, D=8, H=2)
### BEGIN HIDDEN TESTS
from course.multihead_attention_checks import run_block
from instructor.references.multihead_attention import causal_agrees  # the grader's side only

torch.manual_seed(34)  # the example above, against nn.MultiheadAttention holding the same weights
causal_agrees(MultiHeadSelfAttention, heads, B=2, T=6, D=8, H=2)

gen = torch.Generator().manual_seed(34)
for trial in range(4):
    B, T, H, d_head = (int(n) for n in torch.randint(2, 6, (4,), generator=gen))
    causal_agrees(MultiHeadSelfAttention, heads, B, T, H * d_head, H)
    block = MultiHeadSelfAttention(H * d_head, H, max_len=T, causal=False)
    draw_parameters(block, gen)
    _, weights = run_block("block(x, return_weights=True) with causal=False", block,
                           torch.randn(B, T, H * d_head, generator=gen), H, heads, return_weights=True)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    check_true(bool((weights[..., future] > 1e-4).all()),
               f"with causal=False (T={T}) some query gives zero weight to a later key: with causal=False no mask "
               "is applied and every query sees every key")
causal_agrees(MultiHeadSelfAttention, heads, 2, 5, 6, 2, as_built=True)  # the weights it was built with, nothing written
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_matches_sdpa", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""The block equals proj(F.scaled_dot_product_attention(q, k, v, is_causal=True)) on its own qkv and proj."""
from course.multihead_attention_checks import check_params, run_block

### BEGIN HIDDEN TESTS
from nboracle import read_parameters

from course.multihead_attention_checks import as_gather, standard_layout


def reference_and_mistakes(params, x, H):
    """The right output and what typical mistakes give, all from the weights the test loaded."""
    B, T, D = x.shape
    d_head = D // H
    check_params(params)
    q, k, v = F.linear(x, params["qkv.weight"], params.get("qkv.bias")).chunk(3, dim=-1)
    by_head = lambda t: torch.stack(t.chunk(H, dim=-1), dim=1)            # (B, H, T, d_head)
    by_head_wrongly = lambda t: t.reshape(B, H, T, d_head)
    glue = lambda t: torch.cat(t.unbind(1), dim=-1)                      # (B, T, D)
    if not standard_layout(split_heads, merge_heads, B, T, D, H):  # the heads as your split_heads and merge_heads make them
        split = as_gather("split_heads", split_heads, (B, T, D), H)
        merge = as_gather("merge_heads", merge_heads, (B, H, T, d_head))
        by_head, glue = (lambda t: t.flatten()[split]), (lambda t: t.flatten()[merge])
    project = lambda t: F.linear(t, params["proj.weight"], params.get("proj.bias"))
    qh, kh, vh = by_head(q), by_head(k), by_head(v)
    right = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
    scores = (qh @ kh.transpose(-2, -1) / math.sqrt(d_head)).masked_fill(~allowed, float("-inf"))
    mistakes = {
        "the scores are not divided by sqrt(d_head) at all":
            project(glue(F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=1.0))),
        "the scores are divided by sqrt(d_model) instead of sqrt(d_head)":
            project(glue(F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=1 / math.sqrt(D)))),
        "the scores are divided by the square root of the sequence length T instead of sqrt(d_head)":
            project(glue(F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=1 / math.sqrt(T)))),
        "softmax runs over the query axis (dim=-2) instead of the key axis":
            project(glue(scores.softmax(dim=-2).nan_to_num() @ vh)),
        "the future scores are set to 0 instead of -inf, so a later key keeps the weight e^0: "
        "masked_fill(..., float('-inf'))":
            project(glue((qh @ kh.transpose(-2, -1) / math.sqrt(d_head)).masked_fill(~allowed, 0.0).softmax(-1) @ vh)),
        "the output projection proj is not applied to the merged heads": glue(right),
        "the heads are merged by reshaping (B, H, T, d_head) to (B, T, D) without transposing back":
            project(right.reshape(B, T, D)),
        "q and k are in each other's places: the scores are k q^T (rows are keys) instead of q k^T, or the fused "
        "projection is unpacked as k, q, v":
            project(glue(F.scaled_dot_product_attention(kh, qh, vh, is_causal=True))),
        "(B, T, D) is viewed straight as (B, H, T, d_head) when splitting the heads":
            project(glue(F.scaled_dot_product_attention(*(by_head_wrongly(t) for t in (q, k, v)), is_causal=True))),
    }
    return project(glue(right)), mistakes


gen = torch.Generator().manual_seed(35)
for trial in range(7):  # the last: the weights the block was built with, nothing written
    B, T, H, d_head = (int(n) for n in torch.randint(2, 6, (4,), generator=gen))
    torch.manual_seed(trial)
    block = MultiHeadSelfAttention(H * d_head, H, max_len=T + int(torch.randint(0, 4, (1,), generator=gen)))
    params = draw_parameters(block, gen) if trial < 6 else read_parameters(block)
    x = torch.randn(B, T, H * d_head, generator=gen)
    out = run_block(f"block(x) for B={B}, T={T}, D={H * d_head}, H={H}", block, x, H, (split_heads, merge_heads))
    expected, mistakes = reference_and_mistakes(params, x, H)
    check_close(f"block(x) for B={B}, T={T}, D={H * d_head}, H={H}", out, expected, atol=1e-5,
                hint="compare each step with the recipe above Part C's solution cell", likely_causes=mistakes)
### END HIDDEN TESTS
torch.manual_seed(35)
block = MultiHeadSelfAttention(d_model=6, n_heads=1, max_len=8)  # one head: no split to get wrong
params = draw_parameters(block, torch.Generator().manual_seed(35))  # the test chooses the weights
x = torch.randn(2, 5, 6)
out = run_block("a one-head block(x)", block, x, 1, (split_heads, merge_heads))
check_params(params)
q, k, v = F.linear(x, params["qkv.weight"], params.get("qkv.bias")).split(6, dim=-1)
expected = F.linear(F.scaled_dot_product_attention(q, k, v, is_causal=True), params["proj.weight"], params.get("proj.bias"))
check_close("a one-head block(x)", out, expected,
            atol=1e-5, hint="scores / sqrt(d_head), causal mask, softmax over keys, weights @ v, then self.proj")

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_matches_multihead", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""With its weights copied into nn.MultiheadAttention, both give the same outputs and per-head weights."""
from course.multihead_attention_checks import check_runs

heads = (split_heads, merge_heads)  # your Part A, which the block runs
check_runs(MultiHeadSelfAttention, heads, B=2, T=5, H=2, d_head=3, seed=36)
### BEGIN HIDDEN TESTS
from instructor.references.multihead_attention import compare_with_multihead  # the grader's side only

compare_with_multihead(MultiHeadSelfAttention, heads, B=2, T=5, H=2, d_head=3, seed=36)
gen = torch.Generator().manual_seed(36)
for trial in range(6):
    B, T, H, d_head = (int(n) for n in torch.randint(1, 7, (4,), generator=gen))
    compare_with_multihead(MultiHeadSelfAttention, heads, B, T, max(H, 2), max(d_head, 2), seed=100 + trial)
compare_with_multihead(MultiHeadSelfAttention, heads, 2, 5, 2, 3, seed=106, as_built=True)  # nothing written
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_float64", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""A float64 block on float64 input computes in float64 throughout: outputs and weights, to 1e-12."""
from course.multihead_attention_checks import float64_run

heads = (split_heads, merge_heads)  # your Part A, which the block runs
float64_result = float64_run(MultiHeadSelfAttention, heads, B=2, T=5, H=2, d_head=4, seed=37)  # (parameters, x, out)
### BEGIN HIDDEN TESTS
from instructor.references.multihead_attention import (  # the grader's side only
    MISTAKES,
    built_run,
    multihead_reference,
)

gen = torch.Generator().manual_seed(37)
for trial in range(5):  # the last: the weights the block was built with, nothing written (two heads)
    B, T, H, d_head = (int(n) for n in torch.randint(1, 6, (4,), generator=gen)) if trial < 4 else (2, 5, 2, 4)
    params, x, out = (float64_run(MultiHeadSelfAttention, heads, B, T, H, d_head, seed=200 + trial) if trial < 4 else
                      built_run(MultiHeadSelfAttention, heads, B, T, H, d_head, 204, dtype=torch.float64)[:3])
    forbidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        expected = multihead_reference(params, H * d_head, H, heads, dtype=torch.float64)(
            x, x, x, attn_mask=forbidden, need_weights=False)[0]
        wrong = {mistake: multihead_reference(params, H * d_head, H, heads, dtype=torch.float64, mistake=mistake)(
            x, x, x, attn_mask=forbidden, need_weights=False)[0] for mistake in MISTAKES}
    error = float((out - expected).detach().abs().max())
    cause = next((mistake for mistake, value in wrong.items() if float((out - value).detach().abs().max()) < 1e-6), None)
    reason = f"it matches what you get when {cause}" if cause else "make the comparisons with PyTorch above pass first"
    check_true(error < 1e-4, f"the float64 output is wrong by {error:.1e}, more than rounding could explain: {reason}")
    check_true(error < 1e-12, f"the float64 output differs from a float64 computation by {error:.1e}: its dtype is "
                              "float64 but part of the computation ran in float32 (softmax(..., dtype=torch.float32)? "
                              ".float() then a cast back?)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mhsa_gradients", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""A loss on the output sends finite, non-zero gradients to every parameter of qkv and proj."""
from course.multihead_attention_checks import PART_A_FIRST, part_a_works, run_block

torch.manual_seed(38)
block = MultiHeadSelfAttention(d_model=8, n_heads=2, max_len=6)
draw_parameters(block, torch.Generator().manual_seed(38))
x = torch.randn(2, 5, 8)
run_block("the block on x of shape (2, 5, 8)", block, x, 2, (split_heads, merge_heads))  # a forward that raises
gradients = attempt("the backward pass through the block", parameter_gradients, block, x, torch.randn(2, 5, 8),
                    hint=PART_A_FIRST if not part_a_works(split_heads, merge_heads, 2, 5, 8, 2) else
                    "the forward runs but its backward raises: is a tensor the forward needs changed in place "
                    "(+=, masked_fill_) after it was used?")  # of (block(x) * direction).sum()
for name, grad in gradients.items():
    if not name.startswith(("qkv.", "proj.")):
        continue
    check_true(grad is not None, f"{name} received no gradient: is it used in forward on the way to the output?")
    check_finite(f"the gradient of {name}", grad)
    check_true(grad.abs().max() > 0, f"the gradient of {name} is all zeros: does the output depend on it?")
### BEGIN HIDDEN TESTS
from nboracle import probed_points, read_parameters

from instructor.references.multihead_attention import mistake_gradients, multihead_reference  # the grader's side only

gen = torch.Generator().manual_seed(38)
for trial in range(4):  # the last: the weights the block was built with, nothing written (two heads)
    B, T, H, d_head = (int(n) for n in torch.randint(1, 5, (4,), generator=gen)) if trial < 3 else (2, 4, 2, 3)
    D = H * d_head
    torch.manual_seed(300 + trial)
    block = MultiHeadSelfAttention(D, H, max_len=T).double()
    params = draw_parameters(block, gen) if trial < 3 else read_parameters(block)
    reference = multihead_reference(params, D, H, (split_heads, merge_heads), dtype=torch.float64)
    x, direction = torch.randn(2, B, T, D, dtype=torch.float64, generator=gen).unbind(0)
    gradients = attempt(f"the backward pass through the block (B={B}, T={T}, D={D}, H={H}, max_len={T})",
                        parameter_gradients, block, x, direction, hint="the block must run on any T up to max_len, "
                        "its backward too: make the tests above pass first")
    forbidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    (reference(x, x, x, attn_mask=forbidden, need_weights=False)[0] * direction).sum().backward()
    check_close(f"the gradient of qkv.weight (B={B}, T={T}, D={D}, H={H})", gradients["qkv.weight"],
                reference.in_proj_weight.grad, atol=1e-9, hint="the forward pass differs from multi-head attention",
                likely_causes=mistake_gradients(params, D, H, (split_heads, merge_heads), x, direction, torch.float64))
    check_close(f"the gradient of proj.weight (B={B}, T={T}, D={D}, H={H})", gradients["proj.weight"],
                reference.out_proj.weight.grad, atol=1e-9, hint="the forward pass differs from multi-head attention")
    # the outputs at the points the gradient check moved a parameter to are answers too: judged as well
    for moved, output in probed_points(block):
        with torch.no_grad():
            expected = multihead_reference({**params, **moved}, D, H, (split_heads, merge_heads), dtype=torch.float64)(
                x, x, x, attn_mask=forbidden, need_weights=False)[0]
        check_close(f"the output with {', '.join(moved)} moved a little (B={B}, T={T}, D={D}, H={H})", output, expected,
                    atol=1e-9, hint="the forward must compute multi-head attention for any parameter values, "
                                    "also for values a hair away from the ones it saw last")
### END HIDDEN TESTS

# %% [markdown]
# ## Train it: the repeat task
#
# Does the block learn? A tiny language model: token embeddings plus position embeddings, your
# block, and a linear **LM head** giving 64 logits per position. The data is as easy as data
# gets: each row is one random token repeated over the context, and the target is the row
# shifted by one, so the right prediction at every position is "the token I am looking at".
# The point is not a useful model but a check that gradients reach every part of the block and
# that heads learn on a problem with an obvious answer.
#
# The task comes with a fixed model and a claim: $D = 32$, $H = 4$, $T = 12$,
# 64 tokens, cross-entropy, 3 epochs on a CPU; before training the model guesses roughly
# uniformly among 64 tokens, so the loss starts near $\log 64 \approx 4.16$, and after 3 epochs
# it should be well below 1.0. The data size, batch and optimiser are free; this course
# chose one setting that works: 2048 training rows, batches of 32, AdamW with
# learning rate $3 \cdot 10^{-3}$.

# %%
VOCAB, D_MODEL, CONTEXT = 64, 32, 12


def repeat_task(n_rows, generator):
    """Rows of one random token repeated CONTEXT + 1 times, as (inputs, targets) = (row[:-1], row[1:])."""
    rows = torch.randint(VOCAB, (n_rows, 1), generator=generator).repeat(1, CONTEXT + 1)  # (N, T + 1)
    return rows[:, :-1], rows[:, 1:]                                                      # (N, T), (N, T)


class TinyLM(nn.Module):
    """Token + position embeddings -> one MultiHeadSelfAttention block -> LM head."""

    def __init__(self, n_heads):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(CONTEXT, D_MODEL)
        self.attention = MultiHeadSelfAttention(D_MODEL, n_heads, max_len=CONTEXT)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))  # (B, T, D)
        mixed, weights = self.attention(x, return_weights=True)             # (B, T, D), (B, H, T, T)
        return self.head(mixed), weights                                    # (B, T, VOCAB), weights


# %%
def train_repeat_task(n_heads, n_rows=2048, epochs=3, batch_size=32, lr=3e-3, seed=0):
    """Train a TinyLM; return (model, loss of every step, mean loss of every epoch)."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    inputs, targets = repeat_task(n_rows, generator)
    model = TinyLM(n_heads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for epoch in range(epochs):
        for batch in torch.randperm(n_rows, generator=generator).split(batch_size):
            logits, _ = model(inputs[batch])                                          # (B, T, VOCAB)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets[batch].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    losses = np.array(losses)
    return model, losses, losses.reshape(epochs, -1).mean(axis=1)


# %% [markdown]
# This course measured epoch-mean losses of 2.39, 0.073 and 0.012 for this setting (PyTorch 2.13,
# CPU). The check below allows for other PyTorch
# versions and machines: the first step within 0.3 of
# $\log 64$, the first epoch's mean within 0.4 of 2.39, the last epoch's mean below 0.1 (an
# order of magnitude under the claim "well below 1.0").

# %%
# demo only: autograde skips this cell and the demos that use its model
start = time.perf_counter()
model4, losses4, epochs4 = train_repeat_task(n_heads=4)
print(f"trained in {time.perf_counter() - start:.1f} s")
print(f"first step: {losses4[0]:.3f}   (log 64 = {math.log(VOCAB):.3f})")
print("epoch mean losses:", np.round(epochs4, 3))
assert abs(losses4[0] - math.log(VOCAB)) < 0.3
assert abs(epochs4[0] - 2.39) < 0.4 and epochs4[-1] < 0.1

# %% [markdown]
# How much data does this need? With 512 rows instead of 2048 the model makes only 48 updates
# in 3 epochs, and in this course's runs the last epoch's mean loss was 1.72, missing the claim. Same seed,
# same model:

# %%
# demo only
_, losses_small, epochs_small = train_repeat_task(n_heads=4, n_rows=512)
print("512 rows, epoch mean losses:", np.round(epochs_small, 3))
assert epochs_small[-1] > 1.0  # too few updates: still far from the 2048-row result

fig, ax = plt.subplots(figsize=(6.5, 3.5))
ax.plot(losses4, label="2048 rows (64 steps per epoch)")
ax.plot(losses_small, label="512 rows (16 steps per epoch)")
ax.axhline(math.log(VOCAB), color="gray", linestyle="--", label="log 64: uniform guessing")
ax.set_xlabel("optimizer step")
ax.set_ylabel("cross-entropy loss")
ax.set_title("repeat task, D = 32, H = 4, T = 12")
ax.legend()
plt.show()

# %% [markdown]
# The two curves lie on top of each other: per update, both runs learn at the same pace. The
# 512-row run simply stops after 48 updates, when the 2048-row run has 192.
#
# ## What did the heads learn?
#
# `return_weights=True` exists for this. Below, each head's `(T, T)` weights for one fixed
# input, token 7 repeated twelve times. Read each panel row by row: row $i$ is where query
# position $i$ takes its information from; everything above the diagonal is 0 by construction.
#
# Heads in trained language models often specialise: some look at the previous token, some at
# the first token, some spread their weight out. Here the task is special: every position
# holds the *same* token, so **any** mix of positions carries the answer and nothing forces a
# particular pattern. Under the picture, two numbers per head computed over all 64 possible
# inputs: how peaked it is (the largest weight of a query, averaged over the queries from
# position 3 on; an untrained block gives about 0.2) and how often its favourite key is the
# same position.

# %%
ALL_ROWS = torch.arange(VOCAB)[:, None].repeat(1, CONTEXT)  # (VOCAB, T): row t is token t repeated


def head_weights(model, rows=ALL_ROWS):
    with torch.no_grad():
        _, weights = model(rows)
    return weights                                           # (N, H, T, T)


def top_weight(weights):
    """Largest weight of each query from position CONTEXT // 4 on (several keys to choose from), averaged."""
    return float(weights[..., CONTEXT // 4:, :].amax(dim=-1).mean())


def describe_heads(weights):
    """Per head: its mean top weight, and how often its favourite key is the same over the inputs."""
    late = weights[:, :, CONTEXT // 4:]                      # (N, H, later queries, T)
    favourite = late.mean(dim=2).argmax(dim=-1)              # (N, H): the key each head reads most, per input
    for h in range(weights.shape[1]):
        usual = int(favourite[:, h].mode().values)
        print(f"head {h}: top weight {top_weight(weights[:, h]):.2f}, "
              f"favourite key {usual:2d} for {(favourite[:, h] == usual).float().mean():4.0%} of the inputs")


# %%
# demo only
def plot_heads(weights, title):
    n_heads = weights.shape[0]
    fig, axes = plt.subplots(n_heads // 4, 4, figsize=(14, 3.3 * (n_heads // 4)), squeeze=False)
    for h, ax in enumerate(axes.flat):
        plot_attention(weights[h], title=f"head {h}", ax=ax, annotate=False)
    fig.suptitle(title)
    fig.tight_layout()
    plt.show()


weights4 = head_weights(model4)                              # (64, 4, T, T)
assert torch.all(weights4.triu(diagonal=1) == 0) and torch.allclose(weights4.sum(-1), torch.ones(64, 4, CONTEXT))
plot_heads(weights4[7], "trained block, H = 4 (d_head = 8), input: token 7 repeated")
describe_heads(weights4)
torch.manual_seed(0)
untrained = top_weight(head_weights(TinyLM(n_heads=4)))
print(f"mean top weight: trained {top_weight(weights4):.2f}, untrained {untrained:.2f}")
assert top_weight(weights4) > untrained + 0.2  # training made the heads clearly sharper

# %% [markdown]
# In the run this course was written on, the panels are made of **vertical stripes**: a head
# sends most of each later query's weight to one or two fixed positions (an "anchor" such as
# position 2, or the first token), another spreads it over several earlier positions. The
# numbers under the picture add what one input cannot show: the heads are sharp (a top weight
# around 0.7, against about 0.2 before training) but *which* position they pick changes with the
# token; the favourite key is the same for only about a third to a half of the inputs. Since
# every position holds the same token, any anchor is as good as another. Change the `seed` of
# `train_repeat_task` and the anchors move. Two lessons: heads do specialise, and attention
# weights show *where* a head reads, not *why* the prediction is right.
#
# ### Eight heads
#
# Same $D = 32$, now $H = 8$, so $d_\text{head} = 4$: twice as many, half as wide, and the
# same number of parameters.

# %%
# demo only
model8, losses8, epochs8 = train_repeat_task(n_heads=8)
print("H = 8, epoch mean losses:", np.round(epochs8, 3))
assert abs(losses8[0] - math.log(VOCAB)) < 0.3 and epochs8[-1] < 0.1
assert sum(p.numel() for p in model8.attention.parameters()) == sum(p.numel() for p in model4.attention.parameters())
weights8 = head_weights(model8)
plot_heads(weights8[7], "trained block, H = 8 (d_head = 4), input: token 7 repeated")
describe_heads(weights8)

# %% [markdown]
# Eight narrower heads learn the task just as fast here. More heads give each query more
# distributions over the keys at once (one per head), each computed from fewer features.
#
# ### Reading a sentence, head by head
#
# The repeat task gives heads nothing to tell apart. A sentence does. Start with one head and
# one query. In "time flies like an arrow", *flies* alone could be the insect; its new
# representation should borrow from *time* and *arrow*, which point to the verb. Picture
# this with made-up weights for the three tokens *time*, *flies*,
# *arrow*: 0.45, 0.10 and 0.45, so that
# $x'_\text{flies} = 0.45\, v_\text{time} + 0.10\, v_\text{flies} + 0.45\, v_\text{arrow}$. They
# sum to 1 as softmax weights must, and they come from scores in which *time* and *arrow*
# tie and beat *flies* by $\ln 4.5 \approx 1.50$: softmax is then proportional to
# $(4.5, 1, 4.5)$.

# %%
flies_scores = torch.tensor([math.log(4.5), 0.0, math.log(4.5)])  # the query of "flies" against time, flies, arrow
flies_weights = flies_scores.softmax(dim=-1)
print("weights on time, flies, arrow:", [round(w, 3) for w in flies_weights.tolist()])
assert torch.allclose(flies_weights, torch.tensor([0.45, 0.10, 0.45]))

# %% [markdown]
# Now several heads. For "The cat sat on the mat because it was tired", imagine how
# four heads might each read *it* differently: head 1 looks at *cat* (whom *it* refers to),
# head 2 at *tired* (the state of *it*), head 3 at *because* (the causal link), head 4 at the
# tokens around *it* (local context). No trained model is at hand here, so the cell below
# builds these four heads **by hand** inside your `MultiHeadSelfAttention` (`causal=False`: head
# 2 must read *tired*, which comes after *it*). Each token gets hand-made features: one marks
# the pronoun, one the animate noun, one the state word, one the conjunction, and two encode
# the position as $(\cos 0.5p, \sin 0.5p)$. The query of heads 1 to 3 is "am I the pronoun?",
# their keys each pick one kind of word; head 4 compares positions, and
# $\cos 0.5(p - p')$ is largest for nearby tokens.

# %%
SENTENCE = "The cat sat on the mat because it was tired".split()
ROLES = ["who is 'it'?", "its state", "the cause", "its neighbours"]
sentence = torch.zeros(1, len(SENTENCE), 16)  # (B, T, D): hand-made features, D = 16, 4 heads of 4
for word, feature in [("it", 0), ("cat", 1), ("tired", 2), ("because", 3)]:
    sentence[0, SENTENCE.index(word), feature] = 1.0
place = 0.5 * torch.arange(len(SENTENCE), dtype=torch.float32)
sentence[0, :, 4], sentence[0, :, 5] = place.cos(), place.sin()

reader = MultiHeadSelfAttention(d_model=16, n_heads=4, max_len=len(SENTENCE), causal=False)
with torch.no_grad():
    reader.qkv.weight.zero_()
    reader.qkv.bias.zero_()
    w_q, w_k = reader.qkv.weight[:16], reader.qkv.weight[16:32]  # rows 4h .. 4h+3 belong to head h
    for head, feature in enumerate((1, 2, 3)):
        w_q[4 * head, 0] = 8.0  # the pronoun asks ...
        w_k[4 * head, feature] = 1.0  # ... for one kind of word
    w_q[12, 4] = w_q[13, 5] = 6.0  # head 4: position against position
    w_k[12, 4] = w_k[13, 5] = 1.0
    _, sentence_weights = reader(sentence, return_weights=True)  # (1, 4, T, T)
it_row = sentence_weights[0, :, SENTENCE.index("it")]  # (4, T): where "it" looks, head by head
for head, role in enumerate(ROLES):
    print(f"head {head + 1} ({role:14}): 'it' looks most at '{SENTENCE[int(it_row[head].argmax())]}' "
          f"({float(it_row[head].max()):.2f})")
assert [SENTENCE[int(i)] for i in it_row[:3].argmax(-1)] == ["cat", "tired", "because"]
assert it_row[3, 6:9].sum() > 0.6  # head 4: mostly "because", "it", "was"

# %%
# demo only
fig, axes = plt.subplots(1, 4, figsize=(19, 4.6))
for head, (ax, role) in enumerate(zip(axes, ROLES)):
    plot_attention(sentence_weights[0, head], queries=SENTENCE, keys=SENTENCE, ax=ax, annotate=False,
                   title=f"head {head + 1}: {role}")
    ax.tick_params(axis="x", labelrotation=90)
fig.tight_layout()
plt.show()
fig, ax = plt.subplots(figsize=(10, 3.2))
plot_attention(it_row, queries=[f"head {h + 1}: {role}" for h, role in enumerate(ROLES)], keys=SENTENCE,
               title="the query 'it', one row per head", ax=ax)
ax.set_ylabel("head")
fig.tight_layout()
plt.show()

# %% [markdown]
# In each panel only the row of *it* is sharp in heads 1 to 3: the other tokens do not carry
# the pronoun feature, so their queries are zero and their rows uniform. Head 4 gives every
# token a band around its own position. One layer, one query, four distributions over the same
# keys: that is what several heads buy.
#
# Remember how these maps were made. We *chose* the weights to act out a table of intuitions,
# not of measurements. Heads of trained models are rarely this tidy:
# many have no role a person could name, and, as the repeat task showed, what a head looks at
# can change with the input and the seed. And a weight map says where a head reads, not why the
# prediction comes out right (chapter 04: perturb or ablate to measure influence).
#
# ### Beyond this block
#
# * **No feed-forward network here.** A Transformer layer wraps this block and a two-layer MLP,
#   each with a residual connection and layer normalisation: chapter 04's encoder block.
# * **Rotary (RoPE) and ALiBi positions** are not implemented, but fit in this block: they act
#   on `q` and `k` (or on the scores) just before the matrix multiplication.
# * **A KV cache** for fast generation stores the keys and values of earlier positions between
#   calls: it changes the shapes of `k` and `v` (their `T` grows), not the shape of `q`.

# %% [markdown]
# ## Part D · Quiz (5 points)
#
# Answer each question with one letter, as a string: `Q1 = "a"`.
#
# **Q1.** $D = 48$ with 6 heads, a batch of 2 sequences of 10 tokens. After the split into heads, what
# is the shape of the queries that enter $QK^\top$?
#
# * a) `(2, 10, 6, 8)`
# * b) `(2, 6, 10, 48)`
# * c) `(2, 6, 8, 10)`
# * d) `(2, 6, 10, 8)`
#
# **Q2.** After attention, `out` has the shape `(B, H, T, d_head)`. A classmate merges the heads with
# `out.reshape(B, T, H * d_head)`, with no transpose first. What happens?
#
# * a) no error, but each row mixes pieces of several tokens
# * b) an error: reshape cannot turn four axes into three without a permute
# * c) the right result: the reshape lays the heads side by side per token
# * d) the right result, except that the heads come in the reverse order
#
# **Q3.** A classmate stores the causal mask as a plain attribute,
# `self.mask = torch.tril(torch.ones(L, L, dtype=torch.bool))`, neither a buffer nor a parameter. What goes wrong?
#
# * a) the optimiser updates it, as every tensor attribute of a module is trained
# * b) nothing: `Module.to` and `state_dict` handle every tensor attribute
# * c) `model.to(device)` leaves it behind, and `state_dict()` does not save it
# * d) it stays in place, but each training step computes a gradient for it
#
# **Q4.** A block with 4 heads runs on a batch of 2 sequences of 10 tokens. How many separate softmax
# distributions over the keys does it compute?
#
# * a) 20
# * b) 80
# * c) 800
# * d) 200
#
# **Q5.** Your float64 block differs from a float64 reference by 3e-8, although its output's dtype is
# `torch.float64`; a correct float64 version agrees to 1e-15. What is the likely cause?
#
# * a) the heads come in another order than in the reference implementation
# * b) the scores are divided by $\sqrt{D}$ where $\sqrt{d_\text{head}}$ is meant
# * c) float64 arithmetic itself: rounding errors near 1e-8 are its usual size
# * d) one step ran in float32, such as a softmax with `dtype=torch.float32`

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
# One letter per question, as a string, e.g. Q1 = "a".
### BEGIN SOLUTION
Q1 = "d"
Q2 = "a"
Q3 = "c"
Q4 = "b"
Q5 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: the shape of the queries after the split into heads."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "(2, 10, 6, 8) is the view before the transpose: a matmul over its last two axes would mix "
         "heads, not tokens",
    "b": "a head is a slice of the features, d_head = 48 / 6 = 8 wide, not a full D-wide copy (re-read "
         "Part A)",
    "c": "(2, 6, 8, 10) is the layout of the transposed keys, the right-hand factor; the queries keep "
         "tokens before features"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: merging the heads without the transpose."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "b": "reshape only needs the same number of elements, B x H x T x d_head = B x T x D: nothing "
         "fails, which is why the mistake is silent",
    "c": "reshape reads the elements in memory order, head by head, so a row of the result is "
         "consecutive tokens of one head; transpose(1, 2) first puts each token's heads together",
    "d": "the heads are not permuted: the elements are read head by head, so a row takes several tokens "
         "of one head"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: a causal mask kept as a plain attribute."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "only nn.Parameter objects are trained, and a boolean tensor cannot even be one: "
         "model.parameters() does not list a plain attribute",
    "b": "a Module tracks parameters, buffers and submodules; a plain tensor attribute is none of them, "
         "so .to() and state_dict() skip it",
    "d": "a boolean tensor has no gradient, and autograd tracks only tensors that require one; the "
         "trouble is where the mask lives, not its gradient"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: how many softmax rows one batch computes."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "a": "20 counts one distribution per query; each head has its own queries and keys, so each of the "
         "4 heads adds its own 20",
    "c": "800 counts the weights, 2 x 4 x 10 x 10; one distribution is a row of 10 of them",
    "d": "200 counts the weights of a single head, 2 x 10 x 10; a distribution is a row, and each head "
         "has its own rows"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q5", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q5: a float64 result with float32 accuracy."""
answer = check_choice("Q5", Q5)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q5", Q5, {
    "a": "heads in another order move whole features: the error would be of the size of the outputs, "
         "not 3e-8",
    "b": "a wrong scale changes every weight visibly, with errors near 0.1, not 3e-8",
    "c": "float64 keeps about 16 digits: a correct float64 computation agrees to about 1e-15, as the "
         "question says"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · In your own words (2 points, graded by your instructor)
#
# Eight heads of width 64 and one head of width 512 have the same number of parameters. Explain, in
# three or four sentences, what the eight heads can do that the single head cannot.

# %% [markdown] nbgrader={"grade": true, "grade_id": "heads_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** Each head computes its own scores and its own softmax over the keys, so a query gets eight
# separate distributions: one head can attend to the previous token while another attends to a
# related word far away. A single head has one softmax per query, so it must squeeze every kind
# of relation into one weighted average, and a sharp distribution for one purpose blurs the
# others. The projections are the same size either way; what the heads buy is several
# independent ways of mixing, concatenated and recombined by the output projection.
#
# **Rubric (2 points, one idea each).**
# * 1 point, several distributions: each head computes its own scores and its own softmax over the keys, so one query gets eight separate distributions of weights at once. Earns it: each head weighs the keys on its own. Does not: "eight heads see more", or "the heads run in parallel, so it is faster".
# * 1 point, what the single head loses: one head has one distribution per query, so relations that need different keys (the previous token, a related word far away) must share one weighted average, and sharpening it for one blurs the others. Earns it: a concrete conflict of this kind, or the one average that must serve every relation. Does not: restating that the parameter counts are equal, or "one head of width 512 is too wide to learn".
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "each head sees only part of the sentence" costs the first point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * One `nn.Linear(D, 3D)` equals three `nn.Linear(D, D)` with the weights stacked; split its
#   output into Q, K and V. Whether the single call is faster depends on call overhead, not
#   arithmetic: measure.
# * Heads are slices of the feature axis: `view(B, T, H, d_head)` then `transpose(1, 2)`, never
#   a straight `view(B, H, T, d_head)`; merge by transposing back, then `reshape`.
# * Scale by $\sqrt{d_\text{head}}$, mask the future with $-\infty$ before a softmax over the
#   keys, and mix the heads with the output projection.
# * The causal mask is a buffer built once for `max_len` and sliced to `(T, T)`; the two Linears
#   are the only parameters, $4D^2 + 4D$ whatever $H$.
# * The block agrees with `nn.MultiheadAttention` and `F.scaled_dot_product_attention`, keeps
#   `float64`, and learns the repeat task in seconds; its heads specialise, in ways that the
#   task allows rather than requires.
# * Several heads give one query several distributions over the same keys: in a sentence, one
#   head can follow the referent of *it* while another reads its neighbours (our hand-built
#   heads; trained heads are rarely this tidy).
