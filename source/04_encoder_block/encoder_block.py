# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 04 · A small Transformer encoder block
#
# Attention on its own only mixes token vectors. A Transformer *encoder layer* combines it
# with a few more pieces so that layers can be stacked dozens deep and still train:
#
# 1. **multi-head self-attention**, where every token gathers information from the others;
# 2. a **position-wise feed-forward network** (FFN), a small MLP applied to each token on its own;
# 3. around each of the two, a **residual connection** (add the sublayer's input to its output)
#    and a **LayerNorm** (rescale each token's features to mean 0 and variance 1, then apply a
#    learned scale and shift).
#
# The output has the shape of the input, `(B, T, D)`, so layers stack. By the end of this
# notebook you will have written, in PyTorch,
#
# * `FeedForward(width, hidden)`, the position-wise MLP;
# * `mha_parameter_count(d)`, the size of `nn.MultiheadAttention` on paper;
# * `EncoderBlock(width, heads, hidden, norm_first=False)`, in both norm placements, returning
#   the output **and the attention weights of every head**;
# * `masked_token_loss(encoded, target, valid)`, a loss that ignores padding;
#
# and checked the block against PyTorch's own `nn.TransformerEncoderLayer`. A short quiz on
# the three Transformer families closes the chapter.
#
# **Conventions.** Tensors are batch first: `x` is `(B, T, D)` with batch `B`, length `T`,
# width `D`. Masks follow `nn.MultiheadAttention`: **True means drop**, the opposite of
# chapter 03's "True = may attend", because here the masks go straight to PyTorch's layer.
# A padding mask is `(B, T)` and True at PAD tokens; a causal mask is `(T, T)` and True at
# forbidden (query, key) pairs, the keys in the future. The loss takes a `valid` mask that
# is True at real tokens (`valid = ~padding_mask`). Dropout is 0 throughout, so every check
# is deterministic.
#
# **Time:** about 3 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 to 03 (attention, the scaling, masks); `nn.Module` and a PyTorch training step.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn

from course import check_choice, check_close, check_shape, check_true
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import draw_parameters, read_state
from course.plots import plot_attention

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Part A · The position-wise feed-forward network (2 points)
#
# After attention has mixed context into every token, the FFN transforms each token vector
# on its own:
#
# $$\operatorname{FFN}(x) = W_2\, \sigma(W_1 x + b_1) + b_2 .$$
#
# $W_1$ widens the vector to a `hidden` size, the activation $\sigma$ makes the map
# non-linear, and $W_2$ brings it back to the model width. BERT-base uses 768 → 3072 → 768.
# The original Transformer and `nn.TransformerEncoderLayer` (by default) use ReLU; BERT and
# GPT use GELU. Without $\sigma$ the two layers would collapse into a single linear map.
#
# "Position-wise" means the *same* MLP is applied to each of the `T` positions separately:
# the FFN mixes nothing across tokens. All the traffic between tokens goes through attention.
#
# Write `FeedForward(width, hidden)` with two submodules, `linear1` (width → hidden) and
# `linear2` (hidden → width), and ReLU in between. `nn.Linear` acts on the last axis, so the
# same code handles `(width,)`, `(T, width)` and `(B, T, width)`.

# %% nbgrader={"grade": false, "grade_id": "feed_forward", "locked": false, "schema_version": 3, "solution": true}
class FeedForward(nn.Module):
    """Position-wise FFN: linear2(relu(linear1(x))), width -> hidden -> width."""

    def __init__(self, width, hidden):
        super().__init__()
        ### BEGIN SOLUTION
        self.linear1 = nn.Linear(width, hidden)
        self.linear2 = nn.Linear(hidden, width)
        ### END SOLUTION

    def forward(self, x):
        """x (..., width) -> (..., width), the same MLP at every position."""
        ### BEGIN SOLUTION
        return self.linear2(torch.relu(self.linear1(x)))  # (..., hidden) -> (..., width)
        ### END SOLUTION


# %% [markdown]
# Check it: the output has the input's shape, and changing one token changes only that
# token's output.

# %%
torch.manual_seed(0)
ffn = FeedForward(4, 8)
tokens = torch.randn(1, 3, 4)  # (B, T, D)
edited = tokens.clone()
edited[0, 1] += 5.0  # change token 1 only
with torch.no_grad():
    moved = (ffn(edited) - ffn(tokens)).abs().amax(dim=-1)  # (B, T): how far each output moved
print("output shape:", tuple(ffn(tokens).shape))
print("largest change per position:", moved[0].tolist())
assert moved[0, 1] > 0 and moved[0, 0] == 0 and moved[0, 2] == 0, "the FFN must act on each position alone"

# %% [markdown]
# The FFN is where much of a Transformer's size sits. At BERT-base's width 768 the FFN holds
# $768 \cdot 3072 + 3072 + 3072 \cdot 768 + 768 = 4\,722\,432$ parameters, twice the
# attention's $2\,362\,368$: about two thirds of each layer.

# %%
ffn_768 = FeedForward(768, 3072)
ffn_params = sum(p.numel() for p in ffn_768.parameters())
attention_params = sum(p.numel() for p in nn.MultiheadAttention(768, 12).parameters())
print(f"FFN 768 -> 3072 -> 768: {ffn_params:,} parameters; attention: {attention_params:,}")
assert ffn_params == 4_722_432 and attention_params == 2_362_368

# %% nbgrader={"grade": true, "grade_id": "test_ffn_layers", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""FeedForward has linear1 (width -> hidden) and linear2 (hidden -> width) and keeps the input's shape."""
from course.encoder_block_checks import check_ffn_layers  # the checks of this chapter: course/encoder_block_checks.py

ffn = check_ffn_layers(FeedForward, 6, 10, torch.Generator().manual_seed(10))
check_shape("FeedForward(6, 10) on x of shape (2, 5, 6)", ffn(torch.randn(2, 5, 6)), (2, 5, 6))
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(11)
for trial in range(4):
    width, hidden = (int(n) for n in torch.randint(1, 20, (2,), generator=gen))
    ffn = check_ffn_layers(FeedForward, width, hidden, gen)
    lead = tuple(int(n) for n in torch.randint(1, 4, (trial,), generator=gen))
    check_shape(f"FeedForward({width}, {hidden}) on x of shape {lead + (width,)}",
                ffn(torch.randn(*lead, width, generator=gen)), lead + (width,))
from instructor.references.as_built import same_as_a_twin  # the grader's side only

