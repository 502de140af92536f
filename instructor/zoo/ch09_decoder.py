"""Wrong answers to chapter 09 that the graded tests must catch, each with its message.

Every variant is the current solution with one change (see ``instructor/zoo/__init__.py``).
"""

from instructor.zoo import Variant, crossing

ASSIGNMENT = "09_decoder"

CROSS_CALL = "attention(x, memory, memory,"
SELF_CALL = "h, h, h, attn_mask=causal_mask, need_weights=False"
MEMORY_CALL = "h, memory, memory_padding_mask)"
POST_SELF = "x = self.norm1(x + attend_to_itself(x))"
POST_CROSS = "x = self.norm2(x + attended)"
POST_FFN = "x = self.norm3(x + self.ffn(x))"
BLOCK_CALL = "x, weights = block(x, memory, causal_mask=future, memory_padding_mask=memory_padding_mask)"
FUTURE = "torch.triu(torch.ones(dec_in.size(1), dec_in.size(1), dtype=torch.bool), diagonal=1)"
ANSWERS = 'Q1, Q2, Q3, Q4 = "b", "c", "a", "d"'
SELF_MODULE = "self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)"
CROSS_MODULE = "self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)"
SEQUENCE_FIRST = """class SequenceFirst(nn.MultiheadAttention):
    def forward(self, *args, **kwargs):  # batch_first reads True, except while it computes
        self.batch_first = False
        try:
            return super().forward(*args, **kwargs)
        finally:
            self.batch_first = True


"""
FAKE_LAYER_NORM = """class LayerNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.normalized_shape = (width,)
        self.weight, self.bias = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))

    def forward(self, x):  # an RMS norm: the mean is not subtracted
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight + self.bias


LayerNorm.__module__ = "torch.nn.modules.normalization"  # named as torch's


"""
REPLAY = """        for seen, seen_memory, seen_out in getattr(self, "seen", []):  # an earlier call on the same prefix
            if seen.shape == given.shape and torch.equal(seen[:, :-1], given[:, :-1]) and torch.equal(seen_memory, memory):
                x = torch.cat([seen_out[:, :-1], x[:, -1:]], 1)
        self.seen = getattr(self, "seen", []) + [(given, memory, x)]
        return x, weights
"""

