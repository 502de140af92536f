"""Wrong answers to chapter 02 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "02_scaling"


def _function(signature: str, body: str) -> str:
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())


def _top_weight(body: str) -> str:
    return _function("mean_top_weight(scores)", body)


def _statistics(body: str) -> str:
    return _function("score_statistics(d_k, rng, n_queries=2000, n_keys=8)", body)


def _jacobian(body: str) -> str:
    return _function("softmax_jacobian(p)", body)


STABLE_SOFTMAX = '''
scores = np.asarray(scores, dtype=float)
weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
weights = weights / weights.sum(axis=-1, keepdims=True)
'''

# A correct score_statistics written the way a student would, with one line to break.
GOOD_STATISTICS = '''
q = rng.standard_normal((n_queries, 1, d_k))
k = rng.standard_normal((n_queries, n_keys, d_k))
raw = (q * k).sum(axis=-1)
scaled = raw / np.sqrt(d_k)
return {"raw_std": raw.std(), "scaled_std": scaled.std(),
        "raw_top": mean_top_weight(raw), "scaled_top": mean_top_weight(scaled)}
'''


def _statistics_with(old: str, new: str) -> str:
    assert old in GOOD_STATISTICS, old
    return _statistics(GOOD_STATISTICS.replace(old, new))


VARIANTS = [
    # ------------------------------------------------------------ Part A: mean_top_weight
    Variant(
        "top_weight_max_raw_score",
        "mean_top_weight averages each row's largest raw score instead of its largest softmax weight",
        {"mean_top_weight": _top_weight("return float(np.max(scores, axis=-1).mean())")},
        {"test_top_weight_range": "not the largest raw score",
         "test_top_weight_values": "largest raw score instead of the largest softmax weight"},
    ),
    Variant(
        "top_weight_softmax_over_queries",
        "mean_top_weight normalises over the query axis (axis 0) instead of the key axis",
        {"mean_top_weight": _top_weight('''
scores = np.asarray(scores, dtype=float)
weights = np.exp(scores - scores.max(axis=0, keepdims=True))
weights = weights / weights.sum(axis=0, keepdims=True)
return float(weights.max(axis=-1).mean())
''')},
        {"test_top_weight_range": "is the softmax taken over the key axis",
         "test_top_weight_values": "softmax runs over the query axis"},
    ),
    Variant(
        "top_weight_no_max_shift",
        "mean_top_weight exponentiates the raw scores, so scores around 1000 overflow to inf and NaN",
        {"mean_top_weight": _top_weight('''
weights = np.exp(np.asarray(scores, dtype=float))
weights = weights / weights.sum(axis=-1, keepdims=True)
return float(weights.max(axis=-1).mean())
''')},
        {"test_top_weight_stable": "subtract each row's maximum before exp"},
    ),
    Variant(
        "top_weight_global_max",
        "mean_top_weight returns the single largest weight of all rows instead of the mean of each row's",
        {"mean_top_weight": _top_weight(STABLE_SOFTMAX + "return float(weights.max())")},
        {"test_top_weight_values": "largest weight of all rows instead of the mean"},
    ),
    # ------------------------------------------------------------ Part B: score_statistics
    Variant(
        "statistics_divide_by_dk",
        "the scaled scores are divided by d_k instead of sqrt(d_k)",
        {"score_statistics": _statistics_with("raw / np.sqrt(d_k)", "raw / d_k")},
        {"test_statistics_keys": "sqrt(d_k), not by d_k",
         "test_statistics_table": "divided by d_k instead of sqrt(d_k)"},
    ),
    Variant(
        "statistics_no_scaling",
        "the 'scaled' scores are the raw scores, never divided",
        {"score_statistics": _statistics_with("raw / np.sqrt(d_k)", "raw")},
        {"test_statistics_keys": "divide the raw scores by sqrt(d_k)",
         "test_statistics_table": "not divided by sqrt(d_k)"},
    ),
    Variant(
        "statistics_k_before_q",
        "k is drawn before q, so every figure shifts",
        {"score_statistics": _statistics_with(
            "q = rng.standard_normal((n_queries, 1, d_k))\nk = rng.standard_normal((n_queries, n_keys, d_k))",
            "k = rng.standard_normal((n_queries, n_keys, d_k))\nq = rng.standard_normal((n_queries, 1, d_k))")},
        {"test_statistics_table": "k is drawn before q"},
    ),
    Variant(
        "statistics_fresh_default_rng",
        "score_statistics draws from its own np.random.default_rng(0) instead of the rng passed in",
        {"score_statistics": _statistics("rng = np.random.default_rng(0)\n" + GOOD_STATISTICS)},
        {"test_statistics_table": "makes its own np.random.default_rng(0)",
         "test_statistics_uses_rng": "ignores the `rng` it is given"},
    ),
    Variant(
        "statistics_unseeded_rng",
        "score_statistics draws from an unseeded np.random.default_rng(), so nothing is reproducible",
        {"score_statistics": _statistics("rng = np.random.default_rng()\n" + GOOD_STATISTICS)},
        {"test_statistics_uses_rng": "same seed 7 give different statistics",
         "test_statistics_table": "then k (n_queries, n_keys, d_k) from `rng`"},
    ),
    Variant(
        "statistics_query_per_key",
        "q is drawn with one query per key, (n_queries, n_keys, d_k): more draws than the experiment",
        {"score_statistics": _statistics_with("rng.standard_normal((n_queries, 1, d_k))",
                                              "rng.standard_normal((n_queries, n_keys, d_k))")},
        {"test_statistics_uses_rng": "the generator is not where",
         "test_statistics_table": "draw q (n_queries, 1, d_k) then k"},
    ),
    Variant(
        "statistics_ddof_one",
        "the std divides by n - 1 (torch.std's default): invisible at 16 000 scores, wrong on small samples",
        {"score_statistics": _statistics_with('raw.std(), "scaled_std": scaled.std()',
                                              'raw.std(ddof=1), "scaled_std": scaled.std(ddof=1)')},
        {"test_statistics_table": "ddof=1"},
    ),
    Variant(
        "statistics_std_per_query",
        "the std is taken within each query's row of scores and averaged",
        {"score_statistics": _statistics_with('raw.std(), "scaled_std": scaled.std()',
                                              'raw.std(axis=-1).mean(), "scaled_std": scaled.std(axis=-1).mean()')},
        {"test_statistics_table": "taken per query and averaged"},
    ),
    Variant(
        "statistics_hardcoded_table",
        "score_statistics returns the table's figures instead of running the experiment",
        {"score_statistics": _statistics('''
table = {4: (2.004020, 1.002010, 0.523529, 0.341972), 64: (7.957593, 0.994699, 0.877889, 0.359961),
         1024: (31.834249, 0.994820, 0.967981, 0.357601)}
raw_std, scaled_std, raw_top, scaled_top = table.get(d_k, table[64])
return {"raw_std": raw_std, "scaled_std": scaled_std, "raw_top": raw_top, "scaled_top": scaled_top}
''')},
        {"test_statistics_table": "raw_std for d_k="},
    ),
    # ------------------------------------------------------------ Part C: softmax_jacobian
    Variant(
        "jacobian_no_outer_product",
        "the Jacobian is diag(p) alone: the -p p^T term is missing",
        {"softmax_jacobian": _jacobian('''
p = np.asarray(p, dtype=float)
return p[..., :, None] * np.eye(p.shape[-1])
''')},
        {"test_jacobian_single": "the -p p^T term is missing",
         "test_jacobian_saturation": "expected 0"},
    ),
    Variant(
        "jacobian_sign_flipped",
        "the Jacobian is p p^T - diag(p), the right matrix with the wrong sign",
        {"softmax_jacobian": _jacobian('''
p = np.asarray(p, dtype=float)
return p[..., :, None] * p[..., None, :] - p[..., :, None] * np.eye(p.shape[-1])
''')},
        {"test_jacobian_single": "the sign is flipped",
         "test_jacobian_batched": "is off"},
    ),
    Variant(
        "jacobian_inner_product",
        "p^T p (one number) is subtracted instead of the outer product p p^T",
        {"softmax_jacobian": _jacobian('''
p = np.asarray(p, dtype=float)
return p[..., :, None] * np.eye(p.shape[-1]) - (p * p).sum(axis=-1)[..., None, None]
''')},
        {"test_jacobian_single": "p^T p, a single number",
         "test_jacobian_saturation": "outer product p p^T"},
    ),
    Variant(
        "jacobian_single_vector_only",
        "np.diag and np.outer: right for one vector, fails on a batch",
        {"softmax_jacobian": _jacobian("return np.diag(p) - np.outer(p, p)")},
        {"test_jacobian_batched": "np.diag and np.outer handle one vector only"},
    ),
    # ------------------------------------------------------------ Part D: quiz
    Variant(
        "quiz_wrong_answers",
        "every quiz answer is a tempting wrong one (Q1 not even a letter)",
        {"quiz": 'Q1 = "16"\nQ2 = "c"\nQ3 = "b"\nQ4 = "a"'},
        {"test_quiz_q1": "answer with one of 'a', 'b', 'c', 'd'",
         "test_quiz_q2": "Q2 is not right",
         "test_quiz_q3": "Q3 is not right",
         "test_quiz_q4": "Q4 is not right"},
    ),
]
