"""Wrong answers to chapter 03 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "03_masks"


def _masked_softmax(body: str) -> str:
    return "def masked_softmax(scores, allowed):\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())


def _leak_check(body: str) -> str:
    lines = '''
def run(inputs):
    with torch.no_grad():
        out = block(inputs)
    return out[0] if isinstance(out, tuple) else out
''' + body
    return "def future_leak_check(block, x):\n" + "".join(f"    {line}\n" for line in lines.strip().splitlines())


RANDOM_CHANGE = '''changed = x.clone()
changed[:, -1] += 1.0 + 3.0 * torch.randn(x[:, -1].shape, generator=torch.Generator().manual_seed(0))
before, after = run(x), run(changed)
'''

VARIANTS = [
    # ------------------------------------------------------------------ Part A: the masks
    Variant(
        "causal_inverted",
        "causal_mask uses the 'True = blocked' convention (True on the future keys)",
        {"causal_mask": '''def causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
'''},
        {"test_causal_mask": "that is the 'True = blocked' convention"},
    ),
    Variant(
        "causal_diagonal_excluded",
        "causal_mask is off by one: the diagonal is blocked, so a position cannot see itself",
        {"causal_mask": '''def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)
'''},
        {"test_causal_mask": "every position must see itself"},
    ),
    Variant(
        "causal_one_future_key",
        "causal_mask is off by one the other way: position i also sees key i + 1",
        {"causal_mask": '''def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=1)
'''},
        {"test_causal_mask": "one step into its future"},
    ),
    Variant(
        "causal_float_mask",
        "causal_mask returns a float 0/1 matrix instead of a bool mask",
        {"causal_mask": '''def causal_mask(T):
    return torch.tril(torch.ones(T, T))
'''},
        {"test_causal_mask": "has dtype torch.float32, expected torch.bool"},
    ),
    Variant(
        "causal_hardcoded",
        "causal_mask returns the 4 x 4 example whatever T is",
        {"causal_mask": '''def causal_mask(T):
    return torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool()
'''},
        {"test_causal_mask": "causal_mask(1) has shape (4, 4), expected (1, 1)"},
    ),
    Variant(
        "padding_off_by_one",
        "padding_mask counts one real token too many (<= instead of <)",
        {"padding_mask": '''def padding_mask(lengths, T):
    lengths = torch.as_tensor(lengths)
    return torch.arange(T) <= lengths[:, None]
'''},
        {"test_padding_mask": "exactly L real tokens"},
    ),
    Variant(
        "padding_inverted",
        "padding_mask is True at the PAD positions",
        {"padding_mask": '''def padding_mask(lengths, T):
    lengths = torch.as_tensor(lengths)
    return torch.arange(T) >= lengths[:, None]
'''},
        {"test_padding_mask": "is True at the PAD positions"},
    ),
    Variant(
        "padding_needs_tensor",
        "padding_mask indexes `lengths[:, None]` directly, which fails on a Python list",
        {"padding_mask": '''def padding_mask(lengths, T):
    return torch.arange(T) < lengths[:, None]
'''},
        {"test_padding_mask": "convert lengths with torch.as_tensor"},
    ),
    # ------------------------------------------------------------------ Part B: masked softmax
    Variant(
        "mask_after_softmax",
        "the weights of blocked keys are zeroed after softmax, without renormalising",
        {"masked_softmax": _masked_softmax('''
return torch.softmax(scores, dim=-1) * allowed
''')},
        {"test_masked_softmax_example": "the mask is applied after softmax without renormalising",
         "test_masked_softmax_rows": "sum to something else than 1"},
    ),
    Variant(
        "mask_inverted",
        "masked_softmax reads True as 'blocked' (the nn.MultiheadAttention convention)",
        {"masked_softmax": _masked_softmax('''
weights = torch.softmax(scores.masked_fill(allowed, float("-inf")), dim=-1)
return weights.masked_fill(allowed, 0.0)
''')},
        {"test_masked_softmax_example": "True is read as 'blocked'",
         "test_masked_softmax_rows": "blocked keys get weights up to"},
    ),
    Variant(
        "mask_multiplies_scores",
        "blocked scores are multiplied by 0 instead of set to -inf, so they keep weight e^0",
        {"masked_softmax": _masked_softmax('''
return torch.softmax(scores * allowed, dim=-1)
''')},
        {"test_masked_softmax_example": "multiplied by 0 instead of set to -inf",
         "test_masked_softmax_rows": "blocked keys get weights up to",
         "test_masked_attention_pad_invariance": "a PAD key must get weight exactly 0"},
    ),
    Variant(
        "fully_masked_nan",
        "masked_softmax leaves NaN in rows where every key is blocked",
        {"masked_softmax": _masked_softmax('''
return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
''')},
        {"test_masked_softmax_fully_masked": "NaN"},
    ),
    Variant(
        "fully_masked_uniform",
        "masked_softmax fills with -1e9 instead of -inf, so a fully blocked row becomes uniform",
        {"masked_softmax": _masked_softmax('''
return torch.softmax(scores.masked_fill(~allowed, -1e9), dim=-1)
''')},
        {"test_masked_softmax_fully_masked": "a finite number such as -1e9 instead of -inf"},
    ),
    # ------------------------------------------------------------------ Part C: masked attention
    Variant(
        "attention_no_scale",
        "masked_attention forgets to divide the scores by sqrt(d_k)",
        {"masked_attention": '''def masked_attention(q, k, v, allowed):
    weights = masked_softmax(q @ k.transpose(-2, -1), allowed)
    return weights @ v, weights
'''},
        {"test_masked_attention_sdpa": "the scores are not divided by sqrt(d_k)"},
    ),
    Variant(
        "attention_mixes_keys",
        "masked_attention mixes the keys instead of the values",
        {"masked_attention": '''def masked_attention(q, k, v, allowed):
    weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), allowed)
    return weights @ k, weights
'''},
        {"test_masked_attention_sdpa": "the output mixes values"},
    ),
    # ------------------------------------------------------------------ Part D: nn.MultiheadAttention
    Variant(
        "mha_not_inverted",
        "to_mha_masks hands the course's masks to nn.MultiheadAttention without inverting them",
        {"to_mha_masks": '''def to_mha_masks(valid, allowed):
    return valid, allowed
'''},
        {"test_to_mha_masks": "True means 'ignore this key'"},
    ),
    Variant(
        "mha_inverts_padding_only",
        "to_mha_masks inverts the key padding mask but not the attention mask",
        {"to_mha_masks": '''def to_mha_masks(valid, allowed):
    return ~valid, allowed
'''},
        {"test_to_mha_masks": "True means 'this query may not attend"},
    ),
    Variant(
        "mha_float_masks",
        "to_mha_masks returns float 0/1 masks, which nn.MultiheadAttention adds to the scores",
        {"to_mha_masks": '''def to_mha_masks(valid, allowed):
    return 1.0 - valid.float(), 1.0 - allowed.float()
'''},
        {"test_to_mha_masks": "adds* a float mask to the scores"},
    ),
    # ------------------------------------------------------------------ Part E: perturbation test
    Variant(
        "leak_check_no_control",
        "future_leak_check never runs the control: it always reports that the last output changed",
        {"future_leak_check": _leak_check(RANDOM_CHANGE + '''
return torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5), True
''')},
        {"test_future_leak_control": "that comparison is the control"},
    ),
    Variant(
        "leak_check_all_positions",
        "future_leak_check compares every position, the changed last one included, as 'the past'",
        {"future_leak_check": _leak_check(RANDOM_CHANGE + '''
past = torch.allclose(before, after, atol=1e-5)
return past, not torch.allclose(before[:, -1], after[:, -1], atol=1e-5)
''')},
        {"test_future_leak_causal": "compare only positions 0 .. T-2"},
    ),
    Variant(
        "leak_check_constant_shift",
        "future_leak_check adds the same constant to every feature, which a LayerNorm erases",
        {"future_leak_check": _leak_check('''
changed = x.clone()
changed[:, -1] += 1.0
before, after = run(x), run(changed)
return (torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5),
        not torch.allclose(before[:, -1], after[:, -1], atol=1e-5))
''')},
        {"test_future_leak_causal": "a LayerNorm erases a constant"},
    ),
    Variant(
        "leak_check_ignores_tuple",
        "future_leak_check slices block(x) directly, which fails when the block returns (output, weights)",
        {"future_leak_check": '''def future_leak_check(block, x):
    changed = x.clone()
    changed[:, -1] += torch.randn(x[:, -1].shape)
    with torch.no_grad():
        before, after = block(x), block(changed)
    return (torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5),
            not torch.allclose(before[:, -1], after[:, -1], atol=1e-5))
'''},
        {"test_future_leak_causal": "its first item is the output"},
    ),
    Variant(
        "leak_check_changes_x_in_place",
        "future_leak_check changes x itself before computing the 'before' outputs, so it compares x with x",
        {"future_leak_check": _leak_check('''
changed = x
changed[:, -1] += torch.randn(x[:, -1].shape)
before, after = run(x), run(changed)
return (torch.allclose(before[:, :-1], after[:, :-1], atol=1e-5),
        not torch.allclose(before[:, -1], after[:, -1], atol=1e-5))
''')},
        {"test_future_leak_causal": "modified the caller's x",
         "test_future_leak_detects_leak": "missed a leak"},
    ),
    # ------------------------------------------------------------------ Part F: quiz
    Variant(
        "quiz_wrong",
        "every quiz answer is a plausible wrong option",
        {"quiz": 'Q1 = "c"\nQ2 = "a"\nQ3 = "a"\nQ4 = "c"\n'},
        {"test_quiz_q1": "Q1 is not right", "test_quiz_q2": "Q2 is not right",
         "test_quiz_q3": "Q3 is not right", "test_quiz_q4": "Q4 is not right"},
    ),
]
