# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 03 · Padding and causal masks
#
# Plain attention lets every query look at every key. Two situations call for hiding some
# keys from some queries:
#
# * **Padding.** Sentences in a batch have different lengths, so the short ones are filled
#   up with a `PAD` token until every row has the same length `T`. Those PAD positions carry
#   no meaning and no real token should read from them.
# * **The future.** A model that predicts the next token must not peek at it. When position
#   `i` is trained to predict token `i + 1`, it may read keys `j <= i` only.
#
# A **mask** says, for every (query, key) pair, whether attention is allowed. In this course
# a mask is a boolean tensor with **True = may attend** (for a padding mask: True = real
# token). That is also the convention of `F.scaled_dot_product_attention`; the last parts of
# the notebook meet a PyTorch module that reads True the other way round.
#
# By the end of this notebook you will have written, in PyTorch,
#
# * `causal_mask(T)` and `padding_mask(lengths, T)`,
# * `masked_softmax(scores, allowed)` with an explicit rule for rows that have no key left,
# * `masked_attention(q, k, v, allowed)`, checked against `F.scaled_dot_product_attention`,
# * `to_mha_masks(valid, allowed)`, which translates the masks for `nn.MultiheadAttention`,
# * `future_leak_check(block, x)`, a behavioural test that a block does not read the future,
#
# and answered a short quiz. Each exercise has a solution cell for you to fill in, a cell that
# runs your code on a small example, and graded test cells; the grader also runs hidden tests
# on random shapes and values.
#
# **Time:** about 2.5 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 and 02; PyTorch tensors and boolean indexing.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

from course import attempt, check_choice, check_close, check_dtype, check_finite, check_rows_sum_to_one, check_shape, check_true
# under_nbgrader() is True while your notebook is being graded: the long demos are skipped then
from course import under_nbgrader
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import call_keeping_arguments, draw_parameters, fresh
from course.plots import plot_attention

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Two reasons to hide a key
#
# The two masks answer different questions, and a model may need both at once.
#
# | mask | hides | needed by |
# |---|---|---|
# | padding mask | PAD keys | any model fed padded batches |
# | causal mask | keys in the future, `j > i` | a decoder that generates token by token |
#
# An **encoder** that reads a whole sentence before answering (BERT, classifying a review)
# lets every token look both ways: it needs a padding mask but no causal mask. A
# **decoder** that writes one token at a time (GPT) must be trained under the same
# restriction it will meet while generating, so its self-attention is causal. In an
# encoder-decoder translator the **cross-attention** (target queries reading the encoded
# source) never takes a causal mask: the source sentence is complete from the start, nothing
# in it is "future". It still takes a padding mask for the source's PAD tokens.
#
# A note on shapes. Scores are `(..., T_q, T_k)`: one row per query, one column per key. A
# causal mask is `(T, T)`; a padding mask is `(B, T)`, one row per sequence, and it masks
# **keys**, so before combining it with scores it becomes `(B, 1, T)` (or `(B, 1, 1, T)` with
# a head axis) and broadcasts over the queries.

# %% [markdown]
# ### Predict, then run (1 point)
#
# A causal mask over $T = 10$ tokens allows some of the $10 \times 10 = 100$ (query, key) pairs.
# Predict the **share of the pairs it allows**, as a number between 0 and 1, and assign it to
# `PREDICTED_ALLOWED` before you run the cell that counts them. A prediction within 5 % counts.

# %% nbgrader={"grade": false, "grade_id": "predict_allowed", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_ALLOWED = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_ALLOWED = (10 * 11 / 2) / 100  # query i reads keys 0..i: 1 + 2 + ... + 10 of 100
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_allowed", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_ALLOWED: the share of (query, key) pairs a causal mask allows at T = 10."""
from course import check_number

prediction = check_number("PREDICTED_ALLOWED", PREDICTED_ALLOWED)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_ALLOWED", PREDICTED_ALLOWED, 0.55, rel=0.05, known=(
    (0.45, "that counts only the keys strictly before each query; query i may also read its own key, j <= i, "
           "so the diagonal counts"),
    (0.5, "half is what the mask hides and allows only if the diagonal is split between them; query i reads "
          "every key j <= i, its own included"),
    (0.1, "that is the diagonal alone, each query reading only itself; query i reads every earlier key too"),
),
                              hint="count the keys query i may read (j <= i) for i = 0, ..., 9, add them up and divide by "
                      "the 100 pairs")
### END HIDDEN TESTS

# %%
lower_triangle = torch.tril(torch.ones(10, 10, dtype=torch.bool))  # (T, T), True = may attend
print(f"share of the 100 pairs a causal mask allows at T = 10: {lower_triangle.float().mean().item():.3f}")

# %% [markdown]
# The share tends to one half as $T$ grows, and it is always more than half: the diagonal, each
# token reading itself, is always allowed.

# %% [markdown]
# ## Part A · The two masks (4 points)
#
# **Causal mask.** Query `i` may attend key `j` exactly when `j <= i`: the lower triangle of a
# `T x T` matrix, **diagonal included** (a position always sees itself). Row 0 has one True,
# the last row is all True.
#
# **Padding mask.** Given the real length of each sequence, position `t` of sequence `b` is a
# real token when `t < lengths[b]`; PAD tokens sit at the end. The result is `(B, T)`.
#
# Write both. Return `torch.bool` tensors. `lengths` may be a 1-D integer tensor or a Python
# list (`torch.as_tensor` turns either into a tensor). Hint: comparing a `(T,)` row of
# positions with a `(B, 1)` column of lengths broadcasts to `(B, T)`.

# %% nbgrader={"grade": false, "grade_id": "causal_mask", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(T):
    """(T, T) bool mask: entry [i, j] is True when query i may attend key j, i.e. j <= i."""
    ### BEGIN SOLUTION
    return torch.ones(T, T, dtype=torch.bool).tril()
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "padding_mask", "locked": false, "schema_version": 3, "solution": true}
def padding_mask(lengths, T):
    """(B, T) bool mask: entry [b, t] is True when position t of sequence b is a real token."""
    ### BEGIN SOLUTION
    lengths = torch.as_tensor(lengths)
    positions = torch.arange(T, device=lengths.device)  # (T,)
    return positions < lengths[:, None]  # (B, T)
    ### END SOLUTION


# %% [markdown]
# ### Check it
#
# Two classic one-liners build the same causal mask: keep the lower triangle of a matrix of
# ones, or block the strict upper triangle and invert. Both should equal yours for every `T`.

# %%
print(causal_mask(4).int())
print(padding_mask([4, 2], 4).int())
for T in range(1, 9):
    lower = torch.tril(torch.ones(T, T)).bool()
    not_upper = ~torch.triu(torch.ones(T, T), diagonal=1).bool()
    assert torch.equal(lower, not_upper) and torch.equal(causal_mask(T), lower)
print("tril and ~triu(diagonal=1) agree with causal_mask(T) for T = 1 .. 8")

# %% [markdown]
# Both masks can apply at once. For a batch, the mask that attention needs is
# `valid[:, None, :] & causal_mask(T)` of shape `(B, T, T)`: query `i` may read key `j` when
# `j <= i` **and** key `j` is a real token. Here is one sentence of 4 real tokens padded to
# `T = 6`. Read a row as "what this query may see".

# %%
def show_mask(mask, title, ax):
    """Draw a (T_q, T_k) boolean mask: dark = may attend."""
    ax.imshow(mask.int(), cmap="Blues", vmin=0, vmax=1.3)
    ax.set_title(title)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_xticks(range(mask.shape[1]))
    ax.set_yticks(range(mask.shape[0]))


T_demo = 6
causal_demo = causal_mask(T_demo)  # (T, T)
valid_demo = padding_mask([4], T_demo)  # (1, T): 4 real tokens, 2 PAD
combined_demo = valid_demo[:, None, :] & causal_demo  # (1, T, T)
print(f"allowed (query, key) pairs out of {T_demo * T_demo}: causal {int(causal_demo.sum())}, "
      f"padding {int(valid_demo.sum()) * T_demo}, both {int(combined_demo.sum())}")
