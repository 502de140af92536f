"""Chapter 09's references (the grader's side only): nn.TransformerDecoderLayer holding a block's parameters,
its cross weights, and the hidden tests' comparisons of your block's and model's outputs with them.

The property checks come first, from `course/decoder_checks.py` (the visible tests' own), so a block that
breaks a property still fails with that property's message; then every output is compared with the layer.
"""

from __future__ import annotations

import torch
from nboracle import module_tensors, read_parameters, set_training
from torch import nn

from course.checks import attempt, check_close, check_true
from course.decoder_checks import (
    BLOCK_HINT,
    MODEL_HINT,
    block_state,
    causal_runs,
    check_decoder_causal_outputs,
    check_decoder_padding_outputs,
    check_sees_all_memory_outputs,
    drop_future,
    last_memory_moved,
    memory_pad,
    pad_changed,
)
from instructor.references.as_built import same_as_a_twin

LAYER_HINT = ("it is not what nn.TransformerDecoderLayer holding the same parameters computes: follow the steps of "
              "Part B's table for your norm_first (the post-norm and pre-norm tests name the step that differs)")


def decoder_layer(state, width, heads, hidden, norm_first=False):
    """nn.TransformerDecoderLayer holding the parameters `state` (by the names of the exercise)."""
    layer = nn.TransformerDecoderLayer(width, heads, hidden, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=norm_first)
    layer.load_state_dict(layer_names(state))
    return layer.train()  # dropout is 0; train mode keeps PyTorch on its plain code path


def layer_names(state):
    """``state`` (the exercise's names) by nn.TransformerDecoderLayer's names."""
    renamed = {}
    for key, value in state.items():
        for ours, theirs in (("self_attention.", "self_attn."), ("cross_attention.", "multihead_attn."), ("ffn.", "")):
            key = theirs + key[len(ours):] if key.startswith(ours) else key
        renamed[key] = value
    return renamed


def same_layer(width, heads, hidden, norm_first=False, seed=0):
    """The layer holding the parameters the notebook's new_block(width, heads, hidden, norm_first, seed) loads."""
    return decoder_layer(block_state(width, hidden, seed), width, heads, hidden, norm_first)


def built_block(DecoderBlock, width, heads, hidden, norm_first=False):  # noqa: N803 (the class under test)
    """A DecoderBlock built as a user builds it, in eval mode, and the weights it was built with, by the exercise's
    names (read from its tensors, nothing written): the hidden tests judge a block on these beside the weights they
    load, so a block right only once its weights are written loses what its wrong code loses."""
    what = f"DecoderBlock({width}, {heads}, {hidden}, norm_first={norm_first})"
    block = attempt(what, DecoderBlock, width, heads, hidden, norm_first=norm_first)
    set_training(block, False)
    held = read_parameters(block)
    return block, {name: held[name] for name in block_state(width, hidden, 0) if name in held}


def unchanged_when_its_weights_are_loaded(DecoderBlock):  # noqa: N803 (the class under test)
    """A DecoderBlock(8, 2, 16) as built, and twins holding its weights (loaded): the same output
    (instructor.references.as_built.same_as_a_twin), for the tests that load weights of their own."""
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    same_as_a_twin("DecoderBlock(8, 2, 16)", lambda: built_block(DecoderBlock, 8, 2, 16)[0], lambda block: attempt(
        "DecoderBlock(8, 2, 16)", block, x, memory, causal_mask=drop_future(3), hint=BLOCK_HINT))


def model_unchanged_when_its_weights_are_loaded(EncoderDecoder, src, dec_in, **sizes):  # noqa: N803
    """An EncoderDecoder(**sizes) as built (eval mode), and twins holding its weights (loaded): the same logits
    (same_as_a_twin). The tests of the trained model ask it too: training writes every weight, so a model right
    only once its weights are written trains as the right model; judged as built, it loses what its wrong code
    loses."""
    arguments = ", ".join(f"{key}={value}" for key, value in sizes.items())
    what = f"EncoderDecoder({arguments})"

    def build():
        model = attempt(what, EncoderDecoder, **sizes)
        set_training(model, False)
        return model

    same_as_a_twin(what, build, lambda model: attempt(what, model, src, dec_in, hint=MODEL_HINT))


def built_model(EncoderDecoder, names, **sizes):  # noqa: N803 (the class under test)
    """An EncoderDecoder(**sizes) built as a user builds it, and the weights it was built with by `names` (read,
    nothing written), as built_block does for a block; in float32, as the tests' own states (a model kept in
    float64 is compared with the same references)."""
    arguments = ", ".join(f"{key}={value}" for key, value in sizes.items())
    what = f"EncoderDecoder({arguments})"
    model = attempt(what, EncoderDecoder, **sizes)
    held = read_parameters(model)
    return model, {name: held[name].float() for name in names if name in held}


def layer_cross_weights(layer, x, memory, causal_mask=None, memory_padding_mask=None):
    """The per-head cross-attention weights of `layer`: queries from the stream after its self-attention step."""
    h = layer.norm1(x) if layer.norm_first else x
    stream = x + layer.self_attn(h, h, h, attn_mask=causal_mask, need_weights=False)[0]
    query = layer.norm2(stream) if layer.norm_first else layer.norm1(stream)
    return layer.multihead_attn(query, memory, memory, key_padding_mask=memory_padding_mask, need_weights=True,
                                average_attn_weights=False)[1]


