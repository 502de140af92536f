"""Chapter 04's references (the grader's side only): nn.TransformerEncoderLayer holding a block's parameters,
and the hidden tests' comparisons of the block's outputs with it (after the visible tests' property checks)."""

from __future__ import annotations

import torch
from nboracle import draw_parameters, parameter_gradients, probed_points, read_parameters
from torch import nn

from course.checks import attempt, check_close, check_true
from course.encoder_block_checks import (
    check_causal_outputs,
    check_padding_outputs,
    forward_hint,
    last_changed,
    own_ffn,
)

PYTORCH_NAMES = {"attention.": "self_attn.", "ffn.linear1.": "linear1.", "ffn.linear2.": "linear2.",
                 "norm1.": "norm1.", "norm2.": "norm2."}


def reference_layer(params, width, heads, hidden, norm_first, ffn=None):
    """nn.TransformerEncoderLayer holding the parameters the test loaded into the block; with `ffn`, that FFN
    (the block's own, see own_ffn) in place of the layer's."""
    layer = nn.TransformerEncoderLayer(width, heads, hidden, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=norm_first)
    state = {theirs + name[len(mine):]: value for name, value in params.items()
             for mine, theirs in PYTORCH_NAMES.items() if name.startswith(mine)}
    if ffn is not None:
        layer._ff_block = ffn
        state = {name: value for name, value in state.items() if not name.startswith("linear")}
    try:
        layer.load_state_dict(state, strict=ffn is None)
        copied = True
    except RuntimeError:
        copied = False
    check_true(copied, "could not copy your block's parameters into nn.TransformerEncoderLayer: attention, norm1, "
               "norm2 (nn.LayerNorm(width)), ffn.linear1 and ffn.linear2 must be the modules Part C describes")
    return layer.train()  # dropout is 0; train mode avoids the fused fast path


def block_mistakes(layer, x, pad, future, norm_first):
    """What the typical mistakes in the block's forward give, each computed by hand from the reference layer's parts
    (its FFN the block's own, when the layer was built with it): named cause -> output."""
    def block_like(pre, attn_res=True, ffn_res=True, swap=False, res_norm=False, branch_norm=False, one_norm=False,
                   masks=(pad, future), other_input=False, ffn_reads_x=False, ffn_adds_x=False):
        n1, n2 = (layer.norm2, layer.norm1) if swap else (layer.norm1, layer.norm2)
        n2 = n1 if one_norm else n2
        ffn = layer._ff_block

        def attn(h):
            return layer.self_attn(h, h, h, key_padding_mask=masks[0], attn_mask=masks[1], need_weights=False)[0]

        if branch_norm:
            x1 = x + n1(attn(x))
            return x1 + n2(ffn(x1))
        if pre:
            h = (n1(x) if res_norm else x if attn_res else 0) + attn(x if other_input else n1(x))
            return (n2(h) if res_norm else x if ffn_adds_x else h if ffn_res else 0) + ffn(n2(x if ffn_reads_x else h))
        h = n1((x if attn_res else 0) + attn(n1(x) if other_input else x))
        return n2((x if ffn_adds_x else h if ffn_res else 0) + ffn(x if ffn_reads_x else h))

    unmasked = {}
    with torch.no_grad():
        if pad is not None and bool(pad.any()):
            unmasked["padding_mask is not passed to the attention as key_padding_mask"] = block_like(
                norm_first, masks=(None, future))
        if future is not None:
            unmasked["causal_mask is not passed to the attention as attn_mask"] = block_like(norm_first, masks=(pad, None))
        return {**unmasked,
            ("post-norm is used although norm_first=True" if norm_first else
             "pre-norm is used although norm_first=False"): block_like(not norm_first),
            "the residual around the attention sublayer is missing": block_like(norm_first, attn_res=False),
            "the residual around the FFN sublayer is missing": block_like(norm_first, ffn_res=False),
            "norm1 and norm2 are swapped": block_like(norm_first, swap=True),
            "the residual adds norm(x) instead of x": block_like(norm_first, res_norm=True),
            "norm1 is used for both sublayers and norm2 never": block_like(norm_first, one_norm=True),
            ("the attention reads x instead of norm1(x)" if norm_first else
             "the attention reads norm1(x) instead of x"): block_like(norm_first, other_input=True),
            ("the FFN reads norm2(x) of the block's input x instead of norm2(h), h = x + attention(norm1(x))"
             if norm_first else "the FFN reads the block's input x instead of h = norm1(x + attention(x))"):
                block_like(norm_first, ffn_reads_x=True),
            ("the FFN's residual adds the block's input x instead of h = x + attention(norm1(x)), the first "
             "sublayer's result" if norm_first else "the FFN's residual adds the block's input x instead of "
             "h = norm1(x + attention(x)), the first sublayer's result"): block_like(norm_first, ffn_adds_x=True),
            "each LayerNorm is applied to its sublayer's output, x + norm(sublayer(x)), instead of "
            + ("to the sublayer's input, x + sublayer(norm(x))" if norm_first else
               "to the sum, norm(x + sublayer(x))"): block_like(norm_first, branch_norm=True),
        }