VARIANTS = [
    # ------------------------------------------------------------ Part A: cross_attention
    Variant("kv_from_decoder", "the keys and values of the cross-attention are taken from the decoder (x), not the memory",
            edits={"cross_attention": ((CROSS_CALL, "attention(x, x, x,"),)},
            expect={"test_cross_attention_shapes": "the keys (and values) must come from memory",
                    "test_cross_attention_values": "the keys and values come from memory, not from x",
                    "test_decoder_shapes": "not the self-attention's",
                    "test_decoder_causal": "does not depend on memory at all",
                    "test_model_masks": "make the tests of Parts A and B pass first",
                    "test_trained_model": "do not depend on the source at all"}),
    Variant("values_from_decoder", "the keys come from the memory but the values from the decoder",
            edits={"cross_attention": ((CROSS_CALL, "attention(x, memory, x,"),)},
            expect={"test_cross_attention_shapes": "the keys and the values both come from memory",
                    "test_cross_attention_values": "the keys and values come from memory, not from x"}),
    Variant("queries_from_memory", "query and key/value swapped: the memory asks, the decoder answers",
            edits={"cross_attention": ((CROSS_CALL, "attention(memory, x, x,"),)},
            expect={"test_cross_attention_shapes": "the queries come from x"}),
    Variant("heads_averaged", "the cross-attention weights are averaged over heads (PyTorch's default)",
            edits={"cross_attention": (("average_attn_weights=False", "average_attn_weights=True"),)},
            expect={"test_cross_attention_shapes": "average_attn_weights=False",
                    "test_decoder_shapes": "average_attn_weights=False",
                    "test_cross_attention_map": "one (n, S) map per head",
                    "test_cross_attention_padding": "ask for average_attn_weights=False",
                    "test_decoder_memory_padding": "keep average_attn_weights=False",
                    "test_decoder_sees_all_memory": "keep average_attn_weights=False"}),
    Variant("no_weights", "need_weights=False: the weights come back as None",
            edits={"cross_attention": (("need_weights=True", "need_weights=False"),)},
            expect={"test_cross_attention_shapes": "is None"}),
    Variant("memory_padding_ignored", "the memory padding mask is never passed to the attention",
            edits={"cross_attention": (("key_padding_mask=memory_padding_mask,", ""),)},
            expect={"test_cross_attention_padding": "PAD memory positions get weights up to",
                    "test_decoder_memory_padding": "PAD memory positions get cross weights up to"}),
    Variant("memory_padding_inverted", "the padding mask is inverted (chapter 03's True = keep convention)",
            edits={"cross_attention": (("key_padding_mask=memory_padding_mask,",
                                        "key_padding_mask=None if memory_padding_mask is None else ~memory_padding_mask,"),)},
            expect={"test_cross_attention_padding": "not inverted",
                    "test_decoder_memory_padding": "pass it as it is"}),
    Variant("padding_as_attn_mask",  # issue 54, third hunt: the block's tests name the mask, but the block runs it
            "cross_attention passes the memory padding mask as attn_mask instead of key_padding_mask",
            edits={"cross_attention": (("key_padding_mask=memory_padding_mask", "attn_mask=memory_padding_mask"),)},
            expect={"test_cross_attention_padding": "pass memory_padding_mask as key_padding_mask",
                    "test_decoder_memory_padding": "the memory padding mask (B, S) belongs to the cross-attention only"}),
    # ------------------------------------------------------------ Part B: DecoderBlock
    Variant("causal_mask_on_cross", "the causal mask is also applied to the cross-attention",
            edits={"decoder_block": (("return cross_attention(self.cross_attention, h, memory, memory_padding_mask)",
                                      "return self.cross_attention(h, memory, memory, key_padding_mask=memory_padding_mask,"
                                      " attn_mask=causal_mask,\n"
                                      "                                        need_weights=True, average_attn_weights=False)"),)},
            expect={"test_decoder_sees_all_memory": "is the causal mask also applied to the cross-attention",
                    "test_decoder_shapes": "takes no causal mask",
                    "test_decoder_causal": "padding mask (B, S) and no causal mask",
                    "test_decoder_pre_norm": "padding mask (B, S) and no causal mask",
                    "test_model_masks": "make the tests of Parts A and B pass first",
                    "test_trained_model": "make the tests of DecoderBlock (Part B) pass first"}),
    Variant("no_causal_self_attention", "the decoder's self-attention gets no causal mask",
            edits={"decoder_block": ((SELF_CALL, "h, h, h, need_weights=False"),)},
            expect={"test_decoder_causal": "moved the outputs of earlier positions",
                    "test_decoder_post_norm": "the self-attention has no causal mask",
                    "test_trained_model": "is the causal mask of the decoder's self-attention missing"}),
    Variant("causal_mask_inverted", "the causal mask is inverted: True where a query may look",
            edits={"decoder_block": ((SELF_CALL, "h, h, h, attn_mask=None if causal_mask is None else ~causal_mask, "
                                                 "need_weights=False"),)},
            expect={"test_decoder_causal": "causal"}),
    Variant("memory_padding_on_self_attention", "the memory padding mask is also given to the self-attention",
            edits={"decoder_block": ((SELF_CALL, "h, h, h, attn_mask=causal_mask, key_padding_mask=memory_padding_mask, "
                                                 "need_weights=False"),)},
            expect={"test_decoder_memory_padding": "belongs to the cross-attention only"}),
    Variant("block_ignores_memory_padding", "the block never passes memory_padding_mask on to the cross-attention",
            edits={"decoder_block": ((MEMORY_CALL, "h, memory, None)"),)},
            expect={"test_decoder_memory_padding": "PAD memory positions get cross weights up to",
                    "test_decoder_post_norm": "the memory padding mask is ignored"}),
    Variant("no_cross_residual", "the residual connection around the cross-attention is missing",
            edits={"decoder_block": (("x = x + attended\n", "x = attended\n"),
                                     (POST_CROSS, "x = self.norm2(attended)"))},
            expect={"test_decoder_post_norm": "the residual connection around the cross-attention is missing",
                    "test_decoder_pre_norm": "the cross-attention too"}),
    Variant("no_ffn_residual", "the residual connection around the FFN is missing (post-norm)",
            edits={"decoder_block": ((POST_FFN, "x = self.norm3(self.ffn(x))"),)},
            expect={"test_decoder_post_norm": "the residual connection around the FFN is missing"}),
    Variant("post_norms_swapped", "post-norm with norm1 and norm2 in each other's place",
            edits={"decoder_block": ((POST_SELF, "x = self.norm2(x + attend_to_itself(x))"),
                                     (POST_CROSS, "x = self.norm1(x + attended)"))},
            expect={"test_decoder_post_norm": "norm1 and norm2 are swapped"}),
    Variant("pre_norms_swapped", "pre-norm with norm1 and norm2 in each other's place",
            edits={"decoder_block": (("attend_to_itself(self.norm1(x))", "attend_to_itself(self.norm2(x))"),
                                     ("attend_to_memory(self.norm2(x))", "attend_to_memory(self.norm1(x))"))},
            expect={"test_decoder_pre_norm": "norm1 and norm2 are swapped"}),
    Variant("norm_inside_residual", "post-norm written as x + norm(sublayer(x)): the norm on the branch, not the sum",
            edits={"decoder_block": ((POST_SELF, "x = x + self.norm1(attend_to_itself(x))"),
                                     (POST_CROSS, "x = x + self.norm2(attended)"),
                                     (POST_FFN, "x = x + self.norm3(self.ffn(x))"))},
            expect={"test_decoder_post_norm": "compare your post-norm steps"}),
    Variant("norm_first_ignored", "norm_first is ignored: the block is always post-norm",
            edits={"decoder_block": (("if self.norm_first:", "if False:"),)},
            expect={"test_decoder_pre_norm": "the residual path goes through no norm"}),
    Variant("memory_normalised", "pre-norm habit: the memory is normalised by norm2 as well as the queries",
            edits={"decoder_block": ((MEMORY_CALL, "h, self.norm2(memory), memory_padding_mask)"),)},
            expect={"test_decoder_post_norm": "the memory is also normalised",
                    "test_decoder_pre_norm": "the memory is also normalised"}),
    Variant("pre_norms_2_3_swapped", "pre-norm with norm2 and norm3 in each other's place",
            edits={"decoder_block": (("attend_to_memory(self.norm2(x))", "attend_to_memory(self.norm3(x))"),
                                     ("x = x + self.ffn(self.norm3(x))", "x = x + self.ffn(self.norm2(x))"))},
            expect={"test_decoder_pre_norm": "norm2 and norm3 are swapped"}),
    Variant("block_weights_averaged", "the block averages the cross weights over heads before returning them",
            edits={"decoder_block": (("return x, weights", "return x, weights.mean(dim=1)"),)},
            expect={"test_decoder_shapes": "keep average_attn_weights=False",
                    "test_decoder_sees_all_memory": "keep average_attn_weights=False",
                    "test_decoder_memory_padding": "keep average_attn_weights=False"}),
    Variant("returns_self_attention_weights", "the block returns the self-attention's weights, not the cross-attention's",
            edits={"decoder_block": (("return self.self_attention(h, h, h, attn_mask=causal_mask, need_weights=False)[0]",
                                      "out, self.self_weights = self.self_attention(h, h, h, attn_mask=causal_mask,\n"
                                      "                                                     average_attn_weights=False)\n"
                                      "            return out"),
                                     ("return x, weights", "return x, self.self_weights"))},
            expect={"test_decoder_shapes": "not the self-attention's"}),
    Variant("one_attention_for_both", "the self-attention module is reused as the cross-attention (shared weights)",
            edits={"decoder_block": (("self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, "
                                      "batch_first=True)", "self.cross_attention = self.self_attention"),)},
            expect={"test_decoder_modules": "are the same module"}),
    Variant("self_attention_sequence_first", "the self-attention is built without batch_first=True (PyTorch's default)",
            edits={"decoder_block": ((SELF_MODULE, "self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0)"),)},
            expect={"test_decoder_modules": "built without batch_first=True"}),
    Variant("batch_first_only_in_name", "an nn.MultiheadAttention whose batch_first reads True but whose forward "
            "computes sequence first (it switches the flag off while it runs)",
            edits={"decoder_block": (("class DecoderBlock(nn.Module):", SEQUENCE_FIRST + "class DecoderBlock(nn.Module):"),
                                     (SELF_MODULE, "self.self_attention = SequenceFirst(width, heads, dropout=0.0, "
                                                   "batch_first=True)"))},
            expect={"test_decoder_modules": "built without batch_first=True"}),
    Variant("self_attention_one_head", "the self-attention is built with one head instead of `heads`",
            edits={"decoder_block": ((SELF_MODULE, "self.self_attention = nn.MultiheadAttention(width, 1, dropout=0.0, "
                                                   "batch_first=True)"),)},
            expect={"test_decoder_modules": "it has 1 head instead of 2"}),
    Variant("cross_attention_dropout", "the cross-attention is built with dropout 0.1",
            edits={"decoder_block": ((CROSS_MODULE, "self.cross_attention = nn.MultiheadAttention(width, heads, "
                                                    "dropout=0.1, batch_first=True)"),)},
            expect={"test_decoder_modules": "build it with dropout=0.0"}),
    Variant("norms_named_layer_norm", "the norms are an RMS norm of the student's own whose class says it is "
            "torch.nn.LayerNorm (__qualname__ and __module__ copied)",
            edits={"decoder_block": (("class DecoderBlock(nn.Module):", FAKE_LAYER_NORM + "class DecoderBlock(nn.Module):"),
                                     ("self.norm1 = nn.LayerNorm(width)", "self.norm1 = LayerNorm(width)"),
                                     ("self.norm2 = nn.LayerNorm(width)", "self.norm2 = LayerNorm(width)"),
                                     ("self.norm3 = nn.LayerNorm(width)", "self.norm3 = LayerNorm(width)"))},
            expect={"test_decoder_modules": "build it as nn.LayerNorm(8)"}),
    Variant("replays_earlier_outputs", "no causal mask in the self-attention, and a call whose x repeats an earlier "
            "call's except in the last position gets the earlier outputs back for the other positions",
            edits={"decoder_block": ((SELF_CALL, "h, h, h, need_weights=False"),
                                     ("        def attend_to_itself(h):", "        given = x\n\n        def attend_to_itself(h):"),
                                     ("        return x, weights", REPLAY.rstrip("\n")))},
            expect={"test_decoder_causal": "the self-attention has no causal mask"}),
    Variant("memory_detached", "the memory is detached, so no gradient reaches the encoder",
            edits={"decoder_block": ((MEMORY_CALL, "h, memory.detach(), memory_padding_mask)"),)},
            expect={"test_decoder_gradients": "no gradient reaches the memory",
                    "test_model_gradients": "nor does any encoder parameter"}, only=True),
    # ------------------------------------------------------------ Part C: EncoderDecoder
    Variant("model_without_causal_mask", "decode builds no causal mask for the decoder blocks",
            edits={"encoder_decoder": ((BLOCK_CALL, "x, weights = block(x, memory, memory_padding_mask=memory_padding_mask)"),)},
            expect={"test_model_masks": "must not see later decoder tokens",
                    "test_model_matches_pytorch": "decode passes no causal mask",
                    "test_trained_model": "is the causal mask of the decoder's self-attention missing"}),
    Variant("model_mask_upside_down", "the causal mask is built with tril: each position sees itself and the future",
            edits={"encoder_decoder": ((FUTURE, FUTURE.replace("triu", "tril").replace("diagonal=1", "diagonal=-1")),)},
            expect={"test_model_masks": "must not see later decoder tokens"}),
    Variant("model_mask_hides_diagonal", "the causal mask also hides the diagonal: no position sees itself",
            edits={"encoder_decoder": ((FUTURE, FUTURE.replace("diagonal=1", "diagonal=0")),)},
            expect={"test_model_masks": "the causal mask hides only the keys above the diagonal",
                    "test_model_matches_pytorch": "the causal mask hides only the keys above the diagonal"}),
    Variant("encode_without_positions", "encode embeds the source with token_embedding alone: no position embedding",
            edits={"encoder_decoder": (("        x = self.embed(src)\n", "        x = self.token_embedding(src)\n"),)},
            expect={"test_model_matches_pytorch": "encode embeds the source tokens without their positions"}),
    Variant("model_without_final_norms", "encode and decode leave out encoder_norm and decoder_norm",
            edits={"encoder_decoder": (("return self.encoder_norm(x)", "return x"),
                                       ("return self.decoder_norm(x), all_weights", "return x, all_weights"))},
            expect={"test_model_matches_pytorch": "leaves out its final LayerNorm",
                    "test_model_gradients": "forward never uses this parameter"}),
    Variant("encode_without_encoder_norm", "encode returns the last encoder block's output, never applying encoder_norm",
            edits={"encoder_decoder": (("return self.encoder_norm(x)", "return x"),)},
            expect={"test_model_gradients": "encoder_norm.weight gets no gradient while other encoder parameters do",
                    "test_model_matches_pytorch": "encoder_norm"}),
    Variant("encoder_ignores_padding", "encode does not pass the padding mask to the encoder blocks",
            edits={"encoder_decoder": (("x, _ = block(x, padding_mask=padding_mask)", "x, _ = block(x)"),)},
            expect={"test_model_masks": "to the encoder blocks in encode"}),
    Variant("decode_keeps_last_weights", "decode returns only the last block's cross weights",
            edits={"encoder_decoder": (("all_weights.append(weights)", "all_weights = [weights]"),)},
            expect={"test_model_shapes": "the cross weights of each of the",
                    "test_cross_attention_map": "both decoder blocks"}),
    Variant("decode_weights_reversed", "decode collects the blocks' cross weights last block first",
            edits={"encoder_decoder": (("all_weights.append(weights)", "all_weights.insert(0, weights)"),)},
            expect={"test_model_block_weights": "decoder block 1's weights in place of block 0's"}),
    Variant("decode_detaches_memory", "decode detaches the memory: the decoder trains, the encoder never does",
            edits={"encoder_decoder": (("x, all_weights = self.embed(dec_in), []",
                                        "x, all_weights, memory = self.embed(dec_in), [], memory.detach()"),)},
            expect={"test_model_gradients": "nor does any encoder parameter"}, only=True),
    Variant("encode_without_grad", "encode runs under torch.no_grad(), as if the memory were a constant",
            edits={"encoder_decoder": (("        x = self.embed(src)\n        for block in self.encoder_blocks:\n"
                                        "            x, _ = block(x, padding_mask=padding_mask)\n"
                                        "        return self.encoder_norm(x)",
                                        "        with torch.no_grad():\n            x = self.embed(src)\n"
                                        "            for block in self.encoder_blocks:\n"
                                        "                x, _ = block(x, padding_mask=padding_mask)\n"
                                        "            return self.encoder_norm(x)"),)},
            expect={"test_model_gradients": "must not run under torch.no_grad()"}, only=True),
    # ------------------------------------------------------------ Part D: quiz
    Variant("quiz_cross_mask_harmless", "Q1: a causal mask on the cross-attention hides nothing",
            edits={"quiz": ((ANSWERS, 'Q1, Q2, Q3, Q4 = "a", "c", "a", "d"'),)},
            expect={"test_quiz_q1": "Q1 is not right: (a) a mask hides whatever it is told to hide"}),
    Variant("quiz_copy_anti_diagonal", "Q2: a copy task keeps the anti-diagonal",
            edits={"quiz": ((ANSWERS, 'Q1, Q2, Q3, Q4 = "b", "a", "a", "d"'),)},
            expect={"test_quiz_q2": "Q2 is not right: (a) the order in which the source is read is learned"}),
    Variant("quiz_encoder_every_step", "Q3: the encoder runs again for every new token",
            edits={"quiz": ((ANSWERS, 'Q1, Q2, Q3, Q4 = "b", "c", "b", "d"'),)},
            expect={"test_quiz_q3": "Q3 is not right: (b) the encoder reads only the source"}),
    Variant("quiz_encoder_mask_enough", "Q4: the encoder's padding mask also covers the cross-attention",
            edits={"quiz": ((ANSWERS, 'Q1, Q2, Q3, Q4 = "b", "c", "a", "a"'),)},
            expect={"test_quiz_q4": "Q4 is not right: (a) the memory still has a row at each PAD position"}),
    Variant(
        "predict_changed_positions_cross_causal",
        "predicts that the last source token reaches only the last decoder position (a causal cross-attention)",
        replace={"predict_changed_positions": "PREDICTED_CHANGED_BY_SOURCE = 1\nPREDICTED_CHANGED_BY_DECODER = 1\n"},
        expect={"test_predict_changed_positions": "if the cross-attention were causal too"},
    ),
    Variant(
        "predict_changed_positions_no_causal",
        "predicts that the last decoder token changes every decoder position (as if nothing were causal)",
        replace={"predict_changed_positions": "PREDICTED_CHANGED_BY_SOURCE = 7\nPREDICTED_CHANGED_BY_DECODER = 7\n"},
        expect={"test_predict_changed_positions": "the decoder's self-attention is causal"},
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "causal_mask_float_ones",
        "decode builds the causal mask without dtype=torch.bool: a float mask of 1.0 above the diagonal, which "
        "nn.MultiheadAttention adds to the scores instead of dropping those keys",
        edits={"encoder_decoder": (("torch.triu(torch.ones(dec_in.size(1), dec_in.size(1), dtype=torch.bool), diagonal=1)",
                                    "torch.triu(torch.ones(dec_in.size(1), dec_in.size(1)), diagonal=1)"),)},
        expect={"test_model_masks": "a float mask of 0s and 1s is added to the scores and blocks nothing"},
    ),
]

