# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 02 · Why divide by $\sqrt{d_k}$: the saturation experiment
#
# In chapter 01 the scores were $Q K^\top / \sqrt{d_k}$ and we took the $\sqrt{d_k}$ on
# trust. This notebook measures what happens without it. The plan:
#
# 1. a one-line variance argument: a raw score has standard deviation $\sqrt{d_k}$;
# 2. what large scores do to softmax: the weights collapse onto one key (*saturation*);
# 3. the experiment, reproduced to the last printed digit: 2000 random queries, 8 keys each,
#    at widths $d_k = 4, 64, 1024$, with and without the scaling;
# 4. why saturation matters for learning: the softmax Jacobian, which vanishes when the
#    weights are one-hot, so almost no gradient reaches the keys that lost.
#
# You will write three functions, `mean_top_weight`, `score_statistics` and
# `softmax_jacobian`, and answer a short quiz. As in chapter 01, each exercise has a
# solution cell, a cell that runs your code, and graded test cells; the grader also runs
# hidden tests on random sizes and seeds.
#
# **Time:** about 2 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapter 01 (softmax, scaled dot-product attention); the mean and variance of a sum of independent random numbers.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
import torch

from course import check_choice, check_close, check_finite, check_shape, check_true, check_type
from course.plots import plot_curves

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## The variance argument
#
# A score is a dot product, $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$: a sum of $d_k$ products.
# Suppose, as at initialisation, that all components are independent with mean 0 and
# variance 1. Then each product $q_i k_i$ has mean 0 and variance
# $\mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] = 1$, and variances of independent terms add up:
#
# $$\operatorname{Var}(q \cdot k) = d_k, \qquad \operatorname{std}(q \cdot k) = \sqrt{d_k}.$$
#
# A 1024-wide head therefore produces scores 32 times more spread out than a 1-wide one, for
# no reason other than its width. Dividing by $\sqrt{d_k}$ brings the standard deviation
# back to 1 at every width. A quick numerical check follows, 10 000 random pairs per width
# (the variances should be within a few percent of $d_k$); first, a prediction.

# %% [markdown]
# ### Predict, then run (1 point)
#
# The cell after the next two measures the spread at $d_k = 1$, $16$ and $400$. Before you run it,
# predict from the argument above the **standard deviation of the raw score** $q \cdot k$ (not
# divided by anything) at $d_k = 400$, and assign it to `PREDICTED_SPREAD`. A prediction within
# 5 % counts; the measurement then tells you whether your reasoning holds.

# %% nbgrader={"grade": false, "grade_id": "predict_spread", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_SPREAD = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_SPREAD = float(np.sqrt(400))  # std = sqrt(d_k)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_spread", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_SPREAD: the spread of a raw score at d_k = 400."""
from course import check_number

prediction = check_number("PREDICTED_SPREAD", PREDICTED_SPREAD)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_SPREAD", PREDICTED_SPREAD, 20.0, rel=0.05, known=(
    (400.0, "400 is the variance of q . k at d_k = 400; the spread asked for is the standard deviation, the "
            "square root of the variance"),
    (1.0, "1 is the spread after the division by sqrt(d_k); the raw score q . k is not divided"),
    (0.05, "1/20 is the factor the score is multiplied by, not the spread of the raw score"),
),
                              hint="a raw score is a sum of d_k independent products of variance 1: find its variance, "
                      "then its standard deviation")
### END HIDDEN TESTS

# %%
demo_rng = np.random.default_rng(42)
for width in (1, 16, 400):
    a, b = demo_rng.standard_normal((2, 10_000, width))  # 10 000 pairs of vectors
    dots = np.einsum("nd,nd->n", a, b)  # (10 000,) one dot product per pair
    print(f"d_k = {width:>3}: variance of q.k = {dots.var():7.2f}, "
          f"std = {dots.std():5.2f}, std after / sqrt(d_k) = {dots.std() / np.sqrt(width):.3f}")
    assert abs(dots.var() / width - 1) < 0.05

# %% [markdown]
# ## What large scores do to softmax
#
# Softmax only looks at the *differences* between scores. Multiply a row of scores by a
# factor $c$ and the differences grow by $c$: the largest score takes more and more of the
# weight, and as $c \to \infty$ the weights become one-hot and the output becomes the value
# of the arg-max key. That is what a wide head does to unscaled scores, with $c$ playing the
# role of $\sqrt{d_k}$.

# %%
row = np.array([1.0, 0.5, 0.0, -0.5])  # one query's scores against 4 keys
values = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])  # (4 keys, d_v = 2)
for c in (1, 4, 16, 1000):
    weights = torch.softmax(torch.from_numpy(c * row), dim=-1).numpy()  # (4,)
    print(f"c = {c:>4}: weights {np.round(weights, 3)}   output {np.round(weights @ values, 3)}")
assert np.allclose(weights @ values, values[np.argmax(row)])  # c = 1000: the arg-max key's value

# %% [markdown]
# A softmax this peaked is called **saturated**, like a $\tanh$ unit pushed far from zero:
# $\tanh(3) \approx 0.995$ and its slope there is only $1 - \tanh^2(3) \approx 0.0099$.
# Part C shows that a saturated softmax passes almost no gradient back to the scores. First,
# we need a number that says how saturated a softmax is.
#
# ## Part A · How peaked are the weights? (3 points)
#
# Write `mean_top_weight(scores)`: apply softmax over the **key axis** (the last one) of
# `scores`, which has shape `(..., n_keys)`, take the largest weight of every row, and return
# the mean of those maxima as one Python `float`.
#
# Uniform weights over 8 keys give $1/8 = 0.125$; one-hot weights give $1$. Use a numerically
# stable softmax as in chapter 01 (subtract each row's maximum before `exp`): unscaled scores
# at large widths are big.

# %% nbgrader={"grade": false, "grade_id": "mean_top_weight", "locked": false, "schema_version": 3, "solution": true}
def mean_top_weight(scores):
    """Mean over rows of the largest softmax weight; scores (..., n_keys) -> float."""
    ### BEGIN SOLUTION
    scores = np.asarray(scores, dtype=float)
    shifted = scores - scores.max(axis=-1, keepdims=True)  # (..., n_keys), row max is 0
    weights = np.exp(shifted)
    weights /= weights.sum(axis=-1, keepdims=True)  # softmax over the keys
    return float(weights.max(axis=-1).mean())
    ### END SOLUTION


