"""The static scan of student code: silent on every honest notebook, loud on attacks (fast, no nbgrader)."""

from __future__ import annotations

import nbformat
import pytest
from nboracle.classroom import pipeline as P
from nboracle.grader.scan import (
    _MISSING,
    _library_object,
    allowed_call_findings,
    library_findings,
    refusals,
    scan_notebook,
    scan_source,
    student_cells,
)

from instructor.allowed_calls import ALLOWED_CALLS, allowed_calls_for
from instructor.repository import REPOSITORY
from instructor.substitutes import HELPER_ATTRIBUTES, SUBSTITUTES, substitutes_for
from instructor.zoo import alternatives_for, apply_edits, library_for, variants_for


@pytest.mark.parametrize("assignment", REPOSITORY.assignments())
def test_solutions_and_released_notebooks_are_never_flagged(assignment):
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    assert scan_notebook(release_nb, substitutes_for(assignment), HELPER_ATTRIBUTES) == [], "the released notebook itself would be flagged"
    filled = P.fill(release_nb, answers)
    assert student_cells(filled), "no student cells found"
    assert scan_notebook(filled, substitutes_for(assignment), HELPER_ATTRIBUTES) == [], "the instructor's solution would be flagged"


@pytest.mark.parametrize("assignment", REPOSITORY.assignments())
def test_zoo_answers_use_no_library_substitute(assignment):
    """Every bug-zoo variant and alternative is the student's own work (wrong or not): no
    library entry point of instructor.substitutes does an exercise's work in any of them."""
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    exercises = SUBSTITUTES.get(assignment, {})
    flagged = {v.name: found for v in variants_for(assignment) + alternatives_for(assignment)
               if (found := library_findings(P.fill(release_nb, v.answers(answers)), exercises, helper_attributes=HELPER_ATTRIBUTES))}
    assert not flagged, flagged


@pytest.mark.parametrize("code, fragment", [
    ("get_ipython().input_transformers_post.append(f)", "get_ipython"),
    ("ip.ast_transformers.append(T())", ".ast_transformers"),
    ("ip.set_custom_exc((Exception,), h)", ".set_custom_exc"),
    ("type(ip).showtraceback = None", ".showtraceback"),
    ("ip.events.callbacks.clear()", ".events"),
    ("import sys\nsys.settrace(f)", ".settrace"),
    ("sys.excepthook = f", ".excepthook"),
    ("import builtins\nbuiltins.abs = f", "imports builtins"),
    ("import gc\ngc.get_referrers(x)", "imports gc"),
    ("import ctypes", "imports ctypes"),
    ("np.allclose = lambda *a, **k: True", "replaces np.allclose"),
    ("setattr(course, 'check_close', f)", "calls setattr(course"),
    ("globals()['check_close'] = f", "writes globals()"),
    ("import sqlite3\nsqlite3.connect('../../gradebook.db')", "the gradebook"),
    ("import subprocess", "other processes"),
    ("import os\nos.fork()", ".fork"),
    ("import socket", "the network"),
    ("open('/etc/passwd')", "outside the notebook's folder"),
    ("open('../other/x.txt', 'w')", "outside the notebook's folder"),
    ("!cat /etc/passwd", "shell command"),
    ("exec(code)", "exec/eval/compile"),
    # the machinery of gc, inspect and traceback stays a finding (their plain functions are not: below)
    ("import gc\ngc.get_objects()", "imports gc"),
    ("import inspect\ninspect.stack()", "uses inspect.stack"),
    ("import inspect as ins\nframes = ins.getouterframes(f)", "uses inspect.getouterframes"),
    ("from inspect import stack", "imports inspect"),
    ("import traceback\ntraceback.print_stack()", "uses traceback.print_stack"),
    ("import gc\ngetattr(gc, 'get_objects')()", "uses the module gc itself"),
    ("import gc\ncollector = gc", "imports gc"),
    ("open('/tmp/../etc/passwd')", "outside the notebook's folder"),
    ("open('/tmpfs/x')", "outside the notebook's folder"),
    ("born = [p._version for p in self.parameters()]", "uses ._version"),
])
def test_attacks_are_found(code, fragment):
    found = " ".join(scan_source(code))
    assert fragment in found, found