x = torch.randn(3, 6, generator=gen)  # as built, and twins holding its weights (loaded)
same_as_a_twin("FeedForward(6, 10)", lambda: FeedForward(6, 10), lambda ffn: ffn(x))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_ffn_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""FeedForward computes linear2(relu(linear1(x))), one position at a time."""
torch.manual_seed(1)
ffn = FeedForward(5, 12)
draw_parameters(ffn, torch.Generator().manual_seed(1))  # the test chooses the weights
x = torch.randn(4, 5)
with torch.no_grad():
    curvature = ffn(x) + ffn(-x) - 2 * ffn(torch.zeros_like(x))
check_true(curvature.abs().max() > 1e-4,
           "FFN(x) + FFN(-x) equals 2 FFN(0) for every x: your FFN is a linear (affine) map. "
           "Apply a ReLU between linear1 and linear2")
### BEGIN HIDDEN TESTS
from nboracle import read_parameters

gen = torch.Generator().manual_seed(12)
for trial in range(6):
    width, hidden = (int(n) for n in torch.randint(2, 16, (2,), generator=gen))
    ffn = FeedForward(width, hidden)
    params = draw_parameters(ffn, gen) if trial < 5 else read_parameters(ffn)  # the last: as built, nothing written
    x = torch.randn(2, int(torch.randint(1, 6, (1,), generator=gen)), width, generator=gen)
    names = [f"linear{i}.{part}" for i in (1, 2) for part in ("weight", "bias")]
    check_true(all(name in params for name in names), f"FeedForward({width}, {hidden}) holds {sorted(params)}, not "
               "linear1.weight, linear1.bias, linear2.weight and linear2.bias: name its layers linear1 and linear2")
    w1, b1, w2, b2 = (params[name] for name in names)
    with torch.no_grad():
        pre = x @ w1.T + b1
        check_close(f"FeedForward({width}, {hidden})(x)", ffn(x), torch.relu(pre) @ w2.T + b2, atol=1e-5,
                    hint="the FFN is linear2(relu(linear1(x)))", likely_causes={
                        "there is no ReLU between linear1 and linear2": pre @ w2.T + b2,
                        "a GELU is used instead of the ReLU": torch.nn.functional.gelu(pre) @ w2.T + b2,
                        "a ReLU is also applied after linear2": torch.relu(torch.relu(pre) @ w2.T + b2),
                    })
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · What multi-head attention costs: 4d² + 4d parameters (1 point)
#
# `nn.MultiheadAttention(d, H)` projects every token to a query, a key and a value with three
# `d × d` matrices $W_Q, W_K, W_V$, splits each projection into `H` heads of width `d / H`,
# runs attention in every head, concatenates the heads back to width `d` and mixes them with
# an output projection $W_O$, also `d × d`. Each of the four projections has a bias of
# length `d`.
#
# The heads are *slices* of the same projections, so the head count does not change the
# size: `H` only decides how the `d` columns are grouped, and `d` must be divisible by `H`
# (PyTorch refuses otherwise).
#
# Write `mha_parameter_count(d)` returning the number of parameters as a Python `int`.

# %% nbgrader={"grade": false, "grade_id": "mha_parameter_count", "locked": false, "schema_version": 3, "solution": true}
def mha_parameter_count(d):
    """Parameters of nn.MultiheadAttention(d, H), for any H dividing d: W_Q, W_K, W_V, W_O and biases."""
    ### BEGIN SOLUTION
    return 4 * d * d + 4 * d
    ### END SOLUTION


# %% [markdown]
# Check it: at `d = 512` the formula gives $4 \cdot 512^2 + 4 \cdot 512 = 1\,050\,624$, and
# PyTorch's layer agrees with 8 heads and with 16.

# %%
print(f"mha_parameter_count(512) = {mha_parameter_count(512):,}")
for heads in (8, 16):
    counted = sum(p.numel() for p in nn.MultiheadAttention(512, heads).parameters())
    print(f"nn.MultiheadAttention(512, {heads:2d}): {counted:,} parameters")
    assert counted == mha_parameter_count(512) == 1_050_624, "mha_parameter_count(512) disagrees with PyTorch"
try:
    nn.MultiheadAttention(512, 7)
except AssertionError as error:
    print("7 heads:", error)

# %% nbgrader={"grade": true, "grade_id": "test_mha_parameter_count", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""mha_parameter_count(d) is the parameter count of nn.MultiheadAttention(d, H), whatever H."""
count = mha_parameter_count(8)
check_true(isinstance(count, (int, np.integer)), f"mha_parameter_count(8) is a {type(count).__name__}, expected an int")
check_true(count == sum(p.numel() for p in nn.MultiheadAttention(8, 2).parameters()),
           f"mha_parameter_count(8) = {count}, but nn.MultiheadAttention(8, 2) has a different number of "
           "parameters: count W_Q, W_K, W_V, W_O and their biases")
### BEGIN HIDDEN TESTS
gen = np.random.default_rng(13)
for trial in range(6):
    heads, d_head = int(gen.integers(1, 9)), int(gen.integers(1, 40))
    d = heads * d_head
    mine, real = mha_parameter_count(d), sum(p.numel() for p in nn.MultiheadAttention(d, heads).parameters())
    if mine == 4 * d * d:
        check_true(False, f"mha_parameter_count({d}) counts the four weight matrices but not their biases")
    if mine == 3 * d * d + 3 * d:
        check_true(False, f"mha_parameter_count({d}) leaves out the output projection W_O (d x d plus a bias)")
    check_true(mine == real, f"mha_parameter_count({d}) = {mine}, but nn.MultiheadAttention({d}, {heads}) "
               "has a different number of parameters")
### END HIDDEN TESTS

# %% [markdown]
# ### Predict, then run (1 point)
#
# Part C builds the whole block: attention, the FFN of Part A and two LayerNorms (each with a
# learned scale and shift per feature). Before you build it, predict the **number of parameters
# of one block** with width $D = 64$, 4 heads and an FFN of hidden width 256, and assign it to
# `PREDICTED_BLOCK_PARAMETERS`. A prediction within 0.2 % counts (a count is exact
# arithmetic). The cell after the test counts
# the parameters of PyTorch's `nn.TransformerEncoderLayer` of the same sizes.

# %% nbgrader={"grade": false, "grade_id": "predict_block_parameters", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_BLOCK_PARAMETERS = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_BLOCK_PARAMETERS = (4 * 64 * 64 + 4 * 64) + (64 * 256 + 256 + 256 * 64 + 64) + 2 * (2 * 64)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_block_parameters", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_BLOCK_PARAMETERS: the number of parameters of one encoder block (D = 64, 4 heads, hidden 256)."""
from course import check_number