# %% [markdown]
# Check it: equal scores give exactly $1/n$; the row $[1, 2, 3]$ puts $0.665$ on its top key;
# a row with one score far above the others is nearly one-hot.

# %%
print("equal scores over 8 keys:", mean_top_weight(np.zeros((3, 8))))
print("scores [1, 2, 3]:        ", round(mean_top_weight(np.array([[1.0, 2.0, 3.0]])), 6))
print("scores [0, 20, 0, 0]:    ", round(mean_top_weight(np.array([[0.0, 20.0, 0.0, 0.0]])), 6))
assert np.isclose(mean_top_weight(np.zeros((3, 8))), 1 / 8)
assert np.isclose(mean_top_weight(np.array([[1.0, 2.0, 3.0]])), 0.665241, atol=1e-6)

# %% nbgrader={"grade": true, "grade_id": "test_top_weight_range", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""mean_top_weight returns one number between 1/n_keys (uniform) and 1 (one-hot)."""
rng = np.random.default_rng(11)
scores = rng.normal(scale=3.0, size=(200, 8))
value = mean_top_weight(scores)
check_true(np.ndim(value) == 0, f"mean_top_weight returned shape {np.shape(value)}: "
           "return one number, the mean over all rows of each row's largest weight")
check_type("mean_top_weight(scores)", value, float,
           hint="return one Python float, float(...) of the mean (a 0-d array or tensor is not one)")
check_finite("mean_top_weight(scores)", value)
check_true(value <= 1 + 1e-9, f"mean_top_weight is {float(value):.3g}, above 1, but a softmax weight is at "
           "most 1: take the largest softmax weight of each row (its max, not its argmax, which is the key's index), "
           "not the largest raw score, and average them (.mean(), not .sum())")
check_true(value >= 1 / 8 - 1e-9, f"mean_top_weight is {float(value):.3g}, below 1/8, the value for uniform "
           "weights over 8 keys: is the softmax taken over the key axis (the last one)?")
### BEGIN HIDDEN TESTS
for trial in range(4):
    n_rows, n_keys = int(rng.integers(40, 300)), int(rng.integers(2, 12))
    value = mean_top_weight(rng.normal(scale=4.0, size=(n_rows, n_keys)))
    check_true(np.ndim(value) == 0, "mean_top_weight must return one number")
    check_true(value <= 1 + 1e-9, f"mean_top_weight is {float(value):.3g} for {n_keys} keys, above 1: take the "
               "largest softmax weight of each row (its max, not its argmax, which is the key's index), not the "
               "largest raw score")
    check_true(value >= 1 / n_keys - 1e-9, f"mean_top_weight is {float(value):.3g} for {n_keys} keys, below "
               f"1/{n_keys}: is the softmax taken over the key axis (the last one)?")
    equal = mean_top_weight(np.full((3, n_keys), float(rng.normal())))
    check_close(f"mean_top_weight of equal scores over {n_keys} keys", equal, 1 / n_keys, atol=1e-9,
                hint="equal scores give uniform weights, so every row's largest weight is 1/n_keys")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_top_weight_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""mean_top_weight agrees with torch.softmax on random scores of any batch shape, and leaves its scores as they were."""
from course import attempt
from nboracle import call_keeping_arguments  # the tests' tool: the result, and the arguments as the call left them

### BEGIN HIDDEN TESTS
rng = np.random.default_rng(12)
for shape in [(int(rng.integers(5, 60)), int(rng.integers(2, 10))) for _ in range(3)] + [(3, 7, 5), (2, 2, 4, 6)]:
    scores = rng.normal(scale=float(rng.uniform(0.5, 6.0)), size=shape)
    weights = torch.softmax(torch.from_numpy(scores), dim=-1)
    causes = {"you take the largest raw score instead of the largest softmax weight": scores.max(axis=-1).mean(),
              "you take the largest weight of all rows instead of the mean of each row's largest":
                  weights.max().item(),
              "you average all the weights instead of taking each row's largest": weights.mean().item(),
              "you add up the rows' largest weights (.sum()) instead of averaging them (.mean())":
                  weights.amax(dim=-1).sum().item(),
              "you take the largest weight over axis 0 (of each key's column, across the rows) instead of over each "
              "row's keys, axis -1": weights.amax(dim=0).mean().item()}
    if len(shape) == 2:
        causes["the softmax runs over the query axis instead of the key axis"] = \
            torch.softmax(torch.from_numpy(scores), dim=-2).amax(dim=-1).mean().item()
    mine = attempt(f"mean_top_weight for scores of shape {shape}", mean_top_weight, scores,
                   hint="the scores may have several batch axes before the keys, (..., n_keys): take the largest "
                        "weight of every row over the last axis, then the mean of all of them (.mean() with no axis)")
    check_close(f"mean_top_weight for scores of shape {shape}", mine,
                weights.amax(dim=-1).mean().item(), atol=1e-9, rtol=1e-7, likely_causes=causes,
                hint="softmax over the last axis, the largest weight of each row, then the mean over all rows")
### END HIDDEN TESTS
row = np.array([[1.0, 2.0, 3.0]])
top, (row_after, *_) = attempt("mean_top_weight([[1, 2, 3]])", call_keeping_arguments, mean_top_weight, row,
                               hint="softmax over the last axis, the largest weight of each row, then their mean")
check_close("mean_top_weight([[1, 2, 3]])", top, 0.665241, atol=1e-6,
            likely_causes={"you take the largest raw score instead of the largest softmax weight": 3.0})
check_true(np.array_equal(row_after, [[1.0, 2.0, 3.0]]), "mean_top_weight changed the scores it was given (an "
           "in-place -= or /= on them?): compute new arrays (shifted = scores - ...), so that the caller's scores "
           "stay as they were")
check_close("mean_top_weight([[0, 0], [0, ln 3]])",
            mean_top_weight(np.array([[0.0, 0.0], [0.0, np.log(3.0)]])), 0.625, atol=1e-9,
            hint="the rows' largest weights are 0.5 and 0.75; return their mean")

# %% nbgrader={"grade": true, "grade_id": "test_top_weight_stable", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""mean_top_weight stays finite for scores in the thousands (subtract each row's max before exp)."""
big = np.array([[1000.0, 0.0, -5.0], [0.0, 1000.0, 999.0]])
value = mean_top_weight(big)
check_finite("mean_top_weight of scores around 1000", value,
             hint="exp(1000) overflows to inf; subtract each row's maximum before exp")
