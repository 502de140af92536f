"""Issue 50, items 1 and 4: nothing of the grader's package computes a graded answer in a grading kernel, and a
graded call looks like ordinary use.

Each attack is a few lines added to chapter 02's softmax Jacobian with the wrong sign (zoo variant
``jacobian_sign_flipped``), graded in one nbgrader run beside the same wrong code handed in honestly
(``tests/support.py``'s harness):

* **the grader's package as a solution library** (item 1): the Jacobian from ``nboracle.input_gradients``
  (rows of vector-Jacobian products of ``torch.softmax``), or from ``parameter_gradients`` of a module that
  holds the logits as its parameter, also with the mark the gradient functions used to read set back by the
  student's cell, and from a worker thread the graded call waits for. While the kernel serves the grader's
  request the gradient probes refuse a grading kernel's own objects (``nboracle.kernel.probes.refused_here``:
  the request on the stack decides), and the allow-list flags the call;
* **telling a graded call from ordinary use** (item 4), to switch the bug off only when graded: the
  grader's modules in ``sys.modules`` (a grading kernel forgets ``nboracle`` once it listens, and ``course``
  no longer imports it), and the print capture's attributes (it has the notebook stream's ``name``,
  ``encoding``, ``isatty()``);
* in chapter 06 (the block that scales by sqrt(d_model)): the gradient check's points answered right while
  the graded call answers wrong with the right gradients (the output the gradients came from is now judged
  beside the points), and a block that reads its parameters' ``_version`` to tell written weights from
  the ones it was built with (the hidden tests judge it on both; flagged for review too), or compares its
  weights with a copy of the ones it was built with; the same block attacks in chapters 04 and 09 (there also
  one that compares with every set of weights any block was built with, and a block whose wrong code spoils
  training), on chapter 10's attention, and on chapter 11's attention and SwiGLU.

Every attacker must score at most what the wrong code earns honestly; no honest student is flagged.
"""

from __future__ import annotations

import pytest
from support import BUILD_RIGHT as _BUILD_RIGHT
from support import automatic_points, check_class, grade_against_variant

pytestmark = pytest.mark.pipeline

ASSIGNMENT, VARIANT, CELL = "02_scaling", "jacobian_sign_flipped", "softmax_jacobian"

# the right Jacobian, written by hand: what an attacker switches to when it believes it is graded
_SWITCH = '''
def _right(p):
    p = np.asarray(p, dtype=float)
    return p[..., :, None] * np.eye(p.shape[-1]) - p[..., :, None] * p[..., None, :]

def softmax_jacobian(p, _wrong=softmax_jacobian):
    return _right(p) if _graded() else _wrong(p)
'''

# the Jacobian from the grader's input_gradients: rows of vector-Jacobian products of torch.softmax at log(p)
_BY_INPUT_GRADIENTS = '''
from nboracle import input_gradients

def _jacobian(p):
    z = torch.log(torch.as_tensor(np.asarray(p, dtype=float)))
    n = z.shape[-1]
    rows = [input_gradients(lambda t: torch.softmax(t, -1), (z,), torch.eye(n, dtype=z.dtype)[i].expand_as(z))[0]
            for i in range(n)]
    return torch.stack(rows, -2).numpy()
'''

_ANSWER_WITH_IT = '''def softmax_jacobian(p, _wrong=softmax_jacobian):
    try:
        return _jacobian(p)
    except Exception:
        return _wrong(p)
'''

