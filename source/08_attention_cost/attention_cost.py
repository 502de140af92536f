# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 08 · What attention costs, and cheaper variants
#
# Attention compares every query with every key. For a sequence of $L$ tokens that is
# $L^2$ comparisons, and the weights of all of them are stored before they are used. This
# notebook puts numbers on that cost, measures it, and builds several ways around it.
#
# By the end you will have written
#
# * `attention_cost(B, L, d, H)`: the FLOPs and bytes of one attention layer, as a dict,
# * `linear_attention(q, k, v, causal=False)`: attention with a positive feature map
#   $\phi(x) = 1 + \operatorname{ELU}(x)$ whose products can be regrouped to cost $O(L d^2)$
#   (with `phi` itself and a slow quadratic version to check it against),
# * `causal_linear_attention_step(state, q_t, k_t, v_t)`: the same, one generated token at a
#   time, with a state whose size never grows,
# * `cached_attention_step(block, x_new, cache)`: a key/value cache for chapter 06's
#   multi-head block, so that decoding a token stops recomputing the whole prefix,
# * `sliding_window_mask(T, window, causal=False)` and `sliding_window_pairs(L, window, causal)`:
#   a banded mask whose allowed pairs grow like $L \cdot w$, and their count,
#
# and you will have measured how the time of softmax attention grows with $L$ and how much the
# KV cache saves. As before, each exercise has a solution cell, a cell that runs your code,
# and graded tests; the grader also runs hidden tests on random shapes and values.
#
# **Shapes.** `B` batch, `L` (or `T`) tokens, `d` model width, `H` heads of width
# `d_head = d // H`, `d_v` value width.
#
# **Time:** about 4 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 to 06: chapter 06's multi-head block is the one the KV cache speeds up, and masks are chapter 03's.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course import attempt, check_choice, check_close, check_shape, check_true, check_type
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import call_keeping_arguments, fresh, largest_tensor
from course.plots import plot_curves

torch.set_num_threads(1)  # one core: steadier timings on a shared machine, same results

# %% [markdown]
# ## Where the work goes
#
# One multi-head self-attention layer on a batch of `B` sequences of `L` tokens of width `d`
# does four things:
#
# 1. **Projections.** Q, K, V and, at the end, the output projection: four `(d, d)` matrices
#    applied to each of the $B L$ tokens, about $B L d^2$ multiply-adds each.
# 2. **Scores** $Q K^\top$: each head compares $L$ queries with $L$ keys using dot products of
#    width `d_head`; over the `H` heads that is $B \cdot H \cdot L^2 \cdot d_\text{head} = B L^2 d$
#    multiply-adds.
# 3. **Softmax** over each row: a few operations per score, $O(B H L^2)$. Small next to the
#    matmuls; we leave it out of the count.
# 4. **Mixing** weights $\times V$: again $B L^2 d$ multiply-adds.
#
# So the compute is $O(B L^2 d)$ for scores and mixing plus $O(B L d^2)$ for the projections,
# and the memory for the stored scores is $O(B H L^2)$, one $L \times L$ matrix per head.
# Doubling $L$ doubles the projections but **quadruples** the score part. The two are equal
# when $4 B L^2 d = 8 B L d^2$, that is at $L = 2d$: beyond twice the model width, the
# $L^2$ terms dominate the attention layer. A whole Transformer block also has a feed-forward
# network of hidden width $4d$: two more matrices of $4d^2$ weights, $16 B L d^2$ FLOPs. For the
# block the two parts meet at $4 B L^2 d = 24 B L d^2$, that is near $L = 6d$.

# %% [markdown]
# ### Predict, then run (1 point)
#
# A layer with 8 heads reads one sequence of $L = 4096$ tokens and stores its attention weights
# in float32 (4 bytes a number). Predict the **memory of the stored weights in MiB**
# ($2^{20}$ bytes) and assign it to `PREDICTED_MIB` before you run the cell that measures it.
# A prediction within 2 % counts.

# %% nbgrader={"grade": false, "grade_id": "predict_weights_memory", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_MIB = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_MIB = 8 * 4096 * 4096 * 4 / 2**20  # H L^2 numbers of 4 bytes
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_weights_memory", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_MIB: the memory of the stored attention weights (8 heads, L = 4096, float32) in MiB."""
from course import check_number

prediction = check_number("PREDICTED_MIB", PREDICTED_MIB)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_MIB", PREDICTED_MIB, 512.0, rel=0.02, known=(
    (8 * 4096 * 4096 * 4 / 1e6, "that is in MB, 10^6 bytes; a MiB is 2^20 = 1 048 576 bytes"),
    (0.5, "that is in GiB, 2^30 bytes; the question asks for MiB, 2^20 bytes"),
    (64.0, "that is one head's matrix; each of the 8 heads stores its own L x L matrix of weights"),
    (1024.0, "that is 8 bytes a number, float64; float32 takes 4"),
    (0.125, "that counts L numbers per head, one row; a head stores a weight for every (query, key) pair, L x"
            " L of them"),
),
                              hint="one float32 number (4 bytes) per head, per query and per key")
### END HIDDEN TESTS

# %%
weights_shape = torch.empty(1, 8, 4096, 4096, dtype=torch.float32, device="meta")  # (B, H, L, L), no memory used
print(f"stored weights: {weights_shape.numel() * weights_shape.element_size() / 2**20:g} MiB")

# %% [markdown]
# And that is one layer for one sequence: a model with 12 layers, batches of 8 sequences and the
# gradient of each weight during training multiplies it again.

# %% [markdown]
# ## Part A · Counting the cost (3 points)
#
# Write `attention_cost(B, L, d, H)` returning a dict with these keys (whole numbers):
#
# | key | what it counts | unit |
# |---|---|---|
# | `"score_flops"` | $Q K^\top$ over all heads | FLOPs |
# | `"mix_flops"` | weights $\times V$ over all heads | FLOPs |
# | `"projection_flops"` | the Q, K, V and output projections | FLOPs |
# | `"total_flops"` | the sum of the three above | FLOPs |
# | `"score_bytes"` | the `(B, H, L, L)` score matrix stored in float32 | bytes |
#
# Count **one multiply-add as 2 FLOPs** (a matmul of `(m, n)` by `(n, p)` is $2 m n p$ FLOPs)
# and 4 bytes per float32 number. Biases and the softmax are left out.

# %% nbgrader={"grade": false, "grade_id": "attention_cost", "locked": false, "schema_version": 3, "solution": true}
def attention_cost(B, L, d, H):
    """FLOPs and score bytes of one multi-head self-attention layer (keys in the table above)."""
    ### BEGIN SOLUTION
    score_flops = 2 * B * L * L * d  # H heads x (L, d_head) @ (d_head, L)
    mix_flops = 2 * B * L * L * d  # H heads x (L, L) @ (L, d_head)
    projection_flops = 4 * 2 * B * L * d * d  # four (d, d) matrices on B * L tokens
    return {
        "score_flops": score_flops,
        "mix_flops": mix_flops,
        "projection_flops": projection_flops,
        "total_flops": score_flops + mix_flops + projection_flops,
        "score_bytes": 4 * B * H * L * L,  # (B, H, L, L) float32
    }
    ### END SOLUTION


# %% [markdown]
# Check it. Doubling $L$ should multiply the score part by exactly 4 and the projections by
# 2, and the two parts should be equal at $L = 2d$.

# %%
print(f"{'L':>6} {'score+mix GFLOP':>16} {'projection GFLOP':>17} {'scores MB':>10}")
for L in (64, 128, 256, 512, 1024):
    cost = attention_cost(B=1, L=L, d=64, H=4)
    print(f"{L:>6} {(cost['score_flops'] + cost['mix_flops']) / 1e9:>16.4f} "
          f"{cost['projection_flops'] / 1e9:>17.4f} {cost['score_bytes'] / 1e6:>10.2f}")
small, doubled = attention_cost(1, 512, 64, 4), attention_cost(1, 1024, 64, 4)
assert doubled["score_flops"] == 4 * small["score_flops"]
assert doubled["projection_flops"] == 2 * small["projection_flops"]
at_2d = attention_cost(1, 2 * 64, 64, 4)
assert at_2d["score_flops"] + at_2d["mix_flops"] == at_2d["projection_flops"]

# %% [markdown]
# The memory is the sharper limit. A modest GPT-sized layer, batch 8, 12 heads, 2,048
# tokens, keeps $8 \cdot 12 \cdot 2048^2$ scores: about 1.6 GB in float32, for one layer of
# one forward pass. (Fused kernels such as FlashAttention avoid storing it by working in
# tiles; the $L^2$ compute stays.)

# %%
gpt_layer = attention_cost(B=8, L=2048, d=768, H=12)
print(f"scores of one layer: {gpt_layer['score_bytes'] / 1e9:.2f} GB")
assert round(gpt_layer["score_bytes"] / 1e9, 2) == 1.61

# %% nbgrader={"grade": true, "grade_id": "test_cost_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""attention_cost returns the five keys with the FLOP and byte counts of the table."""
cost = attention_cost(2, 8, 16, 4)
check_type("attention_cost(2, 8, 16, 4)", cost, dict)
wanted = {"score_flops", "mix_flops", "projection_flops", "total_flops", "score_bytes"}
check_true(wanted <= set(cost), f"attention_cost is missing the keys {sorted(wanted - set(cost))}")
for key in sorted(wanted):
    check_type(f'attention_cost(2, 8, 16, 4)["{key}"]', cost[key], (int, np.integer),
               hint="the counts are whole numbers: keep them ints (d // H, not d / H; no float())")
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(80)
for trial in range(6):
    B, H = (int(n) for n in rng.integers(1, 9, size=2))
    L, d = int(rng.integers(3, 3000)), H * int(rng.integers(1, 80))
    cost = attention_cost(B, L, d, H)
    where = f"B={B}, L={L}, d={d}, H={H}"
    check_close(f"score_flops for {where}", cost["score_flops"], 2 * B * L * L * d, atol=0.5, rtol=1e-12,
                likely_causes={
                    "the score part is counted as linear in L (every query meets every key: L * L)": 2 * B * L * d,
                    "the score part is counted as B * L * d * d (that is the shape of a projection)": 2 * B * L * d * d,
                    "multiply-adds are counted instead of FLOPs (one multiply-add is 2 FLOPs)": B * L * L * d,
                    "each head is counted with the full width d (a head has width d / H)": 2 * B * H * L * L * d,
                }, hint="2 FLOPs per multiply-add, B * L * L dot products of width d in total over the heads")
    check_close(f"mix_flops for {where}", cost["mix_flops"], 2 * B * L * L * d, atol=0.5, rtol=1e-12,
                likely_causes={"the mixing is counted as linear in L": 2 * B * L * d,
                               "multiply-adds are counted instead of FLOPs": B * L * L * d},
                hint="weights (L, L) times values (L, d_head), for every head: the same count as the scores")
    check_close(f"projection_flops for {where}", cost["projection_flops"], 8 * B * L * d * d, atol=0.5,
                rtol=1e-12, likely_causes={
                    "only Q, K and V are counted (the output projection is missing)": 6 * B * L * d * d,
                    "multiply-adds are counted instead of FLOPs": 4 * B * L * d * d,
                }, hint="four (d, d) matrices, each applied to B * L tokens, 2 FLOPs per multiply-add")
    check_close(f"score_bytes for {where}", cost["score_bytes"], 4 * B * H * L * L, atol=0.5, rtol=1e-12,
                likely_causes={"the heads are not counted (each head stores its own L x L scores)": 4 * B * L * L,
                               "entries are counted instead of bytes (4 bytes per float32)": B * H * L * L},
                hint="a (B, H, L, L) tensor of float32 numbers, 4 bytes each")
### END HIDDEN TESTS
cost = attention_cost(2, 8, 16, 4)
check_close("score_flops for B=2, L=8, d=16", cost["score_flops"], 4096, atol=0.5, rtol=0,
            hint="2 FLOPs per multiply-add, B * L * L dot products of width d in total over the heads")
check_close("total_flops for B=2, L=8, d=16", cost["total_flops"],
            cost["score_flops"] + cost["mix_flops"] + cost["projection_flops"], atol=0.5, rtol=0,
            hint="total_flops is the sum of the score, mix and projection FLOPs")

# %% nbgrader={"grade": true, "grade_id": "test_cost_scaling", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""Doubling L quadruples the score part and doubles the projections; H changes only memory."""
from course.attention_cost_checks import growth  # the checks of this chapter: course/attention_cost_checks.py