if not under_nbgrader():
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    show_mask(causal_demo, "causal: j <= i", axes[0])
    show_mask(valid_demo.expand(T_demo, T_demo), "padding: keys 4, 5 are PAD", axes[1])
    show_mask(combined_demo[0], "both: j <= i and key is real", axes[2])
    fig.tight_layout()
    plt.show()

# %% [markdown]
# Notice that the rows of the PAD *queries* (4 and 5) still have allowed keys: a key padding
# mask drops keys, not queries. We come back to this in Part D.

# %% nbgrader={"grade": true, "grade_id": "test_causal_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""causal_mask(T) is a (T, T) bool tensor, True where key j <= query i (diagonal included)."""
mask = causal_mask(4)
check_true(isinstance(mask, torch.Tensor), f"causal_mask(4) returned a {type(mask).__name__}, expected a torch.Tensor")
check_shape("causal_mask(4)", mask, (4, 4))
check_dtype("causal_mask(4)", mask, torch.bool,
            hint="masks are boolean in this course: build it with dtype=torch.bool or finish with .bool()")
check_true(not (bool(mask[0, 3]) and not bool(mask[3, 0]) and bool(mask.diagonal().all())),
           "causal_mask(4) is the transpose of the rule: True where key j >= query i. Rows are queries and columns "
           "keys, so keep j <= i, the lower triangle (tril)")
check_true(not (bool(mask[0, 3]) and not bool(mask[3, 0])),
           "causal_mask(4) is True above the diagonal, on the future keys: that is the 'True = blocked' convention; "
           "in this course True = may attend, so query i sees key j when j <= i")
check_true(bool(mask.diagonal().all()),
           "causal_mask(4) blocks (part of) the diagonal: every position must see itself (j <= i includes j = i)")
check_true(not bool(mask.diagonal(1).any()),
           "causal_mask(4) lets position i see key i + 1, one step into its future: only j <= i is allowed")
### BEGIN HIDDEN TESTS
for T in (1, 2, 3, 7, 12, 5):
    mine = causal_mask(T)
    check_shape(f"causal_mask({T})", mine, (T, T))
    check_dtype(f"causal_mask({T})", mine, torch.bool)
    rule = torch.tensor([[key <= query for key in range(T)] for query in range(T)])
    wrong = int((mine != rule).sum())
    check_true(wrong == 0, f"causal_mask({T}) breaks the rule 'True exactly when j <= i' at {wrong} of {T * T} "
                           f"entries: build it from T rather than from a fixed example")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_padding_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""padding_mask(lengths, T) is a (B, T) bool tensor, True at the first lengths[b] positions of row b."""
mask = padding_mask(torch.tensor([3, 1]), 4)
check_true(isinstance(mask, torch.Tensor),
           f"padding_mask returned a {type(mask).__name__}, expected a torch.Tensor")
check_shape("padding_mask([3, 1], 4)", mask, (2, 4),
            hint="one row per sequence, one column per position: T columns, even when every sequence is shorter")
check_dtype("padding_mask([3, 1], 4)", mask, torch.bool,
            hint="masks are boolean in this course: compare positions with lengths, or finish with .bool()")
real_counts = mask.sum(-1).tolist()
check_true(real_counts != [1, 3], "padding_mask([3, 1], 4) is True at the PAD positions: in this course True marks "
                                  "a real token (may attend) and False the padding")
check_true(real_counts == [3, 1], f"padding_mask([3, 1], 4) marks {real_counts} real tokens per row, but a sequence "
                                  f"of length L has exactly L real tokens, at positions 0 .. L-1 (off by one?)")
check_true(bool(mask[:, 0].all()), "padding_mask puts the real tokens first: position 0 is real in every sequence")
from_list = attempt("padding_mask([2, 0], 3) on a Python list", padding_mask, [2, 0], 3,
                    hint="convert lengths with torch.as_tensor first")
check_shape("padding_mask([2, 0], 3)", from_list, (2, 3))
check_true(not bool(from_list[1].any()), "a sequence of length 0 is all padding: its row must be all False")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(31)
for trial in range(6):
    B, T = int(torch.randint(1, 6, (1,), generator=g)), int(torch.randint(1, 10, (1,), generator=g))
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    mine = padding_mask(lengths if trial % 2 else lengths.tolist(), T)
    check_shape(f"padding_mask(lengths of {B} sequences, T={T})", mine, (B, T))
    check_dtype(f"padding_mask(lengths of {B} sequences, T={T})", mine, torch.bool)
    rule = torch.tensor([[position < int(n) for position in range(T)] for n in lengths]).reshape(B, T)
    wrong = int((mine != rule).sum())
    check_true(wrong == 0, f"padding_mask(lengths of {B} sequences, T={T}) breaks the rule 'True exactly when "
                           f"position < length' at {wrong} of {B * T} entries")
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · Softmax over the allowed keys only (3 points)
#
# A forbidden key must get weight **exactly 0**, and the allowed keys must share the whole
# weight between them. Both happen at once if the forbidden scores become $-\infty$
# **before** softmax: $e^{-\infty} = 0$, so those keys drop out of the numerator and of the
# normalising sum.
#
# Two tempting shortcuts are wrong:
#
# * **Masking after softmax** (zeroing the weights of forbidden keys) leaves rows that sum to
#   less than 1: the forbidden keys already took their share of the normaliser.
# * **Multiplying the scores by the mask** sets a forbidden score to 0, and $e^0 = 1$ is not
#   0: the forbidden key still gets weight.
#
# Here is the first shortcut on the example we will reuse: scores `[1, 2, 3]` where the
# third key is PAD.

# %%
example_scores = torch.tensor([1.0, 2.0, 3.0])
example_allowed = torch.tensor([True, True, False])  # the third key is PAD
masked_after = torch.softmax(example_scores, dim=-1) * example_allowed
print("mask after softmax:", masked_after, "sum", round(masked_after.sum().item(), 3))

# %% [markdown]
# The row sums to 0.335: two thirds of the attention went to a PAD token and then vanished.
# With the mask applied first, softmax runs over `[1, 2]` alone and gives
# $(1/(1+e),\ e/(1+e),\ 0) \approx (0.269, 0.731, 0)$.
#
# **Rows with no allowed key.** If every key of a row is forbidden (an empty sentence, or the
# PAD query of a sequence of length 0), every score is $-\infty$ and softmax computes
# $0 / 0$:

# %%
print("softmax of a fully masked row:", torch.softmax(torch.full((3,), float("-inf")), dim=-1))

# %% [markdown]
# There is no valid distribution for such a row, so a rule has to be chosen explicitly
# rather than left to chance. The rule in this course: **a fully masked row gets all-zero
# weights** (so its attention output is the zero vector), never NaN. A NaN would spread
# through every later layer and into the loss. Filling with a large negative number such as
# `-1e9` instead of $-\infty$ does not solve it: the row becomes *uniform* over forbidden keys.
#
# Write `masked_softmax(scores, allowed)`: softmax over the last axis using only the allowed
# keys. `allowed` is a bool tensor that broadcasts against `scores` (for example `(T_q, T_k)`
# against `(B, H, T_q, T_k)`). `Tensor.masked_fill(mask, value)` is useful, and remember that
# in this course True means *allowed*.

# %% nbgrader={"grade": false, "grade_id": "masked_softmax", "locked": false, "schema_version": 3, "solution": true}
def masked_softmax(scores, allowed):
    """Softmax over the last axis restricted to allowed keys; rows with no allowed key are all 0."""
    ### BEGIN SOLUTION
    blocked = ~allowed
    weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    return weights.masked_fill(blocked, 0.0)  # a fully blocked row: NaN -> 0
    ### END SOLUTION


# %% [markdown]
# ### Check it: the worked example
#
# Scores `[1, 2, 3]` with the third key PAD must give `(0.269, 0.731, 0)`, and a fully
# masked row must give zeros.

# %%
example_weights = masked_softmax(example_scores, example_allowed)
print("masked softmax:", example_weights)
assert torch.allclose(example_weights, torch.tensor([0.269, 0.731, 0.0]), atol=5e-4)
fully_masked = masked_softmax(torch.randn(2, 3), torch.tensor([[True, False, True], [False, False, False]]))
print("row 1 has no allowed key:", fully_masked)
assert torch.equal(fully_masked[1], torch.zeros(3))

# %% nbgrader={"grade": true, "grade_id": "test_masked_softmax_example", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The worked example: scores [1, 2, 3] with the third key PAD give (0.269, 0.731, 0)."""
### BEGIN HIDDEN TESTS
scores = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [-0.5, 4.0, 1.5]])
allowed = torch.tensor([[True, True, False], [False, True, True], [True, False, True]])
# scores @ (sqrt(3) I)^T / sqrt(3) = scores: the fused kernel's weights are the masked softmax of the scores
expected = F.scaled_dot_product_attention(scores, math.sqrt(3) * torch.eye(3), torch.eye(3), attn_mask=allowed)
check_close("masked_softmax of three rows of scores", masked_softmax(scores, allowed), expected, atol=1e-5,
            likely_causes={
                "the mask is applied after softmax without renormalising": scores.softmax(-1) * allowed,
                "forbidden scores are multiplied by 0 instead of set to -inf": (scores * allowed).softmax(-1),
                "True is read as 'blocked' (the inverted convention; here True = may attend)":
                    torch.where(allowed, -math.inf, scores).softmax(-1),
            }, hint="set the forbidden scores to -inf, then softmax over the last axis")
