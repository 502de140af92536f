# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 01 · Attention by hand
#
# A dictionary lookup compares a query with every key and returns the value whose key is an
# exact match. Attention does the same comparison but softly: every key gets a *score*, the
# scores become *weights* that are positive and sum to one, and the answer is the weighted
# average of all the values. Nothing is thrown away; the weights say how much of each value
# the query takes.
#
# By the end of this notebook you will have written, in NumPy,
#
# * a numerically stable `softmax`,
# * `attention(Q, K, V)` returning the output and the weights, for any batch shape,
#
# and checked both against PyTorch. Each exercise has a solution cell for you to fill in, a
# cell that runs your code on a small example, and graded test cells. The visible tests help
# you; the grader also runs hidden tests on random shapes and values.
#
# **Shapes used throughout.** `Q` is `(..., Lq, d_k)`: `Lq` queries of width `d_k`. `K` is
# `(..., Lk, d_k)`: one key per position, the same width as the queries so that they can be
# compared by a dot product. `V` is `(..., Lk, d_v)`: one value per key, of any width `d_v`.
#
# **Time:** about 1.5 hours for a capable student (an estimate, not a measurement).
# **Assumes:** Python and NumPy (arrays, broadcasting, matrix products); no earlier chapter.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import numpy as np
import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt

from course import check_close, check_finite, check_rows_sum_to_one, check_shape, check_true
from course.plots import plot_attention

np.set_printoptions(precision=6, suppress=True)

# %% [markdown]
# ## A weighted average, before any attention
#
# Suppose the weights are already known: 0.5, 0.3 and 0.2 on three values 2, 4 and 10. The
# output is simply their weighted average, $0.5 \cdot 2 + 0.3 \cdot 4 + 0.2 \cdot 10 = 1 + 1.2 + 2 = 4.2$.
# Attention only adds a rule for *computing* the weights from queries and keys.

# %%
example_weights = np.array([0.5, 0.3, 0.2])
example_values = np.array([2.0, 4.0, 10.0])
weighted_average = example_weights @ example_values
print("weighted average:", weighted_average)
assert np.isclose(weighted_average, 4.2)

# %% [markdown]
# ## Part A · A stable softmax (3 points)
#
# Softmax turns a row of scores $s_1, \dots, s_n$ into weights
# $a_j = e^{s_j} / \sum_i e^{s_i}$. Two facts to use:
#
# 1. Adding the same constant $c$ to every score changes nothing, because
#    $e^{s_j - c} / \sum_i e^{s_i - c} = e^{s_j} / \sum_i e^{s_i}$.
# 2. `np.exp(1000.0)` is `inf` in floating point, and `inf / inf` is `nan`.
#
# So subtract the largest score of each row before `exp`: the largest exponent becomes
# $e^0 = 1$ and nothing overflows.
#
# Write `softmax(scores, axis=-1)`: normalise along `axis` (the key axis is the last one),
# keep the input's shape, and stay finite for scores like 1000.

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true}
def softmax(scores, axis=-1):
    """Numerically stable softmax of `scores` along `axis`; same shape as `scores`."""
    ### BEGIN SOLUTION
    scores = np.asarray(scores, dtype=float)
    shifted = scores - scores.max(axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)
    ### END SOLUTION


# %% [markdown]
# Check it: three scores 1, 2, 3 should give about 0.090, 0.245, 0.665, and a huge score
# should win outright instead of producing `nan`.

# %%
print(softmax(np.array([1.0, 2.0, 3.0])))
print(softmax(np.array([1000.0, 0.0])))

# %% nbgrader={"grade": true, "grade_id": "test_softmax_rows", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""softmax keeps the shape of its input and every row sums to 1."""
from course.two_keys_checks import run_softmax
rng = np.random.default_rng(1)
scores = rng.normal(size=(4, 6))
weights = run_softmax(softmax, scores)
check_shape("softmax(scores)", weights, scores.shape)
check_true(not np.isclose(np.sum(np.asarray(weights, dtype=float)), 1.0),
           "the entries of softmax(scores) for 4 rows add up to 1 together: the whole array sums to 1, not each row; "
           "divide each row by its own sum (keepdims=True keeps the axis for broadcasting)")
