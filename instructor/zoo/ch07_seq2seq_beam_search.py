"""Wrong answers to chapter 07 that the graded tests must catch, each with its message."""

from instructor.zoo import Variant

ASSIGNMENT = "07_seq2seq_beam_search"


def _beam_search(loop: str, choice: str) -> str:
    """A beam_search whose search loop and final choice are given as (unindented) code."""
    def indent(code):
        return "".join(f"    {line}\n" if line else "\n" for line in code.strip("\n").splitlines())

    return ('def beam_search(next_probs, width, alpha=0.0, max_len=6, start="<s>", eos="<eos>"):\n'
            + indent(loop) + indent(choice))


GOOD_LOOP = '''
beams, finished = [((start,), 0.0)], []
for _ in range(max_len):
    candidates = [(prefix + (token,), log_prob + math.log(p))
                  for prefix, log_prob in beams
                  for token, p in next_probs(prefix).items() if p > 0]
    candidates.sort(key=lambda c: c[1], reverse=True)
    kept = candidates[:width]
    finished += [c for c in kept if c[0][-1] == eos]
    beams = [c for c in kept if c[0][-1] != eos]
    if not beams:
        break
finished += beams
'''

GOOD_CHOICE = '''
score = lambda c: c[1] / length_penalty(len(c[0]) - 1, alpha)
best = max(finished, key=score)
return [t for t in best[0][1:] if t != eos], best[1], score(best)
'''

# The student counts the tokens they return (no <eos>) as the length.
LP_WITHOUT_EOS_CHOICE = '''
score = lambda c: c[1] / length_penalty(len([t for t in c[0][1:] if t != eos]), alpha)
best = max(finished, key=score)
return [t for t in best[0][1:] if t != eos], best[1], score(best)
'''

# The beam stores the normalised score and keeps adding log-probabilities to it.
NORMALISED_LOOP = '''
beams, finished = [((start,), 0.0)], []
for _ in range(max_len):
    candidates = [(prefix + (token,), (s + math.log(p)) / length_penalty(len(prefix), alpha))
                  for prefix, s in beams
                  for token, p in next_probs(prefix).items() if p > 0]
    candidates.sort(key=lambda c: c[1], reverse=True)
    kept = candidates[:width]
    finished += [c for c in kept if c[0][-1] == eos]
    beams = [c for c in kept if c[0][-1] != eos]
    if not beams:
        break
finished += beams
best = max(finished, key=lambda c: c[1])
return [t for t in best[0][1:] if t != eos], best[1], best[1]
'''

# Finished hypotheses stay in the beam (not extended) and compete for its places.
KEPT_FINISHED_LOOP = '''
beam = [((start,), 0.0)]
for _ in range(max_len):
    candidates = []
    for prefix, log_prob in beam:
        if prefix[-1] == eos:
            candidates.append((prefix, log_prob))
            continue
        candidates += [(prefix + (token,), log_prob + math.log(p)) for token, p in next_probs(prefix).items()]
    candidates.sort(key=lambda c: c[1], reverse=True)
    beam = candidates[:width]
    if all(prefix[-1] == eos for prefix, _ in beam):
        break
finished = beam
'''

GREEDY_LOOP = GOOD_LOOP.replace("kept = candidates[:width]", "kept = candidates[:1]")

GOOD_BATCH = '''def make_reversal_batch(n, length=LENGTH, generator=None):
    src = torch.randint(2, VOCAB, (n, length), generator=generator)
    target = src.flip(1)
    dec_in = torch.cat([torch.full((n, 1), BOS), target], dim=1)
    dec_out = torch.cat([target, torch.full((n, 1), EOS)], dim=1)
    return src, dec_in, dec_out
'''

MODEL_HEAD = '''class ReversalTransformer(nn.Module):
    def __init__(self, d_model=64, max_positions=LENGTH + 1, causal=True):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, d_model)
        self.position_embedding = nn.Embedding(max_positions, d_model)
        self.transformer = nn.Transformer(d_model, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=128, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d_model, VOCAB)
        self.causal = causal

    def embed(self, tokens):
        positions = torch.arange(tokens.size(1), device=tokens.device)
        return self.token_embedding(tokens) + self.position_embedding(positions)

    def forward(self, src, dec_in):
'''


def _model(body: str) -> str:
    return MODEL_HEAD + "".join(f"        {line}\n" for line in body.strip("\n").splitlines())


GOOD_GREEDY = '''def greedy_decode(model, src, max_len):
    dec_in = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    with torch.no_grad():
        for _ in range(max_len):
            next_token = model(src, dec_in)[:, -1].argmax(dim=-1, keepdim=True)
            dec_in = torch.cat([dec_in, next_token], dim=1)
    return dec_in[:, 1:]
'''

