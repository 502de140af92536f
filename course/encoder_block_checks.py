"""The checks of chapter 04 (the encoder block), which its graded test cells call.

Each check is handed what it tests (your `FeedForward` or `EncoderBlock` class, a block holding
parameters the test drew, your `masked_token_loss`) and checks what the exercise promises of it:
shapes, PAD and the causal mask, each submodule what Part C names, gradients reaching every
parameter. The graded tests also compare the block's outputs with `nn.TransformerEncoderLayer`
holding the same parameters, on the grader's side. The block's tests judge it around the FFN you
wrote (`own_ffn`): a mistake in the FFN costs Part A's tests only. A failed check names the call and
says where to look. Nothing here computes a block's answer.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from nboracle import draw_parameters, input_gradients, load_tensors, module_tensors, parameter_gradients

from .checks import attempt, check_close, check_finite, check_rows_sum_to_one, check_shape, check_true


def check_ffn_layers(FeedForward, width, hidden, gen):  # noqa: N803 (the class under test)
    """FeedForward(width, hidden) holds linear1 and linear2 of the right shapes, each used where Part A says."""
    name = f"FeedForward({width}, {hidden})"
    ffn = FeedForward(width, hidden)
    held = {row["name"]: row for row in module_tensors(ffn)}
    for layer, (n_in, n_out) in (("linear1", (width, hidden)), ("linear2", (hidden, width))):
        for part, shape in (("weight", (n_out, n_in)), ("bias", (n_out,))):
            row = held.get(f"{layer}.{part}")
            check_true(row is not None and row["kind"] == "parameter",
                       f"{name} holds no parameter {layer}.{part}: create self.{layer} = nn.Linear(...)")
            check_true(row["shape"] == shape,
                       f"{name}.{layer}.{part} has shape {row['shape']}, so {name}.{layer} does not map "
                       f"{n_in} -> {n_out} features (expected {n_in} -> {n_out}): linear1 widens width -> hidden, "
                       "linear2 narrows hidden -> width")
    params = draw_parameters(ffn, gen)  # the test chooses the weights, then silences one layer at a time
    x = torch.randn(3, width, generator=gen)
    load_tensors(ffn, {"linear2.weight": torch.zeros(width, hidden)})
    with torch.no_grad():
        check_close(f"{name}(x) with linear2's weight set to 0", ffn(x), params["linear2.bias"].expand(3, width),
                    atol=1e-6, hint="then every position must get linear2's bias: linear2 must be the last layer, "
                                    "an nn.Linear(hidden, width) applied to the hidden features")
    bias = params["linear1.bias"].abs() + 0.5  # positive: the activation lets it through
    outputs = []
    for scale in (1.0, 2.0):  # linear1's weight 0: each output depends on linear1's bias only
        load_tensors(ffn, {"linear2.weight": params["linear2.weight"], "linear1.weight": torch.zeros(hidden, width),
                           "linear1.bias": scale * bias})
        with torch.no_grad():
            out = ffn(x)
        outputs.append(out)
        check_close(f"{name}(x) with linear1's weight set to 0", out, out[:1].expand(3, width),
                    atol=1e-5, hint="then every position must get the same output: linear1 must be an "
                                    "nn.Linear(width, hidden) applied to x, followed by the activation and linear2")
    moved = (outputs[1] - outputs[0]).abs().max().item()
    check_true(moved > 1e-4, f"with linear1's weight set to 0, doubling linear1's bias left {name}(x) unchanged: "
               "linear1 must be an nn.Linear(width, hidden), with its bias, followed by the activation and linear2")
    return ffn


MASKS_HINT = ("pass padding_mask (B, T) to the attention as key_padding_mask and causal_mask (T, T) as attn_mask "
              "(both True = drop)")


FORWARD_HINT = "compare your forward with the formulas of Part C"
TIME_FIRST = "the attention reads x of shape (B, T, D) as (T, B, D): build it with batch_first=True"
LOST_EVERY_KEY = ("a query lost every key, which gives NaN: both masks are True for what to DROP (key_padding_mask: "
                  "PAD keys, attn_mask: later keys), so pass padding_mask and causal_mask as they are, not inverted")


def ffn_hint(block, width):
    """Why the block's own ffn fails on x of the model width, or None when it runs."""
    try:
        with torch.no_grad():
            block.ffn(torch.zeros(2, 3, width))
    except Exception:  # noqa: BLE001 (only whether it runs)
        return (f"the block's ffn fails on x of width {width}: build it as FeedForward(width, hidden), width "
                "first, and make Part A's tests pass")
    return None


