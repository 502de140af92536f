"""Wrong answers to chapter 08 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "08_attention_cost"


def _cost(score: str, bytes_: str = "4 * B * H * L * L") -> str:
    return f'''def attention_cost(B, L, d, H):
    score_flops = {score}
    projection_flops = 8 * B * L * d * d
    return {{"score_flops": score_flops, "mix_flops": score_flops, "projection_flops": projection_flops,
            "total_flops": 2 * score_flops + projection_flops, "score_bytes": {bytes_}}}
'''


def _linear(causal_sums: str, readout: str = "numerator / denominator") -> str:
    return f'''def linear_attention(q, k, v, causal=False):
    fq, fk = phi(q), phi(k)
    if causal:
        S = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)
        z = torch.cumsum(fk, dim=-2)
{causal_sums}
        numerator = (fq.unsqueeze(-1) * S).sum(dim=-2)
    else:
        S = fk.transpose(-1, -2) @ v
        z = fk.sum(dim=-2, keepdim=True)
        numerator = fq @ S
    denominator = (fq * z).sum(dim=-1, keepdim=True)
    return {readout}
'''


def _step(update_and_readout: str) -> str:
    return f'''def causal_linear_attention_step(state, q_t, k_t, v_t):
    fq, fk = phi(q_t), phi(k_t)
    if state is None:
        S = torch.zeros(*fk.shape, v_t.shape[-1], dtype=v_t.dtype)
        z = torch.zeros_like(fk)
    else:
        S, z = state
{update_and_readout}
'''


def _kv(cache_update: str, attend: str = "F.scaled_dot_product_attention(q, k, v)") -> str:
    return f'''def cached_attention_step(block, x_new, cache=None):
    B, _, D = x_new.shape
    q, k, v = (t.view(B, 1, block.n_heads, block.d_head).transpose(1, 2) for t in block.qkv(x_new).split(D, dim=-1))
{cache_update}
    y = {attend}
    return block.proj(y.transpose(1, 2).reshape(B, 1, D)), (k, v)
'''


GOOD_CACHE_UPDATE = '''    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)
        v = torch.cat([cache[1], v], dim=2)'''

VARIANTS = [
    # ---------------------------------------------------------------- Part A
    Variant(
        "cost_score_linear_in_L",
        "the score and mixing FLOPs are counted as linear in L (2 B L d)",
        {"attention_cost": _cost("2 * B * L * d")},
        {"test_cost_values": "the score part is counted as linear in L",
         "test_cost_scaling": "score_flops grew 2x when L doubled, expected 4x"},
    ),
    Variant(
        "cost_bytes_without_heads",
        "the stored scores are counted once, not once per head",
        {"attention_cost": _cost("2 * B * L * L * d", bytes_="4 * B * L * L")},
        {"test_cost_values": "the heads are not counted",
         "test_cost_scaling": "score_bytes grew 1x when the heads doubled"},
    ),
    # ---------------------------------------------------------------- Part B
    Variant(
        "phi_elu_negative",
        "the feature map is ELU(x) without the 1 +, so features (and weights) can be negative",
        {"phi": "def phi(x):\n    return F.elu(x)\n"},
        {"test_phi": "features must be positive",
         "test_linear_attention_matches": "phi(x) = ELU(x), without the 1 +"},
    ),
    Variant(
        "quadratic_unnormalised",
        "the quadratic form mixes the values with phi(q).phi(k) without dividing each row by its sum",
        {"linear_attention_quadratic": '''def linear_attention_quadratic(q, k, v, causal=False):
    scores = phi(q) @ phi(k).transpose(-1, -2)
    if causal:
        scores = scores.tril()
    return scores @ v
'''},
        {"test_linear_attention_quadratic": "after dividing each row by its sum"},
    ),
    Variant(
        "quadratic_mask_keeps_future",
        "the causal mask of the quadratic form keeps the upper triangle (future keys)",
        {"linear_attention_quadratic": '''def linear_attention_quadratic(q, k, v, causal=False):
    scores = phi(q) @ phi(k).transpose(-1, -2)
    if causal:
        scores = scores.triu()
    return (scores / scores.sum(dim=-1, keepdim=True)) @ v
'''},
        {"test_linear_attention_quadratic": "token 0 sees only key 0"},
    ),
    Variant(
        "linear_missing_normaliser",
        "linear attention returns phi(q)^T S without dividing by phi(q) . z",
        {"linear_attention": _linear("", readout="numerator")},
        {"test_linear_attention_matches": "the normaliser z is missing"},
    ),
    Variant(
        "causal_sums_include_next_token",
        "the causal running sums are shifted by one, so token i also sees token i + 1",
        {"linear_attention": _linear('''        S = torch.cat([S[..., 1:, :, :], S[..., -1:, :, :]], dim=-3)
        z = torch.cat([z[..., 1:, :], z[..., -1:, :]], dim=-2)''')},
        {"test_linear_attention_causal": "include token i + 1, a future token"},
    ),
    Variant(
        "linear_builds_L_by_L",
        "linear_attention calls the quadratic form: right numbers, but an L x L matrix",
        {"linear_attention": '''def linear_attention(q, k, v, causal=False):
    return linear_attention_quadratic(q, k, v, causal)
'''},
        {"test_linear_attention_is_linear": "that is the L x L matrix the regrouping avoids"},
    ),
    # ---------------------------------------------------------------- Part C
    Variant(
        "step_counts_current_twice",
        "the step adds the current token to S and z, then adds it again when reading out",
        {"causal_linear_attention_step": _step('''    kv = fk.unsqueeze(-1) * v_t.unsqueeze(-2)
    S, z = S + kv, z + fk
    out = (fq.unsqueeze(-1) * (S + kv)).sum(dim=-2) / (fq * (z + fk)).sum(dim=-1, keepdim=True)
    return out, (S, z)''')},
        {"test_step_matches_causal": "the current token is counted twice"},
    ),
    Variant(
        "step_reads_before_adding",
        "the step reads out_t from the old sums, before the current token is added",
        {"causal_linear_attention_step": _step('''    out = (fq.unsqueeze(-1) * S).sum(dim=-2) / (fq * z).sum(dim=-1, keepdim=True)
    S = S + fk.unsqueeze(-1) * v_t.unsqueeze(-2)
    z = z + fk
    return out, (S, z)''')},
        {"test_step_matches_causal": "to z first, then read out_t"},
    ),
    Variant(
        "step_updates_state_in_place",
        "the step adds to S and z in place, changing the state it was given",
        {"causal_linear_attention_step": _step('''    S += fk.unsqueeze(-1) * v_t.unsqueeze(-2)
    z += fk
    out = (fq.unsqueeze(-1) * S).sum(dim=-2) / (fq * z).sum(dim=-1, keepdim=True)
    return out, (S, z)''')},
        {"test_step_keeps_state": "changed the (S, z) it was given"},
    ),
    Variant(
        "step_state_keeps_history",
        "the 'state' stores every past phi(k) and v (a growing cache), not the running sums",
        {"causal_linear_attention_step": '''def causal_linear_attention_step(state, q_t, k_t, v_t):
    keys, values = phi(k_t).unsqueeze(-2), v_t.unsqueeze(-2)
    if state is not None:
        keys, values = torch.cat([state[0], keys], dim=-2), torch.cat([state[1], values], dim=-2)
    w = (phi(q_t).unsqueeze(-2) * keys).sum(-1, keepdim=True)
    return (w * values).sum(-2) / w.sum(-2), (keys, values)
'''},
        {"test_step_state": "constant memory per token"},
    ),
    # ---------------------------------------------------------------- Part D
    Variant(
        "kv_cache_stale_values",
        "the step appends the new key to the cache but hands back the old, stale value cache",
        {"cached_attention_step": '''def cached_attention_step(block, x_new, cache=None):
    B, _, D = x_new.shape
    q, k, v = (t.view(B, 1, block.n_heads, block.d_head).transpose(1, 2) for t in block.qkv(x_new).split(D, dim=-1))
    keys = k if cache is None else torch.cat([cache[0], k], dim=2)
    values = v if cache is None else torch.cat([cache[1], v], dim=2)
    y = F.scaled_dot_product_attention(q, keys, values)
    return block.proj(y.transpose(1, 2).reshape(B, 1, D)), (keys, v if cache is None else cache[1])
'''},
        {"test_kv_cache_shapes": "append the new value along dim 2, like K"},
    ),
    Variant(
        "kv_cache_values_recomputed_from_new_token",
        "the cache appends keys, but the values are recomputed from the new token for every position",
        {"cached_attention_step": _kv('''    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)
        v = v.expand(-1, -1, k.shape[2], -1)''')},
        {"test_kv_cache_matches_full": "append the new token's key AND value",
         "test_greedy_cached_equals_full": "chose a different token"},
    ),
    Variant(
        "kv_cache_is_causal_one_query",
        "the cached step passes is_causal=True, so the one new query sees only the first key",
        {"cached_attention_step": _kv(GOOD_CACHE_UPDATE,
                                      attend="F.scaled_dot_product_attention(q, k, v, is_causal=True)")},
        {"test_kv_cache_matches_full": "is_causal=True with one query",
         "test_greedy_cached_equals_full": "chose a different token"},
    ),
    Variant(
        "kv_cache_never_grows",
        "the step attends over the cache plus the new token but returns only the new key and value",
        {"cached_attention_step": '''def cached_attention_step(block, x_new, cache=None):
    B, _, D = x_new.shape
    q, k, v = (t.view(B, 1, block.n_heads, block.d_head).transpose(1, 2) for t in block.qkv(x_new).split(D, dim=-1))
    keys, values = (k, v) if cache is None else (torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2))
    y = F.scaled_dot_product_attention(q, keys, values)
    return block.proj(y.transpose(1, 2).reshape(B, 1, D)), (k, v)
'''},
        {"test_kv_cache_shapes": "append the new key along dim 2"},
    ),
    # ---------------------------------------------------------------- Part E
    Variant(
        "quiz_all_wrong",
        "every quiz answer is a plausible wrong option",
        {"quiz": 'Q1 = "b"\nQ2 = "a"\nQ3 = "b"\nQ4 = "b"\n'},
        {"test_quiz_q1": "re-read 'Images: the stride decides'",
         "test_quiz_q2": "re-read 'Why softmax needs the whole L x L matrix'",
         "test_quiz_q3": "re-read the introduction of Part D",
         "test_quiz_q4": "re-read 'Padding pays L² too"},
    ),
]