check_rows_sum_to_one("softmax(scores)", weights, hint="normalise along `axis` (the key axis, -1)")
check_true((np.argsort(weights, axis=-1) == np.argsort(scores, axis=-1)).all(),
           "softmax must keep the order of the scores within a row: a larger score gets a larger weight")
### BEGIN HIDDEN TESTS
from course.two_keys_checks import THREE_ROWS, TWO_ROWS  # the scores the tests of attention ask softmax about

for probe in (TWO_ROWS, THREE_ROWS):
    weights = run_softmax(softmax, np.array(probe), axis=-1)
    check_shape(f"softmax of the {len(probe)} rows {probe}", weights, (len(probe), 3))
    check_rows_sum_to_one(f"softmax of the {len(probe)} rows {probe}", weights,
                          hint="normalise along `axis` (the key axis, -1)")
for trial in range(5):
    shape = tuple(rng.integers(1, 6, size=rng.integers(1, 4)))
    scores = rng.normal(scale=3.0, size=shape)
    weights = run_softmax(softmax, scores)
    check_shape(f"softmax(scores) for scores of shape {shape}", weights, shape)
    check_rows_sum_to_one(f"softmax(scores) for scores of shape {shape}", weights,
                          hint="normalise along `axis` (the key axis, -1)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_softmax_stable", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""softmax stays finite when scores are large (subtract the row max before exp)."""
from course.two_keys_checks import run_softmax
big = np.array([[1000.0, 1000.0, 0.0], [-1000.0, 0.0, 1000.0]])
check_finite("softmax of scores around 1000", run_softmax(softmax, big),
             hint="exp(1000) overflows to inf; subtract each row's maximum before exp")
check_rows_sum_to_one("softmax of scores around 1000", run_softmax(softmax, big))
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(2)
for trial in range(4):
    scores = rng.normal(scale=1e4, size=(3, 7))
    mine = run_softmax(softmax, scores)
    check_finite("softmax of scores of size 1e4", mine,
                 hint="subtract each row's own maximum before exp (axis=axis, keepdims=True): exp of a large score "
                      "overflows to inf, and a row far below one maximum shared by the whole array gives 0 / 0")
    check_close("softmax of scores of size 1e4", mine, torch.softmax(torch.from_numpy(scores), dim=-1).numpy(),
                atol=1e-8, hint="subtract each row's maximum before exp, then divide by the row sum")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_softmax_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""softmax agrees with torch.softmax along whatever axis it is asked for."""
from course.two_keys_checks import run_softmax
scores = np.array([[1.0, 2.0, 3.0]])
check_close("softmax([[1, 2, 3]])", run_softmax(softmax, scores), [[0.090031, 0.244728, 0.665241]], atol=1e-5)
column_weights = run_softmax(softmax, np.arange(6.0).reshape(2, 3), axis=0)
check_rows_sum_to_one("softmax(x, axis=0) read column by column", column_weights.T,
                      hint="use the `axis` argument instead of always normalising the last axis")
### BEGIN HIDDEN TESTS
from course import attempt
from course.two_keys_checks import SOFTMAX_HINT
from nboracle import call_keeping_arguments  # the result, and the arguments as the call left them

kept = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
row_weights, (kept_after, *_) = attempt("softmax of scores of shape (2, 3)", call_keeping_arguments, softmax, kept.copy(),
                                        hint=SOFTMAX_HINT)
check_close("softmax of scores of shape (2, 3)", row_weights, torch.softmax(torch.from_numpy(kept), dim=-1).numpy(),
            atol=1e-8)
check_true(np.array_equal(kept_after, kept), "softmax changed the scores it was given (an in-place -= or /= on them?): "
           "compute new arrays (shifted = scores - ...), so that the caller's scores stay as they were")
rng = np.random.default_rng(3)
for trial in range(6):
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(n) for n in rng.integers(1, 6, size=ndim))
    axis = int(rng.integers(-ndim, ndim))
    scores = rng.normal(scale=2.0, size=shape)
    reference = torch.softmax(torch.from_numpy(scores), dim=axis).numpy()
    check_close(f"softmax(scores of shape {shape}, axis={axis})", run_softmax(softmax, scores, axis=axis), reference,
                atol=1e-8, hint="normalise along the `axis` you are given")