check_close("mean_top_weight of scores around 1000", value, (1.0 + 1 / (1 + np.exp(-1.0))) / 2, atol=1e-6,
            hint="the two rows' largest weights are 1 and e/(e+1); return their mean",
            likely_causes={"you take the largest weight over axis 0 (of each key's column, across the rows) instead "
                           "of over each row's keys, axis -1": (1.0 + 1 / (1 + np.exp(-1.0)) + 1 / (1 + np.exp(1.0))) / 3})
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(13)
for trial in range(3):
    scores = rng.normal(scale=1e4, size=(int(rng.integers(3, 30)), int(rng.integers(2, 9))))
    value = mean_top_weight(scores)
    check_finite("mean_top_weight of scores of size 1e4", value,
                 hint="exp of a large score overflows to inf; subtract each row's maximum before exp")
    check_close("mean_top_weight of scores of size 1e4", value,
                torch.softmax(torch.from_numpy(scores), dim=-1).amax(dim=-1).mean().item(), atol=1e-9)
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · The saturation experiment (4 points)
#
# Now the experiment itself. For one width $d_k$:
#
# * draw `q` of shape `(n_queries, 1, d_k)`, **then** `k` of shape `(n_queries, n_keys, d_k)`,
#   both with `rng.standard_normal`: each query gets its own `n_keys` keys;
# * the raw scores are the dot products, shape `(n_queries, n_keys)`; the scaled scores are
#   the raw ones divided by $\sqrt{d_k}$;
# * report the standard deviation of all raw and of all scaled scores together (`np.std`,
#   which divides by the number of entries), and `mean_top_weight` of each.
#
# Write `score_statistics(d_k, rng, n_queries=2000, n_keys=8)` returning a dict with the keys
# `"raw_std"`, `"scaled_std"`, `"raw_top"` and `"scaled_top"` (floats).
#
# **Draw from the generator you are given** and from nothing else, in that order (q, then
# k). The figures below are reproduced *exactly*, so the order of the draws matters, and the
# three widths share *one* generator: each call continues where the previous one stopped.

# %% nbgrader={"grade": false, "grade_id": "score_statistics", "locked": false, "schema_version": 3, "solution": true}
def score_statistics(d_k, rng, n_queries=2000, n_keys=8):
    """Std and mean top weight of raw and scaled random scores; q then k drawn from `rng`."""
    ### BEGIN SOLUTION
    q = rng.standard_normal((n_queries, 1, d_k))  # one query per row
    k = rng.standard_normal((n_queries, n_keys, d_k))  # n_keys keys per query
    raw = (q @ k.swapaxes(-1, -2))[:, 0, :]  # (n_queries, 1, n_keys) -> (n_queries, n_keys)
    scaled = raw / np.sqrt(d_k)
    return {"raw_std": float(raw.std()), "scaled_std": float(scaled.std()),
            "raw_top": mean_top_weight(raw), "scaled_top": mean_top_weight(scaled)}
    ### END SOLUTION


# %% [markdown]
# ### Check it: the table
#
# With `rng = np.random.default_rng(0)` and the widths 4, 64, 1024 in that order, the result
# must be exactly this table (printed to 2 and 3 decimals):
#
# | $d_k$ | std raw → scaled | mean top weight raw → scaled |
# |---|---|---|
# | 4 | 2.00 → 1.00 | 0.524 → 0.342 |
# | 64 | 7.96 → 0.99 | 0.878 → 0.360 |
# | 1024 | 31.83 → 0.99 | 0.968 → 0.358 |

# %%
TABLE = {4: ("2.00", "1.00", "0.524", "0.342"),
         64: ("7.96", "0.99", "0.878", "0.360"),
         1024: ("31.83", "0.99", "0.968", "0.358")}
rng = np.random.default_rng(0)
for d_k, expected in TABLE.items():
    stats = score_statistics(d_k, rng)  # the same rng for all three widths
    printed = (f"{stats['raw_std']:.2f}", f"{stats['scaled_std']:.2f}",
               f"{stats['raw_top']:.3f}", f"{stats['scaled_top']:.3f}")
    print(f"d_k = {d_k:<5} std {printed[0]:>5} -> {printed[1]}   top weight {printed[2]} -> {printed[3]}")
    assert printed == expected, f"d_k = {d_k}: got {printed}, the table says {expected}"

# %% [markdown]
# Without the scaling the spread grows like $\sqrt{d_k}$ (2, 8, 32) and the strongest key
# takes on average 52 %, then 88 %, then 97 % of the weight; uniform weights over 8 keys would
# give 12.5 %. With the scaling the spread stays at 1 and the top weight near 0.35 at every
# width: the scale of the scores no longer depends on the size of the model.
#
# The same sweep over every power of two from 1 to 1024 (a second generator, seeded 1), as a
# picture. The assertions below hold with the stated margins: the raw curve climbs at every
# step and ends above 0.95; the scaled curve stays between 0.30 and 0.37. (At $d_k = 1$ the
# score is a single product of two Gaussians, which is not Gaussian itself; that is why the
# first point sits a little lower.)

# %%
# demo only: the figure (autograde skips it)
widths = 2 ** np.arange(11)  # d_k = 1, 2, 4, ..., 1024
sweep_rng = np.random.default_rng(1)
sweep = [score_statistics(int(d_k), sweep_rng) for d_k in widths]
raw_top = np.array([s["raw_top"] for s in sweep])
scaled_top = np.array([s["scaled_top"] for s in sweep])
ax = plot_curves(widths, {"raw scores q.k": raw_top, "scaled scores q.k / sqrt(d_k)": scaled_top},
                 xlabel="d_k, width of queries and keys (log scale)",
                 ylabel="mean largest weight (8 keys)", title="Unscaled scores saturate softmax", logx=True)
