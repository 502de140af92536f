# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 07 · Reversing digits: teacher forcing, greedy and beam search
#
# Translation, summarisation and spelling correction share one shape: a sequence goes in, a
# sequence comes out, and the two need not have the same length or the same order
# ("the black cat" becomes "con mèo đen" in Vietnamese: the adjective moves behind the noun).
# One label per input token cannot express that. This notebook builds the standard answer,
# the **encoder-decoder**, and the two things every such model needs at the end: a way to
# train it (teacher forcing) and a way to get a sentence out of it (greedy and beam search).
#
# You will write
#
# * `length_penalty(n, alpha)` and `beam_search(next_probs, width, ...)` on a toy table,
# * `make_reversal_batch(n)`, the teacher-forcing batches of a digit-reversal task,
# * the masks in `ReversalTransformer.forward`, a small `nn.Transformer`,
# * `exact_match`, `greedy_decode` and `beam_decode` for the trained model,
#
# then train the model once (a few seconds on a CPU) and look inside its cross-attention.
# Each exercise has a solution cell, a cell that runs your code, and graded tests; the
# grader also runs hidden tests on random tables and small random models.
#
# **Time:** about 4 hours for a capable student (an estimate, not a measurement).
# **Assumes:** chapters 01 to 06, in particular masks (03), positions (05) and multi-head attention (06).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# under_nbgrader() is True while your notebook is being graded: the training below is shorter then
from course import attempt, check_choice, check_close, check_dtype, check_shape, check_true, under_nbgrader
# the tests' tools: they draw parameters and inputs and read what a module holds (not for your code)
from nboracle import fresh, load_tensors, read_state, set_training
from course.plots import plot_attention, plot_curves

torch.set_printoptions(precision=3, sci_mode=False)
torch.set_num_threads(1)  # a model this small runs faster on one thread than on two that wait for each other

# %% [markdown]
# ## A conditional language model
#
# Write the source as $\mathbf{x} = (x_1, \dots, x_{L_x})$ and the target as
# $\mathbf{y} = (y_1, \dots, y_{L_y})$. The last target token is always `<EOS>`: the model
# decides when to stop by producing it, so $L_y$ counts it. The chain rule splits the
# probability of the whole target into one factor per token, exactly as for a GPT-style
# language model, except that every factor also sees the source:
#
# $$p(\mathbf{y} \mid \mathbf{x}) = \prod_{i=1}^{L_y} p(y_i \mid y_{<i}, \mathbf{x}).$$
#
# A sequence-to-sequence model is therefore a *conditional* language model: it predicts the
# next target token from the target tokens so far and the whole source.
#
# ### The bottleneck of the RNN encoder-decoder
#
# Sutskever, Vinyals and Le (2014) read the source with one recurrent network (the
# **encoder**) and kept only its last hidden state $\mathbf{c}$, a vector of fixed size; a
# second network (the **decoder**) generated the target from $\mathbf{c}$, one token at a
# time, until it produced `<EOS>`. With 4-layer LSTMs, an ensemble of five reached BLEU 34.8
# on WMT'14 English to French against 33.3 for a phrase-based system. They also found an odd
# trick: *reversing the source sentence* raised BLEU from 25.9 to 30.6, probably because it
# puts the first words of source and target close together in time.
#
# The trick is a symptom. Every source sentence, five words or fifty, has to squeeze through
# the same vector $\mathbf{c}$. Bahdanau, Cho and Bengio (2015) called this the bottleneck and
# removed it: keep one encoder vector $\mathbf{h}_j$ per source word and let the decoder, in
# state $\mathbf{s}_{i-1}$ before emitting $y_i$, look back at all of them,
#
# $$e_{ij} = a(\mathbf{s}_{i-1}, \mathbf{h}_j), \qquad
#   \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{k=1}^{L_x} \exp e_{ik}}, \qquad
#   \mathbf{c}_i = \sum_{j=1}^{L_x} \alpha_{ij} \mathbf{h}_j .$$
#
# A small network $a$ scores each source word, softmax turns the scores into weights that sum
# to 1, and $\mathbf{c}_i$ is a context vector made *for step i*. Their attention model did not
# lose quality on long sentences the way the fixed-vector model did, and its weights can be
# read: below is an invented (not learned) alignment for "the black cat" to "con mèo đen".
# The last two rows leave the diagonal where Vietnamese puts the adjective after the noun.

# %%
alignment = torch.tensor([[0.80, 0.05, 0.15],   # con  (classifier, ~ "the")
                          [0.05, 0.10, 0.85],   # mèo  (cat)
                          [0.02, 0.90, 0.08]])  # đen  (black)
assert torch.allclose(alignment.sum(-1), torch.ones(3))
plot_attention(alignment, queries=["con", "mèo", "đen"], keys=["the", "black", "cat"],
               title="an illustrative alignment (invented numbers)")
plt.show()

# %% [markdown]
# ### Cross-attention in the Transformer
#
# The Transformer (Vaswani et al., 2017) keeps the encoder-decoder split and drops the
# recurrence; the original has 6 encoder and 6 decoder layers and reached BLEU 28.4 on WMT 2014
# English to German. A decoder layer has three parts: causally masked self-attention over the
# target, then **cross-attention** to the encoder, then a feed-forward network. Cross-attention
# is the ordinary attention formula with its inputs taken from two places:
#
# $$\mathbf{Q} = \mathbf{S} W^Q, \quad \mathbf{K} = \mathbf{H}_\text{enc} W^K, \quad
#   \mathbf{V} = \mathbf{H}_\text{enc} W^V, \qquad
#   \operatorname{softmax}\!\left(\mathbf{Q}\mathbf{K}^\top / \sqrt{d}\right) \mathbf{V},$$
#
# where $\mathbf{S}$ (`(L_y, D)`) holds the decoder states and $\mathbf{H}_\text{enc}$
# (`(L_x, D)`) the encoder output.
#
# | attention | where | Q from | K, V from | causal mask | scores |
# |---|---|---|---|---|---|
# | self-attention | encoder | source | source | no | $L_x \times L_x$ |
# | masked self-attention | decoder | target | target | yes | $L_y \times L_y$ |
# | cross-attention | decoder | target | encoder output | **no** | $L_y \times L_x$ |
#
# The source is known in full before decoding starts, so nothing in it is "the future":
# cross-attention takes no causal mask. Every decoder layer reads the same
# $\mathbf{H}_\text{enc}$ through its own projections. The weights of one head, for 5 decoder
# positions looking at 12 source positions:

# %%
torch.manual_seed(0)
decoder_states = torch.randn(1, 5, 16)  # (B, L_y, D)
encoder_output = torch.randn(1, 12, 16)  # (B, L_x, D)
cross = nn.MultiheadAttention(16, num_heads=1, batch_first=True)
mixed, weights = cross(decoder_states, encoder_output, encoder_output)  # Q from decoder; K, V from encoder
print("output", tuple(mixed.shape), "weights", tuple(weights.shape))
assert weights.shape == (1, 5, 12) and mixed.shape == (1, 5, 16)

# %% [markdown]
# ## Decoding: why search at all
#
# Once trained, we want the $\mathbf{y}$ with the largest $p(\mathbf{y} \mid \mathbf{x})$. Trying
# them all is hopeless: with a vocabulary of 32 000 tokens and targets of 20 tokens there are
# $32\,000^{20} \approx 10^{90}$ candidates.

# %%
print(f"32 000^20 = 10^{20 * math.log10(32_000):.1f}")
assert round(20 * math.log10(32_000)) == 90

# %% [markdown]
# **Greedy decoding** takes the most probable token at each step and never reconsiders.
# **Beam search** keeps the $B$ best partial hypotheses (the *beam*, $B$ its *width*), scored
# by their summed log-probability $\sum_i \ln p(y_i \mid y_{<i}, \mathbf{x}) = \ln p(\mathbf{y}
# \mid \mathbf{x})$. At every step:
#
# 1. extend each hypothesis of the beam by every possible next token, adding its log-probability;
# 2. among all candidates keep the $B$ with the highest summed log-probability;
# 3. kept candidates that end with `<EOS>` leave the beam for a list of *finished* ones.
#
# Stop when the beam is empty or after `max_len` steps. $B = 1$ is greedy decoding.
# Sutskever et al. found $B = 2$ captured most of the benefit; Vaswani et al. used $B = 4$.
#
# **Length penalty.** Every token adds a term $\ln p \le 0$, so the raw score prefers short
# outputs. Wu et al. (2016) divide by a penalty that grows with the length $|\mathbf{y}|$:
#
# $$s(\mathbf{y}) = \frac{\ln p(\mathbf{y} \mid \mathbf{x})}{\operatorname{lp}(\mathbf{y})},
#   \qquad \operatorname{lp}(\mathbf{y}) = \left(\frac{5 + |\mathbf{y}|}{5 + 1}\right)^{\alpha}.$$
#
# Here $|\mathbf{y}|$ **counts `<EOS>`** (the paper does not say; libraries differ). $\alpha = 0$
# gives $\operatorname{lp} = 1$, raw beam search. There is no universally right $\alpha$: Wu et
# al. used 0.2 with an extra coverage penalty, Vaswani et al. 0.6. Pruning (step 2) uses the
# **raw** log-probability; only the final choice among finished hypotheses divides by lp.
#
# ### A toy decoder
#
# To see the mechanics without any training, pretend a decoder has read its source and that
# the next token depends only on the previous one. The table below (invented numbers, the toy
# example of this chapter) is all the "model" there is:

# %% nbgrader={"grade": false, "grade_id": "toy_table", "locked": true, "schema_version": 3, "solution": false}
TOY_TABLE = {  # previous token -> {next token: probability}
    "<s>": {"con": 0.5, "đàn": 0.4, "<eos>": 0.1},
    "con": {"mèo": 0.34, "chó": 0.33, "chim": 0.33},
    "đàn": {"chim": 0.9, "mèo": 0.1},
    "mèo": {"<eos>": 1.0},
    "chó": {"<eos>": 1.0},
    "chim": {"<eos>": 0.52, "bay": 0.48},
    "bay": {"<eos>": 1.0},
}


def toy_next_probs(prefix):
    """{next token: probability} after `prefix`, a tuple of tokens that starts with "<s>"."""
    return TOY_TABLE[prefix[-1]]


# %% [markdown]
# Before running anything: "con mèo" has probability $0.5 \times 0.34 \times 1.0$ and "đàn
# chim" has $0.4 \times 0.9 \times 0.52$. Which is larger, and which one will greedy decoding
# pick?
#
# ## Part A · Length penalty and beam search (7 points)
#
# Write `length_penalty(n, alpha)`, the Wu et al. penalty for a hypothesis of `n` tokens,
# returned as a Python float.

# %% nbgrader={"grade": false, "grade_id": "length_penalty", "locked": false, "schema_version": 3, "solution": true}
def length_penalty(n, alpha):
    """((5 + n) / 6) ** alpha, the length penalty of a hypothesis of n tokens (<eos> included)."""
    ### BEGIN SOLUTION
    return float(((5 + n) / 6) ** alpha)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_length_penalty", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""length_penalty(n, alpha) = ((5 + n) / 6) ** alpha."""
check_true(abs(length_penalty(7, 0.0) - 1.0) < 1e-12,
           f"length_penalty(7, 0) is {length_penalty(7, 0.0)!r}: alpha = 0 must give 1 (no penalty at all)")
check_true(abs(length_penalty(1, 0.6) - (5 + 1 / 6) ** 0.6) > 1e-9, "length_penalty computes (5 + n / 6) ** alpha: "
           "the division binds before the sum, so put 5 + n in brackets, ((5 + n) / 6) ** alpha")
