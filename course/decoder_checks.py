"""The checks of chapter 09 (the decoder), which its graded test cells call.

Each check is handed what it tests (your `cross_attention`, your `DecoderBlock` class, a block or a
model built from the test's parameters) and checks what the exercise promises of it: shapes, the
causal mask, the memory seen in full, PAD changing nothing, each submodule what the exercise names,
gradients reaching every parameter. A failed check names the call and says where to look. Nothing
here computes a block's or a model's answer: the graded tests compare your outputs with
`nn.TransformerDecoderLayer` and `nn.Transformer` holding the same parameters on the grader's side (your model's
around your own decoder blocks, so that a block's mistake costs the block's points, not the model's).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from nboracle import (
    fresh,
    module_tensors,
    parameter_and_input_gradients,
    parameter_gradients_of,
    set_training,
)
from torch import nn

from .checks import attempt, check_close, check_finite, check_rows_sum_to_one, check_shape, check_true
from .module_state import load_state

BLOCK_HINT = ("in DecoderBlock the self-attention takes (h, h, h) and the causal mask (T, T); the cross-attention "
              "takes its queries from the decoder stream and its keys and values from memory, with the memory "
              "padding mask (B, S) and no causal mask")
MODEL_HINT = "the model runs your DecoderBlock and cross_attention: make the tests of Parts A and B pass first"
PARTS = ("self_attention", "cross_attention", "norm1", "norm2", "norm3", "ffn")


def drop_future(n):
    """(n, n) bool, True above the diagonal: the pairs the causal mask drops (the notebook's future_mask)."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


# ---------------------------------------------------------------- the test's parameters and references

def attention_state(width, gen, scale):
    """Parameters of one nn.MultiheadAttention(width, heads), drawn by the test."""
    return {"in_proj_weight": scale * torch.randn(3 * width, width, generator=gen),
            "in_proj_bias": scale * torch.randn(3 * width, generator=gen),
            "out_proj.weight": scale * torch.randn(width, width, generator=gen),
            "out_proj.bias": scale * torch.randn(width, generator=gen)}


def block_state(width, hidden, seed, attentions=("self_attention", "cross_attention"), norms=3, scale=0.4):
    """Every parameter of a block, by the names of the exercise, drawn from `seed` (LayerNorm scales near 1).

    The tests load these into your block, so no result depends on how, or in which order, it was built.
    """
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name in attentions:
        state.update({f"{name}.{key}": value for key, value in attention_state(width, gen, scale).items()})
    for index in range(1, norms + 1):
        state[f"norm{index}.weight"] = 1.0 + scale * torch.randn(width, generator=gen)
        state[f"norm{index}.bias"] = scale * torch.randn(width, generator=gen)
    state["ffn.linear1.weight"] = scale * torch.randn(hidden, width, generator=gen)
    state["ffn.linear1.bias"] = scale * torch.randn(hidden, generator=gen)
    state["ffn.linear2.weight"] = scale * torch.randn(width, hidden, generator=gen)
    state["ffn.linear2.bias"] = scale * torch.randn(width, generator=gen)
    return state


def check_cross_weights_shape(call, weights, expected):
    """The cross weights of `call` must have the shape `expected`, (B, H, T, S): one (T, S) map per head."""
    batch, heads, length, source_length = expected
    if tuple(getattr(weights, "shape", ())) == (batch, heads, length, length) and length != source_length:
        check_true(False, f"the cross weights of {call} are (T, T) maps, one column per decoder position: return "
                   "the cross-attention's weights, whose keys are the S memory positions, not the self-attention's")
    check_shape(f"cross_weights of {call}", weights, expected,
                hint="one (T, S) map per head, (batch, head, query, key): keep average_attn_weights=False")


# ---------------------------------------------------------------- Part A: cross_attention

def check_cross_shapes(cross_attention, batch, heads, d_head, length, source_length):
    """cross_attention returns (out (B, T, D), weights (B, H, T, S))."""
    width = heads * d_head
    attention = fresh(nn.MultiheadAttention, width, heads, dropout=0.0, batch_first=True)  # the test's, for your code
    x, memory = torch.randn(batch, length, width), torch.randn(batch, source_length, width)
    call = f"cross_attention(attention, x {tuple(x.shape)}, memory {tuple(memory.shape)})"
    with torch.no_grad():
        result = attempt(call, cross_attention, attention, x, memory,
                         hint="the queries come from x; the keys and the values both come from memory")
    check_true(isinstance(result, tuple) and len(result) == 2, f"{call} must return a pair (out, weights)")
    out, weights = result
    check_shape(f"out of {call}", out, (batch, length, width),
                hint="one output row per query, that is per decoder position: the queries come from x")
    if tuple(getattr(weights, "shape", ())) == (batch, heads, length, length) and length != source_length:
        check_true(False, f"the weights of {call} have {length} columns, one per decoder position, expected "
                   f"{source_length}, one per memory position: the keys (and values) must come from memory")
    check_shape(f"weights of {call}", weights, (batch, heads, length, source_length),
                hint="one (T, S) map per head, (batch, head, query, key): ask for average_attn_weights=False")


def check_memory_padding(cross_attention, attention, heads, x, memory, lengths):
    """PAD memory positions (from `lengths`) get weight 0 in every head and change no output."""
    (batch, length, _), source_length = x.shape, memory.shape[1]
    pad = torch.arange(source_length) >= lengths[:, None]  # (B, S), True = PAD
    with torch.no_grad():
        out, weights = attempt("cross_attention with a memory padding mask", cross_attention, attention, x, memory,
                               pad, hint="pass memory_padding_mask as key_padding_mask (True = drop the key)")
        short, _ = attempt("cross_attention on a memory without PAD", cross_attention, attention, x[:1],
                           memory[:1, : int(lengths[0])], hint="the queries come from x, the keys and values from memory")
    check_shape("weights with a memory padding mask", weights, (batch, heads, length, source_length),
                hint="one (T, S) map per head, (batch, head, query, key): ask for average_attn_weights=False")
    check_finite("weights with a memory padding mask", weights, hint="a query lost every key: the mask is True at PAD "
                 "positions, the keys to DROP; pass it as it is, not inverted")
    pad_weight = weights.masked_fill(~pad[:, None, None, :], 0.0).abs().max().item()
    check_true(pad_weight == 0, f"PAD memory positions get weights up to {pad_weight:.3f}: pass memory_padding_mask "
               "to the attention as key_padding_mask (True = drop the key)")
    check_rows_sum_to_one("weights with a memory padding mask", weights)
    masked = "PAD memory positions must not influence any output"
    check_close("outputs of sequence 0 with PAD appended to its memory vs without", out[:1], short, atol=1e-5,
                hint=masked)  # message only: each of the two is compared with the test's attention below
    with torch.no_grad():  # each output, with the test's attention
        want, want_weights = attention(x, memory, memory, key_padding_mask=pad, need_weights=True,
                                       average_attn_weights=False)
        unmasked = attention(x, memory, memory)[0]
        want_short = attention(x[:1], memory[:1, : int(lengths[0])], memory[:1, : int(lengths[0])])[0]
    check_close("weights with a memory padding mask", weights, want_weights, atol=1e-5,
                hint="return the weights of every head, as the attention gives them with the padding mask")
    check_close("out with a memory padding mask", out, want, atol=1e-5, hint=masked,
                likely_causes={"the padding mask is ignored": unmasked})
    check_close("out on a memory without PAD", short, want_short, atol=1e-5,
                hint="call the attention with query = x, key = memory, value = memory")


# ---------------------------------------------------------------- Part B: DecoderBlock

def library_attention(state, name, width, heads):
    """nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True), the module the exercise names, holding the
    test's parameters `state[name + ".*"]`: what one submodule of the block must compute, not the block."""
    attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
    attention.load_state_dict({key[len(name) + 1:]: value for key, value in state.items() if key.startswith(f"{name}.")})
    return attention


def check_attention_part(call, mine, theirs, x, kv, causes, hint):
    check_true(isinstance(mine, tuple) and len(mine) == 2, f"{call} must return a pair (out, weights), as "
               "nn.MultiheadAttention does")
    check_close(call, mine[0], theirs(x, kv, kv, need_weights=False)[0], atol=1e-5, likely_causes=causes, hint=hint)


def attention_causes(theirs, heads, x, kv):
    """Two ways to build the wrong nn.MultiheadAttention, computed with the test's parameters."""
    def t(v):
        return v.transpose(0, 1)
    causes = {"it is built without batch_first=True, reading (B, T, D) as (T, B, D)":
              t(theirs(t(x), t(kv), t(kv), need_weights=False)[0])}
    if heads > 1:
        one_head = nn.MultiheadAttention(x.shape[-1], 1, batch_first=True)
        one_head.load_state_dict(theirs.state_dict())  # the test's own module, holding the test's parameters
        causes[f"it has 1 head instead of {heads}"] = one_head(x, kv, kv, need_weights=False)[0]
    return causes


def check_decoder_modules(DecoderBlock, width, heads, hidden, norm_first, seed):  # noqa: N803 (the class under test)
    """Each submodule of DecoderBlock(...) computes what the exercise names, with the test's parameters."""
    what = f"DecoderBlock({width}, {heads}, {hidden}, norm_first={norm_first})"
    block = attempt(what, DecoderBlock, width, heads, hidden, norm_first=norm_first)
    for row in module_tensors(block):  # a tensor held under two of the names belongs to one module used twice
        owners = [part for part in PARTS if any(n.startswith(f"{part}.") for n in (row["name"], *row["aliases"]))]
        check_true(len(owners) < 2, f"{what}: {' and '.join(owners)} are the same module; they need their own weights")
    state = block_state(width, hidden, seed)
    load_state(what, block, state)
    attentions = {name: library_attention(state, name, width, heads) for name in ("self_attention", "cross_attention")}
    gen = torch.Generator().manual_seed(seed)
    x, kv = 1.0 + torch.randn(3, 5, width, generator=gen), torch.randn(3, 5, width, generator=gen)  # (B, T, D), B != T
    build = f"build it as nn.MultiheadAttention({width}, {heads}, dropout=0.0, batch_first=True)"
    with torch.no_grad():
        for mode in ("eval", "train"):  # dropout acts in train mode only
            set_training(block, mode == "train")  # the test sets the mode, as nn.Module's train() and eval() do
            for name, theirs in attentions.items():
                call = f"{what}.{name}(x, kv, kv) in {mode} mode"
                mine = attempt(call, getattr(block, name), x, kv, kv, need_weights=False, hint=build)
                check_attention_part(call, mine, theirs, x, kv, attention_causes(theirs, heads, x, kv) if mode == "eval"
                                     else {}, build if mode == "eval" else "it computes something else in train mode "
                                     "than in eval mode: build it with dropout=0.0")
        for norm in ("norm1", "norm2", "norm3"):
            check_close(f"{what}.{norm}(x)", attempt(f"{what}.{norm}(x)", getattr(block, norm), x),
                        F.layer_norm(x, (width,), state[f"{norm}.weight"], state[f"{norm}.bias"]), atol=1e-5,
                        hint=f"build it as nn.LayerNorm({width}), with its learnable scale and shift")
        ffn = F.linear(torch.relu(F.linear(x, state["ffn.linear1.weight"], state["ffn.linear1.bias"])),
                       state["ffn.linear2.weight"], state["ffn.linear2.bias"])
        check_close(f"{what}.ffn(x)", attempt(f"{what}.ffn(x)", block.ffn, x), ffn, atol=1e-5,
                    hint=f"use FeedForward({width}, {hidden}), linear2(relu(linear1(x)))")


def check_decoder_shapes(block, batch, heads, width, length, source_length, norm_first):
    """block(x, memory, causal_mask) returns (out (B, T, D), cross_weights (B, H, T, S))."""
    x, memory = torch.randn(batch, length, width), torch.randn(batch, source_length, width)
    call = f"DecoderBlock(norm_first={norm_first}) on x {tuple(x.shape)}, memory {tuple(memory.shape)}"
    with torch.no_grad():
        result = attempt(call, block, x, memory, causal_mask=drop_future(length),
                         hint="the causal mask (T, T) belongs to the self-attention; the cross-attention has "
                              "T queries and S keys and takes no causal mask")
    check_true(isinstance(result, tuple) and len(result) == 2, "DecoderBlock.forward must return a pair (out, cross_weights)")
    out, weights = result
    check_shape(f"out of {call}", out, (batch, length, width))
    check_cross_weights_shape(call, weights, (batch, heads, length, source_length))


def causal_runs(x, memory):
    """The three calls of the causal test: {call: (x, memory)}, the last decoder token and the memory changed."""
    changed = x.clone()
    changed[:, -1] += torch.linspace(-3.0, 5.0, x.shape[-1])  # not a constant shift: LayerNorm removes those
    other_memory = memory.flip(0) + torch.linspace(-2.0, 2.0, memory.shape[-1])
    return {"DecoderBlock with a causal mask": (x, memory), "DecoderBlock on a changed x": (changed, memory),
            "DecoderBlock on another memory": (x, other_memory)}


def check_decoder_causal_outputs(block, x, memory):
    """With the causal mask, a later decoder token moves no earlier output; returns the outputs of causal_runs."""
    future, runs = drop_future(x.shape[1]), causal_runs(x, memory)
    with torch.no_grad():
        before, after, elsewhere = (attempt(call, block, *inputs, causal_mask=future, hint=BLOCK_HINT)[0]
                                    for call, inputs in runs.items())
    ignores_memory = torch.allclose(before, elsewhere, atol=1e-5)  # message only: names a missing memory
    check_true(not ignores_memory, "the block's output does not depend on memory at all: the cross-attention must take its keys and "
               "values from memory (with them from x it is a second self-attention, and one without a causal mask)")
    check_finite("out with a causal mask", before, hint="a query lost every key: the causal mask is True for the "
                 "pairs to DROP (keys after the query); pass it to the self-attention as it is, as attn_mask")
    leak = "pass causal_mask to the self-attention as attn_mask (True = forbidden pair)"
    past_moved = not torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5)  # message only: names the leak
    check_true(not past_moved, f"changing the last decoder token moved the outputs of earlier positions: {leak}")
    same_last = torch.allclose(before[:, -1], after[:, -1], atol=1e-5)  # message only: the graded test compares every output
    check_true(not same_last, "changing the last decoder token did not change its own output: does the block use x?")
    return before, after, elsewhere