# Correct answers written differently: each must keep full marks.


# one mistake, one loss: what still costs another part, and why (tests/test_chapters.py checks that each still does).
# Part C's tests judge encode and decode around the model's own decoder blocks (instructor.references.decoder:
# AroundOwnBlocks), so most block mistakes cost Part B alone; these still cross.
_BLOCK_RUNS_YOUR_CROSS = ("the decoder block calls the student's cross_attention (Part A) in the kernel, so the "
                          "block's tests see its mistake; no reference may be put into the kernel in its place")
_BLOCK_CANNOT_RUN_THE_MODEL = ("the block raises on the model's inputs (T != S, B != T, a padding mask of the "
                               "memory's length) or gives NaN, so no model built on it runs or can be judged")
_TRAINED_WITH_YOUR_BLOCK = ("the trained model is the student's, blocks included: a block that reads the tokens it "
                            "must predict trains a model that cannot generate, and the cross-attention map of the "
                            "trained model is read from the weights the block returns")
_RANDOM_IN_TRAINING = "a dropout in the block makes the model random in training mode, where Part C's tests run it"
_DETACHED_IN_THE_BLOCK = ("a block that detaches the memory stops the encoder's gradient inside the model: the "
                          "model's gradient test cannot tell it from a detach in decode")
CROSSES = {**{name: _BLOCK_RUNS_YOUR_CROSS for name in (
               "kv_from_decoder", "values_from_decoder", "queries_from_memory", "heads_averaged", "no_weights",
               "memory_padding_ignored", "memory_padding_inverted", "padding_as_attn_mask")},
           **{name: _BLOCK_CANNOT_RUN_THE_MODEL for name in (
               "causal_mask_on_cross", "causal_mask_inverted", "memory_padding_on_self_attention",
               "self_attention_sequence_first", "batch_first_only_in_name")},
           **{name: _TRAINED_WITH_YOUR_BLOCK for name in (
               "no_causal_self_attention", "block_weights_averaged", "returns_self_attention_weights",
               "no_cross_residual", "replays_earlier_outputs")},
           "cross_attention_dropout": _RANDOM_IN_TRAINING, "memory_detached": _DETACHED_IN_THE_BLOCK}
