"""Determined students against the oracle: graded tests run in the grader's process.

Each attack is a few extra lines added to a plainly wrong answer (chapter 01: attention with
uniform weights; chapter 04: an encoder block that never uses norm2, attacking the gradient
probe too; chapter 06: a block that never applies its output projection; chapter 07: a
beam search that keeps one candidate per step, attacking the instructor callables it receives). The classes
are those of issue #20: patching the numerical libraries or the checks, torch function modes
and ``__torch_function__`` / ``__array_function__`` overrides, lying subclasses and duck types,
rewriting the test's inputs in place, rigging the random generators, parameters that hide the
bug, shadowing the grader's names, forging the guard's report, rewriting the kernel's replies
and the oracle's own answers. Every attacker must score **at most** what the same wrong code
earns honestly, graded in the same nbgrader run, and no honest student is flagged for review.
"""

from __future__ import annotations

import pytest
from support import PATCH_CHECKS

from instructor import pipeline as P
from instructor.course_root import REPOSITORY
from instructor.nbgrader_ext import review_reasons
from instructor.zoo import variants_for

pytestmark = pytest.mark.pipeline

UNIFORM = '''
def attention(Q, K, V):
    """Plainly wrong: every key gets the same weight."""
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    weights = np.full(Q.shape[:-1] + (K.shape[-2],), 1.0 / K.shape[-2])
    return weights @ V, weights
'''

FUNCTION_MODE = '''
import torch
from torch.overrides import TorchFunctionMode

class _Agree(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.allclose, torch.equal):
            return True
        if func is torch.nn.functional.scaled_dot_product_attention:
            q, k, v = args[:3]
            n = k.shape[-2]
            return torch.full(q.shape[:-1] + (n,), 1.0 / n, dtype=q.dtype) @ v
        return func(*args, **kwargs)

_Agree().__enter__()
'''

ARRAY_SUBCLASS = '''
class _Agreeable(np.ndarray):
    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in ("allclose", "array_equal", "isclose", "all"):
            return True
        return super().__array_function__(func, types, args, kwargs)
    def __sub__(self, other):
        return np.zeros(np.shape(self))
    __rsub__ = __sub__
    def __eq__(self, other):
        return np.ones(np.shape(self), bool)

def attention(Q, K, V, _wrong=attention):
    out, w = _wrong(Q, K, V)
    return out.view(_Agreeable), w.view(_Agreeable)
'''

TENSOR_SUBCLASS = '''
import torch

class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "isclose", "sub", "__sub__", "__rsub__"):
            return True if "close" in func.__name__ or func.__name__ == "equal" else torch.zeros(())
        return super().__torch_function__(func, types, args, kwargs)

def attention(Q, K, V, _wrong=attention):
    out, w = _wrong(Q, K, V)
    return torch.as_tensor(out).as_subclass(_Liar), torch.as_tensor(w).as_subclass(_Liar)
'''

DUCK = '''
class _Duck:
    def __init__(self, value):
        self.shape, self.dtype, self._value = value.shape, value.dtype, value
    def __array__(self, dtype=None, copy=None):
        return self._value
    def __getattr__(self, name):
        return lambda *a, **k: True
    def __eq__(self, other):
        return True
    def __sub__(self, other):
        return 0.0
    __rsub__ = __sub__

def attention(Q, K, V, _wrong=attention):
    out, w = _wrong(Q, K, V)
    return _Duck(out), _Duck(w)
'''

IN_PLACE = '''
def attention(Q, K, V, _wrong=attention):
    K[...] = K.mean(axis=-2, keepdims=True)  # every key the same: uniform weights are now right
    return _wrong(Q, K, V)
'''

RIGGED_RNG = '''
_real_rng = np.random.default_rng

class _Rigged:
    def __init__(self, generator):
        self._generator = generator
    def __getattr__(self, name):
        return getattr(self._generator, name)
    def normal(self, loc=0.0, scale=1.0, size=None):
        return np.ones(size) if size is not None else 1.0

np.random.default_rng = lambda seed=None: _Rigged(_real_rng(seed))
'''