prediction = check_number("PREDICTED_BLOCK_PARAMETERS", PREDICTED_BLOCK_PARAMETERS)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_BLOCK_PARAMETERS", PREDICTED_BLOCK_PARAMETERS, 49984, rel=0.002, known=(
    (49728, "that leaves out the two LayerNorms: each has a learned scale and shift, 2D parameters"),
    (45824, "that counts the attention as 3D^2 + 3D: the output projection W_O adds D^2 + D (Part B)"),
    (49408, "that leaves out the biases of the attention and of the FFN's two Linear layers"),
    (16640, "that is the attention alone; the block also holds the FFN's two Linear layers and two LayerNorms"),
    (49856, "that counts each LayerNorm as D parameters: it has a learned scale and a learned shift, 2D"),
),
                              hint="add the attention's 4D^2 + 4D (Part B), the FFN's two Linear layers with their biases "
                      "(Part A) and two LayerNorms")
### END HIDDEN TESTS

# %%
pytorch_block = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True)
print("parameters of nn.TransformerEncoderLayer(64, 4, 256):", sum(p.numel() for p in pytorch_block.parameters()))

# %% [markdown]
# The FFN holds about twice the parameters of the attention ($2 D \cdot 4D$ against $4D^2$
# with the usual hidden width $4D$); the LayerNorms are a rounding error.

# %% [markdown]
# ## Part C · The encoder block, post-norm and pre-norm (8 points)
#
# Each sublayer $S$ (attention, then the FFN) is wrapped by a residual connection and a
# LayerNorm. Where the norm goes is a real design choice:
#
# | placement | one sublayer | used by |
# |---|---|---|
# | **post-norm** (`norm_first=False`) | $x \leftarrow \operatorname{norm}(x + S(x))$ | the original Transformer, BERT |
# | **pre-norm** (`norm_first=True`) | $x \leftarrow x + S(\operatorname{norm}(x))$ | GPT-2 and most recent large models |
#
# In pre-norm the residual path from input to output goes through no norm at all: the block
# adds corrections to $x$ and never rescales it. Deep pre-norm stacks train more stably and
# depend less on learning-rate warmup. Post-norm renormalises after every sublayer. The two
# placements have exactly the same parameters, so nothing stops you from loading a
# checkpoint into the wrong one; it loads silently and computes something else. The
# placement must match the checkpoint.
#
# With `norm1` wrapping attention and `norm2` wrapping the FFN, one block is:
#
# * post-norm: `x = norm1(x + attention(x))`, then `x = norm2(x + ffn(x))`;
# * pre-norm: `x = x + attention(norm1(x))`, then `x = x + ffn(norm2(x))`.
#
# **What to build.** `EncoderBlock(width, heads, hidden, norm_first=False)` with submodules
#
# * `attention`: `nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)`;
# * `norm1`, `norm2`: `nn.LayerNorm(width)`;
# * `ffn`: your `FeedForward(width, hidden)`.
#
# `forward(x, padding_mask=None, causal_mask=None)` returns `(out, weights)`: `out` is
# `(B, T, D)` and `weights` is `(B, H, T, T)`, one map per head (batch, head, query, key).
# Two details of `nn.MultiheadAttention`: pass the masks as `key_padding_mask` and
# `attn_mask` (both True = drop, as here), and ask for `need_weights=True,
# average_attn_weights=False`, because by default it returns the *mean over heads*,
# `(B, T, T)`.

# %% [markdown]
# The same block as a picture, in both placements. Data flows upwards; each grey path is a
# residual connection that carries `x` past a sublayer and adds it back. In post-norm the sum
# then goes through a LayerNorm; in pre-norm the LayerNorm sits on the branch, before the
# sublayer, and the path from input to output meets only additions.

# %%
# demo only: the figure (autograde skips it)
from course.diagrams import draw_encoder_block

draw_encoder_block()
plt.show()

# %% nbgrader={"grade": false, "grade_id": "encoder_block", "locked": false, "schema_version": 3, "solution": true}
class EncoderBlock(nn.Module):
    """Self-attention and a position-wise FFN, each wrapped by a residual and a LayerNorm."""

    def __init__(self, width, heads, hidden, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        ### BEGIN SOLUTION
        self.attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.ffn = FeedForward(width, hidden)
        ### END SOLUTION

    def forward(self, x, padding_mask=None, causal_mask=None):
        """x (B, T, D), masks True = drop -> out (B, T, D) and per-head weights (B, H, T, T)."""
        ### BEGIN SOLUTION
        def attend(h):
            return self.attention(h, h, h, key_padding_mask=padding_mask, attn_mask=causal_mask,
                                  need_weights=True, average_attn_weights=False)

        if self.norm_first:
            attended, weights = attend(self.norm1(x))  # (B, T, D), (B, H, T, T)
            x = x + attended
            x = x + self.ffn(self.norm2(x))
        else:
            attended, weights = attend(x)
            x = self.norm1(x + attended)
            x = self.norm2(x + self.ffn(x))
        return x, weights
        ### END SOLUTION


# %% [markdown]
# ### Check it: shapes and a padding mask
#
# Width 4, 2 heads, an FFN of hidden size 8, in eval mode. The batch holds two sequences of
# length 3; the first one's last token is PAD. The PAD *key* must get weight exactly 0 from
# every query in both heads, and every row of weights must still sum to 1.

# %%
torch.manual_seed(0)
block = EncoderBlock(4, 2, 8).eval()
x = torch.randn(2, 3, 4)  # (B, T, D)
padding_mask = torch.tensor([[False, False, True], [False, False, False]])  # True = PAD
with torch.no_grad():
    encoded, weights = block(x, padding_mask=padding_mask)  # (B, T, D), (B, H, T, T)
pad_key_max = weights[0, :, :, 2].abs().max().item()
rows_sum_to_one = torch.allclose(weights.sum(dim=-1), torch.ones(2, 2, 3), atol=1e-6)
print("output:", tuple(encoded.shape))
print("weights:", tuple(weights.shape), "(batch, head, query, key)")
print("PAD key max weight:", round(pad_key_max, 6))
print("weight rows sum to 1:", rows_sum_to_one)
assert tuple(encoded.shape) == (2, 3, 4) and tuple(weights.shape) == (2, 2, 3, 3), "unexpected shapes"
assert pad_key_max == 0.0 and rows_sum_to_one, "the PAD key must get weight 0 and each row must sum to 1"

# %% [markdown]
# The PAD token is still a *query*: row 2 of sequence 0 has weights and an output vector. A
# key padding mask removes keys only, so anything that later pools or scores the tokens must
# skip PAD positions itself (Part D).

# %% [markdown]
# ### Check it: a causal mask, tested by perturbation
#
# Looking at the mask proves little; changing the future and watching the past does. Give
# the second sequence a causal mask (True above the diagonal: key $j > i$ is forbidden),
# change its last token, and compare. The first two outputs must not move. The last one
# must move: that is the control, without which "unchanged" could just mean the block
# ignores its input.

# %%
causal_mask = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1)  # True = future key
one_sequence = x[1:2].clone()  # (1, 3, 4)
changed = one_sequence.clone()
changed[:, 2, :] += torch.tensor([10.0, -3.0, 7.0, 2.0])
with torch.no_grad():
    before, causal_weights = block(one_sequence, causal_mask=causal_mask)
    after, _ = block(changed, causal_mask=causal_mask)