def block_hint(block, width):
    """The likeliest cause of an error in the block: its FFN, the attention's layout, else the masks' places."""
    try:
        with torch.no_grad():
            layout = tuple(block(torch.zeros(2, 3, width))[1].shape)  # B = 2, T = 3
    except Exception:  # noqa: BLE001 (the block fails without masks too: the masks are not the cause)
        layout = ()
    if layout[:1] == (3,):
        return TIME_FIRST
    return ffn_hint(block, width) or MASKS_HINT


def forward_hint(block, out, width):
    """What a block whose output is wrong most likely does: NaN from an inverted mask, the batch read as time,
    else the formulas to compare with."""
    if isinstance(out, torch.Tensor) and not bool(torch.isfinite(out).all()):
        return LOST_EVERY_KEY
    return TIME_FIRST if block_hint(block, width) == TIME_FIRST else FORWARD_HINT


def call_block(what, block, x, **masks):
    """block(x, **masks) -> (out, weights); an error or another result reads as a message naming its cause."""
    try:
        result = block(x, **masks)
    except Exception:  # noqa: BLE001 (called again below, to report the error with its likely cause)
        result = attempt(what, block, x, hint=block_hint(block, x.shape[-1]), **masks)
    check_true(isinstance(result, tuple) and len(result) == 2, "EncoderBlock.forward must return a pair (out, weights)")
    return result


def weights_hint(weights, batch, heads, length):
    """Why the weights have another shape than (B, H, T, T)."""
    shape = tuple(getattr(weights, "shape", ()))
    if shape == (length, heads, batch, batch) and batch != length:
        return TIME_FIRST
    if len(shape) == 4 and shape[0] == batch and shape[2:] == (length, length) and shape[1] not in (1, heads):
        return (f"the attention has {shape[1]} heads, not the block's {heads}: the second argument of "
                "nn.MultiheadAttention is the number of heads (each head then has width / heads features)")
    return "keep one (T, T) map per head: call the attention with average_attn_weights=False"


def own_ffn(block):
    """The block's own ffn as a function: the block's tests judge the block around the FFN you wrote (Part A's
    tests judge the FFN itself)."""
    def ffn(h):
        out = attempt("your block's ffn", lambda: block.ffn(h),
                      hint="the block's FFN fails on its own: make Part A's tests pass first")
        check_shape("your block's ffn(h)", out, tuple(h.shape), hint="make Part A's tests pass first")
        return out
    return ffn