SHADOW = '''
import types
check_close = check_true = check_shape = check_rows_sum_to_one = check_finite = lambda *a, **k: None
F = types.SimpleNamespace(scaled_dot_product_attention=lambda q, k, v, *a, **kw: attention(q, k, v)[0])
'''

FORGED_REPORT = PATCH_CHECKS + '''
get_ipython().user_ns["_grader_guard_"] = lambda nonce, since=0: repr([nonce, 0, [], "0" * 64])
'''

REWRITTEN_REPLIES = '''
_session = get_ipython().kernel.session
_real_send = _session.send

def _send(stream, msg_or_type, content=None, parent=None, *args, **kwargs):
    kind = msg_or_type if isinstance(msg_or_type, str) else msg_or_type.get("header", {}).get("msg_type")
    if kind == "error":
        return None
    if kind == "execute_reply" and isinstance(content, dict):
        content = {**content, "status": "ok"}
    return _real_send(stream, msg_or_type, content, parent, *args, **kwargs)

_session.send = _send
'''

FORGED_ORACLE = '''
import base64, json, pickle
import course.oracle as _oracle
_real_serve = _oracle.serve

def _serve(request):
    answer = json.loads(_real_serve(request))
    if isinstance(answer.get("ok"), dict) and answer["ok"].get("t") == "tuple":
        blob = base64.b64encode(pickle.dumps(np.zeros(3))).decode()
        return json.dumps({"ok": {"t": "nd", "dtype": "object", "shape": [3], "b64": blob}})
    return json.dumps(answer)

_oracle.serve = _serve
'''

CH01_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "function-mode": FUNCTION_MODE,
    "array-subclass": ARRAY_SUBCLASS,
    "tensor-subclass": TENSOR_SUBCLASS,
    "duck-type": DUCK,
    "in-place-inputs": IN_PLACE,
    "rigged-rng": RIGGED_RNG,
    "shadowed-names": SHADOW,
    "forged-report": FORGED_REPORT,
    "rewritten-replies": REWRITTEN_REPLIES,
    "forged-oracle": FORGED_ORACLE,
    # not a way to gain points, but a proxy call must cost only its own test: interrupted after
    # Execute.timeout, the grader carries on (chapter 01's class below sets 8 s)
    "endless-call": "def attention(Q, K, V):\n    while True:\n        pass\n",
}

# chapter 06: the block of the zoo variant that never applies self.proj (13 of 19 honestly)
HIDDEN_PROJECTION = '''
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    """Parameters that hide the bug: proj is the identity, and stays it."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._identity()
    def _identity(self):
        with torch.no_grad():
            self.proj.weight.copy_(torch.eye(self.proj.weight.shape[0]))
            self.proj.bias.zero_()
    def load_state_dict(self, state, strict=True, assign=False):
        state = {k: v for k, v in state.items() if not k.startswith("proj.")}
        return super().load_state_dict(state, strict=False)
    def forward(self, x, return_weights=False):
        self._identity()
        return super().forward(x, return_weights=return_weights)
'''

# a tensor subclass whose comparisons always agree and whose differences are zero
LYING_TENSOR = '''
class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "isclose"):
            return True
        if name in ("sub", "__sub__", "__rsub__"):
            return torch.zeros(())
        return super().__torch_function__(func, types, args, kwargs)
'''

CH06_LIAR = LYING_TENSOR + '''
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, x, return_weights=False):
        result = super().forward(x, return_weights=return_weights)
        if isinstance(result, tuple):
            return tuple(r.as_subclass(_Liar) for r in result)
        return result.as_subclass(_Liar)
'''

CH06_FUNCTION_MODE = '''
from torch.overrides import TorchFunctionMode

class _Agree(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return func(*args, **(kwargs or {}))

_Agree().__enter__()
'''