past_unchanged = torch.allclose(before[:, :2], after[:, :2], atol=1e-6)
last_changed = not torch.allclose(before[:, 2], after[:, 2], atol=1e-6)
print("past unchanged:", past_unchanged)
print("last position changed:", last_changed)
assert past_unchanged and last_changed, "a causal block keeps the past fixed and lets the changed position move"

# %% [markdown]
# The same weights as pictures: one map per head for the padded sequence (column 2 is
# empty in both), and head 0 under the causal mask (nothing above the diagonal).

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
for head in range(2):
    plot_attention(weights[0, head], keys=["x0", "x1", "PAD"], queries=["x0", "x1", "PAD"],
                   title=f"padding mask, head {head}", ax=axes[head])
plot_attention(causal_weights[0, 0], title="causal mask, head 0", ax=axes[2])
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Check it: the same computation as PyTorch's layer
#
# `nn.TransformerEncoderLayer` is this block. Copy your block's parameters into one (with
# `dropout=0.0`, `activation="relu"` and the same `norm_first`) and the outputs agree.
# Train mode keeps PyTorch on its plain code path; with dropout 0 it is deterministic.

# %%
def pytorch_twin(block, norm_first):
    """An nn.TransformerEncoderLayer holding a copy of `block`'s parameters."""
    layer = nn.TransformerEncoderLayer(block.attention.embed_dim, block.attention.num_heads,
                                       block.ffn.linear1.out_features, dropout=0.0, activation="relu",
                                       batch_first=True, norm_first=norm_first)
    layer.self_attn.load_state_dict(read_state(block.attention))  # the block's own tensors, as they are
    for mine, theirs in ((block.ffn.linear1, layer.linear1), (block.ffn.linear2, layer.linear2),
                         (block.norm1, layer.norm1), (block.norm2, layer.norm2)):
        theirs.load_state_dict(read_state(mine))
    return layer.train()


for norm_first in (False, True):
    torch.manual_seed(0)
    mine = EncoderBlock(4, 2, 8, norm_first=norm_first).eval()
    with torch.no_grad():
        ours, _ = mine(x, padding_mask=padding_mask)
        theirs = pytorch_twin(mine, norm_first)(x, src_key_padding_mask=padding_mask)
    agree = torch.allclose(ours, theirs, atol=1e-6)
    print(f"norm_first={norm_first}: matches nn.TransformerEncoderLayer:", agree)
    assert agree, f"norm_first={norm_first}: your block and nn.TransformerEncoderLayer disagree"

# %% nbgrader={"grade": true, "grade_id": "test_block_modules", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""EncoderBlock has attention (nn.MultiheadAttention, batch_first, dropout 0), norm1, norm2 and ffn."""
from course.encoder_block_checks import check_block_modules

check_block_modules(EncoderBlock, FeedForward, 8, 2, 16, False, torch.Generator().manual_seed(14))
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(14)
sizes = np.random.default_rng(14)
for trial in range(4):
    heads = int(sizes.integers(1, 5))
    check_block_modules(EncoderBlock, FeedForward, heads * int(sizes.integers(2, 5)), heads, int(sizes.integers(2, 20)), bool(trial % 2), gen)
from course.encoder_block_checks import call_block as _call
from instructor.references.as_built import same_as_a_twin  # the grader's side only

for norm_first in (False, True):  # as built, and twins holding its weights (loaded)
    what, x = f"EncoderBlock(8, 2, 16, norm_first={norm_first})", torch.randn(2, 3, 8, generator=gen)
    same_as_a_twin(what, lambda: EncoderBlock(8, 2, 16, norm_first=norm_first).eval(),
                   lambda block: _call(what, block, x))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_block_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""EncoderBlock returns (out (B, T, D), weights (B, H, T, T)): one weight map per head."""
from course.encoder_block_checks import call_block, weights_hint

torch.manual_seed(2)
block = EncoderBlock(4, 2, 8).eval()
with torch.no_grad():
    result = call_block("EncoderBlock(4, 2, 8)", block, torch.randn(2, 3, 4))
check_shape("out for x of shape (2, 3, 4)", result[0], (2, 3, 4))
check_shape("weights for x of shape (2, 3, 4) and 2 heads", result[1], (2, 2, 3, 3),
            hint=weights_hint(result[1], 2, 2, 3))
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(15)
for trial in range(4):
    heads, batch, length = (int(n) for n in torch.randint(1, 5, (3,), generator=gen))
    d_head = int(torch.randint(2, 4, (1,), generator=gen))
    block = EncoderBlock(heads * d_head, heads, 6, norm_first=bool(trial % 2)).eval()
    shape = (batch, length + 1, heads * d_head)
    with torch.no_grad():
        out, weights = call_block(f"EncoderBlock on x of shape {shape}", block, torch.randn(*shape, generator=gen))
    check_shape(f"out for x of shape {shape}", out, shape)
    check_shape(f"weights for x of shape {shape} and {heads} heads", weights, (batch, heads, length + 1, length + 1),
                hint=weights_hint(weights, batch, heads, length + 1))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_block_padding_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PAD keys get weight 0 in every head, rows still sum to 1, and adding PAD changes no real token."""
from course.encoder_block_checks import check_padding

torch.manual_seed(3)
block = EncoderBlock(4, 2, 8).eval()
params = draw_parameters(block, torch.Generator().manual_seed(3))  # the test chooses the weights
check_padding(block, torch.randn(2, 3, 4), torch.tensor([2, 3]), heads=2)
### BEGIN HIDDEN TESTS
from nboracle import read_parameters

from instructor.references.encoder_block import padding_agrees  # the grader's side only