def causal_agrees(block, layer, x, memory):
    """check_decoder_causal_outputs, then every output compared with `layer` holding the block's parameters."""
    outputs = check_decoder_causal_outputs(block, x, memory)
    future = drop_future(x.shape[1])
    leak = "pass causal_mask to the self-attention as attn_mask (True = forbidden pair)"
    with torch.no_grad():
        for (call, inputs), mine in zip(causal_runs(x, memory).items(), outputs, strict=True):
            check_close(f"out of {call}", mine, layer(*inputs, tgt_mask=future), atol=1e-4, hint=LAYER_HINT,
                        likely_causes={f"the self-attention has no causal mask: {leak}": layer(*inputs)})


def sees_all_memory_agrees(block, layer, heads, x, memory):
    """check_sees_all_memory_outputs, then the weights and every output compared with `layer`."""
    weights, before, after = check_sees_all_memory_outputs(block, heads, x, memory)
    future = drop_future(x.shape[1])
    with torch.no_grad():
        check_close("cross_weights with a causal mask", weights, layer_cross_weights(layer, x, memory, future),
                    atol=1e-5, hint="every decoder position weighs the whole memory (no causal mask there); " + LAYER_HINT)
        for call, mine, source in (("out", before, memory), ("out on a changed memory", after, last_memory_moved(memory))):
            check_close(f"{call} with a causal mask", mine, layer(x, source, tgt_mask=future), atol=1e-4,
                        hint=LAYER_HINT)


def padding_agrees(block, layer, heads, x, memory, lengths):
    """check_decoder_padding_outputs, then the weights and both outputs compared with `layer`."""
    weights, out, out_noisy = check_decoder_padding_outputs(block, heads, x, memory, lengths)
    future, call, pad = drop_future(x.shape[1]), "DecoderBlock with memory_padding_mask", memory_pad(memory, lengths)
    masked = "PAD memory positions must not influence the decoder: mask them in the cross-attention"
    with torch.no_grad():
        check_close(f"cross_weights of {call}", weights, layer_cross_weights(layer, x, memory, future, pad),
                    atol=1e-5, hint=LAYER_HINT)
        for what, mine, source in (("out", out, memory),
                                   ("out with the PAD positions changed", out_noisy, pad_changed(memory, pad))):
            check_close(f"{what} of {call}", mine, layer(x, source, tgt_mask=future, memory_key_padding_mask=pad),
                        atol=1e-4, hint=LAYER_HINT,
                        likely_causes={f"the padding mask is ignored: {masked}": layer(x, source, tgt_mask=future)})


class RecordedTwin:
    """A pytorch_twin split into encode and decode; its decoder layers record their per-head cross weights."""

    def __init__(self, twin):
        self.twin, self.recorded = twin, []
        for layer in self.twin.transformer.decoder.layers:
            layer.multihead_attn.forward = self.recording(layer.multihead_attn.forward)

    def recording(self, forward):
        def forward_and_record(*args, **kwargs):  # PyTorch's layer asks for no weights: ask for every head's
            out, weights = forward(*args, **{**kwargs, "need_weights": True, "average_attn_weights": False})
            self.recorded.append(weights)
            return out, weights
        return forward_and_record

    def embed(self, tokens):
        return self.twin.token_embedding(tokens) + self.twin.position_embedding(torch.arange(tokens.size(1)))

    def encode(self, src):
        return self.twin.transformer.encoder(self.embed(src))  # ends with encoder.norm

    def decode(self, dec_in, memory):
        self.recorded = []
        hidden = self.twin.transformer.decoder(self.embed(dec_in), memory, tgt_mask=drop_future(dec_in.size(1)))
        return hidden, self.recorded


def weights_per_block_agree(model, reference, src, dec_in):
    """decode returns the cross weights of every block, first block first, as `reference` (RecordedTwin, or the
    hidden test's own) decodes the reference memory with the model's parameters."""
    held = {row["name"]: row["dtype"] for row in module_tensors(model)}  # a model kept in float64 gets float64
    dtype = getattr(torch, str(held.get("head.weight")), None)
    with torch.no_grad():
        memory = reference.encode(src)  # the reference memory: only decode is under test here
        given = memory.to(dtype) if isinstance(dtype, torch.dtype) and dtype.is_floating_point else memory
        result = attempt("decode(dec_in, memory)", model.decode, dec_in, given, hint=MODEL_HINT)
        wanted = reference.decode(dec_in, memory)[1]
    check_true(isinstance(result, tuple) and len(result) == 2, "decode must return a pair (hidden, weights per block)")
    weights = list(result[1]) if isinstance(result[1], (list, tuple)) else []
    check_true(len(weights) == len(wanted), f"decode must return {len(wanted)} cross weight maps, one per decoder "
               "block, first block first")
    for index, (mine, want) in enumerate(zip(weights, wanted, strict=True)):
        others = {f"decode returns decoder block {other}'s weights in place of block {index}'s (append each "
                  "block's weights as you go, first block first)": wanted[other]
                  for other in range(len(wanted)) if other != index}
        check_close(f"cross weights of decoder block {index}", mine, want, atol=1e-5, likely_causes=others,
                    hint="they are not the weights nn.TransformerDecoderLayer computes with the same parameters, from "
                         "any block: look at how your DecoderBlock makes the cross-attention's queries (the stream "
                         "after the self-attention step, normalised by norm2 in pre-norm; the memory as it is), and "
                         "at the tests of Part B")