def last_memory_moved(memory):
    """memory with its last position changed (only that one)."""
    moved = memory.clone()
    moved[:, -1] += torch.linspace(2.0, -4.0, memory.shape[-1])
    return moved


def check_sees_all_memory_outputs(block, heads, x, memory):
    """The cross-attention takes no causal mask: the first decoder position sees the last memory position;
    returns (weights, out, out on last_memory_moved(memory))."""
    future, moved = drop_future(x.shape[1]), last_memory_moved(memory)
    with torch.no_grad():
        before, weights = attempt("DecoderBlock with a causal mask", block, x, memory, causal_mask=future,
                                  hint=BLOCK_HINT)
        after, _ = attempt("DecoderBlock on a changed memory", block, x, moved, causal_mask=future, hint=BLOCK_HINT)
    check_cross_weights_shape("DecoderBlock with a causal mask", weights, (x.shape[0], heads, x.shape[1], memory.shape[1]))
    check_true(weights[:, :, 0, 1:].sum() > 0, "the first decoder position puts no weight on memory positions 1 and "
               "later: is the causal mask also applied to the cross-attention? The source is known in full; only the "
               "self-attention is causal")
    unmoved = torch.allclose(before[:, 0], after[:, 0], atol=1e-5)  # message only: the graded test compares every output
    check_true(not unmoved, "changing the last memory position did not move the first decoder output: the cross-attention must "
               "see the whole memory, with no causal mask")
    return weights, before, after


