"""The checks of chapter 10 (a small GPT), which its graded test cells call.

The tests choose every parameter: `block_state` and `gpt_state` draw the parameters of a block or
a model by the names the exercises give, and `load_state` loads them into yours, so no result
depends on how or in which order you create the submodules. What your code computes with them is
compared with PyTorch's own layers holding the same parameters: `reference_block` is an
`nn.TransformerEncoderLayer(norm_first=True)` with a causal mask, and `ReferenceGPT` is built from
it, `nn.Embedding`, `nn.LayerNorm` and `nn.Linear`. Each check is handed what it tests (your
`lm_batch`, `Block`, `GPT`, `cached_step`). Nothing here is a solution to an exercise.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import attempt, check_close, check_shape, check_true
from .module_state import load_state


def future_mask(n):
    """(n, n) bool, True above the diagonal: the pairs to DROP (nn.MultiheadAttention's convention)."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def block_state(width, seed, scale=0.3):
    """Every parameter of Block(width, ...), by the names of Part B, drawn from seed."""
    gen = torch.Generator().manual_seed(seed)
    def draw(*shape):
        return scale * torch.randn(*shape, generator=gen)

    return {"norm1.weight": 1 + draw(width), "norm1.bias": draw(width),
            "attention.qkv.weight": draw(3 * width, width), "attention.qkv.bias": draw(3 * width),
            "attention.proj.weight": draw(width, width), "attention.proj.bias": draw(width),
            "norm2.weight": 1 + draw(width), "norm2.bias": draw(width),
            "ffn.linear1.weight": draw(4 * width, width), "ffn.linear1.bias": draw(4 * width),
            "ffn.linear2.weight": draw(width, 4 * width), "ffn.linear2.bias": draw(width)}


def gpt_state(vocab, width, layers, max_len, seed, scale=0.3):
    """Every parameter of GPT(vocab, width, heads, layers, max_len), by the names of Part C, drawn from seed."""
    gen = torch.Generator().manual_seed(seed)
    def draw(*shape):
        return scale * torch.randn(*shape, generator=gen)

    state = {"token_embedding.weight": 3 * draw(vocab, width), "position_embedding.weight": 3 * draw(max_len, width)}
    for index in range(layers):
        state.update({f"blocks.{index}.{name}": value for name, value in block_state(width, 10 * seed + index).items()})
    state.update({"norm.weight": 1 + draw(width), "norm.bias": draw(width),
                  "head.weight": draw(vocab, width), "head.bias": draw(vocab)})
    return state


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


def check_targets(lm_batch, length, batch_size, block_size, seed):
    """The targets are the inputs shifted by one character."""
    ids = torch.randperm(length, generator=torch.Generator().manual_seed(seed))  # every id once: a window is known by its ids
    inputs, targets = attempt(f"lm_batch(ids, {batch_size}, {block_size}, generator)", lm_batch, ids, batch_size,
                              block_size, torch.Generator().manual_seed(seed),
                              hint="draw the starts, then cut windows of block_size + 1 ids")
    check_shape("inputs", inputs, (batch_size, block_size), hint="one row per window, block_size characters each")
    check_shape("targets", targets, (batch_size, block_size), hint="the targets have the shape of the inputs")
    where = torch.empty(length, dtype=torch.long)
    where[ids] = torch.arange(length)  # position in ids of every id
    after = torch.cat([ids[1:], ids[:1]])[where]  # after[v]: the id that follows id v in ids
    check_true(not torch.equal(targets, inputs), "the targets are the inputs themselves: the target at position t "
               "is the character at t + 1, the inputs and targets are the same window shifted by one")
    check_true(torch.equal(targets, after[inputs]), "the target at position t is not the character that follows "
               "input t in ids: targets are ids[s + 1 : s + block_size + 1] for a window starting at s")


def check_starts(lm_batch, length, batch_size, block_size, seed):
    """The windows start where torch.randint(len(ids) - block_size, (batch_size,), generator) says."""
    ids = torch.randint(0, 1000, (length,), generator=torch.Generator().manual_seed(seed + 100))
    generator = torch.Generator().manual_seed(seed)
    own = torch.Generator().set_state(generator.get_state())  # the test's copy: your call may advance the other
    inputs, targets = attempt(f"lm_batch(ids, {batch_size}, {block_size}, generator)", lm_batch, ids, batch_size,
                              block_size, generator, hint="draw the starts, then cut windows of block_size + 1 ids")
    check_shape("inputs", inputs, (batch_size, block_size), hint="one row per window, block_size characters each")
    starts = torch.randint(length - block_size, (batch_size,), generator=own)
    expected = torch.stack([ids[s:s + block_size] for s in starts.tolist()])
    check_true(torch.equal(inputs, expected), "the windows do not start where the generator you were given says: "
               "draw the starts with torch.randint(len(ids) - block_size, (batch_size,), generator=generator), "
               "once, and cut row b at the b-th start")


def check_parts(Block, width, heads, max_len, T):  # noqa: N803 (the class under test)
    """Block(width, heads, max_len) holds the parameters of Part B and keeps the shape (2, T, width)."""
    what = f"Block({width}, {heads}, {max_len})"
    block = load_state(what, attempt(what, Block, width, heads, max_len), block_state(width, seed=width))
    out = attempt(f"{what} on (2, {T}, {width})", block, torch.randn(2, T, width),
                  hint="forward: x + attention(norm1(x)), then + ffn(norm2(...))")
    check_shape(f"{what}(x)", out, (2, T, width), hint="a block keeps the shape of its input")


def compare_block(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """Block computes nn.TransformerEncoderLayer(norm_first=True) with a causal mask, holding the same weights."""
    what = f"Block({width}, {heads}, {length + 2})"
    state = block_state(width, seed)
    block = load_state(what, attempt(what, Block, width, heads, length + 2), state)
    layer = reference_block(state, width, heads)
    x = torch.randn(batch, length, width, generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(x)", block, x, hint="forward: x + attention(norm1(x)), then + ffn(norm2(...))")
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
    """GPT's logits equal ReferenceGPT's, holding the same parameters."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {max_len})"
    state = gpt_state(vocab, width, layers, max_len, seed)
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, max_len), state)
    reference = ReferenceGPT(state, vocab, width, heads, layers, max_len)
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(idx)", model, idx, hint="forward returns (logits, loss), loss None without targets")
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx) must return the pair (logits, loss)")
    with torch.no_grad():
        expected = reference(idx)
        x = reference.token_embedding(idx) + reference.position_embedding(torch.arange(length))
        for layer in reference.layers:
            x = layer(x, src_mask=future_mask(length))
        no_final_norm = reference.head(x)
        reference.position_embedding.weight.zero_()
        no_positions = reference(idx)
    check_close(f"the logits of {what}", out[0], expected, atol=1e-4, likely_causes={
        "the position embeddings are not added": no_positions,
        "the final norm is missing (the head must read norm(x))": no_final_norm,
    }, hint="token_embedding(idx) + position_embedding(0..T-1), every block in order, norm, then head")


def compare_loss(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """With targets the loss is the mean cross-entropy over every position; without them it is None."""
    what = f"GPT({vocab}, {width}, 2, {layers}, {length})"
    state = gpt_state(vocab, width, layers, length, seed, scale=0.2)
    model = load_state(what, attempt(what, GPT, vocab, width, 2, layers, length), state)
    gen = torch.Generator().manual_seed(seed)
    idx, targets = torch.randint(vocab, (batch, length), generator=gen), torch.randint(vocab, (batch, length), generator=gen)
    out = attempt(f"{what}(idx, targets)", model, idx, targets, hint="the loss is F.cross_entropy over all B * T positions")
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx, targets) must return (logits, loss)")
    with torch.no_grad():
        logits = ReferenceGPT(state, vocab, width, 2, layers, length)(idx)  # (B, T, vocab)
        picked = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (B, T): log p(target)
    check_close(f"the loss of {what}", out[1], -picked.mean(), atol=1e-4, likely_causes={
        "the loss is summed over the positions instead of averaged": -picked.sum(),
        "the loss scores each position against its input instead of its target":
            -logits.log_softmax(-1).gather(-1, idx[..., None]).mean(),
    }, hint="F.cross_entropy(logits.reshape(B * T, vocab), targets.reshape(B * T)), the mean over all positions")
    check_true(attempt(f"{what}(idx)", model, idx)[1] is None, f"{what}(idx) without targets must return loss None")


def check_cached_step(GPT, cached_step, vocab, width, heads, layers, batch, length, seed):  # noqa: N803
    """Step by step through the caches the logits equal the full forward pass; each (K, V) grows along dim 2."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {length})"
    state = gpt_state(vocab, width, layers, length, seed, scale=0.2)
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, length), state)
    reference = ReferenceGPT(state, vocab, width, heads, layers, length)
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = reference(idx)  # (B, T, vocab)
        from_zero = torch.stack([reference(idx[:, :t + 1], torch.zeros(t + 1, dtype=torch.long))[:, -1]
                                 for t in range(length)], dim=1)
    own = attempt(f"{what}(idx)", model, idx)[0]
    check_close(f"{what}(idx)", own, expected, atol=1e-4,
                hint="the model of Part C is not right yet: make the tests of Part C pass first")
    caches, steps = None, []
    for t in range(length):
        logits, caches = attempt(f"cached_step at character {t}", cached_step, model, idx[:, t:t + 1], caches,
                                 hint="one (K, V) per block, each (B, H, characters so far, d_head): append the new "
                                      "key and value along dim 2")
        check_true(isinstance(caches, (list, tuple)) and len(caches) == layers,
                   f"cached_step must return one (K, V) per block, {layers} here")
        for index, (keys, values) in enumerate(caches):
            for name, tensor in (("K", keys), ("V", values)):
                check_shape(f"block {index}'s cached {name} after {t + 1} characters", tensor,
                            (batch, heads, t + 1, width // heads), hint="(B, H, characters so far, d_head): append "
                            "the new key and value along dim 2, the positions axis")
        steps.append(logits)
    check_close(f"the logits of cached_step, step by step ({length} characters)", torch.stack(steps, dim=1), expected,
                atol=1e-4, likely_causes={
                    "every new character is embedded at position 0 (its position is the number of characters "
                    "already cached)": from_zero,
                }, hint="norm1, qkv, append K and V, attend over the whole cache, proj and residual, then the FFN "
                        "sublayer, in every block; then norm and head")