torch.manual_seed(3)  # the example above, against nn.TransformerEncoderLayer holding the same parameters
padding_agrees(block, params, torch.randn(2, 3, 4), torch.tensor([2, 3]), heads=2, hidden=8, norm_first=False)
gen = torch.Generator().manual_seed(16)
for trial in range(5):
    heads, batch = (int(n) for n in torch.randint(1, 4, (2,), generator=gen))
    d_head, length = int(torch.randint(2, 4, (1,), generator=gen)), int(torch.randint(3, 8, (1,), generator=gen))
    lengths = torch.randint(1, length + 1, (batch + 1,), generator=gen)
    lengths[0] = min(int(lengths[0]), length - 1)  # sequence 0 always has PAD
    block = EncoderBlock(heads * d_head, heads, 5, norm_first=bool(trial % 2)).eval()
    params = draw_parameters(block, gen) if trial < 4 else read_parameters(block)  # the last: as built, nothing written
    padding_agrees(block, params, torch.randn(batch + 1, length, heads * d_head, generator=gen), lengths, heads, 5,
                   bool(trial % 2))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_block_causal_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With a causal mask no position uses a later one: changing the last token moves only the last output."""
from course.encoder_block_checks import check_causal

torch.manual_seed(4)
block = EncoderBlock(4, 2, 8).eval()
params = draw_parameters(block, torch.Generator().manual_seed(4))
check_causal(block, torch.randn(1, 3, 4), heads=2)
### BEGIN HIDDEN TESTS
from nboracle import read_parameters

from instructor.references.encoder_block import causal_agrees  # the grader's side only

torch.manual_seed(4)  # the example above, against nn.TransformerEncoderLayer holding the same parameters
causal_agrees(block, params, torch.randn(1, 3, 4), heads=2, hidden=8, norm_first=False)
gen = torch.Generator().manual_seed(17)
for trial in range(5):
    heads, d_head = int(torch.randint(1, 4, (1,), generator=gen)), int(torch.randint(2, 4, (1,), generator=gen))
    length = int(torch.randint(2, 8, (1,), generator=gen))
    block = EncoderBlock(heads * d_head, heads, 7, norm_first=bool(trial % 2)).eval()
    params = draw_parameters(block, gen) if trial < 4 else read_parameters(block)  # the last: as built, nothing written
    causal_agrees(block, params, torch.randn(2, length, heads * d_head, generator=gen), heads, 7, bool(trial % 2))
### END HIDDEN TESTS

# %% [markdown]
# The next two tests compare your block with `nn.TransformerEncoderLayer` on random widths,
# head counts, lengths, padding and causal masks, with every parameter (LayerNorm scales and
# shifts included) set to random values first (`draw_parameters` loads values the test draws
# into your block), so `norm1` and `norm2` can no longer be confused. The visible parts check
# two properties that tell the placements apart, on random weights too:
#
# * post-norm ends with `norm2`, so with the LayerNorms at their initial scale 1 and shift 0
#   every output token has mean 0 and standard deviation 1 over its features;
# * pre-norm keeps a clean residual path: if both sublayers output zero (load zeros into the
#   weights and biases of `attention.out_proj` and `ffn.linear2`) the block returns `x` unchanged.

# %% nbgrader={"grade": true, "grade_id": "test_block_post_norm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""norm_first=False is post-norm, x = norm(x + sublayer(x)), and agrees with nn.TransformerEncoderLayer."""
### BEGIN HIDDEN TESTS
from nboracle import read_parameters

from course.encoder_block_checks import call_block, forward_hint, own_ffn, weights_hint
from instructor.references.encoder_block import (  # the grader's side only
    block_mistakes,
    gradients_agree,
    reference_layer,
)


def compare_with_pytorch(norm_first, seed):
    gen = torch.Generator().manual_seed(seed)
    for trial in range(7):
        heads, d_head, batch = (int(n) for n in torch.randint(1, 4, (3,), generator=gen))
        length, hidden = int(torch.randint(2, 7, (1,), generator=gen)), int(torch.randint(2, 12, (1,), generator=gen))
        width = 2 * heads * d_head
        block = EncoderBlock(width, heads, hidden, norm_first=norm_first).eval()
        # LayerNorm scales and shifts included; the last trial: the weights it was built with, nothing written
        params = draw_parameters(block, gen) if trial < 6 else read_parameters(block)
        x = torch.randn(batch, length, width, generator=gen)
        pad = torch.arange(length) >= torch.randint(1, length + 1, (batch,), generator=gen)[:, None]
        future = torch.triu(torch.ones(length, length, dtype=torch.bool), 1) if trial % 2 else None
        where = f"width {width}, {heads} heads, hidden {hidden}, T={length}, causal={future is not None}"
        with torch.no_grad():
            out, weights = call_block(f"EncoderBlock(norm_first={norm_first}) ({where})", block, x, padding_mask=pad,
                                      causal_mask=future)
            layer = reference_layer(params, width, heads, hidden, norm_first, own_ffn(block))
            expected = layer(x, src_mask=future, src_key_padding_mask=pad)
            check_close(f"EncoderBlock(norm_first={norm_first}) output ({where})", out, expected, atol=1e-5,
                        hint=forward_hint(block, out, width),
                        likely_causes=block_mistakes(layer, x, pad, future, norm_first))
            attn_in = layer.norm1(x) if norm_first else x
            check_shape(f"EncoderBlock(norm_first={norm_first}) weights ({where})", weights,
                        (batch, heads, length, length), hint=weights_hint(weights, batch, heads, length))
            true_weights = layer.self_attn(attn_in, attn_in, attn_in, key_padding_mask=pad, attn_mask=future,
                                           average_attn_weights=False)[1]
            other = x if norm_first else layer.norm1(x)
            check_close(f"EncoderBlock(norm_first={norm_first}) weights ({where})", weights, true_weights,
                        atol=1e-5, likely_causes={
                            ("attention reads x instead of norm1(x)" if norm_first else
                             "attention reads norm1(x) instead of x"): layer.self_attn(
                                other, other, other, key_padding_mask=pad, attn_mask=future,
                                average_attn_weights=False)[1],
                        })


compare_with_pytorch(norm_first=False, seed=18)
gradients_agree(EncoderBlock, norm_first=False, seed=22)
### END HIDDEN TESTS
from course.encoder_block_checks import check_post_norm_ends_with_a_norm

torch.manual_seed(5)
check_post_norm_ends_with_a_norm(EncoderBlock)

# %% nbgrader={"grade": true, "grade_id": "test_block_pre_norm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""norm_first=True is pre-norm, x = x + sublayer(norm(x)); compared with nn.TransformerEncoderLayer by the post-norm test's helper."""
### BEGIN HIDDEN TESTS
compare_with_pytorch(norm_first=True, seed=19)
gradients_agree(EncoderBlock, norm_first=True, seed=23)
### END HIDDEN TESTS
from course.encoder_block_checks import check_clean_residual

torch.manual_seed(6)
check_clean_residual(EncoderBlock)

