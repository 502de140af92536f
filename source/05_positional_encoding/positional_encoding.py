# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 05 · Order needs positions
#
# "The dog bit the man" and "the man bit the dog" hold the same five tokens. Self-attention
# compares every query with every key and averages the values, and nothing in that
# computation says *where* a token sits: feed it the tokens in another order and it hands
# back the same vectors in that other order. This chapter first proves that property with a
# test, then gives the model three ways to know positions:
#
# * a **learned table**, one trained vector per position (and nothing beyond the last one),
# * the fixed **sin/cos table** of the original Transformer, defined for every position,
# * **relative positions**, one vector per signed distance $j - i$, added inside the score.
#
# You will write, in PyTorch,
#
# * `is_permutation_equivariant(block, x, perm, atol=1e-6)`, the test itself,
# * `sinusoidal_encoding(n_positions, d)`, the sin/cos table,
# * `LearnedPositions(max_len, d)`, a learned table that refuses sequences it has no rows for,
# * `relative_offsets(T)` and `relative_scores(q, k, r)`, attention scores with relative positions,
# * `shift_rotation(k, d)`, the matrix that moves the sin/cos code of position $p$ to $p + k$.
#
# **Shapes used throughout.** A batch of sequences `x` is `(B, T, D)`: `B` sequences of `T`
# tokens of width `D`, tokens along axis 1 (PyTorch's `batch_first=True`). A single
# sequence's queries and keys are `(T, d_k)`.
#
# **Time:** about 3 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 to 04 (attention, masks and the encoder layer, whose symmetry this chapter tests).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import matplotlib.pyplot as plt

# under_nbgrader() is True while your notebook is being graded: the long demos are skipped then
from course import attempt, check_choice, check_close, check_dtype, check_shape, check_true, check_type, error_raised, under_nbgrader
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import draw_parameters, fresh, module_tensors, parameter_gradients

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Part A · Permute the tokens, permute the outputs (3 points)
#
# Write a permutation of the $T$ token slots as an index tensor `perm`: the permuted
# sequence `x[:, perm]` holds old token `perm[t]` in slot `t`. A block (anything that maps
# `(B, T, D)` to `(B, T, D')`) is **permutation-equivariant** when permuting its input
# permutes its output in the same way:
#
# $$\operatorname{block}(x[:, \text{perm}]) = \operatorname{block}(x)[:, \text{perm}] \quad\text{for every perm.}$$
#
# Self-attention without positions and without a mask has this property. The output for
# token $i$ is $\sum_j a_{ij} v_j$ with weights computed from $q_i$ and the keys: it depends
# on $q_i$ and on the *set* of key/value pairs, and a sum does not care in which order its
# terms come. The feed-forward network acts on each token alone, and residuals and
# LayerNorm are per token too, so a whole encoder layer is equivariant. Put a mean over the
# tokens after it and the result is **invariant**: a sentence vector that cannot tell
# "dog bites man" from "man bites dog".
#
# Write `is_permutation_equivariant(block, x, perm, atol=1e-6)`. Run the block on the
# permuted input, permute the block's output on the original input with the same `perm`,
# and return a Python `bool` saying whether the two agree within `atol`
# (`torch.allclose(..., atol=atol)` returns one). No gradients are needed: use
# `torch.no_grad()`.

# %% nbgrader={"grade": false, "grade_id": "is_permutation_equivariant", "locked": false, "schema_version": 3, "solution": true}
def is_permutation_equivariant(block, x, perm, atol=1e-6):
    """True when block(x[:, perm]) equals block(x)[:, perm] within atol; x is (B, T, D)."""
    ### BEGIN SOLUTION
    with torch.no_grad():
        output_of_permuted = block(x[:, perm])  # (B, T, D')
        permuted_output = block(x)[:, perm]  # (B, T, D')
    return torch.allclose(output_of_permuted, permuted_output, atol=atol)
    ### END SOLUTION


# %% [markdown]
# ### Check it: an encoder layer without positions
#
# A small `nn.TransformerEncoderLayer` (width 4, two heads, FFN width 8) in eval mode with
# dropout 0, one sequence of three tokens, and the cyclic permutation `[2, 0, 1]`. The
# answer must be `True`: that is a mathematical property, not a bug of the library. The
# attention alone (`nn.MultiheadAttention`, wrapped so that it takes one argument) is
# equivariant too, and mean pooling after the layer is invariant.

# %%
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, dropout=0.0,
                                   batch_first=True).eval()
mha = nn.MultiheadAttention(embed_dim=4, num_heads=2, batch_first=True).eval()
x = torch.randn(1, 3, 4)  # (B, T, D)
perm = torch.tensor([2, 0, 1])


def attention_only(x):
    return mha(x, x, x, need_weights=False)[0]  # (B, T, D)


print("encoder layer equivariant without positions:", is_permutation_equivariant(layer, x, perm))
print("attention alone equivariant:               ", is_permutation_equivariant(attention_only, x, perm))
with torch.no_grad():
    pooled_invariant = torch.allclose(layer(x[:, perm]).mean(dim=1), layer(x).mean(dim=1), atol=1e-6)
print("mean pooling after it is invariant:         ", pooled_invariant)
assert is_permutation_equivariant(layer, x, perm) is True
assert is_permutation_equivariant(attention_only, x, perm) and pooled_invariant

# %% [markdown]
# ### Masks carry order too
#
# A mask says which query may look at which key, so it is indexed by *slots*. Kept fixed
# while the tokens move, a causal mask (no looking ahead) tells the slots apart and the
# property is lost. Permute the mask on **both** axes (query rows and key columns) along
# with the tokens and it comes back.

# %%
causal = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1)  # True = may not look


def with_fixed_causal_mask(x):
    return layer(x, src_mask=causal)


with torch.no_grad():
    moved_mask = layer(x[:, perm], src_mask=causal[perm][:, perm])  # rows and columns permuted
    mask_follows = torch.allclose(moved_mask, layer(x, src_mask=causal)[:, perm], atol=1e-6)
print("fixed causal mask, equivariant:      ", is_permutation_equivariant(with_fixed_causal_mask, x, perm))
print("mask permuted on both axes, matches: ", mask_follows)
assert not is_permutation_equivariant(with_fixed_causal_mask, x, perm) and mask_follows

# %% nbgrader={"grade": true, "grade_id": "test_equivariant_true", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""is_permutation_equivariant says True for blocks without positions or masks."""
from course.positional_encoding_checks import equivariance_verdict  # your function, an error as one sentence
from course.positional_encoding_checks import identity  # the checks of this chapter: course/positional_encoding_checks.py

