"""Chapter 02: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant

ASSIGNMENT = "02_scaling"

STD = 'raw.std()), "scaled_std": float(scaled.std())'
DRAW_Q = "q = rng.standard_normal((n_queries, 1, d_k))  # one query per row"
DRAW_K = "k = rng.standard_normal((n_queries, n_keys, d_k))  # n_keys keys per query"

VARIANTS = [
    # ------------------------------------------------------------ Part A: mean_top_weight
    Variant(
        "top_weight_max_raw_score",
        "mean_top_weight averages each row's largest raw score instead of its largest softmax weight",
        edits={"mean_top_weight": (("return float(weights.max(axis=-1).mean())",
                                    "return float(scores.max(axis=-1).mean())"),)},
        expect={"test_top_weight_range": "not the largest raw score",
                "test_top_weight_values": "largest raw score instead of the largest softmax weight"},
    ),
    Variant(
        "top_weight_softmax_over_queries",
        "mean_top_weight normalises over the query axis (axis 0) instead of the key axis",
        edits={"mean_top_weight": (("scores.max(axis=-1, keepdims=True)", "scores.max(axis=0, keepdims=True)"),
                                   ("weights.sum(axis=-1, keepdims=True)", "weights.sum(axis=0, keepdims=True)"))},
        expect={"test_top_weight_range": "is the softmax taken over the key axis",
                "test_top_weight_values": "softmax runs over the query axis"},
    ),
    Variant(
        "top_weight_no_max_shift",
        "mean_top_weight exponentiates the raw scores, so scores around 1000 overflow to inf and NaN",
        edits={"mean_top_weight": (("weights = np.exp(shifted)", "weights = np.exp(scores)"),)},
        expect={"test_top_weight_stable": "subtract each row's maximum before exp"},
    ),
    Variant(
        "top_weight_global_max",
        "mean_top_weight returns the single largest weight of all rows instead of the mean of each row's",
        edits={"mean_top_weight": (("weights.max(axis=-1).mean()", "weights.max()"),)},
        expect={"test_top_weight_values": "largest weight of all rows instead of the mean"},
    ),
    # ------------------------------------------------------------ Part B: score_statistics
    Variant(
        "statistics_divide_by_dk",
        "the scaled scores are divided by d_k instead of sqrt(d_k)",
        edits={"score_statistics": (("raw / np.sqrt(d_k)", "raw / d_k"),)},
        expect={"test_statistics_keys": "sqrt(d_k), not by d_k",
                "test_statistics_table": "divided by d_k instead of sqrt(d_k)"},
    ),
    Variant(
        "statistics_no_scaling",
        "the 'scaled' scores are the raw scores, never divided",
        edits={"score_statistics": (("raw / np.sqrt(d_k)", "raw"),)},
        expect={"test_statistics_keys": "divide the raw scores by sqrt(d_k)",
                "test_statistics_table": "not divided by sqrt(d_k)"},
    ),
    Variant(
        "statistics_k_before_q",
        "k is drawn before q, so every figure shifts",
        edits={"score_statistics": ((f"{DRAW_Q}\n    {DRAW_K}", f"{DRAW_K}\n    {DRAW_Q}"),)},
        expect={"test_statistics_table": "k is drawn before q"},
    ),
    Variant(
        "statistics_fresh_default_rng",
        "score_statistics draws from its own np.random.default_rng(0) instead of the rng passed in",
        edits={"score_statistics": ((DRAW_Q, f"rng = np.random.default_rng(0)\n    {DRAW_Q}"),)},
        expect={"test_statistics_table": "makes its own np.random.default_rng(0)",
                "test_statistics_uses_rng": "ignores the `rng` it is given"},
    ),
    Variant(
        "statistics_unseeded_rng",
        "score_statistics draws from an unseeded np.random.default_rng(), so nothing is reproducible",
        edits={"score_statistics": ((DRAW_Q, f"rng = np.random.default_rng()\n    {DRAW_Q}"),)},
        expect={"test_statistics_uses_rng": "same seed 7 give different statistics",
                "test_statistics_table": "then k (n_queries, n_keys, d_k) from `rng`"},
    ),
    Variant(
        "statistics_query_per_key",
        "q is drawn with one query per key, (n_queries, n_keys, d_k): more draws than the experiment",
        edits={"score_statistics": (("rng.standard_normal((n_queries, 1, d_k))",
                                     "rng.standard_normal((n_queries, n_keys, d_k))"),)},
        expect={"test_statistics_uses_rng": "the generator is not where",
                "test_statistics_table": "draw q (n_queries, 1, d_k) then k"},
    ),
    Variant(
        "statistics_ddof_one",
        "the std divides by n - 1 (torch.std's default): invisible at 16 000 scores, wrong on small samples",
        edits={"score_statistics": ((STD, 'raw.std(ddof=1)), "scaled_std": float(scaled.std(ddof=1))'),)},
        expect={"test_statistics_table": "ddof=1"},
    ),
    Variant(
        "statistics_std_per_query",
        "the std is taken within each query's row of scores and averaged",
        edits={"score_statistics": ((STD, 'raw.std(axis=-1).mean()), "scaled_std": float(scaled.std(axis=-1).mean())'),)},
        expect={"test_statistics_table": "taken per query and averaged"},
    ),
    Variant(
        "statistics_hardcoded_table",
        "score_statistics returns the table's figures instead of running the experiment",
        replace={"score_statistics": '''def score_statistics(d_k, rng, n_queries=2000, n_keys=8):
    table = {4: (2.004020, 1.002010, 0.523529, 0.341972), 64: (7.957593, 0.994699, 0.877889, 0.359961),
             1024: (31.834249, 0.994820, 0.967981, 0.357601)}
    raw_std, scaled_std, raw_top, scaled_top = table.get(d_k, table[64])
    return {"raw_std": raw_std, "scaled_std": scaled_std, "raw_top": raw_top, "scaled_top": scaled_top}
'''},
        expect={"test_statistics_table": "raw_std for d_k="},
    ),
    Variant(
        "top_weight_float32_tensor",
        "mean_top_weight returns a 0-d float32 tensor where the text asks for one Python float",
        edits={"mean_top_weight": (("return float(weights.max(axis=-1).mean())",
                                    "return torch.tensor(weights.max(axis=-1).mean(), dtype=torch.float32)"),)},
        expect={"test_top_weight_range": "return one Python float"},
    ),
    # ------------------------------------------------------------ Part C: softmax_jacobian
    Variant(
        "jacobian_np_diag",
        "the diagonal term is np.diag(p), which works for one vector only",
        edits={"softmax_jacobian": (("diagonal = p[..., :, None] * np.eye(p.shape[-1])", "diagonal = np.diag(p)"),)},
        expect={"test_jacobian_batched": "np.diag and np.outer take one vector only"},
        only=True,
    ),
    Variant(
        "jacobian_no_outer_product",
        "the Jacobian is diag(p) alone: the -p p^T term is missing",
        edits={"softmax_jacobian": (("return diagonal - outer", "return diagonal"),)},
        expect={"test_jacobian_single": "the -p p^T term is missing",
                "test_jacobian_saturation": "expected 0"},
    ),
    Variant(
        "jacobian_sign_flipped",
        "the Jacobian is p p^T - diag(p), the right matrix with the wrong sign",
        edits={"softmax_jacobian": (("return diagonal - outer", "return outer - diagonal"),)},
        expect={"test_jacobian_single": "the sign is flipped",
                "test_jacobian_batched": "make the test of one vector pass first"},
    ),
    Variant(
        "jacobian_inner_product",
        "p^T p (one number) is subtracted instead of the outer product p p^T",
        edits={"softmax_jacobian": (("outer = p[..., :, None] * p[..., None, :]",
                                     "outer = (p * p).sum(axis=-1)[..., None, None]"),)},
        expect={"test_jacobian_single": "p^T p, a single number",
                "test_jacobian_saturation": "outer product p p^T"},
    ),
    Variant(
        "jacobian_single_vector_only",
        "np.diag and np.outer: right for one vector, fails on a batch",
        edits={"softmax_jacobian": (("diagonal = p[..., :, None] * np.eye(p.shape[-1])", "diagonal = np.diag(p)"),
                                    ("outer = p[..., :, None] * p[..., None, :]", "outer = np.outer(p, p)"))},
        expect={"test_jacobian_batched": "np.diag and np.outer take one vector only"},
    ),
    # ------------------------------------------------------------ Part D: quiz
    Variant(
        "quiz_wrong_answers",
        "every quiz answer is a tempting wrong one (Q1 not even a letter)",
        replace={"quiz": 'Q1 = "24"\nQ2 = "c"\nQ3 = "b"\nQ4 = "a"'},
        expect={"test_quiz_q1": "answer with one letter as a string",
                "test_quiz_q2": "Q2 is not right: (c) 0.81 is p_1 squared",
                "test_quiz_q3": "Q3 is not right: (b) the last axis, shape[-1], is the width d_k",
                "test_quiz_q4": "Q4 is not right: (a) the raw spread is sqrt(256) = 16"},
    ),
    Variant(
        "predict_spread_wrong",
        "predicts the variance (400) instead of the standard deviation",
        replace={"predict_spread": "PREDICTED_SPREAD = 400.0\n"},
        expect={"test_predict_spread": "400 is the variance"},
    ),
    # ------------------------------------------------------------ issue 54, third hunt
    Variant(
        "top_weight_max_over_axis0",
        "mean_top_weight takes each key column's largest weight (max over axis 0) instead of each row's",
        edits={"mean_top_weight": (("weights.max(axis=-1).mean()", "weights.max(axis=0).mean()"),)},
        expect={"test_top_weight_values": "instead of over each row's keys, axis -1",
                "test_top_weight_stable": "instead of over each row's keys, axis -1"},
        only=True,
    ),
    Variant(
        "statistics_scaled_top_from_raw",
        "score_statistics reports mean_top_weight(raw) as scaled_top too (a copied line)",
        edits={"score_statistics": (('"scaled_top": mean_top_weight(scaled)', '"scaled_top": mean_top_weight(raw)'),)},
        expect={"test_statistics_keys": "scaled_top of the scaled ones",
                "test_statistics_table": "scaled_top is mean_top_weight of the raw scores"},
        only=True,
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "top_weight_shifts_input_in_place",
        "mean_top_weight subtracts the row maximum with `scores -= ...`, changing the caller's float array in place",
        edits={"mean_top_weight": (("    shifted = scores - scores.max(axis=-1, keepdims=True)  # (..., n_keys), row max is 0\n"
                                    "    weights = np.exp(shifted)",
                                    "    scores -= scores.max(axis=-1, keepdims=True)\n    weights = np.exp(scores)"),)},
        expect={"test_top_weight_values": "mean_top_weight changed the scores it was given"}, only=True,
    ),
    Variant(
        "top_weight_mean_over_axis0",
        "mean_top_weight averages the row maxima with .mean(axis=0): an array for batched scores, and float() raises",
        edits={"mean_top_weight": (("return float(weights.max(axis=-1).mean())",
                                    "return float(weights.max(axis=-1).mean(axis=0))"),)},
        expect={"test_top_weight_values": "then the mean of all of them (.mean() with no axis)"}, only=True,
    ),
    Variant(
        "jacobian_eye_from_axis0",
        "the identity of diag(p) is np.eye(p.shape[0]): right for one vector, the batch size for a batch",
        edits={"softmax_jacobian": (("np.eye(p.shape[-1])", "np.eye(p.shape[0])"),)},
        expect={"test_jacobian_batched": "np.eye(n), not p.shape[0]"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "top_weight_argmax",
        "mean_top_weight averages each row's argmax (the index of its top key) instead of its max (the weight)",
        edits={"mean_top_weight": (("return float(weights.max(axis=-1).mean())",
                                    "return float(weights.argmax(axis=-1).mean())"),)},
        expect={"test_top_weight_range": "not its argmax, which is the key's index"},
    ),
    Variant(
        "statistics_variance_not_std",
        "score_statistics reports the variance (.var()) of the raw and scaled scores instead of their standard deviation",
        edits={"score_statistics": (('float(raw.std()), "scaled_std": float(scaled.std())',
                                     'float(raw.var()), "scaled_std": float(scaled.var())'),)},
        expect={"test_statistics_keys": "that is the variance of the raw scores"},
    ),
    Variant(
        "statistics_uniform_draws",
        "q and k are drawn with rng.random (uniform on [0, 1)) instead of rng.standard_normal",
        edits={"score_statistics": (("q = rng.standard_normal((n_queries, 1, d_k))", "q = rng.random((n_queries, 1, d_k))"),
                                    ("k = rng.standard_normal((n_queries, n_keys, d_k))",
                                     "k = rng.random((n_queries, n_keys, d_k))"))},
        expect={"test_statistics_keys": "rng.standard_normal: mean 0, variance 1",
                "test_statistics_uses_rng": "with rng.standard_normal"},
    ),
    Variant(
        "jacobian_outer_rows_twice",
        "the outer product is p[..., None, :] * p[..., None, :], a row times a row: column j subtracts p_j^2 in every row",
        edits={"softmax_jacobian": (("outer = p[..., :, None] * p[..., None, :]", "outer = p[..., None, :] * p[..., None, :]"),)},
        expect={"test_jacobian_single": "column j subtracts p_j * p_j in every row",
                "test_jacobian_saturation": "a column times a row"},
    ),
]

ALTERNATIVES = [
    Variant(
        "top_weight_torch_softmax",
        "mean_top_weight through torch.softmax in float64 instead of a hand-written NumPy softmax",
        edits={"mean_top_weight": (("    shifted = scores - scores.max(axis=-1, keepdims=True)  # (..., n_keys), row max is 0\n"
                                    "    weights = np.exp(shifted)\n"
                                    "    weights /= weights.sum(axis=-1, keepdims=True)  # softmax over the keys\n",
                                    "    weights = torch.softmax(torch.from_numpy(scores), dim=-1).numpy()\n"),)},
    ),
    Variant(
        "statistics_broadcast_sum",
        "the raw scores as a broadcast product summed over d_k, and plain NumPy floats returned",
        edits={"score_statistics": (("raw = (q @ k.swapaxes(-1, -2))[:, 0, :]", "raw = (q * k).sum(axis=-1)"),
                                    ('float(raw.std()), "scaled_std": float(scaled.std())',
                                     'raw.std(), "scaled_std": scaled.std()'))},
    ),
    Variant(
        "jacobian_einsum",
        "the Jacobian built with np.einsum for both terms",
        edits={"softmax_jacobian": (("diagonal = p[..., :, None] * np.eye(p.shape[-1])",
                                     'diagonal = np.einsum("...i,ij->...ij", p, np.eye(p.shape[-1]))'),
                                    ("outer = p[..., :, None] * p[..., None, :]",
                                     'outer = np.einsum("...i,...j->...ij", p, p)'))},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz": (('Q1 = "d"', 'Q1 = " D "'), ('Q2 = "b"', 'Q2 = "B"'), ('Q3 = "a"', 'Q3 = "a "'),
                        ('Q4 = "c"', 'Q4 = " C"'))},
    ),
]
