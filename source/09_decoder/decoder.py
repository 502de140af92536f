# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 09 · The decoder, and the whole Transformer from your own parts
#
# In chapter 07 the model was `nn.Transformer`: you wrote the batches, the masks and the
# decoding loops around it, but not what is inside. This chapter opens the box. The encoder
# block is chapter 04's; what is new is the **decoder block**, and in it **cross-attention**,
# the one place where the two halves of the model meet: the decoder asks (queries), the
# encoder's output answers (keys and values).
#
# You will write
#
# * `cross_attention(attention, x, memory, memory_padding_mask=None)`, queries from the decoder,
#   keys and values from the encoder output;
# * `DecoderBlock(width, heads, hidden, norm_first=False)`: masked self-attention,
#   cross-attention and a feed-forward network, each with a residual and a LayerNorm, in both
#   norm placements, returning the cross-attention weights of every head;
# * `encode` and `decode` of an `EncoderDecoder` built from chapter 04's encoder blocks and
#   your decoder blocks;
#
# then train that model on chapter 07's digit reversal, check that `nn.Transformer` loaded
# with the same weights computes the same thing, and look at what its cross-attention learned.
# "Your own parts" means the blocks, their wiring and the whole model: the attention inside
# each block is PyTorch's `nn.MultiheadAttention`, as in chapter 04. Your chapter 06 attention
# runs inside a model that does real work in chapter 10.
#
# **Conventions** (those of chapter 04). Tensors are batch first. The decoder input `x` is
# `(B, T, D)`; the encoder output, the **memory**, is `(B, S, D)`, and `S` need not equal `T`.
# An attention with `H` heads splits the width `D` into heads of width $d_{\text{head}} = D / H$.
# Masks follow `nn.MultiheadAttention`: **True means drop**. A causal mask is `(T, T)`, True
# above the diagonal; a memory padding mask is `(B, S)`, True at PAD positions of the source.
# Dropout is 0 throughout, so every check is deterministic.
#
# **Time:** about 3.5 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 to 07: chapter 04's encoder block and chapter 07's task, batches and decoding.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# under_nbgrader() is True while your notebook is being graded: the long demos are skipped then
from course import attempt, check_choice, check_close, check_true, under_nbgrader
from course.diagrams import draw_encoder_decoder
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import fresh, read_state, set_training
from course.plots import plot_attention, plot_curves

torch.set_printoptions(precision=3, sci_mode=False)
torch.set_num_threads(1)  # a model this small runs faster on one thread than on two that wait for each other

# %% [markdown]
# ## The whole architecture
#
# Here is the model you will have assembled by the end, drawn for the sentence pair of
# chapter 07: the encoder reads "the black cat"; the decoder has produced "con mèo" so far
# (after `<BOS>`) and predicts the next word, "đen". Follow the purple path: the encoder's
# output, the memory, enters **every** decoder block, as the keys and values of its
# cross-attention; the queries come from the decoder's own stream below it. The grey paths are
# the residual connections: each sublayer only adds a correction to what flows past it.

# %%
# demo only: the figure (autograde skips it)
draw_encoder_decoder()
plt.show()

# %% [markdown]
# Three kinds of attention appear in the figure; the table is worth knowing by heart.
#
# | attention | where | queries from | keys, values from | causal mask | padding mask | scores |
# |---|---|---|---|---|---|---|
# | self-attention | encoder | source | source | no | the source's | $S \times S$ |
# | masked self-attention | decoder | target | target | **yes** | (the target's, if padded) | $T \times T$ |
# | cross-attention | decoder | target | memory (encoder output) | **no** | the source's | $T \times S$ |
#
# The causal mask belongs to the decoder's self-attention only: the source is known in full
# before decoding starts, so no source position is "in the future". The source's padding mask
# goes wherever the source provides the keys: the encoder's self-attention and every
# cross-attention.
#
# ## Provided: chapter 04's parts
#
# The encoder block and the feed-forward network, as you wrote them in chapter 04. They are
# given here (locked) so that this chapter does not depend on your chapter 04 answers.

# %% nbgrader={"grade": false, "grade_id": "chapter_04_parts", "locked": true, "schema_version": 3, "solution": false}
class FeedForward(nn.Module):
    """Position-wise FFN of chapter 04: linear2(relu(linear1(x))), width -> hidden -> width."""

    def __init__(self, width, hidden):
        super().__init__()
        self.linear1 = nn.Linear(width, hidden)
        self.linear2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class EncoderBlock(nn.Module):
    """Chapter 04's encoder block: self-attention and an FFN, each with a residual and a LayerNorm."""

    def __init__(self, width, heads, hidden, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.ffn = FeedForward(width, hidden)

    def forward(self, x, padding_mask=None, causal_mask=None):  # -> (B, T, D), (B, H, T, T)
        def attend(h):
            return self.attention(h, h, h, key_padding_mask=padding_mask, attn_mask=causal_mask,
                                  need_weights=True, average_attn_weights=False)

        if self.norm_first:
            attended, weights = attend(self.norm1(x))
            x = x + attended
            return x + self.ffn(self.norm2(x)), weights
        attended, weights = attend(x)
        x = self.norm1(x + attended)
        return self.norm2(x + self.ffn(x)), weights


# %% [markdown]
# `future_mask(n)` is the `(n, n)` causal mask in `nn.MultiheadAttention`'s convention,
# **True = drop** (chapter 03's `causal_mask` used the opposite one, True = allowed); use it in
# `decode`.
#
# The graded tests choose every parameter: `new_block` builds your `DecoderBlock` and loads
# parameters the test drew, by the names the exercise gives (`load_state`), so no result
# depends on the order in which you create the submodules or on their random initial values.
# The checks of what the exercise promises (shapes, the causal mask, the memory seen in full, PAD
# changing nothing) live in `course/decoder_checks.py`; each test cell imports the one it runs, and
# you can read it there. The graded tests also compare what your block computes with
# `nn.TransformerDecoderLayer` holding the same parameters, the computation Part B describes; that
# comparison runs on the grader's side. They call your code through `attempt`, which turns an exception into a failed
# check that names the call and says where to look.

# %% nbgrader={"grade": false, "grade_id": "test_tools", "locked": true, "schema_version": 3, "solution": false}
from course.decoder_checks import BLOCK_HINT, MODEL_HINT, block_state, load_state


def future_mask(n):
    """(n, n) bool, True above the diagonal = the pairs to DROP (query i may not look at keys j > i).

    nn.MultiheadAttention's convention. Chapter 03's causal_mask(T) was the opposite one, True = allowed.
    """
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def initial_state(seed, width=64, heads=4, hidden=128, layers=2, max_positions=16, norm_first=False):
    """The starting parameters of EncoderDecoder(width, heads, hidden, layers, max_positions), by name.

    PyTorch's default initialisation, drawn after torch.manual_seed(seed) in the order of the text's
    list of submodules, so a model starts from the same weights however its parts were created.
    """
    torch.manual_seed(seed)

    def attention():
        return nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)

    def decoder_parts():
        return nn.ModuleDict({"self_attention": attention(), "cross_attention": attention(),
                              "norm1": nn.LayerNorm(width), "norm2": nn.LayerNorm(width),
                              "norm3": nn.LayerNorm(width), "ffn": FeedForward(width, hidden)})

    parts = nn.ModuleDict({
        "token_embedding": nn.Embedding(VOCAB, width), "position_embedding": nn.Embedding(max_positions, width),
        "encoder_blocks": nn.ModuleList(EncoderBlock(width, heads, hidden, norm_first) for _ in range(layers)),
        "encoder_norm": nn.LayerNorm(width),
        "decoder_blocks": nn.ModuleList(decoder_parts() for _ in range(layers)),
        "decoder_norm": nn.LayerNorm(width), "head": nn.Linear(width, VOCAB)})
    return {key: value.detach().clone() for key, value in parts.state_dict().items()}


def new_model(seed, width=64, heads=4, hidden=128, layers=2, norm_first=False, noise=0.0):
    """EncoderDecoder(...) holding initial_state(seed, ...), plus `noise` times a normal draw on every parameter."""
    state = initial_state(seed, width, heads, hidden, layers, norm_first=norm_first)
    gen = torch.Generator().manual_seed(seed)
    state = {key: state[key] + noise * torch.randn(state[key].shape, generator=gen) for key in sorted(state)}
    what = f"EncoderDecoder(width={width}, heads={heads}, hidden={hidden}, layers={layers}, norm_first={norm_first})"
    model = attempt(what, EncoderDecoder, width=width, heads=heads, hidden=hidden, layers=layers, norm_first=norm_first)
    return load_state(what, model, state), state


def new_block(width, heads, hidden, norm_first=False, seed=0):
    """DecoderBlock(width, heads, hidden, norm_first) holding parameters drawn from `seed` (block_state), in eval mode."""
    what = f"DecoderBlock({width}, {heads}, {hidden}, norm_first={norm_first})"
    block = attempt(what, DecoderBlock, width, heads, hidden, norm_first=norm_first)
    set_training(load_state(what, block, block_state(width, hidden, seed)), False)  # eval mode, as nn.Module.eval() does
    return block

# %% [markdown]
# ## Part A · Cross-attention (3 points)
#
# Cross-attention is the attention formula of chapter 01 with its inputs taken from two
# sequences. With decoder states $X$ (`(T, D)`) and memory $M$ (`(S, D)`), per head
#
# (with $W^Q, W^K, W^V$ of shape $D \times d_{\text{head}}$, so the scale is the width of one head)
#
# $$Q = X W^Q, \quad K = M W^K, \quad V = M W^V, \qquad
#   \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_{\text{head}}}}\right) V .$$
#
# The score matrix is $T \times S$: one row per decoder position, one column per source
# position. Each row is a distribution over the source, so output $i$ is a mixture of source
# vectors chosen for decoder position $i$. Nothing mixes decoder positions with each other
# here; that is the job of the decoder's self-attention.
#
# `nn.MultiheadAttention` already does the projections and the heads; what matters is *which
# tensor goes where*. Its call is `attention(query, key, value, key_padding_mask=...,
# need_weights=True, average_attn_weights=False)`.
#
# Write `cross_attention(attention, x, memory, memory_padding_mask=None)` returning
# `(out, weights)`: `out` `(B, T, D)` and the weights of **every head** `(B, H, T, S)`
# (by default `nn.MultiheadAttention` averages them over heads). The padding mask (True at PAD)
# removes PAD source positions from every query's distribution.