torch.manual_seed(10)
encoder = fresh(nn.TransformerEncoderLayer, 4, 2, 8, dropout=0.0, batch_first=True)  # dropout 0: deterministic
x = torch.randn(2, 3, 4)
for name, block in (("the identity block (lambda x: x)", fresh(identity)),
                    ("nn.TransformerEncoderLayer without positions", encoder)):
    check_true(equivariance_verdict(is_permutation_equivariant, block, x, torch.tensor([2, 0, 1])),
               f"is_permutation_equivariant returned False for {name}, which is permutation-equivariant: "
               "compare block(x[:, perm]) with block(x)[:, perm], the block's outputs permuted the same way")
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(11)
sizes = np.random.default_rng(11)
for trial in range(4):
    width, tokens, batch = 2 * int(sizes.integers(2, 7)), int(sizes.integers(3, 9)), int(sizes.integers(1, 4))
    encoder = fresh(nn.TransformerEncoderLayer, width, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    attention = fresh(nn.MultiheadAttention, width, 2, batch_first=True, dtype=torch.float64)
    w1, w2 = (torch.randn(n_in, n_out, generator=generator, dtype=torch.float64) for n_in, n_out in ((width, 8), (8, 3)))

    def self_attention(x):
        return attention(x, x, x, need_weights=False)[0]

    def per_token_mlp(x):
        return torch.relu(x @ w1) @ w2

    def add_sequence_mean(x):
        return x + x.mean(dim=1, keepdim=True)

    x = torch.randn(batch, tokens, width, generator=generator, dtype=torch.float64)
    perm = torch.randperm(tokens, generator=generator)
    while bool((perm[perm] == torch.arange(tokens)).all()):  # avoid perms that are their own inverse
        perm = torch.randperm(tokens, generator=generator)
    for name, block in ((f"nn.TransformerEncoderLayer (T={tokens}, D={width})", encoder),
                        ("nn.MultiheadAttention(x, x, x)", fresh(self_attention)),
                        ("a per-token MLP", fresh(per_token_mlp)),
                        ("a block adding the sequence mean to each token", fresh(add_sequence_mean))):
        check_true(equivariance_verdict(is_permutation_equivariant, block, x, perm),
                   f"is_permutation_equivariant returned False for {name}, which is permutation-equivariant: "
                   "compare block(x[:, perm]) with block(x)[:, perm], the block's outputs permuted the same way "
                   "(with perm itself, not its inverse)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_equivariant_false", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""is_permutation_equivariant says False when positions or a fixed mask tell the slots apart."""
from course.positional_encoding_checks import equivariance_verdict  # your function, an error as one sentence
from course.positional_encoding_checks import add_slot_signal  # the checks of this chapter: course/positional_encoding_checks.py

x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(12))
check_true(not equivariance_verdict(is_permutation_equivariant, fresh(add_slot_signal), x, torch.tensor([2, 0, 1])),
           "is_permutation_equivariant returned True for a block that adds a different number at each "
           "slot; moving the tokens changes which token gets which number, so the outputs cannot simply "
           "follow the permutation")
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(13)
sizes = np.random.default_rng(13)
for trial in range(3):
    width, tokens = 2 * int(sizes.integers(2, 6)), int(sizes.integers(3, 8))
    x = torch.randn(2, tokens, width, generator=generator, dtype=torch.float64)
    perm = torch.roll(torch.arange(tokens), 1)
    angles = torch.arange(tokens, dtype=torch.float64)[:, None] / 10000.0 ** (torch.arange(0, width, 2) / width)
    slots = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(tokens, width)
    encoder = fresh(nn.TransformerEncoderLayer, width, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    look_ahead = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), diagonal=1)

    def encoder_with_slots(x):
        return encoder(x + slots)

    def encoder_with_causal_mask(x):
        return encoder(x, src_mask=look_ahead)

    def running_sum(x):
        return x.cumsum(dim=1)

    for name, block in (("an encoder layer with sin/cos added at fixed slots", fresh(encoder_with_slots)),
                        ("an encoder layer with a fixed causal mask", fresh(encoder_with_causal_mask)),
                        ("a running sum over the tokens (cumsum)", fresh(running_sum))):
        check_true(not equivariance_verdict(is_permutation_equivariant, block, x, perm),
                   f"is_permutation_equivariant returned True for {name}, which knows the slots: "
                   "the two outputs you compare should differ")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_equivariant_atol", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""is_permutation_equivariant returns a Python bool and honours the atol it is given."""
from course.positional_encoding_checks import equivariance_verdict  # your function, an error as one sentence
from course.positional_encoding_checks import nearly_equivariant  # the checks of this chapter: course/positional_encoding_checks.py

x = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(14))
perm = torch.tensor([2, 0, 1])
answer = equivariance_verdict(is_permutation_equivariant, fresh(nearly_equivariant), x, perm, atol=1e-2)
check_type("is_permutation_equivariant(...)", answer, bool,
           hint="return a Python bool: torch.allclose returns one, or wrap a tensor in bool(...)")
check_true(answer, "with atol=1e-2, outputs that differ by 2e-4 must count as equal: "
           "pass the `atol` argument on to the comparison")
check_true(not equivariance_verdict(is_permutation_equivariant, fresh(nearly_equivariant), x, perm, atol=1e-6),
           "with atol=1e-6, outputs that differ by 1e-4 must count as different")
### BEGIN HIDDEN TESTS
for scale, atol in ((1e-3, 1e-1), (1e-5, 1e-3)):
    def scaled_block(x):
        return x + scale * torch.arange(3.0)[:, None]
    check_true(equivariance_verdict(is_permutation_equivariant, fresh(scaled_block), x, perm, atol=atol),
               f"with atol={atol:g}, outputs that differ by {2 * scale:g} must count as equal: "
               "pass the `atol` argument on to the comparison")
    check_true(not equivariance_verdict(is_permutation_equivariant, fresh(scaled_block), x, perm, atol=scale / 100),
               f"with atol={scale / 100:g}, outputs that differ by {scale:g} must count as different")
    # outputs near 0: an absolute tolerance there is not a relative one
    check_true(equivariance_verdict(is_permutation_equivariant, fresh(scaled_block), torch.zeros_like(x), perm,
                                    atol=atol),
               f"with atol={atol:g}, outputs near 0 that differ by {2 * scale:g} must count as equal: give the "
               "comparison atol by keyword (torch.allclose(a, b, atol=atol)); its third positional argument is rtol, "
               "a tolerance relative to the values")
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · The sin/cos table (4 points)
#
# A positional encoding adds to each token a vector that says where it stands. The original
# Transformer uses a fixed table: for position $p$ and pair index $i = 0, 1, \dots, d/2 - 1$,
#
# $$PE_{p,\,2i} = \sin\!\left(\frac{p}{10000^{2i/d}}\right), \qquad PE_{p,\,2i+1} = \cos\!\left(\frac{p}{10000^{2i/d}}\right).$$
#
# Columns $2i$ and $2i + 1$ share one frequency $\omega_i = 1 / 10000^{2i/d}$: the first pair
# turns by 1 radian per position, the last almost 10 000 times slower, like the hands of a
# clock with $d/2$ hands. With $d = 4$ the two frequencies are $1$ and
# $10000^{-2/4} = 0.01$, and position 0 is $[\sin 0, \cos 0, \sin 0, \cos 0] = [0, 1, 0, 1]$.
# The table needs no training and has a row for every position, however long the input.
#
# Write `sinusoidal_encoding(n_positions, d)` returning a float tensor of shape
# `(n_positions, d)` for positions $0, \dots, n - 1$ and an even $d$. Note that the exponent
# uses $2i$, the index of the sin column, not the pair index $i$. All the angles come from one
# product: the positions as a column of shape $(n, 1)$ times the frequencies as a row of shape
# $(d/2,)$ broadcast to the grid $p\,\omega_i$ of shape $(n, d/2)$, one row per position.
# Computing the angles in float64 and converting at the end keeps the table accurate for large
# positions.

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_encoding", "locked": false, "schema_version": 3, "solution": true}
def sinusoidal_encoding(n_positions, d):
    """The (n_positions, d) sin/cos table: sin in even columns, cos in odd ones."""
    ### BEGIN SOLUTION
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    frequencies = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions * frequencies  # (n, d/2)
    table = torch.zeros(n_positions, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.to(torch.get_default_dtype())
    ### END SOLUTION


# %% [markdown]
# ### Check it: d = 4
#
# Position 0 must be exactly `[0, 1, 0, 1]`. The frequencies can be read back from
# position 1: the pair $(\sin\omega, \cos\omega)$ is a point on the unit circle at angle
# $\omega$, and `atan2` returns that angle.

# %%
table4 = sinusoidal_encoding(3, 4)  # (3, 4)
print(table4)
read_frequencies = torch.atan2(table4[1, 0::2], table4[1, 1::2])  # (2,)
print("position 0:", table4[0].tolist())
print("frequencies:", read_frequencies.tolist())
assert table4[0].tolist() == [0.0, 1.0, 0.0, 1.0]
assert torch.allclose(read_frequencies, torch.tensor([1.0, 0.01]), atol=1e-6)

# %% [markdown]
# ### Positions break the symmetry
#
# Add the table at fixed slots 0, 1, 2 and permute only the tokens: each token now meets a
# different position vector, so the outputs no longer just follow the permutation and the
# test says `False`. The block can now tell the order apart. The sin/cos table only offers
# the signal; how much a model uses it is learned in training.

# %%
slots = sinusoidal_encoding(3, 4)  # (T, D), added at fixed slots


def layer_with_positions(x):
    return layer(x + slots)  # (B, T, D)


equivariant_with_slots = is_permutation_equivariant(layer_with_positions, x, perm)
print("equivariant with sin/cos at fixed slots:", equivariant_with_slots)
assert equivariant_with_slots is False

# %% [markdown]
# ### Predict, then run (1 point)
#
# Every row of the sin/cos table has the same length, whatever the position. Predict the
# **squared length** $\lVert PE_p \rVert^2 = \sum_j PE_{p,j}^2$ of one row of a table with
# $d = 64$, and assign it to `PREDICTED_SQUARED_NORM` before you run the cell that measures it
# for 100 positions. A prediction within 5 % counts.

# %% nbgrader={"grade": false, "grade_id": "predict_squared_norm", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_SQUARED_NORM = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_SQUARED_NORM = 64 / 2  # one sin^2 + cos^2 = 1 per pair
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_squared_norm", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_SQUARED_NORM: the squared length of a row of the sin/cos table at d = 64."""
from course import check_number

prediction = check_number("PREDICTED_SQUARED_NORM", PREDICTED_SQUARED_NORM)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_SQUARED_NORM", PREDICTED_SQUARED_NORM, 32.0, rel=0.05, known=(
    (64.0, "the 64 columns come in sin/cos pairs of one angle, and a pair contributes sin^2 + cos^2 = 1, not "
           "2"),
    (1.0, "the rows are not scaled to length 1: each sin/cos pair contributes sin^2 + cos^2 = 1"),
    (5.657, "that is the length of a row; the question asks for its square"),
),
                              hint="group the 64 columns into the sin/cos pairs that share one angle")