### END HIDDEN TESTS

# %% [markdown]
# ### Predict, then run (1 point)
#
# A query scores five keys: $[2, 1, 1, 1, 1]$. Softmax turns the row into weights. Before the
# next cell computes them, predict the **weight on the first key**, the one whose score is
# larger, and assign it to `PREDICTED_TOP_WEIGHT` (fact 1 above makes the arithmetic short:
# subtract 1 from every score first). A prediction within 1 % counts.

# %% nbgrader={"grade": false, "grade_id": "predict_top_weight", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_TOP_WEIGHT = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_TOP_WEIGHT = np.e / (np.e + 4)  # scores [1, 0, 0, 0, 0] after the shift: e^1 against four e^0
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_top_weight", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_TOP_WEIGHT: the softmax weight of the first of five scores [2, 1, 1, 1, 1]."""
from course import check_number

prediction = check_number("PREDICTED_TOP_WEIGHT", PREDICTED_TOP_WEIGHT)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

top_scores = torch.tensor([2.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
prediction = check_prediction("PREDICTED_TOP_WEIGHT", PREDICTED_TOP_WEIGHT, float(torch.softmax(top_scores, 0)[0]),
                              rel=0.01, known=(
    (1.0, "that is a hard maximum, all the weight on the largest score: softmax gives every key a positive "
          "weight, e^s over the sum of e^s of the row"),
    (0.2, "that is a uniform row, one fifth each: softmax gives the larger score the larger weight"),
    (2 / 6, "that divides each score by the sum of the scores: softmax divides e^s by the sum of e^s"),
    (np.e / (np.e + 1), "that weighs the first key against one other key only: the row has four other keys, "
                        "each with e^0 = 1 after the shift"),
    (np.e / 4, "that leaves the first key's own e^1 out of the sum it divides by: the sum runs over all five "
               "keys, the first one included"),
    (np.e ** 2 / (np.e ** 2 + 4), "that exponentiates the first score but counts each other score as 1 before "
                                  "the shift: e^1 is 2.718, or subtract 1 from every score first"),
),
                              hint="subtract 1 from every score (fact 1), exponentiate, and divide the first "
                                   "exponential by the sum of all five")
### END HIDDEN TESTS

# %%
print("softmax([2, 1, 1, 1, 1]) =", np.round(softmax(np.array([2.0, 1.0, 1.0, 1.0, 1.0])), 3))

# %% [markdown]
# ## Part B · Scaled dot-product attention (6 points)
#
# For every query $i$ and key $j$ the score is the dot product $q_i \cdot k_j$ divided by
# $\sqrt{d_k}$; all of them at once are the matrix $Q K^\top / \sqrt{d_k}$ of shape
# `(..., Lq, Lk)`. Softmax over the **key axis** (the last one) turns each row into weights,
# and the output is weights times values:
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V .$$
#
# Why $\sqrt{d_k}$ and not $d_k$ is the subject of chapter 02. Queries and keys must share
# the width $d_k$; values may have another width $d_v$, and the output has one row of width
# $d_v$ per query.
#
# Write `attention(Q, K, V)` returning `(output, weights)`. It must work with any leading batch
# axes (`np.matmul` broadcasts them; transpose only the last two axes of `K`, for example with
# `np.swapaxes(K, -1, -2)`). Use your `softmax`.

# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true}
def attention(Q, K, V):
    """Scaled dot-product attention; returns (output (..., Lq, d_v), weights (..., Lq, Lk))."""
    ### BEGIN SOLUTION
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)  # (..., Lq, Lk)
    weights = softmax(scores, axis=-1)  # (..., Lq, Lk)
    output = weights @ V  # (..., Lq, d_v)
    return output, weights
    ### END SOLUTION


# %% [markdown]
# ### Check it: one query, two keys
#
# Take $q = [1]$, keys $k_1 = [1]$ and $k_2 = [0]$ (so $d_k = 1$ and the scores are $[1, 0]$),
# values $v_1 = [2, 0]$ and $v_2 = [0, 4]$. Softmax gives $a_1 = e/(e+1) \approx 0.731$ and
# $a_2 = 1/(e+1) \approx 0.269$, and the output is $[2 a_1, 4 a_2] \approx [1.462, 1.076]$:
# the keys set the mixing coefficients, the values supply the content. Work it out on paper
# first, then run the cell.

# %%
Q_two = np.array([[1.0]])
K_two = np.array([[1.0], [0.0]])
V_two = np.array([[2.0, 0.0], [0.0, 4.0]])
output_two, weights_two = attention(Q_two, K_two, V_two)
print("weights:", np.round(weights_two, 6).tolist())
print("output: ", np.round(output_two, 6).tolist())
assert np.allclose(weights_two, [[0.731059, 0.268941]], atol=1e-6)
assert np.allclose(output_two, [[1.462117, 1.075766]], atol=1e-6)

# %% [markdown]
# The same numbers from PyTorch's tensor operations, as an independent check:

# %%
q_t, k_t, v_t = (torch.from_numpy(a) for a in (Q_two, K_two, V_two))
torch_output = torch.softmax(q_t @ k_t.T / np.sqrt(q_t.shape[-1]), dim=-1) @ v_t
print("NumPy matches PyTorch:", np.allclose(output_two, torch_output.numpy()))
assert np.allclose(output_two, torch_output.numpy())

# %% [markdown]
# ### Check it: four tokens against PyTorch's fused kernel
#
# `F.scaled_dot_product_attention` is PyTorch's fused attention (on supported GPUs it
# dispatches to memory-efficient kernels such as FlashAttention). With `torch.manual_seed(0)`
# and `q, k, v = torch.randn(3, 4, 8).unbind(0)`, token 0 puts weights
# `[0.121, 0.741, 0.106, 0.032]` on the four tokens: 74 % of its output comes from token 1's
# value. Your NumPy version should agree with the fused kernel to `1e-6`.

# %%
torch.manual_seed(0)
q4, k4, v4 = torch.randn(3, 4, 8).unbind(0)  # each (4 tokens, 8 features)
output4, weights4 = attention(q4.numpy(), k4.numpy(), v4.numpy())
print("weights of token 0:", np.round(weights4[0], 3).tolist())
print("matches F.scaled_dot_product_attention:",
      np.allclose(output4, F.scaled_dot_product_attention(q4, k4, v4).numpy(), atol=1e-6))
assert np.allclose(np.round(weights4[0], 3), [0.121, 0.741, 0.106, 0.032])

# %% [markdown]
# A picture of the same weights: one row per query, one column per key, each row sums to 1.

# %%
plot_attention(weights4, queries=[f"q{i}" for i in range(4)], keys=[f"k{j}" for j in range(4)],
               title="softmax(q k^T / sqrt(8)), seed 0")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "test_attention_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""attention returns output (..., Lq, d_v) and weights (..., Lq, Lk), batch axes included."""
from course import attempt
from course.two_keys_checks import attention_hint, softmax_normalises_rows  # course/two_keys_checks.py


def run_attention(Q, K, V):
    """attention(Q, K, V); an error reads as one sentence with where to look (the tests below use it too)."""
    return attempt(f"attention(Q {Q.shape}, K {K.shape}, V {V.shape})", attention, Q, K, V,
                   hint=attention_hint(softmax))


### BEGIN HIDDEN TESTS
from course.two_keys_checks import THREE_ROWS


def own_weights(Q, K):
    """The weights as your softmax makes them from the right scores (the tests of softmax judge softmax); refused
    when your softmax gives rows of different scores the same weights, which no attention can be judged around."""
    probe = np.asarray(attempt("softmax(scores, axis=-1)", softmax, np.array(THREE_ROWS), axis=-1,
                               hint="make the test of softmax pass first"), dtype=float)
    check_true(probe.shape == (3, 3) and bool(np.isfinite(probe).all()) and not np.allclose(probe, probe[:1]),
               "your softmax gives three rows of different scores the same weights (or non-finite ones): make the "
               "test of softmax pass first")
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    return attempt("softmax(scores, axis=-1)", softmax, scores, axis=-1, hint="make the test of softmax pass first")
### END HIDDEN TESTS


rng = np.random.default_rng(4)
Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))
result = run_attention(Q, K, V)
check_true(isinstance(result, tuple) and len(result) == 2, "attention must return a pair (output, weights)")
output, weights = result
check_shape("weights for Q (2, 3, 4), K (2, 5, 4)", weights, (2, 3, 5))
check_shape("output for V (2, 5, 6)", output, (2, 3, 6),
            hint="the output mixes the value vectors, so its last axis is d_v = V.shape[-1]")