costs = {}  # attention_cost of each shape, asked once
for key, factor in (("score_flops", 4), ("mix_flops", 4), ("score_bytes", 4), ("projection_flops", 2)):
    ratio = growth(attention_cost, costs, key, (1, 512, 64, 8), (1, 1024, 64, 8))
    check_true(np.isclose(ratio, factor), f"{key} grew {ratio:.3g}x when L doubled, expected {factor}x"
               + (": every query meets every key, so this part grows like L * L" if factor == 4
                  else ": a projection touches each token once, so it grows like L"))
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(81)
for trial in range(4):
    B, H = (int(n) for n in rng.integers(1, 6, size=2))
    L, d = int(rng.integers(8, 500)), H * int(rng.integers(2, 40))
    base = (B, L, d, H)
    for key, factor in (("score_flops", 2), ("mix_flops", 2), ("projection_flops", 4), ("score_bytes", 1)):
        ratio = growth(attention_cost, costs, key, base, (B, L, 2 * d, H))
        check_true(np.isclose(ratio, factor), f"{key} grew {ratio:.3g}x when the width d doubled, "
                   f"expected {factor}x (scores and mixing are linear in d, projections quadratic, "
                   "the stored scores do not depend on d)")
    for key, factor in (("score_flops", 1), ("mix_flops", 1), ("projection_flops", 1), ("score_bytes", 2)):
        ratio = growth(attention_cost, costs, key, (B, L, 2 * H * d, H), (B, L, 2 * H * d, 2 * H))
        check_true(np.isclose(ratio, factor), f"{key} grew {ratio:.3g}x when the heads doubled at a fixed width d, "
                   f"expected {factor}x: more (narrower) heads do the same FLOPs but each stores its own L x L scores")
    for key in ("score_flops", "mix_flops", "projection_flops", "total_flops", "score_bytes"):
        ratio = growth(attention_cost, costs, key, base, (3 * B, L, d, H))
        check_true(np.isclose(ratio, 3), f"{key} grew {ratio:.3g}x when the batch tripled, expected 3x")
    ratio = growth(attention_cost, costs, "score_flops", base, (B, 2 * L, d, H))
    check_true(np.isclose(ratio, 4), f"score_flops grew {ratio:.3g}x when L doubled, expected 4x: every query "
               "meets every key, so this part grows like L * L")
### END HIDDEN TESTS

# %% [markdown]
# ## Measuring it: about 4x per doubling
#
# Counting is one thing; the clock is another. The next cell times the score part (scores,
# softmax, mixing) of one head of width 64 for $L$ = 256 to 2,048, and the four projections
# for the same tokens (as one matmul with a `(d, 4d)` weight).
#
# Two habits of honest benchmarking on a shared machine. First, `time.thread_time()` counts
# the CPU time of this thread only, so the moments when the operating system runs other
# programs do not count (a wall clock would charge them to us; this works because torch runs
# on one thread here). Second, each function runs many times back to back and keeps its
# fastest run, the least disturbed one; and it does so in three passes over all the sizes, so
# that a slow spell of the machine cannot spoil one size alone. The numbers still move a little
# from run to run, most at the smallest size, where fixed costs (starting each operation,
# bringing `q`, `k`, `v` into the cache) are not yet negligible next to the $L^2$ work.

# %%
# demo only: timings decide no score (autograde skips this cell)
def best_time(fn, repeat=5, budget=0.03):
    """Fastest CPU time (seconds) of fn(): at least `repeat` runs and `budget` seconds of them."""
    fn()  # warm-up
    times = []
    while len(times) < repeat or sum(times) < budget:
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return min(times)


def best_times(fns, passes=3):
    """best_time of every fn, the fastest over `passes` passes through the whole list."""
    return [min(column) for column in zip(*([best_time(fn) for fn in fns] for _ in range(passes)))]


torch.manual_seed(0)
lengths, width = [256, 512, 1024, 2048], 64
inputs = [torch.randn(3, 1, L, width).unbind(0) for L in lengths]  # q, k, v: (1, L, d) each
w_all = torch.randn(width, 4 * width)  # Q, K, V and output projections side by side
score_seconds = best_times([lambda q=q, k=k, v=v: torch.softmax(q @ k.transpose(-1, -2) / width ** 0.5, dim=-1) @ v
                            for q, k, v in inputs])
projection_seconds = best_times([lambda q=q: q @ w_all for q, _, _ in inputs])
score_ratios = [b / a for a, b in zip(score_seconds, score_seconds[1:])]
print("score part, ms:      ", [round(1e3 * s, 2) for s in score_seconds])
print("projections, ms:     ", [round(1e3 * s, 3) for s in projection_seconds])
print("score time ratio per doubling of L:", [round(r, 2) for r in score_ratios], "(about 4 expected)")
assert score_seconds[-1] / score_seconds[1] > 4, "4x the length should cost far more than 4x the time"

# %% [markdown]
# On a log-log plot a power law is a straight line whose slope is the exponent: the score
# part follows the dashed $L^2$ line, the projections grow with slope 1 (and, at width 64,
# are far cheaper: here $L \ge 256 > 2d$).

# %%
# demo only
reference = [score_seconds[0] * (L / lengths[0]) ** 2 for L in lengths]
ax = plot_curves(lengths, {"scores + softmax + mixing": 1e3 * np.array(score_seconds),
                           "four projections": 1e3 * np.array(projection_seconds)},
                 xlabel="sequence length L (tokens)", ylabel="CPU time (ms, best run)",
                 title="Softmax attention, one head of width 64", logx=True, logy=True)
ax.plot(lengths, 1e3 * np.array(reference), "k--", label="grows like L²")
ax.set_xticks(lengths, labels=[str(L) for L in lengths])
ax.set_xticks([], minor=True)
ax.legend()
plt.show()

# %% [markdown]
# ## Padding pays L² too: bucket by length
#
# A batch is a rectangle: every sequence is padded to the longest one in its batch, and the
# padded positions are still scored (the mask only zeroes their weights afterwards). With the
# quadratic cost, one long sentence makes every short sentence in its batch as expensive as
# itself. The usual remedy is **bucketing**: sort (or group) the sentences by length so that
# each batch holds similar lengths; truncate or split very long texts into windows before
# reaching for bigger hardware.
#
# A small example: eight sentences arrive in this order, batches of four.

# %%
def padded_pairs(lengths, batch_size):
    """Query-key pairs scored when each batch is padded to its longest sequence."""
    batches = [lengths[i:i + batch_size] for i in range(0, len(lengths), batch_size)]
    return sum(len(batch) * max(batch) ** 2 for batch in batches)


arrivals = [12, 95, 14, 100, 10, 90, 11, 98]
in_order, bucketed = padded_pairs(arrivals, 4), padded_pairs(sorted(arrivals), 4)
needed = sum(n * n for n in arrivals)
print(f"in arrival order: {in_order:,} pairs; sorted by length: {bucketed:,}; without padding: {needed:,}")
assert (in_order, bucketed, needed) == (78_416, 40_784, 37_290)

# %% [markdown]
# In arrival order each batch holds a sentence of about 100 tokens, so both batches pay about
# $4 \cdot 100^2$ pairs, short sentences included. Sorted, the short ones share a batch padded to 14
# tokens: the work drops from 78,416 to 40,784 pairs, within 10 % of the 37,290 pairs the
# sentences actually need.
#
# ## Images: the stride decides
#
# A vision model that attends over a feature map treats every grid cell as a token. A
# $640 \times 640$ image at stride 32 is a $20 \times 20$ grid; at stride 8 it is $80 \times 80$.
# Going from stride 32 to stride 8 makes the grid 4x finer along each axis, so the tokens grow
# 16x and the pairs 256x. Architectures place their attention accordingly. YOLO26, for
# example, runs multi-head self-attention only on the $20 \times 20$ map at stride 32 (in the C2PSA
# block at the end of its backbone and in one attention-carrying C3k2 block of its neck) and
# uses convolutions, whose cost is linear in the number of positions, at every finer
# resolution. That is one model's choice, not a rule for all detectors: DETR-style detectors,
# for instance, use cross-attention, as the next section shows.

# %%
image_side = 640
grid_tokens = {}
for stride in (32, 8):
    side = image_side // stride
    grid_tokens[stride] = side * side
    print(f"stride {stride:>2}: {side} x {side} grid, {side * side:,} tokens, {(side * side) ** 2:,} query-key pairs")
assert grid_tokens[32] == 400 and grid_tokens[32] ** 2 == 160_000
assert grid_tokens[8] == 6_400 and round(grid_tokens[8] ** 2 / 1e6) == 41  # 40,960,000: about 41 million
assert grid_tokens[8] ** 2 == 256 * grid_tokens[32] ** 2

# %% [markdown]
# With your `attention_cost`, the score memory of one 8-head layer on one image:

# %%
for stride in (32, 8):
    cost = attention_cost(B=1, L=grid_tokens[stride], d=256, H=8)
    print(f"stride {stride:>2}: scores take {cost['score_bytes'] / 1e6:,.1f} MB")

# %% [markdown]
# ## Cross-attention: one modality asks, another answers
#
# Self-attention takes queries, keys and values from one sequence. **Cross-attention** takes
# the queries from one sequence and the keys and values from another, often of another
# *modality*: a translation decoder's target words read the source sentence (chapter 07); a
# text-to-image diffusion model's image features read the tokens of the prompt; the object
# queries of a DETR detector's decoder read the image features. The formula is unchanged,
# only the two sides differ, and so does the cost: the scores are $L_q \times L_k$, not
# $L^2$. A handful of object queries reading a $20 \times 20$ feature map costs
# $L_q \cdot 400$ pairs, linear in the number of image tokens.
#
# `nn.MultiheadAttention` takes the two sides directly, and `kdim`/`vdim` let the answering
# side have another width than the asking side (here prompt features of width 32 against
# image features of width 64). Below, 400 image tokens ask 8 prompt tokens, and 5 object
# queries ask the 400 image tokens; both are checked against the same computation written
# out with `F.scaled_dot_product_attention`.

# %%
torch.manual_seed(6)
image = torch.randn(1, grid_tokens[32], 64)  # (B, 20 * 20 image tokens, 64 features)
prompt = torch.randn(1, 8, 32)  # (B, 8 text tokens, 32 features): another modality, another width
image_reads_text = nn.MultiheadAttention(64, num_heads=4, kdim=32, vdim=32, batch_first=True)
mixed, weights = image_reads_text(image, prompt, prompt, average_attn_weights=False)
print("image tokens reading the prompt: output", tuple(mixed.shape), "weights", tuple(weights.shape))
assert mixed.shape == (1, 400, 64) and weights.shape == (1, 4, 400, 8)
assert torch.allclose(weights.sum(-1), torch.ones(1, 4, 400), atol=1e-5)  # a distribution over the prompt

mha = image_reads_text  # the same computation by hand: Q from the image, K and V from the prompt
bias_q, bias_k, bias_v = mha.in_proj_bias.chunk(3)
split = lambda t: t.view(1, -1, 4, 16).transpose(1, 2)  # (B, L, 64) -> (B, 4 heads, L, 16)
q = split(F.linear(image, mha.q_proj_weight, bias_q))  # (1, 4, 400, 16)
k, v = split(F.linear(prompt, mha.k_proj_weight, bias_k)), split(F.linear(prompt, mha.v_proj_weight, bias_v))
by_hand = mha.out_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 400, 64))
assert torch.allclose(mixed, by_hand, atol=1e-5)

# %%
object_queries = torch.randn(1, 5, 64)  # (B, 5 learned queries, 64): "what is in the picture?"
queries_read_image = nn.MultiheadAttention(64, num_heads=4, batch_first=True)
found, image_weights = queries_read_image(object_queries, image, image)  # weights averaged over heads
print("object queries reading the image: output", tuple(found.shape), "weights", tuple(image_weights.shape))
for name, (n_q, n_k) in [("self-attention over the stride-32 map", (400, 400)),
                         ("400 image tokens reading 8 prompt tokens", (400, 8)),
                         ("5 object queries reading 400 image tokens", (5, 400))]:
    print(f"{name:42}: {n_q} x {n_k} = {n_q * n_k:>7,} query-key pairs")
assert found.shape == (1, 5, 64) and image_weights.shape == (1, 5, 400)

# %% [markdown]
# In a trained detector each object query learns to look at the image region of one object;
# in a diffusion model each image position learns which words of the prompt concern it. Here
# the weights are untrained and the point is the plumbing: which side asks, which side
# answers, and that the bill is $L_q \cdot L_k$.

# %% [markdown]
# ## Why softmax needs the whole L × L matrix
#
# Write $\kappa(q, k) = \exp(q \cdot k / \sqrt{d})$ for the unnormalised weight. The output of
# query $i$ is $\sum_j \kappa(q_i, k_j)\, v_j \,/\, \sum_j \kappa(q_i, k_j)$. If the kernel were a
# plain dot product of features, $\kappa(q, k) = \phi(q) \cdot \phi(k)$ with $\phi$ mapping to
# $r$ numbers, matrix products could be **regrouped**, as in the matrix-chain problem:
#
# $$\sum_j \big(\phi(q_i) \cdot \phi(k_j)\big)\, v_j^\top = \phi(q_i)^\top \underbrace{\Big(\sum_j \phi(k_j)\, v_j^\top\Big)}_{S\ \text{of shape}\ (r,\ d_v)} .$$
#
# $S$ is computed once, in $O(L\, r\, d_v)$, and each query then costs $O(r\, d_v)$: linear in
# $L$, and no $L \times L$ matrix anywhere. The exponential has no such finite $\phi$: its series
# $\exp(q \cdot k) = \sum_n (q \cdot k)^n / n!$ needs the features of every power $n$, infinitely
# many. Random-feature methods approximate it; **linear attention** instead *chooses* a finite
# feature map and lives with a different kernel.
#
# The feature map must be **positive**: then every weight $\phi(q_i) \cdot \phi(k_j)$ is
# positive, the normaliser $\phi(q_i) \cdot z$ with $z = \sum_j \phi(k_j)$ can never be zero,
# and the output is still a weighted average of the values. The standard choice is
# $\phi(x) = 1 + \operatorname{ELU}(x)$, which equals $1 + x$ for $x > 0$ and $e^x$ for $x \le 0$.