### END HIDDEN TESTS

# %%
positions = torch.arange(100, dtype=torch.float64)[:, None]  # (100, 1)
angles = positions * 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)  # (100, 32)
squared_norms = (torch.sin(angles) ** 2 + torch.cos(angles) ** 2).sum(dim=-1)  # (100,)
print(f"squared length of rows 0 to 99 (d = 64): from {squared_norms.min().item():.6f} "
      f"to {squared_norms.max().item():.6f}")

# %% [markdown]
# ### A picture of the table
#
# Left: 64 positions of a 32-wide table. The first columns (fast pairs) flip sign every few
# positions, the last ones (slow pairs) barely move. Right: the dot products
# $PE_p \cdot PE_q$ between positions. Each pair contributes
# $\sin\omega p \sin\omega q + \cos\omega p \cos\omega q = \cos(\omega (p - q))$, so
# the similarity depends only on the distance $p - q$ (the picture is constant along every
# diagonal), and it equals $d/2 = 16$ on the diagonal. Nearby positions look most alike and
# the similarity falls off with distance, with ripples where fast pairs line up again. Both
# facts are asserted (tolerance `1e-4`).

# %%
table = sinusoidal_encoding(64, 32)  # (P, d)
similarity = table @ table.T  # (P, P)
assert torch.allclose(similarity.diagonal(), torch.full((64,), 16.0), atol=1e-4)
assert torch.allclose(similarity[1:, 1:], similarity[:-1, :-1], atol=1e-4)  # depends on p - q only
if not under_nbgrader():
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    image = left.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    left.set(xlabel="dimension (even: sin, odd: cos)", ylabel="position p", title="sin/cos table, d = 32")
    fig.colorbar(image, ax=left, label="value")
    image = right.imshow(similarity, cmap="viridis", aspect="auto")
    right.set(xlabel="position q", ylabel="position p", title="similarity PE[p] · PE[q]")
    fig.colorbar(image, ax=right, label="dot product")
    fig.tight_layout()
    plt.show()

# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_shape", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""sinusoidal_encoding returns a float tensor of shape (n_positions, d) with values in [-1, 1]."""
from course.positional_encoding_checks import ANGLES_HINT
table = attempt("sinusoidal_encoding(10, 6)", sinusoidal_encoding, 10, 6, hint=ANGLES_HINT)
check_type("sinusoidal_encoding(10, 6)", table, torch.Tensor, hint="build the table with torch, not NumPy")
check_shape("sinusoidal_encoding(10, 6)", table, (10, 6), hint="one row per position, one column per dimension")
check_true(table.is_floating_point(), f"sinusoidal_encoding(10, 6) has dtype {table.dtype}, expected a float dtype")
check_true(float(table.abs().max()) <= 1.0 + 1e-6, "sinusoidal_encoding(10, 6) has values outside [-1, 1]: "
           "every entry is a sin or a cos")
### BEGIN HIDDEN TESTS
sizes = np.random.default_rng(20)
for trial in range(5):
    n, d = int(sizes.integers(1, 40)), 2 * int(sizes.integers(1, 20))
    table = attempt(f"sinusoidal_encoding({n}, {d})", sinusoidal_encoding, n, d, hint=ANGLES_HINT)
    check_type(f"sinusoidal_encoding({n}, {d})", table, torch.Tensor, hint="build the table with torch, not NumPy")
    check_shape(f"sinusoidal_encoding({n}, {d})", table, (n, d), hint="one row per position, one column per dimension")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_small", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""For d = 4: position 0 is [0, 1, 0, 1] and the two pairs turn by 1 and 0.01 radians per position."""
table = torch.as_tensor(attempt("sinusoidal_encoding(3, 4)", sinusoidal_encoding, 3, 4, hint=ANGLES_HINT))
check_close("row 0 (position 0) of sinusoidal_encoding(3, 4)", table[0], [0.0, 1.0, 0.0, 1.0], atol=1e-6,
            hint="sin(0) = 0 belongs in the even columns (0, 2, ...) and cos(0) = 1 in the odd ones; "
                 "positions start at 0")
check_close("frequencies read from position 1, atan2(PE[1, 0::2], PE[1, 1::2])",
            torch.atan2(table[1, 0::2], table[1, 1::2]), [1.0, 0.01], atol=1e-5,
            hint="pair i (columns 2i and 2i + 1) turns at 1 / 10000^(2i/d) radians per position: "
                 "the exponent is 2i/d, with i counting pairs")