@pytest.mark.parametrize("code", [
    "weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d), axis=-1)\nreturn weights @ V",
    "%time out = attention(Q, K, V)",
    "model = torch.compile(model)\npattern = re.compile('a/b')",
    "events = [1, 2]\nplt.title('1/sqrt(d_k)')",
    "def f(x):\n    return x / 2  # see ../README",
    # honest habits (issue 29, item 8): each was a review flag before
    "import gc\ndel big\ngc.collect()",
    "import traceback\ntry:\n    attention(Q, K, V)\nexcept Exception:\n    traceback.print_exc()",
    "import inspect\nprint(inspect.signature(attention))\nfrom inspect import signature",
    "plt.savefig('/tmp/x.png')",
    "inspect = [1, 2]\nprint(inspect)",  # a variable of that name, not the module
])
def test_ordinary_code_is_not_flagged(code):
    assert scan_source(code) == []


def test_sandbox_refusals_in_error_outputs():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("error", ename="OSError", evalue="[Errno 30] Read-only file system: 'x'",
                                           traceback=[])]
    other = nbformat.v4.new_code_cell("y")
    other.outputs = [nbformat.v4.new_output("error", ename="FileNotFoundError",
                                            evalue="[Errno 2] No such file or directory: '/course/gradebook.db'",
                                            traceback=[])]
    honest = nbformat.v4.new_code_cell("z")
    honest.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="weights is off", traceback=[])]
    nb.cells = [cell, other, honest]
    found = refusals(nb)
    assert [index for index, _ in found] == [0, 1]
    assert "read-only" in found[0][1] and "outside" in found[1][1]


# Honest habits a student brings from other notebooks: rich display, reloading edited modules,
# timing, inline plots, capturing output. Each is added as its own cell to the instructor's
# solution of chapter 01; none may be flagged.
HONEST_CELLS = {
    "display_math": 'from IPython.display import display, Math\ndisplay(Math(r"\\frac{QK^\\top}{\\sqrt{d_k}}"))',
    "display_markdown": "from IPython.display import Markdown, HTML\nMarkdown('**weights** sum to 1')",
    "display_module": "import IPython.display as ipd\nfrom IPython import display\nipd.display(1)\ndisplay.display(2)",
    "autoreload": "%load_ext autoreload\n%autoreload 2\nimport course",
    "inline_plots": "%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\nimport matplotlib.pyplot as plt",
    "timing": "%%time\nout = softmax(np.zeros((3, 4)))\n%timeit softmax(np.zeros((3, 4)))",
    "capture": "%%capture printed\nprint('a lot of output')",
    "listing": "%who\n%whos\n%precision 3\n%pprint",
}


@pytest.mark.parametrize("habit", sorted(HONEST_CELLS))
def test_honest_notebook_habits_are_never_flagged(habit):
    release_nb, answers = REPOSITORY.release_and_answers("01_two_keys")
    filled = P.fill(release_nb, answers)
    filled.cells.insert(1, nbformat.v4.new_code_cell(HONEST_CELLS[habit]))
    filled.cells.append(nbformat.v4.new_code_cell(HONEST_CELLS[habit]))
    assert scan_notebook(filled) == []


@pytest.mark.parametrize("code, fragment", [
    ("from IPython import get_ipython", "get_ipython"),
    ("import IPython\nIPython.get_ipython()", "imports IPython"),
    ("from IPython.display import display\nimport IPython.core.interactiveshell", "imports IPython.core.interactiveshell"),
    ("%load_ext my_extension", "%load_ext"),
    ("%load_ext autoreload my_extension", "%load_ext"),
    ("%xmode Verbose", "%xmode"),
    ("%debug", "%debug"),
])
def test_machinery_next_to_the_honest_habits_is_still_found(code, fragment):
    found = " ".join(scan_source(code))
    assert fragment in found, found