### BEGIN HIDDEN TESTS
for trial in range(4):
    batch = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
    lq, lk, d_k, d_v = (int(n) for n in rng.integers(1, 7, size=4))
    Q, K, V = (rng.normal(size=batch + s) for s in ((lq, d_k), (lk, d_k), (lk, d_v)))
    output, weights = run_attention(Q, K, V)
    check_shape(f"weights for batch {batch}, Lq={lq}, Lk={lk}", weights, batch + (lq, lk))
    check_shape(f"output for batch {batch}, Lq={lq}, d_v={d_v}", output, batch + (lq, d_v),
                hint="the output mixes the value vectors, so its last axis is d_v = V.shape[-1]")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_weights", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Each query's weights form a distribution over the keys: non-negative, summing to 1."""
rng = np.random.default_rng(5)
Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
rows_ok = softmax_normalises_rows(softmax)  # else the weights are judged as your softmax makes them
_, weights = run_attention(Q, K, V)
if rows_ok:
    check_rows_sum_to_one("attention weights (one row per query)", weights,
                          hint="softmax over the key axis (the last one), not over the queries")
### BEGIN HIDDEN TESTS
def check_weights(what, Q, K, weights):
    if rows_ok:
        check_rows_sum_to_one(what, weights, hint="softmax over the key axis (the last one), not over the queries")
    else:
        check_close(what, weights, own_weights(Q, K), atol=1e-9, hint="the weights are your softmax of the scores "
                    "Q K^T / sqrt(d_k) over the key axis (the last one)")