# %% nbgrader={"grade": false, "grade_id": "cross_attention", "locked": false, "schema_version": 3, "solution": true}
def cross_attention(attention, x, memory, memory_padding_mask=None):
    """Queries from x (B, T, D), keys and values from memory (B, S, D) -> out (B, T, D), weights (B, H, T, S)."""
    ### BEGIN SOLUTION
    return attention(x, memory, memory, key_padding_mask=memory_padding_mask,
                     need_weights=True, average_attn_weights=False)
    ### END SOLUTION


# %% [markdown]
# Check it: 3 decoder positions attend over a memory of 5 positions, the last of which is
# PAD in the first sequence. Every row of weights sums to 1 and puts weight 0 on the PAD key.

# %%
torch.manual_seed(0)
demo_attention = nn.MultiheadAttention(8, 2, dropout=0.0, batch_first=True)
decoder_states, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)  # (B, T, D), (B, S, D)
memory_pad = torch.tensor([[False, False, False, False, True], [False] * 5])  # (B, S), True = PAD
with torch.no_grad():
    mixed, cross_weights = cross_attention(demo_attention, decoder_states, memory, memory_pad)
print("out:", tuple(mixed.shape), "  weights:", tuple(cross_weights.shape), "(batch, head, query, key)")
print("weight on the PAD key:", cross_weights[0, :, :, 4].abs().max().item())
assert tuple(mixed.shape) == (2, 3, 8) and tuple(cross_weights.shape) == (2, 2, 3, 5)
assert cross_weights[0, :, :, 4].abs().max() == 0 and torch.allclose(cross_weights.sum(-1), torch.ones(2, 2, 3))

# %% nbgrader={"grade": true, "grade_id": "test_cross_attention_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""cross_attention returns (out (B, T, D), weights (B, H, T, S)): one row per decoder position, one column per memory position."""
from course.decoder_checks import check_cross_shapes  # the checks of this chapter: course/decoder_checks.py

torch.manual_seed(1)
check_cross_shapes(cross_attention, batch=2, heads=2, d_head=4, length=3, source_length=5)
### BEGIN HIDDEN TESTS
gen = np.random.default_rng(91)
for _ in range(5):
    sizes = [int(n) for n in gen.integers(1, 5, size=3)]
    length, source_length = int(gen.integers(1, 7)), int(gen.integers(1, 9))
    check_cross_shapes(cross_attention, sizes[0], sizes[1], sizes[2] + 1, length, source_length + (source_length == length))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_cross_attention_values", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Each decoder position's output depends on its own query and on the memory, never on the other decoder positions."""
torch.manual_seed(2)
attention = fresh(nn.MultiheadAttention, 8, 2, dropout=0.0, batch_first=True)
x, memory = torch.randn(1, 4, 8), torch.randn(1, 4, 8)  # T = S, so every mix-up runs without an error
edited_x = x.clone()
edited_x[:, 0] += torch.linspace(-2.0, 3.0, 8)  # change decoder position 0 only
edited_memory = memory + torch.linspace(1.0, -2.0, 8)
with torch.no_grad():
    base = attempt("cross_attention(attention, x, memory)", cross_attention, attention, x, memory)[0]
    moved_x = attempt("cross_attention with x edited", cross_attention, attention, edited_x, memory)[0]
    moved_memory = attempt("cross_attention with memory edited", cross_attention, attention, x, edited_memory)[0]
mixed = not torch.allclose(base[:, 1:], moved_x[:, 1:], atol=1e-6)  # message only: names the mix-up
check_true(not mixed, "changing decoder position 0 moved the outputs of positions 1 to 3: in cross-attention the keys and "
           "values come from memory, not from x, so the decoder positions do not mix")
same_own = torch.allclose(base[:, 0], moved_x[:, 0], atol=1e-6)  # message only: each output meets the test's below
check_true(not same_own, "changing decoder position 0 did not change its own output: the queries must come from x")
same_memory = torch.allclose(base, moved_memory, atol=1e-6)  # message only: each output meets the test's below
check_true(not same_memory, "changing the memory did not change the output: the keys and values come from memory")
### BEGIN HIDDEN TESTS
with torch.no_grad():  # each output above, with the test's attention
    for what, mine, (queries, source) in (("x, memory", base, (x, memory)), ("x edited, memory", moved_x, (edited_x, memory)),
                                          ("x, memory edited", moved_memory, (x, edited_memory))):
        check_close(f"out of cross_attention(attention, {what})", mine, attention(queries, source, source)[0], atol=1e-5,
                    likely_causes={"the keys and values come from x instead of memory": attention(queries, queries,
                                                                                                   queries)[0]},
                    hint="call the attention with query = x, key = memory, value = memory")
gen = torch.Generator().manual_seed(92)
for _ in range(5):
    heads, d_head, batch = (int(n) for n in torch.randint(1, 4, (3,), generator=gen))
    length, source_length = (int(n) for n in torch.randint(1, 7, (2,), generator=gen))
    width = heads * d_head
    attention = fresh(nn.MultiheadAttention, width, heads, dropout=0.0, batch_first=True)
    with torch.no_grad():
        for p in attention.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    x, memory = torch.randn(batch, length, width, generator=gen), torch.randn(batch, source_length, width, generator=gen)
    with torch.no_grad():
        out, weights = attempt("cross_attention", cross_attention, attention, x, memory,
                               hint="the queries come from x; the keys and the values both come from memory")
        want, want_weights = attention(x, memory, memory, need_weights=True, average_attn_weights=False)
        causes = {}
        if length == source_length:
            causes["the keys and values come from x instead of memory"] = attention(x, x, x)[0]
            causes["the values come from x instead of memory"] = attention(x, memory, x)[0]
            causes["the keys come from x instead of memory"] = attention(x, x, memory)[0]
    where = f"{heads} heads, width {width}, T={length}, S={source_length}"
    check_close(f"out of cross_attention ({where})", out, want, atol=1e-5, likely_causes=causes,
                hint="call the attention with query = x, key = memory, value = memory")
    check_close(f"weights of cross_attention ({where})", weights, want_weights, atol=1e-5,
                hint="return the weights of every head, as nn.MultiheadAttention gives them")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_cross_attention_padding", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PAD memory positions get weight 0 from every query in every head, and appending PAD changes no output."""
from course.decoder_checks import check_memory_padding

torch.manual_seed(3)
check_memory_padding(cross_attention, fresh(nn.MultiheadAttention, 8, 2, dropout=0.0, batch_first=True), heads=2,
                     x=torch.randn(2, 3, 8), memory=torch.randn(2, 5, 8), lengths=torch.tensor([3, 5]))
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(93)
for _ in range(4):
    heads, d_head, batch = (int(n) for n in torch.randint(1, 4, (3,), generator=gen))
    length, source_length = int(torch.randint(1, 6, (1,), generator=gen)), int(torch.randint(2, 8, (1,), generator=gen))
    lengths = torch.randint(1, source_length + 1, (batch + 1,), generator=gen)
    lengths[0] = min(int(lengths[0]), source_length - 1)
    check_memory_padding(cross_attention, fresh(nn.MultiheadAttention, heads * d_head, heads, dropout=0.0, batch_first=True), heads,
                         torch.randn(batch + 1, length, heads * d_head, generator=gen),
                         torch.randn(batch + 1, source_length, heads * d_head, generator=gen), lengths)
### END HIDDEN TESTS

# %% [markdown]
# ### Predict, then run (1 point)
#
# Before you build the block, predict what reaches where. Take an untrained encoder-decoder with a
# source of 6 tokens and a decoder input of 7 tokens, the decoder's self-attention causal, its
# cross-attention as in Part A. Change **the last source token** and run it again: at how many of
# the 7 decoder positions does the output change? Then, from the original inputs, change **the last
# decoder input token** instead: at how many positions does the output change now? Assign the two
# counts to `PREDICTED_CHANGED_BY_SOURCE` and `PREDICTED_CHANGED_BY_DECODER`. Only the exact counts
# earn the point. The cell after the test measures both on PyTorch's `nn.Transformer`.

# %% nbgrader={"grade": false, "grade_id": "predict_changed_positions", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_CHANGED_BY_SOURCE = None  # replace None with your count, a number
PREDICTED_CHANGED_BY_DECODER = None  # replace None with your count, a number
### BEGIN SOLUTION
PREDICTED_CHANGED_BY_SOURCE = 7  # the cross-attention has no causal mask: every position reads the whole memory
PREDICTED_CHANGED_BY_DECODER = 1  # causal self-attention: only the last position reads the last token
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_changed_positions", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The decoder positions whose output changes with the last source token, and with the last decoder token."""
from course import check_number

by_source = check_number("PREDICTED_CHANGED_BY_SOURCE", PREDICTED_CHANGED_BY_SOURCE)  # your number, as the grader reads it
by_decoder = check_number("PREDICTED_CHANGED_BY_DECODER", PREDICTED_CHANGED_BY_DECODER)
### BEGIN HIDDEN TESTS
from course import check_prediction

by_source = check_prediction("PREDICTED_CHANGED_BY_SOURCE", PREDICTED_CHANGED_BY_SOURCE, 7, rel=0, known=(
    (1, "that would hold if the cross-attention were causal too: it has no causal mask, so every decoder position "
        "reads every source token through the memory"),
    (0, "the decoder reads the source through the cross-attention, whose keys and values come from the memory, "
        "and the memory at every source position changes with that token"),
), hint="ask which decoder positions read the memory entry of the last source token: the cross-attention has no "
        "causal mask")
by_decoder = check_prediction("PREDICTED_CHANGED_BY_DECODER", PREDICTED_CHANGED_BY_DECODER, 1, rel=0, known=(
    (7, "the decoder's self-attention is causal: an earlier position never reads a later decoder token, and the "
        "cross-attention reads only the memory, which the decoder input does not change"),
    (0, "the last position reads its own token: the causal mask keeps the diagonal, so its output changes"),
), hint="ask which decoder positions can read the last decoder token: the self-attention is causal, the "
        "cross-attention reads only the memory")