def test_a_module_alias_from_another_cell_is_followed():
    """``import inspect as ins`` in one cell, ``ins.stack()`` in the next: still a finding (kills
    the mutant that only knows the aliases of the cell being scanned)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import inspect as ins"),
                                         nbformat.v4.new_code_cell("frames = ins.stack()")])
    found = [reason for _, reason in scan_notebook(nb)]
    assert any("uses inspect.stack" in r for r in found), found


@pytest.mark.parametrize("added, rebound", [
    ("check_close = check_true = lambda *a, **k: None", {"check_close", "check_true"}),
    ("import types\nF = types.SimpleNamespace()", {"F"}),
    # no locked or test cell uses plot_attention after this cell (the plot below is the student's to edit)
    ("def plot_attention(*a):\n    pass", set()),
    ("def check_rows_sum_to_one(*a, **k):\n    pass", {"check_rows_sum_to_one"}),
    ("from numpy import allclose as check_shape", {"check_shape"}),
    # the same imports again, a name of the student's own, a local variable: nothing to see
    ("import numpy as np\nimport torch.nn.functional as F\nfrom course import check_close", set()),
    ("scores = np.ones(3)\ndef helper(F):\n    check_close = 1\n    return F", set()),
])
def test_a_name_of_the_locked_cells_rebound_is_found(added, rebound):
    """What the retired in-kernel guard alone used to flag (the attack shadowed-names): a student
    cell that rebinds a name the locked imports cell or a provided cell binds."""
    release, answers = REPOSITORY.release_and_answers("01_two_keys")
    nb = P.fill(release, {**answers, "attention": answers["attention"] + "\n" + added})
    found = " ".join(reason for _, reason in scan_notebook(nb, "01_two_keys"))
    assert {name for name in ("check_close", "check_true", "F", "plot_attention", "check_shape", "check_rows_sum_to_one")
            if f"rebinds {name}," in found} == rebound, found


FUTURE_MASK_COPY = '''
def future_mask(n):
    """My own copy, to read it."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