check_weights("attention weights (one row per query)", Q, K, weights)
for trial in range(4):
    lq, lk, d_k = (int(n) for n in rng.integers(2, 7, size=3))
    Q, K, V = rng.normal(size=(2, lq, d_k)), rng.normal(size=(2, lk, d_k)), rng.normal(size=(2, lk, 3))
    _, weights = run_attention(Q, K, V)
    check_weights(f"attention weights for Lq={lq}, Lk={lk}", Q, K, weights)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_scaling", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Scores are divided by sqrt(d_k): with d_k = 4 and q . k = 4 the score must be 2."""
Q = np.array([[1.0, 1.0, 1.0, 1.0]])
K = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])  # scores before scaling: [4, 0]
_, weights = run_attention(Q, K, np.eye(2))
top = float(weights[0, 0])
rows_ok = softmax_normalises_rows(softmax)
if rows_ok:
    check_true(top < 0.93, f"weight on the matching key is {top:.3f}: too peaked, divide the scores by sqrt(d_k), the width of Q and K")
    check_true(top > 0.8, f"weight on the matching key is {top:.3f}: too flat, divide by sqrt(d_k), not by d_k")
    check_close("weights for q . k = [4, 0], d_k = 4", weights, [[0.880797, 0.119203]], atol=1e-5)
