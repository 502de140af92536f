"""Wrong answers to chapter 04 that the graded tests must catch, each with its message."""

from textwrap import indent

from instructor.zoo import Variant

ASSIGNMENT = "04_encoder_block"

GOOD_INIT = """\
self.attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
self.norm1 = nn.LayerNorm(width)
self.norm2 = nn.LayerNorm(width)
self.ffn = FeedForward(width, hidden)
"""

# The forward of a correct block, with the pieces a student might get wrong spelled out.
GOOD_FORWARD = """\
if self.norm_first:
    attended, weights = self.attention(self.norm1(x), self.norm1(x), self.norm1(x),
                                       key_padding_mask=padding_mask, attn_mask=causal_mask,
                                       need_weights=True, average_attn_weights=False)
    x = x + attended
    x = x + self.ffn(self.norm2(x))
else:
    attended, weights = self.attention(x, x, x, key_padding_mask=padding_mask, attn_mask=causal_mask,
                                       need_weights=True, average_attn_weights=False)
    x = self.norm1(x + attended)
    x = self.norm2(x + self.ffn(x))
return x, weights
"""


def _block(forward: str = GOOD_FORWARD, init: str = GOOD_INIT) -> str:
    """The EncoderBlock cell as a student would type it."""
    return (
        "class EncoderBlock(nn.Module):\n"
        "    def __init__(self, width, heads, hidden, norm_first=False):\n"
        "        super().__init__()\n"
        "        self.norm_first = norm_first\n"
        f"{indent(init, ' ' * 8)}\n"
        "    def forward(self, x, padding_mask=None, causal_mask=None):\n"
        f"{indent(forward, ' ' * 8)}"
    )


def _edit(text: str, old: str, new: str, count: int = 1) -> str:
    assert text.count(old) == count, (old, text.count(old))
    return text.replace(old, new)


def _ffn(forward: str, linear1: str = "nn.Linear(width, hidden)", linear2: str = "nn.Linear(hidden, width)") -> str:
    return f"""class FeedForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.linear1 = {linear1}
        self.linear2 = {linear2}

    def forward(self, x):
        return {forward}
"""


def _loss(body: str) -> str:
    return "def masked_token_loss(encoded, target, valid):\n" + indent(body, "    ")


PRE_BRANCH = """\
    attended, weights = self.attention(self.norm1(x), self.norm1(x), self.norm1(x),
                                       key_padding_mask=padding_mask, attn_mask=causal_mask,
                                       need_weights=True, average_attn_weights=False)
    x = x + attended
    x = x + self.ffn(self.norm2(x))
"""
POST_BRANCH = """\
    attended, weights = self.attention(x, x, x, key_padding_mask=padding_mask, attn_mask=causal_mask,
                                       need_weights=True, average_attn_weights=False)
    x = self.norm1(x + attended)
    x = self.norm2(x + self.ffn(x))
"""
assert GOOD_FORWARD == f"if self.norm_first:\n{PRE_BRANCH}else:\n{POST_BRANCH}return x, weights\n"