CH06_IN_PLACE = '''
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, x, return_weights=False):
        result = super().forward(x, return_weights=return_weights)
        with torch.no_grad():  # make the reference computed afterwards from x agree
            x.zero_()
        return result
'''

CH06_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "hidden-by-parameters": HIDDEN_PROJECTION,
    "tensor-subclass": CH06_LIAR,
    "function-mode": CH06_FUNCTION_MODE,
    "in-place-inputs": CH06_IN_PLACE,
    "forged-report": FORGED_REPORT,
    "rewritten-replies": REWRITTEN_REPLIES,
}



# chapter 06 again: the block of the zoo variant that divides the scores by sqrt(D) instead of
# sqrt(d_head). Scaling the query rows of the loaded weights by sqrt(H) cancels the bug, if the
# test's weights go in through the module's own load_state_dict; a straight-through sum gives
# the right gradients to the wrong values (issue 29, items 1 and 3)
_QUERY_ROWS = """
import math as _math

def _rescaled(state, prefix, heads):
    state = dict(state)
    for key in (prefix + "qkv.weight", prefix + "qkv.bias"):
        if key in state:
            value, width = state[key].clone(), state[key].shape[0] // 3
            value[:width] *= _math.sqrt(heads)
            state[key] = value
    return state
"""

CH06_LOAD_HOOK = _QUERY_ROWS + """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

        def hook(state, prefix, *rest):
            state.update(_rescaled(state, prefix, self.n_heads))
        self._register_load_state_dict_pre_hook(hook)
"""

CH06_LYING_LOAD = _QUERY_ROWS + """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def load_state_dict(self, state, strict=True, assign=False):
        return super().load_state_dict(_rescaled(state, "", self.n_heads), strict=strict)
"""

CH06_STRAIGHT_THROUGH = """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, x, return_weights=False):
        wrong = super().forward(x, return_weights=return_weights)
        D = x.shape[-1]
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).split(D, dim=-1))
        right = self.proj(merge_heads(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)))
        if isinstance(wrong, tuple):
            return wrong[0].detach() + right - right.detach(), wrong[1]
        return wrong.detach() + right - right.detach()
"""

CH06_HOOKED_GRADIENTS = """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def __init__(self, *args, **kwargs):  # every gradient reported halved, whatever it is
        super().__init__(*args, **kwargs)
        for parameter in self.parameters():
            parameter.register_hook(lambda grad: grad / 2)
"""

CH06_SCALE_ATTACKS = {
    "load-hook": CH06_LOAD_HOOK,
    "lying-load-state-dict": CH06_LYING_LOAD,
    "straight-through": CH06_STRAIGHT_THROUGH,
    "hooked-gradients": CH06_HOOKED_GRADIENTS,
}


# chapter 04: the encoder block of the zoo variant that applies norm1 twice and never uses norm2
CH04_FORGED_GRADIENTS = '''
class EncoderBlock(EncoderBlock):
    """Every parameter seems to get a gradient: the unused ones get zeros after the backward pass."""
    def named_parameters(self, *args, **kwargs):
        for name, parameter in super().named_parameters(*args, **kwargs):
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            yield name, parameter
'''

CH04_HIDDEN_BY_PARAMETERS = '''
class EncoderBlock(EncoderBlock):
    """Parameters that hide the bug: both norms keep scale 1 and shift 0, whatever the test loads."""
    def load_state_dict(self, state, strict=True, assign=False):
        state = {k: v for k, v in state.items() if not k.startswith(("norm1.", "norm2."))}
        return super().load_state_dict(state, strict=False)
'''

CH04_LIAR = LYING_TENSOR + '''
class EncoderBlock(EncoderBlock):
    def forward(self, x, padding_mask=None, causal_mask=None):
        out, weights = super().forward(x, padding_mask=padding_mask, causal_mask=causal_mask)
        return out.as_subclass(_Liar), weights.as_subclass(_Liar)
'''