VARIANTS = [
    Variant(
        "lp_without_eos",
        "the length penalty counts the returned tokens only, leaving out <EOS>",
        {"beam_search": _beam_search(GOOD_LOOP, LP_WITHOUT_EOS_CHOICE)},
        {"test_beam_toy": "|y| leaves out <eos>",
         "test_beam_length_penalty_final": "|y| leaves out <eos>"},
    ),
    Variant(
        "prune_by_normalised_score",
        "the beam is pruned by the normalised score: the running score is divided by lp at every step",
        {"beam_search": _beam_search(NORMALISED_LOOP, "")},
        {"test_beam_toy": "raw summed log-probability",
         "test_beam_length_penalty_final": "divide by lp only for the final choice"},
    ),
    Variant(
        "finished_kept_in_beam",
        "hypotheses that produced <EOS> stay in the beam and take places from those still growing",
        {"beam_search": _beam_search(KEPT_FINISHED_LOOP, GOOD_CHOICE)},
        {"test_beam_finished_leave": "must leave the beam"},
    ),
    Variant(
        "beam_ignores_width",
        "beam_search keeps one candidate per step whatever the width: greedy decoding",
        {"beam_search": _beam_search(GREEDY_LOOP, GOOD_CHOICE)},
        {"test_beam_toy": "raw summed log-probability",
         "test_beam_random_tables": "the best raw ln p among finished hypotheses wins"},
    ),
    Variant(
        "length_penalty_times_alpha",
        "the length penalty multiplies by alpha instead of raising to the power alpha",
        {"length_penalty": '''def length_penalty(n, alpha):
    return (5 + n) / 6 * alpha
'''},
        {"test_length_penalty": "alpha = 0 must give 1"},
    ),
    Variant(
        "dec_in_not_shifted",
        "the decoder input equals the labels instead of <BOS> + target (not shifted right)",
        {"make_reversal_batch": GOOD_BATCH.replace(
            "    return src, dec_in, dec_out", "    return src, dec_out, dec_out")},
        {"test_batch_teacher_forcing": "dec_in must start with <BOS>",
         "test_trained_model": "shifts the decoder input right"},
    ),
    Variant(
        "labels_without_eos",
        "the labels are the reversed source without the final <EOS>",
        {"make_reversal_batch": GOOD_BATCH.replace(
            "    return src, dec_in, dec_out", "    return src, dec_in, target")},
        {"test_batch_shapes": "followed by <EOS>",
         "test_batch_teacher_forcing": "dec_out must end with <EOS>"},
    ),
    Variant(
        "batch_ignores_generator",
        "make_reversal_batch draws from the global random generator and ignores `generator`",
        {"make_reversal_batch": GOOD_BATCH.replace("generator=generator)", ")")},
        {"test_batch_generator": "pass generator=generator"},
    ),
    Variant(
        "no_causal_mask",
        "forward passes no tgt_mask: the decoder's self-attention sees later target tokens",
        {"reversal_transformer": _model('''
hidden = self.transformer(self.embed(src), self.embed(dec_in))
return self.head(hidden)
''')},
        {"test_forward_masks": "pass the causal tgt_mask",
         "test_trained_model": "is the causal mask (tgt_mask) of the decoder's self-attention missing?"},
    ),
    Variant(
        "causal_memory_mask",
        "forward also puts a causal mask on the cross-attention (memory_mask)",
        {"reversal_transformer": _model('''
n = dec_in.size(1)
tgt_mask = nn.Transformer.generate_square_subsequent_mask(n) if self.causal else None
memory_mask = torch.triu(torch.full((n, src.size(1)), float("-inf")), diagonal=1)
hidden = self.transformer(self.embed(src), self.embed(dec_in), tgt_mask=tgt_mask, memory_mask=memory_mask)
return self.head(hidden)
''')},
        {"test_forward_masks": "is there a mask on the cross-attention (memory_mask)?"},
    ),
    Variant(
        "forward_without_head",
        "forward returns the decoder's hidden states (B, n, D) instead of logits",
        {"reversal_transformer": _model('''
n = dec_in.size(1)
tgt_mask = nn.Transformer.generate_square_subsequent_mask(n) if self.causal else None
return self.transformer(self.embed(src), self.embed(dec_in), tgt_mask=tgt_mask)
''')},
        {"test_forward_shapes": "apply self.head"},
    ),
    Variant(
        "exact_match_per_token",
        "exact_match counts matching tokens instead of whole matching sequences",
        {"exact_match": '''def exact_match(pred, target):
    return (pred == target).float().mean().item()
'''},
        {"test_exact_match": "per token, not per sequence"},
    ),
    Variant(
        "greedy_fed_true_target",
        "greedy decoding feeds the decoder the true target (the reversed source) in one teacher-forced pass",
        {"greedy_decode": '''def greedy_decode(model, src, max_len):
    dec_in = torch.cat([torch.full((src.size(0), 1), BOS), src.flip(1)], dim=1)[:, :max_len]
    with torch.no_grad():
        return model(src, dec_in).argmax(-1)
'''},
        {"test_greedy_feeds_back": "never the true target"},
    ),
    Variant(
        "greedy_keeps_bos",
        "greedy_decode returns the <BOS> column with the generated tokens",
        {"greedy_decode": GOOD_GREEDY.replace("return dec_in[:, 1:]", "return dec_in")},
        {"test_greedy_shape": "without the <BOS> column"},
    ),
    Variant(
        "beam_decode_unnormalised",
        "beam_decode hands exp(logits) to beam_search without dividing by their sum (no softmax)",
        {"beam_decode": '''def beam_decode(model, src, width, alpha):
    source = src.reshape(1, -1)

    def next_probs(prefix):
        with torch.no_grad():
            logits = model(source, torch.tensor([prefix]))[0, -1]
        return dict(enumerate(logits.double().exp().tolist()))

    return beam_search(next_probs, width, alpha=alpha, max_len=source.size(1) + 1, start=BOS, eos=EOS)
'''},
        {"test_beam_decode_table": "softmax",
         "test_beam_decode_model": "softmax"},
    ),
    Variant(
        "quiz_wrong",
        "every quiz answer is a plausible wrong option",
        {"quiz": 'Q1 = "b"\nQ2 = "b"\nQ3 = "a"\nQ4 = "a"\n'},
        {"test_quiz_q1": "re-read", "test_quiz_q2": "re-read", "test_quiz_q3": "re-read", "test_quiz_q4": "re-read"},
    ),
]