### END HIDDEN TESTS

# %%
torch.manual_seed(0)
measured_model = nn.Transformer(32, 4, 1, 1, 128, dropout=0.0, batch_first=True).eval()
source_in, decoder_in = torch.randn(1, 6, 32), torch.randn(1, 7, 32)  # embedded tokens
source_moved, decoder_moved = source_in.clone(), decoder_in.clone()
source_moved[:, -1] += 1.0
decoder_moved[:, -1] += 1.0


def run(src, tgt):  # (1, 7, 32): the decoder's output at each of its 7 positions
    return measured_model(src, tgt, tgt_mask=future_mask(7))


with torch.no_grad():
    base = run(source_in, decoder_in)
    changed_by_source = int(((run(source_moved, decoder_in) - base).abs().amax(-1) > 1e-6).sum())
    changed_by_decoder = int(((run(source_in, decoder_moved) - base).abs().amax(-1) > 1e-6).sum())
print(f"decoder positions changed by the last source token: {changed_by_source} of 7; "
      f"by the last decoder token: {changed_by_decoder} of 7")

# %% [markdown]
# ## Part B · The decoder block (10 points)
#
# A decoder block has three sublayers where the encoder block has two:
#
# 1. **masked self-attention** over the decoder's own tokens, with the causal mask, so that
#    position $i$ sees only positions $\le i$;
# 2. **cross-attention** to the memory, with the source's padding mask and no causal mask;
# 3. the position-wise **feed-forward network**.
#
# Each is wrapped by a residual connection and a LayerNorm, in either placement of chapter 04
# (`norm1` wraps the self-attention, `norm2` the cross-attention, `norm3` the FFN):
#
# | placement | the three steps |
# |---|---|
# | post-norm (`norm_first=False`) | `x = norm1(x + self_attn(x))`; `x = norm2(x + cross(x, memory))`; `x = norm3(x + ffn(x))` |
# | pre-norm (`norm_first=True`) | `x = x + self_attn(norm1(x))`; `x = x + cross(norm2(x), memory)`; `x = x + ffn(norm3(x))` |
#
# In pre-norm only the decoder's stream is normalised before cross-attention: the memory
# enters as it is (the encoder already ends with a LayerNorm, as you will see in Part C).
#
# **What to build.** `DecoderBlock(width, heads, hidden, norm_first=False)` with submodules
# `self_attention` and `cross_attention`, both `nn.MultiheadAttention(width, heads,
# dropout=0.0, batch_first=True)`, `norm1`, `norm2`, `norm3` (`nn.LayerNorm(width)`) and
# `ffn` (`FeedForward(width, hidden)`). `forward(x, memory, causal_mask=None,
# memory_padding_mask=None)` returns `(out, cross_weights)`: `out` `(B, T, D)` and the
# cross-attention weights of every head `(B, H, T, S)`. Your `cross_attention` from Part A
# is there to be used. Mind the two names: `self.cross_attention` is the block's
# `nn.MultiheadAttention` *module* (the name the tests and the comparison with
# `nn.TransformerDecoderLayer` expect), `cross_attention` is your Part A *function*, which takes that module as its
# first argument: `cross_attention(self.cross_attention, h, memory, memory_padding_mask)`. This is the computation of `nn.TransformerDecoderLayer(width, heads,
# hidden, dropout=0.0, activation="relu", batch_first=True, norm_first=...)`.

# %% nbgrader={"grade": false, "grade_id": "decoder_block", "locked": false, "schema_version": 3, "solution": true}
class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the memory and an FFN, each with a residual and a LayerNorm."""

    def __init__(self, width, heads, hidden, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        ### BEGIN SOLUTION
        self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.norm3 = nn.LayerNorm(width)
        self.ffn = FeedForward(width, hidden)
        ### END SOLUTION

    def forward(self, x, memory, causal_mask=None, memory_padding_mask=None):
        """x (B, T, D), memory (B, S, D), masks True = drop -> out (B, T, D), cross weights (B, H, T, S)."""
        ### BEGIN SOLUTION
        def attend_to_itself(h):
            return self.self_attention(h, h, h, attn_mask=causal_mask, need_weights=False)[0]

        def attend_to_memory(h):
            return cross_attention(self.cross_attention, h, memory, memory_padding_mask)

        if self.norm_first:
            x = x + attend_to_itself(self.norm1(x))
            attended, weights = attend_to_memory(self.norm2(x))
            x = x + attended
            x = x + self.ffn(self.norm3(x))
        else:
            x = self.norm1(x + attend_to_itself(x))
            attended, weights = attend_to_memory(x)
            x = self.norm2(x + attended)
            x = self.norm3(x + self.ffn(x))
        return x, weights
        ### END SOLUTION


# %% [markdown]
# ### Check it: the same computation as PyTorch's layer
#
# Copy your block's parameters into an `nn.TransformerDecoderLayer`, module by module, and
# the two agree in both placements, with a causal mask and a memory padding mask. (Train
# mode keeps PyTorch on its plain code path; with dropout 0 it is deterministic.)

# %%
def pytorch_decoder_layer(block):
    """An nn.TransformerDecoderLayer holding a copy of `block`'s parameters."""
    layer = nn.TransformerDecoderLayer(block.self_attention.embed_dim, block.self_attention.num_heads,
                                       block.ffn.linear1.out_features, dropout=0.0, activation="relu",
                                       batch_first=True, norm_first=block.norm_first)
    for mine, theirs in ((block.self_attention, layer.self_attn), (block.cross_attention, layer.multihead_attn),
                         (block.ffn.linear1, layer.linear1), (block.ffn.linear2, layer.linear2),
                         (block.norm1, layer.norm1), (block.norm2, layer.norm2), (block.norm3, layer.norm3)):
        theirs.load_state_dict(read_state(mine))  # the block's own tensors, as they are
    return layer.train()


x, memory = torch.randn(2, 4, 8), torch.randn(2, 6, 8)  # (B, T, D), (B, S, D)
memory_pad = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])
for norm_first in (False, True):
    torch.manual_seed(0)
    block = DecoderBlock(8, 2, 16, norm_first=norm_first)
    with torch.no_grad():
        ours, cross_weights = block(x, memory, causal_mask=future_mask(4), memory_padding_mask=memory_pad)
        theirs = pytorch_decoder_layer(block)(x, memory, tgt_mask=future_mask(4), memory_key_padding_mask=memory_pad)
    agree = torch.allclose(ours, theirs, atol=1e-5)
    print(f"norm_first={norm_first}: out {tuple(ours.shape)}, cross weights {tuple(cross_weights.shape)}, "
          f"matches nn.TransformerDecoderLayer: {agree}")
    assert agree, f"norm_first={norm_first}: your block and nn.TransformerDecoderLayer disagree"

# %% nbgrader={"grade": true, "grade_id": "test_decoder_modules", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""self_attention and cross_attention (each its own) compute nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True), norm1..norm3 nn.LayerNorm(width), ffn FeedForward."""
from course.decoder_checks import check_decoder_modules

check_decoder_modules(DecoderBlock, 8, 2, 16, norm_first=False, seed=94)
### BEGIN HIDDEN TESTS
gen = np.random.default_rng(94)
for trial in range(4):
    heads = int(gen.integers(1, 5))
    check_decoder_modules(DecoderBlock, heads * int(gen.integers(2, 5)), heads, int(gen.integers(2, 20)), bool(trial % 2), 940 + trial)
from instructor.references.decoder import unchanged_when_its_weights_are_loaded  # the grader's side only

unchanged_when_its_weights_are_loaded(DecoderBlock)  # as built, then the same weights loaded into it
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_decoder_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""DecoderBlock returns (out (B, T, D), cross_weights (B, H, T, S)), also when T and S differ."""
from course.decoder_checks import check_decoder_shapes

torch.manual_seed(4)
check_decoder_shapes(new_block(8, 2, 16, seed=43), batch=2, heads=2, width=8, length=3, source_length=5,
                     norm_first=False)
### BEGIN HIDDEN TESTS
gen = np.random.default_rng(95)
for trial in range(4):
    length = int(gen.integers(1, 6))
    batch, heads, d_head = int(gen.integers(1, 4)), int(gen.integers(1, 4)), int(gen.integers(2, 4))
    block = new_block(heads * d_head, heads, 2 * heads * d_head, norm_first=bool(trial % 2), seed=40 + length)
    check_decoder_shapes(block, batch, heads, heads * d_head, length, length + int(gen.integers(1, 4)), bool(trial % 2))
from instructor.references.decoder import unchanged_when_its_weights_are_loaded  # the grader's side only

unchanged_when_its_weights_are_loaded(DecoderBlock)  # as built, then the same weights loaded into it
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_decoder_causal", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With the causal mask, changing a later decoder token moves no earlier output (and does move its own)."""
from course.decoder_checks import check_decoder_causal

torch.manual_seed(5)
check_decoder_causal(new_block(8, 2, 16, seed=5), torch.randn(2, 4, 8), torch.randn(2, 6, 8))
### BEGIN HIDDEN TESTS
from instructor.references.decoder import built_block, causal_agrees, decoder_layer, same_layer  # the grader's side only

torch.manual_seed(5)  # the example above, every output compared with nn.TransformerDecoderLayer
causal_agrees(new_block(8, 2, 16, seed=5), same_layer(8, 2, 16, seed=5), torch.randn(2, 4, 8), torch.randn(2, 6, 8))
gen = torch.Generator().manual_seed(96)
for trial in range(4):  # widths of 4 and more: LayerNorm over 2 features can only output two values
    heads, d_head = int(torch.randint(1, 4, (1,), generator=gen)), int(torch.randint(4, 6, (1,), generator=gen))
    length, source_length = int(torch.randint(2, 7, (1,), generator=gen)), int(torch.randint(1, 8, (1,), generator=gen))
    block = new_block(heads * d_head, heads, 7, norm_first=bool(trial % 2), seed=960 + trial)
    causal_agrees(block, same_layer(heads * d_head, heads, 7, bool(trial % 2), 960 + trial), torch.randn(2, length, heads * d_head, generator=gen),
                         torch.randn(2, source_length, heads * d_head, generator=gen))
