"""Chapter 08: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks."""

from instructor.zoo import Variant

ASSIGNMENT = "08_attention_cost"

UPDATE = '''    S = S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)  # (..., d, d_v): + phi(k_t) v_t^T
    z = z + fk  # (..., d)
'''
READOUT = "out = (fq.unsqueeze(-1) * S).sum(dim=-2) / (fq * z).sum(dim=-1, keepdim=True)"
SDPA = "F.scaled_dot_product_attention(q, k, v)"
RETURN_CACHE = "return block.proj(y.transpose(1, 2).reshape(B, 1, D)), (k, v)"

VARIANTS = [
    # ---------------------------------------------------------------- Part A
    Variant(
        "cost_score_linear_in_L",
        "the score and mixing FLOPs are counted as linear in L (2 B L d)",
        edits={"attention_cost": (("score_flops = 2 * B * L * L * d", "score_flops = 2 * B * L * d"),
                                  ("mix_flops = 2 * B * L * L * d", "mix_flops = 2 * B * L * d"))},
        expect={"test_cost_values": "the score part is counted as linear in L",
                "test_cost_scaling": "score_flops grew 2x when L doubled, expected 4x"},
    ),
    Variant(
        "cost_bytes_without_heads",
        "the stored scores are counted once, not once per head",
        edits={"attention_cost": (('"score_bytes": 4 * B * H * L * L', '"score_bytes": 4 * B * L * L'),)},
        expect={"test_cost_values": "the heads are not counted",
                "test_cost_scaling": "score_bytes grew 1x when the heads doubled"},
    ),
    # ---------------------------------------------------------------- Part B
    Variant(
        "phi_elu_negative",
        "the feature map is ELU(x) without the 1 +, so features (and weights) can be negative",
        edits={"phi": (("return 1 + F.elu(x)", "return F.elu(x)"),)},
        expect={"test_phi": "features must be positive"},
        only=True,  # Part B and C's tests judge the attention around the student's own phi
    ),
    Variant(
        "cost_as_floats",
        "attention_cost counts the score part with a float factor (2.0), so the counts are floats, not whole numbers",
        edits={"attention_cost": (("score_flops = 2 * B * L * L * d", "score_flops = 2.0 * B * L * L * d"),)},
        expect={"test_cost_values": "the counts are whole numbers"},
        only=True,
    ),
    Variant(
        "kv_cache_grown_on_head_axis",
        "the cached step appends the new key and value along dim 1 (the heads) instead of dim 2 (the tokens)",
        edits={"cached_attention_step": (("k = torch.cat([cache[0], k], dim=2)", "k = torch.cat([cache[0], k], dim=1)"),
                                         ("v = torch.cat([cache[1], v], dim=2)", "v = torch.cat([cache[1], v], dim=1)"))},
        expect={"test_kv_cache_shapes": "append the new key and value along dim 2",
                "test_kv_cache_matches_full": "append the new key and value along dim 2",
                "test_greedy_cached_equals_full": "append the new key and value along dim 2"},
    ),
    Variant(
        "quadratic_unnormalised",
        "the quadratic form mixes the values with phi(q).phi(k) without dividing each row by its sum",
        edits={"linear_attention_quadratic": (("weights = scores / scores.sum(dim=-1, keepdim=True)",
                                               "weights = scores"),)},
        expect={"test_linear_attention_quadratic": "after dividing each row by its sum"},
    ),
    Variant(
        "quadratic_mask_keeps_future",
        "the causal mask of the quadratic form keeps the upper triangle (future keys)",
        edits={"linear_attention_quadratic": (("scores = scores.tril()", "scores = scores.triu()"),)},
        expect={"test_linear_attention_quadratic": "token 0 sees only key 0"},
    ),
    Variant(
        "linear_missing_normaliser",
        "linear attention returns phi(q)^T S without dividing by phi(q) . z",
        edits={"linear_attention": (("return numerator / denominator", "return numerator"),)},
        expect={"test_linear_attention_matches": "the normaliser z is missing"},
    ),
    Variant(
        "causal_sums_include_next_token",
        "the causal running sums are shifted by one, so token i also sees token i + 1",
        edits={"linear_attention": (("z = torch.cumsum(fk, dim=-2)  # (..., L, d): z_i",
                                     "z = torch.cumsum(fk, dim=-2)  # (..., L, d): z_i\n"
                                     "        S = torch.cat([S[..., 1:, :, :], S[..., -1:, :, :]], dim=-3)\n"
                                     "        z = torch.cat([z[..., 1:, :], z[..., -1:, :]], dim=-2)"),)},
        expect={"test_linear_attention_causal": "include token i + 1, a future token"},
    ),
    Variant(
        "linear_builds_L_by_L",
        "linear_attention calls the quadratic form: right numbers, but an L x L matrix",
        replace={"linear_attention": '''def linear_attention(q, k, v, causal=False):
    return linear_attention_quadratic(q, k, v, causal)
'''},
        expect={"test_linear_attention_is_linear": "that is the L x L matrix the regrouping avoids"},
    ),
    Variant(
        "phi_relu",
        "phi is ReLU(x), which is 0 for every x <= 0, instead of 1 + ELU(x)",
        edits={"phi": (("return 1 + F.elu(x)", "return F.relu(x)"),)},
        expect={"test_phi": "that is ReLU(x)"},
        only=True,  # the attentions are judged around the student's own phi, on inputs where it is positive
    ),
    Variant(
        "causal_z_cumsum_feature_axis",
        "the causal running sum z is taken along the feature axis, torch.cumsum(fk, dim=-1)",
        edits={"linear_attention": (("z = torch.cumsum(fk, dim=-2)", "z = torch.cumsum(fk, dim=-1)"),)},
        expect={"test_linear_attention_causal": "z is summed along its feature axis"},
    ),
    Variant(
        "phi_applied_to_values",
        "linear_attention applies phi to the values as well as to the queries and keys",
        edits={"linear_attention": (("S = fk.transpose(-1, -2) @ v  # (..., d, d_v)",
                                     "S = fk.transpose(-1, -2) @ phi(v)  # (..., d, d_v)"),)},
        expect={"test_linear_attention_matches": "phi is applied to the values too"},
    ),
    # ---------------------------------------------------------------- Part C
    Variant(
        "step_counts_current_twice",
        "the step adds the current token to S and z, then adds it again when reading out",
        edits={"causal_linear_attention_step": ((READOUT, "out = (fq.unsqueeze(-1) * (S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)))"
                                                          ".sum(dim=-2) / (fq * (z + fk)).sum(dim=-1, keepdim=True)"),)},
        expect={"test_step_matches_causal": "the current token is counted twice"},
    ),
    Variant(
        "step_reads_before_adding",
        "the step reads out_t from the old sums, before the current token is added",
        edits={"causal_linear_attention_step": ((UPDATE + f"    {READOUT}", f"    {READOUT}\n" + UPDATE.rstrip("\n")),)},
        expect={"test_step_matches_causal": "to z first, then read out_t"},
    ),
    Variant(
        "step_updates_state_in_place",
        "the step adds to S and z in place, changing the state it was given",
        edits={"causal_linear_attention_step": (("S = S + fk", "S += fk"), ("z = z + fk", "z += fk"))},
        expect={"test_step_keeps_state": "changed the (S, z) it was given"},
    ),
    Variant(
        "step_state_keeps_history",
        "the 'state' stores every past phi(k) and v (a growing cache), not the running sums",
        replace={"causal_linear_attention_step": '''def causal_linear_attention_step(state, q_t, k_t, v_t):
    keys, values = phi(k_t).unsqueeze(-2), v_t.unsqueeze(-2)
    if state is not None:
        keys, values = torch.cat([state[0], keys], dim=-2), torch.cat([state[1], values], dim=-2)
    w = (phi(q_t).unsqueeze(-2) * keys).sum(-1, keepdim=True)
    return (w * values).sum(-2) / w.sum(-2), (keys, values)
'''},
        expect={"test_step_state": "constant memory per token"},
    ),
    # ---------------------------------------------------------------- Part D
    Variant(
        "kv_cache_stale_values",
        "the step appends the new key to the cache but hands back the old, stale value cache",
        edits={"cached_attention_step": ((RETURN_CACHE, RETURN_CACHE.replace("(k, v)", "(k, v if cache is None else cache[1])")),)},
        expect={"test_kv_cache_shapes": "append the new value along dim 2, like K"},
    ),
    Variant(
        "kv_cache_values_recomputed_from_new_token",
        "the cache appends keys, but the values are recomputed from the new token for every position",
        edits={"cached_attention_step": (("v = torch.cat([cache[1], v], dim=2)", "v = v.expand(-1, -1, k.shape[2], -1)"),)},
        expect={"test_kv_cache_matches_full": "append the new token's key AND value",
                "test_greedy_cached_equals_full": "chose a different token"},
    ),
    Variant(
        "kv_cache_is_causal_one_query",
        "the cached step passes is_causal=True, so the one new query sees only the first key",
        edits={"cached_attention_step": ((SDPA, "F.scaled_dot_product_attention(q, k, v, is_causal=True)"),)},
        expect={"test_kv_cache_matches_full": "is_causal=True with one query",
                "test_greedy_cached_equals_full": "chose a different token"},
    ),
    Variant(
        "kv_cache_never_grows",
        "the step attends over the cache plus the new token but returns only the new key and value",
        edits={"cached_attention_step": ((RETURN_CACHE, RETURN_CACHE.replace("(k, v)", "(k[:, :, -1:], v[:, :, -1:])")),)},
        expect={"test_kv_cache_shapes": "append the new key along dim 2"},
    ),
    # ---------------------------------------------------------------- Part E
    Variant(
        "quiz_all_wrong",
        "every quiz answer is a plausible wrong option",
        replace={"quiz": 'Q1 = "b"\nQ2 = "a"\nQ3 = "a"\nQ4 = "a"\n'},
        expect={"test_quiz_q1": "re-read 'Images: the stride decides'",
                "test_quiz_q2": "re-read 'Why softmax needs the whole L x L matrix'",
                "test_quiz_q3": "re-read the introduction of Part D",
                "test_quiz_q4": "re-read 'Padding pays L² too"},
    ),
    Variant(
        "predict_weights_memory_wrong",
        "predicts one head's weights only",
        replace={"predict_weights_memory": "PREDICTED_MIB = 64.0\n"},
        expect={"test_predict_weights_memory": "one head's matrix"},
    ),
    Variant(
        "predict_weights_memory_in_mb",
        "predicts the memory in MB (536.9, 10^6 bytes) instead of MiB (2^20 bytes)",
        replace={"predict_weights_memory": "PREDICTED_MIB = 8 * 4096 * 4096 * 4 / 1e6\n"},
        expect={"test_predict_weights_memory": "that is in MB"},
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "phi_elu_in_place",
        "phi calls F.elu(x, inplace=True), overwriting the queries and keys it is given",
        edits={"phi": (("return 1 + F.elu(x)", "return 1 + F.elu(x, inplace=True)"),)},
        expect={"test_phi": "phi changed the x it was given"}, only=True,
    ),
    Variant(
        "cache_scale_sqrt_d_model",
        "the cached step passes scale=D ** -0.5 to SDPA: the square root of the model width instead of d_head",
        edits={"cached_attention_step": (("y = F.scaled_dot_product_attention(q, k, v)",
                                          "y = F.scaled_dot_product_attention(q, k, v, scale=D ** -0.5)"),)},
        expect={"test_kv_cache_matches_full": "its scores scaled by 1/sqrt(d_head) as in the block"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "step_z_starts_at_ones",
        "the first step starts the normaliser z at torch.ones_like(fk) instead of zeros",
        edits={"causal_linear_attention_step": (("z = torch.zeros_like(fk)", "z = torch.ones_like(fk)"),)},
        expect={"test_step_state": "z starts at ones", "test_step_matches_causal": "z starts at ones"},
    ),
]

ALTERNATIVES = [
    Variant(
        "cost_mix_equals_score",
        "attention_cost reuses the score count for the mixing product and sums the total with sum()",
        edits={"attention_cost": (("mix_flops = 2 * B * L * L * d", "mix_flops = score_flops"),
                                  ('"total_flops": score_flops + mix_flops + projection_flops',
                                   '"total_flops": sum((score_flops, mix_flops, projection_flops))'))},
    ),
    Variant(
        "phi_where_and_einsum",
        "phi as torch.where(x > 0, x + 1, exp(x)); linear attention and the step written with einsum",
        edits={"phi": (("return 1 + F.elu(x)", "return torch.where(x > 0, x + 1, torch.exp(x))"),),
               "linear_attention": (("numerator = (fq.unsqueeze(-1) * S).sum(dim=-2)",
                                     'numerator = torch.einsum("...ld,...lde->...le", fq, S)'),
                                    ("S = fk.transpose(-1, -2) @ v", 'S = torch.einsum("...ld,...le->...de", fk, v)')),
               "causal_linear_attention_step": (("torch.zeros(*fk.shape, v_t.shape[-1], dtype=v_t.dtype, device=v_t.device)",
                                                 "v_t.new_zeros(*fk.shape, v_t.shape[-1])"),
                                                ("S = S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)",
                                                 'S = S + torch.einsum("...d,...e->...de", fk, v_t)'))},
    ),
    Variant(
        "cache_with_explicit_softmax",
        "the cached step computes softmax(q k^T / sqrt(d_head)) v by hand instead of calling SDPA",
        edits={"cached_attention_step": ((SDPA, "torch.softmax(q @ k.transpose(-2, -1) / block.d_head ** 0.5, dim=-1) @ v"),)},
    ),
    Variant(
        "quiz_capitals_and_spaces",
        "the right letters typed in capitals with spaces around them",
        edits={"quiz": (('Q1 = "a"', 'Q1 = " A "'), ('Q3 = "b"', 'Q3 = "B"'))},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'step_outer_product_transposed',
        'the step adds v_t phi(k_t)^T, a (d_v, d) outer product, to S instead of phi(k_t) v_t^T',
        edits={'causal_linear_attention_step': (('S = S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)', 'S = S + fk.unsqueeze(-2) * v_t.unsqueeze(-1)'),)},
        expect={'test_step_state': 'phi(k_t) as a column, unsqueeze(-1)'},
    ),
]