def check_decoder_padding_outputs(block, heads, x, memory, lengths):
    """PAD memory positions get cross weight 0 and change no output; the decoder positions are not masked by it.

    Returns (weights, out, out with only the PAD positions changed: pad_changed) for the graded test."""
    future, pad = drop_future(x.shape[1]), memory_pad(memory, lengths)
    noisy = pad_changed(memory, pad)
    call = "DecoderBlock with memory_padding_mask"
    with torch.no_grad():
        out, weights = attempt(call, block, x, memory, causal_mask=future, memory_padding_mask=pad,
                               hint="the memory padding mask (B, S) belongs to the cross-attention only")
        out_noisy, _ = attempt(f"{call}, PAD positions changed", block, x, noisy, causal_mask=future,
                               memory_padding_mask=pad, hint=BLOCK_HINT)
    check_cross_weights_shape(call, weights, (x.shape[0], heads, x.shape[1], memory.shape[1]))
    check_finite(f"cross_weights of {call}", weights, hint="a query lost every key: the mask is True at PAD, the "
                 "keys to DROP; pass it as it is")
    pad_weight = weights.masked_fill(~pad[:, None, None, :], 0.0).abs().max().item()
    check_true(pad_weight == 0, f"PAD memory positions get cross weights up to {pad_weight:.3f}: pass "
               "memory_padding_mask to the cross-attention (as key_padding_mask)")
    check_rows_sum_to_one(f"cross_weights of {call}", weights)
    masked = "PAD memory positions must not influence the decoder: mask them in the cross-attention"
    check_close("out after changing only the PAD memory positions", out_noisy, out, atol=1e-4,
                hint=masked)  # message only: the graded test compares each
    return weights, out, out_noisy


