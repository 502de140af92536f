"""Chapter 06: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant

ASSIGNMENT = "06_multihead_attention"

SPLIT = "return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)"
MERGE = "return x.transpose(1, 2).reshape(B, T, H * d_head)"
TRIL = "torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))"
BUFFER = f'self.register_buffer("mask", {TRIL})'
SOFTMAX = "weights = scores.softmax(dim=-1)"
OUT = "out = self.proj(merge_heads(weights @ v))"

CROSSES = ("the block runs the student's split_heads in the kernel, and this one raises there (or gives another "
           "shape), so no output of the block exists to judge; judging it around a working split would need the "
           "grader to put a function into the student's kernel, which nothing may reach (issue 54)")


def _mhsa(*edits):
    return {"mhsa": edits}


VARIANTS = [
    # ---------------------------------------------------------------- the list
    Variant(
        "scale_by_sqrt_d_model",
        "the scores are divided by sqrt(D) instead of sqrt(d_head)",
        edits=_mhsa(("/ math.sqrt(q.shape[-1])", "/ math.sqrt(D)")),
        expect={"test_mhsa_matches_sdpa": "divided by sqrt(d_model) instead of sqrt(d_head)",
                "test_mhsa_matches_multihead": "softmax(q k^T / sqrt(d_head))"},
    ),
    Variant(
        "split_view_straight",
        "split_heads views (B, T, D) straight as (B, H, T, d_head), so heads get whole tokens",
        edits={"split_merge": ((SPLIT, "return x.view(B, n_heads, T, D // n_heads)"),)},
        expect={"test_split_heads": "viewed straight as (B, H, T, d_head)",  # the view raises on the block's slices
                "test_mhsa_shapes": "split_heads views q, a slice of self.qkv(x), straight as (B, H, T, d_head)"},
        crosses=CROSSES,
    ),
    Variant(
        "split_reshape_straight",
        "split_heads reshapes (B, T, D) straight to (B, H, T, d_head) (reshape, so the block runs)",
        edits={"split_merge": ((SPLIT, "return x.reshape(B, n_heads, T, D // n_heads)"),)},
        expect={"test_split_heads": "viewed straight as (B, H, T, d_head)"},
        only=True,  # the block's tests judge the block around the student's own split_heads
    ),
    Variant(
        "merge_without_transpose",
        "merge_heads reshapes (B, H, T, d_head) to (B, T, D) without transposing back",
        edits={"split_merge": ((MERGE, "return x.reshape(B, T, H * d_head)"),)},
        expect={"test_merge_heads": "without transposing back"},
        only=True,
    ),
    Variant(
        "split_float_d_head",
        "split_heads computes d_head as D / n_heads, a float, which view refuses",
        edits={"split_merge": ((SPLIT, "return x.view(B, T, n_heads, D / n_heads).transpose(1, 2)"),)},
        # the message names the student's line that raised (make check's summary shows the same message)
        expect={"test_split_heads": "D / n_heads is a float",
                "test_mhsa_shapes": "d_head = D / n_heads is a float, use D // n_heads"},
        crosses=CROSSES,
    ),
    Variant(
        "three_linears",
        "the block projects with three Linears q, k and v instead of one fused qkv",
        edits=_mhsa(("self.qkv = nn.Linear(d_model, 3 * d_model)",
                     "self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))"),
                    ("self.qkv(x).split(D, dim=-1)", "(self.q(x), self.k(x), self.v(x))")),
        expect={"test_mhsa_structure": "the block holds no qkv.weight",
                "test_mhsa_causal": "its projections are one fused Linear self.qkv",
                "test_mhsa_matches_multihead": "its projections are one fused Linear self.qkv"},
    ),
    Variant(
        "mask_not_sliced",
        "the full (max_len, max_len) mask is applied to (T, T) scores",
        edits=_mhsa(("~self.mask[:T, :T]", "~self.mask")),
        expect={"test_mhsa_shapes": "mask[:T, :T]"},
    ),
    Variant(
        "mask_wrong_triangle",
        "the mask allows the upper triangle (torch.triu): queries see the future, not the past",
        edits=_mhsa((TRIL, TRIL.replace("tril", "triu"))),
        expect={"test_mhsa_causal": "on a later key"},
    ),
    Variant(
        "softmax_over_queries",
        "softmax runs over the query axis (dim=-2)",
        edits=_mhsa((SOFTMAX, "weights = scores.softmax(dim=-2)")),
        expect={"test_mhsa_causal": "softmax over the key axis (dim=-1)",
                "test_mhsa_matches_sdpa": "softmax runs over the query axis"},
    ),
    Variant(
        "no_output_projection",
        "the merged heads are returned without the output projection",
        edits=_mhsa((OUT, "out = merge_heads(weights @ v)")),
        expect={"test_mhsa_gradients": "proj.weight received no gradient",
                "test_mhsa_matches_sdpa": "the output projection proj is not applied"},
    ),
    Variant(
        "mask_as_parameter",
        "the causal mask is an nn.Parameter (requires_grad=False) instead of a buffer",
        edits=_mhsa((BUFFER, "self.mask = nn.Parameter(torch.tril(torch.ones(max_len, max_len)), requires_grad=False)"),
                    ("~self.mask[:T, :T]", "self.mask[:T, :T] == 0")),
        expect={"test_mhsa_structure": "self.register_buffer('mask', ...) instead of nn.Parameter"},
    ),
    Variant(
        "softmax_in_float32",
        "softmax(..., dtype=torch.float32) silently downcasts float64; the output is cast back",
        edits=_mhsa((SOFTMAX, "weights = scores.softmax(dim=-1, dtype=torch.float32)"),
                    ("merge_heads(weights @ v)", "merge_heads(weights.to(v.dtype) @ v)")),
        expect={"test_mhsa_float64": "something casts to float32"},
    ),
    # ---------------------------------------------------------------- our own
    Variant(
        "float32_then_cast_back",
        "the scores go through float32 and are cast back, so every dtype looks right but precision is lost",
        edits=_mhsa((SOFTMAX, "weights = scores.float().softmax(dim=-1).to(x.dtype)")),
        expect={"test_mhsa_float64": "part of the computation ran in float32"},
    ),
    Variant(
        "mask_hides_diagonal",
        "the mask hides the diagonal too (tril(..., diagonal=-1)): the first token sees nothing",
        edits=_mhsa((TRIL, "torch.tril(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=-1)")),
        expect={"test_mhsa_causal": "keep the diagonal"},
    ),
    Variant(
        "mask_built_in_forward",
        "the causal mask is rebuilt in every forward instead of registered once as a buffer",
        edits=_mhsa((f"        {BUFFER}\n", ""),
                    ("~self.mask[:T, :T]", "~torch.tril(torch.ones(T, T, dtype=torch.bool))")),
        expect={"test_mhsa_structure": "found no buffer of shape (max_len, max_len)"},
    ),
    Variant(
        "no_value_errors",
        "neither d_model % n_heads nor T > max_len is checked",
        edits=_mhsa(('''        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
''', ""), ('''        if T > self.max_len:
            raise ValueError(f"sequence of {T} tokens is longer than max_len={self.max_len}")
''', "")),
        expect={"test_mhsa_value_errors": "raise ValueError"},
    ),
    Variant(
        "weights_averaged_over_heads",
        "return_weights gives the weights averaged over the heads, (B, T, T)",
        edits=_mhsa(("(out, weights) if", "(out, weights.mean(dim=1)) if")),
        expect={"test_mhsa_shapes": "not averaged over heads"},
    ),
    Variant(
        "causal_flag_ignored",
        "the causal mask is applied even when causal=False",
        edits=_mhsa(("        if self.causal:\n            scores = scores.masked_fill",
                     "        scores = scores.masked_fill")),
        expect={"test_mhsa_causal": "with causal=False no mask is applied"},
    ),
    Variant(
        "split_without_transpose",
        "split_heads views to (B, T, H, d_head) and stops there",
        edits={"split_merge": ((SPLIT, "return x.view(B, T, n_heads, D // n_heads)"),)},
        expect={"test_split_heads": "then transpose(1, 2)",
                "test_mhsa_shapes": "make Part A's tests pass first"},
        crosses=CROSSES,
    ),
    Variant(
        "qkv_unpacked_k_q_v",
        "the fused projection is unpacked as k, q, v instead of q, k, v",
        edits=_mhsa(("q, k, v = (split_heads(t, self.n_heads)", "k, q, v = (split_heads(t, self.n_heads)")),
        expect={"test_mhsa_causal": "or the fused projection is unpacked as k, q, v",
                "test_mhsa_matches_sdpa": "or the fused projection is unpacked as k, q, v",
                "test_mhsa_matches_multihead": "or the fused projection is unpacked as k, q, v"},
    ),
    Variant(
        "weights_before_softmax",
        "return_weights=True returns the scores before the softmax instead of the weights",
        edits=_mhsa(("return (out, weights) if return_weights else out", "return (out, scores) if return_weights else out")),
        expect={"test_mhsa_causal": "they are the scores before the softmax",
                "test_mhsa_matches_multihead": "they are the scores before the softmax"},
    ),
    Variant(
        "fuse_along_input_axis",
        "fuse_qkv concatenates along dim 1, giving a (D, 3D) weight",
        edits={"fuse_qkv": (("dim=0", "dim=1"),)},
        expect={"test_fuse_qkv_shape": "stack along dim 0"},
    ),
    Variant(
        "fuse_wrong_order",
        "fuse_qkv stacks K before Q",
        edits={"fuse_qkv": (("[w_q, w_k, w_v]", "[w_k, w_q, w_v]"),)},
        expect={"test_fuse_qkv_matches_separate": "W_Q, then W_K, then W_V"},
    ),
    Variant(
        "quiz_wrong",
        "every quiz answer is a plausible wrong option",
        replace={"quiz": 'Q1 = "a"\nQ2 = "b"\nQ3 = "a"\nQ4 = "a"\nQ5 = "c"\n'},
        expect={"test_quiz_q1": "(a) (2, 10, 6, 8) is the view before the transpose",
                "test_quiz_q2": "(b) reshape only needs the same number of elements",
                "test_quiz_q3": "(a) only nn.Parameter objects are trained",
                "test_quiz_q4": "(a) 20 counts one distribution per query",
                "test_quiz_q5": "(c) float64 keeps about 16 digits"},
    ),
    Variant(
        "predict_element_wrong",
        "predicts the element as if the transposed shape (B, H, T, d_head) were the order of memory",
        replace={"predict_element": "PREDICTED_ELEMENT = 185\n"},
        expect={"test_predict_element": "the transpose moves no data"},
    ),
    # issue 54's second hunt (2026-12-06): found with the block's tests blaming split_heads for merge_heads' view
    Variant(  # issue 54, third hunt: every test of the block names it (it named it in test_mhsa_matches_sdpa only)
        "scores_unscaled",
        "the scores are not divided by sqrt(d_head)",
        edits=_mhsa(("scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])", "scores = q @ k.transpose(-2, -1)"),),
        expect={"test_mhsa_matches_sdpa": "not divided by sqrt(d_head)",
                "test_mhsa_causal": "not divided by sqrt(d_head)",
                "test_mhsa_matches_multihead": "not divided by sqrt(d_head)",
                "test_mhsa_float64": "not divided by sqrt(d_head)",
                "test_mhsa_gradients": "not divided by sqrt(d_head)"},
        only=True,
    ),
    Variant(
        "mask_fills_zero",
        "the causal mask sets the future scores to 0 instead of -inf, so later keys keep the weight e^0",
        edits=_mhsa(('scores.masked_fill(~self.mask[:T, :T], float("-inf"))', "scores.masked_fill(~self.mask[:T, :T], 0.0)"),),
        expect={"test_mhsa_causal": "on a later key",
                "test_mhsa_matches_sdpa": "set to 0 instead of -inf",
                "test_mhsa_matches_multihead": "set to 0 instead of -inf",
                "test_mhsa_float64": "set to 0 instead of -inf",
                "test_mhsa_gradients": "set to 0 instead of -inf"},
        only=True,
    ),
    Variant(
        "fuse_stacks",
        "fuse_qkv stacks the three weights with torch.stack, giving (3, D, D) instead of (3D, D)",
        edits={"fuse_qkv": (("torch.cat([w_q, w_k, w_v], dim=0)", "torch.stack([w_q, w_k, w_v])"),)},
        expect={"test_fuse_qkv_shape": "torch.stack puts the three on a new axis",
                "test_fuse_qkv_matches_separate": "torch.stack puts the three on a new axis"},
        only=True,
    ),
    Variant(
        "merge_view_after_transpose",
        "merge_heads views the heads after transpose(1, 2), and view raises on a tensor out of memory order",
        edits={"split_merge": ((MERGE, "return x.transpose(1, 2).view(B, T, H * d_head)"),)},
        expect={"test_merge_heads": "reshape (not view: the transpose leaves memory out of order)",
                "test_mhsa_shapes": "merge_heads views the heads after transpose(1, 2)"},
        crosses="the block runs the student's merge_heads in the kernel, and this one raises there, so no output of "
                "the block exists to judge; judging it around a working merge would need the grader to put a "
                "function into the student's kernel, which nothing may reach (issue 54)",
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "max_len_off_by_one",
        "forward raises ValueError when T == max_len (T >= max_len), refusing the longest sequence the mask covers",
        edits={"mhsa": (("if T > self.max_len:", "if T >= self.max_len:"),)},
        expect={"test_mhsa_value_errors": "a sequence of exactly max_len tokens fits"},
    ),
    Variant(
        "scale_by_sqrt_T",
        "the scores are divided by sqrt(q.shape[-2]), the square root of the sequence length, instead of sqrt(d_head)",
        edits={"mhsa": (("math.sqrt(q.shape[-1])", "math.sqrt(q.shape[-2])"),)},
        expect={"test_mhsa_matches_sdpa": "the square root of the sequence length T instead of sqrt(d_head)"},
    ),
    Variant(
        "scores_k_at_q",
        "the scores are k @ q^T, the transpose of q @ k^T (rows are keys, columns queries)",
        edits={"mhsa": (("scores = q @ k.transpose(-2, -1)", "scores = k @ q.transpose(-2, -1)"),)},
        expect={"test_mhsa_matches_sdpa": "the scores are k q^T (rows are keys) instead of q k^T"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "split_heads_strided",
        "split_heads views (B, T, d_head, H) and permutes: head h gets every H-th feature instead of a contiguous slice",
        edits={"split_merge": (("return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)",
                                "return x.view(B, T, D // n_heads, n_heads).permute(0, 3, 1, 2)"),)},
        expect={"test_split_heads": "each head takes every H-th feature"},
    ),
    Variant(
        "mask_float_buffer",
        "the causal buffer is torch.tril(torch.ones(max_len, max_len)), float, so ~mask raises in forward",
        edits={"mhsa": (("torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))", "torch.tril(torch.ones(max_len, max_len))"),)},
        expect={"test_mhsa_value_errors": "the tests of Part C above name the step that fails",
                "test_mhsa_shapes": "works on a bool tensor only"},
    ),
]

ALTERNATIVES = [
    Variant(
        "split_merge_permute",
        "split_heads with reshape and permute, merge_heads with permute and flatten",
        edits={"split_merge": ((SPLIT, "return x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3)"),
                               (MERGE, "return x.permute(0, 2, 1, 3).flatten(2)"))},
    ),
    Variant(
        "mhsa_einsum",
        "scores and the weighted sum of values written with torch.einsum, the scale as a power",
        edits=_mhsa(("scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                     'scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5'),
                    (OUT, 'out = self.proj(merge_heads(torch.einsum("bhqk,bhkd->bhqd", weights, v)))')),
    ),
    Variant(
        "mhsa_chunk_extra_modules",
        "qkv split with chunk, a non-persistent mask buffer, an extra nn.Dropout(0.0) on the weights "
        "and the modules created in another order",
        edits=_mhsa(("        self.qkv = nn.Linear(d_model, 3 * d_model)\n        self.proj = nn.Linear(d_model, d_model)\n",
                     "        self.proj = nn.Linear(d_model, d_model)\n        self.qkv = nn.Linear(d_model, 3 * d_model)\n"
                     "        self.attn_dropout = nn.Dropout(0.0)\n"),
                    (BUFFER, f'self.register_buffer("mask", {TRIL}, persistent=False)'),
                    ("self.qkv(x).split(D, dim=-1)", "self.qkv(x).chunk(3, dim=-1)"),
                    (SOFTMAX, "weights = self.attn_dropout(scores.softmax(dim=-1))")),
    ),
    Variant(
        "fuse_vstack",
        "fuse_qkv with torch.vstack",
        edits={"fuse_qkv": (("torch.cat([w_q, w_k, w_v], dim=0)", "torch.vstack((w_q, w_k, w_v))"),)},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz": (('Q1 = "d"', 'Q1 = " D "'), ('Q3 = "c"', 'Q3 = "C"'), ('Q5 = "d"', 'Q5 = "d "'))},
    ),
]

LIBRARY = [
    Variant(
        "mhsa_through_sdpa",
        "the heads attend through F.scaled_dot_product_attention (the weights for return_weights by hand): "
        "correct, but torch's attention does the exercise's work",
        edits=_mhsa((OUT, "out = self.proj(merge_heads(F.scaled_dot_product_attention(\n"
                          "            q, k, v, attn_mask=self.mask[:T, :T] if self.causal else None)))")),
        flagged="MultiHeadSelfAttention calls torch.nn.functional.scaled_dot_product_attention, which does this exercise's work",
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'fuse_transposes_each_weight',
        "fuse_qkv transposes each weight before stacking (thinking of x @ W), which keeps the (3D, D) shape but puts W^T where nn.Linear's (out, in) weight W belongs",
        edits={'fuse_qkv': (('torch.cat([w_q, w_k, w_v], dim=0)', 'torch.cat([w_q.T, w_k.T, w_v.T], dim=0)'),)},
        expect={'test_fuse_qkv_matches_separate': 'each weight is transposed before stacking'},
    ),
]