block, state = built_block(DecoderBlock, 8, 2, 16)  # the weights it was built with, nothing written
causal_agrees(block, decoder_layer(state, 8, 2, 16), torch.randn(2, 4, 8, generator=gen), torch.randn(2, 6, 8, generator=gen))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_decoder_sees_all_memory", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Cross-attention takes no causal mask: the first decoder position sees the last memory position."""
from course.decoder_checks import check_sees_all_memory

torch.manual_seed(6)
check_sees_all_memory(new_block(8, 2, 16, seed=6), 2, torch.randn(2, 4, 8), torch.randn(2, 4, 8))  # T = S
### BEGIN HIDDEN TESTS
from instructor.references.decoder import built_block, decoder_layer, same_layer, sees_all_memory_agrees  # the grader's side only

torch.manual_seed(6)  # the example above, compared with nn.TransformerDecoderLayer
sees_all_memory_agrees(new_block(8, 2, 16, seed=6), same_layer(8, 2, 16, seed=6), 2, torch.randn(2, 4, 8),
                       torch.randn(2, 4, 8))
gen = torch.Generator().manual_seed(97)
for trial in range(4):
    heads, d_head = int(torch.randint(1, 4, (1,), generator=gen)), int(torch.randint(4, 6, (1,), generator=gen))
    length = int(torch.randint(2, 7, (1,), generator=gen))
    source_length = length if trial < 2 else length + 1
    block = new_block(heads * d_head, heads, 6, norm_first=bool(trial % 2), seed=970 + trial)
    sees_all_memory_agrees(block, same_layer(heads * d_head, heads, 6, bool(trial % 2), 970 + trial), heads, torch.randn(2, length, heads * d_head, generator=gen),
                          torch.randn(2, source_length, heads * d_head, generator=gen))
block, state = built_block(DecoderBlock, 8, 2, 16)  # the weights it was built with, nothing written
sees_all_memory_agrees(block, decoder_layer(state, 8, 2, 16), 2, torch.randn(2, 4, 8, generator=gen),
                       torch.randn(2, 5, 8, generator=gen))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_decoder_memory_padding", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PAD memory positions get cross weight 0 and do not influence any output; the decoder's own positions are not masked by it."""
from course.decoder_checks import check_decoder_padding

torch.manual_seed(7)
check_decoder_padding(new_block(8, 2, 16, seed=7), 2, torch.randn(2, 3, 8), torch.randn(2, 5, 8), lengths=torch.tensor([3, 5]))
### BEGIN HIDDEN TESTS
from instructor.references.decoder import built_block, decoder_layer, padding_agrees, same_layer  # the grader's side only

torch.manual_seed(7)  # the example above, compared with nn.TransformerDecoderLayer
padding_agrees(new_block(8, 2, 16, seed=7), same_layer(8, 2, 16, seed=7), 2, torch.randn(2, 3, 8), torch.randn(2, 5, 8),
               lengths=torch.tensor([3, 5]))
gen = torch.Generator().manual_seed(98)
for trial in range(4):
    heads, d_head, batch = (int(n) for n in torch.randint(1, 4, (3,), generator=gen))
    d_head += 2  # widths of 3 and more
    length, source_length = int(torch.randint(1, 6, (1,), generator=gen)), int(torch.randint(2, 8, (1,), generator=gen))
    if trial == 0:
        source_length = length = max(length, 2)  # T = S: a mask put on the wrong attention runs without an error
    lengths = torch.randint(1, source_length + 1, (batch + 1,), generator=gen)
    lengths[0] = min(int(lengths[0]), source_length - 1)
    block = new_block(heads * d_head, heads, 5, norm_first=bool(trial % 2), seed=980 + trial)
    padding_agrees(block, same_layer(heads * d_head, heads, 5, bool(trial % 2), 980 + trial), heads, torch.randn(batch + 1, length, heads * d_head, generator=gen),
                          torch.randn(batch + 1, source_length, heads * d_head, generator=gen), lengths)
block, state = built_block(DecoderBlock, 8, 2, 16)  # the weights it was built with, nothing written
padding_agrees(block, decoder_layer(state, 8, 2, 16), 2, torch.randn(3, 3, 8, generator=gen), torch.randn(3, 5, 8, generator=gen),
               lengths=torch.tensor([3, 5, 4]))
### END HIDDEN TESTS

# %% [markdown]
# The next tests compare your block with `nn.TransformerDecoderLayer` on random widths, head
# counts, lengths and masks, after setting every parameter (the LayerNorm scales and shifts
# included) to random values, so that `norm1`, `norm2` and `norm3` can no longer stand in for
# each other. The visible parts check two properties that tell the placements apart:
#
# * post-norm ends with `norm3`, so at initialisation (scale 1, shift 0) every output token has
#   mean 0 and standard deviation 1 over its features;
# * pre-norm keeps a clean residual path: if all three sublayers output zero (zero the weights
#   and biases of both attentions' `out_proj` and of `ffn.linear2`), the block returns `x`.

# %% nbgrader={"grade": true, "grade_id": "test_decoder_post_norm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""norm_first=False is post-norm and agrees with nn.TransformerDecoderLayer(norm_first=False)."""
### BEGIN HIDDEN TESTS
from nboracle import read_parameters

from instructor.references.decoder import decoder_layer, layer_cross_weights  # the grader's side only


def _by_hand(layer, x, memory, future, pad, pre, mistake=None):
    """The decoder block computed from the reference layer's parts, with one named mistake switched on."""
    n1, n2, n3 = layer.norm1, layer.norm2, layer.norm3
    if mistake == "norms":
        n1, n2, n3 = n2, n1, n3
    if mistake == "norms 2 3":
        n1, n2, n3 = n1, n3, n2
    self_mask = None if mistake == "no causal" else future

    def self_attend(h):
        return layer.self_attn(h, h, h, attn_mask=self_mask, need_weights=False)[0]

    def cross(h):
        source = h if mistake == "kv from x" else n2(memory) if mistake == "memory normed" else memory
        mask = None if mistake in ("no pad", "kv from x") else pad
        extra = future if mistake == "causal cross" else None
        return layer.multihead_attn(h, source, source, key_padding_mask=mask, attn_mask=extra, need_weights=False)[0]

    def ffn(h):
        return layer.linear2(torch.relu(layer.linear1(h)))

    keep_cross = 0.0 if mistake == "no cross residual" else 1.0
    keep_ffn = 0.0 if mistake == "no ffn residual" else 1.0
    if pre:
        x = x + self_attend(n1(x))
        x = keep_cross * x + cross(n2(x))
        return keep_ffn * x + ffn(n3(x))
    x = n1(x + self_attend(x))
    x = n2(keep_cross * x + cross(x))
    return n3(keep_ffn * x + ffn(x))


_MISTAKES = {
    "kv from x": "the keys and values of the cross-attention come from the decoder (x), not from memory",
    "causal cross": "the causal mask is also applied to the cross-attention",
    "no pad": "the memory padding mask is ignored",
    "no cross residual": "the residual connection around the cross-attention is missing",
    "no ffn residual": "the residual connection around the FFN is missing",
    "norms": "norm1 and norm2 are swapped (norm1 wraps the self-attention, norm2 the cross-attention)",
    "norms 2 3": "norm2 and norm3 are swapped (norm2 wraps the cross-attention, norm3 the FFN)",
    "no causal": "the self-attention has no causal mask",
    "memory normed": "the memory is also normalised before the cross-attention (only the decoder stream is)",
}


def _compare_with_pytorch(norm_first, seed):
    gen = torch.Generator().manual_seed(seed)
    for trial in range(7):  # the last: the weights the block was built with, nothing written
        heads, d_head, batch = (int(n) for n in torch.randint(1, 4, (3,), generator=gen))
        length, hidden = int(torch.randint(2, 7, (1,), generator=gen)), int(torch.randint(2, 12, (1,), generator=gen))
        source_length = length if trial % 3 == 0 else int(torch.randint(2, 9, (1,), generator=gen))
        width = 2 * heads * d_head
        state = block_state(width, hidden, seed=10 * seed + trial)
        what = f"DecoderBlock({width}, {heads}, {hidden}, norm_first={norm_first})"
        block = attempt(what, DecoderBlock, width, heads, hidden, norm_first=norm_first)
        if trial < 6:
            load_state(what, block, state)
        else:
            state = {name: value for name, value in read_parameters(block).items() if name in state}
        set_training(block, False)
        layer = decoder_layer(state, width, heads, hidden, norm_first)
        x = torch.randn(batch, length, width, generator=gen)
        memory = torch.randn(batch, source_length, width, generator=gen)
        pad = torch.arange(source_length) >= torch.randint(1, source_length + 1, (batch,), generator=gen)[:, None]
        future = future_mask(length) if trial % 2 == 0 else None
        where = f"width {width}, {heads} heads, hidden {hidden}, T={length}, S={source_length}, causal={future is not None}"
        with torch.no_grad():
            out, weights = attempt(f"DecoderBlock(norm_first={norm_first}) ({where})", block, x, memory,
                                   causal_mask=future, memory_padding_mask=pad, hint=BLOCK_HINT)
            want = layer(x, memory, tgt_mask=future, memory_key_padding_mask=pad)
            causes = {}
            for key, text in _MISTAKES.items():
                if key == "causal cross" and (future is None or source_length != length):
                    continue
                causes[text] = _by_hand(layer, x, memory, future, pad, norm_first, key)
            other = "post-norm" if norm_first else "pre-norm"
            causes[f"the block computes {other}: follow norm_first"] = _by_hand(layer, x, memory, future, pad,
                                                                                not norm_first)
            want_weights = layer_cross_weights(layer, x, memory, future, pad)
        check_close(f"out ({where})", out, want, atol=1e-4, likely_causes=causes,
                    hint=f"compare your {'pre' if norm_first else 'post'}-norm steps with the table of Part B")
        check_close(f"cross_weights ({where})", weights, want_weights, atol=1e-5,
                    hint="return the weights of the cross-attention, per head, computed from the decoder stream "
                         "after the self-attention step (normalised by norm2 in pre-norm)")