# %% [markdown]
# ## Part B · Linear attention (8 points)
#
# Three small functions, all on torch tensors with any leading batch axes: `q` and `k` are
# `(..., L, d)`, `v` is `(..., L, d_v)`. There is no $1/\sqrt{d}$ here; the weights are
# $\phi(q_i) \cdot \phi(k_j)$, normalised per query.
#
# 1. `phi(x)`: the feature map $1 + \operatorname{ELU}(x)$, elementwise (`F.elu` exists).

# %% nbgrader={"grade": false, "grade_id": "phi", "locked": false, "schema_version": 3, "solution": true}
def phi(x):
    """Positive feature map of linear attention: 1 + ELU(x), elementwise."""
    ### BEGIN SOLUTION
    return 1 + F.elu(x)
    ### END SOLUTION


# %% [markdown]
# Check it: $\phi$ is $e^x$ on the left (positive, tending to 0) and $1 + x$ on the right.

# %%
xs = torch.linspace(-4, 3, 141)
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(xs, phi(xs), label="φ(x) = 1 + ELU(x)")
ax.plot(xs, F.elu(xs), "--", label="ELU(x)")
ax.axhline(0, color="grey", lw=0.8)
ax.set_xlabel("x")
ax.set_ylabel("feature value")
ax.legend()
plt.show()
print("smallest φ on [-4, 3]:", float(phi(xs).min()))

# %% nbgrader={"grade": true, "grade_id": "test_phi", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""phi is positive everywhere, equals 1 + x for x > 0, keeps the shape and leaves its input as it was."""
xs = torch.linspace(-10, 10, 101, dtype=torch.float64)
features, (xs_after,) = attempt("phi(x) for x of shape (101,)", call_keeping_arguments, phi, xs.clone(),
                                hint="phi(x) = 1 + ELU(x), elementwise, for a tensor x of any shape")
check_true(torch.equal(xs_after, xs), "phi changed the x it was given (F.elu(x, inplace=True), or an in-place += ?): "
           "return a new tensor, so that the queries and keys the caller passes in stay as they were")
check_shape("phi(x) for x of shape (101,)", features, (101,))
check_true(bool((features[xs <= 0] != 0).any()) or not bool((features[xs > 0] == xs[xs > 0]).all()),
           "phi(x) is 0 for every x <= 0 and x for x > 0: that is ReLU(x), whose zero features can leave a query "
           "with no weight at all (0 / 0); use 1 + ELU(x), positive everywhere")
check_true(bool((features > 0).all()), f"phi(x) has {int((features <= 0).sum())} entries <= 0 (smallest "
           f"{float(features.min()):.3g}): features must be positive so that every weight phi(q).phi(k) is "
           "positive and the normaliser never reaches 0; use 1 + ELU(x)")
check_close("phi(x) for x > 0", features[xs > 0], xs[xs > 0] + 1, atol=1e-12,
            hint="for positive x, ELU(x) = x, so phi(x) = 1 + x")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(82)
for shape in ((3, 5), (2, 4, 6), (7,)):
    x = 3 * torch.randn(shape, generator=gen, dtype=torch.float64)
    check_close(f"phi(x) for x of shape {shape}", phi(x), F.elu(x) + 1, atol=1e-12, likely_causes={
        "phi(x) = ELU(x), without the 1 +": F.elu(x),
        "phi(x) = 1 + ReLU(x) instead of 1 + ELU(x)": 1 + F.relu(x),
        "phi(x) = exp(x) instead of 1 + ELU(x)": torch.exp(x),
    }, hint="phi(x) = 1 + ELU(x): e^x for x <= 0 and 1 + x for x > 0")
### END HIDDEN TESTS

# %% [markdown]
# 2. `linear_attention_quadratic(q, k, v, causal=False)`: the **slow way**, to have something
#    to compare with. Build the `(..., L, L)` matrix of $\phi(q_i) \cdot \phi(k_j)$; with
#    `causal=True` keep only $j \le i$ (zero the rest, for example with `.tril()`); divide each
#    row by its sum; multiply by `v`.

# %% nbgrader={"grade": false, "grade_id": "linear_attention_quadratic", "locked": false, "schema_version": 3, "solution": true}
def linear_attention_quadratic(q, k, v, causal=False):
    """Linear attention through the (..., L, L) matrix phi(q_i).phi(k_j); returns (..., L, d_v)."""
    ### BEGIN SOLUTION
    scores = phi(q) @ phi(k).transpose(-1, -2)  # (..., L, L), all positive
    if causal:
        scores = scores.tril()  # query i keeps keys j <= i
    weights = scores / scores.sum(dim=-1, keepdim=True)  # rows sum to 1
    return weights @ v  # (..., L, d_v)
    ### END SOLUTION


# %% [markdown]
# 3. `linear_attention(q, k, v, causal=False)`: the **regrouped** form, never building an
#    `L x L` tensor.
#    * Not causal: $S = \phi(K)^\top V$ of shape `(..., d, d_v)` and $z = \sum_j \phi(k_j)$ of
#      shape `(..., d)`; output row $i$ is $\phi(q_i)^\top S \,/\, \phi(q_i) \cdot z$.
#    * Causal: query $i$ uses the running sums $S_i = \sum_{j \le i} \phi(k_j) v_j^\top$ and
#      $z_i = \sum_{j \le i} \phi(k_j)$. `torch.cumsum` along the token axis gives all of them at
#      once: `(..., L, d, d_v)` and `(..., L, d)`, still linear in $L$.

# %% nbgrader={"grade": false, "grade_id": "linear_attention", "locked": false, "schema_version": 3, "solution": true}
def linear_attention(q, k, v, causal=False):
    """Linear attention in O(L d d_v): regrouped products, running sums when causal; (..., L, d_v)."""
    ### BEGIN SOLUTION
    fq, fk = phi(q), phi(k)  # (..., L, d)
    if causal:
        S = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (..., L, d, d_v): S_i
        z = torch.cumsum(fk, dim=-2)  # (..., L, d): z_i
        numerator = (fq.unsqueeze(-1) * S).sum(dim=-2)  # (..., L, d_v)
    else:
        S = fk.transpose(-1, -2) @ v  # (..., d, d_v)
        z = fk.sum(dim=-2, keepdim=True)  # (..., 1, d)
        numerator = fq @ S  # (..., L, d_v)
    denominator = (fq * z).sum(dim=-1, keepdim=True)  # (..., L, 1)
    return numerator / denominator
    ### END SOLUTION


# %% [markdown]
# ### Check it: same numbers, different memory
#
# The two forms must agree, causal or not. Then `largest_tensor` (from `nboracle`)
# watches every torch operation inside a call and reports the largest tensor it produced:
# the quadratic form builds the `L x L` matrix, the regrouped form does not.

# %%
torch.manual_seed(1)
q, k = torch.randn(2, 2, 3, 50, 8, dtype=torch.float64).unbind(0)  # (B, H, L, d) each
v = torch.randn(2, 3, 50, 5, dtype=torch.float64)  # (B, H, L, d_v)
for causal in (False, True):
    gap = (linear_attention(q, k, v, causal) - linear_attention_quadratic(q, k, v, causal)).abs().max()
    print(f"causal={causal}: largest difference between the two forms {float(gap):.1e}")
    assert gap < 1e-10

long_q, long_k, long_v = torch.randn(3, 1, 2048, 8).unbind(0)  # L = 2048, d = d_v = 8
for fn in (linear_attention_quadratic, linear_attention):
    _, largest = largest_tensor(fn, long_q, long_k, long_v, causal=True)
    print(f"{fn.__name__:>27}: largest tensor {largest.shape}, {largest.entries * 4 / 1e6:.1f} MB")
assert largest.entries < 2048 * 2048 // 10

# %% [markdown]
# And the clock, on the same lengths as before (one head, width 64): doubling $L$ should now
# cost about 2x, not 4x.

# %%
# demo only
linear_seconds = best_times([lambda q=q, k=k, v=v: linear_attention(q, k, v) for q, k, v in inputs])
linear_ratios = [b / a for a, b in zip(linear_seconds, linear_seconds[1:])]
print("linear attention, ms:", [round(1e3 * s, 3) for s in linear_seconds])
print("time ratio per doubling of L:", [round(r, 2) for r in linear_ratios], "(about 2 expected)")
ax = plot_curves(lengths, {"softmax attention (scores + mixing)": 1e3 * np.array(score_seconds),
                           "linear attention (regrouped)": 1e3 * np.array(linear_seconds)},
                 xlabel="sequence length L (tokens)", ylabel="CPU time (ms, best run)",
                 title="One head of width 64", logx=True, logy=True)
ax.set_xticks(lengths, labels=[str(L) for L in lengths])
ax.set_xticks([], minor=True)
plt.show()

# %% nbgrader={"grade": true, "grade_id": "test_linear_attention_quadratic", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""linear_attention_quadratic normalises phi(q).phi(k) per query and respects the causal mask."""
from course.attention_cost_checks import positive_inputs

gen = torch.Generator().manual_seed(83)
q, k, v = (torch.randn(2, 6, n, generator=gen, dtype=torch.float64) for n in (4, 4, 3))
q, k = positive_inputs(phi, q, k)  # judged around your phi, on inputs where it is positive
out = linear_attention_quadratic(q, k, v)
check_shape("linear_attention_quadratic(q (2, 6, 4), k, v (2, 6, 3))", out, (2, 6, 3))
same_keys = k[:, :1].expand(2, 6, 4)
check_close("output when all six keys are equal", linear_attention_quadratic(q, same_keys, v),
            v.mean(dim=-2, keepdim=True).expand(2, 6, 3), atol=1e-10,
            hint="equal keys give equal weights: after dividing each row by its sum, the plain mean of v")
check_close("causal output of token 0", linear_attention_quadratic(q, k, v, causal=True)[:, 0], v[:, 0],
            atol=1e-10, hint="with causal=True, token 0 sees only key 0, so its output is v_0: mask phi(q).phi(k) "
                             "first, then divide each row by its sum")
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import own_phi

def hidden_loop_reference(q, k, v, causal):
    fq, fk, rows = own_phi(phi, q), own_phi(phi, k), []
    for i in range(q.shape[-2]):
        seen = i + 1 if causal else k.shape[-2]
        w = (fq[..., i:i + 1, :] * fk[..., :seen, :]).sum(-1, keepdim=True)  # (..., seen, 1)
        rows.append((w * v[..., :seen, :]).sum(-2) / w.sum(-2))
    return torch.stack(rows, dim=-2)