check_true(abs(length_penalty(1, 0.6) - 1.0) < 1e-12, "length_penalty(1, alpha) must be 1: (5 + 1) / 6 = 1")
check_close("length_penalty(3, 0.6)", length_penalty(3, 0.6), 1.188, atol=1e-3,
            hint="((5 + n) / 6) raised to the power alpha",
            likely_causes={"the ratio is upside down, (6 / (5 + n)) ** alpha: the penalty must grow with n, "
                           "((5 + n) / 6) ** alpha": (6 / 8) ** 0.6})
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(70)
for trial in range(8):
    n, alpha = int(rng.integers(0, 40)), float(rng.uniform(0.0, 2.0))
    check_close(f"length_penalty({n}, {alpha:.3f})", length_penalty(n, alpha), ((5 + n) / 6) ** alpha,
                atol=1e-9, rtol=1e-9, hint="((5 + n) / 6) raised to the power alpha",
                likely_causes={"the ratio is upside down, (6 / (5 + n)) ** alpha: the penalty must grow with n, "
                               "((5 + n) / 6) ** alpha": (6 / (5 + n)) ** alpha})
### END HIDDEN TESTS

# %% [markdown]
# Now `beam_search(next_probs, width, alpha=0.0, max_len=6, start="<s>", eos="<eos>")`.
# `next_probs(prefix)` takes the prefix as a **tuple** of tokens beginning with `start` and
# returns `{token: probability}` (skip tokens of probability 0). Follow the three steps above
# with these conventions, which the tests rely on:
#
# * the beam starts as the single hypothesis `(start,)` with log-probability 0;
# * keep the `width` best candidates by **raw** summed log-probability (`math.log`); those that
#   end with `eos` move to the finished list and are never extended again (all candidates of a
#   step have the same length, so dividing them by one lp would not reorder them: the mistake to
#   avoid is storing a divided score and adding to it);
# * stop when the beam is empty or after `max_len` steps; hypotheses still in the beam then
#   join the finished ones as they are (without `eos`);
# * choose the finished hypothesis with the best $s = \ln p / \operatorname{lp}(|\mathbf{y}|)$,
#   where $|\mathbf{y}|$ counts every token after `start`, `eos` included.
#
# Return `(tokens, log_prob, score)`: the chosen tokens as a list **without** `start` and
# `eos`, its raw $\ln p$ (with the `eos` factor) and its score $s$.

# %% nbgrader={"grade": false, "grade_id": "beam_search", "locked": false, "schema_version": 3, "solution": true}
def beam_search(next_probs, width, alpha=0.0, max_len=6, start="<s>", eos="<eos>"):
    """Beam search over next_probs(prefix) -> {token: p}; returns (tokens, log_prob, score)."""
    ### BEGIN SOLUTION
    beams, finished = [((start,), 0.0)], []  # (prefix, summed log-probability)
    for _ in range(max_len):
        candidates = [(prefix + (token,), log_prob + math.log(p))
                      for prefix, log_prob in beams
                      for token, p in next_probs(prefix).items() if p > 0]
        candidates.sort(key=lambda c: c[1], reverse=True)  # prune by the raw log-probability
        kept = candidates[:width]
        finished += [c for c in kept if c[0][-1] == eos]
        beams = [c for c in kept if c[0][-1] != eos]
        if not beams:
            break
    finished += beams  # out of steps: unfinished hypotheses compete as they are

    def score(hypothesis):
        prefix, log_prob = hypothesis
        return log_prob / length_penalty(len(prefix) - 1, alpha)  # |y| counts eos, not start

    best = max(finished, key=score)
    tokens = [token for token in best[0][1:] if token != eos]
    return tokens, best[1], score(best)
    ### END SOLUTION


# %% [markdown]
# ### Check it: the toy table
#
# Greedy ($B = 1$) should say "con mèo" with $p = 0.170$: it takes "con" ($0.5 > 0.4$) and then
# meets a flat branch. Beam search with $B = 2$ keeps "đàn" alive and finds "đàn chim",
# $p = 0.187$, the more probable sentence. With $\alpha = 0.6$ the answer becomes "đàn chim
# bay", $p = 0.173$, $s = -1.376$: less probable, but longer.

# %%
toy_results = {}
for width, alpha in [(1, 0.0), (2, 0.0), (2, 0.6)]:
    tokens, log_prob, score = beam_search(toy_next_probs, width, alpha)
    toy_results[width, alpha] = (" ".join(tokens), round(math.exp(log_prob), 3), round(score, 3))
    print(f"B={width} alpha={alpha}: '{' '.join(tokens)}'  p={math.exp(log_prob):.3f}  s={score:.3f}")
assert toy_results[1, 0.0][:2] == ("con mèo", 0.170)
assert toy_results[2, 0.0][:2] == ("đàn chim", 0.187)
assert toy_results[2, 0.6] == ("đàn chim bay", 0.173, -1.376)

# %% [markdown]
# By hand, counting `<eos>` in the length: "đàn chim" has $p = 0.1872$, $\ln p = -1.676$ and
# $\operatorname{lp} = (8/6)^{0.6} \approx 1.188$, so $s = -1.410$; "đàn chim bay" has
# $\ln p = \ln 0.1728 = -1.756$ and $\operatorname{lp} = (9/6)^{0.6} \approx 1.275$, so
# $s = -1.376$, which is higher. The table is made up to show the mechanism; it says nothing
# about whether a length penalty helps a real translation system.

# %%
log_p_short, log_p_long = math.log(0.4 * 0.9 * 0.52), math.log(0.4 * 0.9 * 0.48)
lp_short, lp_long = length_penalty(3, 0.6), length_penalty(4, 0.6)  # 2 words + <eos>, 3 words + <eos>
print(f"đàn chim:     ln p = {log_p_short:.3f}, lp = {lp_short:.3f}, s = {log_p_short / lp_short:.3f}")
print(f"đàn chim bay: ln p = {log_p_long:.3f}, lp = {lp_long:.3f}, s = {log_p_long / lp_long:.3f}")
assert (round(log_p_short, 3), round(lp_short, 3), round(log_p_short / lp_short, 3)) == (-1.676, 1.188, -1.410)
assert round(log_p_long / lp_long, 3) == -1.376

# %% nbgrader={"grade": true, "grade_id": "test_beam_toy", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""beam_search finds the lesson's answers on the toy table and respects the start, eos and max_len arguments."""
from course.seq2seq_checks import TOY_SCORES, TOY_SCORES_WITHOUT_EOS, searched  # this chapter's checks: course/seq2seq_checks.py

### BEGIN HIDDEN TESTS
import zlib


def _table(seed, words=("a", "b", "c")):
    def next_probs(prefix):
        r = np.random.default_rng(zlib.crc32(("|".join(map(str, prefix)) + f"#{seed}").encode()))
        return dict(zip(list(words) + ["<eos>"], r.dirichlet(np.full(len(words) + 1, 0.7)).tolist()))
    return next_probs


def _reference_beam(next_probs, width, alpha, max_len, start="<s>", eos="<eos>", keep_finished=False,
                    count_eos=True, lp=None):
    """The reference beam search: (tokens, raw log-probability) of the best hypothesis. With
    keep_finished=True finished hypotheses keep their place in the beam; with count_eos=False the
    length penalty leaves <eos> out of |y|: two mistakes the messages name. lp(n, alpha): the length
    penalty to divide by (default the chapter's formula)."""
    beam = [((start,), 0.0)]
    done = []
    for _ in range(max_len):
        pool = [c for c in beam if keep_finished and c[0][-1] == eos]
        pool += [(pre + (tok,), lp + math.log(q)) for pre, lp in beam if pre[-1] != eos
                 for tok, q in next_probs(pre).items() if q > 0]
        beam = sorted(pool, key=lambda c: -c[1])[:width]
        if not keep_finished:
            done += [c for c in beam if c[0][-1] == eos]
            beam = [c for c in beam if c[0][-1] != eos]
        if not [c for c in beam if c[0][-1] != eos]:
            break

    def length(hypothesis):
        return len(hypothesis[1:]) if count_eos else len([t for t in hypothesis[1:] if t != eos])

    penalty = lp or (lambda n, a: ((5 + n) / 6) ** a)
    best = max(done + beam, key=lambda c: c[1] / penalty(length(c[0]), alpha))
    return [t for t in best[0][1:] if t != eos], best[1]
### END HIDDEN TESTS
for width, alpha, sentence, probability in [(1, 0.0, "con mèo", 0.170), (2, 0.0, "đàn chim", 0.187),
                                             (2, 0.6, "đàn chim bay", 0.173)]:
    result = searched(beam_search, fresh(toy_next_probs), width, alpha=alpha)  # fresh(): the tests' own copy of the toy table
    check_true(isinstance(result, tuple) and len(result) == 3, "beam_search must return (tokens, log_prob, score)")
    tokens, log_prob, score = result
    check_true(list(tokens) == sentence.split(),
               f"width={width}, alpha={alpha}: beam_search chose {list(tokens)}, not the sentence the "
               "lesson finds; keep `width` candidates by raw summed log-probability at every step")
    check_close(f"exp(log_prob) for width={width}, alpha={alpha}", math.exp(log_prob), probability, atol=6e-4,
                likely_causes={"log_prob and score are in each other's places: return (tokens, log_prob, score)":
                               math.exp(TOY_SCORES[width, alpha])} if alpha else None,
                hint="log_prob is the sum of math.log(p) over the chosen tokens, <eos> included")
    check_close(f"score for width={width}, alpha={alpha}", score, TOY_SCORES[width, alpha], atol=1e-6,
                likely_causes={"|y| leaves out <eos> (count it in the length)": TOY_SCORES_WITHOUT_EOS[width, alpha]},
                hint="score = log_prob / length_penalty(|y|, alpha): if length_penalty fails its own test, fix it first")
### BEGIN HIDDEN TESTS
renamed = {"<s>": "BEGIN", "<eos>": "END"}
renamed_table = {renamed.get(a, a): {renamed.get(b, b): q for b, q in row.items()} for a, row in TOY_TABLE.items()}


def renamed_next_probs(prefix):
    return renamed_table[prefix[-1]]


for width, alpha, max_len in [(3, 0.0, 6), (3, 0.6, 6), (2, 1.0, 6), (2, 0.6, 2), (1, 0.6, 6), (4, 2.0, 5)]:
    want_tokens, want_log_prob = _reference_beam(renamed_next_probs, width, alpha, max_len, start="BEGIN", eos="END")
    tokens, log_prob, score = attempt(
        f"beam_search(width={width}, alpha={alpha}, max_len={max_len}, start='BEGIN', eos='END') on the toy table",
        beam_search, fresh(renamed_next_probs), width, alpha=alpha, max_len=max_len, start="BEGIN", eos="END",
        hint="use the `start`, `eos` and `max_len` arguments; when max_len steps are done, the hypotheses still in "
             "the beam compete with the finished ones")
    check_true(list(tokens) == want_tokens,
               f"on the toy table with start='BEGIN', eos='END', width={width}, alpha={alpha}, max_len={max_len} "
               "beam_search chose another hypothesis: use the `start`, `eos` and `max_len` arguments, and let "
               "unfinished hypotheses compete once max_len steps are done")
    check_close(f"log_prob (width={width}, alpha={alpha}, max_len={max_len})", log_prob, want_log_prob, atol=1e-6)
### END HIDDEN TESTS

# %% [markdown]
# A hypothesis that has produced `<eos>` is complete: it leaves the beam and frees its place.
# If it stayed in the beam it would keep pushing out hypotheses that are still growing. The
# table below is built so that this matters once a length penalty is on.

# %% nbgrader={"grade": true, "grade_id": "test_beam_finished_leave", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Finished hypotheses leave the beam and free their place, on a trap table and on random tables."""
from course.seq2seq_checks import next_probs_of, searched  # the checks of this chapter: course/seq2seq_checks.py

trap = {"<s>": {"a": 0.5, "<eos>": 0.3, "b": 0.2}, "a": {"c": 0.55, "d": 0.45}, "b": {"<eos>": 1.0},
        "c": {"<eos>": 0.4, "e": 0.6}, "d": {"<eos>": 1.0}, "e": {"<eos>": 1.0}}
trap_next_probs = next_probs_of(trap)
tokens, _, _ = searched(beam_search, fresh(trap_next_probs), 2, alpha=0.0)
check_true(list(tokens) == [], f"with width 2 and alpha 0 beam_search chose {list(tokens)}, but the immediate '<eos>' "
           "(p = 0.3) is the most probable hypothesis: keep the `width` best candidates at every step")