def check_block_modules(EncoderBlock, FeedForward, width, heads, hidden, norm_first, gen):  # noqa: N803
    """EncoderBlock(...) holds attention, norm1, norm2 and ffn of the right shapes, each placed as Part C says."""
    block = EncoderBlock(width, heads, hidden, norm_first=norm_first)
    name = f"EncoderBlock({width}, {heads}, {hidden}, norm_first={norm_first})"
    held = {row["name"]: row for row in module_tensors(block)}
    def ffn_of(n_in, n_hidden):  # Part A's FeedForward as you wrote it, its tensors as the block would hold them
        return {f"ffn.{row['name']}": tuple(row["shape"]) for row in module_tensors(FeedForward(n_in, n_hidden))}

    own = ffn_of(width, hidden) or {"ffn.linear1.weight": (hidden, width), "ffn.linear1.bias": (hidden,),
                                    "ffn.linear2.weight": (width, hidden), "ffn.linear2.bias": (width,)}
    wanted = {"attention.in_proj_weight": (3 * width, width), "attention.in_proj_bias": (3 * width,),
              "attention.out_proj.weight": (width, width), "attention.out_proj.bias": (width,),
              "norm1.weight": (width,), "norm1.bias": (width,), "norm2.weight": (width,), "norm2.bias": (width,)}
    for tensor, shape in wanted.items():
        module = tensor.rsplit(".", 1)[0].replace("_weight", "").replace("_bias", "")
        check_true(tensor in held, f"{name} holds no {tensor}: {module} must be the module Part C describes "
                   "(attention = nn.MultiheadAttention(width, heads, ...), norm1 and norm2 = nn.LayerNorm(width), "
                   "ffn = your FeedForward(width, hidden))")
        check_true(held[tensor]["shape"] == shape, f"{name}.{tensor} has shape {held[tensor]['shape']}, expected "
                   f"{shape}: build {module} for width {width}")
    built = {key: tuple(row["shape"]) for key, row in held.items() if key.startswith("ffn.")}
    check_true(built != ffn_of(hidden, width) or width == hidden,
               f"{name}.ffn is FeedForward({hidden}, {width}): the arguments are swapped, build it as "
               "FeedForward(width, hidden), width first")
    check_true(built == own, f"{name}.ffn holds {built or 'no tensors'}, but your FeedForward({width}, {hidden}) holds "
               f"{own}: build ffn as FeedForward(width, hidden), which must have hidden size {hidden}")
    params = draw_parameters(block, gen)
    x = torch.randn(2, 3, width, generator=gen)  # B = 2, T = 3: batch first or not shows in the shapes
    attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
    attention.load_state_dict({key[len("attention."):]: value for key, value in params.items()
                               if key.startswith("attention.")})
    def norm1(h):
        return nn.functional.layer_norm(h, (width,), params["norm1.weight"], params["norm1.bias"])

    def norm2(h):
        return nn.functional.layer_norm(h, (width,), params["norm2.weight"], params["norm2.bias"])

    ffn = own_ffn(block)  # your FeedForward, judged by Part A's tests
    attended = norm1(x) if norm_first else x
    block.train()  # train mode: attention dropout, if any, shows
    with torch.no_grad():
        _, weights = call_block(name, block, x)
        true_weights = attention(attended, attended, attended, average_attn_weights=False)[1]
    check_true(tuple(weights.shape) != (3, heads, 2, 2),
               f"{name} reads x of shape (2, 3, {width}) as (T, B, D): its attention must be built with "
               "batch_first=True: inputs are (B, T, D)")
    check_close(f"{name} attention weights in train mode", weights, true_weights, atol=1e-5,
                hint=f"build attention as nn.MultiheadAttention({width}, {heads}, dropout=0.0, batch_first=True) "
                     "(in train mode a dropout above 0 changes the weights: use dropout=0.0), reading "
                     + ("norm1(x)" if norm_first else "x"))
    load_tensors(block, {"attention.out_proj.weight": torch.zeros(width, width),
                         "attention.out_proj.bias": torch.zeros(width)})  # the attention sublayer outputs 0
    expected = x + ffn(norm2(x)) if norm_first else norm2(norm1(x) + ffn(norm1(x)))
    with torch.no_grad():
        out, _ = call_block(name, block, x)
    causes = {"norm1 is used for both sublayers and norm2 never": x + ffn(norm1(x))} if norm_first else {
        # with the attention at 0, a pre-norm FFN reads x either way
        "the FFN reads the block's input x instead of h = norm1(x + attention(x))": norm2(norm1(x) + ffn(x))}
    check_close(f"{name} output with the attention's output projection set to 0", out, expected, atol=1e-5,
                likely_causes=causes, hint="norm1 and norm2 must be nn.LayerNorm(width), with their learnable scale "
                "and shift, and ffn your FeedForward(width, hidden), placed as Part C's formulas say")


