# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 10 · A small GPT that writes Vietnamese verse
#
# Every model so far solved a made-up task: reversing digits, copying, toy reviews. This chapter
# ends the course with the thing the whole field is about: a **decoder-only language model**, a
# GPT, trained on real text. The text is Nguyễn Du's *Truyện Kiều* (early 19th century),
# 3,254 lines of **lục bát**: a line of 6 syllables, then a line of 8, again and again, with
# fixed tones and rhymes between them. A model that has learned Vietnamese verse should keep
# that meter, and whether it did is a number we can measure.
#
# The model reads and writes **characters**, not syllables: its vocabulary is the 96 distinct
# characters of the poem (letters with their diacritics, space, punctuation, the line break).
# Every part of it is yours, written again compactly from the chapters where you met it:
#
# * `lm_batch`: windows of text as inputs and the same windows shifted by one character as
#   targets (Part A);
# * `MultiHeadSelfAttention` and `FeedForward` (Part B, chapters 06 and 04), `Block` (Part C,
#   the pre-norm block of chapter 04 without an encoder), `GPT` with its loss (Part D, with
#   chapter 05's learned positions);
# * `train_step`: one step of training with clipped gradients and a schedule (Part E);
# * `next_token_probs` and `sample_next`: how a model's scores become a choice (Part F);
# * `cached_step` and `generate`: writing, with and without chapter 08's KV cache (Part G);
# * `tone`, `rhyme_part` and `meter_report`: the rules of the verse, read from the letters, to
#   measure what the models kept (Parts T, R and M).
#
# Then you train a **ladder** of models, each a part more than the last, and read what each part
# buys in bits per character; train the full model; let it write; and measure how much of the
# meter it kept.
#
# The computer's share: the exercises and their checks run in seconds; the ladder needs about a
# minute and a half of one CPU thread, the full model about 3 minutes, the measurements after it
# a minute or two more (longer on a busy machine).
#
# **Time:** about 5 hours for a capable student, an estimate from the length of the text and
# the work of each of its 37 points.
# **Assumes:** chapters 01 to 09: chapter 06's attention, chapter 04's pre-norm block, chapter
# 05's learned positions, chapter 08's KV cache, and chapter 07's step-by-step decoding.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math
import time
import unicodedata

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course import attempt, check_choice, check_close, check_shape, check_true, kieu_lines, short_demos
from course.plots import plot_attention, plot_curves

torch.set_printoptions(precision=3, sci_mode=False)
torch.set_num_threads(1)  # a model this small trains faster on one thread than on two that wait for each other

# %% [markdown]
# ## The corpus and its characters
#
# `kieu_lines()` reads the poem from the course's package (no network needed): one string per
# line, in Unicode NFC, so that a letter with its marks is one character ("ệ" is one code point,
# not "e" plus two combining marks). We lowercase it, which leaves fewer characters to learn
# and loses only the capitals of names and line starts. The split is **by lines**: the first
# 3,000 lines (1,500 couplets) to train, the last 254 to validate. The model never sees the end
# of the story while it trains; its validation loss says how well it predicts verse it has not
# read.

# %% nbgrader={"grade": false, "grade_id": "corpus", "locked": true, "schema_version": 3, "solution": false}
POEM = [line.lower() for line in kieu_lines()]  # 3,254 lines, 6 and 8 syllables alternating
CHARS = sorted(set("\n".join(POEM)))  # the vocabulary: every character of the poem, "\n" first
VOCAB = len(CHARS)
CHAR_ID = {c: i for i, c in enumerate(CHARS)}


def encode(text):
    """str -> (N,) int64 character ids."""
    return torch.tensor([CHAR_ID[c] for c in text], dtype=torch.long)


def decode(ids):
    """Character ids (any iterable of ints) -> str."""
    return "".join(CHARS[int(i)] for i in ids)


TRAIN_LINES, VALID_LINES = POEM[:3000], POEM[3000:]
train_ids = encode("\n".join(TRAIN_LINES) + "\n")  # (N_train,)
valid_ids = encode("\n".join(VALID_LINES) + "\n")  # (N_valid,)

# %%
print(f"{len(POEM)} lines; vocabulary of {VOCAB} characters:", repr("".join(CHARS)))
print(f"train: {len(TRAIN_LINES)} lines, {len(train_ids)} characters; "
      f"validation: {len(VALID_LINES)} lines, {len(valid_ids)} characters")
print("\n".join(POEM[:4]))
print("syllables per line:", [len(line.split()) for line in POEM[:8]])
assert len(POEM) == 3254 and VOCAB == 96
assert all(unicodedata.is_normalized("NFC", line) for line in POEM)

# %% [markdown]
# ## Part A · Language-model batches (3 points)
#
# A language model learns $p(x_{t+1} \mid x_1, \dots, x_t)$: at **every** position of a window
# it predicts the next character. So one window of `block_size + 1` characters gives a whole
# training example: the inputs are its first `block_size` characters, the targets its last
# `block_size`, the same text **shifted by one**. With the causal mask, position $t$ sees inputs
# $0..t$ and is scored on target $t$, the character at $t+1$; every position is an example.
#
# Write `lm_batch(ids, batch_size, block_size, generator)`:
#
# * draw the window starts with exactly
#   `torch.randint(len(ids) - block_size, (batch_size,), generator=generator)` (the test hands
#   you a `torch.Generator` and checks that your windows start where it says; never the global
#   random state, or the batches could not be reproduced);
# * return `(inputs, targets)`, both `(batch_size, block_size)` int64: row `b` of the inputs is
#   `ids[s : s + block_size]` and of the targets `ids[s + 1 : s + block_size + 1]`, for the
#   `b`-th start `s`.

# %% nbgrader={"grade": false, "grade_id": "lm_batch", "locked": false, "schema_version": 3, "solution": true}
def lm_batch(ids, batch_size, block_size, generator):
    """Inputs and targets (batch_size, block_size): windows of ids at drawn starts, targets shifted by one."""
    ### BEGIN SOLUTION
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)  # (B,)
    windows = torch.stack([ids[s:s + block_size + 1] for s in starts.tolist()])  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]
    ### END SOLUTION


# %% [markdown]
# Check it: one window of 24 characters, read back as text. The targets are the inputs moved
# one character to the left.

# %%
inputs, targets = lm_batch(train_ids, batch_size=2, block_size=24, generator=torch.Generator().manual_seed(0))
print("inputs: ", repr(decode(inputs[0])))
print("targets:", repr(decode(targets[0])))
print("shapes:", tuple(inputs.shape), tuple(targets.shape))

# %% nbgrader={"grade": true, "grade_id": "test_lm_batch_targets", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""The targets are the inputs shifted by one: the target at position t is the character after input t."""
from course.tiny_gpt_checks import check_targets  # the checks of this chapter: course/tiny_gpt_checks.py

check_targets(lm_batch, length=50, batch_size=3, block_size=5, seed=0)
### BEGIN HIDDEN TESTS
for seed, (length, batch_size, block_size) in enumerate([(200, 8, 16), (30, 5, 29), (64, 1, 1)], start=1):
    check_targets(lm_batch, length, batch_size, block_size, seed)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_lm_batch_starts", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The windows start where torch.randint(len(ids) - block_size, (batch_size,), generator=generator) says."""
from course.tiny_gpt_checks import check_starts

check_starts(lm_batch, length=100, batch_size=4, block_size=8, seed=7)
### BEGIN HIDDEN TESTS
for seed in range(8, 11):
    check_starts(lm_batch, length=int(torch.randint(40, 300, ())), batch_size=seed - 4, block_size=seed + 2, seed=seed)
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · Causal self-attention and the feed-forward layer (4 points)
#
# The attention is chapter 06's, written again here compactly and always causal. For `x` of
# shape `(B, T, D)` with $H$ heads of $d = D / H$ dimensions each:
#
# 1. one fused projection `qkv` ($D \to 3D$) gives the queries, keys and values side by side:
#    split its output into three `(B, T, D)` tensors (in that order), and each into heads,
#    `(B, H, T, d)`;
# 2. scores $QK^\top / \sqrt{d}$, `(B, H, T, T)`; the causal `mask` (a `(max_len, max_len)` bool
#    buffer, `True` on and below the diagonal: the pairs that may attend) sets the scores of
#    the future to $-\infty$;
# 3. softmax over the keys, the weighted sum of the values, the heads merged back to
#    `(B, T, D)`, and the output projection `proj` ($D \to D$).
#
# Write `MultiHeadSelfAttention(width, heads, max_len)` with exactly the submodules `qkv` and
# `proj` (`nn.Linear` with biases), the buffer `mask`, the attributes `n_heads` and `d_head`,
# and `forward(x, return_weights=False)`, which returns the output, or `(output, weights)` with
# the weights `(B, H, T, T)` when asked (the end of the chapter draws them). Then
# `FeedForward(width, hidden)`: `linear1` ($D \to$ hidden), a ReLU, `linear2` (hidden $\to D$).
#
# The tests draw the parameters by these names and load them into your modules, and they also
# read the parameters your modules start with; either way your output is compared with
# PyTorch's `F.scaled_dot_product_attention(q, k, v, is_causal=True)` on the same projections.

# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true}
class MultiHeadSelfAttention(nn.Module):
    """Causal multi-head self-attention with a fused QKV projection: (B, T, D) -> (B, T, D)."""

    def __init__(self, width, heads, max_len):
        super().__init__()
        ### BEGIN SOLUTION
        if width % heads != 0:
            raise ValueError(f"width={width} is not divisible by heads={heads}")
        self.n_heads, self.d_head = heads, width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))
        ### END SOLUTION

    def forward(self, x, return_weights=False):
        ### BEGIN SOLUTION
        B, T, D = x.shape
        q, k, v = (t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, d)
                   for t in self.qkv(x).split(D, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
        scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        weights = scores.softmax(dim=-1)  # (B, H, T, T)
        out = self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        return (out, weights) if return_weights else out
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "ffn", "locked": false, "schema_version": 3, "solution": true}
class FeedForward(nn.Module):
    """Position-wise feed-forward layer: linear2(relu(linear1(x))), width -> hidden -> width."""

    def __init__(self, width, hidden):
        super().__init__()
        ### BEGIN SOLUTION
        self.linear1 = nn.Linear(width, hidden)
        self.linear2 = nn.Linear(hidden, width)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.linear2(torch.relu(self.linear1(x)))  # (B, T, D)
        ### END SOLUTION


# %% [markdown]
# Check it: the shapes, the weights of a 6-character input (each row sums to 1, nothing above
# the diagonal), and the parameters: $4D^2 + 4D$ for the attention.

# %%
attention = MultiHeadSelfAttention(width=16, heads=4, max_len=8)
out, weights = attention(torch.randn(2, 6, 16), return_weights=True)
print("output", tuple(out.shape), "weights", tuple(weights.shape))
print(weights[0, 0])
print("attention parameters", sum(p.numel() for p in attention.parameters()), "= 4 D^2 + 4 D =", 4 * 16**2 + 4 * 16)
print("FFN output", tuple(FeedForward(16, 64)(torch.randn(2, 6, 16)).shape))

# %% nbgrader={"grade": true, "grade_id": "test_attention_parts", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""MultiHeadSelfAttention holds qkv, proj, a causal mask buffer, n_heads and d_head, and returns weights when asked."""
from course.tiny_gpt_checks import check_attention_parts

check_attention_parts(MultiHeadSelfAttention, width=12, heads=3, max_len=6, T=4)
### BEGIN HIDDEN TESTS
check_attention_parts(MultiHeadSelfAttention, width=8, heads=1, max_len=3, T=3)
check_attention_parts(MultiHeadSelfAttention, width=20, heads=5, max_len=9, T=1)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_matches_sdpa", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""The attention computes what F.scaled_dot_product_attention(is_causal=True) computes on the same projections."""
from course.tiny_gpt_checks import check_attention