### BEGIN HIDDEN TESTS
if not rows_ok:
    check_close("weights for q . k = [4, 0], d_k = 4", weights, own_weights(Q, K), atol=1e-9,
                hint="divide the scores by sqrt(d_k) before your softmax")
rng = np.random.default_rng(6)
for d_k in (2, 9, 16):
    Q, K = rng.normal(size=(3, d_k)), rng.normal(size=(5, d_k))
    _, weights = run_attention(Q, K, np.eye(5))
    raw = torch.from_numpy(Q @ K.T)
    if rows_ok:
        expected = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (Q, K, np.eye(5)))).numpy()
    else:
        expected = own_weights(Q, K)
    check_close(f"weights for d_k={d_k}", weights, expected,
                atol=1e-6, likely_causes={
                    "the scores are not divided by sqrt(d_k)": torch.softmax(raw, -1).numpy(),
                    "the scores are divided by d_k instead of sqrt(d_k)": torch.softmax(raw / d_k, -1).numpy(),
                })
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_matches_pytorch", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""attention agrees with F.scaled_dot_product_attention on random batched inputs."""
rows_ok = softmax_normalises_rows(softmax)
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(7)
for trial in range(6):
    batch = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
    lq, lk, d_k, d_v = (int(n) for n in rng.integers(2, 7, size=4))
    Q, K, V = (rng.normal(size=batch + s) for s in ((lq, d_k), (lk, d_k), (lk, d_v)))
    output, weights = run_attention(Q, K, V)
    q, k, v = (torch.from_numpy(a) for a in (Q, K, V))
    true_weights = F.scaled_dot_product_attention(q, k, torch.eye(lk, dtype=torch.float64).expand(*batch, lk, lk))
    if not rows_ok:  # judged around your softmax
        true_weights = torch.from_numpy(np.asarray(own_weights(Q, K), dtype=np.float64))
    raw = q @ k.transpose(-1, -2)
    check_close(f"attention weights for batch {batch}, Lq={lq}, Lk={lk}, d_k={d_k}", weights, true_weights.numpy(),
                atol=1e-6, likely_causes={
                    "the scores are not divided by sqrt(d_k)": torch.softmax(raw, -1).numpy(),
                    "the scores are divided by d_k instead of sqrt(d_k)": torch.softmax(raw / d_k, -1).numpy(),
                    "softmax runs over the query axis instead of the key axis":
                        torch.softmax(raw / d_k ** 0.5, -2).numpy(),
                    "the scores are divided by sqrt(d_v), the width of V, instead of sqrt(d_k), the width of Q and K":
                        torch.softmax(raw / d_v ** 0.5, -1).numpy(),
                })
    check_close(f"attention output for batch {batch}, Lq={lq}, d_v={d_v}", output,
                (true_weights @ v).numpy(), atol=1e-6,
                hint="output = weights @ V, the weighted average of the value vectors")
### END HIDDEN TESTS
torch.manual_seed(0)
q4, k4, v4 = torch.randn(3, 4, 8).unbind(0)
output4, _ = run_attention(q4.numpy(), k4.numpy(), v4.numpy())
if rows_ok:  # else judged around your softmax
    check_close("attention output for the seed-0 tokens", output4,
                F.scaled_dot_product_attention(q4, k4, v4).numpy(), atol=1e-6)
### BEGIN HIDDEN TESTS
if not rows_ok:
    check_close("attention output for the seed-0 tokens", output4, own_weights(q4.numpy(), k4.numpy()) @ v4.numpy(),
                atol=1e-6, hint="output = weights @ V, the weighted average of the value vectors")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_equal_keys", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With identical keys every weight is equal and the output is the plain mean of the values."""
