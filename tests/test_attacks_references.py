"""Students who reach for a reference (issue 50, items 1 and 3), graded through the real pipeline, sandboxed.

Written from the course's and the grader's source: each attacker hands in a plainly wrong answer (a zoo
variant) plus lines that try to answer with a reference instead:

* chapter 09: a `DecoderBlock` whose forward is `nn.TransformerDecoderLayer` built by the checks module's
  `decoder_layer` (the route measured at 26 of 26 when the wrong block earned 12), the same through the
  grader's references (`instructor.references.decoder`, never importable in a grading kernel), and a block
  built by *any* callable reachable from `course` that turns the block's parameters into a module that
  answers `(x, memory)`;
* chapter 10: a `Block` and a `GPT` through the checks module's reference builders (`reference_block`,
  `ReferenceGPT`: 18 of 18 before, where the wrong block earned 11 and the wrong model 13), and the cached
  step that keeps the token ids in K and runs the whole model on the text it reads back (18 of 18 where an
  honest wrong step earned 16: item 3). Its logits stay right, so generate's text does too: it is held to an
  honest step of the same kind, one that keeps each pair as (V, K), which loses the step's test only
  (generate is no longer judged around a wrong step, which one that keeps state could steer);
* chapter 07: `length_penalty` imported from the checks module (`wu_penalty`: 29 of 29 where the wrong
  penalty earned 23), and one that answers from the numbers the visible tests hold.

Each attacker must earn **at most** what the same wrong code earns honestly in the same nbgrader run, the
solution full marks and the stub zero (`check_class` of `tests/support.py`).
"""

from __future__ import annotations

import pytest
from support import automatic_points, check_class, grade

from instructor.repository import REPOSITORY
from instructor.zoo import variants_for

pytestmark = pytest.mark.pipeline

# ---------------------------------------------------------------- chapter 09: a block on a reference layer

_CH09_BLOCK = '''
class DecoderBlock(DecoderBlock):
    def __init__(self, width, heads, hidden, norm_first=False):
        super().__init__(width, heads, hidden, norm_first)
        self._sizes = (width, heads, hidden, norm_first)

    def forward(self, x, memory, causal_mask=None, memory_padding_mask=None):
        layer = _reference_layer(self)
        if layer is None:  # no reference within reach: the wrong block it hides
            return super().forward(x, memory, causal_mask, memory_padding_mask)
        renamed = {_theirs(name): value for name, value in self.named_parameters()}  # the gradients reach them
        out = torch.func.functional_call(layer, renamed, (x, memory), {"tgt_mask": causal_mask,
                                                                       "memory_key_padding_mask": memory_padding_mask})
        h = layer.norm1(x) if layer.norm_first else x
        stream = x + layer.self_attn(h, h, h, attn_mask=causal_mask, need_weights=False)[0]
        query = layer.norm2(stream) if layer.norm_first else layer.norm1(stream)
        weights = layer.multihead_attn(query, memory, memory, key_padding_mask=memory_padding_mask,
                                       need_weights=True, average_attn_weights=False)[1]
        return out, weights


def _theirs(key):
    for ours, theirs in (("self_attention.", "self_attn."), ("cross_attention.", "multihead_attn."), ("ffn.", "")):
        if key.startswith(ours):
            return theirs + key[len(ours):]
    return key
'''

# a block on the decoder layer a module builds, from the module the student imports in their kernel
_ROUTE = '''
import importlib

def _reference_layer(block):
    try:
        build = importlib.import_module("<<MODULE>>").decoder_layer
    except Exception:
        return None
    state = {name: value.detach() for name, value in block.state_dict().items()}
    return build(state, *block._sizes)
''' + _CH09_BLOCK

CH09_ATTACKS = {
    # the route of issue 50: the checks module's decoder layer
    "checks-module-decoder-layer": _ROUTE.replace("<<MODULE>>", "course.decoder_checks"),
    # the grader's references, where the hidden tests import them from
    "grader-references": _ROUTE.replace("<<MODULE>>", "instructor.references.decoder"),
    # whatever the course puts within reach: every callable of every course module that makes, from the
    # block's parameters and sizes, a module answering (x, memory) with the decoder's shape
    "any-course-builder": '''
import importlib
import pkgutil

import course

def _candidates():
    for info in pkgutil.iter_modules(course.__path__):
        try:
            module = importlib.import_module(f"course.{info.name}")
        except Exception:
            continue
        for name in dir(module):
            value = getattr(module, name)
            if callable(value) and not isinstance(value, type(torch)):
                yield value

_FOUND = {}  # sizes -> the first callable that built a decoder layer from them (walked once per sizes)


def _reference_layer(block):
    state = {name: value.detach() for name, value in block.state_dict().items()}
    width = block._sizes[0]
    x, memory = torch.randn(2, 3, width), torch.randn(2, 4, width)
    if block._sizes in _FOUND:
        return None if _FOUND[block._sizes] is None else _FOUND[block._sizes](state, *block._sizes)
    _FOUND[block._sizes] = None
    for build in _candidates():
        try:
            layer = build(state, *block._sizes)
            if not isinstance(layer, nn.Module) or tuple(layer(x, memory).shape) != (2, 3, width):
                continue
            layer.norm1, layer.self_attn, layer.multihead_attn  # a decoder layer's parts, for the weights
            _FOUND[block._sizes] = build
            return layer
        except Exception:
            continue
    return None
''' + _CH09_BLOCK,
}