'''


@pytest.mark.parametrize("added, rebound", [
    (FUTURE_MASK_COPY, set()),  # an identical copy of the provided helper (docstring aside)
    ("def show(t):\n    print(tuple(t.shape))", set()),  # a debugging helper; the locked cell binds show again later
    (FUTURE_MASK_COPY.replace("diagonal=1", "diagonal=0"), {"future_mask"}),  # a copy that changes what it does
])
def test_a_rebinding_that_changes_nothing_the_instructors_code_does_is_not_flagged(added, rebound):
    """Issue 43 item 6: chapter 09's honest helpers beside the decoder block are not flagged."""
    release, answers = REPOSITORY.release_and_answers("09_decoder")
    nb = P.fill(release, {**answers, "decoder_block": answers["decoder_block"] + "\n" + added})
    found = " ".join(reason for _, reason in scan_notebook(nb))
    assert {name for name in ("future_mask", "show") if f"rebinds {name}," in found} == rebound, found


# ---------------------------------------------------------------- library entry points doing an exercise's work


def test_every_exercise_of_the_substitutes_table_exists():
    """Each name of instructor.substitutes is defined by its assignment's solution (a renamed
    exercise would silently go unchecked), and each public entry point exists in the library
    installed (a misspelt one would never match)."""
    import ast
    import importlib

    for assignment, exercises in SUBSTITUTES.items():
        assert assignment in REPOSITORY.assignments(), assignment
        _, answers = REPOSITORY.release_and_answers(assignment)
        defined = {node.name for answer in answers.values() for node in ast.parse(answer).body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert set(exercises) <= defined, (assignment, set(exercises) - defined)
        for entry in {e for entries in exercises.values() for e in entries}:
            parts = entry.split(".")
            if any(part.startswith("_") for part in parts):
                continue  # torch's private kernels come and go between versions
            try:
                obj = importlib.import_module(parts[0])
            except ImportError:
                continue  # scipy, fvcore: not installed here
            for part in parts[1:]:
                obj = getattr(obj, part, None) or importlib.import_module(f"{obj.__name__}.{part}")
            assert callable(obj), entry


OUT_06 = "out = self.proj(merge_heads(weights @ v))"
FFN_09 = "self.ffn = FeedForward(width, hidden)"
MASK_09 = "torch.triu(torch.ones(dec_in.size(1), dec_in.size(1), dtype=torch.bool), diagonal=1)"
SDPA = "torch.nn.functional.scaled_dot_product_attention"
DECODER_LAYER = "torch.nn.TransformerDecoderLayer"


def _sdpa_06(call):
    return ("06_multihead_attention", "mhsa", ((OUT_06, f"out = self.proj(merge_heads({call}))"),))


def _layer_09(expression):
    return ("09_decoder", "decoder_block", ((FFN_09, f"{FFN_09}\n        self._layer = [{expression}]"),))


def _answer(assignment, cell, edits, added=()):
    """The solution with ``edits`` in ``cell`` and the ``added`` cells (index, source) inserted."""
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    nb = P.fill(release_nb, {**answers, cell: apply_edits(answers[cell], edits)})
    for index, source in added:
        nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


@pytest.mark.parametrize("case, added, fragment", [
    (_sdpa_06("F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)"), (), f"calls {SDPA}"),
    (_sdpa_06("torch.nn.functional.scaled_dot_product_attention(q, k, v)"), (), f"calls {SDPA}"),
    (("06_multihead_attention", "mhsa", ((OUT_06, "from torch.nn.functional import scaled_dot_product_attention as s\n"
                                                  "        out = self.proj(merge_heads(s(q, k, v)))"),)), (), f"imports {SDPA}"),
    (_sdpa_06("fn.scaled_dot_product_attention(q, k, v)"), ((1, "import torch.nn.functional as fn"),), f"calls {SDPA}"),
    (_sdpa_06("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]"), (),
     "calls torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"),
    (_sdpa_06("vars(F)['scaled_dot_product_attention'](q, k, v)"), (), f"uses {SDPA}"),
    (_sdpa_06("getattr(F, name)(q, k, v)"), (), "looks up an attribute of torch.nn.functional by a name computed at run time"),
    (("06_multihead_attention", "mhsa", ((OUT_06, "out, _ = F.multi_head_attention_forward(x, x, x, *self.args)"),)), (),
     "calls torch.nn.functional.multi_head_attention_forward"),
    # a helper or an alias in a cell of the student's own, used by the block
    (_sdpa_06("attend(q, k, v)"), ((3, "def attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)"),),
     f"calls {SDPA} (in attend, cell 3)"),
    (_sdpa_06("sdpa(q, k, v)"), ((3, "sdpa = F.scaled_dot_product_attention"),), f"calls {SDPA}"),
    (_layer_09("nn.TransformerDecoderLayer(width, heads, hidden, dropout=0.0, batch_first=True)"), (), f"calls {DECODER_LAYER}"),
    (_layer_09("torch.nn.TransformerDecoderLayer(width, heads, hidden)"), (), f"calls {DECODER_LAYER}"),
    (_layer_09('getattr(nn, "Transformer" + "DecoderLayer")(width, heads, hidden)'), (), f"uses {DECODER_LAYER}"),
    (_layer_09('sys.modules["torch.nn"].TransformerDecoderLayer(width, heads, hidden)'), ((1, "import sys"),),
     f"calls {DECODER_LAYER}"),
    (_layer_09("Layer(width, heads, hidden)"), ((1, "from torch.nn import *\nLayer = TransformerDecoderLayer"),),
     f"uses {DECODER_LAYER} (in Layer, cell 1)"),
    (("09_decoder", "encoder_decoder", (("x, all_weights = self.embed(dec_in), []",
                                         "x, all_weights = nn.TransformerDecoder(self.layer, 2)(self.embed(dec_in), memory), []"),)),
     (), "EncoderDecoder calls torch.nn.TransformerDecoder,"),
    (("04_encoder_block", "encoder_block", ((FFN_09, f"{FFN_09}\n        self.layer = nn.TransformerEncoderLayer(width, heads, hidden)"),)),
     (), "EncoderBlock calls torch.nn.TransformerEncoderLayer"),
    (("04_encoder_block", "mha_parameter_count", (("return 4 * d * d + 4 * d",
                                                   "return sum(p.numel() for p in nn.MultiheadAttention(d, 1).parameters())"),)),
     (), "mha_parameter_count calls torch.nn.MultiheadAttention"),
    (("01_two_keys", "softmax", (("exps = np.exp(shifted)\n    return exps / exps.sum(axis=axis, keepdims=True)",
                                  "return torch.from_numpy(shifted).softmax(axis).numpy()"),)),
     (), "softmax calls .softmax (torch.Tensor.softmax)"),
    (("01_two_keys", "attention", (("output = weights @ V", "output = F.scaled_dot_product_attention(*map(torch.as_tensor, (Q, K, V)))"),)),
     (), f"attention calls {SDPA}"),
    (("02_scaling", "softmax_jacobian", (("return diagonal - outer",
                                          "return torch.func.jacrev(lambda s: s.softmax(-1))(torch.as_tensor(p).log())"),)),
     (), "softmax_jacobian calls torch.func.jacrev"),
    (("03_masks", "masked_attention", (("return weights @ v, weights",
                                        "return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), weights"),)),
     (), f"masked_attention calls {SDPA}"),
])
def test_a_library_substitute_is_found_with_its_name(case, added, fragment):
    """A correct answer that lets the library do the exercise's work, in each usual spelling: one
    finding in the exercise's cell, naming the exercise and the entry point."""
    assignment, cell, edits = case
    nb = _answer(assignment, cell, edits, added)
    found = scan_notebook(nb, substitutes_for(assignment), HELPER_ATTRIBUTES)
    assert len(found) == 1 and fragment in found[0][1], found
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == cell)
    assert found[0][0] == index and found[0][1].startswith(f"cell {index} ({cell}): ")
    assert found[0][1].endswith("(review: correct, but is it the student's?)")
    assert scan_notebook(nb) == [], "without the grader's assignment the scan knows no exercise"


@pytest.mark.parametrize("call, added", [
    # issue 43 item 6 (sec-kernel): scan evasions, each a binding the scan must follow
    ("_f(q, k, v)", "for _f in [F.scaled_dot_product_attention]:\n    pass"),  # a for target
    ("_f(q, k, v)", "(_f := F.scaled_dot_product_attention)"),  # walrus
    ("_f(q, k, v)", "import contextlib\nwith contextlib.nullcontext(F.scaled_dot_product_attention) as _f:\n    pass"),
    ("_fs[0](q, k, v)", "_fs = []\n_fs.append(F.scaled_dot_product_attention)"),  # a list changed in place
    ("_fs['a'](q, k, v)", "_fs = {}\n_fs['a'] = F.scaled_dot_product_attention"),  # a dict item
    ("_f(q, k, v)", "globals()['_' + 'f'] = F.scaled_dot_product_attention"),  # globals(), a name built from strings
    ("_f(q, k, v)", "globals().update(_f=F.scaled_dot_product_attention)"),
    ("_f(q, k, v)", "import sys\nsetattr(sys.modules[__name__], '_f', F.scaled_dot_product_attention)"),
    ("_f(q, k, v)", "_f = getattr(F, 'scaled_dot_' + 'product_attention')"),
    ("_f(q, k, v)", "_f = [g for g in (F.scaled_dot_product_attention,)][0]"),  # a comprehension
    ("q @ k", "for MultiHeadSelfAttention in [nn.MultiheadAttention]:\n    pass"),  # the exercise's own name
])
def test_a_substitute_bound_any_way_is_found(call, added):
    """for and with targets, :=, comprehensions, containers changed in place, globals() and setattr
    writes, names spelled from strings: the scan follows each to the library's entry point."""
    assignment, cell, edits = _sdpa_06(call)
    nb = _answer(assignment, cell, edits, ((3, added),))
    found = " | ".join(reason for _, reason in scan_notebook(nb, substitutes_for(assignment), HELPER_ATTRIBUTES))
    entry = "torch.nn.MultiheadAttention" if "MultiHeadSelfAttention in" in added else SDPA
    assert entry in found and "review: correct, but is it the student's?" in found, found


def test_a_substitute_outside_the_solution_cell_is_found():
    """The exercise is what the tests call: a block defined in a cell of the student's own (the
    solution cell left as the stub, or its grader metadata removed) is read all the same."""
    release_nb, answers = REPOSITORY.release_and_answers("06_multihead_attention")
    nb = P.fill(release_nb, {g: a for g, a in answers.items() if g != "mhsa"})
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "mhsa")
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell("class MultiHeadSelfAttention(nn.MultiheadAttention):\n    pass"))
    del nb.cells[index].metadata["nbgrader"]
    found = [reason for _, reason in scan_notebook(nb, substitutes_for("06_multihead_attention"), HELPER_ATTRIBUTES)]
    assert found == [f"cell {index + 1} (a cell the student can edit): MultiHeadSelfAttention uses torch.nn.MultiheadAttention, "
                     "which does this exercise's work (review: correct, but is it the student's?)"], found


@pytest.mark.parametrize("case, added", [
    # a cell of the student's own that compares their block with torch's: checking, not handing in
    (("06_multihead_attention", "mhsa", ()), ((3, "reference = nn.MultiheadAttention(8, 2, batch_first=True)\n"
                                                 "out = F.scaled_dot_product_attention(q, k, v)"),)),
    # a local variable named like the student's alias of the library is the local variable
    (("06_multihead_attention", "mhsa", ()), ((3, "out = F.scaled_dot_product_attention"),)),
    (("06_multihead_attention", "mhsa", (("B, T, D = x.shape", "B, T, D = x.shape\n        assert not isinstance(self, nn.MultiheadAttention)"),)), ()),
    # nn.Transformer's mask builder is no decoder stack; 09's blocks are built on nn.MultiheadAttention
    (("09_decoder", "encoder_decoder", ((MASK_09, "nn.Transformer.generate_square_subsequent_mask(dec_in.size(1))"),)), ()),
    (("09_decoder", "decoder_block", ()), ()),
    # chapter 07's model is an nn.Transformer by the text; chapter 08's KV cache calls SDPA by the text
    (("07_seq2seq_beam_search", "reversal_transformer", ()), ()),
    (("08_attention_cost", "cached_attention_step", ()), ()),
])
def test_a_library_entry_point_the_text_allows_is_not_a_finding(case, added):
    assignment, cell, edits = case
    assert scan_notebook(_answer(assignment, cell, edits, added), substitutes_for(assignment), HELPER_ATTRIBUTES) == []


# ---------------------------------------------------------------- issue 50 item 2: review by allow-list


def allow_list_findings(nb, assignment):
    return allowed_call_findings(nb, allowed_calls_for(assignment), substitutes=substitutes_for(assignment),
                                 helper_attributes=HELPER_ATTRIBUTES)


@pytest.mark.parametrize("assignment", REPOSITORY.assignments())
def test_honest_work_calls_nothing_its_exercise_does_not_allow(assignment):
    """The solution, every bug-zoo variant (wrong, but the student's own) and every alternative make only
    calls their exercises' texts permit, their own helpers' included: the allow-list flags none of them."""
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    flagged = {v.name if v else "solution": found for v in [None, *variants_for(assignment), *alternatives_for(assignment)]
               if (found := allow_list_findings(P.fill(release_nb, answers if v is None else v.answers(answers)),
                                                assignment))}
    assert not flagged, flagged
    assert scan_notebook(P.fill(release_nb, answers), substitutes_for(assignment), HELPER_ATTRIBUTES,
                         allowed=allowed_calls_for(assignment)) == []


def test_the_allow_list_names_what_the_solutions_define_and_what_the_libraries_hold():
    for assignment, exercises in ALLOWED_CALLS.items():
        _, answers = REPOSITORY.release_and_answers(assignment)
        solution = "\n".join(answers.values())
        for exercise, entries in exercises.items():
            assert f"def {exercise}(" in solution or f"class {exercise}(" in solution, (assignment, exercise)
            missing = [e for e in entries if "." in e[1:] and _library_object(e) is _MISSING]
            assert not missing, (assignment, exercise, missing)
            assert not any(e.startswith(("nboracle", "course")) for e in entries)


# the library routes of issue 50: correct answers (or nearly) through a library the exercise's text does not
# permit; each is flagged with the line of its call, whichever library it comes from
SOFTMIN = '''def softmax(scores, axis=-1):
    scores = torch.as_tensor(np.asarray(scores, dtype=float))
    return torch.nn.functional.softmin(-scores, dim=axis).numpy()