tokens, log_prob, _ = searched(beam_search, fresh(trap_next_probs), 2, alpha=1.0)
walk, prefix = 0.0, ("<s>",)
for token in list(tokens) + ["<eos>"]:
    walk, prefix = walk + math.log(trap[prefix[-1]][token]), prefix + (token,)
check_close(f"log_prob of {list(tokens)} for width 2, alpha 1", log_prob, walk, atol=1e-6,
            hint="log_prob must be the raw summed ln p of the hypothesis: keep raw log-probabilities in the beam")
check_true(list(tokens) != ["a", "c", "e"],
           "with width 2 and alpha 1 the finished hypothesis '<eos>' kept a place in your beam and pushed out "
           "'a d': a hypothesis that ends with <eos> must leave the beam for the finished list")
check_true(list(tokens) == ["a", "d"], f"with width 2 and alpha 1 beam_search chose {list(tokens)}: "
           "prune by raw log-probability, then pick the best finished hypothesis by ln p / lp(|y|)")
### BEGIN HIDDEN TESTS
# _table and _reference_beam are defined in the hidden part of test_beam_toy
found = 0
for seed in range(400):
    table = _table(seed)
    for width, alpha in [(2, 1.0), (3, 1.0), (2, 0.6)]:
        right = _reference_beam(table, width, alpha, 6)
        if right[0] == _reference_beam(table, width, alpha, 6, keep_finished=True)[0]:
            continue
        found += 1
        tokens, log_prob, _ = searched(beam_search, fresh(table), width, alpha=alpha, max_len=6)
        if list(tokens) == _reference_beam(table, width, alpha, 6, count_eos=False)[0]:
            cause = ": it matches what you get when |y| leaves out <eos>"
        elif list(tokens) == _reference_beam(table, width, alpha, 6, keep_finished=True)[0]:
            cause = ": it matches a search in which finished hypotheses stay in the beam; they must leave it"
        else:
            cause = "; prune by raw log-probability and divide by lp(|y|) only at the end"
        check_true(list(tokens) == right[0], f"random table {seed}, width={width}, alpha={alpha}: beam_search "
                   f"chose another hypothesis than the reference{cause}")
    if found >= 8:
        break
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_beam_length_penalty_final", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""log_prob is the raw ln p of the answer, score = log_prob / lp(|y|) with <eos> in |y|."""
from course.seq2seq_checks import TOY_SCORES, TOY_SCORES_WITHOUT_EOS, searched  # this chapter's checks: course/seq2seq_checks.py

tokens, log_prob, score = searched(beam_search, fresh(toy_next_probs), 2, alpha=0.6)
walk, prefix = 0.0, ("<s>",)
for token in list(tokens) + ["<eos>"]:
    walk, prefix = walk + math.log(toy_next_probs(prefix)[token]), prefix + (token,)
check_close("log_prob of the toy answer for width 2, alpha 0.6", log_prob, walk, atol=1e-6,
            hint="log_prob must be the raw sum of ln p over the returned tokens and <eos>: prune and store the "
                 "raw summed log-probability, and divide by lp only for the final choice")
if list(tokens) == ["đàn", "chim", "bay"]:  # the lesson's answer, whose score is known; test_beam_toy judges the choice
    check_close("score of the toy answer for width 2, alpha 0.6", score, TOY_SCORES[2, 0.6], atol=1e-6,
                likely_causes={"|y| leaves out <eos> (count it in the length)": TOY_SCORES_WITHOUT_EOS[2, 0.6]})
### BEGIN HIDDEN TESTS
from instructor.references.seq2seq_beam_search import wu_penalty  # the grader's side only

# whatever answer the search chose: its score is its own log_prob over lp(|y|), <eos> counted
check_close(f"score of the toy result {list(tokens)} for width 2, alpha 0.6", score,
            walk / wu_penalty(len(tokens) + 1, 0.6), atol=1e-6,
            likely_causes={"|y| leaves out <eos> (count it in the length)": walk / wu_penalty(len(tokens), 0.6)})
# _table is defined in the hidden part of test_beam_toy
for seed in range(12):
    table = _table(1000 + seed, words=("u", "v", "w", "x"))
    width, alpha, max_len = 2 + seed % 3, (0.6, 1.0, 1.5)[seed % 3], 3 + seed % 4
    tokens, log_prob, score = searched(beam_search, fresh(table), width, alpha=alpha, max_len=max_len)
    finished_walk = unfinished_walk = 0.0
    prefix = ("<s>",)
    for token in list(tokens):
        unfinished_walk, prefix = unfinished_walk + math.log(table(prefix)[token]), prefix + (token,)
    finished_walk = unfinished_walk + math.log(table(prefix)["<eos>"])
    ended = abs(log_prob - finished_walk) < 1e-6
    check_true(ended or abs(log_prob - unfinished_walk) < 1e-6,
               f"random table, width={width}, alpha={alpha}, max_len={max_len}: log_prob is not the summed ln p of "
               "the returned tokens (plus <eos> when the hypothesis finished): keep and prune by the raw summed "
               "log-probability and divide by lp only for the final choice")
    length = len(tokens) + (1 if ended else 0)
    check_close(f"score (width={width}, alpha={alpha}, max_len={max_len})", score,
                log_prob / wu_penalty(length, alpha), atol=1e-6,
                likely_causes={"|y| leaves out <eos> (count it in the length)": log_prob / wu_penalty(len(tokens), alpha)})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_beam_random_tables", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""beam_search finds the best hypothesis on random tables, for several widths, alphas and max_len."""
from course.seq2seq_checks import next_probs_of, searched  # the checks of this chapter: course/seq2seq_checks.py

flat = {"<s>": {"x": 0.6, "y": 0.4}, "x": {"<eos>": 0.45, "z": 0.55}, "y": {"<eos>": 0.9, "z": 0.1},
        "z": {"<eos>": 1.0}}
flat_next_probs = next_probs_of(flat)
tokens, log_prob, score = searched(beam_search, fresh(flat_next_probs), 3)
check_true(list(tokens) == ["y"] and abs(log_prob - math.log(0.36)) < 1e-6,
           f"width 3, alpha 0: beam_search chose {list(tokens)}; the best raw ln p among finished hypotheses wins")
### BEGIN HIDDEN TESTS
# _table and _reference_beam are defined in the hidden part of test_beam_toy
for seed in range(30):
    table = _table(2000 + seed, words=("p", "q", "r", "s")[: 2 + seed % 3])
    width, alpha, max_len = 1 + seed % 4, (0.0, 0.6, 1.0, 2.0)[seed % 4], 2 + seed % 6
    right_tokens, right_log_prob = _reference_beam(table, width, alpha, max_len)
    tokens, log_prob, score = searched(beam_search, fresh(table), width, alpha=alpha, max_len=max_len)
    if list(tokens) != right_tokens:
        cause = ""
        if list(tokens) == _reference_beam(table, width, alpha, max_len, keep_finished=True)[0]:
            cause = ": it matches a search in which finished hypotheses stay in the beam"
        elif list(tokens) == _reference_beam(table, width, alpha, max_len, count_eos=False)[0]:
            cause = ": it matches what you get when |y| leaves out <eos>"
        elif list(tokens) == _reference_beam(table, 1, alpha, max_len)[0] and width > 1:
            cause = ": it matches greedy decoding, is `width` used?"
        check_true(False, f"random table {seed}, width={width}, alpha={alpha}, max_len={max_len}: beam_search "
                          f"chose another hypothesis than the reference{cause}. Keep the `width` best candidates by raw "
                          "summed log-probability, move those ending with <eos> to the finished list, and divide by "
                          "lp(|y|) only for the final choice")
    check_close(f"log_prob on random table {seed}", log_prob, right_log_prob, atol=1e-6,
                hint="log_prob is the raw summed ln p of the chosen hypothesis, <eos> included")
### END HIDDEN TESTS

# %% [markdown]
# ### Predict, then run (1 point)
#
# Beam search is cheap because it prunes. Take a table that offers the same **10 next tokens**
# after any prefix, none of them `eos` (so no hypothesis ever finishes), and call
# `beam_search(next_probs, width=4)` with its default `max_len=6`. Count the **candidates** the
# search forms, the (hypothesis, next token) pairs of step 1 of the procedure, summed over every
# step, and assign the count to `PREDICTED_BEAM_CANDIDATES`. A count is exact arithmetic: only
# the exact number counts. The cell after the test counts them in your `beam_search`.

# %% nbgrader={"grade": false, "grade_id": "predict_beam_candidates", "locked": false, "schema_version": 3, "solution": true}
PREDICTED_BEAM_CANDIDATES = None  # replace None with your prediction, a number
### BEGIN SOLUTION
PREDICTED_BEAM_CANDIDATES = 1 * 10 + 5 * (4 * 10)  # step 1 extends (start,) only; steps 2 to 6 extend 4 each
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predict_beam_candidates", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""PREDICTED_BEAM_CANDIDATES: the candidates beam search forms (10 tokens, width 4, 6 steps, no eos)."""
from course import check_number

prediction = check_number("PREDICTED_BEAM_CANDIDATES", PREDICTED_BEAM_CANDIDATES)  # your number, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_prediction

prediction = check_prediction("PREDICTED_BEAM_CANDIDATES", PREDICTED_BEAM_CANDIDATES, 1 * 10 + 5 * 4 * 10, rel=0.0,
                              known=(
    (6 * 4 * 10, "that extends 4 hypotheses at every step, the first one too: the beam starts as the single "
                 "hypothesis (start,), so step 1 forms one candidate per token"),
    (4 * 10, "that is one step: no hypothesis ends with eos here, so the search runs all max_len = 6 steps"),
    (10 ** 6, "that is exhaustive search, every sequence of 6 tokens: the beam keeps only the 4 best candidates "
              "of a step and extends only those"),
    (6 * 10, "that is greedy decoding, one hypothesis per step: with width 4 the beam holds 4 hypotheses from "
             "step 2 on"),
    (6 * 4, "that counts the hypotheses kept, 4 a step: a candidate is a kept hypothesis extended by one token, "
            "and each is extended by every one of the 10 tokens"),
    (1 + 5 * 4, "that counts the hypotheses extended (the calls of next_probs): each of them offers 10 tokens, "
                "and each token makes one candidate"),
),
                              hint="step 1 extends the single start hypothesis by every token; each later step "
                                   "extends the width hypotheses kept by the step before by every token")
### END HIDDEN TESTS

# %%
offered = []  # how many next tokens each call of next_probs offered


def ten_next_tokens(prefix):
    """The same 10 tokens after any prefix, none of them <eos>."""
    tokens = {digit: (int(digit) + 1) / 55 for digit in "0123456789"}
    offered.append(len(tokens))
    return tokens


beam_search(ten_next_tokens, width=4)
print(f"your beam_search formed {sum(offered)} candidates in {len(offered)} calls of next_probs")
print(f"exhaustive search would score {10 ** 6:,} sequences of 6 tokens")

# %% [markdown]
# ## The digit-reversal task
#
# A toy task with every part of sequence-to-sequence learning: the source is 6 random digits,
# the target is the same digits reversed (source `9 7 9 6 0 9`, target `9 0 6 9 7 9`). The
# first target token is the *last* source token, so the decoder cannot succeed without looking
# at the encoder. The vocabulary has 12 tokens: `<BOS>` (id 0), `<EOS>` (id 1) and the digits
# 0 to 9 (ids 2 to 11).

# %% nbgrader={"grade": false, "grade_id": "vocabulary", "locked": true, "schema_version": 3, "solution": false}
BOS, EOS, LENGTH = 0, 1, 6
TOKENS = ["<BOS>", "<EOS>"] + list("0123456789")  # digit d has id d + 2
VOCAB = len(TOKENS)  # 12


def show(ids):
    """Token ids as readable text: show([11, 9, 1]) == '9 7 <EOS>'."""
    return " ".join(TOKENS[int(i)] for i in ids)


