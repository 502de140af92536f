"""Nothing `course` puts within a student kernel's reach reproduces a graded function's reference (issue 50, item 1).

`course/` ships to students and is bound into every grading kernel; the references the hidden tests compare
with live on the grader's side (`instructor/references/`). This test walks everything reachable from
`import course` and its submodules (every module, function, class and method defined in `course`), calls each
callable on the graded exercises' drawn inputs (in a try/except, as a student would try them), also as a
builder (`callable(parameters, *sizes)` and then the result on the exercise's inputs), and asserts that
nothing returned equals the reference output. The exercises, their input drawers and their references are
the grader's (the references from `instructor.references`, or the formula in a line here); one or more per
chapter. PyTorch's and numpy's own functions are out of scope here (the review's allow-list judges a student
who calls them, issue 50 item 2), and so is what `nboracle` exposes to kernels (its own test, item 1's other
part). `test_the_walk_finds_the_grader_references` proves the walk would find the references moved out of
`course/`: walked the same way, the grader's modules reproduce every exercise they hold a reference for.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from instructor.references import decoder as ref09
from instructor.references import modern_decoder as ref11
from instructor.references import seq2seq_beam_search as ref07
from instructor.references import tiny_gpt as ref10


@dataclass
class Exercise:
    """A graded function or class: its inputs, drawn by the grader, and the reference output on them.

    For a function, `args` are its arguments. For a class, `args` are what a builder gets (the parameters by
    the exercise's names, then the sizes) and `forward` the inputs of the built module's call.
    """

    chapter: str
    name: str
    args: tuple
    expected: Any
    forward: tuple | None = None
    forward_kwargs: tuple = ({},)  # the masks, as the module's call may name them
    numpy_args: bool = False  # also tried with the arguments as torch tensors (a student may convert)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _exercises() -> list[Exercise]:
    rng = np.random.default_rng(50)
    found = []
    # 01: softmax and attention (numpy)
    x = rng.normal(size=(3, 5))
    found.append(Exercise("01", "softmax", (x,), _softmax_np(x), numpy_args=True))
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))
    w = _softmax_np(q @ np.swapaxes(k, -1, -2) / 2.0)
    found.append(Exercise("01", "attention", (q, k, v), (w @ v, w), numpy_args=True))
    # 02: the softmax Jacobian, batched
    p = _softmax_np(rng.normal(size=(2, 4)))
    found.append(Exercise("02", "softmax_jacobian", (p,), p[..., :, None] * np.eye(4) - p[..., :, None] * p[..., None, :],
                          numpy_args=True))
    # 03: masks, masked softmax and attention (True = allowed)
    found.append(Exercise("03", "causal_mask", (6,), torch.ones(6, 6, dtype=torch.bool).tril()))
    lengths = torch.tensor([2, 5, 3])
    found.append(Exercise("03", "padding_mask", (lengths, 5), torch.arange(5) < lengths[:, None]))
    scores, allowed = torch.randn(2, 4, 4, generator=_gen(3)), torch.ones(4, 4, dtype=torch.bool).tril()
    found.append(Exercise("03", "masked_softmax", (scores, allowed),
                          torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)))
    q3, k3, v3 = (torch.randn(2, 4, 8, generator=_gen(30 + i)) for i in range(3))
    w3 = torch.softmax((q3 @ k3.transpose(-1, -2) / math.sqrt(8)).masked_fill(~allowed, float("-inf")), dim=-1)
    found.append(Exercise("03", "masked_attention", (q3, k3, v3, allowed), (w3 @ v3, w3)))
    # 04: the encoder block (post-norm), as nn.TransformerEncoderLayer holding its parameters
    layer4 = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).train()
    state4 = _renamed(layer4.state_dict(), {"self_attn.": "attention.", "linear1.": "ffn.linear1.",
                                            "linear2.": "ffn.linear2."})
    x4 = torch.randn(2, 5, 8, generator=_gen(4))
    with torch.no_grad():
        found.append(Exercise("04", "EncoderBlock", (state4, 8, 2, 16, False), layer4(x4), forward=(x4,)))
    # 05: the sinusoidal table, the relative offsets
    positions = torch.arange(7, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, 6, 2, dtype=torch.float64) / 6)
    table = torch.stack([positions.sin(), positions.cos()], dim=-1).reshape(7, 6)
    found.append(Exercise("05", "sinusoidal_encoding", (7, 6), table))
    found.append(Exercise("05", "relative_offsets", (5,), torch.arange(5)[None, :] - torch.arange(5)[:, None]))
    # 06: split_heads, merge_heads, the block as nn.MultiheadAttention holding its weights (causal)
    x6 = torch.randn(2, 5, 8, generator=_gen(6))
    found.append(Exercise("06", "split_heads", (x6, 2), x6.view(2, 5, 2, 4).transpose(1, 2)))
    found.append(Exercise("06", "merge_heads", (x6.view(2, 5, 2, 4).transpose(1, 2),), x6))
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    state6 = {"qkv.weight": mha.in_proj_weight.detach(), "qkv.bias": mha.in_proj_bias.detach(),
              "proj.weight": mha.out_proj.weight.detach(), "proj.bias": mha.out_proj.bias.detach()}
    heads = (lambda t, h: t.view(t.shape[0], t.shape[1], h, -1).transpose(1, 2),
             lambda t: t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1))
    future = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        found.append(Exercise("06", "MultiHeadSelfAttention", (state6, 8, 2, heads), mha(x6, x6, x6, attn_mask=future)[0],
                              forward=(x6, x6, x6), forward_kwargs=({"attn_mask": future}, {"mask": future})))
    # 07: the length penalty
    found.append(Exercise("07", "length_penalty", (7, 0.6), ref07.wu_penalty(7, 0.6)))
    found.append(Exercise("07", "length_penalty", (11, 1.3), ref07.wu_penalty(11, 1.3)))
    # 08: the feature map
    x8 = torch.randn(3, 4, generator=_gen(8))
    found.append(Exercise("08", "phi", (x8,), 1 + F.elu(x8)))
    # 09: cross_attention, the decoder block (nn.TransformerDecoderLayer holding its parameters)
    attention9 = nn.MultiheadAttention(8, 2, batch_first=True)
    x9, memory9 = torch.randn(2, 3, 8, generator=_gen(9)), torch.randn(2, 4, 8, generator=_gen(90))
    with torch.no_grad():
        found.append(Exercise("09", "cross_attention", (attention9, x9, memory9),
                              attention9(x9, memory9, memory9, need_weights=True, average_attn_weights=False)))
        for norm_first in (False, True):
            state9 = ref09.block_state(8, 16, seed=9 + norm_first)
            found.append(Exercise("09", "DecoderBlock", (state9, 8, 2, 16, norm_first),
                                  ref09.decoder_layer(state9, 8, 2, 16, norm_first)(x9, memory9), forward=(x9, memory9)))
    # 10: the attention, the block, the model, the sampling distribution
    attention_state10 = ref10.attention_state(8, seed=13)
    state10 = ref10.block_state(8, seed=10)
    x10 = torch.randn(2, 5, 8, generator=_gen(10))
    gpt_state = ref10.gpt_state(11, 8, 2, 6, seed=11)
    idx = torch.randint(11, (2, 6), generator=_gen(11))
    with torch.no_grad():
        found.append(Exercise("10", "MultiHeadSelfAttention", (attention_state10, 8, 2),
                              ref10.reference_attention(attention_state10, 8, 2)(x10), forward=(x10,)))
        mask = ref10.future_mask(5)
        found.append(Exercise("10", "Block", (state10, 8, 2), ref10.reference_block(state10, 8, 2)(x10), forward=(x10,),
                              forward_kwargs=({}, {"src_mask": mask}, {"mask": mask}, {"attn_mask": mask},
                                              {"is_causal": True, "src_mask": mask})))
        found.append(Exercise("10", "GPT", (gpt_state, 11, 8, 2, 2, 6),
                              ref10.ReferenceGPT(gpt_state, 11, 8, 2, 2, 6)(idx)[0], forward=(idx,)))
    logits = torch.randn(3, 11, generator=_gen(12))
    found.append(Exercise("10", "next_token_probs", (logits, 0.7), torch.softmax(logits / 0.7, dim=-1)))
    # 11: RMSNorm, the rotary tables and rotation, ALiBi, SwiGLU, grouped-query attention, the tiled attention
    x11, w11 = torch.randn(2, 3, 8, generator=_gen(110)), 1 + 0.3 * torch.randn(8, generator=_gen(111))
    found.append(Exercise("11", "rms_norm", (x11, w11, 1e-6), F.rms_norm(x11, (8,), w11, 1e-6)))
    cos11, sin11 = ref11.reference_tables(6, 8)
    found.append(Exercise("11", "rope_tables", (6, 8), (cos11.float(), sin11.float())))
    q11 = torch.randn(1, 2, 6, 8, generator=_gen(112))
    found.append(Exercise("11", "apply_rope", (q11, cos11.float(), sin11.float()),
                          ref11.reference_rotation(q11, cos11, sin11).float()))
    found.append(Exercise("11", "alibi_bias", (4, 5), ref11.reference_alibi(4, 5)))
    swiglu11 = ref11.swiglu_state(8, 12, seed=113)
    found.append(Exercise("11", "SwiGLU", (swiglu11, 8, 12), ref11.reference_swiglu(swiglu11, x11), forward=(x11,)))
    gqa11 = ref11.gqa_state(8, 2, 1, seed=114)
    found.append(Exercise("11", "GroupedQueryAttention", (gqa11, 8, 2, 1, 6),
                          ref11.reference_gqa(gqa11, x11, 2, 1, *ref11.reference_tables(6, 4), ref11.reference_rotation),
                          forward=(x11,)))
    q, k, v = (torch.randn(1, 2, 7, 4, generator=_gen(115 + i)) for i in range(3))
    scores = (q @ k.transpose(-2, -1) / 2).masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf"))
    found.append(Exercise("11", "tiled_attention", (q, k, v, 3, True),
                          (F.scaled_dot_product_attention(q, k, v, is_causal=True), torch.logsumexp(scores, dim=-1))))
    return found


def _renamed(state: dict, names: dict) -> dict:
    out = {}
    for key, value in state.items():
        for theirs, ours in names.items():
            if key.startswith(theirs):
                key = ours + key[len(theirs):]
                break
        out[key] = value.detach()
    return out


# ---------------------------------------------------------------- what is reachable


def _course_modules() -> list[ModuleType]:
    import course

    modules = [course]
    for info in pkgutil.walk_packages(course.__path__, "course."):
        modules.append(importlib.import_module(info.name))
    return modules


def reachable(modules: list[ModuleType], prefix: str) -> dict[str, Callable]:
    """Every callable the modules define (functions, classes, their methods), by qualified name; also the
    callables other modules of `prefix` re-export."""
    found: dict[str, Callable] = {}
    for module in modules:
        for name, value in vars(module).items():
            if not callable(value) or not getattr(value, "__module__", "").startswith(prefix):
                continue
            found[f"{value.__module__}.{getattr(value, '__qualname__', name)}"] = value
            if inspect.isclass(value):
                for attribute, member in vars(value).items():
                    if attribute.startswith("__") and attribute not in ("__call__", "__init__"):
                        continue
                    member = getattr(value, attribute, None)
                    if callable(member):
                        found[f"{value.__module__}.{value.__qualname__}.{attribute}"] = member
    return found


# ---------------------------------------------------------------- calling them


def _as_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().double().numpy() if value.dtype.is_floating_point else value.detach().numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (int, float, bool, np.number)):
        return np.asarray(value)
    return None


def _same(actual: Any, expected: Any) -> bool:
    """actual equals expected (a tensor, an array, a number, or a tuple of them: then item by item)."""
    if isinstance(expected, tuple):
        return isinstance(actual, (tuple, list)) and len(actual) == len(expected) and all(
            _same(a, e) for a, e in zip(actual, expected, strict=True))
    a, e = _as_numpy(actual), _as_numpy(expected)
    if a is None or e is None or a.shape != e.shape or a.size == 0:
        return False
    if e.dtype == bool or a.dtype == bool:
        return a.dtype == e.dtype and bool((a == e).all())
    with np.errstate(all="ignore"):
        return bool(np.allclose(a.astype(float), e.astype(float), atol=1e-5, rtol=1e-4, equal_nan=False))


def _answers(function: Callable, exercise: Exercise) -> list[Any]:
    """What `function` gives on the exercise's inputs, every way a student could call it; errors are skipped."""
    calls = [exercise.args]
    if exercise.numpy_args:
        calls.append(tuple(torch.as_tensor(a) if isinstance(a, np.ndarray) else a for a in exercise.args))
    if exercise.forward is not None:  # a builder: (parameters, *sizes), also with fewer sizes
        calls += [exercise.args[:n] for n in range(1, len(exercise.args))]
    answers = []
    for args in calls:
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                result = function(*args)
        except BaseException:  # noqa: BLE001 (a callable that refuses these inputs reproduces nothing)
            continue
        answers.append(result)
        if exercise.forward is not None and callable(result):
            for forward in (exercise.forward, exercise.forward[:1]):
                for kwargs in exercise.forward_kwargs:
                    try:
                        with warnings.catch_warnings(), torch.no_grad():
                            warnings.simplefilter("ignore")
                            out = result(*forward, **kwargs)
                    except BaseException:  # noqa: BLE001
                        continue
                    answers += [out, out[0] if isinstance(out, tuple) and out else None]
    return answers


def reproductions(callables: dict[str, Callable], exercises: list[Exercise]) -> list[str]:
    """`callable name -> chapter exercise` for every callable whose answer equals an exercise's reference."""
    state = torch.random.get_rng_state(), np.random.get_state()
    found = []
    try:
        for name, function in sorted(callables.items()):
            for exercise in exercises:
                expected = exercise.expected[0] if exercise.forward is not None and isinstance(
                    exercise.expected, tuple) else exercise.expected
                if any(_same(answer, expected) for answer in _answers(function, exercise)):
                    found.append(f"{name} -> {exercise.chapter} {exercise.name}")
    finally:
        torch.random.set_rng_state(state[0])
        np.random.set_state(state[1])
    return found


@pytest.fixture(scope="module")
def exercises():
    return _exercises()


def test_every_chapter_has_a_graded_exercise_walked(exercises):
    assert {e.chapter for e in exercises} == {f"{n:02d}" for n in range(1, 12)}


def test_nothing_reachable_from_course_reproduces_a_reference(exercises, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # whatever a callable writes lands in a scratch folder
    monkeypatch.setenv("MPLBACKEND", "Agg")
    modules = _course_modules()
    callables = reachable(modules, "course")
    assert len(callables) > 100, sorted(callables)  # the walk reaches every module, function, class and method
    for chapter in ("decoder_checks", "tiny_gpt_checks", "seq2seq_checks", "scaling_checks", "modern_decoder_checks"):
        assert any(name.startswith(f"course.{chapter}.") for name in callables), chapter
    found = reproductions(callables, exercises)
    assert not found, "callables within a student kernel's reach that compute a graded answer:\n" + "\n".join(found)


def test_the_walk_finds_the_grader_references(exercises):
    """The same walk over the grader's references finds each of them: the test above would see one in course/."""
    modules = [importlib.import_module(f"instructor.references.{info.name}")
               for info in pkgutil.iter_modules(importlib.import_module("instructor.references").__path__)]
    found = reproductions(reachable(modules, "instructor.references"), exercises)
    for wanted in ("instructor.references.decoder.decoder_layer -> 09 DecoderBlock",
                   "instructor.references.tiny_gpt.reference_attention -> 10 MultiHeadSelfAttention",
                   "instructor.references.tiny_gpt.reference_block -> 10 Block",
                   "instructor.references.tiny_gpt.ReferenceGPT -> 10 GPT",
                   "instructor.references.seq2seq_beam_search.wu_penalty -> 07 length_penalty",
                   "instructor.references.encoder_block.reference_layer -> 04 EncoderBlock",
                   "instructor.references.multihead_attention.multihead_reference -> 06 MultiHeadSelfAttention",
                   "instructor.references.scaling.softmax_last -> 01 softmax",
                   "instructor.references.modern_decoder.reference_tables -> 11 rope_tables",
                   "instructor.references.modern_decoder.reference_rotation -> 11 apply_rope",
                   "instructor.references.modern_decoder.reference_alibi -> 11 alibi_bias"):
        assert wanted in found, (wanted, found)


def test_the_grader_references_are_not_in_reach_of_a_kernel():
    """The references live beside the instructor's tools, not in `course` (bound into every kernel) nor in the
    grader's package's kernel side; the grading sandbox binds only those two (nboracle.grader.sandbox)."""
    import nboracle

    import course

    assert not hasattr(course, "references")
    for module in _course_modules():
        source = inspect.getsource(module)
        assert "instructor" not in source.replace("instructor's", ""), module.__name__
    assert "references" not in {info.name for info in pkgutil.iter_modules(nboracle.__path__)}
    # what a grading kernel sees of the machine: the Python environment, the course package, nboracle
    from pathlib import Path

    from nboracle.grader import sandbox

    references = Path(importlib.import_module("instructor.references").__file__).resolve().parent
    seen = [*sandbox._python_roots(), sandbox._course_package(), sandbox._oracle_package()]
    assert not any(root is not None and references.is_relative_to(Path(root).resolve()) for root in seen), seen
    # a wheel of the course never carries them (pyproject's packages): a non-editable install in the environment
    # would put them where every grading kernel reads
    import re

    listed = re.search(r"^packages = \[(.*)\]", (references.parents[1] / "pyproject.toml").read_text(), re.M)
    assert listed and '"course"' in listed.group(1) and "instructor.references" not in listed.group(1)