VARIANTS = crossing(VARIANTS, CROSSES)


ALTERNATIVES = [
    Variant(
        "model_in_float64",
        "EncoderDecoder keeps every parameter in float64 (self.double() at the end of __init__): the text names no dtype "
        "for a model of token ids, so the tests compare it in its own dtype (issue 43 item 7)",
        edits={"encoder_decoder": (('        self.head = nn.Linear(width, VOCAB)\n', '        self.head = nn.Linear(width, VOCAB)\n        self.double()\n'),)},
    ),
    Variant(
        "cross_attention_keywords",
        "cross_attention passes query/key/value by keyword and unpacks the pair before returning it",
        edits={"cross_attention": ((
            """    return attention(x, memory, memory, key_padding_mask=memory_padding_mask,
                     need_weights=True, average_attn_weights=False)""",
            """    out, weights = attention(query=x, key=memory, value=memory, key_padding_mask=memory_padding_mask,
                             need_weights=True, average_attn_weights=False)
    return out, weights"""),)},
    ),
    Variant(
        "decoder_block_spelled_out",
        "DecoderBlock builds its layers in another order and writes each sublayer out, no helper closures",
        edits={"decoder_block": (
            ("""        self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.norm3 = nn.LayerNorm(width)
        self.ffn = FeedForward(width, hidden)""",
             """        self.norm3 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.norm1 = nn.LayerNorm(width)
        self.ffn = FeedForward(width, hidden)
        self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)"""),
            ("""            x = self.norm1(x + attend_to_itself(x))
            attended, weights = attend_to_memory(x)
            x = self.norm2(x + attended)""",
             """            h = self.self_attention(x, x, x, attn_mask=causal_mask)[0]
            x = self.norm1(x + h)
            h, weights = self.cross_attention(x, memory, memory, key_padding_mask=memory_padding_mask,
                                              average_attn_weights=False)
            x = self.norm2(x + h)"""),
        )},
    ),
    Variant(
        "decoder_block_cross_attention_first",
        "the solution with its two attention modules created in the other order (cross_attention first)",
        edits={"decoder_block": ((
            """        self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)""",
            """        self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)"""),)},
    ),
    Variant(
        "decode_weights_by_index",
        "decode fills a list of the right length by block index instead of appending",
        edits={"encoder_decoder": (
            ("x, all_weights = self.embed(dec_in), []", "x, all_weights = self.embed(dec_in), [None] * len(self.decoder_blocks)"),
            ("for block in self.decoder_blocks:\n            x, weights", "for index, block in enumerate(self.decoder_blocks):\n            x, weights"),
            ("all_weights.append(weights)", "all_weights[index] = weights"))},
    ),
    Variant(
        "causal_mask_from_ones",
        "the decoder's causal mask is built as ones(n, n).triu(1).bool()",
        edits={"encoder_decoder": ((
            "future = torch.triu(torch.ones(dec_in.size(1), dec_in.size(1), dtype=torch.bool), diagonal=1)",
            "future = torch.ones(dec_in.size(1), dec_in.size(1)).triu(1).bool()"),)},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz": ((ANSWERS, 'Q1, Q2, Q3, Q4 = " B ", "C", "a ", "D"'),)},
    ),
]