rng = np.random.default_rng(8)
K = np.tile(rng.normal(size=(1, 4)), (5, 1))  # five copies of one key
V = rng.normal(size=(5, 3))
rows_ok = softmax_normalises_rows(softmax)
for query in (rng.normal(size=(1, 4)), 10 * rng.normal(size=(1, 4))):
    output, weights = run_attention(query, K, V)
    if rows_ok:
        check_close("weights over five identical keys", weights, np.full((1, 5), 0.2), atol=1e-6)
        check_close("output over five identical keys", output, V.mean(axis=0, keepdims=True), atol=1e-6,
                    hint="the output must be the weights times the values V")
### BEGIN HIDDEN TESTS
    else:
        check_close("output over five identical keys", output, own_weights(query, K) @ V, atol=1e-6,
                    hint="the output must be the weights times the values V")
for trial in range(3):
    lk, d_v = int(rng.integers(2, 8)), int(rng.integers(1, 6))
    K = np.tile(rng.normal(size=(1, 3)), (lk, 1))
    V = rng.normal(size=(2, lk, d_v))
    query = rng.normal(size=(2, 4, 3))
    output, _ = run_attention(query, K, V)
    if rows_ok:
        expected = np.broadcast_to(V.mean(axis=-2, keepdims=True), (2, 4, d_v))
    else:
        expected = own_weights(query, K) @ V
    check_close(f"output over {lk} identical keys", output, expected,
                atol=1e-6, hint="the output must be the weights times the values V")
### END HIDDEN TESTS

# %% [markdown]
# ## Part C · Two keys, by hand (2 points)
#
# The worked example above had one feature per vector. Now the query and keys have two, so
# the division by $\sqrt{d_k}$ matters: $q = [1, 1]$, $k_1 = [1, 1]$, $k_2 = [1, -1]$,
# $v_1 = [3, 1]$, $v_2 = [-1, 5]$. Work out the weights and the output **without calling your
# functions** (a calculator, or `np.exp` and `np.sqrt` as one, is fine) and write them as
# arrays of shape `(1, 2)`. Three decimals are enough (the tolerance is `1e-3`).

# %% nbgrader={"grade": false, "grade_id": "hand_answers", "locked": false, "schema_version": 3, "solution": true}
HAND_WEIGHTS = None  # replace None with the weights of key 1 and key 2, as an array of shape (1, 2)
HAND_OUTPUT = None  # replace None with the output, as an array of shape (1, 2)
### BEGIN SOLUTION
hand_scores = np.array([1 * 1 + 1 * 1, 1 * 1 + 1 * -1]) / np.sqrt(2)  # [sqrt(2), 0]
HAND_WEIGHTS = np.exp(hand_scores)[None] / np.exp(hand_scores).sum()
HAND_OUTPUT = HAND_WEIGHTS @ np.array([[3.0, 1.0], [-1.0, 5.0]])
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_hand_answers", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""HAND_WEIGHTS and HAND_OUTPUT hold the Part C answers to three decimals."""
for name, answer in (("HAND_WEIGHTS", HAND_WEIGHTS), ("HAND_OUTPUT", HAND_OUTPUT)):
    check_true(answer is not None, f"{name} is still None: replace None with your answer, an array of shape (1, 2)")
check_shape("HAND_WEIGHTS", np.asarray(HAND_WEIGHTS), (1, 2), hint="one query, two keys: shape (1, 2)")
check_shape("HAND_OUTPUT", np.asarray(HAND_OUTPUT), (1, 2), hint="one query, values of width 2: shape (1, 2)")
check_rows_sum_to_one("HAND_WEIGHTS", np.asarray(HAND_WEIGHTS), atol=2e-3)
### BEGIN HIDDEN TESTS
def two_key_answers(scores, values=((3.0, 1.0), (-1.0, 5.0))):
    """Weights and output of the Part C example for raw scores [q.k1, q.k2] scaled as given."""
    weights = np.exp(scores) / np.exp(scores).sum()
    return weights[None], (weights @ np.array(values))[None]