def memory_pad(memory, lengths):
    """(B, S) bool, True at the PAD positions of each sequence (from its length)."""
    return torch.arange(memory.shape[1]) >= lengths[:, None]


def pad_changed(memory, pad):
    """memory with only its PAD positions changed."""
    return memory + 50.0 * pad[..., None]


def check_post_norm_ends_with_a_norm(DecoderBlock):  # noqa: N803 (the class under test)
    """Post-norm ends with norm3: with norm3 as at initialisation, every output token has mean 0 and std 1."""
    state = block_state(8, 16, seed=8)
    state["norm3.weight"], state["norm3.bias"] = torch.ones(8), torch.zeros(8)  # norm3 as at initialisation
    block = load_state("DecoderBlock(8, 2, 16)", attempt("DecoderBlock(8, 2, 16)", DecoderBlock, 8, 2, 16), state)
    set_training(block, False)
    with torch.no_grad():
        out, _ = attempt("DecoderBlock(8, 2, 16)", block, torch.randn(2, 4, 8), 3.0 + 2.0 * torch.randn(2, 5, 8),
                         causal_mask=drop_future(4), hint=BLOCK_HINT)
    check_close("mean over the features of every output token (post-norm)", out.mean(-1), torch.zeros(2, 4), atol=1e-5,
                hint="post-norm ends with norm3(x + ffn(x)): the last operation is a LayerNorm")
    check_close("standard deviation over the features of every output token (post-norm)", out.std(-1, unbiased=False),
                torch.ones(2, 4), atol=1e-3, hint="post-norm ends with norm3(x + ffn(x)): the last operation is a LayerNorm")


