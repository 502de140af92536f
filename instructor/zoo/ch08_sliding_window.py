"""Wrong sliding-window masks and pair counts (chapter 08, Part E), each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "08_attention_cost"

VARIANTS = [
    Variant(
        "window_too_narrow",
        "the band keeps |i - j| < window: one position short on each side",
        edits={"sliding_window_mask": (("offset.abs() <= window", "offset.abs() < window"),)},
        expect={"test_window_mask_rule": "off by one",
                "test_window_mask_causal": "query 3 must see keys 1, 2 and 3"},
    ),
    Variant(
        "window_too_wide",
        "the band keeps |i - j| <= window + 1: one position too far on each side",
        edits={"sliding_window_mask": (("offset.abs() <= window", "offset.abs() <= window + 1"),)},
        expect={"test_window_mask_rule": "off by one"},
    ),
    Variant(
        "window_inverted",
        "the mask is True on the blocked pairs (nn.MultiheadAttention's convention)",
        edits={"sliding_window_mask": (("    return allowed", "    return ~allowed"),)},
        expect={"test_window_mask_rule": "'True = blocked' convention"},
    ),
    Variant(
        "window_float_mask",
        "the mask is returned as floats 0/1, which attention would add to the scores",
        edits={"sliding_window_mask": (("    return allowed", "    return allowed.float()"),)},
        expect={"test_window_mask_rule": "masks are bool tensors",
                "test_window_mask_causal": "expected bool"},
    ),
    Variant(
        "window_zero_means_full",
        "window=0 is read as 'no limit' (a common API convention): every token sees every token",
        edits={"sliding_window_mask": (("allowed = offset.abs() <= window",
                                        "allowed = offset.abs() <= window if window > 0 else torch.ones(T, T, dtype=torch.bool)"),)},
        expect={"test_window_mask_rule": "it does not mean 'no limit'",
                "test_window_mask_causal": "with window=0 each token sees only itself"},
    ),
    Variant(
        "window_numpy_mask",
        "the mask is built and returned as a NumPy bool array",
        edits={"sliding_window_mask": (("    return allowed", "    return allowed.numpy()"),)},
        expect={"test_window_mask_rule": "torch.from_numpy turns a NumPy array into one",
                "test_window_mask_causal": "torch.from_numpy turns a NumPy array into one"},
    ),
    Variant(
        "window_not_causal",
        "causal=True is ignored: the band still reaches into the future",
        edits={"sliding_window_mask": (("    if causal:\n        allowed &= offset <= 0\n", ""),)},
        expect={"test_window_mask_causal": "not causal when asked"},
    ),
    Variant(
        "window_wrong_side",
        "with causal=True the band keeps the future half (j >= i) instead of the past",
        edits={"sliding_window_mask": (("allowed &= offset <= 0", "allowed &= offset >= 0"),)},
        expect={"test_window_mask_causal": "band on the wrong side"},
    ),
    Variant(
        "pairs_no_edges",
        "every row is counted as a full window, also the rows cut short at the ends",
        edits={"sliding_window_pairs": (
            ("reach = min(window, L - 1)  # no query sees further than the sequence goes", "reach = window"),
            ("return L * (reach + 1) - reach * (reach + 1) // 2", "return L * (reach + 1)"),
            ("return L * (2 * reach + 1) - reach * (reach + 1)", "return L * (2 * reach + 1)"),
        )},
        expect={"test_window_pairs_small": "the first and last rows have fewer"},
    ),
    Variant(
        "pairs_ignore_causal",
        "sliding_window_pairs counts the two-sided band even when causal=True",
        edits={"sliding_window_pairs": (("if causal:  # row i holds", "if False:  # row i holds"),)},
        expect={"test_window_pairs_small": "causal=True is ignored"},
    ),
    Variant(
        "pairs_build_the_mask",
        "sliding_window_pairs builds the (L, L) mask and sums it: right for short sequences, impossible for long",
        replace={"sliding_window_pairs": '''def sliding_window_pairs(L, window, causal=False):
    return int(sliding_window_mask(L, window, causal).sum())
'''},
        expect={"test_window_pairs_large": "does not fit in memory"},
    ),
    Variant(  # issue 54, third hunt
        "pairs_reach_unclipped",
        "sliding_window_pairs uses the window as the reach even when it exceeds L - 1",
        edits={"sliding_window_pairs": (("reach = min(window, L - 1)", "reach = window"),)},
        expect={"test_window_pairs_small": "the reach is min(window, L - 1)"},
        only=True,
    ),
]

# Correct answers written differently: each must keep full marks.
ALTERNATIVES = [
    Variant(
        "window_mask_triu_tril",
        "the band cut out of a matrix of ones with triu and tril (window=0 leaves the diagonal)",
        replace={"sliding_window_mask": '''def sliding_window_mask(T, window, causal=False):
    ones = torch.ones(T, T, dtype=torch.bool)
    return ones.triu(-window).tril(0 if causal else window)  # j >= i - window, and j <= i (+ window)
'''},
    ),
]