weights_given = np.asarray(HAND_WEIGHTS, dtype=float)
unscaled_weights, _ = two_key_answers(np.array([2.0, 0.0]))
check_true(weights_given.shape != (1, 2) or not np.allclose(weights_given, unscaled_weights, atol=1e-3),
           "HAND_WEIGHTS are the weights of the raw scores [2, 0]: with d_k = 2 the scores are divided by "
           "sqrt(d_k) before the softmax")
right_weights, right_output = two_key_answers(np.array([2.0, 0.0]) / np.sqrt(2.0))
check_close("HAND_WEIGHTS", weights_given, right_weights, atol=1e-3,
            hint="score each key with q . k / sqrt(d_k), then softmax over the two keys", likely_causes={
                "the scores are divided by d_k = 2 instead of sqrt(d_k)": two_key_answers(np.array([1.0, 0.0]))[0]})
check_close("HAND_OUTPUT", np.asarray(HAND_OUTPUT, dtype=float), right_output, atol=1e-3,
            hint="output = a1 * v1 + a2 * v2 with v1 = [3, 1] and v2 = [-1, 5]",
            likely_causes={"v1 and v2 are the columns of your value matrix: each value vector is a row, so the output "
                           "is [a1, a2] @ [[3, 1], [-1, 5]]": two_key_answers(np.array([2.0, 0.0]) / np.sqrt(2.0),
                                                                               ((3.0, -1.0), (1.0, 5.0)))[1]})
### END HIDDEN TESTS

# %% [markdown]
# ## Part D · In your own words (2 points, graded by your instructor)
#
# If all keys are identical, the output is the plain mean of the values, whatever the query.
# Explain why in three or four sentences, using the formula above. What does this tell you
# about where attention gets its ability to *select*?

# %% [markdown] nbgrader={"grade": true, "grade_id": "equal_keys_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** With identical keys $k_j = k$, every score $q \cdot k / \sqrt{d_k}$ in a
# row is the same number, whatever $q$ is. Softmax of $n$ equal scores is $1/n$ for each key
# (adding a constant to all scores changes nothing), so the output
# $\sum_j \tfrac{1}{n} v_j$ is the mean of the values. The query only matters through the
# *differences* between scores, and those come from the keys differing: selection is possible
# only when the keys tell the positions apart.
#
# **Rubric (2 points, one idea each).**
# * 1 point, why the mean: with identical keys every score $q \cdot k / \sqrt{d_k}$ of the row is the same number, whatever the query, so softmax gives each of the $n$ keys the weight $1/n$ and the output $\sum_j \tfrac{1}{n} v_j$ is the mean of the values. Earns it: the equal scores, in any words, leading to equal weights. Does not: restating the claim ("identical keys give the mean") with no word of the scores, or "the query is ignored" without saying why.
# * 1 point, where selection comes from: softmax depends only on the differences between the scores of a row, and for one query those differences come from the keys differing, so attention can select only when the keys tell the positions apart. Earns it: selection traced to keys that differ (or to differences between scores). Does not: "the query chooses what it needs" (with equal keys it chooses nothing), or "the values must differ" (different values are averaged all the same).
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "a larger query would make the weights sharper" costs the first point: the scores stay equal whatever the query); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * Scores compare a query with every key; softmax over the key axis turns each row into a
#   distribution; the output is the weighted average of the values.
# * Subtracting the row maximum before `exp` leaves softmax unchanged and prevents overflow.
# * Values may be wider or narrower than keys: only `Q` and `K` must share `d_k`.
# * Unlike a hash map, attention never returns one value: it returns a soft mix, and equal
#   keys give the plain mean.
#
# Next, chapter 02 asks why the scores are divided by $\sqrt{d_k}$.
