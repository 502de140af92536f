"""The checks of chapter 10 (a small GPT), which its graded test cells call.

The tests choose every parameter: `attention_state`, `block_state` and `gpt_state` draw the parameters
of an attention, a block or a model by the names the exercises give, and `load_state` loads them into
yours, so no result depends on how or in which order you create the submodules. What your code
computes with them is checked here for what the exercise promises (shapes, the causal mask, the pair
(logits, loss), a float from a training step, the caches growing along the positions axis, the same
text with and without the cache); the graded tests also compare it with PyTorch's own computations
holding the same parameters, on the grader's side. Each check is handed what it tests. Nothing here
computes an attention's, a block's, a model's, a step's or a sampler's answer.
"""

from __future__ import annotations

import torch
from nboracle import read_tensors

from .checks import attempt, check_rows_sum_to_one, check_shape, check_true
from .module_state import load_state


def future_mask(n):
    """(n, n) bool, True above the diagonal: the pairs to DROP (nn.MultiheadAttention's convention)."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def _drawer(seed, scale):
    gen = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return scale * torch.randn(*shape, generator=gen)

    return draw


def attention_state(width, seed, scale=0.3):
    """Every parameter of MultiHeadSelfAttention(width, ...), by the names of Part B, drawn from seed."""
    draw = _drawer(seed, scale)
    return {"qkv.weight": draw(3 * width, width), "qkv.bias": draw(3 * width),
            "proj.weight": draw(width, width), "proj.bias": draw(width)}


def ffn_state(width, hidden, seed, scale=0.3):
    """Every parameter of FeedForward(width, hidden), by the names of Part B, drawn from seed."""
    draw = _drawer(seed, scale)
    return {"linear1.weight": draw(hidden, width), "linear1.bias": draw(hidden),
            "linear2.weight": draw(width, hidden), "linear2.bias": draw(width)}


def block_state(width, seed, scale=0.3):
    """Every parameter of Block(width, ...), by the names of Part C, drawn from seed."""
    draw = _drawer(seed, scale)
    state = {"norm1.weight": 1 + draw(width), "norm1.bias": draw(width)}
    state.update({f"attention.{k}": v for k, v in attention_state(width, seed + 1000, scale).items()})
    state.update({"norm2.weight": 1 + draw(width), "norm2.bias": draw(width)})
    state.update({f"ffn.{k}": v for k, v in ffn_state(width, 4 * width, seed + 2000, scale).items()})
    return state


def own_state(state):
    """The parameters of `state` outside the sublayers a test treats as given: a block's norms (not its attention
    and FFN), a model's embeddings, final norm and head (not its blocks)."""
    return {k: v for k, v in state.items() if not k.startswith(("attention.", "ffn.", "blocks."))}


def gpt_state(vocab, width, layers, max_len, seed, scale=0.3):
    """Every parameter of GPT(vocab, width, heads, layers, max_len), by the names of Part D, drawn from seed."""
    draw = _drawer(seed, scale)
    state = {"token_embedding.weight": 3 * draw(vocab, width), "position_embedding.weight": 3 * draw(max_len, width)}
    for index in range(layers):
        state.update({f"blocks.{index}.{name}": value for name, value in block_state(width, 10 * seed + index).items()})
    state.update({"norm.weight": 1 + draw(width), "norm.bias": draw(width),
                  "head.weight": draw(vocab, width), "head.bias": draw(vocab)})
    return state


SWAPPED = ("lm_batch returns the targets first and the inputs second: the inputs are each window's first block_size "
           "ids, the targets the same window shifted by one; return (inputs, targets)")


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
    check_true(not torch.equal(inputs, after[targets]), SWAPPED)
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
    check_true(not torch.equal(inputs, torch.stack([ids[s + 1:s + block_size + 1] for s in starts.tolist()])),
               SWAPPED)
    check_true(torch.equal(inputs, expected), "the windows do not start where the generator you were given says: "
               "draw the starts with torch.randint(len(ids) - block_size, (batch_size,), generator=generator), "
               "once, and cut row b at the b-th start")