'''
CATEGORICAL = '''from torch.distributions import Categorical

def softmax(scores, axis=-1):
    scores = torch.as_tensor(np.asarray(scores, dtype=float)).movedim(axis, -1)
    return Categorical(logits=scores).probs.movedim(-1, axis).numpy()
'''
_JACOBIAN = '''def softmax_jacobian(p):
    z = torch.log(torch.as_tensor(np.asarray(p, dtype=float)))
    ROUTE
    return J.numpy()
'''
FORWARD_AD = '''import torch.autograd.forward_ad as fwAD

def softmax_jacobian(p):
    z = torch.log(torch.as_tensor(np.asarray(p, dtype=float)))
    columns = []
    for i in range(z.shape[-1]):
        with fwAD.dual_level():
            dual = fwAD.make_dual(z, torch.nn.functional.one_hot(torch.tensor(i), z.shape[-1]).to(z).expand_as(z))
            columns.append(fwAD.unpack_dual(torch.softmax(dual, -1)).tangent)
    return torch.stack(columns, -1).numpy()
'''
GRADER_PACKAGE = '''import nboracle

def softmax_jacobian(p):
    z = torch.log(torch.as_tensor(np.asarray(p, dtype=float)))
    rows = [nboracle.input_gradients(lambda t: torch.softmax(t, -1), (z,), torch.eye(z.shape[-1])[i])[0]
            for i in range(z.shape[-1])]
    return torch.stack(rows, -2).numpy()
