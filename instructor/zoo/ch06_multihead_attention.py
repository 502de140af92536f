"""Wrong answers to chapter 06 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "06_multihead_attention"

GOOD_SPLIT = '''def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)
'''
GOOD_MERGE = '''def merge_heads(x):
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_head)
'''

GOOD_MHSA = '''class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len, causal=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads, self.max_len, self.causal = n_heads, max_len, causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError("sequence longer than max_len")
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = split_heads(q, self.n_heads), split_heads(k, self.n_heads), split_heads(v, self.n_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if self.causal:
            scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = self.proj(merge_heads(weights @ v))
        if return_weights:
            return out, weights
        return out
'''


def _edit(text: str, *pairs: str) -> str:
    """Apply (old, new) replacements, each of which must match exactly once."""
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert text.count(old) == 1, f"zoo edit does not match exactly once: {old!r}"
        text = text.replace(old, new)
    return text


def _mhsa(*pairs: str) -> dict[str, str]:
    return {"mhsa": _edit(GOOD_MHSA, *pairs)}


VARIANTS = [
    # ---------------------------------------------------------------- the list
    Variant(
        "scale_by_sqrt_d_model",
        "the scores are divided by sqrt(D) instead of sqrt(d_head)",
        _mhsa("/ math.sqrt(q.shape[-1])", "/ math.sqrt(D)"),
        {"test_mhsa_matches_sdpa": "divided by sqrt(d_model) instead of sqrt(d_head)",
         "test_mhsa_matches_multihead": "softmax(q k^T / sqrt(d_head))"},
    ),
    Variant(
        "split_view_straight",
        "split_heads views (B, T, D) straight as (B, H, T, d_head), so heads get whole tokens",
        {"split_merge": '''def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)
''' + "\n\n" + GOOD_MERGE},
        {"test_split_heads": "viewed straight as (B, H, T, d_head)"},
    ),
    Variant(
        "split_reshape_straight",
        "split_heads reshapes (B, T, D) straight to (B, H, T, d_head) (reshape, so the block runs)",
        {"split_merge": '''def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, n_heads, T, D // n_heads)
''' + "\n\n" + GOOD_MERGE},
        {"test_split_heads": "viewed straight as (B, H, T, d_head)",
         "test_mhsa_matches_sdpa": "viewed straight as (B, H, T, d_head) when splitting"},
    ),
    Variant(
        "merge_without_transpose",
        "merge_heads reshapes (B, H, T, d_head) to (B, T, D) without transposing back",
        {"split_merge": GOOD_SPLIT + "\n\n" + '''def merge_heads(x):
    B, H, T, d_head = x.shape
    return x.reshape(B, T, H * d_head)
'''},
        {"test_merge_heads": "without transposing back",
         "test_mhsa_matches_sdpa": "merged by reshaping (B, H, T, d_head) to (B, T, D) without transposing back",
         "test_mhsa_matches_multihead": "the weights agree, so look after the softmax"},
    ),
    Variant(
        "mask_not_sliced",
        "the full (max_len, max_len) mask is applied to (T, T) scores",
        _mhsa("~self.mask[:T, :T]", "~self.mask"),
        {"test_mhsa_shapes": "mask[:T, :T]"},
    ),
    Variant(
        "mask_wrong_triangle",
        "the mask allows the upper triangle (torch.triu): queries see the future, not the past",
        _mhsa("torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))",
              "torch.triu(torch.ones(max_len, max_len, dtype=torch.bool))"),
        {"test_mhsa_causal": "on a later key"},
    ),
    Variant(
        "softmax_over_queries",
        "softmax runs over the query axis (dim=-2)",
        _mhsa("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
        {"test_mhsa_causal": "softmax over the key axis (dim=-1)",
         "test_mhsa_matches_sdpa": "softmax runs over the query axis"},
    ),
    Variant(
        "no_output_projection",
        "the merged heads are returned without the output projection",
        _mhsa("out = self.proj(merge_heads(weights @ v))", "out = merge_heads(weights @ v)"),
        {"test_mhsa_gradients": "proj.weight received no gradient",
         "test_mhsa_matches_sdpa": "the output projection proj is not applied"},
    ),
    Variant(
        "mask_as_parameter",
        "the causal mask is an nn.Parameter (requires_grad=False) instead of a buffer",
        _mhsa('self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))',
              "self.mask = nn.Parameter(torch.tril(torch.ones(max_len, max_len)), requires_grad=False)",
              "~self.mask[:T, :T]", "self.mask[:T, :T] == 0"),
        {"test_mhsa_structure": "self.register_buffer('mask', ...) instead of nn.Parameter"},
    ),
    Variant(
        "softmax_in_float32",
        "softmax(..., dtype=torch.float32) silently downcasts float64; the output is cast back",
        _mhsa("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-1, dtype=torch.float32)",
              "out = self.proj(merge_heads(weights @ v))", "out = self.proj(merge_heads(weights.to(v.dtype) @ v))"),
        {"test_mhsa_float64": "something casts to float32"},
    ),
    # ---------------------------------------------------------------- our own
    Variant(
        "float32_then_cast_back",
        "the scores go through float32 and are cast back, so every dtype looks right but precision is lost",
        _mhsa("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores.float(), dim=-1).to(x.dtype)"),
        {"test_mhsa_float64": "part of the computation ran in float32"},
    ),
    Variant(
        "mask_hides_diagonal",
        "the mask hides the diagonal too (tril(..., diagonal=-1)): the first token sees nothing",
        _mhsa("torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))",
              "torch.tril(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=-1)"),
        {"test_mhsa_causal": "keep the diagonal"},
    ),
    Variant(
        "mask_built_in_forward",
        "the causal mask is rebuilt in every forward instead of registered once as a buffer",
        _mhsa('self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))', "",
              "~self.mask[:T, :T]", "~torch.tril(torch.ones(T, T, dtype=torch.bool))"),
        {"test_mhsa_structure": "found no buffer of shape (max_len, max_len)"},
    ),
    Variant(
        "no_value_errors",
        "neither d_model % n_heads nor T > max_len is checked",
        _mhsa('''        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
''', "", '''        if T > self.max_len:
            raise ValueError("sequence longer than max_len")
''', ""),
        {"test_mhsa_value_errors": "raise ValueError"},
    ),
    Variant(
        "weights_averaged_over_heads",
        "return_weights gives the weights averaged over the heads, (B, T, T)",
        _mhsa("return out, weights", "return out, weights.mean(dim=1)"),
        {"test_mhsa_shapes": "not averaged over heads"},
    ),
    Variant(
        "causal_flag_ignored",
        "the causal mask is applied even when causal=False",
        _mhsa('''        if self.causal:
            scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))''',
              '''        scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))'''),
        {"test_mhsa_causal": "with causal=False no mask is applied"},
    ),
    Variant(
        "split_without_transpose",
        "split_heads views to (B, T, H, d_head) and stops there",
        {"split_merge": '''def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads)
''' + "\n\n" + GOOD_MERGE},
        {"test_split_heads": "then transpose(1, 2)"},
    ),
    Variant(
        "fuse_along_input_axis",
        "fuse_qkv concatenates along dim 1, giving a (D, 3D) weight",
        {"fuse_qkv": '''def fuse_qkv(w_q, w_k, w_v):
    return torch.cat([w_q, w_k, w_v], dim=1)
'''},
        {"test_fuse_qkv_shape": "stack along dim 0"},
    ),
    Variant(
        "fuse_wrong_order",
        "fuse_qkv stacks K before Q",
        {"fuse_qkv": '''def fuse_qkv(w_q, w_k, w_v):
    return torch.cat([w_k, w_q, w_v], dim=0)
'''},
        {"test_fuse_qkv_matches_separate": "W_Q, then W_K, then W_V"},
    ),
    Variant(
        "quiz_wrong",
        "every quiz answer is a plausible wrong option",
        {"quiz": 'Q1 = "a"\nQ2 = "b"\nQ3 = "a"\nQ4 = "b"\nQ5 = "a"\n'},
        {f"test_quiz_q{n}": f"Q{n} is not right" for n in range(1, 6)},
    ),
]
