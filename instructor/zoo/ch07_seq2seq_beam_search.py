"""Chapter 07: wrong answers the graded tests must catch (each the solution with one change,
and the message it must show), and correct answers written differently that keep full marks.

Every student notebook of this chapter trains a small model, so the alternatives are few and
each changes several cells."""

from instructor.zoo import Variant, crossing

ASSIGNMENT = "07_seq2seq_beam_search"

CANDIDATE = "candidates = [(prefix + (token,), log_prob + math.log(p))"
SORT = "candidates.sort(key=lambda c: c[1], reverse=True)  # prune by the raw log-probability\n        kept = candidates[:width]"
KEEP = '''        finished += [c for c in kept if c[0][-1] == eos]
        beams = [c for c in kept if c[0][-1] != eos]
        if not beams:'''
FORWARD = "hidden = self.transformer(self.embed(src), self.embed(dec_in), tgt_mask=tgt_mask)"
SOFTMAX = "torch.softmax(logits.double(), dim=-1)"

VARIANTS = [
    # ------------------------------------------------------------ Part A: beam search
    Variant(
        "lp_without_eos",
        "the length penalty counts the returned tokens only, leaving out <EOS>",
        edits={"beam_search": (("length_penalty(len(prefix) - 1, alpha)",
                                "length_penalty(len([t for t in prefix[1:] if t != eos]), alpha)"),)},
        expect={"test_beam_toy": "|y| leaves out <eos>",
                "test_beam_length_penalty_final": "|y| leaves out <eos>"},
    ),
    Variant(
        "prune_by_normalised_score",
        "the beam is pruned by the normalised score: the running score is divided by lp at every step",
        edits={"beam_search": ((CANDIDATE, "candidates = [(prefix + (token,), "
                                           "(log_prob + math.log(p)) / length_penalty(len(prefix), alpha))"),
                               ("best = max(finished, key=score)", "best = max(finished, key=lambda c: c[1])"),
                               ("return tokens, best[1], score(best)", "return tokens, best[1], best[1]"))},
        expect={"test_beam_toy": "raw summed log-probability",
                "test_beam_length_penalty_final": "divide by lp only for the final choice"},
    ),
    Variant(
        "finished_kept_in_beam",
        "hypotheses that produced <EOS> stay in the beam and take places from those still growing",
        edits={"beam_search": (("for prefix, log_prob in beams\n", "for prefix, log_prob in beams if prefix[-1] != eos\n"),
                               (SORT, "candidates += [c for c in beams if c[0][-1] == eos]  # finished ones stay\n        "
                                      + SORT),
                               (KEEP, "        beams = kept\n        if all(c[0][-1] == eos for c in beams):"))},
        expect={"test_beam_finished_leave": "must leave the beam"},
    ),
    Variant(
        "beam_ignores_width",
        "beam_search keeps one candidate per step whatever the width: greedy decoding",
        edits={"beam_search": (("kept = candidates[:width]", "kept = candidates[:1]"),)},
        expect={"test_beam_toy": "raw summed log-probability",
                "test_beam_random_tables": "the best raw ln p among finished hypotheses wins"},
    ),
    Variant(  # issue 54, third hunt
        "exact_match_over_batch",
        "exact_match reduces with all(dim=0), over the batch, instead of over each row's positions",
        edits={"exact_match": (("(pred == target).all(dim=-1)", "(pred == target).all(dim=0)"),)},
        expect={"test_exact_match": "all() runs over the batch axis (dim=0)"},
        only=True,
    ),
    Variant(  # issue 54, third hunt: Part E judges beam_decode around the student's length_penalty, so only Part A pays
        "length_penalty_precedence",
        "the length penalty is (5 + n / 6) ** alpha: the division binds before the sum",
        edits={"length_penalty": (("return float(((5 + n) / 6) ** alpha)", "return float((5 + n / 6) ** alpha)"),)},
        expect={"test_length_penalty": "the division binds before the sum"},
    ),
    Variant(
        "length_penalty_times_alpha",
        "the length penalty multiplies by alpha instead of raising to the power alpha",
        edits={"length_penalty": (("float(((5 + n) / 6) ** alpha)", "float((5 + n) / 6 * alpha)"),)},
        expect={"test_length_penalty": "alpha = 0 must give 1"},
    ),
    # ------------------------------------------------------------ Part B: batches and the model
    Variant(
        "dec_in_not_shifted",
        "the decoder input equals the labels instead of <BOS> + target (not shifted right)",
        edits={"make_reversal_batch": (("return src, dec_in, dec_out", "return src, dec_out, dec_out"),)},
        expect={"test_batch_teacher_forcing": "dec_in must start with <BOS>",
                "test_trained_model": "shifts the decoder input right"},
    ),
    Variant(
        "labels_without_eos",
        "the labels are the reversed source without the final <EOS>",
        edits={"make_reversal_batch": (("return src, dec_in, dec_out", "return src, dec_in, target"),)},
        expect={"test_batch_shapes": "followed by <EOS>",
                "test_batch_teacher_forcing": "dec_out must end with <EOS>"},
    ),
    Variant(
        "batch_ignores_generator",
        "make_reversal_batch draws from the global random generator and ignores `generator`",
        edits={"make_reversal_batch": ((", generator=generator)", ")"),)},
        expect={"test_batch_generator": "pass generator=generator"},
    ),
    Variant(
        "no_causal_mask",
        "forward passes no tgt_mask: the decoder's self-attention sees later target tokens",
        edits={"reversal_transformer": ((FORWARD, "hidden = self.transformer(self.embed(src), self.embed(dec_in))"),)},
        expect={"test_forward_masks": "pass the causal tgt_mask",
                "test_forward_causal_flag": "no causal mask is used although causal=True",
                "test_trained_model": "is the causal mask (tgt_mask) of the decoder's self-attention missing?"},
    ),
    Variant(
        "always_masks",
        "forward ignores self.causal and always passes the causal tgt_mask, so causal=False changes nothing",
        edits={"reversal_transformer": ((" if self.causal else None", ""),)},
        expect={"test_forward_causal_flag": "the causal mask is still on; build tgt_mask only when self.causal is true"},
        only=True,
    ),
    Variant(
        "causal_memory_mask",
        "forward also puts a causal mask on the cross-attention (memory_mask)",
        edits={"reversal_transformer": ((FORWARD, 'memory_mask = torch.triu(torch.full((n, src.size(1)), float("-inf")), '
                                                  "diagonal=1)\n        hidden = self.transformer(self.embed(src), "
                                                  "self.embed(dec_in), tgt_mask=tgt_mask, memory_mask=memory_mask)"),)},
        expect={"test_forward_masks": "is there a mask on the cross-attention (memory_mask)?"},
    ),
    Variant(
        "forward_without_head",
        "forward returns the decoder's hidden states (B, n, D) instead of logits",
        edits={"reversal_transformer": (("return self.head(hidden)", "return hidden"),)},
        expect={"test_forward_shapes": "apply self.head"},
    ),
    # ------------------------------------------------------------ Part C: evaluation and decoding
    Variant(
        "exact_match_per_token",
        "exact_match counts matching tokens instead of whole matching sequences",
        edits={"exact_match": (("(pred == target).all(dim=-1).float()", "(pred == target).float()"),)},
        expect={"test_exact_match": "per token, not per sequence"},
    ),
    Variant(
        "greedy_fed_true_target",
        "greedy decoding feeds the decoder the true target (the reversed source) in one teacher-forced pass",
        replace={"greedy_decode": '''def greedy_decode(model, src, max_len):
    dec_in = torch.cat([torch.full((src.size(0), 1), BOS), src.flip(1)], dim=1)[:, :max_len]
    with torch.no_grad():
        return model(src, dec_in).argmax(-1)
'''},
        expect={"test_greedy_feeds_back": "never the true target"},
    ),
    Variant(
        "greedy_keeps_bos",
        "greedy_decode returns the <BOS> column with the generated tokens",
        edits={"greedy_decode": (("return dec_in[:, 1:]", "return dec_in"),)},
        expect={"test_greedy_shape": "without the <BOS> column"},
    ),
    Variant(
        "beam_decode_unnormalised",
        "beam_decode hands exp(logits) to beam_search without dividing by their sum (no softmax)",
        edits={"beam_decode": ((SOFTMAX, "logits.double().exp()"),)},
        expect={"test_beam_decode_table": "softmax",
                "test_beam_decode_model": "softmax"},
    ),
    Variant(
        "beam_decode_first_position",
        "beam_decode's next_probs reads the logits of the first decoder position instead of the last",
        edits={"beam_decode": (("[0, -1]  # (VOCAB,)", "[0, 0]  # (VOCAB,)"),)},
        expect={"test_beam_decode_table": "reads the logits of the first decoder position",
                "test_beam_decode_model": "reads the logits of the first decoder position"},
    ),
    Variant(
        "quiz_wrong",
        "every quiz answer is a plausible wrong option",
        replace={"quiz": 'Q1 = "a"\nQ2 = "a"\nQ3 = "b"\nQ4 = "b"\n'},
        expect={"test_quiz_q1": "(a) rows are queries", "test_quiz_q2": "(a) with alpha = 1 each summed",
                "test_quiz_q3": "(b) with labels equal to the input", "test_quiz_q4": "(b) a beam only searches"},
    ),
    Variant(
        "predict_beam_candidates_full_first_step",
        "predicts 4 hypotheses extended at every step, the first too (6 x 4 x 10)",
        replace={"predict_beam_candidates": "PREDICTED_BEAM_CANDIDATES = 240\n"},
        expect={"test_predict_beam_candidates": "the beam starts as the single hypothesis (start,)"},
    ),
    Variant(
        "predict_beam_candidates_calls",
        "predicts the calls of next_probs (1 + 5 x 4) instead of the candidates",
        replace={"predict_beam_candidates": "PREDICTED_BEAM_CANDIDATES = 21\n"},
        expect={"test_predict_beam_candidates": "that counts the hypotheses extended"},
    ),
    # issue 54's second hunt (2026-12-06): found with the trained model's test blaming the shift, the <EOS> and the
    # cross-attention's mask for labels reversed along the batch axis
    Variant(
        "batch_flips_batch_axis",
        "make_reversal_batch reverses the batch axis, src.flip(0), instead of each sequence, src.flip(1)",
        edits={"make_reversal_batch": (("src.flip(1)", "src.flip(0)"),)},
        expect={"test_batch_teacher_forcing": "is the batch in reverse order (flip(0) turns the batch axis)",
                "test_trained_model": "the model was trained on your make_reversal_batch, whose labels"},
    ),
    # issue 54, a second hunt (2026-12-06): mistakes not seen before, each now losing its own part with its message
    Variant(
        "beam_returns_score_then_logprob",
        "beam_search returns (tokens, score, log_prob): its last two values in each other's places",
        edits={"beam_search": (("return tokens, best[1], score(best)", "return tokens, score(best), best[1]"),)},
        expect={"test_beam_toy": "log_prob and score are in each other's places"},
        crosses="Part E's beam_decode returns what beam_search returns, and its tests compare those values too",
    ),
    Variant(
        "lp_exponent_on_numerator",
        "the length penalty is (5 + n) ** alpha / 6: the exponent on the numerator only",
        edits={"length_penalty": (("return float(((5 + n) / 6) ** alpha)", "return float((5 + n) ** alpha / 6)"),)},
        expect={"test_length_penalty": "alpha = 0 must give 1",
                "test_beam_toy": "if length_penalty fails its own test, fix it first"},
    ),
    Variant(
        "tgt_mask_keep_polarity",
        "the causal tgt_mask is a bool tril (True = may attend, as in chapter 03), but nn.Transformer reads True as "
        "blocked",
        edits={"reversal_transformer": (("nn.Transformer.generate_square_subsequent_mask(n)",
                                         "torch.tril(torch.ones(n, n, dtype=torch.bool))"),)},
        expect={"test_forward_masks": "whose True (or -inf) entries nn.Transformer blocks"},
        crosses="the trained-model test (Part D) trains the student's forward, which sees the future",
    ),
    # issue 54, a third hunt (2026-12-07): mistakes not seen before, each now losing its own part with its message
    Variant(
        "lp_ratio_inverted",
        "the length penalty is (6 / (5 + n)) ** alpha: the ratio upside down, below 1 for longer hypotheses",
        edits={"length_penalty": (("return float(((5 + n) / 6) ** alpha)", "return float((6 / (5 + n)) ** alpha)"),)},
        expect={"test_length_penalty": "the ratio is upside down"},
    ),
    Variant(
        "greedy_one_step_short",
        "greedy_decode loops range(max_len - 1), as if <BOS> were one of the max_len tokens",
        edits={"greedy_decode": (("for _ in range(max_len):", "for _ in range(max_len - 1):"),)},
        expect={"test_greedy_shape": "the loop runs max_len times", "test_greedy_feeds_back": "the loop runs max_len times"},
    ),
    Variant(
        "beam_decode_drops_alpha",
        "beam_decode calls beam_search without alpha=alpha, so the search always runs with alpha = 0",
        edits={"beam_decode": (("beam_search(next_probs, width, alpha=alpha, max_len=", "beam_search(next_probs, width, max_len="),)},
        expect={"test_beam_decode_model": "pass alpha on to beam_search"},
    ),
]