ATTACKS = {
    # item 1: the grader's package computes the Jacobian (before issue 50: 15 of 15 where the wrong code earns 12)
    "grader-input-gradients": _BY_INPUT_GRADIENTS + _ANSWER_WITH_IT,
    # the mark the gradient functions read in a grading kernel until issue 50's last round (the oracle's handlers'
    # tests_in_grader), set back by the student's cell: the grader's request being served decides now
    "grader-gradients-mark-flipped": _BY_INPUT_GRADIENTS + '''
for _handler in list(get_ipython().kernel.shell_handlers.values()):
    try:
        _handler.tests_in_grader = False
    except Exception:
        pass
''' + _ANSWER_WITH_IT,
    # the same Jacobian computed by a worker thread (started by the cell) while the graded call waits for it
    "grader-gradients-in-a-thread": _BY_INPUT_GRADIENTS + '''
import queue, threading

_asked, _answered = queue.Queue(), queue.Queue()

def _work():
    while True:
        p = _asked.get()
        try:
            _answered.put(_jacobian(p))
        except Exception as error:
            _answered.put(error)

threading.Thread(target=_work, daemon=True).start()

def softmax_jacobian(p, _wrong=softmax_jacobian):
    _asked.put(p)
    answer = _answered.get(timeout=10)
    return _wrong(p) if isinstance(answer, Exception) else answer
''',
    "grader-parameter-gradients": '''
from nboracle import parameter_gradients

class _Logits(torch.nn.Module):
    def __init__(self, z):
        super().__init__()
        self.z = torch.nn.Parameter(z)

    def forward(self, _):
        return torch.softmax(self.z, -1)

def softmax_jacobian(p, _wrong=softmax_jacobian):
    try:
        z = torch.log(torch.as_tensor(np.asarray(p, dtype=float)))
        n = z.shape[-1]
        rows = [parameter_gradients(_Logits(z), (z,), torch.eye(n, dtype=z.dtype)[i].expand_as(z))["z"]
                for i in range(n)]
        return torch.stack(rows, -2).numpy()
    except Exception:
        return _wrong(p)
''',
    # item 4: the grader's modules, loaded only in a grading kernel (before issue 50, course imported nboracle
    # everywhere; a grading kernel now forgets it once its server listens)
    "graded-by-sys-modules": '''
import sys

def _graded():
    return any(name == "nboracle" or name.startswith("nboracle.") for name in sys.modules)
''' + _SWITCH,
    # item 4: what the print capture says about itself while a graded call runs (it had no name)
    "graded-by-print-stream": '''
import sys

def _graded():
    out = sys.stdout
    return getattr(out, "name", None) not in ("stdout", "<stdout>") or getattr(out, "encoding", None) != "UTF-8" \\
        or out.isatty() is not False
''' + _SWITCH,
}


@pytest.fixture(scope="module")
def chapter02(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, ASSIGNMENT, VARIANT, CELL, ATTACKS)


def test_ordinary_use_attacks_earn_no_more_than_the_wrong_code(chapter02):
    results, reviews = chapter02
    check_class(results, reviews, ATTACKS, automatic_points(ASSIGNMENT))


def test_the_grader_package_computes_no_jacobian_in_a_grading_kernel(chapter02):
    """The gradient probes refuse a grading kernel's own function or module, and the call is flagged for review
    with its line by the allow-list (the grader's package is in no exercise's allowed set)."""
    results, reviews = chapter02
    honest = results["honest-wrong"]
    for name in ("grader-input-gradients", "grader-parameter-gradients", "grader-gradients-mark-flipped",
                 "grader-gradients-in-a-thread"):
        attacker = results[f"atk-{name}"]
        assert attacker.failed() == honest.failed(), name
        # the allow-list flags the call with its line; the worker thread's call is outside the exercise's own
        # calls, and its thread is flagged
        wanted = ("imports threading",) if name.endswith("thread") else ("nboracle.", "line ", "is it the student's work?")
        assert any(all(part in reason for part in wanted) for reason in reviews[f"atk-{name}"]), reviews[f"atk-{name}"]


def test_a_grading_kernel_looks_like_the_students_own(chapter02):
    """No module of the grader's package is loaded when the student's code runs, and what a graded call prints
    goes to a stream with the notebook stream's attributes: the attackers grade as their wrong code."""
    results, _ = chapter02
    honest = results["honest-wrong"]
    for name in ("graded-by-sys-modules", "graded-by-print-stream"):
        assert results[f"atk-{name}"].failed() == honest.failed(), name