check_attention(MultiHeadSelfAttention, batch=2, length=5, width=8, heads=2, seed=3)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_attention  # the grader's side only

compare_attention(MultiHeadSelfAttention, batch=2, length=5, width=8, heads=2, seed=3)
compare_attention(MultiHeadSelfAttention, batch=3, length=7, width=12, heads=3, seed=4)
compare_attention(MultiHeadSelfAttention, batch=1, length=1, width=6, heads=1, seed=5)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_ffn", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""FeedForward holds linear1 and linear2 and computes linear2(relu(linear1(x)))."""
from course.tiny_gpt_checks import check_ffn

check_ffn(FeedForward, width=6, hidden=10, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_ffn  # the grader's side only

compare_ffn(FeedForward, width=6, hidden=10, seed=1)
compare_ffn(FeedForward, width=9, hidden=4, seed=2)
### END HIDDEN TESTS

# %% [markdown]
# ## Part C · The decoder block (3 points)
#
# A GPT is a stack of **decoder-only** blocks: chapter 09's decoder block without the
# cross-attention, since there is no encoder to read. Each block is two sublayers with a
# residual around each, in the **pre-norm** placement of chapter 04 (the one GPT-2 and nanoGPT
# use: the residual stream is never normalised, only what enters a sublayer):
#
# $$h = x + \mathrm{attention}(\mathrm{norm1}(x)), \qquad \mathrm{out} = h + \mathrm{ffn}(\mathrm{norm2}(h)).$$
#
# Write `Block(width, heads, max_len)` with exactly these submodules:
#
# | name | module |
# |---|---|
# | `norm1`, `norm2` | `nn.LayerNorm(width)` |
# | `attention` | your `MultiHeadSelfAttention(width, heads, max_len)` |
# | `ffn` | your `FeedForward(width, 4 * width)` |
#
# and `forward(x)`: `(B, T, width) -> (B, T, width)`. The test judges the wiring around your own
# attention and FFN, whatever they compute: a mistake in Part B costs Part B's points only.

# %% nbgrader={"grade": false, "grade_id": "block", "locked": false, "schema_version": 3, "solution": true}
class Block(nn.Module):
    """Pre-norm decoder block: x + attention(norm1(x)), then + ffn(norm2(.)); (B, T, D) -> (B, T, D)."""

    def __init__(self, width, heads, max_len):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm1 = nn.LayerNorm(width)
        self.attention = MultiHeadSelfAttention(width, heads, max_len)
        self.norm2 = nn.LayerNorm(width)
        self.ffn = FeedForward(width, 4 * width)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        x = x + self.attention(self.norm1(x))  # (B, T, D)
        return x + self.ffn(self.norm2(x))  # (B, T, D)
        ### END SOLUTION


# %% [markdown]
# Check it: shapes, and the number of parameters, $12 D^2 + 13 D$ (attention $4D^2 + 4D$, FFN
# $8D^2 + 5D$, two norms $4D$).

# %%
block = Block(width=32, heads=4, max_len=16)
out = block(torch.randn(2, 10, 32))
n_params = sum(p.numel() for p in block.parameters())
print("output", tuple(out.shape), "parameters", n_params, "= 12 D^2 + 13 D =", 12 * 32**2 + 13 * 32)

# %% nbgrader={"grade": true, "grade_id": "test_block_parts", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Block holds norm1, attention, norm2 and ffn with the sizes of Part C, and maps (B, T, D) to (B, T, D)."""
from course.tiny_gpt_checks import check_parts

check_parts(Block, width=16, heads=2, max_len=8, T=5)
### BEGIN HIDDEN TESTS
check_parts(Block, width=24, heads=3, max_len=12, T=12)
check_parts(Block, width=10, heads=5, max_len=4, T=1)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_block_matches_pytorch", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""Block wires its own sublayers as x + attention(norm1(x)), then + ffn(norm2(.)), with the norms' parameters."""
from course.tiny_gpt_checks import check_block

check_block(Block, batch=2, length=5, width=8, heads=2, seed=3)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_block  # the grader's side only

compare_block(Block, batch=2, length=5, width=8, heads=2, seed=3)
gen = torch.Generator().manual_seed(31)
for trial in range(2):
    heads, d_head, batch, length = (int(n) for n in torch.randint(1, 5, (4,), generator=gen))
    compare_block(Block, batch, length + 1, heads * max(d_head, 2), heads, seed=40 + trial)
### END HIDDEN TESTS

# %% [markdown]
# ## Part D · The model and its loss (4 points)
#
# The whole GPT, for a batch of character ids `idx` of shape `(B, T)`:
#
# 1. `x = token_embedding(idx) + position_embedding(positions 0..T-1)`, `(B, T, D)`: a learned
#    vector per character and one per position (chapter 05's learned positions);
# 2. the `layers` blocks, in order;
# 3. a final `norm` (pre-norm blocks leave the stream unnormalised, so the head gets a normalised
#    input this way);
# 4. `head`, a Linear $D \to$ vocab: the **logits** `(B, T, vocab)`, one score per character of
#    the vocabulary at every position.
#
# With `targets` (B, T), the loss is the mean cross-entropy over all $B \cdot T$ positions,
# `F.cross_entropy` with the vocabulary as the class axis; without them it is `None`. The
# targets arrive already shifted (Part A did it): `forward` scores position $t$ against
# `targets[:, t]` as it is.
#
# Write `GPT(vocab, width, heads, layers, max_len)` with submodules `token_embedding`
# (`nn.Embedding(vocab, width)`), `position_embedding` (`nn.Embedding(max_len, width)`),
# `blocks` (an `nn.ModuleList` of `Block(width, heads, max_len)`), `norm` (`nn.LayerNorm(width)`)
# and `head` (`nn.Linear(width, vocab)`), and `forward(idx, targets=None)` returning
# `(logits, loss)`. The tests judge the model around your own blocks, and the loss against your
# own logits: a mistake in a block costs Part C's points, not these.

# %% nbgrader={"grade": false, "grade_id": "gpt", "locked": false, "schema_version": 3, "solution": true}
class GPT(nn.Module):
    """Decoder-only language model: (B, T) ids -> (B, T, vocab) logits, and the loss when targets are given."""

    def __init__(self, vocab, width, heads, layers, max_len):
        super().__init__()
        ### BEGIN SOLUTION
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(Block(width, heads, max_len) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        ### END SOLUTION

    def forward(self, idx, targets=None):
        ### BEGIN SOLUTION
        B, T = idx.shape
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T))  # (B, T, D)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))  # (B, T, vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_gpt_logits", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""GPT's logits: embeddings + positions, your blocks in order, the final norm, the head, with the test's parameters."""
from course.tiny_gpt_checks import check_model

check_model(GPT, vocab=11, width=8, heads=2, layers=2, max_len=6, batch=2, length=6, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_logits  # the grader's side only

compare_logits(GPT, vocab=11, width=8, heads=2, layers=2, max_len=6, batch=2, length=6, seed=1)
compare_logits(GPT, vocab=13, width=12, heads=3, layers=2, max_len=9, batch=3, length=7, seed=5)
compare_logits(GPT, vocab=7, width=6, heads=1, layers=1, max_len=5, batch=1, length=5, seed=7)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_gpt_loss", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""With targets, the loss is the mean cross-entropy of your logits against the targets as given; without them, None."""
from course.tiny_gpt_checks import check_loss

check_loss(GPT, vocab=9, width=8, layers=1, batch=2, length=5, seed=2)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_loss  # the grader's side only

compare_loss(GPT, vocab=9, width=8, layers=1, batch=2, length=5, seed=2)
compare_loss(GPT, vocab=15, width=12, layers=2, batch=3, length=7, seed=8)
### END HIDDEN TESTS

# %% [markdown]
# ### Predict, then run (1 point)
#
# A freshly built model has small, nearly equal logits at every position: it has no idea yet
# which character comes next. Before you run the cell after the test, predict the **loss of
# the untrained model** on a batch of the poem, the mean cross-entropy in nats that `forward`
# returns, and assign it to `PREDICTED_INITIAL_LOSS`. Reason it out: what would the loss be if
# the logits were exactly equal, and which way does a small spread in them move it? A
# prediction within the range an untrained model of this chapter gives across seeds counts.

# %% nbgrader={"grade": false, "grade_id": "predict_initial_loss", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_INITIAL_LOSS = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_INITIAL_LOSS = 4.7  # ln 96 = 4.56 for equal logits; their small random spread adds a little
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_initial_loss", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_INITIAL_LOSS: the mean cross-entropy (nats) of an untrained model over the vocabulary of the poem."""
from course import check_number

prediction = check_number("PREDICTED_INITIAL_LOSS", PREDICTED_INITIAL_LOSS)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

# equal logits give ln 96 = 4.564; the chapter's untrained models start between about 4.6 and 4.9 (the random
# logits' spread adds a little): a prediction from 4.47 to 4.99 counts, the centre 4.73 within 5.5 %
prediction = check_prediction("PREDICTED_INITIAL_LOSS", PREDICTED_INITIAL_LOSS, 4.73, rel=0.055, known=(
    (VOCAB, "that is the number of characters the model chooses among: equal logits give the right one "
            "probability 1/vocabulary, and the loss is minus the natural log of that probability"),
    (math.log2(VOCAB), "that is in bits: F.cross_entropy uses the natural log, so the loss is in nats"),
    (1 / VOCAB, "that is the probability equal logits give the right character: the loss is minus its "
                "natural log"),
    (math.log(128), "that is the log of the context length, 128: the model chooses among the characters of the "
                    "vocabulary, not among positions"),
    (0.0, "that is a model that is always sure and always right: an untrained model spreads its probability "
          "nearly evenly over the vocabulary"),
), hint="equal logits give the right character probability 1/vocabulary at every position, and the loss is the "
        "mean of -ln p; a small random spread of the logits changes that only a little")
### END HIDDEN TESTS

# %% [markdown]
# Check it: untrained models of your class, on one batch of the training text, from three seeds.

# %%
# demo only: untrained models on one batch
inputs, targets = lm_batch(train_ids, 16, 128, torch.Generator().manual_seed(1))
for seed in range(3):
    torch.manual_seed(seed)
    logits, loss = GPT(VOCAB, width=128, heads=4, layers=3, max_len=128)(inputs, targets)
    print(f"seed {seed}: logits {tuple(logits.shape)}, loss {loss.item():.3f}, "
          f"spread of the logits (std) {logits.std().item():.2f}")
print(f"equal logits: ln {VOCAB} = {math.log(VOCAB):.3f}")

# %% [markdown]
# With exactly equal logits every character gets probability $1/96$ and the loss is
# $\ln 96 \approx 4.564$ nats. The untrained model's logits are not equal: the head's random
# weights give them a spread of about one unit, so the right character is sometimes a little
# above and sometimes a little below average, and because $-\ln$ is convex the losses do not
# cancel: the mean lands somewhat above $\ln 96$ (the seeds above give the range). Everything the
# training below gains is measured from there.

# %% [markdown]
# ## Part E · One training step (2 points)
#
# Training repeats one step: the loss of a batch, its gradients, and an update. Write
# `train_step(model, optimizer, scheduler, inputs, targets, max_grad_norm)`, in this order:
#
# 1. `_, loss = model(inputs, targets)`;
# 2. clear the old gradients (`optimizer.zero_grad()`), then `loss.backward()`;
# 3. **clip** the gradients: `torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)`
#    rescales them all together when their joint norm is above `max_grad_norm`, so one unlucky
#    batch cannot throw the weights far;
# 4. `optimizer.step()`, then `scheduler.step()` (the learning rate of the next step);
# 5. return the loss computed in step 1, as a Python float (`loss.item()`).
#
# The test runs three steps of your function on a small model of its own, with AdamW and a
# schedule, and compares the weights after each step and the losses with the same steps taken
# by the book.

# %% nbgrader={"grade": false, "grade_id": "train_step", "locked": false, "schema_version": 3, "solution": true}
def train_step(model, optimizer, scheduler, inputs, targets, max_grad_norm):
    """One update of model on (inputs, targets), gradients clipped to max_grad_norm; returns the loss before it."""
    ### BEGIN SOLUTION
    _, loss = model(inputs, targets)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    scheduler.step()
    return loss.item()
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "training_setup", "locked": true, "schema_version": 3, "solution": false}
# kernel only
# (this cell runs in your notebook only: it builds the small model and optimiser your train_step is tried on below)
class BigramLM(nn.Module):
    """The smallest language model: an embedding read as logits. (B, T) ids -> ((B, T, vocab) logits, loss)."""

    def __init__(self, vocab, width):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx, targets=None):
        logits = self.head(self.token_embedding(idx))  # (B, T, vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def training_setup(vocab, width, seed, lr, decay):
    """A BigramLM from seed, AdamW at lr, and a schedule multiplying the rate by decay after every step."""
    torch.manual_seed(seed)
    model = BigramLM(vocab, width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: decay ** step)