_compare_with_pytorch(norm_first=False, seed=99)
### END HIDDEN TESTS
from course.decoder_checks import check_post_norm_ends_with_a_norm

torch.manual_seed(8)
check_post_norm_ends_with_a_norm(DecoderBlock)

# %% nbgrader={"grade": true, "grade_id": "test_decoder_pre_norm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""norm_first=True is pre-norm, with a clean residual path, and agrees with nn.TransformerDecoderLayer(norm_first=True)."""
from course.decoder_checks import check_clean_residual

torch.manual_seed(9)
check_clean_residual(DecoderBlock, 8, 2, 16, torch.randn(2, 4, 8), torch.randn(2, 5, 8), seed=9)
### BEGIN HIDDEN TESTS
_compare_with_pytorch(norm_first=True, seed=100)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_decoder_gradients", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Every parameter of the block gets a finite gradient, and so does the memory (the encoder learns through it)."""
from course.decoder_checks import check_decoder_gradients

torch.manual_seed(10)
direction, memory_grad = check_decoder_gradients(new_block(8, 2, 16, seed=10), torch.randn(2, 3, 8), torch.randn(2, 5, 8))
### BEGIN HIDDEN TESTS
from nboracle import probed_points

from instructor.references.as_built import moved_to  # the grader's side only
from instructor.references.decoder import built_block, decoder_layer, layer_names, same_layer

gen = torch.Generator().manual_seed(101)
for trial in range(3):
    heads, d_head = int(torch.randint(1, 4, (1,), generator=gen)), int(torch.randint(4, 6, (1,), generator=gen))
    width, norm_first = heads * d_head, bool(trial)
    if trial < 2:
        block, layer = new_block(width, heads, 9, norm_first, 1010 + trial), same_layer(width, heads, 9, norm_first, 1010 + trial)
        state = block_state(width, 9, 1010 + trial)
    else:  # the weights it was built with, nothing written
        block, state = built_block(DecoderBlock, width, heads, 9, norm_first)
        layer = decoder_layer(state, width, heads, 9, norm_first)
    x, memory = torch.randn(2, 4, width, generator=gen), torch.randn(2, 3, width, generator=gen)
    direction, memory_grad = check_decoder_gradients(block, x, memory, seed=1010 + trial)
    # the gradient came from the kernel: the test's own layer, with the same parameters, must agree
    leaf = memory.clone()
    (layer(x, leaf.requires_grad_(), tgt_mask=future_mask(4)) * direction).sum().backward()
    check_close(f"the gradient that reaches the memory (norm_first={norm_first})", memory_grad, leaf.grad, atol=1e-4,
                hint="it is not the gradient of nn.TransformerDecoderLayer holding the same parameters: the backward "
                     "pass follows your forward, so first make the block agree with the layer (tests above)")
    # the outputs at the points the gradient checks moved a parameter, x or the memory to are answers too: judged
    for point, output in probed_points(block):  # (layer holds state: moved_to puts the moved entry in for a point)
        moved = point if isinstance(point, dict) else {}
        inputs = point if isinstance(point, tuple) else (x, memory)
        with moved_to(layer, layer_names(moved)), torch.no_grad():
            expected = layer(*inputs, tgt_mask=future_mask(4))
        what = ", ".join(moved) if moved else "x or the memory"
        check_close(f"the block's output with {what} moved a little (norm_first={norm_first})", output, expected,
                    atol=1e-4, hint="the forward must compute the block for any values, also for values a hair away "
                                    "from the ones it saw last")
### END HIDDEN TESTS

# %% [markdown]
# ## The task: reversing digits, as in chapter 07
#
# The source is 6 random digits, the target the same digits reversed. The vocabulary has 12
# tokens: `<BOS>` (id 0), `<EOS>` (id 1) and the digits 0 to 9 (ids 2 to 11). The batches,
# exact match and greedy decoding are chapter 07's, given here. Note the **shift-right** in
# `make_reversal_batch`: the decoder input is `<BOS>` followed by the target, the labels are
# the target followed by `<EOS>`. A classic mistake is to forget it and feed the labels
# themselves as the decoder input: position $i$ then sees the very token it must predict
# (even with the causal mask, since that token sits at position $i$ itself), copies it, and the
# training loss looks wonderful while the model has learned nothing it can use to generate.

# %% nbgrader={"grade": false, "grade_id": "reversal_task", "locked": true, "schema_version": 3, "solution": false}
BOS, EOS, LENGTH = 0, 1, 6
TOKENS = ["<BOS>", "<EOS>"] + list("0123456789")  # digit d has id d + 2
VOCAB = len(TOKENS)  # 12


def show(ids):
    """Token ids as readable text: show([11, 9, 1]) == '9 7 <EOS>'."""
    return " ".join(TOKENS[int(i)] for i in ids)


def make_reversal_batch(n, length=LENGTH, generator=None):
    """(src (n, length), dec_in (n, length + 1), dec_out (n, length + 1)): dec_in = <BOS> + target."""
    src = torch.randint(2, VOCAB, (n, length), generator=generator)
    target = src.flip(1)
    return (src, torch.cat([torch.full((n, 1), BOS), target], 1), torch.cat([target, torch.full((n, 1), EOS)], 1))


def exact_match(pred, target):
    """Share of rows of pred that equal target in every position."""
    return (pred == target).all(dim=-1).float().mean().item()


def greedy_decode(model, src, max_len):
    """Free-running greedy decoding from <BOS>: the max_len generated tokens (B, max_len)."""
    dec_in = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    with torch.no_grad():
        for _ in range(max_len):
            dec_in = torch.cat([dec_in, model(src, dec_in)[:, -1].argmax(-1, keepdim=True)], 1)
    return dec_in[:, 1:]


# %% [markdown]
# ## Part C · The whole encoder-decoder (8 points)
#
# The model of the figure, with the sizes of chapter 07 (width 64, 4 heads, FFN width 128,
# 2 encoder and 2 decoder blocks). `__init__` and `forward` are given; you write
#
# * `encode(src, padding_mask=None)`: embed the source (`self.embed`: token plus learned
#   position embeddings), run it through `self.encoder_blocks` with the padding mask, and
#   return `self.encoder_norm` of the result, the memory `(B, S, D)`;
# * `decode(dec_in, memory, memory_padding_mask=None)`: embed `dec_in` (`(B, n)`), build the
#   `(n, n)` causal mask (`future_mask(n)` of the test tools: True above the diagonal), run
#   `self.decoder_blocks` (each reads the same memory), and return `self.decoder_norm` of the
#   result, `(B, n, D)`, **and** the list of every decoder block's cross-attention weights,
#   `[(B, H, n, S), ...]`, first block first.
#
# Why the two final LayerNorms? In pre-norm the residual stream is never normalised inside
# the blocks, so the stack must end with one; `nn.Transformer` adds them in both placements,
# and so does this model, so that the two can be compared weight for weight.
#
# `model(src, dec_in)` returns logits `(B, n, VOCAB)`, exactly like chapter 07's model, so
# chapter 07's decoding functions work unchanged.
#
# The tests of `encode` and `decode` run your own decoder blocks: a mistake in a block costs
# Part B's points, not these. Only the gradient test and the trained model need right blocks.

# %% nbgrader={"grade": false, "grade_id": "encoder_decoder", "locked": false, "schema_version": 3, "solution": true}
class EncoderDecoder(nn.Module):
    """Chapter 04's encoder blocks and your decoder blocks, with embeddings and an output head."""

    def __init__(self, width=64, heads=4, hidden=128, layers=2, max_positions=16, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.token_embedding = nn.Embedding(VOCAB, width)
        self.position_embedding = nn.Embedding(max_positions, width)
        self.encoder_blocks = nn.ModuleList(EncoderBlock(width, heads, hidden, norm_first) for _ in range(layers))
        self.encoder_norm = nn.LayerNorm(width)
        self.decoder_blocks = nn.ModuleList(DecoderBlock(width, heads, hidden, norm_first) for _ in range(layers))
        self.decoder_norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)

    def embed(self, tokens):  # (B, n) -> (B, n, D)
        positions = torch.arange(tokens.size(1), device=tokens.device)
        return self.token_embedding(tokens) + self.position_embedding(positions)

    def encode(self, src, padding_mask=None):
        """src (B, S) -> memory (B, S, D)."""
        ### BEGIN SOLUTION
        x = self.embed(src)
        for block in self.encoder_blocks:
            x, _ = block(x, padding_mask=padding_mask)
        return self.encoder_norm(x)
        ### END SOLUTION

    def decode(self, dec_in, memory, memory_padding_mask=None):
        """dec_in (B, n), memory (B, S, D) -> hidden (B, n, D) and [cross weights (B, H, n, S) per block]."""
        ### BEGIN SOLUTION
        future = torch.triu(torch.ones(dec_in.size(1), dec_in.size(1), dtype=torch.bool), diagonal=1)  # (n, n)
        x, all_weights = self.embed(dec_in), []
        for block in self.decoder_blocks:
            x, weights = block(x, memory, causal_mask=future, memory_padding_mask=memory_padding_mask)
            all_weights.append(weights)
        return self.decoder_norm(x), all_weights
        ### END SOLUTION

    def forward(self, src, dec_in, src_padding_mask=None):  # (B, S), (B, n) -> (B, n, VOCAB)
        hidden, _ = self.decode(dec_in, self.encode(src, src_padding_mask), src_padding_mask)
        return self.head(hidden)


# %% [markdown]
# Check it: an untrained model gives 12 logits per decoder position, and `decode` returns one
# weight map per block and head.

# %%
torch.manual_seed(0)
untrained = EncoderDecoder()
src, dec_in, dec_out = make_reversal_batch(2)
with torch.no_grad():
    memory = untrained.encode(src)
    hidden, weights_per_block = untrained.decode(dec_in, memory)
print("memory", tuple(memory.shape), " logits", tuple(untrained(src, dec_in).shape),
      " cross weights", [tuple(w.shape) for w in weights_per_block])
print(f"{sum(p.numel() for p in untrained.parameters()):,} parameters")

