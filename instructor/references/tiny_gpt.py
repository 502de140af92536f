"""Chapter 10's references (the grader's side only): PyTorch's own layers holding a block's or a GPT's
parameters, the keys and values a cache must hold, and the hidden tests' comparisons with them.

The property checks come first, from `course/tiny_gpt_checks.py` (the visible tests' own), so code that
breaks a property fails with that property's message; then every output is compared with the references.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from nboracle import module_tensors
from torch import nn

from course.checks import attempt, check_close, check_true
from course.tiny_gpt_checks import (
    CACHE_HINT,
    block_state,
    check_block_outputs,
    check_cache_shapes,
    check_cached_steps_outputs,
    check_loss_outputs,
    check_model_outputs,
    future_mask,
    gpt_state,
)


def reference_block(state, width, heads):
    """nn.TransformerEncoderLayer, pre-norm, ReLU FFN of 4 * width, holding a Block's parameters `state`."""
    layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=True)
    renames = (("attention.qkv.weight", "self_attn.in_proj_weight"), ("attention.qkv.bias", "self_attn.in_proj_bias"),
               ("attention.proj.", "self_attn.out_proj."), ("ffn.", ""))
    renamed = {}
    for key, value in state.items():
        for ours, theirs in renames:
            key = theirs + key[len(ours):] if key.startswith(ours) else key
        renamed[key] = value
    layer.load_state_dict(renamed)
    return layer.train()  # dropout is 0; train mode keeps PyTorch on its plain code path


class ReferenceGPT(nn.Module):
    """PyTorch's own layers holding a GPT's parameters: embeddings + positions, causal pre-norm layers, norm, head."""

    def __init__(self, state, vocab, width, heads, layers, max_len):
        super().__init__()
        self.heads = heads
        self.token_embedding, self.position_embedding = nn.Embedding(vocab, width), nn.Embedding(max_len, width)
        self.layers = nn.ModuleList(
            reference_block({k[len(f"blocks.{i}."):]: v for k, v in state.items() if k.startswith(f"blocks.{i}.")},
                            width, heads) for i in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)
        ours = {k: v for k, v in state.items() if not k.startswith("blocks.")}
        self.load_state_dict({**ours, **{k: v for k, v in self.state_dict().items() if k.startswith("layers.")}})

    def forward(self, idx, positions=None):  # (B, T) -> (B, T, vocab)
        positions = torch.arange(idx.shape[1]) if positions is None else positions
        x = self.token_embedding(idx) + self.position_embedding(positions)  # (B, T, D)
        for layer in self.layers:
            x = layer(x, src_mask=future_mask(idx.shape[1]))
        return self.head(self.norm(x))

    def caches(self, idx):
        """The (K, V) of every layer for the text idx (B, T): each (B, H, T, d_head), what a cache holds after it."""
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(idx.shape[1]))
        (batch, length, width), caches = x.shape, []
        for layer in self.layers:
            qkv = F.linear(layer.norm1(x), layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias)
            _, keys, values = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
                               for t in qkv.split(width, dim=-1))
            caches.append((keys, values))
            x = layer(x, src_mask=future_mask(length))
        return caches


def compare_block(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """check_block_outputs, then Block's output compared with nn.TransformerEncoderLayer(norm_first=True), causal mask."""
    out = check_block_outputs(Block, batch, length, width, heads, seed)[2]
    what = f"Block({width}, {heads}, {length + 2})"
    x = torch.randn(batch, length, width, generator=torch.Generator().manual_seed(seed))  # the test's x, drawn again
    layer = reference_block(block_state(width, seed), width, heads)
    mask = future_mask(length)
    with torch.no_grad():
        expected = layer(x, src_mask=mask)

        def attend(h):
            return layer.self_attn(h, h, h, attn_mask=mask, need_weights=False)[0]

        post = layer.norm1(x + attend(x))
        post_norm = layer.norm2(post + layer.linear2(torch.relu(layer.linear1(post))))
        h = x + attend(layer.norm1(x))
        no_residual = layer.linear2(torch.relu(layer.linear1(layer.norm2(h))))
        ffn_reads_x = h + layer.linear2(torch.relu(layer.linear1(layer.norm2(x))))
    check_close(f"{what}(x)", out, expected, atol=1e-4, likely_causes={
        "the norms come after the sublayers (post-norm, norm(x + sublayer(x))); this block is pre-norm, "
        "x + sublayer(norm(x))": post_norm,
        "the FFN's output replaces the stream instead of being added to it (a residual is missing)": no_residual,
        "the FFN reads norm2(x) of the block's input instead of the stream after the attention": ffn_reads_x,
    }, hint="h = x + attention(norm1(x)), then out = h + ffn(norm2(h))")


def compare_logits(GPT, vocab, width, heads, layers, max_len, batch, length, seed):  # noqa: N803
    """check_model_outputs, then GPT's logits compared with ReferenceGPT's, holding the same parameters."""
    logits = check_model_outputs(GPT, vocab, width, heads, layers, max_len, batch, length, seed)[0]
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))  # the test's, drawn again
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {max_len})"
    reference = ReferenceGPT(gpt_state(vocab, width, layers, max_len, seed), vocab, width, heads, layers, max_len)
    with torch.no_grad():
        expected = reference(idx)
        x = reference.token_embedding(idx) + reference.position_embedding(torch.arange(length))
        for layer in reference.layers:
            x = layer(x, src_mask=future_mask(length))
        no_final_norm = reference.head(x)
        reference.position_embedding.weight.zero_()
        no_positions = reference(idx)
    check_close(f"the logits of {what}", logits, expected, atol=1e-4, likely_causes={
        "the position embeddings are not added": no_positions,
        "the final norm is missing (the head must read norm(x))": no_final_norm,
    }, hint="token_embedding(idx) + position_embedding(0..T-1), every block in order, norm, then head")