# %% [markdown]
# ## Part D · A loss over real tokens only (3 points)
#
# A key padding mask drops PAD *keys*, but PAD positions still come out of the block as
# vectors. A token-level loss must leave them out. With a target vector per token, use the
# squared error averaged over the features of each token, then averaged over the real
# tokens only:
#
# $$L = \frac{1}{\#\{\text{valid } (b, t)\}} \sum_{\text{valid } (b, t)} \frac{1}{D} \sum_{d} (e_{btd} - y_{btd})^2 .$$
#
# Write `masked_token_loss(encoded, target, valid)` with `encoded` and `target` of shape
# `(B, T, D)` and `valid` a boolean `(B, T)` mask, **True at real tokens**. Return a scalar
# tensor that keeps the autograd graph (no `.item()`), so that it can be back-propagated.

# %% nbgrader={"grade": false, "grade_id": "masked_token_loss", "locked": false, "schema_version": 3, "solution": true}
def masked_token_loss(encoded, target, valid):
    """Squared error averaged over features, then over the valid (real) tokens only; a 0-d tensor."""
    ### BEGIN SOLUTION
    per_token = (encoded - target).square().mean(dim=-1)  # (B, T)
    valid = valid.to(per_token.dtype)
    return (per_token * valid).sum() / valid.sum()
    ### END SOLUTION


# %% [markdown]
# ### Check it: does every parameter learn?
#
# A forward pass that runs is not yet a block that trains. Connect the padded example to a
# random target through your loss, back-propagate in train mode, and check that the loss is
# finite and that **every** parameter received a finite gradient. A parameter without a
# gradient is a submodule that `forward` never uses.

# %%
torch.manual_seed(0)
block = EncoderBlock(4, 2, 8).train()
x = torch.randn(2, 3, 4)
encoded, _ = block(x, padding_mask=padding_mask)
target = torch.randn_like(encoded)
loss = masked_token_loss(encoded, target, ~padding_mask)
loss.backward()
finite_loss = bool(torch.isfinite(loss))
all_grads_finite = all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in block.parameters())
print("finite loss:", finite_loss)
print("all parameter gradients finite:", all_grads_finite)
assert finite_loss and all_grads_finite, "some parameter got no gradient, or a NaN/inf crept in"

# %% [markdown]
# Why a random target and not simply `encoded.square().mean()`? In a post-norm block the
# last operation is a LayerNorm: at initialisation every output token has mean 0 and
# variance 1, so its mean square is pinned at 1 whatever the layers below it do. Only
# `norm2`'s own scale and shift can change that loss, and every parameter below it gets a
# gradient of almost exactly zero. Such a check would call a perfectly good block broken:

# %%
def attention_grad_norm(loss):
    """Back-propagate `loss` and return the gradient norm of the attention's input projection."""
    block.zero_grad()
    loss.backward()
    return block.attention.in_proj_weight.grad.norm().item()


pinned = block(x)[0].square().mean()
print(f"mean square of the output: {pinned.item():.6f}")
print(f"  attention gradient from that loss:     {attention_grad_norm(pinned):.1e}")
print(f"  attention gradient from a real target: "
      f"{attention_grad_norm(masked_token_loss(block(x)[0], target, ~padding_mask)):.1e}")

# %% nbgrader={"grade": true, "grade_id": "test_masked_loss_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""masked_token_loss averages the squared error over features, then over real tokens, and leaves its inputs as they were."""
from course import attempt
from nboracle import call_keeping_arguments  # the tests' tool: the result, and the arguments as the call left them

encoded = torch.zeros(1, 2, 2)
target = torch.tensor([[[1.0, 3.0], [2.0, 2.0]]])  # squared errors per token: mean(1, 9) = 5, mean(4, 4) = 4
loss, (encoded_after, target_after, _) = attempt(
    "masked_token_loss(encoded, target, valid)", call_keeping_arguments, masked_token_loss, encoded.clone(),
    target.clone(), torch.tensor([[True, True]]), hint="average the squared error over the features of each token, then over the tokens")
check_true(isinstance(loss, torch.Tensor) and loss.dim() == 0,
           f"masked_token_loss returned {type(loss).__name__} {getattr(loss, 'shape', '')}, expected a 0-d tensor")
check_close("masked_token_loss with two real tokens", loss, torch.tensor(4.5), atol=1e-6,
            hint="average the squared error over the features of each token, then over the tokens where valid is "
                 "True (True = a real token)")
check_true(torch.equal(encoded_after, encoded) and torch.equal(target_after, target), "masked_token_loss changed "
           "the encoded or target tensor it was given (sub_ or -= work in place): compute encoded - target, a new "
           "tensor, so that the block's output stays as it was and keeps its gradient")
### BEGIN HIDDEN TESTS
LOSS_AXIS_HINT = ("average the squared error over the features of each token, the last axis (dim=-1), which leaves "
                  "one number per token, (B, T), to weigh with valid; dim=1 would average over the tokens")
gen = torch.Generator().manual_seed(20)
for trial in range(5):
    batch, length, width = (int(n) for n in torch.randint(1, 6, (3,), generator=gen))
    encoded, target = torch.randn(2, batch, length, width, generator=gen)
    valid = torch.rand(batch, length, generator=gen) < 0.6
    valid[0, 0] = True
    sq = (encoded - target).square()
    mine = attempt(f"masked_token_loss for shape {(batch, length, width)}", masked_token_loss, encoded, target, valid,
                   hint=LOSS_AXIS_HINT)
    check_close(f"masked_token_loss for shape {(batch, length, width)}", mine,
                torch.nn.functional.mse_loss(encoded[valid], target[valid]), atol=1e-6, likely_causes={
                    "PAD positions are averaged in too": sq.mean(),
                    "the squared errors are summed over the features instead of averaged (or, with one token, "
                    "averaged over dim=1, the tokens, instead of dim=-1, the features)": (
                        sq.sum(-1) * valid).sum() / valid.sum(),
                    "the sum over real tokens is divided by all B * T positions, PAD included": (
                        sq.mean(-1) * valid).sum() / valid.numel(),
                    "each sequence is averaged over its own real tokens first, then the sequences are averaged: a "
                    "token of a short sequence then weighs more than one of a long sequence": (
                        ((sq.mean(-1) * valid).sum(-1) / valid.sum(-1).clamp_min(1))[valid.any(-1)].mean()),
                })
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_masked_loss_ignores_pad", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PAD positions do not change the loss and receive no gradient."""
from course.encoder_block_checks import check_ignores_pad