# %% [markdown]
# `pytorch_twin(state, heads, norm_first)` builds an `nn.Transformer` of the same sizes from the
# parameters of a model (its `state_dict()`), by name: each `EncoderBlock` becomes an encoder
# layer, each `DecoderBlock` a decoder layer, the two final norms `encoder.norm` and
# `decoder.norm`; the twin keeps the model's embeddings and head, so `twin(src, dec_in)` gives
# logits like `model(src, dec_in)`.

# %% nbgrader={"grade": false, "grade_id": "pytorch_twin", "locked": true, "schema_version": 3, "solution": false}
class PyTorchTwin(nn.Module):
    """nn.Transformer with an EncoderDecoder's embeddings and head, holding its parameters `state`."""

    RENAMED = (("encoder_blocks.", "transformer.encoder.layers."), ("decoder_blocks.", "transformer.decoder.layers."),
               (".attention.", ".self_attn."), (".self_attention.", ".self_attn."),
               (".cross_attention.", ".multihead_attn."), (".ffn.", "."),
               ("encoder_norm.", "transformer.encoder.norm."), ("decoder_norm.", "transformer.decoder.norm."))

    def __init__(self, state, heads, norm_first=False):
        super().__init__()
        (vocab, width), hidden = state["head.weight"].shape, state["decoder_blocks.0.ffn.linear1.weight"].shape[0]
        layers = [len({key.split(".")[1] for key in state if key.startswith(f"{part}_blocks.")})
                  for part in ("encoder", "decoder")]
        with warnings.catch_warnings():  # pre-norm: PyTorch warns that it cannot use nested tensors
            warnings.simplefilter("ignore")
            self.transformer = nn.Transformer(width, heads, *layers, hidden, dropout=0.0, batch_first=True,
                                              norm_first=norm_first)
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(state["position_embedding.weight"].shape[0], width)
        self.head = nn.Linear(width, vocab)
        renamed = {self.renamed(key): value for key, value in state.items()}
        missing = self.load_state_dict(renamed, strict=False).missing_keys  # extra entries (a buffer) do not matter
        if missing:
            raise KeyError(f"the model has no parameter for {missing[0]} of the twin")
        self.train()  # dropout is 0; train mode keeps PyTorch on its plain code path

    @classmethod
    def renamed(cls, key):  # "decoder_blocks.0.ffn.linear1.weight" -> "transformer.decoder.layers.0.linear1.weight"
        for ours, theirs in cls.RENAMED:
            key = key.replace(ours, theirs)
        return key

    def forward(self, src, dec_in, src_padding_mask=None):  # (B, S), (B, n) -> (B, n, VOCAB)
        def embed(tokens):
            return self.token_embedding(tokens) + self.position_embedding(torch.arange(tokens.size(1)))

        hidden = self.transformer(embed(src), embed(dec_in), tgt_mask=future_mask(dec_in.size(1)),
                                  src_key_padding_mask=src_padding_mask, memory_key_padding_mask=src_padding_mask)
        return self.head(hidden)


def pytorch_twin(state, heads, norm_first=False):
    """The nn.Transformer twin of the EncoderDecoder whose parameters are `state` (by name)."""
    return PyTorchTwin(state, heads, norm_first)


# %% nbgrader={"grade": true, "grade_id": "test_model_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""encode gives (B, S, D), decode gives (B, n, D) and one (B, H, n, S) map per block, the model (B, n, VOCAB)."""
from course.decoder_checks import check_model_shapes

torch.manual_seed(11)
check_model_shapes(EncoderDecoder().eval(), width=64, heads=4, layers=2, batch=3, source_length=6, n=7, vocab=VOCAB)
### BEGIN HIDDEN TESTS
gen = np.random.default_rng(102)
for trial in range(3):
    heads, layers = int(gen.integers(1, 4)), int(gen.integers(1, 4))
    model_ = EncoderDecoder(width=4 * heads, heads=heads, hidden=8, layers=layers, norm_first=bool(trial % 2)).eval()
    check_model_shapes(model_, 4 * heads, heads, layers, int(gen.integers(1, 4)), int(gen.integers(1, 9)),
                       int(gen.integers(1, 9)), VOCAB)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_model_masks", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The decoder is causal, the first decoder position sees the last source token, and source PAD changes nothing."""
from course.decoder_checks import check_model_masks

model_, state_ = new_model(12)  # your model, holding the test's parameters
set_training(model_, False)
check_model_masks(model_, source_length=6, n=6, vocab=VOCAB)
### BEGIN HIDDEN TESTS
from instructor.references.decoder import built_model, model_masks_agree  # the grader's side only

model_, state_ = new_model(12)  # the example above, every run compared around your own decoder blocks
set_training(model_, False)
model_masks_agree(model_, state_, 4, False, 6, 6, VOCAB)
for seed in range(2):
    model_, state_ = new_model(103 + seed, width=16, heads=2, hidden=32, layers=2 + seed, norm_first=bool(seed),
                               noise=0.1)
    set_training(model_, False)
    model_masks_agree(model_, state_, 2, bool(seed), 4 + seed, 3 + 2 * seed, VOCAB)
sizes = dict(width=16, heads=2, hidden=32, layers=2)
model_, state_ = built_model(EncoderDecoder, initial_state(0, **sizes), **sizes)  # the weights it was built with
set_training(model_, False)
model_masks_agree(model_, state_, 2, False, 4, 3, VOCAB)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_model_matches_pytorch", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""With the same weights, encode and decode compute what nn.Transformer computes around your decoder blocks, in both norm placements."""
### BEGIN HIDDEN TESTS
from course.checks import matches
from course.decoder_checks import check_no_nan_logits
from instructor.references.decoder import DECODE_HINT, around_own_blocks, built_model  # the grader's side only


def judge_logits(net, state, heads, norm_first, src, dec_in, pad, where):
    """The model's logits against nn.Transformer's embeddings, encoder and head around the model's own decoder
    blocks (holding `state`); when they differ, the usual mistakes of encode and decode named."""
    reference = around_own_blocks(net, state, heads, norm_first)
    with torch.no_grad():
        mine = attempt("model(src, dec_in, src_padding_mask)", net, src, dec_in, pad, hint=MODEL_HINT)
        want = reference.logits(src, dec_in, pad)
    check_no_nan_logits(net, mine, src, dec_in, pad)
    if matches(mine, want, atol=1e-4) and bool(torch.isfinite(want).all()):
        return  # right: the likely causes below would name nothing
    with torch.no_grad():  # each a pass of your blocks in the kernel: asked only when the logits differ
        causes = {"encode embeds the source tokens without their positions (token_embedding alone, not embed)":
                  reference.logits(src, dec_in, pad, source_positions=False),
                  "decode embeds the decoder tokens without their positions (token_embedding alone, not embed)":
                  reference.logits(src, dec_in, pad, decoder_positions=False),
                  "encode or decode leaves out its final LayerNorm (encoder_norm, decoder_norm)":
                  reference.logits(src, dec_in, pad, final_norms=False),
                  "decode passes no causal mask to the decoder blocks": reference.logits(src, dec_in, pad, causal=False),
                  "the causal mask also hides the diagonal: a position must see itself and the positions before it, "
                  "so the causal mask hides only the keys above the diagonal (torch.triu(..., diagonal=1))":
                  reference.logits(src, dec_in, pad, diagonal=0),
                  "the padding mask does not reach the blocks": reference.logits(src, dec_in, pad, block_pad=False)}
    check_close(f"logits ({where})", mine, want, atol=1e-4, likely_causes=causes, hint=DECODE_HINT)


model_, state = new_model(13, width=16, heads=2, hidden=32)  # the example below, judged around your own blocks
src, dec_in = torch.randint(2, VOCAB, (3, 5)), torch.randint(0, VOCAB, (3, 6))
judge_logits(model_, state, 2, False, src, dec_in, None, "the example below")
gen = torch.Generator().manual_seed(105)
for trial in range(5):  # the last: the weights the model was built with, nothing written
    heads = int(torch.randint(1, 4, (1,), generator=gen))
    sizes = dict(width=4 * heads, heads=heads, hidden=int(torch.randint(4, 20, (1,), generator=gen)), layers=1 + trial % 3,
                 norm_first=bool(trial % 2))
    if trial < 4:
        net, state = new_model(1050 + trial, **sizes, noise=0.3)
    else:
        net, state = built_model(EncoderDecoder, initial_state(0, **sizes), **sizes)
    set_training(net, True)
    source_length, n = (int(v) for v in torch.randint(2, 9, (2,), generator=gen))
    src = torch.randint(2, VOCAB, (3, source_length), generator=gen)
    dec_in = torch.randint(0, VOCAB, (3, n), generator=gen)
    pad = torch.arange(source_length) >= torch.randint(1, source_length + 1, (3,), generator=gen)[:, None]
    judge_logits(net, state, heads, bool(trial % 2), src, dec_in, pad, f"{1 + trial % 3} + {1 + trial % 3} blocks, "
                 f"norm_first={bool(trial % 2)}, S={source_length}, n={n}, with source padding")
### END HIDDEN TESTS
from course.decoder_checks import check_model_like_twin

model_, state = new_model(13, width=16, heads=2, hidden=32)  # the test's parameters, loaded into your model
src, dec_in = torch.randint(2, VOCAB, (3, 5)), torch.randint(0, VOCAB, (3, 6))
check_model_like_twin(model_, pytorch_twin(state, heads=2), src, dec_in)

# %% [markdown]
# Two more promises of the text: `decode` returns the cross weights **first block first**, and
# the encoder learns **through** the decoder. The memory is the only path from the loss back to
# the encoder: no `.detach()` and no `torch.no_grad()` may cut it.

# %% nbgrader={"grade": true, "grade_id": "test_model_block_weights", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""decode returns the cross weights of every decoder block, first block first, as each of your blocks gives them."""
from course.decoder_checks import check_weights_per_block

model_, state = new_model(15, width=16, heads=2, hidden=32)  # the test's parameters, loaded into your model
set_training(model_, False)
check_weights_per_block(model_, torch.randint(2, VOCAB, (2, 5)), torch.randint(0, VOCAB, (2, 6)), layers=2)
### BEGIN HIDDEN TESTS
from instructor.references.decoder import built_model, weights_per_block_agree  # the grader's side only

