"""Wrong answers to chapter 11 that the graded tests must catch, each with its message, and correct answers
written differently that keep full marks.

Every variant is the current solution with one change (see ``instructor/zoo/__init__.py``).
"""

from instructor.zoo import Variant

ASSIGNMENT = "11_modern_decoder"

MEAN_SQUARE = "    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)\n"
RMS_RETURN = "return x / torch.sqrt(mean_square + eps) * weight  # (..., D)"
HALVES = "angles = torch.cat([angles, angles], dim=-1)  # (T, d)"
ROTATE = "rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half(x), (B, H, T, d)"
REPEAT = "k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, T, d)"
MASK = '        scores = scores.masked_fill(~causal, float("-inf"))\n'
ROPE_QK = "        q, k = apply_rope(q, self.cos[:T], self.sin[:T]), apply_rope(k, self.cos[:T], self.sin[:T])\n"
RESCALE = "rescale = torch.exp(m - new_m)  # (B, H, b)"
READS_FUTURE_BLOCK = "so it read a key block that lies entirely above the diagonal"  # test_tiled_skips
DIAGONAL_MASK = '                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))\n'

FULL_SCORES = '''def tiled_attention(q, k, v, block_size, causal=False):
    T = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T): every score at once
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)  # (B, H, T, 1)
    return scores.softmax(dim=-1) @ v, top.squeeze(-1) + (scores - top).exp().sum(dim=-1).log()
'''