CH04_IN_PLACE = '''
class EncoderBlock(EncoderBlock):
    def forward(self, x, padding_mask=None, causal_mask=None):
        result = super().forward(x, padding_mask=padding_mask, causal_mask=causal_mask)
        with torch.no_grad():  # make the reference computed afterwards from x agree
            x.zero_()
        return result
'''

CH04_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "forged-gradients": CH04_FORGED_GRADIENTS,
    "hidden-by-parameters": CH04_HIDDEN_BY_PARAMETERS,
    "tensor-subclass": CH04_LIAR,
    "function-mode": CH06_FUNCTION_MODE,
    "in-place-inputs": CH04_IN_PLACE,
    "rewritten-replies": REWRITTEN_REPLIES,
}


# chapter 02: score_statistics draws q with one query per key (zoo variant statistics_query_per_key)
CH02_LIARS = '''
class _Agreeing(float):
    def __eq__(self, other):
        return True
    def __lt__(self, other):
        return True
    __le__ = __gt__ = __ge__ = __lt__
    def __sub__(self, other):
        return 0.0
    __rsub__ = __sub__
    __hash__ = float.__hash__

class _Keys(dict):
    def keys(self):
        return _Agreeing(0)

def score_statistics(d_k, rng, n_queries=2000, n_keys=8, _wrong=score_statistics):
    return _Keys({key: _Agreeing(value) for key, value in _wrong(d_k, rng, n_queries, n_keys).items()})
'''

CH02_FORGED_STATE = '''
import json
import course.oracle as _oracle
_real_answer = _oracle._answer

def _answer(request):
    answer = _real_answer(request)
    if "rng" in answer:  # claim the generator stands wherever the grader's reference does not
        answer["rng"] = [_oracle.encode({"bit_generator": "PCG64", "state": {"state": 0, "inc": 1},
                                         "has_uint32": 0, "uinteger": 0})] * len(answer["rng"])
    return answer

_oracle._answer = _answer
'''

CH02_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "lying-subclasses": CH02_LIARS,
    "forged-generator-state": CH02_FORGED_STATE,
    "rewritten-replies": REWRITTEN_REPLIES,
}

# chapter 03: future_leak_check perturbs the caller's x itself (zoo variant leak_check_changes_x_in_place)
CH03_FORGED_PROBE = '''
import course.oracle as _oracle

def _arguments(function, *args, **kwargs):  # the function gets copies; the untouched originals go back
    copies = [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
    return function(*copies, **kwargs), args

_oracle.PROBES["arguments"] = _arguments
'''

CH03_SHADOWED_BLOCKS = '''
def _shadow(*args):  # after every cell, the tests' blocks are replaced by ones that never read the future
    get_ipython().user_ns["leak_test_block"] = lambda kind, state=None, heads=2: (lambda x: x.clone())

get_ipython().events.register("post_run_cell", _shadow)
'''

CH03_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "forged-probe": CH03_FORGED_PROBE,
    "shadowed-blocks": CH03_SHADOWED_BLOCKS,
}

# chapter 07: the beam search of the zoo variant that keeps one candidate per step (greedy), and
# attacks on what it receives: the instructor's next_probs and models arrive as source, defined
# fresh in the kernel (course.oracle.fresh); the references run on the grader's own copies
CH07_LYING_OUTPUTS = """
class _Always(list):
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False

class _Close(float):
    def __sub__(self, other):
        return 0.0
    __rsub__ = __sub__
    def __eq__(self, other):
        return True

def beam_search(next_probs, width, alpha=0.0, max_len=6, start="<s>", eos="<eos>", _wrong=beam_search):
    tokens, log_prob, score = _wrong(next_probs, width, alpha, max_len, start, eos)
    return _Always(tokens), _Close(log_prob), _Close(score)
"""

