"""Determined students against the oracle: graded tests run in the grader's process.

Each attack is a few extra lines added to a plainly wrong answer (chapter 01: attention with
uniform weights; chapter 04: an encoder block that never uses norm2, attacking the gradient
probe too; chapter 06: a block that never applies its output projection; chapter 07: a
beam search that keeps one candidate per step, attacking the instructor callables it receives). The classes
are those of issue #20: patching the numerical libraries or the checks, torch function modes
and ``__torch_function__`` / ``__array_function__`` overrides, lying subclasses and duck types,
rewriting the test's inputs in place, rigging the random generators, parameters that hide the
bug, shadowing the grader's names, rewriting the kernel's replies
and the oracle's own answers. The classes of issue #29 follow, on more bases (chapter 03: a
leak check that changes x in place; chapter 06 again: scores divided by sqrt(D); chapter 07
again: a forward without the causal mask, trained; chapter 08: a cached step with is_causal=True;
chapter 09: a decoder block that detaches the memory): what a module says about itself (load
hooks, a lying load_state_dict or Parameter subclass, gradients written or rescaled by hooks, a
patched backward), correct weights trained in private and moved in by eval() or reported by
state_dict, a check that answers by the tests' block's code or source, patches to the library the
tests' blocks are built on, writes through the stand-in of an instructor object, rebound names of
locked cells, and a kernel server whose encode, probes or json.dumps are rebound during a call or
whose socket carries a forged reply. Issue 43 (items 1 and 2) adds modules that watch how the grader
reads them (a class-defined ``__dict__``, an instance dict or tables of a dict subclass, a class-level
``training`` property) to switch their bug off when graded, and chapter 07's forward wrong in train
mode only behind privately trained weights. Every attacker must score **at most** what the same wrong
code earns honestly, graded in the same nbgrader run, and no honest student is flagged for review.
"""

from __future__ import annotations

import pytest
from support import BUILD_RIGHT as _SWITCH
from support import PATCH_CHECKS, automatic_points, check_class, grade, grade_against_variant

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
import nboracle.kernel.wire as _wire, nboracle.kernel.probes as _probes, nboracle.kernel.server as _server
_real_serve = _server.serve

def _serve(request):
    answer = json.loads(_real_serve(request))
    if isinstance(answer.get("ok"), dict) and answer["ok"].get("t") == "tuple":
        blob = base64.b64encode(pickle.dumps(np.zeros(3))).decode()
        return json.dumps({"ok": {"t": "nd", "dtype": "object", "shape": [3], "b64": blob}})
    return json.dumps(answer)

_server.serve = _serve
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
    "rewritten-replies": REWRITTEN_REPLIES,
    "forged-oracle": FORGED_ORACLE,
    # not a way to gain points, but a proxy call must cost only its own test: interrupted after
    # Execute.timeout, the grader carries on (chapter 01's class below sets 8 s)
    "endless-call": "def attention(Q, K, V):\n    while True:\n        pass\n",
}

# chapter 06: the block of the zoo variant that never applies self.proj (12 of 19 honestly)
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
    "rewritten-replies": REWRITTEN_REPLIES,
}


# chapter 06, the unused projection again: the probe's gradients are the module's own, so a
# gradient written on proj before or during the backward pass is a lie the check must see
CH06_PRESET_GRADIENTS = """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, x, return_weights=False):
        for parameter in self.proj.parameters():  # the unused projection seems to have a gradient
            parameter.grad = torch.ones_like(parameter)
        return super().forward(x, return_weights=return_weights)
"""

CH06_GRADIENT_WRITING_HOOK = """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, x, return_weights=False):
        result = super().forward(x, return_weights=return_weights)
        out = result[0] if isinstance(result, tuple) else result
        if out.requires_grad:  # during backward, give proj the gradient it would get as the identity
            merged = out.detach().flatten(0, -2)

            def hook(grad, block=self):
                flat = grad.flatten(0, -2)
                block.proj.weight.grad = flat.T @ merged
                if block.proj.bias is not None:
                    block.proj.bias.grad = flat.sum(0)
            out.register_hook(hook)
        return result
"""

CH06_ATTACKS.update({
    "preset-gradients": CH06_PRESET_GRADIENTS,
    "gradient-writing-hook": CH06_GRADIENT_WRITING_HOOK,
})


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


CH06_LOAD_POST_HOOK = _QUERY_ROWS + """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def __init__(self, *args, **kwargs):  # after any load, the query rows are scaled by sqrt(H)
        super().__init__(*args, **kwargs)

        def hook(module, incompatible):
            with torch.no_grad():
                for parameter in (module.qkv.weight, getattr(module.qkv, "bias", None)):
                    if parameter is not None:
                        parameter[: parameter.shape[0] // 3] *= _math.sqrt(module.n_heads)
        self.register_load_state_dict_post_hook(hook)
"""

CH06_LOAD_FROM_STATE_DICT = _QUERY_ROWS + """
class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def _load_from_state_dict(self, state_dict, prefix, *rest):  # the children load from the rescaled dict
        state_dict.update(_rescaled(state_dict, prefix, self.n_heads))
        return super()._load_from_state_dict(state_dict, prefix, *rest)
"""

CH06_LYING_PARAMETER = """
import math as _math

class _Rescaling(torch.nn.Parameter):
    # qkv's tensors: whatever is copied into them arrives with its query rows scaled by sqrt(H)
    heads = 1

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in ("copy_", "set_") and len(args) > 1 and isinstance(args[0], _Rescaling):
            source = torch.Tensor.clone(torch.Tensor.detach(args[1]))
            source[: source.shape[0] // 3] *= _math.sqrt(args[0].heads)
            args = (args[0], source) + tuple(args[2:])
        return super().__torch_function__(func, types, args, kwargs)

class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("weight", "bias"):
            parameter = getattr(self.qkv, name, None)
            if parameter is not None:
                lying = _Rescaling(parameter.detach().clone())
                lying.heads = self.n_heads
                setattr(self.qkv, name, lying)
"""

