"""The checks of chapter 07 (sequence to sequence, beam search), which its graded test cells call.

The tables here are the tests' small language models for your `beam_search`; `searched` runs
your search on one of them. The scores the visible tests expect on the lesson's toy table are
numbers (`TOY_SCORES`), worked out once from the table and the chapter's formula. For the model, the tests choose its weights and batch (`choose_weights`,
`masks_setup`) and compare its logits with `nn.Transformer` holding the same weights. A failed
check names the call and says where to look. Nothing here is a solution to an exercise.
"""

from __future__ import annotations

import torch
from nboracle import draw_parameters, load_tensors

from .checks import attempt

# The score of the lesson's answer on the toy table for (width, alpha): ln p / lp(|y|), <eos> counted in |y|
# ("con mèo" for width 1, "đàn chim" for width 2 at alpha 0, "đàn chim bay" at alpha 0.6), and the same with
# <eos> left out of |y| (a mistake the messages name).
TOY_SCORES = {(1, 0.0): -1.7719568419318752, (2, 0.0): -1.6755777149386453, (2, 0.6): -1.376498900366726}
TOY_SCORES_WITHOUT_EOS = {(1, 0.0): -1.7719568419318752, (2, 0.0): -1.6755777149386453, (2, 0.6): -1.4772955249501265}
# lp(7) at alpha 0.6: ((5 + 7) / 6) ** 0.6, the penalty of chapter 07's seven-token answer (<EOS> counted)
LP_SEVEN_AT_0_6 = 1.515716566510398


FORWARD_HINT = ("self.transformer(embedded src, embedded dec_in, tgt_mask=...) with the causal mask of the decoder "
                "length n = dec_in.size(1), passed by name: nn.Transformer's third positional argument is src_mask")
GREEDY_LENGTH_HINT = ("return exactly the max_len generated tokens, without the <BOS> column: the loop runs max_len "
                      "times (<BOS> is given, not generated)")


def next_probs_of(table):
    """next_probs for a table {previous token: {next token: probability}}: a small language model of a test."""
    def next_probs(prefix):
        return table[prefix[-1]]
    return next_probs


BEAM_HINT = ("run it on the toy table above and read the traceback; a division by zero there usually comes from "
             "length_penalty, which is never 0 (((5 + n) / 6) ** alpha): make the test of length_penalty pass first")


def searched(beam_search, next_probs, width, **kwargs):
    """Your beam_search on one of the tests' tables; an error reads as one sentence."""
    arguments = ", ".join([f"width={width}", *(f"{k}={v!r}" for k, v in kwargs.items())])
    return attempt(f"beam_search({arguments})", beam_search, next_probs, width, hint=BEAM_HINT, **kwargs)


def choose_weights(net, seed):
    """Load weights the test draws into `net` (layer norms' scales near 1) and return them by name."""
    params = draw_parameters(net, torch.Generator().manual_seed(seed))
    scales = {name: 1.0 + value for name, value in params.items() if "norm" in name and name.endswith(".weight")}
    load_tensors(net, scales)
    return {**params, **scales}


def masks_setup(net, seed, vocab, length):
    """Weights loaded into `net` and a batch drawn by the test: params, src (4, length), dec_in (4, length + 1),
    and dec_in changed from position 4 on."""
    params = choose_weights(net, seed)
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(2, vocab, (4, length), generator=gen)
    dec_in = torch.randint(0, vocab, (4, length + 1), generator=gen)
    changed = dec_in.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % vocab  # new tokens from position 4 on
    return params, src, dec_in, changed
