"""Chapter 09's references (the grader's side only): nn.TransformerDecoderLayer holding a block's parameters,
its cross weights, the model as nn.Transformer computes it around the model's own decoder blocks, and the hidden
tests' comparisons of your block's and model's outputs with them.

The property checks come first, from `course/decoder_checks.py` (the visible tests' own), so a block that
breaks a property still fails with that property's message; then every output is compared with the layer.

One mistake, one loss: the model's tests of Part C judge encode and decode around the model's own decoder
blocks (whatever they compute: Part B's tests judge them), so a block's mistake costs Part B's points, not
these. Only the gradient test and the trained model's need right blocks.
"""

from __future__ import annotations

import warnings

import torch
from nboracle import module_tensors, probed_points, read_parameters, set_training
from torch import nn

from course.checks import attempt, check_close, check_true
from course.decoder_checks import (
    BLOCK_HINT,
    MODEL_HINT,
    block_state,
    causal_runs,
    check_decoder_causal_outputs,
    check_decoder_padding_outputs,
    check_model_masks_outputs,
    check_sees_all_memory_outputs,
    drop_future,
    last_memory_moved,
    memory_pad,
    pad_changed,
)
from instructor.references.as_built import moved_to, same_as_a_twin

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


# ---------------------------------------------------------------- Part C: the model, around its own decoder blocks

OWN_BLOCK_HINT = "make the tests of DecoderBlock (Part B) pass first"
DECODE_HINT = ("they are not the logits of nn.Transformer's embeddings, encoder and head holding the same weights "
               "around your own decoder blocks: encode runs embed, every encoder block and encoder_norm; decode runs "
               "embed, every decoder block with the causal mask, the memory and its padding mask, then decoder_norm")
TWIN_NAMES = (("encoder_blocks.", "encoder.layers."), ("decoder_blocks.", "decoder.layers."),
              (".attention.", ".self_attn."), (".self_attention.", ".self_attn."),
              (".cross_attention.", ".multihead_attn."), (".ffn.", "."), ("encoder_norm.", "encoder.norm."),
              ("decoder_norm.", "decoder.norm."))


def model_dtype(model):
    """The dtype the model holds its head in (a model kept in float64 is judged in float64), float32 otherwise."""
    held = {row["name"]: row["dtype"] for row in module_tensors(model)}
    dtype = getattr(torch, str(held.get("head.weight")), None)
    return dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else torch.float32


def own_decoder_blocks(what, model, layers, width, dtype):
    """The model's own decoder blocks as functions (x, memory, causal_mask, memory_padding_mask) -> (out, weights),
    run in the kernel on the test's inputs, whatever they compute (Part B's tests judge that); refused, with Part B
    named, when one raises, does not return a pair of tensors, gives NaN or gives two different inputs the same
    answer, since no model built on it can be judged."""
    blocks = [attempt(f"{what}.decoder_blocks[{i}]", lambda i=i: model.decoder_blocks[i], hint=OWN_BLOCK_HINT)
              for i in range(layers)]

    def run(i):
        def block(x, memory, causal_mask=None, memory_padding_mask=None):
            call = f"{what}.decoder_blocks[{i}](x, memory)"
            result = attempt(call, blocks[i], x, memory, causal_mask=causal_mask,
                             memory_padding_mask=memory_padding_mask, hint=OWN_BLOCK_HINT)
            pair = isinstance(result, tuple) and len(result) == 2 and all(type(r) is torch.Tensor for r in result)
            check_true(pair and tuple(result[0].shape) == tuple(x.shape), f"{call} does not return the pair (out of "
                       f"x's shape, cross weights), so no model built on it can be judged: {OWN_BLOCK_HINT}")
            return result
        return block

    gen = torch.Generator().manual_seed(width)
    memory = torch.randn(1, 4, width, generator=gen).to(dtype)
    probes = [torch.randn(1, 3, width, generator=gen).to(dtype) for _ in range(2)]
    for i in range(layers):
        with torch.no_grad():
            first, second = (run(i)(x, memory, causal_mask=drop_future(3))[0] for x in probes)
        check_true(bool(torch.isfinite(first).all() and torch.isfinite(second).all()), f"{what}.decoder_blocks[{i}] "
                   "gives NaN or infinite values, so no model built on it can be judged: make the test of DecoderBlock "
                   "pass first")
        check_true(not torch.allclose(first, second), f"{what}.decoder_blocks[{i}] gives two different inputs the same "
                   "answer, so no model built on it can be judged: make the test of DecoderBlock pass first")
    return [run(i) for i in range(layers)]


def around_own_blocks(model, state, heads, norm_first, what="the model"):
    """The model judged around its own decoder blocks: AroundOwnBlocks holding `state`, the blocks refused when they
    are degenerate (own_decoder_blocks). Its results count as the grader's (OWN_PARTS in tests/test_references.py)."""
    return AroundOwnBlocks(model, state, heads, norm_first, what)