torch.manual_seed(7)
check_ignores_pad(masked_token_loss, torch.randn(2, 3, 4), torch.randn(2, 3, 4),
                  valid=torch.tensor([[True, True, False], [True, True, True]]))
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(21)
for trial in range(4):
    batch, length, width = (int(n) for n in torch.randint(2, 6, (3,), generator=gen))
    valid = torch.arange(length) < torch.randint(1, length, (batch,), generator=gen)[:, None]
    check_ignores_pad(masked_token_loss, torch.randn(batch, length, width, generator=gen), torch.randn(batch, length, width, generator=gen),
                      valid)
from nboracle import probed_points

# the losses at the points the gradient checks moved `encoded` to are answers too: judged as well
for (encoded, target, valid), loss in probed_points(masked_token_loss):
    check_close(f"masked_token_loss with encoded moved a little (shape {tuple(encoded.shape)})", loss,
                torch.nn.functional.mse_loss(encoded[valid], target[valid]), atol=1e-5,
                hint="the loss must be the masked mean for any values, also for values a hair away from the ones it "
                     "saw last")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_gradients_reach_every_parameter", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Through masked_token_loss, every parameter of an encoder block gets a finite gradient."""
from course.encoder_block_checks import check_gradients

torch.manual_seed(8)
layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)  # PyTorch's block: this judges your loss
gradient_report = check_gradients(masked_token_loss, layer, torch.randn(2, 3, 4),
                                  torch.tensor([[False, False, True], [False] * 3]))  # (gradients, d_encoded)
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(22)
for trial in range(3):
    heads, batch = (int(n) for n in torch.randint(1, 4, (2,), generator=gen))
    d_head, length = int(torch.randint(2, 4, (1,), generator=gen)), int(torch.randint(2, 7, (1,), generator=gen))
    pad = torch.arange(length) >= torch.randint(1, length + 1, (batch,), generator=gen)[:, None]
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), 1) if trial else None
    torch.manual_seed(220 + trial)
    layer = nn.TransformerEncoderLayer(heads * d_head, heads, 9, dropout=0.0, batch_first=True, norm_first=bool(trial % 2))
    check_gradients(masked_token_loss, layer, torch.randn(batch, length, heads * d_head, generator=gen), pad, future)
### END HIDDEN TESTS

# %% [markdown]
# ## Reading attention weights: mixing coefficients, not explanations
#
# It is tempting to read a weight map as "the model looked at token $j$ *because* it
# matters". A weight is only the coefficient with which one head, in one layer, mixes value
# vectors. What reaches the output also goes through the value and output projections, the
# other heads, the residual path, the FFN and every later layer. To learn how much token $j$
# *influences* output $i$, intervene: remove or replace token $j$ (ablation, perturbation)
# and measure how far output $i$ moves.
#
# Here is that measurement for an untrained block of width 16 with 4 heads: replace token
# $j$ by the zero vector and record the change $\lVert \text{out}_i - \text{out}'_i \rVert$ for
# every $i$.

# %%
torch.manual_seed(0)
probe = EncoderBlock(16, 4, 32).eval()
tokens = torch.randn(1, 6, 16)
with torch.no_grad():
    base, probe_weights = probe(tokens)
    influence = torch.zeros(6, 6)  # (output i, replaced token j)
    for j in range(6):
        ablated = tokens.clone()
        ablated[:, j] = 0.0
        influence[:, j] = (probe(ablated)[0] - base)[0].norm(dim=-1)
mean_weights = probe_weights[0].mean(dim=0)  # (T, T), averaged over heads
self_weight = mean_weights.diagonal().mean().item()
self_share = (influence.diagonal().sum() / influence.sum()).item()
print(f"average weight a token puts on itself: {self_weight:.2f}")
print(f"share of the measured influence that comes from the token itself: {self_share:.2f}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
plot_attention(mean_weights, title="attention weights (mean of 4 heads)", ax=axes[0])
plot_attention(influence, title="influence: |out_i change| when token j is zeroed", ax=axes[1])
axes[1].set_xlabel("replaced token j")
axes[1].set_ylabel("output position i")
axes[1].images[0].colorbar.set_label("size of the change")
fig.tight_layout()
plt.show()

# %% [markdown]
# The weights are spread almost evenly (about 1/6 each, including the diagonal), yet each
# output depends mostly on its *own* token: the residual connection carries it past the
# attention, a path the weight map does not show at all. In a trained model the gap can go
# either way; the lesson is the method. Weights show how one head mixes; only an
# intervention measures influence.

# %% [markdown]
# ## Three families built from the same blocks
#
# The original Transformer (Vaswani et al., 2017) was built for translation, a
# sequence-to-sequence task: an **encoder** reads the source sentence, a **decoder**
# generates the target one token at a time, looking at the encoder's output through
# cross-attention. The two halves were soon used on their own, which gives three families.
#
# | family | attention | examples | made for |
# |---|---|---|---|
# | encoder-only | bidirectional: every token sees left and right context | BERT, RoBERTa, DistilBERT | understanding: classification, named entities, extractive QA |
# | decoder-only | causal: each token sees only earlier tokens | the GPT family | generation: next-token prediction |
# | encoder-decoder | encoder bidirectional, decoder causal plus cross-attention | T5, BART | sequence to sequence: translation, summarisation |
#
# The block you just built is an encoder block: without a causal mask it is bidirectional.
# With a causal mask it behaves like a decoder-only block: a GPT-2 block is essentially
# this block in pre-norm form, with a GELU in its FFN. The first question to ask about a
# task is whether it needs to *understand* an input, *generate* text, or *transform* one
# sequence into another.
#
# Bidirectional attention suits classification because the whole input is there before the
# prediction, and the meaning of a word often depends on both sides ("time *flies* like an
# arrow" against "fruit *flies* like a banana"). It cannot be used to generate, because a
# generator must not see tokens it has not produced yet.

# %% [markdown]
# ## Part E · Quiz (6 points)
#
# Answer each question with one letter, `"a"`, `"b"` or `"c"`, in the cell below.
#
# **Q1.** A batch holds two sequences of 5 positions. The first has 5 real tokens with a loss of 1.0
# each; the second has 2 real tokens with a loss of 4.0 each, then 3 PAD. What is the loss over real tokens?
#
# * a) 1.86
# * b) 2.5
# * c) 1.3
#
# **Q2.** In a post-norm block, the output projection of the attention sublayer is set to all zeros.
# What does the attention half of the block output for an input $x$?
#
# * a) a tensor of zeros, as the attention sublayer now outputs zeros
# * b) $x$ itself, unchanged, since a zero output adds nothing to it
# * c) LayerNorm($x$): the residual carries $x$, then the norm acts
#
# **Q3.** In a sentiment model, the `[CLS]` query of one head puts weight 0.8 on the word "not", and
# the model says "negative". Which experiment would show that "not" *causes* that prediction?
#
# * a) averaging that weight over every head and layer: it stays high
# * b) replacing "not" by another word, and seeing the prediction change
# * c) checking that "not" has the largest weight of its row in every layer
#
# **Q4.** A model reads a question and a paragraph, both given in full, and must mark the start and
# the end of the answer inside the paragraph. Which family fits best?
#
# * a) decoder-only: it reads the question first, then the paragraph
# * b) encoder-decoder: the question is a source, the span a target
# * c) encoder-only: each position of the paragraph is scored as a start or end
#
# **Q5.** A classmate writes the FFN as one `nn.Linear(T * d, hidden)` over the flattened sequence,
# then one back to `T * d`. What changes compared with the position-wise FFN?
#
# * a) it mixes positions with fixed weights, and works for one length T only
# * b) the parameter count only: each token is still transformed on its own
# * c) it becomes a kind of attention: the tokens now read one another by content
#
# **Q6.** You run the block with a causal mask on 6 tokens and change only the *last* token. Which of
# the block's 6 outputs change?
#
# * a) all six: after attention, the FFN spreads the change to every token
# * b) only the last: no earlier query reads it; the FFN is per token
# * c) none: the causal mask hides each token even from its own query

# %% nbgrader={"grade": false, "grade_id": "quiz_answers", "locked": false, "schema_version": 3, "solution": true}
Q1 = Q2 = Q3 = Q4 = Q5 = Q6 = None  # replace each None with "a", "b" or "c"
### BEGIN SOLUTION
Q1, Q2, Q3, Q4, Q5, Q6 = "a", "c", "b", "c", "a", "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: a loss over real tokens, by hand."""
answer = check_choice("Q1", Q1, "abc")  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "b": "2.5 averages the two sequences' means, (1 + 4) / 2, which gives each token of the short "
         "sequence more weight than a token of the long one",
    "c": "1.3 divides the 13 of real loss by all 10 positions, PAD included; the loss over real tokens "
         "divides by the real ones only"}, "abc")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: a post-norm block whose attention output is zero."""
answer = check_choice("Q2", Q2, "abc")  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "the residual connection adds the input back: the sum is x + 0, not 0",
    "b": "in post-norm the LayerNorm comes after the residual addition, so x + 0 is still normalised (x "
         "itself is what a pre-norm block would give)"}, "abc")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: what shows that a word causes a prediction."""