ax.axhline(1 / 8, color="gray", linestyle="--", label="uniform weights, 1/8")
ax.set_xscale("log", base=2)
ax.set_ylim(0, 1.02)
ax.legend()
plt.show()
assert np.all(np.diff(raw_top) > 0) and raw_top[-1] > 0.95
assert np.all((scaled_top > 0.30) & (scaled_top < 0.37))

# %% nbgrader={"grade": true, "grade_id": "test_statistics_keys", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""score_statistics returns the four statistics; raw std is about sqrt(d_k), scaled std about 1."""
stats = score_statistics(16, np.random.default_rng(21), n_queries=500, n_keys=8)
check_true(isinstance(stats, dict), f"score_statistics returned a {type(stats).__name__}, expected a dict")
wanted = {"raw_std", "scaled_std", "raw_top", "scaled_top"}
check_true(set(stats) == wanted, f"score_statistics returned the keys {sorted(stats)}, expected {sorted(wanted)}")
# scaled_top and raw_top are your Part A's mean_top_weight of the scores: its type and values are judged there
two_rows = mean_top_weight(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))  # largest weights 0.665241 and 1/3
top_is_float = isinstance(two_rows, float)
part_a_right = bool(abs(float(two_rows) - (0.665241 + 1 / 3) / 2) < 1e-6)
for key in sorted(wanted):
    check_true(np.ndim(stats[key]) == 0, f"stats[{key!r}] has shape {np.shape(stats[key])}: expected one number")
    if top_is_float or not key.endswith("_top"):
        check_type(f"stats[{key!r}]", stats[key], float, hint="each statistic is one Python float, float(...)")
    check_finite(f"stats[{key!r}]", stats[key])
check_true(not 13.6 < stats["raw_std"] < 18.4, f"raw_std is {stats['raw_std']:.3g} for d_k = 16, about d_k itself: "
           "that is the variance of the raw scores; report their standard deviation (np.std)")
check_true(3.4 < stats["raw_std"] < 4.6, f"raw_std is {stats['raw_std']:.3g} for d_k = 16, expected about "
           "sqrt(16) = 4: the raw scores are the dot products of q and k, one per (query, key) pair, with q and k "
           "drawn from the standard normal (rng.standard_normal: mean 0, variance 1)")
check_true(stats["scaled_std"] < 1.15, f"scaled_std is {stats['scaled_std']:.3g} for d_k = 16, expected about 1: "
           "divide the raw scores by sqrt(d_k)")
check_true(stats["scaled_std"] > 0.85, f"scaled_std is {stats['scaled_std']:.3g} for d_k = 16, expected about 1: "
           "divide the raw scores by sqrt(d_k), not by d_k")
check_true(not part_a_right or 1 / 8 < stats["scaled_top"] < stats["raw_top"] < 1, "expected 1/8 < scaled_top < "
           "raw_top < 1 for d_k = 16: raw_top is mean_top_weight of the raw scores, scaled_top of the scaled ones")
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(22)
for trial in range(3):
    d_k, n_queries, n_keys = int(rng.integers(2, 400)), int(rng.integers(300, 600)), int(rng.integers(4, 12))
    stats = score_statistics(d_k, np.random.default_rng(int(rng.integers(10**6))), n_queries=n_queries, n_keys=n_keys)
    check_true(d_k < 4 or not 0.85 < stats["raw_std"] / d_k < 1.15, f"raw_std is {stats['raw_std']:.3g} for "
               f"d_k = {d_k}, about d_k itself: that is the variance of the raw scores; report their standard "
               "deviation (np.std)")
    check_true(0.85 < stats["raw_std"] / np.sqrt(d_k) < 1.15, f"raw_std is {stats['raw_std']:.3g} for "
               f"d_k = {d_k}, expected about sqrt(d_k): the raw scores are the plain dot products q . k, q and k "
               "drawn with rng.standard_normal")
    check_true(0.85 < stats["scaled_std"] < 1.15, f"scaled_std is {stats['scaled_std']:.3g} for d_k = {d_k}, "
               "expected about 1: divide the raw scores by sqrt(d_k), and by nothing else")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_statistics_table", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""score_statistics reproduces the table exactly: q then k from the one generator it is given."""
### BEGIN HIDDEN TESTS
def _reference_statistics(d_k, seed, n_q, n_k, order="qk", divisor=None, ddof=0, per_row=False):
    g = np.random.default_rng(seed)
    if order == "kq":
        k_ref = g.standard_normal((n_q, n_k, d_k))
        q_ref = g.standard_normal((n_q, 1, d_k))
    elif order == "interleaved":
        pairs = [(g.standard_normal((1, d_k)), g.standard_normal((n_k, d_k))) for _ in range(n_q)]
        q_ref, k_ref = np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs])
    else:
        q_ref = g.standard_normal((n_q, 1, d_k))
        k_ref = g.standard_normal((n_q, n_k, d_k))
    raw_ref = np.einsum("qd,qkd->qk", q_ref[:, 0], k_ref)
    scaled_ref = raw_ref / (np.sqrt(d_k) if divisor is None else divisor)
    spread = (lambda s: s.std(axis=-1).mean()) if per_row else (lambda s: s.std(ddof=ddof))
    top = lambda s: torch.softmax(torch.from_numpy(s), dim=-1).amax(dim=-1).mean().item()
    return {"raw_std": spread(raw_ref), "scaled_std": spread(scaled_ref), "raw_top": top(raw_ref),
            "scaled_top": top(scaled_ref), "raw": raw_ref, "scaled": scaled_ref}
from course import attempt


def own_top(scores):
    """Your mean_top_weight of the test's scores (Part A's tests judge it); refused when it gives flat and peaked
    scores the same answer, which no table can be judged around."""
    flat, peaked = (float(attempt("mean_top_weight(scores)", mean_top_weight, probe,
                                  hint="make the test of mean_top_weight pass first"))
                    for probe in (np.zeros((2, 3)), np.array([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]])))
    check_true(not np.isclose(flat, peaked), "mean_top_weight gives flat and peaked scores the same answer: make the "
               "test of mean_top_weight pass first")
    return float(attempt("mean_top_weight(scores)", mean_top_weight, scores,
                         hint="make the test of mean_top_weight pass first"))