# %% [markdown]
# ### Teacher forcing
#
# During training the true target is known, so the decoder is fed the target itself, shifted
# right by one position and opened with `<BOS>`; the labels are the unshifted target closed by
# `<EOS>`:
#
# | position | 1 | 2 | 3 | 4 |
# |---|---|---|---|---|
# | decoder input | `<BOS>` | con | mèo | đen |
# | label | con | mèo | đen | `<EOS>` |
#
# With the causal mask, position $i$ sees only `<BOS>` and $y_1, \dots, y_{i-1}$, so one forward
# pass trains all $L_y$ predictions at once, as for GPT, with the loss
# $-\frac{1}{L_y}\sum_i \ln p_\theta(y_i \mid y_{<i}, \mathbf{x})$ on the *true* prefixes.
#
# ## Part B · Teacher-forcing batches (4 points)
#
# Write `make_reversal_batch(n, length=6, generator=None)` returning `(src, dec_in, dec_out)`:
#
# * `src` `(n, length)`: random digit ids drawn with
#   `torch.randint(2, VOCAB, (n, length), generator=generator)`;
# * `dec_in` `(n, length + 1)`: `<BOS>` followed by the reversed source (`torch.flip`);
# * `dec_out` `(n, length + 1)`: the reversed source followed by `<EOS>`.
#
# All three are `torch.long`. Passing the `generator` through makes a batch reproducible.

# %% nbgrader={"grade": false, "grade_id": "make_reversal_batch", "locked": false, "schema_version": 3, "solution": true}
def make_reversal_batch(n, length=LENGTH, generator=None):
    """(src (n, length), dec_in (n, length + 1), dec_out (n, length + 1)) for the reversal task."""
    ### BEGIN SOLUTION
    src = torch.randint(2, VOCAB, (n, length), generator=generator)  # (n, length)
    target = src.flip(1)  # (n, length)
    dec_in = torch.cat([torch.full((n, 1), BOS), target], dim=1)  # shifted right
    dec_out = torch.cat([target, torch.full((n, 1), EOS)], dim=1)  # labels end with <EOS>
    return src, dec_in, dec_out
    ### END SOLUTION


# %% [markdown]
# Check it: one pair, read as text.

# %%
src, dec_in, dec_out = make_reversal_batch(1, generator=torch.Generator().manual_seed(0))
print("src:    ", show(src[0]))
print("dec_in: ", show(dec_in[0]))
print("dec_out:", show(dec_out[0]))

# %% nbgrader={"grade": true, "grade_id": "test_batch_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""make_reversal_batch returns long tensors (n, length), (n, length + 1), (n, length + 1) of valid ids."""
src, dec_in, dec_out = make_reversal_batch(5)
check_shape("src of make_reversal_batch(5)", src, (5, 6))
check_shape("dec_in of make_reversal_batch(5)", dec_in, (5, 7), hint="<BOS> followed by the 6 target digits")
check_shape("dec_out of make_reversal_batch(5)", dec_out, (5, 7),
            hint="the labels are the 6 target digits followed by <EOS>: one more token than the source")
for name, tensor in [("src", src), ("dec_in", dec_in), ("dec_out", dec_out)]:
    check_dtype(name, tensor, torch.long, hint="token ids are integers: torch.randint and torch.full give torch.long")
check_true(bool(((src >= 2) & (src < VOCAB)).all()), "src must hold digit ids only, 2 to 11 (0 and 1 are <BOS>, <EOS>)")
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(71)
for trial in range(4):
    n, length = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    src, dec_in, dec_out = make_reversal_batch(n, length=length)
    check_shape(f"src of make_reversal_batch({n}, length={length})", src, (n, length))
    check_shape(f"dec_in of make_reversal_batch({n}, length={length})", dec_in, (n, length + 1))
    check_shape(f"dec_out of make_reversal_batch({n}, length={length})", dec_out, (n, length + 1),
                hint="the labels are the target followed by <EOS>")
src, _, _ = make_reversal_batch(2000)
check_true(set(src.unique().tolist()) == set(range(2, VOCAB)), "src must draw every digit id 2 to 11 uniformly")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_batch_teacher_forcing", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""dec_in = <BOS> + reversed source, dec_out = reversed source + <EOS>."""
src, dec_in, dec_out = make_reversal_batch(8)
check_true(bool((dec_in[:, 0] == BOS).all()), "dec_in must start with <BOS> (id 0): the decoder input is the "
           "target shifted right by one position")
check_true(bool((dec_out[:, -1] == EOS).all()), "dec_out must end with <EOS> (id 1): the model has to learn when to stop")
check_true(not torch.equal(dec_out[:, :-1], src.flip(0)), "dec_out[:, :-1] is the batch in reverse order (flip(0) "
           "turns the batch axis): reverse each sequence along its positions, flip(1)")
check_true(bool((dec_out[:, :-1] == src.flip(1)).all()), "dec_out[:, :-1] must be the source reversed (the target)")
check_true(bool((dec_in[:, 1:] == dec_out[:, :-1]).all()),
           "dec_in[:, 1:] must equal dec_out[:, :-1]: the decoder input is the label sequence shifted right")
### BEGIN HIDDEN TESTS
for n, length in [(3, 1), (4, 3), (2, 9)]:
    src, dec_in, dec_out = make_reversal_batch(n, length=length)
    target = torch.flip(src, dims=[1])
    check_true(torch.equal(dec_in, torch.cat([torch.zeros(n, 1, dtype=torch.long), target], 1)),
               f"length={length}: dec_in must be <BOS> followed by the reversed source")
    check_true(torch.equal(dec_out, torch.cat([target, torch.ones(n, 1, dtype=torch.long)], 1)),
               f"length={length}: dec_out must be the reversed source followed by <EOS>")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_batch_generator", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""A generator makes the batch reproducible and leaves the global random state alone."""
first = make_reversal_batch(4, generator=torch.Generator().manual_seed(5))[0]
second = make_reversal_batch(4, generator=torch.Generator().manual_seed(5))[0]
drawn = torch.randint(2, VOCAB, (4, LENGTH), generator=torch.Generator().manual_seed(5))  # what the text's call draws
for what, src in (("first", first), ("second", second)):
    check_true(torch.equal(src, drawn), f"the {what} of two batches from generators seeded 5 is not what "
               "torch.randint(2, VOCAB, (n, length), generator=generator) draws: pass generator=generator to "
               "torch.randint, and draw the source with that call only")
### BEGIN HIDDEN TESTS
for n, seed in ((16, 6), (64, 7), (64, 8)):
    src = make_reversal_batch(n, generator=torch.Generator().manual_seed(seed))[0]
    check_true(torch.equal(src, torch.randint(2, VOCAB, (n, LENGTH), generator=torch.Generator().manual_seed(seed))),
               f"src of make_reversal_batch({n}, generator=...) is not what torch.randint(2, VOCAB, (n, length), "
               "generator=generator) draws from the generator given: draw the source with exactly that call, "
               "from that generator only")
### END HIDDEN TESTS

# %% [markdown]
# ## The model
#
# `nn.Transformer` with 2 encoder and 2 decoder layers, $D = 64$, 4 heads, feed-forward width
# 128 and no dropout; learned token and position embeddings in front and a linear layer to 12
# logits behind. Read `nn.Transformer.forward`'s masks carefully:
#
# * `tgt_mask` is added to the scores of the **decoder's self-attention**.
#   `nn.Transformer.generate_square_subsequent_mask(n)` builds the causal one: an `(n, n)` float
#   matrix with $-\infty$ above the diagonal.
# * `memory_mask` would be added to the scores of the **cross-attention**, and `src_mask` to
#   those of the encoder. Neither is wanted here: the source is known in full.
#
# ## Part C · The masks in `forward` (4 points)
#
# Complete `forward(src, dec_in)`: embed both sequences with `self.embed`, run
# `self.transformer` with the causal `tgt_mask` (only when `self.causal` is true, the default;
# a later experiment switches it off) and no other mask, and map the decoder output to logits
# with `self.head`. The result is `(B, n, VOCAB)` for `dec_in` of shape `(B, n)`.

# %% nbgrader={"grade": false, "grade_id": "reversal_transformer", "locked": false, "schema_version": 3, "solution": true}
class ReversalTransformer(nn.Module):
    """Encoder-decoder Transformer for digit reversal: logits (B, n, VOCAB) for (src, dec_in)."""

    def __init__(self, d_model=64, max_positions=LENGTH + 1, causal=True):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, d_model)
        self.position_embedding = nn.Embedding(max_positions, d_model)
        self.transformer = nn.Transformer(d_model, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=128, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d_model, VOCAB)
        self.causal = causal

    def embed(self, tokens):  # (B, n) -> (B, n, D)
        positions = torch.arange(tokens.size(1), device=tokens.device)
        return self.token_embedding(tokens) + self.position_embedding(positions)

    def forward(self, src, dec_in):  # (B, L_x), (B, n) -> (B, n, VOCAB)
        ### BEGIN SOLUTION
        n = dec_in.size(1)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(n) if self.causal else None  # (n, n)
        hidden = self.transformer(self.embed(src), self.embed(dec_in), tgt_mask=tgt_mask)  # (B, n, D)
        return self.head(hidden)  # (B, n, VOCAB)
        ### END SOLUTION


# %% [markdown]
# Check it: an untrained model gives 12 logits per decoder position.

# %%
torch.manual_seed(0)
untrained = ReversalTransformer()
src, dec_in, dec_out = make_reversal_batch(2)
print("logits", tuple(untrained(src, dec_in).shape), "parameters",
      sum(p.numel() for p in untrained.parameters()))

# %% nbgrader={"grade": true, "grade_id": "test_forward_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""forward returns logits (B, n, VOCAB) for any batch size and decoder length."""
from course.seq2seq_checks import FORWARD_HINT
torch.manual_seed(1)
net = ReversalTransformer()
set_training(net, False)  # eval mode, set as nn.Module.eval() does
with torch.no_grad():
    logits = attempt("net(src (3, 6), dec_in (3, 7))", net, torch.randint(2, VOCAB, (3, 6)),
                     torch.zeros(3, 7, dtype=torch.long), hint=FORWARD_HINT)
    check_shape("net(src (3, 6), dec_in (3, 7))", logits, (3, 7, VOCAB),
                hint="one row of VOCAB logits per decoder position: apply self.head to the decoder output")
    check_shape("net(src (2, 6), dec_in (2, 1))", net(torch.randint(2, VOCAB, (2, 6)), torch.zeros(2, 1, dtype=torch.long)),
                (2, 1, VOCAB), hint="build the causal mask for the decoder length n = dec_in.size(1)")
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(72)
for trial in range(4):
    b, lx, n = int(rng.integers(1, 5)), int(rng.integers(1, 8)), int(rng.integers(1, 8))
    with torch.no_grad():
        out = net(torch.randint(2, VOCAB, (b, lx)), torch.randint(0, VOCAB, (b, n)))
    check_shape(f"logits for src ({b}, {lx}) and dec_in ({b}, {n})", out, (b, n, VOCAB),
                hint="one row of VOCAB logits per decoder position")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_forward_masks", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""The decoder's self-attention is causal; the cross-attention sees the whole source."""
### BEGIN HIDDEN TESTS
def _reference_model(params):
    """The model of the lesson (nn.Transformer of its sizes) holding `params`, in their dtype: logits(src, dec_in, **masks)."""
    core = nn.Transformer(params["token_embedding.weight"].shape[1], nhead=4, num_encoder_layers=2,
                          num_decoder_layers=2, dim_feedforward=128, dropout=0.0, batch_first=True,
                          dtype=params["token_embedding.weight"].dtype).eval()
    core.load_state_dict({k[len("transformer."):]: v for k, v in params.items() if k.startswith("transformer.")})
    embed = lambda t: F.embedding(t, params["token_embedding.weight"]) + params["position_embedding.weight"][: t.size(1)]

    def logits(src, dec_in, **masks):  # (B, L_x), (B, n) -> (B, n, VOCAB)
        with torch.no_grad():
            return F.linear(core(embed(src), embed(dec_in), **masks), params["head.weight"], params["head.bias"])
    return logits


