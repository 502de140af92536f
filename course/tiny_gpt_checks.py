"""The checks of chapter 10 (a small GPT), which its graded test cells call.

The tests choose every parameter: `block_state` and `gpt_state` draw the parameters of a block or
a model by the names the exercises give, and `load_state` loads them into yours, so no result
depends on how or in which order you create the submodules. What your code computes with them is
checked here for what the exercise promises (shapes, the causal mask, the pair (logits, loss), the caches
growing along the positions axis); the graded tests also compare it with PyTorch's own layers holding
the same parameters, on the grader's side. Each check is handed what it tests (your `lm_batch`,
`Block`, `GPT`, `cached_step`). Nothing here computes a block's, a model's or a step's answer.
"""

from __future__ import annotations

import torch

from .checks import attempt, check_shape, check_true
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


def check_block_outputs(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """Block(width, heads, length + 2) holding the test's parameters keeps the shape and is causal; returns the
    block and its output on the test's x."""
    what = f"Block({width}, {heads}, {length + 2})"
    block = load_state(what, attempt(what, Block, width, heads, length + 2), block_state(width, seed))
    x = torch.randn(batch, length, width, generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(x)", block, x, hint="forward: x + attention(norm1(x)), then + ffn(norm2(...))")
    check_shape(f"{what}(x)", out, (batch, length, width), hint="a block keeps the shape of its input")
    if length > 1:
        later = x.clone()
        later[:, -1] += torch.linspace(-2.0, 3.0, width)
        moved = attempt(f"{what}(x with its last position changed)", block, later)
        leak = not torch.allclose(moved[:, :-1], out[:, :-1], atol=1e-5)  # precondition: the attention is causal
        check_true(not leak, f"changing the last position of x moved the outputs of earlier positions of {what}: "
                   "the attention must keep its causal mask")
    return block, x, out


def check_model_outputs(GPT, vocab, width, heads, layers, max_len, batch, length, seed):  # noqa: N803 (the class under test)
    """GPT(...) holding the test's parameters returns (logits (B, T, vocab), None) without targets; returns the
    logits and the test's idx."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {max_len})"
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, max_len),
                       gpt_state(vocab, width, layers, max_len, seed))
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(idx)", model, idx, hint="forward returns (logits, loss), loss None without targets")
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx) must return the pair (logits, loss)")
    check_shape(f"the logits of {what}", out[0], (batch, length, vocab), hint="one row of vocab logits per position")
    return out[0], idx


def check_loss_outputs(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """With targets GPT returns a loss of one number; without them the loss is None. Returns the loss, idx, targets."""
    what = f"GPT({vocab}, {width}, 2, {layers}, {length})"
    model = load_state(what, attempt(what, GPT, vocab, width, 2, layers, length),
                       gpt_state(vocab, width, layers, length, seed, scale=0.2))
    gen = torch.Generator().manual_seed(seed)
    idx, targets = torch.randint(vocab, (batch, length), generator=gen), torch.randint(vocab, (batch, length), generator=gen)
    out = attempt(f"{what}(idx, targets)", model, idx, targets, hint="the loss is F.cross_entropy over all B * T positions")
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx, targets) must return (logits, loss)")
    check_shape(f"the loss of {what}", out[1], (), hint="the loss is one number: the mean over every position")
    check_true(attempt(f"{what}(idx)", model, idx)[1] is None, f"{what}(idx) without targets must return loss None")
    return out[1], idx, targets


CACHE_HINT = ("one (K, V) per block, each (B, H, characters so far, d_head): append the new key and value along dim 2, "
              "the positions axis")


def check_cache_shapes(caches, layers, batch, heads, count, d_head):
    """`caches` is one (K, V) per block, each (B, H, count, d_head)."""
    check_true(isinstance(caches, (list, tuple)) and len(caches) == layers,
               f"cached_step must return one (K, V) per block, {layers} here")
    for index, pair in enumerate(caches):
        check_true(isinstance(pair, (list, tuple)) and len(pair) == 2, f"block {index}'s cache must be a pair (K, V)")
        for name, tensor in zip(("K", "V"), pair, strict=True):
            check_shape(f"block {index}'s cached {name} after {count} characters", tensor, (batch, heads, count, d_head),
                        hint=CACHE_HINT)


def check_cached_steps_outputs(GPT, cached_step, vocab, width, heads, layers, batch, length, seed):  # noqa: N803
    """Step by step from no cache, each step returns (logits (B, vocab), caches) and each (K, V) grows along dim 2;
    returns the model, idx, the logits of every step and the caches after each step."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {length})"
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, length),
                       gpt_state(vocab, width, layers, length, seed, scale=0.2))
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    caches, steps, kept = None, [], []
    for t in range(length):
        result = attempt(f"cached_step at character {t}", cached_step, model, idx[:, t:t + 1], caches, hint=CACHE_HINT)
        check_true(isinstance(result, (list, tuple)) and len(result) == 2, "cached_step must return (logits, caches)")
        logits, caches = result
        check_shape(f"the logits of cached_step at character {t}", logits, (batch, vocab),
                    hint="the logits of the next character only, (B, vocab)")
        check_cache_shapes(caches, layers, batch, heads, t + 1, width // heads)
        steps.append(logits)
        kept.append(caches)
    return model, idx, steps, kept


def check_block(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """check_block_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_block_outputs(Block, batch, length, width, heads, seed)


def check_model(GPT, vocab, width, heads, layers, max_len, batch, length, seed):  # noqa: N803 (the class under test)
    """check_model_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_model_outputs(GPT, vocab, width, heads, layers, max_len, batch, length, seed)


def check_loss(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """check_loss_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_loss_outputs(GPT, vocab, width, layers, batch, length, seed)


def check_cached_steps(GPT, cached_step, vocab, width, heads, layers, batch, length, seed):  # noqa: N803
    """check_cached_steps_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_cached_steps_outputs(GPT, cached_step, vocab, width, heads, layers, batch, length, seed)