'''
HELPER_ELSEWHERE = '''def _normalised(e):
    return torch.nn.functional.softmin(-torch.as_tensor(e), dim=-1).numpy()

def softmax(scores, axis=-1):
    return _normalised(np.asarray(scores, dtype=float))
'''


@pytest.mark.parametrize("assignment, cell, code, call, line", [
    ("01_two_keys", "softmax", SOFTMIN, "torch.nn.functional.softmin", 3),
    ("01_two_keys", "softmax", CATEGORICAL, "torch.distributions.Categorical", 5),
    ("01_two_keys", "softmax", HELPER_ELSEWHERE, "torch.nn.functional.softmin", 2),
    ("02_scaling", "softmax_jacobian", FORWARD_AD, "torch.autograd.forward_ad.dual_level", 7),
    ("02_scaling", "softmax_jacobian", FORWARD_AD, "torch.autograd.forward_ad.make_dual", 8),
    ("02_scaling", "softmax_jacobian", FORWARD_AD, "torch.autograd.forward_ad.unpack_dual", 9),
    ("02_scaling", "softmax_jacobian", FORWARD_AD, "torch.softmax", 9),
    ("02_scaling", "softmax_jacobian", GRADER_PACKAGE, "nboracle.input_gradients", 5),
    ("02_scaling", "softmax_jacobian", _JACOBIAN.replace("ROUTE", "J = torch.autograd.functional.jacobian("
                                                          "lambda t: torch.softmax(t, -1), z)"),
     "torch.autograd.functional.jacobian", 3),
    ("02_scaling", "softmax_jacobian", _JACOBIAN.replace("ROUTE", "J = torch.func.jacrev(lambda t: t.softmax(-1))(z)"),
     "torch.func.jacrev", 3),
    ("02_scaling", "softmax_jacobian", _JACOBIAN.replace("ROUTE", "J = torch.func.jvp(torch.exp, (z,), (z,))[1]"),
     "torch.func.jvp", 3),
])
def test_a_library_route_is_flagged_with_its_line(assignment, cell, code, call, line):
    """Where the exercise is to write the computation by hand, a call its text does not permit is flagged with
    its line, from the allow-list (softmin, Categorical, forward-mode AD, the grader's package) or, for an entry
    point the table of substitutes names (jacobian, jacrev, jvp), from the deny-list as before."""
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    nb = P.fill(release_nb, {**answers, cell: code})
    index = next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell)
    reasons = [reason for _, reason in scan_notebook(nb, substitutes_for(assignment), HELPER_ATTRIBUTES,
                                                     allowed=allowed_calls_for(assignment))]
    if call.startswith(".") or not any(call.endswith(e.rsplit(".", 1)[-1]) for e in substitutes_for(assignment).get(cell, ())):
        assert any(reason.startswith(f"cell {index} ({cell}): line {line}: ") and call in reason
                   and "is it the student's work?" in reason for reason in reasons), reasons
    else:
        assert any(f"cell {index} ({cell})" in reason and call.rsplit(".", 1)[-1] in reason for reason in reasons), reasons


def test_own_helpers_and_arguments_are_allowed_and_read_under_the_exercise():
    """A student's helper (in any cell) is no finding for being called, and its own calls are read under the
    exercise that reaches it; calling an argument (a function handed in) is no finding either."""
    release_nb, answers = REPOSITORY.release_and_answers("01_two_keys")
    honest = '''def _shifted(x, axis):
    return x - x.max(axis=axis, keepdims=True)