class AroundOwnBlocks:
    """The model as nn.Transformer computes it, holding the parameters `state` the test loaded into (or read from)
    the model, with the model's own decoder blocks in place of nn.Transformer's decoder layers: embeddings,
    the encoder layers and encoder.norm, then the model's decoder blocks with the causal mask, the memory and its
    padding mask, decoder.norm and the head. The options switch one named mistake of encode or decode on."""

    def __init__(self, model, state, heads, norm_first, what="the model"):
        width, hidden = state["head.weight"].shape[1], state["encoder_blocks.0.ffn.linear1.weight"].shape[0]
        layers = len({key.split(".")[1] for key in state if key.startswith("encoder_blocks.")})
        with warnings.catch_warnings():  # pre-norm: PyTorch warns that it cannot use nested tensors
            warnings.simplefilter("ignore")
            self.twin = nn.Transformer(width, heads, layers, layers, hidden, dropout=0.0, batch_first=True,
                                       norm_first=norm_first).train()
        # the encoder and the two final norms: the decoder layers are the model's own blocks, never these
        needed = {key for key in self.twin.state_dict() if not key.startswith("decoder.layers.")}
        renamed = {self.renamed(key): value.float() for key, value in state.items()}
        missing = sorted(needed - set(renamed))
        check_true(not missing, f"{what} holds no parameter for {', '.join(missing[:3])} of nn.Transformer: keep the "
                   "submodules and names the exercise gives (encoder_blocks, encoder_norm, decoder_norm)")
        self.twin.load_state_dict({key: renamed[key] for key in needed}, strict=False)
        self.state = {key: value.float() for key, value in state.items()}
        self.dtype = model_dtype(model)
        self.blocks = own_decoder_blocks(what, model, layers, width, self.dtype)

    def embed(self, tokens, positions=True):
        tokens_only = self.state["token_embedding.weight"][tokens]
        return tokens_only + self.state["position_embedding.weight"][: tokens.size(1)] if positions else tokens_only

    def encode(self, src, pad=None, final_norm=True, block_pad=True, positions=True):
        x = self.embed(src, positions)
        for layer in self.twin.encoder.layers:
            x = layer(x, src_key_padding_mask=pad if block_pad else None)
        return self.twin.encoder.norm(x) if final_norm else x

    def decode(self, dec_in, memory, pad=None, final_norm=True, causal=True, block_pad=True, positions=True,
               diagonal=1):
        """Hidden states (B, n, D) and the cross weights of every block, first block first."""
        y, n, all_weights = self.embed(dec_in, positions), dec_in.size(1), []
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=diagonal) if causal else None
        memory = memory.to(self.dtype)
        for block in self.blocks:
            y, weights = block(y.to(self.dtype), memory, causal_mask=future,
                               memory_padding_mask=pad if block_pad else None)
            all_weights.append(weights)
        y = y.float()
        return (self.twin.decoder.norm(y) if final_norm else y), all_weights

    def logits(self, src, dec_in, pad=None, final_norms=True, causal=True, block_pad=True, source_positions=True,
               decoder_positions=True, diagonal=1):
        memory = self.encode(src, pad, final_norms, block_pad, source_positions)
        hidden = self.decode(dec_in, memory, pad, final_norms, causal, block_pad, decoder_positions, diagonal)[0]
        return hidden @ self.state["head.weight"].T + self.state["head.bias"]

    def __call__(self, src, dec_in, src_padding_mask=None):
        return self.logits(src, dec_in, src_padding_mask)

    @staticmethod
    def renamed(key):
        """The name of the exercise's parameter `key` in the reference's nn.Transformer (encoder and final norms)."""
        for ours, theirs in TWIN_NAMES:
            key = key.replace(ours, theirs)
        return key


def judge_encoder_gradients(model, state, heads, norm_first, src, dec_in):
    """The encoder's gradients came from the kernel, checked there against finite differences of the model's
    logits; those logits, at every point the check moved an encoder parameter to, are answers too: judged against
    `AroundOwnBlocks` holding the same moved parameter, so the gradient is the one of encode and decode around the
    model's own decoder blocks (Part B's tests judge the blocks' own gradients)."""
    reference = around_own_blocks(model, state, heads, norm_first)
    for moved, output in probed_points(model):
        if not set(moved) <= set(state):
            continue  # a parameter of yours the exercise does not name: the reference has nothing to move
        with moved_to(reference.twin, {reference.renamed(name): value.float() for name, value in moved.items()}), \
                torch.no_grad():
            expected = reference(src, dec_in)
        check_close(f"the logits with {', '.join(moved)} moved a little (norm_first={norm_first})", output, expected,
                    atol=1e-4, hint="the forward must compute the model for any parameter values, also for values a "
                                    "hair away from the ones it saw last: " + DECODE_HINT)


def model_masks_agree(model, state, heads, norm_first, source_length, n, vocab):
    """check_model_masks_outputs, then the logits of every run compared with `AroundOwnBlocks` (the model holds
    `state`): encode and decode judged around the model's own decoder blocks."""
    runs, got = check_model_masks_outputs(model, source_length, n, vocab)
    reference = around_own_blocks(model, state, heads, norm_first)
    with torch.no_grad():
        for call, inputs in runs.items():
            check_close(f"logits of {call}", got[call], reference(*inputs), atol=1e-4, hint=DECODE_HINT)


def weights_per_block_agree(model, reference, src, dec_in):
    """decode returns the cross weights of every block, first block first, as `reference` (AroundOwnBlocks: the
    model's own blocks run in order on the reference stream) gets them from the reference memory."""
    with torch.no_grad():
        memory = reference.encode(src)  # the reference memory: only decode is under test here
        result = attempt("decode(dec_in, memory)", model.decode, dec_in, memory.to(reference.dtype), hint=MODEL_HINT)
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
                    hint="they are not the weights your decoder blocks return when decode runs them in order on "
                         "this memory, from any block: return the weights each block gives, as it gives them, and "
                         "run each block on the previous block's output with the causal mask and the memory")