def padding_agrees(block, params, x, lengths, heads, hidden, norm_first):
    """check_padding_outputs, then the real tokens' outputs compared with the layer holding `params` (what the test
    loaded into the block) around the block's own FFN."""
    short, appended = check_padding_outputs(block, x, lengths, heads)
    layer = reference_layer(params, x.shape[-1], heads, hidden, norm_first, own_ffn(block))
    with torch.no_grad():
        expected = layer(x[:1, :int(lengths[0])])  # sequence 0 without its PAD
    for what, mine in (("without PAD", short), ("with PAD appended", appended)):
        seq0 = x[:1, :int(lengths[0])]
        check_close(f"outputs of the real tokens of sequence 0, {what}", mine, expected, atol=1e-5,
                    hint=forward_hint(block, mine, x.shape[-1]),
                    likely_causes=block_mistakes(layer, seq0, None, None, norm_first))


def causal_agrees(block, params, x, heads, hidden, norm_first):
    """check_causal_outputs, then both outputs compared with the layer holding `params`, with the causal mask."""
    before, after = check_causal_outputs(block, x, heads)
    length = x.shape[1]
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)  # True = forbidden
    layer = reference_layer(params, x.shape[-1], heads, hidden, norm_first, own_ffn(block))
    with torch.no_grad():
        expected = {"x": layer(x, src_mask=future), "the changed x": layer(last_changed(x), src_mask=future)}
    same_last = torch.allclose(before[:, -1], after[:, -1], atol=1e-5)  # message only: the reference decides below
    agree = all(torch.allclose(mine, expected[what], atol=1e-5) for what, mine in (("x", before), ("the changed x", after)))
    check_true(agree or not same_last, "changing the last token did not change its own output: does the block use "
               "its input?")
    for what, mine in (("x", before), ("the changed x", after)):
        given = x if what == "x" else last_changed(x)
        check_close(f"outputs with a causal mask on {what}", mine, expected[what], atol=1e-5,
                    hint=forward_hint(block, mine, x.shape[-1]) + ", the causal mask passed as attn_mask",
                    likely_causes=block_mistakes(layer, given, None, future, norm_first))


def gradients_agree(EncoderBlock, norm_first, seed):  # noqa: N803 (the class under test)
    """The block's parameter gradients along a direction of the test's own, against the same backward pass through
    nn.TransformerEncoderLayer holding the same parameters, and the block's outputs at the points the gradient
    checks moved a parameter to (answers too): a block whose forward is right but whose backward is not (a
    .detach(), a .data) loses Part C's points here. Another FFN than Part A's is Part A's business: then nothing
    is compared."""
    gen = torch.Generator().manual_seed(seed)
    ffn_differs = False  # found on drawn weights: a bias the FFN ignores is invisible where it was built as zeros
    for trial in range(3):
        heads, batch = (int(n) for n in torch.randint(1, 4, (2,), generator=gen))
        d_head, length = int(torch.randint(2, 4, (1,), generator=gen)), int(torch.randint(2, 7, (1,), generator=gen))
        pad = torch.arange(length) >= torch.randint(1, length + 1, (batch,), generator=gen)[:, None]
        future = torch.triu(torch.ones(length, length, dtype=torch.bool), 1) if trial else None
        width = heads * d_head
        block = EncoderBlock(width, heads, 9, norm_first=norm_first)
        # the last trial: the weights the block was built with, read and nothing written
        params = draw_parameters(block, gen) if trial < 2 else read_parameters(block)
        x = torch.randn(batch, length, width, generator=gen)
        direction = torch.randn(batch, length, width, generator=gen)  # (B, T, D)
        where = f"width {width}, {heads} heads, T={length}, norm_first={norm_first}"
        gradients = attempt(f"the backward pass through EncoderBlock ({where})", parameter_gradients, block, x,
                            direction, padding_mask=pad, causal_mask=future,
                            hint="compare your forward with the formulas of Part C")
        probe = torch.randn(batch, length, width, generator=gen)
        if tuple(getattr(params.get("ffn.linear1.weight"), "shape", ())) != (9, width):
            continue
        layer = reference_layer(params, width, heads, 9, norm_first)
        with torch.no_grad():
            if ffn_differs or not torch.allclose(own_ffn(block)(probe), layer._ff_block(probe), atol=1e-5):
                ffn_differs = True
                continue
        with torch.enable_grad():
            (layer(x, src_mask=future, src_key_padding_mask=pad) * direction).sum().backward()
        reference = dict(layer.named_parameters())
        for name, grad in gradients.items():
            theirs = [pt + name[len(mine):] for mine, pt in PYTORCH_NAMES.items() if name.startswith(mine)]
            if theirs and theirs[0] in reference:
                check_close(f"the gradient of {name} ({where})", grad, reference[theirs[0]].grad, atol=1e-4,
                            hint="the forward is right but its gradient is not: is part of the computation detached "
                                 "(.detach(), .data, torch.no_grad())?")
        for moved, output in probed_points(block):
            with torch.no_grad():
                expected = reference_layer({**params, **moved}, width, heads, 9, norm_first)(
                    x, src_mask=future, src_key_padding_mask=pad)
            check_close(f"the block's output with {', '.join(moved)} moved a little ({where})", output, expected,
                        atol=1e-4, hint="the forward must compute the block for any parameter values, also for values "
                                        "a hair away from the ones it saw last")
