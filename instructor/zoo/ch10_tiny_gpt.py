"""Wrong answers to chapter 10 that the graded tests must catch, each with its message, and correct answers
written differently that keep full marks.

Every variant is the current solution with one change (see ``instructor/zoo/__init__.py``).
"""

from instructor.zoo import Variant, crossing

ASSIGNMENT = "10_tiny_gpt"

STARTS = "torch.randint(len(ids) - block_size, (batch_size,), generator=generator)"
ATTEND = "x = x + self.attention(self.norm1(x))  # (B, T, D)"
FEED = "return x + self.ffn(self.norm2(x))  # (B, T, D)"
EMBED = "x = self.token_embedding(idx) + self.position_embedding(torch.arange(T))  # (B, T, D)"
TOP_K = "kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (B, 1)"
KEEP_TIES = 'logits = logits.masked_fill(logits < kth, float("-inf"))  # ties with the k-th survive'
NUCLEUS = "before >= top_p"
CACHE_K = "k = torch.cat([caches[index][0], k], dim=2)"
CACHE_V = "v = torch.cat([caches[index][1], v], dim=2)"

TOP_P_FIRST = '''def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    logits = logits / temperature
    if top_p is not None:
        probs = logits.softmax(dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before >= top_p)
        logits = logits.masked_fill(drop, float("-inf"))
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return logits.softmax(dim=-1)


def sample_next(probs, generator):
    return torch.multinomial(probs, 1, generator=generator)
'''

NUCLEUS_FIRST = '''def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        probs = logits.softmax(dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before >= top_p)
        logits = logits.masked_fill(drop, float("-inf"))
    return (logits / temperature).softmax(dim=-1)


def sample_next(probs, generator):
    return torch.multinomial(probs, 1, generator=generator)
'''