def check_clean_residual(DecoderBlock, width, heads, hidden, x, memory, seed):  # noqa: N803 (the class under test)
    """Pre-norm keeps a clean residual path: with three sublayers that output zero, the block returns x."""
    state = block_state(width, hidden, seed)
    for key in state:  # every sublayer's last linear map outputs zero
        if key.startswith(("self_attention.out_proj.", "cross_attention.out_proj.", "ffn.linear2.")):
            state[key] = torch.zeros_like(state[key])
    what = f"DecoderBlock({width}, {heads}, {hidden}, norm_first=True)"
    block = load_state(what, attempt(what, DecoderBlock, width, heads, hidden, norm_first=True), state)
    set_training(block, False)
    with torch.no_grad():
        out, _ = attempt("DecoderBlock(norm_first=True)", block, x, memory, causal_mask=drop_future(x.shape[1]),
                         hint=BLOCK_HINT)
    check_close("out of a pre-norm block whose three sublayers output zero", out, x, atol=1e-6,
                hint="pre-norm is x = x + sublayer(norm(x)) three times: the residual path goes through no norm, "
                     "and every sublayer (the cross-attention too) adds to x")


def check_decoder_gradients(block, x, memory, seed=0):
    """Every parameter of the block, and the memory, get a finite gradient; returns (direction, memory's gradient)."""
    set_training(block, True)
    future = drop_future(x.shape[1])
    attempt("DecoderBlock", block, x, memory, causal_mask=future, hint=BLOCK_HINT)  # an error reads as a message
    direction = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))  # the test's, on out (B, T, D)
    gradients, (_, memory_grad) = parameter_and_input_gradients(block, (x, memory), direction, causal_mask=future)
    for name, grad in gradients.items():
        check_true(grad is not None, f"{name} got no gradient: forward never uses this parameter")
        check_finite(f"the gradient of {name}", grad)
    check_true(memory_grad is not None and memory_grad.abs().max() > 0,
               "no gradient reaches the memory: the cross-attention must read its keys and values from memory, "
               "without detaching it")
    return direction, memory_grad  # the direction of the test's loss, and the gradient that reached the memory


# ---------------------------------------------------------------- Part C: EncoderDecoder
# One mistake, one loss: a property the model lacks because its own decoder blocks lack it is the block's mistake
# (Part B's tests name it), so these checks ask the block alone before they blame encode or decode. Each such
# comparison only chooses a message ("message only"): the graded tests compare every output of the model with
# nn.Transformer's encoder and head around the model's own blocks on the grader's side.

def own_block(model, index, x, memory, **masks):
    """(out, cross weights) of the model's decoder block `index` on x and memory, or None when the block raises or
    does not give a pair of tensors (Part B's tests say why)."""
    try:
        with torch.no_grad():
            result = model.decoder_blocks[index](x, memory, **masks)
    except Exception:  # noqa: BLE001 (a block that cannot run here is Part B's to fix: the gate answers no)
        return None
    pair = isinstance(result, tuple) and len(result) == 2 and all(type(part) is torch.Tensor for part in result)
    return result if pair else None


def width_and_dtype(model):
    """The model's width and the dtype it holds its embeddings in, read from its tensors (None, None if absent)."""
    held = {row["name"]: row for row in module_tensors(model)}
    row = held.get("token_embedding.weight")
    if row is None or len(row["shape"]) != 2:
        return None, None
    dtype = getattr(torch, str(row["dtype"]), None)
    return int(row["shape"][1]), dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else torch.float32


def block_probe(model, batch, n, source_length, width, dtype, seed=0):
    """A decoder stream x (batch, n, D) and a memory (batch, S, D) in the model's dtype, to ask a block alone."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, n, width, generator=gen).to(dtype),
            torch.randn(batch, source_length, width, generator=gen).to(dtype))


def blocks_read_memory(model, width, dtype):
    """True when the first decoder block's output moves with its memory."""
    x, memory = block_probe(model, 2, 3, 4, width, dtype)
    first, second = own_block(model, 0, x, memory), own_block(model, 0, x, memory.flip(0) + 1.0)
    return bool(first and second and not torch.allclose(first[0], second[0], atol=1e-5))  # message only: chooses whom a message blames


def blocks_are_causal(model, n, width, dtype):
    """True when the first decoder block, given future_mask(n), keeps its earlier outputs when its last token moves,
    and gives finite outputs."""
    x, memory = block_probe(model, 2, n, 4, width, dtype)
    changed = x.clone()
    changed[:, -1] += torch.linspace(-3.0, 5.0, width, dtype=dtype)
    before = own_block(model, 0, x, memory, causal_mask=drop_future(n))
    after = own_block(model, 0, changed, memory, causal_mask=drop_future(n))
    return bool(before and after and torch.isfinite(before[0]).all()
                and torch.allclose(before[0][:, :-1], after[0][:, :-1], atol=1e-5))


