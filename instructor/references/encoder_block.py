"""Chapter 04's references (the grader's side only): nn.TransformerEncoderLayer holding a block's parameters,
and the hidden tests' comparisons of the block's outputs with it (after the visible tests' property checks)."""

from __future__ import annotations

import torch
from torch import nn

from course.checks import check_close, check_true
from course.encoder_block_checks import check_causal_outputs, check_padding_outputs, last_changed, own_ffn

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


def padding_agrees(block, params, x, lengths, heads, hidden, norm_first):
    """check_padding_outputs, then the real tokens' outputs compared with the layer holding `params` (what the test
    loaded into the block) around the block's own FFN."""
    short, appended = check_padding_outputs(block, x, lengths, heads)
    layer = reference_layer(params, x.shape[-1], heads, hidden, norm_first, own_ffn(block))
    with torch.no_grad():
        expected = layer(x[:1, :int(lengths[0])])  # sequence 0 without its PAD
    for what, mine in (("without PAD", short), ("with PAD appended", appended)):
        check_close(f"outputs of the real tokens of sequence 0, {what}", mine, expected, atol=1e-5,
                    hint="compare your forward with the formulas of Part C")


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
        check_close(f"outputs with a causal mask on {what}", mine, expected[what], atol=1e-5,
                    hint="compare your forward with the formulas of Part C, the causal mask passed as attn_mask")
