"""Chapter 03: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant, crossing

ASSIGNMENT = "03_masks"

CAUSAL = "return torch.ones(T, T, dtype=torch.bool).tril()"
SOFTMAX = 'weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)'
SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
COMPARE = '''    past_unchanged = torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5)
    last_changed = not torch.allclose(before[:, -1], after[:, -1], atol=1e-5)'''

VARIANTS = [
    # ------------------------------------------------------------------ Part A: causal_mask
    Variant(
        "causal_inverted",
        "causal_mask uses the 'True = blocked' convention (True on the future keys)",
        edits={"causal_mask": ((CAUSAL, "return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)"),)},
        expect={"test_causal_mask": "that is the 'True = blocked' convention"},
    ),
    Variant(
        "causal_diagonal_excluded",
        "causal_mask is off by one: the diagonal is blocked, so a position cannot see itself",
        edits={"causal_mask": ((".tril()", ".tril(diagonal=-1)"),)},
        expect={"test_causal_mask": "every position must see itself"},
    ),
    Variant(
        "causal_one_future_key",
        "causal_mask is off by one the other way: position i also sees key i + 1",
        edits={"causal_mask": ((".tril()", ".tril(diagonal=1)"),)},
        expect={"test_causal_mask": "one step into its future"},
    ),
    Variant(
        "causal_float_mask",
        "causal_mask returns a float 0/1 matrix instead of a bool mask",
        edits={"causal_mask": (("torch.ones(T, T, dtype=torch.bool)", "torch.ones(T, T)"),)},
        expect={"test_causal_mask": "has dtype torch.float32, expected torch.bool"},
    ),
    Variant(
        "causal_hardcoded",
        "causal_mask returns the 4 x 4 example whatever T is",
        replace={"causal_mask": '''def causal_mask(T):
    return torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool()
'''},
        expect={"test_causal_mask": "causal_mask(1) has shape (4, 4), expected (1, 1)"},
    ),
    # ------------------------------------------------------------------ Part B: padding_mask
    Variant(
        "padding_off_by_one",
        "padding_mask counts one real token too many (<= instead of <)",
        edits={"padding_mask": (("positions < lengths", "positions <= lengths"),)},
        expect={"test_padding_mask": "exactly L real tokens"},
    ),
    Variant(
        "padding_inverted",
        "padding_mask is True at the PAD positions",
        edits={"padding_mask": (("positions < lengths", "positions >= lengths"),)},
        expect={"test_padding_mask": "is True at the PAD positions"},
    ),
    Variant(
        "padding_needs_tensor",
        "padding_mask indexes `lengths[:, None]` directly, which fails on a Python list",
        edits={"padding_mask": (("    lengths = torch.as_tensor(lengths)\n", ""),)},
        expect={"test_padding_mask": "convert lengths with torch.as_tensor"},
    ),
    # ------------------------------------------------------------------ Part C: masked_softmax
    Variant(
        "mask_after_softmax",
        "the weights of blocked keys are zeroed after softmax, without renormalising",
        edits={"masked_softmax": ((SOFTMAX, "weights = torch.softmax(scores, dim=-1)"),)},
        expect={"test_masked_softmax_example": "the mask is applied after softmax without renormalising",
                "test_masked_softmax_rows": "sum to something else than 1"},
    ),
    Variant(
        "mask_inverted",
        "masked_softmax reads True as 'blocked' (the nn.MultiheadAttention convention)",
        edits={"masked_softmax": (("blocked = ~allowed", "blocked = allowed"),)},
        expect={"test_masked_softmax_example": "True is read as 'blocked'",
                "test_masked_softmax_rows": "blocked keys get weights up to"},
    ),
    Variant(
        "mask_multiplies_scores",
        "blocked scores are multiplied by 0 instead of set to -inf, so they keep weight e^0",
        edits={"masked_softmax": ((SOFTMAX, "weights = torch.softmax(scores * allowed, dim=-1)"),
                                  ("return weights.masked_fill(blocked, 0.0)", "return weights"))},
        expect={"test_masked_softmax_example": "multiplied by 0 instead of set to -inf",
                "test_masked_softmax_rows": "blocked keys get weights up to",
                "test_masked_attention_pad_invariance": "a PAD key must get weight exactly 0"},
    ),
    Variant(
        "fully_masked_nan",
        "masked_softmax leaves NaN in rows where every key is blocked",
        edits={"masked_softmax": (("return weights.masked_fill(blocked, 0.0)", "return weights"),)},
        expect={"test_masked_softmax_fully_masked": "NaN"},
    ),
    Variant(
        "fully_masked_uniform",
        "masked_softmax fills with -1e9 instead of -inf, so a fully blocked row becomes uniform",
        edits={"masked_softmax": (('float("-inf")', "-1e9"),
                                  ("return weights.masked_fill(blocked, 0.0)", "return weights"))},
        expect={"test_masked_softmax_fully_masked": "a finite number such as -1e9 instead of -inf"},
    ),
    # ------------------------------------------------------------------ Part D: masked_attention
    Variant(
        "attention_no_scale",
        "masked_attention forgets to divide the scores by sqrt(d_k)",
        edits={"masked_attention": ((SCORES, "scores = q @ k.transpose(-2, -1)"),)},
        expect={"test_masked_attention_sdpa": "the scores are not divided by sqrt(d_k)"},
    ),
    Variant(
        "attention_mixes_keys",
        "masked_attention mixes the keys instead of the values",
        edits={"masked_attention": (("return weights @ v, weights", "return weights @ k, weights"),)},
        expect={"test_masked_attention_sdpa": "the output mixes values"},
    ),
    # ------------------------------------------------------------------ Part E: to_mha_masks, leak check
    Variant(
        "mha_not_inverted",
        "to_mha_masks hands the course's masks to nn.MultiheadAttention without inverting them",
        edits={"to_mha_masks": (("key_padding_mask = ~valid", "key_padding_mask = valid"),
                                ("attn_mask = ~allowed", "attn_mask = allowed"))},
        expect={"test_to_mha_masks": "True means 'ignore this key'"},
    ),
    Variant(
        "mha_inverts_padding_only",
        "to_mha_masks inverts the key padding mask but not the attention mask",
        edits={"to_mha_masks": (("attn_mask = ~allowed", "attn_mask = allowed"),)},
        expect={"test_to_mha_masks": "True means 'this query may not attend"},
    ),
    Variant(
        "mha_float_masks",
        "to_mha_masks returns float 0/1 masks, which nn.MultiheadAttention adds to the scores",
        edits={"to_mha_masks": (("key_padding_mask = ~valid", "key_padding_mask = 1.0 - valid.float()"),
                                ("attn_mask = ~allowed", "attn_mask = 1.0 - allowed.float()"))},
        expect={"test_to_mha_masks": "adds* a float mask to the scores"},
    ),
    Variant(
        "leak_check_no_control",
        "future_leak_check never runs the control: it always reports that the last output changed",
        edits={"future_leak_check": (("return bool(past_unchanged), bool(last_changed)",
                                      "return bool(past_unchanged), True"),)},
        expect={"test_future_leak_control": "that comparison is the control"},
    ),
    Variant(
        "leak_check_pair_swapped",
        "future_leak_check returns (last_changed, past_unchanged): its two bools in the other order",
        edits={"future_leak_check": (("return bool(past_unchanged), bool(last_changed)",
                                      "return bool(last_changed), bool(past_unchanged)"),)},
        expect={"test_future_leak_detects_leak": "its two bools in the other order",
                "test_future_leak_control": "its two bools in the other order"},
        only=True,
    ),
    Variant(
        "mha_masks_swapped",
        "to_mha_masks returns (attn_mask, key_padding_mask): the two masks in the other order",
        edits={"to_mha_masks": (("return key_padding_mask, attn_mask", "return attn_mask, key_padding_mask"),)},
        expect={"test_to_mha_masks": "its two masks in the other order"},
    ),
    Variant(
        "leak_check_all_positions",
        "future_leak_check compares every position, the changed last one included, as 'the past'",
        edits={"future_leak_check": (("torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5)",
                                      "torch.allclose(before, after, atol=1e-5)"),)},
        expect={"test_future_leak_causal": "compare only positions 0 .. T-2"},
    ),
    Variant(
        "leak_check_constant_shift",
        "future_leak_check adds the same constant to every feature, which a LayerNorm erases",
        edits={"future_leak_check": (("changed[:, -1] += 1.0 + 3.0 * noise", "changed[:, -1] += 1.0"),)},
        expect={"test_future_leak_causal": "a LayerNorm erases a constant"},
    ),
    Variant(
        "leak_check_ignores_tuple",
        "future_leak_check slices block(x) directly, which fails when the block returns (output, weights)",
        edits={"future_leak_check": (("return out[0] if isinstance(out, tuple) else out", "return out"),)},
        expect={"test_future_leak_causal": "its first item is the output",
                "test_future_leak_detects_leak": "its first item is the output",
                "test_future_leak_control": "its first item is the output"},
    ),
    Variant(
        "leak_check_changes_x_in_place",
        "future_leak_check changes x itself before computing the 'before' outputs, so it compares x with x",
        edits={"future_leak_check": (("changed = x.clone()", "changed = x"),)},
        expect={"test_future_leak_causal": "modified the caller's x",
                "test_future_leak_detects_leak": "missed a leak"},
    ),
    # ------------------------------------------------------------------ Part F: quiz
    Variant(
        "quiz_wrong",
        "every quiz answer is a plausible wrong option",
        replace={"quiz": 'Q1 = "a"\nQ2 = "b"\nQ3 = "a"\nQ4 = "a"\n'},
        expect={"test_quiz_q1": "Q1 is not right: (a) 21 is the causal mask alone",
                "test_quiz_q2": "Q2 is not right: (b) 0.844 is what filling the masked score with 0 gives",
                "test_quiz_q3": "Q3 is not right: (a) PyTorch's boolean masks say the opposite",
                "test_quiz_q4": "Q4 is not right: (a) the sum is the same, but .mean divides it by 5"},
    ),
    Variant(
        "predict_allowed_wrong",
        "predicts the share without the diagonal (45 of 100 pairs)",
        replace={"predict_allowed": "PREDICTED_ALLOWED = 0.45\n"},
        expect={"test_predict_allowed": "strictly before each query"},
    ),
    # issue 54's second hunt (2026-12-06): found with the formula as the only message
    Variant(
        "attention_scaled_by_length",
        "masked_attention divides the scores by sqrt(k.shape[-2]), the number of keys, instead of sqrt(d_k)",
        edits={"masked_attention": (("math.sqrt(q.shape[-1])", "math.sqrt(k.shape[-2])"),)},
        expect={"test_masked_attention_sdpa": "divided by the square root of the number of keys T_k",
                "test_masked_attention_pad_invariance": "divided by the square root of the number of keys T_k"},
        only=True,
    ),
    Variant(  # issue 54, third hunt
        "attention_returns_scores",
        "masked_attention returns the scores instead of the weights as its second output",
        edits={"masked_attention": (("return weights @ v, weights", "return weights @ v, scores"),)},
        expect={"test_masked_attention_sdpa": "the second output is the scores"},
        only=True,
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "masked_softmax_fills_scores_in_place",
        "masked_softmax uses masked_fill_ (in place), writing -inf into the caller's scores",
        edits={"masked_softmax": (('scores.masked_fill(blocked, float("-inf"))',
                                   'scores.masked_fill_(blocked, float("-inf"))'),)},
        expect={"test_masked_softmax_rows": "masked_softmax changed the scores it was given"}, only=True,
    ),
    Variant(
        "attention_transposes_axes_1_2",
        "masked_attention transposes k with .transpose(1, 2): right for (B, T, d), wrong once a head axis is there",
        edits={"masked_attention": (("k.transpose(-2, -1)", "k.transpose(1, 2)"),)},
        expect={"test_masked_attention_sdpa": "k.transpose(-2, -1), which is right for any number of leading axes"},
    ),
    Variant(
        "leak_check_returns_tensors",
        "future_leak_check returns two 0-d bool tensors (comparisons of the largest difference) instead of two bools",
        edits={"future_leak_check": (("    past_unchanged = torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5)\n"
                                      "    last_changed = not torch.allclose(before[:, -1], after[:, -1], atol=1e-5)\n"
                                      "    return bool(past_unchanged), bool(last_changed)",
                                      "    past_unchanged = (before[:, :-1] - after[:, :-1]).abs().max() <= 1e-5\n"
                                      "    last_changed = (before[:, -1] - after[:, -1]).abs().max() > 1e-5\n"
                                      "    return past_unchanged, last_changed"),)},
        expect={"test_future_leak_causal": "return two Python bools"}, only=True,
    ),
    Variant(
        "causal_upper_triangle",
        "causal_mask keeps the upper triangle with its diagonal (.triu()): the rule transposed, j >= i",
        edits={"causal_mask": (("return torch.ones(T, T, dtype=torch.bool).tril()",
                                "return torch.ones(T, T, dtype=torch.bool).triu()"),)},
        expect={"test_causal_mask": "is the transpose of the rule"}, only=True,
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "masked_softmax_fills_plus_inf",
        "masked_softmax fills the blocked scores with +inf instead of -inf (a sign slip)",
        edits={"masked_softmax": (('scores.masked_fill(blocked, float("-inf"))', 'scores.masked_fill(blocked, float("inf"))'),)},
        expect={"test_masked_softmax_rows": "+inf (or NaN) gives exp = inf",
                "test_masked_attention_sdpa": "your masked_softmax gives NaN"},
    ),
    Variant(
        "attention_scaled_by_value_width",
        "masked_attention divides the scores by sqrt(v.shape[-1]), the width of the values, instead of sqrt(d_k)",
        edits={"masked_attention": (("math.sqrt(q.shape[-1])", "math.sqrt(v.shape[-1])"),)},
        expect={"test_masked_attention_sdpa": "divided by sqrt(d_v), the width of v"},
    ),
]


# one mistake, one loss: what still costs another part, and why (tests/test_chapters.py checks that each still does)
_RUNS_YOUR_SOFTMAX = ("masked_attention runs the student's masked_softmax (measured: its tests then fail too); a "
                      "PAD key that keeps weight moves the real tokens' outputs, so pad invariance cannot be judged "
                      "around a softmax that lets PAD in")
CROSSES = {name: _RUNS_YOUR_SOFTMAX for name in ("mask_multiplies_scores", "mask_after_softmax", "mask_inverted",
                                                 "masked_softmax_fills_plus_inf")}
VARIANTS = crossing(VARIANTS, CROSSES)


ALTERNATIVES = [
    Variant(
        "causal_from_indices",
        "causal_mask compared from position indices (j <= i) instead of tril",
        edits={"causal_mask": ((CAUSAL, "i = torch.arange(T)\n    return i[None, :] <= i[:, None]"),)},
    ),
    Variant(
        "masked_softmax_by_hand",
        "masked_softmax written by hand: exp of the shifted, masked scores over their sum, "
        "empty rows left at zero",
        edits={"masked_softmax": ((SOFTMAX + "\n    return weights.masked_fill(blocked, 0.0)  # a fully blocked row: NaN -> 0",
                                   "masked = scores.masked_fill(blocked, float(\"-inf\"))\n"
                                   "    shift = masked.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)\n"
                                   "    exps = torch.exp(masked - shift)  # blocked keys: exp(-inf) = 0\n"
                                   "    total = exps.sum(dim=-1, keepdim=True)\n"
                                   "    return exps / torch.where(total > 0, total, torch.ones_like(total))"),)},
    ),
    Variant(
        "attention_einsum_float64",
        "masked_attention with einsum; works the same in float64",
        edits={"masked_attention": ((SCORES, 'scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5'),
                                    ("return weights @ v, weights", 'return torch.einsum("...qk,...kv->...qv", weights, v), weights'))},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz": (('Q1 = "c"', 'Q1 = " C "'), ('Q3 = "d"', 'Q3 = "D"'))},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'leak_check_changes_last_sequence',
        'future_leak_check changes changed[-1], the last sequence of the batch, instead of changed[:, -1], the last token of every sequence',
        edits={'future_leak_check': (('changed[:, -1] += 1.0 + 3.0 * noise', 'changed[-1] += 1.0 + 3.0 * noise'),)},
        expect={'test_future_leak_causal': 'x[-1] is the whole last sequence'},
    ),
]