# one mistake, one loss: what still costs another part, and why (tests/test_chapters.py checks that each still does)
_TRAINED_ON_YOURS = ("the model of Part D is trained in the student's kernel on the student's batches and masks; "
                     "judging it around reference ones would mean a second training run in every grading kernel")
_DECODES_WITH_YOURS = ("beam_decode runs the student's beam_search of Part A on the model, as the exercise asks: not yet "
                       "judged around a reference one (it is judged around the student's length_penalty)")
_PENALTY_REFUSED = ("Part E judges beam_decode around the student's length_penalty, but refuses one that gives 0 at alpha 0 "
                    "(a division by zero in the student's beam_search): the test names length_penalty's test to fix first")
CROSSES = {  # measured 2026-12-05 (batch_flips_batch_axis 2026-12-06): these 10 of the chapter's variants; every other one loses its own part only
    **{name: _TRAINED_ON_YOURS for name in ("dec_in_not_shifted", "no_causal_mask", "labels_without_eos",
                                            "causal_memory_mask", "forward_without_head", "batch_flips_batch_axis")},
    **{name: _DECODES_WITH_YOURS for name in ("lp_without_eos", "prune_by_normalised_score", "beam_ignores_width")},
    "length_penalty_times_alpha": _PENALTY_REFUSED,
}
VARIANTS = crossing(VARIANTS, CROSSES)