### END HIDDEN TESTS
from course.seq2seq_checks import masks_setup  # the checks of this chapter: course/seq2seq_checks.py

net = ReversalTransformer()
set_training(net, False)
params, src, dec_in, changed = masks_setup(net, 3, VOCAB, LENGTH)
with torch.no_grad():
    before, after = net(src, dec_in), net(src, changed)
leaked = not torch.allclose(after[:, :4], before[:, :4], atol=1e-5)  # message only: names the leak
check_true(not leaked, "the logits at decoder positions 0 to 3 changed when the decoder tokens from position 4 on "
           "changed: a position must not see later decoder tokens; pass the causal tgt_mask, whose True (or -inf) "
           "entries nn.Transformer blocks: the ones above the diagonal, as generate_square_subsequent_mask builds it")
silent = {name: torch.zeros_like(value) for name, value in params.items()  # switch off the encoder's mixing:
          if name.startswith("transformer.encoder.layers.") and ".self_attn.out_proj." in name}  # row j <- token j
load_tensors(net, silent)
moved = src.clone()
moved[:, -1] = (moved[:, -1] - 1) % 10 + 2  # another digit in the last source position
with torch.no_grad():
    reaction = (net(moved, dec_in[:, :1]) - net(src, dec_in[:, :1])).abs().max().item()
check_true(reaction > 1e-4, "the first decoder position does not see the last source position: is there a mask on "
           "the cross-attention (memory_mask)? The source is known in full, so cross-attention takes no mask")
### BEGIN HIDDEN TESTS
from course.seq2seq_checks import choose_weights

reference = _reference_model(params)  # the weights of the run above, before the encoder was silenced
causal = torch.triu(torch.full((LENGTH + 1, LENGTH + 1), float("-inf")), diagonal=1)
runs = {"dec_in": before, "dec_in changed from position 4 on": after}  # each run against the reference
for what, tokens in (("dec_in", dec_in), ("dec_in changed from position 4 on", changed)):
    check_close(f"logits for src (4, 6) and {what}", runs[what], reference(src, tokens, tgt_mask=causal), atol=1e-4,
                likely_causes={"the decoder's self-attention has no causal mask (tgt_mask)": reference(src, tokens)})
for seed in range(3):
    net = ReversalTransformer()
    set_training(net, seed == 1)  # dropout is 0: train mode must compute what eval mode computes
    params = choose_weights(net, 40 + seed)
    lx, n = 3 + seed, 2 + 2 * seed
    gen = torch.Generator().manual_seed(40 + seed)
    src, dec_in = torch.randint(2, VOCAB, (3, lx), generator=gen), torch.randint(0, VOCAB, (3, n), generator=gen)
    causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    reference = _reference_model(params)
    with torch.no_grad():
        mine = net(src, dec_in)
    want, unmasked = reference(src, dec_in, tgt_mask=causal), reference(src, dec_in)
    memory_masked = reference(src, dec_in, tgt_mask=causal,
                              memory_mask=torch.triu(torch.full((n, lx), float("-inf")), diagonal=1))
    check_close(f"logits for src length {lx}, decoder length {n}", mine, want, atol=1e-4, likely_causes={
        "the decoder's self-attention has no causal mask (tgt_mask)": unmasked,
        "the cross-attention has a causal mask (memory_mask): drop it": memory_masked})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_forward_causal_flag", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""ReversalTransformer(causal=False) puts no mask on the decoder's self-attention; causal=True masks it."""
from course.seq2seq_checks import masks_setup  # the checks of this chapter: course/seq2seq_checks.py

net = ReversalTransformer(causal=False)
set_training(net, False)
params, src, dec_in, changed = masks_setup(net, 5, VOCAB, LENGTH)
with torch.no_grad():
    reaction = (net(src, changed)[:, :4] - net(src, dec_in)[:, :4]).abs().max().item()
check_true(reaction > 1e-4, "with causal=False the logits at decoder positions 0 to 3 did not change when the decoder "
           "tokens from position 4 on changed: the causal mask is still on; build tgt_mask only when self.causal "
           "is true, and pass no mask when it is false")
### BEGIN HIDDEN TESTS
from course.seq2seq_checks import choose_weights

# _reference_model is defined in the hidden part of test_forward_masks
for seed, causal in [(50, False), (51, True), (52, False)]:
    net = ReversalTransformer(causal=causal)
    set_training(net, seed == 51)  # dropout is 0: train mode must compute what eval mode computes
    params = choose_weights(net, seed)
    lx, n = 4 + seed % 3, 3 + seed % 4
    gen = torch.Generator().manual_seed(seed)
    src, dec_in = torch.randint(2, VOCAB, (3, lx), generator=gen), torch.randint(0, VOCAB, (3, n), generator=gen)
    reference = _reference_model(params)
    masked = reference(src, dec_in, tgt_mask=torch.triu(torch.full((n, n), float("-inf")), diagonal=1))
    unmasked = reference(src, dec_in)
    with torch.no_grad():
        mine = net(src, dec_in)
    if causal:
        check_close(f"logits of ReversalTransformer(causal=True), decoder length {n}", mine, masked, atol=1e-4,
                    likely_causes={"no causal mask is used although causal=True: build tgt_mask when self.causal "
                                   "is true": unmasked})
    else:
        check_close(f"logits of ReversalTransformer(causal=False), decoder length {n}", mine, unmasked, atol=1e-4,
                    likely_causes={"the causal mask is used although causal=False: build tgt_mask only when "
                                   "self.causal is true": masked})
### END HIDDEN TESTS

# %% [markdown]
# ## Training
#
# 301 AdamW steps at learning rate $3 \cdot 10^{-3}$, each on 64 fresh sequences, with the
# cross-entropy between the logits and `dec_out`. At step 0 the loss should be about 2.6, close
# to $\ln 12 \approx 2.485$, the loss of a uniform guess over 12 tokens. The training takes a few
# seconds on a CPU; it runs once, and every later cell reuses the trained `model`. The optimizer
# is built with `fused=True`: the same AdamW update, computed for all parameters in one call
# instead of a Python loop over them, which saves a few milliseconds a step on a CPU.
#
# When the grader runs your notebook, the same cell stops after 101 steps (steps 0 to 100):
# the tests only need a model that reverses new sequences, and it does long before step 100.

# %% nbgrader={"grade": false, "grade_id": "train_function", "locked": true, "schema_version": 3, "solution": false}
def train(model, steps=301, batch_size=64, lr=3e-3):
    """Teacher-forcing training on fresh reversal batches; returns the loss of every step."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)  # one update for all parameters
    losses = []
    for step in range(steps):
        src, dec_in, dec_out = make_reversal_batch(batch_size)
        logits = model(src, dec_in)  # (B, L + 1, VOCAB)
        loss = F.cross_entropy(logits.transpose(1, 2), dec_out)  # classes on axis 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# %% nbgrader={"grade": false, "grade_id": "training", "locked": true, "schema_version": 3, "solution": false}
# kernel only
# (this cell runs in your notebook only: it trains your model, and the tests below read that model)
torch.manual_seed(0)
model = ReversalTransformer()
steps = 101 if under_nbgrader() else 301  # the grader's run stops at step 100: the model reverses by then
losses = train(model, steps)
model.eval()
print(f"loss at step 0: {losses[0]:.3f} (ln 12 = {math.log(12):.3f}); step 100: {losses[100]:.4f}"
      + (f"; step 300: {losses[300]:.4f}" if steps == 301 else ""))

# %% [markdown]
# The loss drops by three orders of magnitude within 100 steps: reversal suits cross-attention,
# since target position $i$ only has to find source position $L_x + 1 - i$. (In our runs the
# model already reverses every held-out sequence after about 50 steps; the remaining steps
# polish the loss.)

# %%
plot_curves(range(len(losses)), {"training loss (teacher forcing)": losses}, xlabel="step",
            ylabel="cross-entropy (nats)", title="Digit reversal, 2 + 2 layers, D = 64", logy=True,
            marker=None, hlines={"ln 12, uniform guess": math.log(12)})
plt.show()
assert 2.45 < losses[0] < 2.8, "the first loss should be near ln 12"
assert max(losses[100:]) < 0.05, "the loss should be near zero after 100 steps"

# %% [markdown]
# ## Evaluation: teacher-forced and free-running
#
# In use there is no true target: the decoder is fed its own previous tokens, and $y_{<i}$ in
# the formula becomes what the model chose. Ranzato et al. (2016) call the mismatch
# **exposure bias**: in training the model only ever saw correct prefixes, never a prefix with
# one of its own mistakes in it, so an early error can snowball. Teacher forcing is not the
# problem (it is fast, parallel and stable); the gap between the two regimes is. Scheduled
# sampling (Bengio et al., 2015) narrows it by sometimes feeding the model its own tokens
# during training, more and more often as training goes on.
#
# ## Part D · Greedy decoding and exact match (6 points)
#
# Write `exact_match(pred, target)`: the share (a Python float) of rows of two `(B, n)` tensors
# that agree in **every** position. A sequence with one wrong digit is a wrong sequence.

# %% nbgrader={"grade": false, "grade_id": "exact_match", "locked": false, "schema_version": 3, "solution": true}
def exact_match(pred, target):
    """Share of sequences (rows) of pred that equal target in every position, as a float."""
    ### BEGIN SOLUTION
    return (pred == target).all(dim=-1).float().mean().item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_exact_match", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""exact_match counts whole sequences: one wrong token makes the row wrong."""
BATCH_AXIS = ("all() runs over the batch axis (dim=0), asking of each position whether every row agrees: take it over "
              "each row's positions, dim=-1")
target = torch.tensor([[2, 3, 4, 1], [5, 6, 7, 1]])
pred = torch.tensor([[2, 3, 4, 1], [5, 6, 8, 1]])  # one wrong token in the second row
check_close("exact_match(pred, target) with one wrong token in one of two rows", float(exact_match(pred, target)),
            0.5, atol=1e-9, likely_causes={"tokens are counted instead of whole sequences (per token, not per sequence)":
                                           7 / 8, BATCH_AXIS: 3 / 4})
check_close("exact_match(target, target)", float(exact_match(target, target)), 1.0, atol=1e-9)
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(73)
for trial in range(5):
    b, n = int(torch.randint(2, 40, (1,), generator=gen)), int(torch.randint(2, 9, (1,), generator=gen))
    target = torch.randint(0, VOCAB, (b, n), generator=gen)
    noise = torch.rand(b, n, generator=gen) < 0.1
    pred = torch.where(noise, (target + 1) % VOCAB, target)
    right = sum(bool(torch.equal(p, t)) for p, t in zip(pred, target)) / b
    check_close(f"exact_match on a random ({b}, {n}) batch", float(exact_match(pred, target)), right, atol=1e-6,
                likely_causes={"tokens are counted instead of whole sequences (per token, not per sequence)":
                               (pred == target).float().mean().item(),
                               BATCH_AXIS: (pred == target).all(dim=0).float().mean().item()})
### END HIDDEN TESTS

# %% [markdown]
# Now `greedy_decode(model, src, max_len)`: start every row from a single `<BOS>` column, and
# `max_len` times call `model(src, dec_in)`, take the argmax of the **last** position's logits
# and append it to `dec_in`. Return the `max_len` generated tokens `(B, max_len)` as
# `torch.long`, without the `<BOS>` column. The model only ever sees its own tokens: no target
# is involved. Run it under `torch.no_grad()`.