# %% [markdown]
# Check it: ten steps on one batch of the poem; the loss falls, and the learning rate follows
# the schedule.

# %%
# demo only: ten steps of a tiny model
tiny_model, tiny_optimizer, tiny_schedule = training_setup(VOCAB, 16, seed=0, lr=0.05, decay=0.8)
inputs, targets = lm_batch(train_ids, 8, 32, torch.Generator().manual_seed(0))
for step in range(10):
    loss = train_step(tiny_model, tiny_optimizer, tiny_schedule, inputs, targets, max_grad_norm=1.0)
    print(f"step {step}: loss {loss:.3f}, next learning rate {tiny_schedule.get_last_lr()[0]:.4f}")

# %% nbgrader={"grade": true, "grade_id": "test_train_step", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""train_step returns the loss before the step, clips the gradients, steps the optimiser, then the schedule."""
from course.tiny_gpt_checks import check_train_step

check_train_step(train_step, training_setup, vocab=7, width=4, seed=0)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_train_step  # the grader's side only

compare_train_step(train_step, training_setup, vocab=7, width=4, seed=0, max_grad_norm=0.05)
compare_train_step(train_step, training_setup, vocab=11, width=6, seed=1, max_grad_norm=100.0)
### END HIDDEN TESTS

# %% [markdown]
# ## A ladder of models: what each part buys
#
# Before the full model trains, a measurement of what each of your parts is worth. Six models,
# each one a rung above the last, are scored on the validation lines in **bits per character**
# (the mean cross-entropy in nats divided by $\ln 2$: how many yes/no questions, on average,
# the model still needs to pin down the next character):
#
# 1. **counted bigram**: a $96 \times 96$ table of how often each character follows each
#    other in the training lines (each count plus $0.1$, so that no pair gets probability 0);
#    no training, only counting;
# 2. **neural bigram**: `token_embedding` then `head`, trained: it can learn no more than the
#    table, since it too sees only the previous character;
# 3. **+ causal self-attention**: one `MultiHeadSelfAttention` on the embeddings, with a
#    residual, before the head: each position may now read every character before it, but
#    with no positions it cannot tell near from far;
# 4. **+ positions**: the same with `position_embedding` added to the embeddings;
# 5. **+ FFN with residuals and norms**: one of your `Block`s and a final norm: `GPT` with one
#    layer;
# 6. **the full model**: `GPT` with three layers, the model trained afterwards for longer.
#
# Each neural rung trains on the same short budget: 300 steps of `train_step`, 16 windows of
# 128 characters each, AdamW with the learning rate warming up to $10^{-2}$ then decaying (a
# higher rate than the full training below uses: on a short budget it gets further). Before you run
# it, write your prediction in the next cell: the order of the six from the most bits per
# character to the fewest, and which step down you expect to be the largest. (This cell is not
# graded; compare it with the table.)

# %%
MY_PREDICTION = """
(your order and your reasons here)
"""

# %%
# demo only: the rungs and a short training for each
class Rung(nn.Module):
    """A rung of the ladder below a Block: embeddings, optionally positions and one attention, and the head."""

    def __init__(self, vocab, width, heads, max_len, attention=False, positions=False):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(max_len, width) if positions else None
        self.attention = MultiHeadSelfAttention(width, heads, max_len) if attention else None
        self.head = nn.Linear(width, vocab)

    def forward(self, idx, targets=None):
        x = self.token_embedding(idx)  # (B, T, D)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(idx.shape[1]))
        if self.attention is not None:
            x = x + self.attention(x)
        logits = self.head(x)  # (B, T, vocab)
        return logits, None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def validation_loss(model, ids, context=128):
    """Mean cross-entropy (nats) of every character of ids after the first, each scored once."""
    windows = ids.unfold(0, context + 1, context)  # (n, context + 1): window k starts at k * context
    model.eval()
    with torch.no_grad():
        _, loss = model(windows[:, :-1], windows[:, 1:])
    model.train()
    return loss.item()


def train(model, steps, evaluate_every, seed=0, lr=1e-2):
    """steps of train_step on windows of the training lines; -> {step: validation bits per character}."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.1)
    batches, curve = torch.Generator().manual_seed(seed), {}
    for step in range(steps):
        train_step(model, optimizer, schedule, *lm_batch(train_ids, 16, 128, batches), max_grad_norm=1.0)
        if (step + 1) % evaluate_every == 0 or step + 1 == steps:
            curve[step + 1] = validation_loss(model, valid_ids) / math.log(2)
    model.eval()
    return curve


quick = short_demos()  # False here: True only when a short run of the demos is asked for
short = 20 if quick else 300
rungs = {"neural bigram": lambda: Rung(VOCAB, 128, 4, 128),
         "+ causal self-attention": lambda: Rung(VOCAB, 128, 4, 128, attention=True),
         "+ positions": lambda: Rung(VOCAB, 128, 4, 128, attention=True, positions=True),
         "+ FFN, residuals, norms": lambda: GPT(VOCAB, width=128, heads=4, layers=1, max_len=128),
         "full model (3 blocks)": lambda: GPT(VOCAB, width=128, heads=4, layers=3, max_len=128)}

pair_counts = torch.zeros(VOCAB, VOCAB, dtype=torch.float64)
pair_counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64),
                       accumulate=True)
bigram = (pair_counts + 0.1) / (pair_counts + 0.1).sum(dim=1, keepdim=True)  # row a: p(next | a)
windows = valid_ids.unfold(0, 129, 128)  # the characters validation_loss scores, and their predecessors
scored, previous = windows[:, 1:].reshape(-1), windows[:, :-1].reshape(-1)
ladder = {"counted bigram": -bigram[previous, scored].log2().mean().item()}
curves, ladder_cpu = {}, {}
for name, build in rungs.items():
    torch.manual_seed(0)
    cpu = time.process_time()
    curves[name] = train(build(), short, evaluate_every=max(short // 4, 1))
    ladder_cpu[name] = time.process_time() - cpu
    ladder[name] = curves[name][short]
print(f"{'model':26s} {'bits/char':>9s} {'CPU s':>6s}")
for name, value in ladder.items():
    print(f"{name:26s} {value:9.3f} {ladder_cpu.get(name, 0.0):6.1f}")
print(f"the ladder's training: {sum(ladder_cpu.values()):.0f} s of CPU time")

# %%
# demo only: the validation curves of the rungs
ax = plot_curves(list(curves["neural bigram"]), {name: list(curve.values()) for name, curve in curves.items()},
                 xlabel="training step", ylabel="validation bits per character",
                 title=f"The ladder: each rung {short} steps", hlines={"counted bigram": ladder["counted bigram"]})
plt.show()

# %% [markdown]
# In the run this text was written from (your numbers will differ a little), the six rungs
# needed 3.134, 3.144, 3.087, 2.801, 2.686 and 2.632 bits per character, in the order of the
# table, and their training took about 80 s of CPU time. What each step down says:
#
# * **neural bigram ≈ counted bigram** (3.144 against 3.134): it sees the same single
#   character, so the table of counts is the best it can learn; training only approaches it.
# * **+ attention, no positions: a little** (0.06 bits): each position reads every character
#   before it, but as a bag: "which letters occurred" without "where".
# * **+ positions: the largest step** (0.29 bits): now a head can pick the previous character,
#   or the one two back, by where it is, and the model knows more than a bigram ever can.
# * **+ FFN, residuals and norms** (0.12 bits), then **two more blocks** (0.05 bits on this
#   short budget: a deeper model needs more steps to use its depth; the full training below
#   gives it five times as many).

# %% [markdown]
# ## Training the model
#
# Now the full model, longer: 3 blocks of width 128 with 4 heads and a context of 128
# characters (two couplets and more), about 640,000 parameters; 1,000 steps of your
# `train_step`, each on 16 windows of 128 characters from the training lines, with the learning
# rate warming up over the first 100 steps to $3 \cdot 10^{-3}$ and then decaying (a "one-cycle"
# schedule), and the gradients clipped to norm 1. The model starts from `torch.manual_seed(0)`
# and the batches come from a seeded generator. It needs about 3 minutes of one CPU thread;
# on a busy machine the clock on the wall runs longer, so the last line reports both. Every
# 200 steps it prints the validation loss: every character of the 254 validation lines, scored
# once (`validation_loss` cuts them into windows of 128 that overlap by one character).

# %%
# demo only: the training run (autograde skips it)
steps = 40 if quick else 1000
torch.manual_seed(0)
model = GPT(VOCAB, width=128, heads=4, layers=3, max_len=128)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
batches = torch.Generator().manual_seed(0)
train_losses, valid_curve, start, cpu_start = [], {}, time.time(), time.process_time()
for step in range(steps):
    train_losses.append(train_step(model, optimizer, schedule, *lm_batch(train_ids, 16, 128, batches),
                                   max_grad_norm=1.0))
    if step % 200 == 0 or step == steps - 1:
        valid_curve[step] = validation_loss(model, valid_ids)
        print(f"step {step:4d}: train loss {train_losses[-1]:.3f}, validation loss {valid_curve[step]:.3f} "
              f"({time.time() - start:.0f} s)")
model.eval()
training_cpu = time.process_time() - cpu_start
print(f"{sum(p.numel() for p in model.parameters())} parameters, {steps} steps in {time.time() - start:.0f} s "
      f"on the clock, {training_cpu:.0f} s of CPU time")
print(f"all the chapter's training: {training_cpu + sum(ladder_cpu.values()):.0f} s of CPU time")

# %%
# demo only: the curves
ax = plot_curves(range(steps), {"train (one batch)": train_losses}, xlabel="step", ylabel="cross-entropy (nats)",
                 title="A character-level GPT on Truyện Kiều", marker=None,
                 hlines={f"ln {VOCAB}, equal logits": math.log(VOCAB)})
ax.plot(list(valid_curve), list(valid_curve.values()), "o-", label="validation")
ax.legend()
plt.show()

# %% [markdown]
# ## Bits per character: the GPT against two counting models
#
# The trained model against two counting models, counted on the training lines and scored on
# the same characters of the validation lines: the **unigram** (each character with its
# frequency, whatever came before) and the counted **bigram** of the ladder. The bigram knows
# which letters follow which, but nothing of syllables, let alone lines.

# %%
# demo only: the three models on the validation lines
unigram = (torch.bincount(train_ids, minlength=VOCAB).double() + 0.1)
unigram /= unigram.sum()
bits = {"unigram": -unigram[scored].log2().mean().item(),
        "bigram": ladder["counted bigram"],
        "GPT": validation_loss(model, valid_ids) / math.log(2)}
for name, value in bits.items():
    print(f"{name:8s} {value:.3f} bits per character")
margin = bits["bigram"] - bits["GPT"]
print(f"the GPT needs {margin:.3f} fewer bits per character than the bigram model")
assert quick or margin > 0.5, "the trained GPT should beat the bigram clearly"

# %% [markdown]
# In the run this text was written from (your numbers will differ a little), the trained GPT
# needed 2.351 bits per character on verse it had never read: 0.783 fewer than the bigram
# model's 3.134, and less than half of the unigram model's 5.016; the full model of the ladder,
# with the same parts and 300 steps, had reached 2.632. Its 1,000 steps took about 140 s of CPU
# time, the whole chapter's training about 220 s. A fraction of a bit per character is a lot: over the 28
# characters of the poem's first line, 0.783 bits per character is a factor of about
# $2^{0.783 \cdot 28} \approx 2^{22}$ in the probability the two models give the line.

# %% [markdown]
# ## Part F · From logits to the next character (5 points)
#
# To write, the model's logits for the last position become a probability for every character,
# and one character is drawn. Three knobs shape that distribution, applied in this order (the
# order of Hugging Face's logits processors):
#
# 1. **temperature** $\tau > 0$: the logits are divided by $\tau$ **before** the softmax.
#    $\tau < 1$ sharpens the distribution (as $\tau \to 0$ it becomes the argmax, one-hot),
#    $\tau > 1$ flattens it. Dividing the probabilities after the softmax is not the same thing.
# 2. **top-k**: keep only the characters whose logit is **at least the k-th largest** (so a
#    character tied with the k-th is kept too: with ties, more than k survive); set the others
#    to $-\infty$. `top_k` at or above the vocabulary size keeps everything.
# 3. softmax, then **top-p** (nucleus sampling) on those probabilities: sort them from the
#    largest, and keep a character when the characters **before** it in that order total
#    **less than p**. So the character that crosses p is kept, and the nucleus is the smallest
#    set whose total reaches p; when a total hits p exactly, the character after it is dropped.
#    The kept probabilities are then divided by their sum. (When two characters tie exactly at
#    the boundary, either order is fine; the tests avoid that case.)
#
# The order matters when the knobs are combined, as the chapter's own calls combine them: the
# nucleus of a distribution sharpened by $\tau = 0.5$ is smaller than that of the raw logits,
# and top-p measured before top-k has removed anything keeps a different set.
#
# Write `next_token_probs(logits, temperature=1.0, top_k=None, top_p=None)`: `logits` is
# `(B, vocab)`; return the probabilities, `(B, vocab)`, each row summing to 1, exact zeros for the
# characters dropped, each in the vocabulary's own order. `None` means "no filter".
#
# Then `sample_next(probs, generator)`: one draw per row, `(B, 1)` int64, with exactly
# `torch.multinomial(probs, 1, generator=generator)`, so that a given generator state always
# writes the same text.

# %% nbgrader={"grade": false, "grade_id": "sampling", "locked": false, "schema_version": 3, "solution": true}
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """(B, vocab) logits -> (B, vocab) probabilities after temperature, top-k and top-p."""
    ### BEGIN SOLUTION
    logits = logits / temperature  # (B, V)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))  # ties with the k-th survive
    probs = logits.softmax(dim=-1)  # (B, V)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V)
        cumulative = sorted_probs.cumsum(dim=-1)
        before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before >= top_p)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs
    ### END SOLUTION


def sample_next(probs, generator):
    """One character id per row of probs (B, vocab), drawn with generator: (B, 1) int64."""
    ### BEGIN SOLUTION
    return torch.multinomial(probs, 1, generator=generator)
    ### END SOLUTION


# %% [markdown]
# Check it: five logits, with the temperature, top-k (2 and 3: the third and fourth logits tie),
# top-p, and all three together. With $p = 0.75$ on probabilities $0.5, 0.25, 0.125, 0.125$ the
# total reaches $p$ exactly after two characters, so two are kept.

# %%
logits = torch.tensor([[3.0, 2.0, 1.0, 1.0, -1.0]])
for settings in ({}, {"temperature": 0.5}, {"temperature": 2.0}, {"top_k": 2}, {"top_k": 3}, {"top_p": 0.8},
                 {"temperature": 2.0, "top_k": 4, "top_p": 0.8}):
    print(f"{str(settings):46s}", next_token_probs(logits, **settings)[0])
dyadic = torch.tensor([[2.0, 1.0, 0.0, 0.0]], dtype=torch.float64) * math.log(2)  # probabilities 1/2, 1/4, 1/8, 1/8
print("top_p=0.75 on 1/2, 1/4, 1/8, 1/8:", next_token_probs(dyadic, top_p=0.75)[0])
draws = sample_next(next_token_probs(logits.expand(1000, 5), top_k=3), torch.Generator().manual_seed(0))
print("1000 draws with top_k=3, counts per character:", torch.bincount(draws[:, 0], minlength=5).tolist())

# %% nbgrader={"grade": true, "grade_id": "test_probs_temperature", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The temperature divides the logits before the softmax; near 0 the distribution is one-hot on the largest logit."""
logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]], dtype=torch.float64)
probs = attempt("next_token_probs(logits, temperature=0.5)", next_token_probs, logits, temperature=0.5)
check_shape("next_token_probs(logits, temperature=0.5)", probs, (1, 4), hint="one probability per character")
check_close("row sums of next_token_probs(logits, temperature=0.5)", probs.sum(-1), torch.ones(1, dtype=torch.float64),
            atol=1e-9, hint="the temperature divides the logits, then softmax: the probabilities sum to 1")
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import check_temperature  # the grader's side only