def blocks_see_all_memory(model, n, width, dtype):
    """True when the first output of the first decoder block moves with the last memory position."""
    x, memory = block_probe(model, 2, n, 4, width, dtype)
    before = own_block(model, 0, x, memory, causal_mask=drop_future(n))
    after = own_block(model, 0, x, last_memory_moved(memory), causal_mask=drop_future(n))
    return bool(before and after and not torch.allclose(before[0][:, 0], after[0][:, 0], atol=1e-5))


def blocks_ignore_padded_memory(model, n, width, dtype):
    """True when the first decoder block's output stays put as two PAD memory positions are appended and masked."""
    x, memory = block_probe(model, 2, n, 4, width, dtype)
    longer = torch.cat([memory, memory[:, :2].flip(0) + 1.0], 1)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[:, 4:] = True
    before = own_block(model, 0, x, memory, causal_mask=drop_future(n))
    after = own_block(model, 0, x, longer, causal_mask=drop_future(n), memory_padding_mask=pad)
    return bool(before and after and torch.allclose(before[0], after[0], atol=1e-4))


def check_model_shapes(model, width, heads, layers, batch, source_length, n, vocab):
    """encode gives (B, S, D), decode (B, n, D) and one (B, H, n, S) map per block, the model (B, n, vocab)."""
    src, dec_in = torch.randint(2, vocab, (batch, source_length)), torch.randint(0, vocab, (batch, n))
    with torch.no_grad():
        memory = attempt(f"encode(src {tuple(src.shape)})", model.encode, src,
                         hint="encode: embed, every encoder block, encoder_norm")
        check_shape(f"encode(src {tuple(src.shape)})", memory, (batch, source_length, width))
        result = attempt(f"decode(dec_in {tuple(dec_in.shape)}, memory)", model.decode, dec_in, memory,
                         hint="build the causal mask for the decoder length n = dec_in.size(1) (future_mask(n)); "
                              + MODEL_HINT)
        check_true(isinstance(result, tuple) and len(result) == 2, "decode must return a pair (hidden, weights per block)")
        hidden, weights = result
        check_shape(f"hidden of decode(dec_in {tuple(dec_in.shape)}, memory)", hidden, (batch, n, width))
        check_true(isinstance(weights, (list, tuple)) and len(weights) == layers,
                   f"decode must return a list with the cross weights of each of the {layers} "
                   "decoder blocks, first block first")
        expected = (batch, heads, n, source_length)
        for index, block_weights in enumerate(weights):
            if tuple(getattr(block_weights, "shape", ())) != expected:  # the block's own shape is Part B's to judge
                alone = own_block(model, index, *block_probe(model, batch, n, source_length, width, memory.dtype),
                                  causal_mask=drop_future(n))
                block_shape = tuple(getattr(alone[1], "shape", ())) if alone else None
                if block_shape == tuple(getattr(block_weights, "shape", ())):  # message only: the block's own
                    continue  # shape is Part B's to judge; the graded test compares the weights around the blocks
            check_shape(f"cross weights of decoder block {index}", block_weights, expected,
                        hint="decode returns each block's cross weights as the block gives them")
        call = f"model(src {tuple(src.shape)}, dec_in {tuple(dec_in.shape)})"
        check_shape(call, attempt(call, model, src, dec_in, hint=MODEL_HINT), (batch, n, vocab))


def check_no_nan_logits(model, logits, src, dec_in, pad=None):
    """Logits with NaN get a message that names the mask behind them: a decoder token alone that already gets NaN sees
    no key at all (the causal mask hides the diagonal)."""
    if type(logits) is not torch.Tensor or not bool(torch.isnan(logits).any()):
        return
    with torch.no_grad():
        alone = attempt("model(src, dec_in[:, :1])", model, src, dec_in[:, :1], pad, hint=MODEL_HINT)
    check_true(not (type(alone) is torch.Tensor and bool(torch.isnan(alone).any())),
               "with a single decoder token the logits are NaN: that token's self-attention has no key left, so its "
               "weights are 0/0. A position must see itself and the positions before it: the causal mask hides only "
               "the keys above the diagonal (torch.triu(..., diagonal=1))")
    check_true(False, "the logits contain NaN: a query whose every key is hidden gets NaN weights; check which keys each "
                      "mask hides (True = hidden for nn.MultiheadAttention), the padding masks included")


def mask_runs(source_length, n, vocab):
    """The runs of the mask test, {call: (src, dec_in[, src_padding_mask])}, drawn from the global generator."""
    src, dec_in = torch.randint(2, vocab, (4, source_length)), torch.randint(0, vocab, (4, n))
    changed, moved = dec_in.clone(), src.clone()
    changed[:, -1] = (changed[:, -1] + 1) % vocab
    moved[:, -1] = (moved[:, -1] - 1) % 10 + 2  # another digit in the last source position
    pad = torch.zeros(4, source_length + 2, dtype=torch.bool)
    pad[:, source_length:] = True
    return {"model(src, dec_in)": (src, dec_in), "model(another src, dec_in)": ((src + 3) % 10 + 2, dec_in),
            "model(src, changed dec_in)": (src, changed), "model(changed src, dec_in[:, :1])": (moved, dec_in[:, :1]),
            "model(src, dec_in[:, :1])": (src, dec_in[:, :1]),
            "model(src with two PAD appended, dec_in, src_padding_mask)": (torch.cat([src, torch.full((4, 2), 5)], 1),
                                                                          dec_in, pad)}