### END HIDDEN TESTS
weights = masked_softmax(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([True, True, False]))
check_shape("masked_softmax([1, 2, 3], [True, True, False])", weights, (3,))
check_close("masked_softmax([1, 2, 3], [True, True, False])", weights, [0.268941, 0.731059, 0.0], atol=1e-5,
            hint="set the forbidden scores to -inf, then softmax over the last axis")

# %% nbgrader={"grade": true, "grade_id": "test_masked_softmax_rows", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Blocked keys get weight exactly 0, each row's allowed weights sum to 1 (any broadcast mask), the scores stay."""
g = torch.Generator().manual_seed(21)
scores = torch.randn(2, 4, 5, generator=g)
allowed = torch.rand(2, 4, 5, generator=g) > 0.4
allowed[..., 0] = True  # every row keeps at least one key
scores_before = scores.clone()
weights, (scores_after, _) = attempt("masked_softmax(scores (2, 4, 5), allowed (2, 4, 5))", call_keeping_arguments,
                                     masked_softmax, scores, allowed,
                                     hint="softmax over the last axis with the blocked scores set to -inf first")
check_shape("masked_softmax(scores (2, 4, 5), allowed (2, 4, 5))", weights, (2, 4, 5))
check_true(torch.equal(scores_after, scores_before), "masked_softmax changed the scores it was given (masked_fill_, "
           "with the underscore, works in place): use scores.masked_fill(...), which returns a new tensor and leaves "
           "the caller's scores as they were")
leaked = float(weights[~allowed].abs().max())
check_true(leaked == 0, f"blocked keys get weights up to {leaked:.3g}; they must be exactly 0: set their scores to "
                        f"-inf before softmax (True = may attend)")
check_finite("masked_softmax rows", weights, hint="a blocked score must become -inf, whose exp is 0: +inf (or NaN) "
             "gives exp = inf, and inf / inf is NaN")
check_rows_sum_to_one("masked_softmax rows", weights,
                      hint="the allowed weights must renormalise: mask the scores before softmax, "
                           "not the weights after")
### BEGIN HIDDEN TESTS
for trial, (B, H, Tq, Tk, d) in enumerate([(2, 3, 4, 6, 5), (1, 2, 7, 3, 4), (3, 1, 5, 5, 8), (2, 2, 1, 9, 3)]):
    q, k = torch.randn(B, H, Tq, d, generator=g), torch.randn(B, H, Tk, d, generator=g)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if trial % 2:
        allowed = torch.rand(Tq, Tk, generator=g) > 0.5  # (Tq, Tk): the same for every batch and head
        allowed[:, 0] = True
    else:
        lengths = torch.randint(1, Tk + 1, (B,), generator=g)
        allowed = (torch.arange(Tk) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)
    weights = masked_softmax(scores, allowed)
    name = f"masked_softmax(scores {tuple(scores.shape)}, allowed {tuple(allowed.shape)})"
    check_shape(name, weights, scores.shape, hint="the mask broadcasts against the scores; keep the scores' shape")
    reference = F.scaled_dot_product_attention(q, k, torch.eye(Tk).expand(B, H, Tk, Tk), attn_mask=allowed)
    check_close(name, weights, reference, atol=1e-5, likely_causes={
        "the mask is applied after softmax without renormalising": scores.softmax(-1) * allowed,
        "forbidden scores are multiplied by 0 instead of set to -inf": (scores * allowed).softmax(-1),
    }, hint="softmax over the last axis, with forbidden scores set to -inf first")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_masked_softmax_fully_masked", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""A row whose keys are all blocked gives all-zero weights, never NaN; other rows are untouched."""
from course.masks_checks import BLOCKED_ROW_HINT
scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
allowed = torch.tensor([[True, False, True], [False, False, False]])
weights = attempt("masked_softmax with a fully blocked row", masked_softmax, scores, allowed, hint=BLOCKED_ROW_HINT)
check_shape("masked_softmax with a fully blocked row", weights, (2, 3))
check_finite("masked_softmax with a fully blocked row", weights,
             hint="softmax of a row of -inf is 0/0 = NaN; the course's rule is all-zero weights for such a row "
                  "(zero the blocked entries after softmax)")
total = float(weights[1].abs().sum())
check_true(total == 0, f"the fully blocked row has weights summing to {total:.3g}; the course's rule is all zeros "
                       f"for a row with no allowed key (note: filling blocked scores with a finite number such as "
                       f"-1e9 instead of -inf leaves a uniform row)")
check_rows_sum_to_one("masked_softmax row with allowed keys", weights[:1],
                      hint="mask the scores before softmax so that the allowed weights renormalise")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(22)
for shape in [(3, 4, 5), (2, 2, 6, 3), (7, 2)]:
    scores = 3 * torch.randn(shape, generator=g)
    allowed = torch.rand(shape, generator=g) > 0.5
    allowed[..., :2, :] = False  # the first two rows have no allowed key
    weights = attempt(f"masked_softmax(scores {shape}) with fully blocked rows", masked_softmax, scores, allowed,
                      hint=BLOCKED_ROW_HINT)
    check_finite(f"masked_softmax(scores {shape}) with fully blocked rows", weights,
                 hint="a row with no allowed key must give all-zero weights, not NaN")
    n_keys = shape[-1]
    # scores @ (sqrt(n) I)^T / sqrt(n) = scores, so the fused kernel returns the masked weights themselves
    reference = F.scaled_dot_product_attention(scores, math.sqrt(n_keys) * torch.eye(n_keys), torch.eye(n_keys),
                                               attn_mask=allowed)
    reference = torch.where(allowed.any(-1, keepdim=True), reference, torch.zeros(()))
    check_close(f"masked_softmax(scores {shape}) with fully blocked rows", weights, reference, atol=1e-5,
                hint="fully blocked rows must be all zeros; the other rows softmax over their allowed keys")
### END HIDDEN TESTS

# %% [markdown]
# ## Part C · Masked attention (3 points)
#
# With `masked_softmax` in hand, masked attention is chapter 01's formula with one extra
# step:
#
# $$\operatorname{MaskedAttention}(Q, K, V) =
#   \operatorname{masked\_softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}},\ \text{allowed}\right) V .$$
#
# Write `masked_attention(q, k, v, allowed)` for tensors `q (..., T_q, d_k)`,
# `k (..., T_k, d_k)`, `v (..., T_k, d_v)` and a bool mask that broadcasts to
# `(..., T_q, T_k)`; return `(output, weights)`. Wherever a row has at least one allowed key it
# must agree with `F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)`, PyTorch's fused
# kernel, which reads a bool mask with the same convention as ours (True = may attend).