check_temperature(next_token_probs)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_probs_top_k", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""top-k keeps the characters whose logit is at least the k-th largest (ties included), k = 1 and k >= vocab too."""
logits = torch.tensor([[1.0, 3.0, 2.0, 0.0, 2.5]], dtype=torch.float64)
probs = attempt("next_token_probs(logits, top_k=2)", next_token_probs, logits, top_k=2)
check_shape("next_token_probs(logits, top_k=2)", probs, (1, 5), hint="one probability per character")
kept = int((probs > 0).sum())
check_true(kept == 2, f"with top_k=2 and no ties, {kept} characters keep a probability: exactly the 2 largest logits "
           "should, the others get probability 0")
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import check_top_k  # the grader's side only

check_top_k(next_token_probs)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_probs_top_p", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""top-p keeps the smallest set of most probable characters whose total reaches p, the one crossing p included."""
logits = torch.tensor([[2.0, 1.0, 0.0, 0.0]], dtype=torch.float64) * math.log(2)  # probabilities 1/2, 1/4, 1/8, 1/8
probs = attempt("next_token_probs(logits, top_p=0.6)", next_token_probs, logits, top_p=0.6)
check_shape("next_token_probs(logits, top_p=0.6)", probs, (1, 4), hint="one probability per character")
check_close("next_token_probs(logits, top_p=0.6) on probabilities 1/2, 1/4, 1/8, 1/8", probs,
            torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]], dtype=torch.float64), atol=1e-9,
            likely_causes={"the character that crosses p is dropped (keep it: the characters before it total less "
                           "than p)": torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)},
            hint="keep a character when the more probable ones total less than p, then divide by the kept total")
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import check_top_p  # the grader's side only

check_top_p(next_token_probs)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_probs_combined", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""The knobs combined, in the text's order: temperature, then top-k (ties kept), then top-p on what is left."""
logits = torch.tensor([[3.0, 2.0, 1.2, 0.8, -1.0]], dtype=torch.float64)
probs = attempt("next_token_probs(logits, temperature=2.0, top_k=4, top_p=0.8)", next_token_probs, logits,
                temperature=2.0, top_k=4, top_p=0.8)
check_shape("next_token_probs(logits, temperature=2.0, top_k=4, top_p=0.8)", probs, (1, 5),
            hint="one probability per character")
check_close("row sums of next_token_probs(logits, temperature=2.0, top_k=4, top_p=0.8)", probs.sum(-1),
            torch.ones(1, dtype=torch.float64), atol=1e-9, hint="each row of probabilities sums to 1")
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import check_combined  # the grader's side only

check_combined(next_token_probs)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_sample_next", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""sample_next draws one character per row, (B, 1), never one of probability 0, with the generator it is given."""
probs = torch.tensor([[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]]).repeat(100, 1)  # (200, 4)
draws = attempt("sample_next(probs, generator)", sample_next, probs, torch.Generator().manual_seed(0),
                hint="torch.multinomial(probs, 1, generator=generator)")
check_shape("sample_next(probs, generator)", draws, (200, 1), hint="one draw per row, as a column (B, 1)")
check_true(bool((probs.gather(1, draws.long()) > 0).all()), "sample_next drew a character of probability 0: draw "
           "from the probabilities of each row (torch.multinomial(probs, 1, ...))")
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import check_sampling  # the grader's side only

check_sampling(sample_next)
### END HIDDEN TESTS

# %% [markdown]
# ## Part G · Writing, with and without a KV cache (4 points)
#
# To write, a model starts from a prompt and appends one character at a time: the logits of
# the last position, `next_token_probs`, `sample_next`, and the new character joins the text.
# Without a cache, every new character costs a forward pass over the whole text so far (cut to
# the last `max_len` characters, the context the learned positions cover). As in chapter 08, a
# causal model never changes the keys and values of earlier positions, so each block can keep
# them: a step then runs the **one new character** through the model and lets its query attend
# over the cache. Two things differ from chapter 08: the cache is one `(K, V)` pair **per
# block**, and the new character needs its **position**, which is the number of characters
# already cached (not 0).
#
# First `cached_step(model, token, caches=None)` for a model with the names of Part D:
#
# * `token` is `(B, 1)`, the newest character; `caches` is `None` before the first character,
#   otherwise the list returned by the previous step: one `(K, V)` per block, each
#   `(B, H, T_past, d_head)`;
# * embed the token at position `T_past`; in every block, `norm1`, then the attention's `qkv`
#   split into heads, the new key and value **appended along the positions axis (dim 2)**, the
#   one query attending over all cached positions **without a mask** (they are all in its
#   past), the heads merged and `proj`, the residual; then the FFN sublayer as in `Block`; then
#   `norm` and `head`;
# * return `(logits, caches)`: the logits of the next character `(B, vocab)` and the new list.
#
# Then `generate(model, prompt_ids, n_new, generator, temperature=1.0, top_k=None, top_p=None,
# use_cache=True)`: `prompt_ids` is `(B, T0)`; return `(B, T0 + n_new)`, the prompt followed by
# the `n_new` characters drawn, each with `next_token_probs` on the last logits and one call of
# `sample_next(probs, generator)`. With `use_cache`, run the prompt through `cached_step` one
# character at a time, then each new character; once the text fills the context
# (`model.position_embedding.num_embeddings` characters) the cache can go no further, and the
# rest is written as without it (the window slides, and every position in it changes). Both
# ways must write the same characters for the same generator. Decorate it with
# `@torch.no_grad()`: writing needs no gradients.
#
# The tests run your functions on a model of their own with the names of Part D, compare the
# logits of every step with the full forward pass, and the keys and values in every cache with
# the ones the model computes; they also hand your step caches it did not make (of another
# text), which it must continue as they are.