ALTERNATIVES = [
    Variant(
        "search_with_heapq_and_pow",
        "beam_search prunes with heapq.nlargest, the length penalty uses math.pow, beam_decode goes through "
        "log_softmax, and the quiz letters are capitals with spaces",
        edits={"beam_search": (("def beam_search(", "import heapq\n\n\ndef beam_search("),
                               (SORT, "kept = heapq.nlargest(width, candidates, key=lambda c: c[1])")),
               "length_penalty": (("return float(((5 + n) / 6) ** alpha)", "return math.pow((5 + n) / 6, alpha)"),),
               "beam_decode": ((SOFTMAX, "torch.log_softmax(logits.double(), dim=-1).exp()"),),
               "quiz": (('Q1 = "c"', 'Q1 = " C "'), ('Q4 = "a"', 'Q4 = "A"'))},
    ),
    Variant(
        "padded_batch_and_bool_mask",
        "make_reversal_batch pads the target with F.pad, the model's causal mask is a bool triu mask, "
        "exact_match counts whole rows by hand",
        edits={"make_reversal_batch": (("torch.cat([torch.full((n, 1), BOS), target], dim=1)", "F.pad(target, (1, 0), value=BOS)"),
                                       ("torch.cat([target, torch.full((n, 1), EOS)], dim=1)", "F.pad(target, (0, 1), value=EOS)")),
               "reversal_transformer": (("nn.Transformer.generate_square_subsequent_mask(n)",
                                         "torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)"),),
               "exact_match": (("return (pred == target).all(dim=-1).float().mean().item()",
                                "return float((pred == target).all(dim=1).sum()) / len(pred)"),)},
    ),
    Variant(
        "model_in_float64",
        "ReversalTransformer keeps every parameter in float64 (self.double() at the end of __init__): the tests "
        "compare it with the lesson's model in float64",
        edits={"reversal_transformer": (("self.causal = causal", "self.causal = causal\n        self.double()"),)},
    ),
    Variant(
        "greedy_into_preallocated_tensor",
        "greedy_decode writes each argmax into a preallocated (B, max_len + 1) tensor",
        replace={"greedy_decode": '''def greedy_decode(model, src, max_len):
    tokens = torch.full((src.size(0), max_len + 1), BOS, dtype=torch.long)  # column 0 stays <BOS>
    with torch.no_grad():
        for t in range(max_len):
            tokens[:, t + 1] = model(src, tokens[:, : t + 1])[:, -1].argmax(dim=-1)
    return tokens[:, 1:]
'''},
    ),
]

# ---------------------------------------------------------------- issue 54, a fourth hunt (2026-12-07)
# Mistakes nobody had listed, graded one at a time; each now loses only its own part with a message naming it.
VARIANTS += [
    Variant(
        'beam_decode_last_token_only',
        'next_probs feeds the decoder only the last token of the prefix, as the toy table looked only at the previous token, instead of the whole prefix',
        edits={'beam_decode': (('torch.tensor([prefix], dtype=torch.long)', 'torch.tensor([prefix[-1:]], dtype=torch.long)'),)},
        expect={'test_beam_decode_model': 'or gives the model only the last token'},
    ),
]