rng = np.random.default_rng(23)
for trial in range(3):
    d_k, n_q, n_k = int(rng.integers(2, 150)), int(rng.integers(10, 200)), int(rng.integers(2, 12))
    seed = int(rng.integers(1, 10**6))
    mine = score_statistics(d_k, np.random.default_rng(seed), n_queries=n_q, n_keys=n_k)
    variants = {"k is drawn before q": dict(order="kq"),
                "q and k are drawn query by query; draw all of q, then all of k": dict(order="interleaved"),
                "the scaled scores are divided by d_k instead of sqrt(d_k)": dict(divisor=d_k),
                "the scaled scores are not divided by sqrt(d_k)": dict(divisor=1.0),
                "the std divides by n - 1 (ddof=1, torch.std's default); use np.std": dict(ddof=1),
                "the std is taken per query and averaged; take it over all scores at once": dict(per_row=True)}
    variants["the scaled scores are divided by their own measured std instead of sqrt(d_k): their spread is then 1 by "
             "construction, not because of the scaling"] = dict(divisor=_reference_statistics(d_k, seed, n_q, n_k)["raw_std"])
    wrong = {cause: _reference_statistics(d_k, seed, n_q, n_k, **kw) for cause, kw in variants.items()}
    wrong["score_statistics makes its own np.random.default_rng(0) instead of drawing from `rng`"] = \
        _reference_statistics(d_k, 0, n_q, n_k)
    expected = _reference_statistics(d_k, seed, n_q, n_k)
    for key in ("raw_top", "scaled_top"):  # judged around your mean_top_weight (Part A's tests judge it)
        try:
            expected[key] = own_top(expected[key.replace("_top", "")])
        except Exception:  # noqa: BLE001 (Part A's tests report it; then the right value is expected here)
            pass
    for key in ("raw_std", "scaled_std", "raw_top", "scaled_top"):
        causes = {cause: w[key] for cause, w in wrong.items()}
        if key == "scaled_top":  # reached with scaled_std right
            causes = {"scaled_top is mean_top_weight of the raw scores (your scaled_std is right): take it of the "
                      "scaled ones": expected["raw_top"], **causes}
        check_close(f"{key} for d_k={d_k}, n_queries={n_q}, n_keys={n_k}", mine[key], expected[key],
                    atol=1e-9, rtol=1e-6, likely_causes=causes,
                    hint="draw q (n_queries, 1, d_k) then k (n_queries, n_keys, d_k) from `rng`, "
                         "np.std of all scores, mean_top_weight of each")
### END HIDDEN TESTS
rng = np.random.default_rng(0)
TABLE = {4: ("2.00", "1.00", "0.524", "0.342"), 64: ("7.96", "0.99", "0.878", "0.360"),
         1024: ("31.83", "0.99", "0.968", "0.358")}
for call, (d_k, expected) in enumerate(TABLE.items()):
    stats = score_statistics(d_k, rng)
    printed = (f"{stats['raw_std']:.2f}", f"{stats['scaled_std']:.2f}",
               f"{stats['raw_top']:.3f}", f"{stats['scaled_top']:.3f}")
    shown = 4 if part_a_right else 2  # part_a_right: from the test of the keys; the tops are your Part A's
    check_true(printed[:shown] == expected[:shown], f"call {call + 1} (d_k = {d_k}) on the shared generator gives "
               f"{printed[:shown]}, the table says {expected[:shown]}: draw q, then k, from the `rng` argument, "
               "one generator for all three widths")

# %% nbgrader={"grade": true, "grade_id": "test_statistics_uses_rng", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""score_statistics draws from the generator it is given: same seed, same numbers; the generator moves on."""
from course.scaling_checks import same_statistics  # the checks of this chapter: course/scaling_checks.py

first = score_statistics(8, np.random.default_rng(7), n_queries=50)
again = score_statistics(8, np.random.default_rng(7), n_queries=50)
other = score_statistics(8, np.random.default_rng(8), n_queries=50)
check_true(same_statistics(first, again), "two generators with the same seed 7 give different statistics: "
           "draw from the `rng` argument instead of creating a new generator inside score_statistics")
check_true(not same_statistics(first, other), "generators seeded 7 and 8 give identical statistics: "
           "score_statistics ignores the `rng` it is given; draw from it instead of creating a generator inside")
shared = np.random.default_rng(9)
first_call, second_call = score_statistics(8, shared, n_queries=50), score_statistics(8, shared, n_queries=50)
check_true(not same_statistics(first_call, second_call),
           "two calls on one generator give identical statistics: the second call must continue from where "
           "the first one left the generator")
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(24)
for trial in range(3):
    d_k, n_q, n_k = int(rng.integers(1, 100)), int(rng.integers(5, 200)), int(rng.integers(2, 12))
    seed = int(rng.integers(1, 10**6))
    mine, reference = np.random.default_rng(seed), np.random.default_rng(seed)
    score_statistics(d_k, mine, n_queries=n_q, n_keys=n_k)
    reference.standard_normal((n_q, 1, d_k))
    reference.standard_normal((n_q, n_k, d_k))
    check_true(mine.bit_generator.state == reference.bit_generator.state,
               f"after score_statistics(d_k={d_k}, rng, n_queries={n_q}, n_keys={n_k}) the generator is not where "
               "drawing q (n_queries, 1, d_k) and then k (n_queries, n_keys, d_k) leaves it: "
               "draw exactly those two arrays from `rng` with rng.standard_normal, nothing more")
# _reference_statistics is defined in the hidden part of test_statistics_table; each run against the grader's draws
continued = np.random.default_rng(9)  # default_rng(a generator) returns it: the second reference continues the first
runs = {"a generator seeded 7": first, "another generator seeded 7": again, "a generator seeded 8": other,
        "the first call on one generator": first_call, "the second call on that generator": second_call}
for what, generator in (("a generator seeded 7", 7), ("another generator seeded 7", 7), ("a generator seeded 8", 8),
                        ("the first call on one generator", continued), ("the second call on that generator", continued)):
    expected = _reference_statistics(8, generator, 50, 8)
    check_close(f"raw_std of score_statistics(8, {what}, n_queries=50)", runs[what]["raw_std"], expected["raw_std"],
                atol=1e-9, rtol=1e-6, hint="draw q (n_queries, 1, d_k), then k (n_queries, n_keys, d_k), from `rng` "
                "and from nothing else; raw_std is np.std of all raw scores")
