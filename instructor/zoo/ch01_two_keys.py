"""Wrong answers to chapter 01 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "01_two_keys"

GOOD_SOFTMAX = '''def softmax(scores, axis=-1):
    scores = np.asarray(scores, dtype=float)
    shifted = scores - scores.max(axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)
'''


def _attention(body: str) -> str:
    return "def attention(Q, K, V):\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())


VARIANTS = [
    Variant(
        "softmax_axis0",
        "softmax normalises over the first axis instead of the one it is given",
        {"softmax": '''def softmax(scores, axis=-1):
    scores = np.asarray(scores, dtype=float)
    exps = np.exp(scores - scores.max(axis=0, keepdims=True))
    return exps / exps.sum(axis=0, keepdims=True)
'''},
        {"test_softmax_rows": "sum to something else than 1",
         "test_attention_weights": "softmax over the key axis"},
    ),
    Variant(
        "softmax_ignores_axis",
        "softmax always normalises the last axis, whatever `axis` says",
        {"softmax": GOOD_SOFTMAX.replace("axis=axis", "axis=-1")},
        {"test_softmax_values": "use the `axis` argument"},
    ),
    Variant(
        "softmax_no_max_shift",
        "softmax exponentiates the raw scores, so exp(1000) overflows to inf and inf/inf is NaN",
        {"softmax": '''def softmax(scores, axis=-1):
    exps = np.exp(np.asarray(scores, dtype=float))
    return exps / exps.sum(axis=axis, keepdims=True)
'''},
        {"test_softmax_stable": "subtract each row's maximum before exp"},
    ),
    Variant(
        "attention_no_scale",
        "scores are Q K^T without the 1/sqrt(d_k) factor",
        {"softmax": GOOD_SOFTMAX, "attention": _attention('''
weights = softmax(Q @ np.swapaxes(K, -1, -2), axis=-1)
return weights @ V, weights
''')},
        {"test_attention_scaling": "too peaked, were the scores divided by sqrt(d_k)?",
         "test_attention_matches_pytorch": "the scores are not divided by sqrt(d_k)"},
    ),
    Variant(
        "attention_divides_by_dk",
        "scores are divided by d_k instead of sqrt(d_k)",
        {"softmax": GOOD_SOFTMAX, "attention": _attention('''
weights = softmax(Q @ np.swapaxes(K, -1, -2) / Q.shape[-1], axis=-1)
return weights @ V, weights
''')},
        {"test_attention_scaling": "divide by sqrt(d_k), not by d_k",
         "test_attention_matches_pytorch": "divided by d_k instead of sqrt(d_k)"},
    ),
    Variant(
        "attention_weights_transposed",
        "the returned weights are (Lk, Lq): transposed once too often",
        {"softmax": GOOD_SOFTMAX, "attention": _attention('''
weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-1)
return weights @ V, np.swapaxes(weights, -1, -2)
''')},
        {"test_attention_shapes": "the last two axes look swapped",
         "test_attention_matches_pytorch": "the last two axes look swapped"},
    ),
    Variant(
        "attention_output_ignores_values",
        "the output mixes the keys instead of the values",
        {"softmax": GOOD_SOFTMAX, "attention": _attention('''
weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-1)
return weights @ K, weights
''')},
        {"test_attention_shapes": "the output mixes the value vectors",
         "test_attention_equal_keys": "the output must be the weights times the values V"},
    ),
    Variant(
        "attention_softmax_over_queries",
        "attention's softmax runs over the query axis (-2)",
        {"softmax": GOOD_SOFTMAX, "attention": _attention('''
weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-2)
return weights @ V, weights
''')},
        {"test_attention_weights": "softmax over the key axis",
         "test_attention_matches_pytorch": "softmax runs over the query axis"},
    ),
    Variant(
        "attention_hardcoded_two_keys",
        "attention returns the worked example's numbers whatever the input",
        {"softmax": GOOD_SOFTMAX, "attention": _attention('''
return np.array([[1.462117, 1.075766]]), np.array([[0.731059, 0.268941]])
''')},
        {"test_attention_shapes": "has shape (1, 2), expected (2, 3, 5)",
         "test_attention_matches_pytorch": "has shape (1, 2), expected"},
    ),
    Variant(
        "hand_answers_swapped",
        "the hand-computed weights are given in the wrong order",
        {"hand_answers": '''HAND_WEIGHTS = np.array([[0.269, 0.731]])
HAND_OUTPUT = np.array([[0.538, 2.924]])
'''},
        {"test_hand_answers": "HAND_WEIGHTS is off"},
    ),
]