# %% nbgrader={"grade": false, "grade_id": "masked_attention", "locked": false, "schema_version": 3, "solution": true}
def masked_attention(q, k, v, allowed):
    """Scaled dot-product attention restricted by `allowed`; returns (output, weights)."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    weights = masked_softmax(scores, allowed)  # (..., T_q, T_k)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)
    ### END SOLUTION


# %% [markdown]
# ### Check it: padding and causal masks together, against the fused kernel
#
# Two sequences of lengths 5 and 3 padded to `T = 5`, two heads, the combined mask of
# Part A with a head axis: `(B, 1, T, T)`.

# %%
torch.manual_seed(0)
q_demo, k_demo, v_demo = torch.randn(3, 2, 2, 5, 4).unbind(0)  # each (B=2, H=2, T=5, d=4)
valid_pair = padding_mask([5, 3], 5)  # (B, T)
allowed_pair = valid_pair[:, None, None, :] & causal_mask(5)  # (B, 1, T, T)
output_demo, weights_demo = masked_attention(q_demo, k_demo, v_demo, allowed_pair)
fused = F.scaled_dot_product_attention(q_demo, k_demo, v_demo, attn_mask=allowed_pair)
print("output", tuple(output_demo.shape), "weights", tuple(weights_demo.shape))
print("largest difference from F.scaled_dot_product_attention:", (output_demo - fused).abs().max().item())
assert torch.allclose(output_demo, fused, atol=1e-6)

# %% [markdown]
# The weights of the shorter sequence (one head): zeros above the diagonal (the future) and
# in the PAD columns 3 and 4, every row summing to 1.

# %%
if not under_nbgrader():
    plot_attention(weights_demo[1, 0], queries=["t0", "t1", "t2", "PAD", "PAD"],
                   keys=["t0", "t1", "t2", "PAD", "PAD"], title="causal + padding, length 3 of 5")
    plt.show()

# %% [markdown]
# ### Check it: PAD keys change nothing
#
# With a correct mask, appending PAD keys (whatever vectors they hold) cannot change what
# the real tokens compute: their scores are $-\infty$, their weights exactly 0. Take a
# sentence of 3 tokens, then append 1, 5 and 20 PAD positions filled with large random
# vectors.

# %%
torch.manual_seed(1)
q_real, k_real, v_real = torch.randn(3, 1, 3, 8).unbind(0)  # (B=1, T=3, d=8)
alone, _ = masked_attention(q_real, k_real, v_real, causal_mask(3))
for n_pad in (1, 5, 20):
    k_padded = torch.cat([k_real, 10 * torch.randn(1, n_pad, 8)], dim=1)  # (1, 3 + n_pad, 8)
    v_padded = torch.cat([v_real, 10 * torch.randn(1, n_pad, 8)], dim=1)
    allowed = causal_mask(3 + n_pad)[:3] & padding_mask([3], 3 + n_pad)[:, None, :]  # (1, 3, 3 + n_pad)
    padded, _ = masked_attention(q_real, k_padded, v_padded, allowed)
    change = (padded - alone).abs().max().item()
    print(f"{n_pad:2d} PAD keys: largest change in the real tokens' outputs {change:.1e}")
    assert change < 1e-6

# %% nbgrader={"grade": true, "grade_id": "test_masked_attention_sdpa", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""masked_attention agrees with F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)."""
g = torch.Generator().manual_seed(41)
AXES_HINT = ("q and k may carry batch and head axes, (B, H, T, d): take the scores with k's last two axes "
             "swapped, k.transpose(-2, -1), which is right for any number of leading axes")
### BEGIN HIDDEN TESTS
for trial in range(6):
    B, H, Tq, Tk, d, dv = (int(n) for n in torch.randint(1, 7, (6,), generator=g))
    q, k, v = (torch.randn(B, H, n, w, generator=g) for n, w in ((Tq, d), (Tk, d), (Tk, dv)))
    lengths = torch.randint(1, Tk + 1, (B,), generator=g)
    valid = (torch.arange(Tk) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)
    pairs = torch.rand(Tq, Tk, generator=g) > 0.4
    pairs[:, 0] = True  # key 0 is real and allowed: no row is empty
    allowed = [valid, pairs, valid & pairs][trial % 3]
    output, weights = attempt(f"masked_attention(q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)})",
                              masked_attention, q, k, v, allowed, hint=AXES_HINT)
    name = f"masked_attention with B={B}, H={H}, T_q={Tq}, T_k={Tk}, d_k={d}, mask {tuple(allowed.shape)}"
    check_shape(f"weights of {name}", weights, (B, H, Tq, Tk))
    check_shape(f"output of {name}", output, (B, H, Tq, dv), hint="the output mixes values: its last axis is d_v")
    check_finite(f"weights of {name}", weights, hint="every row keeps key 0, so no weight should be NaN: either "
                 "your masked_softmax gives NaN (Part B's tests say whether it does: fix it first) or a row of scores "
                 "is blocked entirely here (is the mask inverted?)")
    raw = q @ k.transpose(-2, -1)
    true_weights = F.scaled_dot_product_attention(q, k, torch.eye(Tk).expand(B, H, Tk, Tk), attn_mask=allowed)
    check_close(f"weights of {name}", weights, true_weights, atol=1e-5, likely_causes={
        "the scores are not divided by sqrt(d_k)": torch.where(allowed, raw, -math.inf).softmax(-1),
        "the scores are divided by d_k instead of sqrt(d_k)": torch.where(allowed, raw / d, -math.inf).softmax(-1),
        "the scores are divided by the square root of the number of keys T_k (k.shape[-2]) instead of sqrt(d_k)":
            torch.where(allowed, raw / math.sqrt(Tk), -math.inf).softmax(-1),
        "the scores are divided by sqrt(d_v), the width of v, instead of sqrt(d_k), the width of q and k":
            torch.where(allowed, raw / math.sqrt(dv), -math.inf).softmax(-1),
        "the mask is applied after softmax without renormalising": (raw / math.sqrt(d)).softmax(-1) * allowed,
        "forbidden scores are multiplied by 0 instead of set to -inf": (raw / math.sqrt(d) * allowed).softmax(-1),
        "the second output is the scores q k^T / sqrt(d_k), before masked_softmax: return the weights":
            raw / math.sqrt(d),
    }, hint="scores q k^T / sqrt(d_k), then masked_softmax over the keys")
    check_close(f"output of {name}", output, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
                atol=1e-5, hint="output = weights @ v: the output mixes values")
### END HIDDEN TESTS
q, k, v = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 6, generator=g)
allowed = torch.tensor([[True, True, True, False, False]] * 3)  # (T_q=3, T_k=5): keys 3 and 4 blocked
result = attempt("masked_attention(q (2, 3, 4), k (2, 5, 4), v (2, 5, 6))", masked_attention, q, k, v, allowed,
                 hint=AXES_HINT)
check_true(isinstance(result, tuple) and len(result) == 2, "masked_attention must return a pair (output, weights)")
output, weights = result
check_shape("weights for q (2, 3, 4), k (2, 5, 4)", weights, (2, 3, 5))
check_shape("output for v (2, 5, 6)", output, (2, 3, 6), hint="the output mixes values: its last axis is d_v")
check_close("masked_attention output", output, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
            atol=1e-5, hint="scores q k^T / sqrt(d_k), masked softmax, then weights @ v")

# %% nbgrader={"grade": true, "grade_id": "test_masked_attention_pad_invariance", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Appending masked PAD keys leaves the real tokens' outputs unchanged."""
from course.masks_checks import check_pad_invariance  # the checks of this chapter: course/masks_checks.py

g = torch.Generator().manual_seed(42)
q, k, v = torch.randn(1, 3, 4, generator=g), torch.randn(1, 3, 4, generator=g), torch.randn(1, 3, 4, generator=g)
for n_pad in (1, 4):
    check_pad_invariance(masked_attention, q, k, v, torch.ones(3, 3, dtype=torch.bool), n_pad, g, scale=5)
### BEGIN HIDDEN TESTS
for trial in range(4):
    T, n_pad, d = (int(n) for n in torch.randint(1, 8, (3,), generator=g))
    q, k, v = (torch.randn(2, T, d, generator=g) for _ in range(3))
    rule = torch.tensor([[key <= query for key in range(T)] for query in range(T)])
    check_pad_invariance(masked_attention, q, k, v, rule, n_pad, g, scale=20)
### END HIDDEN TESTS

