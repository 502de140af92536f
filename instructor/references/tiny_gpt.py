"""Chapter 10's references (the grader's side only): PyTorch's own computations holding an attention's, a
block's or a GPT's parameters, a reference training step, the sampling rules in NumPy, a reference model a
cached step and `generate` run on, and the hidden tests' comparisons with them.

The property checks come first, from `course/tiny_gpt_checks.py` (the visible tests' own), so code that
breaks a property fails with that property's message; then every output is compared with the references.

One mistake, one loss: a block is judged around its own attention and FFN (whatever they compute), a model
around its own blocks, the loss against the model's own logits, a cached step and `generate` on the
grader's model. A module is judged on the parameters the test loads into it and on those it was built with,
read without writing them, so nothing it can see of its parameters tells a graded call from ordinary use.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from nboracle import fresh, read_state
from torch import nn

from course.checks import attempt, check_close, check_shape, check_true
from course.tiny_gpt_checks import (  # noqa: F401 (block_state, gpt_state, future_mask: the references' names too)
    CACHE_HINT,
    attention_state,
    block_state,
    cached_steps,
    check_attention_outputs,
    check_block_outputs,
    check_cache_shapes,
    check_ffn_outputs,
    check_loss_outputs,
    check_model_outputs,
    ffn_state,
    future_mask,
    gpt_state,
    training_batches,
)

# ---------------------------------------------------------------- modules with the exercises' names


class ReferenceAttention(nn.Module):
    """Causal multi-head self-attention by the names of Part B, on F.scaled_dot_product_attention."""

    def __init__(self, width, heads, max_len):
        super().__init__()
        self.n_heads, self.d_head = heads, width // heads
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, return_weights=False):
        return sdpa_attention(self.qkv, self.proj, x, self.n_heads)


class ReferenceFeedForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class ReferenceBlock(nn.Module):
    def __init__(self, width, heads, max_len):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = ReferenceAttention(width, heads, max_len)
        self.ffn = ReferenceFeedForward(width, 4 * width)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class ReferenceGPT(nn.Module):
    """A GPT by the names of Part D holding `state`: what a cached step and `generate` are run on."""

    def __init__(self, state, vocab, width, heads, layers, max_len):
        super().__init__()
        self.token_embedding, self.position_embedding = nn.Embedding(vocab, width), nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(ReferenceBlock(width, heads, max_len) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)
        self.load_state_dict({**state, **{k: v for k, v in self.state_dict().items() if k.endswith("mask")}})
        self.eval()

    def forward(self, idx, targets=None):
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss

    def caches(self, idx):
        """The (K, V) of every block for the text idx (B, T): each (B, H, T, d_head), what a cache holds after it."""
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(idx.shape[1]))
        caches = []
        for block in self.blocks:
            _, keys, values = split_qkv(block.attention.qkv(block.norm1(x)), block.attention.n_heads)
            caches.append((keys, values))
            x = block(x)
        return caches


def reference_attention(state, width, heads, max_len=64):
    """ReferenceAttention holding an attention's parameters `state`."""
    attention = ReferenceAttention(width, heads, max_len)
    attention.load_state_dict({**state, "mask": attention.mask})
    return attention


def reference_block(state, width, heads, max_len=64):
    """ReferenceBlock holding a block's parameters `state`."""
    block = ReferenceBlock(width, heads, max_len)
    block.load_state_dict({**state, "attention.mask": block.attention.mask})
    return block