gen = torch.Generator().manual_seed(15)  # the model above, each block's weights as your blocks give them in order
weights_per_block_agree(model_, around_own_blocks(model_, state, 2, False), torch.randint(2, VOCAB, (2, 5), generator=gen),
                        torch.randint(0, VOCAB, (2, 6), generator=gen))
gen = torch.Generator().manual_seed(107)
for trial in range(4):  # the last: the weights the model was built with, nothing written
    heads, layers = int(torch.randint(1, 4, (1,), generator=gen)), 2 + trial % 2
    sizes = dict(width=4 * heads, heads=heads, hidden=12, layers=layers, norm_first=bool(trial % 2))
    if trial < 3:
        net, state = new_model(1070 + trial, **sizes, noise=0.3)
    else:
        net, state = built_model(EncoderDecoder, initial_state(0, **sizes), **sizes)
    source_length, n = (int(v) for v in torch.randint(2, 8, (2,), generator=gen))
    set_training(net, False)
    weights_per_block_agree(net, around_own_blocks(net, state, heads, bool(trial % 2)),
                            torch.randint(2, VOCAB, (2, source_length), generator=gen),
                            torch.randint(0, VOCAB, (2, n), generator=gen))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_model_gradients", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The encoder learns through the decoder: a loss on the logits gives every encoder parameter a gradient."""
from course.decoder_checks import check_encoder_learns

src, dec_in, dec_out = make_reversal_batch(4, generator=torch.Generator().manual_seed(14))
model_, state = new_model(14, width=16, heads=2, hidden=32, noise=0.2)  # the test's parameters, in your model
direction, encoder_gradients = check_encoder_learns(model_, pytorch_twin(state, heads=2), src, dec_in, dec_out)
### BEGIN HIDDEN TESTS
from instructor.references.decoder import judge_encoder_gradients  # the grader's side only

# the visible call's answers (a post-norm model of two blocks), then a pre-norm model of three
judge_encoder_gradients(model_, state, 2, False, src, dec_in)
src, dec_in, dec_out = make_reversal_batch(3, generator=torch.Generator().manual_seed(109))
net, state = new_model(109, width=12, heads=3, hidden=20, layers=3, norm_first=True, noise=0.2)
check_encoder_learns(net, pytorch_twin(state, heads=3, norm_first=True), src, dec_in, dec_out)
judge_encoder_gradients(net, state, 3, True, src, dec_in)
from instructor.references.decoder import model_unchanged_when_its_weights_are_loaded  # the grader's side only

model_unchanged_when_its_weights_are_loaded(EncoderDecoder, src, dec_in, width=12, heads=3, hidden=20)  # as built too
### END HIDDEN TESTS

# %% [markdown]
# ## Training
#
# The training loop of chapter 07, in a locked cell. The model starts from fixed weights,
# `initial_state(0)` loaded by name, so the run is the same however your `DecoderBlock` creates
# its submodules; the batches come from a fixed seed. 60 AdamW steps at
# learning rate $3 \cdot 10^{-3}$, each on 64 fresh sequences, cross-entropy between the
# logits and `dec_out`. The first loss should be near $\ln 12 \approx 2.485$, a uniform guess.
# It takes a few seconds on a CPU.

# %% nbgrader={"grade": false, "grade_id": "training", "locked": true, "schema_version": 3, "solution": false}
# kernel only
# (this cell runs in your notebook only: it trains your model, and the tests below read that model)
def train(model, steps=60, batch_size=64, lr=3e-3):
    """Teacher-forcing training on fresh reversal batches; returns the loss of every step."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)  # one update for all parameters
    losses = []
    for _ in range(steps):
        src, dec_in, dec_out = make_reversal_batch(batch_size)
        loss = F.cross_entropy(model(src, dec_in).transpose(1, 2), dec_out)  # classes on axis 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


model = load_state("EncoderDecoder()", EncoderDecoder(), initial_state(0))  # fixed starting weights
losses = train(model)
model.eval()
print(f"loss at step 0: {losses[0]:.3f} (ln 12 = {math.log(12):.3f}); step 30: {losses[30]:.4f}; "
      f"step 59: {losses[59]:.4f}")

# %%
# demo only: the figure
plot_curves(range(len(losses)), {"your encoder-decoder": losses}, xlabel="step",
            ylabel="cross-entropy (nats)", title="Digit reversal with your own decoder blocks", logy=True,
            marker=None, hlines={"ln 12, uniform guess": math.log(12)})
plt.show()

# %% [markdown]
# ### Check it: exact match 1.000, and `nn.Transformer` agrees
#
# On 500 new sequences both measures of chapter 07 should be 1.000: teacher-forced (one pass,
# true prefixes) and greedy (free-running from `<BOS>`). Then the twin: `nn.Transformer`
# holding the trained weights gives the same logits and decodes the same digits.

# %%
src, dec_in, dec_out = make_reversal_batch(500, generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    logits = model(src, dec_in)
    teacher_forced = exact_match(logits.argmax(-1), dec_out)
free_running = exact_match(greedy_decode(model, src, LENGTH + 1), dec_out)
print(f"exact match on 500 new sequences: teacher forcing {teacher_forced:.3f}, greedy {free_running:.3f}")
print("src:", show(src[0]), "   greedy:", show(greedy_decode(model, src[:1], LENGTH + 1)[0]))
assert teacher_forced == 1.0 and free_running == 1.0

twin = pytorch_twin(model.state_dict(), heads=4)
with torch.no_grad():
    gap = (twin(src, dec_in) - logits).abs().max().item()
twin_greedy = greedy_decode(twin, src[:50], LENGTH + 1)
print(f"nn.Transformer with the same weights: largest logit difference {gap:.1e}; "
      f"same greedy output: {torch.equal(twin_greedy, greedy_decode(model, src[:50], LENGTH + 1))}")
assert gap < 1e-4 and torch.equal(twin_greedy, greedy_decode(model, src[:50], LENGTH + 1))

# %% nbgrader={"grade": true, "grade_id": "test_trained_model", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The model trained with your blocks reverses new sequences, teacher-forced and free-running."""
try:
    trained = model
except NameError:
    trained = None
check_true(isinstance(trained, EncoderDecoder),
           "there is no trained `model`: the training cell needs DecoderBlock, encode and decode to work")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(2025)
src = torch.randint(2, VOCAB, (400, LENGTH), generator=gen)
labels = torch.cat([src.flip(1), torch.ones(400, 1, dtype=torch.long)], 1)
shifted = torch.cat([torch.zeros(400, 1, dtype=torch.long), src.flip(1)], 1)
# the trained weights, read from the model's own tensors, run in nn.Transformer's embeddings, encoder and head around
# the model's own decoder blocks (causal mask given); the test decodes itself
from instructor.references.decoder import around_own_blocks  # the grader's side only

judge = attempt("nn.Transformer's encoder and head holding the trained weights", around_own_blocks, trained, read_state(trained), 4,
               False, "the trained model", hint="the weights do not fit the model of Part C: keep the submodules, "
                                                "names and sizes the exercise gives")
with torch.no_grad():
    forced_score = (judge(src, shifted).argmax(-1) == labels).all(1).float().mean().item()
    seq = torch.zeros(400, 1, dtype=torch.long)
    for _ in range(LENGTH + 1):
        seq = torch.cat([seq, judge(src, seq)[:, -1].argmax(-1, keepdim=True)], 1)
free_score = (seq[:, 1:] == labels).all(1).float().mean().item()
if min(forced_score, free_score) < 0.99:  # your own forward, on the test's inputs, only chooses the message
    trained.eval()
    with torch.no_grad():
        own_logits = attempt("the trained model", trained, src, shifted, hint=MODEL_HINT)
        own_score = (own_logits.argmax(-1) == labels).all(1).float().mean().item()
        elsewhere = attempt("the trained model on other sources", trained, src.flip(0), shifted, hint=MODEL_HINT)
    check_true((elsewhere - own_logits).abs().max().item() > 1e-4, f"the trained model reverses only "
               f"{min(forced_score, free_score):.3f} of 400 new sequences in a decoder that reads the source, and with your forward "
               "its logits do not depend on the source at all: the cross-attention must take its keys and values "
               "from memory")
    check_true(own_score < 0.99 or forced_score >= 0.99, f"the trained model scores {own_score:.3f} teacher-forced "
               f"with your forward but {forced_score:.3f} in a causal decoder: during training it could see the tokens it had to predict; "
               "is the causal mask of the decoder's self-attention missing?")
check_true(forced_score >= 0.99, f"teacher-forced, the trained model reverses only {forced_score:.3f} of 400 new "
           "sequences: the decoder must see the whole source through the cross-attention (keys and values from "
           "the memory, no causal mask there)")
check_true(free_score >= 0.99, f"the trained model scores {forced_score:.3f} teacher-forced but {free_score:.3f} "
           "when it generates freely: during training it could see the tokens it had to predict; is the causal "
           "mask of the decoder's self-attention missing?")
with torch.no_grad():  # the weights score only with the forward that holds them
    gap = (attempt("the trained model", trained, src[:100], shifted[:100], hint=MODEL_HINT)
           - judge(src[:100], shifted[:100])).abs().max().item()
check_true(gap < 1e-3, f"the trained weights reverse new sequences in nn.Transformer's encoder and head around your "
           f"decoder blocks, but your forward holding them "
           f"gives other logits (largest difference {gap:.1e}): forward must compute what Parts A to C describe "
           "with the weights the model holds")
from instructor.references.decoder import model_unchanged_when_its_weights_are_loaded  # the grader's side only

model_unchanged_when_its_weights_are_loaded(EncoderDecoder, src[:8], shifted[:8])  # trained from written weights
### END HIDDEN TESTS

# %% [markdown]
# ## What the cross-attention learned
#
# To emit the $i$-th reversed digit, decoder position $i$ must copy source position
# $S + 1 - i$ (counting from 1): an **anti-diagonal** in the cross-attention map. Below, the
# weights of the first decoder block for one sequence, each of the 4 heads on its own, then
# their mean over heads and 200 sequences. The last row (the step that emits `<EOS>`) has
# nothing in particular to copy.