# %% nbgrader={"grade": false, "grade_id": "cached_step", "locked": false, "schema_version": 3, "solution": true}
def cached_step(model, token, caches=None):
    """Logits (B, vocab) of the character after token (B, 1), given the (K, V) caches of each block; -> (logits, caches)."""
    ### BEGIN SOLUTION
    B = token.shape[0]
    start = 0 if caches is None else caches[0][0].shape[2]  # characters already cached
    x = model.token_embedding(token) + model.position_embedding(torch.tensor([start]))  # (B, 1, D)
    new_caches = []
    for index, block in enumerate(model.blocks):
        attention, D = block.attention, x.shape[-1]
        q, k, v = (t.view(B, 1, attention.n_heads, attention.d_head).transpose(1, 2)  # (B, H, 1, d_head)
                   for t in attention.qkv(block.norm1(x)).split(D, dim=-1))
        if caches is not None:
            k = torch.cat([caches[index][0], k], dim=2)  # (B, H, T_past + 1, d_head)
            v = torch.cat([caches[index][1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, d_head): no mask, all cached keys are past
        x = x + attention.proj(y.transpose(1, 2).reshape(B, 1, D))
        x = x + block.ffn(block.norm2(x))
        new_caches.append((k, v))
    return model.head(model.norm(x))[:, -1], new_caches
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "generate", "locked": false, "schema_version": 3, "solution": true}
@torch.no_grad()
def generate(model, prompt_ids, n_new, generator, temperature=1.0, top_k=None, top_p=None, use_cache=True):
    """prompt_ids (B, T0) -> (B, T0 + n_new): each new character drawn from the model's next-token distribution."""
    ### BEGIN SOLUTION
    idx, caches, context = prompt_ids, None, model.position_embedding.num_embeddings
    use_cache = use_cache and idx.shape[1] <= context
    if use_cache:  # the prompt through the cache, one character at a time
        for t in range(idx.shape[1]):
            logits, caches = cached_step(model, idx[:, t:t + 1], caches)
    for _ in range(n_new):
        if not use_cache:  # the whole text again, cut to the last `context` characters
            logits = model(idx[:, -context:])[0][:, -1]  # (B, vocab)
        probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        idx = torch.cat([idx, sample_next(probs, generator)], dim=1)
        use_cache = use_cache and idx.shape[1] <= context  # a full context: the cache can go no further
        if use_cache and idx.shape[1] < prompt_ids.shape[1] + n_new:  # no step after the last character
            logits, caches = cached_step(model, idx[:, -1:], caches)
    return idx
    ### END SOLUTION


# %% [markdown]
# Check it: a small untrained model writes with and without the cache, from the same
# generator seed: the two texts must be the same characters, also past its context of 12.

# %%
torch.manual_seed(1)
small = GPT(VOCAB, width=32, heads=4, layers=2, max_len=12).eval()
prompt = encode("trăm năm")[None]
full = generate(small, prompt, 20, torch.Generator().manual_seed(3), top_k=10, use_cache=False)
cached = generate(small, prompt, 20, torch.Generator().manual_seed(3), top_k=10, use_cache=True)
print(repr(decode(full[0])), "\n", repr(decode(cached[0])), "\nthe same:", torch.equal(full, cached))

# %% nbgrader={"grade": true, "grade_id": "test_cached_step", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""Step by step the logits equal the full forward pass, each (K, V) grows along dim 2 and holds the text's keys and values."""
from course.tiny_gpt_checks import check_cached_steps

check_cached_steps(GPT, cached_step, vocab=10, width=8, heads=2, layers=2, batch=2, length=5, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import cached_step_agrees  # the grader's side only

cached_step_agrees(cached_step, vocab=10, width=8, heads=2, layers=2, batch=2, length=5, seed=1)
cached_step_agrees(cached_step, vocab=17, width=12, heads=3, layers=3, batch=3, length=6, seed=2)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_generate", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""generate writes the prompt and n_new drawn characters, the same with and without the cache, past the context too."""
from course.tiny_gpt_checks import check_generate

check_generate(generate, GPT, vocab=9, width=8, heads=2, layers=1, max_len=6, seed=1)
### BEGIN HIDDEN TESTS
from instructor.references.tiny_gpt import compare_generate  # the grader's side only

compare_generate(generate, vocab=9, width=8, heads=2, layers=1, max_len=6, seed=1)
compare_generate(generate, vocab=12, width=12, heads=3, layers=2, max_len=8, seed=2)
### END HIDDEN TESTS

# %% [markdown]
# ## What it writes
#
# The trained model continues the poem's first line at three temperatures, with top-p 0.95 and
# the same generator seed for each. Read the lines aloud if you can: at a low temperature the
# model repeats its safest syllables; at a high one, the syllables stop being Vietnamese.

# %%
# demo only: the trained model writes
prompt = encode(POEM[0] + "\n")[None]  # (1, T0): "trăm năm trong cõi người ta,\n"
samples = {}
for temperature in (0.5, 0.8, 1.2):
    out = generate(model, prompt, 130, torch.Generator().manual_seed(0), temperature=temperature, top_p=0.95)
    samples[temperature] = decode(out[0])
    counts = [len(line.split()) for line in samples[temperature].split("\n")[1:-1]]
    print(f"--- temperature {temperature}: syllables of the complete lines after the prompt {counts}\n"
          f"{samples[temperature]}")

# %% [markdown]
# In the run this text was written from, the verse has its outline at every temperature: a
# comma closes the shorter lines and a full stop or a question mark the longer ones, and nearly
# all the syllables are Vietnamese ones, many of them the poem's (*nàng*, *thương*, *chàng*,
# *người*). The sense is missing, and the counts are close to 6 and 8 but seldom exact: the
# complete lines after the prompt had 9, 6, 7 and 5 syllables at temperature 0.5, 8, 6 and 7 at
# 0.8, and 5, 5, 8 and 6 at 1.2, where stray punctuation appears too. Your lines will be others;
# counting them over many texts is the next section's job.

# %% [markdown]
# ### What the cache saves
#
# The trained model fills its whole context (128 positions) after the poem's first line, with
# and without the cache, from the same generator. Without the cache every new character costs a
# forward pass over all the characters so far; with it, one character's worth of work plus one
# row of attention per block. The two texts must be identical.

# %%
# demo only: the cost, side by side
prompt = encode(POEM[0] + "\n")[None]  # (1, 29)
n_new = model.position_embedding.num_embeddings - prompt.shape[1]
seconds, written = {}, {}
for use_cache in (False, True):
    start = time.process_time()
    written[use_cache] = generate(model, prompt, n_new, torch.Generator().manual_seed(0), top_p=0.95,
                                  use_cache=use_cache)
    seconds[use_cache] = time.process_time() - start
print(f"{n_new} characters: without the cache {seconds[False]:.3f} s, with it {seconds[True]:.3f} s "
      f"(speed-up {seconds[False] / seconds[True]:.1f}x); the same text: {torch.equal(written[False], written[True])}")
assert torch.equal(written[False], written[True])

# %% [markdown]
# In the run this text was written from, the 99 characters took 0.305 s of CPU without the
# cache and 0.102 s with it, a speed-up of about 3, for the same text (your times will differ
# with the machine). The saving grows with the context: at step $t$ the full pass costs work in
# proportion to $t$ (and attention to $t^2$), the cached step a constant plus one row of $t$
# scores. With only 128 positions and a model this small, much of each step is Python's own
# overhead, the same for both.

# %% [markdown]
# ## Did it learn the meter?
#
# Lục bát ("six-eight") is the meter of Vietnamese folk verse and of this poem. A reader who
# does not speak Vietnamese can still check every one of its rules, because written Vietnamese
# shows everything they need: every **syllable** is written as its own space-separated unit
# (`"trăm năm"` is two syllables), and every syllable carries its **tone** as a mark on a vowel.
# The rules, for a **couplet** (a 6-syllable line and the 8-syllable line after it):
#
# 1. **Counts.** The first line has 6 syllables, the second 8.
# 2. **Tones.** Vietnamese has six tones, and verse sorts them into two classes:
#
#    | tone | mark | example | class |
#    |---|---|---|---|
#    | ngang (level) | none | *ta* | **bằng** (flat) |
#    | huyền (falling) | grave accent ` | *là* | **bằng** |
#    | sắc (rising) | acute accent ´ | *khéo* | **trắc** (sharp) |
#    | hỏi (dipping) | hook above ̉ | *trải* | **trắc** |
#    | ngã (broken) | tilde ˜ | *cõi* | **trắc** |
#    | nặng (heavy) | dot below ̣ | *mệnh* | **trắc** |
#
#    Syllables 2, 4 and 6 of **each** line are bằng, trắc, bằng, and syllable 8 of the 8-line is
#    bằng. (The odd syllables are free.)
# 3. **The rhyme within the couplet.** Syllable 6 of the 6-line rhymes with syllable 6 of the 8-line.
# 4. **The chain rhyme.** Syllable 8 of the 8-line rhymes with syllable 6 of the **next** 6-line,
#    which links each couplet to the next one through the whole poem.
#
# Here is the first couplet, and the line after it, with the syllables that the rules read:
#
# | | 1 | **2** | 3 | **4** | 5 | **6** | 7 | **8** |
# |---|---|---|---|---|---|---|---|---|
# | 6-line | Trăm | **năm** bằng | trong | **cõi** trắc | người | **ta** bằng, rhyme *a* | | |
# | 8-line | Chữ | **tài** bằng | chữ | **mệnh** trắc | khéo | **là** bằng, rhyme *a* | ghét | **nhau** bằng, rhyme *au* |
# | next 6-line | Trải | qua | một | cuộc | bể | **dâu**, rhyme *âu* | | |
#
# *ta* and *là* rhyme (the same *a*, whatever the tone), and *nhau* chains to *dâu*: *au* and
# *âu* are not the same vowel, but they end in the same sound, and that is how the poem rhymes
# (the measurement after Part M shows it).
#
# ### Tones and letters in Unicode
#
# The poem is stored in **NFC**, where a letter with its marks is one code point: "ệ" is U+1EC7.
# `unicodedata.normalize("NFD", text)` takes each letter apart into a base letter and its
# **combining marks**: "ệ" becomes "e", U+0323 (dot below), U+0302 (circumflex). Two kinds of
# marks come out, and telling them apart is the whole difficulty:
#
# * the five **tone marks**: U+0300 grave (huyền), U+0301 acute (sắc), U+0309 hook above (hỏi),
#   U+0303 tilde (ngã), U+0323 dot below (nặng); a syllable has at most one;
# * three marks that make **vowel letters of their own**, not tones: U+0302 circumflex (â, ê, ô),
#   U+0306 breve (ă), U+031B horn (ơ, ư). *năm* ("year") has a breve and no tone mark: its tone
#   is ngang, bằng. "đ" is a letter of its own too (it has no decomposition).
#
# A syllable in a line may also carry punctuation (`ta,`, `nhau.`, `dâu?`) and a capital letter;
# neither changes its tone or its rhyme.
#
# ### What rhymes
#
# A syllable is an **initial** consonant (possibly none), then a **rhyme**: the vowels and the
# final consonant, plus the tone. Two syllables rhyme by their rhyme, whatever their initials
# and (in this sense) their tones. The initials, written with one to three letters:
#
# `b c ch d đ g gh gi h k kh l m n ng ngh nh p ph qu r s t th tr v x`
#
# Take the longest one that starts the syllable (`ngh` before `ng` before `n`): *nghe* is `ngh` +
# `e`, *nhau* is `nh` + `au`, *trăm* is `tr` + `ăm`, *anh* has no initial. Two spelling rules
# make `gi` and `qu` special:
#
# * `qu` is one initial (the u after q is part of the consonant): *quân* is `qu` + `ân`;
# * `gi` before another vowel is one initial (*gia* is `gi` + `a`, *giữa* is `gi` + `ưa`), but
#   when no other vowel follows, the i is the vowel and the initial is `g` alone: *gì* is `g` +
#   `i`, *gìn* is `g` + `in`.
#
# The **rhyme part** of a syllable, as this chapter defines it, is the syllable in lowercase,
# without punctuation and without its tone mark (the vowel letters' marks stay), without its
# initial: *người* → `ươi`, *Kiều,* → `iêu`, *ở* → `ơ`.
#
# Equal rhyme parts are the strict rule, and the poem is looser than that: it rhymes *nhau*
# with *dâu* (`au` / `âu`), *tay* with *đầy* (`ay` / `ây`), *thương* with *sang* (`ương` /
# `ang`). What these pairs share is how they **end**. The provided `rhyme_sound` below is that
# ear: the final consonant of a rhyme part (`c ch m n ng nh p t`), or, when it ends in a vowel,
# its last vowel with the vowel marks dropped (`y` counted as `i`, and a final `o` after another
# vowel as `u`: *ao* sounds like *au*). Two syllables **rhyme**, in this chapter's measurements,
# when their rhyme parts have the same `rhyme_sound`. After Part M you will measure both rules on
# the poem, and how often each holds by chance.

# %% nbgrader={"grade": false, "grade_id": "meter_provided", "locked": true, "schema_version": 3, "solution": false}
TONE_MARKS = {"\u0300": "huyền", "\u0301": "sắc", "\u0309": "hỏi", "\u0303": "ngã", "\u0323": "nặng"}  # NFD tone marks
INITIALS = ("ngh", "ng", "nh", "ch", "tr", "th", "kh", "ph", "gh", "gi", "qu",  # the longest first
            "b", "c", "d", "đ", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "x")
VOWELS = "aăâeêioôơuưy"  # the vowel letters (after the tone mark is taken away)
PUNCTUATION = ",.;:!?"  # what the poem puts around a syllable


def rhyme_sound(part):
    """How a rhyme part ends: its final consonant, else its last vowel without marks (y as i, a final o as u)."""
    bare = "".join(c for c in unicodedata.normalize("NFD", part) if not unicodedata.combining(c))
    for final in ("ng", "nh", "ch", "c", "m", "n", "p", "t"):
        if bare.endswith(final) and len(bare) > len(final):
            return final
    if bare.endswith("y"):
        return "i"
    return "u" if len(bare) > 1 and bare.endswith("o") else bare[-1:]


# Two texts, separated by a blank line: the poem's first 5 lines, then a made-up text of 3 lines.
METER_EXAMPLE = ["Trăm năm trong cõi người ta,", "Chữ tài chữ mệnh khéo là ghét nhau.",
                 "Trải qua một cuộc bể dâu,", "Những điều trông thấy mà đau đớn lòng.",
                 "Lạ gì bỉ sắc tư phong,", "",
                 "trăm năm trong cõi người ta ta,", "cùng nhau lạy tạ giác duyên,",
                 "bộ hành một lũ theo liền một khi."]

# %% [markdown]
# ## Part T · The tone of a syllable (2 points)
#
# Write `tone(syllable)`: `"bằng"` when the syllable's tone is ngang (no tone mark) or huyền (the
# grave accent), `"trắc"` when it is sắc, hỏi, ngã or nặng. Decompose with
# `unicodedata.normalize("NFD", syllable)` and look for the tone marks, the keys of
# `TONE_MARKS`; the circumflex, the breve and the horn are not among them. A syllable may have
# punctuation around it and capitals.

# %% nbgrader={"grade": false, "grade_id": "tone", "locked": false, "schema_version": 3, "solution": true}
def tone(syllable):
    """'bằng' (ngang or huyền) or 'trắc' (sắc, hỏi, ngã, nặng), read from the syllable's tone mark."""
    ### BEGIN SOLUTION
    marks = [TONE_MARKS[c] for c in unicodedata.normalize("NFD", syllable) if c in TONE_MARKS]
    level = not marks or marks[0] == "huyền"  # ngang has no mark
    return "bằng" if level else "trắc"
    ### END SOLUTION


# %% [markdown]
# Check it: the tones of the first couplet, and the pattern at syllables 2, 4, 6 and 8.

# %%
for line in POEM[:2]:
    syllables = line.split()
    print(" ".join(f"{s}:{tone(s)[0]}" for s in syllables))
    print("   syllables 2, 4, 6, 8:", [tone(s) for s in syllables[1::2]])

# %% nbgrader={"grade": true, "grade_id": "test_tone_marks", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""tone: ngang (no mark) and huyền (grave) are bằng; sắc, hỏi, ngã and nặng are trắc."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import tones_agree  # the grader's side only

for seed in (1, 2):
    tones_agree(tone, "plain", seed)
### END HIDDEN TESTS
for syllable, expected in (("ta", "bằng"), ("là", "bằng"), ("tài", "bằng"), ("khéo", "trắc"), ("trải", "trắc"),
                           ("cõi", "trắc"), ("lại", "trắc")):
    said = attempt(f"tone({syllable!r})", tone, syllable)
    check_true(said == expected, f"tone({syllable!r}) gave {said!r}: see the table of tones above")

# %% nbgrader={"grade": true, "grade_id": "test_tone_letters", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""tone: the marks of â, ă, ê, ô, ơ, ư are letters, not tones; punctuation and capitals change nothing."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import tones_agree  # the grader's side only

for seed in (3, 4):
    tones_agree(tone, "lettered", seed)
### END HIDDEN TESTS
for syllable, expected in (("năm", "bằng"), ("người", "bằng"), ("Trăm", "bằng"), ("ta,", "bằng"), ("nhau.", "bằng"),
                           ("mệnh", "trắc"), ("chữ", "trắc")):
    said = attempt(f"tone({syllable!r})", tone, syllable)
    check_true(said == expected, f"tone({syllable!r}) gave {said!r}: only the five tone marks decide the tone")

# %% [markdown]
# ## Part R · The rhyme of a syllable (2 points)
#
# Write `rhyme_part(syllable)`: the syllable in lowercase without the punctuation around it
# (`PUNCTUATION`), without its tone mark (decompose, drop the keys of `TONE_MARKS`, compose
# again with `unicodedata.normalize("NFC", ...)`, so that the vowel letters' marks stay), and
# without its initial: the first of `INITIALS` (they are listed longest first) that starts the
# syllable, except that `gi` counts as the initial only when a vowel (`VOWELS`) follows it, and
# `g` alone otherwise. Return a `str` in NFC.

# %% nbgrader={"grade": false, "grade_id": "rhyme_part", "locked": false, "schema_version": 3, "solution": true}
def rhyme_part(syllable):
    """The syllable's vowels and final, lowercase, without punctuation, its tone mark and its initial consonant."""
    ### BEGIN SOLUTION
    word = syllable.lower().strip(PUNCTUATION)
    word = unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", word) if c not in TONE_MARKS))
    for initial in INITIALS:
        if word.startswith(initial):
            if initial == "gi" and word[2:3] not in tuple(VOWELS):  # gì, gìn: the i is the vowel
                continue
            return word[len(initial):]
    return word  # no initial: the syllable starts with its vowel
    ### END SOLUTION


# %% [markdown]
# Check it: the rhyme parts of the first couplet and the next line; syllables 6 and 6 share one,
# and syllable 8 chains to the next line's 6th.

# %%
for line in POEM[:3]:
    print(" ".join(f"{s}:{rhyme_part(s)}" for s in line.split()))
print("gia, gì, quân, nghe, ở:", [rhyme_part(s) for s in ("gia", "gì", "quân", "nghe", "ở")])

# %% nbgrader={"grade": true, "grade_id": "test_rhyme_initials", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""rhyme_part removes the longest initial that starts the syllable (ngh, ng, nh, ch, tr, ...) and the tone mark."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import rhymes_agree  # the grader's side only

for seed in (5, 6):
    rhymes_agree(rhyme_part, "initials", seed)
### END HIDDEN TESTS
for syllable, expected in (("ta", "a"), ("nghe", "e"), ("người", "ươi"), ("nhau", "au"), ("trăm", "ăm"),
                           ("khéo", "eo"), ("chữ", "ư")):
    said = attempt(f"rhyme_part({syllable!r})", rhyme_part, syllable)
    check_true(said == expected, f"rhyme_part({syllable!r}) gave {said!r}: remove the initial and the tone mark only")

# %% nbgrader={"grade": true, "grade_id": "test_rhyme_special", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""rhyme_part: gi and qu as initials, no initial before a vowel, punctuation and capitals dropped."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import rhymes_agree  # the grader's side only

for seed in (7, 8):
    rhymes_agree(rhyme_part, "special", seed)
### END HIDDEN TESTS
for syllable, expected in (("gia", "a"), ("gì", "i"), ("quân", "ân"), ("ở", "ơ"), ("anh", "anh"), ("Kiều,", "iêu"),
                           ("giữa", "ưa")):
    said = attempt(f"rhyme_part({syllable!r})", rhyme_part, syllable)
    check_true(said == expected, f"rhyme_part({syllable!r}) gave {said!r}: see the rules for gi and qu above")

# %% [markdown]
# ## Part M · The meter of a text (3 points)
#
# Write `meter_report(lines)`, where `lines` is a list of lines (str), possibly several texts
# one after another with a **blank line** (empty or only spaces) between them:
#
# * within each text, the lines pair up in order into couplets: (1st, 2nd), (3rd, 4th), ...; an
#   odd last line of a text belongs to no couplet; a syllable is an item of `line.split()`;
# * a couplet **keeps the counts** when its lines have 6 and 8 syllables;
# * `"counts"`: the share of all couplets that keep the counts;
# * `"tones"`: among the couplets that keep the counts, the share whose syllables 2, 4, 6 of
#   both lines are bằng, trắc, bằng and whose syllable 8 of the 8-line is bằng (use your `tone`);
# * `"rhyme"`: among the couplets that keep the counts, the share whose 6th syllables rhyme;
# * `"chain"`: among the pairs of consecutive couplets **of the same text** that both keep the
#   counts, the share where syllable 8 of the first one's 8-line rhymes with syllable 6 of the
#   second one's 6-line.
#
# Two syllables rhyme when `rhyme_sound(rhyme_part(a)) == rhyme_sound(rhyme_part(b))`. Each
# entry is a pair `(share, n)`: the share and the number of couplets (or pairs) it is a share
# of, `(math.nan, 0)` when there are none. Syllable 2 is `line.split()[1]`.

# %% nbgrader={"grade": false, "grade_id": "meter_report", "locked": false, "schema_version": 3, "solution": true}
def meter_report(lines):
    """{"counts", "tones", "rhyme", "chain"}: each (share, n) over the couplets of the texts in lines."""
    ### BEGIN SOLUTION
    texts, text = [], []
    for line in [*lines, ""]:  # a blank line ends a text
        if line.split():
            text.append(line.split())
        elif text:
            texts.append(text)
            text = []
    couplets = [[(text[i], text[i + 1]) for i in range(0, len(text) - 1, 2)] for text in texts]

    def keeps(couplet):
        return len(couplet[0]) == 6 and len(couplet[1]) == 8

    def rhymes(a, b):
        return rhyme_sound(rhyme_part(a)) == rhyme_sound(rhyme_part(b))

    def share(hits):
        return (sum(hits) / len(hits) if hits else math.nan, len(hits))

    every = [couplet for text in couplets for couplet in text]
    kept = [couplet for couplet in every if keeps(couplet)]
    pattern = ((1, "bằng"), (3, "trắc"), (5, "bằng"))
    links = [(first[1], second[0]) for text in couplets for first, second in zip(text, text[1:])
             if keeps(first) and keeps(second)]
    return {"counts": share([keeps(couplet) for couplet in every]),
            "tones": share([all(tone(line[i]) == t for line in (six, eight) for i, t in pattern)
                            and tone(eight[7]) == "bằng" for six, eight in kept]),
            "rhyme": share([rhymes(six[5], eight[5]) for six, eight in kept]),
            "chain": share([rhymes(eight[7], six[5]) for eight, six in links])}
    ### END SOLUTION


# %% [markdown]
# Check it: the example of the provided cell (two texts: five lines of the poem, then three
# made-up lines), then the whole poem, which must keep its own meter.

# %%
print(meter_report(METER_EXAMPLE))
poem_report = meter_report(POEM)
for key, (share, n) in poem_report.items():
    print(f"the poem, {key:6s}: {share:6.1%} of {n}")
assert tuple(poem_report["counts"]) == (1.0, 1627)

# %% nbgrader={"grade": true, "grade_id": "test_meter_counts", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""meter_report pairs the lines of each text into couplets: "counts" is the share keeping 6 and 8 syllables, of all."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import meter_agrees  # the grader's side only

report = meter_agrees(meter_report, tone, rhyme_part, ("counts",), seed=0, lines=METER_EXAMPLE)
for seed in (9, 10, 11):
    report = meter_agrees(meter_report, tone, rhyme_part, ("counts",), seed)
### END HIDDEN TESTS
report = attempt("meter_report(METER_EXAMPLE)", meter_report, METER_EXAMPLE)
check_true(isinstance(report, dict) and set(report) >= {"counts", "tones", "rhyme", "chain"},
           "meter_report returns a dict with the entries 'counts', 'tones', 'rhyme' and 'chain'")
share, n = report["counts"]
check_true(n == 3, f"meter_report(METER_EXAMPLE)['counts'] is a share of {n}: the example has 3 couplets (the odd "
                   "last line of the first text belongs to none)")
check_true(abs(share - 2 / 3) < 1e-9, f"meter_report(METER_EXAMPLE)['counts'] is {share}: 2 of its 3 couplets keep "
                                      "the counts")

# %% nbgrader={"grade": true, "grade_id": "test_meter_tones", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""meter_report's "tones": of the couplets keeping the counts, the share with bằng, trắc, bằng at 2, 4, 6 and bằng at 8."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import meter_agrees  # the grader's side only

report = meter_agrees(meter_report, tone, rhyme_part, ("tones",), seed=0, lines=METER_EXAMPLE)
for seed in (12, 13, 14):
    report = meter_agrees(meter_report, tone, rhyme_part, ("tones",), seed)
### END HIDDEN TESTS
share, n = attempt("meter_report(METER_EXAMPLE)", meter_report, METER_EXAMPLE)["tones"]
check_true(n == 2, f"meter_report(METER_EXAMPLE)['tones'] is a share of {n}: 2 couplets of the example keep the counts")

# %% nbgrader={"grade": true, "grade_id": "test_meter_rhymes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""meter_report's "rhyme" (the two 6th syllables) and "chain" (8th to the next 6th, within one text) with their counts."""
### BEGIN HIDDEN TESTS
from instructor.references.lucbat import meter_agrees  # the grader's side only

report = meter_agrees(meter_report, tone, rhyme_part, ("rhyme", "chain"), seed=0, lines=METER_EXAMPLE)
for seed in (15, 16, 17):
    report = meter_agrees(meter_report, tone, rhyme_part, ("rhyme", "chain"), seed)
### END HIDDEN TESTS
report = attempt("meter_report(METER_EXAMPLE)", meter_report, METER_EXAMPLE)
check_true(report["rhyme"][1] == 2, f"meter_report(METER_EXAMPLE)['rhyme'] is a share of {report['rhyme'][1]}: 2 "
                                   "couplets of the example keep the counts")
check_true(report["chain"][1] == 1, f"meter_report(METER_EXAMPLE)['chain'] is a share of {report['chain'][1]}: the "
                                    "example has one pair of consecutive couplets of one text keeping the counts")

# %% [markdown]
# ### How strict is the rhyme?
#
# Before measuring the models, the rule itself, on the poem: how many couplets rhyme by
# **equal rhyme parts**, how many by the same `rhyme_sound`, and how often each holds **by
# chance**, when each 6-line is paired with the 8-line of another couplet drawn at random. A rule
# is worth measuring with only if the poem keeps it far more often than chance does.

# %%
# demo only: the strict and the loose rhyme on the poem and on chance pairs
def sixth_pairs(couplets, rule):
    """Share of (6-line, 8-line) pairs whose 6th syllables agree by `rule`."""
    return sum(rule(six.split()[5], eight.split()[5]) for six, eight in couplets) / len(couplets)


rules = {"equal rhyme parts": lambda a, b: rhyme_part(a) == rhyme_part(b),
         "the same rhyme_sound": lambda a, b: rhyme_sound(rhyme_part(a)) == rhyme_sound(rhyme_part(b))}
poem_couplets = list(zip(POEM[0::2], POEM[1::2]))
shuffled = torch.randperm(len(poem_couplets), generator=torch.Generator().manual_seed(0)).tolist()
chance_couplets = [(poem_couplets[i][0], poem_couplets[j][1]) for i, j in enumerate(shuffled)]
rhyme_rates = {name: (sixth_pairs(poem_couplets, rule), sixth_pairs(chance_couplets, rule))
               for name, rule in rules.items()}
for name, (poem_rate, chance_rate) in rhyme_rates.items():
    print(f"{name:22s} the poem's couplets {poem_rate:6.1%}   chance pairs {chance_rate:6.1%}")

# %% [markdown]
# The poem keeps its meter as the rules say, not perfectly: the run above gives the share of its
# 1,627 couplets with the tone pattern and, with the loose rule, the 6-6 rhyme, and 1,626 pairs
# of consecutive couplets for the chain rhyme (about 98 %, 95 % and 95 %; a few couplets bend a
# rule, or this edition spells a syllable differently). Equal rhyme parts hold in only about half
# of its couplets: the poet rhymes by how a syllable ends, and `rhyme_sound` hears that, while by
# chance it agrees in about one pair in six. That is the rule the models are measured with.
#
# ## Measuring the three writers
#
# Now the counted bigram model and the GPT each write, and `meter_report` judges what they
# wrote against the poem's own numbers:
#
# * **Couplets.** Each model writes many short texts, each after the prompt `".\n"` (the end of
#   an 8-line, after which the poem always starts a 6-line), 126 characters each: the GPT's
#   context holds 128 characters, which its KV cache fills in one pass (`generate` with
#   `use_cache=True`). The GPT samples at temperature 0.8 with top-p 0.95, the bigram model
#   draws each character from its counts after the previous one. The last line of each text,
#   cut short, is dropped; a text is about one couplet.
# * **Chain rhyme.** Two whole couplets seldom fit in 128 characters, so the chain is measured
#   on a second set of texts: each continues a real 8-line of the validation lines (never trained
#   on), and `meter_report` reads the chain from that 8-line's couplet to the first couplet the
#   model wrote after it.
# * **Intervals.** A share measured on $n$ couplets is uncertain by about $\pm 1/\sqrt{n}$ at
#   worst. Each share below comes with its **95 % Wilson score interval** (the shares $p$ for
#   which the observed count is not surprising at the 5 % level; it stays inside 0 to 1 and
#   works for shares near 0 or 1, where $p \pm 1.96 \sqrt{p(1-p)/n}$ does not). When the
#   intervals of two models do not overlap, the difference is beyond chance; when they
#   overlap, this measurement cannot tell them apart.

# %%
# demo only: the bigram model and the GPT write; the meter table with 95 % Wilson intervals
def wilson(share, n, z=1.96):
    """The 95 % Wilson score interval (low, high) of a share observed on n trials."""
    if n == 0:
        return math.nan, math.nan
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def bigram_write(prompt, n_new, generator):
    """Each row of prompt (B, T0) continued by n_new characters drawn from the counted bigram table."""
    idx = prompt
    for _ in range(n_new):
        idx = torch.cat([idx, torch.multinomial(bigram[idx[:, -1]], 1, generator=generator)], dim=1)
    return idx


def gpt_write(prompt, n_new, generator):
    return generate(model, prompt, n_new, generator, temperature=0.8, top_p=0.95, use_cache=True)


def written_lines(ids, skip, before=()):
    """The complete lines of each text after its first `skip` characters, the lines `before` first, texts separated
    by a blank line."""
    lines = []
    for row, head in zip(ids, before or [()] * len(ids)):
        lines += [*head, *decode(row[skip:]).split("\n")[:-1], ""]
    return lines


start = time.time()
context = model.position_embedding.num_embeddings
n_texts = 40 if quick else 1000
prompt = torch.tensor([[CHAR_ID["."], CHAR_ID["\n"]]] * n_texts)  # (n_texts, 2)
# the chain's prompts: the validation couplets whose 8-line has the most common length (one batch needs one length)
valid_couplets = list(zip(VALID_LINES[0::2], VALID_LINES[1::2]))
lengths = [len(eight) for _, eight in valid_couplets]
chosen = [c for c in valid_couplets if len(c[1]) == max(set(lengths), key=lengths.count)]
heads = [chosen[i % len(chosen)] for i in range(n_texts)]
chain_prompt = torch.tensor([[CHAR_ID[c] for c in eight + "\n"] for _, eight in heads])  # (n_texts, T0)
reports = {"poem (all couplets)": meter_report(POEM)}
for name, write in (("counted bigram", bigram_write), ("GPT", gpt_write)):
    texts = write(prompt, context - prompt.shape[1], torch.Generator().manual_seed(1))
    chained = write(chain_prompt, context - chain_prompt.shape[1], torch.Generator().manual_seed(2))
    reports[name] = {**meter_report(written_lines(texts, prompt.shape[1])),
                     "chain": meter_report(written_lines(chained, chain_prompt.shape[1], heads))["chain"]}
print(f"{n_texts} texts of {context - 2} characters per model, {len(chosen)} chain prompts ({time.time() - start:.0f} s)")
print(f"{'':20s}" + "".join(f"{key:>29s}" for key in ("counts 6/8", "tone pattern", "6-6 rhyme", "chain rhyme")))
for name, report in reports.items():
    cells = []
    for key in ("counts", "tones", "rhyme", "chain"):
        share, n = report[key]
        low, high = wilson(share, n)
        cells.append(f"{share:6.1%} [{low:5.1%},{high:6.1%}] of {n:<4d}" if n else "no couplet")
    print(f"{name:20s}" + "".join(f"{cell:>29s}" for cell in cells))
level = sum(tone(s) == "bằng" for line in POEM for s in line.split()) / sum(len(line.split()) for line in POEM)
chance = {"tones": level**5 * (1 - level) ** 2,  # 7 syllables drawn at random with the poem's share of bằng
          "rhyme": rhyme_rates["the same rhyme_sound"][1], "chain": rhyme_rates["the same rhyme_sound"][1]}
for key, what in (("counts", "6/8 counts"), ("tones", "tone pattern"), ("rhyme", "6-6 rhyme"), ("chain", "chain rhyme")):
    (gpt_share, gpt_n), (bigram_share, bigram_n) = reports["GPT"][key], reports["counted bigram"][key]
    (gpt_low, gpt_high), (bigram_low, bigram_high) = wilson(gpt_share, gpt_n), wilson(bigram_share, bigram_n)
    apart = gpt_low > bigram_high or bigram_low > gpt_high  # False when either has no couplet (nan)
    said = f"{what:12s}: GPT {gpt_share:6.1%} of {gpt_n:4d}, bigram {bigram_share:6.1%} of {bigram_n:4d}: " + (
        "apart beyond chance" if apart else "not told apart")
    if not gpt_n:
        said = f"{what:12s}: the GPT wrote no couplet that can be judged"
    elif key in chance:
        said += f"; chance {chance[key]:5.1%}: the GPT is " + (
            "above it beyond chance" if gpt_low > chance[key] else "not told apart from it")
    print(said)


# %% [markdown]
# How to read the table. The poem's row does not depend on any training: it is the same in every
# run. The models' rows do, and **your numbers will differ** from the ones quoted here (another
# seed, another number of threads, another machine give another model and other texts); read
# your own table and the verdict lines under it, which the cell computes from the intervals.
#
# In the run this text was written from (1,000 texts per model), the table said:
#
# * **Counts.** The GPT's couplets kept 6 then 8 syllables in 8.2 % of 1,291 (interval 6.8 % to
#   9.8 %), the bigram model's in 0.2 % of 1,684: a difference far beyond chance. The GPT knows
#   roughly how long a line is, the bigram model cannot, but counting to exactly 6 and then
#   exactly 8 is still rare for it.
# * **Tones.** Only couplets that keep the counts can be judged: 106 of the GPT's, 4 of the
#   bigram model's (too few for any conclusion: its interval spans 0 % to 49 %). 8.5 % of the
#   GPT's 106 had the tone pattern (interval 4.5 % to 15.4 %), against 98.2 % in the poem. Seven
#   syllables drawn at random with the poem's share of bằng tones would give the pattern in
#   1.2 % of couplets: the GPT is above that beyond chance, so it has picked up a trace of the
#   tones, and no more than a trace.
# * **The rhyme within the couplet.** 14.2 % of the same 106 couplets rhymed (interval 8.8 % to
#   22.0 %), where chance pairs rhyme in 15.7 %: no sign of it.
# * **The chain rhyme.** Here the GPT did clearly better than chance: 65.7 % of its 102 new 6-lines
#   rhymed with the real 8-line before them (interval 56.1 % to 74.2 %, chance 15.7 %). Both
#   syllables of the chain end a line: the last syllable before a line break rhymes with the last
#   syllable before the next one, a pattern a model of characters can pick up without counting.
#   The 6-6 rhyme falls in the middle of the 8-line, on its 6th syllable, so it needs the count
#   the model has not yet learned.
#
# So after a few minutes of training, what this model of characters took from lục bát is its
# outline (lines of about the right length, ending in a comma or a full stop) and the rhyme from
# one line's end to the next, with a trace of the tones; the count and the rhyme inside the 8-line
# it has not learned.
# Whether a larger model trained longer would, this measurement can tell: the same table, on
# its texts.

# %% [markdown]
# ## Where the heads look
#
# Last, the attention of the trained model on a couplet it never trained on, the first two
# validation lines. For each block and head, the average weight that the characters of the
# 8-syllable line put on: **themselves**, the **previous character**, the characters **since the
# last space** (the rest of their own syllable; for the first syllable of the line that reaches
# back to the end of the line above), and the **6-syllable line** above them. The last row, `uniform`,
# is what a head would put there if it spread its weight evenly over everything it may see: a
# head "prefers" a place only when it puts clearly more there than that.

# %%
# demo only: the attention weights of every block on a validation couplet
couplet = VALID_LINES[0] + "\n" + VALID_LINES[1] + "\n"
ids = encode(couplet)[None]  # (1, T)
T = ids.shape[1]
with torch.no_grad():
    x = model.token_embedding(ids) + model.position_embedding(torch.arange(T))
    maps = []
    for block in model.blocks:
        attended, weights = block.attention(block.norm1(x), return_weights=True)  # weights (1, H, T, T)
        maps.append(weights[0])
        x = x + attended
        x = x + block.ffn(block.norm2(x))
eight = range(len(VALID_LINES[0]) + 1, T - 1)  # the queries of the 8-syllable line
word_start = {i: couplet.rfind(" ", 0, i) + 1 for i in eight}
first_line = slice(0, len(VALID_LINES[0]))
print(repr(couplet))
print("block head   itself  previous  own syllable  6-line above")
shares = lambda w: (np.mean([w[i, i].item() for i in eight]), np.mean([w[i, i - 1].item() for i in eight]),
                    np.mean([w[i, word_start[i]:i].sum().item() for i in eight]),
                    np.mean([w[i, first_line].sum().item() for i in eight]))
for b, weights in enumerate(maps):
    for h, w in enumerate(weights):
        print(f"{b:5d} {h:4d}" + "{:9.2f} {:9.2f} {:13.2f} {:13.2f}".format(*shares(w)))
even = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # every visible key the same weight
print("  uniform " + "{:9.2f} {:9.2f} {:13.2f} {:13.2f}".format(*shares(even)))

# %%
# demo only: the maps of the first block, one per head
fig, axes = plt.subplots(1, 4, figsize=(16, 4.5))
labels = [c if c != "\n" else "⏎" for c in couplet]
for h, ax in enumerate(axes):
    plot_attention(maps[0][h], queries=labels, keys=labels, title=f"block 0, head {h}", ax=ax, annotate=False)
plt.tight_layout()
plt.show()

# %% [markdown]
# What the table of the run this text was written from shows (your model's heads may have
# specialised otherwise), and what it does not:
#
# * **One clear specialist.** Head 2 of block 0 puts 0.90 of its weight on the previous
#   character, where even attention would put 0.02: a "previous-character head", the simplest
#   reading a character model needs (which letter came just before). Its map above is a sharp
#   line just below the diagonal.
# * **No head prefers the line above.** The heads put between 0.05 and 0.62 of their weight on
#   the 6-syllable line, and spreading the weight evenly would put 0.64 there. So nothing here
#   shows a head looking back at the line above to count its syllables or to find its rhyme.
#   The heads lean the other way: 8 of the 12 put 0.14 or more on the characters since the last
#   space, more than twice the even share of 0.06.
# * **What cannot be concluded.** A map says where a head reads, not what the layers after it do
#   with what it read: only removing the head (setting its output to zero) and measuring the
#   loss again would show that the model relies on it. One couplet is one example; other
#   couplets may give other numbers. And the weights of blocks 1 and 2 mix the characters'
#   representations after block 0 has already mixed them, so "position $j$" there no longer means
#   "the character at $j$" alone.

# %% [markdown]
# ## Part H · Quiz (3 points)
#
# Answer each question with one letter, `"a"` to `"d"`, in the cell below.
#
# **Q1.** After the temperature, a row's probabilities are 0.4, 0.3, 0.2 and 0.1. What does
# `next_token_probs` return with `top_k=3, top_p=0.6`?
#
# * a) two characters, 0.4 and 0.3, as they were before the filters removed the others
# * b) three characters, since top-p may not remove what top-k has already kept
# * c) two characters, 4/7 and 3/7, since top-p measures what top-k left, renormalised
# * d) one character, 1.0, since after it the next total, 0.7, goes past p = 0.6
#
# **Q2.** A model of 3 blocks with 4 heads of 32 dimensions has cached 100 characters of one
# text. How many numbers do its caches hold?
#
# * a) 76,800: a key and a value for every block, head, position and dimension
# * b) 38,400: the keys alone, since each value is computed again from its key
# * c) 25,600: one block's keys and values, since the blocks share a single cache
# * d) 115,200: a query, a key and a value for every position, block and head
#
# **Q3.** Two windows hold the same characters in another order but end with the same
# character. How do the next-character probabilities of the ladder's third rung (one causal
# attention with a residual, no positions) compare on them?
#
# * a) they differ, since the causal mask shows each position its own past and so the order
# * b) they differ, since the residual adds the last character's embedding to its output
# * c) they are the same only if no character occurs twice in either of the two windows
# * d) they are the same: the last query attends over the same characters, in any order

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
Q1 = Q2 = Q3 = None  # replace each None with "a", "b", "c" or "d"
### BEGIN SOLUTION
Q1, Q2, Q3 = "c", "a", "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: top-k and top-p combined."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "the kept probabilities are divided by their sum, after each filter, so the row sums to 1 again "
         "(re-read Part F)",
    "b": "top-p works on the probabilities top-k left, renormalised: it keeps the most probable of them until "
         "their total reaches p, and may drop more",
    "d": "the character that crosses p is kept: a character is dropped only when those before it already total "
         "p or more (0.4/0.9 is less than 0.6)"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: the size of a KV cache."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "b": "the values come from their own part of qkv, not from the keys: a cache keeps both, K and V",
    "c": "every block has its own attention and so its own keys and values: one (K, V) per block",
    "d": "a query is used once, by its own position, when the character is read: only keys and values are kept"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: attention without positions."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "the mask decides which characters the last position sees (here all of both windows), not where they "
         "are: without positions a weighted sum is the same in any order (chapter 05)",
    "b": "the residual adds the last character's embedding, and the last character is the same in both windows",
    "c": "repeated characters change nothing: the same characters give the same scores and the same weighted "
         "sum, in any order"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part I · In your own words (2 points, graded by your instructor)
#
# Look at the first three rungs of your ladder. Explain, in three or four sentences, why the
# neural bigram cannot do clearly better than the counted bigram however long it trains, and
# what the attention rung can use that neither bigram has, although it cannot tell the order of
# the characters it reads.

# %% [markdown] nbgrader={"grade": true, "grade_id": "ladder_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** The neural bigram sees only the previous character: its embedding and head
# can at best give, for each previous character, the frequencies of the next one, which is
# exactly what the counted table estimates; training can only approach the table (up to the
# smoothing and to fitting the training lines too closely). The attention rung lets each
# position read every earlier character of the window, so its prediction can depend on which
# characters occurred recently (which letters the current syllable or line has used, whether a
# comma or a line break came recently), information no bigram has. Without positions that
# reading is a bag: the same characters in another order give the same weighted sum, so it
# cannot tell the previous character from one 50 places back except by the residual, which is
# what adding positions fixes.
#
# **Rubric (2 points, one idea each).**
# * 1 point, the bigram's ceiling: the neural bigram conditions on the previous character only, so the best it can learn is, for each previous character, the frequencies of the next one, which the counted table already holds. Earns it: "one character of context" tied to "the same estimate as the table" in any words. Does not: "it needs more training", "it has too few parameters" or "a neural network is no better than counting", with no word of what it conditions on.
# * 1 point, what attention adds: each position reads every earlier character of its window, so the prediction can depend on what occurred recently (the letters of the current syllable or line, a recent comma or line break), but as an unordered mixture: without positions the same characters in another order give the same sum. Earns it: the wider context together with its missing order. Does not: "attention is more powerful" or "attention sees more" without saying what it reads, or the wider context alone with no word of the order it cannot tell.
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the attention rung already knows which character came last" costs the second point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * A character-level GPT is token embeddings plus learned positions, a stack of pre-norm decoder
#   blocks around causal self-attention with a fused QKV projection, a final norm and a linear
#   head; its loss is the cross-entropy of every position against the next character, so one
#   window of text is a whole batch of examples.
# * One training step: the loss, zeroed gradients, backward, clipping to a maximum norm, the
#   optimiser's step, then the schedule's.
# * Bits per character compare models on the same text. The ladder shows what each part buys:
#   a neural bigram learns what counting knows, attention adds the rest of the window as a bag,
#   positions make it a sequence, and the FFN, residuals, norms and depth add the rest.
# * Temperature divides the logits before the softmax; top-k keeps the logits at least the k-th
#   largest, ties included; top-p keeps the most probable characters until their total reaches p,
#   the one that crosses p included; in that order.
# * A KV cache makes every new character cost one position's work; the new character's position
#   is the number of characters already cached, and the cached text is the same as without it.
# * Attention maps show where each head reads, not why.