def softmax(scores, axis=-1, exp=np.exp):
    e = exp(_shifted(np.asarray(scores, dtype=float), axis))
    return e / e.sum(axis=axis, keepdims=True)
'''
    assert allow_list_findings(P.fill(release_nb, {**answers, "softmax": honest}), "01_two_keys") == []
    handed = '''fns = [torch.nn.functional.softmin]

def softmax(scores, axis=-1):
    return fns[0](-torch.as_tensor(np.asarray(scores, dtype=float)), axis).numpy()
'''
    found = allow_list_findings(P.fill(release_nb, {**answers, "softmax": handed}), "01_two_keys")
    assert any("line 1: softmax uses torch.nn.functional.softmin (in fns)" in reason for _, reason in found), found


@pytest.mark.parametrize("assignment", REPOSITORY.assignments())
def test_a_library_answer_gets_one_reason_with_the_allow_list_on(assignment):
    """A definition the table of substitutes already flags is under review as a whole: the allow-list adds no
    second reason for the calls around the library's (chapter 09's hook beside nn.TransformerDecoderLayer)."""
    release_nb, answers = REPOSITORY.release_and_answers(assignment)
    for lib in library_for(assignment):
        reasons = [r for _, r in scan_notebook(P.fill(release_nb, lib.answers(answers)), substitutes_for(assignment),
                                                HELPER_ATTRIBUTES, allowed=allowed_calls_for(assignment))]
        assert len(reasons) == 1 and lib.flagged in reasons[0], (lib.name, reasons)
