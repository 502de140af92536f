"""Issue 50, items 1 and 4: nothing of the grader's package computes a graded answer in a grading kernel, and a
graded call looks like ordinary use.

Each attack is a few lines added to chapter 02's softmax Jacobian with the wrong sign (zoo variant
``jacobian_sign_flipped``), graded in one nbgrader run beside the same wrong code handed in honestly
(``tests/test_oracle_attacks.py``'s harness):

* **the grader's package as a solution library** (item 1): the Jacobian from ``nboracle.input_gradients``
  (rows of vector-Jacobian products of ``torch.softmax``), or from ``parameter_gradients`` of a module that
  holds the logits as its parameter. Under the oracle the gradient probes refuse a grading kernel's own
  objects (``nboracle.kernel.probes.refused_here``), and the allow-list flags the call;
* **telling a graded call from ordinary use** (item 4), to switch the bug off only when graded: the
  grader's modules in ``sys.modules`` (a grading kernel forgets ``nboracle`` once it listens, and ``course``
  no longer imports it), and the print capture's attributes (it has the notebook stream's ``name``,
  ``encoding``, ``isatty()``).

Every attacker must score at most what the wrong code earns honestly; no honest student is flagged.
"""

from __future__ import annotations

import pytest
from support import automatic_points
from test_oracle_attacks import check_class, grade_against_variant

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

ATTACKS = {
    # item 1: the grader's package computes the Jacobian (before issue 50: 15 of 15 where the wrong code earns 12)
    "grader-input-gradients": '''
from nboracle import input_gradients

def softmax_jacobian(p, _wrong=softmax_jacobian):
    try:
        z = torch.log(torch.as_tensor(np.asarray(p, dtype=float)))
        n = z.shape[-1]
        rows = [input_gradients(lambda t: torch.softmax(t, -1), (z,), torch.eye(n, dtype=z.dtype)[i].expand_as(z))[0]
                for i in range(n)]
        return torch.stack(rows, -2).numpy()
    except Exception:
        return _wrong(p)
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
    for name in ("grader-input-gradients", "grader-parameter-gradients"):
        attacker = results[f"atk-{name}"]
        assert attacker.failed() == honest.failed(), name
        assert any("nboracle." in reason and "line " in reason and "is it the student's work?" in reason
                   for reason in reviews[f"atk-{name}"]), reviews[f"atk-{name}"]


def test_a_grading_kernel_looks_like_the_students_own(chapter02):
    """No module of the grader's package is loaded when the student's code runs, and what a graded call prints
    goes to a stream with the notebook stream's attributes: the attackers grade as their wrong code."""
    results, _ = chapter02
    honest = results["honest-wrong"]
    for name in ("graded-by-sys-modules", "graded-by-print-stream"):
        assert results[f"atk-{name}"].failed() == honest.failed(), name