for trial in range(4):
    batch = tuple(int(n) for n in torch.randint(1, 4, (trial % 3,), generator=gen))
    L, d, d_v = (int(n) for n in torch.randint(2, 9, (3,), generator=gen))
    q, k = (torch.randn(*batch, L, d, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*batch, L, d_v, generator=gen, dtype=torch.float64)
    q, k = positive_inputs(phi, q, k)
    raw = own_phi(phi, q) @ own_phi(phi, k).transpose(-1, -2)
    raw_elu = F.elu(q) @ F.elu(k).transpose(-1, -2)
    for causal in (False, True):
        masked_elu = raw_elu.tril() if causal else raw_elu
        check_close(f"linear_attention_quadratic(causal={causal}) for batch {batch}, L={L}, d={d}, d_v={d_v}",
                    linear_attention_quadratic(q, k, v, causal), hidden_loop_reference(q, k, v, causal),
                    atol=1e-9, likely_causes={
                        "the rows of phi(q).phi(k) are not divided by their sums": (raw.tril() if causal else raw) @ v,
                        "the causal mask keeps the future (j >= i) instead of the past":
                            (raw.triu() / raw.triu().sum(-1, keepdim=True)) @ v,
                        "causal=True is ignored": (raw / raw.sum(-1, keepdim=True)) @ v,
                        "phi(x) = ELU(x), without the 1 + (fix phi first)":
                            (masked_elu / masked_elu.sum(-1, keepdim=True)) @ v,
                        "softmax attention was computed instead of phi(q).phi(k)":
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    }, hint="weights = phi(q) @ phi(k)^T, masked to j <= i when causal, each row divided by its sum")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_linear_attention_matches", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""linear_attention (not causal) agrees with the quadratic form on random batched inputs."""
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import own_phi

gen = torch.Generator().manual_seed(184)
for trial in range(5):
    batch = tuple(int(n) for n in torch.randint(1, 4, (trial % 3,), generator=gen))
    L, d, d_v = (int(n) for n in torch.randint(2, 12, (3,), generator=gen))
    q, k = (2 * torch.randn(*batch, L, d, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*batch, L, d_v, generator=gen, dtype=torch.float64)
    q, k = positive_inputs(phi, q, k)
    fq, fk, ek = own_phi(phi, q), own_phi(phi, k), F.elu(k)
    kernel = torch.einsum("...id,...jd->...ij", fq, fk)
    check_close(f"linear_attention for batch {batch}, L={L}, d={d}, d_v={d_v}", linear_attention(q, k, v),
                torch.einsum("...ij,...jv->...iv", kernel / kernel.sum(-1, keepdim=True), v), atol=1e-9,
                likely_causes={
                    "the normaliser z is missing (divide phi(q_i)^T S by phi(q_i) . z)":
                        fq @ (fk.transpose(-1, -2) @ v),
                    "phi(x) = ELU(x), without the 1 +":
                        (F.elu(q) @ (ek.transpose(-1, -2) @ v)) / (F.elu(q) @ ek.sum(-2).unsqueeze(-1)),
                    "softmax attention was computed instead of phi(q).phi(k)": F.scaled_dot_product_attention(q, k, v),
                    "phi is applied to the values too: S = phi(K)^T V takes v as it is":
                        (fq @ (fk.transpose(-1, -2) @ own_phi(phi, v))) / (fq @ fk.sum(-2).unsqueeze(-1)),
                    "the causal running sums were used although causal=False":
                        (kernel.tril() @ v) / kernel.tril().sum(-1, keepdim=True),
                    "z sums phi(k) over the features (dim=-1) instead of over the keys (dim=-2)":
                        (fq @ (fk.transpose(-1, -2) @ v)) / (fq * fk.sum(-1, keepdim=True)).sum(-1, keepdim=True),
                }, hint="S = phi(K)^T V and z = sum_j phi(k_j); output = phi(q_i)^T S / (phi(q_i) . z)")
### END HIDDEN TESTS
from course.attention_cost_checks import positive_inputs

gen = torch.Generator().manual_seed(84)
q, k, v = (torch.randn(3, 7, n, generator=gen, dtype=torch.float64) for n in (5, 5, 2))
q, k = positive_inputs(phi, q, k)  # judged around your phi, on inputs where it is positive
out = linear_attention(q, k, v)
check_shape("linear_attention(q (3, 7, 5), k, v (3, 7, 2))", out, (3, 7, 2),
            hint="the output has one row of width d_v per query")
same_keys = k[:, :1].expand(3, 7, 5)
check_close("linear_attention when all seven keys are equal", linear_attention(q, same_keys, v),
            v.mean(dim=-2, keepdim=True).expand(3, 7, 2), atol=1e-10,
            hint="equal keys give equal weights, so every output is the plain mean of v: divide phi(q_i)^T S by "
                 "phi(q_i) . z, with z = sum_j phi(k_j)")
### BEGIN HIDDEN TESTS
kernel = own_phi(phi, q) @ own_phi(phi, k).transpose(-1, -2)  # (3, 7, 7), built here, not by you
check_close("linear_attention(q (3, 7, 5), k, v (3, 7, 2))", out, (kernel / kernel.sum(-1, keepdim=True)) @ v,
            atol=1e-9, hint="S = phi(K)^T V and z = sum_j phi(k_j); output = phi(q_i)^T S / (phi(q_i) . z)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_linear_attention_causal", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""linear_attention(causal=True) uses only tokens j <= i, like the causal quadratic form."""
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import own_phi

gen = torch.Generator().manual_seed(185)
def hidden_masked_reference(q, k, v, low, high):
    """Weights phi(q_i).phi(k_j) kept for i + low <= j <= i + high, rows normalised."""
    w = own_phi(phi, q) @ own_phi(phi, k).transpose(-1, -2)
    L = q.shape[-2]
    offset = torch.arange(L)[None, :] - torch.arange(L)[:, None]  # j - i
    w = w * ((offset >= low) & (offset <= high))
    return (w @ v) / w.sum(-1, keepdim=True)

for trial in range(5):
    batch = tuple(int(n) for n in torch.randint(1, 4, (trial % 3,), generator=gen))
    L = int(torch.randint(3, 12, (), generator=gen))
    d, d_v = (int(n) for n in torch.randint(2, 7, (2,), generator=gen))
    q, k = (torch.randn(*batch, L, d, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*batch, L, d_v, generator=gen, dtype=torch.float64)
    q, k = positive_inputs(phi, q, k)
    fq, fk = own_phi(phi, q), own_phi(phi, k)
    w = (fq @ fk.transpose(-1, -2)).tril() + torch.diag_embed((fq * fk).sum(-1))  # current token counted twice
    outer = fk.unsqueeze(-1) * v.unsqueeze(-2)  # (..., L, d, d_v)
    def read_out(S, z):
        return (fq.unsqueeze(-1) * S).sum(-2) / (fq * z).sum(-1, keepdim=True)
    check_close(f"linear_attention(causal=True) for batch {batch}, L={L}, d={d}, d_v={d_v}",
                linear_attention(q, k, v, causal=True), hidden_masked_reference(q, k, v, -L, 0), atol=1e-9,
                likely_causes={
                    "the running sums at token i include token i + 1, a future token":
                        hidden_masked_reference(q, k, v, -L, 1),
                    "the running sums count the current token twice": (w @ v) / w.sum(-1, keepdim=True),
                    "the sums over all tokens were used (causal=True is ignored)":
                        hidden_masked_reference(q, k, v, -L, L),
                    "the running sums run from the end (they use tokens j >= i)":
                        hidden_masked_reference(q, k, v, 0, L),
                    "z is summed along its feature axis (torch.cumsum(..., dim=-1)) instead of the token axis, dim=-2":
                        read_out(outer.cumsum(-3), fk.cumsum(-1)),
                    "S is summed along its feature axis (torch.cumsum(..., dim=-2)) instead of the token axis, dim=-3":
                        read_out(outer.cumsum(-2), fk.cumsum(-2)),
                    "S and z are summed along a feature axis instead of the token axis (dim=-3 of S, dim=-2 of z)":
                        read_out(outer.cumsum(-2), fk.cumsum(-1)),
                }, hint=("query i uses S_i = sum_{j<=i} phi(k_j) v_j^T and z_i = sum_{j<=i} phi(k_j): torch.cumsum along the "
                        "token axis, dim=-2 of z (..., L, d) and dim=-3 of S (..., L, d, d_v)"))
### END HIDDEN TESTS
from course.attention_cost_checks import positive_inputs

gen = torch.Generator().manual_seed(85)
q, k, v = (torch.randn(2, 6, n, generator=gen, dtype=torch.float64) for n in (4, 4, 3))
q, k = positive_inputs(phi, q, k)  # judged around your phi, on inputs where it is positive
out = linear_attention(q, k, v, causal=True)
check_shape("linear_attention(..., causal=True)", out, (2, 6, 3))
check_close("causal output of token 0", out[:, 0], v[:, 0], atol=1e-10,
            hint="token 0 sees only itself, so its output must be v_0: the running sums at i include j = i")
changed = v.clone()
changed[:, -1] += 100.0
out_changed = linear_attention(q, k, changed, causal=True)
leaked = not torch.allclose(out_changed[:, :-1], out[:, :-1], atol=1e-9)  # message only: names the leak
check_true(not leaked, "the causal outputs of tokens 0..4 changed when the last value changed: a later token "
           "changed an earlier output, so the running sums look into the future")
### BEGIN HIDDEN TESTS
hint = ("query i uses S_i = sum_{j<=i} phi(k_j) v_j^T and z_i = sum_{j<=i} phi(k_j): torch.cumsum along the token "
        "axis, dim=-2 of z (..., L, d) and dim=-3 of S (..., L, d, d_v)")
check_close("linear_attention(q (2, 6, 4), k, v (2, 6, 3), causal=True)", out, hidden_masked_reference(q, k, v, -6, 0),
            atol=1e-9, hint=hint)
check_close("causal outputs after changing the last value", out_changed, hidden_masked_reference(q, k, changed, -6, 0),
            atol=1e-9, hint=hint)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_linear_attention_is_linear", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""linear_attention never builds an L x L tensor (checked with largest_tensor at L = 2048)."""
from nboracle import largest_tensor
gen = torch.Generator().manual_seed(86)
q, k, v = (torch.randn(1, 2048, n, generator=gen) for n in (4, 4, 3))
for causal in (False, True):
    out, largest = largest_tensor(linear_attention, q, k, v, causal=causal)
    check_shape(f"linear_attention(causal={causal}) at L=2048", out, (1, 2048, 3))
    check_true(largest.entries < 2048 * 2048 // 4,
               f"linear_attention(causal={causal}) built a tensor of shape {largest.shape} ({largest.entries:,} "
               "entries) at L = 2048: that is the L x L matrix the regrouping avoids; form phi(K)^T V (or its "
               "running sums) first, then multiply by phi(q)")
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import own_phi

for causal in (False, True):
    q, k, v = (torch.randn(2, 2, 1200, n, generator=gen, dtype=torch.float64) for n in (6, 6, 5))
    q, k = positive_inputs(phi, q, k)
    out, largest = largest_tensor(linear_attention, q, k, v, causal=causal)
    check_true(largest.entries < 1200 * 1200 // 2,
               f"linear_attention(causal={causal}) built a tensor of shape {largest.shape} at L = 1200 with "
               "batch axes (2, 2): form phi(K)^T V (or its running sums) first, then multiply by phi(q)")
    kernel = own_phi(phi, q) @ own_phi(phi, k).transpose(-1, -2)  # (2, 2, L, L), built here, not by you
    kernel = kernel.tril() if causal else kernel
    check_close(f"linear_attention(causal={causal}) at L = 1200", out, (kernel @ v) / kernel.sum(-1, keepdim=True),
                atol=1e-8, hint="the regrouped form must give the same numbers as the quadratic one")
# the clock and the memory decide, not a report: at L = 2**17 an L x L matrix of float64 needs
# 128 GiB, which no grading machine (and no sandbox) holds; the regrouped form needs 3 MB
L = 2 ** 17
q, k, v = (torch.randn(1, L, 2, generator=gen, dtype=torch.float64) for _ in range(3))
q, k = positive_inputs(phi, q, k)
fq, fk = own_phi(phi, q), own_phi(phi, k)
for causal in (False, True):
    try:
        out = linear_attention(q, k, v, causal=causal)
    except RuntimeError as error:  # torch's "can't allocate memory"
        raise AssertionError(f"linear_attention(causal={causal}) failed at L = {L:,} ({str(error)[:90]}): an L x L "
                             f"matrix there needs {L * L * 8 // 2 ** 30} GiB. Form phi(K)^T V (or its running sums) "
                             "first, then multiply by phi(q)") from None
    if causal:
        sums, norms = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3), torch.cumsum(fk, dim=-2)
        reference = (fq.unsqueeze(-1) * sums).sum(-2) / (fq * norms).sum(-1, keepdim=True)
    else:
        reference = (fq @ (fk.transpose(-1, -2) @ v)) / (fq * fk.sum(-2, keepdim=True)).sum(-1, keepdim=True)
    check_close(f"linear_attention(causal={causal}) at L = {L:,}", out, reference, atol=1e-8,
                hint="the regrouped form must give the same numbers as the quadratic one")
### END HIDDEN TESTS

# %% [markdown]
# ## Generating one token at a time
#
# A decoder generates token $t$ after seeing tokens $0, \dots, t-1$. Softmax attention has to
# keep every past key and value around (the KV cache of Part D): its memory grows by $2d$
# numbers per token and per layer. Causal linear attention needs only the two running sums,
#
# $$S_t = S_{t-1} + \phi(k_t)\, v_t^\top, \qquad z_t = z_{t-1} + \phi(k_t), \qquad
# \text{out}_t = \frac{\phi(q_t)^\top S_t}{\phi(q_t) \cdot z_t},$$
#
# a `(d, d_v)` matrix and a `(d,)` vector per head, **the same size at token 10 and at token
# 10,000**. For a layer of width 128 with 4 heads of width 32:

# %%
tokens = np.arange(0, 4097, 256)
d_model, n_heads = 128, 4
d_head = d_model // n_heads
kv_entries = 2 * tokens * d_model  # one key and one value of width d per token
state_entries = np.full_like(tokens, n_heads * (d_head * d_head + d_head))  # S and z per head
fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.plot(tokens, kv_entries / 1e3, label="KV cache (softmax attention)")
ax.plot(tokens, state_entries / 1e3, label="running sums S, z (linear attention)")
ax.set_xlabel("tokens generated")
ax.set_ylabel("numbers kept per layer (thousands)")
ax.legend()
plt.show()
print(f"after 4096 tokens: KV cache {kv_entries[-1]:,} numbers, running sums {state_entries[-1]:,}")
assert state_entries[-1] == 4224 and kv_entries[-1] == 1_048_576

# %% [markdown]
# ## Part C · Causal linear attention, one token at a time (4 points)
#
# Write `causal_linear_attention_step(state, q_t, k_t, v_t)` returning `(out_t, new_state)`:
#
# * `q_t`, `k_t` are `(..., d)` and `v_t` is `(..., d_v)`: one token (any leading axes, such
#   as batch and heads);
# * `state` is `None` before the first token, otherwise the `(S, z)` returned by the previous
#   step, with `S` of shape `(..., d, d_v)` and `z` of shape `(..., d)`;
# * add the current token to the sums **first**, then read out `out_t` of shape `(..., d_v)`;
# * return new tensors (`S = S + ...`) instead of changing the state in place, so that an old
#   state stays valid (beam search keeps several).

# %% nbgrader={"grade": false, "grade_id": "causal_linear_attention_step", "locked": false, "schema_version": 3, "solution": true}
def causal_linear_attention_step(state, q_t, k_t, v_t):
    """One token of causal linear attention from the running sums (S, z); returns (out_t, (S, z))."""
    ### BEGIN SOLUTION
    fq, fk = phi(q_t), phi(k_t)  # (..., d)
    if state is None:
        S = torch.zeros(*fk.shape, v_t.shape[-1], dtype=v_t.dtype, device=v_t.device)
        z = torch.zeros_like(fk)
    else:
        S, z = state
    S = S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)  # (..., d, d_v): + phi(k_t) v_t^T
    z = z + fk  # (..., d)
    out = (fq.unsqueeze(-1) * S).sum(dim=-2) / (fq * z).sum(dim=-1, keepdim=True)  # (..., d_v)
    return out, (S, z)
    ### END SOLUTION


# %% [markdown]
# Check it: feed a sequence token by token and compare with your causal `linear_attention`
# on the whole sequence. The state keeps its size.

# %%
torch.manual_seed(2)
q, k = torch.randn(2, 2, 4, 30, 8, dtype=torch.float64).unbind(0)  # (B, H, T, d) each
v = torch.randn(2, 4, 30, 6, dtype=torch.float64)  # (B, H, T, d_v)
state, outputs = None, []
for t in range(q.shape[-2]):
    out_t, state = causal_linear_attention_step(state, q[..., t, :], k[..., t, :], v[..., t, :])
    outputs.append(out_t)
    if t in (0, 29):
        print(f"after token {t}: S {tuple(state[0].shape)}, z {tuple(state[1].shape)}")
gap = (torch.stack(outputs, dim=-2) - linear_attention(q, k, v, causal=True)).abs().max()
print(f"largest difference from the whole-sequence causal form: {float(gap):.1e}")
assert gap < 1e-10

# %% nbgrader={"grade": true, "grade_id": "test_step_state", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The state is (S, z) of fixed shapes (..., d, d_v) and (..., d), holding the running sums."""
from course.attention_cost_checks import STEP_HINT
gen = torch.Generator().manual_seed(87)
q, k, v = (torch.randn(3, 12, n, generator=gen, dtype=torch.float64) for n in (5, 5, 2))  # (B, T, .)
state = None
for t in range(12):
    out_t, state = attempt(f"causal_linear_attention_step at token {t}", causal_linear_attention_step, state,
                           q[:, t], k[:, t], v[:, t], hint=STEP_HINT)
    check_shape(f"out_t at token {t}", out_t, (3, 2), hint="one output of width d_v per batch row")
    check_true(isinstance(state, (tuple, list)) and len(state) == 2, "the state must be the pair (S, z)")
    check_shape(f"S after token {t}", state[0], (3, 5, 2),
                hint="S keeps one (d, d_v) matrix whatever the number of tokens: constant memory per token")
    check_shape(f"z after token {t}", state[1], (3, 5), hint="z is one vector of width d")
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import own_phi

for trial in range(3):
    batch = tuple(int(n) for n in torch.randint(1, 4, (trial + 1,), generator=gen))
    T, d, d_v = (int(n) for n in torch.randint(2, 9, (3,), generator=gen))
    q, k = (torch.randn(*batch, T, d, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*batch, T, d_v, generator=gen, dtype=torch.float64)
    state = None
    for t in range(T):
        _, state = attempt(f"causal_linear_attention_step at token {t}", causal_linear_attention_step, state,
                           q[..., t, :], k[..., t, :], v[..., t, :], hint=STEP_HINT)
    fk = own_phi(phi, k)
    check_close(f"S after {T} tokens (batch {batch}, d={d}, d_v={d_v})", state[0],
                fk.transpose(-1, -2) @ v, atol=1e-9, likely_causes={
                    "each token is added to S twice": 2 * fk.transpose(-1, -2) @ v,
                    "S sums k_j v_j^T without phi": k.transpose(-1, -2) @ v,
                }, hint="S_t = S_{t-1} + phi(k_t) v_t^T, a (d, d_v) outer product per token")
    check_close(f"z after {T} tokens (batch {batch}, d={d})", state[1], fk.sum(-2), atol=1e-9,
                hint="z_t = z_{t-1} + phi(k_t)",
                likely_causes={"z starts at ones: with state None the running sums start at zeros": fk.sum(-2) + 1})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_step_matches_causal", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""Token by token, the step gives the causal linear attention output of every position."""
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import STEP_HINT, own_phi

gen = torch.Generator().manual_seed(188)
for trial in range(4):
    batch = tuple(int(n) for n in torch.randint(1, 4, (trial % 3 + 1,), generator=gen))
    T = int(torch.randint(3, 12, (), generator=gen))
    d, d_v = (int(n) for n in torch.randint(2, 7, (2,), generator=gen))
    q, k = (torch.randn(*batch, T, d, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*batch, T, d_v, generator=gen, dtype=torch.float64)
    q, k = positive_inputs(phi, q, k)
    state, outputs = None, []
    for t in range(T):
        out_t, state = attempt(f"causal_linear_attention_step at token {t}", causal_linear_attention_step, state,
                               q[..., t, :], k[..., t, :], v[..., t, :], hint=STEP_HINT)
        outputs.append(out_t)
    fq, fk = own_phi(phi, q), own_phi(phi, k)
    w = (fq @ fk.transpose(-1, -2)).tril()  # (..., T, T)
    w_twice = w + torch.diag_embed((fq * fk).sum(-1))
    w_before = (fq @ fk.transpose(-1, -2)).tril(-1)
    check_close(f"step outputs for batch {batch}, T={T}, d={d}, d_v={d_v}", torch.stack(outputs, dim=-2),
                (w @ v) / w.sum(-1, keepdim=True), atol=1e-9, likely_causes={
                    "the current token is counted twice": (w_twice @ v) / w_twice.sum(-1, keepdim=True),
                    "the output is read before the current token is added":
                        (w_before @ v) / w_before.sum(-1, keepdim=True),
                    "the normaliser z is missing": w @ v,
                    "z starts at ones: with state None the running sums start at zeros":
                        (w @ v) / (w.sum(-1, keepdim=True) + fq.sum(-1, keepdim=True)),
                }, hint="add phi(k_t) v_t^T to S and phi(k_t) to z first, then read out_t = phi(q_t)^T S_t / "
                        "(phi(q_t) . z_t)")
### END HIDDEN TESTS
from course.attention_cost_checks import positive_inputs

gen = torch.Generator().manual_seed(88)
q, k, v = (torch.randn(2, 5, n, generator=gen, dtype=torch.float64) for n in (4, 4, 3))
q, k = positive_inputs(phi, q, k)  # judged around your phi, on inputs where it is positive
out_0, _ = causal_linear_attention_step(None, q[:, 0], k[:, 0], v[:, 0])
check_close("output of the first token", out_0, v[:, 0], atol=1e-10,
            hint="the first token sees only itself, so out_0 must be v_0: add the current token to S and z "
                 "before reading them out")

# %% nbgrader={"grade": true, "grade_id": "test_step_keeps_state", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The step does not change the state it is given: the same state twice gives the same output."""
gen = torch.Generator().manual_seed(89)
q, k, v = (torch.randn(n, generator=gen, dtype=torch.float64) for n in (3, 3, 2))  # one token, batch-free
state = (torch.rand(3, 2, generator=gen, dtype=torch.float64), 1 + torch.rand(3, generator=gen, dtype=torch.float64))
kept = tuple(s.clone() for s in state)  # running sums S (d, d_v) and z (d,) of some earlier tokens
# the state as the step left it: your own objects here, the kernel's copies under the grader
STATE_HINT = ("the state is the pair (S, z) of running sums, S of shape (..., d, d_v) and z of shape (..., d), "
              "whatever the number of tokens: make the test of the state pass first")
(first, _), (after, *_) = attempt("causal_linear_attention_step((S, z), q_t, k_t, v_t)", call_keeping_arguments,
                                  causal_linear_attention_step, state, q, k, v, hint=STATE_HINT)
unchanged = all(torch.equal(a, b) for a, b in zip(kept, after))
check_true(unchanged, "the step changed the (S, z) it was given (an in-place S += ... ?): build new tensors, "
           "S = S + ..., so that an earlier state can be reused")
second, _ = attempt("causal_linear_attention_step((S, z), q_t, k_t, v_t)", causal_linear_attention_step, after, q, k,
                    v, hint=STATE_HINT)
check_close("the same step taken twice from one state", second, first, atol=1e-12)  # message only: names the change
### BEGIN HIDDEN TESTS
from course.attention_cost_checks import own_phi

fq, fk = own_phi(phi, q), own_phi(phi, k)
expected = (fq @ (kept[0] + torch.outer(fk, v))) / (fq @ (kept[1] + fk))  # out_t from the state given
for what, mine in (("the first", first), ("the second", second)):
    check_close(f"{what} step from one state", mine, expected, atol=1e-12,
                hint="add phi(k_t) v_t^T to S and phi(k_t) to z, then read out_t = phi(q_t)^T S_t / (phi(q_t) . z_t)")
state = (torch.randn(2, 3, 5, generator=gen, dtype=torch.float64).abs(),
         torch.randn(2, 3, generator=gen, dtype=torch.float64).abs() + 1)
kept = tuple(s.clone() for s in state)
_, (after, *_) = attempt("causal_linear_attention_step((S, z), q_t, k_t, v_t) for a batch of 2", call_keeping_arguments,
                         causal_linear_attention_step, state,
                         *(torch.randn(2, n, generator=gen, dtype=torch.float64) for n in (3, 3, 5)), hint=STATE_HINT)
check_true(all(torch.equal(a, b) for a, b in zip(kept, after)),
           "the step changed the (S, z) it was given (an in-place S += ... ?): build new tensors, S = S + ...")
### END HIDDEN TESTS

# %% [markdown]
# ## Part D · A KV cache for chapter 06's block (4 points)
#
# Linear attention changes the model. The other classic saving keeps softmax attention exactly
# and removes *repeated* work instead. When a decoder generates token $t+1$, a naive loop runs
# the whole prefix of $t+1$ tokens through the model again, recomputing keys and values that
# have not changed (a causal layer never lets a token see the future, so the keys and values
# of old tokens stay the same). A **KV cache** keeps each layer's keys and values; a step then
# computes the query, key and value of the **new token only**, appends the key and value, and
# lets the one query attend over everything cached. Q keeps shape `(B, H, 1, d_head)`; K and V
# grow to `(B, H, t+1, d_head)`.
#
# Below is a compact version of chapter 06's `MultiHeadSelfAttention` (same attributes: `qkv`
# a Linear D → 3D, `proj` a Linear D → D, `n_heads`, `d_head`), written with
# `F.scaled_dot_product_attention(..., is_causal=True)`. Read it; it is not an exercise.

# %% nbgrader={"grade": false, "grade_id": "provided_block", "locked": true, "schema_version": 3, "solution": false}
class MultiHeadSelfAttention(nn.Module):
    """Causal multi-head self-attention with a fused QKV projection: (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model, n_heads, max_len, causal=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of n_heads={n_heads}")
        self.n_heads, self.d_head, self.max_len, self.causal = n_heads, d_model // n_heads, max_len, causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError(f"sequence of {T} tokens is longer than max_len={self.max_len}")
        q, k, v = (t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, d_head)
                   for t in self.qkv(x).split(D, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # (B, H, T, d_head)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


# %% [markdown]
# Write `cached_attention_step(block, x_new, cache=None)`:
#
# * `x_new` is the newest token, `(B, 1, D)`; `cache` is `None` before the first token,
#   otherwise the `(K, V)` returned by the previous step, each `(B, H, T_past, d_head)`;
# * project `x_new` with `block.qkv`, split into heads, append the new key and value to the
#   cache, attend with the one query over all `T_past + 1` positions, merge the heads and
#   apply `block.proj`;
# * return `(y_new, (K, V))` with `y_new` of shape `(B, 1, D)` and the grown cache;
# * use only `block.qkv`, `block.proj`, `block.n_heads` and `block.d_head`: the tests hand your
#   step nothing else of their block (calling `block(...)` itself fails there).
#
# A trap: `F.scaled_dot_product_attention(..., is_causal=True)` aligns its mask with the
# **top-left** corner when there are fewer queries than keys, so one query would see only the
# first key. The new token may see every cached position (they are all in its past): use no
# mask at all.

# %% nbgrader={"grade": false, "grade_id": "cached_attention_step", "locked": false, "schema_version": 3, "solution": true}
def cached_attention_step(block, x_new, cache=None):
    """Attention output of `block` for the newest token x_new (B, 1, D), with a (K, V) cache."""
    ### BEGIN SOLUTION
    B, _, D = x_new.shape
    q, k, v = (t.view(B, 1, block.n_heads, block.d_head).transpose(1, 2)  # (B, H, 1, d_head)
               for t in block.qkv(x_new).split(D, dim=-1))
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)  # (B, H, T_past + 1, d_head)
        v = torch.cat([cache[1], v], dim=2)
    y = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, d_head): every cached key is in the past
    return block.proj(y.transpose(1, 2).reshape(B, 1, D)), (k, v)
    ### END SOLUTION


# %% [markdown]
# ### Check it: step by step equals the full forward pass
#
# Feeding the tokens one at a time through the cache must reproduce, row by row, what the block
# computes on the whole sequence at once.

# %%
torch.manual_seed(3)
block = MultiHeadSelfAttention(d_model=32, n_heads=4, max_len=64).double()
x = torch.randn(2, 10, 32, dtype=torch.float64)  # (B, T, D)
cache, rows = None, []
with torch.no_grad():
    for t in range(x.shape[1]):
        y_t, cache = cached_attention_step(block, x[:, t:t + 1], cache)  # (B, 1, D)
        rows.append(y_t)
    gap = (torch.cat(rows, dim=1) - block(x)).abs().max()
print(f"cache after 10 tokens: K {tuple(cache[0].shape)}, V {tuple(cache[1].shape)}")
print(f"largest difference from block(x): {float(gap):.1e}")
assert gap < 1e-10

# %% [markdown]
# ### Greedy decoding, both ways
#
# A tiny language model (token and position embeddings, the block, a linear head) is enough to
# compare the two decoders; it is untrained, so its text is gibberish, but greedy decoding is a
# deterministic function of the logits and both decoders must produce **the same tokens**.
# `greedy(..., use_cache=False)` reruns the whole prefix every step; `use_cache=True` feeds each
# new token once through your `cached_attention_step`.

# %% nbgrader={"grade": false, "grade_id": "provided_tiny_lm", "locked": true, "schema_version": 3, "solution": false}
class TinyLM(nn.Module):
    """Token + position embeddings -> MultiHeadSelfAttention -> linear head over the vocabulary."""

    def __init__(self, vocab, d_model, n_heads, max_len):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.block = MultiHeadSelfAttention(d_model, n_heads, max_len)
        self.head = nn.Linear(d_model, vocab)

    def embed(self, idx, start=0):  # (B, T) token ids at positions start, start+1, ... -> (B, T, D)
        return self.tok(idx) + self.pos(torch.arange(start, start + idx.shape[1]))

    def forward(self, idx):  # (B, T) -> (B, T, vocab)
        return self.head(self.block(self.embed(idx)))


# %% nbgrader={"grade": false, "grade_id": "provided_greedy", "locked": true, "schema_version": 3, "solution": false}
@torch.no_grad()
def greedy(model, prompt, n_new, use_cache, step_seconds=None):
    """Append n_new argmax tokens to prompt (B, T0); optionally record each step's time."""
    idx, cache, seen = prompt, None, 0
    for _ in range(n_new):
        start = time.thread_time()  # CPU time of this thread, as in best_time
        if use_cache:  # only the tokens the cache has not seen go through the block
            for t in range(seen, idx.shape[1]):
                y, cache = cached_attention_step(model.block, model.embed(idx[:, t:t + 1], start=t), cache)
            seen = idx.shape[1]
            logits = model.head(y[:, -1])  # (B, vocab)
        else:  # the whole prefix, every step
            logits = model(idx)[:, -1]  # (B, vocab)
        idx = torch.cat([idx, logits.argmax(dim=-1, keepdim=True)], dim=1)
        if step_seconds is not None:
            step_seconds.append(time.thread_time() - start)
    return idx


torch.manual_seed(4)
lm = TinyLM(vocab=50, d_model=32, n_heads=4, max_len=64).double()
prompt = torch.randint(0, 50, (3, 5))
full_tokens, cached_tokens = greedy(lm, prompt, 40, use_cache=False), greedy(lm, prompt, 40, use_cache=True)
print("first row, full recompute:", full_tokens[0, 5:25].tolist())
print("first row, KV cache:      ", cached_tokens[0, 5:25].tolist())
assert torch.equal(full_tokens, cached_tokens)

# %% [markdown]
# ### Measuring the speed-up
#
# Now a wider model (D = 128, 4 heads) generating 400 tokens after an 8-token prompt, in
# float32. Full recomputation costs more at every step, as the prefix grows; with the cache each
# step does the work of one token plus one row of attention. `greedy` records the CPU time of
# each step (`time.thread_time()`, as in `best_time`).

# %%
# demo only
torch.manual_seed(5)
big_lm = TinyLM(vocab=64, d_model=128, n_heads=4, max_len=512).eval()
start_prompt = torch.randint(0, 64, (1, 8))
full_steps, cached_steps = [], []
full_out = greedy(big_lm, start_prompt, 400, use_cache=False, step_seconds=full_steps)
cached_out = greedy(big_lm, start_prompt, 400, use_cache=True, step_seconds=cached_steps)
kv_speedup = sum(full_steps) / sum(cached_steps)
print(f"400 tokens: full recompute {sum(full_steps):.3f} s, KV cache {sum(cached_steps):.3f} s, "
      f"speed-up {kv_speedup:.1f}x; same tokens: {torch.equal(full_out, cached_out)}")
assert kv_speedup > 1.5, "the cache should save a lot of work at 400 tokens"

# %%
# demo only
context = np.arange(8, 408)  # tokens in the prefix when each new token is chosen
window = 20  # average steps in groups of 20 to smooth out the timer's noise
smooth = lambda s: 1e3 * np.array(s).reshape(-1, window).mean(axis=1)
ax = plot_curves(context.reshape(-1, window).mean(axis=1),
                 {"full recompute": smooth(full_steps), "KV cache": smooth(cached_steps)},
                 xlabel="tokens in the context", ylabel="CPU time per generated token (ms)",
                 title="Greedy decoding, D = 128, 4 heads")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "test_kv_cache_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The step returns (B, 1, D) and a (K, V) cache that grows by one position per token."""
from course.attention_cost_checks import cached_step  # the checks of this chapter: course/attention_cost_checks.py

torch.manual_seed(90)
block = fresh(MultiHeadSelfAttention, d_model=16, n_heads=4, max_len=32, only=("qkv", "proj", "n_heads", "d_head"))  # the test's block: its projections
x = torch.randn(2, 5, 16)
cache = None
with torch.no_grad():
    for t in range(5):
        y_t, cache = cached_step(cached_attention_step, block, x[:, t:t + 1], cache, t)
        check_shape(f"y_new at token {t}", y_t, (2, 1, 16), hint="one output row of width D for the new token")
        check_true(isinstance(cache, (tuple, list)) and len(cache) == 2, "the cache must be the pair (K, V)")
        check_shape(f"cached K after {t + 1} tokens", cache[0], (2, 4, t + 1, 4),
                    hint="K is (B, H, tokens so far, d_head): append the new key along dim 2")
        check_shape(f"cached V after {t + 1} tokens", cache[1], (2, 4, t + 1, 4),
                    hint="V is (B, H, tokens so far, d_head): append the new value along dim 2, like K")
### BEGIN HIDDEN TESTS
for trial in range(2):
    H, d_head, B, T = (int(n) for n in torch.randint(1, 6, (4,)))
    block = fresh(MultiHeadSelfAttention, H * d_head, H, 16, only=("qkv", "proj", "n_heads", "d_head"))
    x, cache = torch.randn(B, T, H * d_head), None
    with torch.no_grad():
        for t in range(T):
            y_t, cache = cached_step(cached_attention_step, block, x[:, t:t + 1], cache, t)
    check_shape(f"cached K after {T} tokens (B={B}, H={H}, d_head={d_head})", cache[0], (B, H, T, d_head))
    check_shape(f"cached V after {T} tokens (B={B}, H={H}, d_head={d_head})", cache[1], (B, H, T, d_head),
                hint="append the new value along dim 2, like the key")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_kv_cache_matches_full", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""Token by token through the cache equals the block's full causal forward pass."""
from course.attention_cost_checks import cached_step  # the checks of this chapter: course/attention_cost_checks.py

torch.manual_seed(91)
block = fresh(MultiHeadSelfAttention, d_model=24, n_heads=3, max_len=32, only=("qkv", "proj", "n_heads", "d_head")).double()
x = torch.randn(2, 7, 24, dtype=torch.float64)
cache, rows = None, []
with torch.no_grad():
    for t in range(7):
        y_t, cache = cached_step(cached_attention_step, block, x[:, t:t + 1], cache, t)
        rows.append(y_t)
    full = block(x)
check_close("the first token's output", rows[0], full[:, :1], atol=1e-10,
            hint="project with block.qkv, split heads, attend, merge heads, apply block.proj")
check_close("outputs of tokens 0..6 through the cache", torch.cat(rows, dim=1), full, atol=1e-10,
            likely_causes={"the new query sees only the first cached key (is_causal=True with one query aligns "
                           "the mask top-left; use no mask)": full[:, :1].expand_as(full)},
            hint="append the new token's key AND value to the cache, then let its query attend over all "
                 "cached positions (no mask: they are all in the past), its scores scaled by 1/sqrt(d_head) as "
                 "in the block (SDPA's default)")
### BEGIN HIDDEN TESTS
for trial in range(3):
    H, d_head, B, T = int(torch.randint(1, 5, ())), int(torch.randint(1, 6, ())), int(torch.randint(1, 4, ())), \
        int(torch.randint(3, 10, ()))
    block = fresh(MultiHeadSelfAttention, H * d_head, H, 16, only=("qkv", "proj", "n_heads", "d_head")).double()
    x, cache, rows = torch.randn(B, T, H * d_head, dtype=torch.float64), None, []
    with torch.no_grad():
        for t in range(T):
            y_t, cache = cached_step(cached_attention_step, block, x[:, t:t + 1], cache, t)
            rows.append(y_t)
        full = block(x)
        q, k, v = (t.view(B, T, H, d_head).transpose(1, 2) for t in block.qkv(x).split(H * d_head, dim=-1))
        first_key_only = full[:, :1].expand(B, T, H * d_head)
    check_close(f"cached K after {T} tokens (B={B}, H={H}, d_head={d_head})", cache[0], k, atol=1e-10,
                hint="the cache holds each token's key, split into heads: (B, H, T, d_head)")
    check_close(f"cached V after {T} tokens (B={B}, H={H}, d_head={d_head})", cache[1], v, atol=1e-10,
                hint="the cache holds each token's value (the third part of block.qkv), split into heads")
    check_close(f"outputs through the cache (B={B}, T={T}, H={H}, d_head={d_head})", torch.cat(rows, dim=1), full,
                atol=1e-10, likely_causes={
                    "the new query sees only the first cached key (is_causal=True with one query aligns the "
                    "mask top-left; use no mask)": first_key_only,
                }, hint="append the new token's key AND value to the cache, then let its query attend over "
                        "all cached positions (no mask: they are all in the past)")
    # the step must attend over the cache it is given: a cache of other tokens (a prefix of no sequence
    # the step has seen) changes the answer, as it would for any (K, V) handed in
    with torch.no_grad():
        others = torch.randn(B, T - 1, H * d_head, dtype=torch.float64)
        k_other, v_other = (t.view(B, T - 1, H, d_head).transpose(1, 2) for t in block.qkv(others).split(H * d_head, dim=-1)[1:])
        y_given, _ = cached_attention_step(block, x[:, -1:], (k_other, v_other))
        keys, values = torch.cat([k_other, k[:, :, -1:]], dim=2), torch.cat([v_other, v[:, :, -1:]], dim=2)
        attended = torch.softmax(q[:, :, -1:] @ keys.transpose(-2, -1) / d_head ** 0.5, dim=-1) @ values
        expected = block.proj(attended.transpose(1, 2).reshape(B, 1, H * d_head))
    check_close(f"the step's output with a cache of other tokens (B={B}, T={T}, H={H}, d_head={d_head})", y_given,
                expected, atol=1e-10, hint="attend over the cache you are given (its keys and values, then the new "
                                           "token's own): the step must not recompute the past from tokens it saw before")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_greedy_cached_equals_full", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Greedy decoding with the KV cache produces exactly the tokens of full recomputation."""
from course.attention_cost_checks import CACHE_HINT, first_difference  # the checks of this chapter: course/attention_cost_checks.py

torch.manual_seed(92)
lm = fresh(TinyLM, vocab=30, d_model=24, n_heads=2, max_len=48,  # greedy hands your step lm.block
           only={"__call__": None, "embed": None, "head": None, "block": ("qkv", "proj", "n_heads", "d_head")}).double()
prompt = torch.randint(0, 30, (2, 4))
full_tokens = greedy(lm, prompt, 30, use_cache=False)
cached_tokens = attempt("greedy(..., use_cache=True)", greedy, lm, prompt, 30, use_cache=True, hint=CACHE_HINT)
check_shape("tokens from greedy(..., use_cache=True)", cached_tokens, full_tokens.shape)
check_true(torch.equal(full_tokens, cached_tokens), "greedy decoding with your cache chose a different token "
           f"at position {first_difference(full_tokens, cached_tokens)}: the cached step must give the same "
           "output as recomputing the whole prefix")
### BEGIN HIDDEN TESTS
for seed in (93, 94):
    torch.manual_seed(seed)
    lm = fresh(TinyLM, vocab=40, d_model=16, n_heads=4, max_len=40,
               only={"__call__": None, "embed": None, "head": None, "block": ("qkv", "proj", "n_heads", "d_head")}).double()
    prompt = torch.randint(0, 40, (3, 3))
    full_tokens = greedy(lm, prompt, 25, use_cache=False)
    cached_tokens = attempt("greedy(..., use_cache=True)", greedy, lm, prompt, 25, use_cache=True, hint=CACHE_HINT)
    check_true(torch.equal(full_tokens, cached_tokens), "greedy decoding with your cache chose a different token "
               f"at position {first_difference(full_tokens, cached_tokens)} for another model (vocabulary 40, "
               "4 heads of width 4)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · Sliding-window attention (5 points)
#
# Linear attention changes the kernel; a KV cache removes repeated work. The third classic way
# out of the $L^2$ keeps softmax and simply **looks less far**. In a long text most of what a
# token needs is nearby, so a **sliding-window** (banded) mask lets query $i$ attend key $j$
# only when $|i - j| \le w$, the window. With `causal=True` the band keeps its past half only:
# query $i$ sees itself and the $w$ tokens before it, $i - w \le j \le i$. Long-document
# models such as Longformer (which adds a few global tokens) and Mistral 7B use such windows,
# and sparse-attention patterns combine a band with a few long-range links.
#
# A row then holds at most $2w + 1$ allowed keys ($w + 1$ when causal), so the allowed pairs
# number about $L (2w + 1)$: **$O(L \cdot w)$ instead of $O(L^2)$**, linear in $L$ for a fixed
# window. Nothing is lost for good: stacking layers widens the reach, because after $n$ layers
# information can travel $n \cdot w$ positions.
#
# Write two functions:
#
# * `sliding_window_mask(T, window, causal=False)`: the `(T, T)` bool mask, **True = may attend**
#   (the convention of chapter 03 and of `F.scaled_dot_product_attention`): True exactly when
#   $|i - j| \le$ `window`, and also $j \le i$ when `causal`. `window` is an integer $\ge 0$;
#   `window=0` lets each token see only itself, and a window of $T - 1$ or more gives the full
#   (or the causal) mask.
# * `sliding_window_pairs(L, window, causal=False)`: how many entries of that mask are True,
#   as a whole number, **without building the mask**: it will be asked about a million tokens,
#   and a $10^6 \times 10^6$ mask does not fit in memory. Count row by row (a Python loop over
#   the rows is fast enough) or find the closed form; mind the rows near both ends of the
#   sequence, which are cut short.

# %% nbgrader={"grade": false, "grade_id": "sliding_window_mask", "locked": false, "schema_version": 3, "solution": true}
def sliding_window_mask(T, window, causal=False):
    """(T, T) bool mask, True where query i may attend key j: |i - j| <= window (and j <= i if causal)."""
    ### BEGIN SOLUTION
    offset = torch.arange(T)[None, :] - torch.arange(T)[:, None]  # (T, T): j - i
    allowed = offset.abs() <= window
    if causal:
        allowed &= offset <= 0
    return allowed
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "sliding_window_pairs", "locked": false, "schema_version": 3, "solution": true}
def sliding_window_pairs(L, window, causal=False):
    """Number of True entries of sliding_window_mask(L, window, causal), computed without building it."""
    ### BEGIN SOLUTION
    reach = min(window, L - 1)  # no query sees further than the sequence goes
    if causal:  # row i holds min(i, reach) + 1 keys
        return L * (reach + 1) - reach * (reach + 1) // 2
    return L * (2 * reach + 1) - reach * (reach + 1)  # the first and last `reach` rows are cut short
    ### END SOLUTION


# %% [markdown]
# ### Check it: the band, and what it costs
#
# Eight tokens, a window of 2. Row $i$ of the left panel is what query $i$ may read; the right
# panel keeps the past half of the band. Count the dark cells of each and compare with
# `sliding_window_pairs`.

# %%
band, causal_band = sliding_window_mask(8, 2), sliding_window_mask(8, 2, causal=True)
print(band.int())
print("allowed pairs:", int(band.sum()), "and", int(causal_band.sum()), "causal; counted:",
      sliding_window_pairs(8, 2), "and", sliding_window_pairs(8, 2, causal=True))
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
for ax, mask, title in zip(axes, (band, causal_band), ("window 2", "window 2, causal")):
    ax.imshow(mask.int(), cmap="Blues", vmin=0, vmax=1.3)
    ax.set(title=title, xlabel="key position j", ylabel="query position i", xticks=range(8), yticks=range(8))
fig.tight_layout()
plt.show()

# %% [markdown]
# Now count. Full attention at $L$ = 65,536 tokens scores 4.3 billion pairs per head and layer;
# a window of 256 keeps about 34 million. The ratio is about $(2w + 1) / L$, and it shrinks as
# $L$ grows: double $L$ and the full count quadruples while the band's only doubles. The score
# and mixing FLOPs follow the pairs: $2 \cdot 2 \cdot B \cdot \text{pairs} \cdot d$ (a dot
# product of width $d$ over all the heads, for the scores and again for the mixing).

# %%
print(f"{'L':>7} {'full pairs':>15} {'window 256':>13} {'share':>7} {'score + mix GFLOP, d = 768':>28}")
for L in (1024, 4096, 16384, 65536):
    pairs = sliding_window_pairs(L, 256)
    print(f"{L:>7,} {L * L:>15,} {pairs:>13,} {pairs / L ** 2:>7.1%} "
          f"{4 * L * L * 768 / 1e9:>13.1f} -> {4 * pairs * 768 / 1e9:>8.2f}")
assert sliding_window_pairs(2 * 65536, 256) / sliding_window_pairs(65536, 256) < 2.01

# %% [markdown]
# ### A mask alone saves nothing
#
# Hand the band to `F.scaled_dot_product_attention(..., attn_mask=band)` and the answer is
# right, but the kernel still computes all $L^2$ scores and only then throws most of them
# away. The saving needs code that never computes the scores outside the band.
# `banded_attention` below (provided, read it) does that for one offset at a time: for offset
# $o$ from $-w$ to $w$ it pairs every query $i$ with key $i + o$, so it holds `(..., L, 2w + 1)`
# scores and never an $L \times L$ matrix. (Production kernels do the same with tiles, skipping
# the blocks outside the band.) First, it must agree with the masked fused kernel, using your
# mask:

# %%
def banded_attention(q, k, v, window, causal=False):
    """Softmax attention restricted to j - i in [-window, window] ([-window, 0] if causal), in O(L * window)."""
    L, offsets = q.shape[-2], list(range(-window, 1 if causal else window + 1))
    k_pad, v_pad = (F.pad(t, (0, 0, window, window)) for t in (k, v))  # (..., L + 2w, d): w zero rows each end
    shifted = lambda t, o: t[..., window + o: window + o + L, :]  # row i holds token i + o
    scores = torch.stack([(q * shifted(k_pad, o)).sum(-1) for o in offsets], dim=-1)  # (..., L, n_offsets)
    key_index = torch.arange(L)[:, None] + torch.tensor(offsets)  # (L, n_offsets)
    outside = (key_index < 0) | (key_index >= L)  # slots that fall off either end of the sequence
    weights = (scores / q.shape[-1] ** 0.5).masked_fill(outside, float("-inf")).softmax(-1)
    return sum(weights[..., n, None] * shifted(v_pad, o) for n, o in enumerate(offsets))  # (..., L, d_v)


torch.manual_seed(7)
q, k, v = torch.randn(3, 2, 4, 50, 16, dtype=torch.float64).unbind(0)  # (B, H, L, d) each
for window, causal in [(0, False), (3, False), (3, True), (60, True)]:
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(50, window, causal))
    gap = (banded_attention(q, k, v, window, causal) - fused).abs().max()
    print(f"window {window:2d}, causal={causal!s:5}: largest difference {float(gap):.1e}")
    assert gap < 1e-10

# %% [markdown]
# Then the clock and the memory, at $L$ = 2,048 with one head of width 32 and a window of 16:
# full attention, the same with the band as a mask, and `banded_attention`.

# %%
# demo only
torch.manual_seed(8)
q, k, v = torch.randn(3, 1, 2048, 32).unbind(0)  # (1, L, d) each
band_2048 = sliding_window_mask(2048, 16)
contenders = {"full attention": lambda: F.scaled_dot_product_attention(q, k, v),
              "full attention + band mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=band_2048),
              "banded_attention": lambda: banded_attention(q, k, v, 16)}
band_seconds = dict(zip(contenders, best_times(list(contenders.values()), passes=2)))
for name, fn in contenders.items():
    _, largest = largest_tensor(fn)
    print(f"{name:27}: {1e3 * band_seconds[name]:6.1f} ms, largest tensor {largest.shape}")
band_speedup = band_seconds["full attention + band mask"] / band_seconds["banded_attention"]
print(f"pairs: {2048 ** 2:,} full, {sliding_window_pairs(2048, 16):,} in the band; "
      f"banded_attention is {band_speedup:.1f}x faster than the masked full kernel")
assert band_speedup > 2

# %% nbgrader={"grade": true, "grade_id": "test_window_mask_rule", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""sliding_window_mask(T, w) is a (T, T) bool tensor, True exactly when |i - j| <= w."""
mask = sliding_window_mask(6, 1)
check_type("sliding_window_mask(6, 1)", mask, torch.Tensor,
           hint="return a torch tensor of dtype torch.bool (torch.from_numpy turns a NumPy array into one)")
check_shape("sliding_window_mask(6, 1)", mask, (6, 6))
check_true(mask.dtype == torch.bool, f"sliding_window_mask(6, 1) has dtype {mask.dtype}: masks are bool tensors "
           "(True = may attend); a float mask would be *added* to the scores by F.scaled_dot_product_attention")
check_true(bool(mask.diagonal().any()) or not bool(mask[0, 5]),
           "sliding_window_mask(6, 1) is False on the diagonal and True far from it: that is the 'True = blocked' "
           "convention; here True = may attend, as in chapter 03 and F.scaled_dot_product_attention")
check_true(bool(mask.diagonal().all()), "sliding_window_mask(6, 1) hides a token from itself: |i - i| = 0 <= window, "
           "so the diagonal is always True")
check_true(torch.equal(mask, mask.T), "sliding_window_mask(6, 1) is not symmetric: without causal=True the band "
           "reaches window positions on *both* sides of the diagonal")
check_true(not bool(mask[0, 2]), "sliding_window_mask(6, 1) lets query 0 see key 2, two positions away: with "
           "window=1 only keys with |i - j| <= 1 are allowed (off by one?)")
check_true(bool(mask[0, 1]), "sliding_window_mask(6, 1) hides key 1 from query 0, one position away: the window "
           "includes the distance `window` itself, |i - j| <= window (off by one?)")
only_itself = sliding_window_mask(5, 0)
check_type("sliding_window_mask(5, 0)", only_itself, torch.Tensor)
check_true(torch.equal(only_itself, torch.eye(5, dtype=torch.bool)), "sliding_window_mask(5, 0) is not the diagonal "
           "alone: window=0 lets each token see only itself (|i - j| <= 0); it does not mean 'no limit'")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(95)
for trial in range(8):
    T = int(torch.randint(1, 14, (), generator=gen))
    window = int(torch.randint(0, T + 3, (), generator=gen))
    mine = sliding_window_mask(T, window)
    check_type(f"sliding_window_mask({T}, {window})", mine, torch.Tensor,
               hint="return a torch tensor of dtype torch.bool (torch.from_numpy turns a NumPy array into one)")
    check_shape(f"sliding_window_mask({T}, {window})", mine, (T, T))
    check_true(mine.dtype == torch.bool, f"sliding_window_mask({T}, {window}) has dtype {mine.dtype}, expected bool")
    rule = torch.tensor([[abs(i - j) <= window for j in range(T)] for i in range(T)]).reshape(T, T)
    likely = {"the window is one position too narrow (|i - j| < window)": lambda i, j: abs(i - j) < window,
              "the window is one position too wide (|i - j| <= window + 1)": lambda i, j: abs(i - j) <= window + 1,
              "True marks blocked pairs (the inverted convention)": lambda i, j: abs(i - j) > window}
    for cause, test in likely.items():
        candidate = torch.tensor([[test(i, j) for j in range(T)] for i in range(T)]).reshape(T, T)
        check_true(torch.equal(rule, candidate) or not torch.equal(mine, candidate),
                   f"sliding_window_mask({T}, {window}) is wrong: it matches what you get when {cause}")
    wrong = int((mine != rule).sum())
    check_true(wrong == 0, f"sliding_window_mask({T}, {window}) breaks the rule 'True exactly when |i - j| <= window' "
                           f"at {wrong} of {T * T} entries")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_window_mask_causal", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With causal=True the band keeps only its past half: True exactly when i - w <= j <= i."""
mask = sliding_window_mask(6, 2, causal=True)
check_type("sliding_window_mask(6, 2, causal=True)", mask, torch.Tensor,
           hint="return a torch tensor of dtype torch.bool (torch.from_numpy turns a NumPy array into one)")
check_shape("sliding_window_mask(6, 2, causal=True)", mask, (6, 6))
check_true(mask.dtype == torch.bool, f"sliding_window_mask(6, 2, causal=True) has dtype {mask.dtype}, expected bool")
future = bool(mask.triu(diagonal=1).any())
past = bool(mask.tril(diagonal=-1).any())
check_true(not (future and not past), "sliding_window_mask(6, 2, causal=True) keeps the band on the wrong side: "
           "query i sees keys after it (j > i) and none before; the causal band is i - window <= j <= i")
check_true(not future, "sliding_window_mask(6, 2, causal=True) lets queries see keys in their future (j > i): "
           "the mask is not causal when asked; with causal=True also require j <= i")
check_true(bool(mask[3, 1]) and not bool(mask[3, 0]), "sliding_window_mask(6, 2, causal=True): query 3 must see "
           "keys 1, 2 and 3 (the window reaches `window` positions back) and not key 0")
check_true(torch.equal(sliding_window_mask(4, 0, causal=True), torch.eye(4, dtype=torch.bool)),
           "sliding_window_mask(4, 0, causal=True) is not the diagonal alone: with window=0 each token sees only itself")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(96)
for trial in range(6):
    T = int(torch.randint(2, 14, (), generator=gen))
    window = int(torch.randint(0, T + 2, (), generator=gen))
    mine = sliding_window_mask(T, window, causal=True)
    check_type(f"sliding_window_mask({T}, {window}, causal=True)", mine, torch.Tensor)
    check_shape(f"sliding_window_mask({T}, {window}, causal=True)", mine, (T, T))
    rule = torch.tensor([[0 <= i - j <= window for j in range(T)] for i in range(T)]).reshape(T, T)
    wrong_side = torch.tensor([[0 <= j - i <= window for j in range(T)] for i in range(T)]).reshape(T, T)
    check_true(torch.equal(rule, wrong_side) or not torch.equal(mine, wrong_side),
               f"sliding_window_mask({T}, {window}, causal=True) keeps the future half of the band (i <= j <= i + "
               f"window): band on the wrong side")
    wrong = int((mine != rule).sum())
    check_true(wrong == 0, f"sliding_window_mask({T}, {window}, causal=True) breaks the rule 'True exactly when "
                           f"i - window <= j <= i' at {wrong} of {T * T} entries")
    check_true(torch.equal(sliding_window_mask(T, window, causal=False),
                           torch.tensor([[abs(i - j) <= window for j in range(T)] for i in range(T)]).reshape(T, T)),
               f"sliding_window_mask({T}, {window}) changed when causal=False: only causal=True removes the future")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_window_pairs_small", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""sliding_window_pairs counts the True entries of the band, rows cut short at both ends included."""
check_close("sliding_window_pairs(6, 1)", sliding_window_pairs(6, 1), 16, atol=0.5, rtol=0,
            likely_causes={"every row is counted with 2 * window + 1 keys: the first and last rows have fewer, "
                           "the sequence ends there": 18},
            hint="rows 0 and 5 hold 2 keys, rows 1 to 4 hold 3")
check_close("sliding_window_pairs(6, 1, causal=True)", sliding_window_pairs(6, 1, causal=True), 11, atol=0.5,
            rtol=0, likely_causes={"causal=True is ignored": 16, "the first row is counted with window + 1 keys "
                                   "(it has only itself)": 12}, hint="row 0 holds 1 key, rows 1 to 5 hold 2")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(97)
for trial in range(8):
    L = int(torch.randint(1, 40, (), generator=gen))
    window = int(torch.randint(0, L + 4, (), generator=gen))
    for causal in (False, True):
        right = sum(min(i, window) + 1 if causal else min(i + window, L - 1) - max(i - window, 0) + 1 for i in range(L))
        no_edges = L * (window + 1 if causal else 2 * window + 1)
        other = sum(min(i + window, L - 1) - max(i - window, 0) + 1 for i in range(L))
        causes = {} if right == no_edges else {"every row is counted as a full window: the rows near the ends of "
                                               "the sequence are cut short": no_edges}
        if causal and other != right:
            causes["causal=True is ignored"] = other
        if window > L - 1:  # the closed form with the window itself as the reach
            causes[f"a window of {window} reaches past a sequence of {L} tokens: no row holds more than L keys, so "
                   "the reach is min(window, L - 1)"] = (L * (window + 1) - window * (window + 1) // 2 if causal
                                                        else L * (2 * window + 1) - window * (window + 1))
        check_close(f"sliding_window_pairs({L}, {window}, causal={causal})", sliding_window_pairs(L, window, causal),
                    right, atol=0.5, rtol=0, likely_causes=causes,
                    hint="count the allowed keys of every row: max(i - window, 0) .. min(i + window, L - 1), "
                         "or only up to i when causal")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_window_pairs_large", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""sliding_window_pairs answers for a million tokens, which no (L, L) mask could hold."""
from course.attention_cost_checks import count_a_million  # the checks of this chapter: course/attention_cost_checks.py

check_close("sliding_window_pairs(1_000_000, 0)", count_a_million(sliding_window_pairs, 0), 1_000_000, atol=0.5, rtol=0,
            hint="window 0: every token sees only itself")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(98)
for trial in range(2):
    window = int(torch.randint(1, 5000, (), generator=gen))
    for causal in (False, True):
        reach = min(window, 1_000_000 - 1)
        right = (1_000_000 * (reach + 1) - reach * (reach + 1) // 2 if causal
                 else 1_000_000 * (2 * reach + 1) - reach * (reach + 1))
        check_close(f"sliding_window_pairs(1_000_000, {window}, causal={causal})", count_a_million(sliding_window_pairs, window, causal),
                    right, atol=0.5, rtol=0, hint="count the allowed keys of every row, rows cut short at the ends")
### END HIDDEN TESTS

# %% [markdown]
# ## Measured in this run
#
# Both claims of this chapter, as ratios from this notebook's own timings (expect them to move
# a little from run to run: the machine is shared).

# %%
# demo only
doublings = list(zip(lengths, lengths[1:]))
rows = [(f"softmax scores, L {a} -> {b}", f"{r:.2f}x", "~4x") for (a, b), r in zip(doublings, score_ratios)]
rows += [(f"linear attention, L {a} -> {b}", f"{r:.2f}x", "~2x") for (a, b), r in zip(doublings, linear_ratios)]
rows += [("KV cache speed-up, 400 tokens", f"{kv_speedup:.1f}x", ">> 1")]
rows += [("banded vs masked, L 2048, w 16", f"{band_speedup:.1f}x", ">> 1")]
print(f"{'time ratio':34}{'measured':>10}{'expected':>10}")
for label, measured, expected in rows:
    print(f"{label:34}{measured:>10}{expected:>10}")

# %% [markdown]
# ## Part F · Quiz (4 points)
#
# Answer each question with the letter of one option, as a string (`Q1 = "a"`).
#
# **Q1.** A $512 \times 512$ image is fed to attention at stride 16 instead of stride 32. The number of
# query-key pairs grows by
#
# * a) 16x
# * b) 4x
# * c) 2x
# * d) 64x
#
# **Q2.** Linear attention with feature maps of width $d = 64$ over $L = 4096$ tokens, non-causal.
# What is the shape of the matrix $\phi(K)^\top V$ it keeps in place of the $L \times L$ weights?
#
# * a) 4096 × 4096
# * b) 4096 × 64
# * c) 64 × 4096
# * d) 64 × 64
#
# **Q3.** Greedy decoding with a KV cache has produced 100 tokens and now computes token 101. How many
# query-key scores does one head of one layer compute for this step?
#
# * a) 10 201
# * b) 101
# * c) 100
# * d) 1
#
# **Q4.** A batch pairs a sentence of 10 tokens with one of 50, padded to a common length, with a
# padding mask. How many attention scores per head does the batch compute?
#
# * a) 2 600
# * b) 3 600
# * c) 5 000
# * d) 2 500

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
Q1 = "a"
Q2 = "d"
Q3 = "b"
Q4 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: query-key pairs at a finer stride."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "b": "4x is the growth of the number of tokens (2x along each of two axes); query-key pairs grow as "
         "its square (re-read 'Images: the stride decides')",
    "c": "2x is the ratio of the strides along one axis; the grid has two axes, and pairs count the "
         "tokens twice (re-read 'Images: the stride decides')",
    "d": "64x cubes the growth of the tokens; attention pairs each query with each key, the square"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: the size of what linear attention keeps."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "4096 x 4096 is the matrix of weights that softmax attention stores; the regrouping computes "
         "phi(K)^T V first and never forms it (re-read 'Why softmax needs the whole L x L matrix')",
    "b": "4096 x 64 is the shape of V or of phi(K); their product phi(K)^T V sums over the tokens, "
         "which removes the L axis",
    "c": "64 x 4096 is phi(K)^T alone; multiplied by V (4096 x 64) it sums the 4096 tokens away"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: scores computed for one new token with a KV cache."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "10 201 = 101^2 is the whole forward pass over the sequence again; with a cache only the new "
         "token's query is scored (re-read the introduction of Part D)",
    "c": "100 leaves out the new token's own key: it is appended to the cache, and the query may read "
         "it",
    "d": "the new query reads every cached key, not only its own: the cache spares recomputing old "
         "keys, not scoring them"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: the scores a padded batch computes."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "a": "2 600 = 10^2 + 50^2 counts the real pairs only: a padding mask changes which scores are used, "
         "not which are computed (re-read 'Padding pays L² too: bucket by length')",
    "b": "3 600 = 60^2 treats the two sentences as one sequence; each is padded to 50 and scored on its "
         "own",
    "d": "2 500 counts one sentence of 50; the batch has two of them, each 50 x 50 after padding"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part G · In your own words (2 points, graded by your instructor)
#
# Explain, in three or four sentences, how linear attention avoids the $L \times L$ matrix and what
# it gives up compared with softmax attention.

# %% [markdown] nbgrader={"grade": true, "grade_id": "linear_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** With a feature map $\phi$ the score is a dot product $\phi(q) \cdot \phi(k)$, so the output
# $\sum_j (\phi(q)\cdot\phi(k_j)) v_j$ can be regrouped as $\phi(q)^\top S$ with
# $S = \sum_j \phi(k_j) v_j^\top$: $S$ is computed once, of size $d \times d_v$, and the cost grows
# like $L d^2$ instead of $L^2 d$. Softmax cannot be regrouped because $\exp(q \cdot k)$ does not
# split into finitely many features of $q$ times features of $k$. What is given up is the
# softmax's sharpness: the weights are different numbers, often flatter, so the model is not the
# same and can be worse at picking out one token.
#
# **Rubric (2 points, one idea each).**
# * 1 point, the regrouping: the unnormalised weights are dot products of features, $\phi(q) \cdot \phi(k)$, so the sum over the keys regroups as $\phi(q)^\top S$ with $S = \sum_j \phi(k_j) v_j^\top = \phi(K)^\top V$, computed once, of size $d \times d_v$ whatever $L$: the cost grows like $L d^2$, not $L^2 d$, and no $L \times L$ matrix forms. Earns it: the keys combined with the values first, once, and each query reading that sum. Does not: "it drops the softmax, so it is linear" with no word of the regrouping, or "it skips tokens" or "it uses a mask" (that is the way of a sliding window, not of linear attention).
# * 1 point, what is given up: the result is not softmax attention: $\exp(q \cdot k)$ does not split into finitely many features, so linear attention uses another kernel, and its weights are different numbers, often flatter, so it can be worse at picking out one token. Earns it: a different attention (other, less sharp weights), not the same numbers computed faster. Does not: "it loses numerical precision" or "it is a little less accurate", with no word of the weights being different ones.
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the state $S$ grows with the length of the sequence" costs the first point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * Softmax attention costs $O(B L^2 d)$ FLOPs for scores and mixing, $O(B H L^2)$ memory for
#   the stored scores and $O(B L d^2)$ for the projections; past $L = 2d$ the $L^2$ part
#   dominates, and doubling $L$ costs about 4x (you measured it).
# * Padding is scored too: bucket sentences by length. For images the stride decides: 400
#   tokens and 160,000 pairs at stride 32, 6,400 tokens and about 41 million pairs at stride 8.
# * $\exp(q \cdot k)$ has no finite feature map. Linear attention picks one, $\phi = 1 + \operatorname{ELU}$,
#   regroups the products to $O(L d^2)$, and, when causal, decodes with two running sums of fixed
#   size.
# * A KV cache keeps softmax attention exact and removes the recomputation of old keys and
#   values: same greedy tokens, a large measured speed-up, memory that grows with the context.
# * A sliding window keeps softmax but only $|i - j| \le w$: about $L (2w + 1)$ pairs, $O(L \cdot w)$.
#   The mask states the band; only a kernel that skips the rest (like `banded_attention`) saves.
# * Cross-attention takes queries from one sequence or modality and keys and values from another
#   (target words and source words, image and prompt, object queries and image features); its
#   scores cost $L_q \cdot L_k$.