def check_model_masks_outputs(model, source_length, n, vocab):
    """The decoder is causal, sees the whole source, and source PAD changes nothing; returns (the runs, the logits
    of each) for the graded test, which compares every one."""
    runs = mask_runs(source_length, n, vocab)
    got = {}

    def logits(call):  # your model's logits for one of the runs, kept for the comparison of the graded test
        with torch.no_grad():
            got[call] = attempt(call, model, *runs[call], hint=MODEL_HINT)
        return got[call]

    base, calls = logits("model(src, dec_in)"), list(runs)
    src, dec_in = runs[calls[0]]
    check_no_nan_logits(model, base, src, dec_in)
    width, dtype = width_and_dtype(model)

    def blocks_have(gate, *sizes):  # a model whose width cannot be read is decode's to fix
        return width is None or gate(model, *sizes, width, dtype)

    check_true((logits(calls[1]) - base).abs().max().item() > 1e-4 or not blocks_have(blocks_read_memory),
               "the logits do not depend on the source at all: the decoder reads it only through the memory, "
               "so decode must hand the memory to every decoder block")
    earlier_moved = not torch.allclose(logits(calls[2])[:, :-1], base[:, :-1], atol=1e-5)  # message only: graded below
    check_true(not earlier_moved or not blocks_have(blocks_are_causal, n),
               "changing the last decoder token moved the logits of the earlier decoder positions: a decoder position "
               "must not see later decoder tokens: pass the causal mask to every block, a bool tensor (True = "
               "blocked): a float mask of 0s and 1s is added to the scores and blocks nothing")
    check_true((logits(calls[3]) - logits(calls[4])).abs().max().item() > 1e-4
               or not blocks_have(blocks_see_all_memory, n), "the first decoder position does not react to the "
               "last source token: every decoder position must see the whole memory (pass decode no causal mask of "
               "the source)")
    pad_moved = not torch.allclose(logits(calls[5]), base, atol=1e-4)  # message only: graded below
    check_true(not pad_moved or not blocks_have(blocks_ignore_padded_memory, n),
               "the logits moved when two PAD tokens were appended to the source (with a padding mask): pass the "
               "padding mask to the encoder blocks in encode and to the decoder blocks (as memory_padding_mask) in "
               "decode")
    return runs, got


def blocks_like_layers(model, layers, dtype):
    """True when each decoder block of the model computes what the matching nn.TransformerDecoderLayer of `layers`
    (holding the same parameters) computes, on a probe with a causal mask."""
    for index, layer in enumerate(layers):
        x, memory = block_probe(model, 2, 3, 4, layer.self_attn.embed_dim, dtype, seed=index)
        mine = own_block(model, index, x, memory, causal_mask=drop_future(3))
        with torch.no_grad():
            theirs = layer(x.float(), memory.float(), tgt_mask=drop_future(3))
        if not (mine and tuple(mine[0].shape) == tuple(theirs.shape)
                and torch.allclose(mine[0].float(), theirs, atol=1e-4)):
            return False
    return True


def check_model_like_twin(model, twin, src, dec_in):
    """The model's logits against `twin` (nn.Transformer holding the same weights), for a model whose decoder blocks
    compute what the twin's decoder layers compute: a block that does not is Part B's to fix, and the graded test
    judges encode and decode around your own blocks."""
    with torch.no_grad():
        mine = attempt("model(src, dec_in)", model, src, dec_in, hint=MODEL_HINT)
        theirs = twin(src, dec_in)
    same = type(mine) is torch.Tensor and tuple(mine.shape) == tuple(theirs.shape) and torch.allclose(
        mine.float(), theirs, atol=1e-4)
    if same or not blocks_like_layers(model, twin.transformer.decoder.layers, width_and_dtype(model)[1] or torch.float32):
        return
    check_close("logits of your model vs nn.Transformer holding the same weights", mine, theirs, atol=1e-4,
                hint="encode: embed, encoder blocks, encoder_norm; decode: embed, decoder blocks with the causal mask "
                     "and the memory, decoder_norm")