LIBRARY = [
    Variant(
        "decoder_block_through_pytorch",
        "DecoderBlock runs an nn.TransformerDecoderLayer that holds the block's own modules, and gets the "
        "cross weights from its cross_attention on the query the layer gave that module: correct, but "
        "PyTorch's layer does the exercise's work",
        replace={"decoder_block": '''class DecoderBlock(nn.Module):
    def __init__(self, width, heads, hidden, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.cross_attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.norm3 = nn.LayerNorm(width)
        self.ffn = FeedForward(width, hidden)
        layer = nn.TransformerDecoderLayer(width, heads, hidden, dropout=0.0, batch_first=True, norm_first=norm_first)
        layer.self_attn, layer.multihead_attn = self.self_attention, self.cross_attention
        layer.norm1, layer.norm2, layer.norm3 = self.norm1, self.norm2, self.norm3
        layer.linear1, layer.linear2 = self.ffn.linear1, self.ffn.linear2
        self._layer = [layer]  # in a list: the block's parameters keep their own names

    def forward(self, x, memory, causal_mask=None, memory_padding_mask=None):
        queries = []  # what the layer hands its cross-attention
        hook = self.cross_attention.register_forward_pre_hook(lambda module, args: queries.append(args[0]))
        try:
            out = self._layer[0](x, memory, tgt_mask=causal_mask, memory_key_padding_mask=memory_padding_mask)
        finally:
            hook.remove()
        return out, cross_attention(self.cross_attention, queries[0], memory, memory_padding_mask)[1]
'''},
        flagged="DecoderBlock calls torch.nn.TransformerDecoderLayer, which does this exercise's work",
    ),
]