# %%
src, dec_in, _ = make_reversal_batch(200, generator=torch.Generator().manual_seed(2))
with torch.no_grad():
    _, trained_weights = model.decode(dec_in, model.encode(src))
first_block = trained_weights[0]  # (200, H, 7, 6)
average = first_block.mean(dim=(0, 1))  # (7, 6), over sequences and heads
if not under_nbgrader():
    fig, axes = plt.subplots(1, first_block.shape[1] + 1, figsize=(3.5 * (first_block.shape[1] + 1), 3.5))
    for head in range(first_block.shape[1]):
        plot_attention(first_block[0, head], queries=show(dec_in[0]).split(), keys=show(src[0]).split(),
                       title=f"head {head}", ax=axes[head])
        axes[head].set_xlabel("source token (key)")
    plot_attention(average, title="mean of the heads, 200 sequences", ax=axes[-1])
    axes[-1].set_xlabel("source position (key)")
    for ax in axes:
        ax.set_ylabel("decoder position (query)")
    fig.suptitle(f"Cross-attention of the first decoder block, source {show(src[0])}")
    fig.tight_layout()
    plt.show()
anti_diagonal = average[torch.arange(LENGTH), LENGTH - 1 - torch.arange(LENGTH)]
print("mean weight on the anti-diagonal, row by row:", [round(w, 2) for w in anti_diagonal.tolist()])
assert (average[:LENGTH].argmax(-1) == torch.arange(LENGTH - 1, -1, -1)).all(), "not the anti-diagonal"
assert anti_diagonal.min() > 0.5

# %% nbgrader={"grade": true, "grade_id": "test_cross_attention_map", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""decode returns per-head cross weights in which the trained model's first block reads the source backwards."""
from course.decoder_checks import check_anti_diagonal

map_src, map_dec_in, _ = make_reversal_batch(50, generator=torch.Generator().manual_seed(3))
with torch.no_grad():
    map_memory = attempt("model.encode", model.encode, map_src, hint=MODEL_HINT)
    check_anti_diagonal(attempt("model.decode", model.decode, map_dec_in, map_memory, hint=MODEL_HINT)[1], 50, LENGTH)
### BEGIN HIDDEN TESTS
src_, dec_in_, _ = make_reversal_batch(100, generator=torch.Generator().manual_seed(2026))
with torch.no_grad():
    memory_ = attempt("model.encode", model.encode, src_, hint=MODEL_HINT)
    check_anti_diagonal(attempt("model.decode", model.decode, dec_in_, memory_, hint=MODEL_HINT)[1], 100, LENGTH)
from instructor.references.decoder import model_unchanged_when_its_weights_are_loaded  # the grader's side only

model_unchanged_when_its_weights_are_loaded(EncoderDecoder, src_[:8], dec_in_[:8])  # trained from written weights
### END HIDDEN TESTS

# %% [markdown]
# Every head of the first block found the same alignment here: reversal needs only one kind
# of look-up, so the heads have nothing different to specialise in. On real translation the
# maps are mostly diagonal with detours where the two languages order words differently
# (chapter 07's "the black cat" and "con mèo đen"), and different heads often pick up
# different relations.
#
# ## Common mistakes, and what shows them
#
# * **Keys and values from the decoder.** Then "cross-attention" is a second self-attention: the
#   decoder never reads the source, and the weights are `(T, T)` instead of `(T, S)`. A shape
#   check with $T \ne S$ finds it at once; with $T = S$ only the values can.
# * **The causal mask on the cross-attention.** It runs without an error only when $T = S$, and
#   then decoder position 0 sees source position 0 alone. For reversal, whose first output is the
#   *last* source token, that is fatal.
# * **Forgetting the shift-right**, covered above: the loss falls, generation fails. Evaluate by
#   free-running generation, as in chapter 07.
# * **The encoder cut off from the loss.** A `memory.detach()` in `decode` (or an `encode` under
#   `torch.no_grad()`) still runs and the decoder still trains, but no gradient reaches the
#   encoder blocks: they keep their random initial weights. On this task that is not enough to
#   notice: the embeddings are shared and still learn through the decoder, a random encoder
#   passes each token on at its own position, and the cross-attention learns to read that. With
#   the detach the model still reaches exact match 1.000, teacher-forced and greedy, with a
#   clean anti-diagonal: of this chapter's tests, only the gradient test fails.
#   On a real task a frozen random encoder costs a lot; only a gradient check finds it at once.
# * **The weights of the wrong block, or in the wrong order.** `decode` returns one map per
#   block, first block first, so that `weights[0]` is the first block's; the anti-diagonal of the
#   trained model shows in the first block.

# %% [markdown]
# ## Part D · Quiz (4 points)
#
# Answer each question with one letter, `"a"` to `"d"`, in the cell below.
#
# **Q1.** A classmate also puts a lower-triangular mask of shape $5 \times 12$ on the cross-attention
# (5 target positions, 12 source tokens). What does target position $i$ read?
#
# * a) the whole source, as before: the source has no future for a mask to hide
# * b) only source tokens 0 to $i$, so the early positions miss most of the source
# * c) only source tokens $i$ to 11, as the mask hides the tokens before $i$
# * d) the whole source, but no longer its own earlier target positions
#
# **Q2.** The chapter's model learned to reverse digits. If the same model were trained to *copy* them
# instead, what would the cross-attention map of the trained model look like?
#
# * a) anti-diagonal as well: cross-attention reads the source from its end
# * b) uniform: copying needs no alignment between the outputs and the source
# * c) diagonal: output position i reads mostly source position i
# * d) lower-triangular, the pattern that the causal mask gives each output
#
# **Q3.** Generating 10 output tokens greedily from one source sentence, how many times must the
# encoder run?
#
# * a) once: its output, the memory, depends on the source alone
# * b) 10 times, once for each new token, as the memory changes each time
# * c) 55 times, once per prefix token, as 1 + 2 + ... + 10
# * d) never: the decoder reads the source embeddings directly
#
# **Q4.** The source sentences of a batch are padded and the encoder masks its PAD keys, but the
# cross-attention gets no `memory_key_padding_mask`. Which outputs can change?
#
# * a) none: the encoder's mask already removed the PAD tokens from the memory
# * b) only the outputs at the target's own PAD positions, which the loss skips
# * c) only the encoder's outputs at PAD positions, which nothing reads
# * d) every target position of a padded sentence, as each reads PAD memory

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
Q1 = Q2 = Q3 = Q4 = None  # replace each None with "a", "b", "c" or "d"
### BEGIN SOLUTION
Q1, Q2, Q3, Q4 = "b", "c", "a", "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: a causal mask placed on the cross-attention."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "a mask hides whatever it is told to hide: the source has no future, which is why this mask is "
         "a mistake, not why it does nothing",
    "c": "a lower-triangular mask allows key j when j <= i: it keeps the start of the source and hides "
         "the rest",
    "d": "the cross-attention's keys are source tokens; the decoder's own positions are read by the "
         "self-attention, whose mask is unchanged"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: the cross-attention map of a copy task."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "the order in which the source is read is learned: reversal makes output i read the source "
         "from the end, copying makes it read source token i",
    "b": "each output digit must come from one source digit: the map concentrates where that digit is, "
         "as in reversal",
    "d": "the causal mask is on the decoder's self-attention; the cross-attention may read every source "
         "token, and learns which"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: how often the encoder runs during generation."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "b": "the encoder reads only the source, which does not change while the decoder writes: its output "
         "can be computed once and reused",
    "c": "that counts the decoder's work without a cache; the encoder sees no target token at all",
    "d": "the cross-attention reads the encoder's output, the memory; the source embeddings alone have "
         "not been through any encoder layer"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: a missing padding mask on the cross-attention."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "a": "the memory still has a row at each PAD position; the encoder's mask stopped the encoder's "
         "tokens from reading it, not the cross-attention",
    "b": "the PAD keys are in the source, and every target query reads them, at real and PAD positions "
         "alike",
    "c": "the cross-attention reads every row of the memory, PAD rows included, unless its own mask "
         "hides them"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part E · In your own words (2 points, graded by your instructor)
#
# Explain, in three or four sentences, what cross-attention does in a decoder block: where its
# queries, keys and values come from, and why it takes the source's padding mask but no causal
# mask.

# %% [markdown] nbgrader={"grade": true, "grade_id": "cross_attention_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** Cross-attention is where the decoder reads the source: its queries come from the decoder's
# stream (one per target position) and its keys and values from the encoder's output, the memory.
# Each target position thus gets a weighted average of source vectors, chosen by what it is
# about to produce. The whole source is known before decoding starts, so no source position is in
# the future and a causal mask there would only hide information; the source's PAD tokens are not
# words, so the padding mask keeps them out of every average.
#
# **Rubric (2 points, one idea per part).**
# * 1 point, the sources: the queries come from the decoder's stream, the keys and values from the encoder's output (the memory). Earns it: both sides right, in any words. Does not: the roles swapped, or "it attends to the source" without saying which side asks.
# * ½ point, no causal mask: the whole source is known before decoding starts, so none of it is in the future. Does not: "the decoder's self-attention already has one" as the only reason.
# * ½ point, the padding mask: the source's PAD positions are not words, so no average may include them. Does not: "for efficiency" (a mask saves no computation).
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the memory is masked causally" costs the ½ point on the causal mask); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * Cross-attention is attention with queries from the decoder and keys and values from the
#   memory, the encoder's output: scores $T \times S$, weights `(B, H, T, S)`, no causal mask,
#   the source's padding mask.
# * A decoder block is masked self-attention, cross-attention and an FFN, each wrapped by a
#   residual and a LayerNorm: post-norm `norm(x + S(x))` or pre-norm `x + S(norm(x))`, where in
#   pre-norm only the decoder stream is normalised before the cross-attention. It is exactly
#   `nn.TransformerDecoderLayer`.
# * The whole Transformer is embeddings and positions, encoder blocks, a final norm (the memory),
#   decoder blocks that all read that memory, a final norm and a linear head: exactly
#   `nn.Transformer` with the same weights. Trained on reversal it reaches exact match 1.000,
#   and its cross-attention reads the source backwards, the anti-diagonal.