### END HIDDEN TESTS

# %% [markdown]
# ## Part C · Why saturation stops learning: the softmax Jacobian (3 points)
#
# Write $p = \operatorname{softmax}(s)$ for one row of scores $s$, so $p_i = e^{s_i} / Z$ with
# $Z = \sum_j e^{s_j}$. Differentiating,
#
# $$\frac{\partial p_i}{\partial s_j} = \frac{\delta_{ij}\, e^{s_i}}{Z} - \frac{e^{s_i} e^{s_j}}{Z^2}
#   = p_i\,(\delta_{ij} - p_j), \qquad J = \operatorname{diag}(p) - p\,p^\top .$$
#
# During training the gradient with respect to the scores is $J^\top$ times the gradient with
# respect to the weights (and $J$ is symmetric). Two things to notice:
#
# * every row of $J$ sums to zero, because the weights always sum to 1 whatever the scores;
# * if $p$ is one-hot, say $p = e_m$, then $\operatorname{diag}(p) = p\,p^\top = e_m e_m^\top$
#   and $J = 0$: no gradient reaches *any* score, so the projections that produced the queries
#   and keys stop learning. Near one-hot, $J$ is nearly zero.
#
# Write `softmax_jacobian(p)` for a probability vector `p` of shape `(n,)` returning the
# `(n, n)` matrix $J$, and for a batch `p` of shape `(..., n)` returning `(..., n, n)`, one
# Jacobian per row. `np.diag` and `np.outer` only handle a single vector: build the two terms
# with broadcasting (`p[..., :, None]` is a column, `p[..., None, :]` a row).

# %% nbgrader={"grade": false, "grade_id": "softmax_jacobian", "locked": false, "schema_version": 3, "solution": true}
def softmax_jacobian(p):
    """Jacobian of softmax at weights p: diag(p) - p p^T; p (..., n) -> (..., n, n)."""
    ### BEGIN SOLUTION
    p = np.asarray(p, dtype=float)
    diagonal = p[..., :, None] * np.eye(p.shape[-1])  # (..., n, n) diag(p)
    outer = p[..., :, None] * p[..., None, :]  # (..., n, n) p p^T
    return diagonal - outer
    ### END SOLUTION


# %% [markdown]
# Check it against PyTorch's automatic differentiation: the scores $\log p$ have softmax $p$,
# so the Jacobian of `torch.softmax` there must be your matrix. Then a one-hot $p$.

# %%
p = np.array([0.2, 0.3, 0.5])
J = softmax_jacobian(p)
print(J)
autograd_J = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), torch.log(torch.from_numpy(p)))
print("matches torch autograd:", np.allclose(J, autograd_J.numpy(), atol=1e-12))
print("one-hot p = [0, 1, 0]:\n", softmax_jacobian(np.array([0.0, 1.0, 0.0])))
assert np.allclose(J, autograd_J.numpy(), atol=1e-12)
assert np.allclose(softmax_jacobian(np.array([0.0, 1.0, 0.0])), 0.0)

# %% [markdown]
# ### How much gradient gets through, as the scores grow
#
# Take 2000 rows of 8 scores with standard deviation 1 (what the scaling produces), multiply
# them by $c$, and measure the size (Frobenius norm) of $J$ at $\operatorname{softmax}(c\,s)$.
# Unscaled scores of width $d_k$ behave like $c = \sqrt{d_k}$: $d_k = 4, 64, 1024$ are
# $c = 2, 8, 32$. The median row at $c = 1$ has $\|J\| \approx 0.37$; at $c = 32$ it is
# around $10^{-6}$ (asserted below: under $10^{-4}$). The mean decays only like $1/c$,
# carried by the few rows whose two best keys happen to be nearly tied.

# %%
unit_scores = np.random.default_rng(2).standard_normal((2000, 8))  # scores with std 1
multipliers = 2.0 ** np.arange(-3, 6)  # c = 1/8 ... 32


def jacobian_norms(c):
    weights = torch.softmax(torch.from_numpy(c * unit_scores), dim=-1).numpy()  # (2000, 8)
    return np.linalg.norm(softmax_jacobian(weights), axis=(-2, -1))  # (2000,) one norm per row


norms = np.array([jacobian_norms(c) for c in multipliers])  # (9 multipliers, 2000 rows)
median_norm, mean_norm = np.median(norms, axis=1), norms.mean(axis=1)
ax = plot_curves(multipliers, {"median row": median_norm, "mean over rows": mean_norm},
                 xlabel="score multiplier c (log scale)", ylabel="Frobenius norm of the softmax Jacobian",
                 title="Saturated softmax passes no gradient", logx=True, logy=True)
for c, label in ((2, "unscaled d_k = 4"), (8, "unscaled d_k = 64"), (32, "unscaled d_k = 1024")):
    ax.axvline(c, color="gray", linestyle=":", linewidth=1)
    ax.text(c, 0.45, label, transform=ax.get_xaxis_transform(), rotation=90, fontsize=8, ha="right", va="center")
plt.show()
at_one, at_32 = median_norm[multipliers == 1][0], median_norm[multipliers == 32][0]
print(f"median |J| at c = 1: {at_one:.3f}, at c = 32: {at_32:.1e}; mean at c = 32: {mean_norm[-1]:.3f}")
assert 0.35 < at_one < 0.38 and at_32 < 1e-4 and mean_norm[-1] < 0.05

# %% nbgrader={"grade": true, "grade_id": "test_jacobian_single", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""softmax_jacobian(p) for one vector equals the Jacobian of torch.softmax computed by autograd."""
J = softmax_jacobian(np.array([0.5, 0.5]))
check_shape("softmax_jacobian([0.5, 0.5])", J, (2, 2))
check_close("softmax_jacobian([0.5, 0.5])", J, [[0.25, -0.25], [-0.25, 0.25]], atol=1e-9,
            hint="entry (i, j) is p_i * (delta_ij - p_j)",
            likely_causes={"the -p p^T term is missing (only diag(p))": [[0.5, 0.0], [0.0, 0.5]],
                           "the sign is flipped (p p^T - diag(p))": [[-0.25, 0.25], [0.25, -0.25]],
                           "the diag(p) term is missing (only -p p^T)": [[-0.25, -0.25], [-0.25, -0.25]],
                           "p^T p, a single number, is subtracted instead of the outer product p p^T":
                               [[0.0, -0.5], [-0.5, 0.0]]})