### BEGIN HIDDEN TESTS
for n in (1, 50):
    p = np.arange(n)[:, None]
    reference = np.zeros((n, 4))
    reference[:, 0::2] = np.sin(p / np.array([1.0, 100.0]))
    reference[:, 1::2] = np.cos(p / np.array([1.0, 100.0]))
    check_close(f"sinusoidal_encoding({n}, 4)", sinusoidal_encoding(n, 4), reference, atol=1e-5,
                hint="PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_matches_formula", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""sinusoidal_encoding matches the sin/cos formula on random sizes."""
### BEGIN HIDDEN TESTS
def hidden_sincos(n, d, start=0, exponent_scale=2.0, halves=False, swap=False, multiply=False, per_column=False):
    pairs = np.arange(d // 2)
    period = 10000.0 ** (exponent_scale * pairs / d)
    p = np.arange(start, start + n)[:, None]
    angles = p * period if multiply else p / period  # (n, d/2)
    z = np.exp(1j * angles)
    first, second = (z.real, z.imag) if swap else (z.imag, z.real)
    if per_column:  # the cos column 2i + 1 turns at its own 10000^((2i + 1)/d)
        second = np.cos(p / 10000.0 ** ((2 * pairs + 1) / d))
    if halves:
        return np.concatenate([first, second], axis=1)
    out = np.empty((n, d))
    out[:, 0::2], out[:, 1::2] = first, second
    return out


rng = np.random.default_rng(21)
for trial in range(6):
    n, d = int(rng.integers(2, 120)), 2 * int(rng.integers(2, 33))
    table = attempt(f"sinusoidal_encoding({n}, {d})", sinusoidal_encoding, n, d, hint=ANGLES_HINT)
    check_close(f"sinusoidal_encoding({n}, {d})", table, hidden_sincos(n, d), atol=1e-4,
                hint="PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)), p from 0",
                likely_causes={
                    "sin and cos are swapped (cos in the even columns, sin in the odd ones)":
                        hidden_sincos(n, d, swap=True),
                    "the exponent is i/d instead of 2i/d (i counts pairs; 2i is the sin column)":
                        hidden_sincos(n, d, exponent_scale=1.0),
                    "all the sins come first and all the cosines after, instead of alternating columns":
                        hidden_sincos(n, d, halves=True),
                    "positions start at 1 instead of 0": hidden_sincos(n, d, start=1),
                    "p is multiplied by 10000^(2i/d) instead of divided": hidden_sincos(n, d, multiply=True),
                    "the cos column 2i + 1 turns at its own 10000^((2i + 1)/d): a pair's sin and cos share one "
                    "angle, p / 10000^(2i/d)": hidden_sincos(n, d, per_column=True),
                })
### END HIDDEN TESTS
check_shape("sinusoidal_encoding(8, 6)", sinusoidal_encoding(8, 6), (8, 6))

# %% [markdown]
# ## Part C · A learned table and its limit (3 points)
#
# The other absolute option, used by BERT and GPT-2, is to *learn* the table: an
# `nn.Embedding(max_len, d)` whose row $t$ is added to the token in slot $t$ and trained with
# the rest of the model. It can fit whatever the data needs, but it only has `max_len` rows:
# a table of 512 positions has no row for token 600. A model with such a table needs a rule
# for longer inputs chosen in advance (truncate, slide a window, or use an encoding defined
# everywhere). What it must not do is guess silently: clamping every position past the end
# to the last row gives wrong answers without any warning, and `nn.Embedding` on its own
# fails deep inside with an `IndexError` that does not say what went wrong.
#
# Write `LearnedPositions(max_len, d)`, an `nn.Module` that stores its table as
# `self.table = nn.Embedding(max_len, d)`. Its `forward(x)` takes `x` of shape `(B, T, d)`
# and returns `x` plus rows `0, ..., T - 1` of the table. When `T > max_len` it raises a
# `ValueError` whose message names both numbers, for example
# `"600 tokens but max_len is 512"`. `T == max_len` fits exactly.

# %% nbgrader={"grade": false, "grade_id": "LearnedPositions", "locked": false, "schema_version": 3, "solution": true}
class LearnedPositions(nn.Module):
    """Adds a learned vector per position, from a table of max_len rows."""

    def __init__(self, max_len, d):
        super().__init__()
        ### BEGIN SOLUTION
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d)  # (max_len, d) trainable rows
        ### END SOLUTION

    def forward(self, x):
        """x (B, T, d) -> x + table[:T] (B, T, d); ValueError when T > max_len."""
        ### BEGIN SOLUTION
        T = x.shape[-2]
        if T > self.max_len:
            raise ValueError(f"sequence of {T} tokens but max_len is {self.max_len}: "
                             f"the learned table has no row for position {self.max_len}")
        positions = torch.arange(T, device=x.device)  # (T,)
        return x + self.table(positions)  # (B, T, d)
        ### END SOLUTION


# %% [markdown]
# ### Check it: 10 tokens fit, 600 do not

# %%
learned = LearnedPositions(max_len=512, d=8)
print("output shape:", tuple(learned(torch.zeros(2, 10, 8)).shape))
try:
    learned(torch.zeros(1, 600, 8))
except ValueError as error:
    print("ValueError:", error)

# %% nbgrader={"grade": true, "grade_id": "test_learned_forward", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""LearnedPositions adds row t of its table to the token in slot t, for any T up to max_len."""
torch.manual_seed(30)
positions = LearnedPositions(16, 4)
held = {row["name"]: row for row in module_tensors(positions)}  # what the module holds, by name
check_true("table.weight" in held and held["table.weight"]["kind"] == "parameter",
           "LearnedPositions(16, 4) holds no parameter table.weight: store the table as "
           "self.table = nn.Embedding(max_len, d), so that it learns")
check_true(held["table.weight"]["shape"] == (16, 4),
           f"LearnedPositions(16, 4).table.weight has shape {held['table.weight']['shape']}, expected (16, 4): "
           "one row of d numbers per position, nn.Embedding(max_len, d)")
from course.positional_encoding_checks import choose_table  # the checks of this chapter: course/positional_encoding_checks.py
from nboracle import call_keeping_arguments  # the tests' tool: the result, and the arguments as the call left them

table = choose_table(positions, 16, 4, torch.Generator().manual_seed(30))
x = torch.randn(2, 5, 4)
out, (x_after,) = attempt("LearnedPositions(16, 4) applied to x of shape (2, 5, 4)", call_keeping_arguments, positions,
                          x.clone(), hint="add row t of the table to slot t, t = 0 .. T - 1 with T = x.shape[-2], "
                                          "the tokens (x.shape[0] is the batch)")
check_shape("LearnedPositions(16, 4) applied to x of shape (2, 5, 4)", out, (2, 5, 4))
check_true(torch.equal(x_after, x), "LearnedPositions changed the x it was given (x += ... ?): return x + the "
           "table's rows, a new tensor, so that the caller's x stays as it was")
check_close("LearnedPositions(16, 4)(x) for T = 5", out, x + table[:5], atol=1e-6,
            hint="add row t of the table to slot t, the same rows for every sequence of the batch")
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(31)
sizes = np.random.default_rng(31)
for trial in range(4):
    max_len, d = int(sizes.integers(2, 40)), int(sizes.integers(1, 9))
    positions = LearnedPositions(max_len, d)
    table = choose_table(positions, max_len, d, generator)
    for T in (int(sizes.integers(1, max_len)), max_len):
        x = torch.randn(3, T, d, generator=generator)
        out = attempt(f"LearnedPositions({max_len}, {d}) for T = {T} tokens", positions, x,
                      hint=f"a table of {max_len} rows has positions 0 to {max_len - 1}, so T = max_len fits exactly")
        check_close(f"LearnedPositions({max_len}, {d})(x) for T = {T}", out, x + table[:T],
                    atol=1e-6, hint="add row t of the table to slot t, the same rows for every sequence of the batch")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_learned_raises", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""LearnedPositions raises a ValueError naming T and max_len when the sequence is too long."""
for max_len, T in ((512, 600), (8, 9)):
    error = error_raised(lambda: LearnedPositions(max_len, 4)(torch.zeros(1, T, 4)))
    check_true(error is not None, f"LearnedPositions({max_len}, 4) accepted {T} tokens without an error: "
               f"a table of {max_len} rows has no row for position {max_len}; check T, the number of tokens "
               "(x.shape[-2], not x.shape[0], the batch), against max_len and raise a ValueError instead of "
               "clamping or wrapping the positions")
    check_true(isinstance(error, ValueError), f"LearnedPositions({max_len}, 4) on {T} tokens raised "
               f"{type(error).__name__}, expected a ValueError: compare T with max_len yourself before "
               "indexing the table")
    check_true(str(T) in str(error) and str(max_len) in str(error),
               f"the ValueError for {T} tokens with max_len={max_len} should name both numbers")
### BEGIN HIDDEN TESTS
sizes = np.random.default_rng(32)
for trial in range(3):
    max_len = int(sizes.integers(2, 100))
    T = max_len + int(sizes.integers(1, 50))
    error = error_raised(lambda: LearnedPositions(max_len, 3)(torch.zeros(2, T, 3)))
    check_true(isinstance(error, ValueError), f"LearnedPositions({max_len}, 3) on {T} tokens did not raise "
               "a ValueError")
    check_true(str(T) in str(error) and str(max_len) in str(error),
               f"the ValueError for {T} tokens with max_len={max_len} should name both numbers")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_learned_trains", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The table is trainable: max_len * d parameters, and gradients reach exactly the rows used."""
positions = LearnedPositions(10, 3)
n_trainable = sum(p.numel() for p in positions.parameters() if p.requires_grad)
check_true(n_trainable == 30, f"LearnedPositions(10, 3) has {n_trainable} trainable numbers, expected "
           "10 * 3 = 30: the table must be a learned nn.Embedding, not a fixed tensor or buffer")
x = torch.randn(2, 4, 3)
out = attempt("LearnedPositions(10, 3) on x (2, 4, 3)", positions, x,
              hint="T = x.shape[-2], the tokens (x.shape[0] is the batch)")
no_gradient = ("rows 0 to 3 of the table received no gradient from a sequence of 4 tokens: "
               "add the table's rows to x inside the graph (no .detach(), no .data)")
check_true(out.requires_grad, no_gradient)
grad = parameter_gradients(positions, x, torch.ones(2, 4, 3)).get("table.weight")  # of out.sum()
check_true(grad is not None and bool(grad.abs().max() > 0), no_gradient)
check_true(bool((grad[:4] != 0).all()), "some of rows 0 to 3 received no gradient from a sequence of 4 tokens: "
           "position t adds row t of the table, for t = 0 to T - 1")
check_true(bool((grad[4:] == 0).all()), "rows 4 and up received a gradient from a sequence of 4 tokens: "
           "use rows 0 to T - 1 only")
### BEGIN HIDDEN TESTS
from nboracle import probed_points

generator = torch.Generator().manual_seed(33)
sizes = np.random.default_rng(33)
for trial in range(3):
    max_len, d = int(sizes.integers(3, 30)), int(sizes.integers(1, 6))
    T = int(sizes.integers(1, max_len))
    positions = LearnedPositions(max_len, d)
    draw_parameters(positions, generator)
    x, direction = torch.randn(2, 2, T, d, generator=generator).unbind(0)
    grad = parameter_gradients(positions, x, direction).get("table.weight")  # of (positions(x) * direction).sum()
    check_true(grad is not None and bool((grad[:T] != 0).any(dim=1).all()) and bool((grad[T:] == 0).all()),
               f"LearnedPositions({max_len}, {d}) on {T} tokens: the gradient should reach rows 0 to {T - 1} "
               "of the table and no other")
    check_close(f"the gradient of the table of LearnedPositions({max_len}, {d}) on {T} tokens", grad[:T],
                direction.sum(0), atol=1e-5, hint="positions(x) is x plus rows 0 to T - 1 of the table, once each: a "
                                                  "row's gradient is the direction at its position, summed over the batch")
    # the outputs at the points the gradient check moved the table to are answers too: judged as well
    for moved, output in probed_points(positions):
        if "table.weight" in moved:
            check_close(f"LearnedPositions({max_len}, {d}) on {T} tokens with its table moved a little", output,
                        x + moved["table.weight"][:T], atol=1e-5,
                        hint="the forward must add the table's rows for any values, also for values a hair away "
                             "from the ones it saw last")
### END HIDDEN TESTS

# %% [markdown]
# ## Part D · Relative offsets (2 points)
#
# Absolute encodings tell token $i$ *where* it is; often what matters is *how far apart* two
# tokens are ("the word two to the left", "yesterday's value" in a time series). Relative
# positions put the signed distance $j - i$ from query $i$ to key $j$ into the score itself.
# Every pair at the same distance shares one learned vector, and with $T$ tokens the
# distance takes $2T - 1$ values, from $-(T - 1)$ (the key at the very start, the query at
# the very end) to $T - 1$.
#
# Write `relative_offsets(T)`: an integer (`torch.long`) tensor of shape `(T, T)` with entry
# `[i, j] = j - i` (row = query, column = key). A positive offset means the key comes after
# the query.

# %% nbgrader={"grade": false, "grade_id": "relative_offsets", "locked": false, "schema_version": 3, "solution": true}
def relative_offsets(T):
    """(T, T) long tensor with entry [i, j] = j - i (key position minus query position)."""
    ### BEGIN SOLUTION
    positions = torch.arange(T)  # (T,)
    return positions[None, :] - positions[:, None]  # (T, T)
    ### END SOLUTION


# %% [markdown]
# ### Check it: T = 4 gives 7 offsets
#
# Each diagonal holds one offset: 0 on the main diagonal, positive above it, negative below.

# %%
offsets4 = relative_offsets(4)
print(offsets4)
print("distinct offsets:", torch.unique(offsets4).tolist())
assert torch.unique(offsets4).tolist() == list(range(-3, 4))  # 2T - 1 = 7 values

# %% nbgrader={"grade": true, "grade_id": "test_offsets_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""relative_offsets(T) is a (T, T) long tensor with entry [i, j] = j - i."""
offsets = relative_offsets(3)
check_type("relative_offsets(3)", offsets, torch.Tensor)
check_shape("relative_offsets(3)", offsets, (3, 3))
check_dtype("relative_offsets(3)", offsets, torch.long,
            hint="offsets are integers used as indices: build them from torch.arange (int64)")
check_true(int(offsets[0, 2]) == 2 and int(offsets[2, 0]) == -2,
           f"relative_offsets(3)[0, 2] is {int(offsets[0, 2])} and [2, 0] is {int(offsets[2, 0])}: "
           "entry [i, j] is j - i, the key's position minus the query's (query 0, key 2 gives +2)")
### BEGIN HIDDEN TESTS
for T in (1, 2, 7, 12):
    grid = np.arange(T)
    check_close(f"relative_offsets({T})", relative_offsets(T), np.subtract.outer(grid, grid).T, atol=0,
                likely_causes={"the entries are i - j instead of j - i": np.subtract.outer(grid, grid),
                               "the entries are |j - i|, without the sign": np.abs(np.subtract.outer(grid, grid))})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_offsets_count", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""relative_offsets(T) takes exactly 2T - 1 values, from -(T - 1) to T - 1."""
values = torch.unique(relative_offsets(5))
check_true(len(values) == 9, f"relative_offsets(5) takes {len(values)} distinct values, expected 2 * 5 - 1 = 9: "
           "the offset is signed, so 'two before' and 'two after' are different offsets")
check_true(int(values.min()) == -4 and int(values.max()) == 4,
           f"relative_offsets(5) ranges from {int(values.min())} to {int(values.max())}, expected -4 to 4")
### BEGIN HIDDEN TESTS
for T in (2, 6, 11):
    values = torch.unique(relative_offsets(T))
    check_true(values.tolist() == list(range(-(T - 1), T)),
               f"relative_offsets({T}) should take each value from {-(T - 1)} to {T - 1} ({2 * T - 1} values)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · Scores with relative positions (3 points)
#
# With one learned vector $r_o$ per offset $o = j - i$, the score of query $i$ against key
# $j$ becomes
#
# $$s_{ij} = \frac{q_i \cdot (k_j + r_{j-i})}{\sqrt{d_k}} = \frac{q_i \cdot k_j + q_i \cdot r_{j-i}}{\sqrt{d_k}} .$$
#
# The content term $q_i \cdot k_j$ is the usual one; the position term $q_i \cdot r_{j-i}$
# lets the query prefer keys at some distance, wherever the pair sits in the sequence. The
# whole sum is divided by $\sqrt{d_k}$, as in plain attention, so with $r = 0$ you get
# exactly the usual scaled scores.
#
# The $2T - 1$ vectors are stored in a tensor `r` of shape `(2T - 1, d_k)`, ordered by
# offset: row `o + T - 1` holds $r_o$, so row 0 is offset $-(T - 1)$ and the middle row
# `T - 1` is offset 0. Careful: indexing with the raw offset would not fail, since Python
# reads `r[-1]` as the last row; it would silently use the wrong vectors.
#
# Write `relative_scores(q, k, r)` for `q` and `k` of shape `(T, d_k)`, returning the
# `(T, T)` scores. `relative_offsets` gives you the row of `r` for every pair, and indexing
# `r` with a `(T, T)` tensor of rows gives a `(T, T, d_k)` tensor.

# %% nbgrader={"grade": false, "grade_id": "relative_scores", "locked": false, "schema_version": 3, "solution": true}
def relative_scores(q, k, r):
    """Scores q_i . (k_j + r[j - i + T - 1]) / sqrt(d_k); q, k (T, d_k), r (2T - 1, d_k) -> (T, T)."""
    ### BEGIN SOLUTION
    T, d_k = q.shape
    r_pairs = r[relative_offsets(T) + T - 1]  # (T, T, d_k): the vector for each pair's offset
    content = q @ k.T  # (T, T)
    position = torch.einsum("id,ijd->ij", q, r_pairs)  # (T, T)
    return (content + position) / d_k ** 0.5
    ### END SOLUTION


# %% [markdown]
# ### Check it: by hand, then against PyTorch
#
# Take $T = 2$, $d_k = 1$, both queries $[1]$, both keys $[0]$ (no content term) and
# $r = [[1], [2], [3]]$ for offsets $-1, 0, +1$. Every score is the $r$ of its offset:
# $[[2, 3], [1, 2]]$. Then, with $r = 0$, softmax of the scores times the values must equal
# PyTorch's `F.scaled_dot_product_attention`.

# %%
by_hand = relative_scores(torch.ones(2, 1), torch.zeros(2, 1), torch.tensor([[1.0], [2.0], [3.0]]))
print(by_hand)
assert torch.allclose(by_hand, torch.tensor([[2.0, 3.0], [1.0, 2.0]]))

torch.manual_seed(1)
q, k, v = torch.randn(3, 5, 8).unbind(0)  # each (T, d_k)
no_positions = relative_scores(q, k, torch.zeros(2 * 5 - 1, 8))  # (T, T)
plain = torch.softmax(no_positions, dim=-1) @ v  # (T, d_v)
print("r = 0 matches F.scaled_dot_product_attention:",
      torch.allclose(plain, F.scaled_dot_product_attention(q, k, v), atol=1e-6))
assert torch.allclose(plain, F.scaled_dot_product_attention(q, k, v), atol=1e-6)

# %% nbgrader={"grade": true, "grade_id": "test_relative_scores_by_hand", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Each score uses the r of its offset j - i: by hand for T = 2, d_k = 1, keys zero, then for random sizes."""
from course.positional_encoding_checks import scores_of  # the checks of this chapter: course/positional_encoding_checks.py

scores = scores_of(relative_scores, relative_offsets, torch.ones(2, 1), torch.zeros(2, 1), torch.tensor([[1.0], [2.0], [3.0]]))
check_shape("relative_scores for T = 2", scores, (2, 2))
check_close("relative_scores for T = 2, d_k = 1", scores, [[2.0, 3.0], [1.0, 2.0]], atol=1e-6,
            likely_causes={"the offsets are taken as i - j instead of j - i": [[2.0, 1.0], [3.0, 2.0]],
                           "r is indexed by the raw offset j - i, so negative offsets wrap to the end of r":
                               [[1.0, 2.0], [3.0, 1.0]],
                           "the scores hold no q_i . r term (r multiplied by the key k_j instead of the query q_i, "
                           "or left out): the position term is q_i . r[j - i + T - 1]": [[0.0, 0.0], [0.0, 0.0]]},
            hint="row o + T - 1 of r belongs to offset o = j - i: row 0 to o = -1, row 1 to 0, row 2 to +1")
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(40)
sizes = np.random.default_rng(40)
for trial in range(4):  # equal queries u and equal keys w: one content term u . w for every pair
    T, d_k = int(sizes.integers(2, 9)), int(sizes.integers(1, 9))
    u = torch.randn(1, d_k, generator=generator, dtype=torch.float64)
    w = torch.randn(1, d_k, generator=generator, dtype=torch.float64)
    r = torch.randn(2 * T - 1, d_k, generator=generator, dtype=torch.float64)
    scores = scores_of(relative_scores, relative_offsets, u.expand(T, d_k), w.expand(T, d_k), r)
    content = (u[0] @ w[0]).item()
    position = torch.stack([(r @ u[0])[T - 1 - i: 2 * T - 1 - i] for i in range(T)])  # (T, T): u . r[j - i + T - 1]
    reference = (content + position) / d_k ** 0.5
    check_close(f"relative_scores with equal queries and equal keys, T = {T}, d_k = {d_k}", scores, reference,
                atol=1e-6, likely_causes={
                    "the offsets are taken as i - j instead of j - i": reference.T,
                    "only the content term q . k is divided by sqrt(d_k)": content / d_k ** 0.5 + position,
                    "the scores are not divided by sqrt(d_k)": content + position,
                    "the position term multiplies r by the key k_j instead of the query q_i: it is q_i . r[j - i + T - 1]":
                        (content + torch.stack([(r @ w[0])[T - 1 - i: 2 * T - 1 - i] for i in range(T)])) / d_k ** 0.5,
                }, hint="row o + T - 1 of r belongs to offset o = j - i")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_relative_scores_no_r", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With r = 0 the scores are plain attention scores: softmax(scores) @ v equals F.scaled_dot_product_attention."""
from course.positional_encoding_checks import scores_of  # the checks of this chapter: course/positional_encoding_checks.py

torch.manual_seed(41)
q, k, v = torch.randn(3, 4, 6).unbind(0)
mixed = torch.softmax(scores_of(relative_scores, relative_offsets, q, k, torch.zeros(7, 6)), dim=-1) @ v
check_close("softmax(relative_scores(q, k, 0)) @ v", mixed, F.scaled_dot_product_attention(q, k, v), atol=1e-5,
            likely_causes={"the scores are not divided by sqrt(d_k)": torch.softmax(q @ k.T, dim=-1) @ v},
            hint="divide the whole score by sqrt(d_k), with d_k = q.shape[-1]")
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(42)
sizes = np.random.default_rng(42)
for trial in range(4):
    T, d_k = int(sizes.integers(1, 9)), int(sizes.integers(1, 17))
    q, k, v = (torch.randn(T, d_k, generator=generator, dtype=torch.float64) for _ in range(3))
    weights = torch.softmax(scores_of(relative_scores, relative_offsets, q, k, torch.zeros(2 * T - 1, d_k, dtype=torch.float64)), dim=-1)
    eye = torch.eye(T, dtype=torch.float64)
    raw = q @ k.T
    check_close(f"softmax(relative_scores(q, k, 0)) for T = {T}, d_k = {d_k}", weights,
                F.scaled_dot_product_attention(q, k, eye), atol=1e-6, likely_causes={
                    "the scores are not divided by sqrt(d_k)": torch.softmax(raw, -1),
                    "the scores are divided by d_k instead of sqrt(d_k)": torch.softmax(raw / d_k, -1),
                }, hint="with r = 0, relative_scores must be q k^T / sqrt(d_k)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_relative_scores_random", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""relative_scores matches q_i . (k_j + r[j - i + T - 1]) / sqrt(d_k) on random inputs."""
from course.positional_encoding_checks import scores_of  # the checks of this chapter: course/positional_encoding_checks.py

scores = scores_of(relative_scores, relative_offsets, torch.randn(4, 3), torch.randn(4, 3), torch.randn(7, 3))
check_shape("relative_scores for T = 4, d_k = 3", scores, (4, 4), hint="one score per (query, key) pair")
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(43)
sizes = np.random.default_rng(43)
for trial in range(5):
    T, d_k = int(sizes.integers(1, 9)), int(sizes.integers(1, 12))
    q, k = (torch.randn(T, d_k, generator=generator, dtype=torch.float64) for _ in range(2))
    r = torch.randn(2 * T - 1, d_k, generator=generator, dtype=torch.float64)
    reference, only_content_scaled, flipped, by_keys, by_query_j = (torch.zeros(T, T, dtype=torch.float64) for _ in range(5))
    for i in range(T):
        for j in range(T):
            reference[i, j] = q[i] @ (k[j] + r[j - i + T - 1]) / d_k ** 0.5
            only_content_scaled[i, j] = q[i] @ k[j] / d_k ** 0.5 + q[i] @ r[j - i + T - 1]
            flipped[i, j] = q[i] @ (k[j] + r[i - j + T - 1]) / d_k ** 0.5
            by_keys[i, j] = (q[i] @ k[j] + k[j] @ r[j - i + T - 1]) / d_k ** 0.5
            by_query_j[i, j] = (q[i] @ k[j] + q[j] @ r[j - i + T - 1]) / d_k ** 0.5
    check_close(f"relative_scores for T = {T}, d_k = {d_k}", scores_of(relative_scores, relative_offsets, q, k, r), reference, atol=1e-5,
                likely_causes={"the offsets are taken as i - j instead of j - i": flipped,
                               "only the content term q . k is divided by sqrt(d_k)": only_content_scaled,
                               "the scores are not divided by sqrt(d_k)": reference * d_k ** 0.5,
                               "the position term multiplies r by the key k_j instead of the query q_i: it is q_i . r[j - i + T - 1]": by_keys,
                               "the position term takes the query at the key's position, q_j, instead of q_i: it is "
                               "q_i . r[j - i + T - 1]": by_query_j},
                hint="s_ij = q_i . (k_j + r[j - i + T - 1]) / sqrt(d_k)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part F · A shift is a rotation (3 points)
#
# Why sin *and* cos? For one frequency $\omega$ the pair $(\sin\omega p, \cos\omega p)$ is a
# point on the unit circle at angle $\omega p$. Moving from position $p$ to $p + k$ adds
# $\omega k$ to the angle, whatever $p$ is:
#
# $$\sin(\omega p + \omega k) = \sin\omega p \cos\omega k + \cos\omega p \sin\omega k, \qquad
# \cos(\omega p + \omega k) = \cos\omega p \cos\omega k - \sin\omega p \sin\omega k .$$
#
# So a shift by $k$ is a fixed linear map, a rotation of every (sin, cos) pair by its own
# angle $\omega_i k$, the same for every $p$. A model can read "the token $k$ steps back"
# with one matrix; this is part of why the sin/cos table makes relative distances easy to
# pick up, and the idea behind rotary embeddings (RoPE), which rotate queries and keys.
#
# Write `shift_rotation(k, d)`: the `(d, d)` matrix $R$ with
# `PE[p + k] = PE[p] @ shift_rotation(k, d).T` for the table of Part B, i.e. $R$ applied to
# the column vector $PE_p$ gives $PE_{p+k}$. It is block diagonal: one $2 \times 2$ block on
# rows and columns $2i, 2i + 1$ per pair, zeros elsewhere. Read the block off the two
# formulas above (row 1 of the block gives the new sin, row 2 the new cos). `k` may be
# negative.

# %% nbgrader={"grade": false, "grade_id": "shift_rotation", "locked": false, "schema_version": 3, "solution": true}
def shift_rotation(k, d):
    """The (d, d) block-diagonal rotation R with PE[p + k] = PE[p] @ R.T."""
    ### BEGIN SOLUTION
    angles = k * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    cos, sin = torch.cos(angles), torch.sin(angles)
    sin_rows, cos_rows = torch.arange(0, d, 2), torch.arange(1, d, 2)
    R = torch.zeros(d, d, dtype=torch.float64)
    R[sin_rows, sin_rows], R[sin_rows, cos_rows] = cos, sin  # new sin = sin cos(wk) + cos sin(wk)
    R[cos_rows, sin_rows], R[cos_rows, cos_rows] = -sin, cos  # new cos = cos cos(wk) - sin sin(wk)
    return R.to(torch.get_default_dtype())
    ### END SOLUTION


# %% [markdown]
# ### Check it: one matrix shifts the whole table
#
# Shift a 60-position, 16-wide table by $k = 7$: every row $p$ times $R^\top$ must land on
# row $p + 7$ (tolerance `1e-5`, float32). $R$ is a rotation, so $R R^\top = I$ and it keeps
# every vector's length; shifting by $-k$ undoes it.

# %%
table = sinusoidal_encoding(60, 16)  # (P, d)
R = shift_rotation(7, 16).to(table.dtype)  # (d, d); any float dtype will do, compared in the table's
print("max |PE[p + 7] - PE[p] @ R.T|:", float((table[7:] - table[:-7] @ R.T).abs().max()))
print("R is orthogonal:", torch.allclose(R @ R.T, torch.eye(16, dtype=R.dtype), atol=1e-6))
assert torch.allclose(table[:-7] @ R.T, table[7:], atol=1e-5)
assert torch.allclose(shift_rotation(-7, 16).to(R.dtype) @ R, torch.eye(16, dtype=R.dtype), atol=1e-6)

# %% [markdown]
# The same formula is not only for token positions: any number can be turned into a vector
# this way. Diffusion models embed the denoising step $t$ with it (row $t$ of a sin/cos
# table), so that nearby steps get similar vectors and the network can read the step with
# linear maps.

# %% nbgrader={"grade": true, "grade_id": "test_rotation_structure", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""shift_rotation(k, d) is a (d, d) rotation made of 2 x 2 diagonal blocks; k = 0 gives the identity."""
R = shift_rotation(3, 8)
check_type("shift_rotation(3, 8)", R, torch.Tensor)
check_shape("shift_rotation(3, 8)", R, (8, 8))
check_close("shift_rotation(3, 8) @ shift_rotation(3, 8).T", R @ R.T, torch.eye(8), atol=1e-5,
            hint="each 2 x 2 block must be a rotation: cos and sin of the pair's angle w_i * k")
outside_blocks = R.clone()
for i in range(0, 8, 2):
    outside_blocks[i:i + 2, i:i + 2] = 0
check_true(bool((outside_blocks == 0).all()), "shift_rotation(3, 8) has non-zero entries outside the 2 x 2 "
           "diagonal blocks: each (sin, cos) pair only mixes with itself")
check_close("shift_rotation(0, 6)", shift_rotation(0, 6), torch.eye(6), atol=1e-6,
            hint="a shift by 0 must leave every position unchanged")
### BEGIN HIDDEN TESTS
sizes = np.random.default_rng(50)
for trial in range(4):
    d, k = 2 * int(sizes.integers(1, 17)), int(sizes.integers(-30, 31))
    R = shift_rotation(k, d)
    check_shape(f"shift_rotation({k}, {d})", R, (d, d))
    check_close(f"shift_rotation({k}, {d}) @ its transpose", R @ R.T, torch.eye(d), atol=1e-5,
                hint="each 2 x 2 block must be a rotation: cos and sin of the pair's angle w_i * k")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_rotation_shifts", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""PE[p + k] = PE[p] @ shift_rotation(k, d).T for every position p and shift k."""
p = torch.arange(10.0)[:, None]
circle = torch.cat([torch.sin(p), torch.cos(p)], dim=1)  # d = 2: one pair, frequency 1
circle_later = torch.cat([torch.sin(p + 3), torch.cos(p + 3)], dim=1)
circle_earlier = torch.cat([torch.sin(p - 3), torch.cos(p - 3)], dim=1)
R = shift_rotation(3, 2)
check_type("shift_rotation(3, 2)", R, torch.Tensor)
check_true(R.is_floating_point(), f"shift_rotation(3, 2) has dtype {R.dtype}, expected a float dtype")
check_close("PE[p] @ shift_rotation(3, 2).T for d = 2, p = 0..9", circle.to(R.dtype) @ R.T, circle_later,
            atol=1e-5, likely_causes={"the rotation goes the wrong way (your matrix is the transpose: it shifts "
                                      "by -k)": circle_earlier},
            hint="row 1 of the block gives the new sin, row 2 the new cos: read them off the addition formulas")
### BEGIN HIDDEN TESTS
def hidden_table(n, d):
    p = np.arange(n)[:, None]
    angles = p / 10000.0 ** (np.arange(0, d, 2) / d)
    out = np.empty((n, d))
    out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
    return torch.from_numpy(out)


sizes = np.random.default_rng(51)
for trial in range(6):
    d, k = 2 * int(sizes.integers(1, 17)), int(sizes.integers(-25, 26))
    n = 40
    pe = hidden_table(n + 2 * abs(k), d)
    start = abs(k)
    before, after = pe[start:start + n], pe[start + k:start + k + n]
    mine = before @ torch.as_tensor(shift_rotation(k, d), dtype=torch.float64).T
    same_angle = torch.tensor([[np.cos(k), np.sin(k)], [-np.sin(k), np.cos(k)]], dtype=torch.float64)
    check_close(f"PE[p] @ shift_rotation({k}, {d}).T", mine, after, atol=1e-4, likely_causes={
        "the rotation goes the wrong way (your matrix is the transpose: it shifts by -k)":
            pe[start - k:start - k + n],
        "every pair rotates by k radians, ignoring its frequency w_i":
            before @ torch.block_diag(*[same_angle] * (d // 2)).T,
        "the frequencies are 10000^(+2i/d), the exponent's minus sign missing: w_i = 10000^(-2i/d)":
            before @ torch.block_diag(*[torch.tensor([[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]], dtype=torch.float64)
                                        for a in k * 10000.0 ** (np.arange(0, d, 2) / d)]).T,
    }, hint="pair i rotates by w_i * k with w_i = 1 / 10000^(2i/d)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part G · Quiz (4 points)
#
# Answer each question with one letter (a string), in one cell: `Q1 = "a"`, and so on.
#
# **Q1.** An encoder layer with no positional encoding and no mask reads "dog bites man", then
# "man bites dog". How do the two output vectors of "dog" compare?
#
# * a) they differ: "dog" has other neighbours on each side in each sentence
# * b) they are equal: the same vector, moved to another row of the output
# * c) they are equal only once the FFN is removed, since the FFN reads order
# * d) they are equal only under a causal mask, which keeps the order
#
# **Q2.** In the sin/cos table with $d = 8$, over how many positions does the slowest pair of columns
# (columns 6 and 7) complete one full period, to the nearest whole number?
#
# * a) 10 000
# * b) 1 000
# * c) 62 832
# * d) 6 283
#
# **Q3.** A model with a learned table of 128 positions was trained only on sequences of at most 64
# tokens. At test time it reads 100 tokens. What happens?
#
# * a) an error: 100 is longer than every sequence seen during training
# * b) it works: rows 64 to 99 were trained along with the whole table
# * c) it runs, but rows 64 to 99 never had a gradient and are still random
# * d) it runs, with rows 64 to 99 interpolated from their trained neighbours
#
# **Q4.** Cross-attention with relative positions: 6 queries, 4 keys, and the offset $j - i$ for query
# $i$ and key $j$. How many different offsets can a score use?
#
# * a) 9
# * b) 11
# * c) 24
# * d) 7

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
Q1 = "b"
Q2 = "d"
Q3 = "c"
Q4 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: one word in two orders, without positions."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "without positions, attention sees a set: the neighbours' places are not in its input, so a "
         "token's output depends only on which tokens there are (re-read Part A)",
    "c": "the FFN acts on each token on its own and sees no order at all: the layer is "
         "permutation-equivariant with it",
    "d": "a causal mask is tied to the slots and breaks the symmetry: under it, the first 'dog' reads "
         "one token and the second reads three"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: the period of the slowest pair of the sin/cos table."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "10 000 is the base of the formula; at d = 8 the slowest pair divides the position by "
         "10000^(6/8), not by 10000",
    "b": "1 000 is the divisor of the position, 10000^(6/8); one full period of sin(p / 1000) takes 2 "
         "pi times as many positions",
    "c": "62 832 is 2 pi x 10 000, the limit as d grows; at d = 8 the last pair's exponent is 6/8"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: rows of a learned table that training never reached."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "the table has 128 rows, so positions 0 to 99 all exist and the lookup succeeds; the limit is "
         "the table's size, not the training lengths",
    "b": "a row of an embedding table gets a gradient only when its position occurs, and no training "
         "sequence reached position 64",
    "d": "a lookup reads one row, and nothing fills untrained rows from their neighbours (the sin/cos "
         "table is a formula, a learned table is not)"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: relative offsets between sequences of different lengths."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "b": "11 is 2 x 6 - 1, the count for 6 queries over 6 keys; here there are 4 keys, and the offsets "
         "run from -5 to 3",
    "c": "24 counts the (query, key) pairs; many pairs share an offset, such as (0, 0) and (1, 1)",
    "d": "7 is 2 x 4 - 1, the count for 4 queries over 4 keys; there are 6 queries, so the offsets "
         "reach -5"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part H · In your own words (2 points, graded by your instructor)
#
# "The dog bit the man" and "the man bit the dog" hold the same tokens. Explain, in three or four
# sentences, why an encoder layer without positions cannot tell them apart, and how adding a
# position vector to each token changes that.

# %% [markdown] nbgrader={"grade": true, "grade_id": "positions_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** Self-attention scores every query against every key and averages the values; nothing in that
# computation depends on where a token sits, and the FFN and LayerNorm act on each token on its
# own. So permuting the input tokens only permutes the outputs (permutation equivariance): each
# word gets the same vector in both sentences, and whatever is pooled from them is identical.
# Adding a position vector to each token makes the same word different at different slots, so
# scores and outputs can depend on order; how much the model uses that is learned.
#
# **Rubric (2 points, one idea each).**
# * 1 point, the symmetry: self-attention's output for a token is a weighted sum over the set of key/value pairs, and a sum does not care in which order its terms come; the FFN, the residuals and LayerNorm act on each token on its own. So permuting the input tokens only permutes the outputs (permutation equivariance): each word gets the same vector in both sentences, and a vector pooled from them is identical. Earns it: the permutation argument in any words (the layer reads the tokens as a set; a token gets the same output wherever it sits). Does not: restating that the two sentences hold the same tokens, or "attention looks at all the tokens at once" with no word of why their order cannot matter.
# * 1 point, what a position vector changes: a vector added at each slot makes the same word a different input at different slots, so the scores and the outputs can depend on order (how much the model uses that is learned). Earns it: a token's input depending on where it sits. Does not: "the model then knows the order" or "positions tell the model where each word is" without saying that a word's input changes with its slot, or "positions make attention faster".
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the FFN reads the order of the tokens" costs the first point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * Without positions and masks, self-attention, the FFN and a whole encoder layer are
#   permutation-equivariant; mean pooling after them is invariant. A test proves it: compare
#   `block(x[:, perm])` with `block(x)[:, perm]`.
# * Anything tied to the slots breaks the symmetry: a position table added at fixed slots, or
#   a fixed mask (a mask must be permuted on both axes to follow the tokens).
# * The sin/cos table: $PE_{p,2i} = \sin(p/10000^{2i/d})$, $PE_{p,2i+1} = \cos(\cdot)$;
#   for $d = 4$ the frequencies are 1 and 0.01 and position 0 is $[0, 1, 0, 1]$. The
#   similarity of two positions depends only on their distance.
# * A learned table (`nn.Embedding(max_len, d)`) fits the data but has no row past
#   `max_len`: fail loudly, and choose a rule for long inputs in advance.
# * Relative positions add $q_i \cdot r_{j-i}$ to the score, with $2T - 1$ offsets from
#   $-(T-1)$ to $T - 1$, all divided by $\sqrt{d_k}$.
# * Shifting the sin/cos code by $k$ is a rotation of each (sin, cos) pair by $\omega_i k$,
#   the same matrix for every position.