def compare_loss(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """check_loss_outputs, then the loss compared with the mean cross-entropy of ReferenceGPT's logits."""
    loss = check_loss_outputs(GPT, vocab, width, layers, batch, length, seed)[0]
    what = f"GPT({vocab}, {width}, 2, {layers}, {length})"
    gen = torch.Generator().manual_seed(seed)  # the test's idx and targets, drawn again
    idx, targets = torch.randint(vocab, (batch, length), generator=gen), torch.randint(vocab, (batch, length), generator=gen)
    state = gpt_state(vocab, width, layers, length, seed, scale=0.2)
    with torch.no_grad():
        logits = ReferenceGPT(state, vocab, width, 2, layers, length)(idx)  # (B, T, vocab)
        picked = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (B, T): log p(target)
    check_close(f"the loss of {what}", loss, -picked.mean(), atol=1e-4, likely_causes={
        "the loss is summed over the positions instead of averaged": -picked.sum(),
        "the loss scores each position against its input instead of its target":
            -logits.log_softmax(-1).gather(-1, idx[..., None]).mean(),
    }, hint="F.cross_entropy(logits.reshape(B * T, vocab), targets.reshape(B * T)), the mean over all positions")


STEP_HINT = ("norm1, qkv, append K and V, attend over the whole cache, proj and residual, then the FFN sublayer, in "
             "every block; then norm and head")
KEPT_HINT = ("a cache holds, per block, the keys and values the block's qkv gives for the characters so far "
             "(norm1 of the stream, split into heads): append the new character's own key and value, nothing else")


def check_caches_hold(what, caches, expected):
    """Every cached K and V compared with the reference's keys and values of the same text."""
    for index, (pair, (keys, values)) in enumerate(zip(caches, expected, strict=True)):
        check_close(f"block {index}'s cached K {what}", pair[0], keys, atol=1e-4, hint=KEPT_HINT)
        check_close(f"block {index}'s cached V {what}", pair[1], values, atol=1e-4, hint=KEPT_HINT)


def cached_step_agrees(GPT, cached_step, vocab, width, heads, layers, batch, length, seed):  # noqa: N803
    """check_cached_steps_outputs, then: the model's own forward, the logits of every step and every cached K and V
    compared with ReferenceGPT's; then cached_step is handed caches it did not make (the reference's, of a
    prefix of the text and of another text) and must continue them."""
    model, _, steps, kept = check_cached_steps_outputs(GPT, cached_step, vocab, width, heads, layers, batch, length, seed)
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {length})"
    reference = ReferenceGPT(gpt_state(vocab, width, layers, length, seed, scale=0.2), vocab, width, heads, layers,
                             length)
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))  # the test's, again
    other = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed + 1))
    handed = []  # caches the step did not make: the reference's, of a prefix of this text and of another text
    with torch.no_grad():
        expected = reference(idx)  # (B, T, vocab)
        from_zero = torch.stack([reference(idx[:, :t + 1], torch.zeros(t + 1, dtype=torch.long))[:, -1]
                                 for t in range(length)], dim=1)
        kept_expected = [reference.caches(idx[:, :t + 1]) for t in range(length)]
        for where, text in (("the test's caches of its first characters", idx), ("the caches of another text", other)):
            for count in sorted({1, length // 2, length - 1} - {0}):
                extended = torch.cat([text[:, :count], idx[:, count:count + 1]], dim=1)
                handed.append((f"cached_step handed {where} ({count} characters)", count, extended[:, -1:].clone(),
                               reference.caches(text[:, :count]), reference(extended)[:, -1], reference.caches(extended)))
    own = attempt(f"{what}(idx)", model, idx.clone())[0]
    check_close(f"{what}(idx)", own, expected, atol=1e-4,
                hint="the model of Part C is not right yet: make the tests of Part C pass first")
    check_close(f"the logits of cached_step, step by step ({length} characters)", torch.stack(steps, dim=1), expected,
                atol=1e-4, likely_causes={
                    "every new character is embedded at position 0 (its position is the number of characters "
                    "already cached)": from_zero,
                }, hint=STEP_HINT)
    for t, (caches, want_caches) in enumerate(zip(kept, kept_expected, strict=True)):
        check_caches_hold(f"after {t + 1} characters", caches, want_caches)
    held = {row["name"]: row["dtype"] for row in module_tensors(model)}  # a model kept in float64 gets float64
    dtype = getattr(torch, str(held.get("head.weight")), None)
    for call, count, token, given, want, want_caches in handed:
        if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
            given = [(keys.to(dtype), values.to(dtype)) for keys, values in given]
        result = attempt(call, cached_step, model, token, given, hint=CACHE_HINT)
        check_true(isinstance(result, (list, tuple)) and len(result) == 2, "cached_step must return (logits, caches)")
        logits, caches = result
        check_cache_shapes(caches, layers, batch, heads, count + 1, width // heads)
        check_close(f"the logits of {call}", logits, want, atol=1e-4,
                    hint="a step must continue the cache it is given: attend over its K and V as they are (they are "
                         f"the keys and values of the characters before), at position {count}")
        check_caches_hold(f"returned by {call}", caches, want_caches)
