"""Chapter 04: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant

ASSIGNMENT = "04_encoder_block"

FFN = "return self.linear2(torch.relu(self.linear1(x)))"
LOSS = "return (per_token * valid).sum() / valid.sum()"
PRE_ATTN, PRE_FFN = "x = x + attended", "x = x + self.ffn(self.norm2(x))"
POST_ATTN, POST_FFN = "x = self.norm1(x + attended)", "x = self.norm2(x + self.ffn(x))"


def _block(*edits):
    return {"encoder_block": edits}


VARIANTS = [
    # ------------------------------------------------------------------ the list
    Variant(
        "norm_placement_swapped",
        "norm_first=False runs the pre-norm formula and norm_first=True the post-norm one",
        edits=_block(("if self.norm_first:", "if not self.norm_first:")),
        expect={"test_block_post_norm": "pre-norm is used although norm_first=False",
                "test_block_pre_norm": "post-norm is used although norm_first=True"},
    ),
    Variant(
        "attention_residual_missing",
        "the attention sublayer's output replaces x instead of being added to it",
        edits=_block((PRE_ATTN, "x = attended"), (POST_ATTN, "x = self.norm1(attended)")),
        expect={"test_block_post_norm": "the residual around the attention sublayer is missing",
                "test_block_pre_norm": "the residual around the attention sublayer is missing"},
    ),
    Variant(
        "head_weights_averaged",
        "the block returns nn.MultiheadAttention's default weights, averaged over heads to (B, T, T)",
        edits=_block(("need_weights=True, average_attn_weights=False", "need_weights=True")),
        expect={"test_block_shapes": "average_attn_weights=False",
                "test_block_padding_mask": "weights with a padding mask has shape"},
    ),
    Variant(
        "ffn_without_activation",
        "the FFN is linear2(linear1(x)), with no ReLU in between",
        edits={"feed_forward": ((FFN, "return self.linear2(self.linear1(x))"),)},
        expect={"test_ffn_values": "your FFN is a linear (affine) map"},
        only=True,  # the block's tests judge the block around the student's own FFN
    ),
    Variant(
        "ffn_gelu",
        "the FFN uses a GELU (BERT's and GPT's activation) where the text asks for ReLU",
        edits={"feed_forward": ((FFN, "return self.linear2(nn.functional.gelu(self.linear1(x)))"),)},
        expect={"test_ffn_values": "a GELU is used instead of the ReLU"},
        only=True,
    ),
    Variant(
        "padding_mask_ignored",
        "the block never passes padding_mask to the attention",
        edits=_block(("key_padding_mask=padding_mask, ", "")),
        expect={"test_block_padding_mask": "pass padding_mask to the attention as key_padding_mask",
                "test_block_post_norm": "padding_mask is not passed to the attention as key_padding_mask"},
    ),
    Variant(
        "parameter_count_without_biases",
        "mha_parameter_count counts the four d x d matrices but not their biases",
        edits={"mha_parameter_count": (("4 * d * d + 4 * d", "4 * d * d"),)},
        expect={"test_mha_parameter_count": "count W_Q, W_K, W_V, W_O and their biases"},
    ),
    Variant(
        "loss_averages_pad_too",
        "masked_token_loss ignores `valid` and averages over PAD positions as well",
        edits={"masked_token_loss": ((LOSS, "return per_token.mean()"),)},
        expect={"test_masked_loss_values": "PAD positions are averaged in too",
                "test_masked_loss_ignores_pad": "the loss changed when only PAD positions changed"},
    ),
    # ------------------------------------------------------------------ more mistakes
    Variant(
        "pre_norm_attention_reads_x",
        "pre-norm attends to x instead of norm1(x)",
        edits=_block(("attend(self.norm1(x))", "attend(x)"),),
        expect={"test_block_modules": "reading norm1(x)",
                "test_block_pre_norm": "the attention reads x instead of norm1(x)"},
    ),
    Variant(
        "loss_divides_per_sequence",
        "masked_token_loss divides by the number of real tokens of each sequence, valid.sum(-1), giving one loss "
        "per sequence",
        edits={"masked_token_loss": ((LOSS, "return (per_token * valid).sum() / valid.sum(-1)"),)},
        expect={"test_masked_loss_values": "expected a 0-d tensor"},
    ),
    Variant(
        "post_norm_on_the_branch",
        "post-norm normalises each sublayer's output before adding it, x + norm(sublayer(x)), instead of the sum",
        edits=_block((POST_ATTN, "x = x + self.norm1(attended)"), (POST_FFN, "x = x + self.norm2(self.ffn(x))")),
        expect={"test_block_post_norm": "each LayerNorm is applied to its sublayer's output",
                "test_block_padding_mask": "each LayerNorm is applied to its sublayer's output",
                "test_block_causal_mask": "each LayerNorm is applied to its sublayer's output"},
    ),
    Variant(
        "block_ffn_arguments_swapped",
        "the block builds its FFN as FeedForward(hidden, width): the arguments in the wrong order",
        edits=_block(("self.ffn = FeedForward(width, hidden)", "self.ffn = FeedForward(hidden, width)"),),
        expect={"test_block_modules": "the arguments are swapped",
                "test_block_shapes": "build it as FeedForward(width, hidden)"},
    ),
    Variant(
        "ffn_layers_named_fc",
        "FeedForward names its layers fc1 and fc2 instead of linear1 and linear2",
        edits={"feed_forward": (("self.linear1 = nn.Linear(width, hidden)", "self.fc1 = nn.Linear(width, hidden)"),
                                ("self.linear2 = nn.Linear(hidden, width)", "self.fc2 = nn.Linear(hidden, width)"),
                                (FFN, "return self.fc2(torch.relu(self.fc1(x)))"))},
        expect={"test_ffn_layers": "create self.linear1", "test_ffn_values": "name its layers linear1 and linear2"},
        only=True,  # the block's tests judge the block around the FFN as it is
    ),
    Variant(
        "causal_mask_ignored",
        "the block never passes causal_mask to the attention",
        edits=_block((" attn_mask=causal_mask,", "")),
        expect={"test_block_causal_mask": "pass causal_mask to the attention as attn_mask",
                "test_block_post_norm": "causal_mask is not passed to the attention as attn_mask"},
    ),
    Variant(
        "padding_mask_inverted",
        "the block passes ~padding_mask, dropping the real tokens and keeping PAD",
        edits=_block(("key_padding_mask=padding_mask",
                      "key_padding_mask=None if padding_mask is None else ~padding_mask")),
        expect={"test_block_padding_mask": "key_padding_mask is True for keys to DROP",
                "test_block_post_norm": "not inverted", "test_block_pre_norm": "not inverted"},
    ),
    Variant(
        "ffn_residual_missing",
        "the FFN sublayer's output replaces x instead of being added to it",
        edits=_block((PRE_FFN, "x = self.ffn(self.norm2(x))"), (POST_FFN, "x = self.norm2(self.ffn(x))")),
        expect={"test_block_post_norm": "the residual around the FFN sublayer is missing",
                "test_block_pre_norm": "the residual around the FFN sublayer is missing"},
    ),
    Variant(
        "norms_swapped",
        "norm2 wraps the attention and norm1 the FFN",
        edits=_block(("attend(self.norm1(x))", "attend(self.norm2(x))"),
                     (PRE_FFN, "x = x + self.ffn(self.norm1(x))"),
                     (POST_ATTN, "x = self.norm2(x + attended)"),
                     (POST_FFN, "x = self.norm1(x + self.ffn(x))")),
        expect={"test_block_post_norm": "norm1 and norm2 are swapped",
                "test_block_pre_norm": "norm1 and norm2 are swapped"},
    ),
    Variant(
        "pre_norm_residual_from_normalised_x",
        "pre-norm adds the sublayer to norm(x) instead of to x, so the residual path goes through a LayerNorm",
        edits=_block((PRE_ATTN, "x = self.norm1(x) + attended"),
                     (PRE_FFN, "x = self.norm2(x) + self.ffn(self.norm2(x))")),
        expect={"test_block_pre_norm": "the residual adds norm(x) instead of x"},
    ),
    Variant(
        "norm2_never_used",
        "the block applies norm1 after both sublayers and never uses norm2",
        edits=_block((PRE_FFN, "x = x + self.ffn(self.norm1(x))"), (POST_FFN, "x = self.norm1(x + self.ffn(x))")),
        expect={"test_block_post_norm": "norm1 is used for both sublayers and norm2 never",
                "test_block_pre_norm": "norm1 is used for both sublayers and norm2 never"},
    ),
    Variant(
        "attention_not_batch_first",
        "nn.MultiheadAttention is built without batch_first=True, so it reads (B, T, D) as (T, B, D)",
        edits=_block((", batch_first=True", "")),
        expect={"test_block_modules": "must be built with batch_first=True",
                "test_block_shapes": "has shape (3, 2, 2, 2), expected (2, 2, 3, 3): the attention reads x of shape "
                                     "(B, T, D) as (T, B, D): build it with batch_first=True",
                "test_block_padding_mask": "build it with batch_first=True",
                "test_block_causal_mask": "build it with batch_first=True",
                "test_block_post_norm": "build it with batch_first=True",
                "test_block_pre_norm": "build it with batch_first=True"},
    ),
    Variant(
        "masks_swapped",
        "the block passes padding_mask as attn_mask and causal_mask as key_padding_mask",
        edits=_block(("key_padding_mask=padding_mask, attn_mask=causal_mask",
                      "key_padding_mask=causal_mask, attn_mask=padding_mask"),),
        expect={"test_block_padding_mask": "pass padding_mask (B, T) to the attention as key_padding_mask",
                "test_block_causal_mask": "pass padding_mask (B, T) to the attention as key_padding_mask"},
    ),
    Variant(
        "attention_dropout",
        "the attention is built with dropout=0.1",
        edits=_block(("dropout=0.0", "dropout=0.1")),
        expect={"test_block_modules": "use dropout=0.0"},
    ),
    Variant(
        "ffn_hidden_ignored",
        "both FFN layers are width x width: the hidden size is ignored",
        edits={"feed_forward": (("nn.Linear(width, hidden)", "nn.Linear(width, width)"),
                                ("nn.Linear(hidden, width)", "nn.Linear(width, width)"))},
        expect={"test_ffn_layers": "expected 6 -> 10"},
        only=True,
    ),
    Variant(
        "block_ffn_hidden_ignored",
        "the block builds its FFN as FeedForward(width, width), ignoring its hidden size",
        edits=_block(("self.ffn = FeedForward(width, hidden)", "self.ffn = FeedForward(width, width)"),),
        expect={"test_block_modules": "must have hidden size"},
    ),
    Variant(
        "ffn_linear_named_but_not_one",
        "linear1 is a home-made class that calls itself torch.nn.Linear (by __qualname__ and __module__) and "
        "reports in_features and out_features, but it forgets its bias",
        edits={"feed_forward": (("        self.linear1 = nn.Linear(width, hidden)\n",
                                 "        self.linear1 = _Linear(width, hidden)\n"),
                                ("class FeedForward(nn.Module):",
                                 "class _Linear(nn.Module):\n"
                                 "    def __init__(self, n_in, n_out):\n"
                                 "        super().__init__()\n"
                                 "        self.in_features, self.out_features = n_in, n_out\n"
                                 "        self.weight = nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)\n"
                                 "        self.bias = nn.Parameter(torch.zeros(n_out))\n\n"
                                 "    def forward(self, x):\n"
                                 "        return x @ self.weight.T\n\n\n"
                                 "_Linear.__qualname__, _Linear.__name__, _Linear.__module__ = "
                                 "'Linear', 'Linear', 'torch.nn.modules.linear'\n\n\n"
                                 "class FeedForward(nn.Module):"))},
        expect={"test_ffn_layers": "linear1 must be an nn.Linear(width, hidden), with its bias"},
    ),
    Variant(
        "parameter_count_without_output_projection",
        "mha_parameter_count counts W_Q, W_K, W_V and their biases but not W_O",
        edits={"mha_parameter_count": (("4 * d * d + 4 * d", "3 * d * d + 3 * d"),)},
        expect={"test_mha_parameter_count": "count W_Q, W_K, W_V, W_O and their biases"},
    ),
    Variant(
        "parameter_count_hardcoded",
        "mha_parameter_count returns the d = 512 figure whatever d is",
        replace={"mha_parameter_count": "def mha_parameter_count(d):\n    return 1050624\n"},
        expect={"test_mha_parameter_count": "mha_parameter_count(8) = 1050624"},
    ),
    Variant(
        "loss_returns_float",
        "masked_token_loss returns a Python float (.item()), which cannot be back-propagated",
        edits={"masked_token_loss": ((LOSS, "return ((per_token * valid).sum() / valid.sum()).item()"),)},
        expect={"test_masked_loss_values": "expected a 0-d tensor",
                "test_gradients_reach_every_parameter": "keep it a tensor"},
    ),
    Variant(
        "loss_sums_features",
        "masked_token_loss sums the squared error over the features instead of averaging",
        edits={"masked_token_loss": ((".square().mean(dim=-1)", ".square().sum(dim=-1)"),)},
        expect={"test_masked_loss_values": "average the squared error over the features of each token"},
    ),
    Variant(
        "loss_divides_by_all_positions",
        "masked_token_loss zeroes PAD errors but divides by B * T instead of the number of real tokens",
        edits={"masked_token_loss": ((LOSS, "return (per_token * valid).mean()"),)},
        expect={"test_masked_loss_values": "divided by all B * T positions, PAD included"},
    ),
    Variant(
        "quiz_wrong",
        "a wrong letter for every quiz question",
        replace={"quiz_answers": 'Q1, Q2, Q3, Q4, Q5, Q6 = "b", "a", "a", "a", "c", "c"\n'},
        expect={"test_quiz_q1": "(b) 2.5 averages the two sequences' means",
                "test_quiz_q2": "(a) the residual connection adds the input back",
                "test_quiz_q3": "(a) an average of weights still describes mixing",
                "test_quiz_q4": "(a) the whole input is there before any prediction",
                "test_quiz_q5": "(c) attention's mixing weights are computed",
                "test_quiz_q6": "(c) a causal mask lets each query read its own key"},
    ),
    Variant(
        "quiz_not_letters",
        "quiz answers written as the option's text instead of its letter",
        replace={"quiz_answers": 'Q1, Q2, Q3, Q4, Q5, Q6 = "1.86", "c", "b", "c", "a", "b"\n'},
        expect={"test_quiz_q1": 'answer with one letter as a string, "a", "b" or "c"'},
    ),
    Variant(
        "predict_block_parameters_wrong",
        "predicts the block's parameters without the two LayerNorms",
        replace={"predict_block_parameters": "PREDICTED_BLOCK_PARAMETERS = 49728\n"},
        expect={"test_predict_block_parameters": "leaves out the two LayerNorms"},
    ),
    # issue 54's second hunt (2026-12-06): found with "compare your forward with the formulas of Part C" as the message
    Variant(
        "post_norm_ffn_reads_block_input",
        "post-norm: h = norm1(x + attended), then norm2(h + ffn(x)): the FFN reads the block's input, not h",
        edits=_block((f"{POST_ATTN}\n            {POST_FFN}",
                      "h = self.norm1(x + attended)\n            x = self.norm2(h + self.ffn(x))")),
        expect={"test_block_modules": "the FFN reads the block's input x instead of h = norm1(x + attention(x))",
                "test_block_post_norm": "the FFN reads the block's input x instead of h = norm1(x + attention(x))"},
    ),
    Variant(  # issue 54, third hunt
        "pre_norm_ffn_reads_norm1",
        "pre-norm: the FFN branch reads norm1(x) instead of norm2(x) (a copied line)",
        edits={"encoder_block": (("x = x + self.ffn(self.norm2(x))", "x = x + self.ffn(self.norm1(x))"),)},
        expect={"test_block_modules": "norm1 is used for both sublayers and norm2 never",
                "test_block_pre_norm": "norm1 is used for both sublayers and norm2 never"},
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "loss_subtracts_in_place",
        "masked_token_loss takes the error with encoded.sub_(target), changing the caller's encoded in place",
        edits={"masked_token_loss": (("per_token = (encoded - target).square().mean(dim=-1)",
                                      "per_token = encoded.sub_(target).square().mean(dim=-1)"),)},
        expect={"test_masked_loss_values": "changed the encoded or target tensor it was given",
                "test_masked_loss_ignores_pad": "none in place on encoded"},
    ),
    Variant(
        "heads_as_head_dim",
        "the attention is nn.MultiheadAttention(width, width // heads, ...): the head size where the number of heads goes",
        edits={"encoder_block": (("nn.MultiheadAttention(width, heads, dropout=0.0",
                                  "nn.MultiheadAttention(width, width // heads, dropout=0.0"),)},
        expect={"test_block_shapes": "the second argument of nn.MultiheadAttention is the number of heads"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "post_norm_ffn_residual_from_block_input",
        "post-norm: h = norm1(x + attended), then norm2(x + ffn(h)): the FFN's residual adds the block's input, not h",
        edits={"encoder_block": (("            x = self.norm1(x + attended)\n            x = self.norm2(x + self.ffn(x))",
                                  "            h = self.norm1(x + attended)\n            x = self.norm2(x + self.ffn(h))"),)},
        expect={"test_block_post_norm": "the FFN's residual adds the block's input x"},
    ),
    Variant(
        "loss_mean_over_tokens_axis",
        "masked_token_loss averages the squared error over dim=1 (the tokens) instead of dim=-1 (the features)",
        edits={"masked_token_loss": (("per_token = (encoded - target).square().mean(dim=-1)",
                                      "per_token = (encoded - target).square().mean(dim=1)"),)},
        expect={"test_masked_loss_ignores_pad": "the last axis (dim=-1)"},
    ),
    Variant(
        "predict_layernorm_scale_only",
        "the prediction counts each LayerNorm as D parameters (its scale only), forgetting its shift",
        edits={"predict_block_parameters": (("+ 2 * (2 * 64)", "+ 2 * 64"),)},
        expect={"test_predict_block_parameters": "a learned scale and a learned shift, 2D"},
    ),
]

ALTERNATIVES = [
    Variant(
        "ffn_sequential_of_named_layers",
        "FeedForward keeps linear1 and linear2 and runs them through an nn.Sequential that holds the same layers",
        edits={"feed_forward": (("        self.linear2 = nn.Linear(hidden, width)",
                                 "        self.linear2 = nn.Linear(hidden, width)\n"
                                 "        self.net = nn.Sequential(self.linear1, nn.ReLU(), self.linear2)"),
                                (FFN, "return self.net(x)"))},
    ),
    Variant(
        "block_built_in_another_order",
        "the block's submodules are created in another order (ffn, norms, then attention), "
        "with the keyword arguments of the attention in another order",
        edits=_block(("        self.attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)\n"
                      "        self.norm1 = nn.LayerNorm(width)\n"
                      "        self.norm2 = nn.LayerNorm(width)\n"
                      "        self.ffn = FeedForward(width, hidden)\n",
                      "        self.ffn = FeedForward(width, hidden)\n"
                      "        self.norm2 = nn.LayerNorm(width)\n"
                      "        self.norm1 = nn.LayerNorm(width)\n"
                      "        self.attention = nn.MultiheadAttention(width, heads, batch_first=True, dropout=0.0)\n"),),
    ),
    Variant(
        "loss_with_boolean_indexing",
        "masked_token_loss selects the real tokens with boolean indexing and averages them",
        edits={"masked_token_loss": (("    valid = valid.to(per_token.dtype)\n    " + LOSS,
                                      "    return per_token[valid.bool()].mean()"),)},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz_answers": (('"a", "c", "b", "c", "a", "b"', '" A", "C ", "b", "C", " a ", "B"'),)},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'loss_mean_of_sequence_means',
        "masked_token_loss averages each sequence's loss over its own real tokens, then averages the sequences: a token of a short sequence weighs more than one of a long sequence",
        edits={'masked_token_loss': (('return (per_token * valid).sum() / valid.sum()', 'return ((per_token * valid).sum(dim=-1) / valid.sum(dim=-1)).mean()'),)},
        expect={'test_masked_loss_values': 'a token of a short sequence then weighs more'},
    ),
]