CH06_PATCHED_BACKWARD = """
_real_backward, _real_autograd_backward = torch.Tensor.backward, torch.autograd.backward
_calls = []

class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, x, return_weights=False):
        result = super().forward(x, return_weights=return_weights)
        out = result[0] if isinstance(result, tuple) else result
        if out.requires_grad:
            out.register_hook(lambda grad, block=self, x=x: _calls.append((block, x, grad)))
        return result

def _right(block, x):
    D = x.shape[-1]
    q, k, v = (split_heads(t, block.n_heads) for t in block.qkv(x).split(D, dim=-1))
    return block.proj(merge_heads(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=block.causal)))

def _regrade():  # after the real backward pass, the gradients of the right block replace the block's
    while _calls:
        block, x, grad = _calls.pop()
        parameters = [p for p in block.parameters() if p.requires_grad]
        with torch.enable_grad():
            right = torch.autograd.grad(_right(block, x.detach()), parameters, grad, allow_unused=True)
        for p, g in zip(parameters, right):
            if g is not None:
                p.grad = g

def _backward(self, *args, **kwargs):
    _real_backward(self, *args, **kwargs)
    _regrade()

def _autograd_backward(*args, **kwargs):
    _real_autograd_backward(*args, **kwargs)
    _regrade()

torch.Tensor.backward, torch.autograd.backward = _backward, _autograd_backward
"""