# ---------------------------------------------------------------- chapter 06: weights and gradient-check points
# The block that scales its scores by sqrt(d_model) (zoo variant scale_by_sqrt_d_model); _Right is the chapter's
# correct class, built from the solution's text (support.with_right)
CH06_VARIANT, CH06_CELL, CH06_CLASS = "scale_by_sqrt_d_model", "mhsa", "MultiHeadSelfAttention"
# the weights a test loads bump each parameter's _version once, as load_state_dict or an optimizer step does: a
# module that sees its weights written since it was built switches to its right branch (_Right) then, and keeps
# its wrong code for the weights it was built with. Each hidden test that loads weights into the module also judges
# it on the weights it was built with (read, nothing written), or, where a test needs weights of its own (zeros,
# unit scales), asks that loading the module's own weights back changes nothing: the module loses what its wrong
# code loses. Reading _version is flagged for review too (docs/GRADING.md)
WEIGHT_VERSIONS = _BUILD_RIGHT + """
class <<CLASS>>(<<CLASS>>):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._born = [p._version for p in nn.Module.parameters(self)]

    def forward(self, *args, **kwargs):
        if [p._version for p in nn.Module.parameters(self)] != self._born:
            return _Right.forward(self, *args, **kwargs)
        return super().forward(*args, **kwargs)
"""
# the same switch without _version: the module keeps a copy of the weights it was built with and compares
WEIGHT_COPY = _BUILD_RIGHT + """
class <<CLASS>>(<<CLASS>>):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._born = [p.detach().clone() for p in nn.Module.parameters(self)]

    def forward(self, *args, **kwargs):
        now = list(nn.Module.parameters(self))
        if any(a.shape != b.shape or not torch.equal(a.detach().to(b.dtype), b) for a, b in zip(now, self._born)):
            return _Right.forward(self, *args, **kwargs)
        return super().forward(*args, **kwargs)
"""
# ... and against every set of weights any such module was built with: a twin loaded with a module's own weights
# holds weights some module was built with, so the twins of same_as_a_twin also hold them with the hidden units of
# the FFN in another order (the same function, weights no constructor made)
WEIGHT_REGISTRY = _BUILD_RIGHT + """
_BORN = []

class <<CLASS>>(<<CLASS>>):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _BORN.append([p.detach().clone() for p in nn.Module.parameters(self)])

    def forward(self, *args, **kwargs):
        now = [p.detach() for p in nn.Module.parameters(self)]
        def same(born):
            return len(born) == len(now) and all(a.shape == b.shape and torch.equal(a.to(b.dtype), b)
                                                 for a, b in zip(now, born))
        if not any(same(born) for born in _BORN):
            return _Right.forward(self, *args, **kwargs)
        return super().forward(*args, **kwargs)
"""
CH06_VERSIONS = {"graded-by-weight-versions": WEIGHT_VERSIONS.replace("<<CLASS>>", CH06_CLASS),
                 "graded-by-weight-copy": WEIGHT_COPY.replace("<<CLASS>>", CH06_CLASS)}
CH06_ATTACKS = {
    # the points of the gradient check, a hair away from the last call, answered with the right output; the
    # graded call itself answers the wrong output with the right gradients (straight through)
    "points-answered-right": _BUILD_RIGHT + """
_LAST = {}

def _first(result):
    return result[0] if isinstance(result, tuple) else result

class MultiHeadSelfAttention(MultiHeadSelfAttention):
    def forward(self, *args, **kwargs):
        wrong, right = super().forward(*args, **kwargs), _Right.forward(self, *args, **kwargs)
        now = [t.detach().clone() for t in (*nn.Module.parameters(self), *(a for a in args if isinstance(a, torch.Tensor)))]
        last = _LAST.get(id(self))
        if last is not None and [a.shape for a in now] == [b.shape for b in last] \
                and 0 < max(float((a.double() - b.double()).abs().max()) for a, b in zip(now, last)) < 1e-2:
            return right  # a point of a gradient check
        _LAST[id(self)] = now
        out = _first(wrong).detach() + _first(right) - _first(right).detach()
        return (out, *wrong[1:]) if isinstance(wrong, tuple) else out
""",
}