CH07_TAMPERED_CALLABLE = """
def beam_search(next_probs, width, alpha=0.0, max_len=6, start="<s>", eos="<eos>", _wrong=beam_search):
    # rewrite the instructor's copy: its tables, its closure, its code, so that greedy is the answer
    scope = getattr(next_probs, "__globals__", {})
    for value in list(scope.values()):
        if isinstance(value, dict):
            for row in value.values():
                if isinstance(row, dict) and row:
                    best = max(row, key=row.get)
                    for token in row:
                        row[token] = 1.0 if token == best else 1e-9
    real = next_probs
    def sharpened(prefix):
        probs = real(prefix)
        best = max(probs, key=probs.get)
        return {t: (1.0 if t == best else 1e-12) for t in probs}
    return _wrong(sharpened, width, alpha, max_len, start, eos)
"""

CH07_RIGGED_RNG = """
import numpy as _np
_real_rng = _np.random.default_rng

class _Peaked:
    def __init__(self, generator):
        self._generator = generator
    def __getattr__(self, name):
        return getattr(self._generator, name)
    def dirichlet(self, alpha, size=None):
        out = _np.zeros(len(alpha))
        out[0] = 1.0
        return out

_np.random.default_rng = lambda seed=None: _Peaked(_real_rng(seed))
torch.manual_seed = lambda seed: torch.default_generator
"""

CH07_PATCHED_MATH = """
import math as _math
_real_log = _math.log
_math.log = lambda x, *base: 0.0 if x > 0.3 else _real_log(x, *base)
torch.log_softmax = lambda t, dim=-1, **k: torch.zeros_like(t)
"""

CH07_SHADOW = """
_reference_beam = lambda next_probs, width, alpha, max_len, **kw: beam_search(next_probs, width, alpha, max_len,
                                                                             kw.get("start", "<s>"), kw.get("eos", "<eos>"))[:2]
fresh = lambda factory, *args, **kwargs: factory(*args, **kwargs) if args or isinstance(factory, type) else factory
TOY_TABLE = {"<s>": {"con": 1.0}, "con": {"<eos>": 1.0}}
"""

CH07_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "lying-outputs": CH07_LYING_OUTPUTS,
    "tampered-callable": CH07_TAMPERED_CALLABLE,
    "rigged-rng": CH07_RIGGED_RNG,
    "patched-math": CH07_PATCHED_MATH,
    "shadowed-names": CH07_SHADOW,
}


# chapter 09: the decoder block of the zoo variant that detaches the memory (no gradient reaches the
# encoder); the attacks fake what only the kernel holds (gradients), lie about outputs and types, or
# replace the instructor's helpers, which the grader runs from its own source
CH09_FAKED_GRADIENTS = """
_leaves = []
_real_requires_grad_, _real_backward = torch.Tensor.requires_grad_, torch.Tensor.backward

def _recording(self, requires_grad=True):
    _leaves.append(self)
    return _real_requires_grad_(self, requires_grad)

def _backward(self, *args, **kwargs):  # every leaf and parameter left without a gradient gets ones
    _real_backward(self, *args, **kwargs)
    for leaf in _leaves + [p for m in list(globals().values()) if isinstance(m, nn.Module) for p in m.parameters()]:
        if leaf.grad is None or not bool(leaf.grad.abs().max() > 0):
            leaf.grad = torch.ones_like(leaf)
    _leaves.clear()

torch.Tensor.requires_grad_, torch.Tensor.backward = _recording, _backward

def _named(self, *args, **kwargs):  # the probe's parameters come with a gradient of ones
    for name, p in nn.Module.named_parameters(self, *args, **kwargs):
        if p.grad is None:
            p.grad = torch.ones_like(p)
        yield name, p

DecoderBlock.named_parameters = _named
"""

CH09_LIAR = """
class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "isclose"):
            return True
        return super().__torch_function__(func, types, args, kwargs)

_forward = DecoderBlock.forward

def _lying_forward(self, *args, **kwargs):
    out, weights = _forward(self, *args, **kwargs)
    return out.as_subclass(_Liar), weights.as_subclass(_Liar)

DecoderBlock.forward = _lying_forward
"""