# %% [markdown]
# ## Part D · Speaking `nn.MultiheadAttention`'s language (2 points)
#
# PyTorch's functions do not agree on what True means in a mask:
#
# | API | argument | True means |
# |---|---|---|
# | `F.scaled_dot_product_attention` | `attn_mask` (bool) | the pair **may attend** |
# | `nn.MultiheadAttention` | `key_padding_mask` (B, T_k) | **ignore** this key (it is PAD) |
# | `nn.MultiheadAttention` | `attn_mask` (T_q, T_k) | this pair is **forbidden** |
#
# That is why a causal mask for `nn.MultiheadAttention` is usually written
# `torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)`: True on the future keys.
# Passing a mask to a parameter with a similar name, without reading the documentation of
# the function you are calling, silently computes something else (or NaN).
#
# Write `to_mha_masks(valid, allowed)`: given the course's `valid` (B, T_k), True at real
# tokens, and `allowed` (T_q, T_k), True where attention is allowed, return
# `(key_padding_mask, attn_mask)` for `nn.MultiheadAttention`, as bool tensors of the same
# shapes.

# %% nbgrader={"grade": false, "grade_id": "to_mha_masks", "locked": false, "schema_version": 3, "solution": true}
def to_mha_masks(valid, allowed):
    """Translate (valid, allowed), True = real / may attend, into nn.MultiheadAttention's masks."""
    ### BEGIN SOLUTION
    key_padding_mask = ~valid  # (B, T_k): True = ignore this key
    attn_mask = ~allowed  # (T_q, T_k): True = forbidden pair
    return key_padding_mask, attn_mask
    ### END SOLUTION


# %% [markdown]
# ### Check it: the same attention through two doors
#
# Run `nn.MultiheadAttention` with your translated masks, then recompute it by hand: its
# input projection, `masked_attention` per head with the course's masks, its output
# projection. The two must agree.