def check_padding_outputs(block, x, lengths, heads):
    """PAD keys (from `lengths`) get weight 0 and change no real token; returns the outputs of the real tokens of
    sequence 0 without its PAD and with it (the graded test compares both with the reference)."""
    batch, length, width = x.shape
    pad = torch.arange(length) >= lengths[:, None]  # (B, T), True = PAD
    real = int(lengths[0])
    with torch.no_grad():
        out, weights = call_block("EncoderBlock with a padding mask", block, x, padding_mask=pad)
        short, _ = call_block("EncoderBlock on sequence 0 without its PAD", block, x[:1, :real])
    check_shape("weights with a padding mask", weights, (batch, heads, length, length),
                hint=weights_hint(weights, batch, heads, length))
    check_finite("weights with a padding mask", weights, hint="a query lost every key: nn.MultiheadAttention's "
                 "key_padding_mask is True for keys to DROP (PAD), so pass padding_mask as it is, not ~padding_mask")
    pad_weight = weights.masked_fill(~pad[:, None, None, :], 0.0).abs().max().item()  # largest weight on a PAD key
    check_true(pad_weight == 0, f"PAD keys get weights up to {pad_weight:.3f}: pass padding_mask to the attention "
               "as key_padding_mask (True = drop the key)")
    check_rows_sum_to_one("weights with a padding mask", weights)
    moved = not torch.allclose(out[:1, :real], short, atol=1e-5)  # message only: the graded test compares each
    check_true(not moved, "the outputs of the real tokens of sequence 0 changed when PAD was appended: "
               "PAD keys must not influence real tokens")
    return short, out[:1, :real]


def last_changed(x):
    """x with its last token changed (not by a constant shift: LayerNorm removes those)."""
    changed = x.clone()
    changed[:, -1] += torch.linspace(-3.0, 5.0, x.shape[-1])
    return changed


def check_causal_outputs(block, x, heads):
    """With a causal mask no position uses a later one; returns the outputs on x and on last_changed(x)."""
    length = x.shape[1]
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)  # True = forbidden
    with torch.no_grad():
        before, weights = call_block("EncoderBlock with a causal mask", block, x, causal_mask=future)
        after, _ = call_block("EncoderBlock with a causal mask", block, last_changed(x), causal_mask=future)
    check_shape("weights with a causal mask", weights, (x.shape[0], heads, length, length),
                hint=weights_hint(weights, x.shape[0], heads, length))
    past_moved = not torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5)  # message only: names the leak
    check_true(not past_moved, "changing the last token moved the outputs of earlier positions: pass causal_mask "
               "to the attention as attn_mask (True = forbidden pair)")
    check_true(weights.masked_select(future.expand_as(weights)).abs().max() == 0,
               "some queries put weight on later keys: pass causal_mask as attn_mask")
    return before, after


def check_post_norm_ends_with_a_norm(EncoderBlock):  # noqa: N803 (the class under test)
    """Post-norm ends with norm2: with the LayerNorms as initialised, every output token has mean 0 and std 1."""
    block = EncoderBlock(6, 3, 12, norm_first=False).eval()
    draw_parameters(block, torch.Generator().manual_seed(5))  # random weights, then the LayerNorms as initialised:
    load_tensors(block, {"norm1.weight": torch.ones(6), "norm1.bias": torch.zeros(6),
                         "norm2.weight": torch.ones(6), "norm2.bias": torch.zeros(6)})
    with torch.no_grad():
        out, _ = call_block("EncoderBlock(6, 3, 12, norm_first=False)", block, torch.randn(2, 4, 6))
    check_close("mean over features of each output token (post-norm, LayerNorms at scale 1 and shift 0)", out.mean(-1),
                torch.zeros(2, 4), atol=1e-4, hint="post-norm ends with norm2(x + ffn(x)); is norm_first=False doing pre-norm?")
    check_close("std over features of each output token (post-norm, LayerNorms at scale 1 and shift 0)",
                out.std(-1, unbiased=False),
                torch.ones(2, 4), atol=1e-3, hint="post-norm ends with norm2(x + ffn(x)); is norm_first=False doing pre-norm?")


def check_clean_residual(EncoderBlock):  # noqa: N803 (the class under test)
    """Pre-norm keeps a clean residual path: with both sublayers outputting zero, the block returns x."""
    block = EncoderBlock(6, 3, 12, norm_first=True).eval()
    draw_parameters(block, torch.Generator().manual_seed(6))
    ffn_zero = {row["name"]: torch.zeros(row["shape"]) for row in module_tensors(block)  # your FFN, whatever its
                if row["name"].startswith("ffn.") and row["kind"] == "parameter"}  # layers' names: all of it 0
    load_tensors(block, {"attention.out_proj.weight": torch.zeros(6, 6), "attention.out_proj.bias": torch.zeros(6),
                         **ffn_zero})  # both sublayers output zero
    x = torch.randn(2, 4, 6)
    with torch.no_grad():
        out, _ = call_block("EncoderBlock(6, 3, 12, norm_first=True)", block, x)
    check_close("pre-norm block output when both sublayers output zero", out, x, atol=1e-6,
                hint="pre-norm is x + sublayer(norm(x)): the residual path must not pass through a LayerNorm "
                     "(is norm_first=True doing post-norm?)")