def check_attention_parts(MultiHeadSelfAttention, width, heads, max_len, T):  # noqa: N803 (the class under test)
    """The attention holds qkv and proj of the sizes of Part B, a causal bool `mask` buffer (max_len, max_len),
    n_heads and d_head; with return_weights=True it returns (out, weights), weights (B, H, T, T), causal rows."""
    what = f"MultiHeadSelfAttention({width}, {heads}, {max_len})"
    attention = load_state(what, attempt(what, MultiHeadSelfAttention, width, heads, max_len),
                           attention_state(width, seed=width))
    held = attempt(f"the buffer mask of {what}", read_tensors, attention, ["mask"],
                   hint="register the causal mask with self.register_buffer('mask', ...)")["mask"]
    check_shape(f"{what}.mask", held, (max_len, max_len), hint="one row and one column per position up to max_len")
    check_true(held.dtype == torch.bool and torch.equal(held, torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))),
               f"{what}.mask is not the causal mask: a bool (max_len, max_len) tensor, True on and below the "
               "diagonal (the pairs that may attend), torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))")
    check_true(attention.n_heads == heads and attention.d_head == width // heads,
               f"{what} must keep n_heads = {heads} and d_head = width // heads = {width // heads}")
    x = torch.randn(2, T, width, generator=torch.Generator().manual_seed(T))
    result = attempt(f"{what}(x, return_weights=True)", attention, x, return_weights=True,
                     hint="forward(x, return_weights=False) returns out, or (out, weights) when asked")
    check_true(isinstance(result, (tuple, list)) and len(result) == 2,
               f"{what}(x, return_weights=True) must return the pair (out, weights)")
    out, weights = result
    check_shape(f"{what}(x)", out, (2, T, width), hint="the attention keeps the shape of its input")
    check_shape(f"the weights of {what}", weights, (2, heads, T, T), hint="one row of weights per head and query")
    check_true(bool(torch.isfinite(weights).all()), f"the weights of {what} hold NaN: a query none of whose scores "
               "is allowed gets a row of -inf, and softmax of that is NaN. masked_fill fills where its mask is True and "
               "self.mask is True on the pairs that may attend: fill the future, where it is False "
               "(~self.mask[:T, :T])")
    check_rows_sum_to_one(f"the weights of {what}", weights, hint="softmax over the keys, the last axis")
    check_true(bool((weights.masked_select(future_mask(T)) == 0).all()), f"the weights of {what} put weight on "
               "future positions: the scores above the diagonal must be -inf before the softmax (the causal mask)")


