"""Chapter 05: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant, crossing

ASSIGNMENT = "05_positional_encoding"

COMPARE = "return torch.allclose(output_of_permuted, permuted_output, atol=atol)"
FILL = "    table[:, 0::2] = torch.sin(angles)\n    table[:, 1::2] = torch.cos(angles)"
RAISE = '''        if T > self.max_len:
            raise ValueError(f"sequence of {T} tokens but max_len is {self.max_len}: "
                             f"the learned table has no row for position {self.max_len}")
'''
OFFSETS = "return positions[None, :] - positions[:, None]"
R_PAIRS = "r[relative_offsets(T) + T - 1]"
SCALED = "return (content + position) / d_k ** 0.5"
SIN_ROW = "R[sin_rows, sin_rows], R[sin_rows, cos_rows] = cos, sin"
COS_ROW = "R[cos_rows, sin_rows], R[cos_rows, cos_rows] = -sin, cos"
ANGLES = "angles = k * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)"

VARIANTS = [
    # ------------------------------------------------------------ Part A: the equivariance test
    Variant(
        "equivariance_output_not_permuted",
        "compares block(x[:, perm]) with block(x), forgetting to permute the outputs",
        edits={"is_permutation_equivariant": (("= block(x)[:, perm]", "= block(x)"),)},
        expect={"test_equivariant_true": "the block's outputs permuted the same way"},
    ),
    Variant(
        "equivariance_inverse_perm",
        "permutes the outputs with the inverse permutation (argsort(perm)) instead of perm",
        edits={"is_permutation_equivariant": (("= block(x)[:, perm]", "= block(x)[:, torch.argsort(perm)]"),)},
        expect={"test_equivariant_true": "the block's outputs permuted the same way"},
    ),
    Variant(
        "equivariance_always_true",
        "declares every block equivariant",
        replace={"is_permutation_equivariant": "def is_permutation_equivariant(block, x, perm, atol=1e-6):\n"
                                               "    return True\n"},
        expect={"test_equivariant_false": "is_permutation_equivariant returned True for"},
    ),
    Variant(
        "equivariance_exact_equality",
        "compares with torch.equal, so float rounding of the same sums in another order counts as different",
        edits={"is_permutation_equivariant": ((COMPARE, "return torch.equal(output_of_permuted, permuted_output)"),)},
        expect={"test_equivariant_true": "nn.TransformerEncoderLayer without positions",
                "test_equivariant_atol": "pass the `atol` argument on"},
    ),
    Variant(
        "equivariance_returns_tensor",
        "returns a 0-d boolean tensor instead of a Python bool",
        edits={"is_permutation_equivariant": ((COMPARE,
                                               "return ((output_of_permuted - permuted_output).abs() <= atol).all()"),)},
        expect={"test_equivariant_atol": "expected a bool"},
    ),
    Variant(
        "equivariance_ignores_atol",
        "uses torch.allclose with its default tolerance instead of the atol argument",
        edits={"is_permutation_equivariant": ((COMPARE, "return torch.allclose(output_of_permuted, permuted_output)"),)},
        expect={"test_equivariant_atol": "pass the `atol` argument on"},
    ),
    # ------------------------------------------------------------ Part B: the sin/cos table
    Variant(
        "sincos_swapped",
        "puts cos in the even columns and sin in the odd ones",
        edits={"sinusoidal_encoding": ((FILL, "    table[:, 0::2] = torch.cos(angles)\n"
                                              "    table[:, 1::2] = torch.sin(angles)"),)},
        expect={"test_sinusoidal_small": "sin(0) = 0 belongs in the even columns",
                "test_sinusoidal_matches_formula": "sin and cos are swapped"},
    ),
    Variant(
        "sincos_exponent_i_over_d",
        "uses 10000^(i/d) with i the pair index instead of 10000^(2i/d)",
        edits={"sinusoidal_encoding": (("-torch.arange(0, d, 2, dtype=torch.float64) / d",
                                        "-torch.arange(d // 2, dtype=torch.float64) / d"),)},
        expect={"test_sinusoidal_small": "the exponent is 2i/d",
                "test_sinusoidal_matches_formula": "the exponent is i/d instead of 2i/d"},
    ),
    Variant(
        "sincos_halves",
        "puts all the sins in the first half of the columns and all the cosines in the second",
        edits={"sinusoidal_encoding": ((FILL, "    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)"),)},
        expect={"test_sinusoidal_small": "sin(0) = 0 belongs in the even columns",
                "test_sinusoidal_matches_formula": "all the sins come first"},
    ),
    Variant(
        "sincos_positions_from_one",
        "numbers the positions 1..n instead of 0..n-1",
        edits={"sinusoidal_encoding": (("torch.arange(n_positions, dtype=torch.float64)",
                                        "torch.arange(1, n_positions + 1, dtype=torch.float64)"),)},
        expect={"test_sinusoidal_small": "positions start at 0",
                "test_sinusoidal_matches_formula": "positions start at 1 instead of 0"},
    ),
    Variant(
        "sincos_multiplies",
        "multiplies p by 10000^(2i/d) instead of dividing",
        edits={"sinusoidal_encoding": (("10000.0 ** (-torch.arange", "10000.0 ** (torch.arange"),)},
        expect={"test_sinusoidal_small": "the exponent is 2i/d",
                "test_sinusoidal_matches_formula": "p is multiplied by 10000^(2i/d) instead of divided"},
    ),
    Variant(
        "sincos_numpy",
        "builds the table in NumPy and returns an ndarray",
        replace={"sinusoidal_encoding": '''def sinusoidal_encoding(n_positions, d):
    angles = np.arange(n_positions)[:, None] / 10000.0 ** (np.arange(0, d, 2) / d)
    table = np.zeros((n_positions, d))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table
'''},
        expect={"test_sinusoidal_shape": "build the table with torch, not NumPy"},
    ),
    Variant(
        "sincos_transposed",
        "returns the table as (d, n_positions)",
        edits={"sinusoidal_encoding": (("return table.to(torch.get_default_dtype())",
                                        "return table.to(torch.get_default_dtype()).T"),)},
        expect={"test_sinusoidal_shape": "the last two axes look swapped",
                "test_sinusoidal_matches_formula": "the last two axes look swapped"},
    ),
    # ------------------------------------------------------------ Part C: the learned table
    Variant(
        "learned_clamps",
        "clamps positions past max_len to the last row instead of raising",
        edits={"LearnedPositions": ((RAISE, ""), ("torch.arange(T, device=x.device)",
                                                  "torch.arange(T, device=x.device).clamp(max=self.max_len - 1)"))},
        expect={"test_learned_raises": "without an error"},
    ),
    Variant(
        "learned_index_error",
        "checks nothing and lets nn.Embedding fail with an IndexError",
        edits={"LearnedPositions": ((RAISE, ""),)},
        expect={"test_learned_raises": "raised IndexError, expected a ValueError"},
    ),
    Variant(
        "learned_vague_error",
        "raises a ValueError whose message does not say which lengths clash",
        edits={"LearnedPositions": ((RAISE, '        if T > self.max_len:\n            raise ValueError("sequence too long")\n'),)},
        expect={"test_learned_raises": "should name both numbers"},
    ),
    Variant(
        "learned_off_by_one",
        "raises already when T == max_len, which fits exactly",
        edits={"LearnedPositions": (("if T > self.max_len:", "if T >= self.max_len:"),)},
        expect={"test_learned_forward": "T = max_len fits exactly"},
    ),
    Variant(
        "learned_table_named_embedding_in_a_buffer",
        "the table is a home-made class that calls itself torch.nn.Embedding (by __qualname__ and __module__) "
        "and keeps its rows in a buffer, where no optimiser sees them",
        edits={"LearnedPositions": (("self.table = nn.Embedding(max_len, d)  # (max_len, d) trainable rows",
                                     "self.table = _Embedding(max_len, d)"),
                                    ("class LearnedPositions(nn.Module):",
                                     "class _Embedding(nn.Module):\n"
                                     "    def __init__(self, n, d):\n"
                                     "        super().__init__()\n"
                                     "        self.register_buffer('weight', torch.randn(n, d))\n\n"
                                     "    def forward(self, index):\n"
                                     "        return self.weight[index]\n\n\n"
                                     "_Embedding.__qualname__, _Embedding.__name__, _Embedding.__module__ = "
                                     "'Embedding', 'Embedding', 'torch.nn.modules.sparse'\n\n\n"
                                     "class LearnedPositions(nn.Module):"))},
        expect={"test_learned_forward": "holds no parameter table.weight"},
    ),
    Variant(
        "learned_fixed_buffer",
        "freezes the table (requires_grad False), so nothing is learned",
        edits={"LearnedPositions": (("self.table = nn.Embedding(max_len, d)  # (max_len, d) trainable rows",
                                     "self.table = nn.Embedding(max_len, d)\n"
                                     "        self.table.weight.requires_grad_(False)"),)},
        expect={"test_learned_trains": "trainable numbers"},
    ),
    Variant(
        "learned_detached",
        "adds the table's rows with .detach(), so no gradient reaches the table",
        edits={"LearnedPositions": (("return x + self.table(positions)", "return x + self.table(positions).detach()"),)},
        expect={"test_learned_trains": "received no gradient"},
    ),
    Variant(
        "learned_rows_shifted",
        "reads row t + 1 of the table for position t (wrapping around at the end), so row 0 is never used",
        edits={"LearnedPositions": (("return x + self.table(positions)",
                                     "return x + self.table((positions + 1) % self.max_len)"),)},
        expect={"test_learned_trains": "some of rows 0 to 3 received no gradient"},
    ),
    # ------------------------------------------------------------ Part D: offsets
    Variant(
        "offsets_i_minus_j",
        "relative_offsets gives i - j (query minus key) instead of j - i",
        edits={"relative_offsets": ((OFFSETS, "return positions[:, None] - positions[None, :]"),)},
        expect={"test_offsets_values": "entry [i, j] is j - i",
                "test_relative_scores_by_hand": "the offsets are taken as i - j instead of j - i"},
    ),
    Variant(
        "offsets_unsigned",
        "relative_offsets gives the distance |j - i| without its sign",
        edits={"relative_offsets": ((OFFSETS, "return (positions[None, :] - positions[:, None]).abs()"),)},
        expect={"test_offsets_values": "entry [i, j] is j - i",
                "test_offsets_count": "the offset is signed"},
    ),
    Variant(
        "offsets_float",
        "relative_offsets builds float offsets, which cannot index r",
        edits={"relative_offsets": (("torch.arange(T)", "torch.arange(T, dtype=torch.float32)"),)},
        expect={"test_offsets_values": "build them from torch.arange (int64)",
                "test_relative_scores_by_hand": "gives offsets that cannot index r: make its tests pass first"},
    ),
    # ------------------------------------------------------------ Part E: relative scores
    Variant(
        "scores_raw_offset_index",
        "indexes r with the raw offset j - i, so negative offsets wrap to the end of r",
        edits={"relative_scores": ((R_PAIRS, "r[relative_offsets(T)]"),)},
        expect={"test_relative_scores_by_hand": "negative offsets wrap to the end of r"},
    ),
    Variant(
        "scores_no_scale",
        "relative_scores never divides by sqrt(d_k)",
        edits={"relative_scores": ((SCALED, "return content + position"),)},
        expect={"test_relative_scores_by_hand": "the scores are not divided by sqrt(d_k)",
                "test_relative_scores_no_r": "the scores are not divided by sqrt(d_k)",
                "test_relative_scores_random": "the scores are not divided by sqrt(d_k)"},
    ),
    Variant(
        "scores_scale_content_only",
        "relative_scores divides only the content term q . k by sqrt(d_k)",
        edits={"relative_scores": ((SCALED, "return content / d_k ** 0.5 + position"),)},
        expect={"test_relative_scores_by_hand": "only the content term q . k is divided by sqrt(d_k)",
                "test_relative_scores_random": "only the content term q . k is divided by sqrt(d_k)"},
    ),
    Variant(
        "scores_offsets_flipped",
        "relative_scores looks up r[i - j + T - 1], the offset with the wrong sign",
        edits={"relative_scores": ((R_PAIRS, "r[T - 1 - relative_offsets(T)]"),)},
        expect={"test_relative_scores_by_hand": "the offsets are taken as i - j instead of j - i",
                "test_relative_scores_random": "the offsets are taken as i - j instead of j - i"},
    ),
    # ------------------------------------------------------------ Part F: shift as rotation
    Variant(
        "rotation_transposed",
        "shift_rotation builds the transposed blocks, which rotate the wrong way (a shift by -k)",
        edits={"shift_rotation": ((SIN_ROW, "R[sin_rows, sin_rows], R[sin_rows, cos_rows] = cos, -sin"),
                                  (COS_ROW, "R[cos_rows, sin_rows], R[cos_rows, cos_rows] = sin, cos"))},
        expect={"test_rotation_shifts": "the rotation goes the wrong way"},
    ),
    Variant(
        "rotation_ignores_frequency",
        "shift_rotation turns every pair by k radians, ignoring the pair's frequency",
        edits={"shift_rotation": ((ANGLES, "angles = torch.full((d // 2,), float(k), dtype=torch.float64)"),)},
        expect={"test_rotation_shifts": "ignoring its frequency"},
    ),
    Variant(
        "rotation_not_a_rotation",
        "shift_rotation puts cos on the diagonal and sin on both off-diagonals (no minus sign)",
        edits={"shift_rotation": ((COS_ROW, "R[cos_rows, sin_rows], R[cos_rows, cos_rows] = sin, cos"),)},
        expect={"test_rotation_structure": "each 2 x 2 block must be a rotation",
                "test_rotation_shifts": "read them off the addition formulas"},
    ),
    Variant(
        "rotation_pairs_halves",
        "shift_rotation pairs column i with column i + d/2 (the layout with all sins first)",
        edits={"shift_rotation": (("torch.arange(0, d, 2), torch.arange(1, d, 2)",
                                   "torch.arange(d // 2), torch.arange(d // 2, d)"),)},
        expect={"test_rotation_structure": "outside the 2 x 2"},
    ),
    # ------------------------------------------------------------ Part G: quiz
    Variant(
        "quiz_wrong",
        "picks a plausible wrong answer to every question",
        replace={"quiz": 'Q1 = "c"\nQ2 = "b"\nQ3 = "b"\nQ4 = "b"\n'},
        expect={"test_quiz_q1": "(c) the FFN acts on each token on its own",
                "test_quiz_q2": "(b) 1 000 is the divisor of the position",
                "test_quiz_q3": "(b) a row of an embedding table gets a gradient only when",
                "test_quiz_q4": "(b) 11 is 2 x 6 - 1"},
    ),
    Variant(
        "quiz_not_a_letter",
        "answers Q4 with a number instead of a letter",
        replace={"quiz": 'Q1 = "b"\nQ2 = "d"\nQ3 = "c"\nQ4 = 9\n'},
        expect={"test_quiz_q4": 'answer with one letter as a string, "a", "b", "c" or "d"'},
    ),
    Variant(
        "predict_squared_norm_wrong",
        "predicts d instead of d / 2",
        replace={"predict_squared_norm": "PREDICTED_SQUARED_NORM = 64.0\n"},
        expect={"test_predict_squared_norm": "come in sin/cos pairs"},
    ),
    # ------------------------------------------------------------ issue 54, third hunt
    Variant(
        "scores_position_term_from_keys",
        "relative_scores takes the position term as k_j . r instead of q_i . r",
        edits={"relative_scores": (('torch.einsum("id,ijd->ij", q, r_pairs)', 'torch.einsum("jd,ijd->ij", k, r_pairs)'),)},
        expect={"test_relative_scores_by_hand": "instead of the query q_i",
                "test_relative_scores_random": "multiplies r by the key k_j instead of the query q_i"},
        only=True,
    ),
    Variant(
        "rotation_frequencies_inverted",
        "shift_rotation's frequencies are 10000^(+2i/d) (the minus sign forgotten)",
        edits={"shift_rotation": (("angles = k * 10000.0 ** (-torch.arange", "angles = k * 10000.0 ** (torch.arange"),)},
        expect={"test_rotation_shifts": "the exponent's minus sign missing"},
        only=True,
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "equivariance_permutes_batch_axis",
        "is_permutation_equivariant permutes axis 0 (x[perm], block(x)[perm]), the batch, instead of the tokens",
        edits={"is_permutation_equivariant": (("output_of_permuted = block(x[:, perm])", "output_of_permuted = block(x[perm])"),
                                              ("= block(x)[:, perm]", "= block(x)[perm]"))},
        expect={"test_equivariant_true": "never x[perm], which reorders the sequences of the batch"},
    ),
    Variant(
        "learned_adds_in_place",
        "LearnedPositions.forward adds the table with `x += ...` and returns x, changing the caller's input",
        edits={"LearnedPositions": (("return x + self.table(positions)", "x += self.table(positions)\n        return x"),)},
        expect={"test_learned_forward": "LearnedPositions changed the x it was given"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "equivariance_atol_as_rtol",
        "is_permutation_equivariant passes atol positionally, torch.allclose(a, b, atol): the third argument is rtol",
        edits={"is_permutation_equivariant": (("torch.allclose(output_of_permuted, permuted_output, atol=atol)",
                                               "torch.allclose(output_of_permuted, permuted_output, atol)"),)},
        expect={"test_equivariant_atol": "its third positional argument is rtol"},
    ),
    Variant(
        "sincos_frequency_per_column",
        "the cos column 2i + 1 turns at its own 10000^((2i + 1)/d) instead of sharing its sin's angle",
        edits={"sinusoidal_encoding": (("table[:, 1::2] = torch.cos(angles)",
                                        "table[:, 1::2] = torch.cos(positions * 10000.0 ** "
                                        "(-torch.arange(1, d, 2, dtype=torch.float64) / d))"),)},
        expect={"test_sinusoidal_matches_formula": "a pair's sin and cos share one angle"},
    ),
    Variant(
        "learned_T_from_batch_axis",
        "LearnedPositions reads T as x.shape[0], the batch size, instead of x.shape[-2]",
        edits={"LearnedPositions": (("T = x.shape[-2]", "T = x.shape[0]"),)},
        expect={"test_learned_forward": "x.shape[0] is the batch", "test_learned_raises": "not x.shape[0], the batch",
                "test_learned_trains": "x.shape[0] is the batch"},
    ),
    Variant(
        "scores_position_term_from_q_j",
        "the position term uses the query at the key's position, q_j . r[j - i + T - 1], instead of q_i",
        edits={"relative_scores": (('torch.einsum("id,ijd->ij", q, r_pairs)', 'torch.einsum("jd,ijd->ij", q, r_pairs)'),)},
        expect={"test_relative_scores_random": "takes the query at the key's position"},
    ),
]


# one mistake, one loss: what still costs another part, and why (tests/test_chapters.py checks that each still does)
_RUNS_YOUR_OFFSETS = ("relative_scores indexes r with the student's relative_offsets, and the by-hand test reads "
                      "its fixed table: not yet judged around the student's offsets")
CROSSES = {name: _RUNS_YOUR_OFFSETS for name in ("offsets_i_minus_j", "offsets_float", "offsets_unsigned")}
VARIANTS = crossing(VARIANTS, CROSSES)


ALTERNATIVES = [
    Variant(
        "equivariance_unpermutes",
        "undoes the permutation on the permuted input's output (argsort) and compares with block(x)",
        edits={"is_permutation_equivariant": (("block(x[:, perm])  #", "block(x[:, perm])[:, torch.argsort(perm)]  #"),
                                              ("= block(x)[:, perm]", "= block(x)"))},
    ),
    Variant(
        "learned_indexes_weight",
        "LearnedPositions slices the embedding's weight instead of calling it on positions",
        edits={"LearnedPositions": (("return x + self.table(positions)", "return x + self.table.weight[:T]"),)},
    ),
    Variant(
        "scores_broadcast_product",
        "relative_scores with a broadcast product summed over d_k instead of einsum, and math.sqrt",
        edits={"relative_scores": (('torch.einsum("id,ijd->ij", q, r_pairs)', "(q[:, None, :] * r_pairs).sum(dim=-1)"),
                                   (SCALED, "return (content + position) / np.sqrt(d_k)"))},
    ),
    Variant(
        "rotation_float64",
        "shift_rotation returns its float64 matrix (the text names no dtype and computes the angles in float64)",
        edits={"shift_rotation": (("return R.to(torch.get_default_dtype())", "return R"),)},
    ),
    Variant(
        "rotation_block_diag",
        "shift_rotation assembles the 2 x 2 blocks with torch.block_diag",
        replace={"shift_rotation": '''def shift_rotation(k, d):
    angles = k / 10000.0 ** (torch.arange(0, d, 2) / d)  # (d/2,), float32
    blocks = [torch.stack([torch.stack([c, s]), torch.stack([-s, c])]) for c, s in zip(angles.cos(), angles.sin())]
    return torch.block_diag(*blocks)  # (d, d)
'''},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz": (('Q1 = "b"', 'Q1 = " B "'), ('Q4 = "a"', 'Q4 = "A"'))},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'sincos_positions_as_a_row',
        'the positions are made a row, arange(n)[None, :], instead of a column, so positions * frequencies does not build the (n, d/2) grid of angles (an error, or a wrong table when n == d/2)',
        edits={'sinusoidal_encoding': (('torch.arange(n_positions, dtype=torch.float64)[:, None]', 'torch.arange(n_positions, dtype=torch.float64)[None, :]'),)},
        expect={'test_sinusoidal_shape': 'the positions as a column (n, 1)'},
    ),
    Variant(
        'relative_scaled_by_sqrt_2dk',
        'relative_scores divides by sqrt(2 d_k), reasoning that two dot products are added, instead of sqrt(d_k) as in plain attention',
        edits={'relative_scores': (('return (content + position) / d_k ** 0.5', 'return (content + position) / (2 * d_k) ** 0.5'),)},
        expect={'test_relative_scores_random': 'times the same factor, 0.707'},
    ),
]