def split_qkv(qkv, heads):
    """(B, T, 3D) -> q, k, v each (B, H, T, d)."""
    batch, length, triple = qkv.shape
    return (t.view(batch, length, heads, triple // 3 // heads).transpose(1, 2) for t in qkv.split(triple // 3, dim=-1))


def sdpa_attention(qkv, proj, x, heads, causal=True, scale=None, heads_split=True, merge_transposed=True):
    """F.scaled_dot_product_attention on the projections qkv (a Linear) of x, heads merged, then proj (None: no proj)."""
    batch, length, width = x.shape
    if heads_split:
        q, k, v = split_qkv(qkv(x), heads)
    else:  # the mistake of viewing (B, T, D) as (B, H, T, d) without the transpose
        q, k, v = (t.reshape(batch, heads, length, width // heads) for t in qkv(x).split(width, dim=-1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)  # (B, H, T, d)
    y = y.transpose(1, 2).reshape(batch, length, width) if heads_split and merge_transposed else \
        y.reshape(batch, length, width)
    return y if proj is None else proj(y)


def _linear(state, prefix):
    weight = state[f"{prefix}.weight"]
    layer = nn.Linear(weight.shape[1], weight.shape[0], dtype=weight.dtype)
    layer.load_state_dict({"weight": weight, "bias": state[f"{prefix}.bias"]})
    return layer


def _layer_norm(state, prefix):
    def norm(x):
        return F.layer_norm(x, x.shape[-1:], state[f"{prefix}.weight"].to(x.dtype), state[f"{prefix}.bias"].to(x.dtype))
    return norm


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def _as_built(what, build, *args):
    """The module a student's class builds, and its parameters and persistent buffers as built, read (never
    written): the module is then judged on them."""
    module = attempt(what, build, *args)
    return module, {name: value for name, value in read_state(module).items() if not name.endswith("mask")}


# ---------------------------------------------------------------- Part B: the attention and the FFN

ATTENTION_HINT = ("split qkv(x) into q, k, v, each .view(B, T, H, d).transpose(1, 2); scores q @ k^T / sqrt(d); "
                  "-inf above the diagonal; softmax over the keys; weights @ v, heads merged back; proj")


def _judge_attention(what, out, x, state, heads):
    qkv, proj = _linear(state, "qkv"), _linear(state, "proj")
    with torch.no_grad():
        expected = sdpa_attention(qkv, proj, x, heads)
        causes = {
            "the causal mask is not applied (every position reads the future)": sdpa_attention(qkv, proj, x, heads,
                                                                                                causal=False),
            "the scores are not divided by sqrt(d_head)": sdpa_attention(qkv, proj, x, heads, scale=1.0),
            "the scores are divided by sqrt(width) instead of sqrt(d_head)": sdpa_attention(
                qkv, proj, x, heads, scale=1 / math.sqrt(x.shape[-1])),
            "the output projection proj is not applied": sdpa_attention(qkv, None, x, heads),
            "q, k and v are viewed as (B, H, T, d) directly; view them as (B, T, H, d), then transpose(1, 2)":
                sdpa_attention(qkv, proj, x, heads, heads_split=False),
            "the heads are merged back with a reshape of (B, H, T, d) alone: transpose(1, 2) to (B, T, H, d) first":
                sdpa_attention(qkv, proj, x, heads, merge_transposed=False),
        }
    check_close(what, out, expected, atol=1e-4, likely_causes=causes, hint=ATTENTION_HINT)


def compare_attention(MultiHeadSelfAttention, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """check_attention_outputs, then the output compared with F.scaled_dot_product_attention(is_causal=True) on the
    same projections: with the test's parameters, then with those the module was built with."""
    _, x, out = check_attention_outputs(MultiHeadSelfAttention, batch, length, width, heads, seed)
    what = f"MultiHeadSelfAttention({width}, {heads}, {length + 2})"
    _judge_attention(f"{what}(x)", _first(out), x, attention_state(width, seed), heads)
    torch.manual_seed(seed)
    attention, state = _as_built(what, MultiHeadSelfAttention, width, heads, length + 2)
    out = attempt(f"{what}(x), with the parameters it was built with", attention, x)
    _judge_attention(f"{what}(x), with the parameters it was built with", _first(out), x, state, heads)


def _judge_ffn(what, out, x, state):
    linear1, linear2 = _linear(state, "linear1"), _linear(state, "linear2")
    with torch.no_grad():
        expected = linear2(torch.relu(linear1(x)))
        causes = {"the ReLU is missing": linear2(linear1(x)), "a GELU is used where the text asks for a ReLU":
                  linear2(F.gelu(linear1(x))), "the ReLU is applied after linear2": torch.relu(linear2(linear1(x)))}
    check_close(what, out, expected, atol=1e-4, likely_causes=causes, hint="linear2(relu(linear1(x)))")


def compare_ffn(FeedForward, width, hidden, seed):  # noqa: N803 (the class under test)
    """check_ffn_outputs, then linear2(relu(linear1(x))) with the test's parameters and with those it was built with."""
    _, x, out = check_ffn_outputs(FeedForward, width, hidden, seed)
    what = f"FeedForward({width}, {hidden})"
    _judge_ffn(f"{what}(x)", out, x, ffn_state(width, hidden, seed))
    torch.manual_seed(seed)
    ffn, state = _as_built(what, FeedForward, width, hidden)
    _judge_ffn(f"{what}(x), with the parameters it was built with", attempt(f"{what}(x)", ffn, x), x, state)


# ---------------------------------------------------------------- Part C: the block, around its own sublayers


def own_sublayers(what, block, width):
    """The block's own attention and FFN as functions (whatever they compute: Part B's tests judge them), refused when
    either gives every input the same answer: the block is judged around the parts the student wrote."""
    def attention(h):
        return _first(attempt(f"{what}.attention", block.attention, h, hint="make the test of MultiHeadSelfAttention "
                                                                            "pass first"))

    def ffn(h):
        return attempt(f"{what}.ffn", block.ffn, h, hint="make the test of FeedForward pass first")

    gen = torch.Generator().manual_seed(width)
    probes = [torch.randn(1, 3, width, generator=gen) for _ in range(2)]
    for name, part in (("attention", attention), ("ffn", ffn)):
        first, second = (part(h) for h in probes)
        check_true(bool(torch.isfinite(first).all() and torch.isfinite(second).all()),
                   f"{what}.{name} gives NaN or infinite values, so no block built on it can be judged: make the test "
                   f"of {'MultiHeadSelfAttention' if name == 'attention' else 'FeedForward'} pass first")
        check_true(not torch.allclose(first, second), f"{what}.{name} gives two different inputs the same answer, so "
                   f"no block built on it can be judged: make the test of "
                   f"{'MultiHeadSelfAttention' if name == 'attention' else 'FeedForward'} pass first")
    return attention, ffn


def own_blocks(what, model, layers, width, dtype=torch.float32):
    """The model's own blocks as functions, in order (whatever they compute: Part C's tests judge them), refused when
    one gives every input the same answer: the model is judged around the blocks the student wrote."""
    blocks = [attempt(f"{what}.blocks[{i}]", lambda i=i: model.blocks[i], hint="make the test of Block pass first")
              for i in range(layers)]

    def run(i):
        return lambda x: attempt(f"{what}.blocks[{i}](x)", blocks[i], x, hint="make the test of Block pass first")

    gen = torch.Generator().manual_seed(width)
    probes = [torch.randn(1, 3, width, generator=gen).to(dtype) for _ in range(2)]
    for i in range(layers):
        first, second = (run(i)(h) for h in probes)
        check_true(bool(torch.isfinite(first).all() and torch.isfinite(second).all()),
                   f"{what}.blocks[{i}] gives NaN or infinite values, so no model built on it can be judged: make the "
                   "tests of MultiHeadSelfAttention and Block pass first")
        check_true(not torch.allclose(first, second), f"{what}.blocks[{i}] gives two different inputs the same "
                   "answer, so no model built on it can be judged: make the test of Block pass first")
    return [run(i) for i in range(layers)]


def judge_pre_norm(what, out, x, attention, ffn, norm1, norm2):
    """`out` against h = x + attention(norm1(x)), then h + ffn(norm2(h)), the sublayers and norms given as functions
    (chapter 10's block, chapter 11's), naming the usual wiring mistakes."""
    with torch.no_grad():
        h = x + attention(norm1(x))
        expected = h + ffn(norm2(h))
        post = norm1(x + attention(x))
        causes = {
            "the norms come after the sublayers (post-norm, norm(x + sublayer(x))); this block is pre-norm, "
            "x + sublayer(norm(x))": norm2(post + ffn(post)),
            "the FFN's output replaces the stream instead of being added to it (a residual is missing)": ffn(norm2(h)),
            "the attention's output replaces the stream instead of being added to it (a residual is missing)":
                attention(norm1(x)) + ffn(norm2(attention(norm1(x)))),
            "the FFN reads norm2(x) of the block's input instead of the stream after the attention":
                h + ffn(norm2(x)),
            "norm1 and norm2 are swapped": (lambda g: g + ffn(norm1(g)))(x + attention(norm2(x))),
            "the FFN reads norm1(h) instead of norm2(h): norm1 is used for both sublayers and norm2 never":
                h + ffn(norm1(h)),
        }
    check_close(what, out, expected, atol=1e-4, likely_causes=causes,
                hint="h = x + attention(norm1(x)), then out = h + ffn(norm2(h))")


def _judge_block(what, block, out, x, state):
    """The block's output against x + attention(norm1(x)), then + ffn(norm2(.)), with the block's own attention and
    FFN (whatever they compute: Part B judges them) and the norms' parameters `state`."""
    attention, ffn = own_sublayers(what, block, x.shape[-1])
    judge_pre_norm(what, out, x, attention, ffn, _layer_norm(state, "norm1"), _layer_norm(state, "norm2"))


def compare_block(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """check_block_outputs, then the block's output against its own sublayers wired as Part C says: with the test's
    parameters, then with those the block was built with."""
    block, x, out = check_block_outputs(Block, batch, length, width, heads, seed)
    what = f"Block({width}, {heads}, {length + 2})"
    _judge_block(f"{what}(x)", block, out, x, block_state(width, seed))
    torch.manual_seed(seed)
    built, state = _as_built(what, Block, width, heads, length + 2)
    _judge_block(f"{what}(x), with the parameters it was built with", built, attempt(f"{what}(x)", built, x), x, state)


# ---------------------------------------------------------------- Part D: the model, around its own blocks


def _judge_logits(what, model, logits, idx, state, layers):
    """The logits against embeddings + positions, the model's own blocks in order, the final norm and the head."""
    dtype = read_state(model)["head.weight"].dtype  # a model kept in float64 is judged in float64
    state = {k: v.to(dtype) for k, v in state.items()}
    tokens, positions = state["token_embedding.weight"], state["position_embedding.weight"]
    head, norm = _linear(state, "head"), _layer_norm(state, "norm")
    blocks = own_blocks(what, model, layers, tokens.shape[1], dtype)

    def stack(x):
        for block in blocks:
            x = block(x.to(dtype))
        return x

    with torch.no_grad():
        length = idx.shape[1]
        x = stack(tokens[idx] + positions[:length])
        expected = head(norm(x))
        causes = {"the position embeddings are not added": head(norm(stack(tokens[idx]))),
                  "the final norm is missing (the head must read norm(x))": head(x),
                  "the blocks are skipped": head(norm(tokens[idx] + positions[:length]))}
    check_close(f"the logits of {what}", logits, expected, atol=1e-4, likely_causes=causes,
                hint="token_embedding(idx) + position_embedding(0..T-1), every block in order, norm, then head")


def compare_logits(GPT, vocab, width, heads, layers, max_len, batch, length, seed):  # noqa: N803
    """check_model_outputs, then the logits against the model's own blocks wired as Part D says: with the test's
    parameters, then with those the model was built with."""
    model, logits, idx = check_model_outputs(GPT, vocab, width, heads, layers, max_len, batch, length, seed)
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {max_len})"
    _judge_logits(what, model, logits, idx, gpt_state(vocab, width, layers, max_len, seed), layers)
    torch.manual_seed(seed)
    built, state = _as_built(what, GPT, vocab, width, heads, layers, max_len)
    out = attempt(f"{what}(idx), with the parameters it was built with", built, idx)
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx) must return the pair (logits, loss)")
    _judge_logits(f"{what}, with the parameters it was built with", built, out[0], idx, state, layers)


def compare_loss(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """check_loss_outputs, then the loss against the mean cross-entropy of the model's own logits and the targets
    as given (whatever the logits are: the logits' test judges them)."""
    logits, loss, idx, targets = check_loss_outputs(GPT, vocab, width, layers, batch, length, seed)
    what = f"GPT({vocab}, {width}, 2, {layers}, {length})"
    with torch.no_grad():
        logits = logits.double()
        picked = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (B, T): log p(target)
        causes = {
            "the loss is summed over the positions instead of averaged": -picked.sum(),
            "the targets are shifted again inside forward (lm_batch already shifted them: score position t "
            "against targets[:, t])": -logits[:, :-1].log_softmax(-1).gather(-1, targets[:, 1:, None]).mean(),
            "the loss scores each position against its input instead of its target":
                -logits.log_softmax(-1).gather(-1, idx[..., None]).mean(),
            "the loss is in bits (log base 2): F.cross_entropy uses the natural log": -picked.mean() / math.log(2),
            "F.cross_entropy is given the probabilities after a softmax: it takes the logits and applies its own "
            "log-softmax, so the softmax is taken twice": -logits.softmax(-1).log_softmax(-1).gather(
                -1, targets[..., None]).mean(),
        }
    check_close(f"the loss of {what}", loss, -picked.mean(), atol=1e-4, likely_causes=causes,
                hint="F.cross_entropy(logits.reshape(B * T, vocab), targets.reshape(B * T)), the mean over all positions")


# ---------------------------------------------------------------- Part E: the training step


class ReferenceBigramLM(nn.Module):
    """The notebook's BigramLM, on the grader's side."""

    def __init__(self, state):
        super().__init__()
        vocab, width = state["token_embedding.weight"].shape
        self.token_embedding, self.head = nn.Embedding(vocab, width), nn.Linear(width, vocab)
        self.load_state_dict(state)

    def forward(self, idx, targets):
        logits = self.head(self.token_embedding(idx))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def reference_steps(state, batches, lr, decay, max_grad_norm, mistake=None):
    """[(the loss train_step returns, the parameters after it)] for each batch, taken by the book or with `mistake`."""
    model = ReferenceBigramLM(state)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: decay ** step)
    out = []
    for inputs, targets in batches:
        if mistake == "schedule_first":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # PyTorch's warning about this very mistake
                scheduler.step()
        _, loss = model(inputs, targets)
        if mistake != "no_zero_grad":
            optimizer.zero_grad()
        loss.backward()
        if mistake not in ("no_clip", "clip_after_step"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if mistake not in ("no_schedule", "schedule_first"):
            scheduler.step()
        returned = loss.item()
        if mistake == "loss_after":
            with torch.no_grad():
                returned = model(inputs, targets)[1].item()
        out.append((returned, {k: v.detach().clone() for k, v in model.state_dict().items()}))
    return out


STEP_MISTAKES = {
    "no_clip": "the gradients are not clipped (clip_grad_norm_ between backward and optimizer.step())",
    "clip_after_step": "the gradients are clipped after optimizer.step(), when the step has already used them",
    "no_zero_grad": "the gradients are never cleared: each step adds to the last one's (optimizer.zero_grad())",
    "no_schedule": "the schedule is never stepped: the learning rate stays where it started (scheduler.step())",
    "schedule_first": "the schedule is stepped before the optimiser: each step uses the next step's learning rate",
    "loss_after": "the loss returned is computed after the update: return the loss the step was taken on",
}


def compare_train_step(train_step, training_setup, vocab, width, seed, max_grad_norm, lr=0.05, decay=0.5):
    """Three steps of train_step on the kernel's BigramLM, AdamW and schedule, each compared (the loss it returns and
    the parameters after it) with the same steps taken by the book from the parameters the model started with."""
    model, optimizer, scheduler = training_setup(vocab, width, seed, lr, decay)
    state = {name: value for name, value in read_state(model).items()}
    batches = training_batches(vocab, 3, seed + 7)
    right = reference_steps(state, batches, lr, decay, max_grad_norm)
    candidates = {m: reference_steps(state, batches, lr, decay, max_grad_norm, m) for m in STEP_MISTAKES}
    for step, (inputs, targets) in enumerate(batches):
        call = f"train_step at step {step} (max_grad_norm={max_grad_norm:g})"
        loss = attempt(call, train_step, model, optimizer, scheduler, inputs, targets, max_grad_norm,
                       hint="loss, zero_grad, backward, clip, optimizer.step(), scheduler.step(), return loss.item()")
        check_true(type(loss) is float, f"{call} returned a {type(loss).__name__}: return the loss as a Python float, "
                   "loss.item()")
        after = read_state(model)
        want_loss, want = right[step]
        if math.isclose(loss, want_loss, rel_tol=1e-5, abs_tol=1e-6) and all(
                torch.allclose(after[k].double(), want[k].double(), atol=1e-5) for k in want):
            continue
        for mistake, steps in candidates.items():
            got_loss, got = steps[step]
            if math.isclose(loss, got_loss, rel_tol=1e-5, abs_tol=1e-6) and all(
                    torch.allclose(after[k].double(), got[k].double(), atol=1e-5) for k in got):
                check_true(False, f"{call} is off: it matches what you get when {STEP_MISTAKES[mistake]}")
        check_true(math.isclose(loss, want_loss, rel_tol=1e-5, abs_tol=1e-6), f"{call} returned a loss that is not "
                   "the model's loss on (inputs, targets) before the step")
        check_true(False, f"{call}: the parameters after the step are not those of one AdamW step on the clipped "
                   "gradients of this batch's loss: loss, optimizer.zero_grad(), loss.backward(), "
                   "clip_grad_norm_(model.parameters(), max_grad_norm), optimizer.step(), scheduler.step()")


# ---------------------------------------------------------------- Part F: sampling (Hugging Face's processors' order)


def reference_probs(logits, temperature=1.0, top_k=None, top_p=None, order=("temperature", "top_k", "top_p"),
                    sorted_mask=False):
    """The rules of Part F, one row at a time in float64 NumPy, as Hugging Face's logits processors apply them
    (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper): (B, V) -> (B, V). `order` and `sorted_mask`
    give known mistakes: the knobs in another order, the top-p mask applied in sorted order."""
    rows = []
    for row in logits.double().numpy():
        row = row.copy()
        if not np.isfinite(row).any():  # a candidate mistake may drop everything: no row to compare with
            rows.append(np.full_like(row, np.nan))
            continue
        for knob in order:
            if knob == "temperature":
                row = row / temperature
            elif knob == "top_k" and top_k is not None:
                row = np.where(row >= np.sort(row)[::-1][min(top_k, len(row)) - 1], row, -np.inf)
            elif knob == "top_p" and top_p is not None:
                p = np.exp(row - row.max())
                p /= p.sum()
                before = np.array([p[p > value].sum() for value in p])  # mass of the strictly more probable
                keep = before < top_p
                if sorted_mask:  # the kept count, applied to the first positions of the row as it is
                    keep = np.arange(len(row)) < keep.sum()
                row = np.where(keep, row, -np.inf)
        if not np.isfinite(row).any():  # the mistake kept no candidate: no distribution (NaN, never a match)
            rows.append(np.full_like(row, np.nan))
            continue
        p = np.exp(row - row.max())
        rows.append(p / p.sum())
    return torch.tensor(np.array(rows))


def _probs(next_token_probs, logits, case, **knobs):
    settings = ", ".join(f"{k}={v}" for k, v in knobs.items())
    call = f"next_token_probs(logits, {settings}) {case}"
    probs = attempt(call, next_token_probs, logits, **knobs,
                    hint="with top_k at or above the vocabulary size every character is kept")
    check_shape(call, probs, tuple(logits.shape), hint="one probability per character, (B, vocab)")
    return call, probs


def check_temperature(next_token_probs):
    """Temperatures above and below 1, and one near 0, against the reference."""
    gen = torch.Generator().manual_seed(61)
    for temperature in (0.5, 2.0, 0.7, 1.3):
        logits = 2 * torch.randn(5, 12, generator=gen, dtype=torch.float64)
        call, probs = _probs(next_token_probs, logits, "on random logits", temperature=temperature)
        check_close(call, probs, reference_probs(logits, temperature), atol=1e-9, likely_causes={
            "the temperature is ignored": reference_probs(logits),
            "the probabilities are divided by the temperature after the softmax (divide the logits before it)":
                reference_probs(logits) / temperature,
            "the logits are multiplied by the temperature instead of divided": reference_probs(logits * temperature ** 2,
                                                                                               temperature),
        }, hint="softmax(logits / temperature) along the vocabulary axis")
    logits = torch.tensor([[0.3, 1.2, -0.4, 1.1], [5.0, 4.0, 4.5, -2.0]], dtype=torch.float64)
    call, cold = _probs(next_token_probs, logits, "", temperature=1e-3)
    check_close(call, cold, reference_probs(logits, 1e-3), atol=1e-12,
                hint="near temperature 0 all the probability goes to the largest logit: divide the logits by the "
                     "temperature before a stable softmax")


def _kept(call, probs, expected, too_many, too_few):
    kept, should = (probs > 0).sum(-1), (expected > 0).sum(-1)
    check_true(not bool((kept > should).any()), f"{call} keeps too many characters: {too_many}")
    check_true(not bool((kept < should).any()), f"{call} keeps too few characters: {too_few}")


def check_top_k(next_token_probs):
    """Random logits, ties at the k-th largest, k = 1, k at and above the vocabulary size."""
    gen = torch.Generator().manual_seed(62)
    cases = [(torch.randn(4, 10, generator=gen, dtype=torch.float64), 3, "on random logits"),
             (torch.tensor([[1.0, 2.0, 2.0, 0.5, 2.0, -1.0], [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]], dtype=torch.float64), 2,
              "with ties at the k-th largest"),
             (torch.randn(3, 7, generator=gen, dtype=torch.float64), 1, "with k = 1"),
             (torch.randn(2, 6, generator=gen, dtype=torch.float64), 6, "with k equal to the vocabulary size"),
             (torch.randn(2, 6, generator=gen, dtype=torch.float64), 50, "with k above the vocabulary size")]
    for logits, top_k, case in cases:
        call, probs = _probs(next_token_probs, logits, case, top_k=top_k)
        expected = reference_probs(logits, top_k=top_k)
        _kept(call, probs, expected, "only those whose logit is at least the k-th largest are kept (k + 1 of them?)",
              "a character tied with the k-th is kept too, and top_k at or above the vocabulary size keeps every "
              "character")
        check_close(call, probs, expected, atol=1e-9, hint="set the logits below the k-th largest to -inf, then softmax")


SORTED_MASK = ("the top-p mask is applied in sorted order to the probabilities in the vocabulary's order: scatter "
               "it back to the vocabulary's order (or mask the sorted probabilities and scatter them back)")


def check_top_p(next_token_probs):
    """p reached exactly, the first character alone reaching p, random rows, p = 1."""
    gen = torch.Generator().manual_seed(63)
    cases = [(torch.tensor([[2.0, 1.0, 0.0, 0.0]], dtype=torch.float64) * math.log(2), 0.75, "when p is reached exactly"),
             (torch.tensor([[0.0, 1.0, 2.0, 3.0, 0.5]], dtype=torch.float64) * math.log(2), 0.5,
              "when the most probable character alone reaches p exactly")]
    cases += [(2 * torch.randn(6, 15, generator=gen, dtype=torch.float64), p, "on random logits") for p in (0.3, 0.9, 0.55)]
    cases.append((torch.randn(2, 8, generator=gen, dtype=torch.float64), 1.0, "with p = 1"))
    for logits, top_p, case in cases:
        call, probs = _probs(next_token_probs, logits, case, top_p=top_p)
        expected = reference_probs(logits, top_p=top_p)
        sorted_probs = expected.sort(dim=-1, descending=True).values
        causes = {SORTED_MASK: reference_probs(logits, top_p=top_p, sorted_mask=True),
                  "the probabilities are returned in sorted order, not in the vocabulary's order": sorted_probs}
        _kept(call, probs, expected, "once the kept characters total p or more, the next one is dropped",
              "the character that crosses p, or reaches it exactly, is kept (the characters before it total less "
              "than p)")
        check_close(call, probs, expected, atol=1e-9, likely_causes=causes,
                    hint="set the dropped probabilities to 0, then divide by the kept total so each row sums to 1")


def check_combined(next_token_probs):
    """Temperature, top-k and top-p together, against the reference in the text's order; the known other orders named."""
    gen = torch.Generator().manual_seed(64)
    cases = [(torch.tensor([[3.0, 2.0, 1.2, 0.8, -1.0]], dtype=torch.float64), 2.0, 4, 0.8),
             (torch.tensor([[3.0, 2.5, 2.0, 0.0, -1.0, -1.5]], dtype=torch.float64), 0.5, 5, 0.9)]
    cases += [(2 * torch.randn(6, 16, generator=gen, dtype=torch.float64), t, k, p)
              for t, k, p in ((0.5, 8, 0.8), (1.7, 5, 0.6), (0.8, 12, 0.95))]
    for logits, temperature, top_k, top_p in cases:
        knobs = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
        call, probs = _probs(next_token_probs, logits, "", **knobs)
        causes = {
            "top-p is applied before top-k: top-k comes first, and top-p measures what it left":
                reference_probs(logits, **knobs, order=("temperature", "top_p", "top_k")),
            "the nucleus is chosen before the temperature is applied: divide the logits by the temperature first":
                reference_probs(logits, **knobs, order=("top_k", "top_p", "temperature")),
            "top-k is applied before the temperature and the nucleus after it is chosen on the raw logits":
                reference_probs(logits, **knobs, order=("top_p", "top_k", "temperature")),
            "top-p measures the probabilities before top-k removed any (softmax of all the logits), not those it left":
                reference_probs(logits, **knobs, order=("temperature", "top_p", "top_k")),
            SORTED_MASK: reference_probs(logits, **knobs, sorted_mask=True),
        }
        check_close(call, probs, reference_probs(logits, **knobs), atol=1e-9, likely_causes=causes,
                    hint="in this order: divide by the temperature, keep the logits at least the k-th largest, softmax, "
                         "then the nucleus of what is left, renormalised")


def check_sampling(sample_next):
    """Draws on rows of random probabilities: not an argmax, exactly torch.multinomial's draws with the generator."""
    for seed in (64, 65, 66):
        gen = torch.Generator().manual_seed(seed)
        probs = torch.softmax(0.5 * torch.randn(50, 20, generator=gen), dim=-1)
        own = torch.Generator().set_state(gen.get_state())  # the test's copy: your call may advance the other
        draws = attempt("sample_next(probs, generator)", sample_next, probs, gen,
                        hint="torch.multinomial(probs, 1, generator=generator)")
        check_shape("sample_next(probs, generator)", draws, (50, 1), hint="one draw per row, as a column (B, 1)")
        check_true(not torch.equal(draws.long()[:, 0], probs.argmax(-1)), "sample_next always picks the most probable "
                   "character (an argmax, greedy decoding): draw at random, in proportion to the probabilities, with "
                   "torch.multinomial(probs, 1, generator=generator)")
        check_true(torch.equal(draws, torch.multinomial(probs, 1, generator=own)), "sample_next does not draw what the "
                   "generator it is given draws: pass generator=generator to torch.multinomial (the global random "
                   "state would make the text impossible to reproduce), one draw per row, once")


# ---------------------------------------------------------------- Part G: the cached step and generate, on the grader's model


STEP_HINT = ("embed the new character at its position, the number of characters already cached; then norm1, qkv, "
             "append K and V, attend over the whole cache, proj and residual, then the FFN sublayer, in every block; "
             "then norm and head")
KEPT_HINT = ("a cache holds, per block, the keys and values the block's qkv gives for the characters so far "
             "(norm1 of the stream, split into heads): append the new character's own key and value, nothing else")


def check_caches_hold(caches, expected, after=None, returned_by=None):
    """Every cached K and V compared with the reference's keys and values of the same text: the caches kept ``after``
    so many characters, or those ``returned_by`` a call (each name a whole sentence, for the catalogs)."""
    for index, (pair, (keys, values)) in enumerate(zip(caches, expected, strict=True)):
        if returned_by is None:
            names = (f"the cached K of block {index} after {after} characters",
                     f"the cached V of block {index} after {after} characters")
        else:
            names = (f"the cached K of block {index} returned by {returned_by}",
                     f"the cached V of block {index} returned by {returned_by}")
        check_close(names[0], pair[0], keys, atol=1e-4, hint=KEPT_HINT)
        check_close(names[1], pair[1], values, atol=1e-4, hint=KEPT_HINT)


def _step_by_hand(model, idx, position, causal_one_query=False, residual=True, scale=None):
    """The logits of the last character of idx (B, T) computed one step at a time with a known mistake."""
    caches, logits = None, None
    for t in range(idx.shape[1]):
        x = model.token_embedding(idx[:, t:t + 1]) + model.position_embedding(torch.tensor([position(t)]))
        grown = []
        for index, block in enumerate(model.blocks):
            q, k, v = split_qkv(block.attention.qkv(block.norm1(x)), block.attention.n_heads)
            if caches is not None:
                k, v = torch.cat([caches[index][0], k], 2), torch.cat([caches[index][1], v], 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal_one_query, scale=scale)
            attended = block.attention.proj(y.transpose(1, 2).reshape(x.shape))
            x = x + attended if residual else attended
            x = x + block.ffn(block.norm2(x))
            grown.append((k, v))
        caches, logits = grown, model.head(model.norm(x))[:, -1]
    return logits


def cached_step_agrees(cached_step, vocab, width, heads, layers, batch, length, seed):
    """cached_step on the grader's model (by the names of Part D): the logits of every step and every cached K and V
    compared with the model's own; then it is handed caches it did not make (the model's, of a prefix of the text and
    of another text) and must continue them."""
    state = gpt_state(vocab, width, layers, length, seed, scale=0.2)
    reference = ReferenceGPT(state, vocab, width, heads, layers, length)
    model = fresh(ReferenceGPT, state, vocab, width, heads, layers, length)  # the grader's model, lent to your step
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    other = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed + 1))
    steps, kept = cached_steps(cached_step, model, idx, vocab, layers, heads, width // heads)
    handed = []
    with torch.no_grad():
        expected = reference(idx)[0]  # (B, T, vocab)
        prefixes = [idx[:, :t + 1] for t in range(length)]
        causes = {
            "every new character is embedded at position 0 (its position is the number of characters already "
            "cached)": [_step_by_hand(reference, p, lambda t: 0) for p in prefixes],
            "every new character after the first is embedded at position n_heads: the number of characters already "
            "cached is K.shape[2] (its axes are batch, head, position, feature), not K.shape[1]":
                [_step_by_hand(reference, p, lambda t: heads if t else 0) for p in prefixes],
            "the one new query is given is_causal=True: with one query and many keys PyTorch's causal mask keeps only "
            "the first key (it is aligned top-left); the new query may see the whole cache, so no mask":
                [_step_by_hand(reference, p, lambda t: t, causal_one_query=True) for p in prefixes],
            "the attention's output replaces the stream (the residual around the attention is missing)":
                [_step_by_hand(reference, p, lambda t: t, residual=False) for p in prefixes],
            "the scores are not divided by sqrt(d_head)":
                [_step_by_hand(reference, p, lambda t: t, scale=1.0) for p in prefixes],
        }
        kept_expected = [reference.caches(p) for p in prefixes]
        for where, text in (("the test's caches of its first characters", idx), ("the caches of another text", other)):
            for count in sorted({1, length // 2, length - 1} - {0}):
                extended = torch.cat([text[:, :count], idx[:, count:count + 1]], dim=1)
                handed.append((f"cached_step handed {where} ({count} characters)", count, extended[:, -1:].clone(),
                               reference.caches(text[:, :count]), reference(extended)[0][:, -1],
                               reference.caches(extended)))
    check_close(f"the logits of cached_step, step by step ({length} characters)", torch.stack(steps, dim=1), expected,
                atol=1e-4, likely_causes={cause: torch.stack(value, dim=1) for cause, value in causes.items()},
                hint=STEP_HINT)
    for t, (caches, want_caches) in enumerate(zip(kept, kept_expected, strict=True)):
        check_caches_hold(caches, want_caches, after=t + 1)
    for call, count, token, given, want, want_caches in handed:
        result = attempt(call, cached_step, model, token, given, hint=CACHE_HINT)
        check_true(isinstance(result, (list, tuple)) and len(result) == 2, "cached_step must return (logits, caches)")
        logits, caches = result
        check_cache_shapes(caches, layers, batch, heads, count + 1, width // heads)
        check_close(f"the logits of {call}", logits, want, atol=1e-4,
                    hint="a step must continue the cache it is given: attend over its K and V as they are (they are "
                         f"the keys and values of the characters before), at position {count}")
        check_caches_hold(caches, want_caches, returned_by=call)


def reference_generate(model, prompt, n_new, generator, temperature=1.0, top_k=None, top_p=None):
    """The text Part G's generate writes: the whole text (cut to the context) through the model for each character,
    the reference's probabilities, one torch.multinomial draw per character."""
    idx, context = prompt, model.position_embedding.num_embeddings
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(idx[:, -context:])[0][:, -1]
            probs = reference_probs(logits, temperature, top_k, top_p).to(logits.dtype)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return idx


def compare_generate(generate, vocab, width, heads, layers, max_len, seed):
    """generate on the grader's model, with and without the cache, against the reference text from the same
    generator; inside the context and past it, with the knobs combined. (Nothing is judged around your own
    cached_step or sampler: that would mean calling them again after generate, and two functions that keep state
    between calls could then agree on any text. A mistake of the step costs generate's cached half too, in the same
    Part G; a sampler's mistake is declared in the zoo.)"""
    state = gpt_state(vocab, width, layers, max_len, seed, scale=0.5)
    reference = ReferenceGPT(state, vocab, width, heads, layers, max_len)
    model = fresh(ReferenceGPT, state, vocab, width, heads, layers, max_len)
    prompt = torch.randint(vocab, (3, 2), generator=torch.Generator().manual_seed(seed))
    for n_new, knobs in ((max_len - 3, {"temperature": 1.5}), (max_len + 3, {"temperature": 0.8, "top_k": 6,
                                                                             "top_p": 0.9})):
        expected = reference_generate(reference, prompt, n_new, torch.Generator().manual_seed(seed), **knobs)
        for use_cache in (False, True):
            settings = ", ".join(f"{k}={v}" for k, v in {**knobs, "use_cache": use_cache}.items())
            call = f"generate(model, prompt (3, 2), {n_new}, generator, {settings})"
            text = attempt(call, generate, model, prompt, n_new, torch.Generator().manual_seed(seed), **knobs,
                           use_cache=use_cache, hint="the prompt, then n_new characters, each drawn once with "
                                                     "sample_next from next_token_probs of the last logits")
            check_shape(call, text, tuple(expected.shape), hint="the prompt followed by the n_new characters drawn")
            check_true(torch.equal(text[:, :2], prompt), f"{call} does not start with the prompt")
            past = " (past the context the window slides: the last max_len characters, as without the cache)" \
                if n_new + 2 > max_len else ""
            check_true(torch.equal(text, expected), f"{call} writes other characters than the model's next-token "
                       "distribution drawn with the generator gives: for each new character, next_token_probs of the "
                       "logits of the last position with the knobs given, then one sample_next(probs, generator); "
                       "with the cache, the prompt through cached_step first" + past +
                       " (if Part F's or the cached step's tests fail, they come first)")