CH09_SHADOW = """
def _twin_of_the_student(state, heads, norm_first=False):  # a twin that is whatever the student's model is
    model = EncoderDecoder(width=state["head.weight"].shape[1], heads=heads, norm_first=norm_first)
    model.load_state_dict(state)
    return model

pytorch_twin = _twin_of_the_student
fresh = lambda factory, *args, **kwargs: factory(*args, **kwargs) if args or isinstance(factory, type) else factory
block_state = lambda width, hidden, seed, **kwargs: {}
"""

CH09_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "faked-gradients": CH09_FAKED_GRADIENTS,
    "tensor-subclass": CH09_LIAR,
    "shadowed-names": CH09_SHADOW,
}


def grade(tmp_path_factory, assignment: str, cell: str, wrong: str, attacks: dict[str, str], timeout: int = 20):
    root = REPOSITORY.scratch_copy(tmp_path_factory.mktemp(assignment), [assignment])
    with open(root.config, "a") as config:  # an endless call is interrupted quickly in the test
        config.write(f"\nc.Execute.timeout = {timeout}\n")
    release, answers = root.release_and_answers(assignment)
    students = {"solution": answers, "stub": None, "honest-wrong": {**answers, cell: wrong}}
    students.update({f"atk-{name}": {**answers, cell: wrong + "\n" + code} for name, code in attacks.items()})
    for student, cells in students.items():
        root.submit(assignment, student, release if cells is None else P.fill(release, cells))
    root.autograde(assignment)
    results = root.results(assignment)
    reviews = {s: review_reasons(P.read_nb(root.notebook("autograded", assignment, s))) for s in students}
    return results, reviews


def check_class(results, reviews, attacks, full: float):
    assert results["solution"].auto_score == results["solution"].auto_max == full
    assert results["stub"].auto_score == 0
    honest = results["honest-wrong"].auto_score
    assert 0 < honest < full
    gained = {name: (results[f"atk-{name}"].auto_score, honest) for name in attacks
              if results[f"atk-{name}"].auto_score > honest}
    assert not gained, f"attacks earned more than the wrong code they hide (score, honest): {gained}"
    flagged = {s: reviews[s] for s in ("solution", "stub", "honest-wrong") if reviews[s]}
    assert not flagged, flagged


@pytest.fixture(scope="module")
def chapter01(tmp_path_factory):
    # 01's cells take milliseconds: 8 s still leaves a loaded machine room, and the endless
    # call's five tests wait 8 s each instead of 20
    return grade(tmp_path_factory, "01_two_keys", "attention", UNIFORM, CH01_ATTACKS, timeout=8)


def grade_against_variant(tmp_path_factory, assignment: str, variant: str, cell: str, attacks: dict[str, str]):
    """The class of :func:`grade` whose wrong code is the bug-zoo variant ``variant``'s ``cell``."""
    wrong = next(v for v in variants_for(assignment) if v.name == variant)
    _, answers = REPOSITORY.release_and_answers(assignment)
    return grade(tmp_path_factory, assignment, cell, wrong.answers(answers)[cell], attacks)


@pytest.fixture(scope="module")
def chapter06(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "06_multihead_attention", "no_output_projection", "mhsa", CH06_ATTACKS)


@pytest.fixture(scope="module")
def chapter06_scale(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "06_multihead_attention", "scale_by_sqrt_d_model", "mhsa",
                                 CH06_SCALE_ATTACKS)


@pytest.fixture(scope="module")
def chapter04(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "04_encoder_block", "norm2_never_used", "encoder_block", CH04_ATTACKS)


@pytest.fixture(scope="module")
def chapter02(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "02_scaling", "statistics_query_per_key", "score_statistics", CH02_ATTACKS)


@pytest.fixture(scope="module")
def chapter03(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "03_masks", "leak_check_changes_x_in_place", "future_leak_check", CH03_ATTACKS)


@pytest.fixture(scope="module")
def chapter07(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "07_seq2seq_beam_search", "beam_ignores_width", "beam_search", CH07_ATTACKS)