answer = check_choice("Q3", Q3, "abc")  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "an average of weights still describes mixing: other heads, the FFN and the residual stream "
         "can carry or cancel the word's effect",
    "c": "a large weight in every layer shows how much of a value is mixed in, not that the output "
         "depends on it: only changing the input tests a cause"}, "abc")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: the family for extracting an answer span."""
answer = check_choice("Q4", Q4, "abc")  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "a": "the whole input is there before any prediction: hiding the later words from each token throws "
         "context away for nothing",
    "b": "nothing new is generated: a start and an end are positions of the input, scored from the "
         "encoder's output, so a decoder adds nothing"}, "abc")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q5", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q5: an FFN applied to the whole flattened sequence."""
answer = check_choice("Q5", Q5, "abc")  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q5", Q5, {
    "b": "each output of a Linear over the flattened vector depends on every input: every token's "
         "output now reads every other token, with weights that fix T",
    "c": "attention's mixing weights are computed from the tokens of each input; these weights are "
         "fixed after training, the same for every sentence"}, "abc")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q6", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q6: which outputs move in a causal block."""
answer = check_choice("Q6", Q6, "abc")  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q6", Q6, {
    "a": "the FFN acts on each position on its own; only attention mixes tokens, and under a causal "
         "mask no earlier query reads the last token",
    "c": "a causal mask lets each query read its own key: the diagonal is allowed, so the last output "
         "reads the changed token"}, "abc")
### END HIDDEN TESTS

# %% [markdown]
# ## Part F · In your own words (2 points, graded by your instructor)
#
# Attention mixes tokens; the feed-forward network transforms each token on its own. Explain, in
# three or four sentences, why an encoder block needs both, and what the residual connection
# around each of them is for.

# %% [markdown] nbgrader={"grade": true, "grade_id": "block_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** Attention is the only part where tokens exchange information, but its output is a weighted
# average of value vectors: per token it is close to linear in the values. The FFN adds a
# nonlinear transformation of each token's features, applied to every position with the same
# weights, so the block can compute new features from what attention gathered. The residual
# connection adds each sublayer's input to its output, so a sublayer only has to learn a
# correction, and gradients reach early layers directly through the sum: that is what lets
# blocks stack deep and still train.
#
# **Rubric (2 points, one idea each).**
# * 1 point, the division of labour: attention is the only sublayer in which positions exchange information, and the FFN transforms each position on its own, nonlinearly, so neither can do the other's job. Earns it: both roles named, in any words ("attention mixes the tokens, the FFN processes each one"). Does not: "the FFN adds parameters" or "makes the model deeper", with no word of what each part does.
# * 1 point, the residual: each sublayer's input is added to its output, an identity path around it. Earns it: that path with one of its consequences (the sublayer only learns a correction to its input; gradients reach earlier blocks through the sum). Does not: "it helps training" or "it stabilises the model" without saying what is added to what.
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the FFN also mixes the tokens" costs the first point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * An encoder layer is self-attention (tokens exchange information) followed by a
#   position-wise FFN (each token transformed on its own, 768 → 3072 → 768 in BERT-base),
#   each wrapped by a residual connection and a LayerNorm. The output has the input's shape.
# * Post-norm is `norm(x + S(x))`; pre-norm is `x + S(norm(x))` and keeps a clean residual
#   path, which makes deep stacks easier to train. Both have the same parameters: the
#   placement must match the checkpoint.
# * `nn.MultiheadAttention(d, H)` has $4d^2 + 4d$ parameters whatever `H`: 1,050,624 at
#   `d = 512`. It averages the heads' weights unless told `average_attn_weights=False`.
# * Masks in `nn.MultiheadAttention` mean *drop* when True; a key padding mask drops keys
#   only, so losses and pooling need the valid mask too. Test a causal mask by perturbing the
#   future, with a control.
# * Attention weights are mixing coefficients of one head in one layer, not explanations:
#   measure influence by ablation or perturbation.
# * Encoder-only (BERT, RoBERTa, DistilBERT) understands, decoder-only (GPT) generates,
#   encoder-decoder (T5, BART) maps one sequence to another.
#
# Next, chapter 05 shows that the block you built cannot tell the order of its tokens, and
# adds positions.
