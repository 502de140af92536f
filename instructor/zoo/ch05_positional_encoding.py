"""Wrong answers to chapter 05 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "05_positional_encoding"


def _equivariance(body: str) -> str:
    return "def is_permutation_equivariant(block, x, perm, atol=1e-6):\n" + "".join(
        f"    {line}\n" for line in body.strip().splitlines())


def _sincos(frequencies: str, fill: str, positions: str = "torch.arange(n_positions, dtype=torch.float64)") -> str:
    return f'''def sinusoidal_encoding(n_positions, d):
    positions = {positions}[:, None]
    frequencies = {frequencies}
    angles = positions * frequencies
    table = torch.zeros(n_positions, d, dtype=torch.float64)
{fill}
    return table.float()
'''


GOOD_FREQUENCIES = "10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)"
GOOD_FILL = "    table[:, 0::2] = torch.sin(angles)\n    table[:, 1::2] = torch.cos(angles)"


def _learned(forward: str, init: str = "self.table = nn.Embedding(max_len, d)") -> str:
    return f'''class LearnedPositions(nn.Module):
    def __init__(self, max_len, d):
        super().__init__()
        self.max_len = max_len
        {init}

    def forward(self, x):
''' + "".join(f"        {line}\n" for line in forward.strip().splitlines())


def _scores(body: str) -> str:
    return "def relative_scores(q, k, r):\n    T, d_k = q.shape\n" + "".join(
        f"    {line}\n" for line in body.strip().splitlines())


def _rotation(block: str, angles: str = "k * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)") -> str:
    return f'''def shift_rotation(k, d):
    angles = {angles}
    blocks = [torch.tensor({block}) for c, s in zip(torch.cos(angles).tolist(), torch.sin(angles).tolist())]
    return torch.block_diag(*blocks).float()
'''


VARIANTS = [
    # ------------------------------------------------------------ Part A: the equivariance test
    Variant(
        "equivariance_output_not_permuted",
        "compares block(x[:, perm]) with block(x), forgetting to permute the outputs",
        {"is_permutation_equivariant": _equivariance('''
with torch.no_grad():
    return torch.allclose(block(x[:, perm]), block(x), atol=atol)
''')},
        {"test_equivariant_true": "the block's outputs permuted the same way"},
    ),
    Variant(
        "equivariance_inverse_perm",
        "permutes the outputs with the inverse permutation (argsort(perm)) instead of perm",
        {"is_permutation_equivariant": _equivariance('''
with torch.no_grad():
    return torch.allclose(block(x[:, perm]), block(x)[:, torch.argsort(perm)], atol=atol)
''')},
        {"test_equivariant_true": "the block's outputs permuted the same way"},
    ),
    Variant(
        "equivariance_always_true",
        "declares every block equivariant",
        {"is_permutation_equivariant": _equivariance("return True")},
        {"test_equivariant_false": "is_permutation_equivariant returned True for"},
    ),
    Variant(
        "equivariance_exact_equality",
        "compares with torch.equal, so float rounding of the same sums in another order counts as different",
        {"is_permutation_equivariant": _equivariance('''
with torch.no_grad():
    return torch.equal(block(x[:, perm]), block(x)[:, perm])
''')},
        {"test_equivariant_true": "nn.TransformerEncoderLayer without positions",
         "test_equivariant_atol": "pass the `atol` argument on"},
    ),
    Variant(
        "equivariance_returns_tensor",
        "returns a 0-d boolean tensor instead of a Python bool",
        {"is_permutation_equivariant": _equivariance('''
with torch.no_grad():
    return ((block(x[:, perm]) - block(x)[:, perm]).abs() <= atol).all()
''')},
        {"test_equivariant_atol": "expected a bool"},
    ),
    Variant(
        "equivariance_ignores_atol",
        "uses torch.allclose with its default tolerance instead of the atol argument",
        {"is_permutation_equivariant": _equivariance('''
with torch.no_grad():
    return torch.allclose(block(x[:, perm]), block(x)[:, perm])
''')},
        {"test_equivariant_atol": "pass the `atol` argument on"},
    ),
    # ------------------------------------------------------------ Part B: the sin/cos table
    Variant(
        "sincos_swapped",
        "puts cos in the even columns and sin in the odd ones",
        {"sinusoidal_encoding": _sincos(GOOD_FREQUENCIES, GOOD_FILL.replace("sin", "TMP").replace("cos", "sin")
                                        .replace("TMP", "cos"))},
        {"test_sinusoidal_small": "sin(0) = 0 belongs in the even columns",
         "test_sinusoidal_matches_formula": "sin and cos are swapped"},
    ),
    Variant(
        "sincos_exponent_i_over_d",
        "uses 10000^(i/d) with i the pair index instead of 10000^(2i/d)",
        {"sinusoidal_encoding": _sincos("10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)", GOOD_FILL)},
        {"test_sinusoidal_small": "the exponent is 2i/d",
         "test_sinusoidal_matches_formula": "the exponent is i/d instead of 2i/d"},
    ),
    Variant(
        "sincos_halves",
        "puts all the sins in the first half of the columns and all the cosines in the second",
        {"sinusoidal_encoding": _sincos(GOOD_FREQUENCIES, "    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)")},
        {"test_sinusoidal_small": "sin(0) = 0 belongs in the even columns",
         "test_sinusoidal_matches_formula": "all the sins come first"},
    ),
    Variant(
        "sincos_positions_from_one",
        "numbers the positions 1..n instead of 0..n-1",
        {"sinusoidal_encoding": _sincos(GOOD_FREQUENCIES, GOOD_FILL,
                                        positions="torch.arange(1, n_positions + 1, dtype=torch.float64)")},
        {"test_sinusoidal_small": "positions start at 0",
         "test_sinusoidal_matches_formula": "positions start at 1 instead of 0"},
    ),
    Variant(
        "sincos_multiplies",
        "multiplies p by 10000^(2i/d) instead of dividing",
        {"sinusoidal_encoding": _sincos("10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)", GOOD_FILL)},
        {"test_sinusoidal_small": "the exponent is 2i/d",
         "test_sinusoidal_matches_formula": "p is multiplied by 10000^(2i/d) instead of divided"},
    ),
    Variant(
        "sincos_numpy",
        "builds the table in NumPy and returns an ndarray",
        {"sinusoidal_encoding": '''def sinusoidal_encoding(n_positions, d):
    angles = np.arange(n_positions)[:, None] / 10000.0 ** (np.arange(0, d, 2) / d)
    table = np.zeros((n_positions, d))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table
'''},
        {"test_sinusoidal_shape": "build the table with torch, not NumPy"},
    ),
    Variant(
        "sincos_transposed",
        "returns the table as (d, n_positions)",
        {"sinusoidal_encoding": _sincos(GOOD_FREQUENCIES, GOOD_FILL).replace("return table.float()",
                                                                             "return table.float().T")},
        {"test_sinusoidal_shape": "the last two axes look swapped",
         "test_sinusoidal_matches_formula": "the last two axes look swapped"},
    ),
    # ------------------------------------------------------------ Part C: the learned table
    Variant(
        "learned_clamps",
        "clamps positions past max_len to the last row instead of raising",
        {"LearnedPositions": _learned('''
positions = torch.arange(x.shape[1]).clamp(max=self.max_len - 1)
return x + self.table(positions)
''')},
        {"test_learned_raises": "without an error"},
    ),
    Variant(
        "learned_index_error",
        "checks nothing and lets nn.Embedding fail with an IndexError",
        {"LearnedPositions": _learned("return x + self.table(torch.arange(x.shape[1]))")},
        {"test_learned_raises": "raised IndexError, expected a ValueError"},
    ),
    Variant(
        "learned_vague_error",
        "raises a ValueError whose message does not say which lengths clash",
        {"LearnedPositions": _learned('''
if x.shape[1] > self.max_len:
    raise ValueError("sequence too long")
return x + self.table(torch.arange(x.shape[1]))
''')},
        {"test_learned_raises": "should name both numbers"},
    ),
    Variant(
        "learned_off_by_one",
        "raises already when T == max_len, which fits exactly",
        {"LearnedPositions": _learned('''
T = x.shape[1]
if T >= self.max_len:
    raise ValueError(f"{T} tokens but max_len is {self.max_len}")
return x + self.table(torch.arange(T))
''')},
        {"test_learned_forward": "T = max_len fits exactly"},
    ),
    Variant(
        "learned_fixed_buffer",
        "stores a random table as a buffer, so nothing is learned",
        {"LearnedPositions": _learned('''
T = x.shape[1]
if T > self.max_len:
    raise ValueError(f"{T} tokens but max_len is {self.max_len}")
return x + self.table(torch.arange(T))
''', init='''self.table = nn.Embedding(max_len, d)
        self.table.weight.requires_grad_(False)''')},
        {"test_learned_trains": "trainable numbers"},
    ),
    Variant(
        "learned_detached",
        "adds the table's rows with .detach(), so no gradient reaches the table",
        {"LearnedPositions": _learned('''
T = x.shape[1]
if T > self.max_len:
    raise ValueError(f"{T} tokens but max_len is {self.max_len}")
return x + self.table(torch.arange(T)).detach()
''')},
        {"test_learned_trains": "received no gradient"},
    ),
    # ------------------------------------------------------------ Part D: offsets
    Variant(
        "offsets_i_minus_j",
        "relative_offsets gives i - j (query minus key) instead of j - i",
        {"relative_offsets": '''def relative_offsets(T):
    positions = torch.arange(T)
    return positions[:, None] - positions[None, :]
'''},
        {"test_offsets_values": "entry [i, j] is j - i",
         "test_relative_scores_by_hand": "the offsets are taken as i - j instead of j - i"},
    ),
    Variant(
        "offsets_unsigned",
        "relative_offsets gives the distance |j - i| without its sign",
        {"relative_offsets": '''def relative_offsets(T):
    positions = torch.arange(T)
    return (positions[None, :] - positions[:, None]).abs()
'''},
        {"test_offsets_values": "entry [i, j] is j - i",
         "test_offsets_count": "the offset is signed"},
    ),
    Variant(
        "offsets_float",
        "relative_offsets builds float offsets, which cannot index r",
        {"relative_offsets": '''def relative_offsets(T):
    positions = torch.arange(T, dtype=torch.float32)
    return positions[None, :] - positions[:, None]
'''},
        {"test_offsets_values": "build them from torch.arange (int64)"},
    ),
    # ------------------------------------------------------------ Part E: relative scores
    Variant(
        "scores_raw_offset_index",
        "indexes r with the raw offset j - i, so negative offsets wrap to the end of r",
        {"relative_scores": _scores('''
r_pairs = r[relative_offsets(T)]
return (q @ k.T + torch.einsum("id,ijd->ij", q, r_pairs)) / d_k ** 0.5
''')},
        {"test_relative_scores_by_hand": "negative offsets wrap to the end of r"},
    ),
    Variant(
        "scores_no_scale",
        "relative_scores never divides by sqrt(d_k)",
        {"relative_scores": _scores('''
r_pairs = r[relative_offsets(T) + T - 1]
return q @ k.T + torch.einsum("id,ijd->ij", q, r_pairs)
''')},
        {"test_relative_scores_no_r": "the scores are not divided by sqrt(d_k)",
         "test_relative_scores_random": "the scores are not divided by sqrt(d_k)"},
    ),
    Variant(
        "scores_scale_content_only",
        "relative_scores divides only the content term q . k by sqrt(d_k)",
        {"relative_scores": _scores('''
r_pairs = r[relative_offsets(T) + T - 1]
return q @ k.T / d_k ** 0.5 + torch.einsum("id,ijd->ij", q, r_pairs)
''')},
        {"test_relative_scores_random": "only the content term q . k is divided by sqrt(d_k)"},
    ),
    Variant(
        "scores_offsets_flipped",
        "relative_scores looks up r[i - j + T - 1], the offset with the wrong sign",
        {"relative_scores": _scores('''
r_pairs = r[T - 1 - relative_offsets(T)]
return (q @ k.T + torch.einsum("id,ijd->ij", q, r_pairs)) / d_k ** 0.5
''')},
        {"test_relative_scores_by_hand": "the offsets are taken as i - j instead of j - i",
         "test_relative_scores_random": "the offsets are taken as i - j instead of j - i"},
    ),
    # ------------------------------------------------------------ Part F: shift as rotation
    Variant(
        "rotation_transposed",
        "shift_rotation builds the transposed blocks, which rotate the wrong way (a shift by -k)",
        {"shift_rotation": _rotation("[[c, -s], [s, c]]")},
        {"test_rotation_shifts": "the rotation goes the wrong way"},
    ),
    Variant(
        "rotation_ignores_frequency",
        "shift_rotation turns every pair by k radians, ignoring the pair's frequency",
        {"shift_rotation": _rotation("[[c, s], [-s, c]]", angles="torch.full((d // 2,), float(k), dtype=torch.float64)")},
        {"test_rotation_shifts": "ignoring its frequency"},
    ),
    Variant(
        "rotation_not_a_rotation",
        "shift_rotation puts cos on the diagonal and sin on both off-diagonals (no minus sign)",
        {"shift_rotation": _rotation("[[c, s], [s, c]]")},
        {"test_rotation_structure": "each 2 x 2 block must be a rotation",
         "test_rotation_shifts": "read them off the addition formulas"},
    ),
    Variant(
        "rotation_pairs_halves",
        "shift_rotation pairs column i with column i + d/2 (the layout with all sins first)",
        {"shift_rotation": '''def shift_rotation(k, d):
    h = d // 2
    angles = k * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    first, second = torch.arange(h), torch.arange(h, d)
    R = torch.zeros(d, d, dtype=torch.float64)
    R[first, first], R[first, second] = angles.cos(), angles.sin()
    R[second, first], R[second, second] = -angles.sin(), angles.cos()
    return R.float()
'''},
        {"test_rotation_structure": "outside the 2 x 2"},
    ),
    # ------------------------------------------------------------ Part G: quiz
    Variant(
        "quiz_wrong",
        "picks a plausible wrong answer to every question",
        {"quiz": 'Q1 = "c"\nQ2 = "b"\nQ3 = "b"\nQ4 = "c"\n'},
        {"test_quiz_q1": "re-read Part A", "test_quiz_q2": "re-read Part C",
         "test_quiz_q3": "Masks carry order too", "test_quiz_q4": "re-read Part D"},
    ),
    Variant(
        "quiz_not_a_letter",
        "answers Q4 with a number instead of a letter",
        {"quiz": 'Q1 = "b"\nQ2 = "c"\nQ3 = "c"\nQ4 = 19\n'},
        {"test_quiz_q4": 'answer with one of "a", "b", "c", "d"'},
    ),
]