# %%
torch.manual_seed(2)
B, T, D, H = 2, 5, 8, 2
mha = nn.MultiheadAttention(D, H, batch_first=True).eval()
x_mha = torch.randn(B, T, D)
valid_mha, allowed_mha = padding_mask([5, 3], T), causal_mask(T)
key_padding_mask, attn_mask = to_mha_masks(valid_mha, allowed_mha)
with torch.no_grad():
    out_mha, _ = mha(x_mha, x_mha, x_mha, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
    q_mha, k_mha, v_mha = F.linear(x_mha, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)  # each (B, T, D)
    heads = [t.view(B, T, H, D // H).transpose(1, 2) for t in (q_mha, k_mha, v_mha)]  # each (B, H, T, d_head)
    by_hand, _ = masked_attention(*heads, valid_mha[:, None, None, :] & allowed_mha)  # (B, H, T, d_head)
    by_hand = mha.out_proj(by_hand.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
print("largest difference:", (out_mha - by_hand).abs().max().item())
assert torch.allclose(out_mha, by_hand, atol=1e-5)

# %% [markdown]
# ### PAD queries still produce vectors
#
# Look at the second sequence (length 3): positions 3 and 4 are PAD, yet their outputs are
# ordinary-looking vectors. A key padding mask removes PAD *keys* from every row; it does
# nothing to the PAD *queries*. So whatever comes next must drop them again with the valid
# mask: a sentence vector is a mean over the **real** positions only, and a token loss
# averages over real tokens only.

# %%
print("output norms of sequence 1, per position:", out_mha[1].norm(dim=-1))
keep = valid_mha[:, :, None].float()  # (B, T, 1)
masked_mean = (out_mha * keep).sum(1) / keep.sum(1)  # (B, D): mean over real tokens
plain_mean = out_mha.mean(1)  # (B, D): PAD positions leak in
print("masked mean vs plain mean, sequence 1: differ by", (masked_mean[1] - plain_mean[1]).norm().item())
assert torch.isfinite(out_mha).all() and out_mha[1, 3:].norm() > 0

# %% [markdown]
# ### A row with no key left, inside `nn.MultiheadAttention`
#
# What comes out of a row whose keys are all forbidden depends on which code path the module
# takes, so no rule can be relied on. Measured with PyTorch 2.13 on a CPU: with the default
# `need_weights=True` the weights and the output of that row are NaN; with `need_weights=False`
# the module calls `F.scaled_dot_product_attention`, which gives the row zero attention (its
# output is just the bias of `out_proj`), *except* on the inference fast path (eval mode with
# autograd off), which gives NaN again. Other versions may differ. This is why the course's
# `masked_softmax` states its own rule, and why real models avoid empty rows in the first place.
# The cell hands the course's `causal_mask` (True = may attend) to `attn_mask` unchanged, so
# the last query has no key left:

# %%
wrong_way = causal_mask(T)  # True = may attend: nn.MultiheadAttention reads True as "forbidden"
mha.train()  # training mode: no inference fast path
has_nan = {}
for need_weights in (True, False):
    out_wrong, _ = mha(x_mha, x_mha, x_mha, attn_mask=wrong_way, need_weights=need_weights)
    has_nan[need_weights] = (bool(out_wrong[:, -1].isnan().any()), bool(out_wrong[:, :-1].isnan().any()))
    print(f"need_weights={need_weights!s:5}: last query's output has NaN: {has_nan[need_weights][0]}, "
          f"earlier queries have NaN: {has_nan[need_weights][1]}")
mha.eval()  # back to the inference mode of the cells above
assert has_nan == {True: (True, False), False: (False, False)}

# %% nbgrader={"grade": true, "grade_id": "test_to_mha_masks", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""to_mha_masks returns (key_padding_mask, attn_mask) in nn.MultiheadAttention's convention (True = blocked)."""
valid = torch.tensor([[True, True, False], [True, True, True]])
allowed = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
result = to_mha_masks(valid, allowed)
check_true(isinstance(result, tuple) and len(result) == 2,
           "to_mha_masks must return a pair (key_padding_mask, attn_mask)")
key_padding_mask, attn_mask = result
check_true(not (getattr(key_padding_mask, "shape", None) == allowed.shape and getattr(attn_mask, "shape", None) == valid.shape),
           "to_mha_masks returns its two masks in the other order: return (key_padding_mask, attn_mask), the "
           "padding mask (B, T_k) first, as nn.MultiheadAttention's arguments are named")
for name, mask, course_mask in (("key_padding_mask", key_padding_mask, valid), ("attn_mask", attn_mask, allowed)):
    check_shape(name, mask, course_mask.shape)
    check_dtype(name, mask, torch.bool,
                hint="return bool masks: nn.MultiheadAttention *adds* a float mask to the scores instead of blocking")
check_true(not torch.equal(key_padding_mask, valid),
           "key_padding_mask is True at the real tokens: for nn.MultiheadAttention True means 'ignore this key', "
           "so the course's valid mask must be inverted")
check_true(not torch.equal(attn_mask, allowed),
           "attn_mask is True on the allowed pairs: for nn.MultiheadAttention True means 'this query may not attend "
           "this key', so the course's allowed mask must be inverted")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(51)
for trial in range(4):
    B, T = int(torch.randint(1, 5, (1,), generator=g)), int(torch.randint(2, 8, (1,), generator=g))
    D, H = 8, 2
    torch.manual_seed(trial)
    layer = nn.MultiheadAttention(D, H, batch_first=True).eval()
    x = torch.randn(B, T, D, generator=g)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    valid = torch.arange(T) < lengths[:, None]  # (B, T), key 0 always real
    allowed = torch.rand(T, T, generator=g) > 0.5
    allowed[:, 0] = True  # every row keeps key 0
    key_padding_mask, attn_mask = to_mha_masks(valid, allowed)
    with torch.no_grad():
        output, weights = layer(x, x, x, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                                average_attn_weights=False)
        heads = [t.view(B, T, H, D // H).transpose(1, 2)
                 for t in F.linear(x, layer.in_proj_weight, layer.in_proj_bias).chunk(3, dim=-1)]
        joint = valid[:, None, None, :] & allowed  # (B, 1, T, T), True = may attend
        mixed = F.scaled_dot_product_attention(*heads, attn_mask=joint)
        reference = layer.out_proj(mixed.transpose(1, 2).reshape(B, T, D))
    check_close(f"nn.MultiheadAttention output with your masks (B={B}, T={T})", output, reference, atol=1e-5,
                hint="both of nn.MultiheadAttention's masks read True as 'blocked': invert valid and allowed, "
                     "keeping their layouts ((B, T_k) and (T_q, T_k): rows are queries)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · The perturbation test (3 points)
#
# Looking at a mask matrix does not prove that a model respects it: a mask can be built
# right and passed to the wrong argument, or a later step (a mean over the sequence, a
# normalisation along the length) can mix the future back in. A behavioural test is more
# convincing: **change the last token and look at the outputs.**
#
# * If no position reads the future, the outputs at positions `0 .. T-2` are unchanged.
# * **The control:** the output at the last position must change. Without this check, "the
#   past is unchanged" could be true for a useless reason: the block ignores its input, the
#   change never reached it, or the change was too weak to matter. A LayerNorm, for example,
#   erases a constant added to every feature (and nearly erases a common rescaling), so
#   change the features by *different* amounts (random noise works well) and by a clearly
#   visible amount.
#
# Write `future_leak_check(block, x)` for an input `x` of shape `(B, T, D)`. `block(x)` returns
# the output `(B, T, D)`, or a tuple whose first item is the output (like
# `nn.MultiheadAttention`, which also returns weights). Change `x[:, -1]` (on a copy: never
# modify the caller's `x`), run the block before and after, and return two Python bools
# `(past_unchanged, last_changed)`; compare with `torch.allclose(..., atol=1e-5)`. Run the
# block under `torch.no_grad()`. The blocks you will test are in eval mode (no dropout), so the
# same input always gives the same output.

# %% nbgrader={"grade": false, "grade_id": "future_leak_check", "locked": false, "schema_version": 3, "solution": true}
def future_leak_check(block, x):
    """Perturb x[:, -1]; return (outputs 0..T-2 unchanged, output T-1 changed) as two bools."""
    ### BEGIN SOLUTION
    def run(inputs):
        with torch.no_grad():
            out = block(inputs)
        return out[0] if isinstance(out, tuple) else out  # (B, T, D)

    noise = torch.randn(x[:, -1].shape, generator=torch.Generator().manual_seed(0)).to(x)
    changed = x.clone()
    changed[:, -1] += 1.0 + 3.0 * noise  # features move by different amounts
    before, after = run(x), run(changed)
    past_unchanged = torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5)
    last_changed = not torch.allclose(before[:, -1], after[:, -1], atol=1e-5)
    return bool(past_unchanged), bool(last_changed)
    ### END SOLUTION


# %% [markdown]
# ### Check it: three blocks
#
# A residual self-attention block built on `nn.MultiheadAttention`, with and without the
# causal mask (translated by your `to_mha_masks`), and a broken "block" that forgets its input
# and returns zeros. Only the first passes both checks. The third shows why the control
# matters: its past is "unchanged", but only because nothing reaches it at all.

# %%
class TinyBlock(nn.Module):
    """x + self-attention(x), optionally causal; returns (output, weights) like nn.MultiheadAttention."""

    def __init__(self, width=4, heads=2, causal=True):
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True, dropout=0.0)
        self.causal = causal

    def forward(self, x):
        B, T, _ = x.shape
        _, attn_mask = to_mha_masks(torch.ones(B, T, dtype=torch.bool), causal_mask(T))
        mixed, weights = self.attention(x, x, x, attn_mask=attn_mask if self.causal else None)
        return x + mixed, weights


torch.manual_seed(3)
x_leak = torch.randn(2, 3, 4)
causal_block, open_block = TinyBlock(causal=True).eval(), TinyBlock(causal=False).eval()
for name, block in [("causal", causal_block), ("no mask", open_block), ("ignores x", torch.zeros_like)]:
    past_unchanged, last_changed = future_leak_check(block, x_leak)
    print(f"{name:9s}  past unchanged: {past_unchanged!s:5}  last position changed: {last_changed}")
assert future_leak_check(causal_block, x_leak) == (True, True)
assert future_leak_check(open_block, x_leak) == (False, True)
assert future_leak_check(torch.zeros_like, x_leak) == (True, False)

# %% [markdown]
# In a deep model, run the test on the **whole** model, not on one layer: a single step that
# mixes along the sequence (pooling, a normalisation over the length axis) is enough to let
# the future in.
#
# The graded tests below hand `future_leak_check` blocks of a few kinds, built by
# `leak_test_block` from parameters each test draws: self-attention with and without a
# causal mask, after a LayerNorm, a running average, a mean over the sequence, a block that
# never reads the last token, and one that returns zeros.

# %% nbgrader={"grade": false, "grade_id": "leak_test_blocks", "locked": true, "schema_version": 3, "solution": false}
def leak_test_block(kind, state=None, heads=2):
    """A block for the tests of future_leak_check, from the parameters `state`: x (B, T, D) -> output."""
    if state is not None and "in_proj_weight" in state:
        layer = nn.MultiheadAttention(state["out_proj.weight"].shape[0], heads, batch_first=True).eval()
        layer.load_state_dict(state)
        norm = nn.LayerNorm(layer.embed_dim)
    future = lambda x: torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), diagonal=1)  # True = blocked
    counts = lambda x: torch.arange(1, x.shape[1] + 1).view(1, -1, 1)  # (1, T, 1)

    def drops_last(x):  # self-attention on x with its last position zeroed out
        keep = torch.ones_like(x)
        keep[:, -1] = 0.0
        return layer(x * keep, x * keep, x * keep)

    blocks = {"causal": lambda x: layer(x, x, x, attn_mask=future(x)),  # returns (output, weights)
              "normed_causal": lambda x: layer(norm(x), norm(x), norm(x), attn_mask=future(x)),
              "open": lambda x: layer(x, x, x), "drops_last": drops_last,
              "running_average": lambda x: torch.tanh(x.cumsum(1) / counts(x) @ state["weights"]),
              "mean_leak": lambda x: x + x.mean(dim=1, keepdim=True), "zeros": torch.zeros_like}
    return fresh(blocks[kind])  # here the block itself; under the grader, it stays with the tests

# %% nbgrader={"grade": true, "grade_id": "test_future_leak_causal", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""A block with a causal mask passes both checks: (past_unchanged, last_changed) == (True, True)."""
from course.masks_checks import LEAK_CHECK_HINT
g = torch.Generator().manual_seed(61)
attention_state = draw_parameters(nn.MultiheadAttention(6, 2, batch_first=True), g)
masked_layer = leak_test_block("causal", attention_state)  # returns (output, weights) like nn.MultiheadAttention
x = torch.randn(2, 5, 6, generator=g)
x_before = x.clone()
result, (_, x_after) = attempt("future_leak_check on a block that returns (output, weights)", call_keeping_arguments,
                               future_leak_check, masked_layer, x, hint=LEAK_CHECK_HINT)
check_true(isinstance(result, tuple) and len(result) == 2, "future_leak_check must return a pair of bools")
check_true(all(type(verdict) is bool for verdict in result),
           f"future_leak_check returned ({', '.join(type(verdict).__name__ for verdict in result)}): return two "
           "Python bools, True or False, with bool(...) around each comparison (torch.allclose gives one already)")
check_true(torch.equal(x_after, x_before), "future_leak_check modified the caller's x: change a copy (x.clone())")
past_unchanged, last_changed = result
check_true(bool(past_unchanged), "future_leak_check reports that the past changed for a causally masked block: "
                                 "compare only positions 0 .. T-2, and change only the last position")
check_true(bool(last_changed), "future_leak_check says the last output did not change, yet this block reads the "
                               "last token: change x[:, -1] by a visible amount, on a copy of x, and compare the "
                               "outputs at the last position")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(62)
result = attempt("future_leak_check", future_leak_check, leak_test_block("normed_causal", attention_state),
                 torch.randn(3, 4, 6, generator=g), hint=LEAK_CHECK_HINT)
check_true(bool(result[0]), "future_leak_check reports that the past changed for a causally masked block: "
                            "compare only positions 0 .. T-2, and change only the last position")
check_true(bool(result[1]), "future_leak_check says the last output did not change for a block that starts with "
                            "a LayerNorm: a LayerNorm erases a constant added to every feature (and nearly "
                            "erases a rescaling), so change the features by different amounts (random noise, say)")
for trial in range(3):
    B, T, D = (int(n) for n in torch.randint(2, 7, (3,), generator=g))
    running_average = leak_test_block("running_average", {"weights": torch.randn(D, D, generator=g)})
    result = attempt("future_leak_check on a block that returns a plain tensor", future_leak_check, running_average,
                     torch.randn(B, T, D, generator=g), hint="then block(x) is the output itself")
    check_true(tuple(bool(r) for r in result) == (True, True),
               f"future_leak_check gave {result} for a causal running-average block that returns a plain tensor "
               f"(B={B}, T={T}, D={D}), expected both checks to pass")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_future_leak_detects_leak", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""A block without a causal mask leaks: past_unchanged must be False (and last_changed True)."""
from course.masks_checks import LEAK_CHECK_HINT
SWAPPED_PAIR = ("future_leak_check returns its two bools in the other order: return (past_unchanged, last_changed), "
                "the verdict on positions 0 .. T-2 first")
g = torch.Generator().manual_seed(63)
open_layer = leak_test_block("open", draw_parameters(nn.MultiheadAttention(6, 2, batch_first=True), g))
result = attempt("future_leak_check on a block that returns (output, weights)", future_leak_check, open_layer,
                 torch.randn(2, 5, 6, generator=g), hint=LEAK_CHECK_HINT)
check_true(isinstance(result, tuple) and len(result) == 2, "future_leak_check must return a pair of bools")
if bool(result[0]) and not bool(result[1]):  # the pair a block that never reads the last token gets: swapped?
    control = attempt("future_leak_check on a block that returns (output, weights)", future_leak_check,
                      leak_test_block("drops_last", draw_parameters(nn.MultiheadAttention(6, 2, batch_first=True), g)),
                      torch.randn(2, 5, 6, generator=g), hint=LEAK_CHECK_HINT)
    check_true(not (not bool(control[0]) and bool(control[1])), SWAPPED_PAIR)
check_true(not bool(result[0]), "future_leak_check missed a leak: without a mask every position reads the last "
                                "token, so the earlier outputs must differ once x[:, -1] changes. Compute the "
                                "'before' outputs from the original x and the 'after' outputs from a changed copy")
check_true(bool(result[1]), "future_leak_check says the last output did not change, yet this block reads the "
                            "last token: compare the outputs at the last position before and after the change")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(64)
for trial in range(3):
    B, T, D = (int(n) for n in torch.randint(2, 7, (3,), generator=g))
    result = attempt("future_leak_check on a block that returns a plain tensor", future_leak_check,
                     leak_test_block("mean_leak"), torch.randn(B, T, D, generator=g),
                     hint="then block(x) is the output itself")
    check_true(not bool(result[0]), f"future_leak_check missed a leak through a mean over the sequence "
                                    f"(B={B}, T={T}, D={D}): the earlier outputs depend on the last token")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_future_leak_control", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The control: for a block that never reads the last token, last_changed must be False."""
from course.masks_checks import LEAK_CHECK_HINT
SWAPPED_PAIR = ("future_leak_check returns its two bools in the other order: return (past_unchanged, last_changed), "
                "the verdict on positions 0 .. T-2 first")
g = torch.Generator().manual_seed(65)
# self-attention on x with its last position zeroed out: the output never depends on x[:, -1]
drops_last_token = leak_test_block("drops_last", draw_parameters(nn.MultiheadAttention(6, 2, batch_first=True), g))
result = attempt("future_leak_check on a block that returns (output, weights)", future_leak_check, drops_last_token,
                 torch.randn(2, 5, 6, generator=g), hint=LEAK_CHECK_HINT)
check_true(isinstance(result, tuple) and len(result) == 2, "future_leak_check must return a pair of bools")
if not bool(result[0]) and bool(result[1]):  # the pair a leaking block gets: swapped?
    leaking = attempt("future_leak_check on a block that returns (output, weights)", future_leak_check,
                      leak_test_block("open", draw_parameters(nn.MultiheadAttention(6, 2, batch_first=True), g)),
                      torch.randn(2, 5, 6, generator=g), hint=LEAK_CHECK_HINT)
    check_true(not (bool(leaking[0]) and not bool(leaking[1])), SWAPPED_PAIR)
check_true(bool(result[0]), "future_leak_check reports that the past changed for a block that never reads the "
                            "last token: compare only positions 0 .. T-2")
check_true(not bool(result[1]), "future_leak_check reports that the last output changed for a block that never "
                                "reads the last token: last_changed must come from comparing the last position's "
                                "outputs before and after the change (that comparison is the control)")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(66)
for trial in range(2):
    B, T, D = (int(n) for n in torch.randint(2, 7, (3,), generator=g))
    result = attempt("future_leak_check on a block that returns a plain tensor", future_leak_check,
                     leak_test_block("zeros"), torch.randn(B, T, D, generator=g), hint="then block(x) is the output itself")
    check_true(not bool(result[1]), "future_leak_check reports that the last output changed for a block that "
                                    "always returns zeros: last_changed must compare real outputs (the control)")
### END HIDDEN TESTS

# %% [markdown]
# ## Before anything bigger: a masked-mean baseline
#
# The masked mean of Part D is also the simplest sentence model there is: embed each token,
# average the **real** tokens (the valid mask again), and put a linear classifier on top. It
# knows nothing of order or context, yet when data are few it is hard to beat. Before you
# trust an attention model, or reach for a large pretrained one, train this baseline and
# compare the two **on the same validation set**.
#
# A toy review task shows why. Reviews of 3 to 12 tokens, padded to 12; tokens 1 to 9 are
# "positive words", 10 to 19 "negative words", and a review is positive when it holds more
# positive than negative words (ties are left out). The baseline's masked mean of a "sign"
# feature is exactly what the label needs. The competitor is a small attention classifier:
# position embeddings, one `nn.MultiheadAttention` layer with your key padding mask, a
# residual, LayerNorm and a feed-forward network, then the same masked mean and classifier.
# Both see the same 64 training reviews, with the same optimiser and number of steps. (The
# training is skipped while the grader runs the notebook: nobody grades it.)

# %%
REVIEW_T, REVIEW_VOCAB = 12, 20  # id 0 is PAD


def toy_reviews(n, generator):
    """n reviews without ties: (tokens (n, T), valid (n, T), labels (n,)), PAD = 0 at the end."""
    lengths = torch.randint(3, REVIEW_T + 1, (4 * n,), generator=generator)
    valid = padding_mask(lengths, REVIEW_T)  # (4n, T), your mask
    tokens = torch.randint(1, REVIEW_VOCAB, (4 * n, REVIEW_T), generator=generator).masked_fill(~valid, 0)
    balance = ((tokens >= 1) & (tokens <= 9)).sum(1) - (tokens >= 10).sum(1)  # positive minus negative words
    keep = balance != 0
    return tokens[keep][:n], valid[keep][:n], (balance[keep][:n] > 0).long()


def masked_mean(h, valid):
    """Mean over the real tokens only: (B, T, D), (B, T) -> (B, D)."""
    keep = valid[..., None].float()
    return (h * keep).sum(1) / keep.sum(1)

# %%
class MeanBaseline(nn.Module):
    """Embeddings -> masked mean -> linear classifier: no order, no context."""

    def __init__(self, width=8):
        super().__init__()
        self.embed, self.classify = nn.Embedding(REVIEW_VOCAB, width), nn.Linear(width, 2)

    def forward(self, tokens, valid):
        return self.classify(masked_mean(self.embed(tokens), valid))


class AttentionClassifier(nn.Module):
    """Embeddings + positions -> one self-attention block (residual, LayerNorm, FFN) -> masked mean -> linear."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.embed, self.position = nn.Embedding(REVIEW_VOCAB, width), nn.Embedding(REVIEW_T, width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.ffn = nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, width))
        self.classify = nn.Linear(width, 2)

    def forward(self, tokens, valid):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1]))  # (B, T, width)
        mixed, _ = self.attention(x, x, x, key_padding_mask=~valid, need_weights=False)
        x = self.norm(x + mixed)
        return self.classify(masked_mean(x + self.ffn(x), valid))

# %%
def fit_and_score(model, train, validation, steps=150):
    """Full-batch AdamW on `train`; return (train accuracy, validation accuracy)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = F.cross_entropy(model(train[0], train[1]), train[2])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return [float((model(x, v).argmax(-1) == y).float().mean()) for x, v, y in (train, validation)]


if not under_nbgrader():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only wait for each other
    review_gen = torch.Generator().manual_seed(0)
    validation = toy_reviews(1000, review_gen)
    train = toy_reviews(64, review_gen)
    torch.manual_seed(0)
    base_train, base_val = fit_and_score(MeanBaseline(), train, validation)
    torch.manual_seed(0)
    attn_train, attn_val = fit_and_score(AttentionClassifier(), train, validation)
    print(f"64 training reviews: masked-mean baseline train {base_train:.2f} validation {base_val:.3f}"
          f" | attention train {attn_train:.2f} validation {attn_val:.3f}")
    torch.set_num_threads(threads)
    assert base_val > 0.9 and base_val > attn_val

# %% [markdown]
# Both models fit their training reviews perfectly. On the validation set, with 64 reviews, the
# baseline gets more than nine in ten right and the attention model, with many more parameters and
# nothing forcing it towards the simple rule, is wrong on about a quarter of the reviews (in
# the run this course was written on: 0.93 against 0.75). Give both 256 reviews and the gap
# narrows (1.000 against 0.94 in that run); with a couple of thousand both reach 1.000, at many
# times the training cost for the attention model. The attention model is not
# wrong, it is data-hungry. Record the baseline's validation score first; a bigger model has
# to beat *that number* on *that set* to earn its place.

# %% [markdown]
# ## Part F · Quiz (4 points)
#
# Answer each question with the letter of one option, as a string: `Q1 = "a"`.
#
# **Q1.** One sequence of $T = 6$ positions, whose last 2 are PAD, runs with a causal mask and a key
# padding mask together. How many of its 36 (query, key) pairs are allowed?
#
# * a) 21
# * b) 10
# * c) 18
# * d) 24
#
# **Q2.** The scores of one row are $(3, 1, 5)$ and the third key is masked. What is the weight of
# the first key, to three decimals?
#
# * a) 0.881
# * b) 0.844
# * c) 0.117
# * d) 0
#
# **Q3.** A classmate builds `valid = torch.arange(T) < lengths[:, None]` (True = a real token) and
# passes it unchanged as `key_padding_mask` to `nn.MultiheadAttention`. What comes out?
#
# * a) the right output: PyTorch's masks also mark with True the keys to be used
# * b) an error, as PyTorch checks which convention a mask was built with
# * c) NaN at the PAD positions only; rows of real tokens are unaffected
# * d) queries read only the PAD keys; a sequence without PAD gives NaN rows
#
# **Q4.** A sentence of 3 real tokens, whose vectors have the mean $m$, is padded with 2 PAD tokens,
# and the PAD rows are zeroed. A classmate then pools with `x.mean(dim=1)` over the 5 rows. What comes out?
#
# * a) $m$: the zeroed PAD rows add nothing to the sum
# * b) $0.6\,m$: the sum of 3 rows is divided by 5
# * c) $1.67\,m$: 5 rows share the weight of 3 rows
# * d) $0.4\,m$: 2 of the 5 rows are PAD rows

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
Q1 = "c"
Q2 = "a"
Q3 = "d"
Q4 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: pairs allowed by a causal and a padding mask together."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "21 is the causal mask alone, 1 + 2 + ... + 6; the key padding mask also hides keys 4 and 5 "
         "from the rows that could read them",
    "b": "10 counts the real queries only; a key padding mask hides PAD keys, and the PAD queries 4 and "
         "5 still read keys 0 to 3",
    "d": "24 is the padding mask alone, 6 queries times 4 real keys; the causal mask also hides every "
         "key after its query"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: a masked softmax by hand."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "b": "0.844 is what filling the masked score with 0 gives: exp(0) = 1 still takes a share; a hidden "
         "key needs a score of minus infinity",
    "c": "0.117 is the weight with no mask, or with weights zeroed after the softmax and not "
         "renormalised: the hidden key's exp(5) is still in the sum",
    "d": "0 reads the mask backwards: only the third key is hidden, and the first two share the whole "
         "row"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: the course's mask given to PyTorch as a key padding mask."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "PyTorch's boolean masks say the opposite: True marks a key to hide (re-read 'Speaking "
         "nn.MultiheadAttention's language')",
    "b": "a boolean tensor carries no convention: PyTorch cannot tell the two apart, and reads the mask "
         "in its own convention",
    "c": "a key padding mask hides keys, not queries, and the same keys in every row: each row loses "
         "the real keys and keeps the PAD ones"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: a mean over a padded sentence."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "a": "the sum is the same, but .mean divides it by 5, the number of rows, not by 3, the number of "
         "real tokens (re-read 'a masked-mean baseline')",
    "c": "5/3 turns the ratio upside down: the sum of 3 real rows divided by 5 makes the mean smaller, "
         "not larger",
    "d": "0.4 is the share of PAD rows; the real rows are 3 of the 5, and the mean is 3/5 of m"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part G · In your own words (2 points, graded by your instructor)
#
# Explain, in three or four sentences, why a padding mask hides PAD *keys* but leaves PAD *queries*
# alone, and what a model must then do with the vectors at PAD positions.

# %% [markdown] nbgrader={"grade": true, "grade_id": "masks_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** A PAD key must be hidden because every real query would otherwise mix the PAD token's value into
# its output, and the result would depend on how much padding the batch happened to need. A PAD
# query harms nobody: its output row is never read by a real token inside the layer, so it can
# be left to attend to the valid keys, which also keeps its row of weights well defined. But that
# row is an ordinary-looking vector, so everything after the layer that pools over positions or
# computes a loss must use the valid mask to ignore it.
#
# **Rubric (2 points, one idea per part).**
# * ½ point, why PAD keys are hidden: a real query's output is a weighted average of the values of the keys it may read, so an unhidden PAD key mixes padding into the real tokens' outputs, which would then depend on how much padding the batch happened to need. Does not: "PAD tokens carry no meaning" with no word of what reading them would do to the real tokens.
# * ½ point, why PAD queries are left alone: a PAD query's output row is read by no real token inside the layer, so it harms nobody, and keeping its allowed keys keeps its row of weights well defined. Does not: "PAD tokens are masked everywhere" (no distinction of keys and queries), or "the PAD queries do not matter" with no reason.
# * 1 point, what comes after: the PAD positions still come out as ordinary-looking vectors, so everything after the layer that pools over positions or computes a loss must drop them with the valid mask (a sentence vector is a mean over the real positions only, a token loss averages over the real tokens only). Earns it: pooling or the loss restricted to the real positions by the valid mask. Does not: "ignore them" without saying where (pooling, the loss) or how (the valid mask).
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the key padding mask also turns the outputs at PAD positions into zeros" costs the point on what comes after); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * A padding mask hides PAD keys; a causal mask hides future keys (`j > i`). Encoders
#   usually need only the first, decoders both; cross-attention never takes a causal mask.
# * Forbidden scores become $-\infty$ **before** softmax. Masking after softmax breaks the
#   row sums; multiplying scores by 0 leaves the forbidden keys a weight of $e^0$.
# * A fully masked row has no valid distribution: pick a rule (here: all-zero weights) so
#   that NaN never appears.
# * With a correct mask, adding PAD keys changes nothing for the real tokens.
# * `torch.tril(torch.ones(T, T)).bool()` and `~torch.triu(torch.ones(T, T), diagonal=1).bool()`
#   are the same causal mask; which value means "allowed" depends on the API:
#   `F.scaled_dot_product_attention` True = may attend, `nn.MultiheadAttention` True = blocked.
# * A key padding mask drops keys, not queries: pool and compute losses over valid positions.
#   The masked mean of the embeddings is also the baseline to beat when data are few.
# * Test causality by perturbing the last token: the past must not move, **and** the last
#   position must (the control).
#
# Next, chapter 04 puts attention, a feed-forward network, residuals and LayerNorm together
# into an encoder block, using these masks.