def check_weights_per_block_outputs(model, src, dec_in, layers):
    """decode returns one cross weight map per decoder block, (B, H, n, S) each; returns (memory, the maps)."""
    with torch.no_grad():
        memory = attempt("encode(src)", model.encode, src, hint="encode: embed, every encoder block, encoder_norm")
        result = attempt("decode(dec_in, memory)", model.decode, dec_in, memory, hint=MODEL_HINT)
    check_true(isinstance(result, tuple) and len(result) == 2, "decode must return a pair (hidden, weights per block)")
    weights = list(result[1]) if isinstance(result[1], (list, tuple)) else []
    check_true(len(weights) == layers, f"decode must return {layers} cross weight maps, one per decoder block, first "
               "block first")
    n, width = dec_in.shape[1], memory.shape[-1]

    def sums_to_one(weights):
        return type(weights) is torch.Tensor and weights.dim() > 0 and bool(torch.allclose(  # message only: graded
            weights.sum(-1), torch.ones((), dtype=weights.dtype), atol=1e-5))

    for index, block_weights in enumerate(weights):
        if sums_to_one(block_weights):
            continue
        alone = own_block(model, index, *block_probe(model, 2, n, src.shape[1], width, memory.dtype),
                          causal_mask=drop_future(n))
        if alone and sums_to_one(alone[1]):  # a block whose own weights do not sum to 1 is Part B's to fix
            check_rows_sum_to_one(f"cross weights of decoder block {index}", block_weights)
    return memory, weights


def check_encoder_learns(model, twin, src, dec_in, dec_out):
    """A loss on the logits gives every encoder parameter a gradient; returns (direction, the gradients)."""
    set_training(model, True)
    attempt("model(src, dec_in)", model, src, dec_in, hint=MODEL_HINT)  # an error reads as a message
    logits = twin(src, dec_in).detach().requires_grad_()  # nn.Transformer's logits with the same weights
    F.cross_entropy(logits.transpose(1, 2), dec_out).backward()  # the test's loss there; its gradient on the logits
    # the encoder's parameters only: the decoder's gradients are the decoder block test's (Part B)
    encoder = parameter_gradients_of(model, ("encoder_blocks.", "encoder_norm."), (src, dec_in), logits.grad)
    check_true(bool(encoder), "the model has no parameter named encoder_blocks.<i>.… or encoder_norm.…: keep the "
               "names the exercise gives (encoder_blocks, an nn.ModuleList of blocks, then encoder_norm)")
    reached = [name for name, grad in encoder.items() if grad is not None and bool(grad.abs().max() > 0)]
    if not reached:  # no gradient at all: the encoder's path, unless the decoder blocks never read the memory
        width, dtype = width_and_dtype(model)
        if width is not None and not blocks_read_memory(model, width, dtype):
            return logits.grad, encoder  # a block that ignores its memory is Part A's or B's mistake to fix
    for name, grad in encoder.items():
        check_true(bool(reached), f"{name} gets no gradient from the loss on the logits, nor does any encoder "
                   "parameter: the encoder learns only through the memory, so decode must use it as it is (no "
                   ".detach(), and encode must not run under torch.no_grad())")
        check_true(grad is not None and bool(grad.abs().max() > 0), f"{name} gets no gradient while other encoder "
                   "parameters do: forward never uses this parameter (encode: embed, every encoder block, then "
                   "encoder_norm)")
        check_finite(f"the gradient of {name}", grad)
    return logits.grad, encoder  # the direction of the test's loss, and the encoder's gradients the kernel reported


def check_anti_diagonal(weights_per_block, batch, length):
    """The trained model's first block reads the source backwards: decoder position i looks at S - 1 - i."""
    check_true(isinstance(weights_per_block, (list, tuple)) and len(weights_per_block) == 2,
               "decode must return the cross weights of both decoder blocks as a list")
    first = weights_per_block[0]
    check_shape("cross weights of the first decoder block", first, (batch, 4, length + 1, length),
                hint="one (n, S) map per head: (batch, head, query, key)")
    check_rows_sum_to_one("cross weights of the first decoder block", first)
    mean = first.mean(dim=(0, 1))
    check_true(bool((mean[:length].argmax(-1) == torch.arange(length - 1, -1, -1)).all()),
               "in the trained model, decoder position i does not look mostly at source position S - 1 - i (from 0): "
               "the cross weights should form the anti-diagonal; are they the cross-attention's, queries from the "
               "decoder and keys from the memory?")


def check_decoder_causal(block, x, memory):
    """check_decoder_causal_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_decoder_causal_outputs(block, x, memory)


def check_sees_all_memory(block, heads, x, memory):
    """check_sees_all_memory_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_sees_all_memory_outputs(block, heads, x, memory)


def check_decoder_padding(block, heads, x, memory, lengths):
    """check_decoder_padding_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_decoder_padding_outputs(block, heads, x, memory, lengths)


def check_model_masks(model, source_length, n, vocab):
    """check_model_masks_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_model_masks_outputs(model, source_length, n, vocab)


def check_weights_per_block(model, src, dec_in, layers):
    """check_weights_per_block_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_weights_per_block_outputs(model, src, dec_in, layers)
