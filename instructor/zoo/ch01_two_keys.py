"""Chapter 01: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant

ASSIGNMENT = "01_two_keys"

SCORES = "scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)"

VARIANTS = [
    Variant(
        "softmax_axis0",
        "softmax normalises over the first axis instead of the one it is given",
        edits={"softmax": (("scores.max(axis=axis", "scores.max(axis=0"), ("exps.sum(axis=axis", "exps.sum(axis=0"))},
        expect={"test_softmax_rows": "sum to something else than 1"},  # attention is judged around this softmax
    ),
    # issue 54's hunt: mistakes not seen before, each losing its own part only, with a message naming it
    Variant(
        "softmax_sums_everything",
        "softmax divides by the sum of all entries instead of each row's",
        edits={"softmax": (("return exps / exps.sum(axis=axis, keepdims=True)", "return exps / exps.sum()"),)},
        expect={"test_softmax_rows": "the whole array sums to 1, not each row"},
    ),
    Variant(
        "attention_keys_not_transposed",
        "the scores are Q @ K, without swapping K's last two axes",
        edits={"attention": (("scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)", "scores = Q @ K / np.sqrt(d_k)"),)},
        expect={"test_attention_shapes": "queries first: Q @ np.swapaxes(K, -1, -2)"},
    ),
    Variant(
        "softmax_ignores_axis",
        "softmax always normalises the last axis, whatever `axis` says",
        edits={"softmax": (("scores.max(axis=axis", "scores.max(axis=-1"), ("exps.sum(axis=axis", "exps.sum(axis=-1"))},
        expect={"test_softmax_values": "use the `axis` argument"},
    ),
    Variant(
        "softmax_no_max_shift",
        "softmax exponentiates the raw scores, so exp(1000) overflows to inf and inf/inf is NaN",
        edits={"softmax": (("exps = np.exp(shifted)", "exps = np.exp(scores)"),)},
        expect={"test_softmax_stable": "subtract each row's maximum before exp"},
    ),
    Variant(
        "attention_no_scale",
        "scores are Q K^T without the 1/sqrt(d_k) factor",
        edits={"attention": ((SCORES, "scores = Q @ np.swapaxes(K, -1, -2)"),)},
        expect={"test_attention_scaling": "too peaked, divide the scores by sqrt(d_k)",
                "test_attention_matches_pytorch": "the scores are not divided by sqrt(d_k)"},
    ),
    Variant(
        "attention_divides_by_dk",
        "scores are divided by d_k instead of sqrt(d_k)",
        edits={"attention": (("/ np.sqrt(d_k)", "/ d_k"),)},
        expect={"test_attention_scaling": "divide by sqrt(d_k), not by d_k",
                "test_attention_matches_pytorch": "divided by d_k instead of sqrt(d_k)"},
    ),
    Variant(
        "attention_weights_transposed",
        "the returned weights are (Lk, Lq): transposed once too often",
        edits={"attention": (("return output, weights", "return output, np.swapaxes(weights, -1, -2)"),)},
        expect={"test_attention_shapes": "the last two axes look swapped",
                "test_attention_matches_pytorch": "the last two axes look swapped"},
    ),
    Variant(
        "attention_output_ignores_values",
        "the output mixes the keys instead of the values",
        edits={"attention": (("output = weights @ V", "output = weights @ K"),)},
        expect={"test_attention_shapes": "the output mixes the value vectors",
                "test_attention_equal_keys": "the output must be the weights times the values V"},
    ),
    Variant(
        "attention_softmax_over_queries",
        "attention's softmax runs over the query axis (-2)",
        edits={"attention": (("softmax(scores, axis=-1)", "softmax(scores, axis=-2)"),)},
        expect={"test_attention_weights": "softmax over the key axis",
                "test_attention_matches_pytorch": "softmax runs over the query axis"},
    ),
    Variant(
        "attention_hardcoded_two_keys",
        "attention returns the worked example's numbers whatever the input",
        replace={"attention": '''def attention(Q, K, V):
    return np.array([[1.462117, 1.075766]]), np.array([[0.731059, 0.268941]])
'''},
        expect={"test_attention_shapes": "has shape (1, 2), expected (2, 3, 5)",
                "test_attention_matches_pytorch": "has shape (1, 2), expected"},
    ),
    Variant(
        "hand_answers_swapped",
        "the hand-computed weights are given in the wrong order",
        replace={"hand_answers": '''HAND_WEIGHTS = np.array([[0.196, 0.804]])
HAND_OUTPUT = np.array([[-0.218, 4.218]])
'''},
        expect={"test_hand_answers": "HAND_WEIGHTS is off"},
    ),
    Variant(
        "hand_output_left_none",
        "the weights are filled in, the output is left as the stub's None",
        edits={"hand_answers": (("\nHAND_OUTPUT = HAND_WEIGHTS @ np.array([[3.0, 1.0], [-1.0, 5.0]])", ""),)},
        expect={"test_hand_answers": "HAND_OUTPUT is still None"},
    ),
    Variant(
        "hand_answers_unscaled",
        "the hand answers forget the division by sqrt(d_k): softmax of the raw scores [2, 0]",
        replace={"hand_answers": "HAND_WEIGHTS = [[0.881, 0.119]]\nHAND_OUTPUT = [[2.523, 1.477]]\n"},
        expect={"test_hand_answers": "are the weights of the raw scores [2, 0]"},
    ),
    Variant(
        "predict_top_weight_linear",
        "predicts the first score over the sum of the scores, 2/6, as if softmax were a plain normalisation",
        replace={"predict_top_weight": "PREDICTED_TOP_WEIGHT = 2 / 6\n"},
        expect={"test_predict_top_weight": "that divides each score by the sum of the scores"},
    ),
    Variant(
        "predict_top_weight_hard_max",
        "predicts that the largest score takes all the weight",
        replace={"predict_top_weight": "PREDICTED_TOP_WEIGHT = 1\n"},
        expect={"test_predict_top_weight": "that is a hard maximum"},
    ),
    # issue 54's second hunt (2026-12-06): found with a bare ValueError in Part A and Part B blaming K's axes
    Variant(
        "softmax_sum_without_keepdims",
        "softmax divides by exps.sum(axis=axis) without keepdims, so (rows, keys) meets (rows,) and raises",
        edits={"softmax": (("return exps / exps.sum(axis=axis, keepdims=True)", "return exps / exps.sum(axis=axis)"),)},
        expect={"test_softmax_rows": "keepdims=True on the maximum and on the sum keeps the reduced axis",
                "test_attention_shapes": "your softmax raises on scores of two rows"},
        crosses="the student's attention calls the student's softmax, which raises, so it has no weights to judge: "
                "the grader may put no working softmax into the student's kernel",
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "softmax_shifts_input_in_place",
        "softmax subtracts the row maximum with `scores -= ...`, so the caller's float array changes in place",
        edits={"softmax": (("    shifted = scores - scores.max(axis=axis, keepdims=True)\n    exps = np.exp(shifted)",
                            "    scores -= scores.max(axis=axis, keepdims=True)\n    exps = np.exp(scores)"),)},
        expect={"test_softmax_values": "softmax changed the scores it was given"}, only=True,
    ),
    Variant(
        "softmax_global_max_shift",
        "softmax subtracts the maximum of the whole array, not each row's: a row far below it underflows to 0 / 0",
        edits={"softmax": (("scores.max(axis=axis, keepdims=True)", "scores.max()"),)},
        expect={"test_softmax_stable": "a row far below one maximum shared by the whole array"}, only=True,
    ),
    Variant(
        "attention_dk_from_key_count",
        "d_k is read as K.shape[-2], the number of keys, instead of the width of the queries and keys",
        edits={"attention": (("d_k = Q.shape[-1]", "d_k = K.shape[-2]"),)},
        expect={"test_attention_scaling": "divide the scores by sqrt(d_k), the width of Q and K"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "attention_scores_K_Qt",
        "the scores are K Q^T (keys as rows) instead of Q K^T, so the weights come out (Lk, Lq)",
        edits={"attention": (("scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
                              "scores = K @ np.swapaxes(Q, -1, -2) / np.sqrt(d_k)"),)},
        expect={"test_attention_shapes": "where K Q^T would give (Lk, Lq)"},
    ),
    Variant(
        "attention_scaled_by_value_width",
        "d_k is read from V (V.shape[-1], the width of the values) instead of from Q or K",
        edits={"attention": (("d_k = Q.shape[-1]", "d_k = V.shape[-1]"),)},
        expect={"test_attention_scaling": "the width of Q and K",
                "test_attention_matches_pytorch": "divided by sqrt(d_v), the width of V"},
    ),
    Variant(
        "hand_values_as_columns",
        "the hand output takes v1 and v2 as the columns of the value matrix instead of its rows",
        edits={"hand_answers": (("HAND_WEIGHTS @ np.array([[3.0, 1.0], [-1.0, 5.0]])",
                                 "HAND_WEIGHTS @ np.array([[3.0, -1.0], [1.0, 5.0]])"),)},
        expect={"test_hand_answers": "v1 and v2 are the columns of your value matrix"},
    ),
]

ALTERNATIVES = [
    Variant(
        "softmax_logsumexp",
        "softmax as exp(scores - logsumexp(scores)), the log-space formulation",
        edits={"softmax": (("    exps = np.exp(shifted)\n    return exps / exps.sum(axis=axis, keepdims=True)",
                            "    log_norm = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))\n"
                            "    return np.exp(shifted - log_norm)"),)},
    ),
    Variant(
        "attention_einsum",
        "scores and output written with np.einsum instead of @ and swapaxes",
        edits={"attention": ((SCORES, 'scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(d_k)'),
                             ("output = weights @ V", 'output = np.einsum("...qk,...kv->...qv", weights, V)'))},
    ),
    Variant(
        "attention_scales_queries",
        "the queries are scaled by 1/sqrt(d_k) before the product, and K transposed with .T-style axes",
        edits={"attention": ((SCORES, "scores = (Q / np.sqrt(d_k)) @ np.moveaxis(K, -1, -2)"),)},
    ),
    Variant(
        "hand_answers_rounded",
        "the hand answers typed as plain lists, and the prediction, rounded to three decimals as the text asks",
        replace={"hand_answers": "HAND_WEIGHTS = [[0.804, 0.196]]\nHAND_OUTPUT = [[2.218, 1.782]]\n",
                 "predict_top_weight": "PREDICTED_TOP_WEIGHT = 0.405\n"},
    ),
]