### BEGIN HIDDEN TESTS
from instructor.references.scaling import softmax_last  # torch.softmax over the last axis; the grader's side only

rng = np.random.default_rng(31)
for trial in range(5):
    n = int(rng.integers(2, 9))
    scores = torch.from_numpy(rng.normal(scale=1.5, size=n))
    p = softmax_last(scores).numpy()
    reference = torch.autograd.functional.jacobian(softmax_last, scores).numpy()  # (n, n)
    check_close(f"softmax_jacobian(p) for p of length {n}", softmax_jacobian(p), reference, atol=1e-9,
                likely_causes={"the -p p^T term is missing (only diag(p))": np.diag(p),
                               "the sign is flipped (p p^T - diag(p))": -reference,
                               "the diag(p) term is missing (only -p p^T)": -np.outer(p, p),
                               "p^T p, a single number, is subtracted instead of the outer product p p^T":
                                   np.diag(p) - p @ p,
                               "row i subtracts p_i * p_i in every column (p[..., :, None] twice) instead of "
                               "p_i * p_j": np.diag(p) - (p * p)[:, None],
                               "column j subtracts p_j * p_j in every row (p[..., None, :] twice) instead of "
                               "p_i * p_j: the outer product is a column times a row": np.diag(p) - (p * p)[None, :]},
                hint="J = diag(p) - p p^T: entry (i, j) is p_i * (delta_ij - p_j)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_jacobian_batched", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""softmax_jacobian of a batch (..., n) returns one Jacobian per row, shape (..., n, n)."""
from course.scaling_checks import check_batched  # the checks of this chapter: course/scaling_checks.py

check_batched(softmax_jacobian, np.random.default_rng(32).dirichlet(np.ones(4), size=(2, 3)))  # p of shape (2, 3, 4)
### BEGIN HIDDEN TESTS
from instructor.references.scaling import batched_agrees  # the grader's side only

batched_agrees(softmax_jacobian, np.random.default_rng(32).dirichlet(np.ones(4), size=(2, 3)))
rng = np.random.default_rng(33)
for batch in [(int(rng.integers(1, 6)),), (int(rng.integers(1, 4)), int(rng.integers(1, 4))), (2, 1, 3)]:
    batched_agrees(softmax_jacobian, rng.dirichlet(np.full(int(rng.integers(2, 7)), 0.8), size=batch))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_jacobian_saturation", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The Jacobian is symmetric, its rows sum to 0, and it vanishes when p is one-hot (saturation)."""
p = np.array([0.1, 0.6, 0.3])
J = softmax_jacobian(p)
check_shape("softmax_jacobian([0.1, 0.6, 0.3])", J, (3, 3))
check_true(np.allclose(J, J.T), "softmax_jacobian(p) is not symmetric: entry (i, j) is p_i * (delta_ij - p_j), and "
           "the outer product p p^T is a column times a row, p[..., :, None] * p[..., None, :]")
row_sums = J.sum(axis=-1)
check_true(np.allclose(row_sums, 0.0), f"rows of softmax_jacobian([0.1, 0.6, 0.3]) sum to {np.round(row_sums, 3)}, "
           "expected 0 (the weights always sum to 1, so their changes cancel): J = diag(p) minus the (n, n) "
           "outer product p p^T")
saturated = np.linalg.norm(softmax_jacobian(np.array([0.0, 0.0, 1.0, 0.0])))
check_true(saturated < 1e-12, f"for a one-hot p the Jacobian has norm {saturated:.3g}, expected 0: a saturated "
           "softmax passes no gradient, since diag(p) and p p^T are then the same matrix")
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(34)
for trial in range(4):
    n = int(rng.integers(2, 10))
    p = rng.dirichlet(np.ones(n), size=3)  # (3, n), three random distributions
    for row in p:
        sums = softmax_jacobian(row).sum(axis=-1)
        check_true(np.allclose(sums, 0.0, atol=1e-12), f"rows of softmax_jacobian(p) for a random p of length {n} "
                   "do not sum to 0: the weights always sum to 1, so J = diag(p) - p p^T has zero row sums")
    scores = rng.normal(size=n)
    scores[rng.integers(n)] += 40.0  # one key far ahead of the others
    peaked = torch.softmax(torch.from_numpy(scores), dim=-1).numpy()
    check_true(np.linalg.norm(softmax_jacobian(peaked)) < 1e-6,
               f"for a nearly one-hot p of length {n} the Jacobian is not nearly 0: with p close to a one-hot "
               "e_m, diag(p) and p p^T are both close to e_m e_m^T and must cancel")
### END HIDDEN TESTS

# %% [markdown]
# ## The argument holds at initialisation
#
# The variance argument assumes independent, zero-mean, unit-variance components: a
# statement about a freshly initialised model. Training is free to change that. A head that
# needs to pick out exactly one token (the previous one, say) can learn queries and keys that
# align strongly and produce large scores *on purpose*, and its attention becomes sharp. The
# scaling does not forbid sharp attention; it only makes sure the model does not start out
# saturated, where the gradient would be too small to learn anything.

# %% [markdown]
# ## Part D · Quiz (4 points)
#
# Answer each question with one letter, as a string, for example `Q1 = "a"`.
#
# **Q1.** The components of $q$ have variance 1 and those of $k$ variance 9, all independent with
# mean 0, and $d_k = 64$. The standard deviation of the *scaled* score $q \cdot k / \sqrt{d_k}$ is about
#
# * a) 1
# * b) 9
# * c) 24
# * d) 3
#
# **Q2.** A row of two keys has the weights $p = (0.9, 0.1)$. How much does $p_1$ move per unit
# change of its own score $s_1$, that is, what is $\partial p_1 / \partial s_1$?
#
# * a) 0.9
# * b) 0.09
# * c) 0.81
# * d) 0.1
#
# **Q3.** `Q` has the shape `(batch, T, d_k)`. A classmate scales the scores with
# `scores = Q @ K.transpose(-2, -1) / Q.shape[-2] ** 0.5`. When is this right?
#
# * a) only when T happens to equal $d_k$: `shape[-2]` counts the tokens
# * b) always: `shape[-2]` is the width of each query vector, that is $d_k$
# * c) only when the batch holds one sequence, as `shape[-2]` is the batch
# * d) always, since any positive divisor keeps each row's argmax in place
#
# **Q4.** At initialisation $q$ and $k$ have independent unit-variance components, $d_k = 256$, and a
# bug divides the scores by $d_k$ instead of $\sqrt{d_k}$. What are the scores and the weights like?
#
# * a) spread about 1, as with $\sqrt{d_k}$: either divisor normalises the scores
# * b) spread about 1/16, so each row is nearly one-hot: outputs copy one value
# * c) spread about 1/16, so each row is nearly uniform: outputs near the mean value
# * d) spread about 1/256, so the rows are uniform to many decimal places

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
# Assign one letter to each of Q1, Q2, Q3 and Q4, for example Q1 = "a".
### BEGIN SOLUTION
Q1 = "d"
Q2 = "b"
Q3 = "a"
Q4 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: the spread of a scaled score when q and k differ in spread."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "1 holds only when q and k both have unit-variance components: the division by sqrt(d_k) "
         "removes the growth with d_k, not the spread of the components themselves",
    "b": "9 is the variance of the scaled score (64 products of variance 1 x 9 add up to 576, divided "
         "by 64); the question asks for its square root",
    "c": "24 is the spread of the raw score, sqrt(64 x 9); the scaled score is divided by sqrt(64) = 8 "
         "as well"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: one entry of the softmax Jacobian."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "0.9 is p_1 itself, as if softmax were its own derivative like exp; raising s_1 also raises "
         "the denominator, which brings a factor (1 - p_1)",
    "c": "0.81 is p_1 squared; the diagonal of the Jacobian is p_i (1 - p_i), and -p_i p_j is the form "
         "of the other entries (re-read Part C)",
    "d": "0.1 is 1 - p_1 alone; the diagonal entry p_1 (1 - p_1) has the factor p_1 too"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: which axis holds d_k."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "b": "the last axis, shape[-1], is the width d_k; shape[-2] is T, the number of tokens, so this "
         "scale changes with the length of the sentence",
    "c": "negative indices count from the end: shape[-2] is the second axis from the end, T; the batch "
         "is shape[0]",
    "d": "the argmax stays, but the weights do not: a divisor too small or too large makes the rows too "
         "sharp or too flat (re-read 'What large scores do to softmax')"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: dividing by d_k instead of sqrt(d_k)."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "a": "the raw spread is sqrt(256) = 16, and dividing by d_k leaves 16 / 256; only sqrt(d_k) brings "
         "it to 1",
    "b": "small scores make a flat row, not a peaked one: the softmax of nearly equal scores gives "
         "nearly equal weights (re-read 'What large scores do to softmax')",
    "d": "1/256 is the variance of the divided scores; their spread, the standard deviation, is its "
         "square root"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · In your own words (2 points, graded by your instructor)
#
# Explain, in three or four sentences, why a wide head whose scores are *not* divided by $\sqrt{d_k}$
# learns slowly at the start of training. Use the spread of the raw scores and what the softmax
# Jacobian does when the weights are nearly one-hot.

# %% [markdown] nbgrader={"grade": true, "grade_id": "scaling_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** A raw score is a sum of $d_k$ products of independent unit-variance terms, so its standard
# deviation is $\sqrt{d_k}$: a wide head starts with widely spread scores. Softmax of widely spread
# scores is nearly one-hot (saturated). Its Jacobian $\operatorname{diag}(p) - p\,p^\top$ is then
# nearly zero, so almost no gradient reaches the scores, the queries and the keys that lost, and
# learning stalls. Dividing by $\sqrt{d_k}$ keeps the spread near 1 at every width.
#
# **Rubric (2 points, one idea each).**
# * 1 point, why a wide head starts saturated: a raw score is a sum of $d_k$ products of independent unit-variance components and the variances of those products add up, so its standard deviation is $\sqrt{d_k}$ (32 at $d_k = 1024$), and softmax of scores this spread is nearly one-hot (the top key takes 97 % of the weight on average at $d_k = 1024$). Earns it: the spread growing with the width, like $\sqrt{d_k}$ (or the variance like $d_k$), making the weights nearly one-hot. Does not: "the scores are large" with no word of why they grow with $d_k$, or "to avoid overflow" (a stable softmax already subtracts the row's maximum).
# * 1 point, why a saturated softmax learns slowly: its Jacobian $\operatorname{diag}(p) - p\,p^\top$ is zero at a one-hot $p$ and nearly zero near one, so almost no gradient reaches the scores, nor through them the queries and the keys, and learning stalls. Earns it: the Jacobian (or the slope of the softmax) nearly zero at saturated weights, so the scores, queries and keys barely move. Does not: "the weights are one-hot, so learning is slow" with nothing on the gradient, or "so that the weights sum to 1" (they do at every width).
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the large scores make the gradients explode" costs the second point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * A raw score is a sum of $d_k$ products: at initialisation its variance is $d_k$ and its
#   standard deviation $\sqrt{d_k}$.
# * Spread-out scores saturate softmax: at $d_k = 1024$ the top key takes 97 % of the weight
#   on average, against 12.5 % for uniform weights over 8 keys. Dividing by $\sqrt{d_k}$ keeps
#   the spread at 1 and the top weight near 0.35 at every width.
# * The softmax Jacobian is $\operatorname{diag}(p) - p\,p^\top$; it vanishes as $p$ becomes
#   one-hot, so a saturated softmax, like a saturated $\tanh$, passes almost no gradient.
# * The argument is about initialisation: a trained model may still make its scores large on
#   purpose. As $c \to \infty$, softmax of $c\,s$ is one-hot and attention returns the value
#   of the arg-max key.
#
# Next, chapter 03 hides keys from queries with padding and causal masks.