# %% nbgrader={"grade": false, "grade_id": "greedy_decode", "locked": false, "schema_version": 3, "solution": true}
def greedy_decode(model, src, max_len):
    """Free-running greedy decoding from <BOS>: the max_len generated tokens (B, max_len)."""
    ### BEGIN SOLUTION
    dec_in = torch.full((src.size(0), 1), BOS, dtype=torch.long)  # (B, 1)
    with torch.no_grad():
        for _ in range(max_len):
            next_token = model(src, dec_in)[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            dec_in = torch.cat([dec_in, next_token], dim=1)  # feed back its own choice
    return dec_in[:, 1:]
    ### END SOLUTION


# %% [markdown]
# The graded tests below use a small *spy* model that always prefers a known next token, so
# what your loop returns shows what it fed the model. It also records every decoder input it
# is given (`spy.calls`), for you to look at.

# %% nbgrader={"grade": false, "grade_id": "spy_model", "locked": true, "schema_version": 3, "solution": false}
class SpyModel(nn.Module):
    """A stand-in seq2seq model: after token t it prefers (t + first source id + 1) % VOCAB."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, src, dec_in):  # (B, L_x), (B, n) -> (B, n, VOCAB)
        self.calls.append(dec_in.clone())
        favourite = (dec_in + src[:, :1] + 1) % VOCAB  # (B, n)
        return 5.0 * F.one_hot(favourite, VOCAB).float()


# %%
spy = SpyModel()
print(greedy_decode(spy, torch.tensor([[2, 5, 7]]), 4), "after", len(spy.calls), "calls")

# %% nbgrader={"grade": true, "grade_id": "test_greedy_shape", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""greedy_decode returns (B, max_len) long tokens, without the <BOS> column."""
### BEGIN HIDDEN TESTS
class _TinySeq2Seq(nn.Module):
    def __init__(self, seed, d=16):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(16, d)
            self.core = nn.Transformer(d, 2, 1, 1, 32, dropout=0.0, batch_first=True)
            self.out = nn.Linear(d, VOCAB)
            self.out.weight.data *= 4.0
        self.eval()

    def forward(self, src, dec_in):
        emb = lambda x: self.tok(x) + self.pos(torch.arange(x.size(1)))
        causal = torch.triu(torch.full((dec_in.size(1),) * 2, float("-inf")), diagonal=1)
        return self.out(self.core(emb(src), emb(dec_in), tgt_mask=causal))

### END HIDDEN TESTS
from course.seq2seq_checks import GREEDY_LENGTH_HINT  # the checks of this chapter: course/seq2seq_checks.py

spy = fresh(SpyModel)  # fresh(): a new SpyModel of the tests' own
pred = greedy_decode(spy, torch.tensor([[2, 5, 7], [9, 3, 4]]), 4)
check_shape("greedy_decode(spy, src of 2 rows, max_len=4)", pred, (2, 4), hint=GREEDY_LENGTH_HINT)
check_dtype("greedy_decode(...)", pred, torch.long, hint="token ids: keep the argmax indices as torch.long")
### BEGIN HIDDEN TESTS
for b, max_len in [(1, 1), (3, 7), (5, 2)]:
    pred = greedy_decode(fresh(_TinySeq2Seq, b), torch.randint(2, VOCAB, (b, 4)), max_len)
    check_shape(f"greedy_decode for {b} rows and max_len={max_len}", pred, (b, max_len), hint=GREEDY_LENGTH_HINT)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_greedy_feeds_back", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""greedy_decode starts from <BOS> and feeds back its own argmax choices, on a spy model and small random models."""
from course.seq2seq_checks import GREEDY_LENGTH_HINT  # the checks of this chapter: course/seq2seq_checks.py

spy = fresh(SpyModel)
src = torch.tensor([[2, 5, 7], [9, 3, 4]])
pred = greedy_decode(spy, src, 4)
check_shape("greedy_decode(spy, src of 2 rows, max_len=4)", pred, (2, 4), hint=GREEDY_LENGTH_HINT)
fed_back = torch.full((2, 1), BOS)  # what a loop feeding back its own choices gives the model at each step
for step in range(4):
    with torch.no_grad():
        favourite = spy(src, fed_back)[:, -1].argmax(-1)  # (B,)
    check_true(torch.equal(pred[:, step], favourite),
               f"token {step} is not the spy's argmax after <BOS> and your own {step} previous predictions: start "
               "from a single <BOS> column and feed back the argmax of each step at the end of dec_in, never the true target")
    fed_back = torch.cat([fed_back, pred[:, step : step + 1]], dim=1)
### BEGIN HIDDEN TESTS
# _TinySeq2Seq is defined in the hidden part of test_greedy_shape
def _greedy_reference(net, src, steps):
    seq = torch.zeros(src.size(0), 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(steps):
            seq = torch.cat([seq, net(src, seq)[:, -1].argmax(-1, keepdim=True)], 1)
    return seq[:, 1:]


for seed in range(4):
    net = fresh(_TinySeq2Seq, 100 + seed)  # the tests' model, defined afresh for greedy_decode
    lx = 3 + seed
    src = torch.randint(2, VOCAB, (6, lx), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        forced = net(src, torch.cat([torch.zeros(6, 1, dtype=torch.long), src.flip(1)], 1)).argmax(-1)
    check_close(f"greedy_decode on a small random model (source length {lx}, max_len {lx + 1})",
                greedy_decode(net, src, lx + 1), _greedy_reference(net, src, lx + 1), atol=0.5,
                hint="take the argmax of the last position's logits and append it to dec_in at every step",
                likely_causes={"the decoder is fed the true target; feed back your own predictions, never the "
                               "true target": forced})
### END HIDDEN TESTS

# %% [markdown]
# ### Check it: the trained model, 500 new sequences
#
# Both measures should be 1.000: teacher-forced (one pass, the true prefixes given) and greedy
# (free-running from `<BOS>`, 7 steps: 6 digits and `<EOS>`). Greedy is as good as teacher
# forcing here, so exposure bias is invisible: the task is too easy for the model to make a
# first mistake. Do not conclude from this that exposure bias is not real.

# %%
# demo only: the trained model on 500 new sequences
src, dec_in, dec_out = make_reversal_batch(500, generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    teacher_forced = exact_match(model(src, dec_in).argmax(-1), dec_out)
free_running = exact_match(greedy_decode(model, src, LENGTH + 1), dec_out)
print(f"exact match on 500 new sequences: teacher forcing {teacher_forced:.3f}, greedy {free_running:.3f}")
print("src:", show(src[0]), "   greedy:", show(greedy_decode(model, src[:1], LENGTH + 1)[0]))
assert teacher_forced == 1.0 and free_running == 1.0

# %% nbgrader={"grade": true, "grade_id": "test_trained_model", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""The model trained on your batches reverses new sequences, teacher-forced and free-running."""
try:
    trained = model
except NameError:
    trained = None
check_true(isinstance(trained, nn.Module),
           "there is no trained `model`: the training cell needs make_reversal_batch and forward to work")
### BEGIN HIDDEN TESTS
gen = torch.Generator().manual_seed(2024)
src = torch.randint(2, VOCAB, (500, LENGTH), generator=gen)
labels = torch.cat([src.flip(1), torch.ones(500, 1, dtype=torch.long)], 1)
shifted = torch.cat([torch.zeros(500, 1, dtype=torch.long), src.flip(1)], 1)
# the trained weights, read from the model's own tensors, run in the lesson's model (causal); the test decodes itself
try:
    reference = _reference_model(read_state(trained))
except (KeyError, RuntimeError, AttributeError) as error:
    raise AssertionError(f"the trained model's weights do not fit the model of Part C ({type(error).__name__}): keep "
                         "the layers ReversalTransformer.__init__ creates") from None
causal = nn.Transformer.generate_square_subsequent_mask
forced_score = (reference(src, shifted, tgt_mask=causal(LENGTH + 1)).argmax(-1) == labels).all(1).float().mean().item()
seq = torch.zeros(500, 1, dtype=torch.long)
for _ in range(LENGTH + 1):
    seq = torch.cat([seq, reference(src, seq, tgt_mask=causal(seq.size(1)))[:, -1].argmax(-1, keepdim=True)], 1)
free_score = (seq[:, 1:] == labels).all(1).float().mean().item()
if min(forced_score, free_score) < 0.99:  # what the student's own forward makes of the test's inputs
    set_training(trained, False)  # eval mode, set as nn.Module.eval() does
    with torch.no_grad():
        own_forced = (trained(src, shifted).argmax(-1) == labels).all(1).float().mean().item()
        own = torch.zeros(500, 1, dtype=torch.long)
        for _ in range(LENGTH + 1 if own_forced >= 0.99 else 0):
            own = torch.cat([own, trained(src, own)[:, -1].argmax(-1, keepdim=True)], 1)
    own_free = (own[:, 1:] == labels).all(1).float().mean().item() if own.size(1) > 1 else 0.0
    check_true(own_forced < 0.99 or own_free >= 0.99,
               f"the trained model scores {own_forced:.3f} teacher-forced but only {own_free:.3f} when it generates "
               "freely from <BOS>: during training it could see the tokens it had to predict; is the causal "
               "mask (tgt_mask) of the decoder's self-attention missing?")
    check_true(own_forced < 0.99,
               f"the model reverses new sequences with your forward, but its weights in the lesson's model (causal "
               f"tgt_mask, no other mask) reverse only {forced_score:.3f} teacher-forced: forward must put exactly "
               "the causal tgt_mask on the decoder's self-attention and no mask on the cross-attention (memory_mask) "
               "or the encoder (src_mask)")
try:  # which batches the model learned from: a message only, the scores above decide
    seen_src, _, seen_labels = make_reversal_batch(16, generator=torch.Generator().manual_seed(1))
    labels_reversed = (tuple(seen_labels.shape) != (16, LENGTH + 1)
                       or torch.equal(seen_labels[:, :-1], seen_src.flip(1)))
except Exception:  # noqa: BLE001 (the tests of make_reversal_batch report the error)
    labels_reversed = True
check_true(forced_score >= 0.99 or labels_reversed,
           "the model was trained on your make_reversal_batch, whose labels dec_out[:, :-1] are not each source "
           "reversed along its positions: make the tests of make_reversal_batch pass first")
check_true(forced_score >= 0.99,
           f"teacher-forced, the trained model reverses only {forced_score:.3f} of 500 new sequences: check that "
           "make_reversal_batch shifts the decoder input right (<BOS> + target), ends the labels with <EOS>, "
           "and that forward puts no mask on the cross-attention")
check_true(free_score >= 0.99,
           f"the trained model reverses {forced_score:.3f} teacher-forced but only {free_score:.3f} when it "
           "generates freely from <BOS>: check the causal mask (tgt_mask) of the decoder's self-attention")
want = reference(src[:100], shifted[:100], tgt_mask=causal(LENGTH + 1))
for mode in ("eval", "train"):  # the weights score only with the forward that holds them, in either mode (dropout 0)
    set_training(trained, mode == "train")
    with torch.no_grad():
        gap = (trained(src[:100], shifted[:100]) - want).abs().max().item()
    check_true(gap < 1e-3, f"the trained weights reverse new sequences in the lesson's model, but your forward holding "
               f"them gives other logits in {mode} mode (largest difference {gap:.1e}): forward must compute the "
               "model of Part C with the weights the model holds, in train and eval mode alike")
set_training(trained, False)
### END HIDDEN TESTS

# %% [markdown]
# ## What the cross-attention looks at
#
# The weights of the first decoder layer's cross-attention, averaged over its 4 heads: one row
# per decoder position (the query), one column per source position (the key). To output the
# $i$-th reversed digit, position $i$ should look at source position $L_x + 1 - i$, an
# anti-diagonal. The last row (the step that emits `<EOS>`) has nothing in particular to copy.

# %%
@torch.no_grad()
def cross_attention_weights(model, src, dec_in, layer=0):
    """Head-averaged cross-attention weights (B, n, L_x) of one decoder layer."""
    memory = model.transformer.encoder(model.embed(src))  # (B, L_x, D)
    x = model.embed(dec_in)  # (B, n, D)
    causal = nn.Transformer.generate_square_subsequent_mask(dec_in.size(1))
    for block in model.transformer.decoder.layers[:layer]:
        x = block(x, memory, tgt_mask=causal)
    block = model.transformer.decoder.layers[layer]
    x = block.norm1(x + block.self_attn(x, x, x, attn_mask=causal, need_weights=False)[0])
    return block.multihead_attn(x, memory, memory, need_weights=True)[1]  # (B, n, L_x)


# %%
# demo only: the cross-attention of the trained model
src, dec_in, _ = make_reversal_batch(200, generator=torch.Generator().manual_seed(2))
weights = cross_attention_weights(model, src, dec_in)  # (200, 7, 6)
ax = plot_attention(weights[0], queries=show(dec_in[0]).split(), keys=show(src[0]).split(),
                    title=f"first decoder layer's cross-attention, source {show(src[0])}")
ax.set_xlabel("source token (key)")
ax.set_ylabel("decoder input (query)")
plt.show()
average = weights.mean(0)  # (7, 6)
print("average weight on the anti-diagonal:", average[torch.arange(6), 5 - torch.arange(6)].round(decimals=2))
assert (average[:6].argmax(-1) == torch.arange(5, -1, -1)).all()
assert average[torch.arange(6), 5 - torch.arange(6)].min() > 0.8

# %% [markdown]
# ## Part E · Beam search over the trained model (3 points)
#
# Reuse your `beam_search`: wrap the model as a `next_probs` function. For a prefix of token ids
# (a tuple beginning with `BOS`), run `model(src[None], dec_in)` with `dec_in` the prefix as a
# `(1, n)` long tensor, turn the **last** position's logits into probabilities with a softmax,
# and return `{token id: probability}` for the 12 ids. Search with `start=BOS`, `eos=EOS` and
# `max_len = len(src) + 1` (the digits and `<EOS>`).
#
# `beam_decode(model, src, width, alpha)` takes **one** source, a 1-D long tensor, and returns
# what `beam_search` returns: `(tokens, log_prob, score)` with `tokens` a list of ids.

# %% nbgrader={"grade": false, "grade_id": "beam_decode", "locked": false, "schema_version": 3, "solution": true}
def beam_decode(model, src, width, alpha):
    """Beam search over a seq2seq model for one source src (L_x,); returns (tokens, log_prob, score)."""
    ### BEGIN SOLUTION
    source = src.reshape(1, -1)  # (1, L_x)

    def next_probs(prefix):
        with torch.no_grad():
            logits = model(source, torch.tensor([prefix], dtype=torch.long))[0, -1]  # (VOCAB,)
        return dict(enumerate(torch.softmax(logits.double(), dim=-1).tolist()))

    return beam_search(next_probs, width, alpha=alpha, max_len=source.size(1) + 1, start=BOS, eos=EOS)
    ### END SOLUTION


# %% [markdown]
# ### Check it: beams on the trained model
#
# With width 3 and $\alpha = 0.6$ every one of 20 new sources comes back reversed, with a
# log-probability close to 0 (the model is sure), and width 1 gives exactly greedy decoding.

# %%
# demo only: beam search with the trained model
src, _, dec_out = make_reversal_batch(20, generator=torch.Generator().manual_seed(3))
beams = [beam_decode(model, row, 3, 0.6) for row in src]
print("src:", show(src[0]), "   beam:", show(beams[0][0]), f"   ln p = {beams[0][1]:.4f}")
assert all(list(tokens) == list(row[:-1]) for (tokens, _, _), row in zip(beams, dec_out.tolist()))
assert min(log_prob for _, log_prob, _ in beams) > -0.1
assert beam_decode(model, src[0], 1, 0.0)[0] == greedy_decode(model, src[:1], LENGTH + 1)[0, :-1].tolist()

# %% [markdown]
# Two stand-in models for the tests: `TableModel`, whose next-token logits depend only on the
# previous token, and `AnswerModel`, which knows one fixed answer and is confident about it.

# %% nbgrader={"grade": false, "grade_id": "stand_in_models", "locked": true, "schema_version": 3, "solution": false}
class TableModel(nn.Module):
    """Next-token logits depend only on the previous token: row t of a fixed (VOCAB, VOCAB) table."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, src, dec_in):  # (B, L_x), (B, n) -> (B, n, VOCAB)
        return self.table[dec_in]


class AnswerModel(nn.Module):
    """At decoder position t, logit 8 on answer[t] and 0 elsewhere, whatever the source."""

    def __init__(self, answer):
        super().__init__()
        self.answer = torch.as_tensor(answer)

    def forward(self, src, dec_in):  # (B, L_x), (B, n) -> (B, n, VOCAB)
        favourite = self.answer[: dec_in.size(1)].expand(dec_in.size(0), -1)  # (B, n)
        return 8.0 * F.one_hot(favourite, VOCAB).float()


# %% nbgrader={"grade": true, "grade_id": "test_beam_decode_table", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""beam_decode turns the last position's logits into next-token probabilities for beam_search."""
DECODE_HINT = ("beam_decode runs your beam_search on the model's next-token probabilities: make the tests of "
               "beam_search pass first, then run beam_decode on the trained model above and read the traceback")
logits_table = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(11)) * 2.0
log_table = torch.log_softmax(logits_table.double(), -1)
tokens, log_prob, _ = attempt("beam_decode(table model, [2, 3, 4], 2, 0.0)", beam_decode, fresh(TableModel, logits_table),
                               torch.tensor([2, 3, 4]), 2, 0.0, hint=DECODE_HINT)
path = [BOS] + [int(t) for t in tokens] + ([EOS] if len(tokens) < 4 else [])  # max_len = 3 + 1
walk = sum(log_table[a, b].item() for a, b in zip(path[:-1], path[1:]))
first_position = sum(log_table[BOS, b].item() for b in path[1:])  # each step read from the <BOS> position
check_close("log_prob of beam_decode on a table model", log_prob, walk, atol=1e-4,
            likely_causes={"next_probs reads the logits of the first decoder position; take those of the last "
                           "position, model(...)[0, -1]": first_position},
            hint="a softmax over the last position's logits gives the probabilities; beam_search adds their "
                 "logs (if beam_search fails its own tests, fix those first)")
### BEGIN HIDDEN TESTS
# _reference_beam is defined in the hidden part of test_beam_toy
from instructor.references.seq2seq_beam_search import own_lp  # the grader's side only

own_penalty = own_lp(length_penalty, (0.0, 0.6))  # beam_decode is judged around your length_penalty (Part A's)
FIRST_POSITION = ("it matches a search that reads the logits of the first decoder position at every step: next_probs "
                  "must take those of the last position, model(...)[0, -1]")
for seed in range(3):
    table = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(20 + seed)) * 2.0
    probs = torch.softmax(table.double(), -1)
    table_next = lambda prefix: {t: probs[prefix[-1], t].item() for t in range(VOCAB)}
    first_next = lambda prefix: {t: probs[BOS, t].item() for t in range(VOCAB)}  # the first position's logits
    for width, alpha in [(1, 0.0), (3, 0.6)]:
        want = _reference_beam(table_next, width, alpha, 5, start=BOS, eos=EOS, lp=own_penalty)
        mine = attempt(f"beam_decode(table model, [5, 6, 7, 8], {width}, {alpha})", beam_decode,
                       fresh(TableModel, table), torch.tensor([5, 6, 7, 8]), width, alpha, hint=DECODE_HINT)
        first = _reference_beam(first_next, width, alpha, 5, start=BOS, eos=EOS, lp=own_penalty)[0]
        check_true([int(t) for t in mine[0]] == want[0],
                   f"table model {seed}, width={width}, alpha={alpha}: beam_decode chose another hypothesis; "
                   + (FIRST_POSITION if [int(t) for t in mine[0]] == first and first != want[0] else
                      "next_probs must be a softmax of the last position's logits; start=BOS, eos=EOS, "
                      "max_len=len(src) + 1 (and beam_search must pass its own tests)"))
        check_close(f"log_prob on table model {seed}", mine[1], want[1], atol=1e-4,
                    hint="next_probs must be a softmax of the last position's logits (and beam_search must "
                         "pass its own tests)")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_beam_decode_model", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""beam_decode finds the answer of a confident model and the best hypothesis of small random models."""
from course.seq2seq_checks import LP_SEVEN_AT_0_6  # the checks of this chapter: course/seq2seq_checks.py

answer = [9, 4, 11, 7, 7, 2, EOS]
tokens, log_prob, score = attempt("beam_decode(answer model, [2, 7, 7, 11, 4, 9], 2, 0.6)", beam_decode,
                                  fresh(AnswerModel, answer), torch.tensor([2, 7, 7, 11, 4, 9]), 2, 0.6,
                                  hint=DECODE_HINT)
check_true(len(tokens) < 2 or any(int(t) != answer[0] for t in tokens),
           "beam_decode repeats the model's first token at every step: next_probs reads the logits of the first "
           "decoder position, or gives the model only the last token: give it the whole prefix from <BOS> and take "
           "the logits of its last position, model(...)[0, -1]")
check_true([int(t) for t in tokens] == answer[:-1], f"a model sure of {show(answer)} got {show(tokens)} from "
           "beam_decode: search with start=BOS, eos=EOS and max_len=len(src) + 1, and return the tokens without them")
check_true(-0.1 < log_prob <= 0, f"log_prob {log_prob:.4f} of a confident model should be just below 0: "
           "the sum of the logs of softmax probabilities")
own_seven = attempt("length_penalty(7, 0.6)", length_penalty, 7, 0.6, hint="make the test of length_penalty pass first")
if isinstance(own_seven, (int, float)) and abs(own_seven - LP_SEVEN_AT_0_6) < 1e-12:  # else test_length_penalty's
    check_close("score with alpha 0.6", score, log_prob / LP_SEVEN_AT_0_6, atol=1e-6,
                hint="beam_decode returns what beam_search returns: score = log_prob / lp(|y|), <EOS> counted",
                likely_causes={"the score is log_prob itself, as with alpha = 0: pass alpha on to beam_search":
                               log_prob})
### BEGIN HIDDEN TESTS
from instructor.references.seq2seq_beam_search import own_lp  # the grader's side only

own_penalty = own_lp(length_penalty, (0.0, 0.6, 1.0))  # beam_decode is judged around your length_penalty (Part A's)
check_close("score with alpha 0.6", score, log_prob / own_penalty(7, 0.6), atol=1e-6,
            hint="beam_decode returns what beam_search returns: score = log_prob / lp(|y|), <EOS> counted")
# defined in the hidden parts of earlier cells: _reference_beam (test_beam_toy), _TinySeq2Seq
# (test_greedy_shape) and FIRST_POSITION (test_beam_decode_table)
def _model_next_probs(net, source, position=-1):
    def next_probs(prefix):
        with torch.no_grad():
            logits = net(source[None], torch.tensor([list(prefix)]))[0, position].double()
        return dict(enumerate(torch.softmax(logits, -1).tolist()))
    return next_probs


for seed, (width, alpha) in enumerate([(1, 0.0), (2, 0.0), (3, 0.6), (2, 1.0), (4, 0.6)]):
    net = fresh(_TinySeq2Seq, 200 + seed)
    source = torch.randint(2, VOCAB, (3 + seed % 3,), generator=torch.Generator().manual_seed(seed))
    want = _reference_beam(_model_next_probs(net, source), width, alpha, len(source) + 1, start=BOS, eos=EOS,
                           lp=own_penalty)
    tokens, log_prob, score = attempt(f"beam_decode(the trained model, a source, {width}, {alpha})", beam_decode, net,
                                      source, width, alpha, hint=DECODE_HINT)
    first = _reference_beam(_model_next_probs(net, source, 0), width, alpha, len(source) + 1, start=BOS, eos=EOS,
                            lp=own_penalty)[0]
    check_true([int(t) for t in tokens] == want[0],
               f"small random model {seed}, width={width}, alpha={alpha}: beam_decode chose another hypothesis than "
               "the reference; " + (FIRST_POSITION if [int(t) for t in tokens] == first and first != want[0] else
                                    "next_probs must be a softmax of the last position's logits for this source "
                                    "(and beam_search must pass its own tests)"))
    check_close(f"log_prob for small random model {seed}", log_prob, want[1], atol=1e-4,
                hint="next_probs must be a softmax of the last position's logits (and beam_search must "
                     "pass its own tests)")
### END HIDDEN TESTS

# %% [markdown]
# ## The mistake that training loss cannot see
#
# Train the same model **without** the decoder's causal mask (`causal=False`). With the true
# target as input, position $i$ can now see $y_i$ one position to its right and simply copy it:
# the loss still falls to about 0.001 and the teacher-forced exact match is still 1.000. Free
# generation has nothing to the right to copy, and greedy decoding collapses to about 0.02 (0.020
# and 0.022 in two earlier runs of this cell; the figure moves a little with the number of CPU threads).
# Always evaluate a seq2seq model by letting it generate. (This run takes a few seconds and is
# skipped while the grader runs the notebook.)

# %%
# demo only: a second training run (autograde skips it)
torch.manual_seed(0)
peeking = ReversalTransformer(causal=False)
peeking_losses = train(peeking)
peeking.eval()
src, dec_in, dec_out = make_reversal_batch(500, generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    peeking_forced = exact_match(peeking(src, dec_in).argmax(-1), dec_out)
peeking_free = exact_match(greedy_decode(peeking, src, LENGTH + 1), dec_out)
print(f"no causal mask: final loss {peeking_losses[-1]:.4f}, teacher forcing {peeking_forced:.3f}, "
      f"greedy {peeking_free:.3f}")
print("src:", show(src[0]), "   greedy:", show(greedy_decode(peeking, src[:1], LENGTH + 1)[0]))
assert peeking_losses[-1] < 0.01 and peeking_forced > 0.99 and peeking_free < 0.1

# %%
# demo only: the figure
plot_curves(range(len(losses)), {"causal mask": losses, "no causal mask": peeking_losses},
            xlabel="step", ylabel="cross-entropy (nats)", logy=True, marker=None,
            title=f"same loss, greedy exact match {free_running:.2f} vs {peeking_free:.2f}")
plt.show()

# %% [markdown]
# ## Two more common mistakes
#
# **Forgetting the shift-right.** If the decoder input and the labels are the *same* sequence,
# the causal mask does not help: position $i$ may see position $i$, and that is exactly the
# token $y_i$ it is asked to predict. The model learns to copy its input, the training loss
# falls to almost nothing, and generation fails from the first token: when generating, the
# token it learned to copy is the very one it has not produced yet. The
# decoder input must open with `<BOS>` and the labels must close with `<EOS>`, one position
# apart, as `make_reversal_batch` builds them (its tests check `dec_in[:, 1:] == dec_out[:, :-1]`).
#
# **Believing a wider beam is always better.** Beam search is an approximation of the most
# probable output, and the raw score $\ln p$ favours short outputs: in the toy table, without a
# length penalty, the two-word "đàn chim" beats the three-word "đàn chim bay". A wider beam
# searches harder *for that score*, so without length normalisation it can find short, even
# cut-off, outputs more readily, not better ones. Nor has $\alpha$ a standard value: 0.6 was
# Vaswani et al.'s choice for their translation task; tune it on your own validation set.
# On the toy table, widening the beam past 2 changes nothing, and the choice between the
# two- and three-word sentences is made by $\alpha$ alone:

# %%
for alpha in (0.0, 0.6):
    chosen = [" ".join(beam_search(toy_next_probs, width, alpha)[0]) for width in (1, 2, 3, 4)]
    print(f"alpha={alpha}: " + ", ".join(f"B={w}: '{text}'" for w, text in zip((1, 2, 3, 4), chosen)))
    assert chosen[2:] == ["đàn chim" if alpha == 0 else "đàn chim bay"] * 2

# %% [markdown]
# ## Other ways to set it up
#
# **T5** (Raffel et al., 2020) casts every task as text to text with a task prefix in the input:
# "translate English to German: That is good." gives "Das ist gut."; a grammaticality prompt
# ("cola sentence: ...") gives "not acceptable"; a similarity prompt ("stsb sentence1: ...
# sentence2: ...") gives the string "3.8". One model, one loss, one decoding procedure. T5 is a
# standard encoder-decoder trained with teacher forcing (the base model has 12 blocks on each
# side, about 220 million parameters); in its architecture comparison, with the denoising
# objective, the encoder-decoder scored best on every task, ahead of decoder-only variants of
# the same compute, although, at that same compute, it has about twice as many parameters.
#
# **Decoder-only** models (GPT, LLaMA) have no encoder and no cross-attention: source and target
# sit in one sequence under one causal mask. A **prefix LM** is in between: one stack, the input
# part attended bidirectionally, the output part causally.
#
# | | encoder-decoder (T5) | prefix LM | decoder-only (GPT) |
# |---|---|---|---|
# | the input sees | both directions, in the encoder | both directions | only the past (causal) |
# | the output sees | the past, plus cross-attention to the input | the past and the whole input | the past and the whole input |
# | stacks of blocks | two | one | one |
#
# Two limits to remember. Beam search finds *probable* text, not *good* text: for open-ended
# generation, maximising probability gives bland, repetitive output (Holtzman et al., 2020).
# And long sources stay expensive: $L_x \times L_x$ scores in the encoder and $L_y \times L_x$
# in every cross-attention, per head and per layer.
#
# ## Part F · Quiz (4 points)
#
# Answer each question with one letter, `Q1 = "a"` and so on.
#
# **Q1.** The source has 9 tokens and the decoder has produced 4 so far. In one head of a
# cross-attention layer, what is the shape of $QK^\top$?
#
# * a) 9 × 4
# * b) 4 × 4
# * c) 4 × 9
# * d) 9 × 9
#
# **Q2.** Beam search ends with two finished hypotheses. A has 4 tokens (`<EOS>` included) and the
# summed log-probability −2.0; B has 9 tokens and −2.9. With
# $\operatorname{lp} = ((5 + |\mathbf{y}|)/6)^\alpha$, which is chosen for $\alpha = 0$ and for
# $\alpha = 1$?
#
# * a) A for both values of $\alpha$
# * b) A for $\alpha = 0$, B for $\alpha = 1$
# * c) B for both values of $\alpha$
# * d) B for $\alpha = 0$, A for $\alpha = 1$
#
# **Q3.** The target sequence is `A B C`. With teacher forcing, which pair (decoder input, labels)
# does its training example use?
#
# * a) input `A B C <EOS>`, labels `<BOS> A B C`
# * b) input `<BOS> A B C`, labels `<BOS> A B C`
# * c) input `A B C`, labels `B C <EOS>`
# * d) input `<BOS> A B C`, labels `A B C <EOS>`
#
# **Q4.** A summariser scores a very high per-token accuracy under teacher forcing on its validation
# set, but its own summaries start well and drift off topic halfway. The best explanation?
#
# * a) exposure bias: training never showed it a prefix with its own errors
# * b) the beam is too narrow, and a larger $B$ would keep the summary on topic
# * c) the cross-attention has a causal mask that hides the end of the source
# * d) it overfits its training set, and so fails on every new input

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
Q1 = "c"
Q2 = "b"
Q3 = "d"
Q4 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q1: the shape of one head's cross-attention scores."""
answer = check_choice("Q1", Q1)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q1", Q1, {
    "a": "rows are queries: the queries come from the decoder's 4 tokens, the keys from the 9 source "
         "tokens",
    "b": "4 x 4 is the decoder's self-attention; in cross-attention the keys are the 9 source tokens",
    "d": "9 x 9 is the encoder's self-attention; in cross-attention the queries are the decoder's 4 "
         "tokens (re-read 'Cross-attention in the Transformer')"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q2: the length penalty choosing between two hypotheses."""
answer = check_choice("Q2", Q2)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q2", Q2, {
    "a": "with alpha = 1 each summed log-probability is divided by its own lp, and the longer "
         "hypothesis is divided by more: compute both quotients before you compare",
    "c": "with alpha = 0 the penalty is 1 for both, and -2.0 is larger than -2.9: without a penalty the "
         "shorter, more probable hypothesis wins",
    "d": "this reverses the penalty's effect: alpha = 0 ranks by raw log-probability, where the shorter "
         "A is ahead, and alpha > 0 helps the longer hypothesis"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q3: the decoder input and labels of teacher forcing."""
answer = check_choice("Q3", Q3)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q3", Q3, {
    "a": "that is the shift the wrong way round: each position would have to predict the token before "
         "the one it reads",
    "b": "with labels equal to the input, each position is asked for the token it already reads, which "
         "the causal mask allows: the model learns to copy",
    "c": "without <BOS> at the start, nothing is trained to produce the first token, A, which "
         "generation needs first"})
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""Q4: teacher-forced accuracy high, free-running output drifting."""
answer = check_choice("Q4", Q4)  # your letter, read as the grader reads it
### BEGIN HIDDEN TESTS
from course import check_option

answer = check_option("Q4", Q4, {
    "b": "a beam only searches among the model's own continuations: once its prefixes drift, every beam "
         "goes on from prefixes it never saw in training",
    "c": "a causal mask on the cross-attention would spoil the teacher-forced accuracy too, and that "
         "accuracy is very high here",
    "d": "the teacher-forced accuracy is high on the validation set, so the model does generalise when "
         "it is given correct prefixes (re-read 'Evaluation: teacher-forced and free-running')"})
### END HIDDEN TESTS

# %% [markdown]
# ## Part G · In your own words (2 points, graded by your instructor)
#
# Explain, in three or four sentences, why a seq2seq model can reach a perfect teacher-forced
# accuracy while failing at generation, and which measurement tells the two apart.

# %% [markdown] nbgrader={"grade": true, "grade_id": "free_running_answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# **Model answer.** Under teacher forcing the decoder always receives the correct previous tokens, so each step is
# judged on a prefix it never produced itself; a bug that lets a position read its own target (a
# missing causal mask) even makes the task a copy. At generation time the model feeds back its own
# tokens: one wrong token changes every later input, and errors compound (exposure bias), or, with
# the leak, there is nothing to copy. Only a free-running measurement on new data, such as greedy
# exact match, shows how the model does when it must produce the whole sequence itself.
#
# **Rubric (2 points, one idea each).**
# * 1 point, why the two can differ: under teacher forcing every step receives the true previous tokens, a prefix the model did not produce, while in generation it is fed its own tokens, so one wrong token changes every later input and errors compound (exposure bias); a missing causal mask even lets a position copy the token it must predict, which generation has not produced yet. Earns it: the true prefix in training against the model's own tokens in generation, in any words. Does not: "the model overfits" (the model without its causal mask scores 1.000 teacher-forced on new sequences too), or "teacher forcing is easier" without saying what the decoder is given.
# * 1 point, the measurement: free-running decoding (greedy or beam search, fed only its own tokens) scored on new data, such as greedy exact match. Earns it: letting the model generate whole sequences and scoring them. Does not: the training loss (without the causal mask it still falls to about 0.001), or a teacher-forced score on new data (still 1.000 without the causal mask).
# * A false claim beside a right answer costs the point whose idea it contradicts (for example "the training loss shows the failure" costs the second point); a false claim about something the question does not ask costs nothing.

# %% [markdown]
# ## Summary
#
# * A seq2seq model learns $p(\mathbf{y} \mid \mathbf{x}) = \prod_i p(y_i \mid y_{<i}, \mathbf{x})$,
#   a language model conditioned on the source, stopping when it emits `<EOS>`.
# * The RNN encoder-decoder squeezes the source into one vector; attention gives every decoder
#   step its own weighted average of the source. In the Transformer that is cross-attention:
#   Q from the decoder, K and V from the encoder, scores $L_y \times L_x$, no causal mask.
# * Teacher forcing trains on the true prefix (decoder input = `<BOS>` + target, labels = target +
#   `<EOS>`); generation feeds back the model's own tokens. Measure by free generation: a model
#   without its causal mask reaches the same loss and the same teacher-forced score, then fails.
# * Beam search keeps $B$ hypotheses by raw summed log-probability, moves finished ones out, and
#   picks the final answer by $\ln p / \operatorname{lp}(|\mathbf{y}|)$ with $|\mathbf{y}|$
#   counting `<EOS>`. It is still an approximation: it may miss the best-scoring sentence.