VARIANTS = [
    Variant(
        "targets_not_shifted",
        "the targets are the input windows themselves, not shifted by one character",
        edits={"lm_batch": (("return windows[:, :-1], windows[:, 1:]", "return windows[:, :-1], windows[:, :-1]"),)},
        expect={"test_lm_batch_targets": "the targets are the inputs themselves"},
    ),
    Variant(  # issue 54, third hunt
        "batch_inputs_targets_swapped",
        "lm_batch returns (targets, inputs): the windows' tails as inputs and their heads as targets",
        edits={"lm_batch": (("return windows[:, :-1], windows[:, 1:]", "return windows[:, 1:], windows[:, :-1]"),)},
        expect={"test_lm_batch_targets": "lm_batch returns the targets first and the inputs second",
                "test_lm_batch_starts": "lm_batch returns the targets first and the inputs second"},
        only=True,
    ),
    Variant(
        "batch_global_rng",
        "the window starts are drawn from the global random state instead of the generator given",
        edits={"lm_batch": ((STARTS, "torch.randint(len(ids) - block_size, (batch_size,))"),)},
        expect={"test_lm_batch_starts": "do not start where the generator you were given says"},
    ),
    Variant(
        "attention_not_causal",
        "the attention never applies its causal mask: every position reads the future",
        edits={"attention": (('        scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))\n', ""),)},
        expect={"test_attention_parts": "put weight on future positions",
                "test_attention_matches_sdpa": "the causal mask is not applied"},
        only=True,
    ),
    Variant(
        "attention_unscaled",
        "the scores are not divided by sqrt(d_head)",
        edits={"attention": ((" / math.sqrt(self.d_head)  # (B, H, T, T)", "  # (B, H, T, T)"),)},
        expect={"test_attention_matches_sdpa": "not divided by sqrt(d_head)"},
        only=True,
    ),
    Variant(
        "attention_no_proj",
        "the heads are merged but the output projection proj is never applied",
        edits={"attention": (("out = self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))",
                              "out = (weights @ v).transpose(1, 2).reshape(B, T, D)"),)},
        expect={"test_attention_matches_sdpa": "the output projection proj is not applied"},
        only=True,
    ),
    Variant(
        "attention_heads_without_transpose",
        "q, k and v are viewed as (B, H, T, d) straight from (B, T, D), and merged back the same way",
        edits={"attention": (("t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)",
                              "t.reshape(B, self.n_heads, T, self.d_head)"),
                             ("out = self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))",
                              "out = self.proj((weights @ v).reshape(B, T, D))"))},
        expect={"test_attention_matches_sdpa": "view them as (B, T, H, d), then transpose(1, 2)"},
        only=True,
    ),
    Variant(
        "ffn_no_relu",
        "the feed-forward layer has no ReLU between its two linear layers",
        edits={"ffn": (("return self.linear2(torch.relu(self.linear1(x)))", "return self.linear2(self.linear1(x))"),)},
        expect={"test_ffn": "the ReLU is missing"},
        only=True,
    ),
    Variant(
        "block_post_norm",
        "the block normalises after each sublayer (post-norm) instead of before it",
        edits={"block": ((ATTEND, "x = self.norm1(x + self.attention(x))  # (B, T, D)"),
                         (FEED, "return self.norm2(x + self.ffn(x))  # (B, T, D)"))},
        expect={"test_block_matches_pytorch": "post-norm"},
        only=True,
    ),
    Variant(
        "block_ffn_reads_input",
        "the FFN sublayer reads the block's input x instead of the stream after the attention",
        edits={"block": ((ATTEND, "h = x + self.attention(self.norm1(x))  # (B, T, D)"),
                         (FEED, "return h + self.ffn(self.norm2(x))  # (B, T, D)"))},
        expect={"test_block_matches_pytorch": "the FFN reads norm2(x) of the block's input"},
        only=True,
    ),
    Variant(
        "block_ffn_too_narrow",
        "the FFN's hidden layer is 2 * width instead of 4 * width",
        edits={"block": (("FeedForward(width, 4 * width)", "FeedForward(width, 2 * width)"),)},
        expect={"test_block_parts": "ffn.linear1.weight has shape"},
    ),
    Variant(
        "gpt_no_positions",
        "the model never adds the position embeddings",
        edits={"gpt": ((EMBED, "x = self.token_embedding(idx)  # (B, T, D)"),)},
        expect={"test_gpt_logits": "the position embeddings are not added"},
        only=True,
    ),
    Variant(
        "gpt_no_final_norm",
        "the head reads the last block's output without the final norm",
        edits={"gpt": (("logits = self.head(self.norm(x))  # (B, T, vocab)", "logits = self.head(x)  # (B, T, vocab)"),)},
        expect={"test_gpt_logits": "the final norm is missing"},
        only=True,
    ),
    Variant(
        "loss_summed",
        "the loss is the sum of the cross-entropies of all positions instead of their mean",
        edits={"gpt": (("targets.reshape(B * T))", 'targets.reshape(B * T), reduction="sum")'),)},
        expect={"test_gpt_loss": "summed over the positions"},
        only=True,
    ),
    Variant(
        "loss_shifts_again",
        "forward shifts the targets again, scoring logits[:, :-1] against targets[:, 1:]",
        edits={"gpt": (("return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))",
                        "return logits, F.cross_entropy(logits[:, :-1].reshape(B * (T - 1), -1), "
                        "targets[:, 1:].reshape(B * (T - 1)))"),)},
        expect={"test_gpt_loss": "the targets are shifted again inside forward"},
        only=True,
    ),
    Variant(
        "step_no_clip",
        "train_step never clips the gradients",
        edits={"train_step": (("    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n", ""),)},
        expect={"test_train_step": "the gradients are not clipped"},
        only=True,
    ),
    Variant(
        "step_no_zero_grad",
        "train_step never clears the gradients, so each step adds to the last one's",
        edits={"train_step": (("    optimizer.zero_grad()\n", ""),)},
        expect={"test_train_step": "the gradients are never cleared"},
        only=True,
    ),
    Variant(
        "step_no_schedule",
        "train_step never steps the learning-rate schedule",
        edits={"train_step": (("    scheduler.step()\n", ""),)},
        expect={"test_train_step": "the schedule is never stepped"},
        only=True,
    ),
    Variant(
        "step_schedule_first",
        "train_step steps the schedule before the optimiser",
        edits={"train_step": (("    optimizer.step()\n    scheduler.step()\n", "    scheduler.step()\n    optimizer.step()\n"),)},
        expect={"test_train_step": "the schedule is stepped before the optimiser"},
        only=True,
    ),
    Variant(
        "step_returns_tensor",
        "train_step returns the loss tensor instead of a Python float",
        edits={"train_step": (("return loss.item()", "return loss"),)},
        expect={"test_train_step": "return the loss as a Python float"},
        only=True,
    ),
    Variant(
        "temperature_after_softmax",
        "the probabilities are divided by the temperature after the softmax instead of the logits before it",
        edits={"sampling": (("logits = logits / temperature  # (B, V)", "logits = logits  # (B, V)"),
                            ("probs = logits.softmax(dim=-1)  # (B, V)", "probs = logits.softmax(dim=-1) / temperature  # (B, V)"))},
        expect={"test_probs_temperature": "the temperature divides the logits, then softmax"},
    ),
    Variant(
        "top_k_keeps_k_plus_one",
        "top-k keeps the k + 1 largest logits",
        edits={"sampling": ((TOP_K, "kth = torch.topk(logits, min(top_k + 1, logits.shape[-1]), dim=-1).values[..., -1:]"),)},
        expect={"test_probs_top_k": "3 characters keep a probability"},
    ),
    Variant(
        "top_k_drops_ties",
        "top-k keeps exactly k characters (the indices of torch.topk), dropping those tied with the k-th",
        edits={"sampling": ((KEEP_TIES, "logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).scatter("
                                        "-1, torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).indices, False), "
                                        'float("-inf"))'),)},
        expect={"test_probs_top_k": "a character tied with the k-th is kept too"},
    ),
    Variant(
        "top_k_beyond_vocabulary_fails",
        "top-k calls torch.topk with k above the vocabulary size, which raises",
        edits={"sampling": ((TOP_K, "kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]"),)},
        expect={"test_probs_top_k": "with top_k at or above the vocabulary size every character is kept"},
    ),
    Variant(
        "nucleus_drops_crossing_token",
        "top-p keeps only the characters whose running total stays within p, dropping the one that crosses p",
        edits={"sampling": ((NUCLEUS, "cumulative > top_p"),)},
        expect={"test_probs_top_p": "the character that crosses p is dropped"},
    ),
    Variant(
        "nucleus_drops_exact_p",
        "top-p drops the character whose running total reaches p exactly",
        edits={"sampling": ((NUCLEUS, "cumulative >= top_p"),)},
        expect={"test_probs_top_p": "the character that crosses p is dropped"},
    ),
    Variant(
        "sample_global_rng",
        "sample_next draws with the global random state instead of the generator given",
        edits={"sampling": (("return torch.multinomial(probs, 1, generator=generator)", "return torch.multinomial(probs, 1)"),)},
        expect={"test_sample_next": "does not draw what the generator it is given draws"},
    ),
    Variant(
        "sample_argmax",
        "sample_next returns the most probable character of each row (greedy) instead of a draw",
        edits={"sampling": (("return torch.multinomial(probs, 1, generator=generator)",
                             "return probs.argmax(dim=-1, keepdim=True)"),)},
        expect={"test_sample_next": "an argmax"},
    ),
    Variant(
        "nucleus_mask_sorted_order",
        "top-p computes its mask in sorted order and applies it to the probabilities in the vocabulary's order",
        edits={"sampling": (("drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before >= top_p)",
                             "drop = before >= top_p"),)},
        expect={"test_probs_top_p": "the top-p mask is applied in sorted order"},
    ),
    Variant(
        "top_p_before_top_k",
        "top-p is applied to the softmax of all the logits, before top-k removes any",
        replace={"sampling": TOP_P_FIRST},
        expect={"test_probs_combined": "top-p is applied before top-k"},
    ),
    Variant(
        "nucleus_before_temperature",
        "top-k and the nucleus are chosen on the raw logits, and the temperature divides what is left",
        replace={"sampling": NUCLEUS_FIRST},
        expect={"test_probs_combined": "the nucleus is chosen before the temperature"},
    ),
    Variant(
        "cache_positions_restart",
        "every cached step embeds its character at position 0",
        edits={"cached_step": (("model.position_embedding(torch.tensor([start]))", "model.position_embedding(torch.tensor([0]))"),)},
        expect={"test_cached_step": "embedded at position 0"},
    ),
    Variant(
        "cache_wrong_axis",
        "the cache grows along the heads axis (dim 1) instead of the positions axis (dim 2)",
        edits={"cached_step": ((CACHE_K, "k = torch.cat([caches[index][0], k], dim=1)"),
                               (CACHE_V, "v = torch.cat([caches[index][1], v], dim=1)"))},
        expect={"test_cached_step": "along dim 2"},
    ),
    Variant(
        "cache_holds_token_ids",
        "cached_step keeps the token ids in K (V unused) and runs the whole model on the text it reads back: the "
        "logits of a step from its own caches are right, but its caches hold no keys and values and it cannot "
        "continue a cache it did not make",
        replace={"cached_step": '''def cached_step(model, token, caches=None):
    B, H, d = token.shape[0], model.blocks[0].attention.n_heads, model.blocks[0].attention.d_head
    text = token if caches is None else torch.cat([caches[0][0][:, 0, :, 0].round().long(), token], dim=1)
    stored = text[:, None, :, None].expand(B, H, text.shape[1], d).to(model.head.weight.dtype)
    logits = model(text)[0][:, -1]  # the full forward on the text read back from K
    return logits, [(stored, torch.zeros_like(stored)) for _ in model.blocks]
'''},
        expect={"test_cached_step": "the cached K of block 0 after 1 characters"},
    ),
    Variant(
        "cache_pairs_v_then_k",
        "cached_step keeps each block's pair as (V, K), not (K, V): its own steps read it back consistently, so its "
        "logits and generate's text stay right, but the caches it returns are not what a (K, V) cache holds",
        edits={"cached_step": ((CACHE_K, "k = torch.cat([caches[index][1], k], dim=2)"),
                               (CACHE_V, "v = torch.cat([caches[index][0], v], dim=2)"),
                               ("new_caches.append((k, v))", "new_caches.append((v, k))"))},
        expect={"test_cached_step": "cached K"},
        only=True,
    ),
    Variant(
        "cache_causal_one_query",
        "the cached step gives its one new query is_causal=True, which with many keys keeps only the first",
        edits={"cached_step": (("y = F.scaled_dot_product_attention(q, k, v)", "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)"),)},
        expect={"test_cached_step": "is_causal=True"},
    ),
    Variant(
        "generate_first_position_logits",
        "generate without the cache draws from the logits of the first position instead of the last",
        edits={"generate": (("logits = model(idx[:, -context:])[0][:, -1]  # (B, vocab)",
                             "logits = model(idx[:, -context:])[0][:, 0]  # (B, vocab)"),)},
        expect={"test_generate": "writes other characters"},
        only=True,
    ),
    Variant(
        "generate_no_window",
        "generate without the cache feeds the whole text, never cut to the context, so it fails past max_len",
        edits={"generate": (("logits = model(idx[:, -context:])[0][:, -1]  # (B, vocab)",
                             "logits = model(idx)[0][:, -1]  # (B, vocab)"),)},
        expect={"test_generate": "use_cache=False"},
        only=True,
    ),
    Variant(
        "generate_cache_skips_prompt",
        "generate with the cache feeds only the prompt's last character to cached_step, not the whole prompt",
        edits={"generate": (("for t in range(idx.shape[1]):", "for t in range(idx.shape[1] - 1, idx.shape[1]):"),)},
        expect={"test_generate": "with the cache, the prompt through cached_step first"},
        only=True,
    ),
    Variant(
        "quiz_wrong",
        "both quiz answers are wrong",
        edits={"quiz": (('Q1, Q2, Q3 = "c", "a", "d"', 'Q1, Q2, Q3 = "d", "c", "a"'),)},
        expect={"test_quiz_q1": "Q1 is not right: (d)", "test_quiz_q2": "Q2 is not right: (c)",
                "test_quiz_q3": "Q3 is not right: (a)"},
        only=True,
    ),
    Variant(
        "predict_initial_loss_in_bits",
        "predicts the uniform guess's loss in bits, log2 of the vocabulary, where the loss is in nats",
        replace={"predict_initial_loss": "PREDICTED_INITIAL_LOSS = 6.585\n"},
        expect={"test_predict_initial_loss": "that is in bits"},
    ),
    Variant(
        "predict_initial_loss_vocabulary",
        "predicts the size of the vocabulary instead of the loss of a uniform guess over it",
        replace={"predict_initial_loss": "PREDICTED_INITIAL_LOSS = 96\n"},
        expect={"test_predict_initial_loss": "that is the number of characters the model chooses among"},
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "loss_not_flattened",
        "forward hands the (B, T, vocab) logits and (B, T) targets to F.cross_entropy unflattened (axis 1, the "
        "positions, then reads as the classes)",
        edits={"gpt": (("F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))",
                        "F.cross_entropy(logits, targets)"),)},
        expect={"test_gpt_loss": "flatten the logits to (B * T, vocab) and the targets to (B * T,)"}, only=True,
    ),
    Variant(
        "cache_position_from_heads_axis",
        "cached_step reads the number of cached characters from dim 1 of K (the heads), not dim 2: the new character "
        "is embedded at position n_heads",
        edits={"cached_step": (("start = 0 if caches is None else caches[0][0].shape[2]",
                                "start = 0 if caches is None else caches[0][0].shape[1]"),)},
        expect={"test_cached_step": "not K.shape[1]"},
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now naming itself (two still cross, below)
    Variant(
        "attention_mask_polarity",
        "the attention fills the allowed pairs with -inf: masked_fill(self.mask[:T, :T], ...) without the ~",
        edits={"attention": (('scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))',
                              'scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))'),)},
        expect={"test_attention_parts": "masked_fill fills where its mask is True",
                "test_block_matches_pytorch": "attention gives NaN or infinite values"},
    ),
    Variant(
        "positions_one_based",
        "the model numbers positions from 1: position_embedding(torch.arange(1, T + 1))",
        edits={"gpt": (("self.position_embedding(torch.arange(T))", "self.position_embedding(torch.arange(1, T + 1))"),)},
        expect={"test_gpt_logits": "the positions of T characters are 0 to T - 1",
                "test_gpt_loss": "the positions of T characters are 0 to T - 1"},
    ),
]

# one mistake, one loss: what still costs another part, and why (tests/test_chapters.py checks that each still does;
# measured 2026-12-07: these 8 of the chapter's 77 variants, every other one loses its own part only)
_GENERATE_RUNS_YOUR_SAMPLER = (
    "generate draws with the student's own next_token_probs and sample_next, as the exercise asks, and its text "
    "cannot tell a knob generate drops from one the sampler ignores; judging generate around the student's sampler "
    "would mean calling it again, and a generate and a sampler that keep state between calls could then agree on any "
    "text (the same holds for the cached step, whose mistakes cost generate's test too, within Part G)")
_BUILT_ON_A_NAN_ATTENTION = (
    "the block's and the model's tests judge them around the student's own attention, refused when it gives NaN (the "
    "message says so); judging them past it would need a reference attention inside the student's block, a stand-in "
    "the grader does not build yet, and generate runs the student's model as the exercise asks")
_GENERATE_RUNS_YOUR_MODEL = ("generate runs the student's own GPT, as the exercise asks: a model that cannot read "
                             "position T - 1 fails there too")
CROSSES = {
    "attention_mask_polarity": _BUILT_ON_A_NAN_ATTENTION,
    "positions_one_based": _GENERATE_RUNS_YOUR_MODEL,
    **{name: _GENERATE_RUNS_YOUR_SAMPLER for name in (
        "temperature_after_softmax", "nucleus_drops_crossing_token", "nucleus_drops_exact_p", "sample_global_rng",
        "sample_argmax", "nucleus_mask_sorted_order")},
}
VARIANTS = crossing(VARIANTS, CROSSES)

ALTERNATIVES = [
    Variant(
        "model_in_float64",
        "GPT keeps every parameter in float64 (self.double() at the end of __init__): the text names no dtype "
        "for a model of token ids, so the tests compare it in its own dtype (issue 43 item 7)",
        edits={"gpt": (('        self.head = nn.Linear(width, vocab)\n', '        self.head = nn.Linear(width, vocab)\n        self.double()\n'),)},
    ),
    Variant(
        "batch_by_indexing",
        "lm_batch cuts all windows at once with an index matrix",
        replace={"lm_batch": '''def lm_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    index = starts[:, None] + torch.arange(block_size)[None, :]  # (B, T)
    return ids[index], ids[index + 1]
'''},
    ),
    Variant(
        "block_other_order",
        "Block creates its submodules in another order and keeps a helper list of its sublayers",
        replace={"block": '''class Block(nn.Module):
    def __init__(self, width, heads, max_len):
        super().__init__()
        self.ffn = FeedForward(width, 4 * width)
        self.norm2 = nn.LayerNorm(width)
        self.attention = MultiHeadSelfAttention(width, heads, max_len)
        self.norm1 = nn.LayerNorm(width)

    def forward(self, x):
        for norm, sublayer in ((self.norm1, self.attention), (self.norm2, self.ffn)):
            x = x + sublayer(norm(x))
        return x
'''},
    ),
    Variant(
        "sampling_by_sorting",
        "next_token_probs with a sort for top-k, a hand-written softmax and torch.where for top-p",
        replace={"sampling": '''def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    scaled = logits / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = scaled.sort(dim=-1, descending=True).values[..., top_k - 1:top_k]
        scaled = torch.where(scaled >= kth, scaled, torch.full_like(scaled, -math.inf))
    probs = torch.exp(scaled - scaled.max(dim=-1, keepdim=True).values)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p
        keep = torch.empty_like(keep_sorted).scatter_(-1, order, keep_sorted)
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample_next(probs, generator):
    return torch.multinomial(probs, num_samples=1, generator=generator)
'''},
    ),
    Variant(
        "cache_by_hand",
        "cached_step writes the attention by hand and counts positions with torch.arange",
        replace={"cached_step": '''def cached_step(model, token, caches=None):
    B = token.shape[0]
    caches = caches or [None] * len(model.blocks)
    start = 0 if caches[0] is None else caches[0][0].shape[-2]
    x = model.token_embedding(token) + model.position_embedding(torch.arange(start, start + 1))
    grown = []
    for block, cache in zip(model.blocks, caches):
        a = block.attention
        q, k, v = a.qkv(block.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, 1, a.n_heads, -1).permute(0, 2, 1, 3) for t in (q, k, v))
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        x = x + a.proj((weights @ v).permute(0, 2, 1, 3).reshape(B, 1, -1))
        x = x + block.ffn(block.norm2(x))
        grown.append((k, v))
    return model.head(model.norm(x[:, -1])), grown
'''},
    ),
    Variant(
        "attention_with_sdpa",
        "the attention lets F.scaled_dot_product_attention do the weighted sum, computing the weights only when asked",
        replace={"attention": '''class MultiHeadSelfAttention(nn.Module):
    def __init__(self, width, heads, max_len):
        super().__init__()
        self.n_heads, self.d_head = heads, width // heads
        self.proj = nn.Linear(width, width)
        self.qkv = nn.Linear(width, 3 * width)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        out = self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D))
        if not return_weights:
            return out
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.d_head ** 0.5
        return out, scores.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
'''},
    ),
    Variant(
        "ffn_sequential",
        "FeedForward keeps its layers as attributes and calls F.relu",
        replace={"ffn": '''class FeedForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.linear2 = nn.Linear(hidden, width)
        self.linear1 = nn.Linear(width, hidden)

    def forward(self, x):
        return self.linear2(F.relu(self.linear1(x)))
'''},
    ),
    Variant(
        "step_written_otherwise",
        "train_step clears the gradients first (set to zero, not None), clips with nn.utils and returns float(loss)",
        replace={"train_step": '''def train_step(model, optimizer, scheduler, inputs, targets, max_grad_norm):
    optimizer.zero_grad(set_to_none=False)
    logits, loss = model(inputs, targets)
    loss.backward()
    nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=max_grad_norm)
    optimizer.step()
    scheduler.step()
    return float(loss.detach())
'''},
    ),
    Variant(
        "generate_written_otherwise",
        "generate keeps a list of the new characters and decides per step whether the cache still fits",
        replace={"generate": '''@torch.no_grad()
def generate(model, prompt_ids, n_new, generator, temperature=1.0, top_k=None, top_p=None, use_cache=True):
    context = model.position_embedding.num_embeddings
    text, caches, logits = prompt_ids, None, None
    if use_cache and prompt_ids.shape[1] <= context:
        for t in range(prompt_ids.shape[1]):
            logits, caches = cached_step(model, prompt_ids[:, t:t + 1], caches)
    for _ in range(n_new):
        if caches is None or caches[0][0].shape[2] < text.shape[1]:
            caches = None
            logits = model(text[:, -context:])[0][:, -1]
        token = sample_next(next_token_probs(logits, temperature, top_k, top_p), generator)
        text = torch.cat([text, token], dim=1)
        if caches is not None and text.shape[1] <= context:
            logits, caches = cached_step(model, token, caches)
    return text
'''},
    ),
    Variant(
        "predict_initial_loss_ln_vocabulary",
        "predicts ln 96, the loss of exactly equal logits: right reasoning, a little below the measured start",
        replace={"predict_initial_loss": "PREDICTED_INITIAL_LOSS = float(np.log(96))\n"},
    ),
    Variant(
        "predict_initial_loss_spread",
        "predicts 4.85, reasoning that the random logits' spread raises the loss above ln 96",
        replace={"predict_initial_loss": "PREDICTED_INITIAL_LOSS = 4.85\n"},
    ),
    Variant(
        "quiz_capitals",
        "the quiz answers in capitals with spaces",
        edits={"quiz": (('Q1, Q2, Q3 = "c", "a", "d"', 'Q1, Q2, Q3 = " C", "A ", "d"'),)},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'loss_on_softmax',
        'forward hands the softmax probabilities to F.cross_entropy, which applies its own log-softmax: a softmax taken twice',
        edits={'gpt': (('F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))', 'F.cross_entropy(logits.softmax(dim=-1).reshape(B * T, -1), targets.reshape(B * T))'),)},
        expect={'test_gpt_loss': 'so the softmax is taken twice'},
    ),
]