def check_attention_outputs(MultiHeadSelfAttention, batch, length, width, heads, seed):  # noqa: N803
    """The attention holding the test's parameters keeps the shape and is causal; returns it, x and its output."""
    what = f"MultiHeadSelfAttention({width}, {heads}, {length + 2})"
    attention = load_state(what, attempt(what, MultiHeadSelfAttention, width, heads, length + 2),
                           attention_state(width, seed))
    x = torch.randn(batch, length, width, generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(x)", attention, x, hint="split qkv into heads, scores, causal mask, softmax, merge, proj")
    check_shape(f"{what}(x)", out, (batch, length, width), hint="the attention keeps the shape of its input")
    return attention, x, out


def check_ffn_outputs(FeedForward, width, hidden, seed):  # noqa: N803 (the class under test)
    """FeedForward(width, hidden) holding the test's parameters keeps the shape; returns it, x and its output."""
    what = f"FeedForward({width}, {hidden})"
    ffn = load_state(what, attempt(what, FeedForward, width, hidden), ffn_state(width, hidden, seed))
    x = torch.randn(2, 3, width, generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(x)", ffn, x, hint="linear2(relu(linear1(x)))")
    check_shape(f"{what}(x)", out, (2, 3, width), hint="the FFN keeps the shape of its input")
    return ffn, x, out


def check_parts(Block, width, heads, max_len, T):  # noqa: N803 (the class under test)
    """Block(width, heads, max_len) holds the parameters of Part C and keeps the shape (2, T, width)."""
    what = f"Block({width}, {heads}, {max_len})"
    block = load_state(what, attempt(what, Block, width, heads, max_len), block_state(width, seed=width))
    out = attempt(f"{what} on (2, {T}, {width})", block, torch.randn(2, T, width),
                  hint="forward: x + attention(norm1(x)), then + ffn(norm2(...))")
    check_shape(f"{what}(x)", out, (2, T, width), hint="a block keeps the shape of its input")


def check_block_outputs(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """Block(width, heads, length + 2) holding the test's norms (its attention and FFN as built) keeps the shape;
    returns it, x and its output."""
    what = f"Block({width}, {heads}, {length + 2})"
    block = load_state(what, attempt(what, Block, width, heads, length + 2), own_state(block_state(width, seed)))
    x = torch.randn(batch, length, width, generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(x)", block, x, hint="forward: x + attention(norm1(x)), then + ffn(norm2(...))")
    check_shape(f"{what}(x)", out, (batch, length, width), hint="a block keeps the shape of its input")
    return block, x, out


EMBEDDING_INDEX_HINT = ("an embedding was read past its last row: the positions of T characters are 0 to T - 1 "
                        "(torch.arange(T)), never T, and a sequence of max_len characters must fit")


def check_model_outputs(GPT, vocab, width, heads, layers, max_len, batch, length, seed):  # noqa: N803 (the class under test)
    """GPT(...) holding the test's embeddings, final norm and head (its blocks as built) returns
    (logits (B, T, vocab), None) without targets; returns the model, the logits and the test's idx."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {max_len})"
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, max_len),
                       own_state(gpt_state(vocab, width, layers, max_len, seed)))
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    out = attempt(f"{what}(idx)", model, idx, hint={None: "forward returns (logits, loss), loss None without targets",
                                                    "IndexError": EMBEDDING_INDEX_HINT})
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx) must return the pair (logits, loss)")
    check_shape(f"the logits of {what}", out[0], (batch, length, vocab), hint="one row of vocab logits per position")
    return model, out[0], idx


def check_loss_outputs(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """With targets GPT returns a loss of one number; without them the loss is None. Returns the logits and the loss
    of the call with targets, idx and targets."""
    what = f"GPT({vocab}, {width}, 2, {layers}, {length})"
    model = load_state(what, attempt(what, GPT, vocab, width, 2, layers, length),
                       own_state(gpt_state(vocab, width, layers, length, seed, scale=0.2)))
    gen = torch.Generator().manual_seed(seed)
    idx, targets = torch.randint(vocab, (batch, length), generator=gen), torch.randint(vocab, (batch, length), generator=gen)
    out = attempt(f"{what}(idx, targets)", model, idx, targets,
                  hint={None: "the loss is F.cross_entropy over all B * T positions, which wants the classes on axis 1: "
                              "flatten the logits to (B * T, vocab) and the targets to (B * T,)",
                        "IndexError": EMBEDDING_INDEX_HINT})
    check_true(isinstance(out, (tuple, list)) and len(out) == 2, f"{what}(idx, targets) must return (logits, loss)")
    check_shape(f"the logits of {what}", out[0], (batch, length, vocab), hint="one row of vocab logits per position")
    check_shape(f"the loss of {what}", out[1], (), hint="the loss is one number: the mean over every position")
    check_true(attempt(f"{what}(idx)", model, idx)[1] is None, f"{what}(idx) without targets must return loss None")
    return out[0], out[1], idx, targets


def training_batches(vocab, count, seed):
    """The test's batches for train_step: `count` pairs (inputs, targets), each (4, 6) ids."""
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(vocab, (4, 6), generator=gen), torch.randint(vocab, (4, 6), generator=gen))
            for _ in range(count)]


def check_train_step(train_step, training_setup, vocab, width, seed):
    """train_step returns the loss as a Python float and changes the model's parameters."""
    model, optimizer, scheduler = training_setup(vocab, width, seed, 0.05, 0.5)
    before = read_tensors(model)
    inputs, targets = training_batches(vocab, 1, seed)[0]
    loss = attempt("train_step(model, optimizer, scheduler, inputs, targets, 1.0)", train_step, model, optimizer,
                   scheduler, inputs, targets, 1.0, hint="loss, zero_grad, backward, clip, optimizer.step(), "
                   "scheduler.step(), return loss.item()")
    check_true(type(loss) is float, f"train_step returned a {type(loss).__name__}: return the loss as a Python "
               "float, loss.item() (a tensor would keep the whole graph of the step alive)")
    after = read_tensors(model)
    check_true(any(not torch.equal(before[name], after[name]) for name in before),
               "train_step left the model's parameters as they were: call optimizer.step() after loss.backward()")


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


def cached_steps(cached_step, model, idx, vocab, layers, heads, d_head):
    """cached_step over idx (B, T) from no cache, each step checked for its shapes; -> (logits of every step,
    caches after every step)."""
    batch, length = idx.shape
    caches, steps, kept = None, [], []
    for t in range(length):
        result = attempt(f"cached_step at character {t}", cached_step, model, idx[:, t:t + 1], caches, hint=CACHE_HINT)
        check_true(isinstance(result, (list, tuple)) and len(result) == 2, "cached_step must return (logits, caches)")
        logits, caches = result
        check_shape(f"the logits of cached_step at character {t}", logits, (batch, vocab),
                    hint="the logits of the next character only, (B, vocab)")
        check_cache_shapes(caches, layers, batch, heads, t + 1, d_head)
        steps.append(logits)
        kept.append(caches)
    return steps, kept


def check_cached_steps(GPT, cached_step, vocab, width, heads, layers, batch, length, seed):  # noqa: N803
    """Step by step from no cache, each step returns (logits (B, vocab), caches) and each (K, V) grows along dim 2
    (the hidden part compares the logits and the caches with a model's own)."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {length})"
    # the blocks as built (only shapes are checked here): a block of other sizes is the block test's to judge
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, length),
                       own_state(gpt_state(vocab, width, layers, length, seed, scale=0.2)))
    idx = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    cached_steps(cached_step, model, idx, vocab, layers, heads, width // heads)


def check_generate(generate, GPT, vocab, width, heads, layers, max_len, seed):  # noqa: N803 (the function under test)
    """generate returns the prompt then n_new ids, (B, T0 + n_new), with and without the cache, also past the context
    (the hidden part compares the text with the model's next-token distribution drawn with the generator)."""
    what = f"GPT({vocab}, {width}, {heads}, {layers}, {max_len})"
    model = load_state(what, attempt(what, GPT, vocab, width, heads, layers, max_len),  # its blocks as built
                       own_state(gpt_state(vocab, width, layers, max_len, seed, scale=0.2)))
    prompt = torch.randint(vocab, (2, 3), generator=torch.Generator().manual_seed(seed))
    texts = {}
    for use_cache in (False, True):
        call = f"generate(model, prompt (2, 3), {max_len}, generator, top_k=5, use_cache={use_cache})"
        texts[use_cache] = attempt(call, generate, model, prompt, max_len, torch.Generator().manual_seed(seed),
                                   top_k=5, use_cache=use_cache,
                                   hint=f"the text outgrows the model's context of {max_len} characters here: the "
                                        f"model reads at most the last {max_len} (idx[:, -context:])")
        check_shape(call, texts[use_cache], (2, 3 + max_len), hint="the prompt followed by the n_new characters drawn")
        check_true(torch.equal(texts[use_cache][:, :3], prompt), f"{call} does not start with the prompt: return "
                   "the prompt followed by the characters drawn")


def check_attention(MultiHeadSelfAttention, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """check_attention_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_attention_outputs(MultiHeadSelfAttention, batch, length, width, heads, seed)


def check_ffn(FeedForward, width, hidden, seed):  # noqa: N803 (the class under test)
    """check_ffn_outputs, returning nothing."""
    check_ffn_outputs(FeedForward, width, hidden, seed)


def check_block(Block, batch, length, width, heads, seed):  # noqa: N803 (the class under test)
    """check_block_outputs, returning nothing."""
    check_block_outputs(Block, batch, length, width, heads, seed)


def check_model(GPT, vocab, width, heads, layers, max_len, batch, length, seed):  # noqa: N803 (the class under test)
    """check_model_outputs, returning nothing."""
    check_model_outputs(GPT, vocab, width, heads, layers, max_len, batch, length, seed)


def check_loss(GPT, vocab, width, layers, batch, length, seed):  # noqa: N803 (the class under test)
    """check_loss_outputs, returning nothing."""
    check_loss_outputs(GPT, vocab, width, layers, batch, length, seed)