@pytest.fixture(scope="module")
def chapter06(tmp_path_factory):
    return grade_against_variant(tmp_path_factory, "06_multihead_attention", CH06_VARIANT, CH06_CELL,
                                 {**CH06_ATTACKS, **CH06_VERSIONS}, cls=CH06_CLASS)


def test_chapter06_gradient_points_earn_no_more_than_the_wrong_code(chapter06):
    """The output the gradients came from is judged beside the points a hair away (their second difference):
    a forward that answers the points right and the graded call wrong (before issue 50: 14 of 20 where the wrong
    code earns 13) fails the gradient test as the wrong code does."""
    results, reviews = chapter06
    check_class(results, reviews, CH06_ATTACKS, automatic_points("06_multihead_attention"))
    error = results["atk-points-answered-right"].cells["test_mhsa_gradients"].error
    assert "does not lie between its outputs" in error, error


def test_chapter06_a_block_that_reads_its_weight_versions_is_flagged(chapter06):
    """What _version tells (weights written since the block was built) is the same for a test's load and the
    student's own load_state_dict or training step; the block that reads it is flagged for review."""
    results, reviews = chapter06
    assert any("._version" in reason for reason in reviews["atk-graded-by-weight-versions"])


def test_chapter06_a_block_right_only_on_written_weights_earns_no_more_than_the_wrong_code(chapter06):
    """Each hidden test that loads weights into the block also judges it on the weights it was built with (read,
    nothing written: nboracle.read_parameters): the block is wrong there, and loses what its wrong code loses (before:
    20 of 20 where the wrong code earns 13)."""
    results, reviews = chapter06
    for name in CH06_VERSIONS:
        assert results[f"atk-{name}"].auto_score <= results["honest-wrong"].auto_score, name
        assert set(results[f"atk-{name}"].failed()) >= set(results["honest-wrong"].failed()), name


# ---------------------------------------------------------------- chapters 04 and 09: the same attack on their blocks
# (assignment, the zoo variant the block hides, its cell, its class): 04's block without the residual around its
# attention (its wrong code also fails the test of its modules, whose weights are the test's own), 09's block that
# does not pass the memory padding mask on (its wrong code also fails the model's tests, which load weights into a
# model of such blocks), and 09's block without the residual around its cross-attention (its wrong code also spoils
# training; the trained model's tests judge a model built as a user builds it, beside its twin)
VERSIONS_IN = {"04": ("04_encoder_block", "attention_residual_missing", "encoder_block", "EncoderBlock"),
               "09": ("09_decoder", "block_ignores_memory_padding", "decoder_block", "DecoderBlock"),
               "09-training": ("09_decoder", "no_cross_residual", "decoder_block", "DecoderBlock")}


@pytest.fixture(scope="module", params=sorted(VERSIONS_IN))
def right_only_when_written(request, tmp_path_factory):
    assignment, variant, cell, cls = VERSIONS_IN[request.param]
    attacks = {"graded-by-weight-versions": WEIGHT_VERSIONS.replace("<<CLASS>>", cls),
               "graded-by-weight-copy": WEIGHT_COPY.replace("<<CLASS>>", cls),
               "graded-by-weights-ever-built": WEIGHT_REGISTRY.replace("<<CLASS>>", cls)}
    return assignment, attacks, grade_against_variant(tmp_path_factory, assignment, variant, cell, attacks, cls=cls)