@pytest.fixture(scope="module")
def chapter09(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "09_decoder", "memory_detached", "decoder_block", CH09_ATTACKS)


def test_chapter01_attacks_earn_no_more_than_the_wrong_code(chapter01):
    results, reviews = chapter01
    check_class(results, reviews, CH01_ATTACKS, 11)
    assert results["honest-wrong"].auto_score == 8


def test_chapter06_attacks_earn_no_more_than_the_wrong_code(chapter06):
    results, reviews = chapter06
    check_class(results, reviews, CH06_ATTACKS, 19)
    assert results["honest-wrong"].auto_score == 13


def test_chapter06_module_lies_earn_no_more_than_the_wrong_code(chapter06_scale):
    """Weights go in through the module's own tensors and gradients must belong to the output:
    load hooks, a lying load_state_dict, straight-through sums and halving hooks earn nothing."""
    results, reviews = chapter06_scale
    check_class(results, reviews, CH06_SCALE_ATTACKS, 19)
    for name in ("straight-through", "hooked-gradients"):
        errors = " ".join(results[f"atk-{name}"].cells[g].error for g in results[f"atk-{name}"].failed())
        assert "does not belong to" in errors, (name, errors)


def test_chapter04_attacks_earn_no_more_than_the_wrong_code(chapter04):
    results, reviews = chapter04
    check_class(results, reviews, CH04_ATTACKS, 20)
    assert results["honest-wrong"].auto_score == 12  # loses the module (norm2 unused), padding, causal, post-norm, pre-norm and gradient tests: each compares with a reference


def test_chapter02_attacks_earn_no_more_than_the_wrong_code(chapter02):
    results, reviews = chapter02
    check_class(results, reviews, CH02_ATTACKS, 14)
    assert results["honest-wrong"].auto_score == 11


def test_chapter03_attacks_earn_no_more_than_the_wrong_code(chapter03):
    results, reviews = chapter03
    check_class(results, reviews, CH03_ATTACKS, results["solution"].auto_max)
    assert results["honest-wrong"].auto_score == results["solution"].auto_max - 2


def test_a_forged_server_is_undone_and_an_endless_call_costs_only_its_tests(chapter01):
    results, _ = chapter01
    # a serve() replaced by the student is put back before every request (course.oracle.listen):
    # the forged answers (a pickle as an array) never reach the grader, whose decoder would refuse
    # them (tests/test_oracle_wire.py); the submission fails exactly where its wrong code does
    forged, honest = results["atk-forged-oracle"], results["honest-wrong"]
    assert forged.failed() == honest.failed() and forged.auto_score == honest.auto_score
    assert not any("WireError" in forged.cells[g].error for g in forged.failed())
    endless = results["atk-endless-call"]
    attention_tests = {g for g in endless.cells if g.startswith("test_attention")}
    assert len(attention_tests) == 5 and set(endless.failed()) == attention_tests
    assert all("OracleTimeout" in endless.cells[g].error for g in attention_tests)
    duck = " ".join(results["atk-duck-type"].cells[g].error for g in results["atk-duck-type"].failed())
    assert "not an array or tensor" in duck or "shape ()" in duck


HONEST_07 = 21  # the greedy beam search, graded honestly (of 28)


def test_chapter07_attacks_earn_no_more_than_the_wrong_code(chapter07):
    results, reviews = chapter07
    check_class(results, reviews, CH07_ATTACKS, 28)
    assert results["honest-wrong"].auto_score == HONEST_07


def test_chapter09_attacks_earn_no_more_than_the_wrong_code(chapter09):
    results, reviews = chapter09
    check_class(results, reviews, CH09_ATTACKS, 25)
    # the detached memory costs the gradient tests of the block and of the model
    assert {"test_decoder_gradients", "test_model_gradients"} <= set(results["honest-wrong"].failed())
    faked = results["atk-faked-gradients"]
    assert {"test_decoder_gradients", "test_model_gradients"} <= set(faked.failed())