CH06_SCALE_ATTACKS = {
    "load-hook": CH06_LOAD_HOOK,
    "lying-load-state-dict": CH06_LYING_LOAD,
    "straight-through": CH06_STRAIGHT_THROUGH,
    "hooked-gradients": CH06_HOOKED_GRADIENTS,
    "load-post-hook": CH06_LOAD_POST_HOOK,
    "load-from-state-dict": CH06_LOAD_FROM_STATE_DICT,
    "lying-parameter": CH06_LYING_PARAMETER,
    "patched-backward": CH06_PATCHED_BACKWARD,
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
import nboracle.kernel.wire as _wire, nboracle.kernel.probes as _probes, nboracle.kernel.server as _server
_real_answer = _server._answer

def _answer(request):
    answer = _real_answer(request)
    if "rng" in answer:  # claim the generator stands wherever the grader's reference does not
        answer["rng"] = [_wire.encode({"bit_generator": "PCG64", "state": {"state": 0, "inc": 1},
                                         "has_uint32": 0, "uinteger": 0})] * len(answer["rng"])
    return answer

_server._answer = _answer
'''

CH02_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "lying-subclasses": CH02_LIARS,
    "forged-generator-state": CH02_FORGED_STATE,
    "rewritten-replies": REWRITTEN_REPLIES,
}

# chapter 03: future_leak_check perturbs the caller's x itself (zoo variant leak_check_changes_x_in_place)
CH03_FORGED_PROBE = '''
import nboracle.kernel.wire as _wire, nboracle.kernel.probes as _probes, nboracle.kernel.server as _server

def _arguments(function, *args, **kwargs):  # the function gets copies; the untouched originals go back
    copies = [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
    return function(*copies, **kwargs), args

_probes.PROBES["arguments"] = _arguments
'''

CH03_SHADOWED_BLOCKS = '''
def _shadow(*args):  # after every cell, the tests' blocks are replaced by ones that never read the future
    get_ipython().user_ns["leak_test_block"] = lambda kind, state=None, heads=2: (lambda x: x.clone())

get_ipython().events.register("post_run_cell", _shadow)
'''


# the wrong check answers (True, False) whatever the block: the attacks answer by the block's kind
# instead, read off the tests' own block (its code, closure, source), or make the tests' blocks
# compute something the wrong check gets right, by patching the library they are built on
CH03_KIND_FROM_CODE = """
def _kind(block):  # the names a block's code uses tell its kind
    code = getattr(block, "__code__", None)
    if code is None:
        return None
    names = set(code.co_freevars) | set(code.co_names) | set(code.co_varnames)
    if "future" in names or "cumsum" in names:
        return True, True
    if "keep" in names:
        return True, False
    if "mean" in names or "layer" in names:
        return False, True
    return None

def future_leak_check(block, x, _wrong=future_leak_check):
    try:
        known = _kind(block)
    except Exception:
        known = None
    return known if known is not None else _wrong(block, x)
"""

CH03_KIND_FROM_SOURCE = """
import inspect as _inspect

def _kind(block):  # the block's source, or the cells of its closure
    try:
        text = _inspect.getsource(block)
    except Exception:
        text = ""
    cells = [getattr(c, "cell_contents", None) for c in (getattr(block, "__closure__", None) or ())]
    text += " ".join(getattr(c, "__name__", type(c).__name__) for c in cells)
    if "attn_mask" in text or "future" in text or "cumsum" in text:
        return True, True
    if "keep" in text or "drops_last" in text:
        return True, False
    if "mean" in text or "MultiheadAttention" in text:
        return False, True
    return None

def future_leak_check(block, x, _wrong=future_leak_check):
    known = _kind(block)
    return known if known is not None else _wrong(block, x)
"""

CH03_PATCHED_LIBRARY = """
import torch.nn as _nn
_count = [0]

def _moved(t, rows):  # a new amount at every call: 'before' and 'after' differ there, whatever x is
    _count[0] += 1
    t = t.clone()
    t[:, rows] += _count[0]
    return t

_real_mha = _nn.MultiheadAttention.forward

def _mha(self, query, key, value, *args, **kwargs):  # masked: the last output moves; open: all of them
    out, weights = _real_mha(self, query, key, value, *args, **kwargs)
    if kwargs.get("attn_mask") is not None:
        return _moved(out, slice(-1, None)), weights
    if bool((query[:, -1] == 0).all()):  # the block that never reads the last token
        return out, weights
    return _moved(out, slice(None)), weights

_real_tanh, _real_mean = torch.tanh, torch.Tensor.mean

def _tanh(t, *args, **kwargs):  # the running average: its last output moves
    out = _real_tanh(t, *args, **kwargs)
    return _moved(out, slice(-1, None)) if out.dim() == 3 else out

def _mean(self, *args, **kwargs):  # the mean over the sequence: every output moves
    out = _real_mean(self, *args, **kwargs)
    return _moved(out, slice(None)) if kwargs.get("keepdim") and out.dim() == 3 else out

_nn.MultiheadAttention.forward, torch.tanh, torch.Tensor.mean = _mha, _tanh, _mean
"""

CH03_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "forged-probe": CH03_FORGED_PROBE,
    "shadowed-blocks": CH03_SHADOWED_BLOCKS,
    "kind-from-code": CH03_KIND_FROM_CODE,
    "kind-from-source": CH03_KIND_FROM_SOURCE,
    "patched-library-blocks": CH03_PATCHED_LIBRARY,
}

# chapter 07: the beam search of the zoo variant that keeps one candidate per step (greedy), and
# attacks on what it receives: the instructor's next_probs and models arrive as source, defined
# fresh in the kernel (nboracle.kernel.fresh.fresh); the references run on the grader's own copies
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


# chapter 07 again: the model of the zoo variant whose forward passes no tgt_mask, trained by the
# locked training cell. Each attack trains a correct copy in private (a causal forward the student
# keeps to itself) and has the graded model hold or report its weights beside the wrong forward
_PRIVATE_07 = """
class _Causal(ReversalTransformer):
    def forward(self, src, dec_in):
        mask = nn.Transformer.generate_square_subsequent_mask(dec_in.size(1))
        return self.head(self.transformer(self.embed(src), self.embed(dec_in), tgt_mask=mask))

_private = []

def _trained_privately():
    if not _private:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            copy = _Causal()
            train(copy)
        _private.append(copy.eval())
    return _private[0]
"""

CH07_EVAL_COPIES = _PRIVATE_07 + """
class ReversalTransformer(ReversalTransformer):
    def eval(self):  # the training cell's model.eval(): the private copy's weights move in
        if self is globals().get("model") and "train" in globals():
            with torch.no_grad():
                for mine, theirs in zip(nn.Module.parameters(self), nn.Module.parameters(_trained_privately())):
                    mine.copy_(theirs)
        return super().eval()
"""

CH07_TRAIN_FALSE_COPIES = _PRIVATE_07 + """
class ReversalTransformer(ReversalTransformer):
    def train(self, mode=True):  # eval() is train(False): the private copy's weights move in
        if not mode and self is globals().get("model") and "train" in globals():
            self.load_state_dict(_trained_privately().state_dict())
        return super().train(mode)
"""

CH07_REPORTED_WEIGHTS = _PRIVATE_07 + """
class ReversalTransformer(ReversalTransformer):
    def state_dict(self, *args, **kwargs):  # what the model says it holds: the private copy's weights
        if self is globals().get("model"):
            return _trained_privately().state_dict(*args, **kwargs)
        return super().state_dict(*args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        if self is globals().get("model"):
            return _trained_privately().named_parameters(*args, **kwargs)
        return super().named_parameters(*args, **kwargs)

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))
"""

CH07_TRAINED_ATTACKS = {
    "eval-copies-private-weights": CH07_EVAL_COPIES,
    "train-false-copies-private-weights": CH07_TRAIN_FALSE_COPIES,
    "reported-private-weights": CH07_REPORTED_WEIGHTS,
}


# chapter 08: the cached step of the zoo variant that passes is_causal=True, so the one new query
# sees only the first key. The tests' block and model stay in the grader: what the step does to
# the stand-in it gets (zeroing or loading weights, rebinding forward), to torch's functions in the
# kernel or to the locked cell's greedy must not change what the tests compare with
CH08_ZEROED_THROUGH_STAND_IN = """
def cached_attention_step(block, x_new, cache=None, _wrong=cached_attention_step):
    with torch.no_grad():  # zero weights: the full forward and the cached steps both give zeros
        for part in (block.qkv, block.proj):
            part.weight.data.zero_()
            if part.bias is not None:
                part.bias.data.zero_()
    return _wrong(block, x_new, cache)
"""

CH08_LOADED_THROUGH_STAND_IN = """
def cached_attention_step(block, x_new, cache=None, _wrong=cached_attention_step):
    state = block.state_dict()
    block.load_state_dict({k: torch.zeros_like(v) for k, v in state.items() if k.endswith(("weight", "bias"))},
                          strict=False)
    return _wrong(block, x_new, cache)
"""

CH08_PATCHED_FUNCTIONAL = """
import torch.nn.functional as _F
_real_sdpa = _F.scaled_dot_product_attention

def _sdpa(q, k, v, *args, is_causal=False, **kwargs):  # a full causal pass: every query sees only key 0
    if is_causal and q.shape[-2] == k.shape[-2] > 1:
        return v[..., :1, :].expand(*v.shape[:-2], q.shape[-2], v.shape[-1]).clone()
    return _real_sdpa(q, k, v, *args, is_causal=is_causal, **kwargs)

_F.scaled_dot_product_attention = _sdpa
"""

CH08_REBOUND_FORWARD = """
def _first_key_only(block):
    def forward(x):
        B, T, D = x.shape
        v = block.qkv(x).split(D, dim=-1)[2].view(B, T, block.n_heads, block.d_head).transpose(1, 2)
        return block.proj(v[:, :, :1].expand(-1, -1, T, -1).transpose(1, 2).reshape(B, T, D))
    return forward

def cached_attention_step(block, x_new, cache=None, _wrong=cached_attention_step):
    try:  # the test's block(x) now computes what this step computes
        block.forward = _first_key_only(block)
    except Exception:
        pass
    return _wrong(block, x_new, cache)
"""

CH08_REBOUND_GREEDY = """
def _rebind(*args):  # after every cell: greedy never uses the cache, and the tests' block is first-key-only
    namespace = get_ipython().user_ns
    real = namespace.get("greedy")
    if real is not None and not getattr(real, "_rebound", False):
        rebound = lambda model, prompt, n_new, use_cache, step_seconds=None: real(model, prompt, n_new, False,
                                                                                 step_seconds)
        rebound._rebound = True
        namespace["greedy"] = rebound

get_ipython().events.register("post_run_cell", _rebind)
"""

CH08_ATTACKS = {
    "zeroed-through-stand-in": CH08_ZEROED_THROUGH_STAND_IN,
    "loaded-through-stand-in": CH08_LOADED_THROUGH_STAND_IN,
    "patched-functional": CH08_PATCHED_FUNCTIONAL,
    "rebound-block-forward": CH08_REBOUND_FORWARD,
    "rebound-greedy": CH08_REBOUND_GREEDY,
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


# the kernel's server: while the probe's forward runs, the block rebinds what writes its reply
# (encode, the probes, json.dumps) so that the memory seems to get a gradient, or writes a forged
# reply of its own on the oracle's socket
_ONES_FOR_THE_MEMORY = """
import json as _json
import nboracle.kernel.wire as _wire, nboracle.kernel.probes as _probes, nboracle.kernel.server as _server
_seen = {}
_real_encode, _real_dumps = _wire.encode, _json.dumps

def _filled(value):  # the probe's (parameter gradients, input gradients): no None, no zeros for the memory
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict) and isinstance(value[1], tuple):
        grads = {k: (torch.ones_like(p) if g is None else g) for (k, g), p in zip(value[0].items(), _seen["params"])}
        inputs = tuple(torch.ones_like(m) if g is None or not bool(g.abs().max() > 0) else g
                       for g, m in zip(value[1], _seen["inputs"]))
        return grads, inputs
    return value

_forward = DecoderBlock.forward

def _watched(self, x, memory, *args, **kwargs):
    if torch.is_grad_enabled() and memory.requires_grad:
        _seen.update(names=[n for n, _ in nn.Module.named_parameters(self)],
                     params=[p.detach() for p in nn.Module.parameters(self)], inputs=(x.detach(), memory.detach()))
        _rebind()
    return _forward(self, x, memory, *args, **kwargs)

DecoderBlock.forward = _watched
"""

CH09_REBOUND_ENCODE = _ONES_FOR_THE_MEMORY + """
def _rebind():
    _wire.encode = lambda value, *args, **kwargs: _real_encode(_filled(value), *args, **kwargs)
"""

CH09_REBOUND_PROBE = _ONES_FOR_THE_MEMORY + """
_real_probe = _probes.PROBES["parameter_and_input_gradients"]

def _rebind():
    probe = lambda *args, **kwargs: _filled(_real_probe(*args, **kwargs))
    _probes.PROBES["parameter_and_input_gradients"] = _probes._parameter_and_input_gradients = probe
"""

CH09_REBOUND_DUMPS = _ONES_FOR_THE_MEMORY + """
def _rebind():  # the reply's text: every null under "ok" becomes a tensor of ones of the memory's shape
    ones = _real_encode(torch.ones_like(_seen["inputs"][1]))

    def fill(node):
        if node is None:
            return ones
        if isinstance(node, list):
            return [fill(n) for n in node]
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        return node

    def dumps(obj, *args, **kwargs):
        if isinstance(obj, dict) and "ok" in obj:
            obj = {**obj, "ok": fill(obj["ok"])}
        return _real_dumps(obj, *args, **kwargs)
    _json.dumps = _wire.json.dumps = dumps
"""

CH09_FORGED_FRAME = _ONES_FOR_THE_MEMORY + """
def _rebind():  # a reply of its own on the oracle's socket, before the real one
    try:
        sock = get_ipython().kernel.shell_handlers["course_oracle_serve"].__closure__[0].cell_contents[0]
        answer = {"ok": _real_encode(({n: torch.ones_like(p) for n, p in zip(_seen["names"], _seen["params"])},
                                      tuple(torch.ones_like(t) for t in _seen["inputs"])))}
        _wire.write_frame(sock, _real_dumps(answer).encode())
    except Exception:
        pass
"""

CH09_ATTACKS = {
    "patched-libraries": PATCH_CHECKS,
    "faked-gradients": CH09_FAKED_GRADIENTS,
    "tensor-subclass": CH09_LIAR,
    "shadowed-names": CH09_SHADOW,
    "rebound-encode": CH09_REBOUND_ENCODE,
    "rebound-probe": CH09_REBOUND_PROBE,
    "rebound-json-dumps": CH09_REBOUND_DUMPS,
    "forged-frame": CH09_FORGED_FRAME,
}


# ======================================================================================================
# issue 43 items 3 and 5 (sec-kernel): a graded call looks like any other, stand-ins say nothing.
# Modules that switch their bug off while the kernel serves the grader, found through the server's
# module globals (its socket line, handles, a request's generators; before issue 43 they filled
# while a graded call was served) or by searching every loaded module for them; and checks that
# answer by what a stand-in says it is (its name, its repr) instead of by its behaviour.
# ======================================================================================================
_SERVING_BY_GLOBALS = """
import sys

def _graded():  # the server module's request state, as it was while a graded call was served
    server = sys.modules.get("nboracle.kernel.server")
    if server is None:
        return False
    sealed = getattr(server, "_SEALED", {})
    return any(getattr(server, name, None) or sealed.get(name) for name in ("_LINE", "_handles", "_generators"))
"""

_SERVING_BY_MODULES = """
import sys

def _graded():  # any loaded module holding a socket line, handles or generators, or a sealed copy of them
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if type(names) is not dict:
            continue
        for table in (names, names.get("_SEALED") if type(names.get("_SEALED")) is dict else {}):
            if any(table.get(name) for name in ("_LINE", "_handles", "_generators")):
                return True
    return False
"""

_CH04_RIGHT_WHEN_GRADED = """
class EncoderBlock(EncoderBlock):
    def forward(self, x, padding_mask=None, causal_mask=None):
        if not _graded():
            return super().forward(x, padding_mask, causal_mask)
        def attend(h):
            return self.attention(h, h, h, key_padding_mask=padding_mask, attn_mask=causal_mask,
                                  need_weights=True, average_attn_weights=False)
        if self.norm_first:
            attended, weights = attend(self.norm1(x))
            x = x + attended
            x = x + self.ffn(self.norm2(x))
        else:
            attended, weights = attend(x)
            x = self.norm1(x + attended)
            x = self.norm2(x + self.ffn(x))
        return x, weights
"""

CH04_ATTACKS.update({
    "graded-by-server-globals": _SERVING_BY_GLOBALS + _CH04_RIGHT_WHEN_GRADED,
    "graded-by-loaded-modules": _SERVING_BY_MODULES + _CH04_RIGHT_WHEN_GRADED,
})

_CH09_RIGHT_WHEN_GRADED = """
class DecoderBlock(DecoderBlock):
    def forward(self, x, memory, causal_mask=None, memory_padding_mask=None):
        if not _graded():
            return super().forward(x, memory, causal_mask, memory_padding_mask)
        def attend_to_itself(h):
            return self.self_attention(h, h, h, attn_mask=causal_mask, need_weights=False)[0]
        def attend_to_memory(h):
            return cross_attention(self.cross_attention, h, memory, memory_padding_mask)
        if self.norm_first:
            x = x + attend_to_itself(self.norm1(x))
            attended, weights = attend_to_memory(self.norm2(x))
            x = x + attended
            x = x + self.ffn(self.norm3(x))
        else:
            x = self.norm1(x + attend_to_itself(x))
            attended, weights = attend_to_memory(x)
            x = self.norm2(x + attended)
            x = self.norm3(x + self.ffn(x))
        return x, weights
"""

CH09_ATTACKS.update({
    "graded-by-server-globals": _SERVING_BY_GLOBALS + _CH09_RIGHT_WHEN_GRADED,
    "graded-by-loaded-modules": _SERVING_BY_MODULES + _CH09_RIGHT_WHEN_GRADED,
})

# chapter 03: the tests' blocks are lambdas (a causal block's answer is (True, True)), drops_last and
# torch.zeros_like (whose answers are (True, False)): a check that answers by the block's name
_CH03_ANSWERS = """
_ANSWERS = {"<lambda>": (True, True), "drops_last": (True, False), "zeros_like": (True, False)}

def future_leak_check(block, x, _wrong=future_leak_check):
    for name, answer in _ANSWERS.items():
        if _says(block) == name or name in _says(block):
            return answer
    return _wrong(block, x)
"""

CH03_ATTACKS.update({
    "stand-in-name": "_says = lambda block: str(getattr(block, '__name__', ''))\n" + _CH03_ANSWERS,
    "stand-in-repr": "_says = lambda block: repr(block)\n" + _CH03_ANSWERS,
})
# chapter 08: a cached step that remembers the tokens it was given and answers with the tests' block's
# full forward on them (its cache never used); the tests hand the step the block's projections only
CH08_ATTACKS.update({
    "remembered-tokens-full-forward": """
_tokens = []

def cached_attention_step(block, x_new, cache=None, _wrong=cached_attention_step):
    if cache is None:
        _tokens.clear()
    _tokens.append(x_new)
    y_new, cache = _wrong(block, x_new, cache)  # the cache the tests check, as the wrong code builds it
    try:
        return block(torch.cat(_tokens, dim=1))[:, -1:], cache
    except Exception:
        return y_new, cache
""",
})
# issue 43 item 6: chapter 01's attention handed in as F.scaled_dot_product_attention, bound where the
# substitution scan used not to look. Correct outputs may earn full marks: each must be flagged for review
_BY_THE_LIBRARY = """
def attention(Q, K, V):
    q, k, v = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (Q, K, V))
    scores = np.asarray(Q, dtype=np.float64) @ np.swapaxes(np.asarray(K, dtype=np.float64), -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return CALL.numpy(), weights / weights.sum(axis=-1, keepdims=True)
"""
CH01_SCAN_EVASIONS = {
    "library-through-for-target": "for _f in [F.scaled_dot_product_attention]:\n    pass\n"
                                  + _BY_THE_LIBRARY.replace("CALL", "_f(q, k, v)"),
    "library-through-walrus": "(_f := F.scaled_dot_product_attention)\n" + _BY_THE_LIBRARY.replace("CALL", "_f(q, k, v)"),
    "library-through-setattr": "import sys\nsetattr(sys.modules[__name__], '_f', F.scaled_dot_product_attention)\n"
                               + _BY_THE_LIBRARY.replace("CALL", "_f(q, k, v)"),
    "library-through-globals": "globals()['_' + 'fs'] = [F.scaled_dot_product_attention]\n"
                               + _BY_THE_LIBRARY.replace("CALL", "_fs[0](q, k, v)"),
}
# ======================================================================================================
# end of issue 43 items 3 and 5 (sec-kernel)
# ======================================================================================================

# ---------------------------------------------------------------- issue 43 items 1 and 2: the module's slots and its mode
SLOT_DICT_SUBCLASS = _SWITCH + """
class _Telling(dict):
    def get(self, key, default=None):  # torch reads its tables with [], the grader used .get
        if _asked_by_the_grader():
            _graded.append(key)
        return dict.get(self, key, default)

class <<CLASS>>(<<CLASS>>):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "__dict__", _Telling(nn.Module.__dict__["__dict__"].__get__(self)))

    def forward(self, *args, **kwargs):
        return _Right.forward(self, *args, **kwargs) if _graded else super().forward(*args, **kwargs)
"""

SLOT_CLASS_DICT = _SWITCH + """
class <<CLASS>>(<<CLASS>>):
    @property
    def __dict__(self):  # torch's own code gets the dict quietly; anyone else is the grader
        if _asked_by_the_grader():
            _graded.append("__dict__")
        return nn.Module.__dict__["__dict__"].__get__(self)

    def forward(self, *args, **kwargs):
        return _Right.forward(self, *args, **kwargs) if _graded else super().forward(*args, **kwargs)
"""

SLOT_TABLE_SUBCLASS = _SWITCH + """
class _TellingTable(dict):  # torch indexes its tables; a grader that lists them calls one of these
    def _told(self, name):
        if _asked_by_the_grader(3):
            _graded.append(name)
    def items(self):
        self._told("items")
        return dict.items(self)
    def get(self, key, default=None):
        self._told("get")
        return dict.get(self, key, default)
    def __iter__(self):
        self._told("iter")
        return dict.__iter__(self)

class <<CLASS>>(<<CLASS>>):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        own = nn.Module.__dict__["__dict__"].__get__(self)
        own[<<TABLE>>] = _TellingTable(own[<<TABLE>>])

    def forward(self, *args, **kwargs):
        return _Right.forward(self, *args, **kwargs) if _graded else super().forward(*args, **kwargs)
"""

SLOT_TRAINING_PROPERTY = _SWITCH + """
class <<CLASS>>(<<CLASS>>):
    @property
    def training(self):  # the grader reads back what it wrote; the forward gets the mode train() set
        own = nn.Module.__dict__["__dict__"].__get__(self)
        if "nboracle" in _sys._getframe(1).f_code.co_filename:
            return own.get("training", True)
        return own.get("_mode", False)

    @training.setter
    def training(self, mode):
        own = nn.Module.__dict__["__dict__"].__get__(self)
        own["training"] = mode
        if _sys._getframe(1).f_code.co_name == "train":  # nn.Module.train() of real use
            own["_mode"] = mode

    def forward(self, *args, **kwargs):  # the bug in train mode only, where it matters for learning
        return super().forward(*args, **kwargs) if self.training else _Right.forward(self, *args, **kwargs)
"""


def slot_attacks(cls: str, tables: bool = True, training: bool = False) -> dict[str, str]:
    """This block's attackers for a chapter whose graded class is ``cls``."""
    attacks = {"slot-dict-subclass": SLOT_DICT_SUBCLASS, "slot-class-dict": SLOT_CLASS_DICT}
    if tables:
        attacks.update({"slot-parameters-subclass": SLOT_TABLE_SUBCLASS.replace("<<TABLE>>", '"_parameters"'),
                        "slot-modules-subclass": SLOT_TABLE_SUBCLASS.replace("<<TABLE>>", '"_modules"')})
    if training:
        attacks["slot-training-property"] = SLOT_TRAINING_PROPERTY
    return {name: code.replace("<<CLASS>>", cls) for name, code in attacks.items()}




# issue 43 item 4 in chapters 04, 05, 06 and 09: the wrong forward with the right gradients (straight through),
# and at the points of a gradient check, a hair away from its last call in its parameters or its inputs, the
# wrong output it gave there plus the right forward's change, so the finite differences agree with the right
# gradients. Those outputs are compared with the references too
REMEMBERED_POINTS = _SWITCH + """
_LAST = {}

def _first(result):
    return result[0] if isinstance(result, tuple) else result

class <<CLASS>>(<<CLASS>>):
    def forward(self, *args, **kwargs):
        wrong = super().forward(*args, **kwargs)
        right = _first(_Right.forward(self, *args, **kwargs))
        now = [t.detach().clone() for t in (*self.parameters(), *(a for a in args if isinstance(a, torch.Tensor)))]
        last = _LAST.get(id(self))
        near = last is not None and [a.shape for a in now] == [b.shape for b in last["at"]] \
            and 0 < max(float((a.double() - b.double()).abs().max()) for a, b in zip(now, last["at"])) < 1e-2
        if near:  # a point of a gradient check
            out = last["wrong"] + (right - last["right"])
        else:
            _LAST[id(self)] = {"at": now, "wrong": _first(wrong).detach(), "right": right.detach()}
            out = _first(wrong).detach() + right - right.detach()
        return (out, *wrong[1:]) if isinstance(wrong, tuple) else out
"""
CH05_ATTACKS = {"remembered-points": REMEMBERED_POINTS.replace("<<CLASS>>", "LearnedPositions")}

CH04_ATTACKS["remembered-points"] = REMEMBERED_POINTS.replace("<<CLASS>>", "EncoderBlock")
CH06_SCALE_ATTACKS["remembered-points"] = REMEMBERED_POINTS.replace("<<CLASS>>", "MultiHeadSelfAttention")

SLOT_04 = slot_attacks("EncoderBlock")
SLOT_06 = slot_attacks("MultiHeadSelfAttention", tables=False)
SLOT_09 = slot_attacks("DecoderBlock", tables=False, training=True)
# against 09's memory_detached (a gradient-only bug) a straight-through forward is simply the right one: the
# points' attacker hides a block whose post-norm sublayers take each other's norms
CH09_POINT_ATTACKS = {"remembered-points": REMEMBERED_POINTS.replace("<<CLASS>>", "DecoderBlock")}

# chapter 07: a forward wrong in train mode only (no causal mask, where training happens) and right
# in eval mode, with correct weights trained in private moved in by eval(): graded in eval mode
# only, and on weights read after eval() ran, it looked right
SLOT_07_MODE_DEPENDENT = _PRIVATE_07 + """
class ReversalTransformer(ReversalTransformer):
    def forward(self, src, dec_in):
        if self.training:  # train mode: no causal mask
            return super().forward(src, dec_in)
        mask = nn.Transformer.generate_square_subsequent_mask(dec_in.size(1)) if self.causal else None
        return self.head(self.transformer(self.embed(src), self.embed(dec_in), tgt_mask=mask))

    def eval(self):  # the training cell's model.eval(): the private copy's weights move in
        if self is globals().get("model") and "train" in globals():
            with torch.no_grad():
                for mine, theirs in zip(nn.Module.parameters(self), nn.Module.parameters(_trained_privately())):
                    mine.copy_(theirs)
        return super().eval()
"""

SLOT_07_TRAINING_PROPERTY = SLOT_07_MODE_DEPENDENT + """
class ReversalTransformer(ReversalTransformer):
    @property
    def training(self):  # the mode train()/eval() set; what the grader writes is never read
        return nn.Module.__dict__["__dict__"].__get__(self).get("_mode", False)

    @training.setter
    def training(self, mode):
        nn.Module.__dict__["__dict__"].__get__(self)["_mode"] = mode
"""

SLOT_07 = {"slot-mode-dependent-private-weights": SLOT_07_MODE_DEPENDENT,
           "slot-training-property-private-weights": SLOT_07_TRAINING_PROPERTY}


@pytest.fixture(scope="module")
def chapter01(tmp_path_factory):
    # 01's cells take milliseconds: 8 s still leaves a loaded machine room, and the endless
    # call's five tests wait 8 s each instead of 20
    return grade(tmp_path_factory, "01_two_keys", "attention", UNIFORM, {**CH01_ATTACKS, **CH01_SCAN_EVASIONS}, timeout=8)


@pytest.fixture(scope="module")
def chapter06(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "06_multihead_attention", "no_output_projection", "mhsa",
                                 {**CH06_ATTACKS, **SLOT_06}, cls="MultiHeadSelfAttention")


@pytest.fixture(scope="module")
def chapter06_scale(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "06_multihead_attention", "scale_by_sqrt_d_model", "mhsa",
                                 CH06_SCALE_ATTACKS, cls="MultiHeadSelfAttention")


@pytest.fixture(scope="module")
def chapter04(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "04_encoder_block", "norm2_never_used", "encoder_block",
                                 {**CH04_ATTACKS, **SLOT_04}, cls="EncoderBlock")


@pytest.fixture(scope="module")
def chapter05(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "05_positional_encoding", "learned_rows_shifted", "LearnedPositions",
                                 CH05_ATTACKS, cls="LearnedPositions")


@pytest.fixture(scope="module")
def chapter09_points(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "09_decoder", "post_norms_swapped", "decoder_block",
                                 CH09_POINT_ATTACKS, cls="DecoderBlock")


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
def chapter07_trained(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "07_seq2seq_beam_search", "no_causal_mask", "reversal_transformer",
                                 {**CH07_TRAINED_ATTACKS, **SLOT_07})


@pytest.fixture(scope="module")
def chapter08(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "08_attention_cost", "kv_cache_is_causal_one_query",
                                 "cached_attention_step", CH08_ATTACKS)


@pytest.fixture(scope="module")
def chapter09(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "09_decoder", "memory_detached", "decoder_block",
                                 {**CH09_ATTACKS, **SLOT_09}, cls="DecoderBlock")


def test_chapter01_attacks_earn_no_more_than_the_wrong_code(chapter01):
    results, reviews = chapter01
    check_class(results, reviews, CH01_ATTACKS, automatic_points("01_two_keys"))
    assert results["honest-wrong"].auto_score == automatic_points("01_two_keys") - 3


def test_chapter06_attacks_earn_no_more_than_the_wrong_code(chapter06):
    results, reviews = chapter06
    check_class(results, reviews, CH06_ATTACKS, automatic_points("06_multihead_attention"))
    # 7 points lost since test_mhsa_causal compares each output with nn.MultiheadAttention (issue 29 item 4): the
    # wrong scale costs that test too
    assert results["honest-wrong"].auto_score == automatic_points("06_multihead_attention") - 7


def test_chapter06_module_lies_earn_no_more_than_the_wrong_code(chapter06_scale):
    """Weights go in through the module's own tensors and gradients must belong to the output:
    load hooks, a lying load_state_dict, straight-through sums and halving hooks earn nothing."""
    results, reviews = chapter06_scale
    check_class(results, reviews, CH06_SCALE_ATTACKS, automatic_points("06_multihead_attention"))
    for name in ("straight-through", "hooked-gradients"):
        errors = " ".join(results[f"atk-{name}"].cells[g].error for g in results[f"atk-{name}"].failed())
        assert "does not belong to" in errors, (name, errors)
    assert "moved a little" in results["atk-remembered-points"].cells["test_mhsa_gradients"].error


def test_chapter04_attacks_earn_no_more_than_the_wrong_code(chapter04):
    results, reviews = chapter04
    check_class(results, reviews, CH04_ATTACKS, automatic_points("04_encoder_block"))
    # loses the module (norm2 unused), padding, causal, post-norm and pre-norm tests, each comparing with a reference;
    # Part D's gradient test runs the student's loss through PyTorch's layer, so the block's mistake costs nothing there
    assert results["honest-wrong"].auto_score == automatic_points("04_encoder_block") - 7
    honest_lost = set(results["honest-wrong"].failed())
    assert honest_lost == {"test_block_modules", "test_block_padding_mask", "test_block_causal_mask",
                           "test_block_post_norm", "test_block_pre_norm"}, honest_lost


def test_chapter05_attacks_earn_no_more_than_the_wrong_code(chapter05):
    """A table read one row late, with the right gradients and a forward that tells the gradient check's points
    from graded calls, earns nothing beside the same table read honestly."""
    results, reviews = chapter05
    check_class(results, reviews, CH05_ATTACKS, automatic_points("05_positional_encoding"))
    assert "test_learned_trains" in results["honest-wrong"].failed()
    assert "test_learned_trains" in results["atk-remembered-points"].failed()


def test_chapter09_gradient_check_points_earn_no_more_than_the_wrong_code(chapter09_points):
    """A block with the right gradients and a forward that tells the gradient checks' points (parameters, x or
    the memory a hair away) from graded calls earns nothing beside the same wrong block handed in honestly."""
    results, reviews = chapter09_points
    check_class(results, reviews, CH09_POINT_ATTACKS, automatic_points("09_decoder"))
    assert "test_decoder_gradients" in results["honest-wrong"].failed()
    assert "test_decoder_gradients" in results["atk-remembered-points"].failed()
    assert "moved a little" in results["atk-remembered-points"].cells["test_decoder_gradients"].error
    # one mistake, one loss: the model's gradient test is judged around the model's own blocks, so the honest
    # block's mistake costs Part B only (the attack, at most as much: check_class)
    assert "test_model_gradients" not in results["honest-wrong"].failed()


def test_chapter02_attacks_earn_no_more_than_the_wrong_code(chapter02):
    results, reviews = chapter02
    check_class(results, reviews, CH02_ATTACKS, automatic_points("02_scaling"))
    assert results["honest-wrong"].auto_score == automatic_points("02_scaling") - 3


def test_chapter03_attacks_earn_no_more_than_the_wrong_code(chapter03):
    results, reviews = chapter03
    check_class(results, reviews, CH03_ATTACKS, automatic_points("03_masks"))
    assert results["honest-wrong"].auto_score == results["solution"].auto_max - 2


def test_a_forged_server_is_undone_and_an_endless_call_costs_only_its_tests(chapter01):
    results, _ = chapter01
    # a serve() replaced by the student is put back before every request (nboracle.kernel.server.listen):
    # the forged answers (a pickle as an array) never reach the grader, whose decoder would refuse
    # them (nbgrader-oracle/tests/test_wire.py); the submission fails exactly where its wrong code does
    forged, honest = results["atk-forged-oracle"], results["honest-wrong"]
    assert forged.failed() == honest.failed() and forged.auto_score == honest.auto_score
    assert not any("WireError" in forged.cells[g].error for g in forged.failed())
    endless = results["atk-endless-call"]
    attention_tests = {g for g in endless.cells if g.startswith("test_attention")}
    assert len(attention_tests) == 5 and set(endless.failed()) == attention_tests
    assert all("OracleTimeout" in endless.cells[g].error for g in attention_tests)
    duck = " ".join(results["atk-duck-type"].cells[g].error for g in results["atk-duck-type"].failed())
    assert "not an array or tensor" in duck or "shape ()" in duck


HONEST_07 = automatic_points("07_seq2seq_beam_search") - 7  # the greedy beam search, graded honestly


def test_chapter07_attacks_earn_no_more_than_the_wrong_code(chapter07):
    results, reviews = chapter07
    check_class(results, reviews, CH07_ATTACKS, automatic_points("07_seq2seq_beam_search"))
    assert results["honest-wrong"].auto_score == HONEST_07


def test_chapter09_attacks_earn_no_more_than_the_wrong_code(chapter09):
    results, reviews = chapter09
    check_class(results, reviews, CH09_ATTACKS, automatic_points("09_decoder"))
    # the detached memory costs the gradient tests of the block and of the model
    assert {"test_decoder_gradients", "test_model_gradients"} <= set(results["honest-wrong"].failed())
    for name in ("faked-gradients", "rebound-encode", "rebound-probe", "rebound-json-dumps", "forged-frame"):
        assert {"test_decoder_gradients", "test_model_gradients"} <= set(results[f"atk-{name}"].failed()), name


def test_chapter07_private_training_earns_no_more_than_the_wrong_code(chapter07_trained):
    """A correct copy trained in private, its weights moved into the graded model by eval() or
    train(False) after the locked training cell, or reported by state_dict and named_parameters,
    earns nothing beside a forward without the causal mask."""
    results, reviews = chapter07_trained
    check_class(results, reviews, CH07_TRAINED_ATTACKS, automatic_points("07_seq2seq_beam_search"))
    assert results["honest-wrong"].auto_score == automatic_points("07_seq2seq_beam_search") - 5  # loses the mask, causal-flag and trained-model tests
    assert "test_trained_model" in results["honest-wrong"].failed()
    for name in CH07_TRAINED_ATTACKS:
        assert "test_trained_model" in results[f"atk-{name}"].failed(), name


def test_chapter08_attacks_on_the_tests_block_earn_no_more_than_the_wrong_code(chapter08):
    """The tests' block and model stay in the grader: zeroing or loading their weights through the
    stand-in, rebinding its forward, patching torch.nn.functional in the kernel or rebinding the
    locked cell's greedy leave the full forward the step is compared with as it was."""
    results, reviews = chapter08
    check_class(results, reviews, CH08_ATTACKS, automatic_points("08_attention_cost"))
    honest = results["honest-wrong"]
    assert honest.auto_score == results["solution"].auto_max - 3
    assert {"test_kv_cache_matches_full", "test_greedy_cached_equals_full"} <= set(honest.failed())
    for name in CH08_ATTACKS:
        assert {"test_kv_cache_matches_full", "test_greedy_cached_equals_full"} <= set(results[f"atk-{name}"].failed())


# ------------------------------------------------------------------------------------------------------
# issue 43 item 6 (sec-kernel): a library substitute bound where the scan used not to look is flagged
def test_chapter01_library_substitutes_bound_any_way_are_flagged(chapter01):
    results, reviews = chapter01
    for name in CH01_SCAN_EVASIONS:
        assert any("scaled_dot_product_attention" in reason and "is it the student's?" in reason
                   for reason in reviews[f"atk-{name}"]), (name, reviews[f"atk-{name}"])

# ---------------------------------------------------------------- issue 43 items 1 and 2 (the SLOT_* attackers above)
def errors_of(result) -> str:
    return " ".join(result.cells[g].error for g in result.failed())


@pytest.mark.parametrize("chapter, attacks, assignment", [("chapter04", SLOT_04, "04_encoder_block"),
                                                    ("chapter06", SLOT_06, "06_multihead_attention"),
                                                    ("chapter09", SLOT_09, "09_decoder")])
def test_modules_that_watch_the_grader_earn_no_more_than_the_wrong_code(chapter, attacks, assignment, request):
    """The grader reads a module through nn.Module's own __dict__ slot and plain dicts only, and writes its mode
    where no class can shadow it: the attacker never learns it is graded, or is told its structure is not plain."""
    results, reviews = request.getfixturevalue(chapter)
    check_class(results, reviews, attacks, automatic_points(assignment))
    assert "plain dicts nn.Module.__init__ makes" in errors_of(results["atk-slot-dict-subclass"])
    if "atk-slot-training-property" in results:
        assert "defines training itself" in errors_of(results["atk-slot-training-property"])


def test_chapter07_a_mode_dependent_forward_behind_private_weights_earns_no_more_than_the_wrong_code(chapter07_trained):
    """A forward without the causal mask in train mode only, with correct weights trained in private moved in by
    eval(), loses what the wrong forward loses: the tests run the forward in train mode too."""
    results, reviews = chapter07_trained
    check_class(results, reviews, SLOT_07, automatic_points("07_seq2seq_beam_search"))
    assert "test_trained_model" in results["atk-slot-mode-dependent-private-weights"].failed()
    assert "defines training itself" in errors_of(results["atk-slot-training-property-private-weights"])