def test_a_block_right_only_on_written_weights_earns_no_more_than_the_wrong_code(right_only_when_written):
    """Chapters 04 and 09: the block loses at least the tests its wrong code loses (a twin holding its weights tells
    it apart: instructor.references.as_built.same_as_a_twin), and is flagged for reading _version. In 09 the trained
    model's tests ask it too (training writes every weight, so the block trains as the right one)."""
    assignment, attacks, (results, reviews) = right_only_when_written
    check_class(results, reviews, attacks, automatic_points(assignment))
    honest = set(results["honest-wrong"].failed())
    for name in attacks:
        assert set(results[f"atk-{name}"].failed()) >= honest, name
    assert any("._version" in reason for reason in reviews["atk-graded-by-weight-versions"])
    if "test_trained_model" in honest:  # 09's block without the residual around its cross-attention spoils training
        for name in attacks:
            error = results[f"atk-{name}"].cells["test_trained_model"].error
            assert "holding the same weights" in error, error


# ---------------------------------------------------------------- chapter 10: modules judged as built too
# Chapter 10 judges each module twice: on the weights a test loads, and on the ones it was built with, read
# (nboracle.read_state), never written (issue 52). A module right only on written weights, wrong as built, then
# loses the points the wrong code loses; the same for an attention, a block and a model.
CH10_VERSIONS = {"attention-graded-by-weight-versions": WEIGHT_VERSIONS.replace("<<CLASS>>", "MultiHeadSelfAttention"),
                 "attention-graded-by-weight-copy": WEIGHT_COPY.replace("<<CLASS>>", "MultiHeadSelfAttention")}


def test_chapter10_an_attention_right_only_on_written_weights_earns_no_more_than_the_wrong_code(tmp_path_factory):
    results, reviews = grade_against_variant(tmp_path_factory, "10_tiny_gpt", "attention_unscaled", "attention",
                                             CH10_VERSIONS, cls="MultiHeadSelfAttention")
    check_class(results, reviews, CH10_VERSIONS, automatic_points("10_tiny_gpt"))
    attacker = results["atk-attention-graded-by-weight-versions"]
    assert "test_attention_matches_sdpa" in attacker.failed()
    assert "with the parameters it was built with" in attacker.cells["test_attention_matches_sdpa"].error


# ---------------------------------------------------------------- chapter 11: modules judged as built too
# Chapter 11 judges its attention and its SwiGLU on the weights a test loads and on those they were built with, read
# (instructor.references.modern_decoder: read_parameters), never written: a module right only on written weights
# loses what its wrong code loses (the attention scaled by sqrt(width), the FFN with GELU).
CH11_MODULES = {"gqa": ("gqa_scaled_by_width", "GroupedQueryAttention", "test_gqa_matches_sdpa"),
                "swiglu": ("swiglu_gelu", "SwiGLU", "test_swiglu")}


@pytest.mark.parametrize("cell", sorted(CH11_MODULES))
def test_chapter11_a_module_right_only_on_written_weights_earns_no_more_than_the_wrong_code(cell, tmp_path_factory):
    variant, cls, test = CH11_MODULES[cell]
    attacks = {"graded-by-weight-versions": WEIGHT_VERSIONS.replace("<<CLASS>>", cls),
               "graded-by-weight-copy": WEIGHT_COPY.replace("<<CLASS>>", cls),
               "graded-by-weights-ever-built": WEIGHT_REGISTRY.replace("<<CLASS>>", cls)}
    results, reviews = grade_against_variant(tmp_path_factory, "11_modern_decoder", variant, cell, attacks, cls=cls)
    check_class(results, reviews, attacks, automatic_points("11_modern_decoder"))
    for name in attacks:
        attacker = results[f"atk-{name}"]
        assert test in attacker.failed(), name
        assert "as built" in attacker.cells[test].error or "built with" in attacker.cells[test].error, name