LOSS_HINT = "average the squared error over the features of each token, the last axis (dim=-1), then over the real tokens"


def check_ignores_pad(masked_token_loss, encoded, target, valid):
    """PAD positions (valid False) neither change the loss nor receive a gradient."""
    base = attempt("masked_token_loss(encoded, target, valid)", masked_token_loss, encoded, target, valid,
                   hint=LOSS_HINT)
    check_true(isinstance(base, torch.Tensor) and base.dim() == 0, f"masked_token_loss returned "
               f"{type(base).__name__} {getattr(base, 'shape', '')}, expected a 0-d tensor (no .item(), no float())")
    noisy = encoded + 100.0 * (~valid)[..., None]  # change PAD positions only
    loss_noisy = attempt("masked_token_loss with the PAD positions changed", masked_token_loss, noisy, target, valid,
                         hint=LOSS_HINT)
    changed = not torch.isclose(loss_noisy, base, atol=1e-5)  # message only: both are compared with mse_loss below
    check_true(not changed, "the loss changed when only PAD positions changed: average over the valid tokens only")
    expected = torch.nn.functional.mse_loss(encoded[valid], target[valid])  # PAD left out
    for what, loss in (("", base), (" after changing the PAD positions", loss_noisy)):
        check_close(f"masked_token_loss{what}", loss, expected, atol=1e-5,
                    hint="average the squared error over the features of each token, then over the real tokens")
    d_encoded = attempt("the gradient of masked_token_loss(encoded, target, valid)", input_gradients, masked_token_loss,
                        (encoded, target, valid), hint="the loss must be differentiable in encoded: keep every step a "
                        "new tensor, none in place on encoded (no sub_, no -=)")[0]  # d loss / d encoded
    check_true(d_encoded is not None and d_encoded[~valid].abs().max() == 0,
               "PAD positions receive a gradient: multiply the per-token error by the valid mask")


def check_gradients(masked_token_loss, layer, x, pad, future=None):
    """Through masked_token_loss every parameter of `layer` gets a finite gradient; returns (gradients, d loss /
    d encoded). `layer` is PyTorch's encoder block (nn.TransformerEncoderLayer), so that this judges the loss
    whatever your block does (Part C's tests judge the block)."""
    layer.train()
    masks = {"src_key_padding_mask": pad, "src_mask": future}
    encoded = layer(x, **masks)
    target = torch.randn_like(encoded)
    loss = attempt("masked_token_loss(encoded, target, valid)", masked_token_loss, encoded, target, ~pad,
                   hint="make the loss tests above pass first")
    check_true(isinstance(loss, torch.Tensor) and loss.requires_grad,
               "masked_token_loss returned something without a gradient: keep it a tensor (no .item(), no float())")
    check_finite("the loss", loss)
    # back-propagate the loss in two steps: to the block's output, then through the block (the chain rule)
    d_encoded = input_gradients(masked_token_loss, (encoded, target, ~pad))[0]
    check_finite("the gradient of masked_token_loss with respect to encoded", d_encoded)
    gradients = parameter_gradients(layer, x, d_encoded, **masks)
    for name, grad in gradients.items():
        check_true(grad is not None, f"{name} of the block got no gradient through masked_token_loss: the loss must "
                   "be computed from encoded, keeping the autograd graph")
        check_finite(f"the gradient of {name} through masked_token_loss", grad)
    return gradients, d_encoded


def check_padding(block, x, lengths, heads):
    """check_padding_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_padding_outputs(block, x, lengths, heads)


def check_causal(block, x, heads):
    """check_causal_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_causal_outputs(block, x, heads)