VARIANTS = [
    # ------------------------------------------------------------------ the list
    Variant(
        "norm_placement_swapped",
        "norm_first=False runs the pre-norm formula and norm_first=True the post-norm one",
        {"encoder_block": _block(f"if self.norm_first:\n{POST_BRANCH}else:\n{PRE_BRANCH}return x, weights\n")},
        {"test_block_post_norm": "pre-norm is used although norm_first=False",
         "test_block_pre_norm": "post-norm is used although norm_first=True"},
    ),
    Variant(
        "attention_residual_missing",
        "the attention sublayer's output replaces x instead of being added to it",
        {"encoder_block": _block(_edit(_edit(GOOD_FORWARD, "x = x + attended", "x = attended"),
                                       "self.norm1(x + attended)", "self.norm1(attended)"))},
        {"test_block_post_norm": "the residual around the attention sublayer is missing",
         "test_block_pre_norm": "the residual around the attention sublayer is missing"},
    ),
    Variant(
        "head_weights_averaged",
        "the block returns nn.MultiheadAttention's default weights, averaged over heads to (B, T, T)",
        {"encoder_block": _block(GOOD_FORWARD.replace(", average_attn_weights=False", ""))},
        {"test_block_shapes": "average_attn_weights=False"},
    ),
    Variant(
        "ffn_without_activation",
        "the FFN is linear2(linear1(x)), with no ReLU in between",
        {"feed_forward": _ffn("self.linear2(self.linear1(x))")},
        {"test_ffn_values": "your FFN is a linear (affine) map",
         "test_block_post_norm": "the FFN has no ReLU between linear1 and linear2"},
    ),
    Variant(
        "padding_mask_ignored",
        "the block never passes padding_mask to the attention",
        {"encoder_block": _block(GOOD_FORWARD.replace("key_padding_mask=padding_mask, ", ""))},
        {"test_block_padding_mask": "pass padding_mask to the attention as key_padding_mask"},
    ),
    Variant(
        "parameter_count_without_biases",
        "mha_parameter_count counts the four d x d matrices but not their biases",
        {"mha_parameter_count": "def mha_parameter_count(d):\n    return 4 * d * d\n"},
        {"test_mha_parameter_count": "count W_Q, W_K, W_V, W_O and their biases"},
    ),
    Variant(
        "loss_averages_pad_too",
        "masked_token_loss ignores `valid` and averages over PAD positions as well",
        {"masked_token_loss": _loss("return (encoded - target).square().mean()\n")},
        {"test_masked_loss_values": "PAD positions are averaged in too",
         "test_masked_loss_ignores_pad": "the loss changed when only PAD positions changed"},
    ),
    # ------------------------------------------------------------------ more mistakes
    Variant(
        "causal_mask_ignored",
        "the block never passes causal_mask to the attention",
        {"encoder_block": _block(GOOD_FORWARD.replace("attn_mask=causal_mask,", ""))},
        {"test_block_causal_mask": "pass causal_mask to the attention as attn_mask"},
    ),
    Variant(
        "padding_mask_inverted",
        "the block passes ~padding_mask, dropping the real tokens and keeping PAD",
        {"encoder_block": _block(
            "if padding_mask is not None:\n    padding_mask = ~padding_mask  # True = real token\n" + GOOD_FORWARD)},
        {"test_block_padding_mask": "key_padding_mask is True for keys to DROP"},
    ),
    Variant(
        "ffn_residual_missing",
        "the FFN sublayer's output replaces x instead of being added to it",
        {"encoder_block": _block(_edit(_edit(GOOD_FORWARD, "x = x + self.ffn(self.norm2(x))", "x = self.ffn(self.norm2(x))"),
                                       "self.norm2(x + self.ffn(x))", "self.norm2(self.ffn(x))"))},
        {"test_block_post_norm": "the residual around the FFN sublayer is missing",
         "test_block_pre_norm": "the residual around the FFN sublayer is missing"},
    ),
    Variant(
        "norms_swapped",
        "norm2 wraps the attention and norm1 the FFN",
        {"encoder_block": _block(GOOD_FORWARD.replace("norm1", "NORM").replace("norm2", "norm1").replace("NORM", "norm2"))},
        {"test_block_post_norm": "norm1 and norm2 are swapped",
         "test_block_pre_norm": "norm1 and norm2 are swapped"},
    ),
    Variant(
        "pre_norm_residual_from_normalised_x",
        "pre-norm adds the sublayer to norm(x) instead of to x, so the residual path goes through a LayerNorm",
        {"encoder_block": _block(_edit(_edit(GOOD_FORWARD, "x = x + attended", "x = self.norm1(x) + attended"),
                                       "x = x + self.ffn(self.norm2(x))", "x = self.norm2(x) + self.ffn(self.norm2(x))"))},
        {"test_block_pre_norm": "the residual adds norm(x) instead of x"},
    ),
    Variant(
        "norm2_never_used",
        "the block applies norm1 after both sublayers and never uses norm2",
        {"encoder_block": _block(GOOD_FORWARD.replace("norm2", "norm1"))},
        {"test_gradients_reach_every_parameter": "norm2.weight got no gradient"},
    ),
    Variant(
        "attention_not_batch_first",
        "nn.MultiheadAttention is built without batch_first=True, so it reads (B, T, D) as (T, B, D)",
        {"encoder_block": _block(init=GOOD_INIT.replace(", batch_first=True", ""))},
        {"test_block_modules": "must be built with batch_first=True",
         "test_block_shapes": "weights for x of shape (2, 3, 4) and 2 heads has shape (3, 2, 2, 2)"},
    ),
    Variant(
        "attention_dropout",
        "the attention is built with dropout=0.1",
        {"encoder_block": _block(init=GOOD_INIT.replace("dropout=0.0", "dropout=0.1"))},
        {"test_block_modules": "use dropout=0.0"},
    ),
    Variant(
        "ffn_hidden_ignored",
        "both FFN layers are width x width: the hidden size is ignored",
        {"feed_forward": _ffn("self.linear2(torch.relu(self.linear1(x)))", linear1="nn.Linear(width, width)",
                              linear2="nn.Linear(width, width)")},
        {"test_ffn_layers": "expected 6 -> 10",
         "test_block_modules": "must have hidden size"},
    ),
    Variant(
        "parameter_count_without_output_projection",
        "mha_parameter_count counts W_Q, W_K, W_V and their biases but not W_O",
        {"mha_parameter_count": "def mha_parameter_count(d):\n    return 3 * d * d + 3 * d\n"},
        {"test_mha_parameter_count": "count W_Q, W_K, W_V, W_O and their biases"},
    ),
    Variant(
        "parameter_count_hardcoded",
        "mha_parameter_count returns the d = 512 figure whatever d is",
        {"mha_parameter_count": "def mha_parameter_count(d):\n    return 1050624\n"},
        {"test_mha_parameter_count": "mha_parameter_count(8) = 1050624"},
    ),
    Variant(
        "loss_returns_float",
        "masked_token_loss returns a Python float (.item()), which cannot be back-propagated",
        {"masked_token_loss": _loss(
            "per_token = (encoded - target).square().mean(dim=-1)\n"
            "return ((per_token * valid).sum() / valid.sum()).item()\n")},
        {"test_masked_loss_values": "expected a 0-d tensor",
         "test_gradients_reach_every_parameter": "keep it a tensor"},
    ),
    Variant(
        "loss_sums_features",
        "masked_token_loss sums the squared error over the features instead of averaging",
        {"masked_token_loss": _loss(
            "per_token = (encoded - target).square().sum(dim=-1)\n"
            "return (per_token * valid).sum() / valid.sum()\n")},
        {"test_masked_loss_values": "average the squared error over the features of each token"},
    ),
    Variant(
        "loss_divides_by_all_positions",
        "masked_token_loss zeroes PAD errors but divides by B * T instead of the number of real tokens",
        {"masked_token_loss": _loss(
            "per_token = (encoded - target).square().mean(dim=-1)\n"
            "return (per_token * valid).mean()\n")},
        {"test_masked_loss_values": "divided by all B * T positions, PAD included"},
    ),
    Variant(
        "quiz_wrong",
        "a wrong letter for every quiz question",
        {"quiz_answers": 'Q1, Q2, Q3, Q4, Q5, Q6 = "a", "a", "b", "c", "a", "c"\n'},
        {f"test_quiz_q{i}": f"Q{i} is not the best answer" for i in range(1, 7)},
    ),
    Variant(
        "quiz_not_letters",
        "quiz answers written as words instead of letters",
        {"quiz_answers": 'Q1, Q2, Q3, Q4, Q5, Q6 = "BERT", "c", "a", "b", "c", "a"\n'},
        {"test_quiz_q1": "answer with 'a', 'b' or 'c'"},
    ),
]