# ---------------------------------------------------------------- chapter 10: the checks module's builders

CH10_BLOCK_ATTACKS = {
    "checks-module-reference-block": '''
import importlib

class Block(Block):
    def __init__(self, width, heads, max_len):
        super().__init__(width, heads, max_len)
        self._sizes = (width, heads)

    def forward(self, x):
        try:
            build = importlib.import_module("course.tiny_gpt_checks").reference_block
        except Exception:
            return super().forward(x)
        layer = build({name: value.detach() for name, value in self.state_dict().items()
                       if not name.endswith("mask")}, *self._sizes)
        mask = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), diagonal=1)
        return layer(x, src_mask=mask)
''',
}

CH10_GPT_ATTACKS = {
    "checks-module-reference-gpt": '''
import importlib

class GPT(GPT):
    def __init__(self, vocab, width, heads, layers, max_len):
        super().__init__(vocab, width, heads, layers, max_len)
        self._sizes = (vocab, width, heads, layers, max_len)

    def forward(self, idx, targets=None):
        try:
            build = importlib.import_module("course.tiny_gpt_checks").ReferenceGPT
        except Exception:
            return super().forward(idx, targets)
        state = {name: value.detach() for name, value in self.state_dict().items() if not name.endswith("mask")}
        logits = build(state, *self._sizes)(idx)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
''',
}


def _zoo_cell(assignment: str, variant: str, cell: str) -> str:
    _, answers = REPOSITORY.release_and_answers(assignment)
    return next(v for v in variants_for(assignment) if v.name == variant).answers(answers)[cell]


# item 3: K holds the token ids, the step runs the whole model on the text it reads back (the zoo's variant)
CH10_CACHE_ATTACKS = {"cache-holds-token-ids": _zoo_cell("10_tiny_gpt", "cache_holds_token_ids", "cached_step")}

# ---------------------------------------------------------------- chapter 07: the length penalty

CH07_ATTACKS = {
    "checks-module-wu-penalty": '''
import importlib

def length_penalty(n, alpha, _wrong=length_penalty):
    try:
        return float(importlib.import_module("course.seq2seq_checks").wu_penalty(n, alpha))
    except Exception:
        return _wrong(n, alpha)
''',
    "checks-module-numbers": '''
import importlib
import math

def length_penalty(n, alpha, _wrong=length_penalty):
    checks = importlib.import_module("course.seq2seq_checks")
    if (n, alpha) == (7, 0.6):
        return checks.LP_SEVEN_AT_0_6
    if alpha == 0.6 and n in (3, 4):  # from the toy scores of "đàn chim bay" (p = 0.4 * 0.9 * 0.48): ln p / score
        return math.log(0.4 * 0.9 * 0.48) / (checks.TOY_SCORES_WITHOUT_EOS if n == 3 else checks.TOY_SCORES)[2, 0.6]
    return _wrong(n, alpha)
''',
}


def graded(tmp_path_factory, assignment: str, variant: str, cell: str, attacks: dict[str, str]):
    """support.grade with the zoo variant's cell as the honest wrong code, and 60 s a cell: on a loaded
    machine chapter 09's gradient tests took more than the 20 s that grade() gives them."""
    return grade(tmp_path_factory, assignment, cell, _zoo_cell(assignment, variant, cell), attacks, timeout=60)


def test_chapter09_a_block_on_a_reference_earns_no_more_than_the_wrong_block(tmp_path_factory):
    results, reviews = graded(tmp_path_factory, "09_decoder", "post_norms_swapped", "decoder_block", CH09_ATTACKS)
    check_class(results, reviews, CH09_ATTACKS, automatic_points("09_decoder"))


def test_chapter07_a_borrowed_length_penalty_earns_no_more_than_the_wrong_one(tmp_path_factory):
    results, reviews = graded(tmp_path_factory, "07_seq2seq_beam_search", "length_penalty_times_alpha", "length_penalty",
                              CH07_ATTACKS)
    check_class(results, reviews, CH07_ATTACKS, automatic_points("07_seq2seq_beam_search"))
    assert "test_length_penalty" in results["atk-checks-module-wu-penalty"].failed()


@pytest.mark.parametrize("variant, cell, attacks", [
    ("block_post_norm", "block", CH10_BLOCK_ATTACKS),
    ("gpt_no_final_norm", "gpt", CH10_GPT_ATTACKS),
    ("cache_pairs_v_then_k", "cached_step", CH10_CACHE_ATTACKS),
], ids=["block", "gpt", "cached-step"])
def test_chapter10_reference_builders_and_a_cache_of_token_ids_earn_no_more_than_the_wrong_code(
        tmp_path_factory, variant, cell, attacks):
    results, reviews = graded(tmp_path_factory, "10_tiny_gpt", variant, cell, attacks)
    check_class(results, reviews, attacks, automatic_points("10_tiny_gpt"))
    if cell == "cached_step":  # the step is judged on what its caches hold, and on caches it did not make
        attacker = results["atk-cache-holds-token-ids"]
        assert attacker.failed() == ["test_cached_step"]
        assert "cached K" in attacker.cells["test_cached_step"].error