VARIANTS = [
    Variant(
        "rms_subtracts_mean",
        "rms_norm subtracts the row's mean first (LayerNorm without its bias)",
        edits={"rms_norm": ((MEAN_SQUARE, "    x = x - x.mean(dim=-1, keepdim=True)\n" + MEAN_SQUARE),)},
        expect={"test_rms_norm": "the mean is subtracted first", "test_rmsnorm_module": "the mean is subtracted first"},
    ),
    Variant(
        "rms_eps_outside_root",
        "eps is added after the square root",
        edits={"rms_norm": ((RMS_RETURN, "return x / (torch.sqrt(mean_square) + eps) * weight"),)},
        expect={"test_rms_norm": "eps is added after the square root",
                "test_rmsnorm_module": "eps is added after the square root"},
    ),
    Variant(
        "rms_wrong_axis",
        "the mean of the squares is taken over the first axis",
        edits={"rms_norm": (("x.pow(2).mean(dim=-1, keepdim=True)", "x.pow(2).mean(dim=0, keepdim=True)"),)},
        expect={"test_rms_norm": "over the last axis (the features)", "test_rmsnorm_module": "over the first axis"},
    ),
    Variant(
        "rmsnorm_ignores_eps",
        "RMSNorm does not hand its eps to rms_norm",
        edits={"rms_norm": (("return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight)"),)},
        expect={"test_rmsnorm_module": "the module's eps is not passed on"},
        only=True,
    ),
    Variant(
        "rmsnorm_weight_zeros",
        "RMSNorm's weight starts at zeros",
        edits={"rms_norm": (("nn.Parameter(torch.ones(width))", "nn.Parameter(torch.zeros(width))"),)},
        expect={"test_rmsnorm_module": "does not start at ones"},
        crosses="ModernBlock and ModernGPT as built hold the student's norms at zero, which give every input the same "
                "answer: the tests of Part F refuse to judge a block or a model around a constant part",
    ),
    Variant(
        "rope_tables_interleaved",
        "rope_tables repeats each angle for neighbouring columns (pairs (2i, 2i+1)) instead of the two halves",
        edits={"rope": ((HALVES, "angles = angles.repeat_interleave(2, dim=-1)  # (T, d)"),)},
        expect={"test_rope_tables": "the two halves of each row", "test_rope_relative": "changed their score"},
        only=True,
    ),
    Variant(
        "rope_positions_from_one",
        "the positions of the tables start at 1",
        edits={"rope": (("torch.arange(length, dtype=torch.float32)", "torch.arange(1, length + 1, dtype=torch.float32)"),)},
        expect={"test_rope_tables": "positions start at 0"},
        only=True,
    ),
    Variant(
        "rope_exponent_halved",
        "the frequencies are base^(-i/d) instead of base^(-2i/d)",
        edits={"rope": (("-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head",
                         "-torch.arange(d_head // 2, dtype=torch.float32) / d_head"),)},
        expect={"test_rope_tables": "base ** (-i / d_head)", "test_rope_relative": "base ** (-i / d_head)"},
        only=True,
    ),
    Variant(
        "rope_base_ignored",
        "the frequencies always use 10000, whatever base is given",
        edits={"rope": (("freqs = base ** (", "freqs = 10000.0 ** ("),)},
        expect={"test_rope_tables": "the base given is ignored"},
        only=True,
    ),
    Variant(
        "rope_neighbour_pairs",
        "apply_rope pairs neighbours (2i, 2i+1) instead of i with i + d/2",
        edits={"rope": ((ROTATE, "rotated = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)"),)},
        expect={"test_apply_rope": "together with i + d/2", "test_rope_relative": "changed their score"},
        only=True,
    ),
    Variant(
        "rope_sign_flipped",
        "apply_rope turns every pair the other way",
        edits={"rope": (("return x * cos + rotated * sin", "return x * cos - rotated * sin"),)},
        expect={"test_apply_rope": "turned the other way", "test_rope_relative": "turned the other way"},
        only=True,
    ),
    Variant(
        "alibi_slopes_from_zero",
        "the ALiBi slopes start at h = 0, so the first head's slope is 1",
        edits={"alibi": (("torch.arange(1, heads + 1)", "torch.arange(heads)"),)},
        expect={"test_alibi": "the slopes start at h = 0"},
        only=True,
    ),
    Variant(
        "alibi_absolute_distance",
        "the ALiBi bias is -slope * |i - j| everywhere",
        edits={"alibi": (("return slopes[:, None, None] * behind", "return slopes[:, None, None] * -behind.abs()"),)},
        expect={"test_alibi": "-slope * |i - j|"},
        only=True,
    ),
    Variant(
        "swiglu_silu_on_w3",
        "SiLU gates the w3 branch instead of the w1 branch",
        edits={"swiglu": (("F.silu(self.w1(x)) * self.w3(x)", "self.w1(x) * F.silu(self.w3(x))"),)},
        expect={"test_swiglu": "SiLU is applied to the w3 branch"},
        only=True,
    ),
    Variant(
        "swiglu_gelu",
        "GELU instead of SiLU",
        edits={"swiglu": (("F.silu(self.w1(x))", "F.gelu(self.w1(x))"),)},
        expect={"test_swiglu": "GELU is used instead of SiLU"},
        only=True,
    ),
    Variant(  # issue 54, third hunt
        "swiglu_branches_added",
        "SwiGLU adds the two branches, silu(w1 x) + w3 x, instead of multiplying them",
        edits={"swiglu": (("F.silu(self.w1(x)) * self.w3(x)", "F.silu(self.w1(x)) + self.w3(x)"),)},
        expect={"test_swiglu": "the two branches are added"},
        only=True,
    ),
    Variant(
        "swiglu_with_bias",
        "w1 has a bias",
        edits={"swiglu": (("self.w1 = nn.Linear(width, hidden, bias=False)", "self.w1 = nn.Linear(width, hidden)"),)},
        expect={"test_swiglu": "holds w1.bias besides what the text names"},
        only=True,
    ),
    Variant(
        "predict_relu_width",
        "predicts the ReLU layer's own hidden width",
        replace={"predict_swiglu_hidden": "PREDICTED_SWIGLU_HIDDEN = 384\n"},
        expect={"test_predict_swiglu_hidden": "three matrices of width x hidden, not two"},
        only=True,
    ),
    Variant(
        "gqa_repeat_tiles",
        "the key/value heads are repeated with .repeat: query head h reads key/value head h % kv_heads",
        edits={"gqa": ((REPEAT, "k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)"),)},
        expect={"test_gqa_matches_sdpa": "is repeated with .repeat"},
        only=True,
    ),
    Variant(
        "gqa_not_causal",
        "the attention never applies its causal mask",
        edits={"gqa": ((MASK, ""),)},
        expect={"test_gqa_matches_sdpa": "the causal mask is not applied"},
        only=True,
    ),
    Variant(
        "gqa_scaled_by_width",
        "the scores are divided by sqrt(width)",
        edits={"gqa": (("/ math.sqrt(self.d_head)  # (B, H, T, T)", "/ math.sqrt(D)  # (B, H, T, T)"),)},
        expect={"test_gqa_matches_sdpa": "divided by sqrt(width)"},
        only=True,
    ),
    Variant(
        "gqa_no_rope",
        "no rotary positions on q and k",
        edits={"gqa": ((ROPE_QK, ""),)},
        expect={"test_gqa_matches_sdpa": "no rotary positions"},
        only=True,
    ),
    Variant(
        "gqa_kv_swapped",
        "the values are taken from the first half of kv_proj, the keys from the second",
        edits={"gqa": (("        k, v = (t.view(B, T, self.n_kv_heads", "        v, k = (t.view(B, T, self.n_kv_heads"),)},
        expect={"test_gqa_matches_sdpa": "the other way round"},
        only=True,
    ),
    Variant(
        "gqa_q_bias",
        "q_proj has a bias",
        edits={"gqa": (("self.q_proj = nn.Linear(width, width, bias=False)", "self.q_proj = nn.Linear(width, width)"),)},
        expect={"test_gqa_parts": "holds q_proj.bias besides", "test_gqa_matches_sdpa": "holds q_proj.bias"},
    ),
    Variant(
        "tiled_no_rescale",
        "the running sum and output are not rescaled when the maximum grows",
        edits={"tiled_attention": ((RESCALE, "rescale = torch.ones_like(m)"),)},
        expect={"test_tiled_matches_sdpa": "not rescaled by exp(m_old - m_new)",
                "test_tiled_memory": "make the test of the tiled attention's values pass first"},
    ),
    Variant(
        "tiled_lse_max_only",
        "lse is the running maximum alone",
        edits={"tiled_attention": (("lses.append(m + torch.log(total))", "lses.append(m)"),)},
        expect={"test_tiled_matches_sdpa": "lse is the running maximum m alone"},
        only=True,
    ),
    Variant(
        "tiled_skips_diagonal",
        "causal attention skips the diagonal block too",
        edits={"tiled_attention": (("if causal and key_start > rows[-1]:", "if causal and key_start >= start:"),)},
        expect={"test_tiled_matches_sdpa": "its diagonal block holds",
                "test_tiled_memory": "make the test of the tiled attention's values pass first"},
    ),
    Variant(
        "tiled_diagonal_unmasked",
        "the diagonal block is not masked inside",
        edits={"tiled_attention": ((DIAGONAL_MASK, ""),)},
        expect={"test_tiled_matches_sdpa": "the diagonal block is not masked",
                "test_tiled_memory": "make the test of the tiled attention's values pass first"},
    ),
    Variant(
        "tiled_full_scores",
        "the 'tiled' attention computes all T x T scores at once",
        replace={"tiled_attention": FULL_SCORES},
        expect={"test_tiled_memory": "built a tensor of shape",
                "test_tiled_skips": READS_FUTURE_BLOCK},
        only=True,
    ),
    Variant(
        "tiled_queries_whole",
        "the tiled attention keeps every query at once and visits every key block, masked, so none is ever skipped",
        replace={"tiled_attention": '''def tiled_attention(q, k, v, block_size, causal=False):
    q, k, v = q.double(), k.double(), v.double()
    T, d = q.shape[-2], q.shape[-1]
    m = torch.full(q.shape[:-1], float("-inf"), dtype=torch.float64)
    total = torch.zeros_like(m)
    o = torch.zeros_like(q)
    rows = torch.arange(T)[:, None]
    for start in range(0, T, block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) / math.sqrt(d)  # (B, H, T, b)
        if causal:
            s = s.masked_fill(torch.arange(start, min(start + block_size, T))[None, :] > rows, float("-inf"))
        new_m = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - new_m[..., None])
        scale = torch.exp(m - new_m)
        total, o, m = total * scale + p.sum(-1), o * scale[..., None] + p @ v[..., start:start + block_size, :], new_m
    return o / total[..., None], m + total.log()
'''},
        expect={"test_tiled_skips": READS_FUTURE_BLOCK},
        only=True,
    ),
    Variant(
        "tiled_masks_future_blocks",
        "causal attention masks the key blocks above the diagonal to -inf instead of skipping them",
        edits={"tiled_attention": (("break  # this key block and every later one lie above the diagonal",
                                    "pass  # visited, and masked below"),)},
        expect={"test_tiled_skips": READS_FUTURE_BLOCK},
        only=True,
    ),
    Variant(
        "block_post_norm",
        "ModernBlock normalises after each sublayer (post-norm)",
        edits={"modern_model": (("x = x + self.attention(self.norm1(x))  # (B, T, D)",
                                 "x = self.norm1(x + self.attention(x))  # (B, T, D)"),
                                ("return x + self.ffn(self.norm2(x))  # (B, T, D)",
                                 "return self.norm2(x + self.ffn(x))  # (B, T, D)"))},
        expect={"test_modern_block": "post-norm"},
        only=True,
    ),
    Variant(
        "block_ffn_without_residual",
        "the FFN's output replaces the stream",
        edits={"modern_model": (("return x + self.ffn(self.norm2(x))  # (B, T, D)", "return self.ffn(self.norm2(x))"),)},
        expect={"test_modern_block": "a residual is missing"},
        only=True,
    ),
    Variant(
        "gpt_learned_positions",
        "ModernGPT keeps chapter 10's learned position embedding besides the rotary positions",
        edits={"modern_model": (("        self.norm = RMSNorm(width)\n",
                                 "        self.norm = RMSNorm(width)\n        self.position_embedding = nn.Embedding(max_len, width)\n"),
                                ("x = self.token_embedding(idx)  # (B, T, D): no positions here",
                                 "x = self.token_embedding(idx) + self.position_embedding(torch.arange(idx.shape[1]))"))},
        expect={"test_modern_gpt": "holds position_embedding.weight besides"},
        only=True,
    ),
    Variant(
        "gpt_no_final_norm",
        "the head reads the last block's output without the final norm",
        edits={"modern_model": (("logits = self.head(self.norm(x))  # (B, T, vocab)", "logits = self.head(x)  # (B, T, vocab)"),)},
        expect={"test_modern_gpt": "the final norm is missing"},
        only=True,
    ),
    Variant(
        "quiz_wrong",
        "every quiz answer is wrong",
        edits={"quiz": (('Q1, Q2, Q3 = "c", "b", "d"', 'Q1, Q2, Q3 = "a", "c", "b"'),)},
        expect={"test_quiz_q1": "Q1 is not right: (a)", "test_quiz_q2": "Q2 is not right: (c)",
                "test_quiz_q3": "Q3 is not right: (b)"},
        only=True,
    ),
    # issue 54's second hunt (2026-12-06): found with messages that named no mistake (or Part F's formula for an error
    # raised in Part A)
    Variant(
        "rms_mean_without_keepdim",
        "rms_norm takes the mean of the squares without keepdim, so (..., D) meets (...,) and raises",
        edits={"rms_norm": ((MEAN_SQUARE, "    mean_square = x.pow(2).mean(dim=-1)\n"),)},
        expect={"test_rms_norm": "keepdim=True on the mean keeps the averaged axis",
                "test_modern_block": "its norm1 raises on an input of this shape by itself",
                "test_modern_gpt": "its norm raises on an input of this shape by itself"},
        crosses="ModernBlock and ModernGPT run the student's RMSNorm in the kernel, and this one raises there, so no "
                "output exists to judge; the grader may put no working norm into the student's kernel",
    ),
    Variant(
        "block_norm1_twice",
        "ModernBlock's FFN branch reads norm1(h) instead of norm2(h) (a copy of the attention's line)",
        edits={"modern_model": (("return x + self.ffn(self.norm2(x))", "return x + self.ffn(self.norm1(x))"),)},
        expect={"test_modern_block": "the FFN reads norm1(h) instead of norm2(h)"},
        only=True,
    ),
    Variant(
        "tiled_queries_unscaled",
        "tiled_attention forgets to divide the queries (so the scores) by sqrt(d)",
        edits={"tiled_attention": ((" / math.sqrt(q.shape[-1])  # (B, H, b, d)", "  # (B, H, b, d)"),)},
        expect={"test_tiled_matches_sdpa": "the scores are not divided by sqrt(d)"},
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "rope_rotate_half_no_minus",
        "rotate_half forgets the minus sign: [x2, x1] instead of [-x2, x1] (a reflection, not a rotation)",
        edits={"rope": (("rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)",
                         "rotated = torch.cat([x[..., half:], x[..., :half]], dim=-1)"),)},
        expect={"test_apply_rope": "rotate_half lost its minus sign"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "rms_forgets_sqrt",
        "rms_norm divides by the mean square itself, forgetting the square root",
        edits={"rms_norm": (("return x / torch.sqrt(mean_square + eps) * weight", "return x / (mean_square + eps) * weight"),)},
        expect={"test_rms_norm": "the square root is missing"},
    ),
    Variant(
        "gqa_rope_on_queries_only",
        "the attention rotates the queries but not the keys",
        edits={"gqa": (("q, k = apply_rope(q, self.cos[:T], self.sin[:T]), apply_rope(k, self.cos[:T], self.sin[:T])",
                        "q = apply_rope(q, self.cos[:T], self.sin[:T])"),)},
        expect={"test_gqa_matches_sdpa": "the keys are not rotated"},
    ),
    Variant(
        "tiled_output_not_divided",
        "tiled_attention returns the accumulated output O without dividing it by the running sum l at the end",
        edits={"tiled_attention": (("outs.append(o / total[..., None])", "outs.append(o)"),)},
        expect={"test_tiled_matches_sdpa": "not divided by the running sum l"},
    ),
]

ALTERNATIVES = [
    Variant(
        "rope_complex",
        "rotary positions with complex numbers: torch.polar for the tables, a complex product for the rotation",
        replace={"rope": '''def rope_tables(length, d_head, base=10000.0):
    theta = 1.0 / base ** (torch.arange(d_head // 2, dtype=torch.float64) * 2 / d_head)
    turns = torch.polar(torch.ones(length, d_head // 2, dtype=torch.float64),
                        torch.arange(length, dtype=torch.float64)[:, None] * theta)
    return torch.cat([turns.real, turns.real], -1).float(), torch.cat([turns.imag, turns.imag], -1).float()


def apply_rope(x, cos, sin):
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half], x[..., half:]) * torch.complex(cos[:, :half], sin[:, :half])
    return torch.cat([z.real, z.imag], dim=-1)
'''},
    ),
    Variant(
        "einsum_and_expand",
        "the attention with einsum, the key/value heads grouped by reshaping the queries, its rotary tables in "
        "buffers left out of the state_dict (persistent=False), RMSNorm with rsqrt and its own arithmetic, "
        "SwiGLU's SiLU by hand",
        replace={"gqa": '''class GroupedQueryAttention(nn.Module):
    def __init__(self, width, heads, kv_heads, max_len):
        super().__init__()
        self.proj = nn.Linear(width, width, bias=False)
        self.kv_proj = nn.Linear(width, 2 * kv_heads * (width // heads), bias=False)
        self.q_proj = nn.Linear(width, width, bias=False)
        self.heads, self.kv_heads = heads, kv_heads
        cos, sin = rope_tables(max_len, width // heads)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("cos", cos, persistent=False)

    def forward(self, x):
        B, T, D = x.shape
        d, G = D // self.heads, self.kv_heads
        q = self.q_proj(x).reshape(B, T, self.heads, d).permute(0, 2, 1, 3)
        kv = self.kv_proj(x).reshape(B, T, 2, G, d).permute(2, 0, 3, 1, 4)
        q = apply_rope(q, self.cos[:T], self.sin[:T]).reshape(B, G, self.heads // G, T, d)
        k, v = apply_rope(kv[0], self.cos[:T], self.sin[:T]), kv[1]
        scores = torch.einsum("bgjtd,bgsd->bgjts", q, k) / d ** 0.5
        scores = scores + torch.full((T, T), float("-inf")).triu(1)
        out = torch.einsum("bgjts,bgsd->bgjtd", scores.softmax(-1), v).reshape(B, self.heads, T, d)
        return self.proj(out.permute(0, 2, 1, 3).reshape(B, T, D))
''', "rms_norm": '''def rms_norm(x, weight, eps=1e-6):
    return weight * (x * torch.rsqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps))


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return self.weight * x / (x.square().mean(-1, keepdim=True) + self.eps).sqrt()
''', "swiglu": '''class SwiGLU(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.w3 = nn.Linear(width, hidden, bias=False)
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)

    def forward(self, x):
        a = self.w1(x)
        return self.w2(a * torch.sigmoid(a) * self.w3(x))
'''},
    ),
    Variant(
        "tiled_float64_bounded_range",
        "the tiled attention in float64, its key loop bounded by the query block's end instead of a break",
        replace={"tiled_attention": '''def tiled_attention(q, k, v, block_size, causal=False):
    q, k, v = q.double(), k.double(), v.double()
    T, d = q.shape[-2], q.shape[-1]
    outs, lses = [], []
    for start in range(0, T, block_size):
        stop = min(start + block_size, T)
        qb, rows = q[..., start:stop, :], torch.arange(start, stop)[:, None]
        m = torch.full(qb.shape[:-1], float("-inf"), dtype=torch.float64)
        total, o = torch.zeros_like(m), torch.zeros_like(qb)
        for key_start in range(0, stop if causal else T, block_size):
            s = qb @ k[..., key_start:key_start + block_size, :].transpose(-2, -1) / math.sqrt(d)
            if causal:
                cols = torch.arange(key_start, min(key_start + block_size, T))[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            new_m = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - new_m[..., None])
            scale = torch.exp(m - new_m)
            total = total * scale + p.sum(-1)
            o = o * scale[..., None] + p @ v[..., key_start:key_start + block_size, :]
            m = new_m
        outs.append(o / total[..., None])
        lses.append(m + total.log())
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
'''},
    ),
    Variant(
        "capital_quiz_letters",
        "the quiz answered in capitals with spaces",
        edits={"quiz": (('Q1, Q2, Q3 = "c", "b", "d"', 'Q1, Q2, Q3 = " C", "B ", "D"'),)},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'tiled_max_starts_at_zero',
        'the running maximum starts at 0 instead of -inf, so it is never below 0: rows whose scores are all very negative underflow to a zero sum and give NaN',
        edits={'tiled_attention': (('m = torch.full(qb.shape[:-1], float("-inf"), dtype=q.dtype)', 'm = torch.zeros(qb.shape[:-1], dtype=q.dtype)'),)},
        expect={'test_tiled_matches_sdpa': 'start the running maximum at -inf, not at 0'},
    ),
    Variant(
        'model_ignores_kv_heads',
        'ModernGPT builds its blocks with heads key/value heads, ignoring kv_heads (plain multi-head attention)',
        edits={'modern_model': (('ModernBlock(width, heads, kv_heads, 8 * width // 3, max_len)', 'ModernBlock(width, heads, heads, 8 * width // 3, max_len)'),)},
        expect={'test_modern_gpt': 'pass kv_heads on to every ModernBlock'},
    ),
]
